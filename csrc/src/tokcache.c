/* The token-cost cache (see tokcache.h). */
#include <string.h>

#include "./alloc.h"
#include "./hash.h"
#include "./internal.h"
#include "./tokcache.h"

void ck__tokcache_init(ck__tokcache *tc, const ck_counter *counter, ck_estimator est) {
    memset(tc, 0, sizeof *tc);
    if (counter) tc->counter = *counter;
    tc->estimator = est;
}

void ck__tokcache_dispose(ck__tokcache *tc) {
    ck__free(tc->slots);
    tc->slots = NULL;
    tc->cap = tc->count = 0;
}

void ck__tokcache_clear(ck__tokcache *tc) { ck__tokcache_dispose(tc); }

static struct ck__tokslot *tokcache_slot(const ck__tokcache *tc, uint64_t key) {
    size_t mask = tc->cap - 1;
    for (size_t at = (size_t)key & mask;; at = (at + 1) & mask)
        if (tc->slots[at].key == key || tc->slots[at].key == 0) return &tc->slots[at];
}

static void tokcache_put(ck__tokcache *tc, uint64_t key, uint64_t tokens) {
    if ((tc->count + 1) * 2 > tc->cap) {
        size_t cap = tc->cap ? tc->cap * 2 : 1024;
        struct ck__tokslot *slots = ck__calloc(cap, sizeof *slots);
        if (!slots) return; /* a cache that cannot grow only costs time */
        ck__tokcache grown = *tc;
        grown.slots = slots;
        grown.cap = cap;
        grown.count = 0;
        for (size_t k = 0; k < tc->cap; k++) {
            if (!tc->slots[k].key) continue;
            *tokcache_slot(&grown, tc->slots[k].key) = tc->slots[k];
            grown.count++;
        }
        ck__free(tc->slots);
        *tc = grown;
    }
    struct ck__tokslot *slot = tokcache_slot(tc, key);
    if (!slot->key) tc->count++;
    slot->key = key;
    slot->tokens = tokens;
}

uint64_t ck__tokcache_parts(ck__tokcache *tc, const ck_part *parts, size_t stride, size_t n) {
    return ck__tokcache_parts_keyed(tc, parts, stride, n, ck__parts_content(parts, stride, n));
}

uint64_t ck__tokcache_parts_keyed(ck__tokcache *tc, const ck_part *parts, size_t stride,
                                  size_t n, uint64_t key) {
    if (tc->cap) {
        const struct ck__tokslot *slot = tokcache_slot(tc, key);
        if (slot->key == key) return slot->tokens;
    }
    if (tc->counter.count) {
        uint64_t t = ck__count_parts(&tc->counter, parts, stride, n);
        if (t == UINT64_MAX) return ck__estimate_parts(parts, stride, n, tc->estimator);
        tokcache_put(tc, key, t);
        return t;
    }
    uint64_t t = ck__estimate_parts(parts, stride, n, tc->estimator);
    tokcache_put(tc, key, t);
    return t;
}

uint64_t ck__tokcache_text(const ck__tokcache *tc, const char *text, size_t len) {
    if (tc->counter.count && len) {
        uint64_t t = tc->counter.count(tc->counter.ctx, text, len);
        if (t != UINT64_MAX) return t;
    }
    return ck_estimate_text(text, len, tc->estimator);
}

uint64_t ck__tokcache_message_text(ck__tokcache *tc, const char *text, size_t len) {
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TEXT;
    p.text = text;
    p.text_len = len;
    p.id = p.name = "";
    return ck__tokcache_parts(tc, &p, sizeof p, 1);
}
