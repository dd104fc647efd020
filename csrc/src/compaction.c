/* One compaction, from begin to finish: the only file that calls across the compaction layer.
 *
 * begin reads the history (repairing broken tool-call pairs first, with everything a repair
 * drops stored), decides which conversation it is and what the state's checkpoint covers,
 * measures the view, picks the tier and plans the view: offloads, the span to fold, and, when
 * the view would still be too large, placeholders and excerpts in the tail. Everything that
 * leaves the view is written to the evidence store first, and the span to fold is archived.
 * finish turns the summary (or the extractive one) into the checkpoint, builds the view and the
 * audit record, and commits the state. The host's messages are never changed: views are plans
 * over them, composed back onto the host's list when the work was done on a repaired copy. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "./alloc.h"
#include "./compaction.h"
#include "./extract.h"
#include "./fmt.h"
#include "./hash.h"
#include "./offload.h"

/* What compaction_begin() gives back with `quiet` where it would store something (a positive
 * value: no status code). */
#define CK__WOULD_STORE 1

/* The preview of a placeholder made at compaction (DESIGN section 4). */
#define PREVIEW_LINES 10
#define PREVIEW_BYTES 1024
/* Outputs below this are never worth a placeholder, even to fit the view. */
#define FIT_OUTPUT_MIN 1024
/* A message text is shown as head and tail only above this, keeping about this much. */
#define EXCERPT_MIN 4096
#define EXCERPT_KEEP 2048
#define EXCERPT_MINIMAL 256
#define EXCERPT_TINY 64 /* the floor ck__render_excerpt keeps */
#define COST_HORIZON_MAX 1000 /* calls the cost model looks ahead at most */

/* ---- notes ---- */

static void compaction_vpush(ck__strs *l, const char *fmt, va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* A note that cannot be kept for lack of memory is lost; the compaction is not. */
    (void)ck__strs_push(l, msg, strlen(msg));
}

void ck__compaction_note(ck_compaction *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    compaction_vpush(&c->notes, fmt, ap);
    va_end(ap);
}

void ck__compaction_error(ck_compaction *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    compaction_vpush(&c->errors, fmt, ap);
    va_end(ap);
}

/* ---- the public accessors ---- */

ck_tier ck_compaction_tier(const ck_compaction *c) { return c ? c->tier : CK_TIER_NONE; }
int ck_compaction_needs_summary(const ck_compaction *c) { return c && c->summarize; }
const ck_view *ck_compaction_view(const ck_compaction *c) { return c ? c->view : NULL; }
uint64_t ck_compaction_tokens_before(const ck_compaction *c) { return c ? c->tokens_before : 0; }
uint64_t ck_compaction_tokens_after(const ck_compaction *c) { return c ? c->tokens_after : 0; }

void ck_compaction_cache(const ck_compaction *c, uint64_t *prefix_kept, uint64_t *prefix_broken) {
    if (prefix_kept) *prefix_kept = c && c->finished ? c->prefix_kept : 0;
    if (prefix_broken) *prefix_broken = c && c->finished ? c->prefix_broken : 0;
}

double ck_compaction_ratio_before(const ck_compaction *c) {
    return c ? ck__ratio(&c->owner->opt, c->tokens_before, c->factor) : 0;
}

double ck_compaction_ratio_after(const ck_compaction *c) {
    return c ? ck__ratio(&c->owner->opt, c->tokens_after, c->factor) : 0;
}

const char *ck_compaction_record(const ck_compaction *c, size_t *len) {
    if (len) *len = c && c->record ? c->record_len : 0;
    return c ? c->record : NULL;
}

const ck_repair *ck_compaction_repairs(const ck_compaction *c, size_t *n) {
    if (n) *n = c ? c->n_repairs : 0;
    return c && c->n_repairs ? c->repair_view : NULL;
}

void ck_compaction_free(ck_compaction *c) {
    if (!c) return;
    if (c->subst)
        for (size_t i = 0; i < c->h->n_parts; i++) ck__free(c->subst[i]);
    ck_history_free(c->fixed);
    ck_view_free(c->repair);
    ck__free(c->tok);
    ck__free(c->cls);
    ck__free(c->subst);
    ck__free(c->subst_len);
    ck__free(c->subst_kind);
    ck__free(c->subst_keep);
    ck__free(c->failed);
    for (size_t i = 0; i < c->n_new_offloads; i++) ck__offload_dispose(&c->new_offloads[i]);
    ck__free(c->new_offloads);
    for (size_t i = 0; i < c->n_archives; i++) ck__archive_dispose(&c->archives[i]);
    ck__free(c->archives);
    ck__free(c->archive_lines);
    ck__free(c->archive_refs);
    for (size_t i = 0; i < c->n_repairs; i++) ck__free(c->repairs[i].id);
    ck__free(c->repairs);
    ck__free(c->repair_view);
    ck__buf_dispose(&c->prompt);
    ck__free(c->previous);
    ck__free(c->reply);
    ck__free(c->failure);
    ck__free(c->fallback);
    ck__strs_dispose(&c->notes);
    ck__strs_dispose(&c->errors);
    ck__free(c->checkpoint);
    ck_anchors_free(c->anchors);
    if (c->next) ck__state_dispose(c->next);
    ck__free(c->next);
    ck__strs_dispose(&c->touched_constraints);
    ck__strs_dispose(&c->touched_files);
    ck__idents_free(c->span_idents);
    if (c->st == &c->fresh) ck__state_dispose(&c->fresh);
    ck_view_free(c->view);
    ck__free(c->record);
    ck__free(c);
}

/* ---- the summary exchange ---- */

int ck_compaction_request(const ck_compaction *c, ck_summary_request *out) {
    if (!c || !out) return CK_EINVAL;
    if (!c->summarize || c->finished) return CK_ESTATE;
    if (!c->prompt.len) {
        /* Built on first use. The compaction is one caller's object (one thread at a time),
         * so filling its prompt here is safe although the handle is const. */
        int rc = ck__request_build((ck_compaction *)c);
        if (rc) return rc;
    }
    out->system = ck__request_system(&out->system_len);
    out->prompt = c->prompt.data ? c->prompt.data : "";
    out->prompt_len = c->prompt.len;
    out->max_tokens = c->owner->opt.summary_max_tokens;
    out->tier = c->tier;
    /* The host reads the span from its own message list. When the compaction works on a
     * repaired copy, the copy's messages map back to the host's through the repair view. */
    out->span_start = c->base;
    out->span_end = c->cut;
    if (c->repair) {
        size_t lo = CK_NONE, hi = 0;
        for (size_t j = c->base; j < c->cut; j++) {
            ck_out_msg m;
            if (ck_view_get(c->repair, j, &m) || m.src == CK_NONE) continue;
            if (lo == CK_NONE || m.src < lo) lo = m.src;
            if (m.src + 1 > hi) hi = m.src + 1;
        }
        out->span_start = lo == CK_NONE ? 0 : lo;
        out->span_end = lo == CK_NONE ? 0 : hi;
    }
    out->previous = c->previous;
    out->previous_len = c->previous_len;
    return CK_OK;
}

static int compaction_set_text(char **dst, size_t *dst_len, const char *text, size_t len) {
    char *copy = ck__strndup(text ? text : "", text ? len : 0);
    if (!copy) return CK_ENOMEM;
    ck__free(*dst);
    *dst = copy;
    if (dst_len) *dst_len = text ? len : 0;
    return CK_OK;
}

int ck_compaction_set_summary(ck_compaction *c, const char *text, size_t len) {
    if (!c || (!text && len)) return CK_EINVAL;
    int rc = compaction_set_text(&c->reply, &c->reply_len, text, len);
    if (!rc) c->have_reply = 1;
    return rc;
}

int ck_compaction_use_extractive(ck_compaction *c) {
    if (!c) return CK_EINVAL;
    if (c->finished) return CK_ESTATE;
    c->summarize = 0;
    c->have_reply = 0;
    return CK_OK;
}

int ck_compaction_set_failure(ck_compaction *c, const char *reason, size_t len) {
    if (!c || (!reason && len)) return CK_EINVAL;
    c->have_reply = 0;
    return compaction_set_text(&c->failure, NULL, reason ? reason : "summarizer failed",
                               reason ? len : strlen("summarizer failed"));
}

/* ---- costs ---- */

/* Tokens of message i with this compaction's substitutions applied. */
static uint64_t compaction_msg_tokens(ck_compaction *c, size_t i) {
    const ck_history *h = c->h;
    const ck_part *parts = ck__msg_parts(h, i);
    size_t first = h->msgs[i].first_part, n = h->msgs[i].n_parts;
    int any = 0;
    for (size_t k = 0; k < n && !any; k++) any = c->subst[first + k] != NULL;
    ck__tokcache *tc = &c->owner->tokcache;
    ck_part *with = any ? ck__malloc(n * sizeof *with) : NULL;
    /* Out of memory here measures the message without its substitutions: an overestimate,
     * which only makes the compactor do more. */
    if (!with) return ck__tokcache_parts_keyed(tc, parts, sizeof(ck_part), n,
                                               ck__message_content(h, i));
    for (size_t k = 0; k < n; k++) {
        with[k] = parts[k];
        if (c->subst[first + k]) {
            with[k].text = c->subst[first + k];
            with[k].text_len = c->subst_len[first + k];
        }
    }
    uint64_t t = ck__tokcache_parts(tc, with, sizeof *with, n);
    ck__free(with);
    return t;
}

static uint64_t compaction_text_cost(ck_compaction *c, const char *text, size_t len) {
    return ck__tokcache_message_text(&c->owner->tokcache, text, len);
}

static uint64_t compaction_request_overhead(const ck_compaction *c) {
    return c->owner->opt.estimator != CK_EST_CHARS4 && c->h->n_msgs ? CK_REQUEST_OVERHEAD : 0;
}

static void compaction_layout(const ck_compaction *c, ck__layout *L) {
    L->n = c->h->n_msgs;
    L->tok = c->tok;
    L->cls = c->cls;
    L->base = c->base;
    L->fixed = ck__tok_add(c->tool_tokens, compaction_request_overhead(c));
}

/* The cost of the state's checkpoint as the view shows it (0 when there is none or the host
 * wrote it back, and so it is counted as one of its messages). */
static uint64_t compaction_state_cp_tokens(ck_compaction *c) {
    if (!c->st->active || c->marker != CK_NONE) return 0;
    return compaction_text_cost(c, c->st->checkpoint, c->st->checkpoint_len);
}

/* The view of the history as it stands, before this compaction folds anything. */
static uint64_t compaction_base_tokens(ck_compaction *c) {
    ck__layout L;
    compaction_layout(c, &L);
    if (c->marker != CK_NONE || !c->st->active) {
        uint64_t t = L.fixed;
        for (size_t i = 0; i < L.n; i++) t = ck__tok_add(t, c->tok[i]);
        return t;
    }
    return ck__layout_after(&L, c->base, compaction_state_cp_tokens(c));
}

/* ---- substitutions: placeholders and excerpts ---- */

/* Sets the text that replaces part g in the view, and the message's new cost. */
static int compaction_subst(ck_compaction *c, size_t i, size_t g, ck__buf *b, int kind) {
    size_t len = 0;
    char *text = ck__buf_take(b, &len);
    if (!text) return CK_ENOMEM;
    ck__free(c->subst[g]);
    c->subst[g] = text;
    c->subst_len[g] = len;
    c->subst_kind[g] = (unsigned char)kind;
    c->subst_keep[g] = 0;
    c->tok[i] = compaction_msg_tokens(c, i);
    return CK_OK;
}

