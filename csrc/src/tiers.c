/* Limits and cut points (see tiers.h). */
#include <stdlib.h>

#include "./tiers.h"
#include "./tokcache.h"

/* x of the window, in estimated tokens. The comparisons elsewhere are <=, so rounding down
 * keeps every limit on the safe side. */
static uint64_t tiers_of_window(const ck_compactor_options *o, double x, double factor) {
    double t = (double)o->context_window * x / factor;
    return t >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t)t;
}

void ck__limits_init(ck__limits *l, const ck_compactor_options *o, double factor) {
    if (!(factor > 0)) factor = 1.0;
    l->warn = tiers_of_window(o, o->warn, factor);
    l->soft = tiers_of_window(o, o->soft, factor);
    l->full = tiers_of_window(o, o->full, factor);
    l->emergency = tiers_of_window(o, o->emergency, factor);
    l->target = tiers_of_window(o, o->target, factor);
    l->window = tiers_of_window(o, 1.0, factor);
    l->tail_tokens = o->keep_tail_tokens
                         ? (uint64_t)((double)o->keep_tail_tokens / factor)
                         : tiers_of_window(o, 0.25, factor);
}

ck_tier ck__tier_for(const ck__limits *l, uint64_t tokens) {
    if (tokens >= l->emergency) return CK_TIER_EMERGENCY;
    if (tokens >= l->full) return CK_TIER_FULL;
    if (tokens >= l->soft) return CK_TIER_SOFT;
    if (tokens >= l->warn) return CK_TIER_WARN;
    return CK_TIER_NONE;
}

uint64_t ck__scaled(uint64_t tokens, double factor) {
    double t = (double)tokens * factor;
    return t >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)t;
}

double ck__ratio(const ck_compactor_options *o, uint64_t tokens, double factor) {
    return (double)tokens * factor / (double)o->context_window;
}

int ck__layout_cut_ok(const ck__layout *L, size_t k) {
    return k >= L->n || !(L->cls[k] & CK__M_CARRIER);
}

uint64_t ck__layout_after(const ck__layout *L, size_t k, uint64_t cp) {
    uint64_t t = ck__tok_add(L->fixed, cp);
    for (size_t i = 0; i < L->n; i++) {
        if (L->cls[i] & CK__M_SKIP) continue;
        if (i >= k || (L->cls[i] & CK__M_PINNED)) t = ck__tok_add(t, L->tok[i]);
    }
    return t;
}

int ck__layout_has_content(const ck__layout *L, size_t k) {
    for (size_t i = L->base; i < k && i < L->n; i++)
        if (!(L->cls[i] & (CK__M_PINNED | CK__M_SKIP))) return 1;
    return 0;
}

size_t ck__layout_next_cut(const ck__layout *L, size_t k) {
    if (k >= L->n) return L->n;
    k++;
    while (k < L->n && !ck__layout_cut_ok(L, k)) k++;
    return k;
}

/* The start of the turn holding message i: back over result carriers to their call. */
static size_t tiers_turn_start(const ck__layout *L, size_t i) {
    while (i > L->base && !ck__layout_cut_ok(L, i)) i--;
    return i;
}

size_t ck__layout_min_tail(const ck__layout *L) {
    if (L->n <= L->base) return L->n;
    size_t last = L->n - 1;
    for (size_t i = L->n; i-- > L->base;) {
        if (L->cls[i] & CK__M_ASSISTANT) {
            last = i;
            break;
        }
    }
    return tiers_turn_start(L, last);
}

size_t ck__layout_tail(const ck__layout *L, size_t keep, uint64_t keep_tokens, size_t min_tail) {
    size_t t = min_tail;
    uint64_t used = 0;
    for (size_t i = t; i < L->n; i++) used = ck__tok_add(used, L->tok[i]);
    /* Whole turns, newest first, while both budgets hold. */
    while (t > L->base) {
        size_t s = tiers_turn_start(L, t - 1);
        uint64_t add = 0;
        for (size_t i = s; i < t; i++) add = ck__tok_add(add, L->tok[i]);
        if (L->n - s > keep || ck__tok_add(used, add) > keep_tokens) break;
        used = ck__tok_add(used, add);
        t = s;
    }
    return t;
}

size_t ck__layout_first_cut(const ck__layout *L, size_t from, size_t to, uint64_t cp,
                            uint64_t limit) {
    if (from < L->base) from = L->base;
    uint64_t after = ck__layout_after(L, from, cp);
    int content = ck__layout_has_content(L, from);
    for (size_t k = from; k <= to && k <= L->n; k++) {
        if (k > from && !(L->cls[k - 1] & (CK__M_PINNED | CK__M_SKIP))) {
            after = ck__tok_sub(after, L->tok[k - 1]);
            content = 1;
        }
        if (after <= limit && content && ck__layout_cut_ok(L, k)) return k;
    }
    return CK_NONE;
}

static int tiers_shrink_cmp(const void *x, const void *y) {
    const ck__shrink *a = x, *b = y;
    if (a->newest != b->newest) return a->newest - b->newest;
    if (a->kind != b->kind) return a->kind - b->kind;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return a->part < b->part ? -1 : a->part > b->part;
}

void ck__shrink_order(ck__shrink *v, size_t n) {
    if (n > 1) qsort(v, n, sizeof *v, tiers_shrink_cmp);
}
