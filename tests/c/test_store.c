/* The evidence store and the audit log: exact round trips, paging, refs by id and by path,
 * refusal of anything outside the session's folder, hostile ids, written-once files,
 * permissions, I/O failures that leave nothing behind, search, and the audit log. */
#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tree.h"

#include "../../csrc/src/store.h"

static char root[PATH_MAX]; /* the test's own temporary folder */

/* root + "/" + rel, in a static buffer (one at a time). */
static const char *at(const char *rel) {
    static char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    return path;
}

/* Regular files anywhere under `dir`; *outside counts those whose folder is not `only`. */
static int count_files(const char *dir, const char *only, int *outside) {
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char child[PATH_MAX];
        snprintf(child, sizeof child, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(child, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            n += count_files(child, only, outside);
        } else {
            n++;
            char real_dir[PATH_MAX], real_only[PATH_MAX];
            if (!realpath(dir, real_dir) || !realpath(only, real_only) ||
                strcmp(real_dir, real_only) != 0)
                ++*outside;
        }
    }
    if (d) closedir(d);
    return n;
}

/* Whether a directory entry is named like evidence (and so not "." or ".."). */
static int store_name_ok(const char *name) {
    size_t n = strlen(name);
    return n > 4 && name[0] != '.' && strcmp(name + n - 4, ".txt") == 0;
}

static int put(ck__store *s, const char *id, size_t id_len, const char *data, size_t len) {
    int existed = -1;
    ck_error err;
    int rc = ck__store_put(s, id, id_len, data, len, &existed, &err);
    return rc ? rc : existed;
}

/* Reads lines [offset, offset + limit) of `ref` and compares with `want` (length `want_len`). */
static void read_is(ck__store *s, const char *ref, size_t ref_len, size_t offset,
                    size_t limit, const char *want, size_t want_len) {
    char *out = NULL;
    size_t len = 12345;
    ck_error err;
    INT_EQ(ck__store_read(s, ref, ref_len, offset, limit, &out, &len, &err), CK_OK);
    OK(out != NULL);
    INT_EQ(len, want_len);
    int same = out && len == want_len && memcmp(out, want, len) == 0 && out[len] == '\0';
    OK(same);
    if (!same) fprintf(stderr, "    ref %.*s, lines %zu + %zu\n", (int)ref_len, ref, offset, limit);
    ck_free(out);
}

static void read_fails(ck__store *s, const char *ref, size_t ref_len, int code) {
    char *out = (char *)1;
    size_t len = 0;
    ck_error err;
    INT_EQ(ck__store_read(s, ref, ref_len, 0, SIZE_MAX, &out, &len, &err), code);
    OK(out == NULL);
    INT_EQ(err.code, code);
    OK(ref_len == 0 || err.where[0] != '\0');
}

static char *search_ok(ck__store *s, const char *ref, const char *pattern, size_t max_hits) {
    char *out = NULL;
    size_t len = 0;
    ck_error err;
    int rc = ck__store_search(s, ref, ref ? strlen(ref) : 0, pattern, max_hits, NULL, 0, &out,
                              &len, &err);
    INT_EQ(rc, CK_OK);
    if (out) {
        cJSON *doc = cJSON_ParseWithLength(out, len);
        OK(doc != NULL && cJSON_IsArray(doc));
        cJSON_Delete(doc);
        OK(strlen(out) == len);
    }
    return out;
}

