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

/* What CK_ETOOBIG says for a string over CK_MAX_STRING. */
#define CK__MSG_TOO_BIG "a string is larger than 256 MiB"

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
    /* ck__message_hash() and ck__message_content(), kept up to date by add_message and
     * add_part (the strings a history borrows never change), so that a call over a history
     * that only grew hashes only what is new. */
    uint64_t hash, content;
} ck__msg;

/* A slot of a history's id table: the id's hash, 1 + the first part that has the id (0: an
 * empty slot) and its number. */
typedef struct ck__id_slot {
    uint64_t hash;
    uint32_t part;
    uint32_t num;
} ck__id_slot;

/* A history's parsed JSON, when ck_json_read() made it (see json.c). */
typedef struct ck__json_doc ck__json_doc;

struct ck_history {
    uint32_t flags;
    ck__msg *msgs;
    size_t n_msgs, cap_msgs;
    ck_part *parts;
    size_t n_parts, cap_parts;
    /* Per part, the number of its id among the distinct ids of the history (0: no id), set
     * as the part is added (and by ck__history_rehash()), so that pairing, which matches
     * every id at every call, compares numbers: an id's bytes are hashed and compared once,
     * when its part is read. Numbers run from 1 below `n_ids`, so an array of n_ids entries
     * (ck__id_index()) maps every id; a number given out goes to no other id until the table
     * is rebuilt, which numbers the live ids again (see history.c). */
    uint32_t *id_num;
    size_t cap_id_num;
    ck__id_slot *id_slots; /* the table from an id to its number (history.c) */
    size_t cap_id_slots, n_id_slots;
    uint32_t n_ids;
    struct ck__arena_block *arena;
    ck__json_doc *json;
    /* Filled by ck_history_read(): the host value of each message and of each part, and the
     * dialect (decided: a message only that dialect writes was seen, at decided_at; until
     * then `guess`, what the first message looked like). */
    ck_value *msg_values;
    size_t cap_msg_values;
    ck_value *part_values;
    size_t cap_part_values;
    /* Per message, the object its fields stand in when the dialect wraps them (LangChain's
     * {"type", "data": {...}}); an empty value for a message that is not wrapped. */
    ck_value *inner_values;
    size_t cap_inner_values;
    ck_format dialect, guess;
    int dialect_decided;
    size_t decided_at;
};

/* The parts of message `i` (no bounds check: callers loop below ck_history_count()). */
static inline const ck_part *ck__msg_parts(const ck_history *h, size_t i) {
    /* A history without any part has no part array at all: NULL + 0 is undefined in C. */
    return h->parts ? h->parts + h->msgs[i].first_part : NULL;
}

void ck__json_doc_free(ck__json_doc *doc);

/* The reader of the core's own JSON values (json.c): a ck_value's ptr is a const ck__jval *
 * (NULL: absent). No length callback: strings are borrowed from the document. JSON text made
 * for a value (`json`) is kept in `h`, which may be NULL for a reader that never asks. */
ck_host_reader ck__json_reader(ck_history *h);

/* ---- tool-call pairing (pairs.c) ---- */

/* One change the pairing repair makes: `kind` to part `part` (global index) of message `msg`. */
typedef struct ck__pair_action {
    ck_repair_kind kind;
    size_t msg;
    size_t part;
} ck__pair_action;

/* ck_repair_pairs() with two more things: results that repair drops but `keep_text` (one byte
 * per part of the history, or NULL) marks are kept in the view as text instead; and *actions
 * (when not NULL; caller owns it, release with ck__free) lists every change, in part order.
 * With `out` NULL only the actions are worked out. */
int ck__pairs_repair(const ck_history *history, ck_format format, const unsigned char *keep_text,
                     ck_view **out, ck__pair_action **actions, size_t *n_actions, ck_error *err);

/* ---- message classes and hashes (msgclass.c) ---- */

