/* The token estimators: exact counts where the model is exact, robustness on hostile input,
 * chars4 unchanged, near-additivity, and accuracy on the TEST half of tests/data/tokens
 * against the exact counts recorded in exact_counts.tsv (written by tools/tokens_measure.js
 * with gpt-tokenizer). Expected counts below were checked with gpt-tokenizer's o200k_base and
 * cl100k_base encoders. */
#include <time.h>

#include "harness.h"

#define DEF CK_EST_DEFAULT
#define CL CK_EST_CL100K

static uint64_t est(const char *s, ck_estimator e) { return ck_estimate_text(s, strlen(s), e); }

TEST(exact_small_strings) {
    /* Frequent words, punctuation, code and whitespace come from the exact table. */
    INT_EQ(est("hello world", DEF), 2);
    INT_EQ(est("Hello, world!", DEF), 4);
    INT_EQ(est(" the", DEF), 1);
    INT_EQ(est("THE", DEF), 1);
    INT_EQ(est("HTTPServer", DEF), 2);
    INT_EQ(est("getUserName", DEF), 3); /* o200k cuts words at a capital */
    INT_EQ(est("    return x;\n", DEF), 4);
    INT_EQ(est("def main():\n    print(\"hi\")\n", DEF), 8);
    INT_EQ(est("if (x == NULL) return -1;", DEF), 10);
    INT_EQ(est("{\"role\": \"user\", \"content\": \"hi\"}", DEF), 12);
    INT_EQ(est("Traceback (most recent call last):", DEF), 8);
    INT_EQ(est("    at Object.<anonymous> (/app/index.js:10:5)", DEF), 15);
    INT_EQ(est("hello world", CL), 2);
    INT_EQ(est("def main():\n    print(\"hi\")\n", CL), 8);
    INT_EQ(est("Traceback (most recent call last):", CL), 8);
}

TEST(exact_by_rule) {
    /* One to three digits are one token: digits go in groups of three from the left. */
    INT_EQ(est("7", DEF), 1);
    INT_EQ(est("1234567890", DEF), 4);
    INT_EQ(est("12,345.67", DEF), 5);
    INT_EQ(est("2024-01-15T10:30:00Z", DEF), 13);
    INT_EQ(est("1234567890", CL), 4);
    /* One byte is one token; two ASCII bytes come from a bit table. */
    INT_EQ(est("a", DEF), 1);
    INT_EQ(est(" ", DEF), 1);
    INT_EQ(est("->", DEF), 1);
    INT_EQ(est("!=", DEF), 1);
    INT_EQ(est("\r\n", DEF), 1);
    INT_EQ(est("\n\n", DEF), 1);
    INT_EQ(est("\t\t", CL), 1);
    INT_EQ(est("    ", DEF), 1);
    INT_EQ(est("...", DEF), 1);
}

TEST(exact_cjk) {
    INT_EQ(est("中文", DEF), 1);
    INT_EQ(est("中文", CL), 2);
    INT_EQ(est("你好，世界！", DEF), 4);
    INT_EQ(est("你好，世界！", CL), 7);
    INT_EQ(est("日本語", DEF), 2);
    INT_EQ(est("日本語", CL), 4);
    INT_EQ(est("こんにちは", DEF), 1);
    INT_EQ(est("😀", DEF), 1);
    INT_EQ(est("😀", CL), 2);
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
    INT_EQ(ck_estimate_tools(NULL, 0, DEF), 0);
    /* An unknown estimator value gets the default. */
    INT_EQ(est("hello world", (ck_estimator)99), est("hello world", DEF));
}

/* est(a + b) is est(a) + est(b), give or take the piece that spans the join. */
TEST(nearly_additive) {
    static const char *parts[] = {
        "The function returns NULL when the allocation fails.",
        "    for (size_t i = 0; i < n; i++) total += v[i];\n",
        "{\"path\": \"/usr/lib/x86_64-linux-gnu\", \"mode\": 420}",
        "上下文压缩不是删历史，而是渐进式的行为。",
        "error[E0277]: `?` couldn't convert the error to `String`\n",
        "Ünïcödé façade naïve résumé — “quotes” and emoji 🎉🎉",
    };
    size_t n = sizeof parts / sizeof parts[0];
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s%s", parts[i], parts[j]);
            for (int e = 0; e < 2; e++) {
                ck_estimator x = e ? CL : DEF;
                long whole = (long)est(buf, x), sum = (long)(est(parts[i], x) + est(parts[j], x));
                OK(whole - sum <= 2 && sum - whole <= 2);
            }
        }
    }
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Fills buf with `len` bytes of `unit` repeated (the last copy may be cut). */
static void fill(char *buf, size_t len, const char *unit) {
    size_t u = strlen(unit);
    for (size_t i = 0; i < len; i++) buf[i] = unit[i % u];
}

/* Every estimate of a hostile megabyte is positive, at most one token per byte, grows with
 * the input, and comes back quickly (the pre-tokenizers never backtrack far). */
