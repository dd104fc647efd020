/* The JSON host: reads provider message JSON into a history through cJSON, and writes a view
 * back as JSON that reuses the parsed nodes, so kept messages and unknown fields come out as
 * they went in. The mapping rules are written down in docs/mapping.md. */
#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "./alloc.h"
#include "./internal.h"

#define HOST_CONTENT_WHOLE 0xFFFFFFu
#define HOST_TOOL_CALL (1u << 24)

struct ck__json_doc {
    cJSON *root;
    cJSON *messages; /* the message array (root itself, or root's "messages") */
    cJSON **nodes;   /* message i's object */
};

void ck__json_doc_free(ck__json_doc *doc) {
    if (!doc) return;
    cJSON_Delete(doc->root);
    ck__free(doc->nodes);
    ck__free(doc);
}

static ck_role role_of(const char *s) {
    static const char *const names[] = {"system", "developer", "user", "assistant", "tool"};
    for (int r = 0; r < 5; r++)
        if (strcmp(s, names[r]) == 0) return (ck_role)r;
    return CK_ROLE_OTHER;
}

static const char *const ROLE_NAMES[] = {"system", "developer", "user", "assistant", "tool"};

/* Copies `s` into the history's storage so that it lives as long as the history. */
static const char *keep_copy(ck_history *h, const char *s, size_t len) {
    char *copy = ck_history_alloc(h, len + 1);
    if (!copy) return NULL;
    memcpy(copy, s, len);
    copy[len] = '\0';
    return copy;
}

/* Compact JSON text of a node, owned by the history. */
static const char *print_node(ck_history *h, const cJSON *node, size_t *len) {
    char *printed = cJSON_PrintUnformatted(node);
    if (!printed) return NULL;
    *len = strlen(printed);
    const char *kept = keep_copy(h, printed, *len);
    cJSON_free(printed);
    return kept;
}

/* The text of a tool result's content: a string, or the text blocks of a list joined by
 * newlines. */
static int join_text(ck_history *h, const cJSON *content, const char **out, size_t *len,
                     size_t i, const char *field, ck_error *err) {
    *out = "";
    *len = 0;
    if (!content || cJSON_IsNull(content)) return CK_OK;
    if (cJSON_IsString(content)) {
        *out = content->valuestring;
        *len = strlen(content->valuestring);
        return CK_OK;
    }
    if (!cJSON_IsArray(content))
        return ck__fail(err, CK_ETYPE, "expected a string or a list", i, "messages[%zu].%s", i,
                        field);
    size_t total = 0, k = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, content) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(item, "text");
        if (cJSON_IsString(item)) total += strlen(item->valuestring) + 1;
        else if (cJSON_IsString(text)) total += strlen(text->valuestring) + 1;
        else if (text && !cJSON_IsNull(text))
            return ck__fail(err, CK_ETYPE, "expected a string", i, "messages[%zu].%s[%zu].text",
                            i, field, k);
        k++;
    }
    char *buf = ck_history_alloc(h, total + 1);
    if (!buf) return ck__fail(err, CK_ENOMEM, NULL, i, NULL);
    size_t at = 0;
    int first = 1;
    cJSON_ArrayForEach(item, content) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(item, "text");
        const char *s = cJSON_IsString(item) ? item->valuestring
                                             : (cJSON_IsString(text) ? text->valuestring : NULL);
        if (!s) continue;
        if (!first) buf[at++] = '\n';
        first = 0;
        size_t n = strlen(s);
        memcpy(buf + at, s, n);
        at += n;
    }
    buf[at] = '\0';
    *out = buf;
    *len = at;
    return CK_OK;
}

static const char *opt_string(const cJSON *obj, const char *key, size_t *len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v)) {
        *len = 0;
        return "";
    }
    *len = strlen(v->valuestring);
    return v->valuestring;
}

/* A required string field: missing and wrong-typed values are errors that name the place. */
static int need_string(const cJSON *obj, const char *key, const char **out, size_t *len,
                       size_t i, const char *where, ck_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v) return ck__fail(err, CK_EMISSING, "required field is missing", i, "%s", where);
    if (!cJSON_IsString(v))
        return ck__fail(err, CK_ETYPE, "expected a string", i, "%s", where);
    *out = v->valuestring;
    *len = strlen(v->valuestring);
    return CK_OK;
}

