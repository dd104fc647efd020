/* The checkpoint: the summary request, the checkpoint text, the audit record, and resuming a
 * session from its last record. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "./alloc.h"
#include "./compactor.h"

static const char INSTRUCTIONS[] =
    "Update the checkpoint of this agent session. The older messages below are leaving the "
    "agent's context; after this, the agent sees only the system prompt, its task, your "
    "checkpoint and the newest messages.\n"
    "Answer with exactly these Markdown sections, in this order:\n"
    "## User Intent\nwhat the user wants, including every requirement and constraint they "
    "stated\n"
    "## Execution Progress\nwhat has been done so far and what it showed\n"
    "## Key Decisions\ndecisions made and why\n"
    "## Tried Solutions\nevery approach that was tried, with its outcome; failed ones matter "
    "most, so they are not repeated\n"
    "## Next Steps\nwhat to do next\n"
    "## Summary\nanything else the agent must remember\n"
    "Write N/A under a section that has nothing to say. When a previous checkpoint is given, "
    "return the whole updated checkpoint: keep what still holds, correct what changed. Quote "
    "file paths, commands, identifiers and error messages exactly.\n";

/* ---- the request ---- */

/* A fence that text inside cannot close: its tag is derived from the whole span, and any
 * occurrence of the tag in the text is broken up before it is written. */
static void fenced(ck__buf *b, const char *tag, const char *text, size_t len, size_t cap) {
    size_t keep = len > cap ? ck__clip(text, len, cap) : len;
    ck__buf_printf(b, "<<<DATA %s>>>\n", tag);
    size_t tag_len = strlen(tag);
    const char *s = text, *end = text + keep;
    while (s < end) {
        const char *hit = NULL;
        for (const char *q = s; q + tag_len <= end; q++) {
            q = memchr(q, tag[0], (size_t)(end - q));
            if (!q || q + tag_len > end) break;
            if (memcmp(q, tag, tag_len) == 0) {
                hit = q;
                break;
            }
        }
        if (!hit) {
            ck__buf_add(b, s, (size_t)(end - s));
            break;
        }
        ck__buf_add(b, s, (size_t)(hit - s) + 1);
        ck__buf_adds(b, "\xe2\x80\x8b"); /* a zero-width space splits the tag */
        s = hit + 1;
    }
    if (keep < len) ck__buf_printf(b, "\n[... %zu more bytes not shown]", len - keep);
    ck__buf_printf(b, "\n<<<END DATA %s>>>\n", tag);
}

static const char *role_label(ck_role r) {
    static const char *const labels[] = {"system", "developer", "user", "assistant", "tool",
                                         "other"};
    return (unsigned)r <= CK_ROLE_OTHER ? labels[r] : "other";
}

/* Renders messages [first, end) of the span, each part's text cut to `cap` bytes. */
static void render_span(const ck_compaction *c, size_t first, size_t end, size_t cap,
                        const char *tag, ck__buf *b) {
    const ck_history *h = c->h;
    for (size_t i = first; i < end; i++) {
        const ck_part *parts = ck__msg_parts(h, i);
        /* Pinned messages of the span stay in the view verbatim; they are shown as context
         * (the task above all) and marked so the summary need not repeat them. */
        ck__buf_printf(b, "[%zu] %s%s:\n", i, role_label(h->msgs[i].role),
                       ck__compaction_pinned(c, i) ? " (pinned: stays in the view verbatim)"
                                                   : "");
        for (size_t k = 0; k < h->msgs[i].n_parts; k++) {
            const ck_part *p = &parts[k];
            size_t g = h->msgs[i].first_part + k;
            const char *text = c->subst[g] ? c->subst[g] : p->text;
            size_t len = c->subst[g] ? c->subst_len[g] : p->text_len;
            switch (p->kind) {
                case CK_PART_TOOL_CALL:
                    ck__buf_printf(b, "calls tool %.*s (id %.*s) with arguments:\n",
                                   (int)p->name_len, p->name, (int)p->id_len, p->id);
                    fenced(b, tag, text, len, cap);
                    break;
                case CK_PART_TOOL_RESULT:
                    ck__buf_printf(b, "result of tool call %.*s%s:\n", (int)p->id_len, p->id,
                                   (p->flags & CK_PART_IS_ERROR) ? " (error)" : "");
                    fenced(b, tag, text, len, cap);
                    break;
                case CK_PART_IMAGE: ck__buf_adds(b, "(an image)\n"); break;
                default:
                    if (len) fenced(b, tag, text, len, cap);
            }
        }
    }
}

/* An upper bound of what render_span writes for message i with parts cut to `cap`. */
static size_t message_bytes(const ck_compaction *c, size_t i, size_t cap) {
    size_t total = 64;
    for (size_t k = 0; k < c->h->msgs[i].n_parts; k++) {
        size_t g = c->h->msgs[i].first_part + k;
        size_t len = c->subst[g] ? c->subst_len[g] : c->h->parts[g].text_len;
        total += (len < cap ? len : cap) + 96 + c->h->parts[g].id_len + c->h->parts[g].name_len;
    }
    return total;
}

