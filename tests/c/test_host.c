/* What hosts plug into a compactor: retention policies, an evidence backend of their own, a
 * token counter of their own, and the per-message token cache behind them. */
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static char store_dir[256];

/* ---- histories ---- */

/* A history under construction, with its strings owned here. */
typedef struct build {
    ck_history *h;
    char *texts[64];
    int n_texts;
} build;

static void add_text(build *b, ck_role role, const char *text) {
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TEXT;
    p.text = text;
    p.text_len = strlen(text);
    ck_history_add_message(b->h, role, CK_MSG_STRING_CONTENT);
    ck_history_add_part(b->h, &p, NULL);
}

/* An assistant call to `tool` with id `id`, then its result `output` (copied). */
static void add_call(build *b, const char *id, const char *tool, const char *output) {
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TOOL_CALL;
    p.flags = CK_PART_OPENAI;
    p.id = id;
    p.id_len = strlen(id);
    p.name = tool;
    p.name_len = strlen(tool);
    p.text = "{}";
    p.text_len = 2;
    ck_history_add_message(b->h, CK_ROLE_ASSISTANT, 0);
    ck_history_add_part(b->h, &p, NULL);
    char *copy = strdup(output);
    b->texts[b->n_texts++] = copy;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TOOL_RESULT;
    p.flags = CK_PART_OPENAI;
    p.id = id;
    p.id_len = strlen(id);
    p.text = copy;
    p.text_len = strlen(copy);
    ck_history_add_message(b->h, CK_ROLE_TOOL, CK_MSG_STRING_CONTENT);
    ck_history_add_part(b->h, &p, NULL);
}

static void build_free(build *b) {
    ck_history_free(b->h);
    for (int i = 0; i < b->n_texts; i++) free(b->texts[i]);
}

/* A pytest run of `tests` lines with two failures in the middle and a summary at the end, the
 * shape of the test logs in the corpus. Caller frees. */
static char *test_log(int tests) {
    size_t cap = (size_t)tests * 120 + 1024, at = 0;
    char *s = malloc(cap);
    at += (size_t)snprintf(s + at, cap - at, "============ test session starts ============\n"
                                             "platform linux -- Python 3.11.6, pytest-7.4.3\n");
    for (int i = 0; i < tests; i++) {
        if (i == tests / 3)
            at += (size_t)snprintf(s + at, cap - at,
                                   "tests/test_parser.py::test_case_%d FAILED\n"
                                   "E       AssertionError: assert 3 == 4\n",
                                   i);
        else if (i == tests / 2)
            at += (size_t)snprintf(s + at, cap - at,
                                   "Traceback (most recent call last):\n"
                                   "tests/test_parser.py::test_case_%d FAILED\n",
                                   i);
        else
            at += (size_t)snprintf(s + at, cap - at,
                                   "tests/test_parser.py::test_case_%d PASSED      [%3d%%]\n", i,
                                   i * 100 / tests);
    }
    snprintf(s + at, cap - at, "===== 2 failed, %d passed in 3.21s =====\n", tests - 2);
    return s;
}

/* A file listing: long, and nothing in it looks like a failure. Caller frees. */
static char *listing(int lines) {
    size_t cap = (size_t)lines * 64 + 64, at = 0;
    char *s = malloc(cap);
    s[0] = '\0';
    for (int i = 0; i < lines; i++)
        at += (size_t)snprintf(s + at, cap - at, "src/module_%04d/implementation_file.c\n", i);
    return s;
}

static ck_compactor_options base_options(const char *session) {
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = 1000000;
    o.store_dir = store_dir;
    o.session_id = session;
    o.keep_tail = 2;
    return o;
}

/* The placeholder text of the one tool result in message i of a tool-time offload. */
static char *offload_text(ck_compactor *k, ck_history *h, size_t i) {
    ck_view *v = NULL;
    ck_error err;
    if (ck_compactor_offload(k, h, i, &v, &err) != CK_OK) return NULL;
    ck_out_msg m;
    ck_view_get(v, 0, &m);
    char *text = m.op == CK_OP_EDIT ? strndup(m.parts[0].part.text, m.parts[0].part.text_len)
                                    : NULL;
    ck_view_free(v);
    return text;
}

