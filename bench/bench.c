/* Core benchmarks: estimation and compaction on synthetic histories and the real corpus.
 * Prints one line per case: name, size, median time per call over several rounds. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctxkeel.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A synthetic agent history of `n` messages of about `bytes` each: system, task, then turns of
 * assistant call + tool result, with a user note every 10 turns. Strings live in `arena`. */
static ck_history *synthetic(size_t n, size_t bytes, char **arena) {
    ck_history *h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    *arena = malloc(n * (bytes + 64) + 1024);
    char *at = *arena;
    static const char words[] = "the parser fails on nested brackets in src/parse.c line 42 ";
    for (size_t i = 0; i < n; i++) {
        ck_role role = i == 0 ? CK_ROLE_SYSTEM
                       : i == 1 ? CK_ROLE_USER
                       : (i % 2 == 0 ? CK_ROLE_ASSISTANT : CK_ROLE_TOOL);
        if (i > 2 && i % 20 == 1) role = CK_ROLE_USER;
        char *text = at;
        for (size_t k = 0; k < bytes; k++) at[k] = words[(k + i) % (sizeof words - 1)];
        at += bytes;
        char *id = at;
        int id_len = sprintf(id, "call_%zu", role == CK_ROLE_ASSISTANT ? i : i - 1);
        at += id_len + 1;
        ck_history_add_message(h, role, CK_MSG_STRING_CONTENT);
        ck_part p;
        memset(&p, 0, sizeof p);
        p.kind = role == CK_ROLE_TOOL ? CK_PART_TOOL_RESULT : CK_PART_TEXT;
        p.flags = role == CK_ROLE_TOOL ? CK_PART_OPENAI : 0;
        p.text = text;
        p.text_len = role == CK_ROLE_ASSISTANT ? bytes / 4 : bytes;
        if (role == CK_ROLE_TOOL) {
            p.id = id;
            p.id_len = (size_t)id_len;
        }
        ck_history_add_part(h, &p, NULL);
        if (role == CK_ROLE_ASSISTANT) {
            /* The call, answered by the next (tool) message when there is one. */
            if (i + 1 < n && !(i + 1 > 2 && (i + 1) % 20 == 1)) {
                memset(&p, 0, sizeof p);
                p.kind = CK_PART_TOOL_CALL;
                p.flags = CK_PART_OPENAI;
                p.id = id;
                p.id_len = (size_t)id_len;
                p.name = "bash";
                p.name_len = 4;
                p.text = "{\"command\":\"make test\"}";
                p.text_len = strlen(p.text);
                ck_history_add_part(h, &p, NULL);
            }
        }
    }
    return h;
}

static int trivial(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    (void)ctx;
    (void)req;
    static const char reply[] = "## User Intent\nfix the parser\n## Execution Progress\nran "
                                "tests\n## Key Decisions\nnone yet\n## Tried Solutions\n- rerun\n"
                                "## Next Steps\nread src/parse.c";
    return ck_compaction_set_summary(c, reply, sizeof reply - 1);
}

typedef struct bench_case {
    const char *name;
    ck_history *h;
    uint64_t window;
    int stateful; /* run one compaction first so the state holds a checkpoint */
    int full;     /* every call runs a full compaction (fresh compactor each time) */
} bench_case;

