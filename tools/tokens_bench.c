/* tokens_bench.c - a probe into the token counter, driven by tools/tokens_measure.js.
 *
 * It includes tokens.c and what it needs (bpe.c, alloc.c) so that it can call the
 * pre-tokenizers directly:
 *
 *   cc -std=c11 -O2 -D_POSIX_C_SOURCE=200112L -D_DEFAULT_SOURCE -DCK_STATIC -Icsrc/include \
 *      tools/tokens_bench.c -lpthread -o tokens_bench
 *
 *   tokens_bench pieces o200k|cl100k   stdin: records; prints the byte length of every piece of
 *                                      each record on one line (checked against the regexes)
 *   tokens_bench estimate              stdin: records; prints "default o200k cl100k chars4" per
 *                                      record
 *   tokens_bench speed SECONDS EST FILE...
 *                                      prints, for estimator EST over the files joined: the time
 *                                      to index its rank table, MB/s of the first pass (every
 *                                      piece new to the cache) and the best MB/s of several
 *                                      rounds after it, in thread CPU time. Run it in a fresh
 *                                      process per estimator, so that the first pass is cold.
 *
 * A record is its byte length in decimal, a newline, then that many bytes. */
#include "../csrc/src/alloc.c"
#include "../csrc/src/bpe.c"
#include "../csrc/src/tokens.c"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Reads one record from stdin into a buffer that grows as needed; 0 at the end of input. */
static int read_record(char **buf, size_t *cap, size_t *len) {
    unsigned long long n;
    if (scanf("%llu", &n) != 1 || getchar() != '\n') return 0;
    if (n + 1 > *cap) {
        char *grown = realloc(*buf, (size_t)n + 1);
        if (!grown) return 0;
        *buf = grown;
        *cap = (size_t)n + 1;
    }
    if (fread(*buf, 1, (size_t)n, stdin) != n) return 0;
    *len = (size_t)n;
    return 1;
}

static int cmd_pieces(const char *name) {
    int o200k = strcmp(name, "cl100k") != 0;
    char *buf = NULL;
    size_t cap = 0, len;
    while (read_record(&buf, &cap, &len)) {
        const uint8_t *s = (const uint8_t *)buf;
        for (size_t i = 0, e; i < len; i = e) {
            int kind;
            e = o200k ? o200k_piece(s, len, i, &kind) : cl100k_piece(s, len, i, &kind);
            printf(i ? " %zu" : "%zu", e - i);
        }
        putchar('\n');
    }
    free(buf);
    return 0;
}

static int cmd_estimate(void) {
    char *buf = NULL;
    size_t cap = 0, len;
    while (read_record(&buf, &cap, &len)) {
        printf("%llu %llu %llu %llu\n",
               (unsigned long long)ck_estimate_text(buf, len, CK_EST_DEFAULT),
               (unsigned long long)ck_estimate_text(buf, len, CK_EST_O200K),
               (unsigned long long)ck_estimate_text(buf, len, CK_EST_CL100K),
               (unsigned long long)ck_estimate_text(buf, len, CK_EST_CHARS4));
    }
    free(buf);
    return 0;
}

/* CPU time of this thread where the system has it: on a shared machine, time spent waiting
 * for a core is not the estimator's. */
static double now(void) {
    struct timespec ts;
#ifdef CLOCK_THREAD_CPUTIME_ID
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmd_speed(double seconds, const char *name, int nfiles, char **files) {
    ck_estimator est;
    if (ck_estimator_from_name(name, strlen(name), &est) != CK_OK) return 2;
    size_t total = 0;
    char *all = NULL;
    for (int k = 0; k < nfiles; k++) {
        size_t len = 0;
        FILE *f = fopen(files[k], "rb");
        if (!f) {
            fprintf(stderr, "tokens_bench: cannot read %s\n", files[k]);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        char *grown = realloc(all, total + len + 1);
        if (!grown || fread(grown + total, 1, len, f) != len) return 1;
        fclose(f);
        all = grown;
        all[total + len] = '\n';
        total += len + 1;
    }
    double t0 = now();
    (void)ck_estimate_text("a b", 3, est); /* indexes the rank table */
    double index_ms = (now() - t0) * 1e3;
    t0 = now();
    uint64_t tokens = ck_estimate_text(all, total, est);
    double first = (double)total / (now() - t0) / 1e6;
    /* The best of several rounds, each at least a tenth of the time asked for. */
    double best = 0;
    for (double end = now() + seconds; now() < end;) {
        double t;
        int reps = 0;
        t0 = now();
        do {
            tokens = ck_estimate_text(all, total, est);
            reps++;
        } while ((t = now() - t0) < seconds / 10);
        double rate = (double)total * reps / t / 1e6;
        if (rate > best) best = rate;
    }
    printf("%s index %.1f ms, first %.1f MB/s, best %.1f MB/s (%zu bytes, %llu tokens)\n", name,
           index_ms, first, best, total, (unsigned long long)tokens);
    free(all);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "pieces") == 0) return cmd_pieces(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "estimate") == 0) return cmd_estimate();
    if (argc >= 5 && strcmp(argv[1], "speed") == 0)
        return cmd_speed(atof(argv[2]), argv[3], argc - 4, argv + 4);
    fprintf(stderr, "usage: tokens_bench pieces o200k|cl100k | estimate | "
                    "speed SECONDS ESTIMATOR FILE...\n");
    return 2;
}
