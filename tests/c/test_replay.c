/* ck_replay_run(): one row per model call, equal to what a hand-written agent loop over
 * ck_compactor_compact() sees; totals over the rows; the SVG chart; summarizers; failures. */
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

static char store_root[64];
static int stores;

/* A compactor with its own store folder under store_root. */
static ck_compactor *make_compactor(uint64_t window, int must) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/s%d", store_root, stores++);
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = window;
    o.store_dir = dir;
    o.session_id = "replay-test";
    o.keep_tail = 4;
    o.summary_max_tokens = 300;
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    if (must) OK(k != NULL);
    return k;
}

static ck_compactor *compactor(uint64_t window) { return make_compactor(window, 1); }

/* An agent session in OpenAI JSON: a task, then `turns` of assistant call + tool result,
 * every third output large. */
static ck_history *session(int turns, char **text) {
    size_t cap = 4096 + (size_t)turns * 7000, at = 0;
    char *j = malloc(cap);
    at += (size_t)snprintf(j, cap,
                           "[{\"role\":\"system\",\"content\":\"You are a coding agent.\"},"
                           "{\"role\":\"user\",\"content\":\"Fix the failing test in "
                           "src/parser.c. Never touch vendor/.\"}");
    for (int t = 0; t < turns; t++) {
        at += (size_t)snprintf(
            j + at, cap - at,
            ",{\"role\":\"assistant\",\"content\":\"Step %d: run the tests.\",\"tool_calls\":"
            "[{\"id\":\"call_%d\",\"type\":\"function\",\"function\":{\"name\":\"bash\","
            "\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_%d\","
            "\"content\":\"",
            t, t, t);
        size_t n = t % 3 == 0 ? 6000 : 400;
        for (size_t i = 0; i < n; i++) { /* a line break every 50 characters, escaped */
            if (i % 50 == 49) { j[at++] = '\\'; j[at++] = 'n'; }
            else j[at++] = (char)('a' + (i + t) % 26);
        }
        at += (size_t)snprintf(j + at, cap - at, "\"}");
    }
    snprintf(j + at, cap - at, "]");
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    OK(h != NULL);
    *text = j;
    return h;
}

static size_t assistants(const ck_history *h) {
    size_t n = 0;
    for (size_t i = 0; i < ck_history_count(h); i++) {
        ck_role role;
        ck_history_get(h, i, &role, NULL, NULL, NULL);
        n += role == CK_ROLE_ASSISTANT;
    }
    return n;
}

TEST(rows_are_the_agent_loop) {
    char *text;
    ck_history *h = session(30, &text);
    ck_compactor *k = compactor(6000), *loop = compactor(6000);
    ck_replay *r = NULL;
    ck_error err;
    INT_EQ(ck_replay_run(k, h, NULL, NULL, &r, &err), CK_OK);
    size_t n = ck_replay_count(r);
    INT_EQ(n, assistants(h) + 1);
    INT_EQ(ck_replay_window(r), 6000);
    OK(ck_replay_get(r, n) == NULL);
    size_t compactions = 0, tiers_seen = 0;
    for (size_t i = 0; i < n; i++) {
        const ck_replay_row *row = ck_replay_get(r, i);
        INT_EQ(row->call, i + 1);
        /* The same call made by hand, on a compactor of its own with the same options. */
        ck_history *p = history_prefix(h, row->messages);
        ck_compaction *c = NULL;
        INT_EQ(ck_compactor_compact(loop, p, 0, NULL, NULL, &c, &err), CK_OK);
        INT_EQ(row->tier, ck_compaction_tier(c));
        INT_EQ(row->tokens_before, ck_compaction_tokens_before(c));
        INT_EQ(row->tokens_after, ck_compaction_tokens_after(c));
        INT_EQ(row->view_messages, ck_view_count(ck_compaction_view(c)));
        INT_EQ(row->history_tokens, ck_estimate_history(p, CK_EST_DEFAULT));
        OK(row->ratio_after == (double)row->tokens_after / 6000.0);
        OK((row->record != NULL) == (ck_compaction_record(c, NULL) != NULL));
        ck_compaction_free(c);
        ck_history_free(p);
        tiers_seen |= 1u << row->tier;
        if (row->compaction) {
            INT_EQ(row->compaction, ++compactions);
            OK(strncmp(row->action, ">> compaction ", 14) == 0);
            char tier[48];
            snprintf(tier, sizeof tier, "\"tier\":\"%s\"", ck_tier_name(row->tier));
            OK(strstr(row->record, tier) != NULL);
            INT_EQ(strlen(row->record), row->record_len);
            OK(row->summarized > 0 || row->offloaded > 0);
        } else {
            STR_EQ(row->action, "-");
            OK(row->record == NULL && row->summarized == 0 && row->offloaded == 0);
        }
        if (row->checkpoint) {
            OK(strncmp(row->checkpoint, ck_checkpoint_marker(), strlen(ck_checkpoint_marker())) ==
               0);
            INT_EQ(strlen(row->checkpoint), row->checkpoint_len);
        }
        if (row->placeholder) {
            OK(row->offloaded > 0);
            OK(row->placeholder_len < 6000);
        }
        if (i + 1 < n) OK(row->messages < ck_replay_get(r, i + 1)->messages);
    }
    INT_EQ(ck_replay_get(r, n - 1)->messages, ck_history_count(h));
    OK(compactions > 0);
    OK(tiers_seen & (1u << CK_TIER_NONE));
    OK(tiers_seen > 1u); /* at least one tier above none */
    ck_replay_free(r);
    ck_compactor_free(k);
    ck_compactor_free(loop);
    ck_history_free(h);
    free(text);
}

