/* The checkpoint: folding a span into the lists it carries, and rendering it within a token
 * budget. No I/O here: the span was archived before, and every string is at hand.
 *
 * What must survive comes first and is cut last: the rules the user stated (as sentences,
 * verbatim), the files the agent modified, the user's own messages; the model's summary and
 * anchors get their share after that and are cut first. */
#include <stdio.h>
#include <string.h>

#include "./alloc.h"
#include "./compaction.h"
#include "./extract.h"

/* ---- folding ---- */

typedef struct cp_rules {
    ck__state *next;
    ck__strs *touched;
    int failed;
} cp_rules;

/* A rule sentence is kept whole up to this many bytes; a longer one is a paragraph without
 * stops, and its rule is near where it starts. */
#define CP_RULE_MAX 1000

static int cp_add_rule(void *ctx, const char *s, size_t n) {
    cp_rules *r = ctx;
    if (ck__strs_push_unique(&r->next->constraints, s, n) ||
        ck__strs_push(r->touched, s, n)) {
        r->failed = 1;
        return 1;
    }
    return 0;
}

static int cp_touch(ck__state *next, ck__strs *touched, char kind, const char *path,
                    size_t len) {
    if (ck__state_touch_file(next, kind, path, len)) return CK_ENOMEM;
    ck__buf b;
    ck__buf_init(&b);
    ck__buf_addc(&b, kind);
    ck__buf_add(&b, path, len);
    int rc = b.failed ? CK_ENOMEM : ck__strs_push(touched, b.data, b.len);
    ck__buf_dispose(&b);
    return rc;
}

int ck__checkpoint_fold(const ck_history *h, size_t from, size_t to, const unsigned char *cls,
                        const char *ref, const char *const *refs, const uint64_t *lines,
                        ck__state *next,
                        ck__idents *idents, ck__strs *touched_constraints,
                        ck__strs *touched_files, size_t *folded) {
    ck__buf scratch, args;
    ck__buf_init(&scratch);
    ck__buf_init(&args);
    int rc = CK_OK;
    *folded = 0;
    for (size_t i = from; i < to && !rc; i++) {
        if (cls[i] & (CK__M_PINNED | CK__M_SKIP)) continue;
        (*folded)++;
        ck_role role = h->msgs[i].role;
        /* What the user said and what the agent did rank above what a tool printed. */
        unsigned prio = role == CK_ROLE_USER || role == CK_ROLE_ASSISTANT ? CK__IDENT_ACTED
                                                                           : CK__IDENT_OUTPUT;
        const ck_part *parts = ck__msg_parts(h, i);
        for (size_t k = 0; k < h->msgs[i].n_parts && !rc; k++) {
            const ck_part *p = &parts[k];
            if (p->kind == CK_PART_TEXT)
                rc = ck__idents_scan(idents, p->text, p->text_len, i, prio);
            else if (p->kind == CK_PART_TOOL_RESULT)
                rc = ck__idents_scan(idents, p->text, p->text_len, i, CK__IDENT_OUTPUT);
            if (rc || p->kind != CK_PART_TOOL_CALL) continue;
            rc = ck__idents_scan(idents, p->text, p->text_len, i, CK__IDENT_ACTED);
            const char *path;
            size_t path_len;
            args.len = 0;
            ck__file_op op = ck__file_op_of(p->name, p->name_len, p->text, p->text_len, &args,
                                            &path, &path_len);
            if (!rc && op != CK__FILE_NONE)
                rc = cp_touch(next, touched_files, op == CK__FILE_MODIFIED ? 'm' : 'r', path,
                              path_len);
        }
        if (rc || !ck__has_user_words(h, i)) continue;
        size_t len;
        const char *text = ck__msg_text(h, i, &scratch, &len);
        if (scratch.failed) {
            rc = CK_ENOMEM;
            break;
        }
        rc = ck__state_add_user(next, text, len, refs ? refs[i - from] : ref,
                                lines ? lines[i - from] : 0);
        cp_rules rules = {next, touched_constraints, 0};
        if (!rc) ck__rule_sentences(text, len, CP_RULE_MAX, cp_add_rule, &rules);
        if (!rc && rules.failed) rc = CK_ENOMEM;
    }
    ck__buf_dispose(&scratch);
    ck__buf_dispose(&args);
    return rc;
}

