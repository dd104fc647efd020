/*
 * apply.c - turning a ck_view back into JS messages (docs/mapping.md, "Applying a view"), and
 * the two pair operations that read a message list and answer with violations or a view.
 *
 * The view is a plan over the caller's own objects: kept messages are returned as they are
 * (the same objects, so `===` holds), edited ones are shallow copies whose content and
 * tool_calls are rebuilt from source items, and nothing the caller passed in is ever mutated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_util.h"

static const char *const ROLE_NAMES[] = {"system", "developer", "user", "assistant", "tool"};

typedef struct applier {
    napi_env env;
    const ckjs_messages *src;
    ck_format format;
    napi_value key_content;    /* "content", to find the key among a message's own keys */
    napi_value key_tool_calls; /* "tool_calls", likewise */
} applier;

/* One key that a copy replaces: `value` NULL removes the key; `append` adds it at the end
 * when the source lacks it. */
typedef struct override {
    napi_value key;
    napi_value value;
    int append;
} override;

/*
 * A shallow copy of `obj` like `{...obj}`: its own enumerable keys (symbols too) in order,
 * each defined on the copy (never assigned, so an own "__proto__" key stays a plain key), with
 * the overrides applied in place.
 */
static int copy_object(applier *a, napi_value obj, override *ov, size_t n_ov, napi_value *out) {
    napi_env env = a->env;
    napi_value keys;
    uint32_t n = 0;
    NODE_API_CALL_RC(env,
                     napi_get_all_property_names(env, obj, napi_key_own_only, napi_key_enumerable,
                                                 napi_key_numbers_to_strings, &keys));
    NODE_API_CALL_RC(env, napi_get_array_length(env, keys, &n));
    NODE_API_CALL_RC(env, napi_create_object(env, out));
    napi_property_descriptor *props = calloc((size_t)n + n_ov + 1, sizeof *props);
    int *seen = calloc(n_ov + 1, sizeof *seen);
    int rc = CK_OK;
    size_t count = 0;
    if (!props || !seen) rc = CK_ENOMEM;
    for (uint32_t i = 0; i < n && !rc; i++) {
        napi_value key, value = NULL;
        if (napi_get_element(env, keys, i, &key) != napi_ok) goto napi_failed;
        size_t hit = n_ov;
        for (size_t o = 0; o < n_ov && hit == n_ov; o++) {
            bool equal = false;
            if (napi_strict_equals(env, key, ov[o].key, &equal) != napi_ok) goto napi_failed;
            if (equal) hit = o;
        }
        if (hit < n_ov) {
            seen[hit] = 1;
            value = ov[hit].value;
            if (!value) continue;
        } else if (napi_get_property(env, obj, key, &value) != napi_ok) {
            goto napi_failed;
        }
        props[count].name = key;
        props[count].value = value;
        props[count].attributes = napi_writable | napi_enumerable | napi_configurable;
        count++;
    }
    for (size_t o = 0; o < n_ov && !rc; o++) {
        if (seen[o] || !ov[o].append || !ov[o].value) continue;
        props[count].name = ov[o].key;
        props[count].value = ov[o].value;
        props[count].attributes = napi_writable | napi_enumerable | napi_configurable;
        count++;
    }
    if (!rc && count && napi_define_properties(env, *out, count, props) != napi_ok)
        goto napi_failed;
    free(props);
    free(seen);
    if (rc == CK_ENOMEM) {
        ckjs_fail(env, CK_ENOMEM, NULL);
        return CKJS_THROWN;
    }
    return rc;
napi_failed:
    ckjs_throw_last_error(env, "copying a message");
    free(props);
    free(seen);
    return CKJS_THROWN;
}

static int set_str(applier *a, napi_value obj, const char *key, const char *s, size_t len) {
    napi_value value = ckjs_string(a->env, s, len);
    if (!value) return CKJS_THROWN;
    NODE_API_CALL_RC(a->env, napi_set_named_property(a->env, obj, key, value));
    return CK_OK;
}

/* A new content block for part `p` (mapping.md, NEW for Anthropic). */
static int new_block(applier *a, const ck_part *p, napi_value *out) {
    napi_env env = a->env;
    NODE_API_CALL_RC(env, napi_create_object(env, out));
    int rc;
    if (p->kind == CK_PART_TOOL_RESULT) {
        if ((rc = set_str(a, *out, "type", "tool_result", 11)) ||
            (rc = set_str(a, *out, "tool_use_id", p->id, p->id_len)) ||
            (rc = set_str(a, *out, "content", p->text, p->text_len)))
            return rc;
        if (p->flags & CK_PART_IS_ERROR) {
            napi_value yes;
            NODE_API_CALL_RC(env, napi_get_boolean(env, true, &yes));
            NODE_API_CALL_RC(env, napi_set_named_property(env, *out, "is_error", yes));
        }
        return CK_OK;
    }
    if ((rc = set_str(a, *out, "type", "text", 4))) return rc;
    return set_str(a, *out, "text", p->text, p->text_len);
}