/* Renders the placeholder of output g (message i) from its offload record. */
static int compaction_placeholder(ck_compaction *c, size_t i, size_t g, const ck__offload *o,
                                  int kind, int minimal) {
    const ck_compactor *self = c->owner;
    const ck_part *p = &c->h->parts[g];
    const ck_retention *policy = ck__retention_for(self->retention, self->n_retention, o->tool);
    int failed = policy ? 0 : ck__part_failed(c->h, g, c->failed);
    ck__buf b;
    ck__buf_init(&b);
    int rc = ck__render_placeholder(&b, p, o, policy, failed, PREVIEW_LINES, PREVIEW_BYTES,
                                    minimal);
    if (rc) {
        ck__buf_dispose(&b);
        return rc;
    }
    rc = compaction_subst(c, i, g, &b, kind);
    if (!rc && minimal) c->subst_keep[g] = 1;
    return rc;
}

/* The offload record of this text under `id`, known to the state or made by this compaction:
 * same id and same text. */
static const ck__offload *compaction_known(const ck_compaction *c, const char *id, size_t id_len,
                                           uint64_t hash) {
    const ck__state *st = c->st;
    const ck__offload *o = NULL;
    if (ck__ref_is_id(id, id_len)) o = ck__state_offload(st, id, id_len);
    else {
        char *ref = ck__evidence_ref(c->owner->store, id, id_len, 0, hash);
        o = ref ? ck__state_offload(st, ref, strlen(ref)) : NULL;
        ck__free(ref);
    }
    if (o && o->hash == hash) return o;
    char *alt = ck__evidence_ref(c->owner->store, id, id_len, 1, hash);
    o = alt ? ck__state_offload(st, alt, strlen(alt)) : NULL;
    ck__free(alt);
    if (o) return o;
    for (size_t j = 0; j < c->n_new_offloads; j++) {
        const ck__offload *n = &c->new_offloads[j];
        if (n->hash == hash && n->id_len == id_len && memcmp(n->id, id, id_len) == 0) return n;
    }
    return NULL;
}

static int compaction_keep_offload(ck_compaction *c, ck__offload *o, const ck__offload **out) {
    if (ck__grow((void **)&c->new_offloads, &c->cap_new_offloads, c->n_new_offloads + 1,
                 sizeof *o)) {
        ck__offload_dispose(o);
        return CK_ENOMEM;
    }
    c->new_offloads[c->n_new_offloads++] = *o;
    *out = &c->new_offloads[c->n_new_offloads - 1];
    return CK_OK;
}

/* Offloads output g of message i: stores it (when new) and substitutes its placeholder, if
 * that is smaller. Returns CK_OK (with *done telling whether it was substituted), CK_ENOMEM;
 * a store that fails leaves the output in the view, with an error for the record. */
static int compaction_offload_part(ck_compaction *c, size_t i, size_t g, int kind, int *done) {
    const ck_compactor *self = c->owner;
    const ck_part *p = &c->h->parts[g];
    *done = 0;
    uint64_t hash = ck__hash_text(p->text, p->text_len);
    const ck__offload *rec = compaction_known(c, p->id, p->id_len, hash);
    int created = 0;
    if (!rec) {
        size_t tool_len;
        const char *tool = ck__tool_name_of(c->h, p, i, &tool_len);
        if (ck__never_offloaded(self->retention, self->n_retention, tool, tool_len))
            return CK_OK;
        ck__offload o;
        ck_error err;
        int rc = ck__offload_store(self->store, p, tool, tool_len, hash, &o, &err);
        if (rc == CK_ENOMEM) return rc;
        if (rc) {
            c->failed_stores++;
            ck__buf id;
            ck__buf_init(&id);
            ck__buf_add_inline(&id, p->id, p->id_len, 80);
            ck__compaction_error(c, "offload of %s failed: %s (%s); the output stays in the view",
                                 id.data ? id.data : "", err.msg ? err.msg : ck_strerror(rc),
                                 err.where);
            ck__buf_dispose(&id);
            return CK_OK;
        }
        if ((rc = compaction_keep_offload(c, &o, &rec))) return rc;
        created = 1;
    }
    uint64_t before = c->tok[i];
    char *old = c->subst[g];
    size_t old_len = c->subst_len[g];
    unsigned char old_kind = c->subst_kind[g];
    c->subst[g] = NULL;
    int rc = compaction_placeholder(c, i, g, rec, kind, 0);
    if (rc) {
        c->subst[g] = old;
        return rc;
    }
    if (c->tok[i] >= before) {
        /* Some long outputs are cheap (a run of blanks): a placeholder would cost more than it
         * saves, so the output stays and is not listed as offloaded. */
        ck__free(c->subst[g]);
        c->subst[g] = old;
        c->subst_len[g] = old_len;
        c->subst_kind[g] = old_kind;
        c->tok[i] = before;
        if (created) ck__offload_dispose(&c->new_offloads[--c->n_new_offloads]);
        return CK_OK;
    }
    ck__free(old);
    *done = 1;
    return CK_OK;
}

/* Excerpts text part g of message i (head and tail, the full text stored first). */
static int compaction_excerpt_part(ck_compaction *c, size_t i, size_t g, size_t keep, int kind,
                                   int *done) {
    ck_compactor *self = c->owner;
    const ck_part *p = &c->h->parts[g];
    *done = 0;
    uint64_t hash = ck__hash_text(p->text, p->text_len);
    char id[40];
    snprintf(id, sizeof id, "message:%016llx", (unsigned long long)hash);
    const ck__offload *rec = compaction_known(c, id, strlen(id), hash);
    if (!rec) {
        ck_part as_output = *p;
        as_output.id = id;
        as_output.id_len = strlen(id);
        ck__offload o;
        ck_error err;
        int rc = ck__offload_store(self->store, &as_output, CK__EXCERPT_TOOL,
                                   strlen(CK__EXCERPT_TOOL), hash, &o, &err);
        if (rc == CK_ENOMEM) return rc;
        if (rc) {
            c->failed_stores++;
            ck__compaction_error(c, "message %zu could not be stored (%s); it stays whole", i,
                                 err.where);
            return CK_OK;
        }
        if ((rc = compaction_keep_offload(c, &o, &rec))) return rc;
    }
    ck__buf b;
    ck__buf_init(&b);
    int rc = ck__render_excerpt(&b, p->text, p->text_len, keep,
                                c->h->msgs[i].role == CK_ROLE_USER, rec->ref);
    if (rc) {
        ck__buf_dispose(&b);
        return rc;
    }
    uint64_t before = c->tok[i];
    rc = compaction_subst(c, i, g, &b, kind);
    if (!rc && keep < EXCERPT_KEEP) c->subst_keep[g] = (uint32_t)keep;
    if (!rc) *done = c->tok[i] < before;
    return rc;
}

/* Gives the outputs of [from, to) that were offloaded before their placeholders back (in the
 * tail too: a view that showed a placeholder must not grow back to the raw output), and the
 * message texts that were excerpted their excerpts. Nothing is written. */
static int compaction_known_substs(ck_compaction *c, size_t from, size_t to) {
    const ck_history *h = c->h;
    const ck__state *st = c->st;
    if (!st->n_offloads) return CK_OK;
    for (size_t i = from; i < to; i++) {
        const ck_part *parts = ck__msg_parts(h, i);
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            const ck_part *p = &parts[k];
            size_t g = h->msgs[i].first_part + k;
            if (p->kind == CK_PART_TOOL_RESULT) {
                if (!p->id_len || ck__is_placeholder(p->text, p->text_len)) continue;
                /* Only outputs that could be offloaded are hashed: the id is looked up first. */
                if (p->text_len < FIT_OUTPUT_MIN ||
                    (ck__ref_is_id(p->id, p->id_len) &&
                     !ck__state_offload(st, p->id, p->id_len) &&
                     p->text_len <= c->owner->opt.offload_threshold))
                    continue;
                uint64_t hash = ck__hash_text(p->text, p->text_len);
                const ck__offload *rec = compaction_known(c, p->id, p->id_len, hash);
                if (!rec) continue;
                int rc = compaction_placeholder(c, i, g, rec, CK__SUB_KNOWN, rec->keep != 0);
                if (rc) return rc;
            } else if (p->kind == CK_PART_TEXT && st->has_excerpts && p->text_len > EXCERPT_MIN) {
                uint64_t hash = ck__hash_text(p->text, p->text_len);
                char id[40];
                snprintf(id, sizeof id, "message:%016llx", (unsigned long long)hash);
                const ck__offload *rec = ck__state_offload(st, id, strlen(id));
                if (!rec) continue;
                ck__buf b;
                ck__buf_init(&b);
                size_t keep = rec->keep ? rec->keep : EXCERPT_KEEP;
                int rc = ck__render_excerpt(&b, p->text, p->text_len, keep,
                                            h->msgs[i].role == CK_ROLE_USER, rec->ref);
                if (!rc) rc = compaction_subst(c, i, g, &b, CK__SUB_KNOWN);
                else ck__buf_dispose(&b);
                if (!rc && rec->keep) c->subst_keep[g] = rec->keep;
                if (rc) return rc;
            }
        }
    }
    return CK_OK;
}

/* True for part g (of message i) when it is an output above the offload gate that is still
 * in the view whole. */
static int compaction_offloadable(const ck_compaction *c, size_t g) {
    const ck_part *p = &c->h->parts[g];
    return p->kind == CK_PART_TOOL_RESULT && p->id_len && !c->subst[g] &&
           p->text_len > c->owner->opt.offload_threshold &&
           !ck__is_placeholder(p->text, p->text_len);
}

/* Offloads the outputs of [from, to) above the compaction gate (warn and above). */
static int compaction_offload_range(ck_compaction *c, size_t from, size_t to) {
    const ck_history *h = c->h;
    for (size_t i = from; i < to; i++) {
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            size_t g = h->msgs[i].first_part + k;
            if (!compaction_offloadable(c, g)) continue;
            int done, rc = compaction_offload_part(c, i, g, CK__SUB_WARN, &done);
            if (rc) return rc;
        }
    }
    return CK_OK;
}

/* About what offloading the outputs of [from, to) would free, without doing it: a quarter of
 * their bytes, less a placeholder's cost each. */
#define WARN_PLACEHOLDER_TOKENS 80
static uint64_t compaction_offload_gain(const ck_compaction *c, size_t from, size_t to) {
    const ck_history *h = c->h;
    uint64_t gain = 0;
    for (size_t i = from; i < to; i++) {
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            size_t g = h->msgs[i].first_part + k;
            if (!compaction_offloadable(c, g)) continue;
            gain = ck__tok_add(gain, ck__tok_sub(h->parts[g].text_len / 4,
                                                 WARN_PLACEHOLDER_TOKENS));
        }
    }
    return gain;
}

/* ---- the prompt-cache cost model ---- */

/* The tokens of the view as it stands that come before message j of the history (tool
 * schemas first, as providers order their cache): what a change at j leaves of the cached
 * prefix. With `at_checkpoint`, before the checkpoint instead: the pinned head a fold keeps. */
