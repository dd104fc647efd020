/* The OpenAI Responses dialect: the `input` items the Responses API takes (and Codex and the
 * Python Agents SDK send), and the items of the OpenAI Agents SDK for JS (`@openai/agents`),
 * whose protocol differs in a few keys and types (read as their Responses counterparts, and
 * written back in the SDK's own shape). Every item is one message of the history.
 *
 * Detection: an item whose "type" is one only Responses writes ("message", "reasoning",
 * "item_reference", any "..._call", "..._call_output" or the SDK's "..._call_result"), or a
 * bare message whose content has input_text / output_text / input_image / input_file /
 * refusal items, is this dialect's own.
 *
 * Reading item i (an object; its "type" a string when present):
 *   - {"type":"message","role":R,"content":C} and the bare {"role":R,"content":C} (no "type"):
 *     role as in Chat Completions (user, assistant, system, developer); C a string is one TEXT
 *     part (CK_MSG_STRING_CONTENT), a list a part per item: input_text / output_text TEXT
 *     (their "text" required), input_image IMAGE, anything else (input_file, refusal...) OTHER
 *     counted by its JSON; null or absent no part.
 *   Wherever "call_id" is read, the SDK's "callId" is taken when "call_id" is absent; the
 *     item keeps the key it has, and a stub answers its call with the call's key.
 *   - {"type":"function_call","call_id","name","arguments"}: role assistant, one TOOL_CALL,
 *     id = call_id, text = arguments (a string, or other JSON as its compact text).
 *   - {"type":"custom_tool_call","call_id","name","input"}: the same, text = input.
 *   - {"type":"function_call_output" | "custom_tool_call_output","call_id","output"} and the
 *     SDK's {"type":"function_call_result","callId","name","status","output"}: role tool, one
 *     TOOL_RESULT, id = call_id, name = "name" when present, text = the output string, or the
 *     input_text items of a list joined by newlines (its input_image and input_file items
 *     follow as CK_PART_ATTACHED parts), or the SDK's one structured output: a
 *     {"type":"text","text"} object is the text, an image or file object alone is attached.
 *   - {"type":"reasoning","summary":[{"type":"summary_text","text"}...],...}: role assistant,
 *     one OTHER part whose text is the summary, the SDK's "content" and its "rawContent"
 *     (each a list of text items), joined by newlines; always written back as the host's own
 *     value, encrypted_content (the SDK's providerData) and all.
 *   - any other type (web_search_call, computer_call, computer_call_output, the SDK's
 *     computer_call_result, item_reference, image_generation_call...): one OTHER part counted
 *     by the item's JSON, never edited; role tool for a "..._output" or "..._call_result" type
 *     (no cut falls just before it), other for item_reference, assistant else.
 *   An item right after a reasoning item, and a call right after another call, is
 *   CK_MSG_JOINED: no fold or cut ever separates a reasoning item from the call it led to, nor
 *   parallel calls from each other.
 *
 * Building an output item:
 *   - a call or output item whose part stays: the source item (a shallow copy when its text
 *     was replaced: "arguments" / "input" / "output" set); its "id" stays. A replaced output
 *     keeps its shape: a string stays a string; the SDK's {"type":"text"} object becomes a
 *     copy of it with the new "text"; attached items stay beside the new text, which leads
 *     the list as {"type":"input_text"}.
 *   - a message item: a shallow copy (id, status and every other key kept) whose content is
 *     rebuilt: the same string when it had one and its one part stays; else a list of the
 *     source's own items, replaced ones as copies with "text" replaced, new ones as
 *     {"type":"input_text"} (output_text for an assistant).
 *   - a new result (a stub for a call that has none): {"type":"function_call_output",
 *     "call_id":id,"output":text} (custom_tool_call_output for a custom call); for a call
 *     with the SDK's "callId": {"type":"function_call_result","callId":id,"name":the call's,
 *     "status":"completed","output":{"type":"text","text":text}}; anything else
 *     new, the checkpoint included: {"type":"message","role":R,"content":text}, R "user" for
 *     a tool or other role. New items carry no id; an item whose call repair removed becomes
 *     such a message (an "fc_" id cannot name a message).
 *
 * Pairing: results pair by call_id and may stand anywhere after their call; a call_id may be
 * used once in the whole input (OpenAI makes every call_id unique; a second use is a
 * duplicate_call, as a repeated id in one Chat Completions message is). */
