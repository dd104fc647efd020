/* The search matcher (csrc/src/regex.c) against glibc's regcomp/regexec on the patterns that
 * make backtracking engines slow, and on ordinary grep patterns over a log-like text. Each
 * glibc run happens in a child process stopped after GLIBC_LIMIT seconds, so that a pattern
 * glibc takes hours on does not hold up the benchmark.
 *
 *   bench_regex [GLIBC_LIMIT_SECONDS]      (`make bench-regex`; prints a Markdown table)
 *
 * A figure is the best of three runs of one search (compile included), wall-clock time. */
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../csrc/src/regex.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Ours: milliseconds, or -1 when the pattern is refused; *what gets the outcome. */
static double ours(const char *pattern, const char *text, size_t len, const char **what) {
    double best = -1;
    for (int run = 0; run < 3; run++) {
        double t0 = now_ms();
        ck__regex *re = NULL;
        ck_error err;
        if (ck__regex_new(pattern, strlen(pattern), &re, &err) != CK_OK) {
            *what = "refused (backreference)";
            return now_ms() - t0;
        }
        uint64_t budget = (uint64_t)1 << 40;
        int got = ck__regex_search(re, text, len, &budget);
        ck__regex_free(re);
        double ms = now_ms() - t0;
        *what = got == CK__REGEX_MATCH ? "match" : got == CK__REGEX_CUT ? "cut" : "no match";
        if (best < 0 || ms < best) best = ms;
    }
    return best;
}

/* glibc in a child: milliseconds, or -1 when it ran out of time. */
static double glibc(const char *pattern, const char *text, int limit, const char **what) {
    double best = -1;
    for (int run = 0; run < 3; run++) {
        int fd[2];
        if (pipe(fd) != 0) return -2;
        double t0 = now_ms();
        pid_t kid = fork();
        if (kid == 0) {
            alarm((unsigned)limit);
            regex_t re;
            char out = 'r';
            if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) == 0)
                out = regexec(&re, text, 0, NULL, 0) == 0 ? 'm' : 'n';
            if (write(fd[1], &out, 1) != 1) _exit(2);
            _exit(0);
        }
        close(fd[1]);
        int status = 0;
        waitpid(kid, &status, 0);
        double ms = now_ms() - t0;
        char got = 0;
        if (read(fd[0], &got, 1) != 1) got = 0;
        close(fd[0]);
        if (!got) {
            *what = "killed at the limit";
            return -1;
        }
        *what = got == 'm' ? "match" : got == 'n' ? "no match" : "refused";
        if (best < 0 || ms < best) best = ms;
    }
    return best;
}

int main(int argc, char **argv) {
    int limit = argc > 1 ? atoi(argv[1]) : 30;
    static char as[4001], xs[4001], log[1 << 20];
    memset(as, 'a', 4000);
    memset(xs, 'x', 4000);
    size_t n = 0;
    for (int i = 0; n + 100 < sizeof log - 1; i++)
        n += (size_t)snprintf(log + n, sizeof log - n,
                              "2024-05-01T10:%02d:%02d INFO worker-%d handled request %d in %d ms ",
                              i / 60 % 60, i % 60, i % 8, i, i % 97);
    log[n] = '\0';
    /* Random a/b lines make (a|b)*a(a|b){15}x need a new DFA state at nearly every byte: the
     * matcher's worst case, each byte costing a pass over the program. */
    static char ab[1 << 20];
    unsigned seed = 5;
    for (size_t i = 0; i + 1 < sizeof ab; i++) {
        seed = seed * 1103515245u + 12345u;
        ab[i] = (seed >> 16) & 1 ? 'a' : 'b';
    }
    struct {
        const char *pattern, *text_name, *text;
    } cases[] = {
        {"(.*)\\1\\1x", "4,000 a", as},
        {"(a*)*b", "4,000 a", as},
        {"(a|aa)*c", "4,000 a", as},
        {"(a+a+)+b", "4,000 a", as},
        {"(.*a){12}b", "4,000 a", as},
        {"(.*)(.*)(.*)(.*)(.*)y", "4,000 x", xs},
        {"((a{1,10}){1,10}){1,10}b", "4,000 a", as},
        {"(x+x+)+y", "4,000 x", xs},
        {"^(a|b)*a(a|b){15}$", "4,000 a", as},
        {"ERROR|FATAL", "1 MB log, one line", log},
        {"request [0-9]+ in 9[0-9] ms$", "1 MB log, one line", log},
        {"\\bworker-[0-9]\\b.*\\b96 ms", "1 MB log, one line", log},
        {"[[:upper:]]{5}", "1 MB log, one line", log},
        {"(a|b)*a(a|b){15}x", "1 MB random a/b, one line", ab},
    };
    printf("| pattern | text | ctxkeel | glibc |\n|---|---|---|---|\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *a = "", *b = "";
        double t_ours = ours(cases[i].pattern, cases[i].text, strlen(cases[i].text), &a);
        double t_glibc = glibc(cases[i].pattern, cases[i].text, limit, &b);
        char g[96];
        if (t_glibc < 0)
            snprintf(g, sizeof g, "> %d s (%s)", limit, b);
        else
            snprintf(g, sizeof g, "%.3f ms (%s)", t_glibc, b);
        printf("| `%s` | %s | %.3f ms (%s) | %s |\n", cases[i].pattern, cases[i].text_name,
               t_ours, a, g);
        fflush(stdout);
    }
    return 0;
}