/* ---- rendering ---- */

static void cp_section(ck__buf *b, const char *title) { ck__buf_printf(b, "\n## %s\n", title); }

/* Appends text written by someone else (the user, the model, a tool) under one of our
 * sections: its first line after `first`, each later one after `rest`, and every line that
 * ck_anchors_parse() would take for markup (a header in any style, a code fence) quoted with
 * "> ", so that pasted text can neither add a section to the checkpoint nor hide one. */
static void cp_add_text(ck__buf *b, const char *first, const char *rest, const char *s, size_t n) {
    char line[256];
    for (size_t at = 0; at <= n;) {
        const char *nl = memchr(s + at, '\n', n - at);
        size_t end = nl ? (size_t)(nl - s) : n;
        const char *prefix = at ? rest : first;
        size_t plen = strlen(prefix), len = end - at;
        /* The line as it will stand; a long one is judged by its head, as markup is. */
        size_t probe = len < sizeof line - plen ? len : sizeof line - plen;
        memcpy(line, prefix, plen);
        memcpy(line + plen, s + at, probe);
        ck__buf_adds(b, prefix);
        if (ck__anchors_line_is_markup(line, plen + probe)) ck__buf_adds(b, "> ");
        ck__buf_add(b, s + at, len);
        if (!nl) break;
        ck__buf_addc(b, '\n');
        at = end + 1;
    }
}

/* How a checkpoint names where the history is. */
static void cp_archive_hint(const ck__cp_input *in, ck__buf *b) {
    const ck__state *l = in->lists;
    if (!l->n_archives) {
        ck__buf_adds(b, "Offloaded tool outputs can be read with the read_evidence tool.\n");
        return;
    }
    const ck__archive *a = &l->archives[l->n_archives - 1];
    ck__buf_printf(b,
                   "Every earlier message is archived in the evidence store: search them all "
                   "with read_evidence(pattern=\"...\"), or read the newest archive with "
                   "read_evidence(ref=\"%s\", offset=0).\n",
                   a->ref);
}

static void cp_header(const ck__cp_input *in, ck__buf *b) {
    ck__buf_adds(b, ck_checkpoint_marker());
    ck__buf_printf(b,
                   "\nThis checkpoint stands for %llu earlier messages of this session (%llu "
                   "compaction%s so far). ",
                   (unsigned long long)in->messages, (unsigned long long)in->compactions,
                   in->compactions == 1 ? "" : "s");
    cp_archive_hint(in, b);
}

/* The anchors and the summary within `budget` bytes: the summary is cut first, then each anchor
 * to its share (short anchors give what they do not need to the long ones). */
static void cp_anchors(const ck_anchors *a, size_t budget, ck__buf *b) {
    size_t len[CK_ANCHOR_COUNT], total = 0, slen = 0;
    const char *text[CK_ANCHOR_COUNT];
    for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
        text[k] = a ? ck_anchors_get(a, (ck_anchor)k, &len[k]) : NULL;
        if (!text[k]) {
            text[k] = "N/A";
            len[k] = 3;
        }
        total += len[k] + 32;
    }
    const char *summary = a ? ck_anchors_summary(a, &slen) : "";
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
        cp_section(b, ck_anchor_title((ck_anchor)k));
        size_t keep = cap[k] < len[k] ? ck__clip(text[k], len[k], cap[k]) : len[k];
        cp_add_text(b, "", "", text[k], keep);
        if (keep < len[k]) ck__buf_adds(b, " [...]");
        ck__buf_addc(b, '\n');
    }
    if (keep_summary > 16) {
        cp_section(b, "Summary");
        size_t keep = ck__clip(summary, slen, keep_summary);
        cp_add_text(b, "", "", summary, keep);
        if (keep < slen) ck__buf_adds(b, " [...]");
        ck__buf_addc(b, '\n');
    }
}

/* The rule sentences, newest first within the budget, printed oldest first so that a later
 * rule visibly supersedes an earlier one. */