static uint64_t compaction_prefix_before(ck_compaction *c, size_t j, int at_checkpoint) {
    ck__layout L;
    compaction_layout(c, &L);
    uint64_t t = L.fixed;
    size_t from = c->marker != CK_NONE || !c->st->active ? 0 : c->base;
    for (size_t i = 0; i < from; i++)
        if ((c->cls[i] & CK__M_PINNED) && !(c->cls[i] & CK__M_SKIP)) t = ck__tok_add(t, c->tok[i]);
    for (size_t i = from; i < j && i < L.n; i++) {
        if (c->cls[i] & CK__M_SKIP) continue;
        if (at_checkpoint && !(c->cls[i] & CK__M_PINNED)) break;
        t = ck__tok_add(t, c->tok[i]);
    }
    if (!at_checkpoint && from) t = ck__tok_add(t, compaction_state_cp_tokens(c));
    return t;
}

/* The first message of [from, to) with an output the warn tier would offload, or `to`. */
static size_t compaction_first_offloadable(const ck_compaction *c, size_t from, size_t to) {
    for (size_t i = from; i < to; i++)
        for (size_t k = 0; k < c->h->msgs[i].n_parts; k++)
            if (compaction_offloadable(c, c->h->msgs[i].first_part + k)) return i;
    return to;
}

/* Whether the compactor weighs changes against prompt_cache prices. */
static int compaction_priced(const ck_compaction *c) {
    return c->owner->opt.cache_read != 0 && c->owner->opt.cache_write != 0;
}

/* Whether changing the view now, from `now` tokens to `after` with its first `kept` unchanged,
 * pays under the prompt_cache prices (r for a cached read, w for a write, per token of
 * uncached input). Left unchanged, the view is read from the cache on each of the next H calls,
 * H the calls until its growth takes it to the full limit (where a compaction happens anyway);
 * changed, the `now - after` tokens it drops are not read on any of them, and the `after - kept`
 * that follow the change are written to the cache once instead of read:
 *     saves = H * r * (now - after),  invalidates = (w - r) * (after - kept).
 * It pays when saves > invalidates. Asked only under prices (compaction_priced); the estimate
 * is kept for the record. */
static int compaction_pays(ck_compaction *c, uint64_t now, uint64_t after, uint64_t kept) {
    const ck_compactor_options *o = &c->owner->opt;
    if (after > now) after = now;
    if (kept > after) kept = after;
    uint64_t h = 1;
    if (c->growth && now < c->lim.full) h = (c->lim.full - now) / c->growth;
    h = h < 1 ? 1 : (h > COST_HORIZON_MAX ? COST_HORIZON_MAX : h);
    double saves = (double)h * o->cache_read * (double)(now - after);
    double invalidates = (o->cache_write - o->cache_read) * (double)(after - kept);
    c->has_estimate = 1;
    c->horizon = h;
    c->saves = (uint64_t)(saves + 0.5);
    c->invalidates = (uint64_t)(invalidates + 0.5);
    return saves > invalidates;
}

/* The parts of [from, n) that could still be made smaller, in the order they give way:
 * outputs (kind 0) above FIT_OUTPUT_MIN bytes, or texts (kind 1) of user and assistant
 * messages above EXCERPT_MIN bytes; the newest turn's last. Caller frees *out. */
static int compaction_candidates(const ck_compaction *c, size_t from, int kind, ck__shrink **out,
                                 size_t *n) {
    const ck_history *h = c->h;
    ck__shrink *v = NULL;
    size_t cap = 0, count = 0;
    for (size_t i = from; i < h->n_msgs; i++) {
        if (c->cls[i] & (CK__M_PINNED | CK__M_SKIP)) continue;
        ck_role role = h->msgs[i].role;
        const ck_part *parts = ck__msg_parts(h, i);
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            const ck_part *p = &parts[k];
            size_t g = h->msgs[i].first_part + k;
            int ok = kind == 0 ? p->kind == CK_PART_TOOL_RESULT && p->id_len &&
                                     p->text_len > FIT_OUTPUT_MIN && !c->subst[g] &&
                                     !ck__is_placeholder(p->text, p->text_len)
                               : p->kind == CK_PART_TEXT && p->text_len > EXCERPT_MIN &&
                                     !c->subst[g] &&
                                     (role == CK_ROLE_USER || role == CK_ROLE_ASSISTANT);
            if (!ok) continue;
            if (ck__grow((void **)&v, &cap, count + 1, sizeof *v)) {
                ck__free(v);
                return CK_ENOMEM;
            }
            ck__shrink s = {g, i, p->text_len, i >= c->min_tail, kind};
            v[count++] = s;
        }
    }
    ck__shrink_order(v, count);
    *out = v;
    *n = count;
    return CK_OK;
}

/* Shrinks parts of [from, n) of `kind`, in candidate order, while the tokens of `range` (the
 * tail from `from`: range_only; else the view at cut `cut`) exceed `limit`. */
static int compaction_shrink(ck_compaction *c, size_t from, int kind, int sub, size_t cut,
                             uint64_t cp, uint64_t limit, int range_only) {
    ck__layout L;
    compaction_layout(c, &L);
    ck__shrink *v = NULL;
    size_t n = 0;
    int rc = compaction_candidates(c, from, kind, &v, &n);
    for (size_t j = 0; j < n && !rc; j++) {
        uint64_t now;
        if (range_only) {
            now = 0;
            for (size_t i = from; i < L.n; i++) now = ck__tok_add(now, c->tok[i]);
        } else {
            now = ck__layout_after(&L, cut, cp);
        }
        if (now <= limit) break;
        int done;
        rc = kind == 0 ? compaction_offload_part(c, v[j].msg, v[j].part, sub, &done)
                       : compaction_excerpt_part(c, v[j].msg, v[j].part, EXCERPT_KEEP, sub, &done);
    }
    ck__free(v);
    return rc;
}

/* The last resort of a view that must fit the window: every placeholder of the kept region
 * without its preview, every excerpt down to `keep` bytes. */
static int compaction_minimize(ck_compaction *c, size_t from, size_t keep) {
    const ck_history *h = c->h;
    for (size_t i = from; i < h->n_msgs; i++) {
        const ck_part *parts = ck__msg_parts(h, i);
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            size_t g = h->msgs[i].first_part + k;
            const ck_part *p = &parts[k];
            if (!c->subst[g]) continue;
            int rc = CK_OK;
            uint64_t hash = ck__hash_text(p->text, p->text_len);
            if (p->kind == CK_PART_TOOL_RESULT) {
                const ck__offload *rec = compaction_known(c, p->id, p->id_len, hash);
                if (rec) rc = compaction_placeholder(c, i, g, rec, CK__SUB_FIT, 1);
            } else if (p->kind == CK_PART_TEXT) {
                int done;
                rc = compaction_excerpt_part(c, i, g, keep, CK__SUB_FIT, &done);
            }
            if (rc) return rc;
        }
    }
    return CK_OK;
}

/* ---- planning ---- */

/* Notes what a plan gives up in the newest turn (its outputs offloaded, its texts
 * excerpted, by this compaction). */
static void compaction_note_newest(ck_compaction *c) {
    const ck_history *h = c->h;
    size_t outputs = 0, texts = 0;
    for (size_t i = c->min_tail; i < h->n_msgs; i++) {
        const ck_part *parts = ck__msg_parts(h, i);
        for (size_t j = 0; j < h->msgs[i].n_parts; j++) {
            size_t g = h->msgs[i].first_part + j;
            if (!c->subst[g] || c->subst_kind[g] == CK__SUB_KNOWN) continue;
            if (parts[j].kind == CK_PART_TOOL_RESULT) outputs++;
            else texts++;
        }
    }
    if (outputs || texts)
        ck__compaction_note(c, "the newest turn does not fit as it is: %zu of its outputs were "
                               "offloaded and %zu of its texts excerpted (read_evidence reads "
                               "them whole)",
                            outputs, texts);
}

/* An upper bound of the checkpoint a fold of [base, to) makes: the anchors and summary within
 * summary_max_tokens, the header, and what the lists can hold (user messages and their rules
 * within their shares, or what the user wrote when that is less). */
static uint64_t compaction_cp_bound(ck_compaction *c, size_t to) {
    uint64_t body = c->owner->opt.summary_max_tokens;
    uint64_t users = 0;
    const ck__state *st = c->st;
    for (size_t i = 0; i < st->n_users; i++) users = ck__tok_add(users, st->users[i].len / 3 + 8);
    for (size_t i = c->base; i < to && i < c->h->n_msgs; i++)
        if (!(c->cls[i] & (CK__M_PINNED | CK__M_SKIP)) && ck__has_user_words(c->h, i))
            users = ck__tok_add(users, c->tok[i] + 8);
    uint64_t half = body / 2;
    uint64_t t = 160; /* the header */
    t = ck__tok_add(t, body);
    t = ck__tok_add(t, users < half ? users : half); /* user messages */
    t = ck__tok_add(t, users < half ? users : half); /* their rules */
    t = ck__tok_add(t, body / 8 + body / 16 + body / 8 + body / 16 + body / 32 + 32 + 64);
    return t;
}

/* The cost of the smallest checkpoint (its header; with `bare`, the marker and one line), with
 * room for the archive it will name. */
static int compaction_cp_small(ck_compaction *c, int bare, uint64_t *out) {
    ck__cp_input in;
    memset(&in, 0, sizeof in);
    ck__archive one = {"history:0000000-0000000", "", 0, 0, 0, 0};
    ck__state lists;
    memset(&lists, 0, sizeof lists);
    lists.archives = &one;
    lists.n_archives = 1;
    in.lists = &lists;
    in.messages = c->st->compacted + c->h->n_msgs;
    in.compactions = c->st->compactions + 1;
    in.tokens = &c->owner->tokcache;
    char *text;
    size_t len;
    int rc = bare ? ck__checkpoint_bare(&in, &text, &len)
                  : ck__checkpoint_minimal(&in, &text, &len);
    if (rc) return rc;
    *out = compaction_text_cost(c, text, len) + (bare ? 0 : 64);
    ck__free(text);
    return CK_OK;
}

static int compaction_cp_minimal(ck_compaction *c, uint64_t *out) {
    return compaction_cp_small(c, 0, out);
}

static int compaction_cp_bare(ck_compaction *c, uint64_t *out) {
    return compaction_cp_small(c, 1, out);
}

/* What the checkpoint of a fold of [base, k) costs, from what it will really hold: the span's
 * user messages, rules, files and identifiers folded into a scratch copy of the lists, and
 * rendered with the extractive anchors (emergency) or with room for a reply of
 * summary_max_tokens (soft, full: the model writes the anchors). With `must`, only what it
 * keeps before the summary gets room (ck__checkpoint_must). */