static int read_block(ck_history *h, const cJSON *item, size_t i, size_t k, ck_part *p,
                      ck_error *err) {
    char where[96];
    if (cJSON_IsString(item)) {
        p->kind = CK_PART_TEXT;
        p->text = item->valuestring;
        p->text_len = strlen(item->valuestring);
        return CK_OK;
    }
    if (!cJSON_IsObject(item))
        return ck__fail(err, CK_ETYPE, "expected an object", i, "messages[%zu].content[%zu]", i,
                        k);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(item, "type");
    if (!type)
        return ck__fail(err, CK_EMISSING, "required field is missing", i,
                        "messages[%zu].content[%zu].type", i, k);
    if (!cJSON_IsString(type))
        return ck__fail(err, CK_ETYPE, "expected a string", i, "messages[%zu].content[%zu].type",
                        i, k);
    const char *t = type->valuestring;
    if (strcmp(t, "text") == 0) {
        p->kind = CK_PART_TEXT;
        snprintf(where, sizeof where, "messages[%zu].content[%zu].text", i, k);
        return need_string(item, "text", &p->text, &p->text_len, i, where, err);
    }
    if (strcmp(t, "image_url") == 0 || strcmp(t, "image") == 0) {
        p->kind = CK_PART_IMAGE;
        p->flags = t[5] ? CK_PART_OPENAI : CK_PART_ANTHROPIC;
        return CK_OK;
    }
    if (strcmp(t, "tool_use") == 0) {
        p->kind = CK_PART_TOOL_CALL;
        p->flags = CK_PART_ANTHROPIC;
        snprintf(where, sizeof where, "messages[%zu].content[%zu].id", i, k);
        int rc = need_string(item, "id", &p->id, &p->id_len, i, where, err);
        snprintf(where, sizeof where, "messages[%zu].content[%zu].name", i, k);
        if (!rc) rc = need_string(item, "name", &p->name, &p->name_len, i, where, err);
        if (rc) return rc;
        const cJSON *input = cJSON_GetObjectItemCaseSensitive(item, "input");
        if (input) {
            p->text = print_node(h, input, &p->text_len);
            if (!p->text) return ck__fail(err, CK_ENOMEM, NULL, i, NULL);
        }
        return CK_OK;
    }
    if (strcmp(t, "tool_result") == 0) {
        p->kind = CK_PART_TOOL_RESULT;
        p->flags = CK_PART_ANTHROPIC;
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(item, "is_error")))
            p->flags |= CK_PART_IS_ERROR;
        snprintf(where, sizeof where, "messages[%zu].content[%zu].tool_use_id", i, k);
        int rc = need_string(item, "tool_use_id", &p->id, &p->id_len, i, where, err);
        snprintf(where, sizeof where, "content[%zu].content", k);
        if (!rc)
            rc = join_text(h, cJSON_GetObjectItemCaseSensitive(item, "content"), &p->text,
                           &p->text_len, i, where, err);
        return rc;
    }
    p->kind = CK_PART_OTHER;
    if (strcmp(t, "thinking") == 0 || strcmp(t, "redacted_thinking") == 0)
        p->flags = CK_PART_ANTHROPIC;
    p->text = opt_string(item, strcmp(t, "thinking") == 0 ? "thinking" : "text", &p->text_len);
    return CK_OK;
}

