/* The core's JSON layer (csrc/src/json.h): the reader and the writer on their own. Strings
 * with NUL bytes, every escape, surrogates, numbers at and past every limit, duplicate keys,
 * trailing content, depth bombs, every truncation, invalid UTF-8, and every allocation
 * failing in turn. The layer is private, so the test reaches it through the static library. */
#include <float.h>
#include <locale.h>
#include <math.h>

#include "harness.h"

#include "../../csrc/src/json.h"

static const ck__jread_options DEFAULTS = {0, 0};

static ck__jdoc *parse(const char *text, size_t len, uint32_t flags, ck_error *err) {
    ck__jread_options o = {flags, 0};
    return ck__jread(text, len, o, err);
}

/* Parses `text` (NUL-terminated) expecting failure with `code` at `offset`. */
static void parse_fails(const char *text, uint32_t flags, int code, size_t offset) {
    ck_error err;
    ck__jdoc *d = parse(text, strlen(text), flags, &err);
    OK(d == NULL);
    ck__jdoc_free(d);
    INT_EQ(err.code, code);
    INT_EQ(err.offset, offset);
    OK(err.msg != NULL && err.msg[0] != '\0');
    if (err.code != code || err.offset != offset) fprintf(stderr, "    input: %s\n", text);
}

/* Two values are equal (see ck__jequal); -1 (out of memory) is no answer here. */
static int jval_equal(const ck__jval *a, const ck__jval *b) { return ck__jequal(a, b) == 1; }

/* A value written back as JSON text (compact or pretty); release with ck_free(). */
static char *write_value(const ck__jval *v, int pretty, size_t *len) {
    ck__buf b;
    ck__buf_init(&b);
    ck__jwriter w;
    ck__jw_init(&w, &b, pretty);
    ck__jw_value(&w, v);
    return ck__buf_take(&b, len);
}

/* Parses, writes compact and pretty, parses both again: every tree equal to the first. */
static void round_trips(const char *text, size_t len) {
    ck_error err;
    ck__jdoc *d = ck__jread(text, len, DEFAULTS, &err);
    OK(d != NULL);
    if (!d) {
        fprintf(stderr, "    %s at %zu in: %.*s\n", err.msg, err.offset, (int)len, text);
        return;
    }
    for (int pretty = 0; pretty < 2; pretty++) {
        size_t n = 0;
        char *out = write_value(ck__jdoc_root(d), pretty, &n);
        OK(out != NULL);
        ck__jdoc *again = out ? ck__jread(out, n, DEFAULTS, &err) : NULL;
        OK(again != NULL && jval_equal(ck__jdoc_root(d), ck__jdoc_root(again)));
        ck__jdoc_free(again);
        ck_free(out);
    }
    ck__jdoc_free(d);
}

static ck__jdoc *parse_ok(const char *text) {
    ck_error err;
    ck__jdoc *d = ck__jread(text, strlen(text), DEFAULTS, &err);
    OK(d != NULL);
    if (!d) fprintf(stderr, "    %s at %zu in: %s\n", err.msg, err.offset, text);
    return d;
}

/* ---- the reader ------------------------------------------------------------------------- */

TEST(reads_every_kind) {
    const char *text =
        " {\"a\": [1, -2.5e3, \"x\", true, false, null, {}, []], \"b\": {\"c\": 0}} ";
    ck__jdoc *d = parse_ok(text);
    const ck__jval *root = ck__jdoc_root(d);
    OK(ck__jis(root, CK__JOBJECT));
    INT_EQ(ck__jcount(root), 2);
    INT_EQ(root->offset, 1);
    const ck__jval *a = ck__jgets(root, "a");
    INT_EQ(ck__jcount(a), 8);
    int64_t i = 0;
    OK(ck__ji64(ck__jat(a, 0), &i) && i == 1);
    double x = 0;
    OK(ck__jdouble(ck__jat(a, 1), &x) && x == -2500.0);
    size_t n = 0;
    MEM_EQ(ck__jstr(ck__jat(a, 2), &n), n, "x");
    int b = 0;
    OK(ck__jbool(ck__jat(a, 3), &b) && b == 1);
    OK(ck__jbool(ck__jat(a, 4), &b) && b == 0);
    OK(ck__jis(ck__jat(a, 5), CK__JNULL));
    OK(ck__jis(ck__jat(a, 6), CK__JOBJECT) && ck__jcount(ck__jat(a, 6)) == 0);
    OK(ck__jis(ck__jat(a, 7), CK__JARRAY) && ck__jcount(ck__jat(a, 7)) == 0);
    OK(ck__jat(a, 8) == NULL);
    INT_EQ(ck__jat(a, 2)->offset, 19);
    /* The raw text of a number is kept. */
    MEM_EQ(ck__jat(a, 1)->u.str, ck__jat(a, 1)->len, "-2.5e3");
    const ck__jmember *m = ck__jmember_at(root, 1);
    OK(m && m->key_len == 1 && m->key[0] == 'b');
    INT_EQ(m->key_offset, (size_t)(strstr(text, "\"b\"") - text));
    OK(ck__jmember_at(root, 2) == NULL);
    OK(ck__jget(ck__jgets(root, "b"), "c", 1) != NULL);
    INT_EQ(ck__jdoc_end(d), strlen(text) - 1);
    ck__jdoc_free(d);
}

