/* libFuzzer target: the estimators on arbitrary bytes (valid UTF-8 or not). fuzz_pieces.c
 * holds the scanners and the BPE methods to their own rules. */
#include "ctxkeel.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

/* True when the bytes are valid UTF-8 (the history checks text it does not trust). */
static int valid_utf8(const char *s, size_t size) {
    ck_history *h = ck_history_new(0);
    ck_part p = {CK_PART_TEXT, 0, s, size, "", 0, "", 0, 0};
    int ok = ck_history_add_message(h, CK_ROLE_USER, 0) == CK_OK &&
             ck_history_add_part(h, &p, NULL) == CK_OK;
    ck_history_free(h);
    return ok;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *s = (const char *)data;
    int text = valid_utf8(s, size);
    /* Split at a character boundary, as hosts only ever hand whole characters. */
    size_t mid = size / 2;
    while (mid > 0 && (data[mid] & 0xC0) == 0x80) mid--;
    for (int e = 0; e <= 3; e++) {
        uint64_t all = ck_estimate_text(s, size, (ck_estimator)e);
        REQUIRE(size == 0 ? all == 0 : all > 0);
        /* No estimate exceeds one token per byte. */
        REQUIRE(all <= size);
        if (!text) continue;
        /* Splitting text rarely lowers the count (a cut piece costs about as much as the
         * whole); an estimate may deviate a little, not grossly. */
        uint64_t a = ck_estimate_text(s, mid, (ck_estimator)e);
        uint64_t b = ck_estimate_text(s + mid, size - mid, (ck_estimator)e);
        REQUIRE(a + b + 4 + all / 4 >= all);
    }
    (void)ck_estimate_tools(s, size, CK_EST_DEFAULT);
    return 0;
}