static size_t span_bytes(const ck_compaction *c, size_t first, size_t end, size_t cap) {
    size_t total = 0;
    for (size_t i = first; i < end; i++) total += message_bytes(c, i, cap);
    return total;
}

static int build_prompt(ck_compaction *c, const char *tag, size_t avail);

int ck__build_request(ck_compaction *c) {
    const ck_compactor_options *o = &c->owner->opt;
    /* The request must fit the model's window with room for the reply. */
    uint64_t room = o->context_window > o->summary_max_tokens + 512
                        ? o->context_window - o->summary_max_tokens - 512
                        : o->context_window / 4;
    size_t budget = (size_t)(room * 3); /* bytes; below 4 per token to leave slack */
    char tag[24];
    snprintf(tag, sizeof tag, "%016llx",
             (unsigned long long)ck__fingerprint(c->h, c->cut) ^ (unsigned long long)c->base);
    size_t fixed = sizeof INSTRUCTIONS + c->previous_len + 256;
    size_t avail = budget > fixed ? budget - fixed : 0;
    /* Bytes per token vary with the text (short code lines and fences cost more), so the
     * prompt is measured with the session's estimator and built again smaller until it fits. */
    for (int attempt = 0;; attempt++) {
        int rc = build_prompt(c, tag, avail);
        if (rc) return rc;
        uint64_t tokens = ck__compactor_text_tokens(c->owner, c->prompt.data, c->prompt.len);
        if (tokens <= room || attempt == 6 || avail == 0) return CK_OK;
        avail = (size_t)((double)avail * (double)room / (double)tokens * 0.9);
    }
}

/* Renders the prompt with the span's messages within `avail` bytes. */
static int build_prompt(ck_compaction *c, const char *tag, size_t avail) {
    const ck_compactor_options *o = &c->owner->opt;
    size_t first = c->base, cap = (size_t)-1;
    if (span_bytes(c, first, c->cut, cap) > avail) {
        /* Binary search for the largest per-part cap that fits; then, if even small parts do
         * not fit, leave out the oldest messages (the extractive digest covers them). */
        size_t lo = 256, hi = 1 << 20;
        while (lo < hi) {
            size_t mid = lo + (hi - lo + 1) / 2;
            if (span_bytes(c, first, c->cut, mid) <= avail) lo = mid;
            else hi = mid - 1;
        }
        cap = lo;
        size_t total = span_bytes(c, first, c->cut, cap);
        while (first < c->cut && total > avail) total -= message_bytes(c, first++, cap);
    }
    ck__buf *b = &c->prompt;
    b->len = 0;
    ck__buf_adds(b, INSTRUCTIONS);
    if (c->previous) {
        ck__buf_adds(b, "\nThe previous checkpoint:\n");
        fenced(b, tag, c->previous, c->previous_len, (size_t)-1);
    }
    if (first > c->base) {
        ck_anchors *digest = ck__extractive(c->h, c->base, first, o->summary_max_tokens / 2,
                                           c->failed);
        if (!digest) return CK_ENOMEM;
        ck__buf_printf(b, "\n%zu older messages did not fit in this request; an extractive "
                          "digest of them:\n",
                       first - c->base);
        for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
            size_t len;
            const char *v = ck_anchors_get(digest, (ck_anchor)k, &len);
            if (v) {
                ck__buf_printf(b, "%s:\n", ck_anchor_title((ck_anchor)k));
                fenced(b, tag, v, len, (size_t)-1);
            }
        }
        ck_anchors_free(digest);
    }
    ck__buf_printf(b, "\nThe messages to fold into the checkpoint (%zu to %zu):\n", first,
                   c->cut ? c->cut - 1 : 0);
    render_span(c, first, c->cut, cap, tag, b);
    return b->failed ? CK_ENOMEM : CK_OK;
}

/* ---- the state's lists ---- */

static int copy_strs(ck__strs *dst, const ck__strs *src) {
    for (size_t i = 0; i < src->n; i++)
        if (ck__strs_push(dst, src->v[i].s, src->v[i].len)) return CK_ENOMEM;
    return CK_OK;
}

static int push_user(ck__state *st, const char *text, size_t len, const char *ref) {
    if (ck__grow((void **)&st->users, &st->cap_users, st->n_users + 1, sizeof *st->users))
        return CK_ENOMEM;
    ck__user_msg u;
    u.text = ck__strndup(text, len);
    u.len = len;
    u.ref = ref ? ck__strndup(ref, strlen(ref)) : NULL;
    if (!u.text || (ref && !u.ref)) {
        ck__free(u.text);
        ck__free(u.ref);
        return CK_ENOMEM;
    }
    st->users[st->n_users++] = u;
    return CK_OK;
}

