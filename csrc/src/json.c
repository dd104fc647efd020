/* The JSON host: the C API's and the CLI's messages are JSON text. The text is parsed once
 * into the core's JSON document; the host reader reads that document for the dialects, and
 * the host builder builds views back as a small tree that refers to the parsed values it
 * keeps (so kept messages and unknown fields come out as they went in) and is then written
 * out as JSON text. Every string keeps every byte: NUL escapes survive the round trip. */
#include <stdio.h>
#include <string.h>

#include "./alloc.h"
#include "./fmt.h"
#include "./json.h"

struct ck__json_doc {
    ck__jdoc *doc;
    const ck__jval *root;
    const ck__jval *messages; /* the message array (root itself, or root's "messages") */
};

void ck__json_doc_free(ck__json_doc *doc) {
    if (!doc) return;
    ck__jdoc_free(doc->doc);
    ck__free(doc);
}

/* ---- the reader: values are const ck__jval pointers ---- */

static const ck__jval *json_v(ck_value v) { return (const ck__jval *)v.ptr; }
static ck_value json_wrap(const ck__jval *v) { return (ck_value){(void *)v, 0}; }

static ck_value_kind json_kind(void *ctx, ck_value v) {
    (void)ctx;
    const ck__jval *j = json_v(v);
    if (!j) return CK_VALUE_ABSENT;
    switch (j->kind) {
        case CK__JNULL: return CK_VALUE_NULL;
        case CK__JBOOL: return CK_VALUE_BOOL;
        case CK__JNUMBER: return CK_VALUE_NUMBER;
        case CK__JSTRING: return CK_VALUE_STRING;
        case CK__JARRAY: return CK_VALUE_ARRAY;
        case CK__JOBJECT: return CK_VALUE_OBJECT;
    }
    return CK_VALUE_OTHER;
}

static int json_field(void *ctx, ck_value v, ck_key key, ck_value *out) {
    (void)ctx;
    const ck__jval *f = ck__jgets(json_v(v), ck_key_name(key));
    *out = json_wrap(f);
    return f != NULL;
}

static int json_count(void *ctx, ck_value v, size_t *n) {
    (void)ctx;
    *n = ck__jcount(json_v(v));
    return CK_OK;
}

static int json_item(void *ctx, ck_value v, size_t i, ck_value *out) {
    (void)ctx;
    *out = json_wrap(ck__jat(json_v(v), i));
    return CK_OK;
}

static int json_string(void *ctx, ck_value v, const char **s, size_t *len) {
    (void)ctx;
    *s = ck__jstr(json_v(v), len);
    return *s ? CK_OK : CK_ETYPE;
}

static int json_boolean(void *ctx, ck_value v, int *out) {
    (void)ctx;
    return ck__jbool(json_v(v), out) ? CK_OK : CK_ETYPE;
}

/* The compact JSON of a value, in the history's storage. */
static int json_json(void *ctx, ck_value v, const char **s, size_t *len) {
    ck_history *h = ctx;
    ck__buf b;
    ck__buf_init(&b);
    ck__jwriter w;
    ck__jw_init(&w, &b, 0);
    ck__jw_value(&w, json_v(v));
    if (b.failed) {
        ck__buf_dispose(&b);
        return CK_ENOMEM;
    }
    char *copy = ck_history_alloc(h, b.len + 1);
    if (copy) {
        memcpy(copy, b.data ? b.data : "", b.len);
        copy[b.len] = '\0';
        *s = copy;
        *len = b.len;
    }
    ck__buf_dispose(&b);
    return copy ? CK_OK : CK_ENOMEM;
}

ck_host_reader ck__json_reader(ck_history *h) {
    return (ck_host_reader){h,           json_kind,    json_field, json_count, json_item,
                            json_string, json_boolean, json_json,  NULL};
}

