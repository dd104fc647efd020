/* The C side of `make bench`: token estimation and compaction through the public API, on the
 * workloads that bench/histories.py wrote (the same JSON files the Python and Node benchmarks
 * read), one JSON line per measurement for bench/report.py.
 *
 *   bench WORKLOADS.tsv STORE_DIR OUT.jsonl [DISK_STORE_DIR]
 *                              every case on every workload; with DISK_STORE_DIR, the full
 *                              compaction once more with its store there, on workloads of up
 *                              to DISK_MAX_MESSAGES messages (`make bench` puts STORE_DIR on
 *                              tmpfs, so that the other figures are the library's own work
 *                              and not the disk's fsync latency)
 *   bench mem FILE STORE_DIR   peak RSS of one full compaction of FILE
 *   bench none FILE STORE_DIR  compact() of FILE when nothing needs compacting, on a fresh
 *                              compactor and on a kept one, alone (`make bench` alternates this
 *                              with bench.py's and bench.js's, so that the C / Python / Node
 *                              ratios are not skewed by a busy minute)
 *
 * A figure is the median over rounds of the mean time per call in a round, in wall-clock time
 * (CLOCK_MONOTONIC) and in process CPU time. The round count and the calls per round are in
 * each line. Every compaction checks that it ran at the tier its case names, so a figure never
 * describes other work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctxkeel.h"

#define MAX_FILES 16
#define MIN_ROUND_MS 60.0
/* The full compaction with its store on disk is not run on larger workloads: at 100,000
 * messages it took over 10 s a call on the machine the benchmarks were written on. */
#define DISK_MAX_MESSAGES 10000

static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

/* CPU time of the process: on a shared machine, the time spent waiting for a core is not
 * the library's, so every figure comes with this one too. */
