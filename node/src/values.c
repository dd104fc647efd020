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

/*
 * A read value's aux: 0 is the list itself (and, when building, a value the builder made).
 * Bit 63 clear: bits 0-31 are the message's index + 1 and bits 32-59 up to four steps below
 * it, 7 bits each from the message down (0: no step; 1-63: field key + 1; 64-127: item 0-63).
 * Bit 63 set: the rest is a node of the paths table + 1, for a step that does not fit.
 */
#define STEP_KEY 0x80000000u /* a node's step is a field, not an item */
#define AUX_NODE ((uint64_t)1 << 63)
#define INLINE_STEPS 4
#define STEP_BITS 7
#define STEP_MASK 127u
#define CODE_ITEM 64u    /* the code of item 0 */
#define MAX_STEPS 32     /* deeper than any dialect reads */
#define REUSE_SPAN 16    /* how far back path_add looks for the same node */

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

/* The inline code of a step, or 0 when it needs a node. */
static uint64_t step_code(uint32_t step) {
    if (step & STEP_KEY) {
        uint32_t key = step & ~STEP_KEY;
        return key + 1 < CODE_ITEM ? key + 1 : 0;
    }
    return step <= STEP_MASK - CODE_ITEM ? CODE_ITEM + step : 0;
}

static uint32_t code_step(unsigned code) {
    return code < CODE_ITEM ? STEP_KEY | (code - 1) : code - CODE_ITEM;
}

/* The index of the message a read value's path starts at; SIZE_MAX for no known one. */
static size_t path_msg(const ckjs_paths *self, uint64_t aux) {
    if (!(aux & AUX_NODE)) return aux ? (size_t)(uint32_t)aux - 1 : SIZE_MAX;
    uint64_t k = aux & ~AUX_NODE;
    return k && k <= self->n ? self->nodes[k - 1].msg : SIZE_MAX;
}

/* The aux of the value that is `step` of the value whose aux is `parent`. */
static int path_add(ckjs_paths *self, uint64_t parent, uint32_t step, uint64_t *aux) {
    if (parent == 0) {
        /* A message: its index is the whole path. */
        if (step >= UINT32_MAX) return CK_ETOOBIG;
        *aux = (uint64_t)step + 1;
        return CK_OK;
    }
    uint64_t code = step_code(step);
    if (!(parent & AUX_NODE) && code) {
        for (unsigned d = 0; d < INLINE_STEPS; d++) {
            unsigned shift = 32 + STEP_BITS * d;
            if ((parent >> shift & STEP_MASK) == 0) {
                *aux = parent | code << shift;
                return CK_OK;
            }
        }
    }
    /* The readers look a field up more than once (each dialect's detection, then the read):
     * a node made just before for the same step is used again. */
    for (size_t k = self->n; k > 0 && self->n - k < REUSE_SPAN; k--) {
        if (self->nodes[k - 1].parent == parent && self->nodes[k - 1].step == step) {
            *aux = AUX_NODE | k;
            return CK_OK;
        }
    }
    size_t msg = path_msg(self, parent);
    if (msg == SIZE_MAX) return CK_EINVAL;
    if (grow((void **)&self->nodes, &self->cap, self->n + 1, sizeof *self->nodes))
        return CK_ENOMEM;
    self->nodes[self->n++] = (ckjs_path_node){parent, step, (uint32_t)msg};
    *aux = AUX_NODE | self->n;
    return CK_OK;
}

void ckjs_paths_truncate(ckjs_paths *self, size_t n) {
    /* Nodes are made in message order. */
    while (self->n && self->nodes[self->n - 1].msg >= n) self->n--;
}

