/* libFuzzer target: JSON message input in both formats through read, check, repair, write.
 * Invariants: nothing crashes; a repaired list has no violation and repairs to itself. */
#include <stdlib.h>
#include <string.h>

#include "ctxkeel.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

static size_t violations(const char *json, size_t len, ck_format f, int *identity) {
    ck_error err;
    /* Read in the format the input was (a repaired list may have lost what told it apart). */
    ck_history *h = ck_json_read_as(json, len, f, &err);
    REQUIRE(h != NULL);
    ck_pair_violation *v = NULL;
    size_t n = 0;
    REQUIRE(ck_check_pairs(h, f, &v, &n, &err) == CK_OK);
    ck_free(v);
    ck_view *view = NULL;
    REQUIRE(ck_repair_pairs(h, f, &view, &err) == CK_OK);
    *identity = ck_view_is_identity(view);
    ck_view_free(view);
    ck_history_free(h);
    return n;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    ck_error err;
    ck_history *h = ck_json_read((const char *)data, size, &err);
    if (!h) {
        REQUIRE(err.code != CK_OK && err.msg != NULL);
        return 0;
    }
    ck_format f;
    if (ck_history_format(h, CK_FORMAT_AUTO, &f, &err) != CK_OK) {
        REQUIRE(err.code == CK_EFORMAT);
        ck_history_free(h);
        return 0;
    }
    (void)ck_estimate_history(h, CK_EST_DEFAULT);
    ck_view *view = NULL;
    REQUIRE(ck_repair_pairs(h, f, &view, &err) == CK_OK);
    char *out = ck_json_write(h, view, f, 0, &err);
    REQUIRE(out != NULL);
    int identity = 0;
    REQUIRE(violations(out, strlen(out), f, &identity) == 0);
    REQUIRE(identity);
    ck_free(out);
    ck_view_free(view);
    ck_history_free(h);
    return 0;
}
