/* Tool-call pairing: finding every violation of the providers' rules and repairing them.
 *
 * Both operations share one analysis. Calls are matched to results by id wherever they stand;
 * then each part gets a verdict. Repair is constructive: it re-emits every message in order and
 * places each call's results right behind it, so its output satisfies the rules by
 * construction rather than by patching one violation after another. */
#include <stdlib.h>
#include <string.h>

#include "./alloc.h"
#include "./idmap.h"
#include "./internal.h"

static const char STUB_TEXT[] = "result unavailable: context was compacted";

const char *ck_stub_result_text(void) { return STUB_TEXT; }

const char *ck_pair_issue_name(ck_pair_issue kind) {
    switch (kind) {
        case CK_PAIR_ORPHAN_RESULT: return "orphan_result";
        case CK_PAIR_MISSING_RESULT: return "missing_result";
        case CK_PAIR_NOT_ADJACENT: return "not_adjacent";
        case CK_PAIR_DUPLICATE_RESULT: return "duplicate_result";
        case CK_PAIR_DUPLICATE_CALL: return "duplicate_call";
        case CK_PAIR_EMPTY_ID: return "empty_id";
        case CK_PAIR_MISPLACED: return "misplaced";
        case CK_PAIR_RESULT_ORDER: return "result_order";
    }
    return "unknown";
}

/* The verdict on one part. */
enum {
    V_PLAIN = 0,    /* not a call or result, or a kept one */
    V_CALL,         /* a valid call */
    V_RESULT,       /* the result that answers a valid call */
    V_DROP,         /* a call or result that repair removes */
};

typedef struct analysis {
    ck_format format;
    const ck_history *h;
    unsigned char *verdict;  /* per part, indexed like h->parts */
    size_t *answer;          /* per part: for V_CALL the global part index of its result, or
                                CK_NONE; for V_RESULT the global part index of its call */
    size_t *part_msg;        /* global part index -> message index */
    ck_pair_violation *issues;
    size_t n_issues, cap_issues;
} analysis;

static int add_issue(analysis *a, ck_pair_issue kind, size_t gpart) {
    if (ck__grow((void **)&a->issues, &a->cap_issues, a->n_issues + 1, sizeof *a->issues))
        return CK_ENOMEM;
    const ck_part *p = &a->h->parts[gpart];
    size_t msg = a->part_msg[gpart];
    ck_pair_violation *v = &a->issues[a->n_issues++];
    v->kind = kind;
    v->index = msg;
    v->part = gpart - a->h->msgs[msg].first_part;
    v->id = p->id;
    v->id_len = p->id_len;
    return CK_OK;
}

static void analysis_dispose(analysis *a) {
    ck__free(a->verdict);
    ck__free(a->answer);
    ck__free(a->part_msg);
    ck__free(a->issues);
}

/* Where a result may stand for a call in message `m`: OpenAI wants it among the role "tool"
 * messages that directly follow; Anthropic wants it in the next message, a user message, before
 * any other content. */
static int is_adjacent(const analysis *a, size_t call_msg, size_t result_gpart,
                       int *order_only) {
    const ck_history *h = a->h;
    size_t r = a->part_msg[result_gpart];
    *order_only = 0;
    if (r <= call_msg) return 0;
    if (a->format == CK_FORMAT_OPENAI) {
        for (size_t i = call_msg + 1; i <= r; i++)
            if (h->msgs[i].role != CK_ROLE_TOOL) return 0;
        return 1;
    }
    if (r != call_msg + 1) return 0;
    const ck_part *parts = ck__msg_parts(h, r);
    size_t k = result_gpart - h->msgs[r].first_part;
    for (size_t j = 0; j < k; j++) {
        if (parts[j].kind != CK_PART_TOOL_RESULT) {
            *order_only = 1;
            return 0;
        }
    }
    return 1;
}