/*
 * The content of a tool result whose text was replaced (by a placeholder): the text as a
 * string, or, when the source content is a list holding items the reader took no text from
 * (images, documents: objects without a `text`), a list of a text block with the new text
 * followed by those items, the caller's own objects, so that no part of the result is lost.
 */
static int replaced_result_content(applier *a, napi_value source, const char *text, size_t len,
                                   napi_value *out) {
    napi_env env = a->env;
    bool is_array = false;
    uint32_t n = 0, kept = 0;
    napi_value list = NULL;
    *out = NULL;
    if (source) NODE_API_CALL_RC(env, napi_is_array(env, source, &is_array));
    if (is_array) NODE_API_CALL_RC(env, napi_get_array_length(env, source, &n));
    for (uint32_t i = 0; i < n; i++) {
        napi_value item, item_text;
        napi_valuetype type, text_type;
        bool item_array = false;
        NODE_API_CALL_RC(env, napi_get_element(env, source, i, &item));
        NODE_API_CALL_RC(env, napi_typeof(env, item, &type));
        if (type != napi_object) continue;
        NODE_API_CALL_RC(env, napi_is_array(env, item, &item_array));
        if (item_array) continue;
        NODE_API_CALL_RC(env, napi_get_named_property(env, item, "text", &item_text));
        NODE_API_CALL_RC(env, napi_typeof(env, item_text, &text_type));
        if (text_type != napi_undefined && text_type != napi_null) continue;
        if (!list) {
            napi_value block;
            NODE_API_CALL_RC(env, napi_create_array(env, &list));
            NODE_API_CALL_RC(env, napi_create_object(env, &block));
            int rc = set_str(a, block, "type", "text", 4);
            if (!rc) rc = set_str(a, block, "text", text, len);
            if (rc) return rc;
            NODE_API_CALL_RC(env, napi_set_element(env, list, kept++, block));
        }
        NODE_API_CALL_RC(env, napi_set_element(env, list, kept++, item));
    }
    *out = list ? list : ckjs_string(env, text, len);
    return *out ? CK_OK : CKJS_THROWN;
}

/* The value of `key` on source message `msg` ("content", "tool_calls"). */
static int source_field(applier *a, size_t msg, const char *key, napi_value *out) {
    NODE_API_CALL_RC(a->env, napi_get_named_property(a->env, a->src->objects[msg], key, out));
    return CK_OK;
}

/* Item `index` of source message `msg`'s list `key`, or NULL when it is not there (the
 * caller's object changed under a getter); the caller then builds a new block. */
static int source_item(applier *a, size_t msg, const char *key, uint32_t index, napi_value *out) {
    napi_value list;
    bool is_array = false;
    *out = NULL;
    int rc = source_field(a, msg, key, &list);
    if (rc) return rc;
    NODE_API_CALL_RC(a->env, napi_is_array(a->env, list, &is_array));
    if (!is_array) return CK_OK;
    NODE_API_CALL_RC(a->env, napi_get_element(a->env, list, index, out));
    napi_valuetype type;
    NODE_API_CALL_RC(a->env, napi_typeof(a->env, *out, &type));
    if (type == napi_undefined) *out = NULL;
    return CK_OK;
}

/* Appends the block for source part `op`: the source item itself when it is unchanged, a
 * shallow copy with the text swapped when it was replaced, a new block when the source was a
 * whole string. */