TEST(accessors_take_null_and_wrong_kinds) {
    ck__jdoc *d = parse_ok("[\"s\", 1, {}]");
    const ck__jval *root = ck__jdoc_root(d);
    size_t n = 9;
    OK(ck__jstr(NULL, &n) == NULL && n == 0);
    OK(ck__jstr(ck__jat(root, 1), NULL) == NULL);
    OK(ck__jgets(root, "x") == NULL);      /* an array is no object */
    OK(ck__jat(ck__jat(root, 2), 0) == NULL);
    OK(ck__jget(NULL, "a", 1) == NULL);
    OK(ck__jcount(NULL) == 0 && ck__jcount(ck__jat(root, 0)) == 0);
    uint64_t u = 7;
    int64_t i = 7;
    double x = 7;
    int b = 7;
    OK(!ck__ju64(ck__jat(root, 0), &u) && u == 7);
    OK(!ck__ji64(NULL, &i) && i == 7);
    OK(!ck__jdouble(ck__jat(root, 0), &x) && x == 7);
    OK(!ck__jbool(ck__jat(root, 1), &b) && b == 7);
    OK(!ck__jis(NULL, CK__JNULL));
    OK(ck__jdoc_root(NULL) == NULL);
    ck__jdoc_free(d);
    ck__jdoc_free(NULL);
}

TEST(nul_bytes_in_strings_and_keys) {
    static const char text[] = "{\"k\\u0000ey\":\"a\\u0000b\",\"k\":\"raw\"}";
    ck__jdoc *d = parse_ok(text);
    const ck__jval *root = ck__jdoc_root(d);
    const ck__jmember *m = ck__jmember_at(root, 0);
    OK(m && m->key_len == 4 && memcmp(m->key, "k\0ey", 4) == 0);
    size_t n = 0;
    const char *s = ck__jstr(&m->value, &n);
    OK(s && n == 3 && memcmp(s, "a\0b", 3) == 0 && s[3] == '\0');
    /* A lookup compares the whole key, NUL bytes included. */
    OK(ck__jget(root, "k\0ey", 4) == &m->value);
    size_t raw = 0;
    OK(ck__jstr(ck__jget(root, "k", 1), &raw) && raw == 3);
    OK(ck__jget(root, "k\0e", 3) == NULL);
    size_t len = 0;
    char *out = write_value(root, 0, &len);
    STR_EQ(out, text);
    ck_free(out);
    ck__jdoc_free(d);
    round_trips(text, sizeof text - 1);
}