/* ---- retention policies ---- */

TEST(retention_policies_choose_the_preview) {
    char *log = test_log(400), *files = listing(400);
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    add_text(&b, CK_ROLE_USER, "Fix the parser.");
    add_call(&b, "c1", "pytest", log);         /* message 2 */
    add_call(&b, "c2", "list_files", files);   /* message 4 */
    add_call(&b, "c3", "read_secret", files);  /* message 6 */
    add_call(&b, "c4", "bash", log);           /* message 8 */
    ck_retention policies[] = {
        {"py*", 3, 4, 10, 0, 0},
        {"list_files", 2, 0, 0, 300, 0},
        {"read_[s]ecret", 0, 0, 0, 0, CK_RETAIN_NEVER_OFFLOAD},
        {"pytest", 50, 50, 50, 0, 0}, /* shadowed by the first */
    };
    ck_compactor_options o = base_options("retain");
    o.retention = policies;
    o.n_retention = 4;
    o.tool_offload_threshold = 1000;
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    OK(k != NULL);
    /* The options keep copies: changing the caller's array changes nothing. */
    policies[0].tool = "nothing-matches";
    ck_compactor_options got;
    ck_compactor_get_options(k, &got);
    INT_EQ(got.n_retention, 4);
    OK(got.retention && strcmp(got.retention[0].tool, "py*") == 0);

    /* pytest: 3 head lines, both failures with their error lines, the last 4 lines. */
    char *t = offload_text(k, b.h, 2);
    OK(t && strstr(t, "first lines, error lines, last lines"));
    OK(t && strstr(t, "test session starts") && strstr(t, "platform linux"));
    OK(t && strstr(t, "AssertionError: assert 3 == 4") && strstr(t, "Traceback"));
    OK(t && strstr(t, "2 failed, 398 passed"));
    OK(t && strstr(t, "test_case_399 PASSED"));
    OK(t && !strstr(t, "test_case_200 PASSED") && !strstr(t, "test_case_5 PASSED"));
    free(t);
    /* list_files: the first two lines, within 300 bytes. */
    t = offload_text(k, b.h, 4);
    OK(t && strstr(t, "preview (first lines):") && strstr(t, "module_0001/"));
    OK(t && !strstr(t, "module_0002/"));
    const char *preview = t ? strstr(t, "preview (") : NULL;
    OK(preview && strlen(preview) < 300 + 200);
    free(t);
    /* read_secret: never offloaded, at tool time or at compaction. */
    ck_view *v = NULL;
    INT_EQ(ck_compactor_offload(k, b.h, 6, &v, &err), CK_OK);
    ck_out_msg m;
    ck_view_get(v, 0, &m);
    INT_EQ(m.op, CK_OP_KEEP);
    ck_view_free(v);
    /* bash: no policy, so the automatic rule for command output: head, errors, tail. */
    t = offload_text(k, b.h, 8);
    OK(t && strstr(t, "first lines, error lines, last lines") && strstr(t, "AssertionError"));
    free(t);

    /* At compaction (warn tier), the same policies apply; read_secret stays whole. */
    uint64_t total = ck_estimate_history(b.h, CK_EST_DEFAULT);
    ck_compactor_free(k);
    policies[0].tool = "py*";
    o.context_window = (uint64_t)((double)total / 0.65);
    o.session_id = "retain-compact";
    o.keep_tail = 1;
    o.tool_offload_threshold = 0;
    k = ck_compactor_new(&o, &err);
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, b.h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_WARN);
    const char *rec = ck_compaction_record(c, NULL);
    OK(rec && strstr(rec, "\"tool_call_id\":\"c1\"") && strstr(rec, "\"tool_call_id\":\"c2\""));
    OK(rec && !strstr(rec, "\"tool_call_id\":\"c3\""));
    const ck_view *cv = ck_compaction_view(c);
    for (size_t i = 0; i < ck_view_count(cv); i++) {
        ck_view_get(cv, i, &m);
        if (m.src == 6) INT_EQ(m.op, CK_OP_KEEP);
        if (m.src == 2) {
            INT_EQ(m.op, CK_OP_EDIT);
            OK(strstr(m.parts[0].part.text, "AssertionError") != NULL);
        }
    }
    ck_compaction_free(c);
    ck_compactor_free(k);
    build_free(&b);
    free(log);
    free(files);
}

