/* Tool-call pairing: finding every violation of the providers' rules and repairing them.
 *
 * Both operations share one analysis. Calls are matched to results by id wherever they stand;
 * then each part gets a verdict. Repair is constructive: it re-emits every message in order and
 * places each call's results right behind it, so its output satisfies the rules by
 * construction rather than by patching one violation after another. */
#include <stdlib.h>
#include <string.h>

#include "./alloc.h"
#include "./buf.h"
#include "./fmt.h"
#include "./internal.h"

static const char STUB_TEXT[] = "result unavailable: context was compacted";

const char *ck_stub_result_text(void) { return STUB_TEXT; }

/* The id as a JSON string literal, cut to 64 bytes (see ck_pair_violation_describe()). */
static void quote_id(ck__buf *b, const char *id, size_t len) {
    if (len > 64) {
        len = 64;
        while (len && ((unsigned char)id[len] & 0xC0) == 0x80) len--; /* a whole character */
    }
    ck__buf_addc(b, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b"
                        : c == '\f' ? "\\f" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t" : NULL;
        if (esc) ck__buf_adds(b, esc);
        else if (c < 0x20) ck__buf_printf(b, "\\u%04x", c);
        else ck__buf_addc(b, (char)c);
    }
    ck__buf_addc(b, '"');
}

int ck_pair_violation_describe(const ck_history *h, const ck_pair_violation *v, ck_format format,
                               char **out, size_t *len) {
    if (!h || !v || !out) return CK_EINVAL;
    int is_call = v->index < h->n_msgs && v->part < h->msgs[v->index].n_parts &&
                  ck__msg_parts(h, v->index)[v->part].kind == CK_PART_TOOL_CALL;
    const char *what = is_call ? "tool call" : "tool result";
    const char *tail;
    switch (v->kind) {
        case CK_PAIR_ORPHAN_RESULT: what = "tool result"; tail = "answers no tool call"; break;
        case CK_PAIR_MISSING_RESULT: what = "tool call"; tail = "has no tool result"; break;
        case CK_PAIR_NOT_ADJACENT:
            what = "tool result";
            tail = "does not directly follow the message of its call";
            break;
        case CK_PAIR_DUPLICATE_RESULT:
            what = "tool result";
            tail = "is a second result for the same call";
            break;
        case CK_PAIR_DUPLICATE_CALL:
            what = "tool call";
            tail = "reuses the id of an earlier call";
            break;
        case CK_PAIR_EMPTY_ID: tail = NULL; break;
        case CK_PAIR_MISPLACED:
            tail = is_call ? "is outside an assistant message"
                   : format == CK_FORMAT_ANTHROPIC ? "is outside a user message"
                                                   : "is outside a tool message";
            break;
        case CK_PAIR_RESULT_ORDER:
            what = "tool result";
            tail = "comes after other content in its message";
            break;
        default: tail = "breaks a pairing rule"; break;
    }
    ck__buf b;
    ck__buf_init(&b);
    ck__buf_printf(&b, "messages[%zu]: %s ", v->index, what);
    if (!tail) ck__buf_adds(&b, "has an empty id ");
    quote_id(&b, v->id ? v->id : "", v->id ? v->id_len : 0);
    if (tail) {
        ck__buf_addc(&b, ' ');
        ck__buf_adds(&b, tail);
    }
    size_t n = 0;
    *out = ck__buf_take(&b, &n);
    if (!*out) return CK_ENOMEM;
    if (len) *len = n;
    return CK_OK;
}

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
    V_TEXT,         /* a result repair removes but keeps as text (it could not be stored) */
    V_ATTACHED,     /* an item attached to a valid result (CK_PART_ATTACHED): goes with it */
};

