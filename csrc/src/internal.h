/* Private: helpers shared by the core files (errors, UTF-8, the history's innards). */
#ifndef CK_INTERNAL_H_
#define CK_INTERNAL_H_

#include "ctxkeel.h"

#include <stdarg.h>
#include <stdint.h>

/* Fills `err` (when not NULL) and returns `code`, so a failure reads `return ck__fail(...)`.
 * `where` is a printf format for the location, or NULL for none. */
int ck__fail(ck_error *err, int code, const char *msg, size_t index, const char *where, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* Clears `err` to "no error" (code CK_OK, index CK_NONE). NULL is a no-op. */
void ck__error_clear(ck_error *err);

/* Length of the longest valid UTF-8 prefix of `s`; equal to `len` when all of it is valid.
 * Overlong forms, surrogates and code points past U+10FFFF are invalid. */
size_t ck__utf8_valid_prefix(const char *s, size_t len);

/* One message's record inside a history. */
typedef struct ck__msg {
    ck_role role;
    uint32_t flags;
    size_t first_part;
    size_t n_parts;
} ck__msg;

/* A history's parsed JSON, when ck_json_read() made it (see json.c). */
typedef struct ck__json_doc ck__json_doc;

struct ck_history {
    uint32_t flags;
    ck__msg *msgs;
    size_t n_msgs, cap_msgs;
    ck_part *parts;
    size_t n_parts, cap_parts;
    struct ck__arena_block *arena;
    ck__json_doc *json;
};

/* The parts of message `i` (no bounds check: callers loop below ck_history_count()). */
static inline const ck_part *ck__msg_parts(const ck_history *h, size_t i) {
    /* A history without any part has no part array at all: NULL + 0 is undefined in C. */
    return h->parts ? h->parts + h->msgs[i].first_part : NULL;
}

void ck__json_doc_free(ck__json_doc *doc);

/* Tokens of one message made of `n` parts standing `stride` bytes apart (ck_part arrays, or
 * the `part` members of ck_out_part arrays), per-message overhead included. */
uint64_t ck__estimate_parts(const ck_part *parts, size_t stride, size_t n, ck_estimator est);
/* The host counter's tokens for n parts as one message (see ck_counter); UINT64_MAX when it
 * could not answer or memory ran out. */
uint64_t ck__count_parts(const ck_counter *counter, const ck_part *parts, size_t stride,
                         size_t n);

/* A view under construction. Output parts are appended to the current output message. */
ck_view *ck__view_new(void);
int ck__view_keep(ck_view *v, const ck_history *h, size_t src);
int ck__view_begin(ck_view *v, ck_op op, size_t src, ck_role role, uint32_t flags);
int ck__view_add_src_part(ck_view *v, const ck_history *h, size_t msg, size_t part);
int ck__view_add_new_part(ck_view *v, const ck_part *part);
/* Adds source part (msg, part) with its text replaced by `text` (borrowed). */
int ck__view_add_replaced_part(ck_view *v, const ck_history *h, size_t msg, size_t part,
                               const char *text, size_t len);
/* Ends the current message: an EDIT whose parts equal its source's, in order and unreplaced,
 * becomes a KEEP. */
void ck__view_end(ck_view *v, const ck_history *h);
/* A copy of `text` owned by the view (freed with it), or NULL when out of memory. */
const char *ck__view_own(ck_view *v, const char *text, size_t len);
/* Appends a copy of out message `m` (from another view over the same history). */
int ck__view_copy_msg(ck_view *v, const ck_out_msg *m);

/* A new history whose message j is output message j of `v` over `src` (parts borrowed from
 * `src` and `v`; valid while both are). Caller owns *out (ck_history_free). */
int ck__history_from_view(const ck_view *v, const ck_history *src, ck_history **out);

/* Composes views: `outer` is over the history materialized from `inner` (see above), `inner`
 * over `src`; the result says the same as outer, over `src`. Caller owns *out. */
int ck__view_compose(const ck_view *outer, const ck_view *inner, const ck_history *src,
                     ck_view **out);

#endif