#include <stdio.h>
#include <string.h>

#include "./fmt.h"

/* ck_part.host of the one part an item that is not a message reads into: RESPONSES_HOST_ITEM
 * with the bits below. */
#define RESPONSES_HOST_ITEM CK__HOST_CALL
#define RESPONSES_CUSTOM 1u   /* a custom tool's call or output */
#define RESPONSES_SDK 2u      /* the Agents SDK's: "callId", or a function_call_result */
#define RESPONSES_TEXT_OBJ 4u /* a result whose output is one {"type":"text"} object (the
                                 part's host value is that object) */

static int responses_type_is(const char *type, size_t len, const char *lit) {
    return len == strlen(lit) && memcmp(type, lit, len) == 0;
}

static int responses_ends_with(const char *type, size_t len, const char *lit) {
    size_t n = strlen(lit);
    return len > n && memcmp(type + len - n, lit, n) == 0;
}

/* True for an item type only Responses writes: a message item, reasoning, an item
 * reference, and every "..._call", "..._call_output" (function, custom tool, web search,
 * computer, shell...) and the Agents SDK's "..._call_result". Other dialects type their
 * messages too (LangChain's "human"). */
static int responses_own_type(const char *type, size_t len) {
    static const char *const ends[] = {"_call", "_call_output", "_call_result"};
    if (responses_type_is(type, len, "message") || responses_type_is(type, len, "reasoning") ||
        responses_type_is(type, len, "item_reference"))
        return 1;
    for (size_t j = 0; j < sizeof ends / sizeof *ends; j++)
        if (responses_ends_with(type, len, ends[j])) return 1;
    return 0;
}

static int responses_detect(ck__rd *rd, ck_value msg) {
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT) return 0;
    ck_value v, content;
    size_t n;
    if (ck__rd_field(rd, msg, CK_KEY_TYPE, &v) > 0) {
        const char *type;
        size_t tl;
        if (ck__rd_kind(rd, v) != CK_VALUE_STRING || rd->r->string(rd->r->ctx, v, &type, &tl) ||
            !type)
            return 1;
        return responses_own_type(type, tl) ? 2 : 1;
    }
    if (!ck__rd_chat_shape(rd, msg, &content, &n)) return 0;
    int score = 1;
    static const char *const own[] = {"input_text", "output_text", "input_image", "input_file",
                                      "refusal"};
    static const char *const foreign[] = {"text",        "image_url", "image",   "tool_use",
                                          "tool_result", "thinking",  "redacted_thinking"};
    for (size_t k = 0; k < n; k++) {
        ck_value item;
        if (ck__rd_item(rd, content, k, &item)) return 0;
        for (size_t j = 0; j < sizeof foreign / sizeof *foreign; j++)
            if (ck__rd_is(rd, item, CK_KEY_TYPE, foreign[j])) return 0;
        for (size_t j = 0; j < sizeof own / sizeof *own; j++)
            if (ck__rd_is(rd, item, CK_KEY_TYPE, own[j])) score = 2;
    }
    return score;
}

/* Item k of a message item's content list. */
static int responses_read_content_item(ck__rd *rd, ck_value item, size_t k) {
    int rc;
    ck_part p;
    const char *type;
    size_t tl;
    if (ck__rd_item_head(rd, item, k, &p, &type, &tl, &rc)) return rc;
    if (responses_type_is(type, tl, "input_text") || responses_type_is(type, tl, "output_text")) {
        rc = ck__rd_text_item(rd, item, k, &p);
    } else if (responses_type_is(type, tl, "input_image")) {
        p.kind = CK_PART_IMAGE;
    } else {
        /* input_file, refusal and the like: counted by their JSON. */
        char where[64];
        p.kind = CK_PART_OTHER;
        snprintf(where, sizeof where, ".content[%zu]", k);
        rc = ck__rd_text_or_json(rd, item, &p.text, &p.text_len, where);
    }
    return rc ? rc : ck__rd_part(rd, &p, item);
}

