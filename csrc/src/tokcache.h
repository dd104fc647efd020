/* Private: message token costs, cached by content. Every estimate a compactor makes goes
 * through here, so the host's counter (when given) or the built-in estimator answers all of
 * them alike, and a turn measures only what is new: messages, placeholders, a checkpoint. */
#ifndef CK_TOKCACHE_H_
#define CK_TOKCACHE_H_

#include "ctxkeel.h"

/* Open addressing; key 0 marks a free slot. */
typedef struct ck__tokcache {
    struct ck__tokslot {
        uint64_t key, tokens;
    } *slots;
    size_t cap, count; /* cap: a power of two, or 0 */
    ck_counter counter; /* count NULL: the estimator */
    ck_estimator estimator;
} ck__tokcache;

void ck__tokcache_init(ck__tokcache *tc, const ck_counter *counter, ck_estimator est);
void ck__tokcache_dispose(ck__tokcache *tc);
/* Drops every entry (keeps the counter and estimator). */
void ck__tokcache_clear(ck__tokcache *tc);

/* Tokens of n parts standing `stride` bytes apart, as one message (overhead included), from
 * the cache when the same content was measured before. A counter that could not answer is
 * not cached, so it is asked again next time; the estimator answers meanwhile. */
uint64_t ck__tokcache_parts(ck__tokcache *tc, const ck_part *parts, size_t stride, size_t n);
/* ck__tokcache_parts() by the content hash the caller has: ck__parts_content() of the parts,
 * as a history keeps it per message (ck__message_content()). */
uint64_t ck__tokcache_parts_keyed(ck__tokcache *tc, const ck_part *parts, size_t stride,
                                  size_t n, uint64_t key);

/* Tokens of one text by the counter or the estimator (uncached, no overhead). */
uint64_t ck__tokcache_text(const ck__tokcache *tc, const char *text, size_t len);

/* Tokens of one text as a one-part message (the cost a checkpoint or a note adds). */
uint64_t ck__tokcache_message_text(ck__tokcache *tc, const char *text, size_t len);

/* Saturating addition of token counts. */
static inline uint64_t ck__tok_add(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
static inline uint64_t ck__tok_sub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

#endif