TEST(totals_sum_the_rows) {
    char *text;
    ck_history *h = session(30, &text);
    ck_compactor *k = compactor(6000);
    ck_replay *r = NULL;
    INT_EQ(ck_replay_run(k, h, NULL, NULL, &r, NULL), CK_OK);
    ck_replay_total t;
    ck_replay_totals(r, &t);
    size_t per_tier[5] = {0}, compactions = 0, offloaded = 0, summary_calls = 0, over = 0;
    uint64_t sent = 0, without = 0;
    double peak = 0, peak_without = 0;
    for (size_t i = 0; i < ck_replay_count(r); i++) {
        const ck_replay_row *row = ck_replay_get(r, i);
        per_tier[row->tier]++;
        compactions += row->compaction != 0;
        offloaded += row->offloaded;
        summary_calls += row->summary_calls;
        sent += row->tokens_after;
        without += row->history_tokens;
        over += row->history_tokens > 6000;
        if (row->ratio_after > peak) peak = row->ratio_after;
        double ratio = row->history_tokens / 6000.0;
        if (ratio > peak_without) peak_without = ratio;
    }
    INT_EQ(t.calls, ck_replay_count(r));
    for (int k2 = 0; k2 < 5; k2++) INT_EQ(t.per_tier[k2], per_tier[k2]);
    INT_EQ(t.compactions, compactions);
    INT_EQ(t.offloaded, offloaded);
    INT_EQ(t.summary_calls, summary_calls);
    INT_EQ(t.tokens_sent, sent);
    INT_EQ(t.tokens_without, without);
    INT_EQ(t.over_window_without, over);
    OK(t.peak_ratio == peak && t.peak_ratio_without == peak_without);
    OK(t.tokens_sent < t.tokens_without); /* the point of it all, with a wide margin here */
    OK(over > 0 && t.first_over_without > 0);
    ck_replay_totals(NULL, &t);
    INT_EQ(t.calls, 0);
    ck_replay_free(r);
    ck_compactor_free(k);
    ck_history_free(h);
    free(text);
}

typedef struct canned {
    const char *reply;
    int calls;
} canned;

static int canned_summary(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    canned *s = ctx;
    s->calls++;
    OK(req->prompt_len > 0);
    if (!s->reply) return CK_ESUMMARY;
    return ck_compaction_set_summary(c, s->reply, strlen(s->reply));
}

TEST(summarizer_calls_are_counted) {
    char *text;
    ck_history *h = session(30, &text);
    static const char reply[] = "## User Intent\nFix src/parser.c (the marker ZEBRA-42)\n"
                                "## Execution Progress\nTests run.\n## Key Decisions\nN/A\n"
                                "## Tried Solutions\nN/A\n## Next Steps\nRun them again.\n";
    for (int failing = 0; failing < 2; failing++) {
        canned s = {failing ? NULL : reply, 0};
        /* At 6000 the warn-tier offloads alone could keep the view under soft, depending on
         * how the store's random folder name tokenizes in the pointers; 5000 needs a summary
         * (two, whatever the folder is called). */
        ck_compactor *k = compactor(5000);
        ck_replay *r = NULL;
        INT_EQ(ck_replay_run(k, h, canned_summary, &s, &r, NULL), CK_OK);
        ck_replay_total t;
        ck_replay_totals(r, &t);
        INT_EQ(t.summary_calls, (size_t)s.calls);
        int fallbacks = 0, marked = 0;
        for (size_t i = 0; i < ck_replay_count(r); i++) {
            const ck_replay_row *row = ck_replay_get(r, i);
            if (row->summary_calls) OK(row->summary_tokens > 0 && row->compaction > 0);
            fallbacks += row->fallback;
            if (row->checkpoint && strstr(row->checkpoint, "ZEBRA-42")) marked = 1;
            if (row->fallback) OK(strstr(row->action, "summarizer failed") != NULL);
        }
        if (s.calls == 0) fprintf(stderr, "    no soft or full compaction at this window\n");
        OK(s.calls > 0);
        INT_EQ(fallbacks, failing ? s.calls : 0);
        INT_EQ(marked, !failing);
        ck_replay_free(r);
        ck_compactor_free(k);
    }
    ck_history_free(h);
    free(text);
}

