/* Token counts: exact o200k_base and cl100k_base counts equal to tiktoken's (the expected
 * numbers below come from js-tiktoken; the corpus files are checked against the counts that
 * tools/tokens_measure.js and tools/tokens_kinds.js recorded), the BPE methods of bpe.c agree
 * with each other and with every token's own encoding, the default estimator, chars4 unchanged,
 * and hostile input counted in linear time. */
#include <time.h>

#include "harness.h"

#include "../../csrc/src/bpe.h"

#define DEF CK_EST_DEFAULT
#define CL CK_EST_CL100K
#define O2 CK_EST_O200K

static uint64_t est(const char *s, ck_estimator e) { return ck_estimate_text(s, strlen(s), e); }

TEST(exact_small_strings) {
    static const struct {
        const char *text;
        uint64_t o200k, cl100k;
    } cases[] = {
        {"hello world", 2, 2},
        {"Hello, world!", 4, 4},
        {" the", 1, 1},
        {"HTTPServer", 2, 2},
        {"getUserName", 3, 2}, /* o200k cuts words at a capital, cl100k does not */
        {"    return x;\n", 4, 4},
        {"def main():\n    print(\"hi\")\n", 8, 8},
        {"Traceback (most recent call last):", 8, 8},
        {"1234567890", 4, 4},
        {"2024-01-15T10:30:00Z", 13, 13},
        {"中文", 1, 2},
        {"你好，世界！", 4, 7},
        {"日本語", 2, 4},
        {"😀", 1, 2},
        {"\xc2\xa0\xc2\xa0", 1, 1},
        {"\r\n\r\n\r\n\r\n", 1, 1},
        {"<|endoftext|>", 7, 7}, /* special tokens are text */
        {"\xef\xbb\xbf", 1, 1},  /* U+FEFF is one token, as in tiktoken */
        /* tiktoken's \s is Unicode White_Space: U+FEFF is not in it (so " \ufeff" is one
         * punctuation piece), U+0085 is (JavaScript's \s says the opposite of both). */
        {"a \xef\xbb\xbf" "b", 3, 3},
        {"a\xc2\x85" "b", 4, 4},
        {"a\xc2\x85\xc2\x85" "b", 6, 6},
        {"\xee\x80\x80\xee\x80\x81", 4, 6},
        {"a\xcc\x81\xcc\x81\xcc\x81", 4, 4},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        INT_EQ(est(cases[k].text, O2), cases[k].o200k);
        INT_EQ(est(cases[k].text, CL), cases[k].cl100k);
        INT_EQ(est(cases[k].text, DEF), cases[k].o200k);
    }
}

/* Long runs take bpe.c's linear methods; the counts are tiktoken's. */
TEST(exact_long_runs) {
    char buf[1001];
    memset(buf, ' ', 200);
    INT_EQ(ck_estimate_text(buf, 200, O2), 2);
    INT_EQ(ck_estimate_text(buf, 200, CL), 2);
    memset(buf, '=', 1000);
    INT_EQ(ck_estimate_text(buf, 1000, O2), 16);
    INT_EQ(ck_estimate_text(buf, 1000, CL), 17);
    for (int i = 0; i < 1000; i++) buf[i] = "ab"[i % 2];
    INT_EQ(ck_estimate_text(buf, 1000, O2), 250);
    INT_EQ(ck_estimate_text(buf, 1000, CL), 500);
    memset(buf, 'x', 300);
    INT_EQ(ck_estimate_text(buf, 300, O2), 38);
    INT_EQ(ck_estimate_text(buf, 300, CL), 38);
}

/* One to three digits are one token in both encodings (the counter relies on it), and one
 * byte is one token. */
TEST(exact_by_rule) {
    char buf[4];
    for (int n = 0; n < 1000; n++) {
        for (int width = 1; width <= 3; width++) {
            snprintf(buf, sizeof buf, "%0*d", width, n);
            if ((int)strlen(buf) != width) continue;
            OK(est(buf, O2) == 1 && est(buf, CL) == 1);
        }
    }
    for (int c = 0; c < 256; c++) {
        char b = (char)c;
        OK(ck_estimate_text(&b, 1, O2) == 1 && ck_estimate_text(&b, 1, CL) == 1);
    }
}

/* Every token of both encodings, alone, is one token by each method (the property the
 * backtracking method rests on), and the rank table has what the generator wrote. */
