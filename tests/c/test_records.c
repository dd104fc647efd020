/* Audit records and session state in an evidence backend with put_new and list (store.h),
 * against an in-memory backend: a session resumes on a fresh compactor with no summary call
 * and the same view, nothing lands on the local disk, two writers on one session lose no
 * record (the loser follows the winner with a snapshot, or fails with CK_ECONFLICT), hostile
 * session ids stay inside their prefix, and a backend without put_new keeps the old log. */
#include <sys/stat.h>
#include <unistd.h>

#include "../../csrc/src/store.h"
#include "records.h"
#include "tree.h"

static char store_dir[256];

/* ---- an in-memory backend ---- */

typedef struct mem {
    char *keys[2048], *vals[2048];
    size_t lens[2048];
    int n;
    int refuse_new; /* put_new answers CK_ECONFLICT and stores nothing */
    int fail;       /* every call fails with CK_EIO */
} mem;

static int mem_find(const mem *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i], key) == 0) return i;
    return -1;
}

static int mem_store(mem *m, const char *key, const char *data, size_t len, int create_only,
                     ck_error *err) {
    int rc = CK_OK, at = mem_find(m, key);
    if (m->fail) {
        snprintf(err->where, sizeof err->where, "bucket unreachable");
        rc = CK_EIO;
    } else if (create_only && (at >= 0 || m->refuse_new)) {
        rc = CK_ECONFLICT;
    } else {
        if (at < 0) {
            at = m->n++;
            m->keys[at] = strdup(key);
        } else {
            free(m->vals[at]);
        }
        m->vals[at] = malloc(len ? len : 1);
        memcpy(m->vals[at], data, len);
        m->lens[at] = len;
    }
    return rc;
}

static int mem_put(void *ctx, const char *key, const char *data, size_t len, ck_error *err) {
    return mem_store(ctx, key, data, len, 0, err);
}

static int mem_put_new(void *ctx, const char *key, const char *data, size_t len,
                       ck_error *err) {
    return mem_store(ctx, key, data, len, 1, err);
}

static int mem_get(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err) {
    mem *m = ctx;
    int rc = CK_OK, at = mem_find(m, key);
    if (m->fail) {
        snprintf(err->where, sizeof err->where, "bucket unreachable");
        rc = CK_EIO;
    } else if (at >= 0) {
        *out = ck_malloc(m->lens[at] ? m->lens[at] : 1);
        memcpy(*out, m->vals[at], m->lens[at]);
        *out_len = m->lens[at];
    }
    return rc;
}

static int mem_order(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int mem_list(void *ctx, const char *prefix, const char *after,
                    int (*each)(void *, const char *, size_t), void *each_ctx, ck_error *err) {
    mem *m = ctx;
    if (m->fail) {
            snprintf(err->where, sizeof err->where, "bucket unreachable");
        return CK_EIO;
    }
    char **keys = malloc(sizeof *keys * (size_t)(m->n + 1));
    int n = 0;
    for (int i = 0; i < m->n; i++)
        if (strncmp(m->keys[i], prefix, strlen(prefix)) == 0 &&
            (!after || strcmp(m->keys[i], after) > 0))
            keys[n++] = strdup(m->keys[i]);
    qsort(keys, (size_t)n, sizeof *keys, mem_order);
    int stop = 0;
    for (int i = 0; i < n; i++) {
        if (!stop) stop = each(each_ctx, keys[i], strlen(keys[i]));
        free(keys[i]);
    }
    free(keys);
    return CK_OK;
}

static void mem_init(mem *m) {
    memset(m, 0, sizeof *m);
}

static void mem_free(mem *m) {
    for (int i = 0; i < m->n; i++) {
        free(m->keys[i]);
        free(m->vals[i]);
    }
}

static ck_evidence_backend mem_backend(mem *m) {
    ck_evidence_backend be = {m, mem_put, mem_get, mem_put_new, mem_list};
    return be;
}

/* A fresh local folder for one compactor: nothing may be written into it. */
static const char *fresh_dir(const char *name) {
    static char dir[300];
    snprintf(dir, sizeof dir, "%s/%s", store_dir, name);
    OK(mkdir(dir, 0700) == 0);
    return dir;
}

static int dir_is_empty(const char *dir) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
    return system(cmd) == 0;
}