static void cp_constraints(const ck__state *l, size_t budget, ck__buf *b) {
    size_t n = l->constraints.n, from = n, used = 0;
    if (!n) return;
    while (from > 0 && used + l->constraints.v[from - 1].len + 3 <= budget) {
        used += l->constraints.v[from - 1].len + 3;
        from--;
    }
    if (from == n && budget < 64) return;
    cp_section(b, "Constraints");
    ck__buf_adds(b, "Rules the user stated, verbatim, oldest first:\n");
    for (size_t i = from; i < n; i++) {
        cp_add_text(b, "- ", "  ", l->constraints.v[i].s, l->constraints.v[i].len);
        ck__buf_addc(b, '\n');
    }
    if (from)
        ck__buf_printf(b, "(%zu older rules not shown; they are in the archived user messages: "
                          "search with read_evidence(pattern=...))\n",
                       from);
}

/* A user message as one line: its first line, clipped, and where its full text is. */
static void cp_user_excerpt(const ck__user_msg *u, ck__buf *b) {
    const char *nl = memchr(u->text, '\n', u->len);
    size_t line = nl ? (size_t)(nl - u->text) : u->len;
    size_t keep = ck__clip(u->text, line, 100);
    cp_add_text(b, "- ", "  ", u->text, keep);
    ck__buf_adds(b, " [...]");
    if (u->ref)
        ck__buf_printf(b, " (full text: read_evidence(ref=\"%s\", offset=%llu))", u->ref,
                       (unsigned long long)u->line);
    ck__buf_addc(b, '\n');
}

/* Newest first verbatim within three quarters of the budget, older ones as one-line excerpts
 * with a pointer to their full text, printed oldest first. */
static void cp_users(const ck__state *l, size_t budget, ck__buf *b) {
    size_t n = l->n_users, used = 0, verbatim_from = n;
    if (!n) return;
    while (verbatim_from > 0 && used + l->users[verbatim_from - 1].len + 3 <= budget * 3 / 4) {
        used += l->users[verbatim_from - 1].len + 3;
        verbatim_from--;
    }
    size_t excerpt_from = verbatim_from;
    while (excerpt_from > 0 && used + 220 <= budget) {
        used += 220;
        excerpt_from--;
    }
    if (excerpt_from == n && budget < 64) return;
    cp_section(b, "User Messages");
    if (excerpt_from > 0) {
        size_t stored = 0;
        for (size_t i = 0; i < excerpt_from; i++) stored += l->users[i].ref != NULL;
        if (stored == excerpt_from)
            ck__buf_printf(b, "(%zu older user messages are not shown; they are in the archive: "
                              "search with read_evidence(pattern=...))\n",
                           excerpt_from);
        else
            ck__buf_printf(b, "(%zu older user messages are not shown)\n", excerpt_from);
    }
    for (size_t i = excerpt_from; i < n; i++) {
        const ck__user_msg *u = &l->users[i];
        if (i < verbatim_from) {
            cp_user_excerpt(u, b);
            continue;
        }
        cp_add_text(b, "- ", "  ", u->text, u->len);
        ck__buf_addc(b, '\n');
    }
}

/* One list of strings, newest first within the budget; returns how many were left out. */
static size_t cp_list(const ck__strs *v, const char *prefix, size_t budget, ck__buf *b) {
    size_t from = v->n, used = 0, plen = strlen(prefix);
    while (from > 0 && used + v->v[from - 1].len + plen + 3 <= budget) {
        used += v->v[from - 1].len + plen + 3;
        from--;
    }
    for (size_t i = from; i < v->n; i++) {
        ck__buf_printf(b, "- %s", prefix);
        ck__buf_add(b, v->v[i].s, v->v[i].len);
        ck__buf_addc(b, '\n');
    }
    return from;
}

/* Modified files first, with all the room they need; read files get what is left, at most
 * `read_cap` bytes. */
