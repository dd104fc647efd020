/* libFuzzer target: the anchor parser and merge on arbitrary model replies. */
#include <string.h>

#include "ctxkeel.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    ck_anchors *a = ck_anchors_parse((const char *)data, size);
    REQUIRE(a != NULL);
    size_t half = size / 2;
    ck_anchors *b = ck_anchors_parse((const char *)data + half, size - half);
    REQUIRE(b != NULL);
    ck_anchors *m = ck_anchors_merge(a, b);
    REQUIRE(m != NULL);
    for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
        size_t la = 0, lb = 0, lm = 0;
        const char *va = ck_anchors_get(a, (ck_anchor)k, &la);
        const char *vb = ck_anchors_get(b, (ck_anchor)k, &lb);
        const char *vm = ck_anchors_get(m, (ck_anchor)k, &lm);
        /* Merge: newer wins unless N/A; an anchor never comes back as N/A text. */
        if (vb) REQUIRE(vm && lm == lb && memcmp(vm, vb, lb) == 0);
        else if (va) REQUIRE(vm && lm == la && memcmp(vm, va, la) == 0);
        else REQUIRE(vm == NULL);
        if (vm) REQUIRE(!ck_is_na(vm, lm));
    }
    ck_anchors_free(a);
    ck_anchors_free(b);
    ck_anchors_free(m);
    return 0;
}
