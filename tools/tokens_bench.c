/* tokens_bench.c - a probe into the token estimator, driven by tools/tokens_measure.js.
 *
 * It includes tokens.c (which needs no other core file) so that it can call the pre-tokenizers
 * directly:
 *
 *   cc -std=c11 -O2 -D_POSIX_C_SOURCE=200112L -DCK_STATIC -Icsrc/include tools/tokens_bench.c \
 *      -o tokens_bench
 *
 *   tokens_bench pieces o200k|cl100k   stdin: records; prints the byte length of every piece of
 *                                      each record on one line (checked against the regexes)
 *   tokens_bench estimate              stdin: records; prints "default cl100k chars4" per record
 *   tokens_bench speed SECONDS FILE... prints MB/s of both calibrated estimators over the files
 *                                      joined (best of several rounds, in thread CPU time)
 *
 * A record is its byte length in decimal, a newline, then that many bytes. */
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
    const profile *pf = strcmp(name, "cl100k") == 0 ? &CL100K : &O200K;
    char *buf = NULL;
    size_t cap = 0, len;
    while (read_record(&buf, &cap, &len)) {
        const uint8_t *s = (const uint8_t *)buf;
        for (size_t i = 0, e; i < len; i = e) {
            int kind;
            e = pf->o200k ? o200k_piece(s, len, i, &kind) : cl100k_piece(s, len, i, &kind);
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
        printf("%llu %llu %llu\n", (unsigned long long)ck_estimate_text(buf, len, CK_EST_DEFAULT),
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

static int cmd_speed(double seconds, int nfiles, char **files) {
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
        total += len;
    }
    static const struct {
        const char *name;
        ck_estimator est;
    } ests[] = {{"default", CK_EST_DEFAULT}, {"cl100k", CK_EST_CL100K}};
    for (size_t k = 0; k < sizeof ests / sizeof ests[0]; k++) {
        /* The best of several rounds, each at least a tenth of the time asked for. */
        double best = 0;
        uint64_t tokens = 0;
        for (double end = now() + seconds; now() < end;) {
            double t0 = now(), t;
            int reps = 0;
            do {
                tokens = ck_estimate_text(all, total, ests[k].est);
                reps++;
            } while ((t = now() - t0) < seconds / 10);
            double rate = (double)total * reps / t / 1e6;
            if (rate > best) best = rate;
        }
        printf("%s %.1f MB/s (%zu bytes, %llu tokens)\n", ests[k].name, best, total,
               (unsigned long long)tokens);
    }
    free(all);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "pieces") == 0) return cmd_pieces(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "estimate") == 0) return cmd_estimate();
    if (argc >= 4 && strcmp(argv[1], "speed") == 0)
        return cmd_speed(atof(argv[2]), argc - 3, argv + 3);
    fprintf(stderr, "usage: tokens_bench pieces o200k|cl100k | estimate | "
                    "speed SECONDS FILE...\n");
    return 2;
}