TEST(encode_id) {
    struct {
        const char *id;
        size_t len;
        const char *want;
    } cases[] = {
        {"call_Ab-1.x", 11, "call_Ab-1.x"},
        {"a/b", 3, "a_b~c14cddc033f64b9d"},
        {"../../x", 7, "_._.._x~9cdf6a50100a862e"},
        {"", 0, "~e3b0c44298fc1c14"},
        {".", 1, "_~cdb4ee2aea69cc6a"},
        {"a\0b", 3, "a_b~59b271ae1bbcb1d3"},
        {"abc def", 7, "abc_def~010971ea0013a09d"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = ck__store_encode_id(cases[i].id, cases[i].len);
        STR_EQ(got, cases[i].want);
        ck_free(got);
    }
    char long_id[101];
    memset(long_id, 'a', sizeof long_id);
    char *got = ck__store_encode_id(long_id, 100);
    OK(got && strlen(got) == 100 && !strchr(got, '~'));
    ck_free(got);
    got = ck__store_encode_id(long_id, 101);
    OK(got && strlen(got) == 40 + 17 && got[40] == '~');
    ck_free(got);
    got = ck__store_encode_id("..", 2);
    OK(got && got[0] != '.' && strchr(got, '~'));
    ck_free(got);
}

TEST(round_trip_and_paging) {
    ck__store *s = ck__store_new(at("rt"), "sess-1", NULL);
    OK(s != NULL);
    static const char data[] = "line0\r\nli\0ne1\n\nline3 \xff\xfe no newline";
    size_t len = sizeof data - 1;
    INT_EQ(put(s, "call_1", 6, data, len), 0);
    read_is(s, "call_1", 6, 0, SIZE_MAX, data, len);
    read_is(s, "call_1", 6, 0, 1, "line0\r\n", 7);
    read_is(s, "call_1", 6, 1, 1, "li\0ne1\n", 7);
    read_is(s, "call_1", 6, 1, 2, "li\0ne1\n\n", 8);
    read_is(s, "call_1", 6, 3, 5, "line3 \xff\xfe no newline", 19);
    read_is(s, "call_1", 6, 4, 1, "", 0);
    read_is(s, "call_1", 6, SIZE_MAX, SIZE_MAX, "", 0);
    read_is(s, "call_1", 6, 2, SIZE_MAX, "\nline3 \xff\xfe no newline", 20);
    read_is(s, "call_1", 6, 0, 0, "", 0);

    INT_EQ(put(s, "empty", 5, "", 0), 0);
    read_is(s, "empty", 5, 0, SIZE_MAX, "", 0);
    read_is(s, "empty", 5, 3, 2, "", 0);

    /* A file larger than one read chunk, with lines that straddle the chunk boundaries. */
    size_t big_len = 200000;
    char *big = malloc(big_len);
    for (size_t i = 0; i < big_len; i++) big[i] = (i % 997 == 996) ? '\n' : (char)('a' + i % 26);
    INT_EQ(put(s, "big", 3, big, big_len), 0);
    read_is(s, "big", 3, 0, SIZE_MAX, big, big_len);
    read_is(s, "big", 3, 20, 3, big + 20 * 997, 3 * 997);
    read_is(s, "big", 3, 200, 10, big + 200 * 997, big_len - 200 * 997);
    free(big);

    /* Written once: a second put under the same id changes nothing. */
    INT_EQ(put(s, "call_1", 6, "other", 5), 1);
    read_is(s, "call_1", 6, 0, SIZE_MAX, data, len);
    int existed = 7;
    INT_EQ(ck__store_put(s, "call_1", 6, "x", 1, &existed, NULL), CK_OK);
    INT_EQ(existed, 1);
    ck__store_free(s);
}

TEST(refs_by_path) {
    ck__store *s = ck__store_new(at("refs/"), "sess", NULL);
    ck__store *other = ck__store_new(at("refs"), "sess2", NULL);
    INT_EQ(put(s, "id-1", 4, "one\n", 4), 0);
    INT_EQ(put(s, "a/b", 3, "hashed\n", 7), 0);
    INT_EQ(put(other, "id-1", 4, "not yours\n", 10), 0);

    char *path = ck__store_path(s, "id-1", 4);
    STR_EQ(path, at("refs/tool_results/sess/id-1.txt"));
    read_is(s, path, strlen(path), 0, SIZE_MAX, "one\n", 4);
    ck_free(path);
    path = ck__store_path(s, "a/b", 3);
    read_is(s, path, strlen(path), 0, SIZE_MAX, "hashed\n", 7);
    ck_free(path);
    /* The forms a placeholder may take after path normalization still resolve. */
    const char *alt = at("refs//tool_results/sess2/../sess/id-1.txt");
    read_is(s, alt, strlen(alt), 0, SIZE_MAX, "one\n", 4);
    read_is(s, "a_b~c14cddc033f64b9d.txt", 24, 0, SIZE_MAX, "hashed\n", 7);

    /* Anything outside this session's folder is refused. */
    char *theirs = ck__store_path(other, "id-1", 4);
    read_fails(s, theirs, strlen(theirs), CK_EINVAL);
    ck_free(theirs);
    const char *refused[] = {
        "refs/tool_results/sess/../sess2/id-1.txt", "refs/tool_results/sess/../../x.txt",
        "refs/tool_results/sess/.hidden.txt",       "refs/tool_results/sess/id-1",
        "refs/tool_results/sess",                   "refs/tool_results/sess/nothing.txt",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *p = at(refused[i]);
        read_fails(s, p, strlen(p), CK_EINVAL);
    }
    read_fails(s, "/etc/passwd", 11, CK_EINVAL);
    read_fails(s, "../../../../etc/passwd", 22, CK_EINVAL);
    read_fails(s, "nothing", 7, CK_EINVAL);
    read_fails(s, "", 0, CK_EINVAL);
    ck_error err;
    char *out = NULL;
    INT_EQ(ck__store_read(s, "nothing", 7, 0, 1, &out, NULL, &err), CK_EINVAL);
    STR_EQ(err.where, "nothing");

    /* A FIFO planted in the folder is not opened for real: refused on read, skipped by the
     * session-wide search. A symbolic link is refused as an I/O error (see symlinks). */
    OK(mkfifo(at("refs/tool_results/sess/fifo.txt"), 0600) == 0);
    read_fails(s, "fifo", 4, CK_EINVAL);
    char *hits = search_ok(s, NULL, "hashed", 10);
    STR_EQ(hits, "[{\"ref\":\"a_b~c14cddc033f64b9d.txt\",\"line\":0,\"text\":\"hashed\"}]");
    ck_free(hits);
    char secret[PATH_MAX];
    snprintf(secret, sizeof secret, "%s", at("secret"));
    FILE *f = fopen(secret, "w");
    fputs("secret\n", f);
    fclose(f);
    OK(symlink(secret, at("refs/tool_results/sess/evil.txt")) == 0);
    read_fails(s, "evil", 4, CK_EIO);
    const char *evil = at("refs/tool_results/sess/evil.txt");
    read_fails(s, evil, strlen(evil), CK_EIO);
    INT_EQ(put(s, "evil", 4, "x", 1), CK_EIO);
    size_t n = 0;
    char *still = h_read_file(secret, &n);
    OK(still && n == 7);
    free(still);
    ck__store_free(other);
    ck__store_free(s);
}

TEST(hostile_ids) {
    static char huge[10240];
    memset(huge, '/', sizeof huge);
    memcpy(huge, "../", 3);
    struct {
        const char *id;
        size_t len;
    } ids[] = {
        {"../../x", 7}, {"a/b", 3},   {"a?b", 3},     {"a_b", 3},     {"A/b", 3},
        {"a\0b", 3},    {"a\0c", 3},  {"a", 1},       {"A", 1},       {"\x01\x02\n", 3},
        {huge, 10240},  {huge, 10239}, {".", 1},      {"..", 2},      {"", 0},
        {"~", 1},       {"x~0123456789abcdef", 18},   {"a_b~c14cddc033f64b9d", 20},
        {"/etc/passwd", 11}, {"a.txt", 5}, {"\xff\xfe", 2}, {"call_ABC", 8}, {"call_abc", 8},
    };
    size_t n = sizeof ids / sizeof ids[0];
    ck__store *s = ck__store_new(at("hostile"), "../../escape/session", NULL);
    for (size_t i = 0; i < n; i++) {
        char data[32];
        int len = snprintf(data, sizeof data, "data %zu\n", i);
        INT_EQ(put(s, ids[i].id, ids[i].len, data, (size_t)len), 0);
        char *path = ck__store_path(s, ids[i].id, ids[i].len);
        OK(path && strlen(path) < 300);
        ck_free(path);
    }
    for (size_t i = 0; i < n; i++) {
        char data[32];
        int len = snprintf(data, sizeof data, "data %zu\n", i);
        read_is(s, ids[i].id, ids[i].len, 0, SIZE_MAX, data, (size_t)len);
    }
    /* Every file sits in the one session folder, one per id: none escaped, none collided. */
    char *first = ck__store_path(s, "a", 1);
    *strrchr(first, '/') = '\0';
    OK(strncmp(first, at("hostile/tool_results/"), strlen(at("hostile/tool_results/"))) == 0);
    OK(strchr(first + strlen(at("hostile/tool_results/")), '/') == NULL);
    int outside = 0;
    INT_EQ(count_files(at("hostile"), first, &outside), n);
    INT_EQ(outside, 0);
    ck_free(first);
    OK(access(at("escape"), F_OK) != 0);
    ck__store_free(s);
}

TEST(permissions_and_layout) {
    mode_t old = umask(022);
    ck__store *s = ck__store_new(at("perm/deeper/store"), "s", NULL);
    INT_EQ(put(s, "x", 1, "data", 4), 0);
    INT_EQ(ck__store_append_record(s, 0, "{}", 2, NULL), CK_OK);
    const char *dirs[] = {"perm", "perm/deeper", "perm/deeper/store",
                          "perm/deeper/store/tool_results", "perm/deeper/store/tool_results/s",
                          "perm/deeper/store/compactions"};
    struct stat st;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        OK(stat(at(dirs[i]), &st) == 0 && S_ISDIR(st.st_mode));
        INT_EQ(st.st_mode & 07777, 0700);
    }
    OK(stat(at("perm/deeper/store/tool_results/s/x.txt"), &st) == 0);
    INT_EQ(st.st_mode & 07777, 0600);
    OK(stat(at("perm/deeper/store/compactions/s.jsonl"), &st) == 0);
    INT_EQ(st.st_mode & 07777, 0600);
    char *log = ck__store_log_path(s);
    STR_EQ(log, at("perm/deeper/store/compactions/s.jsonl"));
    ck_free(log);
    ck__store_free(s);
    umask(old);
}