/* A copy of the state's lists, to fold a span into without touching the state. */
static int copy_lists(ck__state *dst, const ck__state *src) {
    if (ck__state_init(dst)) return CK_ENOMEM;
    for (size_t i = 0; i < src->n_users; i++)
        if (push_user(dst, src->users[i].text, src->users[i].len, src->users[i].ref))
            return CK_ENOMEM;
    if (copy_strs(&dst->constraints, &src->constraints) ||
        copy_strs(&dst->files_read, &src->files_read) ||
        copy_strs(&dst->files_modified, &src->files_modified))
        return CK_ENOMEM;
    for (size_t i = 0; i < ck__idents_count(src->idents); i++) {
        size_t len, seq;
        unsigned count;
        const char *id = ck__idents_get(src->idents, i, &len, &seq, &count);
        if (ck__idents_add(dst->idents, id, len, seq, count)) return CK_ENOMEM;
    }
    return CK_OK;
}

void ck__state_take_lists(ck__state *st, ck__state *next) {
    if (!next) return;
    ck__state old = *st;
    st->users = next->users;
    st->n_users = next->n_users;
    st->cap_users = next->cap_users;
    st->constraints = next->constraints;
    st->files_read = next->files_read;
    st->files_modified = next->files_modified;
    st->idents = next->idents;
    /* `next` takes the old lists, so disposing of it frees them. */
    next->users = old.users;
    next->n_users = old.n_users;
    next->cap_users = old.cap_users;
    next->constraints = old.constraints;
    next->files_read = old.files_read;
    next->files_modified = old.files_modified;
    next->idents = old.idents;
}

/* Adds each rule-stating line of `text` to the constraints. */
static int add_rules(ck__state *st, const char *text, size_t len) {
    const char *s = text, *end = text + len;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        while (n && (s[n - 1] == '\r' || s[n - 1] == ' ')) n--;
        if (n && ck__is_rule_line(s, n)) {
            size_t keep = ck__clip(s, n, 400);
            if (ck__strs_push_unique(&st->constraints, s, keep)) return CK_ENOMEM;
        }
        s = nl ? nl + 1 : end;
    }
    return CK_OK;
}

/* Folds the span's user messages, rules, identifiers and file operations into `next`. */
static int fold_span(ck_compaction *c, ck__state *next) {
    const ck_history *h = c->h;
    ck__buf scratch, args;
    ck__buf_init(&scratch);
    ck__buf_init(&args);
    int rc = CK_OK;
    c->summarized = 0;
    for (size_t i = c->base; i < c->cut && !rc; i++) {
        /* Pinned messages stay in the view verbatim; an older checkpoint is the previous one. */
        if (ck__compaction_pinned(c, i) || ck__is_checkpoint_msg(h, i)) continue;
        c->summarized++;
        const ck_part *parts = ck__msg_parts(h, i);
        for (size_t k = 0; k < h->msgs[i].n_parts && !rc; k++) {
            const ck_part *p = &parts[k];
            if (p->kind == CK_PART_TEXT || p->kind == CK_PART_TOOL_RESULT)
                rc = ck__idents_scan(next->idents, p->text, p->text_len, i);
            if (!rc && p->kind == CK_PART_TOOL_CALL) {
                rc = ck__idents_scan(next->idents, p->text, p->text_len, i);
                const char *path;
                size_t path_len;
                args.len = 0;
                ck__file_op op =
                    ck__file_op_of(p->name, p->name_len, p->text, p->text_len, &args, &path,
                                   &path_len);
                if (!rc && op == CK__FILE_READ)
                    rc = ck__strs_push_unique(&next->files_read, path, path_len);
                else if (!rc && op == CK__FILE_MODIFIED)
                    rc = ck__strs_push_unique(&next->files_modified, path, path_len);
            }
        }
        if (rc || !ck__is_user_text(h, i)) continue;
        size_t len;
        const char *text = ck__msg_text(h, i, &scratch, &len);
        if (scratch.failed) {
            rc = CK_ENOMEM;
            break;
        }
        /* Long user messages also go to the evidence store, so the checkpoint can point at
         * them once they have to be shortened to an excerpt. */
        char ref[40] = "";
        if (len > 200) {
            snprintf(ref, sizeof ref, "user-%016llx",
                     (unsigned long long)ck__hash_bytes(text, len));
            int existed;
            ck_error err;
            int put = ck__store_put(c->owner->store, ref, strlen(ref), text, len, &existed, &err);
            if (put == CK_ENOMEM) rc = put;
            else if (put) {
                ck__compaction_note(c, "user message %zu not stored: %s", i, err.where);
                ref[0] = '\0';
            }
        }
        if (!rc) rc = push_user(next, text, len, ref[0] ? ref : NULL);
        if (!rc) rc = add_rules(next, text, len);
    }
    ck__buf_dispose(&scratch);
    ck__buf_dispose(&args);
    return rc;
}

/* ---- the checkpoint text ---- */

