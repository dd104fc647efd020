/* The Google Gemini dialect (generateContent `contents`).
 *
 * Reading a message (index i): an object with an optional `role`, "user" or "model" (absent
 * or null: "user", as in a single-turn request; anything else is CK_EFORMAT naming .role), and
 * `parts` (required list; each item an object, one part each):
 *   {"text":S}                                  TEXT
 *   {"text":S,"thought":true}                   OTHER, S counted (a thought summary)
 *   {"functionCall":{"id"?,"name","args"}}      TOOL_CALL, text = args' compact JSON
 *   {"functionResponse":{"id"?,"name","response"}}
 *                                               TOOL_RESULT, text = response.output, else
 *        response.result, else response.error, the first that is a string; else the compact
 *        JSON of response. An "error" key makes it CK_PART_IS_ERROR (the API's own rule: the
 *        output under "output", error details under "error", else the whole response)
 *   {"inlineData":..} / {"fileData":..}         IMAGE (a fixed cost, whatever the mime type)
 *   executableCode, codeExecutionResult, anything else
 *                                               OTHER, kept whole (its "text" counted if any)
 * The Python SDK's snake_case spellings function_call, function_response, inline_data and
 * file_data read the same. Every part is kept as the host's own value, so a
 * "thoughtSignature" beside a functionCall or a text stays byte for byte with its part, and
 * unknown fields of parts and messages survive.
 *
 * Ids: Gemini ids are optional. A call without one gets a made id (CK_PART_MADE_ID)
 * "<name>#<k>@<i>", k counting the calls of that name in message i from 0; the responses
 * without one take, in order, the ids of the calls of their name in the message before
 * theirs that no response of their own message names by id (so a turn that answers some
 * calls by id and the rest by order pairs both), else a made id of the same shape that
 * matches nothing. So calls and responses pair by id when both have one, else by order and
 * name, within adjacent turns only. Made ids are never written.
 *
 * Building: NEW messages are {"role":"model"|"user","parts":[...]} (every role but the
 * assistant's is "user": a checkpoint is a user turn); a new text part {"text":T}; a new
 * result (a stub for a call whose result is gone)
 * {"functionResponse":{"name":N,"id":id (real ids only),"response":{"error":T}}}, in
 * snake_case when the history used it. EDIT is a shallow copy of the source message whose
 * parts list has the source's parts as they were, a replaced text as a copy with "text"
 * replaced, a replaced result (an offloaded output) as a copy whose functionResponse is a
 * copy with "response" set to {"output":T}, and new parts as above.
 *
 * Pairing: a call's responses stand in the next turn, a user turn, before any other part;
 * ids need only be unique within a turn. Results carry their call's name.
 *
 * Turns: generateContent refuses two turns of one side in a row ("Please ensure that multiturn
 * requests alternate between user and model"), so two user turns that a view puts next to
 * each other (the pinned task and the checkpoint, the checkpoint and a kept user turn, a stub
 * and the user turn after it) are written as one, its parts in order (CK__PAIR_SIDES_ALTERNATE);
 * the joined turn is a copy of the first one. Turns that were next to each other in the
 * caller's list stay as they were. */
#include <stdio.h>
#include <string.h>

#include "./alloc.h"
#include "./fmt.h"
#include "./idmap.h"

/* A part read from snake_case spellings (private to this file): new parts follow it. */
#define GEMINI_SNAKE (1u << 20)
/* A call or response read without an id, until its turn is read whole (gemini_name_calls,
 * gemini_pair_responses). */
#define GEMINI_NO_ID (1u << 21)

/* The value of a part's field in either spelling: 1 camelCase, 2 snake_case, 0 absent. */
static int gemini_either(ck__rd *rd, ck_value item, ck_key camel, ck_key snake,
                         ck_value *out) {
    int got = ck__rd_field(rd, item, camel, out);
    if (got) return got;
    got = ck__rd_field(rd, item, snake, out);
    return got > 0 ? 2 : got;
}

static int gemini_detect(ck__rd *rd, ck_value msg) {
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT) return 0;
    ck_value v, parts;
    if (ck__rd_field(rd, msg, CK_KEY_CONTENT, &v) > 0) return 0;
    if (ck__rd_field(rd, msg, CK_KEY_PARTS, &parts) <= 0 ||
        ck__rd_kind(rd, parts) != CK_VALUE_ARRAY)
        return 0;
    if (ck__rd_field(rd, msg, CK_KEY_ROLE, &v) > 0 && ck__rd_kind(rd, v) != CK_VALUE_NULL &&
        !ck__rd_is(rd, msg, CK_KEY_ROLE, "user") && !ck__rd_is(rd, msg, CK_KEY_ROLE, "model"))
        return 0;
    /* A list of parts instead of a content is Gemini's alone. */
    return 2;
}

