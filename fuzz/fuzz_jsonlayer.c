/* libFuzzer target: the core's JSON layer (csrc/src/json.h) on arbitrary bytes.
 * Invariants: nothing crashes; a document that parses, written back (compact or pretty) and
 * parsed again, is the same tree, and writing that again gives the same text; whatever the
 * lenient reader accepts, the writer turns into text the strict reader accepts; a duplicate-
 * key refusal is a syntax error. */
#include <string.h>

#include "../csrc/src/json.h"

#define REQUIRE(cond)                                                                          \
    do {                                                                                       \
        if (!(cond)) __builtin_trap();                                                         \
    } while (0)

static char *write(const ck__jdoc *d, int pretty, size_t *len) {
    ck__buf b;
    ck__buf_init(&b);
    ck__jwriter w;
    ck__jw_init(&w, &b, pretty);
    ck__jw_value(&w, ck__jdoc_root(d));
    char *out = ck__buf_take(&b, len);
    REQUIRE(out != NULL);
    return out;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    const char *text = (const char *)data;
    const ck__jread_options strict = {0, 0};
    ck_error err;
    ck__jdoc *d = ck__jread(text, size, strict, &err);
    if (d) {
        for (int pretty = 0; pretty < 2; pretty++) {
            size_t n1 = 0, n2 = 0;
            char *t1 = write(d, pretty, &n1);
            ck__jdoc *again = ck__jread(t1, n1, strict, &err);
            REQUIRE(again != NULL);
            REQUIRE(ck__jequal(ck__jdoc_root(d), ck__jdoc_root(again)) == 1);
            char *t2 = write(again, pretty, &n2);
            REQUIRE(n1 == n2 && memcmp(t1, t2, n1) == 0);
            ck_free(t1);
            ck_free(t2);
            ck__jdoc_free(again);
        }
        ck__jread_options nodup = {CK__JREAD_NO_DUPLICATES, 0};
        ck__jdoc *checked = ck__jread(text, size, nodup, &err);
        if (!checked) REQUIRE(err.code == CK_ESYNTAX && err.offset < size);
        ck__jdoc_free(checked);
        ck__jdoc_free(d);
    } else {
        REQUIRE(err.code != CK_OK && err.msg != NULL && err.offset <= size);
    }
    const ck__jread_options lenient = {CK__JREAD_ANY_BYTES | CK__JREAD_TRAILING, 0};
    d = ck__jread(text, size, lenient, &err);
    if (d) {
        REQUIRE(ck__jdoc_end(d) <= size);
        size_t n = 0;
        char *t = write(d, 0, &n);
        ck__jdoc *again = ck__jread(t, n, strict, &err);
        REQUIRE(again != NULL);
        ck__jdoc_free(again);
        ck_free(t);
        ck__jdoc_free(d);
    }
    return 0;
}