static void section(ck__buf *b, const char *title) { ck__buf_printf(b, "\n## %s\n", title); }

static size_t render_users(const ck__state *st, size_t budget, ck__buf *b) {
    size_t start = b->len;
    if (!st->n_users) return 0;
    /* Newest first within the budget verbatim; older ones as one-line excerpts with a pointer
     * to their full text; they are printed oldest first so a later instruction visibly
     * supersedes an earlier one. */
    size_t n = st->n_users, used = 0, verbatim_from = n;
    while (verbatim_from > 0 && used + st->users[verbatim_from - 1].len + 8 <= budget * 3 / 4) {
        used += st->users[verbatim_from - 1].len + 8;
        verbatim_from--;
    }
    size_t excerpt_from = verbatim_from;
    while (excerpt_from > 0 && used + 200 <= budget) {
        used += 200;
        excerpt_from--;
    }
    section(b, "User Messages");
    if (excerpt_from > 0)
        ck__buf_printf(b, "(%zu older user messages are in the evidence store only)\n",
                       excerpt_from);
    for (size_t i = excerpt_from; i < n; i++) {
        const ck__user_msg *u = &st->users[i];
        if (i < verbatim_from) {
            const char *nl = memchr(u->text, '\n', u->len);
            size_t line = nl ? (size_t)(nl - u->text) : u->len;
            size_t keep = ck__clip(u->text, line, 100);
            ck__buf_adds(b, "- ");
            ck__buf_add(b, u->text, keep);
            ck__buf_adds(b, " [...]");
            if (u->ref) ck__buf_printf(b, " (full text: read_evidence(ref=\"%s\"))", u->ref);
            ck__buf_addc(b, '\n');
        } else {
            ck__buf_adds(b, "- ");
            ck__buf_add(b, u->text, u->len);
            ck__buf_addc(b, '\n');
        }
    }
    return b->len - start;
}

/* A list of strings, newest (last) first within the budget, printed in order. */
static size_t render_strs(const ck__strs *l, const char *title, const char *prefix,
                          size_t budget, ck__buf *b) {
    if (!l->n) return 0;
    size_t start = b->len, used = 0, from = l->n;
    while (from > 0 && used + l->v[from - 1].len + strlen(prefix) + 3 <= budget) {
        used += l->v[from - 1].len + strlen(prefix) + 3;
        from--;
    }
    if (from == l->n) return 0;
    if (title) section(b, title);
    if (from) ck__buf_printf(b, "(%zu older entries not shown)\n", from);
    for (size_t i = from; i < l->n; i++) {
        ck__buf_printf(b, "- %s", prefix);
        ck__buf_add(b, l->v[i].s, l->v[i].len);
        ck__buf_addc(b, '\n');
    }
    return b->len - start;
}

/* The offloads of the state, then this compaction's (not yet in the state), as one list. */
static const ck__offload *offload_at(const ck_compaction *c, size_t i) {
    const ck__state *st = &c->owner->st;
    return i < st->n_offloads ? &st->offloads[i] : &c->new_offloads[i - st->n_offloads];
}

static size_t render_offloads(const ck_compaction *c, size_t budget, ck__buf *b) {
    size_t n = c->owner->st.n_offloads + c->n_new_offloads;
    if (!n) return 0;
    size_t start = b->len, used = 0, from = n;
    while (from > 0) {
        const ck__offload *o = offload_at(c, from - 1);
        size_t need = strlen(o->ref) + strlen(o->tool) + strlen(o->path) + 48;
        if (used + need > budget) break;
        used += need;
        from--;
    }
    if (from == n) return 0;
    section(b, "Offloaded Outputs");
    if (from) ck__buf_printf(b, "(%zu older outputs not listed)\n", from);
    for (size_t i = from; i < n; i++) {
        const ck__offload *o = offload_at(c, i);
        ck__buf_printf(b, "- %s (%s, %llu lines, %llu bytes): %s\n", o->ref, o->tool,
                       (unsigned long long)o->lines, (unsigned long long)o->bytes, o->path);
    }
    return b->len - start;
}

/* The anchors and the summary within `budget` bytes: the summary is cut first, then each anchor
 * to its share (short anchors give what they do not need to the long ones). */