static void cp_files(const ck__state *l, size_t budget, size_t read_cap, ck__buf *b) {
    if (!l->files_modified.n && !l->files_read.n) return;
    ck__buf tmp;
    ck__buf_init(&tmp);
    size_t start = tmp.len;
    size_t cut_m = cp_list(&l->files_modified, "modified: ", budget, &tmp);
    size_t left = budget > tmp.len - start ? budget - (tmp.len - start) : 0;
    if (left > read_cap) left = read_cap;
    size_t cut_r = cp_list(&l->files_read, "read: ", left, &tmp);
    if (tmp.len || cut_m || cut_r) {
        cp_section(b, "Files");
        ck__buf_add(b, tmp.data ? tmp.data : "", tmp.len);
        if (cut_m || cut_r)
            ck__buf_printf(b, "(%zu older modified and %zu older read files not listed; the "
                              "archive has the calls: search with read_evidence(pattern=...))\n",
                           cut_m, cut_r);
    }
    if (tmp.failed) b->failed = 1;
    ck__buf_dispose(&tmp);
}

static void cp_idents(const ck__state *l, const char *body, size_t body_len, size_t budget,
                      ck__buf *b) {
    if (!ck__idents_count(l->idents) || budget < 16) return;
    ck__buf ids;
    ck__buf_init(&ids);
    size_t left = 0;
    ck__idents_render(l->idents, body, body_len, 40, budget, &ids, &left);
    if (ids.len) {
        cp_section(b, "Identifiers");
        ck__buf_add(b, ids.data, ids.len);
        if (left)
            ck__buf_printf(b, "(up to %zu more in the archive: search with "
                              "read_evidence(pattern=...))\n",
                           left);
    }
    if (ids.failed) b->failed = 1;
    ck__buf_dispose(&ids);
}

static const ck__offload *cp_offload_at(const ck__cp_input *in, size_t i) {
    return i < in->n_offloads ? &in->offloads[i] : &in->more_offloads[i - in->n_offloads];
}

static void cp_offloads(const ck__cp_input *in, size_t budget, ck__buf *b) {
    size_t n = in->n_offloads + in->n_more_offloads, from = n, used = 0;
    if (!n) return;
    while (from > 0) {
        const ck__offload *o = cp_offload_at(in, from - 1);
        size_t need = strlen(o->ref) + o->tool_len + strlen(o->path) + 48;
        if (used + need > budget) break;
        used += need;
        from--;
    }
    if (from == n) return;
    cp_section(b, "Offloaded Outputs");
    for (size_t i = from; i < n; i++) {
        const ck__offload *o = cp_offload_at(in, i);
        ck__buf_adds(b, "- ");
        ck__buf_add_inline(b, o->ref, strlen(o->ref), 300);
        ck__buf_adds(b, " (");
        ck__buf_add_inline(b, o->tool, o->tool_len, 80);
        ck__buf_printf(b, ", %llu lines, %llu bytes): ", (unsigned long long)o->lines,
                       (unsigned long long)o->bytes);
        ck__buf_add_inline(b, o->path, strlen(o->path), 400);
        ck__buf_addc(b, '\n');
    }
    if (from)
        ck__buf_printf(b, "(%zu older outputs not listed; read_evidence(pattern=...) searches "
                          "them too)\n",
                       from);
}

static void cp_archives(const ck__state *l, size_t budget, ck__buf *b) {
    size_t n = l->n_archives, from = n, used = 0;
    if (n < 2) return; /* the header names the newest one */
    while (from > 0 && used + strlen(l->archives[from - 1].ref) + 64 <= budget) {
        used += strlen(l->archives[from - 1].ref) + 64;
        from--;
    }
    if (from == n) return;
    cp_section(b, "Archived Messages");
    for (size_t i = from; i < n; i++) {
        const ck__archive *a = &l->archives[i];
        ck__buf_printf(b, "- %s: messages %zu to %zu, %llu lines\n", a->ref, a->first,
                       a->end ? a->end - 1 : 0, (unsigned long long)a->lines);
    }
    if (from) ck__buf_printf(b, "(%zu older archives; the pattern search covers them)\n", from);
}

/* The sections, in the order the checkpoint shows them. */
enum { CP_HEAD, CP_BODY, CP_CON, CP_USERS, CP_FILES, CP_IDS, CP_OFF, CP_ARCH, CP_N };

/* The order in which sections give up room, first to last. */
static const int cp_cut_order[] = {CP_BODY, CP_IDS, CP_OFF, CP_ARCH, CP_USERS, CP_FILES, CP_CON};