TEST(every_escape) {
    static const char text[] = "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20AC\\ud83d\\ude00\"";
    ck__jdoc *d = parse_ok(text);
    size_t n = 0;
    const char *s = ck__jstr(ck__jdoc_root(d), &n);
    static const char want[] = "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    OK(s && n == sizeof want - 1 && memcmp(s, want, n) == 0);
    char *out = write_value(ck__jdoc_root(d), 0, NULL);
    STR_EQ(out, "\"\\\"\\\\/\\b\\f\\n\\r\\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    ck_free(out);
    ck__jdoc_free(d);
    parse_fails("\"\\x\"", 0, CK_ESYNTAX, 1);
    parse_fails("\"ab\\u12\"", 0, CK_ESYNTAX, 3);
    parse_fails("\"\\u12g4\"", 0, CK_ESYNTAX, 1);
    parse_fails("\"\\U0041\"", 0, CK_ESYNTAX, 1);
    parse_fails("\"\\", 0, CK_ESYNTAX, 0);
    parse_fails("\"tab\there\"", 0, CK_ESYNTAX, 4);
    parse_fails("\"nl\nhere\"", 0, CK_ESYNTAX, 3);
    parse_fails("\"nul\0\"", 0, CK_ESYNTAX, 0); /* strlen stops at the NUL: unterminated */
    ck_error err;
    OK(parse("\"nul\0\"", 6, 0, &err) == NULL && err.code == CK_ESYNTAX && err.offset == 4);
}

/* A lone surrogate becomes U+FFFD; a pair becomes its character (json.h says why). */
TEST(surrogates) {
    static const struct {
        const char *json, *text;
    } cases[] = {
        {"\"\\ud800\"", "\xef\xbf\xbd"},
        {"\"\\udc00x\"", "\xef\xbf\xbdx"},
        {"\"\\ud800\\u0041\"", "\xef\xbf\xbd" "A"},
        {"\"\\ud800\\ud800\\udc00\"", "\xef\xbf\xbd\xf0\x90\x80\x80"},
        {"\"\\udbff\\udfff\"", "\xf4\x8f\xbf\xbf"},
        {"\"\\ud83d\"", "\xef\xbf\xbd"},
        {"\"\\ud83dx\\ude00\"", "\xef\xbf\xbdx\xef\xbf\xbd"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ck__jdoc *d = parse_ok(cases[k].json);
        size_t n = 0;
        const char *s = ck__jstr(ck__jdoc_root(d), &n);
        MEM_EQ(s, n, cases[k].text);
        ck__jdoc_free(d);
        round_trips(cases[k].json, strlen(cases[k].json));
    }
}

TEST(numbers_at_and_past_the_limits) {
    static const struct {
        const char *json;
        int u_ok;
        uint64_t u;
        int i_ok;
        int64_t i;
    } cases[] = {
        {"0", 1, 0, 1, 0},
        {"-0", 1, 0, 1, 0},
        {"7", 1, 7, 1, 7},
        {"-1", 0, 0, 1, -1},
        {"9007199254740993", 1, 9007199254740993ull, 1, 9007199254740993ll},
        {"9223372036854775807", 1, 9223372036854775807ull, 1, INT64_MAX},
        {"9223372036854775808", 1, 9223372036854775808ull, 0, 0},
        {"-9223372036854775808", 0, 0, 1, INT64_MIN},
        {"-9223372036854775809", 0, 0, 0, 0},
        {"18446744073709551615", 1, UINT64_MAX, 0, 0},
        {"18446744073709551616", 0, 0, 0, 0},
        {"99999999999999999999999999999", 0, 0, 0, 0},
        {"12.0", 1, 12, 1, 12},
        {"1e3", 1, 1000, 1, 1000},
        {"1E+19", 1, 10000000000000000000ull, 0, 0},
        {"1.8446744073709552e19", 0, 0, 0, 0},
        {"-9.223372036854775808e18", 0, 0, 1, INT64_MIN},
        {"1.5", 0, 0, 0, 0},
        {"-0.5", 0, 0, 0, 0},
        {"1e400", 0, 0, 0, 0},
        {"-1e400", 0, 0, 0, 0},
        {"1e-400", 0, 0, 0, 0},
        {"0e-400", 1, 0, 1, 0},
        {"0.0", 1, 0, 1, 0},
        {"4.9e-324", 0, 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ck__jdoc *d = parse_ok(cases[k].json);
        const ck__jval *v = ck__jdoc_root(d);
        uint64_t u = 42;
        int64_t i = 42;
        int u_ok = ck__ju64(v, &u), i_ok = ck__ji64(v, &i);
        INT_EQ(u_ok, cases[k].u_ok);
        INT_EQ(i_ok, cases[k].i_ok);
        if (u_ok) OK(u == cases[k].u);
        else OK(u == 42);
        if (i_ok) OK(i == cases[k].i);
        if (u_ok != cases[k].u_ok || i_ok != cases[k].i_ok)
            fprintf(stderr, "    number: %s\n", cases[k].json);
        MEM_EQ(v->u.str, v->len, cases[k].json);
        ck__jdoc_free(d);
    }
    ck__jdoc *d = parse_ok("[1e400, -1e400, 1e-400, 4.9e-324, 0.1, 123456789012345678]");
    const ck__jval *a = ck__jdoc_root(d);
    double x = 0;
    OK(ck__jdouble(ck__jat(a, 0), &x) && x == HUGE_VAL);
    OK(ck__jdouble(ck__jat(a, 1), &x) && x == -HUGE_VAL);
    OK(ck__jdouble(ck__jat(a, 2), &x) && x == 0);
    OK(ck__jdouble(ck__jat(a, 3), &x) && x > 0 && x < DBL_MIN);
    OK(ck__jdouble(ck__jat(a, 4), &x) && x == 0.1);
    OK(ck__jdouble(ck__jat(a, 5), &x) && x == 123456789012345678.0);
    /* Written back as written: 1e400 stays 1e400, not null. */
    char *out = write_value(a, 0, NULL);
    STR_EQ(out, "[1e400,-1e400,1e-400,4.9e-324,0.1,123456789012345678]");
    ck_free(out);
    ck__jdoc_free(d);
    const char *bad[] = {"01", "1.", ".5", "-", "+1", "1e", "1e+", "--1", "0x10", "-a",
                         "Infinity", "NaN", "1.e5"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        ck_error err;
        ck__jdoc *b = parse(bad[k], strlen(bad[k]), 0, &err);
        OK(b == NULL && err.code == CK_ESYNTAX);
        if (b) fprintf(stderr, "    accepted: %s\n", bad[k]);
        ck__jdoc_free(b);
    }
}

TEST(duplicate_keys) {
    const char *text = "{\"a\":1,\"b\":2,\"a\":3}";
    ck__jdoc *d = parse_ok(text);
    int64_t i = 0;
    /* The last one wins, as JSON.parse, Python and the providers decide. */
    OK(ck__ji64(ck__jgets(ck__jdoc_root(d), "a"), &i) && i == 3);
    INT_EQ(ck__jcount(ck__jdoc_root(d)), 3);
    ck__jdoc_free(d);
    parse_fails(text, CK__JREAD_NO_DUPLICATES, CK_ESYNTAX, 13);
    /* Keys that differ after a NUL, or by a NUL at the end, are different keys. */
    const char *nul = "{\"a\\u0000b\":1,\"a\\u0000c\":2,\"a\":3,\"a\\u0000\":4}";
    ck_error err;
    d = parse(nul, strlen(nul), CK__JREAD_NO_DUPLICATES, &err);
    OK(d != NULL);
    ck__jdoc_free(d);
    /* An escaped spelling of the same key is the same key. */
    parse_fails("{\"ab\":1,\"a\\u0062\":2}", CK__JREAD_NO_DUPLICATES, CK_ESYNTAX, 8);
    /* Past eight members the check goes through a hash map; nested objects are checked. */
    char big[4096];
    size_t at = (size_t)snprintf(big, sizeof big, "{\"outer\":{");
    for (int k = 0; k < 200; k++)
        at += (size_t)snprintf(big + at, sizeof big - at, "%s\"k%d\":%d", k ? "," : "", k, k);
    size_t dup_at = at + 1;
    at += (size_t)snprintf(big + at, sizeof big - at, ",\"k17\":0}}");
    parse_fails(big, CK__JREAD_NO_DUPLICATES, CK_ESYNTAX, dup_at);
    d = parse(big, strlen(big), 0, &err);
    OK(d && ck__ji64(ck__jgets(ck__jgets(ck__jdoc_root(d), "outer"), "k17"), &i) && i == 0);
    ck__jdoc_free(d);
    /* The same key in two objects is no duplicate. */
    d = parse("[{\"a\":1},{\"a\":2}]", 17, CK__JREAD_NO_DUPLICATES, &err);
    OK(d != NULL);
    ck__jdoc_free(d);
}

TEST(trailing_content) {
    parse_fails("{} x", 0, CK_ESYNTAX, 3);
    parse_fails("[1]]", 0, CK_ESYNTAX, 3);
    parse_fails("1 2", 0, CK_ESYNTAX, 2);
    parse_fails("\"a\"\"b\"", 0, CK_ESYNTAX, 3);
    ck_error err;
    ck__jdoc *d = parse("{} \n\t\r", 6, 0, &err);
    OK(d != NULL);
    ck__jdoc_free(d);
    const char *text = "{\"a\":1} and then prose {";
    d = parse(text, strlen(text), CK__JREAD_TRAILING, &err);
    OK(d != NULL);
    INT_EQ(ck__jdoc_end(d), 7);
    ck__jdoc_free(d);
    /* Trailing content is allowed, bad JSON before it is not. */
    parse_fails("{\"a\":} x", CK__JREAD_TRAILING, CK_ESYNTAX, 5);
}

TEST(syntax_errors_name_the_offset) {
    parse_fails("", 0, CK_ESYNTAX, 0);
    parse_fails("   ", 0, CK_ESYNTAX, 3);
    parse_fails("{", 0, CK_ESYNTAX, 1);
    parse_fails("{\"a\"}", 0, CK_ESYNTAX, 4);
    parse_fails("{\"a\":1,}", 0, CK_ESYNTAX, 7);
    parse_fails("[1,]", 0, CK_ESYNTAX, 3);
    parse_fails("[1 2]", 0, CK_ESYNTAX, 3);
    parse_fails("{1:2}", 0, CK_ESYNTAX, 1);
    parse_fails("{'a':1}", 0, CK_ESYNTAX, 1);
    parse_fails("tru", 0, CK_ESYNTAX, 0);
    parse_fails("nul", 0, CK_ESYNTAX, 0);
    parse_fails("[True]", 0, CK_ESYNTAX, 1);
    parse_fails("{\"a\":1 \"b\":2}", 0, CK_ESYNTAX, 7);
    /* Only JSON's four whitespace characters separate tokens. */
    parse_fails("[1,\f2]", 0, CK_ESYNTAX, 3);
    parse_fails("\v[]", 0, CK_ESYNTAX, 0);
    /* A byte-order mark before the value is skipped, anywhere else it is an error. */
    ck_error err;
    ck__jdoc *d = parse("\xef\xbb\xbf[1]", 6, 0, &err);
    OK(d != NULL && ck__jcount(ck__jdoc_root(d)) == 1);
    ck__jdoc_free(d);
    parse_fails("[\xef\xbb\xbf" "1]", 0, CK_ESYNTAX, 1);
    /* NULL text of length 0 is an empty input. */
    OK(ck__jread(NULL, 0, DEFAULTS, &err) == NULL && err.code == CK_ESYNTAX);
    OK(ck__jread("x", 1, DEFAULTS, NULL) == NULL); /* err may be NULL */
}

TEST(depth_bombs) {
    size_t n = 1000;
    char *text = malloc(2 * n + 2);
    for (size_t k = 0; k < n; k++) text[k] = '[', text[n + k] = ']';
    ck_error err;
    ck__jdoc *d = parse(text, 2 * n, 0, &err);
    OK(d != NULL); /* exactly the limit */
    ck__jdoc_free(d);
    memmove(text + 1, text, 2 * n);
    text[0] = '[';
    text[2 * n + 1] = ']';
    d = parse(text, 2 * n + 2, 0, &err);
    OK(d == NULL && err.code == CK_ETOOBIG && err.offset == 1000);
    free(text);
    ck__jread_options o = {0, 3};
    ck__jdoc *ok3 = ck__jread("[[[1]]]", 7, o, &err);
    OK(ok3 != NULL);
    ck__jdoc_free(ok3);
    OK(ck__jread("[[[[1]]]]", 9, o, &err) == NULL && err.code == CK_ETOOBIG && err.offset == 3);
    OK(ck__jread("{\"a\":{\"b\":{\"c\":{}}}}", 20, o, &err) == NULL && err.code == CK_ETOOBIG);
    /* A megabyte of open brackets fails at the limit, without exhausting any stack. */
    size_t big = (size_t)1 << 20;
    text = malloc(big);
    memset(text, '[', big);
    OK(parse(text, big, 0, &err) == NULL && err.code == CK_ETOOBIG);
    /* With the limit lifted, the reader and the writer both walk 200,000 levels without
     * recursion: the written text is the input. */
    size_t deep = 200000;
    for (size_t k = 0; k < deep; k++) text[k] = '[', text[deep + k] = ']';
    ck__jread_options lifted = {0, SIZE_MAX};
    d = ck__jread(text, 2 * deep, lifted, &err);
    OK(d != NULL);
    size_t len = 0;
    char *out = d ? write_value(ck__jdoc_root(d), 0, &len) : NULL;
    OK(out && len == 2 * deep && memcmp(out, text, len) == 0);
    ck__jdoc *twin = out ? ck__jread(out, len, lifted, &err) : NULL;
    OK(twin && jval_equal(ck__jdoc_root(d), ck__jdoc_root(twin)));
    ck__jdoc_free(twin);
    ck_free(out);
    ck__jdoc_free(d);
    free(text);
}

/* Every proper prefix of a document that ends with its closing bracket is malformed, and the
 * error never points past the text given. */
TEST(truncated_at_every_offset) {
    static const char text[] =
        "{\"s\":\"a\\u0000\\ud83d\\ude00\xc3\xa9\\n\",\"n\":[-1.5e-3,0,18446744073709551615],"
        "\"o\":{\"t\":true,\"f\":false,\"z\":null},\"e\":[],\"k\\\"q\":{}}";
    size_t len = sizeof text - 1;
    round_trips(text, len);
    for (size_t k = 0; k < len; k++) {
        ck_error err;
        ck__jdoc *d = parse(text, k, 0, &err);
        OK(d == NULL);
        ck__jdoc_free(d);
        OK(err.code == CK_ESYNTAX && err.offset <= k);
        if (err.code != CK_ESYNTAX || err.offset > k)
            fprintf(stderr, "    prefix %zu: code %d offset %zu\n", k, err.code, err.offset);
    }
}

TEST(invalid_utf8) {
    static const struct {
        const char *json;
        size_t bad_at;
        const char *written; /* with CK__JREAD_ANY_BYTES, then through the writer */
    } cases[] = {
        {"\"a\xff\"", 2, "\"a\xef\xbf\xbd\""},
        {"\"\xc0\xaf\"", 1, "\"\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\"x\xed\xa0\x80\"", 2, "\"x\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\"\xe2\x82\"", 1, "\"\xef\xbf\xbd\""},
        {"\"\xe2\x82z\"", 1, "\"\xef\xbf\xbdz\""},
        {"\"\xf4\x90\x80\x80\"", 1, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\"\xf0\x9f\x98\"", 1, "\"\xef\xbf\xbd\""},
        {"\"ok \xc3\xa9 then \x80\"", 12, "\"ok \xc3\xa9 then \xef\xbf\xbd\""},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        parse_fails(cases[k].json, 0, CK_EUTF8, cases[k].bad_at);
        ck_error err;
        size_t n = strlen(cases[k].json);
        ck__jdoc *d = parse(cases[k].json, n, CK__JREAD_ANY_BYTES, &err);
        OK(d != NULL);
        /* The bytes are kept as they are... */
        size_t sn = 0;
        const char *s = d ? ck__jstr(ck__jdoc_root(d), &sn) : NULL;
        OK(s && sn == n - 2 && memcmp(s, cases[k].json + 1, sn) == 0);
        /* ...and the writer replaces each maximal bad sequence with U+FFFD. */
        char *out = d ? write_value(ck__jdoc_root(d), 0, NULL) : NULL;
        STR_EQ(out, cases[k].written);
        ck_free(out);
        ck__jdoc_free(d);
    }
    /* In a key too, and outside strings it is a syntax error. */
    parse_fails("{\"\xff\":1}", 0, CK_EUTF8, 2);
    parse_fails("[\xc3\xa9]", 0, CK_ESYNTAX, 1);
}

TEST(equality) {
    static const char *const pairs[][2] = {
        {"{\"a\":[1,\"x\"]}", "{\"a\":[1,\"y\"]}"}, {"{\"a\":1}", "{\"b\":1}"},
        {"[1.0]", "[1]"},          {"{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}"},
        {"[[]]", "[[1]]"},         {"\"a\\u0000\"", "\"a\""},
        {"true", "false"},         {"null", "[]"},
    };
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        ck__jdoc *a = parse_ok(pairs[k][0]), *b = parse_ok(pairs[k][1]);
        INT_EQ(ck__jequal(ck__jdoc_root(a), ck__jdoc_root(b)), 0);
        INT_EQ(ck__jequal(ck__jdoc_root(a), ck__jdoc_root(a)), 1);
        ck__jdoc_free(a);
        ck__jdoc_free(b);
    }
    const char *nested = "{\"k\":[1,{\"z\":\"\\u0000\"}]}";
    ck__jdoc *a = parse_ok(nested), *b = parse_ok(nested);
    INT_EQ(ck__jequal(ck__jdoc_root(a), ck__jdoc_root(b)), 1);
    INT_EQ(ck__jequal(NULL, NULL), 1);
    INT_EQ(ck__jequal(ck__jdoc_root(a), NULL), 0);
    int oom = 0;
    FAIL_EACH_ALLOC({
        if (ck__jequal(ck__jdoc_root(a), ck__jdoc_root(b)) == -1) oom++;
    });
    OK(oom >= 1);
    ck__jdoc_free(a);
    ck__jdoc_free(b);
}

/* ---- the writer ------------------------------------------------------------------------- */

TEST(writer_commas_and_pretty) {
    for (int pretty = 0; pretty < 2; pretty++) {
        ck__buf b;
        ck__buf_init(&b);
        ck__buf_adds(&b, "prefix ");
        ck__jwriter w;
        ck__jw_init(&w, &b, pretty);
        ck__jw_begin_object(&w);
        ck__jw_keys(&w, "a");
        ck__jw_u64(&w, 1);
        ck__jw_keys(&w, "list");
        ck__jw_begin_array(&w);
        ck__jw_strings(&w, "x");
        ck__jw_begin_object(&w);
        ck__jw_end_object(&w);
        ck__jw_begin_array(&w);
        ck__jw_end_array(&w);
        ck__jw_null(&w);
        ck__jw_bool(&w, 1);
        ck__jw_bool(&w, 0);
        ck__jw_i64(&w, -5);
        ck__jw_end_array(&w);
        ck__jw_keys(&w, "o");
        ck__jw_begin_object(&w);
        ck__jw_key(&w, "k\0", 2);
        ck__jw_raw(&w, "{\"pre\":[1]}", 11);
        ck__jw_end_object(&w);
        ck__jw_end_object(&w);
        char *out = ck__buf_take(&b, NULL);
        if (!pretty)
            STR_EQ(out, "prefix {\"a\":1,\"list\":[\"x\",{},[],null,true,false,-5],"
                        "\"o\":{\"k\\u0000\":{\"pre\":[1]}}}");
        else
            STR_EQ(out, "prefix {\n  \"a\": 1,\n  \"list\": [\n    \"x\",\n    {},\n    [],\n"
                        "    null,\n    true,\n    false,\n    -5\n  ],\n  \"o\": {\n"
                        "    \"k\\u0000\": {\"pre\":[1]}\n  }\n}");
        ck_free(out);
    }
}

TEST(writer_escapes_every_control_byte) {
    char all[128];
    for (int c = 0; c < 128; c++) all[c] = (char)c;
    ck__buf b;
    ck__buf_init(&b);
    ck__jw_quote(&b, all, sizeof all);
    char *out = ck__buf_take(&b, NULL);
    OK(out && strncmp(out, "\"\\u0000\\u0001", 13) == 0);
    OK(out && strstr(out, "\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e") != NULL);
    OK(out && strstr(out, "\\u001f !\\\"#") != NULL);
    OK(out && strstr(out, "[\\\\]") != NULL);
    OK(out && strstr(out, "~\\u007f\"") != NULL);
    /* No raw control byte is left. */
    for (const char *p = out; p && *p; p++) OK((unsigned char)*p >= 0x20 && *p != 0x7F);
    ck__jdoc *d = out ? parse_ok(out) : NULL;
    size_t n = 0;
    const char *s = ck__jstr(ck__jdoc_root(d), &n);
    OK(s && n == sizeof all && memcmp(s, all, n) == 0);
    ck__jdoc_free(d);
    ck_free(out);
    /* NULL with length 0 is the empty string. */
    ck__buf_init(&b);
    ck__jw_quote(&b, NULL, 0);
    out = ck__buf_take(&b, NULL);
    STR_EQ(out, "\"\"");
    ck_free(out);
}

static char *write_number(int kind, double d, int64_t i, uint64_t u) {
    ck__buf b;
    ck__buf_init(&b);
    ck__jwriter w;
    ck__jw_init(&w, &b, 0);
    if (kind == 0) ck__jw_double(&w, d);
    else if (kind == 1) ck__jw_i64(&w, i);
    else ck__jw_u64(&w, u);
    return ck__buf_take(&b, NULL);
}

/* Doubles print as %.15g when that reads back as the very same double, else %.17g (cJSON 1.7.15
 * accepted one ulp off, which made a record's ratio differ from the result's in the last digit),
 * and integers as digits at every magnitude. */
TEST(writer_numbers_as_records_print_them) {
    static const struct {
        double value;
        const char *text;
    } doubles[] = {
        {0.0, "0"},
        {-0.0, "-0"},
        {1.0, "1"},
        {-1.0, "-1"},
        {3.0, "3"},
        {0.1, "0.1"},
        {0.5, "0.5"},
        {1.0 / 3, "0.33333333333333331"},
        {2.0 / 3, "0.66666666666666663"},
        {1e15, "1e+15"},
        {1e16, "1e+16"},
        {1e17, "1e+17"},
        {1e300, "1e+300"},
        {-1e-300, "-1e-300"},
        {4.9e-324, "4.94065645841247e-324"}, /* reads back as the least denormal */
        {DBL_MAX, "1.7976931348623157e+308"},
        {2147483647.0, "2147483647"},
        {2147483648.0, "2147483648"},
        {-2147483648.0, "-2147483648"},
        {-2147483649.0, "-2147483649"},
        {123.456, "123.456"},
        {1.05, "1.05"},
        {9007199254740993.0, "9007199254740992"}, /* the double it rounds to */
        {0.30000000000000004, "0.30000000000000004"},
        {1234567.891, "1234567.891"},
    };
    for (size_t k = 0; k < sizeof doubles / sizeof doubles[0]; k++) {
        char *mine = write_number(0, doubles[k].value, 0, 0);
        STR_EQ(mine, doubles[k].text);
        OK(mine && strtod(mine, NULL) == doubles[k].value);
        ck_free(mine);
    }
    /* Every printed double reads back as itself, also where %.15g falls one ulp short. */
    for (int k = 0; k < 2000; k++) {
        double v = (k + 1) / 7.0 * (k % 3 ? 1e-3 : 1e5) + 0.3 * k;
        char *mine = write_number(0, v, 0, 0);
        OK(mine && strtod(mine, NULL) == v);
        ck_free(mine);
    }
    char *s = write_number(0, NAN, 0, 0);
    STR_EQ(s, "null");
    ck_free(s);
    s = write_number(0, -HUGE_VAL, 0, 0);
    STR_EQ(s, "null");
    ck_free(s);
    s = write_number(1, 0, INT64_MIN, 0);
    STR_EQ(s, "-9223372036854775808");
    ck_free(s);
    s = write_number(1, 0, INT64_MAX, 0);
    STR_EQ(s, "9223372036854775807");
    ck_free(s);
    s = write_number(1, 0, 0, 0);
    STR_EQ(s, "0");
    ck_free(s);
    s = write_number(2, 0, 0, UINT64_MAX);
    STR_EQ(s, "18446744073709551615");
    ck_free(s);
    s = write_number(2, 0, 0, 1000000000000000ull);
    STR_EQ(s, "1000000000000000");
    ck_free(s);
}

/* A host that sets a locale with a decimal comma changes neither what is read nor written. */
TEST(numbers_ignore_the_locale) {
    const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8"};
    const char *set = NULL;
    for (size_t k = 0; k < sizeof names / sizeof names[0] && !set; k++)
        set = setlocale(LC_NUMERIC, names[k]);
    if (!set) {
        printf("numbers_ignore_the_locale: skipped (no locale with a decimal comma)\n");
        return;
    }
    char *s = write_number(0, 0.5, 0, 0);
    STR_EQ(s, "0.5");
    ck_free(s);
    ck__jdoc *d = parse_ok("[0.25, 1.5e2]");
    double x = 0;
    OK(ck__jdouble(ck__jat(ck__jdoc_root(d), 0), &x) && x == 0.25);
    OK(ck__jdouble(ck__jat(ck__jdoc_root(d), 1), &x) && x == 150.0);
    ck__jdoc_free(d);
    setlocale(LC_NUMERIC, "C");
}

/* ---- memory ----------------------------------------------------------------------------- */

/* Every allocation of a parse (arena blocks, both stacks, the duplicate map) and of a write
 * failing in turn: a clean CK_ENOMEM or a NULL text, and no leak. */
TEST(every_allocation_failing) {
    char text[8192];
    size_t at = (size_t)snprintf(text, sizeof text, "{\"list\":[");
    for (int k = 0; k < 60; k++)
        at += (size_t)snprintf(text + at, sizeof text - at,
                               "%s{\"id\":\"call_%d\\u0000x\",\"n\":%d.5,\"deep\":[[[%d]]]}",
                               k ? "," : "", k, k, k);
    at += (size_t)snprintf(text + at, sizeof text - at, "],\"map\":{");
    for (int k = 0; k < 20; k++)
        at += (size_t)snprintf(text + at, sizeof text - at, "%s\"key%d\":\"%0200d\"",
                               k ? "," : "", k, k);
    snprintf(text + at, sizeof text - at, "}}");
    size_t len = strlen(text);
    int failures = 0, successes = 0;
    FAIL_EACH_ALLOC({
        ck_error err;
        ck__jread_options o = {CK__JREAD_NO_DUPLICATES, 0};
        ck__jdoc *d = ck__jread(text, len, o, &err);
        if (!d) {
            if (err.code == CK_ENOMEM) failures++;
            else H_REPORT("a failed allocation is CK_ENOMEM");
        } else {
            char *out = write_value(ck__jdoc_root(d), 1, NULL);
            if (out) successes++;
            ck_free(out);
        }
        ck__jdoc_free(d);
    });
    OK(failures > 3);
    OK(successes >= 1);
}

/* ---- the real transcripts ---------------------------------------------------------------- */

static void corpus_round_trip(void *ctx, const char *name, const char *text, size_t len) {
    (void)name;
    (*(int *)ctx)++;
    round_trips(text, len);
}

TEST(corpus_round_trips) {
    int files = 0;
    if (h_each_corpus("corpus_round_trips", corpus_round_trip, &files) >= 0) OK(files > 0);
}

HARNESS_MAIN(RUN(reads_every_kind) RUN(accessors_take_null_and_wrong_kinds)
                 RUN(nul_bytes_in_strings_and_keys) RUN(every_escape) RUN(surrogates)
                     RUN(numbers_at_and_past_the_limits) RUN(duplicate_keys) RUN(trailing_content)
                         RUN(syntax_errors_name_the_offset) RUN(depth_bombs)
                             RUN(truncated_at_every_offset) RUN(invalid_utf8) RUN(equality)
                                 RUN(writer_commas_and_pretty)
                                     RUN(writer_escapes_every_control_byte)
                                         RUN(writer_numbers_as_records_print_them)
                                             RUN(numbers_ignore_the_locale)
                                                 RUN(every_allocation_failing)
                                                     RUN(corpus_round_trips))