/* A made id "<name>#<k>@<msg>" in the history's storage. */
static int gemini_made_id(ck__rd *rd, ck_part *p, size_t k, size_t msg) {
    char tail[48];
    int tl = snprintf(tail, sizeof tail, "#%zu@%zu", k, msg);
    char *s = ck_history_alloc(rd->h, p->name_len + (size_t)tl);
    if (!s) return ck__rd_fail(rd, CK_ENOMEM, NULL, NULL);
    memcpy(s, p->name, p->name_len);
    memcpy(s + p->name_len, tail, (size_t)tl);
    p->id = s;
    p->id_len = p->name_len + (size_t)tl;
    p->flags |= CK_PART_MADE_ID;
    return CK_OK;
}

/* After the ids of message `me` were set (its parts were added first): its hashes and id
 * numbers again; the first failure of `rc` and that. */
static int ids_set(ck__rd *rd, size_t me, int rc) {
    int again = ck__history_rehash(rd->h, me);
    if (rc) return rc;
    return again ? ck__rd_fail(rd, again, NULL, NULL) : CK_OK;
}

/* The made ids of the calls of the turn just read that had none (GEMINI_NO_ID; see the manual
 * above): k counts the calls of the same name before it in the turn. One pass, a count per
 * name, so a turn of many unnamed calls stays linear. */
static int gemini_name_calls(ck__rd *rd) {
    ck_history *h = rd->h;
    size_t me = h->n_msgs - 1, n = h->msgs[me].n_parts, missing = 0;
    ck_part *parts = h->parts + h->msgs[me].first_part;
    for (size_t j = 0; j < n; j++)
        missing += parts[j].kind == CK_PART_TOOL_CALL && (parts[j].flags & GEMINI_NO_ID);
    if (!missing) return CK_OK;
    ck__idmap count;
    int rc = ck__idmap_init(&count, n) ? ck__rd_fail(rd, CK_ENOMEM, NULL, NULL) : CK_OK;
    for (size_t j = 0; j < n && !rc; j++) {
        ck_part *p = &parts[j];
        if (p->kind != CK_PART_TOOL_CALL) continue;
        size_t k = ck__idmap_get(&count, p->name, p->name_len);
        k = k == SIZE_MAX ? 0 : k;
        if (ck__idmap_set(&count, p->name, p->name_len, k + 1) < 0)
            rc = ck__rd_fail(rd, CK_ENOMEM, NULL, NULL);
        else if (p->flags & GEMINI_NO_ID) {
            p->flags &= ~GEMINI_NO_ID;
            rc = gemini_made_id(rd, p, k, me);
        }
    }
    ck__idmap_dispose(&count);
    return ids_set(rd, me, rc);
}

/* The ids of the responses of the turn just read that had none (GEMINI_NO_ID), in order:
 * each takes the first call of its name in the turn before that no response of this turn
 * names by id and no earlier one took; one left over gets a made id that matches nothing
 * ("<name>#<k>@<i>", k counting on from the calls of its name there). Linear: the calls of
 * one name are chained, and each name's chain is walked once. */
