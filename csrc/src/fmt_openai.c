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
    if (ck__rd_is(rd, msg, CK_KEY_ROLE, "tool")) return 2;
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
                 ck__rd_is(rd, item, CK_KEY_TYPE, "thinking"))
            return 0;
    }
    return score;
}

static int openai_read_item(ck__rd *rd, ck_value item, size_t k) {
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
            (rc = ck__rd_joined_text(rd, content, &p.text, &p.text_len, ".content")) ||
            (rc = ck__rd_part(rd, &p, content)))
            return rc;
        if (ck == CK_VALUE_ARRAY && (rc = ck__rd_attachments(rd, content, ".content"))) return rc;
    } else if (ck == CK_VALUE_STRING) {
        p.kind = CK_PART_TEXT;
        p.host = CK__HOST_WHOLE;
        if ((rc = ck__rd_string(rd, content, &p.text, &p.text_len, ".content")) ||
            (rc = ck__rd_part(rd, &p, content)))
            return rc;
    } else if (ck == CK_VALUE_ARRAY) {
        size_t n;
        if ((rc = ck__rd_count(rd, content, &n))) return rc;
        for (size_t k = 0; k < n && !rc; k++) {
            ck_value item;
            if (!(rc = ck__rd_item(rd, content, k, &item))) rc = openai_read_item(rd, item, k);
        }
        if (rc) return rc;
    } else if (ck != CK_VALUE_ABSENT && ck != CK_VALUE_NULL) {
        return ck__rd_fail(rd, CK_ETYPE, "expected a string, a list or null", ".content");
    }
    return openai_read_calls(rd, msg);
}

/* ---- building ---- */

/* The part of the view that is a kept or edited tool call from the source's tool_calls. */
static int openai_is_call(const ck_out_part *op) {
    return op->part.kind == CK_PART_TOOL_CALL && op->src_msg != CK_NONE &&
           (op->part.host & CK__HOST_CALL) && op->part.host != CK__HOST_WHOLE;
}

/* The content of message m (EDIT or NEW) as a host value. *none is set when there is none. */
static int openai_content(ck__wr *w, const ck_out_msg *m, ck_value *out, int *none) {
    size_t n_content = 0;
    const ck_out_part *only = NULL;
    *none = 0;
    for (size_t k = 0; k < m->n_parts; k++) {
        const ck_out_part *op = &m->parts[k];
        if (openai_is_call(op) || (op->part.flags & CK_PART_ATTACHED)) continue;
        n_content++;
        if (!only) only = op;
    }
    if (!n_content) {
        *none = 1;
        return CK_OK;
    }
    /* A tool message's content is its result's text (with what is attached beside it). */
    if (m->role == CK_ROLE_TOOL && only->part.kind == CK_PART_TOOL_RESULT) {
        if (only->src_msg != CK_NONE && !only->replaced)
            return ck__wr_ref(w, ck__wr_part_value(w, only->src_msg, only->src_part), out);
        if (only->src_msg != CK_NONE)
            return ck__wr_result_content(w, only->src_msg, only->src_part, only->part.text,
                                         only->part.text_len, out);
        return ck__wr_string(w, only->part.text, only->part.text_len, out);
    }
    int whole = n_content == 1 && only->src_msg != CK_NONE && only->part.host == CK__HOST_WHOLE;
    if (whole || (m->op == CK_OP_NEW && n_content == 1)) {
        if (only->src_msg != CK_NONE && !only->replaced)
            return ck__wr_ref(w, ck__wr_part_value(w, only->src_msg, only->src_part), out);
        return ck__wr_string(w, only->part.text, only->part.text_len, out);
    }
    if (m->op == CK_OP_NEW) {
        /* Several texts of a new message join into one string. */
        ck__buf b;
        ck__buf_init(&b);
        for (size_t k = 0; k < m->n_parts; k++) {
            if (m->parts[k].part.kind != CK_PART_TEXT) continue;
            if (b.len) ck__buf_addc(&b, '\n');
            ck__buf_add(&b, m->parts[k].part.text, m->parts[k].part.text_len);
        }
        int rc = b.failed ? CK_ENOMEM : ck__wr_string(w, b.data ? b.data : "", b.len, out);
        ck__buf_dispose(&b);
        return rc;
    }
    return ck__wr_content_list(w, m, openai_is_call, "text", out);
}

static int openai_write(ck__wr *w, const ck_out_msg *m, ck_value *out) {
    const ck_host_builder *b = w->b;
    ck_value msg, content = {NULL, 0};
    int none = 0, rc;
    if (m->op == CK_OP_EDIT) {
        rc = b->copy(b->ctx, ck__wr_msg_value(w, m->src), &msg);
        if (rc) return rc;
        rc = openai_content(w, m, &content, &none);
        if (!rc) {
            if (none) rc = b->json(b->ctx, "null", 4, &content);
            if (!rc) rc = ck__wr_set(w, msg, CK_KEY_CONTENT, content);
        }
        /* The kept calls, as the source's own call objects, in view order. */
        ck_value calls = {NULL, 0};
        size_t n_calls = 0;
        for (size_t k = 0; k < m->n_parts && !rc; k++) {
            const ck_out_part *op = &m->parts[k];
            if (!openai_is_call(op)) continue;
            if (!n_calls++) rc = b->array(b->ctx, &calls);
            ck_value call;
            if (!rc) rc = ck__wr_ref(w, ck__wr_part_value(w, op->src_msg, op->src_part), &call);
            if (!rc) rc = ck__wr_push(w, calls, call);
        }
        if (!rc && n_calls) rc = ck__wr_set(w, msg, CK_KEY_TOOL_CALLS, calls);
        else if (!rc) rc = b->unset(b->ctx, msg, CK_KEY_TOOL_CALLS);
        else if (n_calls) ck__wr_drop(w, calls);
    } else {
        rc = b->message ? b->message(b->ctx, (ck_value){NULL, 0}, NULL, &msg)
                        : b->object(b->ctx, &msg);
        if (rc) return rc;
        const char *role = ck__role_name(m->role);
        rc = ck__wr_set_string(w, msg, CK_KEY_ROLE, role, strlen(role));
        if (!rc && m->role == CK_ROLE_TOOL && m->n_parts)
            rc = ck__wr_set_string(w, msg, CK_KEY_TOOL_CALL_ID, m->parts[0].part.id,
                                   m->parts[0].part.id_len);
        if (!rc) rc = openai_content(w, m, &content, &none);
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
