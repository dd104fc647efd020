/* The OpenAI Chat Completions dialect.
 *
 * Reading a message (index i) into parts:
 *   - `role` (required string): system, developer, user, assistant, tool; any other string is
 *     CK_ROLE_OTHER, kept as it is.
 *   - `content`: a string is one TEXT part (the message gets CK_MSG_STRING_CONTENT); null or
 *     absent is no part; a list is a part per item: {"type":"text","text":S} TEXT,
 *     {"type":"image_url",...} IMAGE, any other object OTHER (its "text" counted when it has
 *     one), a bare string TEXT. Anything else is CK_ETYPE at messages[i].content.
 *   - role "tool": the content is ONE TOOL_RESULT part, id = `tool_call_id` (required), text
 *     = the string, or the text items of a list joined by newlines (other items of the list
 *     follow as CK_PART_ATTACHED parts); `name`, when given, names the tool.
 *   - `tool_calls` (any role; null or absent is none): each {id, function: {name, arguments}}
 *     is a TOOL_CALL, text = `arguments` (a string, or an object's compact JSON). Content
 *     parts come first, then the calls.
 *
 * Building an output message:
 *   - NEW: a result is {"role":"tool","tool_call_id":id,"content":text}; anything else
 *     {"role":role,"content":text} with its texts joined by newlines (a checkpoint, a note).
 *   - EDIT: a shallow copy of the source message (every other key as it was) whose `content`
 *     is rebuilt: the same string when the source had one and its one part stays (replaced
 *     text when replaced); else a list: kept items as the host's own values, replaced ones as
 *     copies with "text" replaced, new ones as text items; a tool message's content is its
 *     result's (replaced) text, with attached items kept beside it. `tool_calls` keeps the
 *     source's call objects of the kept calls, in order, and goes when none is left.
 *
 * Pairing: results stand in "tool" messages right after the assistant message of their call;
 * an id may be used again in a later turn. */
#include <stdio.h>
#include <string.h>

#include "./fmt.h"

static int openai_detect(ck__rd *rd, ck_value msg) {
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT) return 0;
    ck_value v;
    if (ck__rd_field(rd, msg, CK_KEY_ROLE, &v) <= 0) return 0;
    /* An AI SDK tool message has a list of tool-result parts and no tool_call_id. */
    if (ck__rd_is(rd, msg, CK_KEY_ROLE, "tool"))
        return ck__rd_field(rd, msg, CK_KEY_TOOL_CALL_ID, &v) > 0 ? 2 : 1;
    if (ck__rd_field(rd, msg, CK_KEY_TOOL_CALLS, &v) > 0 && ck__rd_kind(rd, v) != CK_VALUE_NULL)
        return 2;
    ck_value content;
    if (ck__rd_field(rd, msg, CK_KEY_CONTENT, &content) <= 0 ||
        ck__rd_kind(rd, content) != CK_VALUE_ARRAY)
        return 1;
    size_t n;
    if (ck__rd_count(rd, content, &n)) return 0;
    int score = 1;
    for (size_t k = 0; k < n; k++) {
        ck_value item;
        if (ck__rd_item(rd, content, k, &item)) return 0;
        if (ck__rd_is(rd, item, CK_KEY_TYPE, "image_url")) score = 2;
        else if (ck__rd_is(rd, item, CK_KEY_TYPE, "tool_use") ||
                 ck__rd_is(rd, item, CK_KEY_TYPE, "tool_result") ||
                 ck__rd_is(rd, item, CK_KEY_TYPE, "thinking") ||
                 ck__rd_is(rd, item, CK_KEY_TYPE, "tool-call") ||
                 ck__rd_is(rd, item, CK_KEY_TYPE, "tool-result"))
            return 0;
    }
    return score;
}

static int openai_read_item(ck__rd *rd, ck_value item, size_t k, const char *at) {
    (void)at;
    ck_part p;
    const char *type;
    size_t tl;
    int rc;
    if (ck__rd_item_head(rd, item, k, &p, &type, &tl, &rc)) return rc;
    if (tl == 4 && memcmp(type, "text", 4) == 0) {
        rc = ck__rd_text_item(rd, item, k, &p);
    } else if (tl == 9 && memcmp(type, "image_url", 9) == 0) {
        p.kind = CK_PART_IMAGE;
        p.flags = CK_PART_OPENAI;
    } else {
        p.kind = CK_PART_OTHER;
        rc = ck__rd_opt_string(rd, item, CK_KEY_TEXT, &p.text, &p.text_len,
                               ".content[%zu].text");
    }
    return rc ? rc : ck__rd_part(rd, &p, item);
}

