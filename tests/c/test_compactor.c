/* The compactor: tiers, bounded views, checkpoints, fallbacks, sessions and the audit log. */
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static char store_dir[256];

static void make_store(void) {
    snprintf(store_dir, sizeof store_dir, "/tmp/ck_test_compactor_XXXXXX");
    OK(mkdtemp(store_dir) != NULL);
}

static ck_compactor *compactor(uint64_t window, const char *session) {
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = window;
    o.store_dir = store_dir;
    o.session_id = session;
    o.estimator = CK_EST_CHARS4;
    o.keep_tail = 4;
    o.summary_max_tokens = 300;
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    OK(k != NULL);
    return k;
}

/* A synthetic agent session in OpenAI JSON: a system prompt, a task, then `turns` turns of
 * assistant call + tool result (every `big`-th output large) + a user note every 5 turns. */
static char *session_json(int turns, int big, size_t big_bytes) {
    size_t cap = 4096 + (size_t)turns * (600 + big_bytes);
    char *j = malloc(cap);
    size_t at = 0;
    at += (size_t)snprintf(j + at, cap - at,
                           "[{\"role\":\"system\",\"content\":\"You are a coding agent.\"},"
                           "{\"role\":\"user\",\"content\":\"Fix the failing test in "
                           "src/parser.c. Never touch the vendor/ folder.\"}");
    for (int t = 0; t < turns; t++) {
        at += (size_t)snprintf(
            j + at, cap - at,
            ",{\"role\":\"assistant\",\"content\":\"Step %d: I will run the tests again to "
            "check parser behaviour.\",\"tool_calls\":[{\"id\":\"call_%d\",\"type\":\"function\","
            "\"function\":{\"name\":\"bash\",\"arguments\":\"{\\\"command\\\":\\\"make test "
            "T=%d\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_%d\",\"content\":\"",
            t, t, t, t);
        size_t n = (big && t % big == 0) ? big_bytes : 300;
        for (size_t i = 0; i < n; i++) j[at++] = (i % 60 == 59) ? ' ' : (char)('a' + (i + t) % 26);
        at += (size_t)snprintf(j + at, cap - at, "%s\"}",
                               t % 3 == 0 ? " error: test_parse failed" : " ok");
        if (t % 5 == 4)
            at += (size_t)snprintf(j + at, cap - at,
                                   ",{\"role\":\"user\",\"content\":\"Note %d: always keep the "
                                   "public API stable.\"}",
                                   t);
    }
    snprintf(j + at, cap - at, "]");
    return j;
}

TEST(options_are_checked) {
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    ck_error err;
    OK(ck_compactor_new(&o, &err) == NULL);
    INT_EQ(err.code, CK_EINVAL);
    STR_EQ(err.where, "context_window");
    o.context_window = 1000;
    o.warn = 0.9;
    OK(ck_compactor_new(&o, &err) == NULL);
    STR_EQ(err.where, "warn");
    o.warn = NAN;
    OK(ck_compactor_new(&o, &err) == NULL);
    o.warn = 0;
    o.emergency = 1.5;
    OK(ck_compactor_new(&o, &err) == NULL);
    STR_EQ(err.where, "emergency");
    o.emergency = 0;
    o.session_id = "";
    OK(ck_compactor_new(&o, &err) == NULL);
    STR_EQ(err.where, "session_id");
    o.session_id = NULL;
    o.store_dir = store_dir;
    ck_compactor *k = ck_compactor_new(&o, &err);
    OK(k != NULL);
    ck_compactor_options got;
    ck_compactor_get_options(k, &got);
    OK(got.warn == 0.60 && got.soft == 0.70 && got.full == 0.80 && got.emergency == 0.95);
    INT_EQ(got.keep_tail, 6);
    INT_EQ(got.offload_threshold, 4000);
    INT_EQ(got.summary_max_tokens, 256);
    INT_EQ(strlen(ck_compactor_session_id(k)), 16);
    ck_compactor_free(k);
    ck_compactor_free(NULL);
    STR_EQ(ck_tier_name(CK_TIER_EMERGENCY), "emergency");
    STR_EQ(ck_checkpoint_marker(), "[Context Compaction]");
}

/* Materializes a compaction's view as JSON and re-reads it (for pair checks and content). */
static char *view_json(ck_history *h, ck_compaction *c) {
    ck_error err;
    ck_format f;
    ck_history_format(h, CK_FORMAT_AUTO, &f, &err);
    return ck_json_write(h, ck_compaction_view(c), f, 0, &err);
}