/* Line counts and the "[... N lines ...]" gaps of previews: with and without a final newline,
 * CRLF, lines of every length around the word size, and an output with error lines. */
TEST(previews_count_lines) {
    size_t cap = 200000, n = 0;
    char *t = malloc(cap);
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    for (int i = 0; i < 1500; i++)
        n += (size_t)snprintf(t + n, cap - n, "%.*s\n", i % 19, "abcdefghijklmnopqrstuvwxyz");
    add_call(&b, "a", "cat", t); /* message 1 */
    t[n - 1] = '\0';
    add_call(&b, "b", "cat", t); /* message 3 */
    n = 0;
    for (int i = 0; i < 700; i++)
        n += (size_t)snprintf(t + n, cap - n, "row %d of the listing\r\n", i);
    add_call(&b, "c", "cat", t); /* message 5 */
    n = 0;
    for (int i = 0; i < 900; i++)
        n += (size_t)snprintf(t + n, cap - n,
                              i == 300 || i == 600 ? "src/x.c:%d: error: bad\n"
                                                   : "compiling unit %d\n",
                              i);
    snprintf(t + n, cap - n, "make: *** [all] Error 1");
    add_call(&b, "d", "make", t); /* message 7 */
    ck_compactor_options o = base_options("lines");
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    char *ph = offload_text(k, b.h, 1);
    OK(ph && strstr(ph, ": 1500 lines, ") && strstr(ph, "[... 1480 lines ...]\n"));
    free(ph);
    ph = offload_text(k, b.h, 3);
    OK(ph && strstr(ph, ": 1500 lines, ") && strstr(ph, "[... 1480 lines ...]\n"));
    free(ph);
    ph = offload_text(k, b.h, 5);
    OK(ph && strstr(ph, ": 700 lines, ") && strstr(ph, "[... 680 lines ...]\n"));
    free(ph);
    /* A command's output: its error lines and its last lines are shown, with the gaps counted. */
    ph = offload_text(k, b.h, 7);
    OK(ph && strstr(ph, ": 901 lines, "));
    OK(ph && strstr(ph, "[... 290 lines ...]\nsrc/x.c:300: error: bad\n[... 299 lines ...]\n"
                        "src/x.c:600: error: bad\n[... 290 lines ...]\ncompiling unit 891\n"));
    OK(ph && strstr(ph, "make: *** [all] Error 1\n"));
    free(ph);
    ck_compactor_free(k);
    build_free(&b);
    free(t);
}

TEST(retention_zero_means_zero_and_bad_options_are_named) {
    char *log = test_log(200);
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    add_text(&b, CK_ROLE_USER, "Run the tests.");
    add_call(&b, "z1", "pytest", log);
    ck_retention none[] = {{NULL, 0, 0, 0, 0, 0}}; /* NULL matches every tool */
    ck_compactor_options o = base_options("zero");
    o.retention = none;
    o.n_retention = 1;
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    char *t = offload_text(k, b.h, 2);
    OK(t && strstr(t, "preview: none"));
    OK(t && !strstr(t, "test_case"));
    /* The stored text is still whole. */
    char *back = NULL;
    size_t len = 0;
    INT_EQ(ck_compactor_read_evidence(k, "z1", 2, 0, 100000, &back, &len, &err), CK_OK);
    OK(len == strlen(log) && memcmp(back, log, len) == 0);
    ck_free(back);
    free(t);
    ck_compactor_free(k);
    o.retention = NULL;
    OK(ck_compactor_new(&o, &err) == NULL);
    INT_EQ(err.code, CK_EINVAL);
    STR_EQ(err.where, "retention");
    build_free(&b);
    free(log);
}

