/* The Vercel AI SDK dialect: ModelMessage (v5), with the v4 field names read too.
 *
 * A message (index i) is {"role", "content"}: role system, user, assistant, tool; `content` a
 * string (one TEXT part, CK_MSG_STRING_CONTENT; not for tool messages, whose content must be
 * a list), null or absent (no part), or a list of parts:
 *   {"type":"text","text"}                                     TEXT
 *   {"type":"image","image",...}                               IMAGE
 *   {"type":"file","data","mediaType",...}                     IMAGE for an "image/..." media
 *        type, else OTHER
 *   {"type":"reasoning","text",...}                            OTHER, its text counted
 *   {"type":"tool-call","toolCallId","toolName","input"}       TOOL_CALL, text = input's JSON
 *        (v4: "args" instead of "input"); with "providerExecuted":true OTHER (the provider ran
 *        it and its result stands in the same assistant message: nothing to pair)
 *   {"type":"tool-result","toolCallId","toolName","output"}    in a tool message: TOOL_RESULT,
 *        text = output.value (text and error-text: the string; json and error-json: its
 *        compact JSON; content: its text items joined by newlines, the other items following
 *        as CK_PART_ATTACHED parts, IMAGE for media of an image type, image-data, image-url
 *        and image-file-id, else OTHER); error-* outputs are
 *        CK_PART_IS_ERROR. v4: "result" (any value: a string, else its JSON) and "isError"
 *        instead of "output". In an assistant message (provider-executed) it is OTHER.
 *   anything else with a "type"                                OTHER ("text" counted)
 * "providerOptions" and every other field, anywhere, is not read and survives.
 *
 * Building: EDIT is a shallow copy of the message whose content list has the source's parts
 * as they were, replaced texts as copies with "text" replaced, a replaced result as a copy of
 * its part with "output":{"type":"text","value":text} (a v4 part: "result":text), new parts
 * as new ones; a string content whose one part stays is a string. NEW messages:
 *   checkpoint  {"role":"user","content":"[Context Compaction]..."}
 *   stub        {"role":"tool","content":[{"type":"tool-result","toolCallId":id,
 *                "toolName":name,"output":{"type":"text","value":
 *                "result unavailable: context was compacted"}}]}
 * An offloaded result keeps its part, its output {"type":"text","value":<placeholder>}, or for
 * a "content" output with media {"type":"content","value":[{"type":"text","text":
 * <placeholder>}, the media as they were]}.
 *
 * Pairing: the results of an assistant message's calls stand in the one tool message right
 * after it (several results in one message, as the SDK writes them); results split over
 * several tool messages are gathered into the first by the repair. A result names its tool. */
#include <stdio.h>
#include <string.h>

#include "./fmt.h"

/* The private part flag: a v4 result (its text in "result", not "output"). */
#define AISDK_PART_V4 (1u << 20)

static int aisdk_detect(ck__rd *rd, ck_value msg) {
    if (ck__rd_kind(rd, msg) != CK_VALUE_OBJECT) return 0;
    ck_value v, content;
    if (ck__rd_field(rd, msg, CK_KEY_ROLE, &v) <= 0) return 0;
    if (ck__rd_field(rd, msg, CK_KEY_TOOL_CALLS, &v) > 0 && ck__rd_kind(rd, v) != CK_VALUE_NULL)
        return 0;
    if (ck__rd_field(rd, msg, CK_KEY_CONTENT, &content) <= 0 ||
        ck__rd_kind(rd, content) != CK_VALUE_ARRAY)
        return ck__rd_is(rd, msg, CK_KEY_ROLE, "tool") ? 0 : 1;
    size_t n;
    if (ck__rd_count(rd, content, &n)) return 0;
    int score = 1;
    for (size_t k = 0; k < n; k++) {
        ck_value item;
        if (ck__rd_item(rd, content, k, &item)) return 0;
        if (ck__rd_is(rd, item, CK_KEY_TYPE, "tool-call") ||
            ck__rd_is(rd, item, CK_KEY_TYPE, "tool-result") ||
            ck__rd_is(rd, item, CK_KEY_TYPE, "reasoning") || ck__rd_is(rd, item, CK_KEY_TYPE, "file"))
            score = 2;
        /* An unknown part (an image_url) reads as OTHER; Anthropic's blocks are not ours. */
        else if (ck__rd_is(rd, item, CK_KEY_TYPE, "tool_use") ||
                 ck__rd_is(rd, item, CK_KEY_TYPE, "tool_result"))
            return 0;
        else if (ck__rd_is(rd, item, CK_KEY_TYPE, "image") &&
                 ck__rd_field(rd, item, CK_KEY_IMAGE, &v) > 0)
            score = 2;
    }
    /* A tool message of this dialect holds tool-result parts. */
    if (score < 2 && ck__rd_is(rd, msg, CK_KEY_ROLE, "tool")) return 0;
    return score;
}