static double cpu_ms(void) { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

static void die(const char *what, const char *detail) {
    fprintf(stderr, "bench: %s: %s\n", what, detail);
    exit(1);
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot read", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(*len + 1);
    if (!buf || fread(buf, 1, *len, f) != *len) die("cannot read", path);
    fclose(f);
    return buf;
}

static ck_history *load_history(const char *path) {
    size_t len;
    char *json = read_file(path, &len);
    ck_error err;
    ck_history *h = ck_json_read(json, len, &err);
    if (!h) die(path, err.msg);
    free(json); /* the history keeps its own parsed copy */
    return h;
}

/* One line of workloads.tsv: a name, its size, and the histories it is made of. */
typedef struct workload {
    char name[64];
    unsigned long long messages, text_bytes, json_bytes;
    size_t n;
    ck_history *h[MAX_FILES];
    uint64_t tokens[MAX_FILES]; /* the default estimate of each history */
} workload;

static int parse_workload(char *line, workload *w) {
    memset(w, 0, sizeof *w);
    char *save = NULL, *tok = strtok_r(line, "\t\n", &save);
    if (!tok) return 0;
    snprintf(w->name, sizeof w->name, "%s", tok);
    unsigned long long *nums[] = {&w->messages, &w->text_bytes, &w->json_bytes};
    for (int k = 0; k < 3; k++) {
        if (!(tok = strtok_r(NULL, "\t\n", &save))) die("bad workload line", w->name);
        *nums[k] = strtoull(tok, NULL, 10);
    }
    while ((tok = strtok_r(NULL, "\t\n", &save)) && w->n < MAX_FILES) {
        w->h[w->n] = load_history(tok);
        w->tokens[w->n] = ck_estimate_history(w->h[w->n], CK_EST_DEFAULT);
        w->n++;
    }
    return 1;
}

/* ---- timing ---------------------------------------------------------------------------- */

typedef void (*op_fn)(void *ctx);

typedef struct timing {
    double ms;     /* median over rounds of the mean wall-clock time per call */
    double cpu_ms; /* the same in process CPU time */
    int rounds, reps;
} timing;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One untimed call first, which warms caches (a compactor's token cache among them); a
 * second one, unless the first took over a second, sizes the rounds: `reps` calls each lasting
 * about MIN_ROUND_MS, in 7 rounds, 5 when a call takes over 150 ms, 3 when it takes over a
 * second (then the first call is one of them). */
static timing measure(op_fn op, void *ctx) {
    double t0 = now_ms(), c0 = cpu_ms();
    op(ctx);
    double first = now_ms() - t0, first_cpu = cpu_ms() - c0, size = first;
    if (first <= 1000) {
        t0 = now_ms();
        op(ctx);
        size = now_ms() - t0;
    }
    timing t = {0, 0, size > 1000 ? 3 : size > 150 ? 5 : 7, 1};
    if (size < MIN_ROUND_MS) t.reps = (int)(MIN_ROUND_MS / (size > 1e-3 ? size : 1e-3)) + 1;
    if (t.reps > 100000) t.reps = 100000;
    double wall[7] = {first}, cpu[7] = {first_cpu};
    for (int r = first > 1000 ? 1 : 0; r < t.rounds; r++) {
        t0 = now_ms();
        c0 = cpu_ms();
        for (int i = 0; i < t.reps; i++) op(ctx);
        wall[r] = (now_ms() - t0) / t.reps;
        cpu[r] = (cpu_ms() - c0) / t.reps;
    }
    qsort(wall, (size_t)t.rounds, sizeof wall[0], cmp_double);
    qsort(cpu, (size_t)t.rounds, sizeof cpu[0], cmp_double);
    t.ms = wall[t.rounds / 2];
    t.cpu_ms = cpu[t.rounds / 2];
    return t;
}

/* ---- cases ----------------------------------------------------------------------------- */

static volatile uint64_t sink;

static void op_estimate(void *ctx) {
    const workload *w = ctx;
    for (size_t i = 0; i < w->n; i++) sink += ck_estimate_history(w->h[i], CK_EST_DEFAULT);
}

/* The job the Node peers do: count each message text on its own (content, tool-call
 * arguments), and sum. */
static void op_estimate_texts(void *ctx) {
    const workload *w = ctx;
    uint64_t total = 0;
    for (size_t i = 0; i < w->n; i++) {
        for (size_t m = 0; m < ck_history_count(w->h[i]); m++) {
            const ck_part *parts;
            size_t n;
            ck_history_get(w->h[i], m, NULL, NULL, &parts, &n);
            for (size_t k = 0; k < n; k++) {
                if (parts[k].text_len && parts[k].kind != CK_PART_IMAGE)
                    total += ck_estimate_text(parts[k].text, parts[k].text_len, CK_EST_DEFAULT);
            }
        }
    }
    sink += total;
}

static const char REPLY[] = "## User Intent\nFix the failing build.\n## Execution Progress\n"
                            "Reproduced the failure; the parser change is in.\n## Key Decisions\n"
                            "Keep the public API.\n## Tried Solutions\n- a clean rebuild: same "
                            "error\n## Next Steps\nRun the whole test suite.";

/* The trivial summarizer: a fixed reply, at once. */
static int trivial(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    (void)ctx;
    (void)req;
    return ck_compaction_set_summary(c, REPLY, sizeof REPLY - 1);
}

/* A compaction case: a window of tokens * factor for every history of the workload, either
 * on kept compactors (`k`, made beforehand) or on a fresh one per call. */
typedef struct compact_job {
    const workload *w;
    double factor;
    const char *store;
    ck_compactor *k[MAX_FILES];
    ck_tier expect;
    uint64_t tokens_after; /* of the last call, summed over the histories */
    size_t msgs_after;
} compact_job;

static ck_compactor *new_compactor(const char *store, uint64_t window) {
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    o.context_window = window;
    o.store_dir = store;
    ck_error err;
    ck_compactor *k = ck_compactor_new(&o, &err);
    if (!k) die("ck_compactor_new", err.msg);
    return k;
}

static void compact_one(compact_job *j, size_t i, ck_compactor *k, ck_tier expect) {
    ck_compaction *c = NULL;
    ck_error err;
    int rc = ck_compactor_compact(k, j->w->h[i], 0, trivial, NULL, &c, &err);
    if (rc != CK_OK) die(j->w->name, ck_strerror(rc));
    if (ck_compaction_tier(c) != expect) {
        fprintf(stderr, "bench: %s history %zu: tier %s, expected %s\n", j->w->name, i,
                ck_tier_name(ck_compaction_tier(c)), ck_tier_name(expect));
        exit(1);
    }
    j->tokens_after += ck_compaction_tokens_after(c);
    j->msgs_after += ck_view_count(ck_compaction_view(c));
    ck_compaction_free(c);
}

static void op_compact(void *ctx) {
    compact_job *j = ctx;
    j->tokens_after = 0;
    j->msgs_after = 0;
    for (size_t i = 0; i < j->w->n; i++) {
        ck_compactor *k = j->k[i];
        if (!k) k = new_compactor(j->store, (uint64_t)((double)j->w->tokens[i] * j->factor));
        compact_one(j, i, k, j->expect);
        if (k != j->k[i]) ck_compactor_free(k);
    }
}

/* ---- output ---------------------------------------------------------------------------- */

static FILE *out;

static void emit(const workload *w, const char *name, timing t, const compact_job *j) {
    uint64_t tokens = 0;
    for (size_t i = 0; i < w->n; i++) tokens += w->tokens[i];
    fprintf(out,
            "{\"lang\":\"c\",\"tool\":\"ctxkeel\",\"workload\":\"%s\",\"case\":\"%s\","
            "\"messages\":%llu,\"text_bytes\":%llu,\"tokens\":%llu,\"ms\":%.6f,"
            "\"cpu_ms\":%.6f,\"rounds\":%d,\"reps\":%d",
            w->name, name, w->messages, w->text_bytes, (unsigned long long)tokens, t.ms, t.cpu_ms,
            t.rounds, t.reps);
    if (j)
        fprintf(out, ",\"tier\":\"%s\",\"tokens_after\":%llu,\"messages_after\":%zu",
                ck_tier_name(j->expect), (unsigned long long)j->tokens_after, j->msgs_after);
    fputs("}\n", out);
    fflush(out);
    printf("c       %-18s %-26s %12.4f ms  %12.4f CPU  (%d x %d)\n", w->name, name, t.ms,
           t.cpu_ms, t.rounds, t.reps);
    fflush(stdout);
}

static void run_workload(const workload *w, const char *store, const char *disk_store) {
    emit(w, "estimate", measure(op_estimate, (void *)w), NULL);
    emit(w, "estimate_texts", measure(op_estimate_texts, (void *)w), NULL);

    /* Nothing to compact: a window ten times the history; first on a fresh compactor per
     * call (made and freed within the call: nothing is cached yet), then on kept ones, which
     * have the messages' token counts from the call before. */
    compact_job j = {w, 10.0, store, {0}, CK_TIER_NONE, 0, 0};
    emit(w, "compact_none_first", measure(op_compact, &j), &j);
    for (size_t i = 0; i < w->n; i++) j.k[i] = new_compactor(store, w->tokens[i] * 10);
    emit(w, "compact_none", measure(op_compact, &j), &j);

    /* The checkpoint reused: one compaction of the history at 2.5 times the window first
     * (offloading alone cannot bring it under target, so a checkpoint is made), then the same
     * history again, which the compactor rebuilds as pinned + checkpoint + the uncovered tail
     * without a model. The factor is bench.py's and bench.js's. */
    for (size_t i = 0; i < w->n; i++) {
        ck_compactor_free(j.k[i]);
        j.k[i] = new_compactor(store, (uint64_t)((double)w->tokens[i] * 0.4));
        compact_one(&j, i, j.k[i], CK_TIER_EMERGENCY);
    }
    j.expect = CK_TIER_NONE;
    emit(w, "compact_steady", measure(op_compact, &j), &j);
    for (size_t i = 0; i < w->n; i++) ck_compactor_free(j.k[i]);
    memset(j.k, 0, sizeof j.k);

    /* A full compaction (85% of the window) with the trivial summarizer, a fresh compactor
     * (a new session) per call. */
    j.factor = 1 / 0.85;
    j.expect = CK_TIER_FULL;
    emit(w, "compact_full", measure(op_compact, &j), &j);
    if (disk_store && w->messages <= DISK_MAX_MESSAGES) {
        j.store = disk_store;
        emit(w, "compact_full_disk", measure(op_compact, &j), &j);
        j.store = store;
    }

    /* Over the emergency threshold (97%): no model; the dropped span is folded into the
     * checkpoint extractively and the view is cut to the soft limit, 70% of the window. */
    j.factor = 1 / 0.97;
    j.expect = CK_TIER_EMERGENCY;
    emit(w, "compact_emergency", measure(op_compact, &j), &j);
}

/* ---- memory ---------------------------------------------------------------------------- */

/* VmRSS or VmHWM from /proc/self/status, in bytes; 0 where there is no /proc. */
static unsigned long long proc_status(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) == 0 && line[n] == ':') kb = strtoull(line + n + 1, NULL, 10);
    }
    if (f) fclose(f);
    return kb * 1024;
}

