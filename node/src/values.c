/*
 * values.c - the core's host reader and host builder over JS values (ctxkeel.h, "Host
 * values"), so that the dialects of csrc/src/fmt_*.c read and build Node's messages as they
 * do the CLI's JSON.
 *
 * A value the builder made is a napi_value in `ptr` (aux 0). A value read is that too while it
 * is read, and names in `aux` its path from the list (ckjs_paths), by which the builder finds
 * it again in a later call (begin reads, finish builds) and each message can be read in its
 * own handle scope. Strings are copied once into the history's storage (ck_history_alloc()), so the
 * history outlives the call and may be read on a worker. A JS exception raised inside a
 * callback (a getter threw) is left pending and reported as CKJS_THROWN, which the core hands
 * back unchanged; the caller then returns with it pending.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_util.h"

static napi_value js(ck_value v) { return (napi_value)v.ptr; }
static ck_value wrap(napi_value v) { return (ck_value){(void *)v, 0}; }

/* ---- paths ---- */

#define STEP_KEY 0x80000000u
#define MAX_DEPTH 16
#define REUSE_SPAN 48 /* how far back path_add looks for the same path */

static int grow(void **items, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return CK_OK;
    size_t cap2 = *cap ? *cap * 2 : 64;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*items, cap2 * size);
    if (!p) return CK_ENOMEM;
    *items = p;
    *cap = cap2;
    return CK_OK;
}

/* A new node under `parent` (a value's aux: 0 is the list); its aux into *aux. */
static int path_add(ckjs_paths *self, uint64_t parent, uint32_t step, uint64_t *aux) {
    if (parent == 0 && step >= self->n_starts) {
        if (step != self->n_starts) return CK_EINVAL;
        if (grow((void **)&self->starts, &self->cap_starts, step + 1, sizeof *self->starts))
            return CK_ENOMEM;
        self->starts[self->n_starts++] = (uint32_t)self->n;
    }
    /* The readers look a field up more than once (each dialect's detection, then the read):
     * a path already made for this message is used again, which keeps the table small. */
    uint64_t node = parent << 32 | step;
    size_t first = self->n_starts ? self->starts[self->n_starts - 1] : 0;
    for (size_t k = self->n; k > first && self->n - k < REUSE_SPAN; k--) {
        if (self->nodes[k - 1] == node) {
            *aux = k;
            return CK_OK;
        }
    }
    if (self->n >= UINT32_MAX - 1) return CK_ETOOBIG;
    if (grow((void **)&self->nodes, &self->cap, self->n + 1, sizeof *self->nodes))
        return CK_ENOMEM;
    self->nodes[self->n++] = node;
    *aux = self->n;
    return CK_OK;
}

void ckjs_paths_truncate(ckjs_paths *self, size_t n) {
    if (n >= self->n_starts) return;
    self->n = self->starts[n];
    self->n_starts = n;
}

void ckjs_paths_dispose(ckjs_paths *self) {
    free(self->nodes);
    free(self->starts);
    memset(self, 0, sizeof *self);
}

/* The addon's field-name strings, fetched once per call, before any message scope opens. */
static int load_keys(ckjs_values *self) {
    napi_env env = self->env;
    if (self->keys) return CK_OK;
    ckjs_state *state = ckjs_state_get(env);
    if (!state || !state->keys) return CK_EINVAL;
    NODE_API_CALL_RC(env, napi_get_reference_value(env, state->keys, &self->keys));
    for (uint32_t i = 0; i < CK_KEY_COUNT; i++)
        NODE_API_CALL_RC(env, napi_get_element(env, self->keys, i, &self->key[i]));
    return CK_OK;
}

static int key_value(ckjs_values *self, ck_key key, napi_value *out) {
    if ((unsigned)key >= CK_KEY_COUNT) return CK_EINVAL;
    *out = self->key[key];
    return CK_OK;
}

/* ---- the reader ---- */

static ck_value_kind rd_kind(void *ctx, ck_value v) {
    ckjs_values *self = ctx;
    napi_valuetype type;
    if (!v.ptr) return CK_VALUE_ABSENT;
    if (napi_typeof(self->env, js(v), &type) != napi_ok) return CK_VALUE_OTHER;
    switch (type) {
        case napi_undefined: return CK_VALUE_ABSENT;
        case napi_null: return CK_VALUE_NULL;
        case napi_boolean: return CK_VALUE_BOOL;
        case napi_number: return CK_VALUE_NUMBER;
        case napi_string: return CK_VALUE_STRING;
        case napi_object: {
            bool is_array = false;
            if (napi_is_array(self->env, js(v), &is_array) != napi_ok) return CK_VALUE_OTHER;
            return is_array ? CK_VALUE_ARRAY : CK_VALUE_OBJECT;
        }
        default: return CK_VALUE_OTHER;
    }
}

