/* Owned string lists (see strs.h). */
#include "ctxkeel.h"

#include <string.h>

#include "./alloc.h"
#include "./strs.h"

int ck__strs_push(ck__strs *l, const char *s, size_t len) {
    if (ck__grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) return CK_ENOMEM;
    char *copy = ck__strndup(s ? s : "", s ? len : 0);
    if (!copy) return CK_ENOMEM;
    l->v[l->n].s = copy;
    l->v[l->n].len = s ? len : 0;
    l->n++;
    return CK_OK;
}

size_t ck__strs_find(const ck__strs *l, const char *s, size_t len) {
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].len == len && (len == 0 || memcmp(l->v[i].s, s, len) == 0)) return i;
    return (size_t)-1;
}

int ck__strs_push_unique(ck__strs *l, const char *s, size_t len) {
    size_t at = ck__strs_find(l, s, len);
    if (at == (size_t)-1) return ck__strs_push(l, s, len);
    ck__str keep = l->v[at];
    memmove(l->v + at, l->v + at + 1, (l->n - at - 1) * sizeof *l->v);
    l->v[l->n - 1] = keep;
    return CK_OK;
}

void ck__strs_remove(ck__strs *l, size_t i) {
    if (i >= l->n) return;
    ck__free(l->v[i].s);
    memmove(l->v + i, l->v + i + 1, (l->n - i - 1) * sizeof *l->v);
    l->n--;
}

int ck__strs_copy(ck__strs *dst, const ck__strs *src) {
    for (size_t i = 0; i < src->n; i++)
        if (ck__strs_push(dst, src->v[i].s, src->v[i].len)) return CK_ENOMEM;
    return CK_OK;
}

void ck__strs_dispose(ck__strs *l) {
    for (size_t i = 0; i < l->n; i++) ck__free(l->v[i].s);
    ck__free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}
