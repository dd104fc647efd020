/* Private: a hash map from borrowed byte strings (tool-call ids) to indexes. */
#ifndef CK_IDMAP_H_
#define CK_IDMAP_H_

#include <stddef.h>
#include <stdint.h>

typedef struct ck__idmap_slot {
    const char *key;
    size_t len;
    uint64_t hash;
    size_t value;
} ck__idmap_slot;

typedef struct ck__idmap {
    ck__idmap_slot *slots;
    size_t cap; /* a power of two, or 0 */
    size_t count;
} ck__idmap;

/* 64-bit hash of a byte string, eight bytes a step, with a final avalanche (not a stable
 * format: only ever kept in memory). */
uint64_t ck__hash_bytes(const char *s, size_t len);

/* Prepares an empty map sized for `expected` keys. Returns 0 or -1 (out of memory). */
int ck__idmap_init(ck__idmap *m, size_t expected);
void ck__idmap_dispose(ck__idmap *m);

/* The value stored for `key`, or SIZE_MAX when absent. */
size_t ck__idmap_get(const ck__idmap *m, const char *key, size_t len);

/* Stores key -> value unless the key is present. Returns 1 when inserted, 0 when it was
 * present (the stored value is left as it was), -1 when out of memory. The key is borrowed. */
int ck__idmap_put(ck__idmap *m, const char *key, size_t len, size_t value);

/* Stores key -> value, replacing the value of a present key (whose stored key pointer stays:
 * it must remain valid). Returns 1 when inserted, 0 when replaced, -1 when out of memory. */
int ck__idmap_set(ck__idmap *m, const char *key, size_t len, size_t value);

#endif