TEST(every_token_is_itself) {
    for (int o200k = 0; o200k < 2; o200k++) {
        const ck__bpe *b = ck__bpe_get(o200k);
        uint32_t n = ck__bpe_tokens(b), bad = 0;
        INT_EQ(n, o200k ? 199998 : 100256);
        for (uint32_t r = 0; r < n; r++) {
            size_t len = 0;
            const uint8_t *t = ck__bpe_token(b, r, &len);
            if (!t || len < 1 || len > 128) {
                bad++;
                continue;
            }
            if (ck__bpe_count_with(b, t, len, CK__BPE_MERGE) != 1 ||
                ck__bpe_count_with(b, t, len, CK__BPE_BACKTRACK) != 1)
                bad++;
        }
        INT_EQ(bad, 0);
        OK(ck__bpe_token(b, n, &(size_t){0}) == NULL);
    }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* The merge loop (tiktoken's method) and backtracking agree on random pieces up to 256 bytes,
 * and the periodic method agrees with both on runs; alphabets chosen so that BPE has plenty to
 * merge and to undo. */
TEST(methods_agree) {
    static const char *alphabets[] = {
        "abcdefghijklmnopqrstuvwxyz", "eeeeetaoinshr", "=-=+*#", " \t\n", "0123456789abcdef",
        "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97", /* 中文字 */
        "\xf0\x9f\x98\x80\xf0\x9f\x91\x8d",     /* emoji */
        "\xd0\xb0\xd0\xb1\xd0\xb2\xd0\xb3",     /* Cyrillic */
        "\x80\xff\xc3\xa9\xe2\x82",              /* bytes that are no UTF-8 */
    };
    uint8_t piece[256];
    size_t mismatches = 0, runs = 0;
    for (int o200k = 0; o200k < 2; o200k++) {
        const ck__bpe *b = ck__bpe_get(o200k);
        for (int k = 0; k < 3000; k++) {
            const char *a = alphabets[rnd() % (sizeof alphabets / sizeof alphabets[0])];
            size_t na = strlen(a), len = 4 + rnd() % 253, period = 1 + rnd() % 8;
            int periodic = rnd() % 3 == 0;
            for (size_t i = 0; i < len; i++)
                piece[i] = periodic && i >= period ? piece[i - period] : (uint8_t)a[rnd() % na];
            uint64_t merge = ck__bpe_count_with(b, piece, len, CK__BPE_MERGE);
            uint64_t back = ck__bpe_count_with(b, piece, len, CK__BPE_BACKTRACK);
            uint64_t autom = ck__bpe_count_with(b, piece, len, CK__BPE_AUTO);
            uint64_t per = ck__bpe_count_with(b, piece, len, CK__BPE_PERIODIC);
            runs += periodic;
            if (merge != back || merge != autom || merge != per) {
                if (mismatches++ < 5)
                    fprintf(stderr, "    %s piece of %zu bytes: merge %llu backtrack %llu auto %llu "
                            "periodic %llu\n", o200k ? "o200k" : "cl100k", len,
                            (unsigned long long)merge, (unsigned long long)back,
                            (unsigned long long)autom, (unsigned long long)per);
            }
        }
    }
    INT_EQ(mismatches, 0);
    OK(runs > 500);
}

TEST(chars4_unchanged) {
    INT_EQ(ck_estimate_text("", 0, CK_EST_CHARS4), 0);
    INT_EQ(ck_estimate_text("a", 1, CK_EST_CHARS4), 1);
    INT_EQ(ck_estimate_text("abcd", 4, CK_EST_CHARS4), 1);
    INT_EQ(ck_estimate_text("abcde", 5, CK_EST_CHARS4), 2);
    INT_EQ(est("日本語", CK_EST_CHARS4), 3); /* 9 bytes */
    INT_EQ(est("The quick brown fox jumps over the lazy dog.", CK_EST_CHARS4), 11);
    INT_EQ(ck_estimate_tools("[{}]", 4, CK_EST_CHARS4), 1);
}

TEST(empty_and_null) {
    INT_EQ(ck_estimate_text(NULL, 0, DEF), 0);
    INT_EQ(ck_estimate_text(NULL, 5, DEF), 0);
    INT_EQ(ck_estimate_text("x", 0, CL), 0);
    INT_EQ(ck_estimate_tools(NULL, 0, O2), 0);
    /* An unknown estimator value gets the default. */
    INT_EQ(est("hello world", (ck_estimator)99), est("hello world", DEF));
}

TEST(estimator_names) {
    static const char *names[] = {"default", "chars4", "cl100k", "o200k"};
    for (int e = 0; e < 4; e++) {
        STR_EQ(ck_estimator_name((ck_estimator)e), names[e]);
        ck_estimator out = (ck_estimator)99;
        INT_EQ(ck_estimator_from_name(names[e], strlen(names[e]), &out), CK_OK);
        INT_EQ(out, e);
    }
    OK(ck_estimator_name((ck_estimator)4) == NULL);
    ck_estimator out = CK_EST_CHARS4;
    INT_EQ(ck_estimator_from_name("o200k_base", 10, &out), CK_EINVAL);
    INT_EQ(ck_estimator_from_name("o200", 4, &out), CK_EINVAL);
    INT_EQ(ck_estimator_from_name("o200k\0", 6, &out), CK_EINVAL);
    INT_EQ(ck_estimator_from_name(NULL, 0, &out), CK_EINVAL);
    INT_EQ(ck_estimator_from_name("o200k", 5, NULL), CK_EINVAL);
    INT_EQ(out, CK_EST_CHARS4); /* untouched on failure */
}

/* Counting is thread-safe: threads that share the per-process cache get the same counts as
 * one thread alone. */
#include <pthread.h>
typedef struct share {
    const char *text;
    size_t len;
    uint64_t got[3];
} share;
static void *count_thread(void *arg) {
    share *s = arg;
    for (int round = 0; round < 20; round++) {
        s->got[0] = ck_estimate_text(s->text, s->len, O2);
        s->got[1] = ck_estimate_text(s->text, s->len, CL);
        s->got[2] = ck_estimate_text(s->text, s->len, DEF);
    }
    return NULL;
}
TEST(threads_share_the_cache) {
    size_t len = 200000;
    char *text = malloc(len);
    OK(text != NULL);
    if (!text) return;
    static const char *words[] = {" alpha", " beta", "Gamma", " δέλτα", " 中文字符", "\n\t",
                                  " zzqxj", " 0x1f", "==", " émigré", " getUserName"};
    for (size_t i = 0; i < len;) {
        const char *w = words[rnd() % (sizeof words / sizeof words[0])];
        for (size_t k = 0; w[k] && i < len; k++) text[i++] = w[k];
    }
    while (len && (text[len - 1] & 0xC0) == 0x80) len--;
    share alone = {text, len, {0}};
    count_thread(&alone);
    pthread_t th[4];
    share s[4];
    for (int t = 0; t < 4; t++) {
        s[t] = (share){text, len, {0}};
        OK(pthread_create(&th[t], NULL, count_thread, &s[t]) == 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        for (int e = 0; e < 3; e++) INT_EQ(s[t].got[e], alone.got[e]);
    }
    INT_EQ(alone.got[0], alone.got[2]);
    free(text);
}

/* ---- The corpus -------------------------------------------------------------------------- */

static const char *data_dir(void) {
    const char *d = getenv("CK_TOKENS_DATA");
    return d ? d : "tests/data/tokens";
}

/* Calls `each` for every row of a counts file: split, category, file name, text, exact counts
 * (o200k, cl100k). Returns the number of rows read. */
static size_t each_counted(const char *tsv_name,
                           void (*each)(const char *split, const char *cat, const char *text,
                                        size_t len, const long exact[2], void *ctx),
                           void *ctx) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", data_dir(), tsv_name);
    size_t len = 0, rows = 0;
    char *tsv = h_read_file(path, &len);
    OK(tsv != NULL);
    if (!tsv) return 0;
    for (char *line = tsv, *next; line < tsv + len; line = next) {
        char *end = memchr(line, '\n', (size_t)(tsv + len - line));
        next = end ? end + 1 : tsv + len;
        if (end) *end = '\0';
        char split[16], cat[64], name[256], file[4096];
        long exact[2];
        if (line[0] == '#' ||
            sscanf(line, "%15s %63s %255s %ld %ld", split, cat, name, &exact[0], &exact[1]) != 5)
            continue;
        if (strcmp(split, "classes") == 0)
            snprintf(file, sizeof file, "%s/classes/%s", data_dir(), name);
        else
            snprintf(file, sizeof file, "%s/%s/%s/%s", data_dir(), split, cat, name);
        size_t flen = 0;
        char *text = h_read_file(file, &flen);
        OK(text != NULL);
        if (!text) continue;
        each(split, cat, text, flen, exact, ctx);
        rows++;
        free(text);
    }
    free(tsv);
    return rows;
}

static void check_exact(const char *split, const char *cat, const char *text, size_t len,
                        const long exact[2], void *ctx) {
    size_t *wrong = ctx;
    uint64_t o = ck_estimate_text(text, len, O2), c = ck_estimate_text(text, len, CL);
    uint64_t d = ck_estimate_text(text, len, DEF);
    if (o != (uint64_t)exact[0] || c != (uint64_t)exact[1] || d != o) {
        if ((*wrong)++ < 5)
            fprintf(stderr, "    %s/%s: o200k %llu (exact %ld), cl100k %llu (exact %ld), default "
                    "%llu\n", split, cat, (unsigned long long)o, exact[0], (unsigned long long)c,
                    exact[1], (unsigned long long)d);
    }
}

/* Every text of the corpus: o200k and cl100k equal the recorded exact counts, and the default
 * equals o200k (no piece of the corpus is 64 KB long). */
TEST(corpus_counts_are_exact) {
    size_t wrong = 0;
    size_t rows = each_counted("exact_counts.tsv", check_exact, &wrong);
    OK(rows >= 250);
    size_t generated = each_counted("generated_counts.tsv", check_exact, &wrong);
    OK(generated >= 60);
    INT_EQ(wrong, 0);
}

/* ---- The default estimator on giant pieces ----------------------------------------------- */

/* A piece of more than 64 KB without a short period is estimated from samples: never below
 * the exact count, and within 3% above it. */
TEST(default_giant_pieces) {
    size_t len = (size_t)1 << 20;
    char *buf = malloc(len);
    OK(buf != NULL);
    if (!buf) return;
    static const char *alphabets[] = {"abcdefghijklmnopqrstuvwxyz",
                                      "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6",
                                      "!#$%&*+-=?@^|~"};
    for (size_t k = 0; k < 3; k++) {
        size_t na = strlen(alphabets[k]), unit = k == 1 ? 3 : 1;
        for (size_t i = 0; i + unit <= len; i += unit) {
            size_t at = (rnd() % (na / unit)) * unit;
            memcpy(buf + i, alphabets[k] + at, unit);
        }
        size_t n = len - len % unit;
        uint64_t exact = ck_estimate_text(buf, n, O2), def = ck_estimate_text(buf, n, DEF);
        OK(def >= exact);
        OK((double)def <= 1.03 * (double)exact);
    }
    free(buf);
}

/* ---- Hostile input ------------------------------------------------------------------------ */

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fills buf with `len` bytes of `unit` repeated (the last copy may be cut). */
static void fill(char *buf, size_t len, const char *unit) {
    size_t u = strlen(unit);
    for (size_t i = 0; i < len; i++) buf[i] = unit[i % u];
}

/* Fills buf with `len` bytes drawn from `alphabet` (whole characters of `unit` bytes). */
static void fill_random(char *buf, size_t len, const char *alphabet, size_t unit) {
    size_t n = strlen(alphabet) / unit;
    for (size_t i = 0; i + unit <= len; i += unit) memcpy(buf + i, alphabet + (rnd() % n) * unit, unit);
    for (size_t i = len - len % unit; i < len; i++) buf[i] = 'x';
}

typedef struct gather {
    char *buf;
    size_t at, cap;
} gather;
static void gather_text(const char *split, const char *cat, const char *text, size_t len,
                        const long exact[2], void *ctx) {
    gather *g = ctx;
    (void)split, (void)cat, (void)exact;
    size_t take = g->cap - g->at < len ? g->cap - g->at : len;
    memcpy(g->buf + g->at, text, take);
    g->at += take;
}

static double time_count(const char *buf, size_t len, ck_estimator e, uint64_t *tokens) {
    double t0 = cpu_seconds();
    *tokens = ck_estimate_text(buf, len, e);
    return cpu_seconds() - t0;
}

/* Hostile text, each kind counted in time linear in its length. With the default estimator,
 * 10 MB of each takes at most 40 times what 10 MB of ordinary text takes (the corpus texts
 * repeated) and at most 30 times what 1 MB of it takes (a quadratic method would take a
 * hundred times as long). Exact o200k counting is held to the second rule on 2 MB: one
 * unbroken run of random letters is its slowest input (about 1 MB/s), which the default
 * estimates from samples instead. A count is positive and at most one token per byte. CPU
 * time is measured, so the margins absorb a busy machine; CK_SANITIZED (set under the
 * sanitizers and valgrind) skips the timing and counts 1 MB. */
TEST(hostile_input_linear) {
    int timed = getenv("CK_SANITIZED") == NULL;
    size_t cap = (size_t)(timed ? 10 : 1) << 20;
    char *buf = malloc(cap), *normal = malloc(cap);
    OK(buf && normal);
    if (!buf || !normal) {
        free(buf);
        free(normal);
        return;
    }
    /* Ordinary text: every text of the corpus, repeated to fill the buffer. */
    gather g = {normal, 0, cap};
    while (g.at < cap && each_counted("exact_counts.tsv", gather_text, &g) && g.at) {
    }
    OK(g.at == cap);
    static const struct {
        const char *name, *unit;
        int random;
        size_t width;
    } kinds[] = {
        {"one letter", "a", 0, 1},
        {"spaces", " ", 0, 1},
        {"equals signs", "=", 0, 1},
        {"newlines", "\n", 0, 1},
        {"CRLF", "\r\n", 0, 1},
        {"NBSP", "\xc2\xa0", 0, 1},
        {"one CJK character", "中", 0, 1},
        {"one emoji", "\xf0\x9f\x98\x80", 0, 1},
        {"digits", "0123456789", 1, 1},
        {"letters, no boundary", "abcdefghijklmnopqrstuvwxyz", 1, 1},
        {"base64, no boundary", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", 1, 1},
        {"CJK, no boundary", "\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\xe7\xac\xa6", 1, 3},
        {"punctuation", "!#$%&*+-=?@^|~", 1, 1},
    };
    for (int e = 0; e < 2; e++) {
        ck_estimator x = e ? O2 : DEF;
        size_t len = e && timed ? cap / 5 : cap;
        uint64_t tokens;
        double base = time_count(normal, len, x, &tokens);
        base = time_count(normal, len, x, &tokens); /* warm, as ordinary text mostly is */
        if (base < 1e-3) base = 1e-3;
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0] + 1; k++) {
            const char *name = k < sizeof kinds / sizeof kinds[0] ? kinds[k].name : "random bytes";
            if (k == sizeof kinds / sizeof kinds[0])
                for (size_t i = 0; i < len; i++) buf[i] = (char)rnd();
            else if (kinds[k].random)
                fill_random(buf, len, kinds[k].unit, kinds[k].width);
            else
                fill(buf, len, kinds[k].unit);
            uint64_t small_tokens, big_tokens;
            double small = time_count(buf, len / 10, x, &small_tokens);
            double big = time_count(buf, len, x, &big_tokens);
            OK(big_tokens > 0 && big_tokens <= len && small_tokens <= big_tokens);
            if (!timed) continue;
            if (small < 1e-3) small = 1e-3;
            if (getenv("CK_TOKENS_VERBOSE")) fprintf(stderr, "    %-24s %-7s %.3f s, a tenth %.3f s, ordinary %.3f s\n", name, e ? "o200k" : "default", big, small, base);
            if (!((e || big <= 40 * base) && big <= 30 * small)) {
                H_REPORT("hostile input counted in linear time");
                fprintf(stderr, "    %s (%s): %zu bytes %.3f s, a tenth %.3f s, ordinary %.3f s\n",
                        name, e ? "o200k" : "default", len, big, small, base);
            } else {
                h_pass++;
            }
        }
    }
    /* NUL bytes are text like any other. */
    memset(buf, 0, 1000);
    OK(ck_estimate_text(buf, 1000, DEF) > 0 && ck_estimate_text(buf, 1000, DEF) <= 1000);
    free(buf);
    free(normal);
}

HARNESS_MAIN(RUN(exact_small_strings) RUN(exact_long_runs) RUN(exact_by_rule)
                 RUN(every_token_is_itself) RUN(methods_agree) RUN(chars4_unchanged)
                     RUN(empty_and_null) RUN(estimator_names) RUN(threads_share_the_cache)
                         RUN(corpus_counts_are_exact) RUN(default_giant_pieces)
                             RUN(hostile_input_linear))