/* ---- an evidence backend of the host's ---- */

typedef struct memstore {
    char *keys[64], *vals[64];
    size_t lens[64];
    int n, puts, gets;
    int fail_put, fail_get;
} memstore;

static int mem_put(void *ctx, const char *key, const char *data, size_t len, ck_error *err) {
    memstore *m = ctx;
    m->puts++;
    if (m->fail_put) {
        snprintf(err->where, sizeof err->where, "bucket is read-only");
        return CK_EIO;
    }
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->keys[i], key) == 0) return CK_EINVAL; /* the core never overwrites */
    if (m->n == 64) return CK_EIO;
    m->keys[m->n] = strdup(key);
    m->vals[m->n] = malloc(len ? len : 1);
    memcpy(m->vals[m->n], data, len);
    m->lens[m->n++] = len;
    return CK_OK;
}

static int mem_get(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err) {
    memstore *m = ctx;
    m->gets++;
    if (m->fail_get) {
        snprintf(err->where, sizeof err->where, "network unreachable");
        return CK_EIO;
    }
    for (int i = 0; i < m->n; i++) {
        if (strcmp(m->keys[i], key) != 0) continue;
        *out = ck_malloc(m->lens[i]);
        if (!*out) return CK_ENOMEM;
        memcpy(*out, m->vals[i], m->lens[i]);
        *out_len = m->lens[i];
        return CK_OK;
    }
    return CK_OK;
}