static double run_case(const bench_case *bc, int rounds, int reps, const char *store) {
    double *samples = malloc(sizeof(double) * (size_t)rounds);
    for (int r = 0; r < rounds; r++) {
        ck_compactor_options o;
        memset(&o, 0, sizeof o);
        o.context_window = bc->window;
        o.store_dir = store;
        o.session_id = NULL;
        ck_error err;
        ck_compactor *k = bc->full ? NULL : ck_compactor_new(&o, &err);
        if (bc->stateful) {
            /* One compaction at a small window, then the same compactor at the big one. */
            ck_compactor_options small = o;
            small.context_window = ck_estimate_history(bc->h, CK_EST_DEFAULT) * 100 / 85;
            ck_compactor_free(k);
            k = ck_compactor_new(&small, &err);
            ck_compaction *c = NULL;
            ck_compactor_compact(k, bc->h, 0, trivial, NULL, &c, &err);
            ck_compaction_free(c);
        }
        double t0 = now_ms();
        for (int i = 0; i < reps; i++) {
            ck_compactor *kk = k;
            if (bc->full) {
                o.context_window = ck_estimate_history(bc->h, CK_EST_DEFAULT) * 100 / 85;
                kk = ck_compactor_new(&o, &err);
            }
            ck_compaction *c = NULL;
            if (ck_compactor_compact(kk, bc->h, 0, trivial, NULL, &c, &err) != CK_OK) {
                fprintf(stderr, "bench: %s: %s\n", bc->name, ck_strerror(err.code));
                exit(1);
            }
            ck_compaction_free(c);
            if (bc->full) ck_compactor_free(kk);
        }
        samples[r] = (now_ms() - t0) / reps;
        ck_compactor_free(k);
    }
    qsort(samples, (size_t)rounds, sizeof *samples, cmp_double);
    double median = samples[rounds / 2];
    free(samples);
    return median;
}

static uint64_t history_bytes(const ck_history *h) {
    uint64_t b = 0;
    for (size_t i = 0; i < ck_history_count(h); i++) {
        const ck_part *parts;
        size_t n;
        ck_history_get(h, i, NULL, NULL, &parts, &n);
        for (size_t k = 0; k < n; k++) b += parts[k].text_len + parts[k].id_len;
    }
    return b;
}

static FILE *json_out;

/* One result as a JSON line for the report (bench/report.py). */
static void emit(const char *name, size_t n, uint64_t bytes, double ms) {
    if (json_out)
        fprintf(json_out,
                "{\"lang\":\"c\",\"case\":\"%s\",\"messages\":%zu,\"bytes\":%llu,"
                "\"ms\":%.6f}\n",
                name, n, (unsigned long long)bytes, ms);
}

int main(int argc, char **argv) {
    const char *store = argc > 1 ? argv[1] : "/tmp/ctxkeel-bench";
    json_out = argc > 2 ? fopen(argv[2], "w") : NULL;
    printf("%-44s %9s %10s %12s\n", "case", "messages", "bytes", "ms/call");
    static const size_t sizes[] = {200, 1000, 10000, 100000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        char *arena;
        size_t n = sizes[s];
        ck_history *h = synthetic(n, 1400, &arena);
        uint64_t bytes = history_bytes(h);
        int reps = n >= 10000 ? 3 : 50, rounds = n >= 100000 ? 3 : 7;
        /* Estimation alone. */
        double t0 = now_ms();
        volatile uint64_t sink = 0;
        for (int i = 0; i < reps * 4; i++) sink += ck_estimate_history(h, CK_EST_DEFAULT);
        double est = (now_ms() - t0) / (reps * 4);
        printf("%-44s %9zu %10llu %12.4f  (%.0f MB/s)\n", "estimate_history (default)", n,
               (unsigned long long)bytes, est, (double)bytes / 1e3 / est);
        emit("estimate", n, bytes, est);
        bench_case none = {"compact, nothing to compact", h, bytes * 10, 0, 0};
        bench_case steady = {"compact, checkpoint reused (no model)", h, bytes * 10, 1, 0};
        bench_case full = {"compact, full compaction (trivial model)", h, 0, 0, 1};
        double t_none = run_case(&none, rounds, reps, store);
        printf("%-44s %9zu %10llu %12.4f\n", none.name, n, (unsigned long long)bytes, t_none);
        emit("compact_none", n, bytes, t_none);
        double t_steady = run_case(&steady, rounds, reps, store);
        printf("%-44s %9zu %10llu %12.4f\n", steady.name, n, (unsigned long long)bytes, t_steady);
        emit("compact_steady", n, bytes, t_steady);
        if (n <= 10000) {
            double t_full = run_case(&full, n >= 10000 ? 3 : 5, n >= 10000 ? 1 : 5, store);
            printf("%-44s %9zu %10llu %12.4f\n", full.name, n, (unsigned long long)bytes, t_full);
            emit("compact_full", n, bytes, t_full);
        }
        ck_history_free(h);
        free(arena);
        (void)sink;
    }
    if (json_out) fclose(json_out);
    return 0;
}