/* Folders are made when a file cannot be made without them: again after they were removed,
 * and a failure to make one names that folder, with the path given back whole. */
TEST(folders_made_when_needed) {
    ck__store *s = ck__store_new(at("remade/store"), "s", NULL);
    INT_EQ(put(s, "a", 1, "one", 3), 0);
    INT_EQ(ck__store_append_record(s, 0, "{}", 2, NULL), CK_OK);
    h_remove_tree(at("remade"));
    INT_EQ(put(s, "b", 1, "two", 3), 0);
    INT_EQ(ck__store_append_record(s, 0, "{}", 2, NULL), CK_OK);
    struct stat st;
    OK(stat(at("remade/store/tool_results/s/b.txt"), &st) == 0);
    OK(stat(at("remade/store/compactions/s.jsonl"), &st) == 0);
    /* Removing only the session's folder works too. */
    h_remove_tree(at("remade/store/tool_results/s"));
    INT_EQ(put(s, "c", 1, "three", 5), 0);
    ck__store_free(s);

    FILE *f = fopen(at("way"), "w");
    fclose(f);
    s = ck__store_new(at("way/deep/store"), "s", NULL);
    ck_error err;
    INT_EQ(ck__store_put(s, "id", 2, "x", 1, NULL, &err), CK_EIO);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s", at("way/deep/store/tool_results/s"));
    STR_EQ(err.where, want);
    INT_EQ(ck__store_append_record(s, 0, "{}", 2, &err), CK_EIO);
    STR_EQ(err.where, at("way/deep/store/compactions"));
    /* The paths were cut and restored while the folders were tried: later calls see them whole. */
    char *path = ck__store_path(s, "id", 2);
    STR_EQ(path, at("way/deep/store/tool_results/s/id.txt"));
    ck_free(path);
    INT_EQ(ck__store_put(s, "id", 2, "x", 1, NULL, &err), CK_EIO);
    STR_EQ(err.where, want);
    ck__store_free(s);
}

/* Entries anywhere under `dir` (links not followed). */
static int count_entries(const char *dir) {
    int outside = 0;
    return count_files(dir, dir, &outside);
}

/* Every operation of a store over `dir` ("sym/<case>") refuses with CK_EIO and `where`, and
 * writes nothing into the folder `target` the planted link points at. */