static ck_history *json_parse(const char *text, size_t len, ck_format format, ck_error *err) {
    ck__error_clear(err);
    if (!text && len) {
        ck__fail(err, CK_EINVAL, NULL, CK_NONE, NULL);
        return NULL;
    }
    /* Strings are checked as the history takes them, so that an invalid one is named by its
     * message and field rather than by a byte offset. */
    ck_history *h = ck_history_new(0);
    ck__json_doc *doc = h ? ck__calloc(1, sizeof *doc) : NULL;
    if (!doc) {
        ck_history_free(h);
        ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
        return NULL;
    }
    h->json = doc;
    /* Duplicate keys are refused: providers take the last one, other readers the first, so
     * such input means different things to different readers. */
    ck__jread_options opts = {CK__JREAD_NO_DUPLICATES | CK__JREAD_ANY_BYTES, 0};
    doc->doc = ck__jread(text ? text : "", len, opts, err);
    if (!doc->doc) {
        if (err && err->code == CK_ESYNTAX && !err->where[0])
            snprintf(err->where, sizeof err->where, "byte %zu", err->offset);
        ck_history_free(h);
        return NULL;
    }
    doc->root = doc->messages = ck__jdoc_root(doc->doc);
    int rc = CK_OK;
    if (ck__jis(doc->root, CK__JOBJECT)) {
        doc->messages = ck__jgets(doc->root, "messages");
        if (!doc->messages) rc = ck__fail(err, CK_EMISSING, NULL, CK_NONE, "messages");
        else if (!ck__jis(doc->messages, CK__JARRAY))
            rc = ck__fail(err, CK_ETYPE, "expected a list", CK_NONE, "messages");
    } else if (!ck__jis(doc->root, CK__JARRAY)) {
        rc = ck__fail(err, CK_ETYPE, "expected a message list or an object with \"messages\"",
                      CK_NONE, NULL);
    }
    if (!rc) {
        /* No length callback: strings are borrowed from the document, never copied. */
        ck_host_reader r = ck__json_reader(h);
        rc = ck_history_read(h, &r, json_wrap(doc->messages), 0, format, NULL, err);
    }
    if (rc) {
        ck_history_free(h);
        return NULL;
    }
    return h;
}

ck_history *ck_json_read(const char *json, size_t len, ck_error *err) {
    return json_parse(json, len, CK_FORMAT_AUTO, err);
}

ck_history *ck_json_read_as(const char *json, size_t len, ck_format format, ck_error *err) {
    if ((unsigned)format >= CK_FORMAT_COUNT) {
        ck__fail(err, CK_EINVAL, "unknown format", CK_NONE, "format");
        return NULL;
    }
    return json_parse(json, len, format, err);
}

/* ---- the builder: a tree of nodes over the parsed values ---- */

enum { JN_OBJECT, JN_ARRAY, JN_STRING, JN_BOOL, JN_REF, JN_RAW };

typedef struct json_node json_node;
typedef struct json_member {
    const char *key;
    size_t key_len;
    json_node *value;
} json_member;

struct json_node {
    int kind;
    union {
        struct {
            json_member *v;
            size_t n, cap;
        } obj;
        struct {
            json_node **v;
            size_t n, cap;
        } arr;
        struct {
            char *s;
            size_t len;
        } str;
        int b;
        const ck__jval *ref;
    } u;
    json_node *next_alloc; /* every node of a build, for freeing */
};

typedef struct json_build {
    json_node *nodes;
} json_build;

