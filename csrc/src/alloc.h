/* Private: the allocator every core file goes through (see ck_set_allocator()). */
#ifndef CK_ALLOC_H_
#define CK_ALLOC_H_

#include <stddef.h>

extern void *(*ck__malloc_fn)(size_t);
extern void *(*ck__calloc_fn)(size_t, size_t);
extern void *(*ck__realloc_fn)(void *, size_t);
extern void (*ck__free_fn)(void *);

#define ck__malloc(size) ck__malloc_fn(size)
#define ck__calloc(count, size) ck__calloc_fn((count), (size))
#define ck__realloc(ptr, size) ck__realloc_fn((ptr), (size))
#define ck__free(ptr) ck__free_fn(ptr)

/* A NUL-terminated copy of `len` bytes of `s`, or NULL when out of memory. */
char *ck__strndup(const char *s, size_t len);

/* Grows `*ptr` (an array of `elem` byte items with capacity `*cap`) to hold `need` items.
 * Returns 0, or -1 when out of memory or when the size would overflow (then *ptr is intact). */
int ck__grow(void **ptr, size_t *cap, size_t need, size_t elem);

/* Like ck__grow() for a size known ahead: the capacity becomes exactly `need` when that is
 * more than twice the current one (a fresh array holds no doubling slack), else it doubles. */
int ck__reserve(void **ptr, size_t *cap, size_t need, size_t elem);

#endif
