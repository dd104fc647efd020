/* Message classes and message hashes: what the layers above ask of one message of a history
 * (is it the user's own text, does it carry tool results, what is its text), and the content
 * fingerprint of a prefix, which tells whether a history continues the one a state covers. */
#include <string.h>

#include "./buf.h"
#include "./hash.h"
#include "./internal.h"

const ck_part *ck__first_text(const ck_history *h, size_t i) {
    const ck_part *parts = ck__msg_parts(h, i);
    for (size_t k = 0; k < h->msgs[i].n_parts; k++)
        if (parts[k].kind == CK_PART_TEXT) return &parts[k];
    return NULL;
}

int ck__has_result(const ck_history *h, size_t i) {
    const ck_part *parts = ck__msg_parts(h, i);
    for (size_t k = 0; k < h->msgs[i].n_parts; k++)
        if (parts[k].kind == CK_PART_TOOL_RESULT) return 1;
    return 0;
}

int ck__is_user_text(const ck_history *h, size_t i) {
    return h->msgs[i].role == CK_ROLE_USER && ck__first_text(h, i) && !ck__has_result(h, i);
}

int ck__has_user_words(const ck_history *h, size_t i) {
    return h->msgs[i].role == CK_ROLE_USER && ck__first_text(h, i);
}

int ck__is_result_carrier(const ck_history *h, size_t i) {
    if (h->msgs[i].role == CK_ROLE_TOOL) return 1;
    const ck_part *parts = ck__msg_parts(h, i);
    return h->msgs[i].n_parts && parts[0].kind == CK_PART_TOOL_RESULT;
}

const char *ck__msg_text(const ck_history *h, size_t i, ck__buf *scratch, size_t *len) {
    const ck_part *parts = ck__msg_parts(h, i);
    size_t n_text = 0;
    const ck_part *only = NULL;
    for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
        if (parts[k].kind != CK_PART_TEXT) continue;
        n_text++;
        only = &parts[k];
    }
    if (n_text <= 1) {
        *len = only ? only->text_len : 0;
        return only ? only->text : "";
    }
    scratch->len = 0;
    for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
        if (parts[k].kind != CK_PART_TEXT) continue;
        if (scratch->len) ck__buf_addc(scratch, '\n');
        ck__buf_add(scratch, parts[k].text, parts[k].text_len);
    }
    *len = scratch->failed ? 0 : scratch->len;
    return scratch->failed ? "" : scratch->data;
}

uint64_t ck__fingerprint(const ck_history *h, size_t count) {
    uint64_t fp = 0x6A09E667F3BCC909ull ^ (uint64_t)count;
    for (size_t i = 0; i < count && i < h->n_msgs; i++)
        fp = ck__hash_combine(fp, ck__message_hash(h, i));
    return fp;
}