/* A message item, typed or bare. */
static int responses_read_message(ck__rd *rd, ck_value msg, uint32_t flags) {
    ck_role role;
    ck_value content;
    ck_value_kind ck;
    int rc = ck__rd_head(rd, msg, &role, &content, &ck);
    if (rc) return rc;
    if (ck == CK_VALUE_STRING) flags |= CK_MSG_STRING_CONTENT;
    if ((rc = ck__rd_message(rd, msg, role, flags))) return rc;
    size_t n;
    if ((rc = ck__rd_simple_content(rd, content, ck, &n))) return rc;
    for (size_t k = 0; k < n && !rc; k++) {
        ck_value item;
        if (!(rc = ck__rd_item(rd, content, k, &item)))
            rc = responses_read_content_item(rd, item, k);
    }
    return rc;
}

/* The type of the item read before this one, when it is `lit`. */
static int responses_after(ck__rd *rd, const char *lit) {
    const ck_history *h = rd->h;
    return h->n_msgs && ck__rd_is(rd, h->msg_values[h->n_msgs - 1], CK_KEY_TYPE, lit);
}

/* The call id of a call or result item into p: "call_id", or the Agents SDK's "callId" (which
 * p->host then records, so that what is written for the call uses the key it has). */
static int responses_call_id(ck__rd *rd, ck_value msg, ck_part *p) {
    ck_value v;
    int got = ck__rd_field(rd, msg, CK_KEY_CALL_ID, &v);
    if (got < 0) return got;
    if (!got && (got = ck__rd_field(rd, msg, CK_KEY_CALL_ID_CAMEL, &v)) > 0) {
        p->host |= RESPONSES_SDK;
        return ck__rd_string(rd, v, &p->id, &p->id_len, ".callId");
    }
    if (got < 0) return got;
    return ck__rd_need_string(rd, msg, CK_KEY_CALL_ID, &p->id, &p->id_len, ".call_id");
}

/* A result item's "output" into result part p, appended: a string, a list (its text items
 * joined by newlines, the others following as attached parts), or the Agents SDK's one
 * structured part: {"type":"text","text"} as the text, an image or file as attached. */
static int responses_read_output(ck__rd *rd, ck_value msg, ck_part *p) {
    ck_value output = {NULL, 0};
    int rc, got = ck__rd_field(rd, msg, CK_KEY_OUTPUT, &output);
    if (got < 0) return got;
    if (!got) return ck__rd_fail(rd, CK_EMISSING, "required field is missing", ".output");
    if (ck__rd_kind(rd, output) != CK_VALUE_OBJECT) {
        if ((rc = ck__rd_joined_text(rd, output, &p->text, &p->text_len, ".output")) ||
            (rc = ck__rd_part(rd, p, msg)))
            return rc;
        return ck__rd_attachments(rd, output, ".output");
    }
    if (ck__rd_is(rd, output, CK_KEY_TYPE, "text")) {
        p->host |= RESPONSES_TEXT_OBJ;
        rc = ck__rd_need_string(rd, output, CK_KEY_TEXT, &p->text, &p->text_len, ".output.text");
        return rc ? rc : ck__rd_part(rd, p, output);
    }
    if ((rc = ck__rd_part(rd, p, msg))) return rc;
    ck_part a;
    memset(&a, 0, sizeof a);
    a.kind = ck__rd_is(rd, output, CK_KEY_TYPE, "image") ? CK_PART_IMAGE : CK_PART_OTHER;
    a.flags = CK_PART_ATTACHED;
    return ck__rd_part(rd, &a, output);
}

/* The text of a reasoning item: its "summary", and the Agents SDK's "content" and
 * "rawContent", each a string or a list of text items, joined by newlines. */