/* ---- tests ---- */

TEST(resume_on_a_fresh_compactor) {
    mem m;
    mem_init(&m);
    ck_evidence_backend be = mem_backend(&m);
    char *j = rec_session(30, 300, 0);
    const char *dir1 = fresh_dir("first");
    ck_compactor_options o = rec_options(&be, "sess-1", dir1);
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    rec_summarizer s = {0};
    char *rec = NULL;
    char *v1 = rec_compact(k, j, &s, &rec, NULL);
    OK(v1 && strstr(v1, "[Context Compaction]"));
    INT_EQ(s.calls, 1);
    OK(rec && strstr(rec, "\"kind\":\"snapshot\""));
    free(rec);
    /* The first process's next turn: no summary, and the view it gives. */
    char *v2 = rec_compact(k, j, &s, NULL, NULL);
    INT_EQ(s.calls, 1);
    ck_compactor_free(k);
    OK(dir_is_empty(dir1));
    INT_EQ(rec_check_records(&be, "compactions/sess-1/"), 1);
    OK(mem_find(&m, "compactions/.key") >= 0);

    /* Another worker, with its own (empty) local folder. */
    const char *dir2 = fresh_dir("second");
    o = rec_options(&be, "sess-1", dir2);
    k = ck_compactor_new(&o, &err);
    rec_summarizer s2 = {0};
    char *v3 = rec_compact(k, j, &s2, &rec, NULL);
    INT_EQ(s2.calls, 0);
    OK(v2 && v3 && strcmp(v2, v3) == 0);
    OK(rec == NULL); /* nothing changed, nothing recorded */
    /* A longer history goes on from the resumed state: the next record is seq 2. */
    char *longer = rec_session(60, 300, 0);
    char *v4 = rec_compact(k, longer, &s2, &rec, NULL);
    OK(v4 != NULL);
    OK(rec && strstr(rec, "\"id\":\"sess-1:2\""));
    OK(rec && !strstr(rec, "could not be resumed"));
    free(rec);
    ck_compactor_free(k);
    OK(dir_is_empty(dir2));
    INT_EQ(rec_check_records(&be, "compactions/sess-1/"), 2);
    ck_free(v1);
    ck_free(v2);
    ck_free(v3);
    ck_free(v4);
    free(j);
    free(longer);
    mem_free(&m);
}

TEST(loser_of_a_seq_follows_the_winner) {
    mem m;
    mem_init(&m);
    ck_evidence_backend be = mem_backend(&m);
    ck_compactor_options o = rec_options(&be, "race", store_dir);
    ck_error err;
    ck_compactor *a = ck_compactor_new(&o, &err), *b = ck_compactor_new(&o, &err);
    char *ja = rec_session(30, 300, 1), *jb = rec_session(30, 300, 2);
    rec_summarizer s = {0};
    char *ra = NULL, *rb = NULL;
    char *va = rec_compact(a, ja, &s, &ra, NULL);
    char *vb = rec_compact(b, jb, &s, &rb, NULL);
    OK(va && vb);
    OK(ra && strstr(ra, "\"id\":\"race:1\""));
    /* b lost seq 1: its record is seq 2, a whole snapshot, and says whom it follows. */
    OK(rb && strstr(rb, "\"id\":\"race:2\"") && strstr(rb, "\"kind\":\"snapshot\""));
    OK(rb && strstr(rb, "another writer recorded this session first"));
    OK(rb && strstr(rb, "compactions/race/00000000000000000001.json"));
    INT_EQ(rec_check_records(&be, "compactions/race/"), 2);
    /* A fresh compactor resumes b's state: b's next view, with no summary call. */
    char *vb2 = rec_compact(b, jb, &s, NULL, NULL);
    ck_compactor *c = ck_compactor_new(&o, &err);
    rec_summarizer s2 = {0};
    char *vc = rec_compact(c, jb, &s2, NULL, NULL);
    INT_EQ(s2.calls, 0);
    OK(vb2 && vc && strcmp(vb2, vc) == 0);
    ck_compactor_free(a);
    ck_compactor_free(b);
    ck_compactor_free(c);
    free(ra);
    free(rb);
    ck_free(va);
    ck_free(vb);
    ck_free(vb2);
    ck_free(vc);
    free(ja);
    free(jb);
    mem_free(&m);
}

