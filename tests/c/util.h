/* Helpers shared by the C tests: JSON in, check, repair, JSON out. */
#ifndef CK_TEST_UTIL_H_
#define CK_TEST_UTIL_H_

#include "harness.h"

/* Number of violations of `kind` (or of any kind when kind < 0); -1000 - code on error. */
static inline long count_issues(const char *json, ck_format f, int kind) {
    ck_error err;
    ck_history *h = ck_json_read(json, strlen(json), &err);
    if (!h) return -1000 + err.code;
    ck_pair_violation *v = NULL;
    size_t n = 0;
    int rc = ck_check_pairs(h, f, &v, &n, &err);
    long count = 0;
    for (size_t i = 0; i < n; i++)
        if (kind < 0 || (int)v[i].kind == kind) count++;
    ck_free(v);
    ck_history_free(h);
    return rc ? -1000 + rc : count;
}

/* The repaired JSON text (compact), or NULL; *identity tells whether nothing changed.
 * Release with ck_free(). */
static inline char *repair_json(const char *json, ck_format f, int *identity) {
    ck_error err;
    ck_history *h = ck_json_read(json, strlen(json), &err);
    if (!h) return NULL;
    ck_view *v = NULL;
    ck_format real;
    char *out = NULL;
    if (ck_history_format(h, f, &real, &err) == CK_OK &&
        ck_repair_pairs(h, real, &v, &err) == CK_OK) {
        if (identity) *identity = ck_view_is_identity(v);
        out = ck_json_write(h, v, real, 0, &err);
    }
    ck_view_free(v);
    ck_history_free(h);
    return out;
}

#endif