/* Resets VmHWM to the current RSS (Linux 4.0+), so that the next reading is the peak of what
 * follows alone. Returns 0 when that is not possible. */
static int reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static int run_memory(const char *path, const char *store) {
    size_t json_bytes;
    free(read_file(path, &json_bytes));
    unsigned long long rss_start = proc_status("VmRSS");
    ck_history *h = load_history(path);
    uint64_t tokens = ck_estimate_history(h, CK_EST_DEFAULT);
    workload w = {.n = 1, .h = {h}, .tokens = {tokens}};
    snprintf(w.name, sizeof w.name, "%s", path);
    compact_job j = {&w, 1 / 0.85, store, {0}, CK_TIER_FULL, 0, 0};
    j.k[0] = new_compactor(store, (uint64_t)((double)tokens / 0.85));
    unsigned long long rss_before = proc_status("VmRSS");
    int reset = reset_peak();
    double t0 = now_ms();
    compact_one(&j, 0, j.k[0], CK_TIER_FULL);
    double ms = now_ms() - t0;
    unsigned long long peak = proc_status("VmHWM");
    printf("{\"lang\":\"c\",\"case\":\"memory\",\"messages\":%zu,\"json_bytes\":%zu,"
           "\"rss_start\":%llu,\"rss_before\":%llu,\"peak\":%llu,\"peak_reset\":%s,"
           "\"ms\":%.1f,\"tier\":\"full\"}\n",
           ck_history_count(h), json_bytes, rss_start, rss_before, peak,
           reset ? "true" : "false", ms);
    ck_compactor_free(j.k[0]);
    ck_history_free(h);
    return 0;
}

