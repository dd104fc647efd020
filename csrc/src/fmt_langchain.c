/* The LangChain dialect: message dicts as Python's message.model_dump() and LangChain.js's
 * toDict() give them, and the messages_to_dict() form that wraps the same fields.
 *
 * A message (index i) is an object with a string `type` and no `role`:
 *   {"type":"human", "content":..., ...}                 the model_dump form
 *   {"type":"human", "data":{"content":..., ...}}         the messages_to_dict form: every
 *        field below is read from `data` (an object; CK_ETYPE at messages[i].data)
 * `type` is the role: human (user), ai (assistant), system, tool; any other type ("chat",
 * "function"...) is CK_ROLE_OTHER, kept as it is.
 *   - `content`: a string is one TEXT part (CK_MSG_STRING_CONTENT); null or absent is none; a
 *     list is a part per item: {"type":"text","text"} TEXT, {"type":"image_url"|"image",...}
 *     IMAGE, any other object OTHER (its "text" counted), a bare string TEXT.
 *   - type "tool": the content is ONE TOOL_RESULT part, id = `tool_call_id` (required), text =
 *     the string or the text items of a list joined by newlines (the list's other items follow
 *     as CK_PART_ATTACHED parts); `name` names the tool; "status":"error" is CK_PART_IS_ERROR.
 *   - `tool_calls` (null or absent: none): each {"id","name","args":{..},"type":"tool_call"}
 *     is a TOOL_CALL, text = the args' compact JSON. Content parts come first, then calls.
 *   - Everything else (additional_kwargs, response_metadata, usage_metadata,
 *     invalid_tool_calls, artifact, id...) is not read and survives as it was.
 *
 * Building: EDIT is a shallow copy of the message (and, in the wrapped form, of its `data`)
 * with `content` rebuilt as in Chat Completions (a string stays a string; a list keeps the
 * host's own items; a replaced result is its text, attached items beside it) and
 * `tool_calls` holding the kept call objects ([] when none is left: LangChain always has the
 * field). NEW messages are built with the builder's message(like, type) so a host can make
 * its own message classes, in the form the history uses (wrapped when any message read was):
 *   checkpoint  {"type":"human","content":"[Context Compaction]..."}
 *   stub        {"type":"tool","content":"result unavailable: context was compacted",
 *                "tool_call_id":id,"name":call's name}
 * An offloaded result is its tool message with content the placeholder text.
 *
 * Pairing: as in Chat Completions, results stand in "tool" messages right after the ai message
 * of their calls; an id may be used again in a later turn; a stub names its tool. */
#include <stdio.h>
#include <string.h>

#include "./fmt.h"

/* The private message flag: the fields stand in `data` (the messages_to_dict form). */
#define LC_MSG_WRAPPED (1u << 16)

static const char *const lc_types[] = {"system", "system", "human", "ai", "tool"};

/* The LangChain type of a role (developer is a system message; OTHER a human one). */
static const char *lc_type_of(ck_role r) {
    return (unsigned)r < 5 ? lc_types[r] : "human";
}

static ck_role lc_role_of(const char *s, size_t len) {
    for (int r = 0; r < 5; r++)
        if (r != CK_ROLE_DEVELOPER && strlen(lc_types[r]) == len &&
            memcmp(s, lc_types[r], len) == 0)
            return (ck_role)r;
    return CK_ROLE_OTHER;
}

static int lc_detect(ck__rd *rd, ck_value msg) {
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT) return 0;
    ck_value v;
    if (ck__rd_field(rd, msg, CK_KEY_ROLE, &v) != 0) return 0;
    /* A message with one of LangChain's message types, without a role and with its content
     * (or its `data`), is written by no other dialect (Responses items have types too, but
     * none of these; a tool schema {"type": "function", "function": ...} has no content). */
    static const char *const types[] = {"human", "ai", "system", "tool", "chat", "function"};
    if (ck__rd_field(rd, msg, CK_KEY_CONTENT, &v) <= 0 &&
        ck__rd_field(rd, msg, CK_KEY_DATA, &v) <= 0)
        return 0;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        if (ck__rd_is(rd, msg, CK_KEY_TYPE, types[t])) return 2;
    return 0;
}