TEST(unresolved_conflict_fails_the_compaction) {
    mem m;
    mem_init(&m);
    ck_evidence_backend be = mem_backend(&m);
    ck_compactor_options o = rec_options(&be, "stuck", store_dir);
    ck_error err;
    /* The key first, then a backend whose put_new never takes anything. */
    unsigned char key[32];
    ck__store *st = ck__store_new(store_dir, "stuck", &be);
    INT_EQ(ck__store_key(st, 1, key, &err), CK_OK);
    ck__store_free(st);
    m.refuse_new = 1;
    ck_compactor *k = ck_compactor_new(&o, &err);
    char *j = rec_session(30, 300, 3);
    rec_summarizer s = {0};
    char *why = NULL;
    int code = 0;
    char *v = rec_compact(k, j, &s, &why, &code);
    INT_EQ(code, CK_ECONFLICT);
    OK(v == NULL);
    OK(why && strcmp(why, "compactions/stuck/00000000000000000001.json") == 0);
    /* Nothing was overwritten or recorded, and the compactor holds what is stored: none. */
    INT_EQ(rec_check_records(&be, "compactions/stuck/"), 0);
    m.refuse_new = 0;
    free(why);
    v = rec_compact(k, j, &s, &why, &code);
    INT_EQ(code, CK_OK);
    OK(why && strstr(why, "\"id\":\"stuck:1\""));
    INT_EQ(rec_check_records(&be, "compactions/stuck/"), 1);
    ck_compactor_free(k);
    free(why);
    ck_free(v);
    free(j);
    mem_free(&m);
}

/* Two writers taking turns on one session, each with histories of its own: every call of one
 * finds the seq it expects taken by the other (the same race as two processes, made certain).
 * The concurrent case, with two processes, is in test_s3.c. */
TEST(two_writers_lose_no_record) {
    mem m;
    mem_init(&m);
    ck_evidence_backend be = mem_backend(&m);
    ck_compactor_options o = rec_options(&be, "shared", store_dir);
    ck_error err;
    ck_compactor *k[2] = {ck_compactor_new(&o, &err), ck_compactor_new(&o, &err)};
    int records = 0, failures = 0, follows = 0;
    for (int i = 0; i < 24; i++) {
        char *j = rec_session(30 + i / 2, 300, (i % 2 + 1) * 100 + i);
        rec_summarizer s = {0};
        char *rec = NULL;
        int code = 0;
        char *v = rec_compact(k[i % 2], j, &s, &rec, &code);
        if (code != CK_OK) failures++;
        else if (rec) records++;
        follows += rec && strstr(rec, "another writer recorded") != NULL;
        free(rec);
        ck_free(v);
        free(j);
    }
    INT_EQ(failures, 0);
    INT_EQ(records, 24);
    OK(follows >= 22);
    INT_EQ(rec_check_records(&be, "compactions/shared/"), records);
    ck_compactor_free(k[0]);
    ck_compactor_free(k[1]);
    mem_free(&m);
}