static int source_block(applier *a, const ck_out_part *op, napi_value *out) {
    const ck_part *parts = NULL;
    size_t n_parts = 0;
    if (ck_history_get(a->src->history, op->src_msg, NULL, NULL, &parts, &n_parts) ||
        op->src_part >= n_parts)
        return new_block(a, &op->part, out);
    const ck_part *sp = &parts[op->src_part];
    napi_value item = NULL;
    int rc;
    if (sp->host != CKJS_HOST_CONTENT_WHOLE &&
        (rc = source_item(a, op->src_msg, "content", sp->host, &item)))
        return rc;
    napi_valuetype type = napi_undefined;
    if (item) NODE_API_CALL_RC(a->env, napi_typeof(a->env, item, &type));
    if (!op->replaced) {
        if (item) *out = item;
        return item ? CK_OK : new_block(a, sp, out);
    }
    if (type != napi_object) return new_block(a, &op->part, out);
    override ov;
    ov.key =
        ckjs_string(a->env, sp->kind == CK_PART_TOOL_RESULT ? "content" : "text", NAPI_AUTO_LENGTH);
    if (!ov.key) return CKJS_THROWN;
    if (sp->kind == CK_PART_TOOL_RESULT) {
        napi_value content;
        NODE_API_CALL_RC(a->env, napi_get_property(a->env, item, ov.key, &content));
        if ((rc = replaced_result_content(a, content, op->part.text, op->part.text_len,
                                          &ov.value)))
            return rc;
    } else {
        ov.value = ckjs_string(a->env, op->part.text, op->part.text_len);
    }
    ov.append = 1;
    if (!ov.value) return CKJS_THROWN;
    return copy_object(a, item, &ov, 1, out);
}

/* A part that lives in tool_calls rather than in content. */
static int is_tool_calls_part(const ck_out_part *op) {
    return op->part.kind == CK_PART_TOOL_CALL && (op->part.host & CKJS_HOST_TOOL_CALL) &&
           op->src_msg != CK_NONE;
}

/*
 * The content of an output message (mapping.md; the same decisions as build_content() in
 * csrc/src/json.c). *out is NULL when an OpenAI message has no content parts.
 */
static int build_content(applier *a, const ck_out_msg *m, napi_value *out) {
    napi_env env = a->env;
    size_t n_content = 0, n_text = 0;
    const ck_out_part *only = NULL;
    *out = NULL;
    for (size_t k = 0; k < m->n_parts; k++) {
        if (is_tool_calls_part(&m->parts[k])) continue;
        n_content++;
        n_text += m->parts[k].part.kind == CK_PART_TEXT;
        only = &m->parts[k];
    }
    int openai = a->format == CK_FORMAT_OPENAI;
    int openai_tool = openai && m->role == CK_ROLE_TOOL;
    int plain = only && n_content == 1 &&
                ((m->op == CK_OP_EDIT && (m->flags & CK_MSG_STRING_CONTENT) &&
                  only->src_msg == m->src && only->part.host == CKJS_HOST_CONTENT_WHOLE) ||
                 openai_tool);
    if (plain) {
        /* The source string itself when it is unchanged and still a string. */
        if (only->src_msg != CK_NONE && !only->replaced) {
            napi_value s;
            napi_valuetype type;
            int rc = source_field(a, only->src_msg, "content", &s);
            if (rc) return rc;
            NODE_API_CALL_RC(env, napi_typeof(env, s, &type));
            if (type == napi_string) {
                *out = s;
                return CK_OK;
            }
        }
        /* A replaced output keeps the source's non-text items (images) beside its text. */
        if (openai_tool && only->src_msg != CK_NONE && only->replaced &&
            only->part.kind == CK_PART_TOOL_RESULT) {
            napi_value s;
            int rc = source_field(a, only->src_msg, "content", &s);
            if (rc) return rc;
            return replaced_result_content(a, s, only->part.text, only->part.text_len, out);
        }
        *out = ckjs_string(env, only->part.text, only->part.text_len);
        return *out ? CK_OK : CKJS_THROWN;
    }
    if (m->op == CK_OP_NEW && openai && n_content && n_text == n_content) {
        /* A new OpenAI message of text parts is one string, the parts joined by newlines. */
        size_t total = 0;
        for (size_t k = 0; k < m->n_parts; k++)
            total += m->parts[k].part.text_len + 1;
        char *buf = malloc(total);
        if (!buf) {
            ckjs_fail(env, CK_ENOMEM, NULL);
            return CKJS_THROWN;
        }
        size_t at = 0;
        for (size_t k = 0; k < m->n_parts; k++) {
            if (k) buf[at++] = '\n';
            memcpy(buf + at, m->parts[k].part.text, m->parts[k].part.text_len);
            at += m->parts[k].part.text_len;
        }
        *out = ckjs_string(env, buf, at);
        free(buf);
        return *out ? CK_OK : CKJS_THROWN;
    }
    if (n_content == 0 && openai) return CK_OK;
    NODE_API_CALL_RC(env, napi_create_array_with_length(env, n_content, out));
    uint32_t at = 0;
    for (size_t k = 0; k < m->n_parts; k++) {
        const ck_out_part *op = &m->parts[k];
        if (is_tool_calls_part(op)) continue;
        napi_value block;
        int rc =
            op->src_msg == CK_NONE ? new_block(a, &op->part, &block) : source_block(a, op, &block);
        if (rc) return rc;
        NODE_API_CALL_RC(env, napi_set_element(env, *out, at++, block));
    }
    return CK_OK;
}