static int gemini_pair_responses(ck__rd *rd) {
    ck_history *h = rd->h;
    size_t me = h->n_msgs - 1, n = h->msgs[me].n_parts, missing = 0;
    ck_part *parts = h->parts + h->msgs[me].first_part;
    for (size_t j = 0; j < n; j++) missing += (parts[j].flags & GEMINI_NO_ID) != 0;
    if (!missing) return CK_OK;
    const ck_part *prev = me ? ck__msg_parts(h, me - 1) : NULL;
    size_t np = me ? h->msgs[me - 1].n_parts : 0;
    /* Ids named by this turn's responses; a name's next call; a name's calls (then made ids). */
    ck__idmap named, head, count;
    size_t *next = ck__malloc((np ? np : 1) * sizeof *next);
    int rc = ck__idmap_init(&named, n) | ck__idmap_init(&head, np) | ck__idmap_init(&count, np);
    for (size_t j = 0; j < n && !rc; j++)
        if (parts[j].kind == CK_PART_TOOL_RESULT && !(parts[j].flags & GEMINI_NO_ID) &&
            ck__idmap_put(&named, parts[j].id, parts[j].id_len, j) < 0)
            rc = -1;
    for (size_t j = np; j-- > 0 && !rc && next;) {
        if (prev[j].kind != CK_PART_TOOL_CALL) continue;
        next[j] = ck__idmap_get(&head, prev[j].name, prev[j].name_len);
        size_t k = ck__idmap_get(&count, prev[j].name, prev[j].name_len);
        if (ck__idmap_set(&head, prev[j].name, prev[j].name_len, j) < 0 ||
            ck__idmap_set(&count, prev[j].name, prev[j].name_len, k == SIZE_MAX ? 1 : k + 1) < 0)
            rc = -1;
    }
    rc = rc || !next ? ck__rd_fail(rd, CK_ENOMEM, NULL, NULL) : CK_OK;
    for (size_t j = 0; j < n && !rc; j++) {
        ck_part *p = &parts[j];
        if (!(p->flags & GEMINI_NO_ID)) continue;
        p->flags &= ~GEMINI_NO_ID;
        size_t c = ck__idmap_get(&head, p->name, p->name_len);
        while (c != SIZE_MAX && ck__idmap_get(&named, prev[c].id, prev[c].id_len) != SIZE_MAX)
            c = next[c];
        if (c == SIZE_MAX) {
            size_t k = ck__idmap_get(&count, p->name, p->name_len);
            k = k == SIZE_MAX ? 0 : k;
            if (!(rc = gemini_made_id(rd, p, k, me ? me - 1 : 0)) &&
                (ck__idmap_set(&count, p->name, p->name_len, k + 1) < 0 ||
                 ck__idmap_set(&head, p->name, p->name_len, SIZE_MAX) < 0))
                rc = ck__rd_fail(rd, CK_ENOMEM, NULL, NULL);
            continue;
        }
        p->id = prev[c].id;
        p->id_len = prev[c].id_len;
        p->flags |= prev[c].flags & CK_PART_MADE_ID;
        if (ck__idmap_set(&head, p->name, p->name_len, next[c]) < 0)
            rc = ck__rd_fail(rd, CK_ENOMEM, NULL, NULL);
    }
    ck__free(next);
    ck__idmap_dispose(&named);
    ck__idmap_dispose(&head);
    ck__idmap_dispose(&count);
    return ids_set(rd, me, rc);
}

/* A functionCall or functionResponse object `fn` (part k). */
static int gemini_read_fn(ck__rd *rd, ck_value fn, size_t k, const char *field, ck_part *p) {
    char where[96];
    int rc;
    if (ck__rd_kind(rd, fn) != CK_VALUE_OBJECT)
        return ck__rd_fail(rd, CK_ETYPE, "expected an object", ".parts[%zu].%s", k, field);
    snprintf(where, sizeof where, ".parts[%zu].%s.name", k, field);
    if ((rc = ck__rd_need_string(rd, fn, CK_KEY_NAME, &p->name, &p->name_len, where)))
        return rc;
    snprintf(where, sizeof where, ".parts[%zu].%s.id", k, field);
    if ((rc = ck__rd_opt_string(rd, fn, CK_KEY_ID, &p->id, &p->id_len, where))) return rc;
    ck_value v;
    if (p->kind == CK_PART_TOOL_CALL) {
        int got = ck__rd_field(rd, fn, CK_KEY_ARGS, &v);
        if (got < 0) return got;
        snprintf(where, sizeof where, ".parts[%zu].%s.args", k, field);
        if (got && (rc = ck__rd_text_or_json(rd, v, &p->text, &p->text_len, where))) return rc;
    } else {
        int got = ck__rd_field(rd, fn, CK_KEY_RESPONSE, &v);
        if (got < 0) return got;
        snprintf(where, sizeof where, ".parts[%zu].%s.response", k, field);
        if (got && ck__rd_kind(rd, v) == CK_VALUE_OBJECT) {
            ck_value s, e;
            int error = ck__rd_field(rd, v, CK_KEY_ERROR, &e) > 0;
            if (error) p->flags |= CK_PART_IS_ERROR;
            if ((ck__rd_field(rd, v, CK_KEY_OUTPUT, &s) > 0 &&
                 ck__rd_kind(rd, s) == CK_VALUE_STRING) ||
                (ck__rd_field(rd, v, CK_KEY_RESULT, &s) > 0 &&
                 ck__rd_kind(rd, s) == CK_VALUE_STRING))
                v = s;
            else if (error && ck__rd_kind(rd, e) == CK_VALUE_STRING)
                v = e; /* {"error": T}: a failed call's details, a stub's reason */
        } else if (got && ck__rd_kind(rd, v) != CK_VALUE_NULL) {
            return ck__rd_fail(rd, CK_ETYPE, "expected an object", "%s", where);
        }
        if (got && ck__rd_kind(rd, v) != CK_VALUE_NULL &&
            (rc = ck__rd_text_or_json(rd, v, &p->text, &p->text_len, where)))
            return rc;
    }
    if (!p->id_len) p->flags |= GEMINI_NO_ID; /* named or paired once the turn is read whole */
    return CK_OK;
}

