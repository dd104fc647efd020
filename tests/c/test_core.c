/* Status codes, the allocator hook, UTF-8 checks, the history API and token counts. */
#include "harness.h"
#include "../../csrc/src/idmap.h"

TEST(status_codes) {
    /* Every code from the list has a distinct name and a text; unknown codes are marked. */
    const char *seen[CK_STATUS_COUNT];
    for (int i = 0; i < CK_STATUS_COUNT; i++) {
        int code = -i;
        const char *name = ck_err_name(code);
        OK(strncmp(name, "CK_", 3) == 0 && strcmp(name, "CK_UNKNOWN") != 0);
        OK(strcmp(ck_strerror(code), "unknown error") != 0);
        for (int j = 0; j < i; j++) OK(strcmp(seen[j], name) != 0);
        seen[i] = name;
    }
    STR_EQ(ck_err_name(CK_ESYNTAX), "CK_ESYNTAX");
    STR_EQ(ck_err_name(0), "CK_OK");
    STR_EQ(ck_err_name(-CK_STATUS_COUNT), "CK_UNKNOWN");
    STR_EQ(ck_err_name(1), "CK_UNKNOWN");
    STR_EQ(ck_strerror(12345), "unknown error");
    OK(CK_IS_INPUT_ERROR(CK_ETYPE) && CK_IS_INPUT_ERROR(CK_EUTF8) && !CK_IS_INPUT_ERROR(CK_ENOMEM));
    STR_EQ(ck_version(), CK_VERSION_STRING);
}

static ck_history *one_message(uint32_t flags, const char *text, size_t len, int *rc,
                               ck_error *err) {
    ck_history *h = ck_history_new(flags);
    ck_history_add_message(h, CK_ROLE_USER, CK_MSG_STRING_CONTENT);
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TEXT;
    p.text = text;
    p.text_len = len;
    *rc = ck_history_add_part(h, &p, err);
    return h;
}