static int compaction_cp_measure(ck_compaction *c, size_t k, int must, uint64_t *out) {
    ck_compactor *self = c->owner;
    ck__state lists;
    memset(&lists, 0, sizeof lists);
    ck__idents *idents = ck__idents_new();
    ck__strs tc = {0}, tf = {0};
    ck_anchors *anchors = NULL;
    char *text = NULL;
    size_t len = 0, folded = 0;
    int rc = idents ? ck__state_copy_lists(&lists, c->st) : CK_ENOMEM;
    char ref[64];
    snprintf(ref, sizeof ref, "history:%zu-%zu", c->base, k);
    ck__archive arch = {ref, ref, c->base, k, 0, 0};
    if (!rc)
        rc = ck__checkpoint_fold(c->h, c->base, k, c->cls, ref, NULL, NULL, &lists, idents, &tc,
                                 &tf, &folded);
    if (!rc) rc = ck__idents_merge(lists.idents, idents);
    if (!rc) rc = ck__state_add_archive(&lists, &arch);
    int extractive = c->tier == CK_TIER_EMERGENCY;
    if (!rc && !must) {
        anchors = extractive ? ck__extractive(c->h, c->base, k, self->opt.summary_max_tokens,
                                              c->failed)
                             : ck_anchors_new();
        ck_anchors *merged = anchors ? ck_anchors_merge(c->st->anchors, anchors) : NULL;
        ck_anchors_free(anchors);
        anchors = merged;
        if (!anchors) rc = CK_ENOMEM;
    }
    if (!rc) {
        ck__cp_input in;
        memset(&in, 0, sizeof in);
        in.anchors = anchors;
        in.lists = &lists;
        in.offloads = c->st->offloads;
        in.n_offloads = c->st->n_offloads;
        in.more_offloads = c->new_offloads;
        in.n_more_offloads = c->n_new_offloads;
        in.messages = c->st->compacted + folded;
        in.compactions = c->st->compactions + 1;
        in.body_tokens = self->opt.summary_max_tokens;
        in.cap_tokens = UINT64_MAX;
        in.tokens = &self->tokcache;
        rc = must ? ck__checkpoint_must(&in, &text, &len) : ck__checkpoint_render(&in, &text, &len);
    }
    if (!rc) {
        /* The rendering measured, plus the reply's room when a model writes the anchors, plus
         * a margin for what the real archive and offsets spell differently. */
        uint64_t t = compaction_text_cost(c, text, len);
        if (!extractive && !must) t = ck__tok_add(t, self->opt.summary_max_tokens);
        *out = ck__tok_add(t, t / 20 + 16);
    }
    ck__free(text);
    ck_anchors_free(anchors);
    ck__strs_dispose(&tc);
    ck__strs_dispose(&tf);
    ck__idents_free(idents);
    ck__state_dispose(&lists);
    return rc;
}

static int compaction_cp_cost(ck_compaction *c, size_t k, uint64_t *out) {
    return compaction_cp_measure(c, k, 0, out);
}

static const char *compaction_tier_word(ck_tier t) { return ck_tier_name(t); }

/* Plans the view of a compaction at soft or above: the span to fold and the shrinking that
 * brings the view to the target (when the content allows) and under the bounds (always, but
 * for a store that fails). */
static int compaction_plan(ck_compaction *c) {
    const ck__limits *lim = &c->lim;
    ck__layout L;
    compaction_layout(c, &L);
    size_t n = L.n;
    int rc = CK_OK;
    /* The tail keeps within its budget: when its newest turn alone is larger, its largest
     * outputs become placeholders (the newest turn's last). */
    uint64_t tail_tok = 0;
    for (size_t i = c->tail; i < n; i++) tail_tok = ck__tok_add(tail_tok, c->tok[i]);
    if (tail_tok > lim->tail_tokens) {
        rc = compaction_shrink(c, c->tail, 0, CK__SUB_TAIL, 0, 0, lim->tail_tokens, 1);
        if (rc) return rc;
    }
    /* The checkpoint gets what it can hold, but never more than half the room the newest turn
     * leaves under the target, and never less than its bare header. */
    uint64_t bound = compaction_cp_bound(c, c->min_tail);
    uint64_t tail_view = ck__layout_after(&L, c->min_tail, 0);
    uint64_t room = lim->target > tail_view ? (lim->target - tail_view) / 2 : 0;
    uint64_t minimal = 0;
    if ((rc = compaction_cp_minimal(c, &minimal))) return rc;
    c->cp_plan = bound < room ? bound : room;
    if (c->cp_plan < minimal) c->cp_plan = minimal;
    /* What must survive (the rules, the modified files) gets its room before the summary: the
     * plan is never smaller, unless the bounds below take it back. Measured over the longest
     * fold this call can make, so any shorter one needs no more. */
    uint64_t must = 0;
    if ((rc = compaction_cp_measure(c, c->min_tail, 1, &must))) return rc;
    if (c->cp_plan < must) c->cp_plan = must;
    /* When the offloads alone bring the view to the target, nothing is folded. */
    if (ck__layout_after(&L, c->base, compaction_state_cp_tokens(c)) <= lim->target) {
        c->cut = c->base;
        compaction_note_newest(c);
        return CK_OK;
    }
    size_t k = CK_NONE;
    if (c->tier == CK_TIER_SOFT) {
        k = ck__layout_first_cut(&L, c->base, c->tail, c->cp_plan, lim->target);
        if (k == CK_NONE) {
            c->tier = CK_TIER_FULL;
            ck__compaction_note(c, "soft step would not reach the target; escalated to full");
        }
    }
    if (c->tier == CK_TIER_FULL) k = ck__layout_has_content(&L, c->tail) ? c->tail : c->base;
    if (c->tier == CK_TIER_EMERGENCY) {
        k = ck__layout_first_cut(&L, c->base, c->min_tail, c->cp_plan, lim->target);
        if (k == CK_NONE) k = ck__layout_has_content(&L, c->min_tail) ? c->min_tail : c->base;
    }
    /* The cut was chosen with the checkpoint's bound; sized from what it really holds, the
     * checkpoint is usually smaller, so the cut is chosen again with that (twice at most: each
     * round can only keep more). */
    for (int round = 0; round < 2 && k != CK_NONE && k > c->base; round++) {
        uint64_t real = 0;
        if ((rc = compaction_cp_cost(c, k, &real))) return rc;
        if (real < minimal) real = minimal;
        if (real >= c->cp_plan && round) break;
        c->cp_plan = real;
        size_t again = k;
        if (c->tier == CK_TIER_SOFT)
            again = ck__layout_first_cut(&L, c->base, c->tail, c->cp_plan, lim->target);
        else if (c->tier == CK_TIER_EMERGENCY)
            again = ck__layout_first_cut(&L, c->base, c->min_tail, c->cp_plan, lim->target);
        if (again == CK_NONE || again >= k) break;
        k = again;
    }
    uint64_t cp = k > c->base ? c->cp_plan : compaction_state_cp_tokens(c);
    /* Over the target still: the kept outputs give way first (recoverable), then older turns
     * of the tail are folded, then over-long messages are excerpted to meet the bound. */
    if (ck__layout_after(&L, k, cp) > lim->target) {
        size_t from = k > c->base ? k : c->base;
        if ((rc = compaction_shrink(c, from, 0, CK__SUB_FIT, k, cp, lim->target, 0))) return rc;
    }
    size_t folded_tail = 0;
    for (;;) {
        uint64_t cpk = k > c->base && ck__layout_has_content(&L, k) ? c->cp_plan : cp;
        if (ck__layout_after(&L, k, cpk) <= lim->target || k >= c->min_tail) break;
        size_t next = ck__layout_next_cut(&L, k);
        if (next > c->min_tail) break;
        size_t from_tail = k > c->tail ? k : c->tail;
        if (next > from_tail) folded_tail += next - from_tail;
        k = next;
    }
    /* A cut with nothing but pinned messages before it folds nothing. */
    if (k > c->base && !ck__layout_has_content(&L, k)) k = c->base;
    cp = k > c->base ? c->cp_plan : compaction_state_cp_tokens(c);
    if (folded_tail && k > c->base)
        ck__compaction_note(c, "%s step would not reach the target; %zu tail messages were "
                               "folded too",
                            compaction_tier_word(c->tier), folded_tail);
    if (ck__layout_after(&L, k, cp) > lim->soft) {
        rc = compaction_shrink(c, k, 1, CK__SUB_FIT, k, cp, lim->soft, 0);
        if (rc) return rc;
    }
    if (ck__layout_after(&L, k, cp) > lim->soft) {
        /* Over the bound still: the previews and the excerpts give way, then the checkpoint
         * shrinks to what fits (its sections are cut in their order, down to the bare header);
         * the pinned messages cannot. */
        if ((rc = compaction_minimize(c, k, EXCERPT_MINIMAL))) return rc;
        if (k > c->base) {
            uint64_t rest = ck__layout_after(&L, k, 0);
            uint64_t fit = lim->soft > rest ? lim->soft - rest : 0;
            /* The rules and the modified files stay while the view stays under full: without
             * them the view would be over soft still, by less than they cost. */
            uint64_t floor = ck__tok_add(rest, must) <= lim->full ? must : minimal;
            if (fit < c->cp_plan) c->cp_plan = fit > floor ? fit : floor;
            cp = c->cp_plan;
        }
    }
    uint64_t after = ck__layout_after(&L, k, cp);
    if (after > lim->window) {
        /* The kept turns' texts at their smallest excerpts, before any of them is folded. */
        if ((rc = compaction_minimize(c, k, EXCERPT_TINY))) return rc;
        after = ck__layout_after(&L, k, cp);
    }
    /* The bare checkpoint (its marker and the archive's pointer), what every way out below
     * starts from. */
    uint64_t bare = 0;
    if (after > lim->window && (rc = compaction_cp_bare(c, &bare))) return rc;
    if (after > lim->window && k > c->base) {
        uint64_t whole = ck__layout_after(&L, c->base, compaction_state_cp_tokens(c));
        if (bare < cp && ck__layout_after(&L, k, bare) <= lim->window) {
            /* It may still leave room for the kept turns: folding them too would lose more
             * than the window asks. */
            c->cp_plan = cp = bare;
            after = ck__layout_after(&L, k, cp);
            ck__compaction_note(c, "the checkpoint was cut to its bare header to keep the "
                                   "newest turn in the window");
        } else if (whole <= lim->window) {
            /* No fold keeps the newest turn within the window, but the history as it stands
             * (its outputs offloaded) fits: it is sent unfolded rather than losing the newest
             * turn. */
            k = c->base;
            cp = compaction_state_cp_tokens(c);
            after = whole;
            ck__compaction_note(c, "no fold keeps the newest turn within the window; nothing "
                                   "was folded");
        }
    }
    if (after > lim->window && ck__layout_has_content(&L, n)) {
        /* Not even the newest turn, placeholdered, fits: every turn is folded, and the view
         * is the pinned messages and the checkpoint, as small as it can be. */
        k = n;
        c->cp_plan = ck__layout_after(&L, n, minimal) <= lim->window ? minimal : bare;
        cp = c->cp_plan;
        after = ck__layout_after(&L, k, cp);
        ck__compaction_note(c, "not even the newest turn fits the window: every turn was "
                               "folded");
    }
    if (after > lim->window && c->failed_stores == 0) {
        c->overflow_need = after;
        return CK_EOVERFLOW;
    }
    if (k < n) compaction_note_newest(c);
    c->cut = k;
    return CK_OK;
}

/* ---- the archive ---- */

/* Archive objects are cut at message boundaries past this size, so archiving a span of any
 * length holds only one chunk in memory. */
#define ARCHIVE_CHUNK ((size_t)1 << 20)