void ckjs_paths_dispose(ckjs_paths *self) {
    free(self->nodes);
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

/* The JS value of `v`: the builder's own, or a read one found again by its path in self->list. */
static int resolve(ckjs_values *self, ck_value v, napi_value *out) {
    if (v.aux == 0) {
        *out = js(v);
        return CK_OK;
    }
    const ckjs_paths *paths = self->paths;
    uint32_t steps[MAX_STEPS + INLINE_STEPS + 1];
    size_t depth = 0;
    uint64_t at = v.aux;
    while (at & AUX_NODE) {
        uint64_t k = at & ~AUX_NODE;
        if (k == 0 || k > paths->n || depth == MAX_STEPS) return CK_EINVAL;
        steps[depth++] = paths->nodes[k - 1].step;
        at = paths->nodes[k - 1].parent;
    }
    if (at == 0) return CK_EINVAL;
    for (unsigned d = INLINE_STEPS; d-- > 0;) {
        unsigned code = (unsigned)(at >> (32 + STEP_BITS * d)) & STEP_MASK;
        if (code) steps[depth++] = code_step(code);
    }
    steps[depth++] = (uint32_t)at - 1;
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

/* The JS value of a read value: its own handle while its message is read, else found again
 * (the core looks back at an earlier message, whose handles went with its scope). */
static int live(ckjs_values *self, ck_value v, napi_value *out) {
    if (v.aux == 0 || path_msg(self->paths, v.aux) == self->current) {
        *out = js(v);
        return CK_OK;
    }
    return resolve(self, v, out);
}

/* ---- the reader ---- */

static ck_value_kind rd_kind(void *ctx, ck_value v) {
    ckjs_values *self = ctx;
    napi_valuetype type;
    napi_value value;
    if (!v.ptr) return CK_VALUE_ABSENT;
    if (live(self, v, &value) || napi_typeof(self->env, value, &type) != napi_ok)
        return CK_VALUE_OTHER;
    switch (type) {
        case napi_undefined: return CK_VALUE_ABSENT;
        case napi_null: return CK_VALUE_NULL;
        case napi_boolean: return CK_VALUE_BOOL;
        case napi_number: return CK_VALUE_NUMBER;
        case napi_string: return CK_VALUE_STRING;
        case napi_object: {
            bool is_array = false;
            if (napi_is_array(self->env, value, &is_array) != napi_ok) return CK_VALUE_OTHER;
            return is_array ? CK_VALUE_ARRAY : CK_VALUE_OBJECT;
        }
        default: return CK_VALUE_OTHER;
    }
}

static int field_js(ckjs_values *self, ck_value v, ck_key key, ck_value *out, int *present) {
    napi_value name, obj, value;
    int rc = key_value(self, key, &name);
    if (!rc) rc = live(self, v, &obj);
    if (rc) return rc;
    NODE_API_CALL_RC(self->env, napi_get_property(self->env, obj, name, &value));
    napi_valuetype type;
    NODE_API_CALL_RC(self->env, napi_typeof(self->env, value, &type));
    if (type == napi_undefined) return CK_OK;
    *out = wrap(value);
    *present = 1;
    return path_add(self->paths, v.aux, STEP_KEY | (uint32_t)key, &out->aux);
}

static int rd_count_js(void *ctx, ck_value v, size_t *n) {
    ckjs_values *self = ctx;
    napi_value arr;
    uint32_t len = 0;
    int rc = live(self, v, &arr);
    if (rc) return rc;
    NODE_API_CALL_RC(self->env, napi_get_array_length(self->env, arr, &len));
    *n = len;
    return CK_OK;
}

static int rd_item_js(void *ctx, ck_value v, size_t i, ck_value *out) {
    ckjs_values *self = ctx;
    napi_env env = self->env;
    napi_value arr = js(v), value;
    if (v.aux == 0) {
        /* The next message: the values of the last one are done with (the history keeps
         * their paths), so their handles go. */
        if (self->scope) NODE_API_CALL_RC(env, napi_close_handle_scope(env, self->scope));
        self->scope = NULL;
        NODE_API_CALL_RC(env, napi_open_handle_scope(env, &self->scope));
        self->current = i;
    } else {
        int rc = live(self, v, &arr);
        if (rc) return rc;
    }
    NODE_API_CALL_RC(env, napi_get_element(env, arr, (uint32_t)i, &value));
    *out = wrap(value);
    return path_add(self->paths, v.aux, (uint32_t)i, &out->aux);
}

/*
 * Strings are copied into chunks of the history's storage, packed (ck_history_alloc() rounds
 * each block up to 16 bytes). A chunk grows with what the read has taken, from MIN_CHUNK to
 * CHUNK, so that a read of a message or two appended to a kept history leaves little unused.
 * A string of up to ONE_PASS_UNITS UTF-16 units is written at once into room for the most
 * UTF-8 it can make (3 bytes a unit); a longer one is measured first, refused over
 * CK_MAX_STRING before any copy, and given a block of its own.
 */
#define MIN_CHUNK ((size_t)4 * 1024)
#define CHUNK ((size_t)64 * 1024)
#define ONE_PASS_UNITS ((size_t)4 * 1024)

/* `size` bytes of the history's storage at self->at (the rest of the current chunk, or a new
 * chunk); NULL when out of memory. */
static char *room_for(ckjs_values *self, size_t size) {
    if ((size_t)(self->end - self->at) >= size) return self->at;
    size_t chunk = self->taken < MIN_CHUNK ? MIN_CHUNK : self->taken > CHUNK ? CHUNK : self->taken;
    if (chunk < size) chunk = size;
    char *buf = ck_history_alloc(self->history, chunk);
    if (!buf) return NULL;
    self->taken += chunk;
    self->at = buf;
    self->end = buf + chunk;
    return buf;
}

/* The copy of `len` bytes just written at self->at: one made before in this read when it is
 * short and was met recently (the core reads roles, item types and ids again and again: every
 * dialect's detection, then the read, then a result's id after its call's), else that one. */
static const char *keep_copy(ckjs_values *self, size_t len) {
    const char *s = self->at;
    if (len <= CKJS_SHORT_MAX) {
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
        struct ckjs_short *slot = &self->shorts[h & (CKJS_SHORTS - 1)];
        if (slot->s && slot->len == len && memcmp(slot->s, s, len) == 0) return slot->s;
        slot->s = s;
        slot->len = len;
    }
    self->at += len + 1;
    return s;
}

/* Copies the JS string `value` into the history's storage (see room_for). */
static int copy_string(ckjs_values *self, napi_value value, const char **s, size_t *len) {
    napi_env env = self->env;
    size_t units = 0, n = 0;
    NODE_API_CALL_RC(env, napi_get_value_string_utf16(env, value, NULL, 0, &units));
    if (units <= ONE_PASS_UNITS) {
        char *buf = room_for(self, units * 3 + 1);
        if (!buf) return CK_ENOMEM;
        NODE_API_CALL_RC(env, napi_get_value_string_utf8(env, value, buf, units * 3 + 1, len));
        *s = keep_copy(self, *len);
        return CK_OK;
    }
    NODE_API_CALL_RC(env, napi_get_value_string_utf8(env, value, NULL, 0, &n));
    if (n > CK_MAX_STRING) return CK_ETOOBIG;
    char *buf = ck_history_alloc(self->history, n + 1);
    if (!buf) return CK_ENOMEM;
    self->taken += n + 1;
    NODE_API_CALL_RC(env, napi_get_value_string_utf8(env, value, buf, n + 1, len));
    *s = buf;
    return CK_OK;
}

/* The UTF-8 length of string `v`, measured without a copy. */
static int rd_length_js(void *ctx, ck_value v, size_t *len) {
    ckjs_values *self = ctx;
    napi_value value;
    int rc = live(self, v, &value);
    if (rc) return rc;
    NODE_API_CALL_RC(self->env, napi_get_value_string_utf8(self->env, value, NULL, 0, len));
    return CK_OK;
}

static int rd_string_js(void *ctx, ck_value v, const char **s, size_t *len) {
    napi_value value;
    int rc = live(ctx, v, &value);
    return rc ? rc : copy_string(ctx, value, s, len);
}

static int rd_boolean_js(void *ctx, ck_value v, int *out) {
    ckjs_values *self = ctx;
    bool b = false;
    napi_value value;
    int rc = live(self, v, &value);
    if (rc) return rc;
    NODE_API_CALL_RC(self->env, napi_get_value_bool(self->env, value, &b));
    *out = b;
    return CK_OK;
}

static int rd_json_js(void *ctx, ck_value v, const char **s, size_t *len) {
    ckjs_values *self = ctx;
    napi_value value, text;
    int rc = live(self, v, &value);
    if (!rc) rc = ckjs_json_stringify(self->env, value, &text);
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

/*
 * The callbacks as the core calls them. A JS exception pending is READ_THROWN to the core, a
 * negative status it hands back unchanged (CKJS_THROWN, 1, would read as success, or as a
 * field that is there); ckjs_values_read() turns it back.
 */
#define READ_THROWN (-1000)

static int read_status(int rc) { return rc == CKJS_THROWN ? READ_THROWN : rc; }

static int rd_field(void *ctx, ck_value v, ck_key key, ck_value *out) {
    int present = 0, rc = read_status(field_js(ctx, v, key, out, &present));
    return rc ? rc : present;
}

static int rd_count(void *ctx, ck_value v, size_t *n) {
    return read_status(rd_count_js(ctx, v, n));
}

static int rd_item(void *ctx, ck_value v, size_t i, ck_value *out) {
    return read_status(rd_item_js(ctx, v, i, out));
}

static int rd_string(void *ctx, ck_value v, const char **s, size_t *len) {
    return read_status(rd_string_js(ctx, v, s, len));
}

static int rd_boolean(void *ctx, ck_value v, int *out) {
    return read_status(rd_boolean_js(ctx, v, out));
}

static int rd_json(void *ctx, ck_value v, const char **s, size_t *len) {
    return read_status(rd_json_js(ctx, v, s, len));
}

static int rd_length(void *ctx, ck_value v, size_t *len) {
    return read_status(rd_length_js(ctx, v, len));
}

void ckjs_values_init(ckjs_values *self, napi_env env, ck_history *history, ckjs_paths *paths) {
    memset(self, 0, sizeof *self);
    self->env = env;
    self->history = history;
    self->paths = paths;
    self->current = SIZE_MAX;
    self->reader = (ck_host_reader){self,    rd_kind,    rd_field, rd_count, rd_item,
                                    rd_string, rd_boolean, rd_json,  rd_length};
}

/* The end of a read through the reader: a JS exception (READ_THROWN) is CKJS_THROWN, and the
 * last message's handle scope is closed. Returns rc so mapped. */
static int values_end(ckjs_values *self, int rc) {
    if (rc == READ_THROWN) rc = CKJS_THROWN;
    if (self->scope && napi_close_handle_scope(self->env, self->scope) != napi_ok && !rc) {
        ckjs_throw_last_error(self->env, "napi_close_handle_scope");
        rc = CKJS_THROWN;
    }
    self->scope = NULL;
    return rc;
}

int ckjs_values_read(ckjs_values *self, napi_value list, size_t from, ck_format format,
                     ck_format *format_out, ck_error *err) {
    ckjs_paths_truncate(self->paths, from);
    self->list = list;
    int rc = load_keys(self);
    if (rc) return rc;
    rc = values_end(self, ck_history_read(self->history, &self->reader, wrap(list), from,
                                          format, format_out, err));
    if (!rc) ckjs_paths_truncate(self->paths, ck_history_count(self->history));
    return rc;
}

int ckjs_values_list_is_tools(ckjs_values *self, napi_value list, bool *yes) {
    *yes = false;
    ckjs_paths_truncate(self->paths, 0);
    self->list = list;
    int rc = load_keys(self);
    if (rc) return rc;
    int got = ck_list_is_tools(&self->reader, wrap(list));
    *yes = got == 1;
    return values_end(self, got >= 0 ? CK_OK : got == READ_THROWN ? got : CK_ENOMEM);
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