static int analyse(analysis *a, const ck_history *h, ck_format requested, ck_error *err) {
    memset(a, 0, sizeof *a);
    a->h = h;
    int rc = ck_history_format(h, requested, &a->format, err);
    if (rc) return rc;
    size_t n = h->n_parts ? h->n_parts : 1;
    a->verdict = ck__calloc(n, 1);
    a->answer = ck__malloc(n * sizeof *a->answer);
    a->part_msg = ck__malloc(n * sizeof *a->part_msg);
    /* The map holds calls only, so it is sized by their number: sized by every part, it was
     * the largest allocation of a 100,000-message compaction (16 MiB where the calls, a third
     * of the parts, need 4). */
    size_t n_calls = 0;
    for (size_t g = 0; g < h->n_parts; g++) n_calls += h->parts[g].kind == CK_PART_TOOL_CALL;
    ck__idmap calls;
    if (!a->verdict || !a->answer || !a->part_msg || ck__idmap_init(&calls, n_calls))
        return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    rc = CK_OK;
    ck_role result_role = a->format == CK_FORMAT_OPENAI ? CK_ROLE_TOOL : CK_ROLE_USER;

    /* Pass 1: calls. The first call with an id owns it. */
    for (size_t i = 0; i < h->n_msgs && !rc; i++) {
        for (size_t k = 0; k < h->msgs[i].n_parts && !rc; k++) {
            size_t g = h->msgs[i].first_part + k;
            const ck_part *p = &h->parts[g];
            a->part_msg[g] = i;
            a->answer[g] = CK_NONE;
            if (p->kind != CK_PART_TOOL_CALL) continue;
            a->verdict[g] = V_DROP;
            if (h->msgs[i].role != CK_ROLE_ASSISTANT) rc = add_issue(a, CK_PAIR_MISPLACED, g);
            else if (!p->id_len) rc = add_issue(a, CK_PAIR_EMPTY_ID, g);
            else {
                int put = ck__idmap_put(&calls, p->id, p->id_len, g);
                if (put < 0) rc = CK_ENOMEM;
                else if (put == 0) rc = add_issue(a, CK_PAIR_DUPLICATE_CALL, g);
                else a->verdict[g] = V_CALL;
            }
        }
    }
    /* Pass 2: results, matched to calls by id wherever they stand; the first one wins. */
    for (size_t g = 0; g < h->n_parts && !rc; g++) {
        const ck_part *p = &h->parts[g];
        if (p->kind != CK_PART_TOOL_RESULT) continue;
        a->verdict[g] = V_DROP;
        size_t call = p->id_len ? ck__idmap_get(&calls, p->id, p->id_len) : SIZE_MAX;
        if (h->msgs[a->part_msg[g]].role != result_role) rc = add_issue(a, CK_PAIR_MISPLACED, g);
        else if (!p->id_len) rc = add_issue(a, CK_PAIR_EMPTY_ID, g);
        else if (call == SIZE_MAX) rc = add_issue(a, CK_PAIR_ORPHAN_RESULT, g);
        else if (a->answer[call] != CK_NONE) rc = add_issue(a, CK_PAIR_DUPLICATE_RESULT, g);
        else {
            a->verdict[g] = V_RESULT;
            a->answer[call] = g;
            a->answer[g] = call;
            int order_only;
            if (!is_adjacent(a, a->part_msg[call], g, &order_only))
                rc = add_issue(a, order_only ? CK_PAIR_RESULT_ORDER : CK_PAIR_NOT_ADJACENT, g);
        }
    }
    /* Pass 3: calls nobody answered. */
    for (size_t g = 0; g < h->n_parts && !rc; g++)
        if (a->verdict[g] == V_CALL && a->answer[g] == CK_NONE)
            rc = add_issue(a, CK_PAIR_MISSING_RESULT, g);
    ck__idmap_dispose(&calls);
    if (rc) return ck__fail(err, rc, NULL, CK_NONE, NULL);
    return CK_OK;
}

static int issue_order(const void *x, const void *y) {
    const ck_pair_violation *a = x, *b = y;
    if (a->index != b->index) return a->index < b->index ? -1 : 1;
    if (a->part != b->part) return a->part < b->part ? -1 : 1;
    return (int)a->kind - (int)b->kind;
}

int ck_check_pairs(const ck_history *history, ck_format format, ck_pair_violation **out,
                   size_t *n, ck_error *err) {
    ck__error_clear(err);
    if (!history || !out || !n) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    *out = NULL;
    *n = 0;
    analysis a;
    int rc = analyse(&a, history, format, err);
    if (rc) {
        analysis_dispose(&a);
        return rc;
    }
    if (a.n_issues) qsort(a.issues, a.n_issues, sizeof *a.issues, issue_order);
    *out = a.issues;
    *n = a.n_issues;
    a.issues = NULL;
    analysis_dispose(&a);
    return CK_OK;
}

/* The user message that holds every result of the valid calls of message `m` and nothing
 * else, or CK_NONE. */