static void render_anchors(const ck_anchors *a, size_t budget, ck__buf *b) {
    size_t len[CK_ANCHOR_COUNT], total = 0, slen = 0;
    const char *text[CK_ANCHOR_COUNT];
    for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
        text[k] = ck_anchors_get(a, (ck_anchor)k, &len[k]);
        if (!text[k]) {
            text[k] = "N/A";
            len[k] = 3;
        }
        total += len[k] + 32;
    }
    const char *summary = ck_anchors_summary(a, &slen);
    size_t keep_summary = 0;
    size_t cap[CK_ANCHOR_COUNT];
    for (int k = 0; k < CK_ANCHOR_COUNT; k++) cap[k] = len[k];
    if (total <= budget) {
        keep_summary = slen < budget - total ? slen : budget - total;
    } else {
        size_t left = budget > 5 * 32 ? budget - 5 * 32 : 0;
        int open = CK_ANCHOR_COUNT;
        int done[CK_ANCHOR_COUNT] = {0};
        for (int round = 0; round < CK_ANCHOR_COUNT && open; round++) {
            size_t share = left / (size_t)open;
            int changed = 0;
            for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
                if (done[k] || len[k] > share) continue;
                done[k] = 1;
                left -= len[k];
                open--;
                changed = 1;
            }
            if (!changed) {
                for (int k = 0; k < CK_ANCHOR_COUNT; k++)
                    if (!done[k]) cap[k] = share;
                break;
            }
        }
    }
    for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
        section(b, ck_anchor_title((ck_anchor)k));
        size_t keep = cap[k] < len[k] ? ck__clip(text[k], len[k], cap[k]) : len[k];
        ck__buf_add(b, text[k], keep);
        if (keep < len[k]) ck__buf_adds(b, " [...]");
        ck__buf_addc(b, '\n');
    }
    if (keep_summary) {
        section(b, "Summary");
        size_t keep = ck__clip(summary, slen, keep_summary);
        ck__buf_add(b, summary, keep);
        if (keep < slen) ck__buf_adds(b, " [...]");
        ck__buf_addc(b, '\n');
    }
}

static int render_checkpoint(ck_compaction *c, const ck_anchors *a, const ck__state *lists,
                             size_t budget, ck__buf *out) {
    const ck__state *st = &c->owner->st;
    ck__buf tail;
    ck__buf_init(&tail);
    size_t used = 0;
    used += render_strs(&lists->constraints, "Constraints", "", budget / 8, &tail);
    used += render_users(lists, budget / 4, &tail);
    ck__buf files;
    ck__buf_init(&files);
    size_t file_budget = budget / 16;
    render_strs(&lists->files_modified, NULL, "modified: ", file_budget / 2, &files);
    render_strs(&lists->files_read, NULL, "read: ", file_budget / 2, &files);
    size_t offload_budget = budget / 16;
    ck__buf head;
    ck__buf_init(&head);
    ck__buf_adds(&head, ck_checkpoint_marker());
    ck__buf_printf(&head,
                   "\nThis checkpoint stands for %zu earlier messages of this session (%llu "
                   "compactions so far). The full history is kept outside the context; "
                   "offloaded tool outputs can be read with the read_evidence tool.\n",
                   st->compacted + c->summarized, (unsigned long long)st->records + 1);
    size_t fixed = head.len + used + files.len + 64 + offload_budget + budget / 16;
    size_t anchor_budget = budget > fixed ? budget - fixed : budget / 4;
    ck__buf anchors;
    ck__buf_init(&anchors);
    render_anchors(a, anchor_budget, &anchors);
    ck__buf_add(out, head.data, head.len);
    ck__buf_add(out, anchors.data, anchors.len);
    ck__buf_add(out, tail.data, tail.len);
    /* Identifiers the anchors do not already quote. */
    ck__buf ids;
    ck__buf_init(&ids);
    ck__idents_render(lists->idents, anchors.data ? anchors.data : "", anchors.len, 40,
                      budget / 16, &ids);
    if (ids.len) {
        section(out, "Identifiers");
        ck__buf_add(out, ids.data, ids.len);
    }
    if (files.len) {
        section(out, "Files");
        ck__buf_add(out, files.data, files.len);
    }
    render_offloads(c, offload_budget, out);
    int failed = tail.failed || files.failed || head.failed || anchors.failed || ids.failed;
    ck__buf_dispose(&tail);
    ck__buf_dispose(&files);
    ck__buf_dispose(&head);
    ck__buf_dispose(&anchors);
    ck__buf_dispose(&ids);
    return failed || out->failed ? CK_ENOMEM : CK_OK;
}

int ck__build_checkpoint(ck_compaction *c, const ck_anchors *anchors) {
    ck_compactor *self = c->owner;
    ck__state *next = ck__calloc(1, sizeof *next);
    if (!next) return CK_ENOMEM;
    c->next = next;
    int rc = copy_lists(next, &self->st);
    if (!rc) rc = fold_span(c, next);
    if (rc) return rc;
    uint64_t max_tokens = self->opt.summary_max_tokens;
    size_t budget = (size_t)(max_tokens * 4);
    /* Rendering is measured with the session's estimator and re-run with a smaller byte
     * budget until it fits, so the bound holds whatever the estimator charges per byte. */
    for (int attempt = 0; attempt < 8; attempt++) {
        ck__buf out;
        ck__buf_init(&out);
        rc = render_checkpoint(c, anchors, next, budget, &out);
        if (rc) {
            ck__buf_dispose(&out);
            return rc;
        }
        uint64_t tokens = ck__compactor_text_tokens(self, out.data, out.len);
        if (tokens <= max_tokens || attempt == 7) {
            if (tokens > max_tokens) out.len = ck__clip(out.data, out.len, (size_t)max_tokens * 2);
            ck__free(c->checkpoint);
            c->checkpoint = ck__buf_take(&out, &c->checkpoint_len);
            if (c->checkpoint) c->checkpoint[c->checkpoint_len] = '\0';
            return c->checkpoint ? CK_OK : CK_ENOMEM;
        }
        ck__buf_dispose(&out);
        budget = (size_t)((double)budget * (double)max_tokens / (double)tokens * 0.95);
    }
    return CK_OK;
}