/* Stores one chunk of the archive, messages [first, end). */
static int compaction_archive_chunk(ck_compaction *c, ck__buf *b, size_t first, size_t end,
                                    uint64_t *line) {
    ck_compactor *self = c->owner;
    ck__archive_footer(b, first, end, line);
    if (b->failed) return CK_ENOMEM;
    if (ck__grow((void **)&c->archives, &c->cap_archives, c->n_archives + 1,
                 sizeof *c->archives))
        return CK_ENOMEM;
    ck__archive *a = &c->archives[c->n_archives];
    memset(a, 0, sizeof *a);
    char id[64];
    snprintf(id, sizeof id, "history:%zu-%zu", first, end);
    ck_error err;
    int rc = ck__evidence_put(self->store, id, strlen(id), b->data, b->len,
                              ck__hash_text(b->data, b->len), &a->ref, &a->path, &err);
    if (rc == CK_ENOMEM) return rc;
    if (rc) {
        ck__compaction_error(c, "the folded messages could not be archived (%s: %s); nothing "
                                "was folded",
                             err.msg ? err.msg : ck_strerror(rc), err.where);
        return CK_EIO;
    }
    a->first = first;
    a->end = end;
    a->bytes = b->len;
    a->lines = *line;
    c->n_archives++;
    for (size_t i = first; i < end; i++) c->archive_refs[i - c->base] = a->ref;
    return CK_OK;
}

/* Writes the span [base, cut) to the store, in chunks, before it leaves the view. A store
 * that fails leaves the span unfolded (what was stored stays, harmless). */
static int compaction_archive(ck_compaction *c) {
    ck_compactor *self = c->owner;
    size_t span = c->cut - c->base;
    c->archive_lines = ck__calloc(span ? span : 1, sizeof *c->archive_lines);
    c->archive_refs = ck__calloc(span ? span : 1, sizeof *c->archive_refs);
    if (!c->archive_lines || !c->archive_refs) return CK_ENOMEM;
    ck__buf b;
    ck__buf_init(&b);
    int rc = CK_OK;
    size_t first = c->base;
    uint64_t line = 0;
    ck__archive_header(&b, self->session_id, first, &line);
    for (size_t i = c->base; i < c->cut && !rc; i++) {
        if (b.len >= ARCHIVE_CHUNK) {
            rc = compaction_archive_chunk(c, &b, first, i, &line);
            b.len = 0;
            line = 0;
            first = i;
            ck__archive_header(&b, self->session_id, first, &line);
        }
        c->archive_lines[i - c->base] = line;
        if (!(c->cls[i] & (CK__M_PINNED | CK__M_SKIP)))
            ck__archive_message(&b, c->h, i, (const char *const *)c->subst, c->subst_len, &line);
        if (b.failed) rc = CK_ENOMEM;
    }
    if (!rc) rc = compaction_archive_chunk(c, &b, first, c->cut, &line);
    ck__buf_dispose(&b);
    if (rc == CK_EIO) {
        c->failed_stores++;
        c->cut = c->base;
        c->summarize = 0;
        return CK_OK;
    }
    return rc;
}

/* ---- the conversation ---- */

/* Which conversation the history is, and where the state's checkpoint coverage ends. Only the
 * compactor's own checkpoint is honoured: the covered prefix unchanged, or the exact text of
 * its checkpoint written back by the host; a message that merely starts with the marker is
 * ordinary content. A history of another conversation starts from clean state. */
static int compaction_resolve(ck_compaction *c) {
    ck__state *st = &c->owner->st;
    const ck_history *h = c->h;
    size_t n = h->n_msgs;
    c->base = 0;
    c->marker = CK_NONE;
    int other = st->origin_n && (n < st->origin_n ||
                                 ck__fingerprint(h, st->origin_n) != st->origin_fp);
    if (!other && st->active) {
        if (st->covered <= n && ck__fingerprint(h, st->covered) == st->fingerprint) {
            c->base = st->covered;
        } else {
            for (size_t i = n; i-- > 0;) {
                const ck_part *t = ck__first_text(h, i);
                if (t && h->msgs[i].n_parts == 1 && t->text_len == st->checkpoint_len &&
                    memcmp(t->text, st->checkpoint, t->text_len) == 0) {
                    c->marker = i;
                    c->base = i + 1;
                    break;
                }
            }
            if (c->marker == CK_NONE) {
                other = 1;
                ck__compaction_note(c, "the history no longer starts with the %zu messages the "
                                       "checkpoint covers, and does not hold it: the state was "
                                       "started afresh",
                                    st->covered);
            }
        }
    } else if (other) {
        ck__compaction_note(c, "the history does not continue this session's conversation (its "
                               "first %zu messages differ): the state was started afresh",
                            st->origin_n);
    }
    if (other) {
        if (ck__state_init(&c->fresh)) return CK_ENOMEM;
        c->fresh.records = st->records;
        memcpy(c->fresh.usage, st->usage, sizeof st->usage);
        c->fresh.n_usage = st->n_usage;
        c->fresh.factor = st->factor;
        c->st = &c->fresh;
        c->reset = 1;
    }
    return CK_OK;
}

/* ---- repairs ---- */

/* True when the dialect's pairing rules include `rule` (CK__PAIR_*). */
static int compaction_rule(const ck_compaction *c, unsigned rule) {
    const ck__fmt *f = ck__fmt_of(c->format);
    return f && (f->pairing & rule);
}

/* Repairs broken pairs: what a repair drops is stored first (a result that cannot be stored is
 * kept as text instead), and every change is listed for the result and the record. */
static int compaction_repair(ck_compaction *c, ck_error *err) {
    const ck_history *h = c->src;
    ck__pair_action *acts = NULL;
    size_t n = 0;
    int rc = ck__pairs_repair(h, c->format, NULL, NULL, &acts, &n, err);
    if (rc || !n) {
        ck__free(acts);
        return rc;
    }
    unsigned char *keep = ck__calloc(h->n_parts ? h->n_parts : 1, 1);
    if (!keep) rc = CK_ENOMEM;
    for (size_t j = 0; j < n && !rc; j++) {
        ck_repair_kind k = acts[j].kind;
        if (k != CK_REPAIR_ORPHAN_DROPPED && k != CK_REPAIR_DUPLICATE_DROPPED &&
            k != CK_REPAIR_MISPLACED_DROPPED)
            continue;
        if (c->quiet) {
            rc = CK__WOULD_STORE; /* every step below is skipped, and begin gives up */
            break;
        }
        const ck_part *p = &h->parts[acts[j].part];
        char *ref = NULL, *path = NULL;
        ck_error werr;
        const char *id = p->id_len ? p->id : "result";
        size_t id_len = p->id_len ? p->id_len : 6;
        int put = ck__evidence_put(c->owner->store, id, id_len, p->text, p->text_len,
                                   ck__hash_text(p->text, p->text_len), &ref, &path, &werr);
        ck__free(ref);
        ck__free(path);
        if (put == CK_ENOMEM) rc = put;
        else if (put) {
            keep[acts[j].part] = 1;
            c->failed_stores++;
            ck__compaction_error(c, "a dropped tool result (message %zu) could not be stored "
                                    "(%s); it is kept as text",
                                 acts[j].msg, werr.where);
        }
    }
    ck__free(acts);
    acts = NULL;
    n = 0;
    if (!rc) rc = ck__pairs_repair(h, c->format, keep, &c->repair, &acts, &n, err);
    ck__free(keep);
    if (!rc) rc = ck__history_from_view(c->repair, h, &c->fixed);
    if (!rc && n) {
        c->repairs = ck__calloc(n, sizeof *c->repairs);
        c->repair_view = ck__calloc(n, sizeof *c->repair_view);
        if (!c->repairs || !c->repair_view) rc = CK_ENOMEM;
    }
    uint64_t fp = 0x52455041ull;
    for (size_t j = 0; j < n && !rc; j++) {
        const ck_part *p = &h->parts[acts[j].part];
        ck__repair_rec *r = &c->repairs[j];
        r->kind = acts[j].kind;
        r->index = acts[j].msg;
        r->id = ck__strndup(p->id, p->id_len);
        r->id_len = p->id_len;
        if (!r->id) rc = CK_ENOMEM;
        c->n_repairs = j + 1;
        ck_repair pub = {r->kind, r->index, r->id, r->id_len};
        c->repair_view[j] = pub;
        fp = ck__hash_combine(fp, ck__hash_fast(p->id, p->id_len,
                                                (uint64_t)r->kind << 48 ^ (uint64_t)r->index));
    }
    c->repairs_fp = fp;
    ck__free(acts);
    if (!rc) c->h = c->fixed;
    return rc;
}

/* ---- begin ---- */

/* Where results may stand anywhere after their call (Responses items: an assistant message
 * can come between a function_call and its output), no cut may fall between a call and its
 * result: every message after a call up to its result is a carrier. A result answers the
 * newest call with its id before it, as the pairing does. Linear in the parts. */
static int compaction_mark_open_calls(ck_compaction *c) {
    const ck_history *h = c->h;
    size_t n = h->n_msgs, n_calls = 0;
    for (size_t g = 0; g < h->n_parts; g++) n_calls += h->parts[g].kind == CK_PART_TOOL_CALL;
    if (!n_calls) return CK_OK;
    /* Per id number (see ck_history), the message of the newest call with that id. */
    size_t *calls = ck__id_index(h);
    int64_t *open = ck__calloc(n + 1, sizeof *open); /* +1 after a call, -1 past its result */
    if (!open || !calls) {
        ck__free(open);
        ck__free(calls);
        return CK_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const ck_part *parts = ck__msg_parts(h, i);
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            const ck_part *p = &parts[k];
            uint32_t id = h->id_num[h->msgs[i].first_part + k];
            if (!id) continue;
            if (p->kind == CK_PART_TOOL_CALL) {
                calls[id] = i;
            } else if (p->kind == CK_PART_TOOL_RESULT) {
                size_t at = calls[id];
                if (at == SIZE_MAX || at >= i) continue;
                open[at + 1]++;
                open[i + 1]--;
            }
        }
    }
    int64_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        depth += open[i];
        if (depth) c->cls[i] |= CK__M_CARRIER;
    }
    ck__free(calls);
    ck__free(open);
    return CK_OK;
}

/* Classes and costs of every message. */
static int compaction_measure(ck_compaction *c) {
    ck_compactor *self = c->owner;
    const ck_history *h = c->h;
    size_t n = h->n_msgs, n_parts = h->n_parts ? h->n_parts : 1;
    if (!(c->tok = ck__malloc((n ? n : 1) * sizeof *c->tok)) ||
        !(c->cls = ck__calloc(n ? n : 1, 1)) ||
        !(c->subst = ck__calloc(n_parts, sizeof *c->subst)) ||
        !(c->subst_len = ck__calloc(n_parts, sizeof *c->subst_len)) ||
        !(c->subst_kind = ck__calloc(n_parts, 1)) ||
        !(c->subst_keep = ck__calloc(n_parts, sizeof *c->subst_keep)) ||
        !(c->failed = ck__calloc(n_parts, 1)))
        return CK_ENOMEM;
    c->task = CK_NONE;
    for (size_t i = 0; i < n && c->task == CK_NONE; i++)
        if (ck__is_user_text(h, i)) c->task = i;
    int pin_task = !(self->opt.flags & CK_OPT_NO_PIN_FIRST_USER);
    /* Entries for messages long gone are dropped now and then, so the cache stays within a
     * small multiple of the history. */
    if (self->tokcache.count > 2 * n + 4096) ck__tokcache_clear(&self->tokcache);
    for (size_t i = 0; i < n; i++) {
        ck_role r = h->msgs[i].role;
        unsigned char k = 0;
        if (r == CK_ROLE_SYSTEM || r == CK_ROLE_DEVELOPER || (i == c->task && pin_task))
            k |= CK__M_PINNED;
        if (ck__is_result_carrier(h, i) || (h->msgs[i].flags & CK_MSG_JOINED)) k |= CK__M_CARRIER;
        if (r == CK_ROLE_ASSISTANT) k |= CK__M_ASSISTANT;
        c->cls[i] = k;
        c->tok[i] = ck__tokcache_parts_keyed(&self->tokcache, ck__msg_parts(h, i),
                                             sizeof(ck_part), h->msgs[i].n_parts,
                                             ck__message_content(h, i));
    }
    return compaction_rule(c, CK__PAIR_ANY_LATER) ? compaction_mark_open_calls(c) : CK_OK;
}

