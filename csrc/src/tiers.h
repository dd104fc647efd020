/* Private: every limit of a compaction and every choice of where to cut, computed from numbers
 * alone (token costs and message classes), so the rules of DESIGN section 2 live in one place
 * and can be read without the I/O around them. */
#ifndef CK_TIERS_H_
#define CK_TIERS_H_

#include "ctxkeel.h"

/* The thresholds as estimated tokens: the window's fractions divided by the usage factor,
 * since the limits are the provider's and the estimates are ours. */
typedef struct ck__limits {
    uint64_t warn, soft, full, emergency;
    uint64_t target;      /* where a compaction brings the view */
    uint64_t window;      /* no view is ever larger */
    uint64_t tail_tokens; /* the verbatim tail's budget */
} ck__limits;

void ck__limits_init(ck__limits *l, const ck_compactor_options *o, double factor);

/* The tier of a view of `tokens` estimated tokens (tool schemas included). */
ck_tier ck__tier_for(const ck__limits *l, uint64_t tokens);

/* `tokens` as a fraction of the window, the usage factor applied. */
/* tokens * factor as a whole count, UINT64_MAX when it does not fit. */
uint64_t ck__scaled(uint64_t tokens, double factor);
double ck__ratio(const ck_compactor_options *o, uint64_t tokens, double factor);

/* Message classes for the planner. */
#define CK__M_PINNED 1u    /* system, developer, the task: stays in the view verbatim */
#define CK__M_CARRIER 2u   /* carries tool results, or is joined to the message before it
                              (CK_MSG_JOINED): no cut may fall just before it */
#define CK__M_ASSISTANT 4u /* an assistant message */
#define CK__M_SKIP 8u      /* a checkpoint written back by the host: the new one replaces it */

/* A history as the planner sees it: a cost and a class per message. The view over a cut at k
 * is: the pinned messages before k, the checkpoint, then messages k.. (all of them). */
typedef struct ck__layout {
    size_t n;
    const uint64_t *tok;
    const unsigned char *cls;
    size_t base;    /* the first message not covered by the current checkpoint */
    uint64_t fixed; /* tool schemas and the per-request overhead */
} ck__layout;

/* True when a cut may fall before message k (k == n too). */
int ck__layout_cut_ok(const ck__layout *L, size_t k);

/* Tokens of the view that folds [base, k) into a checkpoint of `cp` tokens. */
uint64_t ck__layout_after(const ck__layout *L, size_t k, uint64_t cp);

/* True when [base, k) holds a message that is not pinned (something to fold). */
int ck__layout_has_content(const ck__layout *L, size_t k);

/* The smallest tail a view keeps: from the turn of the newest assistant message (or the newest
 * turn when there is none) to the end, never before `base`. */
size_t ck__layout_min_tail(const ck__layout *L);

/* The verbatim tail: the newest whole turns within `keep` messages and `keep_tokens` tokens,
 * and never less than the messages from `min_tail` on. Returns its first message. */
size_t ck__layout_tail(const ck__layout *L, size_t keep, uint64_t keep_tokens, size_t min_tail);

/* The smallest cut k in [from, to] (safe, with something to fold) whose view with a checkpoint
 * of `cp` tokens is at most `limit`; CK_NONE when none is. The view shrinks as k grows, so the
 * first such k folds the least. */
size_t ck__layout_first_cut(const ck__layout *L, size_t from, size_t to, uint64_t cp,
                            uint64_t limit);

/* The next safe cut after k (n when none). */
size_t ck__layout_next_cut(const ck__layout *L, size_t k);

/* A part that could be made smaller (an output placeholdered, a text excerpted). */
typedef struct ck__shrink {
    size_t part;   /* global part index */
    size_t msg;
    size_t bytes;  /* its text's size */
    int newest;    /* in the newest turn: shrunk last */
    int kind;      /* 0 an output, 1 a text */
} ck__shrink;

/* Orders candidates: older turns before the newest, then larger first, then by position. */
void ck__shrink_order(ck__shrink *v, size_t n);

#endif