static void mem_free(memstore *m) {
    for (int i = 0; i < m->n; i++) {
        free(m->keys[i]);
        free(m->vals[i]);
    }
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

TEST(backend_holds_the_evidence) {
    char *log = test_log(300), *files = listing(300);
    static const char *const ids[] = {"call/../../x", "b1", "B1"};
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    add_text(&b, CK_ROLE_USER, "Fix the parser.");
    add_call(&b, ids[0], "pytest", log);
    add_call(&b, ids[1], "ls", files);
    add_call(&b, ids[2], "ls", log);
    add_text(&b, CK_ROLE_ASSISTANT, "Looking at the failures now.");
    memstore mem;
    memset(&mem, 0, sizeof mem);
    ck_evidence_backend be = {.ctx = &mem, .put = mem_put, .get = mem_get};
    ck_compactor_options o = base_options("back/end");
    o.backend = &be;
    o.keep_tail = 1;
    o.context_window = (uint64_t)((double)ck_estimate_history(b.h, CK_EST_DEFAULT) / 0.65);
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    OK(k != NULL);
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, b.h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_WARN);
    INT_EQ(mem.n, 3);
    /* Keys are the local store's relative names: one folder per session, no escape, and ids
     * that differ only in case stay apart. */
    for (int i = 0; i < mem.n; i++) {
        OK(strncmp(mem.keys[i], "tool_results/", 13) == 0);
        OK(strstr(mem.keys[i], "/../") == NULL && mem.keys[i][0] != '/');
        OK(strchr(mem.keys[i] + 13, '/') == strrchr(mem.keys[i], '/'));
    }
    OK(strcmp(mem.keys[1], mem.keys[2]) != 0);
    /* Nothing went to the local store; the audit log did. */
    char path[512];
    snprintf(path, sizeof path, "%s/tool_results/back_end~e04a81830005e2b7", store_dir);
    OK(!is_dir(path));
    snprintf(path, sizeof path, "%s/compactions", store_dir);
    OK(is_dir(path));
    /* Placeholders state the key. */
    const char *rec = ck_compaction_record(c, NULL);
    OK(rec && strstr(rec, "\"path\":\"tool_results/back_end~") != NULL);
    ck_compaction_free(c);

    /* Reads page through get(): exact bytes by id, by key, and in pages. */
    for (int i = 0; i < 3; i++) {
        const char *want = i == 1 ? files : log;
        char *back = NULL;
        size_t len = 0;
        INT_EQ(ck_compactor_read_evidence(k, ids[i], strlen(ids[i]), 0, 1u << 20, &back, &len,
                                          &err),
               CK_OK);
        OK(len == strlen(want) && memcmp(back, want, len) == 0);
        ck_free(back);
        INT_EQ(ck_compactor_read_evidence(k, mem.keys[i], strlen(mem.keys[i]), 0, 1u << 20,
                                          &back, &len, &err),
               CK_OK);
        OK(len == strlen(want));
        ck_free(back);
    }
    char *page = NULL;
    size_t len = 0;
    INT_EQ(ck_compactor_read_evidence(k, "b1", 2, 10, 2, &page, &len, &err), CK_OK);
    STR_EQ(page, "src/module_0010/implementation_file.c\nsrc/module_0011/implementation_file.c\n");
    ck_free(page);
    INT_EQ(ck_compactor_read_evidence(k, "nope", 4, 0, 1, &page, &len, &err), CK_EINVAL);
    INT_EQ(ck_compactor_read_evidence(k, "tool_results/other/b1.txt", 25, 0, 1, &page, &len,
                                      &err),
           CK_EINVAL);

    /* Search: one ref, and the whole session (what the compactor stored). */
    char *hits = NULL;
    INT_EQ(ck_compactor_search_evidence(k, "b1", 2, "module_0299", 0, &hits, &len, &err), CK_OK);
    OK(hits && strstr(hits, "\"line\":299")); /* counted from 0 */
    ck_free(hits);
    INT_EQ(ck_compactor_search_evidence(k, NULL, 0, "AssertionError", 0, &hits, &len, &err),
           CK_OK);
    OK(hits && strstr(hits, "\"ref\":\"call/../../x\"") && strstr(hits, "\"ref\":\"B1\""));
    OK(hits && !strstr(hits, "\"ref\":\"b1\""));
    ck_free(hits);

    /* A get that fails is an I/O error naming the key and the reason. */
    mem.fail_get = 1;
    INT_EQ(ck_compactor_read_evidence(k, "b1", 2, 0, 1, &page, &len, &err), CK_EIO);
    OK(strstr(err.where, "network unreachable") != NULL);
    mem.fail_get = 0;
    ck_compactor_free(k);
    mem_free(&mem);
    build_free(&b);
    free(log);
    free(files);
}

TEST(backend_failures_fail_open) {
    char *log = test_log(300);
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    add_text(&b, CK_ROLE_USER, "Fix the parser.");
    add_call(&b, "f1", "pytest", log);
    add_call(&b, "f2", "pytest", log);
    add_text(&b, CK_ROLE_ASSISTANT, "Done.");
    memstore mem;
    memset(&mem, 0, sizeof mem);
    mem.fail_put = 1;
    ck_evidence_backend be = {.ctx = &mem, .put = mem_put, .get = mem_get};
    ck_compactor_options o = base_options("failing");
    o.backend = &be;
    o.keep_tail = 1;
    o.context_window = (uint64_t)((double)ck_estimate_history(b.h, CK_EST_DEFAULT) / 0.65);
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, b.h, 0, NULL, NULL, &c, &err), CK_OK);
    /* The outputs stay; the record says which and why. */
    const char *rec = ck_compaction_record(c, NULL);
    OK(rec && strstr(rec, "offload of f1 failed") && strstr(rec, "bucket is read-only"));
    const ck_view *v = ck_compaction_view(c);
    ck_out_msg m;
    for (size_t i = 0; i < ck_view_count(v); i++) {
        ck_view_get(v, i, &m);
        OK(m.op == CK_OP_KEEP);
    }
    ck_compaction_free(c);
    /* A tool-time offload fails open too, and says why through err. */
    ck_view *one = NULL;
    INT_EQ(ck_compactor_offload(k, b.h, 2, &one, &err), CK_OK);
    INT_EQ(err.code, CK_EIO);
    ck_view_get(one, 0, &m);
    INT_EQ(m.op, CK_OP_KEEP);
    ck_view_free(one);
    ck_compactor_free(k);
    /* A backend without get is refused. */
    ck_evidence_backend half = {.ctx = &mem, .put = mem_put, .get = NULL};
    o.backend = &half;
    OK(ck_compactor_new(&o, &err) == NULL);
    STR_EQ(err.where, "backend");
    mem_free(&mem);
    build_free(&b);
    free(log);
}

