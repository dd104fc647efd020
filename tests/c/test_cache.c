/* The provider's prompt cache: min_gain batching of warn offloads, the prompt_cache cost model
 * and Anthropic cache breakpoints (issue 19). */
#include "util.h"

#include <math.h>

static char store_dir[256];

static void setup(void) {
    snprintf(store_dir, sizeof store_dir, "/tmp/ck_test_cache_XXXXXX");
    OK(mkdtemp(store_dir) != NULL);
}

static ck_compactor *cache_compactor(uint64_t window, const char *session, double read,
                                     double write, uint32_t flags, uint64_t min_gain) {
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = window;
    o.store_dir = store_dir;
    o.session_id = session;
    o.estimator = CK_EST_CHARS4;
    o.keep_tail = 4;
    o.summary_max_tokens = 300;
    o.cache_read = read;
    o.cache_write = write;
    o.flags = flags;
    o.min_gain = min_gain;
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    OK(k != NULL);
    return k;
}

/* An Anthropic session: the task, then `turns` turns of a text + tool_use and a user message
 * with its tool_result (every `big`-th output `big_bytes` long, else 600). With `marks`, the
 * last `marks` results carry the caller's own cache_control markers. Caller frees. */
static char *anthropic_json(int turns, int big, size_t big_bytes, int marks) {
    size_t cap = 4096 + (size_t)turns * (1000 + big_bytes);
    char *j = malloc(cap);
    size_t at = (size_t)snprintf(j, cap,
                                 "[{\"role\":\"user\",\"content\":\"Fix the failing test in "
                                 "src/parser.c. Never touch the vendor/ folder.\"}");
    for (int t = 0; t < turns; t++) {
        at += (size_t)snprintf(j + at, cap - at,
                               ",{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":"
                               "\"Step %d: run the tests again.\"},{\"type\":\"tool_use\",\"id\":"
                               "\"toolu_%d\",\"name\":\"bash\",\"input\":{\"command\":\"make test "
                               "T=%d\"}}]},{\"role\":\"user\",\"content\":[{\"type\":"
                               "\"tool_result\",\"tool_use_id\":\"toolu_%d\",\"content\":\"",
                               t, t, t, t);
        size_t n = big && t % big == 0 ? big_bytes : 600;
        for (size_t i = 0; i < n; i++) j[at++] = i % 60 == 59 ? ' ' : (char)('a' + (i + t) % 26);
        at += (size_t)snprintf(j + at, cap - at, "\"%s}]}",
                               t >= turns - marks ? ",\"cache_control\":{\"type\":\"ephemeral\"}"
                                                  : "");
    }
    snprintf(j + at, cap - at, "]");
    return j;
}

/* What a replay's calls are billed with the prompt cache at the end of every view: the prefix
 * kept from the call before at `read`, the rest at `write`. */
static double billed(const ck_replay *r, double read, double write) {
    double sum = 0;
    for (size_t i = 0; i < ck_replay_count(r); i++) {
        const ck_replay_row *row = ck_replay_get(r, i);
        sum += read * (double)row->prefix_kept +
               write * (double)(row->tokens_after - row->prefix_kept);
    }
    return sum;
}

static int good_summary(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    (void)ctx;
    (void)req;
    static const char reply[] = "## User Intent\nFix the parser test.\n## Execution Progress\n"
                                "Ran make test.\n## Key Decisions\nKeep vendor/ untouched.\n"
                                "## Tried Solutions\n- reran tests\n## Next Steps\nInspect "
                                "src/parser.c.\n## Summary\nWork continues.";
    return ck_compaction_set_summary(c, reply, sizeof reply - 1);
}