/* The text of a result's output {"type","value"} (v5) or its result (v4); *content is the
 * value of a "content" output (its media follow the result as attachments), else absent. */
static int aisdk_result_text(ck__rd *rd, ck_value item, ck_part *p, const char *where,
                             ck_value *content) {
    ck_value out, value;
    *content = (ck_value){NULL, 0};
    int got = ck__rd_field(rd, item, CK_KEY_OUTPUT, &out);
    if (got < 0) return got;
    if (!got) {
        /* v4: "result" is any value. */
        p->flags |= AISDK_PART_V4 | (ck__rd_true(rd, item, CK_KEY_IS_ERROR_CAMEL) ? CK_PART_IS_ERROR : 0);
        if ((got = ck__rd_field(rd, item, CK_KEY_RESULT, &value)) < 0) return got;
        if (!got) return ck__rd_fail(rd, CK_EMISSING, "required field is missing", "%s.output", where);
        return ck__rd_text_or_json(rd, value, &p->text, &p->text_len, where);
    }
    char at[96];
    if (ck__rd_kind(rd, out) != CK_VALUE_OBJECT)
        return ck__rd_fail(rd, CK_ETYPE, "expected an object", "%s.output", where);
    const char *type;
    size_t tl;
    snprintf(at, sizeof at, "%s.output.type", where);
    int rc = ck__rd_need_string(rd, out, CK_KEY_TYPE, &type, &tl, at);
    if (rc) return rc;
    if (tl > 6 && memcmp(type, "error-", 6) == 0) p->flags |= CK_PART_IS_ERROR;
    if ((got = ck__rd_field(rd, out, CK_KEY_VALUE, &value)) < 0) return got;
    snprintf(at, sizeof at, "%s.output.value", where);
    if (!got) return ck__rd_fail(rd, CK_EMISSING, "required field is missing", "%s", at);
    if (tl == 7 && memcmp(type, "content", 7) == 0) {
        *content = value;
        return ck__rd_joined_text(rd, value, &p->text, &p->text_len, at);
    }
    if ((tl == 4 && memcmp(type, "text", 4) == 0) || (tl == 10 && memcmp(type, "error-text", 10) == 0))
        return ck__rd_string(rd, value, &p->text, &p->text_len, at);
    return ck__rd_text_or_json(rd, value, &p->text, &p->text_len, at);
}

/* A call's or result's toolCallId (required) and toolName (required for a call). */
static int aisdk_ids(ck__rd *rd, ck_value item, ck_part *p, const char *where, int need_name) {
    char at[96];
    snprintf(at, sizeof at, "%s.toolCallId", where);
    int rc = ck__rd_need_string(rd, item, CK_KEY_TOOL_CALL_ID_CAMEL, &p->id, &p->id_len, at);
    if (rc) return rc;
    snprintf(at, sizeof at, "%s.toolName", where);
    return need_name ? ck__rd_need_string(rd, item, CK_KEY_TOOL_NAME, &p->name, &p->name_len, at)
                     : ck__rd_opt_string(rd, item, CK_KEY_TOOL_NAME, &p->name, &p->name_len, at);
}