static int read_message(ck_history *h, const cJSON *msg, size_t i, ck_error *err) {
    if (!cJSON_IsObject(msg))
        return ck__fail(err, CK_ETYPE, "expected an object", i, "messages[%zu]", i);
    const char *role_s = NULL;
    size_t role_len = 0;
    char where[96];
    snprintf(where, sizeof where, "messages[%zu].role", i);
    int rc = need_string(msg, "role", &role_s, &role_len, i, where, err);
    if (rc) return rc;
    ck_role role = role_of(role_s);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    uint32_t flags = cJSON_IsString(content) ? CK_MSG_STRING_CONTENT : 0;
    if ((rc = ck_history_add_message(h, role, flags)))
        return ck__fail(err, rc, NULL, i, "messages[%zu]", i);
    ck_part p;
    if (role == CK_ROLE_TOOL) {
        memset(&p, 0, sizeof p);
        p.kind = CK_PART_TOOL_RESULT;
        p.flags = CK_PART_OPENAI;
        p.host = HOST_CONTENT_WHOLE;
        snprintf(where, sizeof where, "messages[%zu].tool_call_id", i);
        /* "name", when a host keeps the tool's name on its result, names the tool for
         * retention policies at tool time (the call is not at hand there). */
        p.name = opt_string(msg, "name", &p.name_len);
        if ((rc = need_string(msg, "tool_call_id", &p.id, &p.id_len, i, where, err)) ||
            (rc = join_text(h, content, &p.text, &p.text_len, i, "content", err)) ||
            (rc = ck_history_add_part(h, &p, err)))
            return rc;
    } else if (cJSON_IsString(content)) {
        memset(&p, 0, sizeof p);
        p.kind = CK_PART_TEXT;
        p.text = content->valuestring;
        p.text_len = strlen(content->valuestring);
        p.host = HOST_CONTENT_WHOLE;
        if ((rc = ck_history_add_part(h, &p, err))) return rc;
    } else if (cJSON_IsArray(content)) {
        size_t k = 0;
        const cJSON *item;
        cJSON_ArrayForEach(item, content) {
            memset(&p, 0, sizeof p);
            p.host = (uint32_t)k;
            if ((rc = read_block(h, item, i, k, &p, err)) ||
                (rc = ck_history_add_part(h, &p, err)))
                return rc;
            k++;
        }
    } else if (content && !cJSON_IsNull(content)) {
        return ck__fail(err, CK_ETYPE, "expected a string, a list or null", i,
                        "messages[%zu].content", i);
    }
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls");
    if (!calls || cJSON_IsNull(calls)) return CK_OK;
    if (!cJSON_IsArray(calls))
        return ck__fail(err, CK_ETYPE, "expected a list", i, "messages[%zu].tool_calls", i);
    size_t j = 0;
    const cJSON *call;
    cJSON_ArrayForEach(call, calls) {
        if (!cJSON_IsObject(call))
            return ck__fail(err, CK_ETYPE, "expected an object", i,
                            "messages[%zu].tool_calls[%zu]", i, j);
        memset(&p, 0, sizeof p);
        p.kind = CK_PART_TOOL_CALL;
        p.flags = CK_PART_OPENAI;
        p.host = HOST_TOOL_CALL | (uint32_t)j;
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu].id", i, j);
        if ((rc = need_string(call, "id", &p.id, &p.id_len, i, where, err))) return rc;
        if (!fn)
            return ck__fail(err, CK_EMISSING, "required field is missing", i,
                            "messages[%zu].tool_calls[%zu].function", i, j);
        if (!cJSON_IsObject(fn))
            return ck__fail(err, CK_ETYPE, "expected an object", i,
                            "messages[%zu].tool_calls[%zu].function", i, j);
        snprintf(where, sizeof where, "messages[%zu].tool_calls[%zu].function.name", i, j);
        if ((rc = need_string(fn, "name", &p.name, &p.name_len, i, where, err))) return rc;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (cJSON_IsString(args)) {
            p.text = args->valuestring;
            p.text_len = strlen(args->valuestring);
        } else if (args && !cJSON_IsNull(args)) {
            p.text = print_node(h, args, &p.text_len);
            if (!p.text) return ck__fail(err, CK_ENOMEM, NULL, i, NULL);
        }
        if ((rc = ck_history_add_part(h, &p, err))) return rc;
        j++;
    }
    return CK_OK;
}