static size_t whole_result_message(const analysis *a, size_t m) {
    const ck_history *h = a->h;
    size_t found = CK_NONE, calls = 0;
    const ck__msg *call_msg = &h->msgs[m];
    for (size_t k = 0; k < call_msg->n_parts; k++) {
        size_t g = call_msg->first_part + k;
        if (a->verdict[g] != V_CALL) continue;
        calls++;
        size_t res = a->answer[g];
        if (res == CK_NONE) return CK_NONE;
        size_t r = a->part_msg[res];
        if (found != CK_NONE && r != found) return CK_NONE;
        found = r;
    }
    if (found == CK_NONE || h->msgs[found].role != CK_ROLE_USER ||
        h->msgs[found].n_parts != calls)
        return CK_NONE;
    return found;
}

/* Emits the results for the valid calls of assistant message `m`. For OpenAI they are whole
 * "tool" messages; for Anthropic, blocks at the head of the user message `zone` (CK_NONE: a
 * new user message), followed by that message's other kept parts. Results already in place
 * come first in their own order, so a valid history comes out unchanged. */
static int emit_results(const analysis *a, ck_view *v, size_t m, size_t zone,
                        unsigned char *emitted) {
    const ck_history *h = a->h;
    const ck__msg *call_msg = &h->msgs[m];
    int rc = CK_OK;
    ck_part stub;
    memset(&stub, 0, sizeof stub);
    stub.kind = CK_PART_TOOL_RESULT;
    stub.text = STUB_TEXT;
    stub.text_len = sizeof STUB_TEXT - 1;
    stub.name = "";
    stub.host = 0;
    if (a->format == CK_FORMAT_OPENAI) {
        stub.flags = CK_PART_OPENAI;
        /* Results already in the tool run behind the call. */
        for (size_t r = m + 1; r < h->n_msgs && h->msgs[r].role == CK_ROLE_TOOL && !rc; r++) {
            for (size_t k = 0; k < h->msgs[r].n_parts; k++) {
                size_t g = h->msgs[r].first_part + k;
                if (a->verdict[g] == V_RESULT && a->part_msg[a->answer[g]] == m && !emitted[g]) {
                    emitted[g] = 1;
                    rc = ck__view_keep(v, h, r);
                    break;
                }
            }
        }
        for (size_t k = 0; k < call_msg->n_parts && !rc; k++) {
            size_t g = call_msg->first_part + k;
            if (a->verdict[g] != V_CALL) continue;
            size_t res = a->answer[g];
            if (res != CK_NONE && emitted[res]) continue;
            if (res != CK_NONE) {
                emitted[res] = 1;
                rc = ck__view_keep(v, h, a->part_msg[res]);
            } else {
                stub.id = h->parts[g].id;
                stub.id_len = h->parts[g].id_len;
                if (!(rc = ck__view_begin(v, CK_OP_NEW, CK_NONE, CK_ROLE_TOOL, 0)))
                    rc = ck__view_add_new_part(v, &stub);
                ck__view_end(v, h);
            }
        }
        return rc;
    }
    stub.flags = CK_PART_ANTHROPIC;
    if (zone == CK_NONE) {
        /* A user message that holds exactly this call's results and nothing else moves here
         * whole, as the same object, rather than being rebuilt. */
        size_t whole = whole_result_message(a, m);
        if (whole != CK_NONE) {
            for (size_t k = 0; k < h->msgs[whole].n_parts; k++)
                emitted[h->msgs[whole].first_part + k] = 1;
            return ck__view_keep(v, h, whole);
        }
    }
    rc = zone == CK_NONE ? ck__view_begin(v, CK_OP_NEW, CK_NONE, CK_ROLE_USER, 0)
                         : ck__view_begin(v, CK_OP_EDIT, zone, CK_ROLE_USER, h->msgs[zone].flags);
    if (zone != CK_NONE) {
        for (size_t k = 0; k < h->msgs[zone].n_parts && !rc; k++) {
            size_t g = h->msgs[zone].first_part + k;
            if (a->verdict[g] == V_RESULT && a->part_msg[a->answer[g]] == m) {
                emitted[g] = 1;
                rc = ck__view_add_src_part(v, h, zone, k);
            }
        }
    }
    for (size_t k = 0; k < call_msg->n_parts && !rc; k++) {
        size_t g = call_msg->first_part + k;
        if (a->verdict[g] != V_CALL) continue;
        size_t res = a->answer[g];
        if (res != CK_NONE && emitted[res]) continue;
        if (res != CK_NONE) {
            emitted[res] = 1;
            size_t rm = a->part_msg[res];
            rc = ck__view_add_src_part(v, h, rm, res - h->msgs[rm].first_part);
        } else {
            stub.id = h->parts[g].id;
            stub.id_len = h->parts[g].id_len;
            rc = ck__view_add_new_part(v, &stub);
        }
    }
    if (zone != CK_NONE) {
        for (size_t k = 0; k < h->msgs[zone].n_parts && !rc; k++) {
            size_t g = h->msgs[zone].first_part + k;
            if (a->verdict[g] == V_PLAIN) rc = ck__view_add_src_part(v, h, zone, k);
        }
    }
    ck__view_end(v, h);
    return rc;
}

