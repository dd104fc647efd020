/* The Anthropic Messages dialect.
 *
 * Reading a message (index i): `role` (required string) as in Chat Completions; `content` a
 * string (one TEXT part, CK_MSG_STRING_CONTENT), null or absent (none), or a list of blocks,
 * one part each:
 *   {"type":"text","text":S}                                   TEXT
 *   {"type":"image",...}                                       IMAGE
 *   {"type":"tool_use","id","name","input"}                    TOOL_CALL, text = input's JSON
 *   {"type":"tool_result","tool_use_id","content","is_error"}  TOOL_RESULT, text = the string
 *        or the text blocks of a list joined by newlines; the list's other blocks (images,
 *        documents) follow as CK_PART_ATTACHED parts; CK_PART_IS_ERROR when is_error
 *   thinking / redacted_thinking                               OTHER, its thinking counted
 *   server_tool_use, *_tool_result (web search...), document, anything else with a "type"
 *                                                              OTHER: the server runs those
 *        tools within one assistant message, so they need no pairing here
 * Every block is kept as the host's own value, so thinking blocks keep their signatures byte
 * for byte and cache_control markers stay where the caller put them (a block that has one is
 * CK_PART_CACHE_MARK).
 *
 * Building: NEW messages are {"role":role,"content":[blocks]}, a result
 * {"type":"tool_result","tool_use_id":id,"content":text} (with "is_error":true when flagged),
 * a text {"type":"text","text":text}. EDIT is a shallow copy of the source message whose
 * content list has the source's blocks as they were, a replaced result as a copy of its block
 * with the text as its content (attached images beside it), replaced texts as copies with the
 * text replaced, new parts as new blocks; a string content whose one part stays is a string.
 * A message the view marks CK_MSG_CACHE_BREAKPOINT is written with a content list whose last
 * block (a copy when it is the host's own) gains "cache_control":{"type":"ephemeral"}.
 *
 * Pairing: a call's results stand in the next message, a user message, before any other
 * content in it; tool_use ids are unique in the whole request. */
#include <stdio.h>
#include <string.h>

#include "./fmt.h"

static int anthropic_block_kind(ck__rd *rd, ck_value item) {
    if (ck__rd_is(rd, item, CK_KEY_TYPE, "tool_use") ||
        ck__rd_is(rd, item, CK_KEY_TYPE, "tool_result") ||
        ck__rd_is(rd, item, CK_KEY_TYPE, "thinking") ||
        ck__rd_is(rd, item, CK_KEY_TYPE, "redacted_thinking") ||
        ck__rd_is(rd, item, CK_KEY_TYPE, "server_tool_use"))
        return 2;
    if (ck__rd_is(rd, item, CK_KEY_TYPE, "image")) {
        ck_value src;
        return ck__rd_field(rd, item, CK_KEY_SOURCE, &src) > 0 ? 2 : 1;
    }
    return 1;
}

static int anthropic_detect(ck__rd *rd, ck_value msg) {
    ck_value content;
    size_t n;
    if (!ck__rd_chat_shape(rd, msg, &content, &n)) return 0;
    int score = 1;
    for (size_t k = 0; k < n; k++) {
        ck_value item;
        if (ck__rd_item(rd, content, k, &item)) return 0;
        if (ck__rd_is(rd, item, CK_KEY_TYPE, "image_url")) return 0;
        if (anthropic_block_kind(rd, item) == 2) score = 2;
    }
    return score;
}

/* Adds block `item` as part p, marked when the caller put a cache_control marker on it (they
 * count against the provider's four when the view places its own). */
static int anthropic_part(ck__rd *rd, ck_part *p, ck_value item) {
    ck_value mark;
    int got = ck__rd_field(rd, item, CK_KEY_CACHE_CONTROL, &mark);
    if (got < 0) return got;
    if (got && ck__rd_kind(rd, mark) != CK_VALUE_NULL) p->flags |= CK_PART_CACHE_MARK;
    return ck__rd_part(rd, p, item);
}