static void all_refused(const char *dir, const char *target, const char *evidence_where,
                        const char *log_where) {
    ck__store *s = ck__store_new(dir, "sess", NULL);
    ck_error err;
    int existed = 7;
    char *out = (char *)1;
    size_t len = 0;
    if (evidence_where) {
        INT_EQ(ck__store_put(s, "id", 2, "data\n", 5, &existed, &err), CK_EIO);
        STR_EQ(err.where, evidence_where);
        OK(err.msg && strstr(err.msg, "symbolic link"));
        INT_EQ(existed, 0);
        INT_EQ(ck__store_read(s, "id", 2, 0, 10, &out, &len, &err), CK_EIO);
        STR_EQ(err.where, evidence_where);
        OK(out == NULL);
        char *path = ck__store_path(s, "id", 2);
        INT_EQ(ck__store_read(s, path, strlen(path), 0, 10, &out, &len, &err), CK_EIO);
        ck_free(path);
        INT_EQ(ck__store_search(s, NULL, 0, "data", 10, NULL, 0, &out, &len, &err), CK_EIO);
        STR_EQ(err.where, evidence_where);
        INT_EQ(ck__store_search(s, "id", 2, "data", 10, NULL, 0, &out, &len, &err), CK_EIO);
    }
    if (log_where) {
        INT_EQ(ck__store_append_record(s, 0, "{\"r\":1}", 7, &err), CK_EIO);
        STR_EQ(err.where, log_where);
        INT_EQ(ck__store_last_record(s, &out, &len, &err), CK_EIO);
        STR_EQ(err.where, log_where);
        OK(out == NULL);
    }
    INT_EQ(count_entries(target), 0);
    ck__store_free(s);
}

/* A symbolic link planted anywhere below the store's folder is refused, never followed: the
 * writes that would land where it points fail instead (the compactor then keeps the output in
 * the view and records why). */
TEST(symlinks) {
    OK(mkdir(at("sym"), 0700) == 0 && mkdir(at("sym/outside"), 0700) == 0);
    char target[PATH_MAX + 64];
    snprintf(target, sizeof target, "%s/sym/outside", root);

    /* tool_results itself. */
    OK(mkdir(at("sym/a"), 0700) == 0 && symlink(target, at("sym/a/tool_results")) == 0);
    all_refused(at("sym/a"), target, "symlink refused: tool_results", NULL);
    /* The session's folder. */
    OK(mkdir(at("sym/b"), 0700) == 0 && mkdir(at("sym/b/tool_results"), 0700) == 0 &&
       symlink(target, at("sym/b/tool_results/sess")) == 0);
    all_refused(at("sym/b"), target, "symlink refused: tool_results/sess", NULL);
    /* A dangling link where the folder would be made is not made through either. */
    char nowhere[PATH_MAX + 96];
    snprintf(nowhere, sizeof nowhere, "%s/made-here", target);
    OK(mkdir(at("sym/c"), 0700) == 0 && mkdir(at("sym/c/tool_results"), 0700) == 0 &&
       symlink(nowhere, at("sym/c/tool_results/sess")) == 0);
    all_refused(at("sym/c"), target, "symlink refused: tool_results/sess", NULL);
    OK(access(nowhere, F_OK) != 0);
    /* compactions, and the log itself. */
    OK(mkdir(at("sym/d"), 0700) == 0 && symlink(target, at("sym/d/compactions")) == 0);
    all_refused(at("sym/d"), target, NULL, "symlink refused: compactions");
    char log_target[PATH_MAX + 96];
    snprintf(log_target, sizeof log_target, "%s/log.jsonl", target);
    OK(mkdir(at("sym/e"), 0700) == 0 && mkdir(at("sym/e/compactions"), 0700) == 0 &&
       symlink(log_target, at("sym/e/compactions/sess.jsonl")) == 0);
    all_refused(at("sym/e"), target, NULL, "symlink refused: compactions/sess.jsonl");
    OK(access(log_target, F_OK) != 0);
    /* An evidence file, dangling or not. */
    char file_target[PATH_MAX + 96];
    snprintf(file_target, sizeof file_target, "%s/stolen.txt", target);
    OK(mkdir(at("sym/f"), 0700) == 0 && mkdir(at("sym/f/tool_results"), 0700) == 0 &&
       mkdir(at("sym/f/tool_results/sess"), 0700) == 0 &&
       symlink(file_target, at("sym/f/tool_results/sess/id.txt")) == 0);
    all_refused(at("sym/f"), target, "symlink refused: tool_results/sess/id.txt", NULL);
    OK(access(file_target, F_OK) != 0);

    /* The store's own folder may be a link: the host's choice, followed when the store is
     * made. A link put in its place later is not followed. */
    char real_dir[PATH_MAX + 64];
    snprintf(real_dir, sizeof real_dir, "%s/sym/real", root);
    OK(mkdir(real_dir, 0700) == 0 && symlink(real_dir, at("sym/named")) == 0);
    ck__store *s = ck__store_new(at("sym/named"), "sess", NULL);
    INT_EQ(put(s, "id", 2, "kept\n", 5), 0);
    INT_EQ(ck__store_append_record(s, 0, "{}", 2, NULL), CK_OK);
    struct stat st;
    OK(stat(at("sym/real/tool_results/sess/id.txt"), &st) == 0);
    OK(stat(at("sym/real/compactions/sess.jsonl"), &st) == 0);
    char *path = ck__store_path(s, "id", 2);
    STR_EQ(path, at("sym/named/tool_results/sess/id.txt"));
    read_is(s, path, strlen(path), 0, 10, "kept\n", 5);
    ck_free(path);
    const char *real_path = at("sym/real/tool_results/sess/id.txt");
    read_is(s, real_path, strlen(real_path), 0, 10, "kept\n", 5);
    char moved[PATH_MAX + 64];
    snprintf(moved, sizeof moved, "%s/sym/moved", root);
    OK(rename(real_dir, moved) == 0 && symlink(target, real_dir) == 0);
    ck_error err;
    INT_EQ(ck__store_put(s, "id2", 3, "x", 1, NULL, &err), CK_EIO);
    OK(strncmp(err.where, "symlink refused: ", 17) == 0);
    INT_EQ(count_entries(target), 0);
    ck__store_free(s);

}