static int openai_read_calls(ck__rd *rd, ck_value msg) {
    ck_value calls;
    int got = ck__rd_field(rd, msg, CK_KEY_TOOL_CALLS, &calls);
    if (got <= 0 || ck__rd_kind(rd, calls) == CK_VALUE_NULL) return got < 0 ? got : CK_OK;
    if (ck__rd_kind(rd, calls) != CK_VALUE_ARRAY)
        return ck__rd_fail(rd, CK_ETYPE, "expected a list", ".tool_calls");
    size_t n;
    int rc = ck__rd_count(rd, calls, &n);
    for (size_t j = 0; j < n && !rc; j++) {
        ck_value call, fn, args;
        if ((rc = ck__rd_item(rd, calls, j, &call))) break;
        if (ck__rd_kind(rd, call) != CK_VALUE_OBJECT)
            return ck__rd_fail(rd, CK_ETYPE, "expected an object", ".tool_calls[%zu]", j);
        ck_part p;
        memset(&p, 0, sizeof p);
        p.kind = CK_PART_TOOL_CALL;
        p.flags = CK_PART_OPENAI;
        p.host = CK__HOST_CALL | (uint32_t)j;
        rd->at[0] = j;
        if ((rc = ck__rd_need_string(rd, call, CK_KEY_ID, &p.id, &p.id_len,
                                     ".tool_calls[%zu].id")))
            break;
        got = ck__rd_field(rd, call, CK_KEY_FUNCTION, &fn);
        if (got < 0) return got;
        if (!got)
            return ck__rd_fail(rd, CK_EMISSING, "required field is missing",
                               ".tool_calls[%zu].function", j);
        if (ck__rd_kind(rd, fn) != CK_VALUE_OBJECT)
            return ck__rd_fail(rd, CK_ETYPE, "expected an object", ".tool_calls[%zu].function",
                               j);
        if ((rc = ck__rd_need_string(rd, fn, CK_KEY_NAME, &p.name, &p.name_len,
                                     ".tool_calls[%zu].function.name")))
            break;
        got = ck__rd_field(rd, fn, CK_KEY_ARGUMENTS, &args);
        if (got < 0) return got;
        if (got && (rc = ck__rd_text_or_json(rd, args, &p.text, &p.text_len,
                                             ".tool_calls[%zu].function.arguments")))
            break;
        rc = ck__rd_part(rd, &p, call);
    }
    return rc;
}

static int openai_read(ck__rd *rd, ck_value msg) {
    ck_role role;
    ck_value content;
    ck_value_kind ck;
    int rc = ck__rd_head(rd, msg, &role, &content, &ck);
    if (rc) return rc;
    uint32_t flags = ck == CK_VALUE_STRING ? CK_MSG_STRING_CONTENT : 0;
    if ((rc = ck__rd_message(rd, msg, role, flags))) return rc;
    ck_part p;
    memset(&p, 0, sizeof p);
    if (role == CK_ROLE_TOOL) {
        p.kind = CK_PART_TOOL_RESULT;
        p.flags = CK_PART_OPENAI;
        p.host = CK__HOST_WHOLE;
        /* "name", when a host keeps the tool's name on its result, names the tool for
         * retention policies at tool time (the call is not at hand there). */
        if ((rc = ck__rd_opt_string(rd, msg, CK_KEY_NAME, &p.name, &p.name_len, ".name")) ||
            (rc = ck__rd_need_string(rd, msg, CK_KEY_TOOL_CALL_ID, &p.id, &p.id_len,
                                     ".tool_call_id")) ||
            (rc = ck__rd_chat_result(rd, &p, content, ".content")))
            return rc;
    } else if ((rc = ck__rd_chat_content(rd, content, ck, "", openai_read_item))) {
        return rc;
    }
    return openai_read_calls(rd, msg);
}

/* ---- building ---- */

static int openai_write(ck__wr *w, const ck_out_msg *m, ck_value *out) {
    const ck_host_builder *b = w->b;
    ck_value msg, content = {NULL, 0};
    int none = 0, rc;
    if (m->op == CK_OP_EDIT) {
        rc = b->copy(b->ctx, ck__wr_msg_value(w, m->src), &msg);
        if (rc) return rc;
        rc = ck__wr_chat_content(w, m, &content, &none);
        if (!rc) {
            if (none) rc = b->json(b->ctx, "null", 4, &content);
            if (!rc) rc = ck__wr_set(w, msg, CK_KEY_CONTENT, content);
        }
        if (!rc) rc = ck__wr_chat_calls(w, m, msg, CK_KEY_TOOL_CALLS);
    } else {
        rc = b->message ? b->message(b->ctx, (ck_value){NULL, 0}, NULL, &msg)
                        : b->object(b->ctx, &msg);
        if (rc) return rc;
        const char *role = ck__role_name(m->role);
        rc = ck__wr_set_string(w, msg, CK_KEY_ROLE, role, strlen(role));
        if (!rc && m->role == CK_ROLE_TOOL && m->n_parts)
            rc = ck__wr_set_string(w, msg, CK_KEY_TOOL_CALL_ID, m->parts[0].part.id,
                                   m->parts[0].part.id_len);
        if (!rc) rc = ck__wr_chat_content(w, m, &content, &none);
        if (!rc && none) rc = ck__wr_string(w, "", 0, &content);
        if (!rc) rc = ck__wr_set(w, msg, CK_KEY_CONTENT, content);
    }
    if (rc) {
        ck__wr_drop(w, msg);
        return rc;
    }
    *out = msg;
    return CK_OK;
}

const ck__fmt ck__fmt_openai = {
    CK_FORMAT_OPENAI, "openai", openai_detect, openai_read, openai_write, 0, CK_ROLE_TOOL,
};