/* ---- the audit record ---- */

static cJSON *string_json(const char *s, size_t len) {
    char *copy = ck__strndup(s ? s : "", s ? len : 0);
    cJSON *v = copy ? cJSON_CreateString(copy) : NULL;
    ck__free(copy);
    return v;
}

/* A count as a JSON number. cJSON prints every number with sprintf("%1.15g") and reads it back
 * with sscanf() to check it, a quarter of a microsecond each, and a record holds dozens; below
 * 10^15 that prints exactly the decimal digits, so those are written here and passed as raw
 * JSON. Larger values, which do not occur in practice, go through cJSON as before. */
static cJSON *count_json(uint64_t v) {
    if (v >= 1000000000000000ull) return cJSON_CreateNumber((double)v);
    char digits[24], *at = digits + sizeof digits;
    *--at = '\0';
    do *--at = (char)('0' + v % 10);
    while (v /= 10);
    return cJSON_CreateRaw(at);
}

/* Adds `item` under a constant key; an item that failed to build fails the record. */
static int add(cJSON *obj, const char *key, cJSON *item) {
    if (!item) return 0;
    cJSON_AddItemToObjectCS(obj, key, item);
    return 1;
}

static cJSON *anchors_json(const ck_anchors *a) {
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    for (int k = 0; ok && k < CK_ANCHOR_COUNT; k++) {
        size_t len;
        const char *v = a ? ck_anchors_get(a, (ck_anchor)k, &len) : NULL;
        ok = add(o, ck_anchor_key((ck_anchor)k), v ? string_json(v, len) : cJSON_CreateNull());
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *strs_json(const ck__strs *l) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < l->n; i++) {
        cJSON *v = string_json(l->v[i].s, l->v[i].len);
        if (!v) {
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, v);
    }
    return arr;
}

static cJSON *offload_json(const ck__offload *o) {
    cJSON *j = cJSON_CreateObject();
    char hash[20];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)o->hash);
    if (j && add(j, "tool_call_id", string_json(o->id, strlen(o->id))) &&
        add(j, "ref", string_json(o->ref, strlen(o->ref))) &&
        add(j, "hash", string_json(hash, strlen(hash))) &&
        add(j, "tool_name", string_json(o->tool, strlen(o->tool))) &&
        add(j, "path", string_json(o->path, strlen(o->path))) &&
        add(j, "bytes", count_json(o->bytes)) &&
        add(j, "lines", count_json(o->lines)))
        return j;
    cJSON_Delete(j);
    return NULL;
}

static cJSON *offloads_json(const ck__offload *v, size_t n) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++) {
        cJSON *o = offload_json(&v[i]);
        if (!o) {
            cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

/* What a later process needs to resume: the lists behind the checkpoint. Every container is
 * attached to its parent before it is filled, so deleting the root frees whatever was built. */
static cJSON *state_json(const ck__state *st) {
    cJSON *j = cJSON_CreateObject();
    cJSON *users = cJSON_CreateArray();
    int ok = j && add(j, "user_messages", users);
    if (!j) cJSON_Delete(users);
    for (size_t i = 0; ok && i < st->n_users; i++) {
        cJSON *u = cJSON_CreateObject();
        ok = u != NULL;
        if (u) cJSON_AddItemToArray(users, u);
        const ck__user_msg *m = &st->users[i];
        ok = ok && add(u, "text", string_json(m->text, m->len)) &&
             add(u, "ref", m->ref ? string_json(m->ref, strlen(m->ref)) : cJSON_CreateNull());
    }
    cJSON *ids = ok ? cJSON_CreateArray() : NULL;
    ok = ok && add(j, "identifiers", ids);
    for (size_t i = 0; ok && i < ck__idents_count(st->idents); i++) {
        size_t len, seq;
        unsigned count;
        const char *id = ck__idents_get(st->idents, i, &len, &seq, &count);
        cJSON *e = cJSON_CreateArray();
        ok = e != NULL;
        if (e) cJSON_AddItemToArray(ids, e);
        cJSON *fields[3] = {ok ? string_json(id, len) : NULL,
                            ok ? count_json(seq) : NULL,
                            ok ? count_json(count) : NULL};
        for (int f = 0; f < 3; f++) {
            if (fields[f] && ok) cJSON_AddItemToArray(e, fields[f]);
            else {
                ok = 0;
                cJSON_Delete(fields[f]);
            }
        }
    }
    ok = ok && add(j, "constraints", strs_json(&st->constraints)) &&
         add(j, "files_read", strs_json(&st->files_read)) &&
         add(j, "files_modified", strs_json(&st->files_modified)) &&
         add(j, "offloaded", offloads_json(st->offloads, st->n_offloads)) &&
         add(j, "compacted", count_json(st->compacted)) &&
         add(j, "usage_factor", cJSON_CreateNumber(st->factor));
    cJSON *usage = ok ? cJSON_CreateDoubleArray(st->usage, (int)st->n_usage) : NULL;
    ok = ok && add(j, "usage", usage);
    if (!ok) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

static void iso_time(char *out, size_t size) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ts.tv_nsec / 1000000) % 1000);
}