/* Item k of a message's content list (`in` is "": the fields stand in the message). */
static int aisdk_read_part(ck__rd *rd, ck_value item, size_t k, const char *in) {
    ck_role role = rd->h->msgs[rd->h->n_msgs - 1].role;
    (void)in;
    ck_part p;
    memset(&p, 0, sizeof p);
    p.host = (uint32_t)k;
    char where[64], at[96];
    int plain;
    if (ck__rd_plain_item(rd, item, k, &p, &plain)) return plain;
    snprintf(where, sizeof where, ".content[%zu]", k);
    snprintf(at, sizeof at, "%s.type", where);
    const char *type;
    size_t tl;
    int rc = ck__rd_need_string(rd, item, CK_KEY_TYPE, &type, &tl, at);
    if (rc) return rc;
#define IS(lit) (tl == sizeof(lit) - 1 && memcmp(type, lit, tl) == 0)
    int provider = ck__rd_true(rd, item, CK_KEY_PROVIDER_EXECUTED);
    ck_value media = {NULL, 0};
    if (IS("text")) {
        p.kind = CK_PART_TEXT;
        snprintf(at, sizeof at, "%s.text", where);
        rc = ck__rd_need_string(rd, item, CK_KEY_TEXT, &p.text, &p.text_len, at);
    } else if (IS("image")) {
        p.kind = CK_PART_IMAGE;
    } else if (IS("file")) {
        const char *mt;
        size_t ml;
        snprintf(at, sizeof at, "%s.mediaType", where);
        rc = ck__rd_opt_string(rd, item, CK_KEY_MEDIA_TYPE, &mt, &ml, at);
        p.kind = ml > 6 && memcmp(mt, "image/", 6) == 0 ? CK_PART_IMAGE : CK_PART_OTHER;
    } else if (IS("tool-call") && !provider) {
        p.kind = CK_PART_TOOL_CALL;
        ck_value input;
        if ((rc = aisdk_ids(rd, item, &p, where, 1))) return rc;
        int got = ck__rd_field(rd, item, CK_KEY_INPUT, &input);
        if (!got) got = ck__rd_field(rd, item, CK_KEY_ARGS, &input);
        if (got < 0) return got;
        snprintf(at, sizeof at, "%s.input", where);
        if (got) rc = ck__rd_text_or_json(rd, input, &p.text, &p.text_len, at);
    } else if (IS("tool-result") && role == CK_ROLE_TOOL) {
        p.kind = CK_PART_TOOL_RESULT;
        if (!(rc = aisdk_ids(rd, item, &p, where, 0)))
            rc = aisdk_result_text(rd, item, &p, where, &media);
    } else {
        /* Reasoning, provider-executed calls and results, and everything else stay whole;
         * what they say counts for their cost. */
        p.kind = CK_PART_OTHER;
        ck_value v;
        int got = ck__rd_field(rd, item, CK_KEY_TEXT, &v);
        if (!got && (IS("tool-call") || IS("tool-result")))
            got = ck__rd_field(rd, item, IS("tool-call") ? CK_KEY_INPUT : CK_KEY_OUTPUT, &v);
        if (got < 0) return got;
        if (got) rc = ck__rd_text_or_json(rd, v, &p.text, &p.text_len, where);
    }
#undef IS
    if (!rc) rc = ck__rd_part(rd, &p, item);
    return rc || !media.ptr ? rc : ck__rd_attachments(rd, media, "");
}

static int aisdk_read(ck__rd *rd, ck_value msg) {
    /* Set by ck__rd_head when it succeeds; initialized for gcc -O3, which cannot see that. */
    ck_role role = CK_ROLE_USER;
    ck_value content = {NULL, 0};
    ck_value_kind ck = CK_VALUE_ABSENT;
    int rc = ck__rd_head(rd, msg, &role, &content, &ck);
    if (rc) return rc;
    if ((rc = ck__rd_message(rd, msg, role, ck == CK_VALUE_STRING ? CK_MSG_STRING_CONTENT : 0)))
        return rc;
    /* A tool message's content is a list of results; other messages without content (null
     * or absent, which the SDK does not write) read as the plain messages every chat dialect
     * shares: no parts. */
    if (role == CK_ROLE_TOOL && ck != CK_VALUE_ARRAY)
        return ck__rd_fail(rd, ck == CK_VALUE_ABSENT ? CK_EMISSING : CK_ETYPE,
                           ck == CK_VALUE_ABSENT ? "required field is missing" : "expected a list",
                           ".content");
    return ck__rd_chat_content(rd, content, ck, "", aisdk_read_part);
}