TEST(hostile_session_ids_stay_in_their_prefix) {
    static const char *const ids[] = {"../../etc/passwd", "a/b", "x y\n\"z\"", ".key",
                                      "\xc3\x84ngstr\xc3\xb6m", "Sess", "sess"};
    mem m;
    mem_init(&m);
    ck_evidence_backend be = mem_backend(&m);
    char *j = rec_session(30, 300, 4);
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        ck_compactor_options o = rec_options(&be, ids[i], store_dir);
        rec_check_resume(&o, j);
        char *enc = ck__store_encode_id(ids[i], strlen(ids[i]));
        char prefix[300];
        snprintf(prefix, sizeof prefix, "compactions/%s/", enc);
        INT_EQ(rec_check_records(&be, prefix), 1);
        ck_free(enc);
    }
    /* Every key is a safe relative name under compactions/ or tool_results/. */
    for (int i = 0; i < m.n; i++) {
        const char *key = m.keys[i];
        OK(strncmp(key, "compactions/", 12) == 0 || strncmp(key, "tool_results/", 13) == 0);
        OK(strstr(key, "/../") == NULL && strstr(key, "/./") == NULL && !strstr(key, "//"));
        for (const char *p = key; *p; p++)
            OK(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-/",
                      *p) != NULL);
    }
    /* Seven sessions, one record each, and the one key. */
    int records = 0;
    for (int i = 0; i < m.n; i++) records += strstr(m.keys[i], ".json") != NULL;
    INT_EQ(records, 7);
    free(j);
    mem_free(&m);
}

TEST(failures_fail_open_and_the_record_says_so) {
    mem m;
    mem_init(&m);
    ck_evidence_backend be = mem_backend(&m);
    ck_compactor_options o = rec_options(&be, "flaky", store_dir);
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    char *j = rec_session(30, 300, 5);
    rec_summarizer s = {0};
    char *rec = NULL;
    m.fail = 1;
    int code = 0;
    char *v = rec_compact(k, j, &s, &rec, &code);
    INT_EQ(code, CK_OK);
    OK(v != NULL);
    OK(rec && strstr(rec, "audit log not written") && strstr(rec, "bucket unreachable"));
    free(rec);
    ck_free(v);
    m.fail = 0;
    char *longer = rec_session(60, 300, 5);
    v = rec_compact(k, longer, &s, &rec, &code);
    INT_EQ(code, CK_OK);
    OK(rec && !strstr(rec, "audit log not written"));
    INT_EQ(rec_check_records(&be, "compactions/flaky/"), 1);
    ck_compactor_free(k);
    free(rec);
    ck_free(v);
    free(j);
    free(longer);
    mem_free(&m);
}

TEST(backend_without_put_new_keeps_the_local_log) {
    mem m;
    mem_init(&m);
    ck_evidence_backend be = {&m, mem_put, mem_get, NULL, mem_list};
    const char *dir = fresh_dir("plain");
    ck_compactor_options o = rec_options(&be, "plain", dir);
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    char *j = rec_session(30, 300, 6);
    rec_summarizer s = {0};
    char *v = rec_compact(k, j, &s, NULL, NULL);
    ck_compactor_free(k);
    char path[400];
    snprintf(path, sizeof path, "%s/compactions/plain.jsonl", dir);
    struct stat st;
    OK(stat(path, &st) == 0 && st.st_size > 0);
    for (int i = 0; i < m.n; i++) OK(strncmp(m.keys[i], "compactions/", 12) != 0);
    ck_free(v);
    free(j);
    mem_free(&m);
}

static void setup(void) {
    snprintf(store_dir, sizeof store_dir, "/tmp/ck_test_records_XXXXXX");
    OK(mkdtemp(store_dir) != NULL);
}

HARNESS_MAIN(setup(); RUN(resume_on_a_fresh_compactor) RUN(loser_of_a_seq_follows_the_winner)
                 RUN(unresolved_conflict_fails_the_compaction) RUN(two_writers_lose_no_record)
                     RUN(hostile_session_ids_stay_in_their_prefix)
                         RUN(failures_fail_open_and_the_record_says_so)
                             RUN(backend_without_put_new_keeps_the_local_log)
                                 h_remove_tree(store_dir))