static int responses_reasoning_text(ck__rd *rd, ck_value msg, ck_part *p) {
    static const ck_key keys[] = {CK_KEY_SUMMARY, CK_KEY_CONTENT, CK_KEY_RAW_CONTENT};
    static const char *const paths[] = {".summary", ".content", ".rawContent"};
    const char *s[3];
    size_t len[3], total = 0, found = 0;
    for (size_t k = 0; k < 3; k++) {
        ck_value v;
        int rc, got = ck__rd_field(rd, msg, keys[k], &v);
        s[k] = "";
        len[k] = 0;
        if (got < 0) return got;
        if (got && (rc = ck__rd_joined_text(rd, v, &s[k], &len[k], paths[k]))) return rc;
        if (!len[k]) continue;
        total += len[k] + (found++ ? 1 : 0);
        p->text = s[k];
        p->text_len = len[k];
    }
    if (found < 2) return CK_OK;
    if (total > CK_MAX_STRING) return ck__rd_fail(rd, CK_ETOOBIG, CK__MSG_TOO_BIG, NULL);
    char *buf = ck_history_alloc(rd->h, total + 1);
    if (!buf) return ck__fail(rd->err, CK_ENOMEM, NULL, rd->index, NULL);
    size_t at = 0;
    for (size_t k = 0; k < 3; k++) {
        if (!len[k]) continue;
        if (at) buf[at++] = '\n';
        memcpy(buf + at, s[k], len[k]);
        at += len[k];
    }
    buf[at] = '\0';
    p->text = buf;
    p->text_len = at;
    return CK_OK;
}

static int responses_read(ck__rd *rd, ck_value msg) {
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT)
        return ck__rd_fail(rd, CK_ETYPE, "expected an object", NULL);
    ck_value tv;
    int got = ck__rd_field(rd, msg, CK_KEY_TYPE, &tv);
    if (got < 0) return got;
    uint32_t joined = responses_after(rd, "reasoning") ? CK_MSG_JOINED : 0;
    if (!got) return responses_read_message(rd, msg, joined);
    const char *type;
    size_t tl;
    int rc = ck__rd_string(rd, tv, &type, &tl, ".type");
    if (rc) return rc;
    if (responses_type_is(type, tl, "message")) return responses_read_message(rd, msg, joined);
    int fn_call = responses_type_is(type, tl, "function_call");
    int custom_call = responses_type_is(type, tl, "custom_tool_call");
    int fn_out = responses_type_is(type, tl, "function_call_output");
    int custom_out = responses_type_is(type, tl, "custom_tool_call_output");
    int sdk_out = responses_type_is(type, tl, "function_call_result");
    ck_part p;
    memset(&p, 0, sizeof p);
    p.host = RESPONSES_HOST_ITEM | (custom_call || custom_out ? RESPONSES_CUSTOM : 0u) |
             (sdk_out ? RESPONSES_SDK : 0u);
    if (fn_call || custom_call) {
        if (responses_after(rd, "function_call") || responses_after(rd, "custom_tool_call"))
            joined = CK_MSG_JOINED;
        if ((rc = ck__rd_message(rd, msg, CK_ROLE_ASSISTANT, joined))) return rc;
        p.kind = CK_PART_TOOL_CALL;
        ck_value args;
        if ((rc = responses_call_id(rd, msg, &p)) ||
            (rc = ck__rd_need_string(rd, msg, CK_KEY_NAME, &p.name, &p.name_len, ".name")))
            return rc;
        ck_key key = fn_call ? CK_KEY_ARGUMENTS : CK_KEY_INPUT;
        if ((got = ck__rd_field(rd, msg, key, &args)) < 0) return got;
        if (got && (rc = ck__rd_text_or_json(rd, args, &p.text, &p.text_len,
                                             fn_call ? ".arguments" : ".input")))
            return rc;
        return ck__rd_part(rd, &p, msg);
    }
    if (fn_out || custom_out || sdk_out) {
        if ((rc = ck__rd_message(rd, msg, CK_ROLE_TOOL, joined))) return rc;
        p.kind = CK_PART_TOOL_RESULT;
        if ((rc = responses_call_id(rd, msg, &p)) ||
            (rc = ck__rd_opt_string(rd, msg, CK_KEY_NAME, &p.name, &p.name_len, ".name")))
            return rc;
        return responses_read_output(rd, msg, &p);
    }
    /* Reasoning and every other item: kept whole, counted for what it says. */
    ck_role role = CK_ROLE_ASSISTANT;
    if (responses_ends_with(type, tl, "_output") || responses_ends_with(type, tl, "_call_result"))
        role = CK_ROLE_TOOL;
    else if (responses_type_is(type, tl, "item_reference"))
        role = CK_ROLE_OTHER;
    if ((rc = ck__rd_message(rd, msg, role, joined))) return rc;
    p.kind = CK_PART_OTHER;
    if (responses_type_is(type, tl, "reasoning")) {
        if ((rc = responses_reasoning_text(rd, msg, &p))) return rc;
    } else if ((rc = ck__rd_text_or_json(rd, msg, &p.text, &p.text_len, ""))) {
        return rc;
    }
    return ck__rd_part(rd, &p, msg);
}