TEST(none_tier_is_identity) {
    char *j = session_json(3, 0, 0);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    ck_compactor *k = compactor(100000, "none");
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_NONE);
    OK(ck_view_is_identity(ck_compaction_view(c)));
    OK(ck_compaction_record(c, NULL) == NULL);
    INT_EQ(ck_compaction_tokens_before(c), ck_compaction_tokens_after(c));
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

TEST(warn_offloads_outside_the_tail) {
    char *j = session_json(8, 2, 6000); /* outputs of turns 0, 2, 4, 6 are large */
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    /* A window that puts the history in the warn band. */
    ck_compactor *k = compactor((uint64_t)((double)total / 0.65), "warn");
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_WARN);
    size_t len;
    const char *rec = ck_compaction_record(c, &len);
    OK(rec != NULL);
    OK(rec && strstr(rec, "\"tool_call_id\":\"call_0\"") && strstr(rec, "\"tool_call_id\":\"call_4\""));
    /* The tail (the last 4 messages and their turn) keeps its output. */
    OK(rec && !strstr(rec, "\"tool_call_id\":\"call_6\""));
    OK(ck_compaction_tokens_after(c) < ck_compaction_tokens_before(c));
    /* Counts are written as plain decimal integers, as cJSON prints them. */
    char want[96];
    snprintf(want, sizeof want, "\"tokens_before\":%llu,\"tokens_after\":%llu,",
             (unsigned long long)ck_compaction_tokens_before(c),
             (unsigned long long)ck_compaction_tokens_after(c));
    OK(rec && strstr(rec, want));
    snprintf(want, sizeof want, "\"msgs_before\":%zu,", ck_history_count(h));
    OK(rec && strstr(rec, want));
    OK(rec && strstr(rec, "\"bytes\":6025,\"lines\":1}"));
    char *out = view_json(h, c);
    OK(out && strstr(out, "[ctxkeel: tool output offloaded]"));
    INT_EQ(count_issues(out, CK_FORMAT_AUTO, -1), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/tool_results/warn/call_0.txt", store_dir);
    struct stat st;
    OK(stat(path, &st) == 0 && st.st_size > 6000 && (st.st_mode & 0777) == 0600);
    ck_free(out);
    ck_compaction_free(c);
    /* The next call re-applies the placeholders without a new record. */
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    OK(ck_compaction_record(c, NULL) == NULL);
    out = view_json(h, c);
    OK(out && strstr(out, "[ctxkeel: tool output offloaded]"));
    ck_free(out);
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

/* A compaction dropped before finish leaves the session state as it was (its offloads are
 * recorded by the next compaction that makes them); a reset while one is open is harmless. */
TEST(unfinished_compactions_change_nothing) {
    char *j = session_json(8, 2, 6000);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    ck_compactor *k = compactor((uint64_t)((double)total / 0.65), "unfinished");
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_begin(k, h, 0, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_WARN);
    ck_compaction_free(c);
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    const char *rec = ck_compaction_record(c, NULL);
    OK(rec && strstr(rec, "\"tool_call_id\":\"call_0\""));
    ck_compaction_free(c);
    ck_compactor_reset(k);
    INT_EQ(ck_compactor_begin(k, h, 0, &c, &err), CK_OK);
    ck_compactor_reset(k);
    INT_EQ(ck_compactor_finish(k, c, &err), CK_OK);
    rec = ck_compaction_record(c, NULL);
    OK(rec && strstr(rec, "\"tool_call_id\":\"call_0\""));
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

/* Agents that reuse a tool-call id for another output: the second output is stored under its
 * own ref and reads back, instead of the first one standing in for it. */
TEST(reused_ids_keep_both_outputs) {
    static char a[11001], b[11001];
    memset(a, 'a', 11000);
    memset(b, 'b', 11000);
    a[11000] = b[11000] = '\0';
    char *j = malloc(30000);
    snprintf(j, 30000,
             "[{\"role\":\"user\",\"content\":\"task\"},"
             "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"call_0\",\"function\":{\"name\":"
             "\"cat\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_0\","
             "\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"next\"},"
             "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"call_0\",\"function\":{\"name\":"
             "\"cat\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_0\","
             "\"content\":\"%s\"},{\"role\":\"user\",\"content\":\"1\"},{\"role\":\"user\","
             "\"content\":\"2\"},{\"role\":\"user\",\"content\":\"3\"},{\"role\":\"user\","
             "\"content\":\"4\"}]",
             a, b);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    OK(h != NULL);
    /* The id repeats, which check_pairs reports; the compactor repairs a copy and goes on. */
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    ck_compactor *k = compactor((uint64_t)((double)total / 0.65), "reused");
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    ck_compaction_free(c);
    /* Both outputs through the tool-time gate under the same id. */
    ck_history *g = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TOOL_RESULT;
    p.id = "gate_0";
    p.id_len = 6;
    p.text = a;
    p.text_len = 11000;
    ck_history_add_message(g, CK_ROLE_TOOL, 0);
    ck_history_add_part(g, &p, NULL);
    p.text = b;
    ck_history_add_message(g, CK_ROLE_TOOL, 0);
    ck_history_add_part(g, &p, NULL);
    ck_view *v1 = NULL, *v2 = NULL;
    INT_EQ(ck_compactor_offload(k, g, 0, &v1, &err), CK_OK);
    INT_EQ(ck_compactor_offload(k, g, 1, &v2, &err), CK_OK);
    ck_out_msg m1, m2;
    ck_view_get(v1, 0, &m1);
    ck_view_get(v2, 0, &m2);
    OK(m1.op == CK_OP_EDIT && m2.op == CK_OP_EDIT);
    /* The second placeholder names a ref of its own, and that ref reads back the b's. */
    const char *ref = m2.n_parts ? strstr(m2.parts[0].part.text, "ref=\"") : NULL;
    OK(ref != NULL);
    if (ref) {
        ref += 5;
        const char *end = strchr(ref, '"');
        OK(end && (size_t)(end - ref) > 6 && strncmp(ref, "gate_0#", 7) == 0);
        char *back = NULL;
        size_t len = 0;
        INT_EQ(ck_compactor_read_evidence(k, ref, (size_t)(end - ref), 0, 10, &back, &len, &err),
               CK_OK);
        OK(len == 11000 && back && back[0] == 'b');
        ck_free(back);
    }
    char *first = NULL;
    size_t len = 0;
    INT_EQ(ck_compactor_read_evidence(k, "gate_0", 6, 0, 10, &first, &len, &err), CK_OK);
    OK(len == 11000 && first && first[0] == 'a');
    ck_free(first);
    ck_view_free(v1);
    ck_view_free(v2);
    ck_history_free(g);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

/* When the pinned messages alone are over the soft limit, a record says so, once; when they
 * are over the window, compact() fails and says how much they need. */
TEST(pinned_alone_too_big_is_recorded_once) {
    char *big = malloc(4100);
    memset(big, 'x', 4000);
    big[4000] = '\0';
    char *j = malloc(9000);
    snprintf(j, 9000, "[{\"role\":\"system\",\"content\":\"%s\"},{\"role\":\"user\","
                      "\"content\":\"%s\"}]", big, big);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    ck_compactor *k = compactor(2500, "pinned"); /* 2000 tokens of pinned messages: 80% */
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_FULL);
    const char *rec = ck_compaction_record(c, NULL);
    OK(rec && strstr(rec, "more than the soft limit"));
    OK(ck_view_is_identity(ck_compaction_view(c)));
    OK(ck_compaction_tokens_after(c) <= 2500);
    ck_compaction_free(c);
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    OK(ck_compaction_record(c, NULL) == NULL);
    ck_compaction_free(c);
    ck_compactor_free(k);
    k = compactor(500, "pinned-over");
    c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_EOVERFLOW);
    OK(c == NULL);
    INT_EQ(err.code, CK_EOVERFLOW);
    OK(strstr(err.where, "need 2000 tokens") && strstr(err.where, "the window is 500"));
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
    free(big);
}

/* The tool-time gate: a 50 KB single-line output comes back as a placeholder whose preview is
 * capped in bytes, with where the full text is; a short output is kept as it is. */
TEST(offload_gate_caps_previews) {
    size_t big = 50000;
    char *text = malloc(big + 1);
    for (size_t i = 0; i < big; i++) text[i] = (char)('a' + i % 26);
    text[big] = '\0';
    ck_history *h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TOOL_RESULT;
    p.flags = CK_PART_OPENAI;
    p.id = "../../escape";
    p.id_len = 12;
    p.text = text;
    p.text_len = big;
    ck_history_add_message(h, CK_ROLE_TOOL, CK_MSG_STRING_CONTENT);
    ck_history_add_part(h, &p, NULL);
    p.id = "small";
    p.id_len = 5;
    p.text_len = 100;
    ck_history_add_message(h, CK_ROLE_TOOL, CK_MSG_STRING_CONTENT);
    ck_history_add_part(h, &p, NULL);
    ck_compactor *k = compactor(100000, "gate");
    ck_view *v = NULL;
    ck_error err;
    INT_EQ(ck_compactor_offload(k, h, 0, &v, &err), CK_OK);
    ck_out_msg m;
    ck_view_get(v, 0, &m);
    INT_EQ(m.op, CK_OP_EDIT);
    OK(m.n_parts == 1 && m.parts[0].replaced);
    OK(m.parts[0].part.text_len < 3000);
    OK(strstr(m.parts[0].part.text, "[ctxkeel: tool output offloaded]") != NULL);
    OK(strstr(m.parts[0].part.text, "50000 bytes") != NULL);
    OK(strstr(m.parts[0].part.text, "more bytes on this line") != NULL);
    ck_view_free(v);
    /* The full text reads back exactly, by id. */
    char *back = NULL;
    size_t len = 0;
    INT_EQ(ck_compactor_read_evidence(k, "../../escape", 12, 0, 10, &back, &len, &err), CK_OK);
    OK(len == big && memcmp(back, text, big) == 0);
    ck_free(back);
    INT_EQ(ck_compactor_offload(k, h, 1, &v, &err), CK_OK);
    INT_EQ(ck_view_count(v), 1);
    ck_view_get(v, 0, &m);
    INT_EQ(m.op, CK_OP_KEEP);
    ck_view_free(v);
    INT_EQ(ck_compactor_offload(k, h, 7, &v, &err), CK_EINVAL);
    ck_compactor_free(k);
    ck_history_free(h);
    free(text);
}

typedef struct script {
    const char *reply;
    int calls;
    int fail;
    uint64_t prompt_len;
} script;

static int scripted(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    script *s = ctx;
    s->calls++;
    s->prompt_len = req->prompt_len;
    if (s->fail) return CK_ESUMMARY;
    return ck_compaction_set_summary(c, s->reply, strlen(s->reply));
}

static const char GOOD[] = "## User Intent\nFix the parser test.\n## Execution Progress\nRan "
                           "make test many times.\n## Key Decisions\nKeep vendor/ untouched.\n"
                           "## Tried Solutions\n- reran tests: still failing\n## Next Steps\n"
                           "Inspect src/parser.c line 40.\n## Summary\nWork continues.";

/* Every view: tool-call pairs valid, pinned and newest messages verbatim. */
static void check_view(ck_history *h, ck_compaction *c, const char *src_json) {
    char *out = view_json(h, c);
    OK(out != NULL);
    if (!out) return;
    INT_EQ(count_issues(out, CK_FORMAT_AUTO, -1), 0);
    OK(strstr(out, "You are a coding agent.") != NULL);
    OK(strstr(out, "Never touch the vendor/ folder.") != NULL);
    /* The newest message is the same object (KEEP) at the end. */
    ck_out_msg m;
    const ck_view *v = ck_compaction_view(c);
    ck_view_get(v, ck_view_count(v) - 1, &m);
    INT_EQ(m.op, CK_OP_KEEP);
    INT_EQ(m.src, ck_history_count(h) - 1);
    (void)src_json;
    ck_free(out);
}

TEST(soft_summarizes_and_is_bounded) {
    char *j = session_json(30, 0, 0);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    uint64_t window = (uint64_t)((double)total / 0.75);
    ck_compactor *k = compactor(window, "soft");
    ck_compaction *c = NULL;
    script s = {GOOD, 0, 0, 0};
    INT_EQ(ck_compactor_begin(k, h, 0, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_SOFT);
    OK(ck_compaction_needs_summary(c));
    ck_summary_request req;
    INT_EQ(ck_compaction_request(c, &req), CK_OK);
    OK(req.span_start < req.span_end);
    OK(req.max_tokens == 300);
    OK(strstr(req.prompt, "<<<DATA ") != NULL);
    OK(strstr(req.prompt, "## User Intent") != NULL);
    OK(req.previous == NULL);
    OK(req.prompt_len / 4 < window);
    INT_EQ(scripted(&s, &req, c), CK_OK);
    INT_EQ(ck_compactor_finish(k, c, &err), CK_OK);
    INT_EQ(ck_compactor_finish(k, c, &err), CK_ESTATE);
    OK(ck_compaction_tokens_after(c) <= (uint64_t)(0.70 * (double)window));
    OK(ck_compaction_tokens_after(c) < ck_compaction_tokens_before(c));
    check_view(h, c, j);
    char *out = view_json(h, c);
    OK(out && strstr(out, "[Context Compaction]") && strstr(out, "Inspect src/parser.c line 40."));
    /* What the user said mid-session is carried verbatim. */
    OK(out && strstr(out, "Note 4: always keep the public API stable."));
    ck_free(out);
    size_t len;
    const char *rec = ck_compaction_record(c, &len);
    OK(rec && strstr(rec, "\"tier\":\"soft\"") && strstr(rec, "\"fallback\":null"));
    OK(rec && strstr(rec, "\"next_steps\":\"Inspect src/parser.c line 40.\""));
    ck_compaction_free(c);

    /* The next turn costs no model call: the checkpoint is reused. */
    s.calls = 0;
    INT_EQ(ck_compactor_compact(k, h, 0, scripted, &s, &c, &err), CK_OK);
    INT_EQ(s.calls, 0);
    OK(ck_compaction_record(c, NULL) == NULL);
    out = view_json(h, c);
    OK(out && strstr(out, "Inspect src/parser.c line 40."));
    ck_free(out);
    check_view(h, c, j);
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

TEST(bad_summaries_fall_back) {
    static const char *const replies[] = {"", "lorem ipsum without any section", "## Nothing\n"};
    for (int r = 0; r < 4; r++) {
        char *j = session_json(30, 0, 0);
        ck_error err;
        ck_history *h = ck_json_read(j, strlen(j), &err);
        uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
        char session[32];
        snprintf(session, sizeof session, "bad%d", r);
        ck_compactor *k = compactor((uint64_t)((double)total / 0.85), session);
        script s = {r < 3 ? replies[r] : GOOD, 0, r == 3, 0};
        ck_compaction *c = NULL;
        INT_EQ(ck_compactor_compact(k, h, 0, scripted, &s, &c, &err), CK_OK);
        INT_EQ(s.calls, 1);
        INT_EQ(ck_compaction_tier(c), CK_TIER_FULL);
        const char *rec = ck_compaction_record(c, NULL);
        OK(rec && !strstr(rec, "\"fallback\":null"));
        OK(rec && strstr(rec, "\"user_intent\":\""));
        check_view(h, c, j);
        OK(ck_compaction_tokens_after(c) < ck_compaction_tokens_before(c));
        ck_compaction_free(c);
        ck_compactor_free(k);
        ck_history_free(h);
        free(j);
    }
}

TEST(emergency_needs_no_model) {
    char *j = session_json(12, 0, 0);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    ck_compactor *k = compactor(total, "emergency"); /* ratio ~1.0 */
    script s = {GOOD, 0, 0, 0};
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, scripted, &s, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_EMERGENCY);
    INT_EQ(s.calls, 0);
    OK(ck_compaction_tokens_after(c) <= (uint64_t)(0.70 * (double)total));
    check_view(h, c, j);
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

/* Failed results are listed under Tried Solutions whether or not they were offloaded first
 * (the verdict the placeholder worked out is the one the checkpoint uses), and only those. */
TEST(emergency_lists_failures_of_offloaded_outputs) {
    char *j = session_json(24, 2, 6000); /* large: turns 0, 2, 4...; failed: 0, 3, 6... */
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    /* Offloading alone would fit a window of the history's size: a quarter makes it fold. A
     * larger checkpoint lists every failure. */
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = total / 4;
    o.store_dir = store_dir;
    o.session_id = "failures";
    o.estimator = CK_EST_CHARS4;
    o.summary_max_tokens = 4000;
    ck_compactor *k = ck_compactor_new(&o, &err);
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_EMERGENCY);
    char *out = view_json(h, c);
    const char *tried = out ? strstr(out, "Tried Solutions") : NULL;
    OK(tried && strstr(tried, "bash make test T=0: ") && strstr(tried, "bash make test T=3: ") &&
       strstr(tried, "bash make test T=6: "));
    OK(tried && !strstr(tried, "bash make test T=2: ") && !strstr(tried, "bash make test T=4: "));
    const char *rec = ck_compaction_record(c, NULL);
    OK(rec && strstr(rec, "\"tool_call_id\":\"call_0\"") &&
       strstr(rec, "\"tool_call_id\":\"call_2\""));
    ck_free(out);
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

TEST(written_back_view_is_recognized) {
    char *j = session_json(30, 0, 0);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    ck_compactor *k = compactor((uint64_t)((double)total / 0.75), "writeback");
    script s = {GOOD, 0, 0, 0};
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, scripted, &s, &c, &err), CK_OK);
    char *out = view_json(h, c);
    ck_compaction_free(c);
    /* The host keeps the view as its history from now on. */
    ck_history *h2 = ck_json_read(out, strlen(out), &err);
    OK(h2 != NULL);
    s.calls = 0;
    INT_EQ(ck_compactor_compact(k, h2, 0, scripted, &s, &c, &err), CK_OK);
    INT_EQ(s.calls, 0);
    OK(ck_view_is_identity(ck_compaction_view(c)));
    OK(ck_compaction_record(c, NULL) == NULL);
    ck_compaction_free(c);
    ck_history_free(h2);
    ck_free(out);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

TEST(session_resumes_from_the_log) {
    char *j = session_json(30, 0, 0);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    uint64_t window = (uint64_t)((double)total / 0.75);
    ck_compactor *k = compactor(window, "resume");
    script s = {GOOD, 0, 0, 0};
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, scripted, &s, &c, &err), CK_OK);
    char *first = view_json(h, c);
    ck_compaction_free(c);
    ck_compactor_free(k);
    /* A new process: same session and store. */
    k = compactor(window, "resume");
    s.calls = 0;
    INT_EQ(ck_compactor_compact(k, h, 0, scripted, &s, &c, &err), CK_OK);
    INT_EQ(s.calls, 0);
    char *again = view_json(h, c);
    STR_EQ(again, first);
    ck_free(again);
    ck_free(first);
    ck_compaction_free(c);
    /* A rewritten history drops the checkpoint instead of applying it to other messages. */
    const char *rewritten = "[{\"role\":\"user\",\"content\":\"new task\"}]";
    ck_history *other = ck_json_read(rewritten, strlen(rewritten), &err);
    INT_EQ(ck_compactor_compact(k, other, 0, scripted, &s, &c, &err), CK_OK);
    OK(ck_view_is_identity(ck_compaction_view(c)));
    ck_compaction_free(c);
    ck_history_free(other);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

TEST(broken_pairs_are_repaired_in_views) {
    const char *j = "[{\"role\":\"system\",\"content\":\"You are a coding agent.\"},"
                    "{\"role\":\"user\",\"content\":\"Never touch the vendor/ folder.\"},"
                    "{\"role\":\"tool\",\"tool_call_id\":\"ghost\",\"content\":\"orphan\"},"
                    "{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":[{\"id\":\"a\","
                    "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
                    "{\"role\":\"user\",\"content\":\"go on\"}]";
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    ck_compactor *k = compactor(100000, "broken");
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    char *out = view_json(h, c);
    INT_EQ(count_issues(out, CK_FORMAT_AUTO, -1), 0);
    OK(out && !strstr(out, "orphan"));
    ck_free(out);
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
}

/* The agent loop over one real transcript: before every model call, the history so far. Every
 * view is valid, no larger than the input view, and bounded after soft or above. */
static void replay_corpus_file(void *ctx, const char *name, const char *text, size_t len) {
    (void)ctx;
    ck_error err;
    ck_history *h = ck_json_read(text, len, &err);
    OK(h != NULL);
    if (!h) return;
    uint64_t window = ck_estimate_history(h, CK_EST_CHARS4) / 2;
    uint64_t limit = (uint64_t)(0.70 * (double)window);
    ck_compactor *k = compactor(window, name);
    size_t n = ck_history_count(h);
    int tiers[5] = {0}, records = 0;
    for (size_t i = 2; i <= n; i++) {
        ck_history *p = history_prefix(h, i);
        ck_compaction *c = NULL;
        script s = {GOOD, 0, 0, 0};
        INT_EQ(ck_compactor_compact(k, p, 0, scripted, &s, &c, &err), CK_OK);
        if (!c) {
            ck_history_free(p);
            break;
        }
        ck_tier t = ck_compaction_tier(c);
        tiers[t]++;
        OK(s.calls <= 1);
        if (t < CK_TIER_SOFT) INT_EQ(s.calls, 0);
        const char *rec = ck_compaction_record(c, NULL);
        records += rec != NULL;
        /* Bounded unless the record says the newest turn alone is over the limit. */
        if (rec && t >= CK_TIER_SOFT && strstr(rec, "\"summarized\":0,") == NULL &&
            !strstr(rec, "more than the soft limit"))
            OK(ck_compaction_tokens_after(c) <= limit);
        OK(ck_compaction_tokens_after(c) <= ck_compaction_tokens_before(c));
        INT_EQ(view_issues(ck_compaction_view(c), p), 0);
        ck_compaction_free(c);
        ck_history_free(p);
    }
    OK(tiers[CK_TIER_SOFT] + tiers[CK_TIER_FULL] + tiers[CK_TIER_EMERGENCY] > 0);
    OK(records > 0);
    ck_compactor_free(k);
    ck_history_free(h);
}

TEST(corpus_replay_invariants) {
    OK(h_each_corpus("corpus_replay_invariants", replay_corpus_file, NULL) != 0);
}

/* Whether a part's text in the twin session `tb` is the text in session `ta` (a placeholder
 * names its session in the path it states). */
static int same_text(const ck_part *a, const ck_part *b, const char *ta, const char *tb) {
    char *x = malloc(b->text_len + 1);
    size_t n = 0, lb = strlen(tb);
    for (size_t i = 0; i < b->text_len;) {
        if (i + lb <= b->text_len && memcmp(b->text + i, tb, lb) == 0) {
            memcpy(x + n, ta, strlen(ta));
            n += strlen(ta);
            i += lb;
        } else {
            x[n++] = b->text[i++];
        }
    }
    int same = n == a->text_len && memcmp(x, a->text, n) == 0;
    free(x);
    return same;
}

/* Whether two views of one history are the same, message for message and part for part. */
static int same_view(const ck_view *a, const ck_view *b, const char *ta, const char *tb) {
    if (ck_view_count(a) != ck_view_count(b)) return 0;
    for (size_t i = 0; i < ck_view_count(a); i++) {
        ck_out_msg x, y;
        if (ck_view_get(a, i, &x) || ck_view_get(b, i, &y)) return 0;
        if (x.op != y.op || x.src != y.src || x.role != y.role || x.flags != y.flags ||
            x.n_parts != y.n_parts)
            return 0;
        for (size_t k = 0; k < x.n_parts; k++) {
            const ck_part *p = &x.parts[k].part, *q = &y.parts[k].part;
            if (p->kind != q->kind || p->id_len != q->id_len ||
                memcmp(p->id, q->id, p->id_len) != 0 || !same_text(p, q, ta, tb))
                return 0;
        }
    }
    return 1;
}

/* ck_compactor_compact_quiet() beside ck_compactor_compact(), on twin sessions replaying each
 * transcript as an agent loop at a window of half of it: the quiet call, with the full call
 * when it declines, gives the views, tiers, records and token counts of the full call alone;
 * a quiet call that answers is at tier none with no record and writes nothing to the store. */
static void quiet_twin_file(void *ctx, const char *name, const char *text, size_t len) {
    long *answered = ctx;
    ck_error err;
    ck_history *h = ck_json_read(text, len, &err);
    OK(h != NULL);
    if (!h) return;
    uint64_t window = ck_estimate_history(h, CK_EST_CHARS4) / 2;
    /* The twin's session id has the length of the first's, so that the paths placeholders
     * state (which name the session) cost the same tokens in both. */
    char first[300], twin[300];
    snprintf(first, sizeof first, "quiet-a-%s", name);
    snprintf(twin, sizeof twin, "quiet-b-%s", name);
    ck_compactor *a = compactor(window, first), *b = compactor(window, twin);
    size_t n = ck_history_count(h);
    long declined = 0;
    for (size_t i = 2; i <= n; i++) {
        ck_history *p = history_prefix(h, i);
        ck_compaction *ca = NULL, *cb = NULL;
        script sa = {GOOD, 0, 0, 0}, sb = {GOOD, 0, 0, 0};
        INT_EQ(ck_compactor_compact(a, p, 0, scripted, &sa, &ca, &err), CK_OK);
        long files = h_count_tree(store_dir);
        INT_EQ(ck_compactor_compact_quiet(b, p, 0, &cb, &err), CK_OK);
        if (cb) {
            ++*answered;
            INT_EQ(ck_compaction_tier(cb), CK_TIER_NONE);
            OK(ck_compaction_record(cb, NULL) == NULL);
            INT_EQ(h_count_tree(store_dir), files);
        } else {
            declined++;
            INT_EQ(ck_compactor_compact(b, p, 0, scripted, &sb, &cb, &err), CK_OK);
        }
        if (!ca || !cb) {
            ck_compaction_free(ca);
            ck_compaction_free(cb);
            ck_history_free(p);
            break;
        }
        INT_EQ(ck_compaction_tier(cb), ck_compaction_tier(ca));
        INT_EQ(ck_compaction_tokens_after(cb), ck_compaction_tokens_after(ca));
        OK((ck_compaction_record(cb, NULL) == NULL) == (ck_compaction_record(ca, NULL) == NULL));
        OK(same_view(ck_compaction_view(ca), ck_compaction_view(cb), first, twin));
        ck_compaction_free(ca);
        ck_compaction_free(cb);
        ck_history_free(p);
    }
    OK(declined > 0); /* every call above tier none */
    ck_compactor_free(a);
    ck_compactor_free(b);
    ck_history_free(h);
}

TEST(quiet_calls_are_the_full_calls) {
    long answered = 0;
    OK(h_each_corpus("quiet_calls_are_the_full_calls", quiet_twin_file, &answered) != 0);
    OK(answered > 0);
    /* A result the repair drops would be stored: the quiet call declines. */
    const char *j = "[{\"role\":\"user\",\"content\":\"task\"},"
                    "{\"role\":\"tool\",\"tool_call_id\":\"ghost\",\"content\":\"orphan\"},"
                    "{\"role\":\"user\",\"content\":\"go on\"}]";
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    ck_compactor *k = compactor(100000, "quiet-orphan");
    ck_compaction *c = NULL;
    for (int round = 0; round < 2; round++) {
        INT_EQ(ck_compactor_compact_quiet(k, h, 0, &c, &err), CK_OK);
        OK(c == NULL);
        INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
        ck_compaction_free(c);
        c = NULL;
    }
    INT_EQ(ck_compactor_compact_quiet(k, h, 0, NULL, &err), CK_EINVAL);
    ck_compactor_free(k);
    ck_history_free(h);
}

TEST(allocation_failures) {
    char *j = session_json(30, 3, 5000);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    int round = 0;
    FAIL_EACH_ALLOC({
        char session[32];
        snprintf(session, sizeof session, "oom%d", round++);
        ck_compactor_options o;
        memset(&o, 0, sizeof o);
        o.context_window = (uint64_t)((double)total / 0.85);
        o.store_dir = store_dir;
        o.session_id = session;
        o.estimator = CK_EST_CHARS4;
        o.keep_tail = 4;
        o.summary_max_tokens = 300;
        ck_compactor *k = ck_compactor_new(&o, &err);
        if (k) {
            script s = {GOOD, 0, 0, 0};
            ck_compaction *c = NULL;
            if (ck_compactor_compact(k, h, 0, scripted, &s, &c, &err) == CK_OK)
                ck_compaction_free(c);
            ck_compactor_free(k);
        }
    });
    OK(round > 10);
    ck_history_free(h);
    free(j);
}

static void setup(void) { make_store(); }
static void teardown(void) { h_remove_tree(store_dir); }

HARNESS_MAIN(setup(); RUN(options_are_checked) RUN(none_tier_is_identity)
                 RUN(warn_offloads_outside_the_tail) RUN(offload_gate_caps_previews) RUN(reused_ids_keep_both_outputs) RUN(pinned_alone_too_big_is_recorded_once) RUN(unfinished_compactions_change_nothing) RUN(soft_summarizes_and_is_bounded)
                     RUN(bad_summaries_fall_back) RUN(emergency_needs_no_model)
                     RUN(emergency_lists_failures_of_offloaded_outputs)
                         RUN(written_back_view_is_recognized) RUN(session_resumes_from_the_log)
                             RUN(broken_pairs_are_repaired_in_views)
                                 RUN(corpus_replay_invariants) RUN(quiet_calls_are_the_full_calls)
                                     RUN(allocation_failures)
                                     teardown())
