/* Token counts from a host tokenizer (ck_counter): one call per message, its strings joined,
 * with the same per-message overhead and image charge as the built-in estimators. A counter
 * may answer any number up to UINT64_MAX - 1 (UINT64_MAX means "cannot answer"), so sums
 * saturate at UINT64_MAX - 1 rather than wrap around to a small count. */
#include "ctxkeel.h"

#include <stdint.h>
#include <string.h>

#include "./buf.h"
#include "./internal.h"

/* a + b, at most COUNTER_MAX. */
#define COUNTER_MAX (UINT64_MAX - 1)
static uint64_t counter_add(uint64_t a, uint64_t b) {
    return b >= COUNTER_MAX || a >= COUNTER_MAX - b ? COUNTER_MAX : a + b;
}

uint64_t ck__count_parts(const ck_counter *counter, const ck_part *parts, size_t stride,
                         size_t n) {
    ck__buf joined;
    ck__buf_init(&joined);
    uint64_t images = 0;
    const char *at = (const char *)parts;
    for (size_t k = 0; k < n; k++, at += stride) {
        const ck_part *p = (const ck_part *)(const void *)at;
        if (p->kind == CK_PART_IMAGE) {
            images++;
            continue;
        }
        const char *str[3] = {p->name, p->id, p->text};
        size_t len[3] = {p->name_len, p->id_len, p->text_len};
        for (int j = 0; j < 3; j++) {
            if (!len[j]) continue;
            if (joined.len) ck__buf_addc(&joined, '\n');
            ck__buf_add(&joined, str[j], len[j]);
        }
    }
    uint64_t tokens = UINT64_MAX;
    if (!joined.failed)
        tokens = joined.len ? counter->count(counter->ctx, joined.data, joined.len) : 0;
    ck__buf_dispose(&joined);
    if (tokens == UINT64_MAX) return UINT64_MAX;
    uint64_t image_cost =
        images > COUNTER_MAX / CK_IMAGE_TOKENS ? COUNTER_MAX : images * CK_IMAGE_TOKENS;
    return counter_add(counter_add(tokens, image_cost), CK_MESSAGE_OVERHEAD);
}

uint64_t ck_count_message(const ck_history *history, size_t i, const ck_counter *counter) {
    if (!history || i >= history->n_msgs || !counter || !counter->count) return UINT64_MAX;
    return ck__count_parts(counter, ck__msg_parts(history, i), sizeof(ck_part),
                           history->msgs[i].n_parts);
}

uint64_t ck_count_history(const ck_history *history, const ck_counter *counter) {
    if (!history || !counter || !counter->count) return UINT64_MAX;
    if (!history->n_msgs) return 0;
    uint64_t tokens = CK_REQUEST_OVERHEAD;
    for (size_t i = 0; i < history->n_msgs; i++) {
        uint64_t t = ck_count_message(history, i, counter);
        if (t == UINT64_MAX) return UINT64_MAX;
        tokens = counter_add(tokens, t);
    }
    return tokens;
}