static int rd_field(void *ctx, ck_value v, ck_key key, ck_value *out) {
    ckjs_values *self = ctx;
    napi_value name, value;
    int rc = key_value(self, key, &name);
    if (rc) return rc;
    NODE_API_CALL_RC(self->env, napi_get_property(self->env, js(v), name, &value));
    napi_valuetype type;
    NODE_API_CALL_RC(self->env, napi_typeof(self->env, value, &type));
    if (type == napi_undefined) return 0;
    *out = wrap(value);
    rc = path_add(self->paths, v.aux, STEP_KEY | (uint32_t)key, &out->aux);
    return rc ? rc : 1;
}

static int rd_count(void *ctx, ck_value v, size_t *n) {
    ckjs_values *self = ctx;
    uint32_t len = 0;
    NODE_API_CALL_RC(self->env, napi_get_array_length(self->env, js(v), &len));
    *n = len;
    return CK_OK;
}

static int rd_item(void *ctx, ck_value v, size_t i, ck_value *out) {
    ckjs_values *self = ctx;
    napi_env env = self->env;
    if (v.aux == 0) {
        /* The next message: the values of the last one are done with (the history keeps
         * their paths), so their handles go. */
        if (self->scope) NODE_API_CALL_RC(env, napi_close_handle_scope(env, self->scope));
        self->scope = NULL;
        NODE_API_CALL_RC(env, napi_open_handle_scope(env, &self->scope));
    }
    napi_value value;
    NODE_API_CALL_RC(env, napi_get_element(env, js(v), (uint32_t)i, &value));
    *out = wrap(value);
    return path_add(self->paths, v.aux, (uint32_t)i, &out->aux);
}

/* Copies the JS string `value` into the history's storage. */
/* A short string read before in this read, or a new copy of it in the history's storage. */
static int short_string(ckjs_values *self, napi_value value, size_t n, const char **s,
                        size_t *len) {
    char tmp[CKJS_SHORT_MAX + 1];
    NODE_API_CALL_RC(self->env,
                     napi_get_value_string_utf8(self->env, value, tmp, sizeof tmp, len));
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < *len; i++) h = (h ^ (unsigned char)tmp[i]) * 16777619u;
    size_t at = h & (CKJS_SHORTS - 1);
    for (; self->shorts[at].s; at = (at + 1) & (CKJS_SHORTS - 1)) {
        if (self->shorts[at].len == *len && memcmp(self->shorts[at].s, tmp, *len) == 0) {
            *s = self->shorts[at].s;
            return CK_OK;
        }
    }
    char *buf = ck_history_alloc(self->history, n + 1);
    if (!buf) return CK_ENOMEM;
    memcpy(buf, tmp, *len + 1);
    self->taken += n + 1;
    *s = buf;
    /* Kept at most three quarters full, so a lookup always ends at an empty slot. */
    if (self->n_shorts < CKJS_SHORTS / 4 * 3) {
        self->shorts[at].s = buf;
        self->shorts[at].len = *len;
        self->n_shorts++;
    }
    return CK_OK;
}

static int copy_string(ckjs_values *self, napi_value value, const char **s, size_t *len) {
    size_t n = 0;
    NODE_API_CALL_RC(self->env, napi_get_value_string_utf8(self->env, value, NULL, 0, &n));
    if (n > CK_MAX_STRING) return CK_ETOOBIG;
    if (n <= CKJS_SHORT_MAX) return short_string(self, value, n, s, len);
    char *buf = ck_history_alloc(self->history, n + 1);
    if (!buf) return CK_ENOMEM;
    NODE_API_CALL_RC(self->env, napi_get_value_string_utf8(self->env, value, buf, n + 1, len));
    self->taken += n + 1;
    *s = buf;
    return CK_OK;
}

static int rd_string(void *ctx, ck_value v, const char **s, size_t *len) {
    return copy_string(ctx, js(v), s, len);
}

static int rd_boolean(void *ctx, ck_value v, int *out) {
    ckjs_values *self = ctx;
    bool b = false;
    NODE_API_CALL_RC(self->env, napi_get_value_bool(self->env, js(v), &b));
    *out = b;
    return CK_OK;
}

static int rd_json(void *ctx, ck_value v, const char **s, size_t *len) {
    ckjs_values *self = ctx;
    napi_value text;
    int rc = ckjs_json_stringify(self->env, js(v), &text);
    if (rc) return rc;
    napi_valuetype type;
    NODE_API_CALL_RC(self->env, napi_typeof(self->env, text, &type));
    if (type != napi_string) {
        *s = "null";
        *len = 4;
        return CK_OK;
    }
    return copy_string(self, text, s, len);
}