/* Temporary files of writes that were killed are removed the next time the session's folder
 * is opened; those of live writers stay, and nothing is ever taken for evidence. */
TEST(dead_temp_files) {
    fflush(stdout); /* the children must not print what this process has buffered */
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    ck__store *s = ck__store_new(at("tmps"), "s", NULL);
    INT_EQ(put(s, "first", 5, "x\n", 2), 0);
    ck__store_free(s);
    char name[PATH_MAX + 128];
    const char *planted[] = {"dead", "self", "parent", "odd"};
    for (int i = 0; i < 4; i++) {
        long pid = i == 0 ? (long)dead : i == 1 ? (long)getpid() : i == 2 ? (long)getppid() : 0;
        if (i < 3)
            snprintf(name, sizeof name, "%s/.tmp-%ld-3-00000000deadbeef", at("tmps/tool_results/s"),
                     pid);
        else
            snprintf(name, sizeof name, "%s/.tmp-x-3", at("tmps/tool_results/s"));
        FILE *f = fopen(name, "w");
        OK(f != NULL);
        if (f) {
            fprintf(f, "partial %s\n", planted[i]);
            fclose(f);
        }
    }
    INT_EQ(count_entries(at("tmps/tool_results/s")), 5);
    /* A read is enough: it opens the folder. */
    s = ck__store_new(at("tmps"), "s", NULL);
    read_is(s, "first", 5, 0, 1, "x\n", 2);
    snprintf(name, sizeof name, "%s/.tmp-%ld-3-00000000deadbeef", at("tmps/tool_results/s"),
             (long)dead);
    OK(access(name, F_OK) != 0);
    INT_EQ(count_entries(at("tmps/tool_results/s")), 4);
    char *hits = search_ok(s, NULL, "partial", 10);
    STR_EQ(hits, "[]");
    ck_free(hits);
    ck__store_free(s);

    /* Writers killed in the middle of writing: whatever they left is gone at the next open. */
    static char big[1 << 20];
    memset(big, 'k', sizeof big);
    int left = 0;
    for (int round = 0; round < 20; round++) {
        pid_t kid = fork();
        if (kid == 0) {
            ck__store *w = ck__store_new(at("killed"), "s", NULL);
            char id[32];
            for (int i = 0;; i++) {
                snprintf(id, sizeof id, "w%d-%d", round, i);
                ck__store_put(w, id, strlen(id), big, sizeof big, NULL, NULL);
            }
        }
        usleep(3000 + 500 * (useconds_t)round);
        kill(kid, SIGKILL);
        waitpid(kid, NULL, 0);
        /* Each writer's first put sweeps what the one before it left. */
        DIR *d = opendir(at("killed/tool_results/s"));
        struct dirent *e;
        int had = 0;
        while (d && (e = readdir(d))) had |= !strncmp(e->d_name, ".tmp-", 5);
        if (d) closedir(d);
        left += had;
    }
    printf("test_store: %d of 20 killed writers left a temporary file\n", left);
    s = ck__store_new(at("killed"), "s", NULL);
    INT_EQ(put(s, "after", 5, "y\n", 2), 0);
    int temps = 0, whole = 1;
    DIR *d = opendir(at("killed/tool_results/s"));
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strncmp(e->d_name, ".tmp-", 5)) temps++;
        if (!store_name_ok(e->d_name)) continue;
        char file[PATH_MAX + 300];
        snprintf(file, sizeof file, "%s/%s", at("killed/tool_results/s"), e->d_name);
        struct stat st;
        if (stat(file, &st) == 0 && strcmp(e->d_name, "after.txt") != 0)
            whole &= st.st_size == (off_t)sizeof big;
    }
    if (d) closedir(d);
    INT_EQ(temps, 0);
    OK(whole);
    ck__store_free(s);
}

/* A put into `dir` fails with CK_EIO and names a path; so does an append when `log_too`. */
static void put_fails(const char *dir, int log_too) {
    ck__store *s = ck__store_new(dir, "s", NULL);
    ck_error err;
    int existed = 5;
    INT_EQ(ck__store_put(s, "id", 2, "data\n", 5, &existed, &err), CK_EIO);
    INT_EQ(err.code, CK_EIO);
    OK(err.where[0] != '\0');
    INT_EQ(existed, 0);
    if (log_too) {
        INT_EQ(ck__store_append_record(s, 0, "{}", 2, &err), CK_EIO);
        OK(err.where[0] != '\0');
    }
    ck__store_free(s);
}