/* ---- a token counter of the host's ---- */

typedef struct counter {
    int calls;
    int refuse;
} counter;

/* One token per 3 bytes, rounded up: a stand-in for a real tokenizer. */
static uint64_t count_thirds(void *ctx, const char *text, size_t len) {
    counter *c = ctx;
    c->calls++;
    (void)text;
    return c->refuse ? UINT64_MAX : (len + 2) / 3;
}

TEST(counter_is_called_once_per_message) {
    counter cnt = {0, 0};
    ck_counter host = {count_thirds, &cnt};
    char *files = listing(20);
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    add_text(&b, CK_ROLE_SYSTEM, "You are a coding agent.");
    add_text(&b, CK_ROLE_USER, "List the files.");
    /* The counter sees the message's strings joined: name, id, text. */
    uint64_t t = ck_count_message(b.h, 1, &host);
    INT_EQ(t, (strlen("List the files.") + 2) / 3 + CK_MESSAGE_OVERHEAD);
    INT_EQ(ck_count_history(b.h, &host),
           CK_REQUEST_OVERHEAD + 2 * CK_MESSAGE_OVERHEAD + (strlen("You are a coding agent.") + 2) / 3 +
               (strlen("List the files.") + 2) / 3);
    cnt.refuse = 1;
    INT_EQ(ck_count_message(b.h, 1, &host), UINT64_MAX);
    INT_EQ(ck_count_history(b.h, &host), UINT64_MAX);
    cnt.refuse = 0;
    INT_EQ(ck_count_message(b.h, 9, &host), UINT64_MAX);

    ck_compactor_options o = base_options("counted");
    o.counter = host;
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    /* An agent loop: 30 turns, the whole history handed over before each model call. */
    char ids[30][16];
    cnt.calls = 0;
    for (int turn = 0; turn < 30; turn++) {
        snprintf(ids[turn], sizeof ids[turn], "t%d", turn);
        add_call(&b, ids[turn], "ls", files);
        ck_compaction *c = NULL;
        INT_EQ(ck_compactor_compact(k, b.h, 0, NULL, NULL, &c, &err), CK_OK);
        INT_EQ(ck_compaction_tier(c), CK_TIER_NONE);
        if (turn == 29) {
            /* What the compactor measured is what the counter says. */
            INT_EQ(ck_compaction_tokens_before(c), ck_count_history(b.h, &host));
        }
        ck_compaction_free(c);
    }
    /* 62 messages: each counted once (the comparison above asked again for all of them). */
    INT_EQ(cnt.calls, 62 + 62);
    /* A counter that cannot answer leaves the estimator in charge, and is asked again later
     * (a refusal is not cached). */
    ck_compactor_free(k);
    k = ck_compactor_new(&o, &err);
    cnt.refuse = 1;
    cnt.calls = 0;
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, b.h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tokens_before(c), ck_estimate_history(b.h, CK_EST_DEFAULT));
    ck_compaction_free(c);
    cnt.refuse = 0;
    int before = cnt.calls;
    INT_EQ(ck_compactor_compact(k, b.h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(cnt.calls - before, 62);
    INT_EQ(ck_compaction_tokens_before(c), ck_count_history(b.h, &host));
    ck_compaction_free(c);
    ck_compactor_free(k);
    build_free(&b);
    free(files);
}

/* The cache changes no figure: a compactor that has seen the messages before and a fresh one
 * measure the same, at every tier. */
TEST(cached_costs_equal_fresh_costs) {
    char *log = test_log(200);
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    add_text(&b, CK_ROLE_USER, "Fix the parser.");
    char ids[12][16];
    for (int i = 0; i < 12; i++) {
        snprintf(ids[i], sizeof ids[i], "k%d", i);
        add_call(&b, ids[i], i % 2 ? "pytest" : "ls", log);
    }
    uint64_t total = ck_estimate_history(b.h, CK_EST_DEFAULT);
    const double fill[] = {0.5, 0.65, 0.75, 0.85};
    ck_error err;
    for (int f = 0; f < 4; f++) {
        ck_compactor_options o = base_options(NULL);
        o.context_window = (uint64_t)((double)total / fill[f]);
        ck_compactor *warm = ck_compactor_new(&o, &err);
        ck_compaction *c = NULL;
        /* Warm the cache on a prefix, then on the whole. */
        ck_history *prefix = history_prefix(b.h, 9);
        INT_EQ(ck_compactor_begin(warm, prefix, 0, &c, &err), CK_OK);
        ck_compaction_free(c);
        ck_history_free(prefix);
        INT_EQ(ck_compactor_begin(warm, b.h, 17, &c, &err), CK_OK);
        uint64_t warm_before = ck_compaction_tokens_before(c);
        ck_tier warm_tier = ck_compaction_tier(c);
        ck_compaction_free(c);
        ck_compactor *fresh = ck_compactor_new(&o, &err);
        INT_EQ(ck_compactor_begin(fresh, b.h, 17, &c, &err), CK_OK);
        INT_EQ(ck_compaction_tokens_before(c), warm_before);
        INT_EQ(ck_compaction_tier(c), warm_tier);
        ck_compaction_free(c);
        ck_compactor_free(warm);
        ck_compactor_free(fresh);
    }
    build_free(&b);
    free(log);
}

/* Emergency folds the old span with no model and keeps the newest turns that fit, not just
 * the tail: no cliff. */
TEST(emergency_keeps_the_newest_turns_that_fit) {
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    add_text(&b, CK_ROLE_SYSTEM, "You are a coding agent.");
    add_text(&b, CK_ROLE_USER, "Fix the parser.");
    char ids[60][16];
    for (int i = 0; i < 60; i++) {
        snprintf(ids[i], sizeof ids[i], "e%d", i);
        add_call(&b, ids[i], "grep", "src/parser.c:120: if (token == NULL) return -1; /* the "
                                     "unchecked branch that the failing test reaches */");
    }
    uint64_t total = ck_estimate_history(b.h, CK_EST_DEFAULT);
    ck_compactor_options o = base_options("emergency");
    o.context_window = (uint64_t)((double)total / 0.97);
    o.summary_max_tokens = 256;
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, b.h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_EMERGENCY);
    /* Filled up to the target (so the next compaction waits for real growth), far more than
     * pinned + checkpoint + a two-message tail. */
    uint64_t limit = (uint64_t)((double)o.context_window * 0.50);
    OK(ck_compaction_tokens_after(c) <= limit);
    OK(ck_compaction_tokens_after(c) > limit * 3 / 4);
    const ck_view *v = ck_compaction_view(c);
    OK(ck_view_count(v) > 40);
    ck_out_msg m;
    ck_view_get(v, ck_view_count(v) - 1, &m);
    INT_EQ(m.src, b.h ? ck_history_count(b.h) - 1 : 0);
    ck_compaction_free(c);
    ck_compactor_free(k);
    build_free(&b);
}

