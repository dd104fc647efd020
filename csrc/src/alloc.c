/* The allocator hook and small memory helpers shared by the core. */
#include "ctxkeel.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "./alloc.h"

void *(*ck__malloc_fn)(size_t) = malloc;
void *(*ck__calloc_fn)(size_t, size_t) = calloc;
void *(*ck__realloc_fn)(void *, size_t) = realloc;
void (*ck__free_fn)(void *) = free;

void ck_set_allocator(void *(*new_malloc)(size_t), void *(*new_calloc)(size_t, size_t),
                      void *(*new_realloc)(void *, size_t), void (*new_free)(void *)) {
    ck__malloc_fn = new_malloc ? new_malloc : malloc;
    ck__calloc_fn = new_calloc ? new_calloc : calloc;
    ck__realloc_fn = new_realloc ? new_realloc : realloc;
    ck__free_fn = new_free ? new_free : free;
    /* The core's JSON layer (json.h) allocates through these hooks like every core file.
     * cJSON, still used by checkpoint.c and json.c until they move to that layer, has a
     * process-wide allocator that may serve other code in the process, so it is left alone:
     * the core frees what cJSON allocates with cJSON's own functions. */
}

void ck_free(void *ptr) {
    if (ptr) ck__free(ptr);
}

char *ck__strndup(const char *s, size_t len) {
    if (len == SIZE_MAX) return NULL;
    char *copy = ck__malloc(len + 1);
    if (!copy) return NULL;
    if (len) memcpy(copy, s, len);
    copy[len] = '\0';
    return copy;
}

int ck__grow(void **ptr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t next = *cap ? *cap : 8;
    while (next < need) {
        if (next > SIZE_MAX / 2) return -1;
        next *= 2;
    }
    if (next > SIZE_MAX / elem) return -1;
    void *grown = ck__realloc(*ptr, next * elem);
    if (!grown) return -1;
    *ptr = grown;
    *cap = next;
    return 0;
}

int ck__reserve(void **ptr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t next = *cap > SIZE_MAX / 2 || *cap * 2 < need ? need : *cap * 2;
    if (next > SIZE_MAX / elem) return -1;
    void *grown = ck__realloc(*ptr, next * elem);
    if (!grown) return -1;
    *ptr = grown;
    *cap = next;
    return 0;
}

void *ck_malloc(size_t size) { return ck__malloc(size ? size : 1); }