struct ck__buf;
/* The first text part of message i, or NULL. */
const ck_part *ck__first_text(const ck_history *h, size_t i);
/* True when message i holds a tool result. */
int ck__has_result(const ck_history *h, size_t i);
/* True when message i is authored by the user: role user, some text, no tool results. */
int ck__is_user_text(const ck_history *h, size_t i);
/* True when line p[0..n) (no line break) would be read by ck_anchors_parse() as markup: a
 * section header of any style or a code fence. Text from elsewhere (what a user or a model
 * wrote) is quoted where such a line would be, so that it can never add or hide sections. */
int ck__anchors_line_is_markup(const char *p, size_t n);
/* True when message i holds words of the user: role user and some text, tool results beside
 * it or not (an Anthropic user message carries results and what the user typed together). */
int ck__has_user_words(const ck_history *h, size_t i);
/* True when message i carries tool results, so no cut may fall just before it. */
int ck__is_result_carrier(const ck_history *h, size_t i);
/* The joined text parts of message i (borrowed when there is one, else built in *scratch). */
const char *ck__msg_text(const ck_history *h, size_t i, struct ck__buf *scratch, size_t *len);
/* A content hash of n parts standing `stride` bytes apart (ck_part arrays, or the `part`
 * members of ck_out_part arrays): each part's kind, text, id and name, not the role. Never 0:
 * it keys the token cache. */
uint64_t ck__parts_content(const ck_part *parts, size_t stride, size_t n);
/* ck__parts_content() of message i's parts, kept by the history. */
static inline uint64_t ck__message_content(const ck_history *h, size_t i) {
    return h->msgs[i].content | 1;
}
/* A content hash of message i: its role and parts, not host details (fingerprints are made of
 * it), kept by the history. */
static inline uint64_t ck__message_hash(const ck_history *h, size_t i) { return h->msgs[i].hash; }
/* Computes message i's hashes and id numbers again, after a reader changed one of its parts
 * in place (an id that was empty set, a part removed). Returns CK_OK or CK_ENOMEM. */
int ck__history_rehash(ck_history *h, size_t i);
/* A new array with one entry per id number of `h`, every one SIZE_MAX (none yet), for a pass
 * that keeps something per id; NULL when out of memory. Release it with ck__free(). */
size_t *ck__id_index(const ck_history *h);
/* Adds message i of `src` to `h` as it is, in role and parts (the strings borrowed), with
 * `flags`: its hashes are taken from `src`, not made again from its bytes. Returns CK_OK,
 * CK_ENOMEM or CK_ETOOBIG. */
int ck__history_add_kept(ck_history *h, const ck_history *src, size_t i, uint32_t flags);
/* Gives back the unused capacity of the part arrays when it is more than an eighth (after a
 * history's first read; reading into it again then doubles as before). */
void ck__history_fit_parts(ck_history *h);
/* The content fingerprint of messages [0, count) of h. */
uint64_t ck__fingerprint(const ck_history *h, size_t count);

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
/* For dialects whose turns must alternate (Gemini): joins each pair of neighbouring messages
 * of one side (the assistant's, or everyone else's) that the view put next to each other (one
 * of them new, or their sources not neighbours in `src`) into one EDIT, the parts of the
 * first, then of the second. The EDIT copies the first one's source message (the second's
 * when the first is new). A message with a tool call is never joined to what follows it, nor
 * a message that opens with a tool result to what precedes it: results stay first in the
 * turn after their call. Neighbours that were neighbours in `src` stay as they were. */
int ck__view_join_sides(ck_view *v, const ck_history *src);

/* A new history whose message j is output message j of `v` over `src` (parts borrowed from
 * `src` and `v`; valid while both are). Caller owns *out (ck_history_free). */
int ck__history_from_view(const ck_view *v, const ck_history *src, ck_history **out);

/* Composes views: `outer` is over the history materialized from `inner` (see above), `inner`
 * over `src`; the result says the same as outer, over `src`. Caller owns *out. */
int ck__view_compose(const ck_view *outer, const ck_view *inner, const ck_history *src,
                     ck_view **out);

#endif