typedef struct cp_sec {
    size_t budget; /* bytes */
    ck__buf text;
    uint64_t tokens;
} cp_sec;

/* The summary body's share in tokens, which the other shares are fractions of. */
static uint64_t cp_body_tokens(const ck__cp_input *in) {
    return in->body_tokens ? in->body_tokens : 256;
}

/* The bytes the files read may take (modified files take what they need). */
static size_t cp_read_cap(const ck__cp_input *in) {
    uint64_t body = cp_body_tokens(in);
    uint64_t t = body / 8 + body / 16;
    return t > SIZE_MAX / 8 ? SIZE_MAX / 2 : (size_t)(t * 4);
}

static void cp_render_one(const ck__cp_input *in, cp_sec *secs, int which) {
    cp_sec *s = &secs[which];
    s->text.len = 0;
    if (s->text.data) s->text.data[0] = '\0';
    const ck__state *l = in->lists;
    switch (which) {
        case CP_HEAD: cp_header(in, &s->text); break;
        case CP_BODY: cp_anchors(in->anchors, s->budget, &s->text); break;
        case CP_CON: cp_constraints(l, s->budget, &s->text); break;
        case CP_USERS: cp_users(l, s->budget, &s->text); break;
        case CP_FILES: cp_files(l, s->budget, cp_read_cap(in), &s->text); break;
        case CP_IDS:
            cp_idents(l, secs[CP_BODY].text.data ? secs[CP_BODY].text.data : "",
                      secs[CP_BODY].text.len, s->budget, &s->text);
            break;
        case CP_OFF: cp_offloads(in, s->budget, &s->text); break;
        case CP_ARCH: cp_archives(l, s->budget, &s->text); break;
    }
    /* Sections are sized by the built-in estimator: a host counter is asked only about the
     * whole checkpoint, once per text. */
    s->tokens = s->text.len ? ck_estimate_text(s->text.data, s->text.len, in->tokens->estimator)
                            : 0;
}

static uint64_t cp_total(const cp_sec *secs) {
    uint64_t total = 0;
    for (int k = 0; k < CP_N; k++) total = ck__tok_add(total, secs[k].tokens);
    return total;
}

static int cp_join(cp_sec *secs, char **out, size_t *len) {
    ck__buf all;
    ck__buf_init(&all);
    int failed = 0;
    for (int k = 0; k < CP_N; k++) {
        ck__buf_add(&all, secs[k].text.data ? secs[k].text.data : "", secs[k].text.len);
        failed |= secs[k].text.failed;
    }
    if (failed) all.failed = 1;
    *out = ck__buf_take(&all, len);
    return *out ? CK_OK : CK_ENOMEM;
}

static void cp_dispose(cp_sec *secs) {
    for (int k = 0; k < CP_N; k++) ck__buf_dispose(&secs[k].text);
}

/* The last resort of a view that must fit: the marker and, when the history is archived,
 * where to search it. */
static int cp_bare(const ck__cp_input *in, char **out, size_t *len) {
    ck__buf b;
    ck__buf_init(&b);
    ck__buf_adds(&b, ck_checkpoint_marker());
    if (in->lists->n_archives)
        ck__buf_adds(&b, "\nEarlier messages are archived: read_evidence(pattern=\"...\") "
                         "searches them.\n");
    else
        ck__buf_addc(&b, '\n');
    *out = ck__buf_take(&b, len);
    return *out ? CK_OK : CK_ENOMEM;
}

int ck__checkpoint_bare(const ck__cp_input *in, char **out, size_t *len) {
    return cp_bare(in, out, len);
}

/* What a checkpoint keeps before anything else gets room: the header, the anchors' titles,
 * every rule the user stated and every file the agent modified. */
int ck__checkpoint_must(const ck__cp_input *in, char **out, size_t *len) {
    ck__buf b;
    ck__buf_init(&b);
    cp_header(in, &b);
    cp_anchors(in->anchors, 0, &b); /* the sections' titles, which are never cut */
    cp_constraints(in->lists, SIZE_MAX / 2, &b);
    ck__strs none = {0};
    ck__state modified = *in->lists;
    modified.files_read = none;
    cp_files(&modified, SIZE_MAX / 2, 0, &b);
    *out = ck__buf_take(&b, len);
    return *out ? CK_OK : CK_ENOMEM;
}

