/* libFuzzer target: the estimators on arbitrary bytes (valid UTF-8 or not). */
#include "ctxkeel.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *s = (const char *)data;
    for (int e = 0; e <= 2; e++) {
        uint64_t all = ck_estimate_text(s, size, (ck_estimator)e);
        REQUIRE(size == 0 ? all == 0 : all > 0);
        /* No estimate exceeds one token per byte plus a little for a split. */
        REQUIRE(all <= size + 1);
        uint64_t a = ck_estimate_text(s, size / 2, (ck_estimator)e);
        uint64_t b = ck_estimate_text(s + size / 2, size - size / 2, (ck_estimator)e);
        REQUIRE(a + b + 2 >= all);
    }
    (void)ck_estimate_tools(s, size, CK_EST_DEFAULT);
    return 0;
}
