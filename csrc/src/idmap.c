/* Open-addressing hash map keyed by borrowed byte strings. Keys are tool-call ids from
 * untrusted input, so the table grows before it is 70% full and probing stays linear in the
 * worst case rather than quadratic overall. */
#include <string.h>

#include "./alloc.h"
#include "./idmap.h"

uint64_t ck__hash_bytes(const char *s, size_t len) {
    /* Eight bytes a step (ids are mostly 20-40 bytes, FNV-1a's byte steps were a sixth of
     * pairing a long history): each word is multiplied in and rotated, the length seeds the
     * state so that a key and the same key with trailing zero bytes differ, and a final
     * avalanche spreads every bit. */
    uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)len * 0xff51afd7ed558ccdull);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ (w * 0x87c37b91114253d5ull)) * 0x4cf5ad432745937full;
        h = (h << 31) | (h >> 33);
    }
    uint64_t tail = 0;
    for (size_t k = 0; i + k < len; k++) tail |= (uint64_t)(unsigned char)s[i + k] << (8 * k);
    h = (h ^ (tail * 0x87c37b91114253d5ull)) * 0x4cf5ad432745937full;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
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

/* Finds or claims the slot of `key` (growing the table first when a new key would pass 70%).
 * Returns the slot index with *added set, or SIZE_MAX when out of memory. */
static size_t claim(ck__idmap *m, const char *key, size_t len, uint64_t hash, int *added) {
    if ((m->count + 1) * 10 > m->cap * 7 && rehash(m, m->cap ? m->cap * 2 : 16)) return SIZE_MAX;
    size_t j = find(m, key, len, hash);
    *added = !m->slots[j].key;
    if (*added) {
        /* An empty key still needs a non-NULL pointer to mark the slot used. */
        m->slots[j].key = key ? key : "";
        m->slots[j].len = len;
        m->slots[j].hash = hash;
        m->count++;
    }
    return j;
}

int ck__idmap_put(ck__idmap *m, const char *key, size_t len, size_t value) {
    int added;
    size_t j = claim(m, key, len, ck__hash_bytes(key, len), &added);
    if (j == SIZE_MAX) return -1;
    if (added) m->slots[j].value = value;
    return added;
}

int ck__idmap_set(ck__idmap *m, const char *key, size_t len, size_t value) {
    int added;
    size_t j = claim(m, key, len, ck__hash_bytes(key, len), &added);
    if (j == SIZE_MAX) return -1;
    m->slots[j].value = value;
    return added;
}