TEST(hostile_input) {
    static const char *units[] = {
        "a",                   /* one 1 MB letter piece */
        "Ab",                  /* case changes everywhere */
        "QUERTYUIOPASDFGHJKL", /* capitals only: o200k tries its rules in turn */
        "x7Gq/Zp+9Lk=",        /* base64 */
        "\xcc\x81",            /* lone combining marks (U+0301) */
        "a\xcc\x81",           /* letters with marks */
        "\xf0\x9f\x98\x80",    /* 4-byte emoji */
        "\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd", /* emoji with a skin tone modifier */
        " ",                   /* one whitespace run */
        " \n",                 /* alternating space and newline */
        "\t\r\n \v\f",         /* every ASCII space */
        "!",                   /* one punctuation run */
        "'s'",                 /* contractions */
        "中",                  /* one CJK piece */
        "1",                   /* digits */
        "\xff\xfe\x80",        /* invalid UTF-8 */
        "\xe4\xb8",            /* truncated sequences */
    };
    size_t len = (size_t)1 << 20;
    char *buf = malloc(len + 1);
    OK(buf != NULL);
    if (!buf) return;
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++) {
        fill(buf, len, units[k]);
        for (int e = 0; e < 2; e++) {
            ck_estimator x = e ? CL : DEF;
            double t0 = seconds();
            uint64_t whole = ck_estimate_text(buf, len, x);
            uint64_t half = ck_estimate_text(buf, len / 2, x);
            uint64_t small = ck_estimate_text(buf, 4096, x);
            double took = seconds() - t0;
            OK(whole > 0 && whole <= len);
            OK(small <= half && half <= whole);
            if (!(took < 2.0)) { /* generous for sanitizers and valgrind; quadratic is far worse */
                H_REPORT("a hostile megabyte is estimated in under 2 s");
                fprintf(stderr, "    unit %zu took %.3f s\n", k, took);
            }
        }
    }
    /* NUL bytes are text like any other. */
    memset(buf, 0, 1000);
    OK(ck_estimate_text(buf, 1000, DEF) > 0);
    OK(ck_estimate_text(buf, 1000, DEF) <= 1000);
    free(buf);
}

/* Growing a text a character at a time never makes its estimate fall by more than the piece
 * the last character joins can save; cutting it inside a character costs at most a token per
 * byte. */
TEST(prefixes_grow) {
    const char *text = "Résumé: the build failed at 12:04 — see `make[2]: *** [all] Error 2`.\n"
                       "修复后重新运行测试，全部通过。 テストは全部通りました。\n";
    size_t n = strlen(text);
    uint64_t prev = 0;
    for (size_t i = 1; i <= n; i++) {
        uint64_t cur = ck_estimate_text(text, i, DEF);
        OK(cur <= i);
        if (i == n || (text[i] & 0xC0) != 0x80) { /* i ends a whole character */
            OK(cur + 2 >= prev);
            prev = cur;
        }
    }
}

/* ---- Accuracy on the TEST half of the corpus ------------------------------------------- */

typedef struct tally {
    char category[32];
    double abs_err[2], signed_err[2], exact[2];
} tally;

static const char *data_dir(void) {
    const char *d = getenv("CK_TOKENS_DATA");
    return d ? d : "tests/data/tokens";
}

TEST(accuracy_on_test_half) {
    char path[4096];
    snprintf(path, sizeof path, "%s/exact_counts.tsv", data_dir());
    size_t len = 0;
    char *tsv = h_read_file(path, &len);
    OK(tsv != NULL);
    if (!tsv) return;
    tally t[16];
    size_t nt = 0, docs = 0;
    memset(t, 0, sizeof t);
    for (char *line = tsv, *next; line < tsv + len; line = next) {
        char *end = memchr(line, '\n', (size_t)(tsv + len - line));
        next = end ? end + 1 : tsv + len;
        if (end) *end = '\0';
        char split[16], cat[32], name[256];
        long exact[2];
        if (line[0] == '#' ||
            sscanf(line, "%15s %31s %255s %ld %ld", split, cat, name, &exact[0], &exact[1]) != 5 ||
            strcmp(split, "test") != 0)
            continue;
        char file[4096];
        size_t flen = 0;
        snprintf(file, sizeof file, "%s/%s/%s/%s", data_dir(), split, cat, name);
        char *text = h_read_file(file, &flen);
        OK(text != NULL);
        if (!text) continue;
        size_t k = 0;
        while (k < nt && strcmp(t[k].category, cat) != 0) k++;
        if (k == nt && nt < 15) snprintf(t[nt++].category, sizeof t[0].category, "%s", cat);
        for (int e = 0; e < 2 && k < nt; e++) {
            double d = (double)ck_estimate_text(text, flen, e ? CL : DEF) - (double)exact[e];
            for (size_t all = 0; all < 2; all++) {
                tally *x = all ? &t[15] : &t[k];
                x->abs_err[e] += d < 0 ? -d : d;
                x->signed_err[e] += d;
                x->exact[e] += (double)exact[e];
            }
        }
        docs++;
        free(text);
    }
    free(tsv);
    OK(docs >= 100);
    snprintf(t[15].category, sizeof t[15].category, "all");
    for (size_t k = 0; k < 16; k++) {
        if (k >= nt && k != 15) continue;
        for (int e = 0; e < 2; e++) {
            double abs_pct = 100 * t[k].abs_err[e] / t[k].exact[e];
            double signed_pct = 100 * t[k].signed_err[e] / t[k].exact[e];
            /* At most 6% in every category; at most 4%, and a signed total within 2%, in all. */
            int ok = k == 15 ? abs_pct <= 4.0 && signed_pct <= 2.0 && signed_pct >= -2.0
                             : abs_pct <= 6.0;
            if (!ok) {
                H_REPORT("estimate within the accuracy targets");
                fprintf(stderr, "    %s (%s): %.2f%% absolute, %+.2f%% signed\n", t[k].category,
                        e ? "cl100k" : "default", abs_pct, signed_pct);
            } else {
                h_pass++;
            }
        }
    }
}

HARNESS_MAIN(RUN(exact_small_strings) RUN(exact_by_rule) RUN(exact_cjk) RUN(chars4_unchanged)
                 RUN(empty_and_null) RUN(nearly_additive) RUN(hostile_input) RUN(prefixes_grow)
                     RUN(accuracy_on_test_half))