TEST(presets_and_prices_are_checked) {
    double r = 0, w = 0;
    ck_error err;
    INT_EQ(ck_prompt_cache_preset("anthropic", &r, &w, &err), CK_OK);
    OK(r == 0.1 && w == 1.25);
    INT_EQ(ck_prompt_cache_preset("openai", &r, &w, &err), CK_OK);
    OK(r == 0.1 && w == 1.0);
    INT_EQ(ck_prompt_cache_preset("gemini", &r, &w, &err), CK_EINVAL);
    STR_EQ(err.where, "prompt_cache");
    INT_EQ(ck_prompt_cache_preset(NULL, &r, &w, &err), CK_EINVAL);
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = 10000;
    o.store_dir = store_dir;
    const double bad[][2] = {{0.1, 0}, {0, 1.25}, {1.5, 2}, {0.1, 0.5}, {0.1, 11}, {NAN, 1}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        o.cache_read = bad[k][0];
        o.cache_write = bad[k][1];
        OK(ck_compactor_new(&o, &err) == NULL);
        INT_EQ(err.code, CK_EINVAL);
        STR_EQ(err.where, "prompt_cache");
    }
    o.cache_read = 0.1;
    o.cache_write = 1.25;
    ck_compactor *k = ck_compactor_new(&o, &err);
    OK(k != NULL);
    ck_compactor_options got;
    ck_compactor_get_options(k, &got);
    OK(got.cache_read == 0.1 && got.cache_write == 1.25);
    INT_EQ(got.min_gain, 500); /* a twentieth of the window by default */
    ck_compactor_free(k);
}

/* Warn-tier offloads wait until together they free min_gain tokens. */
TEST(warn_offloads_wait_for_min_gain) {
    char *j = anthropic_json(8, 2, 6000, 0); /* four large outputs, two outside the tail */
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    OK(h != NULL);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    uint64_t window = (uint64_t)((double)total / 0.65);
    for (int big_gate = 0; big_gate < 2; big_gate++) {
        ck_compactor *k = cache_compactor(window, big_gate ? "gate-big" : "gate-default", 0, 0,
                                          0, big_gate ? window / 2 : 0);
        ck_compaction *c = NULL;
        INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
        INT_EQ(ck_compaction_tier(c), CK_TIER_WARN);
        if (big_gate) {
            /* About 3,000 tokens to free against a gate of half the window: nothing changes. */
            OK(ck_compaction_record(c, NULL) == NULL);
            OK(ck_view_is_identity(ck_compaction_view(c)));
        } else {
            OK(ck_compaction_record(c, NULL) != NULL);
            OK(ck_compaction_tokens_after(c) < ck_compaction_tokens_before(c));
        }
        ck_compaction_free(c);
        ck_compactor_free(k);
    }
    ck_history_free(h);
    free(j);
}

/* With the cache prices of Anthropic a fold at soft waits (the reads it would save before
 * the view reaches full cost less than re-writing the cache), so the session compacts less
 * often and is billed less; full still folds, and every view stays under the window. */
TEST(prompt_cache_folds_when_it_pays) {
    char *j = anthropic_json(90, 0, 0, 0);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    OK(h != NULL);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    uint64_t window = total / 3;
    double cost[2] = {0, 0};
    size_t folds_at_soft[2] = {0, 0}, folds[2] = {0, 0}, waits = 0, estimates = 0;
    for (int priced = 0; priced < 2; priced++) {
        ck_compactor *k = cache_compactor(window, priced ? "priced" : "plain",
                                          priced ? 0.1 : 0, priced ? 1.25 : 0, 0, 0);
        ck_replay *r = NULL;
        INT_EQ(ck_replay_run(k, h, good_summary, NULL, &r, &err), CK_OK);
        for (size_t i = 0; r && i < ck_replay_count(r); i++) {
            const ck_replay_row *row = ck_replay_get(r, i);
            OK(row->ratio_after <= 0.95);
            if (row->summarized) {
                folds[priced]++;
                folds_at_soft[priced] += row->tier == CK_TIER_SOFT;
            }
            if (row->record && strstr(row->record, "the fold at soft waits")) waits++;
            if (row->record && strstr(row->record, "\"estimate\":{\"horizon\":")) estimates++;
        }
        cost[priced] = billed(r, 0.1, 1.25);
        ck_replay_free(r);
        ck_compactor_free(k);
    }
    OK(folds_at_soft[0] > 0);     /* the plain policy folds at soft */
    INT_EQ(folds_at_soft[1], 0);  /* the priced one waits for full there */
    OK(folds[1] > 0 && folds[1] < folds[0]);
    OK(waits > 0);                /* the once-told record over soft says why it waits */
    OK(estimates > 0);
    OK(cost[1] < cost[0]);
    ck_history_free(h);
    free(j);
}

/* A fast-growing session: each call adds more than the fold would invalidate, so folding at
 * soft pays and happens under the prices too, with the estimate in its record. */