/* Item k of a content list; `at` is where the fields stand ("" or ".data"). */
static int lc_read_item(ck__rd *rd, ck_value item, size_t k, const char *at) {
    ck_part p;
    memset(&p, 0, sizeof p);
    p.host = (uint32_t)k;
    char where[64];
    int plain;
    if (ck__rd_plain_item(rd, item, k, &p, &plain)) return plain;
    snprintf(where, sizeof where, "%s.content[%zu].type", at, k);
    const char *type;
    size_t tl;
    int rc = ck__rd_need_string(rd, item, CK_KEY_TYPE, &type, &tl, where);
    if (rc) return rc;
    snprintf(where, sizeof where, "%s.content[%zu].text", at, k);
    if (tl == 4 && memcmp(type, "text", 4) == 0) {
        p.kind = CK_PART_TEXT;
        rc = ck__rd_need_string(rd, item, CK_KEY_TEXT, &p.text, &p.text_len, where);
    } else if ((tl == 9 && memcmp(type, "image_url", 9) == 0) ||
               (tl == 5 && memcmp(type, "image", 5) == 0)) {
        p.kind = CK_PART_IMAGE;
    } else {
        p.kind = CK_PART_OTHER;
        rc = ck__rd_opt_string(rd, item, CK_KEY_TEXT, &p.text, &p.text_len, where);
    }
    return rc ? rc : ck__rd_part(rd, &p, item);
}

static int lc_read_calls(ck__rd *rd, ck_value d, const char *at) {
    ck_value calls;
    int got = ck__rd_field(rd, d, CK_KEY_TOOL_CALLS, &calls);
    if (got <= 0 || ck__rd_kind(rd, calls) == CK_VALUE_NULL) return got < 0 ? got : CK_OK;
    if (ck__rd_kind(rd, calls) != CK_VALUE_ARRAY)
        return ck__rd_fail(rd, CK_ETYPE, "expected a list", "%s.tool_calls", at);
    size_t n;
    int rc = ck__rd_count(rd, calls, &n);
    for (size_t j = 0; j < n && !rc; j++) {
        ck_value call, args;
        if ((rc = ck__rd_item(rd, calls, j, &call))) break;
        if (ck__rd_kind(rd, call) != CK_VALUE_OBJECT)
            return ck__rd_fail(rd, CK_ETYPE, "expected an object", "%s.tool_calls[%zu]", at, j);
        ck_part p;
        memset(&p, 0, sizeof p);
        p.kind = CK_PART_TOOL_CALL;
        p.host = CK__HOST_CALL | (uint32_t)j;
        char where[64];
        snprintf(where, sizeof where, "%s.tool_calls[%zu].id", at, j);
        if ((rc = ck__rd_need_string(rd, call, CK_KEY_ID, &p.id, &p.id_len, where))) break;
        snprintf(where, sizeof where, "%s.tool_calls[%zu].name", at, j);
        if ((rc = ck__rd_need_string(rd, call, CK_KEY_NAME, &p.name, &p.name_len, where))) break;
        if ((got = ck__rd_field(rd, call, CK_KEY_ARGS, &args)) < 0) return got;
        snprintf(where, sizeof where, "%s.tool_calls[%zu].args", at, j);
        if (got && (rc = ck__rd_text_or_json(rd, args, &p.text, &p.text_len, where))) break;
        rc = ck__rd_part(rd, &p, call);
    }
    return rc;
}

static int lc_read(ck__rd *rd, ck_value msg) {
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT)
        return ck__rd_fail(rd, CK_ETYPE, "expected an object", NULL);
    const char *type;
    size_t tl;
    int rc = ck__rd_need_string(rd, msg, CK_KEY_TYPE, &type, &tl, ".type");
    if (rc) return rc;
    ck_role role = lc_role_of(type, tl);
    ck_value d = msg, content;
    const char *at = "";
    int got = ck__rd_field(rd, msg, CK_KEY_DATA, &d);
    if (got < 0) return got;
    if (got && ck__rd_kind(rd, d) != CK_VALUE_OBJECT)
        return ck__rd_fail(rd, CK_ETYPE, "expected an object", ".data");
    if (got) at = ".data";
    else d = msg;
    if ((got = ck__rd_field(rd, d, CK_KEY_CONTENT, &content)) < 0) return got;
    ck_value_kind ck = got ? ck__rd_kind(rd, content) : CK_VALUE_ABSENT;
    uint32_t flags = (ck == CK_VALUE_STRING ? CK_MSG_STRING_CONTENT : 0) |
                     (*at ? LC_MSG_WRAPPED : 0);
    if ((rc = ck__rd_message(rd, msg, role, flags)) ||
        (rc = ck__rd_inner(rd, *at ? d : (ck_value){NULL, 0})))
        return rc;
    char where[64];
    ck_part p;
    memset(&p, 0, sizeof p);
    if (role == CK_ROLE_TOOL) {
        p.kind = CK_PART_TOOL_RESULT;
        p.host = CK__HOST_WHOLE;
        p.flags = ck__rd_is(rd, d, CK_KEY_STATUS, "error") ? CK_PART_IS_ERROR : 0;
        snprintf(where, sizeof where, "%s.name", at);
        if ((rc = ck__rd_opt_string(rd, d, CK_KEY_NAME, &p.name, &p.name_len, where))) return rc;
        snprintf(where, sizeof where, "%s.tool_call_id", at);
        if ((rc = ck__rd_need_string(rd, d, CK_KEY_TOOL_CALL_ID, &p.id, &p.id_len, where)))
            return rc;
        snprintf(where, sizeof where, "%s.content", at);
        if ((rc = ck__rd_chat_result(rd, &p, content, where))) return rc;
    } else if ((rc = ck__rd_chat_content(rd, content, ck, at, lc_read_item))) {
        return rc;
    }
    return lc_read_calls(rd, d, at);
}