static int gemini_read_part(ck__rd *rd, ck_value item, size_t k) {
    ck_part p;
    memset(&p, 0, sizeof p);
    p.host = (uint32_t)k;
    if (ck__rd_kind(rd, item) != CK_VALUE_OBJECT)
        return ck__rd_fail(rd, CK_ETYPE, "expected an object", ".parts[%zu]", k);
    char where[64];
    ck_value v;
    int rc, got;
    if ((got = gemini_either(rd, item, CK_KEY_FUNCTION_CALL, CK_KEY_FUNCTION_CALL_SNAKE, &v))) {
        if (got < 0) return got;
        p.kind = CK_PART_TOOL_CALL;
        p.flags = got == 2 ? GEMINI_SNAKE : 0;
        rc = gemini_read_fn(rd, v, k, got == 2 ? "function_call" : "functionCall", &p);
        return rc ? rc : ck__rd_part(rd, &p, item);
    }
    if ((got = gemini_either(rd, item, CK_KEY_FUNCTION_RESPONSE, CK_KEY_FUNCTION_RESPONSE_SNAKE,
                             &v))) {
        if (got < 0) return got;
        p.kind = CK_PART_TOOL_RESULT;
        p.flags = got == 2 ? GEMINI_SNAKE : 0;
        rc = gemini_read_fn(rd, v, k, got == 2 ? "function_response" : "functionResponse", &p);
        return rc ? rc : ck__rd_part(rd, &p, item);
    }
    if ((got = gemini_either(rd, item, CK_KEY_INLINE_DATA, CK_KEY_INLINE_DATA_SNAKE, &v)) ||
        (got = gemini_either(rd, item, CK_KEY_FILE_DATA, CK_KEY_FILE_DATA_SNAKE, &v))) {
        if (got < 0) return got;
        p.kind = CK_PART_IMAGE;
        p.flags = got == 2 ? GEMINI_SNAKE : 0;
        return ck__rd_part(rd, &p, item);
    }
    got = ck__rd_field(rd, item, CK_KEY_TEXT, &v);
    if (got < 0) return got;
    p.kind = got && !ck__rd_true(rd, item, CK_KEY_THOUGHT) ? CK_PART_TEXT : CK_PART_OTHER;
    snprintf(where, sizeof where, ".parts[%zu].text", k);
    if (got && (rc = ck__rd_string(rd, v, &p.text, &p.text_len, where))) return rc;
    return ck__rd_part(rd, &p, item);
}

static int gemini_read(ck__rd *rd, ck_value msg) {
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT)
        return ck__rd_fail(rd, CK_ETYPE, "expected an object", NULL);
    const char *role_s;
    size_t role_len;
    int rc = ck__rd_opt_string(rd, msg, CK_KEY_ROLE, &role_s, &role_len, ".role");
    if (rc) return rc;
    ck_role role;
    if (role_len == 5 && memcmp(role_s, "model", 5) == 0) role = CK_ROLE_ASSISTANT;
    else if (role_len == 0 || (role_len == 4 && memcmp(role_s, "user", 4) == 0))
        role = CK_ROLE_USER;
    else
        return ck__rd_fail(rd, CK_EFORMAT, "expected \"user\" or \"model\"", ".role");
    ck_value parts;
    int got = ck__rd_field(rd, msg, CK_KEY_PARTS, &parts);
    if (got < 0) return got;
    if (!got) return ck__rd_fail(rd, CK_EMISSING, "a Gemini turn needs \"parts\"", ".parts");
    if (ck__rd_kind(rd, parts) != CK_VALUE_ARRAY)
        return ck__rd_fail(rd, CK_ETYPE, "expected a list", ".parts");
    if ((rc = ck__rd_message(rd, msg, role, 0))) return rc;
    size_t n;
    if ((rc = ck__rd_count(rd, parts, &n))) return rc;
    for (size_t k = 0; k < n && !rc; k++) {
        ck_value item;
        if (!(rc = ck__rd_item(rd, parts, k, &item))) rc = gemini_read_part(rd, item, k);
    }
    if (!rc) rc = gemini_name_calls(rd);
    return rc ? rc : gemini_pair_responses(rd);
}