ck_history *ck_json_read(const char *json, size_t len, ck_error *err) {
    ck__error_clear(err);
    if (!json && len) {
        ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
        return NULL;
    }
    ck_history *h = ck_history_new(0);
    ck__json_doc *doc = h ? ck__calloc(1, sizeof *doc) : NULL;
    if (!doc) {
        ck_history_free(h);
        ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        return NULL;
    }
    h->json = doc;
    const char *end = NULL;
    doc->root = cJSON_ParseWithLengthOpts(json ? json : "", len, &end, 0);
    int rc = CK_OK;
    if (!doc->root) {
        rc = ck__fail(err, CK_ESYNTAX, "malformed JSON", CK_NONE, NULL);
        if (err) err->offset = end && end >= json ? (size_t)(end - json) : 0;
        ck_history_free(h);
        return NULL;
    }
    doc->messages = doc->root;
    if (cJSON_IsObject(doc->root)) {
        doc->messages = cJSON_GetObjectItemCaseSensitive(doc->root, "messages");
        if (!doc->messages) rc = ck__fail(err, CK_EMISSING, NULL, CK_NONE, "messages");
        else if (!cJSON_IsArray(doc->messages))
            rc = ck__fail(err, CK_ETYPE, "expected a list", CK_NONE, "messages");
    } else if (!cJSON_IsArray(doc->root)) {
        rc = ck__fail(err, CK_ETYPE, "expected a message list or an object with \"messages\"",
                      CK_NONE, NULL);
    }
    size_t n = rc ? 0 : (size_t)cJSON_GetArraySize(doc->messages);
    if (!rc && !(doc->nodes = ck__malloc((n ? n : 1) * sizeof *doc->nodes)))
        rc = ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    size_t i = 0;
    const cJSON *msg;
    if (!rc) {
        cJSON_ArrayForEach(msg, doc->messages) {
            doc->nodes[i] = (cJSON *)msg;
            if ((rc = read_message(h, msg, i, err))) break;
            i++;
        }
    }
    if (rc) {
        ck_history_free(h);
        return NULL;
    }
    return h;
}

/* ---- writing ----
 *
 * Output documents borrow from the parsed one: kept nodes are cJSON references and keys are
 * added as constant strings. Both choices also matter for failure: cJSON's keyed adders copy
 * the key and, when that copy fails, leak a reference they made, while a constant key cannot
 * fail. So every keyed insertion below goes through put() or put_ref(). */

/* Adds `item` under `key` (a string that outlives the output). Consumes `item`; returns 0 when
 * it is NULL (an allocation failed before). */
static int put(cJSON *obj, const char *key, cJSON *item) {
    if (!item) return 0;
    cJSON_AddItemToObjectCS(obj, key, item);
    return 1;
}

/* Adds a reference to `item` under `key`. */
static int put_ref(cJSON *obj, const char *key, cJSON *item) {
    cJSON holder;
    memset(&holder, 0, sizeof holder);
    holder.type = cJSON_Array;
    if (!cJSON_AddItemReferenceToArray(&holder, item)) return 0;
    return put(obj, key, cJSON_DetachItemFromArray(&holder, 0));
}

static cJSON *string_n(const char *s, size_t len) {
    char *copy = ck__strndup(s, len);
    cJSON *out = copy ? cJSON_CreateString(copy) : NULL;
    ck__free(copy);
    return out;
}

/* Adds key -> a new string of `len` bytes of `s`. Returns 1, or 0 when out of memory. */
static int add_string_n(cJSON *obj, const char *key, const char *s, size_t len) {
    return put(obj, key, string_n(s, len));
}

static cJSON *new_block(const ck_part *p) {
    cJSON *b = cJSON_CreateObject();
    int ok = b != NULL;
    if (p->kind == CK_PART_TOOL_RESULT) {
        ok = ok && put(b, "type", cJSON_CreateStringReference("tool_result")) &&
             add_string_n(b, "tool_use_id", p->id, p->id_len) &&
             add_string_n(b, "content", p->text, p->text_len);
        if (ok && (p->flags & CK_PART_IS_ERROR)) ok = put(b, "is_error", cJSON_CreateTrue());
    } else {
        ok = ok && put(b, "type", cJSON_CreateStringReference("text")) &&
             add_string_n(b, "text", p->text, p->text_len);
    }
    if (!ok) {
        cJSON_Delete(b);
        return NULL;
    }
    return b;
}

/* A shallow copy of source block `part` of message `msg` with its text replaced. */
static cJSON *replaced_block(const ck__json_doc *doc, const ck_history *h, const ck_out_part *op) {
    const ck_part *src = &ck__msg_parts(h, op->src_msg)[op->src_part];
    cJSON *item = src->host == HOST_CONTENT_WHOLE
                      ? NULL
                      : cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                               doc->nodes[op->src_msg], "content"),
                                           (int)src->host);
    if (!item || !cJSON_IsObject(item)) return new_block(&op->part);
    const char *key = src->kind == CK_PART_TOOL_RESULT ? "content" : "text";
    cJSON *b = cJSON_CreateObject();
    int ok = b != NULL;
    const cJSON *child;
    int placed = 0;
    cJSON_ArrayForEach(child, item) {
        if (!ok) break;
        if (strcmp(child->string, key) == 0) {
            ok = add_string_n(b, key, op->part.text, op->part.text_len);
            placed = 1;
        } else {
            ok = put_ref(b, child->string, (cJSON *)child);
        }
    }
    if (ok && !placed) ok = add_string_n(b, key, op->part.text, op->part.text_len);
    if (!ok) {
        cJSON_Delete(b);
        return NULL;
    }
    return b;
}