static json_node *json_node_new(json_build *jb, int kind) {
    json_node *n = ck__calloc(1, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->next_alloc = jb->nodes;
    jb->nodes = n;
    return n;
}

static void json_build_free(json_build *jb) {
    for (json_node *n = jb->nodes, *next; n; n = next) {
        next = n->next_alloc;
        if (n->kind == JN_OBJECT) ck__free(n->u.obj.v);
        else if (n->kind == JN_ARRAY) ck__free(n->u.arr.v);
        else if (n->kind == JN_STRING || n->kind == JN_RAW) ck__free(n->u.str.s);
        ck__free(n);
    }
    jb->nodes = NULL;
}

static json_node *json_n(ck_value v) { return (json_node *)v.ptr; }

static int json_b_object(void *ctx, ck_value *out) {
    json_node *n = json_node_new(ctx, JN_OBJECT);
    *out = (ck_value){n, 0};
    return n ? CK_OK : CK_ENOMEM;
}

static int json_b_array(void *ctx, ck_value *out) {
    json_node *n = json_node_new(ctx, JN_ARRAY);
    *out = (ck_value){n, 0};
    return n ? CK_OK : CK_ENOMEM;
}

static int json_b_text(void *ctx, int kind, const char *s, size_t len, ck_value *out) {
    json_node *n = json_node_new(ctx, kind);
    if (!n || !(n->u.str.s = ck__malloc(len + 1))) return CK_ENOMEM;
    memcpy(n->u.str.s, s, len);
    n->u.str.s[len] = '\0';
    n->u.str.len = len;
    *out = (ck_value){n, 0};
    return CK_OK;
}

static int json_b_string(void *ctx, const char *s, size_t len, ck_value *out) {
    return json_b_text(ctx, JN_STRING, s, len, out);
}

static int json_b_json(void *ctx, const char *s, size_t len, ck_value *out) {
    return json_b_text(ctx, JN_RAW, s, len, out);
}

static int json_b_boolean(void *ctx, int v, ck_value *out) {
    json_node *n = json_node_new(ctx, JN_BOOL);
    if (!n) return CK_ENOMEM;
    n->u.b = v != 0;
    *out = (ck_value){n, 0};
    return CK_OK;
}

static int json_b_ref(void *ctx, ck_value v, ck_value *out) {
    json_node *n = json_node_new(ctx, JN_REF);
    if (!n) return CK_ENOMEM;
    n->u.ref = json_v(v);
    *out = (ck_value){n, 0};
    return CK_OK;
}

static int json_member_put(json_node *obj, const char *key, size_t key_len, json_node *v) {
    for (size_t i = obj->u.obj.n; i-- > 0;) {
        json_member *m = &obj->u.obj.v[i];
        if (m->key_len == key_len && memcmp(m->key, key, key_len) == 0) {
            m->value = v;
            return CK_OK;
        }
    }
    if (ck__grow((void **)&obj->u.obj.v, &obj->u.obj.cap, obj->u.obj.n + 1, sizeof(json_member)))
        return CK_ENOMEM;
    obj->u.obj.v[obj->u.obj.n++] = (json_member){key, key_len, v};
    return CK_OK;
}

/* A copy of a parsed object: its members as references, in order. */
static int json_b_copy(void *ctx, ck_value v, ck_value *out) {
    const ck__jval *src = json_v(v);
    if (!ck__jis(src, CK__JOBJECT)) return CK_ETYPE;
    int rc = json_b_object(ctx, out);
    for (size_t i = 0; !rc && i < ck__jcount(src); i++) {
        const ck__jmember *m = ck__jmember_at(src, i);
        ck_value ref;
        rc = json_b_ref(ctx, json_wrap(&m->value), &ref);
        if (!rc) rc = json_member_put(json_n(*out), m->key, m->key_len, json_n(ref));
    }
    return rc;
}

static int json_b_set(void *ctx, ck_value obj, ck_key key, ck_value v) {
    (void)ctx;
    const char *name = ck_key_name(key);
    json_node *o = json_n(obj);
    if (!o || o->kind != JN_OBJECT || !name) return CK_EINVAL;
    return json_member_put(o, name, strlen(name), json_n(v));
}

static int json_b_unset(void *ctx, ck_value obj, ck_key key) {
    (void)ctx;
    json_node *o = json_n(obj);
    const char *name = ck_key_name(key);
    if (!o || o->kind != JN_OBJECT || !name) return CK_EINVAL;
    size_t nl = strlen(name), k = 0;
    for (size_t i = 0; i < o->u.obj.n; i++) {
        const json_member *m = &o->u.obj.v[i];
        if (m->key_len == nl && memcmp(m->key, name, nl) == 0) continue;
        o->u.obj.v[k++] = *m;
    }
    o->u.obj.n = k;
    return CK_OK;
}

static int json_b_push(void *ctx, ck_value arr, ck_value v) {
    (void)ctx;
    json_node *a = json_n(arr);
    if (!a || a->kind != JN_ARRAY) return CK_EINVAL;
    if (ck__grow((void **)&a->u.arr.v, &a->u.arr.cap, a->u.arr.n + 1, sizeof *a->u.arr.v))
        return CK_ENOMEM;
    a->u.arr.v[a->u.arr.n++] = json_n(v);
    return CK_OK;
}

/* Nodes live until the build is freed, so a value that was not handed on needs nothing. */
static void json_b_drop(void *ctx, ck_value v) {
    (void)ctx;
    (void)v;
}

/* Writes a node. Nesting is bounded by the dialects' shapes (a list of messages of content
 * items), so recursion here is shallow; parsed values go through the writer's own walk. */
static void json_emit(ck__jwriter *w, const json_node *n) {
    switch (n->kind) {
        case JN_OBJECT:
            ck__jw_begin_object(w);
            for (size_t i = 0; i < n->u.obj.n; i++) {
                ck__jw_key(w, n->u.obj.v[i].key, n->u.obj.v[i].key_len);
                json_emit(w, n->u.obj.v[i].value);
            }
            ck__jw_end_object(w);
            break;
        case JN_ARRAY:
            ck__jw_begin_array(w);
            for (size_t i = 0; i < n->u.arr.n; i++) json_emit(w, n->u.arr.v[i]);
            ck__jw_end_array(w);
            break;
        case JN_STRING: ck__jw_string(w, n->u.str.s, n->u.str.len); break;
        case JN_BOOL: ck__jw_bool(w, n->u.b); break;
        case JN_REF: ck__jw_value(w, n->u.ref); break;
        case JN_RAW: ck__jw_raw(w, n->u.str.s, n->u.str.len); break;
    }
}

char *ck_json_write(const ck_history *history, const ck_view *view, ck_format format, int pretty,
                    ck_error *err) {
    ck__error_clear(err);
    (void)format; /* the history's own dialect writes its messages */
    if (!history || !view || !history->json) {
        ck__fail(err, CK_EINVAL, "the history was not read from JSON", CK_NONE, NULL);
        return NULL;
    }
    const ck__json_doc *doc = history->json;
    json_build jb = {NULL};
    ck_host_builder b = {&jb,         json_b_object, NULL,         json_b_array,
                         json_b_string, json_b_boolean, json_b_json, json_b_set,
                         json_b_push, json_b_copy,    json_b_ref,   json_b_unset,
                         json_b_drop};
    ck_value list;
    int rc = ck_view_build(view, history, &b, &list, err);
    ck_value root = list;
    if (!rc && doc->root != doc->messages) {
        /* An object with "messages": its other fields kept, the list swapped. */
        rc = json_b_copy(&jb, json_wrap(doc->root), &root);
        if (!rc) rc = json_member_put(json_n(root), "messages", 8, json_n(list));
    }
    char *text = NULL;
    if (!rc) {
        ck__buf out;
        ck__buf_init(&out);
        ck__jwriter w;
        ck__jw_init(&w, &out, pretty);
        json_emit(&w, json_n(root));
        ck__buf_add(&out, "", 0);
        text = out.failed ? NULL : ck__buf_take(&out, NULL);
        ck__buf_dispose(&out);
    }
    json_build_free(&jb);
    if (!text && (!err || err->code == CK_OK)) ck__fail(err, CK_ENOMEM, NULL, CK_NONE, NULL);
    return text;
}