int ck__build_record(ck_compaction *c) {
    ck_compactor *self = c->owner;
    const ck__state *st = &self->st;
    int compacted = c->anchors != NULL;
    char id[160], when[96], fp[20];
    snprintf(id, sizeof id, "%s:%llu", self->session_id, (unsigned long long)st->records + 1);
    iso_time(when, sizeof when);
    snprintf(fp, sizeof fp, "%016llx", (unsigned long long)st->fingerprint);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - c->started.tv_sec) * 1e3 +
                (double)(now.tv_nsec - c->started.tv_nsec) / 1e6;
    size_t tail = 0;
    if (c->h->n_msgs > c->tail) tail = c->h->n_msgs - c->tail;
    cJSON *r = cJSON_CreateObject();
    int ok = r && add(r, "id", string_json(id, strlen(id))) &&
         add(r, "session_id", string_json(self->session_id, strlen(self->session_id))) &&
         add(r, "timestamp", string_json(when, strlen(when))) &&
         add(r, "tier", cJSON_CreateStringReference(ck_tier_name(c->tier))) &&
         add(r, "tokens_before", count_json(c->tokens_before)) &&
         add(r, "tokens_after", count_json(c->tokens_after)) &&
         add(r, "msgs_before", count_json(c->src->n_msgs)) &&
         add(r, "msgs_after", count_json(ck_view_count(c->view))) &&
         add(r, "summarized", count_json(compacted ? c->summarized : 0)) &&
         add(r, "preserved_tail", count_json(tail)) &&
         add(r, "offloaded", offloads_json(c->new_offloads, c->n_new_offloads)) &&
         add(r, "anchors", anchors_json(st->anchors)) &&
         add(r, "checkpoint", st->active ? string_json(st->checkpoint, st->checkpoint_len)
                                         : cJSON_CreateNull()) &&
         add(r, "covered", st->active ? cJSON_CreateObject() : cJSON_CreateNull());
    if (ok && st->active) {
        cJSON *cv = cJSON_GetObjectItemCaseSensitive(r, "covered");
        ok = add(cv, "count", count_json(st->covered)) &&
             add(cv, "fingerprint", string_json(fp, strlen(fp)));
    }
    ok = ok && add(r, "duration_ms", cJSON_CreateNumber(ms)) &&
         add(r, "error", c->notes.len ? string_json(c->notes.data, c->notes.len)
                                      : cJSON_CreateNull()) &&
         add(r, "fallback", c->fallback ? string_json(c->fallback, strlen(c->fallback))
                                        : cJSON_CreateNull()) &&
         add(r, "estimator",
             cJSON_CreateStringReference(self->opt.counter.count
                                             ? "host"
                                             : ck_estimator_name(self->opt.estimator))) &&
         add(r, "state", state_json(st));
    char *line = ok ? cJSON_PrintUnformatted(r) : NULL;
    cJSON_Delete(r);
    if (!line) return CK_ENOMEM;
    ck__free(c->record);
    c->record_len = strlen(line);
    c->record = ck__strndup(line, c->record_len);
    cJSON_free(line);
    return c->record ? CK_OK : CK_ENOMEM;
}

/* ---- resuming ---- */

static const char *str_of(const cJSON *obj, const char *key, size_t *len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v)) return NULL;
    *len = strlen(v->valuestring);
    return v->valuestring;
}

static int restore_strs(ck__strs *l, const cJSON *arr) {
    const cJSON *v;
    cJSON_ArrayForEach(v, arr) {
        if (cJSON_IsString(v) && ck__strs_push(l, v->valuestring, strlen(v->valuestring)))
            return CK_ENOMEM;
    }
    return CK_OK;
}

