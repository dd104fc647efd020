/* libFuzzer target: the store layer (csrc/src/store.c) and the search matcher with hostile
 * ids, refs, paths, patterns and symbolic links planted in the store.
 *
 * Input: byte 0 picks where a link to a folder outside the store is planted (nothing, one of
 * the store's own folders or files, the store's folder itself after the store was made, or
 * the path the input names), byte 1 which operations run; the rest is split at NUL bytes
 * into an id, a text (the evidence, a pattern, a record, a ref) and a path below the store.
 * Each run has a store of its own, removed afterwards. What must hold: nothing is ever
 * created outside the store (the outside folder stays empty); an operation on a path with a
 * planted link fails with CK_EIO; stored evidence reads back exactly; no temporary file is
 * left behind; searches end, whatever the pattern. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctxkeel.h"
#include "fuzz_store.h"

#include "../csrc/src/regex.h"
#include "../csrc/src/store.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

enum { PLANT_NONE, PLANT_RESULTS, PLANT_SESSION, PLANT_LOG_DIR, PLANT_LOG, PLANT_FILE,
       PLANT_ROOT, PLANT_PATH, PLANT_KINDS };

/* Entries in `dir` (not "." and ".."); -1 when it cannot be read. */
static int entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* Whether a temporary file (a regular file named .tmp-*; the input may plant links and
 * folders of that name) is left anywhere below `dir`, links not followed. */
static int temp_left(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char child[PATH_MAX];
        if (snprintf(child, sizeof child, "%s/%s", dir, e->d_name) >= (int)sizeof child) continue;
        struct stat st;
        if (lstat(child, &st) != 0) continue;
        if (S_ISREG(st.st_mode) && !strncmp(e->d_name, ".tmp-", 5)) found = 1;
        if (S_ISDIR(st.st_mode)) found = temp_left(child);
    }
    closedir(d);
    return found;
}

static void make_dir(const char *path) { (void)mkdir(path, 0700); }

/* Plants a link to `outside` at `rel` below `root`, making the folders on the way; the path
 * the input gives is cut into components, without "", "." and "..", at most 4 of them. */