TEST(prompt_cache_folds_at_soft_when_growth_is_fast) {
    char *j = anthropic_json(40, 0, 0, 0);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    /* Low thresholds and a far full limit: a long horizon at the session's growth. */
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = total * 4;
    o.store_dir = store_dir;
    o.session_id = "fast";
    o.estimator = CK_EST_CHARS4;
    o.keep_tail = 2;
    o.warn = 0.10;
    o.soft = 0.15;
    o.target = 0.05;
    o.full = 0.90;
    o.cache_read = 0.1;
    o.cache_write = 1.25;
    ck_compactor *k = ck_compactor_new(&o, &err);
    OK(k != NULL);
    ck_replay *r = NULL;
    INT_EQ(ck_replay_run(k, h, good_summary, NULL, &r, &err), CK_OK);
    size_t soft_folds = 0;
    for (size_t i = 0; r && i < ck_replay_count(r); i++) {
        const ck_replay_row *row = ck_replay_get(r, i);
        if (row->summarized && row->tier == CK_TIER_SOFT) {
            soft_folds++;
            OK(row->record && strstr(row->record, "\"estimate\":{\"horizon\":"));
        }
    }
    OK(soft_folds > 0);
    ck_replay_free(r);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
}

/* Counts `needle` in `hay`. */
static size_t occurrences(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Compacts h at soft on a new compactor with cache breakpoints (its window puts h at 75%),
 * and writes the view as Anthropic JSON, checked to pair. The caller frees all three. */
static char *marked_soft_view(ck_history *h, const char *session, ck_compactor **k,
                              ck_compaction **c) {
    ck_error err;
    uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
    *k = cache_compactor((uint64_t)((double)total / 0.75), session, 0, 0,
                         CK_OPT_CACHE_BREAKPOINTS, 0);
    *c = NULL;
    INT_EQ(ck_compactor_compact(*k, h, 0, good_summary, NULL, c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(*c), CK_TIER_SOFT);
    char *out = ck_json_write(h, ck_compaction_view(*c), CK_FORMAT_ANTHROPIC, 0, &err);
    OK(out != NULL);
    INT_EQ(count_issues(out, CK_FORMAT_ANTHROPIC, -1), 0);
    return out;
}

/* cache_breakpoints: the task and the checkpoint carry a marker each, the caller's own
 * markers count against the provider's four, the caller's messages stay as they were, and
 * the view still pairs. */
TEST(cache_breakpoints_mark_the_stable_head) {
    static const char mark[] = "\"cache_control\":{\"type\":\"ephemeral\"}";
    for (int own = 0; own <= 4; own++) {
        char *j = anthropic_json(30, 0, 0, own);
        ck_error err;
        ck_history *h = ck_json_read(j, strlen(j), &err);
        OK(h != NULL);
        uint64_t total = ck_estimate_history(h, CK_EST_CHARS4);
        char session[32];
        snprintf(session, sizeof session, "marks-%d", own);
        ck_compactor *k;
        ck_compaction *c;
        char *out = marked_soft_view(h, session, &k, &c);
        size_t free_marks = own >= 4 ? 0 : (size_t)(4 - own);
        size_t ours = free_marks > 2 ? 2 : free_marks;
        INT_EQ(occurrences(out, mark), own + ours);
        /* The checkpoint is marked first, then the task (as a block list now). */
        const char *cp = out ? strstr(out, "[Context Compaction]") : NULL;
        OK(cp != NULL);
        const char *task = out ? strstr(out, "Never touch the vendor/ folder.") : NULL;
        OK(task != NULL);
        if (cp && task) {
            const char *after_cp = strstr(cp, "}]}");
            OK(after_cp && (ours >= 1) == (strstr(cp, mark) && strstr(cp, mark) < after_cp));
            const char *after_task = strchr(task, '}'); /* the end of the task's block */
            int task_marked = after_task && strstr(task, mark) && strstr(task, mark) < after_task;
            OK(task_marked == (ours >= 2));
        }
        /* The source is unchanged: the caller's history re-written as it is has only its own
         * markers. */
        ck_compactor *plain = cache_compactor(total * 10, "plain-marks", 0, 0, 0, 0);
        ck_compaction *whole = NULL;
        INT_EQ(ck_compactor_compact(plain, h, 0, NULL, NULL, &whole, &err), CK_OK);
        OK(ck_view_is_identity(ck_compaction_view(whole)));
        char *same = ck_json_write(h, ck_compaction_view(whole), CK_FORMAT_ANTHROPIC, 0, &err);
        OK(same && strcmp(same, j) == 0);
        ck_free(same);
        ck_compaction_free(whole);
        ck_compactor_free(plain);
        /* The next call gives byte-identical messages: the marked prefix stays cached. */
        ck_compaction *again = NULL;
        INT_EQ(ck_compactor_compact(k, h, 0, good_summary, NULL, &again, &err), CK_OK);
        char *out2 = ck_json_write(h, ck_compaction_view(again), CK_FORMAT_ANTHROPIC, 0, &err);
        OK(out && out2 && strcmp(out, out2) == 0);
        ck_free(out2);
        ck_compaction_free(again);
        ck_free(out);
        ck_compaction_free(c);
        ck_compactor_free(k);
        ck_history_free(h);
        free(j);
    }
}

/* Below warn, with no checkpoint yet, the task alone is marked; other dialects get none. */
TEST(cache_breakpoints_without_a_checkpoint) {
    static const char mark[] = "\"cache_control\":{\"type\":\"ephemeral\"}";
    char *j = anthropic_json(3, 0, 0, 0);
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    ck_compactor *k = cache_compactor(100000, "none-marks", 0, 0, CK_OPT_CACHE_BREAKPOINTS, 0);
    ck_compaction *c = NULL;
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    INT_EQ(ck_compaction_tier(c), CK_TIER_NONE);
    char *out = ck_json_write(h, ck_compaction_view(c), CK_FORMAT_ANTHROPIC, 0, &err);
    INT_EQ(occurrences(out, mark), 1);
    static const char head[] = "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Fix";
    OK(out && strncmp(out, head, sizeof head - 1) == 0);
    ck_free(out);
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
    /* An OpenAI history under the same option: no marker. */
    static const char openai[] = "[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                                 "{\"role\":\"user\",\"content\":\"Hello\"}]";
    h = ck_json_read(openai, sizeof openai - 1, &err);
    k = cache_compactor(100000, "openai-marks", 0, 0, CK_OPT_CACHE_BREAKPOINTS, 0);
    INT_EQ(ck_compactor_compact(k, h, 0, NULL, NULL, &c, &err), CK_OK);
    OK(ck_view_is_identity(ck_compaction_view(c)));
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
}

/* A task block that already carries the caller's own marker (with a ttl) keeps it whole:
 * the view writes it as the caller did, and only the checkpoint gains ctxkeel's marker. */
TEST(cache_breakpoints_keep_the_callers_marker) {
    static const char mark[] = "\"cache_control\":{\"type\":\"ephemeral\"}";
    static const char own[] = "\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"1h\"}";
    char *turns = anthropic_json(30, 0, 0, 0);
    static const char task[] = "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
                               "\"Fix the failing test in src/parser.c. Never touch the vendor/ "
                               "folder.\",\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":"
                               "\"1h\"}}]}";
    /* The generated history with its string task replaced by the marked block list. */
    const char *rest = strstr(turns, "},{\"role\":\"assistant\"");
    OK(rest != NULL);
    size_t cap = strlen(turns) + sizeof task;
    char *j = malloc(cap);
    snprintf(j, cap, "%s%s", task, rest ? rest + 1 : "]");
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    OK(h != NULL);
    ck_compactor *k;
    ck_compaction *c;
    char *out = marked_soft_view(h, "own-ttl", &k, &c);
    OK(out && strncmp(out, task, sizeof task - 1) == 0);
    INT_EQ(occurrences(out, own), 1);
    INT_EQ(occurrences(out, mark), 1);
    const char *cp = out ? strstr(out, "[Context Compaction]") : NULL;
    OK(cp && strstr(cp, mark) != NULL);
    ck_free(out);
    ck_compaction_free(c);
    ck_compactor_free(k);
    ck_history_free(h);
    free(j);
    free(turns);
}

HARNESS_MAIN(setup(); RUN(presets_and_prices_are_checked) RUN(warn_offloads_wait_for_min_gain)
                 RUN(prompt_cache_folds_when_it_pays)
                     RUN(prompt_cache_folds_at_soft_when_growth_is_fast)
                         RUN(cache_breakpoints_mark_the_stable_head)
                             RUN(cache_breakpoints_without_a_checkpoint)
                                 RUN(cache_breakpoints_keep_the_callers_marker))