/* ---- building ---- */

/* True when the history was written in snake_case (any part read from that spelling). */
static int gemini_snake(const ck__wr *w) {
    for (size_t g = 0; g < w->h->n_parts; g++)
        if (w->h->parts[g].flags & GEMINI_SNAKE) return 1;
    return 0;
}

/* An object {key: text} (a response object, or a text part). */
static int gemini_wrap(ck__wr *w, ck_key key, const char *s, size_t len, ck_value *out) {
    int rc = w->b->object(w->b->ctx, out);
    if (!rc && (rc = ck__wr_set_string(w, *out, key, s, len))) ck__wr_drop(w, *out);
    return rc;
}

/* A new functionResponse object {"name", "id" (real ids only), "response": {rkey: text}}. */
static int gemini_new_fn(ck__wr *w, const ck_part *p, ck_key rkey, ck_value *out) {
    ck_value resp;
    int rc = w->b->object(w->b->ctx, out);
    if (rc) return rc;
    rc = ck__wr_set_string(w, *out, CK_KEY_NAME, p->name, p->name_len);
    if (!rc && p->id_len && !(p->flags & CK_PART_MADE_ID))
        rc = ck__wr_set_string(w, *out, CK_KEY_ID, p->id, p->id_len);
    if (!rc && !(rc = gemini_wrap(w, rkey, p->text, p->text_len, &resp)))
        rc = ck__wr_set(w, *out, CK_KEY_RESPONSE, resp);
    if (rc) ck__wr_drop(w, *out);
    return rc;
}

/* A result part: a new one (a stub, its text under "error", spelled as the history is) when
 * item is absent; else a copy of item whose functionResponse is new, the replaced text
 * under "output". */
static int gemini_result(ck__wr *w, const ck_part *p, ck_value *item, ck_value *out) {
    ck_key key = (item ? (p->flags & GEMINI_SNAKE) != 0 : gemini_snake(w))
                     ? CK_KEY_FUNCTION_RESPONSE_SNAKE
                     : CK_KEY_FUNCTION_RESPONSE;
    ck_value fn;
    int rc = item ? w->b->copy(w->b->ctx, *item, out) : w->b->object(w->b->ctx, out);
    if (rc) return rc;
    if (!(rc = gemini_new_fn(w, p, item ? CK_KEY_OUTPUT : CK_KEY_ERROR, &fn)))
        rc = ck__wr_set(w, *out, key, fn);
    if (rc) ck__wr_drop(w, *out);
    return rc;
}

static int gemini_part(ck__wr *w, const ck_out_part *op, ck_value *out) {
    const ck_part *p = &op->part;
    if (op->src_msg == CK_NONE)
        return p->kind == CK_PART_TOOL_RESULT ? gemini_result(w, p, NULL, out)
                                               : gemini_wrap(w, CK_KEY_TEXT, p->text,
                                                             p->text_len, out);
    ck_value item = ck__wr_part_value(w, op->src_msg, op->src_part);
    if (!op->replaced) return ck__wr_ref(w, item, out);
    if (p->kind == CK_PART_TOOL_RESULT) return gemini_result(w, p, &item, out);
    return ck__wr_replaced_item(w, item, CK_KEY_TEXT, NULL, op->part.text, op->part.text_len,
                                out);
}

static int gemini_write(ck__wr *w, const ck_out_msg *m, ck_value *out) {
    const ck_host_builder *b = w->b;
    ck_value msg, parts;
    int rc = ck__wr_head(w, m, m->role == CK_ROLE_ASSISTANT ? "model" : "user", &msg);
    if (rc) return rc;
    rc = b->array(b->ctx, &parts);
    for (size_t k = 0; k < m->n_parts && !rc; k++) {
        ck_value part;
        rc = gemini_part(w, &m->parts[k], &part);
        if (!rc) rc = ck__wr_push(w, parts, part);
    }
    if (rc) ck__wr_drop(w, parts);
    if (!rc) rc = ck__wr_set(w, msg, CK_KEY_PARTS, parts);
    if (rc) {
        ck__wr_drop(w, msg);
        return rc;
    }
    *out = msg;
    return CK_OK;
}

const ck__fmt ck__fmt_gemini = {
    CK_FORMAT_GEMINI, "gemini", gemini_detect, gemini_read, gemini_write,
    CK__PAIR_NEXT_MESSAGE | CK__PAIR_RESULT_NAMED | CK__PAIR_SIDES_ALTERNATE, CK_ROLE_USER,
};