int ck__checkpoint_minimal(const ck__cp_input *in, char **out, size_t *len) {
    ck__buf b;
    ck__buf_init(&b);
    cp_header(in, &b);
    *out = ck__buf_take(&b, len);
    return *out ? CK_OK : CK_ENOMEM;
}

/* Renders the sections within `cap` tokens (by the sum of their counts). */
static int cp_render_within(const ck__cp_input *in, uint64_t cap, char **out, size_t *len) {
    uint64_t body = cp_body_tokens(in);
    /* Shares of the room, in tokens; a section that needs less leaves the rest unused. */
    uint64_t share[CP_N] = {0};
    share[CP_BODY] = body;
    /* The rules and the modified files have all the room they need: the cap, not a share,
     * bounds them, and they give it up last. */
    share[CP_CON] = UINT64_MAX;
    share[CP_USERS] = body / 2;
    share[CP_FILES] = UINT64_MAX;
    share[CP_IDS] = body / 8;
    share[CP_OFF] = body / 16;
    share[CP_ARCH] = body / 32 + 32;
    cp_sec secs[CP_N];
    memset(secs, 0, sizeof secs);
    for (int k = 0; k < CP_N; k++) {
        ck__buf_init(&secs[k].text);
        secs[k].budget = share[k] > SIZE_MAX / 8 ? SIZE_MAX / 2 : (size_t)(share[k] * 4);
    }
    /* The identifiers are checked against the anchors, so the body renders first (the order
     * of the enum). */
    for (int k = 0; k < CP_N; k++) cp_render_one(in, secs, k);
    /* Sections give up room in the cut order until the whole fits; each one is rendered
     * again within what it may keep, measured in its own bytes per token. */
    for (int round = 0; round < 4; round++) {
        uint64_t total = cp_total(secs);
        for (size_t j = 0; j < sizeof cp_cut_order / sizeof *cp_cut_order && total > cap; j++) {
            int which = cp_cut_order[j];
            cp_sec *s = &secs[which];
            if (!s->tokens) continue;
            uint64_t over = total - cap;
            uint64_t keep = s->tokens > over ? s->tokens - over : 0;
            double per = (double)s->text.len / (double)s->tokens;
            s->budget = (size_t)((double)keep * per * 0.95);
            cp_render_one(in, secs, which);
            /* A section that cannot shrink to its room (its title and its "not shown" line
             * are larger) leaves entirely, before a later one in the order gives up any. */
            if (s->tokens > keep && which != CP_BODY) {
                s->budget = 0;
                cp_render_one(in, secs, which);
            }
            /* Identifiers the cut summary no longer quotes may now need listing. */
            if (which == CP_BODY) cp_render_one(in, secs, CP_IDS);
            total = cp_total(secs);
        }
        if (total <= cap) break;
    }
    int rc = cp_join(secs, out, len);
    cp_dispose(secs);
    return rc;
}

int ck__checkpoint_render(const ck__cp_input *in, char **out, size_t *len) {
    /* The sum of the sections' counts is close to the count of their join, not equal to it;
     * the cap is on the join, so a miss is rendered again with the cap lowered by it. */
    uint64_t cap = in->cap_tokens;
    for (int attempt = 0; attempt < 4; attempt++) {
        int rc = cp_render_within(in, cap, out, len);
        if (rc) return rc;
        uint64_t t = ck__tokcache_message_text(in->tokens, *out, *len);
        if (t <= in->cap_tokens) return CK_OK;
        ck__free(*out);
        *out = NULL;
        uint64_t miss = t - in->cap_tokens;
        cap = cap > miss + 8 ? cap - miss - 8 : 0;
    }
    int rc = ck__checkpoint_minimal(in, out, len);
    if (rc || ck__tokcache_message_text(in->tokens, *out, *len) <= in->cap_tokens) return rc;
    ck__free(*out);
    return cp_bare(in, out, len);
}
