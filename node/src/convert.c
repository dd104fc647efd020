/*
 * convert.c - reading JS message objects into a ck_history, following docs/mapping.md.
 *
 * Every string is copied exactly once, into storage owned by the history, so the history can
 * be made with CK_HISTORY_TRUSTED_UTF8: V8 hands out well-formed UTF-8 (lone surrogates become
 * U+FFFD), and the core need not check it again. Each message is read inside its own handle
 * scope, which keeps the number of live handles flat on long histories; only the message
 * object itself escapes, because views must return the very same objects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_util.h"

/* How far a content list or tool_calls list may go: item indices share the `host` tag with
 * CKJS_HOST_CONTENT_WHOLE and CKJS_HOST_TOOL_CALL, so they must stay below 2^24 - 1. */
#define MAX_ITEMS (CKJS_HOST_CONTENT_WHOLE - 1)

/* The property names read from messages, made once per conversion (napi_get_named_property
 * would make and internalize a new string at every read). */
enum {
    KEY_ID,
    KEY_NAME,
    KEY_INPUT,
    KEY_IS_ERROR,
    KEY_TOOL_USE_ID,
    KEY_CONTENT,
    KEY_TYPE,
    KEY_TEXT,
    KEY_THINKING,
    KEY_FUNCTION,
    KEY_ARGUMENTS,
    KEY_TOOL_CALLS,
    KEY_ROLE,
    KEY_TOOL_CALL_ID,
    N_KEYS
};

static const char *const KEY_NAMES[N_KEYS] = {
    "id",   "name",     "input",    "is_error",  "tool_use_id", "content", "type",
    "text", "thinking", "function", "arguments", "tool_calls",  "role",    "tool_call_id",
};

/* Strings up to this many UTF-16 units are copied in one pass into room for the most UTF-8
 * they can make (3 bytes a unit); longer ones are measured first, then copied exactly. */
#define ONE_PASS_UNITS ((size_t)256 * 1024)
/* String storage is taken from the history in chunks that grow with what the read has taken
 * so far, from MIN_CHUNK up to CHUNK (the history's own block size), or larger for a long
 * string, so that a read appending a message or two to a kept history
 * (ckjs_messages_append()) leaves at most a few KB unused at the end of its last chunk. */
#define MIN_CHUNK ((size_t)4 * 1024)
#define CHUNK ((size_t)64 * 1024)

typedef struct reader {
    napi_env env;
    ck_history *h;
    ck_error *err;
    size_t index; /* the message being read, or CK_NONE for a lone message */
    napi_value keys[N_KEYS];
    char *at, *end; /* the free part of the current chunk of the history's storage */
    size_t taken;   /* bytes of the history's storage this read has taken */
} reader;

/*
 * Fills the error with the place (the message, "messages[3]" or "message", then `fmt`) (which may use up to two %zu, given as `a` and
 * `b`; unused ones are ignored) and returns `code`. Places are formatted only on failure, so
 * reading a valid history never pays for them.
 */