/* ---- building ---- */

/* The call part with this id in the history (its stub answers in kind), or NULL. */
static const ck_part *responses_call_of(const ck__wr *w, const char *id, size_t len) {
    const ck_history *h = w->h;
    for (size_t g = 0; g < h->n_parts; g++) {
        const ck_part *p = &h->parts[g];
        if (p->kind == CK_PART_TOOL_CALL && p->id_len == len && memcmp(p->id, id, len) == 0)
            return p;
    }
    return NULL;
}

/* The output of a result whose text was replaced, in the shape the source had: the SDK's one
 * {"type":"text"} part as a copy with the new text; else the text alone, or with attached
 * items as a list that leads with an input_text item (the SDK's lists hold input_* items
 * too). */
static int responses_output(ck__wr *w, const ck_out_part *op, ck_value *out) {
    const ck_part *p = &op->part;
    if (p->host & RESPONSES_TEXT_OBJ)
        return ck__wr_replaced_item(w, ck__wr_part_value(w, op->src_msg, op->src_part),
                                    CK_KEY_TEXT, "text", p->text, p->text_len, out);
    return ck__wr_result_content_as(w, op->src_msg, op->src_part, "input_text", p->text,
                                    p->text_len, out);
}

/* A call or output item whose one part `op` stays: the source, with its text replaced. */
static int responses_item(ck__wr *w, const ck_out_part *op, ck_value *out) {
    const ck_host_builder *b = w->b;
    ck_value src = ck__wr_msg_value(w, op->src_msg);
    if (!op->replaced || op->part.kind == CK_PART_OTHER) return ck__wr_ref(w, src, out);
    ck_value text;
    int rc;
    ck_key key = CK_KEY_OUTPUT;
    if (op->part.kind == CK_PART_TOOL_RESULT) {
        rc = responses_output(w, op, &text);
    } else {
        key = op->part.host & RESPONSES_CUSTOM ? CK_KEY_INPUT : CK_KEY_ARGUMENTS;
        rc = ck__wr_string(w, op->part.text, op->part.text_len, &text);
    }
    if (rc) return rc;
    if ((rc = b->copy(b->ctx, src, out))) {
        ck__wr_drop(w, text);
        return rc;
    }
    if ((rc = ck__wr_set(w, *out, key, text))) ck__wr_drop(w, *out);
    return rc;
}

/* The content of an edited message item. */
static int responses_content(ck__wr *w, const ck_out_msg *m, const ck_out_part *only,
                             size_t visible, ck_value *out) {
    if (visible == 1 && only->part.host == CK__HOST_WHOLE && only->src_msg == m->src &&
        (m->flags & CK_MSG_STRING_CONTENT)) {
        if (only->replaced) return ck__wr_string(w, only->part.text, only->part.text_len, out);
        return ck__wr_ref(w, ck__wr_part_value(w, only->src_msg, only->src_part), out);
    }
    return ck__wr_content_list(w, m, NULL,
                               m->role == CK_ROLE_ASSISTANT ? "output_text" : "input_text", out);
}

/* Fills `out`, a new object, as the result item `p` (a stub) of its call: in the Agents SDK's
 * shape when the call has "callId", custom_tool_call_output for a custom call, else
 * function_call_output. */