void ckjs_values_init(ckjs_values *self, napi_env env, ck_history *history, ckjs_paths *paths) {
    memset(self, 0, sizeof *self);
    self->env = env;
    self->history = history;
    self->paths = paths;
    self->reader = (ck_host_reader){self,       rd_kind,   rd_field,   rd_count,
                                    rd_item,    rd_string, rd_boolean, rd_json};
}

int ckjs_values_read(ckjs_values *self, napi_value list, size_t from, ck_format format,
                     ck_format *format_out, ck_error *err) {
    ckjs_paths_truncate(self->paths, from);
    self->list = list;
    int rc = load_keys(self);
    if (rc) return rc;
    rc = ck_history_read(self->history, &self->reader, wrap(list), from, format, format_out,
                             err);
    if (self->scope && napi_close_handle_scope(self->env, self->scope) != napi_ok && !rc) {
        ckjs_throw_last_error(self->env, "napi_close_handle_scope");
        rc = CKJS_THROWN;
    }
    self->scope = NULL;
    if (!rc) ckjs_paths_truncate(self->paths, ck_history_count(self->history));
    return rc;
}

int ckjs_values_read_one(ckjs_values *self, napi_value message, napi_value *list,
                         ck_format format, ck_format *format_out, ck_error *err) {
    NODE_API_CALL_RC(self->env, napi_create_array_with_length(self->env, 1, list));
    NODE_API_CALL_RC(self->env, napi_set_element(self->env, *list, 0, message));
    int rc = ckjs_values_read(self, *list, 0, format, format_out, err);
    /* A lone message is "message", not the first of a list. */
    static const char LIST0[] = "messages[0]";
    if (rc && err && strncmp(err->where, LIST0, sizeof LIST0 - 1) == 0) {
        size_t rest = strlen(err->where + sizeof LIST0 - 1);
        memmove(err->where + 7, err->where + sizeof LIST0 - 1, rest + 1);
        memcpy(err->where, "message", 7);
        err->index = CK_NONE;
    }
    return rc;
}

/* ---- the builder ---- */

static int b_object(void *ctx, ck_value *out) {
    ckjs_values *self = ctx;
    napi_value obj;
    NODE_API_CALL_RC(self->env, napi_create_object(self->env, &obj));
    *out = wrap(obj);
    return CK_OK;
}

static int b_message(void *ctx, ck_value like, const char *type, ck_value *out) {
    (void)like;
    (void)type;
    return b_object(ctx, out);
}

static int b_array(void *ctx, ck_value *out) {
    ckjs_values *self = ctx;
    napi_value arr;
    NODE_API_CALL_RC(self->env, napi_create_array(self->env, &arr));
    *out = wrap(arr);
    return CK_OK;
}

static int b_string(void *ctx, const char *s, size_t len, ck_value *out) {
    ckjs_values *self = ctx;
    napi_value str = ckjs_string(self->env, s, len);
    if (!str) return CKJS_THROWN;
    *out = wrap(str);
    return CK_OK;
}

static int b_boolean(void *ctx, int v, ck_value *out) {
    ckjs_values *self = ctx;
    napi_value b;
    NODE_API_CALL_RC(self->env, napi_get_boolean(self->env, v != 0, &b));
    *out = wrap(b);
    return CK_OK;
}

static int b_json(void *ctx, const char *json, size_t len, ck_value *out) {
    ckjs_values *self = ctx;
    napi_value v;
    int rc = ckjs_json_parse(self->env, json, len, &v);
    if (!rc) *out = wrap(v);
    return rc;
}

static int b_set(void *ctx, ck_value obj, ck_key key, ck_value v) {
    ckjs_values *self = ctx;
    napi_value name;
    int rc = key_value(self, key, &name);
    if (rc) return rc;
    NODE_API_CALL_RC(self->env, napi_set_property(self->env, js(obj), name, js(v)));
    return CK_OK;
}

static int b_push(void *ctx, ck_value arr, ck_value v) {
    ckjs_values *self = ctx;
    uint32_t len = 0;
    NODE_API_CALL_RC(self->env, napi_get_array_length(self->env, js(arr), &len));
    NODE_API_CALL_RC(self->env, napi_set_element(self->env, js(arr), len, js(v)));
    return CK_OK;
}