static int fail(reader *r, int code, const char *msg, const char *fmt, size_t a, size_t b) {
    ck_error *err = r->err;
    err->code = code;
    err->msg = msg ? msg : ck_strerror(code);
    err->offset = 0;
    err->index = r->index;
    if (r->index == CK_NONE)
        snprintf(err->where, sizeof err->where, "message");
    else
        snprintf(err->where, sizeof err->where, "messages[%zu]", r->index);
    size_t n = strlen(err->where);
    if (fmt && n < sizeof err->where) {
        char suffix[sizeof err->where];
        /* The format is one of this file's literals; each takes at most two indices. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#endif
        snprintf(suffix, sizeof suffix, fmt, a, b);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
        snprintf(err->where + n, sizeof err->where - n, "%s", suffix);
    }
    return code;
}

static const char MSG_OBJECT[] = "expected an object";
static const char MSG_STRING[] = "expected a string";
static const char MSG_LIST[] = "expected a list";
static const char MSG_MISSING[] = "required field is missing";
static const char MSG_CONTENT[] = "expected a string, a list or null";
static const char MSG_TEXTS[] = "expected a string or a list";
static const char MSG_TOO_MANY[] = "too many items";
static const char MSG_TOO_BIG[] = "a string is larger than 256 MiB";

/* True when the `len` bytes at `s` are exactly `name`: JS strings may hold NUL characters, so
 * strcmp() on the copy would let "text\0x" pass for "text". */
static int is_name(const char *s, size_t len, const char *name) {
    return strlen(name) == len && memcmp(name, s, len) == 0;
}

/* Reads obj[key] and its type; a missing key reads as undefined. */
static int get_prop(reader *r, napi_value obj, int key, napi_value *out, napi_valuetype *type) {
    NODE_API_CALL_RC(r->env, napi_get_property(r->env, obj, r->keys[key], out));
    NODE_API_CALL_RC(r->env, napi_typeof(r->env, *out, type));
    return CK_OK;
}

/* True for a JS object that is not an array (JSON's "object"). */
static int is_plain_object(reader *r, napi_value value, napi_valuetype type, bool *yes) {
    *yes = false;
    if (type != napi_object) return CK_OK;
    bool is_array = false;
    NODE_API_CALL_RC(r->env, napi_is_array(r->env, value, &is_array));
    *yes = !is_array;
    return CK_OK;
}

/* `size` bytes of the history's storage, counted in r->taken. NULL when out of memory. */
static char *take(reader *r, size_t size) {
    char *buf = ck_history_alloc(r->h, size);
    if (buf) r->taken += size;
    return buf;
}

/* At least `size` bytes of the history's storage at r->at: the rest of the current chunk, or
 * a new chunk. NULL when out of memory. */
static char *room_for(reader *r, size_t size) {
    if ((size_t)(r->end - r->at) >= size) return r->at;
    size_t chunk = r->taken < MIN_CHUNK ? MIN_CHUNK : r->taken > CHUNK ? CHUNK : r->taken;
    if (chunk < size) chunk = size;
    char *buf = take(r, chunk);
    if (!buf) return NULL;
    r->at = buf;
    r->end = buf + chunk;
    return buf;
}

/* Copies a JS string, the field at the place `fmt` (indices a, b), into the history's storage,
 * NUL-terminated. A string of up to ONE_PASS_UNITS UTF-16 units (its length in units costs
 * nothing to ask) is written at once into room for its longest UTF-8 form, and only what it
 * used is taken; a longer one is measured first, and one over CK_MAX_STRING bytes is
 * CK_ETOOBIG at that place, refused before it is copied (the core would refuse it too, but
 * could only name the part's own field, "text", "id" or "name"). */
static int copy_string(reader *r, napi_value value, const char **out, size_t *len,
                       const char *fmt, size_t a, size_t b) {
    size_t units = 0, n = 0;
    NODE_API_CALL_RC(r->env, napi_get_value_string_utf16(r->env, value, NULL, 0, &units));
    if (units == 0) {
        *out = "";
        *len = 0;
        return CK_OK;
    }
    char *buf;
    int one_pass = units <= ONE_PASS_UNITS;
    if (one_pass) {
        n = units * 3;
        if (!(buf = room_for(r, n + 1))) return fail(r, CK_ENOMEM, NULL, NULL, 0, 0);
    } else {
        NODE_API_CALL_RC(r->env, napi_get_value_string_utf8(r->env, value, NULL, 0, &n));
        if (n > CK_MAX_STRING) return fail(r, CK_ETOOBIG, MSG_TOO_BIG, fmt, a, b);
        if (!(buf = take(r, n + 1))) return fail(r, CK_ENOMEM, NULL, NULL, 0, 0);
    }
    NODE_API_CALL_RC(r->env, napi_get_value_string_utf8(r->env, value, buf, n + 1, len));
    if (one_pass) r->at += *len + 1;
    *out = buf;
    return CK_OK;
}

/* A required string field: missing (undefined) is CK_EMISSING, another type CK_ETYPE, both at
 * the place `fmt` (with indices a, b). */
static int need_string(reader *r, napi_value obj, int key, const char **out, size_t *len,
                       const char *fmt, size_t a, size_t b) {
    napi_value value;
    napi_valuetype type;
    int rc = get_prop(r, obj, key, &value, &type);
    if (rc) return rc;
    if (type == napi_undefined) return fail(r, CK_EMISSING, MSG_MISSING, fmt, a, b);
    if (type != napi_string) return fail(r, CK_ETYPE, MSG_STRING, fmt, a, b);
    return copy_string(r, value, out, len, fmt, a, b);
}

/* An optional string field at the place `fmt` (index k): anything but a string leaves the text
 * empty. */
static int opt_string(reader *r, napi_value obj, int key, const char **out, size_t *len,
                      const char *fmt, size_t k) {
    napi_value value;
    napi_valuetype type;
    int rc = get_prop(r, obj, key, &value, &type);
    if (rc || type != napi_string) return rc;
    return copy_string(r, value, out, len, fmt, k, 0);
}

/* The compact JSON text of any value (JSON.stringify), for tool_use inputs and non-string
 * arguments, named by the place `fmt` (index k). A value JSON cannot express (a function)
 * gives no text. */
static int json_text(reader *r, napi_value value, const char **out, size_t *len, const char *fmt,
                     size_t k) {
    napi_value json;
    napi_valuetype type;
    int rc = ckjs_json_stringify(r->env, value, &json);
    if (rc) return rc;
    NODE_API_CALL_RC(r->env, napi_typeof(r->env, json, &type));
    if (type != napi_string) return CK_OK;
    return copy_string(r, json, out, len, fmt, k, 0);
}

/*
 * The text of a tool result's content: a string, or the `text` of every item of a list (and
 * every bare string item) joined with "\n"; null or absent is empty. `nested` says whether
 * this is an Anthropic tool_result block's content (item k) or a tool message's content.
 */
static int join_text(reader *r, napi_value content, int nested, size_t k, const char **out,
                     size_t *len) {
    napi_env env = r->env;
    napi_valuetype type;
    bool is_array = false;
    *out = "";
    *len = 0;
    const char *whole = nested ? ".content[%zu].content" : ".content";
    const char *item_text = nested ? ".content[%zu].content[%zu].text" : ".content[%zu].text";
    NODE_API_CALL_RC(env, napi_typeof(env, content, &type));
    if (type == napi_undefined || type == napi_null) return CK_OK;
    if (type == napi_string) return copy_string(r, content, out, len, whole, k, 0);
    if (type == napi_object) NODE_API_CALL_RC(env, napi_is_array(env, content, &is_array));
    if (!is_array) return fail(r, CK_ETYPE, MSG_TEXTS, whole, k, 0);
    uint32_t n = 0;
    NODE_API_CALL_RC(env, napi_get_array_length(env, content, &n));
    if (n == 0) return CK_OK;
    /* Two passes: the lengths first, so that the joined text is copied once, in place. */
    napi_value *texts = malloc(n * sizeof *texts);
    size_t *lens = malloc(n * sizeof *lens);
    int rc = texts && lens ? CK_OK : fail(r, CK_ENOMEM, NULL, NULL, 0, 0);
    size_t count = 0, total = 0;
    for (uint32_t m = 0; m < n && !rc; m++) {
        napi_value item, text;
        napi_valuetype item_type, text_type;
        if (napi_get_element(env, content, m, &item) != napi_ok ||
            napi_typeof(env, item, &item_type) != napi_ok) {
            ckjs_throw_last_error(env, "reading a content item");
            rc = CKJS_THROWN;
            break;
        }
        text = item;
        text_type = item_type;
        if (item_type == napi_object && (rc = get_prop(r, item, KEY_TEXT, &text, &text_type))) break;
        if (text_type == napi_string) {
            if (napi_get_value_string_utf8(env, text, NULL, 0, &lens[count]) != napi_ok) {
                ckjs_throw_last_error(env, "napi_get_value_string_utf8");
                rc = CKJS_THROWN;
                break;
            }
            if (lens[count] > CK_MAX_STRING) {
                rc = fail(r, CK_ETOOBIG, MSG_TOO_BIG, item_text, nested ? k : m, m);
                break;
            }
            texts[count] = text;
            total += lens[count++];
        } else if (item_type == napi_object && text_type != napi_undefined &&
                   text_type != napi_null) {
            rc = fail(r, CK_ETYPE, MSG_STRING, item_text, nested ? k : m, m);
        }
    }
    /* The pieces and their separators; each piece is within the limit, the sum may not be. */
    if (!rc && count && total + count - 1 > CK_MAX_STRING)
        rc = fail(r, CK_ETOOBIG, MSG_TOO_BIG, whole, k, 0);
    char *buf = NULL;
    if (!rc && count && !(buf = take(r, total + count)))
        rc = fail(r, CK_ENOMEM, NULL, NULL, 0, 0);
    size_t at = 0;
    for (size_t i = 0; i < count && !rc; i++) {
        size_t got = 0;
        if (i) buf[at++] = '\n';
        /* The buffer has room for this text's terminator: the next separator or the end. */
        if (napi_get_value_string_utf8(env, texts[i], buf + at, lens[i] + 1, &got) != napi_ok) {
            ckjs_throw_last_error(env, "napi_get_value_string_utf8");
            rc = CKJS_THROWN;
        }
        at += got;
    }
    free(texts);
    free(lens);
    if (!rc && buf) {
        *out = buf;
        *len = at;
    }
    return rc;
}

static int block_tool_use(reader *r, napi_value item, size_t k, ck_part *p) {
    p->kind = CK_PART_TOOL_CALL;
    p->flags = CK_PART_ANTHROPIC;
    int rc = need_string(r, item, KEY_ID, &p->id, &p->id_len, ".content[%zu].id", k, 0);
    if (!rc) rc = need_string(r, item, KEY_NAME, &p->name, &p->name_len, ".content[%zu].name", k, 0);
    if (rc) return rc;
    napi_value input;
    napi_valuetype type;
    if ((rc = get_prop(r, item, KEY_INPUT, &input, &type)) || type == napi_undefined) return rc;
    return json_text(r, input, &p->text, &p->text_len, ".content[%zu].input", k);
}

static int block_tool_result(reader *r, napi_value item, size_t k, ck_part *p) {
    p->kind = CK_PART_TOOL_RESULT;
    p->flags = CK_PART_ANTHROPIC;
    napi_value value;
    napi_valuetype type;
    int rc = get_prop(r, item, KEY_IS_ERROR, &value, &type);
    if (rc) return rc;
    if (type == napi_boolean) {
        bool is_error = false;
        NODE_API_CALL_RC(r->env, napi_get_value_bool(r->env, value, &is_error));
        if (is_error) p->flags |= CK_PART_IS_ERROR;
    }
    rc = need_string(r, item, KEY_TOOL_USE_ID, &p->id, &p->id_len, ".content[%zu].tool_use_id", k, 0);
    if (!rc) rc = get_prop(r, item, KEY_CONTENT, &value, &type);
    if (!rc) rc = join_text(r, value, 1, k, &p->text, &p->text_len);
    return rc;
}

/* Reads item k of a content list into `p` (docs/mapping.md, "Item types"). */
static int read_block(reader *r, napi_value item, size_t k, ck_part *p) {
    napi_env env = r->env;
    napi_valuetype type;
    bool object = false;
    NODE_API_CALL_RC(env, napi_typeof(env, item, &type));
    if (type == napi_string) {
        p->kind = CK_PART_TEXT;
        return copy_string(r, item, &p->text, &p->text_len, ".content[%zu]", k, 0);
    }
    int rc = is_plain_object(r, item, type, &object);
    if (rc) return rc;
    if (!object) return fail(r, CK_ETYPE, MSG_OBJECT, ".content[%zu]", k, 0);
    napi_value type_v;
    napi_valuetype type_t;
    if ((rc = get_prop(r, item, KEY_TYPE, &type_v, &type_t))) return rc;
    if (type_t == napi_undefined)
        return fail(r, CK_EMISSING, MSG_MISSING, ".content[%zu].type", k, 0);
    if (type_t != napi_string) return fail(r, CK_ETYPE, MSG_STRING, ".content[%zu].type", k, 0);
    /* Known type names are short; a longer one is copied truncated and matches none. */
    char t[24];
    size_t t_len = 0;
    NODE_API_CALL_RC(env, napi_get_value_string_utf8(env, type_v, t, sizeof t, &t_len));
    if (is_name(t, t_len, "text")) {
        p->kind = CK_PART_TEXT;
        return need_string(r, item, KEY_TEXT, &p->text, &p->text_len, ".content[%zu].text", k, 0);
    }
    if (is_name(t, t_len, "image_url") || is_name(t, t_len, "image")) {
        p->kind = CK_PART_IMAGE;
        p->flags = t_len > 5 ? CK_PART_OPENAI : CK_PART_ANTHROPIC;
        return CK_OK;
    }
    if (is_name(t, t_len, "tool_use")) return block_tool_use(r, item, k, p);
    if (is_name(t, t_len, "tool_result")) return block_tool_result(r, item, k, p);
    p->kind = CK_PART_OTHER;
    int thinking = is_name(t, t_len, "thinking");
    if (thinking || is_name(t, t_len, "redacted_thinking")) p->flags = CK_PART_ANTHROPIC;
    return opt_string(r, item, thinking ? KEY_THINKING : KEY_TEXT, &p->text, &p->text_len,
                      thinking ? ".content[%zu].thinking" : ".content[%zu].text", k);
}

static int add_part(reader *r, const ck_part *p) {
    int rc = ck_history_add_part(r->h, p, r->err);
    /* A trusted history fails only for memory; the error then has no place yet. */
    if (rc) return fail(r, rc, NULL, NULL, 0, 0);
    return CK_OK;
}

static int read_content_list(reader *r, napi_value content) {
    uint32_t n = 0;
    NODE_API_CALL_RC(r->env, napi_get_array_length(r->env, content, &n));
    if (n > MAX_ITEMS) return fail(r, CK_ETOOBIG, MSG_TOO_MANY, ".content", 0, 0);
    for (uint32_t k = 0; k < n; k++) {
        napi_value item;
        ck_part p;
        memset(&p, 0, sizeof p);
        p.host = k;
        NODE_API_CALL_RC(r->env, napi_get_element(r->env, content, k, &item));
        int rc = read_block(r, item, k, &p);
        if (!rc) rc = add_part(r, &p);
        if (rc) return rc;
    }
    return CK_OK;
}

static int read_tool_call(reader *r, napi_value call, uint32_t j) {
    napi_valuetype type;
    bool object = false;
    NODE_API_CALL_RC(r->env, napi_typeof(r->env, call, &type));
    int rc = is_plain_object(r, call, type, &object);
    if (rc) return rc;
    if (!object) return fail(r, CK_ETYPE, MSG_OBJECT, ".tool_calls[%zu]", j, 0);
    ck_part p;
    memset(&p, 0, sizeof p);
    p.kind = CK_PART_TOOL_CALL;
    p.flags = CK_PART_OPENAI;
    p.host = CKJS_HOST_TOOL_CALL | j;
    if ((rc = need_string(r, call, KEY_ID, &p.id, &p.id_len, ".tool_calls[%zu].id", j, 0))) return rc;
    napi_value fn, args;
    if ((rc = get_prop(r, call, KEY_FUNCTION, &fn, &type))) return rc;
    if (type == napi_undefined)
        return fail(r, CK_EMISSING, MSG_MISSING, ".tool_calls[%zu].function", j, 0);
    if ((rc = is_plain_object(r, fn, type, &object))) return rc;
    if (!object) return fail(r, CK_ETYPE, MSG_OBJECT, ".tool_calls[%zu].function", j, 0);
    if ((rc = need_string(r, fn, KEY_NAME, &p.name, &p.name_len, ".tool_calls[%zu].function.name", j,
                          0)))
        return rc;
    if ((rc = get_prop(r, fn, KEY_ARGUMENTS, &args, &type))) return rc;
    const char *args_at = ".tool_calls[%zu].function.arguments";
    if (type == napi_string)
        rc = copy_string(r, args, &p.text, &p.text_len, args_at, j, 0);
    else if (type != napi_undefined && type != napi_null)
        rc = json_text(r, args, &p.text, &p.text_len, args_at, j);
    if (!rc) rc = add_part(r, &p);
    return rc;
}

static int read_tool_calls(reader *r, napi_value msg) {
    napi_value calls;
    napi_valuetype type;
    bool is_array = false;
    int rc = get_prop(r, msg, KEY_TOOL_CALLS, &calls, &type);
    if (rc || type == napi_undefined || type == napi_null) return rc;
    if (type == napi_object) NODE_API_CALL_RC(r->env, napi_is_array(r->env, calls, &is_array));
    if (!is_array) return fail(r, CK_ETYPE, MSG_LIST, ".tool_calls", 0, 0);
    uint32_t n = 0;
    NODE_API_CALL_RC(r->env, napi_get_array_length(r->env, calls, &n));
    if (n > MAX_ITEMS) return fail(r, CK_ETOOBIG, MSG_TOO_MANY, ".tool_calls", 0, 0);
    for (uint32_t j = 0; j < n && !rc; j++) {
        napi_value call;
        NODE_API_CALL_RC(r->env, napi_get_element(r->env, calls, j, &call));
        rc = read_tool_call(r, call, j);
    }
    return rc;
}

static ck_role role_of(const char *s, size_t len) {
    static const char *const names[] = {"system", "developer", "user", "assistant", "tool"};
    for (int i = 0; i < 5; i++)
        if (is_name(s, len, names[i])) return (ck_role)i;
    return CK_ROLE_OTHER;
}

/* Reads one message object (mapping.md, "Reading a message"). */
static int read_message(reader *r, napi_value msg) {
    napi_env env = r->env;
    napi_valuetype type;
    bool object = false;
    NODE_API_CALL_RC(env, napi_typeof(env, msg, &type));
    int rc = is_plain_object(r, msg, type, &object);
    if (rc) return rc;
    if (!object) return fail(r, CK_ETYPE, MSG_OBJECT, "", 0, 0);
    napi_value role_v, content;
    napi_valuetype role_t, content_t;
    if ((rc = get_prop(r, msg, KEY_ROLE, &role_v, &role_t))) return rc;
    if (role_t == napi_undefined) return fail(r, CK_EMISSING, MSG_MISSING, ".role", 0, 0);
    if (role_t != napi_string) return fail(r, CK_ETYPE, MSG_STRING, ".role", 0, 0);
    /* Role names are short; a longer role is copied truncated and becomes CK_ROLE_OTHER. */
    char role_s[16];
    size_t role_len = 0;
    NODE_API_CALL_RC(env,
                     napi_get_value_string_utf8(env, role_v, role_s, sizeof role_s, &role_len));
    ck_role role = role_of(role_s, role_len);
    if ((rc = get_prop(r, msg, KEY_CONTENT, &content, &content_t))) return rc;
    uint32_t flags = content_t == napi_string ? CK_MSG_STRING_CONTENT : 0;
    if ((rc = ck_history_add_message(r->h, role, flags))) return fail(r, rc, NULL, "", 0, 0);
    ck_part p;
    memset(&p, 0, sizeof p);
    if (role == CK_ROLE_TOOL) {
        p.kind = CK_PART_TOOL_RESULT;
        p.flags = CK_PART_OPENAI;
        p.host = CKJS_HOST_CONTENT_WHOLE;
        /* "name", when a host keeps the tool's name on its result, names the tool for
         * retention policies at tool time (the call is not at hand there). */
        if ((rc = opt_string(r, msg, KEY_NAME, &p.name, &p.name_len, ".name", 0)) ||
            (rc = need_string(r, msg, KEY_TOOL_CALL_ID, &p.id, &p.id_len, ".tool_call_id", 0, 0)) ||
            (rc = join_text(r, content, 0, 0, &p.text, &p.text_len)) || (rc = add_part(r, &p)))
            return rc;
    } else if (content_t == napi_string) {
        p.kind = CK_PART_TEXT;
        p.host = CKJS_HOST_CONTENT_WHOLE;
        if ((rc = copy_string(r, content, &p.text, &p.text_len, ".content", 0, 0)) ||
            (rc = add_part(r, &p)))
            return rc;
    } else if (content_t != napi_undefined && content_t != napi_null) {
        bool is_array = false;
        if (content_t == napi_object) NODE_API_CALL_RC(env, napi_is_array(env, content, &is_array));
        if (!is_array) return fail(r, CK_ETYPE, MSG_CONTENT, ".content", 0, 0);
        if ((rc = read_content_list(r, content))) return rc;
    }
    return read_tool_calls(r, msg);
}

/*
 * Reads `msg` inside its own escapable handle scope, so that the handles made while reading
 * are released at once, and escapes the message object into *kept unless `kept` is NULL. The
 * scope is closed on every path; returning with it open would corrupt the caller's scope.
 */
static int read_scoped(reader *r, napi_value list, uint32_t i, napi_value single,
                       napi_value *kept) {
    napi_escapable_handle_scope scope;
    NODE_API_CALL_RC(r->env, napi_open_escapable_handle_scope(r->env, &scope));
    napi_value msg = single;
    int rc = CK_OK;
    if (!msg && napi_get_element(r->env, list, i, &msg) != napi_ok) {
        ckjs_throw_last_error(r->env, "napi_get_element");
        rc = CKJS_THROWN;
    }
    if (!rc) rc = read_message(r, msg);
    if (!rc && kept && napi_escape_handle(r->env, scope, msg, kept) != napi_ok) {
        ckjs_throw_last_error(r->env, "napi_escape_handle");
        rc = CKJS_THROWN;
    }
    NODE_API_CALL_RC(r->env, napi_close_escapable_handle_scope(r->env, scope));
    return rc;
}

void ckjs_messages_dispose(ckjs_messages *self) {
    ck_history_free(self->history);
    free(self->objects);
    memset(self, 0, sizeof *self);
}

/* A reader for appending to `h`, its property keys made. */
static int reader_init(reader *r, napi_env env, ck_history *h, ck_error *err) {
    memset(err, 0, sizeof *err);
    err->index = CK_NONE;
    memset(r, 0, sizeof *r);
    r->env = env;
    r->err = err;
    r->h = h;
    r->index = CK_NONE;
    for (int k = 0; k < N_KEYS; k++)
        NODE_API_CALL_RC(env, napi_create_string_latin1(env, KEY_NAMES[k], NAPI_AUTO_LENGTH,
                                                        &r->keys[k]));
    return CK_OK;
}

static int read_all(napi_env env, napi_value list, napi_value single, ckjs_messages *out,
                    ck_error *err) {
    memset(out, 0, sizeof *out);
    reader r;
    int rc = reader_init(&r, env, NULL, err);
    if (rc) return rc;
    uint32_t n = 1;
    if (!single) NODE_API_CALL_RC(env, napi_get_array_length(env, list, &n));
    out->history = r.h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    out->objects = malloc((n ? n : 1) * sizeof *out->objects);
    if (!out->history || !out->objects) rc = fail(&r, CK_ENOMEM, NULL, NULL, 0, 0);
    for (uint32_t i = 0; i < n && !rc; i++) {
        r.index = single ? CK_NONE : i;
        rc = read_scoped(&r, list, i, single, &out->objects[i]);
        if (!rc) out->count = i + 1;
    }
    if (rc) ckjs_messages_dispose(out);
    return rc;
}

int ckjs_messages_append(napi_env env, napi_value messages, uint32_t from, ck_history *h,
                         size_t *taken, ck_error *err) {
    reader r;
    int rc = reader_init(&r, env, h, err);
    uint32_t n = 0;
    if (!rc) NODE_API_CALL_RC(env, napi_get_array_length(env, messages, &n));
    for (uint32_t i = from; i < n && !rc; i++) {
        r.index = i;
        rc = read_scoped(&r, messages, i, NULL, NULL);
    }
    *taken += r.taken;
    return rc;
}

int ckjs_messages_read(napi_env env, napi_value messages, ckjs_messages *out, ck_error *err) {
    return read_all(env, messages, NULL, out, err);
}

int ckjs_message_read_one(napi_env env, napi_value message, ckjs_messages *out, ck_error *err) {
    return read_all(env, NULL, message, out, err);
}