/* Appends source part `op` to `list`: the parsed item itself when it is unchanged. */
static int add_source_block(cJSON *list, const ck__json_doc *doc, const ck_history *h,
                            const ck_out_part *op) {
    const ck_part *src = &ck__msg_parts(h, op->src_msg)[op->src_part];
    cJSON *b = NULL;
    if (op->replaced) {
        b = replaced_block(doc, h, op);
    } else if (src->host == HOST_CONTENT_WHOLE) {
        b = new_block(src);
    } else {
        cJSON *item = cJSON_GetArrayItem(
            cJSON_GetObjectItemCaseSensitive(doc->nodes[op->src_msg], "content"), (int)src->host);
        return item && cJSON_AddItemReferenceToArray(list, item);
    }
    if (b && cJSON_AddItemToArray(list, b)) return 1;
    cJSON_Delete(b);
    return 0;
}

/* The content of an output message, following docs/mapping.md. */
static cJSON *build_content(const ck__json_doc *doc, const ck_history *h, const ck_out_msg *m,
                            ck_format format) {
    size_t n_content = 0;
    const ck_out_part *only = NULL;
    for (size_t k = 0; k < m->n_parts; k++) {
        const ck_out_part *op = &m->parts[k];
        if (op->part.kind == CK_PART_TOOL_CALL && (op->part.host & HOST_TOOL_CALL) &&
            op->src_msg != CK_NONE)
            continue;
        n_content++;
        only = op;
    }
    int openai_tool = m->role == CK_ROLE_TOOL && format == CK_FORMAT_OPENAI;
    int plain_string = only && n_content == 1 &&
                       ((m->op == CK_OP_EDIT && (m->flags & CK_MSG_STRING_CONTENT) &&
                         only->src_msg == m->src && only->part.host == HOST_CONTENT_WHOLE) ||
                        openai_tool ||
                        (m->op == CK_OP_NEW && format == CK_FORMAT_OPENAI &&
                         only->part.kind == CK_PART_TEXT));
    if (plain_string) {
        if (only->src_msg != CK_NONE && !only->replaced) {
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(doc->nodes[only->src_msg],
                                                              "content");
            if (cJSON_IsString(c)) return cJSON_CreateStringReference(c->valuestring);
        }
        return string_n(only->part.text, only->part.text_len);
    }
    if (n_content == 0 && format == CK_FORMAT_OPENAI) return NULL;
    cJSON *list = cJSON_CreateArray();
    for (size_t k = 0; list && k < m->n_parts; k++) {
        const ck_out_part *op = &m->parts[k];
        if (op->part.kind == CK_PART_TOOL_CALL && (op->part.host & HOST_TOOL_CALL) &&
            op->src_msg != CK_NONE)
            continue;
        int ok;
        if (op->src_msg == CK_NONE) {
            cJSON *b = new_block(&op->part);
            ok = b && cJSON_AddItemToArray(list, b);
            if (!ok) cJSON_Delete(b);
        } else {
            ok = add_source_block(list, doc, h, op);
        }
        if (!ok) {
            cJSON_Delete(list);
            list = NULL;
        }
    }
    return list;
}

static cJSON *build_tool_calls(const ck__json_doc *doc, const ck_out_msg *m, int *any) {
    cJSON *list = cJSON_CreateArray();
    *any = 0;
    for (size_t k = 0; list && k < m->n_parts; k++) {
        const ck_out_part *op = &m->parts[k];
        if (op->part.kind != CK_PART_TOOL_CALL || !(op->part.host & HOST_TOOL_CALL) ||
            op->src_msg == CK_NONE)
            continue;
        cJSON *item = cJSON_GetArrayItem(
            cJSON_GetObjectItemCaseSensitive(doc->nodes[op->src_msg], "tool_calls"),
            (int)(op->part.host & (HOST_TOOL_CALL - 1)));
        if (!item || !cJSON_AddItemReferenceToArray(list, item)) {
            cJSON_Delete(list);
            return NULL;
        }
        *any = 1;
    }
    return list;
}