/* The JS value of `v`: the builder's own, or a read one found again by its path. */
static int resolve(ckjs_values *self, ck_value v, napi_value *out) {
    if (v.aux == 0) {
        *out = js(v);
        return CK_OK;
    }
    uint32_t steps[MAX_DEPTH];
    size_t depth = 0;
    for (uint64_t at = v.aux; at; at = self->paths->nodes[at - 1] >> 32) {
        if (at > self->paths->n || depth == MAX_DEPTH) return CK_EINVAL;
        steps[depth++] = (uint32_t)self->paths->nodes[at - 1];
    }
    napi_env env = self->env;
    napi_value cur = self->list;
    while (depth-- > 0) {
        uint32_t step = steps[depth];
        if (step & STEP_KEY) {
            napi_value name;
            int rc = key_value(self, (ck_key)(step & ~STEP_KEY), &name);
            if (rc) return rc;
            NODE_API_CALL_RC(env, napi_get_property(env, cur, name, &cur));
        } else {
            NODE_API_CALL_RC(env, napi_get_element(env, cur, step, &cur));
        }
    }
    *out = cur;
    return CK_OK;
}

/* Every own enumerable property of `v`, the same values: Object.assign({}, v). */
static int b_copy(void *ctx, ck_value v, ck_value *out) {
    ckjs_values *self = ctx;
    napi_env env = self->env;
    napi_value obj, keys, src;
    int rc = resolve(self, v, &src);
    if (rc) return rc;
    NODE_API_CALL_RC(env, napi_create_object(env, &obj));
    NODE_API_CALL_RC(env, napi_get_all_property_names(env, src, napi_key_own_only,
                                                      napi_key_enumerable,
                                                      napi_key_numbers_to_strings, &keys));
    uint32_t n = 0;
    NODE_API_CALL_RC(env, napi_get_array_length(env, keys, &n));
    for (uint32_t i = 0; i < n; i++) {
        napi_value key, value;
        NODE_API_CALL_RC(env, napi_get_element(env, keys, i, &key));
        NODE_API_CALL_RC(env, napi_get_property(env, src, key, &value));
        NODE_API_CALL_RC(env, napi_set_property(env, obj, key, value));
    }
    *out = wrap(obj);
    return CK_OK;
}

static int b_ref(void *ctx, ck_value v, ck_value *out) {
    napi_value value;
    int rc = resolve(ctx, v, &value);
    if (!rc) *out = wrap(value);
    return rc;
}

static int b_unset(void *ctx, ck_value obj, ck_key key) {
    ckjs_values *self = ctx;
    napi_value name;
    int rc = key_value(self, key, &name);
    if (rc) return rc;
    NODE_API_CALL_RC(self->env, napi_delete_property(self->env, js(obj), name, NULL));
    return CK_OK;
}

/* Values made here belong to the handle scope of the call; nothing to release. */
static void b_drop(void *ctx, ck_value v) {
    (void)ctx;
    (void)v;
}

napi_value ckjs_values_build(ckjs_values *self, napi_value list, const ck_view *view) {
    self->list = list;
    int rc = load_keys(self);
    if (rc) return ckjs_fail(self->env, rc, NULL);
    const ck_host_builder b = {self,   b_object, b_message, b_array, b_string, b_boolean, b_json,
                               b_set,  b_push,   b_copy,    b_ref,   b_unset,  b_drop};
    ck_value out = {NULL, 0};
    ck_error err;
    rc = ck_view_build(view, self->history, &b, &out, &err);
    if (rc) return ckjs_fail(self->env, rc, &err);
    return js(out);
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

/* checkPairs (the violations) or repairPairs (the repaired list), on one read. */
static napi_value pairs(napi_env env, napi_callback_info info, int repair) {
    napi_value messages, result = NULL;
    ck_format format;
    ckjs_values src;
    ckjs_paths paths = {0};
    if (pair_args(env, info, &messages, &format, &src, &paths)) return NULL;
    ck_pair_violation *v = NULL;
    size_t n = 0;
    ck_view *view = NULL;
    ck_error err;
    int rc = repair ? ck_repair_pairs(src.history, format, &view, &err)
                    : ck_check_pairs(src.history, format, &v, &n, &err);
    if (rc)
        ckjs_fail(env, rc, &err);
    else
        result = repair ? ckjs_values_build(&src, messages, view)
                        : violations_array(env, v, n, src.history, format);
    ck_free(v);
    ck_view_free(view);
    ck_history_free(src.history);
    ckjs_paths_dispose(&paths);
    return result;
}

napi_value ckjs_check_pairs(napi_env env, napi_callback_info info) {
    return pairs(env, info, 0);
}

napi_value ckjs_repair_pairs(napi_env env, napi_callback_info info) {
    return pairs(env, info, 1);
}