/* tool_calls of an edited message: the source items of its kept calls, in view order. */
static int build_tool_calls(applier *a, const ck_out_msg *m, napi_value *out) {
    napi_env env = a->env;
    *out = NULL;
    uint32_t at = 0;
    for (size_t k = 0; k < m->n_parts; k++) {
        const ck_out_part *op = &m->parts[k];
        if (!is_tool_calls_part(op)) continue;
        napi_value item;
        int rc = source_item(a, op->src_msg, "tool_calls",
                             op->part.host & (CKJS_HOST_TOOL_CALL - 1), &item);
        if (rc) return rc;
        if (!item) continue;
        if (!*out) NODE_API_CALL_RC(env, napi_create_array(env, out));
        NODE_API_CALL_RC(env, napi_set_element(env, *out, at++, item));
    }
    return CK_OK;
}

static int build_new(applier *a, const ck_out_msg *m, napi_value *out) {
    napi_env env = a->env;
    napi_value content;
    int rc = build_content(a, m, &content);
    if (rc) return rc;
    NODE_API_CALL_RC(env, napi_create_object(env, out));
    const char *role = m->role < CK_ROLE_OTHER ? ROLE_NAMES[m->role] : "user";
    if ((rc = set_str(a, *out, "role", role, strlen(role)))) return rc;
    if (a->format == CK_FORMAT_OPENAI && m->role == CK_ROLE_TOOL && m->n_parts &&
        (rc = set_str(a, *out, "tool_call_id", m->parts[0].part.id, m->parts[0].part.id_len)))
        return rc;
    if (!content && !(content = ckjs_string(env, "", 0))) return CKJS_THROWN;
    NODE_API_CALL_RC(env, napi_set_named_property(env, *out, "content", content));
    return CK_OK;
}

static int build_edit(applier *a, const ck_out_msg *m, napi_value *out) {
    napi_env env = a->env;
    napi_value content, calls;
    int rc = build_content(a, m, &content);
    if (!rc) rc = build_tool_calls(a, m, &calls);
    if (rc) return rc;
    override ov[2];
    ov[0].key = a->key_content;
    ov[0].value = content;
    ov[0].append = 1;
    if (!content) {
        /* No content parts left: a present key becomes null, an absent one stays absent. */
        NODE_API_CALL_RC(env, napi_get_null(env, &ov[0].value));
        ov[0].append = 0;
    }
    ov[1].key = a->key_tool_calls;
    ov[1].value = calls; /* NULL: no call is left, so the key goes */
    ov[1].append = 0;
    return copy_object(a, a->src->objects[m->src], ov, 2, out);
}

napi_value ckjs_view_apply(napi_env env, const ckjs_messages *src, const ck_view *view,
                           ck_format format) {
    applier a;
    a.env = env;
    a.src = src;
    a.format = format;
    if (!(a.key_content = ckjs_string(env, "content", 7)) ||
        !(a.key_tool_calls = ckjs_string(env, "tool_calls", 10)))
        return NULL;
    size_t n = ck_view_count(view);
    napi_value list;
    NODE_API_CALL(env, napi_create_array_with_length(env, n, &list));
    for (size_t i = 0; i < n; i++) {
        ck_out_msg m;
        napi_value msg = NULL;
        int rc = CK_OK;
        if (ck_view_get(view, i, &m) || (m.op != CK_OP_NEW && m.src >= src->count))
            return ckjs_throw_type_error(env, "internal error: view message %zu is invalid", i);
        if (m.op == CK_OP_KEEP)
            msg = src->objects[m.src];
        else if (m.op == CK_OP_NEW)
            rc = build_new(&a, &m, &msg);
        else
            rc = build_edit(&a, &m, &msg);
        if (rc) return NULL;
        NODE_API_CALL(env, napi_set_element(env, list, (uint32_t)i, msg));
    }
    return list;
}

/* ------------------------------------------------------------------------------------------ */
/* checkPairs / repairPairs                                                                   */
/* ------------------------------------------------------------------------------------------ */

/* Reads the (messages, format) arguments that both pair functions take and the messages into
 * a new history through the core's format layer (self->history). Returns 0, or -1 with an
 * exception pending. */