int ck__state_from_record(ck_compactor *self, const char *line, size_t len) {
    cJSON *r = cJSON_ParseWithLength(line, len);
    if (!r) return CK_ESYNTAX;
    ck__state st;
    int rc = ck__state_init(&st);
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(r, "state");
    const cJSON *covered = cJSON_GetObjectItemCaseSensitive(r, "covered");
    size_t n = 0;
    const char *checkpoint = str_of(r, "checkpoint", &n);
    if (!rc && checkpoint && cJSON_IsObject(covered)) {
        size_t fl = 0;
        const char *fp = str_of(covered, "fingerprint", &fl);
        const cJSON *count = cJSON_GetObjectItemCaseSensitive(covered, "count");
        if (!fp || !cJSON_IsNumber(count) || count->valuedouble < 0) {
            rc = CK_ESYNTAX;
        } else {
            st.active = 1;
            st.covered = (size_t)count->valuedouble;
            st.fingerprint = strtoull(fp, NULL, 16);
            st.checkpoint = ck__strndup(checkpoint, n);
            st.checkpoint_len = n;
            st.anchors = ck_anchors_new();
            if (!st.checkpoint || !st.anchors) rc = CK_ENOMEM;
            const cJSON *anchors = cJSON_GetObjectItemCaseSensitive(r, "anchors");
            for (int k = 0; !rc && k < CK_ANCHOR_COUNT; k++) {
                size_t al = 0;
                const char *v = str_of(anchors, ck_anchor_key((ck_anchor)k), &al);
                if (v) rc = ck_anchors_set(st.anchors, (ck_anchor)k, v, al);
            }
        }
    }
    if (!rc && cJSON_IsObject(state)) {
        const cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(state, "user_messages")) {
            size_t tl = 0, rl = 0;
            const char *text = str_of(v, "text", &tl);
            const char *ref = str_of(v, "ref", &rl);
            if (text && (rc = push_user(&st, text, tl, ref))) break;
        }
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(state, "identifiers")) {
            if (rc) break;
            const cJSON *id = cJSON_GetArrayItem(v, 0), *seq = cJSON_GetArrayItem(v, 1),
                        *count = cJSON_GetArrayItem(v, 2);
            if (cJSON_IsString(id) && cJSON_IsNumber(seq) && cJSON_IsNumber(count))
                rc = ck__idents_add(st.idents, id->valuestring, strlen(id->valuestring),
                                    (size_t)seq->valuedouble, (unsigned)count->valuedouble);
        }
        if (!rc) rc = restore_strs(&st.constraints, cJSON_GetObjectItem(state, "constraints"));
        if (!rc) rc = restore_strs(&st.files_read, cJSON_GetObjectItem(state, "files_read"));
        if (!rc)
            rc = restore_strs(&st.files_modified, cJSON_GetObjectItem(state, "files_modified"));
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(state, "offloaded")) {
            if (rc) break;
            size_t il = 0, tl = 0, pl = 0, rl = 0, hl = 0;
            const char *id = str_of(v, "tool_call_id", &il), *tool = str_of(v, "tool_name", &tl),
                       *path = str_of(v, "path", &pl), *ref = str_of(v, "ref", &rl),
                       *hash = str_of(v, "hash", &hl);
            const cJSON *bytes = cJSON_GetObjectItem(v, "bytes");
            const cJSON *lines = cJSON_GetObjectItem(v, "lines");
            if (!id || !tool || !path || !cJSON_IsNumber(bytes) || !cJSON_IsNumber(lines)) continue;
            if (!ref) {
                ref = id;
                rl = il;
            }
            ck__offload o = {ck__strndup(id, il),
                             ck__strndup(ref, rl),
                             ck__strndup(tool, tl),
                             ck__strndup(path, pl),
                             (uint64_t)bytes->valuedouble,
                             (uint64_t)lines->valuedouble,
                             hash ? strtoull(hash, NULL, 16) : 0};
            if (!o.id || !o.ref || !o.tool || !o.path ||
                ck__grow((void **)&st.offloads, &st.cap_offloads, st.n_offloads + 1, sizeof o) ||
                ck__idmap_put(&st.offloaded, o.ref, rl, st.n_offloads) < 0) {
                ck__offload_dispose(&o);
                rc = CK_ENOMEM;
                break;
            }
            st.offloads[st.n_offloads++] = o;
        }
        const cJSON *compacted = cJSON_GetObjectItem(state, "compacted");
        if (cJSON_IsNumber(compacted)) st.compacted = (size_t)compacted->valuedouble;
        const cJSON *factor = cJSON_GetObjectItem(state, "usage_factor");
        if (cJSON_IsNumber(factor) && factor->valuedouble >= 0.5 && factor->valuedouble <= 2.0)
            st.factor = factor->valuedouble;
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(state, "usage")) {
            if (st.n_usage < 5 && cJSON_IsNumber(v) && v->valuedouble >= 0.5 &&
                v->valuedouble <= 2.0)
                st.usage[st.n_usage++] = v->valuedouble;
        }
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(r, "id");
    if (!rc && cJSON_IsString(id)) {
        const char *colon = strrchr(id->valuestring, ':');
        if (colon) st.records = strtoull(colon + 1, NULL, 10);
    }
    cJSON_Delete(r);
    if (rc) {
        ck__state_dispose(&st);
        return rc;
    }
    ck__state_dispose(&self->st);
    self->st = st;
    return CK_OK;
}
