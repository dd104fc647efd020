/* Helpers shared by the C tests: JSON in, check, repair, JSON out. */
#ifndef CK_TEST_UTIL_H_
#define CK_TEST_UTIL_H_

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "tree.h"

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

/* The first `n` messages of `h` as a history of their own (strings borrowed from `h`), as an
 * agent loop sees its history before each model call. */
static inline ck_history *history_prefix(const ck_history *h, size_t n) {
    ck_history *p = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    for (size_t m = 0; p && m < n; m++) {
        ck_role role;
        uint32_t flags;
        const ck_part *parts;
        size_t np;
        ck_history_get(h, m, &role, &flags, &parts, &np);
        ck_history_add_message(p, role, flags);
        for (size_t q = 0; q < np; q++) ck_history_add_part(p, &parts[q], NULL);
    }
    return p;
}

/* Core-internal (csrc/src/view.c): a view materialized as a history, so that any view can go
 * through ck_check_pairs(). Tests link the static library, where the symbol is reachable. */
int ck__history_from_view(const ck_view *v, const ck_history *src, ck_history **out);

/* Violations in a compaction's view over `h` (-1 on error). */
static inline long view_issues(const ck_view *v, const ck_history *h) {
    ck_history *mat = NULL;
    ck_pair_violation *issues = NULL;
    size_t n = 0;
    ck_error err;
    long out = -1;
    if (ck__history_from_view(v, h, &mat) == CK_OK &&
        ck_check_pairs(mat, CK_FORMAT_AUTO, &issues, &n, &err) == CK_OK)
        out = (long)n;
    ck_free(issues);
    ck_history_free(mat);
    return out;
}

#endif