static int pair_args(napi_env env, napi_callback_info info, napi_value *messages,
                     ck_format *format, ckjs_values *self, ckjs_paths *paths) {
    size_t argc = 2;
    napi_value argv[2] = {NULL, NULL};
    bool is_array = false;
    NODE_API_CALL_BASE(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL), -1);
    if (argc > 0) NODE_API_CALL_BASE(env, napi_is_array(env, argv[0], &is_array), -1);
    if (!is_array) {
        ckjs_throw_type_error(env, "messages must be an array, not %s",
                              argc > 0 ? ckjs_type_name(env, argv[0]) : "undefined");
        return -1;
    }
    *messages = argv[0];
    *format = CK_FORMAT_AUTO;
    if (ckjs_format_arg(env, argc > 1 ? argv[1] : NULL, "options.format", format)) return -1;
    ck_history *h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    if (!h) {
        ckjs_fail(env, CK_ENOMEM, NULL);
        return -1;
    }
    ckjs_values_init(self, env, h, paths);
    ck_error err;
    int rc = ckjs_values_read(self, argv[0], 0, *format, format, &err);
    if (rc) {
        ck_history_free(h);
        ckjs_paths_dispose(paths);
        ckjs_fail(env, rc, &err);
        return -1;
    }
    return 0;
}

static napi_value violation_object(napi_env env, const ck_pair_violation *v, const ck_history *h,
                                   ck_format format) {
    char *text = NULL;
    size_t text_len = 0;
    if (ck_pair_violation_describe(h, v, format, &text, &text_len)) {
        ckjs_fail(env, CK_ENOMEM, NULL);
        return NULL;
    }
    napi_value obj, kind, index, part, id, message;
    napi_status made = napi_create_string_utf8(env, text, text_len, &message);
    ck_free(text);
    NODE_API_CALL(env, made);
    NODE_API_CALL(env, napi_create_object(env, &obj));
    NODE_API_CALL(
        env, napi_create_string_utf8(env, ck_pair_issue_name(v->kind), NAPI_AUTO_LENGTH, &kind));
    NODE_API_CALL(env, napi_create_double(env, (double)v->index, &index));
    NODE_API_CALL(env, napi_create_double(env, (double)v->part, &part));
    if (!(id = ckjs_string(env, v->id, v->id_len))) return NULL;
    NODE_API_CALL(env, napi_set_named_property(env, obj, "kind", kind));
    NODE_API_CALL(env, napi_set_named_property(env, obj, "index", index));
    NODE_API_CALL(env, napi_set_named_property(env, obj, "part", part));
    NODE_API_CALL(env, napi_set_named_property(env, obj, "toolCallId", id));
    NODE_API_CALL(env, napi_set_named_property(env, obj, "message", message));
    return obj;
}

static napi_value violations_array(napi_env env, const ck_pair_violation *v, size_t n,
                                   const ck_history *h, ck_format format) {
    napi_value list;
    NODE_API_CALL(env, napi_create_array_with_length(env, n, &list));
    for (size_t i = 0; i < n; i++) {
        napi_value obj = violation_object(env, &v[i], h, format);
        if (!obj) return NULL;
        NODE_API_CALL(env, napi_set_element(env, list, (uint32_t)i, obj));
    }
    return list;
}

napi_value ckjs_check_pairs(napi_env env, napi_callback_info info) {
    napi_value messages;
    ck_format format;
    ckjs_values src;
    ckjs_paths paths = {0};
    if (pair_args(env, info, &messages, &format, &src, &paths)) return NULL;
    ck_pair_violation *v = NULL;
    size_t n = 0;
    ck_error err;
    napi_value result = NULL;
    int rc = ck_check_pairs(src.history, format, &v, &n, &err);
    if (rc)
        ckjs_fail(env, rc, &err);
    else
        result = violations_array(env, v, n, src.history, format);
    ck_free(v);
    ck_history_free(src.history);
    ckjs_paths_dispose(&paths);
    return result;
}

napi_value ckjs_repair_pairs(napi_env env, napi_callback_info info) {
    napi_value messages;
    ck_format format;
    ckjs_values src;
    ckjs_paths paths = {0};
    if (pair_args(env, info, &messages, &format, &src, &paths)) return NULL;
    ck_view *view = NULL;
    ck_error err;
    napi_value result = NULL;
    int rc = ck_repair_pairs(src.history, format, &view, &err);
    if (rc)
        ckjs_fail(env, rc, &err);
    else
        result = ckjs_values_build(&src, messages, view);
    ck_view_free(view);
    ck_history_free(src.history);
    ckjs_paths_dispose(&paths);
    return result;
}
