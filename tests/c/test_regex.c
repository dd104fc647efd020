/* The search matcher (csrc/src/regex.c): the syntax it takes, what it refuses, UTF-8, the work
 * budget, allocation failures, and agreement with glibc's regexec() on random patterns and
 * texts (byte semantics in the C locale, character semantics in C.UTF-8). */
#include <locale.h>
#include <regex.h>
#include <stdint.h>

#include "harness.h"

#include "../../csrc/src/regex.h"

#define BIG_BUDGET ((uint64_t)1 << 40)

/* Matches `pattern` against `text`: CK__REGEX_MATCH / NO_MATCH / CUT, or -1 when it did not
 * compile. */
static int rx(const char *pattern, const char *text, size_t len) {
    ck__regex *re = NULL;
    if (ck__regex_new(pattern, strlen(pattern), &re, NULL) != CK_OK) return -1;
    uint64_t budget = BIG_BUDGET;
    int got = ck__regex_search(re, text, len, &budget);
    ck__regex_free(re);
    return got;
}

static int matches(const char *pattern, const char *text) {
    return rx(pattern, text, strlen(text)) == CK__REGEX_MATCH;
}

/* glibc's answer, or -1 when glibc refuses the pattern. */
static int glibc(const char *pattern, const char *text) {
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) return -1;
    int got = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return got;
}