static const char DROPPED_TEXT[] =
    "(tool call removed: it was misplaced, or its id was empty or already used)";

/* Emits message `i` without the parts repair removes (and without results, which travel with
 * their calls). Returns with *emitted_any 0 when a message that only carried results is gone. */
static int emit_plain(const analysis *a, ck_view *v, size_t i) {
    const ck_history *h = a->h;
    const ck__msg *msg = &h->msgs[i];
    size_t kept = 0;
    for (size_t k = 0; k < msg->n_parts; k++) {
        unsigned char vd = a->verdict[msg->first_part + k];
        if (vd == V_PLAIN || vd == V_CALL) kept++;
    }
    if (kept == msg->n_parts) return ck__view_keep(v, h, i);
    if (kept == 0) {
        /* A message that carried only tool results (a tool message, or an Anthropic user
         * message) has nothing left to say once they moved or went. Any other message keeps a
         * note instead of its removed calls: dropping it would change whose turn it is. */
        int only_results = 1;
        for (size_t k = 0; k < msg->n_parts; k++)
            if (ck__msg_parts(h, i)[k].kind != CK_PART_TOOL_RESULT) only_results = 0;
        /* A "tool" message is a result whatever else it holds: a note there would stand as a
         * result without a call. */
        if ((only_results && msg->role != CK_ROLE_ASSISTANT) || msg->role == CK_ROLE_TOOL)
            return CK_OK;
        int rc = ck__view_begin(v, CK_OP_EDIT, i, msg->role, msg->flags);
        ck_part note;
        memset(&note, 0, sizeof note);
        note.kind = CK_PART_TEXT;
        note.text = DROPPED_TEXT;
        note.text_len = sizeof DROPPED_TEXT - 1;
        note.id = note.name = "";
        if (!rc) rc = ck__view_add_new_part(v, &note);
        ck__view_end(v, h);
        return rc;
    }
    int rc = ck__view_begin(v, CK_OP_EDIT, i, msg->role, msg->flags);
    for (size_t k = 0; k < msg->n_parts && !rc; k++) {
        unsigned char vd = a->verdict[msg->first_part + k];
        if (vd == V_PLAIN || vd == V_CALL) rc = ck__view_add_src_part(v, h, i, k);
    }
    ck__view_end(v, h);
    return rc;
}

static int has_valid_call(const analysis *a, size_t i) {
    const ck__msg *msg = &a->h->msgs[i];
    for (size_t k = 0; k < msg->n_parts; k++)
        if (a->verdict[msg->first_part + k] == V_CALL) return 1;
    return 0;
}

int ck_repair_pairs(const ck_history *history, ck_format format, ck_view **out,
                    ck_error *err) {
    ck__error_clear(err);
    if (!history || !out) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    *out = NULL;
    analysis a;
    int rc = analyse(&a, history, format, err);
    ck_view *v = rc ? NULL : ck__view_new();
    unsigned char *emitted = rc ? NULL : ck__calloc(history->n_parts ? history->n_parts : 1, 1);
    if (!rc && (!v || !emitted)) rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    const ck_history *h = history;
    size_t consumed_zone = CK_NONE; /* an Anthropic user message already emitted as a zone */
    for (size_t i = 0; i < h->n_msgs && !rc; i++) {
        if (i == consumed_zone) continue;
        rc = emit_plain(&a, v, i);
        if (rc || h->msgs[i].role != CK_ROLE_ASSISTANT || !has_valid_call(&a, i)) continue;
        size_t zone = CK_NONE;
        if (a.format == CK_FORMAT_ANTHROPIC && i + 1 < h->n_msgs &&
            h->msgs[i + 1].role == CK_ROLE_USER) {
            zone = i + 1;
            consumed_zone = zone;
        }
        rc = emit_results(&a, v, i, zone, emitted);
    }
    ck__free(emitted);
    analysis_dispose(&a);
    if (rc) {
        ck_view_free(v);
        if (err && err->code == CK_OK) ck__fail(err, rc, NULL, CK_NONE, NULL);
        return rc;
    }
    *out = v;
    return CK_OK;
}