/* The growth of the history, in view tokens, that makes another fold worth its summary
 * after one that ended above the target: (soft - target) / 2 of the window (DESIGN section
 * 2, "no thrash"). */
static uint64_t compaction_rest_gap(const ck_compaction *c) {
    return c->lim.soft > c->lim.target ? (c->lim.soft - c->lim.target) / 2 : 0;
}

/* True when a fold due at soft or full should wait: the last fold could not bring the view to
 * the target (the pinned messages, the checkpoint and the newest turn need more), and what the
 * history gained since is less than the gap, with no new message alone that large. Folding
 * again would fold a message or two for a summary call and leave the view where it was; the
 * view stays under the window meanwhile (emergency never waits). */
static int compaction_rests(const ck_compaction *c) {
    size_t from = c->st->rest_n;
    if (!from || from > c->h->n_msgs || from <= c->base) return 0;
    uint64_t gap = compaction_rest_gap(c), grown = 0;
    for (size_t i = from; i < c->h->n_msgs; i++) {
        if (c->tok[i] >= gap) return 0;
        grown = ck__tok_add(grown, c->tok[i]);
    }
    return grown < gap;
}

/* With `quiet`, a compaction that would store anything (a dropped result, an offload, an
 * archive: anything above tier none) is given up before it does, with CK__WOULD_STORE. Begin
 * changes nothing of the compactor's but its token cache either way. */
static int compaction_begin(ck_compactor *self, const ck_history *history, uint64_t tool_tokens,
                            int quiet, ck_compaction **out, ck_error *err) {
    ck__error_clear(err);
    if (!self || !history || !out) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    *out = NULL;
    ck_compaction *c = ck__calloc(1, sizeof *c);
    if (!c) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    clock_gettime(CLOCK_MONOTONIC, &c->started);
    c->owner = self;
    c->st = &self->st;
    c->factor = self->st.factor;
    c->src = c->h = history;
    c->quiet = quiet;
    c->tool_tokens = tool_tokens;
    c->marker = CK_NONE;
    ck__buf_init(&c->prompt);
    ck__limits_init(&c->lim, &self->opt, c->factor);
    int rc = ck_history_format(history, self->opt.format, &c->format, err);
    if (!rc) rc = compaction_repair(c, err);
    if (rc) {
        ck_compaction_free(c);
        return rc;
    }
    rc = compaction_measure(c);
    if (!rc) rc = compaction_resolve(c);
    if (!rc) {
        if (c->marker != CK_NONE) c->cls[c->marker] |= CK__M_SKIP;
        if (c->st->active &&
            !(c->previous = ck__strndup(c->st->checkpoint, c->st->checkpoint_len)))
            rc = CK_ENOMEM;
        c->previous_len = c->st->active ? c->st->checkpoint_len : 0;
    }
    if (!rc) rc = compaction_known_substs(c, c->base, c->h->n_msgs);
    if (rc) {
        ck_compaction_free(c);
        return ck__fail(err, rc, NULL, CK_NONE, NULL);
    }
    ck__layout L;
    compaction_layout(c, &L);
    c->min_tail = ck__layout_min_tail(&L);
    c->tail = ck__layout_tail(&L, self->opt.keep_tail, c->lim.tail_tokens, c->min_tail);
    c->tokens_before = compaction_base_tokens(c);
    c->view_before = c->tokens_before;
    c->tier = ck__tier_for(&c->lim, c->tokens_before);
    if (quiet && c->tier != CK_TIER_NONE) {
        ck_compaction_free(c);
        return CK__WOULD_STORE;
    }
    c->cut = c->base;
    {
        uint64_t g = c->st->last_view && c->view_before > c->st->last_view
                         ? c->view_before - c->st->last_view
                         : 0;
        c->growth = c->st->growth ? (c->st->growth + g) / 2 : g;
    }
    /* Under prompt_cache prices a soft fold waits while the reads it would save before the
     * view reaches full cost less than the cache it would invalidate (the fold brings the view
     * to the target and keeps the pinned head); full and emergency never wait. */
    int deferred = c->tier == CK_TIER_SOFT && compaction_priced(c) &&
                   !compaction_pays(c, c->tokens_before,
                                    c->lim.target < c->tokens_before ? c->lim.target
                                                                     : c->tokens_before,
                                    compaction_prefix_before(c, c->h->n_msgs, 1));
    if (deferred)
        ck__compaction_note(c, "the fold at soft waits: over %llu calls it would save %llu "
                               "billed tokens and re-bill %llu of cache",
                            (unsigned long long)c->horizon, (unsigned long long)c->saves,
                            (unsigned long long)c->invalidates);
    /* Every change to what was sent re-bills the provider's cached prefix after it, so the
     * warn tier's offloads wait until together they free min_gain tokens, and under
     * prompt_cache prices until that pays (a compaction at soft or above takes them at once). */
    if (c->tier > CK_TIER_WARN && !deferred) {
        rc = compaction_offload_range(c, c->base, c->tail);
    } else if (c->tier >= CK_TIER_WARN) {
        uint64_t gain = compaction_offload_gain(c, c->base, c->tail);
        if (gain >= self->opt.min_gain &&
            (!compaction_priced(c) ||
             compaction_pays(c, c->tokens_before, ck__tok_sub(c->tokens_before, gain),
                             compaction_prefix_before(
                                 c, compaction_first_offloadable(c, c->base, c->tail), 0))))
            rc = compaction_offload_range(c, c->base, c->tail);
    }
    if (!rc && deferred) {
        /* Nothing is folded: the view keeps what was sent. */
    } else if (!rc && c->tier >= CK_TIER_SOFT && c->tier < CK_TIER_EMERGENCY &&
        compaction_rests(c)) {
        c->resting = 1;
        ck__compaction_note(c, "the last fold could not reach the target; the next waits until "
                               "the history grows by %llu tokens",
                            (unsigned long long)ck__scaled(compaction_rest_gap(c), c->factor));
    } else if (!rc && c->tier >= CK_TIER_SOFT) {
        rc = compaction_plan(c);
        /* The very same fold was tried on this history and did not shrink the view: asking the
         * model again would cost a call for nothing. */
        if (!rc && c->cut > c->base && c->cut == c->st->futile_cut &&
            ck__fingerprint(c->h, c->cut) == c->st->futile_fp) {
            ck__compaction_note(c, "this fold was tried before and did not shrink the view");
            c->cut = c->base;
        }
        if (!rc && c->cut > c->base) {
            /* What leaves with the span that is large goes to the store first, like every
             * output that leaves the view; then the span itself is archived. */
            rc = compaction_offload_range(c, c->tail < c->cut ? c->tail : c->cut, c->cut);
            if (!rc) rc = compaction_archive(c);
        }
        c->summarize = !rc && c->tier < CK_TIER_EMERGENCY && c->cut > c->base;
    }
    if (rc == CK_EOVERFLOW) {
        uint64_t pinned = L.fixed;
        for (size_t i = 0; i < c->h->n_msgs; i++)
            if (c->cls[i] & CK__M_PINNED) pinned = ck__tok_add(pinned, c->tok[i]);
        uint64_t need = ck__scaled(pinned, c->factor);
        uint64_t view = ck__scaled(c->overflow_need, c->factor);
        if (view > need && need <= self->opt.context_window)
            /* They fit, but not with the smallest checkpoint beside them. */
            ck__fail(err, CK_EOVERFLOW, "the pinned messages do not fit the context window",
                     CK_NONE, "the pinned messages and tool schemas need %llu tokens; the "
                              "window is %llu; with a checkpoint: %llu",
                     (unsigned long long)need, (unsigned long long)self->opt.context_window,
                     (unsigned long long)view);
        else
            ck__fail(err, CK_EOVERFLOW, "the pinned messages do not fit the context window",
                     CK_NONE, "the pinned messages and tool schemas need %llu tokens; the "
                              "window is %llu",
                     (unsigned long long)need, (unsigned long long)self->opt.context_window);
        ck_compaction_free(c);
        return CK_EOVERFLOW;
    }
    if (rc) {
        ck_compaction_free(c);
        return ck__fail(err, rc, NULL, CK_NONE, NULL);
    }
    *out = c;
    return CK_OK;
}

/* ---- finish ---- */

/* Adds message i of h to the view being built, with this compaction's substitutions; with
 * `mark`, as an edit that carries a cache breakpoint. */
static int compaction_add_message(ck_compaction *c, ck_view *v, size_t i, int mark) {
    const ck_history *h = c->h;
    size_t first = h->msgs[i].first_part, n = h->msgs[i].n_parts;
    int any = mark;
    for (size_t k = 0; k < n && !any; k++) any = c->subst[first + k] != NULL;
    if (!any) return ck__view_keep(v, h, i);
    int rc = ck__view_begin(v, CK_OP_EDIT, i, h->msgs[i].role,
                            h->msgs[i].flags | (mark ? CK_MSG_CACHE_BREAKPOINT : 0));
    for (size_t k = 0; k < n && !rc; k++)
        rc = c->subst[first + k]
                 ? ck__view_add_replaced_part(v, h, i, k, c->subst[first + k],
                                              c->subst_len[first + k])
                 : ck__view_add_src_part(v, h, i, k);
    ck__view_end(v, h);
    return rc;
}

static int compaction_add_checkpoint(ck_view *v, const char *text, size_t len, int mark) {
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TEXT;
    p.text = text;
    p.text_len = len;
    p.id = p.name = "";
    int rc = ck__view_begin(v, CK_OP_NEW, CK_NONE, CK_ROLE_USER,
                            mark ? CK_MSG_CACHE_BREAKPOINT : 0);
    if (!rc) rc = ck__view_add_new_part(v, &p);
    return rc;
}

/* The cache breakpoints the view may place (CK_OPT_CACHE_BREAKPOINTS, Anthropic): the
 * provider takes four, and the caller's own markers in the messages that stay count. */
#define CACHE_BREAKPOINTS_MAX 4
static size_t compaction_breakpoints_free(const ck_compaction *c, size_t k, int checkpoint) {
    if (!(c->owner->opt.flags & CK_OPT_CACHE_BREAKPOINTS) || c->format != CK_FORMAT_ANTHROPIC)
        return 0;
    const ck_history *h = c->h;
    size_t used = 0;
    for (size_t i = 0; i < h->n_msgs; i++) {
        if ((c->cls[i] & CK__M_SKIP) || (checkpoint && i < k && !(c->cls[i] & CK__M_PINNED)))
            continue;
        const ck_part *parts = ck__msg_parts(h, i);
        for (size_t j = 0; j < h->msgs[i].n_parts; j++)
            used += (parts[j].flags & CK_PART_CACHE_MARK) != 0;
    }
    return used < CACHE_BREAKPOINTS_MAX ? CACHE_BREAKPOINTS_MAX - used : 0;
}