TEST(io_failures) {
    FILE *f = fopen(at("plainfile"), "w");
    fclose(f);
    put_fails(at("plainfile"), 1);
    put_fails(at("plainfile/store"), 1);
    put_fails("/proc/ck-store-test/store", 1);
    if (geteuid() != 0) {
        /* Root ignores permission bits, so this case only runs for other users. */
        OK(mkdir(at("ro"), 0500) == 0);
        put_fails(at("ro"), 1);
        int outside = 0;
        INT_EQ(count_files(at("ro"), at("ro"), &outside), 0);
    }
    /* A file where the session folder should be. */
    OK(mkdir(at("clash"), 0700) == 0 && mkdir(at("clash/tool_results"), 0700) == 0);
    f = fopen(at("clash/tool_results/s"), "w");
    fclose(f);
    put_fails(at("clash"), 0);

    /* A write that fails half way (the file-size limit stands in for a full disk, and binds
     * root too) leaves neither the evidence nor a temporary file. */
    ck__store *s = ck__store_new(at("full"), "s", NULL);
    INT_EQ(put(s, "small", 5, "ok\n", 3), 0);
    struct rlimit saved, tight;
    getrlimit(RLIMIT_FSIZE, &saved);
    tight = saved;
    tight.rlim_cur = 4096;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    OK(setrlimit(RLIMIT_FSIZE, &tight) == 0);
    static char big[100000];
    memset(big, 'z', sizeof big);
    ck_error err;
    INT_EQ(ck__store_put(s, "big", 3, big, sizeof big, NULL, &err), CK_EIO);
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);
    OK(strstr(err.where, "big.txt") != NULL);
    int outside = 0;
    INT_EQ(count_files(at("full"), at("full/tool_results/s"), &outside), 1);
    read_fails(s, "big", 3, CK_EINVAL);
    ck__store_free(s);

    /* The audit log being a folder is an I/O error, not a crash. */
    s = ck__store_new(at("logdir"), "s", NULL);
    OK(mkdir(at("logdir"), 0700) == 0 && mkdir(at("logdir/compactions"), 0700) == 0 &&
       mkdir(at("logdir/compactions/s.jsonl"), 0700) == 0);
    char *out = (char *)1;
    INT_EQ(ck__store_last_record(s, &out, NULL, &err), CK_EIO);
    OK(out == NULL);
    INT_EQ(ck__store_append_record(s, 0, "{}", 2, &err), CK_EIO);
    ck__store_free(s);
}

TEST(search) {
    ck__store *s = ck__store_new(at("search"), "s", NULL);
    char *hits = search_ok(s, NULL, "alpha", 10);
    STR_EQ(hits, "[]");
    ck_free(hits);
    put(s, "a", 1, "alpha\nbeta\nalphabet\n", 20);
    put(s, "b", 1, "no\nalpha \"q\" \\ \x01\t \xff end\ncrlf alpha\r\n", 36);
    put(s, "c/d", 3, "x\0alpha\nalpha\0y\nlast alpha", 26);

    /* Line numbers count from 0, as read offsets do: reading at one lands on its line. */
    hits = search_ok(s, "a", "^alpha", 10);
    STR_EQ(hits, "[{\"ref\":\"a\",\"line\":0,\"text\":\"alpha\"},"
                 "{\"ref\":\"a\",\"line\":2,\"text\":\"alphabet\"}]");
    ck_free(hits);
    hits = search_ok(s, "a", "^alpha", 1);
    STR_EQ(hits, "[{\"ref\":\"a\",\"line\":0,\"text\":\"alpha\"}]");
    ck_free(hits);
    hits = search_ok(s, "a", "alpha", 0);
    STR_EQ(hits, "[]");
    ck_free(hits);
    hits = search_ok(s, "c/d", "^alpha$", 10);
    STR_EQ(hits, "[]");
    ck_free(hits);
    hits = search_ok(s, "c/d", "alpha$", 10);
    STR_EQ(hits, "[{\"ref\":\"c/d\",\"line\":0,\"text\":\"x\\u0000alpha\"},"
                 "{\"ref\":\"c/d\",\"line\":2,\"text\":\"last alpha\"}]");
    ck_free(hits);
    hits = search_ok(s, "c/d", "y$", 10);
    STR_EQ(hits, "[{\"ref\":\"c/d\",\"line\":1,\"text\":\"alpha\\u0000y\"}]");
    ck_free(hits);

    hits = search_ok(s, NULL, "alpha", 100);
    STR_EQ(hits, "[{\"ref\":\"a\",\"line\":0,\"text\":\"alpha\"},"
                 "{\"ref\":\"a\",\"line\":2,\"text\":\"alphabet\"},"
                 "{\"ref\":\"b\",\"line\":1,"
                 "\"text\":\"alpha \\\"q\\\" \\\\ \\u0001\\t \xEF\xBF\xBD end\"},"
                 "{\"ref\":\"b\",\"line\":2,\"text\":\"crlf alpha\\r\"},"
                 "{\"ref\":\"c_d~e5fb6071c14e1375.txt\",\"line\":0,\"text\":\"x\\u0000alpha\"},"
                 "{\"ref\":\"c_d~e5fb6071c14e1375.txt\",\"line\":1,\"text\":\"alpha\\u0000y\"},"
                 "{\"ref\":\"c_d~e5fb6071c14e1375.txt\",\"line\":2,\"text\":\"last alpha\"}]");
    ck_free(hits);
    hits = search_ok(s, NULL, "alpha", 3);
    OK(hits && strstr(hits, "\"ref\":\"b\",\"line\":1") && !strstr(hits, "crlf"));
    ck_free(hits);
    /* The ref that session search reports reads back. */
    read_is(s, "c_d~e5fb6071c14e1375.txt", 24, 2, 1, "last alpha", 10);

    ck_error err;
    char *out = (char *)1;
    INT_EQ(ck__store_search(s, NULL, 0, "(", 10, NULL, 0, &out, NULL, &err), CK_EINVAL);
    STR_EQ(err.where, "pattern");
    OK(out == NULL);
    INT_EQ(ck__store_search(s, "zzz", 3, "a", 10, NULL, 0, &out, NULL, &err), CK_EINVAL);
    STR_EQ(err.where, "zzz");
    INT_EQ(ck__store_search(s, "a", 1, NULL, 10, NULL, 0, &out, NULL, &err), CK_EINVAL);
    /* A backreference, which glibc took 289 s over on one 4,000-byte line, is refused. */
    INT_EQ(ck__store_search(s, NULL, 0, "(.*)\\1\\1x", 10, NULL, 0, &out, NULL, &err),
           CK_EINVAL);
    STR_EQ(err.where, "pattern");
    OK(strstr(err.msg, "backreferences") != NULL);
    INT_EQ(err.offset, 4);
    OK(out == NULL);
    /* Patterns that backtracking engines take exponential time over answer at once. */
    static char line[4002];
    memset(line, 'a', 4000);
    line[4000] = '\n';
    put(s, "as", 2, line, 4001);
    hits = search_ok(s, "as", "(a|aa)*c", 10);
    STR_EQ(hits, "[]");
    ck_free(hits);
    hits = search_ok(s, "as", "^(a+a+)+$", 10);
    OK(hits && strstr(hits, "\"line\":0"));
    ck_free(hits);
    /* A search that reaches its work cap returns what it found and says it was cut. */
    ck__store_set_search_work(s, 400);
    hits = search_ok(s, NULL, "alpha", 100);
    STR_EQ(hits, "[{\"ref\":\"a\",\"line\":0,\"text\":\"alpha\"},"
                 "{\"ref\":\"\",\"line\":0,\"text\":\"search stopped at its work limit "
                 "(about 0 MB scanned): give a ref or a narrower pattern to search the rest\","
                 "\"cut\":true}]");
    ck_free(hits);
    ck__store_set_search_work(s, 0);
    hits = search_ok(s, NULL, "alpha", 100);
    OK(hits && !strstr(hits, "\"cut\""));
    ck_free(hits);
    ck__store_free(s);
}

