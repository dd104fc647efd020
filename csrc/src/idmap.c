/* Open-addressing hash map keyed by borrowed byte strings. Keys are tool-call ids from
 * untrusted input, so the table grows before it is 70% full and probing stays linear in the
 * worst case rather than quadratic overall. */
#include <string.h>

#include "./alloc.h"
#include "./idmap.h"

uint64_t ck__hash_bytes(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    /* FNV-1a leaves the low bits weak for short keys; a final avalanche fixes that. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static int rehash(ck__idmap *m, size_t cap) {
    ck__idmap_slot *slots = ck__calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key) continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    ck__free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int ck__idmap_init(ck__idmap *m, size_t expected) {
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
    size_t cap = 16;
    while (cap < expected * 2 && cap < ((size_t)1 << 40)) cap *= 2;
    return rehash(m, cap);
}

void ck__idmap_dispose(ck__idmap *m) {
    ck__free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

static size_t find(const ck__idmap *m, const char *key, size_t len, uint64_t hash) {
    size_t j = hash & (m->cap - 1);
    while (m->slots[j].key) {
        const ck__idmap_slot *s = &m->slots[j];
        if (s->hash == hash && s->len == len && memcmp(s->key, key, len) == 0) return j;
        j = (j + 1) & (m->cap - 1);
    }
    return j;
}

size_t ck__idmap_get(const ck__idmap *m, const char *key, size_t len) {
    if (!m->cap) return SIZE_MAX;
    size_t j = find(m, key, len, ck__hash_bytes(key, len));
    return m->slots[j].key ? m->slots[j].value : SIZE_MAX;
}

int ck__idmap_put(ck__idmap *m, const char *key, size_t len, size_t value) {
    if ((m->count + 1) * 10 > m->cap * 7 && rehash(m, m->cap ? m->cap * 2 : 16)) return -1;
    uint64_t hash = ck__hash_bytes(key, len);
    size_t j = find(m, key, len, hash);
    if (m->slots[j].key) return 0;
    /* An empty key still needs a non-NULL pointer to mark the slot used. */
    m->slots[j].key = key ? key : "";
    m->slots[j].len = len;
    m->slots[j].hash = hash;
    m->slots[j].value = value;
    m->count++;
    return 1;
}

int ck__idmap_set(ck__idmap *m, const char *key, size_t len, size_t value) {
    int rc = ck__idmap_put(m, key, len, value);
    if (rc == 0) m->slots[find(m, key, len, ck__hash_bytes(key, len))].value = value;
    return rc;
}