/* A host that begins and finishes itself (as the bindings do) can make the extractive
 * summarizer the default, as ck_compactor_compact() without a summarizer does. */
TEST(use_extractive_declines_the_summary) {
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    add_text(&b, CK_ROLE_SYSTEM, "You are a coding agent.");
    add_text(&b, CK_ROLE_USER, "Fix the parser.");
    char ids[40][16];
    for (int i = 0; i < 40; i++) {
        snprintf(ids[i], sizeof ids[i], "x%d", i);
        add_call(&b, ids[i], "grep", "src/parser.c:120: if (token == NULL) return -1;");
    }
    ck_compactor_options o = base_options("use-extractive");
    o.context_window = (uint64_t)((double)ck_estimate_history(b.h, CK_EST_DEFAULT) / 0.85);
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_begin(k, b.h, 0, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_FULL);
    OK(ck_compaction_needs_summary(c));
    INT_EQ(ck_compaction_use_extractive(c), CK_OK);
    OK(!ck_compaction_needs_summary(c));
    INT_EQ(ck_compactor_finish(k, c, &err), CK_OK);
    const char *rec = ck_compaction_record(c, NULL);
    OK(rec && strstr(rec, "\"fallback\":null") && strstr(rec, "\"tier\":\"full\""));
    OK(ck_compaction_tokens_after(c) < ck_compaction_tokens_before(c));
    INT_EQ(ck_compaction_use_extractive(c), CK_ESTATE);
    INT_EQ(ck_compaction_use_extractive(NULL), CK_EINVAL);
    ck_compaction_free(c);
    ck_compactor_free(k);
    build_free(&b);
}

