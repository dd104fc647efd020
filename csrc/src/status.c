/* Status codes: text and names generated from CK_STATUS_LIST, and the library version. */
#include "ctxkeel.h"

const char *ck_version(void) { return CK_VERSION_STRING; }

const char *ck_strerror(int code) {
    switch (code) {
#define CK__TEXT_CASE(name, value, text)                                                       \
    case value:                                                                                \
        return text;
        CK_STATUS_LIST(CK__TEXT_CASE)
#undef CK__TEXT_CASE
    }
    return "unknown error";
}

const char *ck_err_name(int code) {
    switch (code) {
#define CK__NAME_CASE(name, value, text)                                                       \
    case value:                                                                                \
        return "CK_" #name;
        CK_STATUS_LIST(CK__NAME_CASE)
#undef CK__NAME_CASE
    }
    return "CK_UNKNOWN";
}