TEST(syntax) {
    struct {
        const char *pattern, *text;
        int want;
    } cases[] = {
        {"", "", 1},
        {"", "abc", 1},
        {"abc", "xxabcxx", 1},
        {"abc", "ab", 0},
        {"a.c", "abc", 1},
        {"a.c", "ac", 0},
        {"^abc", "abcd", 1},
        {"^abc", "xabc", 0},
        {"abc$", "xabc", 1},
        {"abc$", "abcx", 0},
        {"^$", "", 1},
        {"^$", "x", 0},
        {"a*", "", 1},
        {"^a*$", "aaaa", 1},
        {"^a+$", "", 0},
        {"^a?b$", "b", 1},
        {"^a?b$", "aab", 0},
        {"^(ab|cd)+$", "abcdab", 1},
        {"^(ab|cd)+$", "abcda", 0},
        {"^a{3}$", "aaa", 1},
        {"^a{3}$", "aa", 0},
        {"^a{2,}$", "aaaaa", 1},
        {"^a{2,}$", "a", 0},
        {"^a{1,2}$", "aaa", 0},
        {"^a{,2}$", "", 1},
        {"^a{,2}$", "aaa", 0},
        {"^a{0}b$", "b", 1},
        {"[abc]", "xxbxx", 1},
        {"[^abc]", "abc", 0},
        {"[^abc]", "abcd", 1},
        {"^[a-c]+$", "abcba", 1},
        {"^[a-c]+$", "abd", 0},
        {"[]x]", "]", 1},
        {"[^]x]", "]", 0},
        {"^[a-]+$", "a-a", 1},
        {"^[-a]+$", "-a", 1},
        {"^[[:digit:]]+$", "0123", 1},
        {"^[[:digit:]]+$", "01a", 0},
        {"^[[:alpha:][:digit:]_]+$", "ab_1", 1},
        {"^[[:upper:]]", "Ab", 1},
        {"^[[:lower:]]", "Ab", 0},
        {"^[[:space:]]+$", " \t\r", 1},
        {"^[[:xdigit:]]+$", "09afAF", 1},
        {"^[[:xdigit:]]+$", "0g", 0},
        {"^[[:punct:]]+$", "!-./{}~", 1},
        {"[[:cntrl:]]", "a\x01", 1},
        {"^[[.-.]a]+$", "-a-", 1},
        {"^[[=a=]]$", "a", 1},
        {"a|b|c", "xxc", 1},
        {"^(a|b|c)$", "d", 0},
        {"^(|a)$", "", 1},
        {"^(a|)$", "a", 1},
        {"^()$", "", 1},
        {"(?:ab)+", "abab", 1},
        {"^\\.$", ".", 1},
        {"^\\.$", "a", 0},
        {"^\\*\\+\\?\\{\\}\\(\\)\\[\\]\\|\\^\\$\\\\$", "*+?{}()[]|^$\\", 1},
        {"\\d+", "abc123", 1},
        {"^\\d+$", "12a", 0},
        {"^\\D+$", "abc", 1},
        {"^\\w+$", "ab_9", 1},
        {"^\\W$", "-", 1},
        {"^a\\sb$", "a b", 1},
        {"^a\\Sb$", "a b", 0},
        {"^[\\d\\s]+$", "1 2", 1},
        {"^[\\w.-]+@[\\w.-]+$", "x.y-z@a.b", 1},
        {"\\bfoo\\b", "a foo b", 1},
        {"\\bfoo\\b", "afoob", 0},
        {"\\Boo\\B", "afoob", 1},
        {"\\<foo", "x foo", 1},
        {"\\<foo", "xfoo", 0},
        {"foo\\>", "foo.", 1},
        {"foo\\>", "foox", 0},
        {"^a\\tb$", "a\tb", 1},
        {"\\/usr\\/bin", "/usr/bin/env", 1},
        {"*a", "x*a", 1},
        {"^*a", "*a", 1},
        {"^*a", "a", 0},
        {"(^*a)", "*a", 1},
        {"+", "a+", 1},
        {"a|*b", "*b", 1},
        {"a{", "a{", 1},
        {"a{x}", "a{x}", 1},
        {"a{,}", "a{,}", 1},
        {"^a{1}{2}$", "aa", 1},
        {"a**", "b", 1},
        {"^(a*)*$", "aaa", 1},
        {"^(a*)+b$", "aaab", 1},
        {"^(a|aa)*c$", "aaaaac", 1},
        {"error: .* not found", "error: file x not found", 1},
        {"E0[0-9]+", "error[E0308]: mismatched", 1},
        {"^(Error|warning): ", "warning: unused", 1},
        {"^(Error|warning): ", "note: x", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = matches(cases[i].pattern, cases[i].text);
        if (got != cases[i].want)
            fprintf(stderr, "    /%s/ on \"%s\": got %d\n", cases[i].pattern, cases[i].text, got);
        INT_EQ(got, cases[i].want);
    }
}

/* NUL bytes are characters like the others, for the pattern and for the text. */
TEST(nul_bytes) {
    INT_EQ(rx("^a.b$", "a\0b", 3), CK__REGEX_MATCH);
    INT_EQ(rx("^alpha$", "x\0alpha", 7), CK__REGEX_NO_MATCH);
    INT_EQ(rx("alpha$", "x\0alpha", 7), CK__REGEX_MATCH);
    INT_EQ(rx("^[^a]$", "\0", 1), CK__REGEX_MATCH);
    ck__regex *re = NULL;
    INT_EQ(ck__regex_new("a\0b", 3, &re, NULL), CK_OK);
    uint64_t budget = BIG_BUDGET;
    INT_EQ(ck__regex_search(re, "xa\0by", 5, &budget), CK__REGEX_MATCH);
    INT_EQ(ck__regex_search(re, "ab", 2, &budget), CK__REGEX_NO_MATCH);
    ck__regex_free(re);
}

TEST(utf8) {
    INT_EQ(matches("^.$", "\xC3\xA9"), 1);             /* é is one character */
    INT_EQ(matches("^..$", "\xC3\xA9"), 0);
    INT_EQ(matches("^.{3}$", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E"), 1); /* 日本語 */
    INT_EQ(matches("^[^a]$", "\xF0\x9F\x98\x80"), 1); /* one emoji */
    INT_EQ(matches("^[\xC3\xA0-\xC3\xBF]+$", "\xC3\xA9\xC3\xA8"), 1); /* [à-ÿ] */
    INT_EQ(matches("^[\xC3\xA0-\xC3\xBF]+$", "e"), 0);
    INT_EQ(matches("caf\xC3\xA9", "un caf\xC3\xA9 noir"), 1);
    INT_EQ(matches("^[\xCE\xB1-\xCF\x89]+$", "\xCE\xBB\xCE\xBF\xCE\xB3\xCE\xBF\xCF\x82"), 1);
    /* Bytes outside UTF-8 are one character each, matched by '.', by negated sets and by
     * themselves, never by a valid character. */
    INT_EQ(matches("^a.b$", "a\xFF" "b"), 1);
    INT_EQ(matches("^a..b$", "a\xC3(b"), 1);  /* a lead byte without its continuation */
    INT_EQ(matches("^a.b$", "a\xC3(b"), 0);
    INT_EQ(matches("^[^x]+$", "\xFF\xFE"), 1);
    INT_EQ(matches("\xFF", "ab\xFF"), 1);
    INT_EQ(matches("^\xFF$", "\xC3\xBF"), 0); /* ÿ is U+00FF, not the byte FF */
    INT_EQ(matches("^.$", "\xED\xA0\x80"), 0); /* a surrogate is three bytes, not a character */
    INT_EQ(matches("^...$", "\xED\xA0\x80"), 1);
    INT_EQ(matches("^.$", "\xC0\xAF"), 0);     /* an overlong form */
    /* Word boundaries are ASCII: é is not a word character. */
    INT_EQ(matches("\\bcaf\\b", "caf\xC3\xA9"), 1);
}

/* Each refusal names the pattern, says why and where. */
TEST(refusals) {
    struct {
        const char *pattern;
        const char *says;
        size_t offset;
    } cases[] = {
        {"(.*)\\1\\1x", "backreferences", 4},
        {"a\\9", "backreferences", 1},
        {"(", "unmatched (", 0},
        {"a(b", "unmatched (", 1},
        {"a)", "unmatched )", 1},
        {"[abc", "unterminated bracket", 4},
        {"[", "unterminated bracket", 1},
        {"[]", "unterminated bracket", 2},
        {"[[:nope:]]", "unknown character class", 1},
        {"[[:alpha:", "unterminated [:", 1},
        {"[z-a]", "invalid range", 2},
        {"[a-[:digit:]]", "invalid range", 2},
        {"a{1001}", "above 1000", 1},
        {"a{3,2}", "minimum is above its maximum", 1},
        {"a\\", "trailing backslash", 1},
        {"(?i)abc", "only (?:", 1},
        {"(?=x)", "only (?:", 1},
        {"(a{100}){100}{100}", "20000 instructions", 0},
        {"[[.ab.]]", "one character", 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck__regex *re = (ck__regex *)1;
        ck_error err;
        INT_EQ(ck__regex_new(cases[i].pattern, strlen(cases[i].pattern), &re, &err), CK_EINVAL);
        OK(re == NULL);
        INT_EQ(err.code, CK_EINVAL);
        STR_EQ(err.where, "pattern");
        OK(err.msg && strstr(err.msg, cases[i].says));
        if (!err.msg || !strstr(err.msg, cases[i].says))
            fprintf(stderr, "    /%s/: %s\n", cases[i].pattern, err.msg ? err.msg : "(null)");
        INT_EQ(err.offset, cases[i].offset);
    }
    char deep[1000];
    memset(deep, '(', 500);
    memset(deep + 500, ')', 500);
    ck__regex *re = NULL;
    ck_error err;
    INT_EQ(ck__regex_new(deep, sizeof deep, &re, &err), CK_EINVAL);
    OK(strstr(err.msg, "nests too deeply") != NULL);
    memset(deep, '*', sizeof deep);
    deep[0] = 'a';
    INT_EQ(ck__regex_new(deep, sizeof deep, &re, &err), CK_EINVAL);
    /* Just under the limits compiles. */
    INT_EQ(ck__regex_new("a{1000}", 7, &re, NULL), CK_OK);
    ck__regex_free(re);
    INT_EQ(ck__regex_new("(a{100}){100}", 13, &re, NULL), CK_OK);
    ck__regex_free(re);
    ck__regex_free(NULL);
}

/* The patterns that make backtracking engines explode run in one pass here; the work they
 * cost is bounded by the budget, and a search cut short says so. */
TEST(budget) {
    static char line[4001];
    memset(line, 'a', 4000);
    const char *hard[] = {"(a*)*b", "(a|aa)*c", "(a+a+)+b", "(.*a){12}b", "^(a|a?)+$b",
                          "(.*)(.*)(.*)(.*)(.*)x", "((a{1,10}){1,10}){1,10}b"};
    for (size_t i = 0; i < sizeof hard / sizeof hard[0]; i++) {
        ck__regex *re = NULL;
        INT_EQ(ck__regex_new(hard[i], strlen(hard[i]), &re, NULL), CK_OK);
        uint64_t budget = BIG_BUDGET;
        INT_EQ(ck__regex_search(re, line, 4000, &budget), CK__REGEX_NO_MATCH);
        /* Work well under (program size) x (text length): the DFA states are shared. */
        OK(BIG_BUDGET - budget < (uint64_t)4000 * 20000);
        /* The same search with too small a budget stops and says so. */
        budget = 1000;
        INT_EQ(ck__regex_search(re, line, 4000, &budget), CK__REGEX_CUT);
        INT_EQ(budget, 0);
        ck__regex_free(re);
    }
    ck__regex *re = NULL;
    INT_EQ(ck__regex_new("x", 1, &re, NULL), CK_OK);
    uint64_t budget = 0;
    INT_EQ(ck__regex_search(re, "x", 1, &budget), CK__REGEX_CUT);
    budget = 4000;
    INT_EQ(ck__regex_search(re, line, 4000, &budget), CK__REGEX_NO_MATCH);
    ck__regex_free(re);
}

/* A pattern whose DFA outgrows the cache: it is flushed and the answers stay right. */
TEST(cache_flush) {
    /* (a|b)*a(a|b){11}: the classic DFA blow-up (2^12 states). */
    const char *pattern = "^(a|b)*a(a|b){11}$";
    ck__regex *re = NULL;
    INT_EQ(ck__regex_new(pattern, strlen(pattern), &re, NULL), CK_OK);
    regex_t ref;
    OK(regcomp(&ref, pattern, REG_EXTENDED | REG_NOSUB) == 0);
    uint32_t seed = 7;
    int disagree = 0;
    for (int round = 0; round < 300; round++) {
        char text[64];
        size_t n = 12 + round % 40;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            text[i] = (seed >> 16) & 1 ? 'a' : 'b';
        }
        text[n] = '\0';
        uint64_t budget = BIG_BUDGET;
        int got = ck__regex_search(re, text, n, &budget) == CK__REGEX_MATCH;
        disagree += got != (regexec(&ref, text, 0, NULL, 0) == 0);
    }
    INT_EQ(disagree, 0);
    regfree(&ref);
    ck__regex_free(re);
}

TEST(allocation_failures) {
    FAIL_EACH_ALLOC({
        ck__regex *re = NULL;
        ck_error err;
        int rc = ck__regex_new("^(ab|[c-e]+)\\b.*x{2,3}$", 23, &re, &err);
        OK(rc == CK_OK || rc == CK_ENOMEM);
        if (rc == CK_ENOMEM) INT_EQ(err.code, CK_ENOMEM);
        if (re) {
            /* Searching allocates DFA states; without them the NFA answers. */
            uint64_t budget = BIG_BUDGET;
            INT_EQ(ck__regex_search(re, "ab yy xx", 8, &budget), CK__REGEX_MATCH);
            INT_EQ(ck__regex_search(re, "abyy xx", 7, &budget), CK__REGEX_NO_MATCH);
            INT_EQ(ck__regex_search(re, "cde!xxx", 7, &budget), CK__REGEX_MATCH);
            ck__regex_free(re);
        }
    });
}

/* ---- agreement with glibc ---- */

static uint32_t seed_state = 12345;
static uint32_t rnd(uint32_t n) {
    seed_state ^= seed_state << 13;
    seed_state ^= seed_state >> 17;
    seed_state ^= seed_state << 5;
    return seed_state % n;
}

typedef struct gen {
    char buf[512];
    size_t len;
    int utf8;
    int top; /* outside any group */
} gen;

static void put_s(gen *g, const char *s) {
    size_t n = strlen(s);
    if (g->len + n < sizeof g->buf) {
        memcpy(g->buf + g->len, s, n);
        g->len += n;
    }
    g->buf[g->len] = '\0';
}

static const char *const ascii_lits[] = {"a", "b", "c", "x", "-", " ", "1", "_", "\\.", ","};
static const char *const utf8_lits[] = {"a", "b", "\xC3\xA9", "\xE6\x97\xA5", "x", " "};

static void gen_alt(gen *g, int depth);

static void gen_atom(gen *g, int depth, int *quantifiable) {
    *quantifiable = 1;
    uint32_t pick = rnd(g->utf8 ? 6 : 9);
    if (pick == 6 && !g->top) pick = 2;
    switch (pick) {
        case 0:
        case 1:
            put_s(g, g->utf8 ? utf8_lits[rnd(6)] : ascii_lits[rnd(10)]);
            break;
        case 2: put_s(g, "."); break;
        case 3: {
            static const char *const sets[] = {"[abc]", "[^ab]", "[a-c]", "[[:digit:]]",
                                               "[[:alpha:]_]", "[^[:space:]]", "[-x]", "[]a]",
                                               "[^-_ ]", "[b-x1]"};
            static const char *const usets[] = {"[a\xC3\xA9]", "[^a]", "[^\xC3\xA9]",
                                                "[\xE6\x97\xA5" "b]", "[^ b]"};
            put_s(g, g->utf8 ? usets[rnd(5)] : sets[rnd(10)]);
            break;
        }
        case 4:
        case 5:
            if (depth > 0) {
                int top = g->top;
                put_s(g, "(");
                g->top = 0;
                gen_alt(g, depth - 1);
                g->top = top;
                put_s(g, ")");
            } else {
                put_s(g, "b");
            }
            break;
        case 6: {
            /* glibc gets assertions inside groups wrong ((\S\B) does not find "-" at the
             * end of "c-", though \S\B does; (\S$){2} matches "ab"), so they are only tried
             * outside groups; the syntax test has them inside. */
            static const char *const anchors[] = {"^", "$", "\\b", "\\B", "\\<", "\\>"};
            put_s(g, anchors[rnd(6)]);
            *quantifiable = 0;
            break;
        }
        default: {
            static const char *const classes[] = {"\\w", "\\W", "\\s", "\\S"};
            put_s(g, classes[rnd(4)]);
            break;
        }
    }
}

static void gen_cat(gen *g, int depth) {
    int pieces = 1 + (int)rnd(4);
    for (int i = 0; i < pieces; i++) {
        int q;
        gen_atom(g, depth, &q);
        if (!q || rnd(3)) continue;
        static const char *const quants[] = {"*", "+", "?", "{2}", "{1,}", "{0,2}", "{1,3}",
                                             "{0}"};
        put_s(g, quants[rnd(8)]);
    }
}

static void gen_alt(gen *g, int depth) {
    int branches = rnd(4) ? 1 : 2 + (int)rnd(2);
    for (int i = 0; i < branches; i++) {
        if (i) put_s(g, "|");
        gen_cat(g, depth);
    }
}

static void gen_text(char *out, size_t cap, int utf8) {
    static const char ascii[] = "abcx-. 1_,";
    size_t n = rnd(16), len = 0;
    for (size_t i = 0; i < n; i++) {
        const char *piece;
        char one[2] = {0, 0};
        if (utf8) {
            piece = utf8_lits[rnd(6)];
        } else {
            one[0] = ascii[rnd(sizeof ascii - 1)];
            piece = one;
        }
        size_t k = strlen(piece);
        if (len + k >= cap) break;
        memcpy(out + len, piece, k);
        len += k;
    }
    out[len] = '\0';
}

/* Random patterns and texts; each pattern is tried on several texts. */
static void agree(int utf8, int rounds) {
    int compared = 0, refused = 0, disagree = 0;
    for (int r = 0; r < rounds; r++) {
        gen g;
        g.len = 0;
        g.buf[0] = '\0';
        g.utf8 = utf8;
        g.top = 1;
        gen_alt(&g, 2);
        regex_t ref;
        if (regcomp(&ref, g.buf, REG_EXTENDED | REG_NOSUB) != 0) {
            refused++;
            continue;
        }
        ck__regex *re = NULL;
        ck_error err;
        int rc = ck__regex_new(g.buf, g.len, &re, &err);
        OK(rc == CK_OK);
        if (rc != CK_OK) {
            fprintf(stderr, "    /%s/ refused: %s\n", g.buf, err.msg);
            regfree(&ref);
            continue;
        }
        for (int t = 0; t < 8; t++) {
            char text[128];
            gen_text(text, sizeof text, utf8);
            uint64_t budget = BIG_BUDGET;
            int got = ck__regex_search(re, text, strlen(text), &budget) == CK__REGEX_MATCH;
            int want = regexec(&ref, text, 0, NULL, 0) == 0;
            compared++;
            if (got != want && disagree++ < 10)
                fprintf(stderr, "    /%s/ on \"%s\": ours %d, glibc %d\n", g.buf, text, got, want);
        }
        ck__regex_free(re);
        regfree(&ref);
    }
    INT_EQ(disagree, 0);
    OK(compared > rounds * 4);
    printf("test_regex: %s: %d comparisons with glibc, %d patterns glibc refused\n",
           utf8 ? "C.UTF-8" : "C", compared, refused);
}

TEST(agrees_with_glibc) {
    agree(0, 6000);
    if (setlocale(LC_ALL, "C.UTF-8")) {
        agree(1, 3000);
        setlocale(LC_ALL, "C");
    } else {
        printf("test_regex: no C.UTF-8 locale; UTF-8 comparison skipped\n");
    }
    /* The hand-written cases agree too, where glibc takes them the same way. */
    const char *both[][2] = {{"^(a|b)*abb$", "abababb"}, {"x[[:digit:]]{2,}y", "ax123y"},
                             {"\\<go\\>", "to go now"}, {"^[^[:alpha:]]*$", "12-3"}};
    for (size_t i = 0; i < sizeof both / sizeof both[0]; i++)
        INT_EQ(matches(both[i][0], both[i][1]), glibc(both[i][0], both[i][1]));
}

HARNESS_MAIN(RUN(syntax) RUN(nul_bytes) RUN(utf8) RUN(refusals) RUN(budget) RUN(cache_flush)
                 RUN(allocation_failures) RUN(agrees_with_glibc))
