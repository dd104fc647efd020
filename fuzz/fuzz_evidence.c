/* libFuzzer target: evidence reads and searches with hostile refs and patterns. The input is
 * split at the first NUL: a ref (or id to store), then a pattern / data. Nothing may be read
 * or written outside the store folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctxkeel.h"
#include "fuzz_store.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

static ck_compactor *k;

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    if (!k) {
        ck_compactor_options o;
        memset(&o, 0, sizeof o);
        o.context_window = 1000;
        o.store_dir = fuzz_store("evidence");
        o.session_id = "fuzz";
        o.tool_offload_threshold = 1;
        ck_error err;
        k = ck_compactor_new(&o, &err);
        REQUIRE(k != NULL);
    }
    const char *s = (const char *)data;
    const char *nul = memchr(s, '\0', size);
    size_t ref_len = nul ? (size_t)(nul - s) : size;
    const char *rest = nul ? nul + 1 : s + size;
    size_t rest_len = size - ref_len - (nul ? 1 : 0);
    /* Store `rest` under the id `ref` through the tool-time gate, then read it back. An id is
     * written once, so each run makes its own: a counter, then the hostile bytes. */
    static unsigned long run;
    char *id = malloc(ref_len + 32);
    int prefix = snprintf(id, 32, "%lu:", run++);
    memcpy(id + prefix, s, ref_len);
    size_t id_len = (size_t)prefix + ref_len;
    ck_history *h = ck_history_new(0);
    ck_history_add_message(h, CK_ROLE_TOOL, CK_MSG_STRING_CONTENT);
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TOOL_RESULT;
    p.flags = CK_PART_OPENAI;
    p.id = id;
    p.id_len = id_len;
    p.text = rest;
    p.text_len = rest_len;
    ck_error err;
    int added = ck_history_add_part(h, &p, &err) == CK_OK;
    if (added && ref_len && rest_len > 1) {
        ck_view *v = NULL;
        REQUIRE(ck_compactor_offload(k, h, 0, &v, &err) == CK_OK);
        ck_view_free(v);
        char *out = NULL;
        size_t len = 0;
        REQUIRE(ck_compactor_read_evidence(k, id, id_len, 0, (size_t)-1, &out, &len, &err) ==
                CK_OK);
        REQUIRE(len == rest_len && memcmp(out, rest, len) == 0);
        ck_free(out);
    }
    ck_history_free(h);
    free(id);
    char *out = NULL;
    size_t len = 0;
    if (ck_compactor_read_evidence(k, s, ref_len, 1, 3, &out, &len, &err) == CK_OK) ck_free(out);
    char *pattern = malloc(rest_len + 1);
    memcpy(pattern, rest, rest_len);
    pattern[rest_len] = '\0';
    if (ck_compactor_search_evidence(k, NULL, 0, pattern, 50, &out, &len, &err) == CK_OK)
        ck_free(out);
    free(pattern);
    return 0;
}