/* ---- building ---- */

/* {"type":"text","value":text}, a result's output. */
static int aisdk_output(ck__wr *w, const ck_part *p, ck_value *out) {
    return ck__wr_replaced_item(w, (ck_value){NULL, 0}, CK_KEY_VALUE, "text", p->text,
                                p->text_len, out);
}

/* A new part: a result (a stub) or a text. */
static int aisdk_new_part(ck__wr *w, const ck_part *p, ck_value *out) {
    if (p->kind != CK_PART_TOOL_RESULT)
        return ck__wr_replaced_item(w, (ck_value){NULL, 0}, CK_KEY_TEXT, "text", p->text,
                                    p->text_len, out);
    ck_value output;
    int rc = w->b->object(w->b->ctx, out);
    if (rc) return rc;
    rc = ck__wr_set_string(w, *out, CK_KEY_TYPE, "tool-result", 11);
    if (!rc) rc = ck__wr_set_string(w, *out, CK_KEY_TOOL_CALL_ID_CAMEL, p->id, p->id_len);
    if (!rc) rc = ck__wr_set_string(w, *out, CK_KEY_TOOL_NAME, p->name, p->name_len);
    if (!rc && !(rc = aisdk_output(w, p, &output))) rc = ck__wr_set(w, *out, CK_KEY_OUTPUT, output);
    if (rc) ck__wr_drop(w, *out);
    return rc;
}

/* One output part as a content part. */
static int aisdk_part(ck__wr *w, const ck_out_part *op, ck_value *out) {
    int rc;
    if (ck__wr_plain_block(w, op, out, &rc)) return rc;
    if (op->src_msg == CK_NONE || op->part.host == CK__HOST_WHOLE)
        return aisdk_new_part(w, &op->part, out);
    ck_value item = ck__wr_part_value(w, op->src_msg, op->src_part);
    if (op->part.flags & AISDK_PART_V4)
        return ck__wr_replaced_item(w, item, CK_KEY_RESULT, NULL, op->part.text,
                                    op->part.text_len, out);
    ck_value output, value;
    if (ck__wr_attached(w, op->src_msg, op->src_part)) {
        /* The media of a "content" output stay beside the new text. */
        rc = ck__wr_result_content(w, op->src_msg, op->src_part, op->part.text,
                                   op->part.text_len, &value);
        if (!rc && (rc = w->b->object(w->b->ctx, &output))) {
            ck__wr_drop(w, value);
        } else if (!rc) {
            if ((rc = ck__wr_set_string(w, output, CK_KEY_TYPE, "content", 7)))
                ck__wr_drop(w, value);
            else
                rc = ck__wr_set(w, output, CK_KEY_VALUE, value); /* (releases value) */
            if (rc) ck__wr_drop(w, output);
        }
    } else {
        rc = aisdk_output(w, &op->part, &output);
    }
    return rc ? rc : ck__wr_copy_set(w, item, CK_KEY_OUTPUT, output, out);
}

static int aisdk_write(ck__wr *w, const ck_out_msg *m, ck_value *out) {
    return ck__wr_block_message(w, m, 1, aisdk_part, out);
}

const ck__fmt ck__fmt_ai_sdk = {
    CK_FORMAT_AI_SDK, "ai-sdk", aisdk_detect, aisdk_read, aisdk_write,
    CK__PAIR_NEXT_MESSAGE | CK__PAIR_RESULT_NAMED, CK_ROLE_TOOL,
};