TEST(allocation_failures) {
    char *log = test_log(150);
    build b = {ck_history_new(CK_HISTORY_TRUSTED_UTF8), {0}, 0};
    add_text(&b, CK_ROLE_USER, "Fix the parser.");
    add_call(&b, "a1", "pytest", log);
    add_call(&b, "a2", "ls", log);
    add_text(&b, CK_ROLE_ASSISTANT, "Done.");
    uint64_t total = ck_estimate_history(b.h, CK_EST_DEFAULT);
    ck_retention policies[] = {{"py*", 2, 2, 2, 0, 0}, {"ls", 0, 0, 0, 0, CK_RETAIN_NEVER_OFFLOAD}};
    counter cnt = {0, 0};
    int round = 0;
    FAIL_EACH_ALLOC({
        memstore mem;
        memset(&mem, 0, sizeof mem);
        ck_evidence_backend be = {.ctx = &mem, .put = mem_put, .get = mem_get};
        char session[32];
        snprintf(session, sizeof session, "oom%d", round++);
        ck_compactor_options o = base_options(session);
        o.context_window = (uint64_t)((double)total / 0.75);
        o.keep_tail = 1;
        o.retention = policies;
        o.n_retention = 2;
        o.backend = &be;
        o.counter.count = count_thirds;
        o.counter.ctx = &cnt;
        ck_error err;
        ck_compactor *k = ck_compactor_new(&o, &err);
        if (k) {
            ck_compaction *c = NULL;
            if (ck_compactor_compact(k, b.h, 0, NULL, NULL, &c, &err) == CK_OK)
                ck_compaction_free(c);
            char *hits = NULL;
            if (ck_compactor_search_evidence(k, NULL, 0, "Error", 0, &hits, NULL, &err) == CK_OK)
                ck_free(hits);
            ck_compactor_free(k);
        }
        mem_free(&mem);
    });
    OK(round > 10);
    build_free(&b);
    free(log);
}

static void setup(void) {
    snprintf(store_dir, sizeof store_dir, "/tmp/ck_test_host_XXXXXX");
    OK(mkdtemp(store_dir) != NULL);
}

HARNESS_MAIN(setup(); RUN(retention_policies_choose_the_preview) RUN(previews_count_lines)
                 RUN(retention_zero_means_zero_and_bad_options_are_named)
                     RUN(backend_holds_the_evidence) RUN(backend_failures_fail_open)
                         RUN(counter_is_called_once_per_message)
                             RUN(cached_costs_equal_fresh_costs)
                                 RUN(emergency_keeps_the_newest_turns_that_fit)
                                 RUN(use_extractive_declines_the_summary)
                                 RUN(allocation_failures)
                                 h_remove_tree(store_dir))