TEST(audit_log) {
    ck__store *s = ck__store_new(at("audit"), "s", NULL);
    char *out = (char *)1;
    size_t len = 99;
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    OK(out == NULL);
    INT_EQ(len, 0);
    INT_EQ(ck__store_append_record(s, 0, "{\"a\":1}", 7, NULL), CK_OK);
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    MEM_EQ(out, len, "{\"a\":1}");
    ck_free(out);
    INT_EQ(ck__store_append_record(s, 0, "{\"b\":\n2}", 8, NULL), CK_OK);
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    MEM_EQ(out, len, "{\"b\": 2}");
    ck_free(out);

    /* A torn last line, as a crash leaves it, is skipped, and the next record is not glued
     * onto it. */
    int fd = open(at("audit/compactions/s.jsonl"), O_WRONLY | O_APPEND);
    OK(write(fd, "{\"c\":", 5) == 5);
    close(fd);
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    MEM_EQ(out, len, "{\"b\": 2}");
    ck_free(out);
    INT_EQ(ck__store_append_record(s, 0, "{\"d\":4}", 7, NULL), CK_OK);
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    MEM_EQ(out, len, "{\"d\":4}");
    ck_free(out);
    size_t n = 0;
    char *all = h_read_file(at("audit/compactions/s.jsonl"), &n);
    MEM_EQ(all, n, "{\"a\":1}\n{\"b\": 2}\n{\"c\":\n{\"d\":4}\n");
    free(all);

    /* Empty lines are not records. */
    fd = open(at("audit/compactions/s.jsonl"), O_WRONLY | O_APPEND);
    OK(write(fd, "\n\n", 2) == 2);
    close(fd);
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    MEM_EQ(out, len, "{\"d\":4}");
    ck_free(out);

    /* A long log and a record longer than the backward read chunk. */
    char rec[100];
    for (int i = 0; i < 3000; i++) {
        int k = snprintf(rec, sizeof rec, "{\"i\":%d,\"pad\":\"%040d\"}", i, i);
        ck__store_append_record(s, 0, rec, (size_t)k, NULL);
    }
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    MEM_EQ(out, len, "{\"i\":2999,\"pad\":\"0000000000000000000000000000000000002999\"}");
    ck_free(out);
    size_t big_len = 50000;
    char *big = malloc(big_len);
    memset(big, 'q', big_len);
    big[0] = '{';
    big[big_len - 1] = '}';
    INT_EQ(ck__store_append_record(s, 0, big, big_len, NULL), CK_OK);
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    OK(out && len == big_len && memcmp(out, big, big_len) == 0);
    ck_free(out);
    fd = open(at("audit/compactions/s.jsonl"), O_WRONLY | O_APPEND);
    OK(write(fd, big, 20000) == 20000);
    close(fd);
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    OK(out && len == big_len && memcmp(out, big, big_len) == 0);
    ck_free(out);
    free(big);
    ck__store_free(s);

    /* A log with no complete line has no record. */
    s = ck__store_new(at("audit"), "torn-only", NULL);
    OK(mkdir(at("audit/compactions"), 0700) == 0 || errno == EEXIST);
    FILE *f = fopen(at("audit/compactions/torn-only.jsonl"), "w");
    fputs("{\"never\":", f);
    fclose(f);
    out = (char *)1;
    INT_EQ(ck__store_last_record(s, &out, &len, NULL), CK_OK);
    OK(out == NULL);
    ck__store_free(s);
}