/* The view: the pinned messages before `k` (a written-back checkpoint excluded), the
 * checkpoint when there is one, then messages k..n. Without a checkpoint, every message.
 * Where turns must alternate, what this puts together is joined (ck__view_join_sides).
 * With cache breakpoints, the checkpoint and the last pinned message before it (without a
 * checkpoint, the last of the pinned messages the view opens with) carry one each, the
 * checkpoint first when only one is free: what stays the same from call to call is then
 * cached explicitly. */
static int compaction_build_view(ck_compaction *c, size_t k, const char *checkpoint,
                                 size_t checkpoint_len, ck_view **out) {
    ck_view *v = ck__view_new();
    if (!v) return CK_ENOMEM;
    const ck_history *h = c->h;
    int rc = CK_OK;
    size_t marks = compaction_breakpoints_free(c, k, checkpoint != NULL);
    size_t last_pinned = CK_NONE;
    if (!checkpoint) k = 0;
    for (size_t i = 0; i < (checkpoint ? k : h->n_msgs); i++) {
        if (c->cls[i] & CK__M_SKIP) continue;
        if (!(c->cls[i] & CK__M_PINNED)) {
            if (checkpoint) continue;
            break;
        }
        last_pinned = i;
    }
    int mark_cp = checkpoint && marks > 0;
    int mark_pinned = last_pinned != CK_NONE && marks > (size_t)mark_cp;
    if (checkpoint) {
        for (size_t i = 0; i < k && !rc; i++)
            if ((c->cls[i] & CK__M_PINNED) && !(c->cls[i] & CK__M_SKIP))
                rc = compaction_add_message(c, v, i, mark_pinned && i == last_pinned);
        if (!rc) rc = compaction_add_checkpoint(v, checkpoint, checkpoint_len, mark_cp);
    }
    for (size_t i = k; i < h->n_msgs && !rc; i++)
        rc = compaction_add_message(c, v, i, mark_pinned && !checkpoint && i == last_pinned);
    /* Joined before it is counted: the tokens and cache keys are those of what is sent. */
    if (!rc && compaction_rule(c, CK__PAIR_SIDES_ALTERNATE)) rc = ck__view_join_sides(v, h);
    if (rc) {
        ck_view_free(v);
        return rc;
    }
    *out = v;
    return CK_OK;
}

/* Tokens of view v (the tool schemas and the request's overhead included); with `keys` and
 * `toks`, per message a hash of its role and content and its cost too. */
static uint64_t compaction_view_cost(ck_compaction *c, const ck_view *v, uint64_t *keys,
                                     uint64_t *toks) {
    uint64_t t = ck__tok_add(c->tool_tokens, compaction_request_overhead(c));
    for (size_t i = 0; i < ck_view_count(v); i++) {
        ck_out_msg m;
        ck_view_get(v, i, &m);
        uint64_t key, cost;
        if (m.op == CK_OP_KEEP) {
            key = ck__message_content(c->h, m.src);
            cost = c->tok[m.src];
        } else {
            key = ck__parts_content(&m.parts[0].part, sizeof m.parts[0], m.n_parts);
            cost = ck__tokcache_parts_keyed(&c->owner->tokcache, &m.parts[0].part,
                                            sizeof m.parts[0], m.n_parts, key);
        }
        if (keys) {
            keys[i] = ck__hash_combine(key, (uint64_t)m.role + 1);
            toks[i] = cost;
        }
        t = ck__tok_add(t, cost);
    }
    return t;
}

static uint64_t compaction_view_tokens(ck_compaction *c, const ck_view *v) {
    return compaction_view_cost(c, v, NULL, NULL);
}

/* The tokens of view v, and per message a hash of its role and content and its cost, into
 * new arrays (for compaction_compare_sent). */
static int compaction_sent(ck_compaction *c, const ck_view *v, uint64_t **keys, uint64_t **toks,
                           uint64_t *tokens) {
    size_t n = ck_view_count(v);
    *keys = ck__malloc((n ? n : 1) * sizeof **keys);
    *toks = ck__malloc((n ? n : 1) * sizeof **toks);
    if (!*keys || !*toks) {
        ck__free(*keys);
        ck__free(*toks);
        *keys = *toks = NULL;
        return CK_ENOMEM;
    }
    *tokens = compaction_view_cost(c, v, *keys, *toks);
    return CK_OK;
}

/* How much of the view sent last time the new one keeps as its prefix (the tokens of the
 * longest run of equal leading messages), and how much of it is sent again (the rest of the
 * last view); the new view then becomes the last one. */
static void compaction_compare_sent(ck_compaction *c, uint64_t *keys, uint64_t *toks, size_t n) {
    ck_compactor *self = c->owner;
    size_t k = 0;
    uint64_t kept = 0, broken = 0;
    for (; k < n && k < self->n_sent && keys[k] == self->sent_key[k]; k++)
        kept = ck__tok_add(kept, toks[k]);
    for (size_t i = k; i < self->n_sent; i++) broken = ck__tok_add(broken, self->sent_tok[i]);
    c->prefix_kept = kept;
    c->prefix_broken = broken;
    ck__free(self->sent_key);
    ck__free(self->sent_tok);
    self->sent_key = keys;
    self->sent_tok = toks;
    self->n_sent = n;
}

static int compaction_anchors_usable(const ck_anchors *a) {
    size_t len = 0;
    for (int k = 0; k < CK_ANCHOR_COUNT; k++)
        if (ck_anchors_get(a, (ck_anchor)k, NULL)) return 1;
    ck_anchors_summary(a, &len);
    return len > 0;
}

/* The anchors of the new checkpoint: the reply's if usable, else extractive ones, merged over
 * the previous checkpoint's. */
static int compaction_new_anchors(ck_compaction *c, ck_anchors **out) {
    ck_compactor *self = c->owner;
    ck_anchors *fresh = NULL;
    if (c->summarize && c->have_reply) {
        fresh = ck_anchors_parse(c->reply, c->reply_len);
        if (!fresh) return CK_ENOMEM;
        if (!compaction_anchors_usable(fresh)) {
            ck_anchors_free(fresh);
            fresh = NULL;
            c->fallback = ck__strndup("summarizer reply had no usable anchors", 38);
            if (!c->fallback) return CK_ENOMEM;
        }
    } else if (c->summarize) {
        const char *why = c->failure ? c->failure : "summarizer gave no reply";
        c->fallback = ck__strndup(why, strlen(why));
        if (!c->fallback) return CK_ENOMEM;
    }
    if (!fresh) {
        fresh = ck__extractive(c->h, c->base, c->cut, self->opt.summary_max_tokens, c->failed);
        if (!fresh) return CK_ENOMEM;
    }
    *out = ck_anchors_merge(c->st->anchors, fresh);
    ck_anchors_free(fresh);
    return *out ? CK_OK : CK_ENOMEM;
}

/* Folds the span into a copy of the state's lists and renders the checkpoint from them. */
static int compaction_checkpoint(ck_compaction *c, const ck_anchors *anchors) {
    ck_compactor *self = c->owner;
    const ck__state *st = c->st;
    c->next = ck__calloc(1, sizeof *c->next);
    c->span_idents = ck__idents_new();
    if (!c->next || !c->span_idents) return CK_ENOMEM;
    int rc = ck__state_copy_lists(c->next, st);
    if (!rc)
        rc = ck__checkpoint_fold(c->h, c->base, c->cut, c->cls, NULL,
                                 (const char *const *)c->archive_refs, c->archive_lines, c->next,
                                 c->span_idents, &c->touched_constraints, &c->touched_files,
                                 &c->summarized);
    if (!rc) rc = ck__idents_merge(c->next->idents, c->span_idents);
    if (!rc) rc = ck__idents_prune_to(c->next->idents, CK__STATE_IDENTS);
    for (size_t i = 0; !rc && i < c->n_archives; i++)
        rc = ck__state_add_archive(c->next, &c->archives[i]);
    if (rc) return rc;
    ck__cp_input in;
    memset(&in, 0, sizeof in);
    in.anchors = anchors;
    in.lists = c->next;
    in.offloads = st->offloads;
    in.n_offloads = st->n_offloads;
    in.more_offloads = c->new_offloads;
    in.n_more_offloads = c->n_new_offloads;
    in.messages = st->compacted + c->summarized;
    in.compactions = st->compactions + 1;
    in.body_tokens = self->opt.summary_max_tokens;
    in.cap_tokens = c->cp_plan;
    in.tokens = &self->tokcache;
    return ck__checkpoint_render(&in, &c->checkpoint, &c->checkpoint_len);
}

/* Commits this compaction's offloads to the owner's state. */
static int compaction_commit_offloads(ck_compaction *c) {
    ck__state *st = &c->owner->st;
    for (size_t i = 0; i < c->n_new_offloads; i++)
        if (ck__state_add_offload(st, &c->new_offloads[i])) return CK_ENOMEM;
    /* What the view showed smaller than usual stays that small (ck__offload.keep). A known
     * substitution was rendered from its record's own form: nothing to note, nor to hash. */
    const ck_history *h = c->h;
    for (size_t i = 0; i < h->n_msgs; i++)
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            size_t g = h->msgs[i].first_part + k;
            if (!c->subst[g] || !c->subst_keep[g] || c->subst_kind[g] == CK__SUB_KNOWN) continue;
            const ck_part *p = &h->parts[g];
            uint64_t hash = ck__hash_text(p->text, p->text_len);
            const ck__offload *rec = NULL;
            if (p->kind == CK_PART_TOOL_RESULT) {
                rec = compaction_known(c, p->id, p->id_len, hash);
            } else {
                char id[40];
                snprintf(id, sizeof id, "message:%016llx", (unsigned long long)hash);
                rec = ck__state_offload(st, id, strlen(id));
            }
            if (rec) ck__state_offload_shown(st, rec->ref, strlen(rec->ref), c->subst_keep[g]);
        }
    return CK_OK;
}

/* How many times a record that lost its seq to another writer is written again after the
 * newest before the compaction fails with CK_ECONFLICT. */
#define COMPACTION_RECORD_TRIES 8

/* A short random wait between attempts of racing writers, longer each time (ms). */
static void compaction_conflict_pause(int attempt) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = 1 + (long)((uint64_t)now.tv_nsec % (uint64_t)(4 << attempt));
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

/* The record found no free seq: the state is reloaded from the newest records, so that the
 * next call starts from what is stored, and the compaction fails with CK_ECONFLICT. */
static int compaction_conflict(ck_compaction *c, const ck_error *werr, ck_error *err) {
    ck_compactor *self = c->owner;
    ck_compactor_reset(self);
    if (ck__compactor_resume(self)) return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    return ck__fail(err, CK_ECONFLICT,
                    "another writer recorded this session first; the state was reloaded from "
                    "the newest record",
                    CK_NONE, "%s", werr->where);
}

/* Appends the record to the log (with its integrity tag); a log that cannot be written does
 * not fail the compaction. With records in the backend, a record whose seq another writer
 * took is written again after the newest; one that keeps losing fails with CK_ECONFLICT. */