static int run_none(const char *path, const char *store) {
    workload w = {.n = 1, .h = {load_history(path)}};
    w.tokens[0] = ck_estimate_history(w.h[0], CK_EST_DEFAULT);
    w.messages = ck_history_count(w.h[0]);
    snprintf(w.name, sizeof w.name, "%s", path);
    compact_job j = {&w, 10.0, store, {0}, CK_TIER_NONE, 0, 0};
    for (int kept = 0; kept < 2; kept++) {
        if (kept) j.k[0] = new_compactor(store, w.tokens[0] * 10);
        timing t = measure(op_compact, &j);
        printf("{\"lang\":\"c\",\"case\":\"%s\",\"messages\":%llu,\"ms\":%.6f,"
               "\"cpu_ms\":%.6f,\"rounds\":%d,\"reps\":%d}\n",
               kept ? "compact_none" : "compact_none_first", w.messages, t.ms, t.cpu_ms,
               t.rounds, t.reps);
    }
    ck_compactor_free(j.k[0]);
    ck_history_free(w.h[0]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "mem") == 0) return run_memory(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "none") == 0) return run_none(argv[2], argv[3]);
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: bench WORKLOADS.tsv STORE_DIR OUT.jsonl [DISK_STORE_DIR] | "
                        "bench mem|none FILE STORE_DIR\n");
        return 2;
    }
    size_t len;
    char *manifest = read_file(argv[1], &len);
    manifest[len] = '\0';
    if (!(out = fopen(argv[3], "w"))) die("cannot write", argv[3]);
    char *save = NULL;
    for (char *line = strtok_r(manifest, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        workload w;
        if (!parse_workload(line, &w)) continue;
        run_workload(&w, argv[2], argc > 4 ? argv[4] : NULL);
        for (size_t i = 0; i < w.n; i++) ck_history_free(w.h[i]);
    }
    fclose(out);
    free(manifest);
    return 0;
}