static int responses_stub(ck__wr *w, const ck_part *p, ck_value out) {
    const ck_part *call = responses_call_of(w, p->id, p->id_len);
    unsigned host = call ? call->host : 0u;
    if (!(host & RESPONSES_SDK)) {
        const char *type =
            host & RESPONSES_CUSTOM ? "custom_tool_call_output" : "function_call_output";
        int rc = ck__wr_set_string(w, out, CK_KEY_TYPE, type, strlen(type));
        if (!rc) rc = ck__wr_set_string(w, out, CK_KEY_CALL_ID, p->id, p->id_len);
        if (!rc) rc = ck__wr_set_string(w, out, CK_KEY_OUTPUT, p->text, p->text_len);
        return rc;
    }
    ck_value output;
    int rc = ck__wr_set_string(w, out, CK_KEY_TYPE, "function_call_result", 20);
    if (!rc) rc = ck__wr_set_string(w, out, CK_KEY_CALL_ID_CAMEL, p->id, p->id_len);
    if (!rc) rc = ck__wr_set_string(w, out, CK_KEY_NAME, call->name, call->name_len);
    if (!rc) rc = ck__wr_set_string(w, out, CK_KEY_STATUS, "completed", 9);
    if (!rc) rc = ck__wr_replaced_item(w, (ck_value){NULL, 0}, CK_KEY_TEXT, "text", p->text,
                                       p->text_len, &output);
    if (!rc) rc = ck__wr_set(w, out, CK_KEY_OUTPUT, output);
    return rc;
}

/* A new item: a result for `p`, or a message of the texts of m. */
static int responses_new_item(ck__wr *w, const ck_out_msg *m, const ck_out_part *only,
                              size_t visible, ck_value *out) {
    const ck_host_builder *b = w->b;
    int rc = b->message ? b->message(b->ctx, (ck_value){NULL, 0}, NULL, out) : b->object(b->ctx, out);
    if (rc) return rc;
    if (visible == 1 && only->part.kind == CK_PART_TOOL_RESULT) {
        rc = responses_stub(w, &only->part, *out);
    } else {
        const char *role = m->role == CK_ROLE_TOOL || m->role == CK_ROLE_OTHER
                               ? "user"
                               : ck__role_name(m->role);
        ck__buf t;
        ck__buf_init(&t);
        for (size_t k = 0; k < m->n_parts; k++) {
            const ck_part *p = &m->parts[k].part;
            if (p->kind == CK_PART_IMAGE || (p->flags & CK_PART_ATTACHED)) continue;
            if (t.len) ck__buf_addc(&t, '\n');
            ck__buf_add(&t, p->text, p->text_len);
        }
        rc = t.failed ? CK_ENOMEM : ck__wr_set_string(w, *out, CK_KEY_TYPE, "message", 7);
        if (!rc) rc = ck__wr_set_string(w, *out, CK_KEY_ROLE, role, strlen(role));
        if (!rc) rc = ck__wr_set_string(w, *out, CK_KEY_CONTENT, t.data ? t.data : "", t.len);
        ck__buf_dispose(&t);
    }
    if (rc) ck__wr_drop(w, *out);
    return rc;
}

static int responses_write(ck__wr *w, const ck_out_msg *m, ck_value *out) {
    size_t visible = 0;
    const ck_out_part *only = NULL;
    for (size_t k = 0; k < m->n_parts; k++) {
        if (m->parts[k].part.flags & CK_PART_ATTACHED) continue;
        if (!visible++) only = &m->parts[k];
    }
    if (m->op == CK_OP_EDIT && visible == 1 && only->src_msg == m->src &&
        only->part.host >= CK__HOST_CALL && only->part.host != CK__HOST_WHOLE)
        return responses_item(w, only, out);
    ck_value src = m->op == CK_OP_EDIT ? ck__wr_msg_value(w, m->src) : (ck_value){NULL, 0};
    const ck_part *first = m->op == CK_OP_EDIT && w->h->msgs[m->src].n_parts
                               ? &ck__msg_parts(w->h, m->src)[0]
                               : NULL;
    /* An edited message item keeps its own object; anything else is a new item. */
    if (m->op != CK_OP_EDIT || (first && first->host >= CK__HOST_CALL &&
                                first->host != CK__HOST_WHOLE))
        return responses_new_item(w, m, only, visible, out);
    const ck_host_builder *b = w->b;
    ck_value content;
    int rc = b->copy(b->ctx, src, out);
    if (rc) return rc;
    if (!(rc = responses_content(w, m, only, visible, &content)))
        rc = ck__wr_set(w, *out, CK_KEY_CONTENT, content);
    if (rc) ck__wr_drop(w, *out);
    return rc;
}

const ck__fmt ck__fmt_responses = {
    CK_FORMAT_RESPONSES, "responses", responses_detect, responses_read, responses_write,
    CK__PAIR_ANY_LATER | CK__PAIR_IDS_UNIQUE, CK_ROLE_TOOL,
};