static size_t occurrences(const char *s, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

TEST(svg_chart) {
    char *text;
    ck_history *h = session(30, &text);
    ck_compactor *k = compactor(6000);
    ck_replay *r = NULL;
    INT_EQ(ck_replay_run(k, h, NULL, NULL, &r, NULL), CK_OK);
    char *svg = NULL;
    size_t len = 0;
    INT_EQ(ck_replay_svg(r, "a <b> & 'c'", &svg, &len), CK_OK);
    INT_EQ(strlen(svg), len);
    OK(strncmp(svg, "<svg xmlns=", 11) == 0);
    OK(strcmp(svg + len - 7, "</svg>\n") == 0);
    OK(strstr(svg, "a &lt;b&gt; &amp; &#39;c&#39;: context use over") != NULL);
    OK(strstr(svg, "<b>") == NULL);
    ck_replay_total t;
    ck_replay_totals(r, &t);
    INT_EQ(occurrences(svg, "<circle"), t.compactions); /* one marker per compaction */
    INT_EQ(occurrences(svg, "<polyline"), 3);
    OK(strstr(svg, ">warn 60%<") != NULL && strstr(svg, ">emergency 95%<") != NULL);
    OK(strstr(svg, ">over the window<") != NULL);
    OK(strstr(svg, "model call") != NULL);
    OK(strstr(svg, "% of the context window (6000 tokens)") != NULL);
    ck_free(svg);
    OK(ck_replay_svg(NULL, NULL, &svg, NULL) == CK_EINVAL && svg == NULL);
    OK(ck_replay_svg(r, NULL, NULL, NULL) == CK_EINVAL);
    ck_replay_free(r);
    ck_compactor_free(k);
    ck_history_free(h);
    free(text);
}

TEST(bad_arguments_and_memory) {
    char *text;
    ck_history *h = session(4, &text);
    ck_compactor *k = compactor(3000);
    ck_replay *r = (ck_replay *)&r;
    ck_error err;
    INT_EQ(ck_replay_run(NULL, h, NULL, NULL, &r, &err), CK_EINVAL);
    OK(r == NULL);
    INT_EQ(ck_replay_run(k, NULL, NULL, NULL, &r, &err), CK_EINVAL);
    INT_EQ(ck_replay_run(k, h, NULL, NULL, NULL, &err), CK_EINVAL);
    ck_replay_free(NULL);
    INT_EQ(ck_replay_count(NULL), 0);
    ck_compactor_free(k);
    k = make_compactor(2500, 1);
    INT_EQ(ck_replay_run(k, h, NULL, NULL, &r, &err), CK_OK);
    ck_replay_total t;
    ck_replay_totals(r, &t);
    OK(t.compactions > 0 && t.offloaded > 0); /* so the loop below goes through both */
    ck_replay_free(r);
    ck_compactor_free(k);
    /* Every allocation of a replay may fail; none leaks, and the replay is all or nothing. */
    FAIL_EACH_ALLOC({
        ck_compactor *kk = make_compactor(2500, 0);
        ck_replay *rr = NULL;
        if (kk) {
            int rc = ck_replay_run(kk, h, NULL, NULL, &rr, NULL);
            OK((rc == CK_OK) == (rr != NULL));
            char *svg = NULL;
            if (rr && ck_replay_svg(rr, "t", &svg, NULL) == CK_OK) ck_free(svg);
        }
        ck_replay_free(rr);
        ck_compactor_free(kk);
    });
    ck_history_free(h);
    free(text);
}

static void cleanup(void) {
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", store_root, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
}

HARNESS_MAIN(snprintf(store_root, sizeof store_root, "/tmp/ck_replay_XXXXXX");
             OK(mkdtemp(store_root) != NULL); RUN(rows_are_the_agent_loop)
                 RUN(totals_sum_the_rows) RUN(summarizer_calls_are_counted) RUN(svg_chart)
                     RUN(bad_arguments_and_memory) cleanup();)