TEST(utf8_checks) {
    static const struct {
        const char *s;
        int ok;
    } cases[] = {
        {"plain ascii, long enough to take the eight-byte path", 1},
        {"caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80", 1},
        {"\xc3", 0},             /* truncated */
        {"\xc0\x80", 0},         /* overlong NUL */
        {"\xe0\x80\xaf", 0},     /* overlong */
        {"\xed\xa0\x80", 0},     /* surrogate */
        {"\xf4\x90\x80\x80", 0}, /* past U+10FFFF */
        {"abcdefgh\x80", 0},     /* stray continuation after the fast path */
        {"\xf0\x9f\x98", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc;
        ck_error err;
        ck_history *h = one_message(0, cases[i].s, strlen(cases[i].s), &rc, &err);
        INT_EQ(rc, cases[i].ok ? CK_OK : CK_EUTF8);
        if (!cases[i].ok) OK(strstr(err.where, "messages[0].text") != NULL);
        ck_history_free(h);
        /* Trusted histories skip the check. */
        h = one_message(CK_HISTORY_TRUSTED_UTF8, cases[i].s, strlen(cases[i].s), &rc, &err);
        INT_EQ(rc, CK_OK);
        ck_history_free(h);
    }
    int rc;
    ck_error err;
    ck_history *h = one_message(0, "a\0b", 3, &rc, &err); /* NUL is valid UTF-8 */
    INT_EQ(rc, CK_OK);
    ck_history_free(h);
}

TEST(history_api) {
    ck_history *h = ck_history_new(0);
    ck_part p;
    memset(&p, 0, sizeof p);
    ck_error err;
    INT_EQ(ck_history_add_part(h, &p, &err), CK_ESTATE);
    INT_EQ(ck_history_add_message(h, (ck_role)42, 0), CK_EINVAL);
    INT_EQ(ck_history_add_message(h, CK_ROLE_ASSISTANT, 0), CK_OK);
    p.kind = (ck_part_kind)9;
    INT_EQ(ck_history_add_part(h, &p, &err), CK_EINVAL);
    p.kind = CK_PART_TEXT;
    p.text_len = 3; /* NULL text with a length */
    INT_EQ(ck_history_add_part(h, &p, &err), CK_EINVAL);
    /* Over the size limit: refused by length before a byte is read. */
    p.text = "x";
    p.text_len = CK_MAX_STRING + 1;
    INT_EQ(ck_history_add_part(h, &p, &err), CK_ETOOBIG);
    OK(strstr(err.where, "messages[0].text") != NULL);
    char *buf = ck_history_alloc(h, 5);
    OK(buf != NULL);
    memcpy(buf, "hello", 5);
    p.text = buf;
    p.text_len = 5;
    p.host = 77;
    INT_EQ(ck_history_add_part(h, &p, &err), CK_OK);
    /* A large allocation gets its own block. */
    char *big = ck_history_alloc(h, 1 << 20);
    OK(big != NULL);
    memset(big, 'x', 1 << 20);
    INT_EQ(ck_history_count(h), 1);
    const ck_part *parts;
    size_t n;
    ck_role role;
    INT_EQ(ck_history_get(h, 0, &role, NULL, &parts, &n), CK_OK);
    INT_EQ(role, CK_ROLE_ASSISTANT);
    INT_EQ(n, 1);
    MEM_EQ(parts[0].text, parts[0].text_len, "hello");
    INT_EQ(parts[0].host, 77);
    OK(parts[0].id != NULL && parts[0].id_len == 0);
    INT_EQ(ck_history_get(h, 1, NULL, NULL, NULL, NULL), CK_EINVAL);
    ck_history_clear(h);
    INT_EQ(ck_history_count(h), 0);
    OK(ck_history_alloc(h, 100) != NULL);
    ck_history_free(h);
    ck_history_free(NULL);
    ck_view_free(NULL);
    INT_EQ(ck_view_count(NULL), 0);
    ck_free(NULL);
}

/* Appends a user message with `text` as its two parts. */
static void add_twice(ck_history *h, const char *text) {
    ck_part p;
    ck_error err;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TEXT;
    p.text = text;
    p.text_len = strlen(text);
    INT_EQ(ck_history_add_message(h, CK_ROLE_USER, 0), CK_OK);
    INT_EQ(ck_history_add_part(h, &p, &err), CK_OK);
    INT_EQ(ck_history_add_part(h, &p, &err), CK_OK);
}

/* Truncating keeps the first messages whole and lets the rest be appended again, as the Node
 * binding does when a list changed after some message. */
TEST(history_truncate) {
    ck_history *h = ck_history_new(0);
    const char *texts[3] = {"one", "two two", "three"};
    for (int i = 0; i < 3; i++) add_twice(h, texts[i]);
    uint64_t before = ck_estimate_history(h, CK_EST_DEFAULT);
    ck_history_truncate(h, 5); /* more than it has: nothing changes */
    INT_EQ(ck_history_count(h), 3);
    ck_history_truncate(h, 1);
    INT_EQ(ck_history_count(h), 1);
    const ck_part *parts;
    size_t n;
    INT_EQ(ck_history_get(h, 0, NULL, NULL, &parts, &n), CK_OK);
    INT_EQ(n, 2);
    MEM_EQ(parts[1].text, parts[1].text_len, "one");
    INT_EQ(ck_history_get(h, 1, NULL, NULL, NULL, NULL), CK_EINVAL);
    /* The parts of the dropped messages are gone: appended ones follow the kept ones. */
    for (int i = 1; i < 3; i++) add_twice(h, texts[i]);
    INT_EQ(ck_history_get(h, 2, NULL, NULL, &parts, &n), CK_OK);
    INT_EQ(n, 2);
    MEM_EQ(parts[0].text, parts[0].text_len, "three");
    OK(ck_estimate_history(h, CK_EST_DEFAULT) == before);
    ck_history_truncate(h, 0);
    INT_EQ(ck_history_count(h), 0);
    INT_EQ(ck_estimate_history(h, CK_EST_DEFAULT), 0);
    ck_history_truncate(NULL, 0);
    ck_history_free(h);
}

TEST(tokens) {
    INT_EQ(ck_estimate_text("", 0, CK_EST_DEFAULT), 0);
    INT_EQ(ck_estimate_text("abcd", 4, CK_EST_CHARS4), 1);
    INT_EQ(ck_estimate_text("abcde", 5, CK_EST_CHARS4), 2);
    INT_EQ(ck_estimate_text("hello world", 11, CK_EST_DEFAULT), 2);
    INT_EQ(ck_estimate_text("hello world", 11, CK_EST_CL100K), 2);
    const char *j = "[{\"role\":\"user\",\"content\":\"12345678\"},"
                    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"ab\","
                    "\"function\":{\"name\":\"cd\",\"arguments\":\"done\"}}]},"
                    "{\"role\":\"tool\",\"tool_call_id\":\"ab\",\"content\":\"xy\"},"
                    "{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]";
    ck_error err;
    ck_history *h = ck_json_read(j, strlen(j), &err);
    /* bytes: 8 + (2 + 2 + 4) + (2 + 2) = 20 -> 5 tokens, plus one image */
    INT_EQ(ck_estimate_history(h, CK_EST_CHARS4), 5 + CK_IMAGE_TOKENS);
    /* Exact counts in both o200k_base and cl100k_base: "12345678" is 3 (123|456|78); "ab", "cd",
     * "done" and "xy" are 1 each. Each message adds its overhead, the request its own. */
    for (int e = 0; e < 2; e++) {
        ck_estimator est = e ? CK_EST_CL100K : CK_EST_DEFAULT;
        INT_EQ(ck_estimate_history(h, est), 3 + (1 + 1 + 1) + (1 + 1) + CK_IMAGE_TOKENS +
                                                4 * CK_MESSAGE_OVERHEAD + CK_REQUEST_OVERHEAD);
        INT_EQ(ck_estimate_message(h, 1, est), 3 + CK_MESSAGE_OVERHEAD);
        INT_EQ(ck_estimate_message(h, 3, est), CK_IMAGE_TOKENS + CK_MESSAGE_OVERHEAD);
    }
    INT_EQ(ck_estimate_message(h, 1, CK_EST_CHARS4), 2);
    INT_EQ(ck_estimate_message(h, 9, CK_EST_DEFAULT), 0);
    INT_EQ(ck_estimate_tools("[{}]", 4, CK_EST_CHARS4), 1);
    /* A tool-schema list costs its JSON text: 13 tokens exactly in o200k_base. */
    const char *tools = "[{\"type\":\"function\",\"function\":{\"name\":\"bash\"}}]";
    long tools_est = (long)ck_estimate_tools(tools, strlen(tools), CK_EST_DEFAULT);
    INT_EQ(tools_est, ck_estimate_text(tools, strlen(tools), CK_EST_DEFAULT));
    OK(tools_est >= 12 && tools_est <= 14);
    ck_history_free(h);
}

/* A history made by hand (as the bindings do) goes through repair with host ids echoed. */
TEST(host_ids_echo) {
    ck_history *h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    ck_part p;
    memset(&p, 0, sizeof p);
    ck_error err;
    ck_history_add_message(h, CK_ROLE_ASSISTANT, 0);
    p.kind = CK_PART_TOOL_CALL;
    p.flags = CK_PART_OPENAI;
    p.id = "c1";
    p.id_len = 2;
    p.host = 1234;
    INT_EQ(ck_history_add_part(h, &p, &err), CK_OK);
    ck_view *v = NULL;
    INT_EQ(ck_repair_pairs(h, CK_FORMAT_AUTO, &v, &err), CK_OK);
    INT_EQ(ck_view_count(v), 2);
    ck_out_msg m;
    INT_EQ(ck_view_get(v, 0, &m), CK_OK);
    INT_EQ(m.op, CK_OP_KEEP);
    INT_EQ(ck_view_get(v, 1, &m), CK_OK);
    INT_EQ(m.op, CK_OP_NEW);
    INT_EQ(m.role, CK_ROLE_TOOL);
    INT_EQ(m.n_parts, 1);
    MEM_EQ(m.parts[0].part.id, m.parts[0].part.id_len, "c1");
    STR_EQ(m.parts[0].part.text, ck_stub_result_text());
    INT_EQ(m.parts[0].src_msg, CK_NONE);
    INT_EQ(ck_view_get(v, 2, &m), CK_EINVAL);
    OK(!ck_view_is_identity(v));
    ck_view_free(v);
    ck_history_free(h);
}

/* The id map: keys that differ only in their length (trailing zero bytes), in one byte at any
 * position, or that are empty are all distinct; put keeps a present value, set replaces it;
 * the table grows past its first size and every key is still found. */
TEST(idmap) {
    enum { N = 3000 };
    static char keys[N][48];
    static size_t lens[N];
    size_t n = 0;
    for (size_t len = 0; len <= 40 && n < N; len++) { /* "", "\0", "\0\0", ... */
        memset(keys[n], 0, sizeof keys[n]);
        lens[n++] = len;
    }
    for (size_t pos = 0; pos < 40; pos++) /* one byte flipped at each position of a 40-byte id */
        for (int bit = 0; bit < 8 && n < N; bit++) {
            memset(keys[n], 'a', 40);
            keys[n][pos] ^= (char)(1 << bit);
            lens[n++] = 40;
        }
    memset(keys[n], 'a', 40);
    lens[n++] = 40;
    while (n < N) { /* call_0 ... as some servers name every call, and longer ids */
        int len = snprintf(keys[n], sizeof keys[n], n % 2 ? "call_%zu" : "toolu_01%038zu", n);
        lens[n++] = (size_t)len;
    }
    ck__idmap m;
    OK(ck__idmap_init(&m, 4) == 0);
    for (size_t i = 0; i < N; i++) OK(ck__idmap_put(&m, keys[i], lens[i], i) == 1);
    INT_EQ(m.count, N);
    for (size_t i = 0; i < N; i++) INT_EQ(ck__idmap_get(&m, keys[i], lens[i]), i);
    OK(ck__idmap_put(&m, keys[7], lens[7], 99999) == 0);
    INT_EQ(ck__idmap_get(&m, keys[7], lens[7]), 7);
    OK(ck__idmap_set(&m, keys[7], lens[7], 99999) == 0);
    INT_EQ(ck__idmap_get(&m, keys[7], lens[7]), 99999);
    INT_EQ(ck__idmap_get(&m, "absent", 6), SIZE_MAX);
    INT_EQ(m.count, N);
    /* Hashes of distinct keys here all differ (64 bits: a collision would be a broken hash). */
    static uint64_t hashes[N];
    for (size_t i = 0; i < N; i++) hashes[i] = ck__hash_bytes(keys[i], lens[i]);
    size_t same = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t j = i + 1; j < N; j++) same += hashes[i] == hashes[j];
    INT_EQ(same, 0);
    ck__idmap_dispose(&m);
    INT_EQ(ck__idmap_get(&m, keys[0], lens[0]), SIZE_MAX);
}

HARNESS_MAIN(RUN(status_codes) RUN(utf8_checks) RUN(history_api) RUN(history_truncate) RUN(tokens) RUN(host_ids_echo)
             RUN(idmap))