static int plant_path(const char *root, const char *rel, size_t len, const char *outside) {
    char path[PATH_MAX];
    size_t at = (size_t)snprintf(path, sizeof path, "%s", root);
    int parts = 0;
    size_t i = 0;
    while (i < len && parts < 4) {
        size_t j = i;
        while (j < len && rel[j] != '/' && rel[j] != '\0') j++;
        size_t n = j - i;
        if (n && !(n == 1 && rel[i] == '.') && !(n == 2 && rel[i] == '.' && rel[i + 1] == '.') &&
            n < 64 && at + n + 2 < sizeof path) {
            if (parts) make_dir(path);
            path[at++] = '/';
            memcpy(path + at, rel + i, n);
            at += n;
            path[at] = '\0';
            parts++;
        }
        i = j + 1;
    }
    if (!parts) return 0;
    return symlink(outside, path) == 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (size < 2) return 0;
    static unsigned long run;
    const char *base = fuzz_store("store");
    char root[PATH_MAX], outside[PATH_MAX], path[PATH_MAX + 128];
    snprintf(outside, sizeof outside, "%s/outside", base);
    make_dir(outside);
    snprintf(root, sizeof root, "%s/r%lu", base, run++);
    int plant = data[0] % PLANT_KINDS;
    unsigned ops = data[1];
    const char *s = (const char *)data + 2;
    size_t left = size - 2;
    const char *field[3] = {"", "", ""};
    size_t flen[3] = {0, 0, 0};
    for (int f = 0; f < 3 && left; f++) {
        const char *nul = f < 2 ? memchr(s, '\0', left) : NULL;
        size_t n = nul ? (size_t)(nul - s) : left;
        field[f] = s;
        flen[f] = n;
        s += n + (nul ? 1 : 0);
        left -= n + (nul ? 1 : 0);
    }
    const char *id = field[0], *text = field[1];
    size_t id_len = flen[0], text_len = flen[1];

    make_dir(root);
    ck__store *st = ck__store_new(root, "sess", NULL);
    REQUIRE(st != NULL);
    char *file = ck__store_path(st, id, id_len);
    REQUIRE(file != NULL);
    int planted = 0;
    switch (plant) {
        case PLANT_RESULTS:
            snprintf(path, sizeof path, "%s/tool_results", root);
            planted = symlink(outside, path) == 0;
            break;
        case PLANT_SESSION:
            snprintf(path, sizeof path, "%s/tool_results", root);
            make_dir(path);
            snprintf(path, sizeof path, "%s/tool_results/sess", root);
            planted = symlink(outside, path) == 0;
            break;
        case PLANT_LOG_DIR:
        case PLANT_LOG:
            snprintf(path, sizeof path, "%s/compactions", root);
            if (plant == PLANT_LOG) {
                make_dir(path);
                snprintf(path, sizeof path, "%s/compactions/sess.jsonl", root);
            }
            planted = symlink(outside, path) == 0;
            break;
        case PLANT_FILE: {
            snprintf(path, sizeof path, "%s/tool_results", root);
            make_dir(path);
            snprintf(path, sizeof path, "%s/tool_results/sess", root);
            make_dir(path);
            char target[PATH_MAX + 16];
            snprintf(target, sizeof target, "%s/stolen", outside);
            planted = symlink(target, file) == 0;
            break;
        }
        case PLANT_ROOT: {
            /* The folder was resolved when the store was made: moved away and replaced by a
             * link, it is not followed. */
            snprintf(path, sizeof path, "%s.moved", root);
            planted = rename(root, path) == 0 && symlink(outside, root) == 0;
            break;
        }
        case PLANT_PATH:
            planted = plant_path(root, field[2], flen[2], outside);
            break;
        default: break;
    }

    int existed = 0;
    ck_error err;
    int put = -1;
    if (ops & 1) {
        put = ck__store_put(st, id, id_len, text, text_len, &existed, &err);
        REQUIRE(put == CK_OK || put == CK_EIO || put == CK_ENOMEM);
        int on_path = plant == PLANT_RESULTS || plant == PLANT_SESSION || plant == PLANT_FILE ||
                      plant == PLANT_ROOT;
        if (planted && on_path) REQUIRE(put == CK_EIO);
        if (put == CK_OK && !existed && !(planted && plant == PLANT_PATH)) {
            char *out = NULL;
            size_t len = 0;
            REQUIRE(ck__store_read(st, id, id_len, 0, SIZE_MAX, &out, &len, &err) == CK_OK);
            REQUIRE(len == text_len && (len == 0 || memcmp(out, text, len) == 0));
            ck_free(out);
            REQUIRE(ck__store_read(st, file, strlen(file), 0, SIZE_MAX, &out, &len, &err) ==
                    CK_OK);
            REQUIRE(len == text_len);
            ck_free(out);
        }
    }
    char *out = NULL;
    size_t len = 0;
    if (ops & 2) {
        /* The text as a ref: a path, a name, anything. */
        int rc = ck__store_read(st, text, text_len, 1, 3, &out, &len, &err);
        REQUIRE(rc == CK_OK || rc == CK_EINVAL || rc == CK_EIO || rc == CK_ENOMEM);
        ck_free(out);
        out = NULL;
    }
    char *pattern = malloc(text_len + 1);
    REQUIRE(pattern != NULL);
    memcpy(pattern, text, text_len);
    pattern[text_len] = '\0';
    if (ops & 4) {
        ck__store_set_search_work(st, (uint64_t)1 << 20);
        int rc = ck__store_search(st, NULL, 0, pattern, 20, NULL, 0, &out, &len, &err);
        REQUIRE(rc == CK_OK || rc == CK_EINVAL || rc == CK_EIO || rc == CK_ENOMEM);
        ck_free(out);
        out = NULL;
        rc = ck__store_search(st, id, id_len, pattern, 20, NULL, 0, &out, &len, &err);
        REQUIRE(rc == CK_OK || rc == CK_EINVAL || rc == CK_EIO || rc == CK_ENOMEM);
        ck_free(out);
        out = NULL;
    }
    if (ops & 8) {
        /* The matcher alone: the text as the pattern, the id as the line. */
        ck__regex *re = NULL;
        if (ck__regex_new(text, text_len, &re, &err) == CK_OK) {
            uint64_t budget = 1 << 16;
            int got = ck__regex_search(re, id, id_len, &budget);
            REQUIRE(got == CK__REGEX_MATCH || got == CK__REGEX_NO_MATCH || got == CK__REGEX_CUT);
            ck__regex_free(re);
        } else {
            REQUIRE(err.code == CK_EINVAL || err.code == CK_ENOMEM);
        }
    }
    if (ops & 16) {
        int rc = ck__store_append_record(st, 0, text, text_len, &err);
        REQUIRE(rc == CK_OK || rc == CK_EIO || rc == CK_ENOMEM);
        if (planted && (plant == PLANT_LOG_DIR || plant == PLANT_LOG || plant == PLANT_ROOT))
            REQUIRE(rc == CK_EIO);
        rc = ck__store_last_record(st, &out, &len, &err);
        REQUIRE(rc == CK_OK || rc == CK_EIO || rc == CK_ENOMEM);
        ck_free(out);
        out = NULL;
    }
    free(pattern);
    ck_free(file);
    ck__store_free(st);

    /* Nothing went through a link: the outside folder is as empty as it was. */
    REQUIRE(entries(outside) == 0);
    REQUIRE(!temp_left(root));
    h_remove_tree(root);
    snprintf(path, sizeof path, "%s.moved", root);
    h_remove_tree(path);
    return 0;
}