static cJSON *build_message(const ck__json_doc *doc, const ck_history *h, const ck_out_msg *m,
                            ck_format format) {
    cJSON *out = cJSON_CreateObject();
    cJSON *content = build_content(doc, h, m, format);
    int any_calls = 0;
    cJSON *calls = m->op == CK_OP_EDIT ? build_tool_calls(doc, m, &any_calls) : NULL;
    int ok = out != NULL && (m->op == CK_OP_NEW || calls);
    if (ok && m->op == CK_OP_EDIT) {
        const cJSON *child;
        int content_done = 0;
        cJSON_ArrayForEach(child, doc->nodes[m->src]) {
            if (!ok) break;
            if (strcmp(child->string, "content") == 0) {
                content_done = 1;
                ok = put(out, "content", content ? content : cJSON_CreateNull());
                content = NULL;
            } else if (strcmp(child->string, "tool_calls") == 0) {
                if (any_calls) ok = put(out, "tool_calls", calls);
                else cJSON_Delete(calls);
                calls = NULL;
            } else {
                ok = put_ref(out, child->string, (cJSON *)child);
            }
        }
        if (ok && !content_done && content) {
            ok = put(out, "content", content);
            content = NULL;
        }
    } else if (ok) {
        const char *role = m->role < CK_ROLE_OTHER ? ROLE_NAMES[m->role] : "user";
        ok = put(out, "role", cJSON_CreateStringReference(role));
        if (ok && m->role == CK_ROLE_TOOL && format == CK_FORMAT_OPENAI && m->n_parts) {
            ok = add_string_n(out, "tool_call_id", m->parts[0].part.id, m->parts[0].part.id_len);
        }
        if (ok) {
            ok = put(out, "content", content ? content : cJSON_CreateStringReference(""));
            content = NULL;
        }
    }
    cJSON_Delete(content);
    cJSON_Delete(calls);
    if (!ok) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

char *ck_json_write(const ck_history *history, const ck_view *view, ck_format format, int pretty,
                    ck_error *err) {
    ck__error_clear(err);
    if (!history || !view || !history->json) {
        ck__fail(err, CK_EINVAL, "the history was not read from JSON", CK_NONE, NULL);
        return NULL;
    }
    const ck__json_doc *doc = history->json;
    cJSON *list = cJSON_CreateArray();
    size_t n = ck_view_count(view);
    for (size_t i = 0; list && i < n; i++) {
        ck_out_msg m;
        if (ck_view_get(view, i, &m) != CK_OK) {
            cJSON_Delete(list);
            list = NULL;
            break;
        }
        if (m.op == CK_OP_KEEP) {
            if (cJSON_AddItemReferenceToArray(list, doc->nodes[m.src])) continue;
            cJSON_Delete(list);
            list = NULL;
            break;
        }
        cJSON *msg = build_message(doc, history, &m, format);
        if (!msg || !cJSON_AddItemToArray(list, msg)) {
            cJSON_Delete(msg);
            cJSON_Delete(list);
            list = NULL;
        }
    }
    cJSON *root = list;
    if (list && doc->root != doc->messages) {
        /* An object with "messages": keep its other fields, swap the list. */
        root = cJSON_CreateObject();
        const cJSON *child;
        int ok = root != NULL;
        cJSON_ArrayForEach(child, doc->root) {
            if (!ok) break;
            if (strcmp(child->string, "messages") == 0) {
                ok = put(root, "messages", list);
                list = NULL;
            } else {
                ok = put_ref(root, child->string, (cJSON *)child);
            }
        }
        cJSON_Delete(list);
        if (!ok) {
            cJSON_Delete(root);
            root = NULL;
        }
    }
    char *printed = root ? (pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    /* cJSON has its own allocator; the caller releases our copy with ck_free(). */
    char *text = printed ? ck__strndup(printed, strlen(printed)) : NULL;
    cJSON_free(printed);
    if (!text) ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    return text;
}
