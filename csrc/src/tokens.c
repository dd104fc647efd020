/* Token estimation. The chars4 mode is UTF-8 bytes / 4; the default mode adds what providers
 * charge per message and per request. A later, calibrated model replaces the text cost of the
 * default mode; the accounting of what counts (content, ids, names, arguments) stays here. */
#include "./internal.h"

static uint64_t div4(uint64_t bytes) { return (bytes + 3) / 4; }

uint64_t ck_estimate_text(const char *data, size_t len, ck_estimator est) {
    (void)est;
    if (!data || !len) return 0;
    return div4(len);
}

/* Bytes that count toward a message, and the number of image parts (which cost a fixed
 * amount in every estimator instead of their bytes). Parts stand `stride` bytes apart so that
 * both ck_part arrays and ck_out_part arrays can be measured. */
static uint64_t parts_bytes(const ck_part *parts, size_t stride, size_t n, uint64_t *images) {
    uint64_t bytes = 0;
    const char *at = (const char *)parts;
    for (size_t k = 0; k < n; k++, at += stride) {
        const ck_part *p = (const ck_part *)(const void *)at;
        if (p->kind == CK_PART_IMAGE) {
            (*images)++;
            continue;
        }
        bytes += p->text_len + p->id_len + p->name_len;
    }
    return bytes;
}

static uint64_t message_bytes(const ck_history *h, size_t i, uint64_t *images) {
    return parts_bytes(ck__msg_parts(h, i), sizeof(ck_part), h->msgs[i].n_parts, images);
}

uint64_t ck__estimate_parts(const ck_part *parts, size_t stride, size_t n, ck_estimator est) {
    uint64_t images = 0;
    uint64_t tokens = div4(parts_bytes(parts, stride, n, &images)) + images * CK_IMAGE_TOKENS;
    if (est == CK_EST_DEFAULT) tokens += CK_MESSAGE_OVERHEAD;
    return tokens;
}

uint64_t ck_estimate_message(const ck_history *history, size_t i, ck_estimator est) {
    if (!history || i >= history->n_msgs) return 0;
    return ck__estimate_parts(ck__msg_parts(history, i), sizeof(ck_part),
                              history->msgs[i].n_parts, est);
}

uint64_t ck_estimate_history(const ck_history *history, ck_estimator est) {
    if (!history || !history->n_msgs) return 0;
    uint64_t images = 0, bytes = 0;
    for (size_t i = 0; i < history->n_msgs; i++) bytes += message_bytes(history, i, &images);
    /* chars4 divides the whole once, as the compatibility mode is documented to do. */
    uint64_t tokens = div4(bytes) + images * CK_IMAGE_TOKENS;
    if (est == CK_EST_DEFAULT)
        tokens += (uint64_t)history->n_msgs * CK_MESSAGE_OVERHEAD + CK_REQUEST_OVERHEAD;
    return tokens;
}

uint64_t ck_estimate_tools(const char *json, size_t len, ck_estimator est) {
    return ck_estimate_text(json, len, est);
}