static int anthropic_read_block(ck__rd *rd, ck_value item, size_t k) {
    ck_part p;
    const char *type;
    size_t tl;
    int rc;
    if (ck__rd_item_head(rd, item, k, &p, &type, &tl, &rc)) return rc;
#define IS(lit) (tl == sizeof(lit) - 1 && memcmp(type, lit, tl) == 0)
    if (IS("text")) {
        rc = ck__rd_text_item(rd, item, k, &p);
        return rc ? rc : anthropic_part(rd, &p, item);
    }
    if (IS("image")) {
        p.kind = CK_PART_IMAGE;
        p.flags = CK_PART_ANTHROPIC;
        return anthropic_part(rd, &p, item);
    }
    if (IS("tool_use")) {
        p.kind = CK_PART_TOOL_CALL;
        p.flags = CK_PART_ANTHROPIC;
        ck_value input;
        if ((rc = ck__rd_need_string(rd, item, CK_KEY_ID, &p.id, &p.id_len,
                                     ".content[%zu].id")))
            return rc;
        if ((rc = ck__rd_need_string(rd, item, CK_KEY_NAME, &p.name, &p.name_len,
                                     ".content[%zu].name")))
            return rc;
        int got = ck__rd_field(rd, item, CK_KEY_INPUT, &input);
        if (got < 0) return got;
        if (got && (rc = ck__rd_text_or_json(rd, input, &p.text, &p.text_len,
                                             ".content[%zu].input")))
            return rc;
        return anthropic_part(rd, &p, item);
    }
    if (IS("tool_result")) {
        p.kind = CK_PART_TOOL_RESULT;
        p.flags = CK_PART_ANTHROPIC | (ck__rd_true(rd, item, CK_KEY_IS_ERROR) ? CK_PART_IS_ERROR
                                                                             : 0);
        if ((rc = ck__rd_need_string(rd, item, CK_KEY_TOOL_USE_ID, &p.id, &p.id_len,
                                     ".content[%zu].tool_use_id")))
            return rc;
        ck_value content = {NULL, 0};
        int got = ck__rd_field(rd, item, CK_KEY_CONTENT, &content);
        if (got < 0) return got;
        if ((rc = ck__rd_joined_text(rd, content, &p.text, &p.text_len,
                                     ".content[%zu].content")) ||
            (rc = anthropic_part(rd, &p, item)))
            return rc;
        return got ? ck__rd_attachments(rd, content, ".content[%zu].content") : CK_OK;
    }
    /* Thinking and everything else stays whole; what it says counts for its cost. */
    p.kind = CK_PART_OTHER;
    if (IS("thinking") || IS("redacted_thinking")) p.flags = CK_PART_ANTHROPIC;
    ck_value field;
    ck_key key = IS("thinking") ? CK_KEY_THINKING : IS("redacted_thinking") ? CK_KEY_DATA
                                                                              : CK_KEY_TEXT;
    int got = ck__rd_field(rd, item, key, &field);
    if (got < 0) return got;
    if (got && ck__rd_kind(rd, field) == CK_VALUE_STRING)
        rc = ck__rd_string(rd, field, &p.text, &p.text_len, ".content[%zu]");
    else if (!IS("thinking") && !IS("redacted_thinking"))
        rc = ck__rd_field(rd, item, CK_KEY_CONTENT, &field) > 0
                 ? ck__rd_text_or_json(rd, field, &p.text, &p.text_len, ".content[%zu]")
                 : CK_OK;
#undef IS
    return rc ? rc : anthropic_part(rd, &p, item);
}

static int anthropic_read(ck__rd *rd, ck_value msg) {
    ck_role role;
    ck_value content;
    ck_value_kind ck;
    int rc = ck__rd_head(rd, msg, &role, &content, &ck);
    if (rc) return rc;
    if ((rc = ck__rd_message(rd, msg, role, ck == CK_VALUE_STRING ? CK_MSG_STRING_CONTENT : 0)))
        return rc;
    size_t n;
    if ((rc = ck__rd_simple_content(rd, content, ck, &n))) return rc;
    for (size_t k = 0; k < n && !rc; k++) {
        ck_value item;
        if (!(rc = ck__rd_item(rd, content, k, &item))) rc = anthropic_read_block(rd, item, k);
    }
    return rc;
}

/* ---- building ---- */

/* A new block for a new part: a result or a text. */
static int anthropic_new_block(ck__wr *w, const ck_part *p, ck_value *out) {
    const ck_host_builder *b = w->b;
    int rc = b->object(b->ctx, out);
    if (rc) return rc;
    if (p->kind == CK_PART_TOOL_RESULT) {
        rc = ck__wr_set_string(w, *out, CK_KEY_TYPE, "tool_result", 11);
        if (!rc) rc = ck__wr_set_string(w, *out, CK_KEY_TOOL_USE_ID, p->id, p->id_len);
        if (!rc) rc = ck__wr_set_string(w, *out, CK_KEY_CONTENT, p->text, p->text_len);
        if (!rc && (p->flags & CK_PART_IS_ERROR)) {
            ck_value t;
            rc = b->boolean(b->ctx, 1, &t);
            if (!rc) rc = ck__wr_set(w, *out, CK_KEY_IS_ERROR, t);
        }
    } else {
        rc = ck__wr_set_string(w, *out, CK_KEY_TYPE, "text", 4);
        if (!rc) rc = ck__wr_set_string(w, *out, CK_KEY_TEXT, p->text, p->text_len);
    }
    if (rc) ck__wr_drop(w, *out);
    return rc;
}

/* One output part as a block. */
static int anthropic_block(ck__wr *w, const ck_out_part *op, ck_value *out) {
    int rc;
    if (ck__wr_plain_block(w, op, out, &rc)) return rc;
    if (op->src_msg == CK_NONE || op->part.host == CK__HOST_WHOLE)
        return anthropic_new_block(w, &op->part, out);
    ck_value item = ck__wr_part_value(w, op->src_msg, op->src_part);
    ck_value content;
    rc = ck__wr_result_content(w, op->src_msg, op->src_part, op->part.text,
                               op->part.text_len, &content);
    return rc ? rc : ck__wr_copy_set(w, item, CK_KEY_CONTENT, content, out);
}

static int anthropic_write(ck__wr *w, const ck_out_msg *m, ck_value *out) {
    return ck__wr_block_message(w, m, 0, anthropic_block, out);
}

const ck__fmt ck__fmt_anthropic = {
    CK_FORMAT_ANTHROPIC, "anthropic", anthropic_detect, anthropic_read, anthropic_write,
    CK__PAIR_NEXT_MESSAGE | CK__PAIR_IDS_UNIQUE, CK_ROLE_USER,
};