static int compaction_write_record(ck_compaction *c, ck_error *err) {
    ck_compactor *self = c->owner;
    unsigned char key[32];
    ck_error kerr;
    int have_key = ck__store_key(self->store, 1, key, &kerr) == CK_OK;
    if (!have_key) ck__compaction_error(c, "audit key not available: %s (%s)", kerr.msg,
                                        kerr.where);
    int rc = ck__record_build(c, have_key ? key : NULL, sizeof key);
    if (rc) return rc;
    ck_error werr;
    int wrc = CK_OK;
    for (int attempt = 0; attempt < COMPACTION_RECORD_TRIES; attempt++) {
        wrc = ck__store_append_record(self->store, self->st.records + 1, c->record,
                                      c->record_len, &werr);
        if (wrc == CK_OK) {
            self->st.records++;
            return CK_OK;
        }
        if (wrc != CK_ECONFLICT) break;
        /* Another writer holds this seq: this record goes after the newest one, carrying the
         * whole state, since its deltas were taken against the state before that writer's. */
        uint64_t newest;
        ck_error lerr;
        if (ck__store_newest_record(self->store, &newest, &lerr) != CK_OK ||
            newest <= self->st.records)
            break;
        ck__compaction_note(c, "another writer recorded this session first (%s); this record "
                               "follows its record %llu with the whole state",
                            werr.where, (unsigned long long)newest);
        self->st.records = newest;
        c->force_snapshot = 1;
        if (attempt) compaction_conflict_pause(attempt);
        rc = ck__record_build(c, have_key ? key : NULL, sizeof key);
        if (rc) return rc;
    }
    if (wrc == CK_ECONFLICT) return compaction_conflict(c, &werr, err);
    ck__compaction_error(c, "audit log not written: %s (%s)", werr.msg, werr.where);
    ck__free(c->record);
    c->record = NULL;
    return ck__record_build(c, have_key ? key : NULL, sizeof key);
}

/* Whether finishing writes a record (its condition, less the view over the soft limit, which
 * is told once): the view changed, or something must be told (a failed store, a repair not
 * told before, a fresh start, an error, a note from resuming). `own`: the state it finishes
 * into. */
static int compaction_tells(const ck_compaction *c, const ck__state *own, int compacted,
                            int futile) {
    int new_repairs = c->n_repairs && c->repairs_fp != own->repairs_fp;
    return compacted || futile || c->n_new_offloads || c->failed_stores || new_repairs ||
           c->reset || c->errors.n || c->owner->resume_note;
}

static int compaction_finish(ck_compactor *self, ck_compaction *c, ck_error *err) {
    ck__error_clear(err);
    if (!self || !c || c->owner != self) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    if (c->finished) return ck__fail(err, CK_ESTATE, "compaction finished already", CK_NONE, NULL);
    int rc = CK_OK;
    ck_view *base_view = NULL, *view = NULL;
    int futile = 0, compacted = 0;
    const ck__state *st = c->st;
    /* The view without a new checkpoint: the state's checkpoint (if any) and substitutions. */
    if (c->marker != CK_NONE || !st->active) rc = compaction_build_view(c, 0, NULL, 0, &base_view);
    else rc = compaction_build_view(c, c->base, c->previous, c->previous_len, &base_view);
    if (!rc && c->cut > c->base) {
        ck_anchors *anchors = NULL;
        rc = compaction_new_anchors(c, &anchors);
        if (!rc) rc = compaction_checkpoint(c, anchors);
        if (!rc) rc = compaction_build_view(c, c->cut, c->checkpoint, c->checkpoint_len, &view);
        if (!rc && compaction_view_tokens(c, view) >= compaction_view_tokens(c, base_view)) {
            /* Compacting would not shrink the view: keep the old one, and remember the fold so
             * the same history does not cost another summary. The record says so. */
            ck__compaction_note(c, "compaction would not shrink the view; nothing was folded");
            futile = 1;
            ck_view_free(view);
            view = NULL;
            ck_anchors_free(anchors);
            anchors = NULL;
        } else if (!rc) {
            c->anchors = anchors;
            anchors = NULL;
            compacted = 1;
        }
        ck_anchors_free(anchors);
    }
    if (!rc && !view) {
        view = base_view;
        base_view = NULL;
    }
    ck_view_free(base_view);
    /* The view as sent, per message, in the repaired history's terms (before the repair's
     * composition, which maps it back onto the host's list), and its tokens. */
    uint64_t *sent_key = NULL, *sent_tok = NULL;
    size_t n_sent = view ? ck_view_count(view) : 0;
    if (!rc && view) rc = compaction_sent(c, view, &sent_key, &sent_tok, &c->tokens_after);
    else if (!rc) c->tokens_after = 0;
    /* The view as it is sent, against the target the compaction aimed for. */
    if (!rc && c->tier >= CK_TIER_SOFT && c->tokens_after > c->lim.target)
        ck__compaction_note(c, "the view stays above the target (%llu of %llu tokens): the "
                               "pinned messages, the checkpoint and the turns that must stay "
                               "need that much",
                            (unsigned long long)ck__scaled(c->tokens_after, c->factor),
                            (unsigned long long)ck__scaled(c->lim.target, c->factor));
    if (!rc && c->fixed) {
        ck_view *composed = NULL;
        rc = ck__view_compose(view, c->repair, c->src, &composed);
        ck_view_free(view);
        view = composed;
    }
    if (rc) {
        ck_view_free(view);
        ck__free(sent_key);
        ck__free(sent_tok);
        return ck__fail(err, rc, NULL, CK_NONE, NULL);
    }
    /* From here on the owner's state changes. */
    compaction_compare_sent(c, sent_key, sent_tok, n_sent);
    ck__state *own = &self->st;
    if (c->reset) {
        ck__state taken = c->fresh;
        ck__state_dispose(own);
        *own = taken;
        memset(&c->fresh, 0, sizeof c->fresh);
        c->st = own;
    }
    c->view = view;
    c->finished = 1;
    c->users_before = own->n_users;
    c->archives_before = own->n_archives;
    c->offloads_before = own->n_offloads;
    size_t origin_n = c->task != CK_NONE ? c->task + 1 : (c->h->n_msgs ? 1 : 0);
    if (origin_n > own->origin_n) {
        own->origin_n = origin_n;
        own->origin_fp = ck__fingerprint(c->h, origin_n);
    }
    if (compacted) {
        /* The state keeps copies: the view points into this compaction's own text. */
        char *text = ck__strndup(c->checkpoint, c->checkpoint_len);
        ck_anchors *anchors = ck_anchors_merge(NULL, c->anchors);
        if (!text || !anchors) {
            ck__free(text);
            ck_anchors_free(anchors);
            return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        }
        ck__free(own->checkpoint);
        own->checkpoint = text;
        own->checkpoint_len = c->checkpoint_len;
        ck_anchors_free(own->anchors);
        own->anchors = anchors;
        ck__state_take_lists(own, c->next);
        own->active = 1;
        own->covered = c->cut;
        own->fingerprint = ck__fingerprint(c->h, c->cut);
        own->compacted += c->summarized;
        own->compactions++;
        own->rest_n = c->tokens_after > c->lim.target ? c->h->n_msgs : 0;
    }
    own->last_view = c->tokens_after;
    own->growth = c->growth;
    rc = compaction_commit_offloads(c);
    if (rc) return ck__fail(err, rc, NULL, CK_NONE, NULL);
    if (futile) {
        own->futile_cut = c->cut;
        own->futile_fp = ck__fingerprint(c->h, c->cut);
    }
    if (self->resume_note) {
        ck__compaction_error(c, "%s", self->resume_note);
        ck__free(self->resume_note);
        self->resume_note = NULL;
    }
    /* A record only when the view changed or something must be told: a failed store, a repair
     * not told before, a fresh start. A view that stays over the soft limit with nothing left
     * to fold is told once, not on every call while it lasts. */
    int over = c->tier >= CK_TIER_SOFT && c->tokens_after > c->lim.soft;
    int tells = compaction_tells(c, own, compacted, futile);
    own->repairs_fp = c->n_repairs ? c->repairs_fp : 0;
    if (!tells) {
        if (!over || own->over_noted) {
            own->over_noted = over && own->over_noted;
            return CK_OK;
        }
    }
    /* Every record of a view over the limit says why; the view alone does not make one. */
    if (over)
        ck__compaction_error(c, "the view needs %llu tokens, more than the soft limit of %llu: %s",
                             (unsigned long long)c->tokens_after,
                             (unsigned long long)c->lim.soft,
                             c->failed_stores ? "the store could not take what had to leave"
                             : c->resting     ? "the last fold could not reach the target, and "
                                                "the history has not grown enough since for "
                                                "another"
                                              : "the pinned messages and the newest turn are "
                                                "all that is left");
    own->over_noted = over;
    rc = compaction_write_record(c, err);
    if (rc == CK_ECONFLICT) return rc;
    if (rc) return ck__fail(err, rc, NULL, CK_NONE, NULL);
    return CK_OK;
}

/* Both steps end with the evidence they stored durable (ck__store_sync): one folder fsync per
 * step that stored any, rather than one per file. */
int ck_compactor_begin(ck_compactor *self, const ck_history *history, uint64_t tool_tokens,
                       ck_compaction **out, ck_error *err) {
    int rc = compaction_begin(self, history, tool_tokens, 0, out, err);
    if (self) ck__store_sync(self->store);
    return rc;
}

int ck_compactor_finish(ck_compactor *self, ck_compaction *c, ck_error *err) {
    int rc = compaction_finish(self, c, err);
    if (self) ck__store_sync(self->store);
    return rc;
}

int ck_compactor_compact(ck_compactor *self, const ck_history *history, uint64_t tool_tokens,
                         ck_summarize_fn summarize, void *ctx, ck_compaction **out,
                         ck_error *err) {
    ck_compaction *c = NULL;
    int rc = ck_compactor_begin(self, history, tool_tokens, &c, err);
    if (rc) return rc;
    if (c->summarize && summarize) {
        ck_summary_request req;
        rc = ck_compaction_request(c, &req);
        if (rc) {
            ck_compaction_free(c);
            return ck__fail(err, rc, NULL, CK_NONE, NULL);
        }
        int src = summarize(ctx, &req, c);
        if (src != CK_OK && !c->failure) {
            char why[96];
            snprintf(why, sizeof why, "summarizer returned %s", ck_err_name(src));
            if (ck_compaction_set_failure(c, why, strlen(why)) == CK_ENOMEM) src = CK_ENOMEM;
        }
        if (src != CK_OK) c->have_reply = 0;
    } else {
        /* No summarizer given: the extractive one is the default, not a fallback. */
        ck_compaction_use_extractive(c);
    }
    rc = ck_compactor_finish(self, c, err);
    if (rc) {
        ck_compaction_free(c);
        return rc;
    }
    *out = c;
    return CK_OK;
}

int ck_compactor_compact_quiet(ck_compactor *self, const ck_history *history,
                               uint64_t tool_tokens, ck_compaction **out, ck_error *err) {
    if (!out) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    *out = NULL;
    ck_compaction *c = NULL;
    int rc = compaction_begin(self, history, tool_tokens, 1, &c, err);
    if (rc == CK__WOULD_STORE) {
        ck__error_clear(err);
        return CK_OK;
    }
    if (rc) return rc;
    /* Tier none: no span to fold, so no summary; finishing stores nothing, and writes no
     * record unless it must tell something, which is left to the full call. */
    if (compaction_tells(c, &self->st, 0, 0)) {
        ck_compaction_free(c);
        return CK_OK;
    }
    ck_compaction_use_extractive(c);
    rc = compaction_finish(self, c, err);
    if (rc) {
        ck_compaction_free(c);
        return rc;
    }
    *out = c;
    return CK_OK;
}