/* ---- building ---- */

/* Whether the history uses the wrapped form (any message read was wrapped). */
static int lc_wrapped(const ck__wr *w) {
    for (size_t i = 0; i < w->h->n_msgs; i++)
        if (w->h->msgs[i].flags & LC_MSG_WRAPPED) return 1;
    return 0;
}

/* The fields of message m into `d` (a copy of the source's fields, or a new object). */
static int lc_fields(ck__wr *w, const ck_out_msg *m, ck_value d) {
    ck_value content = {NULL, 0};
    int none = 0;
    int rc = CK_OK;
    if (m->op == CK_OP_NEW) {
        const char *type = lc_type_of(m->role);
        rc = ck__wr_set_string(w, d, CK_KEY_TYPE, type, strlen(type));
        if (!rc && m->role == CK_ROLE_TOOL && m->n_parts) {
            const ck_part *p = &m->parts[0].part;
            rc = ck__wr_set_string(w, d, CK_KEY_TOOL_CALL_ID, p->id, p->id_len);
            if (!rc && p->name_len) rc = ck__wr_set_string(w, d, CK_KEY_NAME, p->name, p->name_len);
        }
    }
    if (!rc) rc = ck__wr_chat_content(w, m, &content, &none);
    if (!rc && none) rc = ck__wr_string(w, "", 0, &content);
    if (!rc) rc = ck__wr_set(w, d, CK_KEY_CONTENT, content);
    if (!rc && m->op == CK_OP_EDIT) {
        rc = ck__wr_chat_calls(w, m, d, CK_KEY_TOOL_CALLS);
        /* LangChain's ai messages always carry the list, empty when there are no calls. */
        int any = 0;
        for (size_t k = 0; k < m->n_parts; k++) any |= m->parts[k].part.kind == CK_PART_TOOL_CALL;
        ck_value empty;
        if (!rc && !any && m->role == CK_ROLE_ASSISTANT && !(rc = w->b->array(w->b->ctx, &empty)))
            rc = ck__wr_set(w, d, CK_KEY_TOOL_CALLS, empty);
    }
    return rc;
}

static int lc_write(ck__wr *w, const ck_out_msg *m, ck_value *out) {
    const ck_host_builder *b = w->b;
    ck_value msg, d;
    int wrapped, rc;
    if (m->op == CK_OP_EDIT) {
        wrapped = (m->flags & LC_MSG_WRAPPED) != 0;
        rc = b->copy(b->ctx, ck__wr_msg_value(w, m->src), &msg);
        if (rc) return rc;
        rc = wrapped ? b->copy(b->ctx, ck__wr_inner_value(w, m->src), &d) : CK_OK;
        if (!wrapped) d = msg;
    } else {
        wrapped = lc_wrapped(w);
        const char *type = lc_type_of(m->role);
        ck_value like = w->h->n_msgs ? ck__wr_msg_value(w, 0) : (ck_value){NULL, 0};
        rc = b->message ? b->message(b->ctx, like, type, &msg) : b->object(b->ctx, &msg);
        if (rc) return rc;
        if (wrapped) {
            rc = ck__wr_set_string(w, msg, CK_KEY_TYPE, type, strlen(type));
            if (!rc) rc = b->object(b->ctx, &d);
        } else {
            d = msg;
        }
    }
    if (!rc) rc = lc_fields(w, m, d);
    else if (wrapped) d.ptr = NULL;
    if (wrapped && d.ptr) {
        if (rc) ck__wr_drop(w, d);
        else rc = ck__wr_set(w, msg, CK_KEY_DATA, d);
    }
    if (rc) {
        ck__wr_drop(w, msg);
        return rc;
    }
    *out = msg;
    return CK_OK;
}

const ck__fmt ck__fmt_langchain = {
    CK_FORMAT_LANGCHAIN, "langchain", lc_detect, lc_read, lc_write, CK__PAIR_RESULT_NAMED,
    CK_ROLE_TOOL,
};