/* Processes racing on the same ids and the same log: every file whole, every line whole. */
TEST(concurrent_processes) {
    enum { KIDS = 4, IDS = 40, RECORDS = 200 };
    pid_t kids[KIDS];
    for (int k = 0; k < KIDS; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            ck__store *s = ck__store_new(at("race"), "s", NULL);
            int bad = !s;
            char id[32], data[64], rec[64];
            for (int i = 0; i < RECORDS && !bad; i++) {
                if (i < IDS) {
                    int il = snprintf(id, sizeof id, "race-%d", i);
                    int dl = snprintf(data, sizeof data, "content of %d\nsecond line\n", i);
                    bad |= ck__store_put(s, id, (size_t)il, data, (size_t)dl, NULL, NULL) != 0;
                }
                int rl = snprintf(rec, sizeof rec, "{\"kid\":%d,\"i\":%d}", k, i);
                bad |= ck__store_append_record(s, 0, rec, (size_t)rl, NULL) != 0;
            }
            ck__store_free(s);
            _exit(bad);
        }
    }
    for (int k = 0; k < KIDS; k++) {
        int status = -1;
        waitpid(kids[k], &status, 0);
        OK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    ck__store *s = ck__store_new(at("race"), "s", NULL);
    for (int i = 0; i < IDS; i++) {
        char id[32], data[64];
        int il = snprintf(id, sizeof id, "race-%d", i);
        int dl = snprintf(data, sizeof data, "content of %d\nsecond line\n", i);
        read_is(s, id, (size_t)il, 0, SIZE_MAX, data, (size_t)dl);
    }
    int outside = 0;
    INT_EQ(count_files(at("race/tool_results"), at("race/tool_results/s"), &outside), IDS);
    size_t n = 0;
    char *all = h_read_file(at("race/compactions/s.jsonl"), &n);
    int lines = 0, whole = 1;
    for (char *p = all, *end = all + n; all && p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break;
        whole &= *p == '{' && nl[-1] == '}';
        lines++;
        p = nl + 1;
    }
    free(all);
    INT_EQ(lines, KIDS * RECORDS);
    OK(whole);
    ck__store_free(s);
}

/* Each operation, with each of its allocations failing in turn: CK_ENOMEM and no leak. */
TEST(allocation_failures) {
    /* The evidence file is removed after each round, so every round takes the full write
     * path and the session keeps one file (a growing folder would add allocations forever). */
    ck__store *fixed = ck__store_new(at("oom"), "oom/session", NULL);
    char *evidence = ck__store_path(fixed, "id/x", 4);
    FAIL_EACH_ALLOC({
        ck__store *s = ck__store_new(at("oom"), "oom/session", NULL);
        if (s) {
            int existed = 0;
            ck_error err;
            int rc = ck__store_put(s, "id/x", 4, "l1\nl2 hit\nl3", 12, &existed, &err);
            OK(rc == CK_OK || rc == CK_ENOMEM);
            OK(rc != CK_OK || existed == 0);
            char *out = NULL;
            size_t len = 0;
            rc = ck__store_read(s, "id/x", 4, 1, 1, &out, &len, &err);
            OK(rc == CK_ENOMEM || rc == CK_EINVAL || (rc == CK_OK && len == 7));
            ck_free(out);
            out = NULL;
            rc = ck__store_search(s, NULL, 0, "hit", 100, NULL, 0, &out, &len, &err);
            OK(rc == CK_OK ? out != NULL : rc == CK_ENOMEM);
            ck_free(out);
            out = NULL;
            rc = ck__store_search(s, "id/x", 4, "hit", 100, NULL, 0, &out, &len, &err);
            OK(rc == CK_OK || rc == CK_ENOMEM || rc == CK_EINVAL);
            ck_free(out);
            out = NULL;
            rc = ck__store_append_record(s, 0, "{\"r\":1}", 7, &err);
            OK(rc == CK_OK || rc == CK_ENOMEM);
            rc = ck__store_last_record(s, &out, &len, &err);
            OK(rc == CK_OK || rc == CK_ENOMEM);
            ck_free(out);
            ck_free(ck__store_path(s, "id/x", 4));
            ck_free(ck__store_log_path(s));
            ck_free(ck__store_encode_id("a b", 3));
            ck__store_free(s);
        }
        unlink(evidence);
    });
    ck_free(evidence);
    ck__store_free(fixed);
    /* The state left behind is whole: the fixed id reads back exactly. */
    ck__store *s = ck__store_new(at("oom"), "oom/session", NULL);
    put(s, "fixed", 5, "a\nb\n", 4);
    FAIL_EACH_ALLOC({
        char *out = NULL;
        size_t len = 0;
        int rc = ck__store_read(s, "fixed", 5, 1, 1, &out, &len, NULL);
        if (rc == CK_OK) OK(out && len == 2 && memcmp(out, "b\n", 2) == 0);
        else INT_EQ(rc, CK_ENOMEM);
        ck_free(out);
    });
    ck__store_free(s);
}

/* A fresh folder for this run, removed at the end. */
static int make_root(void) {
    snprintf(root, sizeof root, "/tmp/ck_store_XXXXXX");
    if (mkdtemp(root)) return 1;
    fprintf(stderr, "cannot create a temporary folder\n");
    return 0;
}

HARNESS_MAIN(if (!make_root()) return 1;
             RUN(encode_id)
             RUN(round_trip_and_paging)
             RUN(refs_by_path)
             RUN(hostile_ids)
             RUN(permissions_and_layout)
             RUN(folders_made_when_needed)
             RUN(symlinks)
             RUN(dead_temp_files)
             RUN(io_failures)
             RUN(search)
             RUN(audit_log)
             RUN(concurrent_processes)
             RUN(allocation_failures)
             h_remove_tree(root);)