typedef struct analysis {
    ck_format format;
    const ck__fmt *fmt; /* the dialect's pairing rules */
    const ck_history *h;
    unsigned char *verdict;  /* per part, indexed like h->parts */
    unsigned char *why;      /* per dropped part: the ck_pair_issue that dropped it */
    size_t *answer;          /* per part: for V_CALL the global part index of its result, or
                                CK_NONE; for V_RESULT the global part index of its call */
    size_t *chain;           /* per call: the previous call with the same id, or CK_NONE */
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

/* Drops part g for the reason `kind`, which is also a violation. */
static int drop(analysis *a, ck_pair_issue kind, size_t g) {
    a->verdict[g] = V_DROP;
    a->why[g] = (unsigned char)kind;
    return add_issue(a, kind, g);
}

static void analysis_dispose(analysis *a) {
    ck__free(a->verdict);
    ck__free(a->why);
    ck__free(a->answer);
    ck__free(a->chain);
    ck__free(a->part_msg);
    ck__free(a->issues);
}

/* Where a result may stand for a call in message `m`, by the dialect's rules: among the
 * result messages that directly follow (Chat Completions); in the next message, before any
 * other content (CK__PAIR_NEXT_MESSAGE: Anthropic, Gemini); anywhere after it
 * (CK__PAIR_ANY_LATER: Responses items). Items attached to results count as results. */
static int is_adjacent(const analysis *a, size_t call_msg, size_t result_gpart,
                       int *order_only) {
    const ck_history *h = a->h;
    size_t r = a->part_msg[result_gpart];
    *order_only = 0;
    if (r <= call_msg) return 0;
    if (a->fmt->pairing & CK__PAIR_ANY_LATER) return 1;
    if (!(a->fmt->pairing & CK__PAIR_NEXT_MESSAGE)) {
        for (size_t i = call_msg + 1; i <= r; i++)
            if (h->msgs[i].role != a->fmt->result_role) return 0;
        return 1;
    }
    if (r != call_msg + 1) return 0;
    const ck_part *parts = ck__msg_parts(h, r);
    size_t k = result_gpart - h->msgs[r].first_part;
    for (size_t j = 0; j < k; j++) {
        if (parts[j].kind != CK_PART_TOOL_RESULT && !(parts[j].flags & CK_PART_ATTACHED)) {
            *order_only = 1;
            return 0;
        }
    }
    return 1;
}

static int pair(analysis *a, size_t call, size_t g) {
    a->verdict[g] = V_RESULT;
    a->answer[call] = g;
    a->answer[g] = call;
    int order_only;
    if (!is_adjacent(a, a->part_msg[call], g, &order_only))
        return add_issue(a, order_only ? CK_PAIR_RESULT_ORDER : CK_PAIR_NOT_ADJACENT, g);
    return CK_OK;
}

/* A result whose id's newest call before it is answered already (or that comes before every
 * call of its id): the newest unanswered call before it, else the oldest unanswered one after
 * it. Rare, so a walk of the id's chain of calls is fine. */
static size_t unanswered_call(const analysis *a, size_t newest, size_t r_msg) {
    size_t after = CK_NONE;
    for (size_t c = newest; c != CK_NONE; c = a->chain[c]) {
        if (a->answer[c] != CK_NONE) continue;
        if (a->part_msg[c] < r_msg) return c;
        after = c;
    }
    return after;
}

/* Calls and results are paired turn by turn: a result answers the newest call with its id
 * that comes before it, so an agent that names every call "call_0" keeps every pair. Ids must
 * still be unique where the provider says so: within one message everywhere, and across the
 * whole request for Anthropic. */
static int analyse(analysis *a, const ck_history *h, ck_format requested, ck_error *err) {
    memset(a, 0, sizeof *a);
    a->h = h;
    int rc = ck_history_format(h, requested, &a->format, err);
    if (rc) return rc;
    if (!(a->fmt = ck__fmt_of(a->format)))
        return ck__fail(err, CK_EFORMAT, "no pairing rules for this format", CK_NONE, NULL);
    size_t n = h->n_parts ? h->n_parts : 1;
    a->verdict = ck__calloc(n, 1);
    a->why = ck__calloc(n, 1);
    a->answer = ck__malloc(n * sizeof *a->answer);
    a->chain = ck__malloc(n * sizeof *a->chain);
    a->part_msg = ck__malloc(n * sizeof *a->part_msg);
    /* Per id number (see ck_history), the newest call with that id so far. */
    size_t *calls = ck__id_index(h);
    if (!a->verdict || !a->why || !a->answer || !a->chain || !a->part_msg || !calls) {
        ck__free(calls);
        return ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    }
    ck_role result_role = a->fmt->result_role;
    int unique_in_request = (a->fmt->pairing & CK__PAIR_IDS_UNIQUE) != 0;
    size_t *pending = NULL, n_pending = 0, cap_pending = 0;
    /* One pass in message order: each call becomes its id's newest; each result answers its
     * id's newest call when that one is still open. */
    for (size_t i = 0; i < h->n_msgs && !rc; i++) {
        for (size_t k = 0; k < h->msgs[i].n_parts && !rc; k++) {
            size_t g = h->msgs[i].first_part + k;
            const ck_part *p = &h->parts[g];
            a->part_msg[g] = i;
            a->answer[g] = a->chain[g] = CK_NONE;
            if (p->kind == CK_PART_TOOL_CALL) {
                if (h->msgs[i].role != CK_ROLE_ASSISTANT) rc = drop(a, CK_PAIR_MISPLACED, g);
                else if (!p->id_len) rc = drop(a, CK_PAIR_EMPTY_ID, g);
                if (rc || a->verdict[g] == V_DROP) continue;
                size_t prev = calls[h->id_num[g]];
                if (prev != SIZE_MAX && (unique_in_request || a->part_msg[prev] == i)) {
                    rc = drop(a, CK_PAIR_DUPLICATE_CALL, g);
                    continue;
                }
                a->verdict[g] = V_CALL;
                a->chain[g] = prev == SIZE_MAX ? CK_NONE : prev;
                calls[h->id_num[g]] = g;
            } else if (p->kind == CK_PART_TOOL_RESULT) {
                if (h->msgs[i].role != result_role) rc = drop(a, CK_PAIR_MISPLACED, g);
                else if (!p->id_len) rc = drop(a, CK_PAIR_EMPTY_ID, g);
                if (rc || a->verdict[g] == V_DROP) continue;
                size_t call = calls[h->id_num[g]];
                if (call != SIZE_MAX && a->answer[call] == CK_NONE) {
                    rc = pair(a, call, g);
                    continue;
                }
                if (ck__grow((void **)&pending, &cap_pending, n_pending + 1, sizeof *pending))
                    rc = CK_ENOMEM;
                else
                    pending[n_pending++] = g;
            }
        }
    }
    /* Results that came before their call, or after another result for it. */
    for (size_t j = 0; j < n_pending && !rc; j++) {
        size_t g = pending[j];
        size_t newest = calls[h->id_num[g]];
        size_t call = newest == SIZE_MAX ? CK_NONE : unanswered_call(a, newest, a->part_msg[g]);
        if (call != CK_NONE) rc = pair(a, call, g);
        else rc = drop(a, newest == SIZE_MAX ? CK_PAIR_ORPHAN_RESULT : CK_PAIR_DUPLICATE_RESULT, g);
    }
    ck__free(pending);
    /* Calls nobody answered. */
    for (size_t g = 0; g < h->n_parts && !rc; g++)
        if (a->verdict[g] == V_CALL && a->answer[g] == CK_NONE)
            rc = add_issue(a, CK_PAIR_MISSING_RESULT, g);
    /* Items attached to a result share its fate: they go where it goes, or with it. */
    for (size_t g = 1; g < h->n_parts && !rc; g++) {
        if (!(h->parts[g].flags & CK_PART_ATTACHED) || a->part_msg[g] != a->part_msg[g - 1])
            continue;
        size_t owner = (h->parts[g - 1].flags & CK_PART_ATTACHED) ? a->answer[g - 1] : g - 1;
        if (owner == CK_NONE || h->parts[owner].kind != CK_PART_TOOL_RESULT) continue;
        a->answer[g] = owner;
        if (a->verdict[owner] == V_RESULT) a->verdict[g] = V_ATTACHED;
        else if (a->verdict[owner] == V_DROP) {
            a->verdict[g] = V_DROP;
            a->why[g] = a->why[owner];
        }
    }
    ck__free(calls);
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
    if (found == CK_NONE || h->msgs[found].role != a->fmt->result_role) return CK_NONE;
    size_t attached = 0;
    for (size_t k = 0; k < h->msgs[found].n_parts; k++)
        attached += a->verdict[h->msgs[found].first_part + k] == V_ATTACHED;
    return h->msgs[found].n_parts == calls + attached ? found : CK_NONE;
}

static int add_note(const analysis *a, ck_view *v, size_t g);
static int noted(const analysis *a, size_t g);

/* A result (or an item attached to one) that may stay where it stands: anywhere after its
 * call, by CK__PAIR_ANY_LATER, so that repair gives a valid history of items back as it was. */
static int in_place(const analysis *a, size_t g) {
    if (!(a->fmt->pairing & CK__PAIR_ANY_LATER)) return 0;
    if (a->verdict[g] == V_ATTACHED) g = a->answer[g];
    return a->verdict[g] == V_RESULT && a->part_msg[g] > a->part_msg[a->answer[g]];
}

/* Adds result part k of message m to the view's open message, with the items attached to it. */
static int add_result(const analysis *a, ck_view *v, size_t m, size_t k) {
    const ck_history *h = a->h;
    int rc = ck__view_add_src_part(v, h, m, k);
    size_t first = h->msgs[m].first_part;
    for (size_t j = k + 1; j < h->msgs[m].n_parts && !rc; j++) {
        if (a->verdict[first + j] != V_ATTACHED || a->answer[first + j] != first + k) break;
        rc = ck__view_add_src_part(v, h, m, j);
    }
    return rc;
}

/* Result message r, kept for its result g: as it is when nothing in it is removed, else
 * rebuilt with only that result and what is attached to it (a call that stood in it is
 * noted after it, by emit_plain). */
static int keep_result_message(const analysis *a, ck_view *v, size_t r, size_t g) {
    const ck_history *h = a->h;
    size_t first = h->msgs[r].first_part;
    int whole = 1;
    for (size_t k = 0; k < h->msgs[r].n_parts; k++)
        whole &= a->verdict[first + k] != V_DROP && a->verdict[first + k] != V_TEXT;
    if (whole) return ck__view_keep(v, h, r);
    int rc = ck__view_begin(v, CK_OP_EDIT, r, h->msgs[r].role, h->msgs[r].flags);
    if (!rc) rc = add_result(a, v, r, g - first);
    ck__view_end(v, h);
    return rc;
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
    if (!(a->fmt->pairing & CK__PAIR_NEXT_MESSAGE)) {
        stub.flags = a->format == CK_FORMAT_OPENAI ? CK_PART_OPENAI : 0;
        /* Results already in the tool run behind the call. */
        for (size_t r = m + 1; r < h->n_msgs && h->msgs[r].role == a->fmt->result_role && !rc;
             r++) {
            for (size_t k = 0; k < h->msgs[r].n_parts; k++) {
                size_t g = h->msgs[r].first_part + k;
                if (a->verdict[g] == V_RESULT && a->part_msg[a->answer[g]] == m && !emitted[g] &&
                    !in_place(a, g)) {
                    emitted[g] = 1;
                    rc = keep_result_message(a, v, r, g);
                    break;
                }
            }
        }
        for (size_t k = 0; k < call_msg->n_parts && !rc; k++) {
            size_t g = call_msg->first_part + k;
            if (a->verdict[g] != V_CALL) continue;
            size_t res = a->answer[g];
            if (res != CK_NONE && (emitted[res] || in_place(a, res))) continue;
            if (res != CK_NONE) {
                emitted[res] = 1;
                rc = keep_result_message(a, v, a->part_msg[res], res);
            } else {
                stub.id = h->parts[g].id;
                stub.id_len = h->parts[g].id_len;
                if (a->fmt->pairing & CK__PAIR_RESULT_NAMED) {
                    stub.name = h->parts[g].name;
                    stub.name_len = h->parts[g].name_len;
                }
                stub.flags = (stub.flags & ~CK_PART_MADE_ID) | (h->parts[g].flags & CK_PART_MADE_ID);
                if (!(rc = ck__view_begin(v, CK_OP_NEW, CK_NONE, a->fmt->result_role, 0)))
                    rc = ck__view_add_new_part(v, &stub);
                ck__view_end(v, h);
            }
        }
        return rc;
    }
    stub.flags = a->format == CK_FORMAT_ANTHROPIC ? CK_PART_ANTHROPIC : 0;
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
    /* The results' message has the dialect's result role (user for Anthropic, tool for the
     * AI SDK). */
    ck_role rr = a->fmt->result_role;
    rc = zone == CK_NONE ? ck__view_begin(v, CK_OP_NEW, CK_NONE, rr, 0)
                         : ck__view_begin(v, CK_OP_EDIT, zone, rr, h->msgs[zone].flags);
    if (zone != CK_NONE) {
        for (size_t k = 0; k < h->msgs[zone].n_parts && !rc; k++) {
            size_t g = h->msgs[zone].first_part + k;
            if (a->verdict[g] == V_RESULT && a->part_msg[a->answer[g]] == m) {
                emitted[g] = 1;
                rc = add_result(a, v, zone, k);
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
            rc = add_result(a, v, rm, res - h->msgs[rm].first_part);
        } else {
            stub.id = h->parts[g].id;
            stub.id_len = h->parts[g].id_len;
            if (a->fmt->pairing & CK__PAIR_RESULT_NAMED) {
                stub.name = h->parts[g].name;
                stub.name_len = h->parts[g].name_len;
            }
            stub.flags = (stub.flags & ~CK_PART_MADE_ID) | (h->parts[g].flags & CK_PART_MADE_ID);
            rc = ck__view_add_new_part(v, &stub);
        }
    }
    if (zone != CK_NONE) {
        for (size_t k = 0; k < h->msgs[zone].n_parts && !rc; k++) {
            size_t g = h->msgs[zone].first_part + k;
            if (a->verdict[g] == V_PLAIN) rc = ck__view_add_src_part(v, h, zone, k);
            else if (noted(a, g)) rc = add_note(a, v, g);
        }
    }
    ck__view_end(v, h);
    return rc;
}

static const char DROPPED_TEXT[] =
    "(tool call removed: it was misplaced, or its id was empty or already used)";

/* The text that stands in the view for a part repair removes: a dropped call, with its
 * arguments, so the turn still says what the agent did; a result kept as text. Owned by the
 * view. */
static int add_note(const analysis *a, ck_view *v, size_t g) {
    const ck_part *p = &a->h->parts[g];
    ck__buf b;
    ck__buf_init(&b);
    if (p->kind == CK_PART_TOOL_CALL) {
        const char *why = a->why[g] == CK_PAIR_MISPLACED ? "it stood outside an assistant message"
                          : a->why[g] == CK_PAIR_EMPTY_ID ? "its id was empty"
                                                          : "its id was already used";
        ck__buf_adds(&b, "(tool call ");
        ck__buf_add_inline(&b, p->name, p->name_len, 200);
        ck__buf_printf(&b, " removed by ctxkeel: %s; its arguments were: ", why);
        ck__buf_add(&b, p->text, p->text_len);
        ck__buf_addc(&b, ')');
    } else {
        ck__buf_adds(&b, "(ctxkeel: a tool result for call ");
        ck__buf_add_inline(&b, p->id, p->id_len, 200);
        ck__buf_adds(&b, " had no place next to its call and could not be stored, so it is kept "
                         "here as text)\n");
        ck__buf_add(&b, p->text, p->text_len);
    }
    const char *text = b.failed ? NULL : ck__view_own(v, b.data ? b.data : "", b.len);
    size_t len = b.len;
    ck__buf_dispose(&b);
    if (!text) return CK_ENOMEM;
    ck_part note;
    memset(&note, 0, sizeof note);
    note.kind = CK_PART_TEXT;
    note.text = text;
    note.text_len = len;
    note.id = note.name = "";
    return ck__view_add_new_part(v, &note);
}

/* True when part g is replaced by a note in its message. */
static int noted(const analysis *a, size_t g) {
    unsigned char vd = a->verdict[g];
    return vd == V_TEXT || (vd == V_DROP && a->h->parts[g].kind == CK_PART_TOOL_CALL);
}

/* Emits message `i` without the parts repair removes (and without results, which travel with
 * their calls); removed calls and results kept as text leave a note in their place. A message
 * that only carried results that moved or went is gone. */
static int emit_plain(const analysis *a, ck_view *v, size_t i) {
    const ck_history *h = a->h;
    const ck__msg *msg = &h->msgs[i];
    size_t kept = 0, notes = 0;
    for (size_t k = 0; k < msg->n_parts; k++) {
        unsigned char vd = a->verdict[msg->first_part + k];
        kept += vd == V_PLAIN || vd == V_CALL || in_place(a, msg->first_part + k);
        notes += noted(a, msg->first_part + k);
    }
    if (kept == msg->n_parts) return ck__view_keep(v, h, i);
    int rc = CK_OK;
    if (msg->role == CK_ROLE_TOOL && !(a->fmt->pairing & CK__PAIR_NEXT_MESSAGE)) {
        /* A "tool" message is a result whatever else it holds: a note there would stand as a
         * result without a call, so each note becomes a user message. */
        for (size_t k = 0; k < msg->n_parts && !rc; k++) {
            size_t g = msg->first_part + k;
            if (!noted(a, g)) continue;
            rc = ck__view_begin(v, CK_OP_NEW, CK_NONE, CK_ROLE_USER, 0);
            if (!rc) rc = add_note(a, v, g);
            ck__view_end(v, h);
        }
        return rc;
    }
    if (kept == 0 && notes == 0) {
        /* Any message but one that only carried results keeps a note instead of what was
         * removed: dropping it would change whose turn it is. */
        int only_results = 1;
        for (size_t k = 0; k < msg->n_parts; k++)
            if (ck__msg_parts(h, i)[k].kind != CK_PART_TOOL_RESULT &&
                !(ck__msg_parts(h, i)[k].flags & CK_PART_ATTACHED))
                only_results = 0;
        if (only_results && msg->role != CK_ROLE_ASSISTANT) return CK_OK;
        rc = ck__view_begin(v, CK_OP_EDIT, i, msg->role, msg->flags);
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
    rc = ck__view_begin(v, CK_OP_EDIT, i, msg->role, msg->flags);
    for (size_t k = 0; k < msg->n_parts && !rc; k++) {
        size_t g = msg->first_part + k;
        unsigned char vd = a->verdict[g];
        if (vd == V_PLAIN || vd == V_CALL || in_place(a, g)) rc = ck__view_add_src_part(v, h, i, k);
        else if (noted(a, g)) rc = add_note(a, v, g);
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

/* What the repair does, as actions in message order (see ck__pairs_repair()). */
static int list_actions(const analysis *a, ck__pair_action **out, size_t *n) {
    const ck_history *h = a->h;
    ck__pair_action *v = NULL;
    size_t cap = 0, count = 0;
    for (size_t g = 0; g < h->n_parts; g++) {
        const ck_part *p = &h->parts[g];
        int kind = -1;
        unsigned char vd = a->verdict[g];
        if (vd == V_ATTACHED || (p->flags & CK_PART_ATTACHED)) continue; /* its result's */
        if (vd == V_TEXT) kind = CK_REPAIR_KEPT_AS_TEXT;
        else if (vd == V_DROP && p->kind == CK_PART_TOOL_CALL) kind = CK_REPAIR_CALL_DROPPED;
        else if (vd == V_DROP)
            kind = a->why[g] == CK_PAIR_ORPHAN_RESULT      ? CK_REPAIR_ORPHAN_DROPPED
                   : a->why[g] == CK_PAIR_DUPLICATE_RESULT ? CK_REPAIR_DUPLICATE_DROPPED
                                                           : CK_REPAIR_MISPLACED_DROPPED;
        else if (vd == V_CALL && a->answer[g] == CK_NONE) kind = CK_REPAIR_STUB_ADDED;
        else if (vd == V_RESULT) {
            int order_only;
            if (!is_adjacent(a, a->part_msg[a->answer[g]], g, &order_only))
                kind = CK_REPAIR_RESULT_MOVED;
        }
        if (kind < 0) continue;
        if (ck__grow((void **)&v, &cap, count + 1, sizeof *v)) {
            ck__free(v);
            return CK_ENOMEM;
        }
        v[count].kind = (ck_repair_kind)kind;
        v[count].msg = a->part_msg[g];
        v[count].part = g;
        count++;
    }
    *out = v;
    *n = count;
    return CK_OK;
}

int ck__pairs_repair(const ck_history *history, ck_format format, const unsigned char *keep_text,
                     ck_view **out, ck__pair_action **actions, size_t *n_actions,
                     ck_error *err) {
    ck__error_clear(err);
    if (actions) *actions = NULL;
    if (n_actions) *n_actions = 0;
    if (!history) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    if (out) *out = NULL;
    analysis a;
    int rc = analyse(&a, history, format, err);
    const ck_history *h = history;
    if (!rc && keep_text)
        for (size_t g = 0; g < h->n_parts; g++)
            if (keep_text[g] && a.verdict[g] == V_DROP && h->parts[g].kind == CK_PART_TOOL_RESULT)
                a.verdict[g] = V_TEXT;
    if (!rc && actions && (rc = list_actions(&a, actions, n_actions)))
        ck__fail(err, rc, NULL, CK_NONE, NULL);
    if (rc || !out) {
        analysis_dispose(&a);
        return rc;
    }
    ck_view *v = ck__view_new();
    unsigned char *emitted = ck__calloc(history->n_parts ? history->n_parts : 1, 1);
    if (!v || !emitted) rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    size_t consumed_zone = CK_NONE; /* an Anthropic user message already emitted as a zone */
    for (size_t i = 0; i < h->n_msgs && !rc; i++) {
        if (i == consumed_zone) continue;
        rc = emit_plain(&a, v, i);
        if (rc || h->msgs[i].role != CK_ROLE_ASSISTANT || !has_valid_call(&a, i)) continue;
        size_t zone = CK_NONE;
        if ((a.fmt->pairing & CK__PAIR_NEXT_MESSAGE) && i + 1 < h->n_msgs &&
            h->msgs[i + 1].role == a.fmt->result_role) {
            zone = i + 1;
            consumed_zone = zone;
        }
        rc = emit_results(&a, v, i, zone, emitted);
    }
    /* Turns the repair put side by side are joined where the provider wants them to alternate,
     * so the repaired list is one it takes. */
    if (!rc && (a.fmt->pairing & CK__PAIR_SIDES_ALTERNATE)) rc = ck__view_join_sides(v, h);
    ck__free(emitted);
    analysis_dispose(&a);
    if (rc) {
        ck_view_free(v);
        if (actions) {
            ck__free(*actions);
            *actions = NULL;
            *n_actions = 0;
        }
        if (err && err->code == CK_OK) ck__fail(err, rc, NULL, CK_NONE, NULL);
        return rc;
    }
    *out = v;
    return CK_OK;
}

int ck_repair_pairs(const ck_history *history, ck_format format, ck_view **out,
                    ck_error *err) {
    if (!out) return ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
    return ck__pairs_repair(history, format, NULL, out, NULL, NULL, err);
}

const char *ck_repair_kind_name(ck_repair_kind kind) {
    switch (kind) {
        case CK_REPAIR_ORPHAN_DROPPED: return "orphan_dropped";
        case CK_REPAIR_DUPLICATE_DROPPED: return "duplicate_dropped";
        case CK_REPAIR_MISPLACED_DROPPED: return "misplaced_dropped";
        case CK_REPAIR_STUB_ADDED: return "stub_added";
        case CK_REPAIR_CALL_DROPPED: return "call_dropped";
        case CK_REPAIR_RESULT_MOVED: return "result_moved";
        case CK_REPAIR_KEPT_AS_TEXT: return "kept_as_text";
    }
    return NULL;
}
