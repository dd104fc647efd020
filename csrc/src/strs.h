/* Private: owned strings and growable lists of them. Strings keep their length, so they may
 * hold any byte, NUL included; each also has a NUL after its last byte for convenience. */
#ifndef CK_STRS_H_
#define CK_STRS_H_

#include <stddef.h>

typedef struct ck__str {
    char *s;
    size_t len;
} ck__str;

typedef struct ck__strs {
    ck__str *v;
    size_t n, cap;
} ck__strs;

/* Appends a copy of s[0..len). Returns CK_OK or CK_ENOMEM. */
int ck__strs_push(ck__strs *l, const char *s, size_t len);
/* Appends a copy unless an equal string is there; an equal one moves to the end (newest). */
int ck__strs_push_unique(ck__strs *l, const char *s, size_t len);
/* Index of an equal string, or (size_t)-1. */
size_t ck__strs_find(const ck__strs *l, const char *s, size_t len);
/* Removes entry i (order kept). */
void ck__strs_remove(ck__strs *l, size_t i);
/* Appends copies of every entry of src. Returns CK_OK or CK_ENOMEM. */
int ck__strs_copy(ck__strs *dst, const ck__strs *src);
void ck__strs_dispose(ck__strs *l);

#endif
