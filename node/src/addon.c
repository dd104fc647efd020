/*
 * addon.c - the ctxkeel Node-API addon: module setup, per-addon state, errors, and the
 * functions that need no message mapping (token estimates, anchors, status codes). The
 * Compactor class lives in compactor.c, the HttpSummarizer class in http.c.
 *
 * node/index.js loads this module, checks arguments and exports the public API. The C side
 * checks argument types again because the addon can be loaded directly.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_util.h"

const char *const ckjs_estimator_names[3] = {"default", "chars4", "cl100k"};

/* ------------------------------------------------------------------------------------------ */
/* State and errors                                                                           */
/* ------------------------------------------------------------------------------------------ */

ckjs_state *ckjs_state_get(napi_env env) {
    void *data = NULL;
    if (napi_get_instance_data(env, &data) != napi_ok) return NULL;
    return data;
}

static void state_finalize(napi_env env, void *data, void *hint) {
    (void)hint;
    ckjs_state *state = data;
    if (!state) return;
    /* The environment is going away: there is no caller to report a failed deletion to, so
     * each reference is released on its own and the struct is freed regardless. */
    napi_ref refs[] = {state->json_stringify, state->json_parse, state->error_class,
                       state->input_error_class, state->job_class, state->keys};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        if (refs[i] && napi_delete_reference(env, refs[i]) != napi_ok) continue;
    }
    free(state);
}

void ckjs_throw_last_error(napi_env env, const char *call) {
    /* The error info must be read first: any other napi call overwrites it. */
    const napi_extended_error_info *info = NULL;
    napi_status got = napi_get_last_error_info(env, &info);
    bool pending = false;
    if (napi_is_exception_pending(env, &pending) != napi_ok || pending) return;
    char message[256];
    const char *what =
        got == napi_ok && info && info->error_message ? info->error_message : "unknown failure";
    snprintf(message, sizeof message, "ctxkeel: %s failed: %s", call, what);
    /* If even throwing fails there is nothing left to do; the call returns NULL and Node
     * reports the missing return value. */
    if (napi_throw_error(env, NULL, message) != napi_ok) return;
}

/* Sets obj[key] = a number. */
static int set_number(napi_env env, napi_value obj, const char *key, double number) {
    napi_value value;
    NODE_API_CALL_RC(env, napi_create_double(env, number, &value));
    NODE_API_CALL_RC(env, napi_set_named_property(env, obj, key, value));
    return CK_OK;
}

/* Sets obj[key] = a string of `len` bytes (NAPI_AUTO_LENGTH for NUL-terminated). */
static int set_string(napi_env env, napi_value obj, const char *key, const char *s, size_t len) {
    napi_value value;
    NODE_API_CALL_RC(env, napi_create_string_utf8(env, s, len, &value));
    NODE_API_CALL_RC(env, napi_set_named_property(env, obj, key, value));
    return CK_OK;
}

napi_value ckjs_throw_status(napi_env env, const ck_error *err) {
    char text[320];
    const char *msg = err->msg ? err->msg : ck_strerror(err->code);
    if (err->where[0])
        snprintf(text, sizeof text, "ctxkeel: %s: %s", err->where, msg);
    else
        snprintf(text, sizeof text, "ctxkeel: %s", msg);
    napi_value message, error, ctor = NULL;
    NODE_API_CALL(env, napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &message));
    ckjs_state *state = ckjs_state_get(env);
    napi_ref ref = NULL;
    if (state) ref = CK_IS_INPUT_ERROR(err->code) ? state->input_error_class : state->error_class;
    if (ref) NODE_API_CALL(env, napi_get_reference_value(env, ref, &ctor));
    if (ctor) {
        NODE_API_CALL(env, napi_new_instance(env, ctor, 1, &message, &error));
    } else {
        napi_value code;
        NODE_API_CALL(
            env, napi_create_string_utf8(env, ck_err_name(err->code), NAPI_AUTO_LENGTH, &code));
        NODE_API_CALL(env, napi_create_error(env, code, message, &error));
    }
    if (set_string(env, error, "code", ck_err_name(err->code), NAPI_AUTO_LENGTH)) return NULL;
    if (err->index != CK_NONE && set_number(env, error, "index", (double)err->index)) return NULL;
    if (err->where[0] && set_string(env, error, "where", err->where, NAPI_AUTO_LENGTH)) return NULL;
    /* Offsets are byte positions in JSON text; only codes about text carry a meaningful one. */
    if ((err->code == CK_ESYNTAX || err->code == CK_EUTF8 || err->offset) &&
        set_number(env, error, "offset", (double)err->offset))
        return NULL;
    NODE_API_CALL(env, napi_throw(env, error));
    return NULL;
}

napi_value ckjs_take_exception(napi_env env) {
    bool pending = false;
    napi_value error = NULL;
    if (napi_is_exception_pending(env, &pending) != napi_ok || !pending ||
        napi_get_and_clear_last_exception(env, &error) != napi_ok)
        return NULL;
    return error;
}

napi_value ckjs_fail(napi_env env, int rc, const ck_error *err) {
    if (rc == CKJS_THROWN) return NULL;
    if (err && err->code == rc) return ckjs_throw_status(env, err);
    /* A status without a filled ck_error (out of memory before any place was known). */
    ck_error bare;
    memset(&bare, 0, sizeof bare);
    bare.code = rc;
    bare.index = CK_NONE;
    return ckjs_throw_status(env, &bare);
}

static napi_value throw_arg_error(napi_env env, int range, const char *fmt, va_list ap) {
    char text[320];
    int n = snprintf(text, sizeof text, "ctxkeel: ");
    vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
    if (range)
        NODE_API_CALL(env, napi_throw_range_error(env, "ERR_INVALID_ARG_VALUE", text));
    else
        NODE_API_CALL(env, napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", text));
    return NULL;
}

napi_value ckjs_throw_type_error(napi_env env, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    throw_arg_error(env, 0, fmt, ap);
    va_end(ap);
    return NULL;
}

napi_value ckjs_throw_range_error(napi_env env, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    throw_arg_error(env, 1, fmt, ap);
    va_end(ap);
    return NULL;
}

const char *ckjs_type_name(napi_env env, napi_value value) {
    napi_valuetype type;
    if (napi_typeof(env, value, &type) != napi_ok) return "a value";
    switch (type) {
        case napi_undefined: return "undefined";
        case napi_null: return "null";
        case napi_boolean: return "a boolean";
        case napi_number: return "a number";
        case napi_string: return "a string";
        case napi_symbol: return "a symbol";
        case napi_function: return "a function";
        case napi_external: return "an external";
        case napi_bigint: return "a bigint";
        case napi_object: break;
    }
    bool is_array = false;
    if (napi_is_array(env, value, &is_array) == napi_ok && is_array) return "an array";
    return "an object";
}

int ckjs_choice(napi_env env, napi_value value, const char *what, const char *const *names,
                int n_names, int fallback, int *out) {
    napi_valuetype type = napi_undefined;
    if (value) {
        NODE_API_CALL_BASE(env, napi_typeof(env, value, &type), -1);
    }
    if (type == napi_undefined) {
        *out = fallback;
        return 0;
    }
    char list[128];
    size_t at = 0;
    for (int i = 0; i < n_names && at < sizeof list; i++) {
        const char *sep = i == 0 ? "" : (i == n_names - 1 ? " or " : ", ");
        int n = snprintf(list + at, sizeof list - at, "%s'%s'", sep, names[i]);
        if (n < 0) break;
        at += (size_t)n;
    }
    if (type != napi_string) {
        ckjs_throw_type_error(env, "%s must be %s, not %s", what, list, ckjs_type_name(env, value));
        return -1;
    }
    /* Every valid name is short; a longer string is copied truncated and matches none. */
    char buf[32];
    size_t len = 0;
    NODE_API_CALL_BASE(env, napi_get_value_string_utf8(env, value, buf, sizeof buf, &len), -1);
    for (int i = 0; i < n_names; i++) {
        if (strlen(names[i]) == len && memcmp(names[i], buf, len) == 0) {
            *out = i;
            return 0;
        }
    }
    ckjs_throw_range_error(env, "%s must be %s", what, list);
    return -1;
}

int ckjs_format_arg(napi_env env, napi_value value, const char *what, ck_format *out) {
    napi_valuetype type = napi_undefined;
    if (value) NODE_API_CALL_BASE(env, napi_typeof(env, value, &type), -1);
    if (type == napi_string) {
        char buf[32];
        size_t len = 0;
        NODE_API_CALL_BASE(env, napi_get_value_string_utf8(env, value, buf, sizeof buf, &len), -1);
        if (len < sizeof buf - 1 && ck_format_from_name(buf, len, out) == CK_OK) return 0;
    }
    /* Undefined keeps *out; anything else is refused with the list of names. */
    const char *names[CK_FORMAT_COUNT];
    for (int i = 0; i < CK_FORMAT_COUNT; i++) names[i] = ck_format_name((ck_format)i);
    int choice = (int)*out;
    if (ckjs_choice(env, value, what, names, CK_FORMAT_COUNT, choice, &choice)) return -1;
    *out = (ck_format)choice;
    return 0;
}

int ckjs_prompt_cache_arg(napi_env env, napi_value value, const char *what, double *read,
                          double *write) {
    napi_valuetype type = napi_undefined;
    if (value) NODE_API_CALL_BASE(env, napi_typeof(env, value, &type), -1);
    if (type == napi_undefined || type == napi_null) return 0;
    ck_error err;
    if (type == napi_string) {
        char buf[32];
        size_t len = 0;
        NODE_API_CALL_BASE(env, napi_get_value_string_utf8(env, value, buf, sizeof buf, &len), -1);
        /* A longer string is copied truncated and names no preset. */
        if (ck_prompt_cache_preset(len < sizeof buf - 1 ? buf : "", read, write, &err) == CK_OK)
            return 0;
        ckjs_throw_range_error(env, "%s must be 'anthropic', 'openai' or { read, write }", what);
        return -1;
    }
    bool is_array = false;
    NODE_API_CALL_BASE(env, napi_is_array(env, value, &is_array), -1);
    if (type != napi_object || is_array) {
        ckjs_throw_type_error(env, "%s must be 'anthropic', 'openai' or { read, write }, not %s",
                              what, ckjs_type_name(env, value));
        return -1;
    }
    const char *keys[2] = {"read", "write"};
    double *outs[2] = {read, write};
    for (int k = 0; k < 2; k++) {
        napi_value price;
        napi_valuetype price_type;
        NODE_API_CALL_BASE(env, napi_get_named_property(env, value, keys[k], &price), -1);
        NODE_API_CALL_BASE(env, napi_typeof(env, price, &price_type), -1);
        if (price_type != napi_number) {
            ckjs_throw_type_error(env, "%s.%s must be a number, not %s", what, keys[k],
                                  ckjs_type_name(env, price));
            return -1;
        }
        NODE_API_CALL_BASE(env, napi_get_value_double(env, price, outs[k]), -1);
        /* 0 would mean "no cost model" to the core: given here it is out of range. */
        if (*outs[k] == 0) *outs[k] = NAN;
    }
    return 0;
}

napi_value ckjs_string(napi_env env, const char *s, size_t len) {
    napi_value value;
    NODE_API_CALL(env, napi_create_string_utf8(env, len ? s : "", len, &value));
    return value;
}

int ckjs_json_stringify(napi_env env, napi_value value, napi_value *out) {
    ckjs_state *state = ckjs_state_get(env);
    napi_value fn, recv;
    if (!state || !state->json_stringify) {
        NODE_API_CALL_RC(env, napi_throw_error(env, NULL, "ctxkeel: addon state is missing"));
        return CKJS_THROWN;
    }
    NODE_API_CALL_RC(env, napi_get_reference_value(env, state->json_stringify, &fn));
    NODE_API_CALL_RC(env, napi_get_undefined(env, &recv));
    NODE_API_CALL_RC(env, napi_call_function(env, recv, fn, 1, &value, out));
    return CK_OK;
}

int ckjs_json_parse(napi_env env, const char *text, size_t len, napi_value *out) {
    ckjs_state *state = ckjs_state_get(env);
    napi_value fn, recv, arg;
    if (!state || !state->json_parse) {
        NODE_API_CALL_RC(env, napi_throw_error(env, NULL, "ctxkeel: addon state is missing"));
        return CKJS_THROWN;
    }
    if (!(arg = ckjs_string(env, text, len))) return CKJS_THROWN;
    NODE_API_CALL_RC(env, napi_get_reference_value(env, state->json_parse, &fn));
    NODE_API_CALL_RC(env, napi_get_undefined(env, &recv));
    NODE_API_CALL_RC(env, napi_call_function(env, recv, fn, 1, &arg, out));
    return CK_OK;
}

int ckjs_dup_string(napi_env env, napi_value value, char **out, size_t *len) {
    size_t n = 0;
    *out = NULL;
    NODE_API_CALL_RC(env, napi_get_value_string_utf8(env, value, NULL, 0, &n));
    char *buf = malloc(n + 1);
    if (!buf) return CK_ENOMEM;
    if (napi_get_value_string_utf8(env, value, buf, n + 1, len) != napi_ok) {
        ckjs_throw_last_error(env, "napi_get_value_string_utf8");
        free(buf);
        return CKJS_THROWN;
    }
    *out = buf;
    return CK_OK;
}

int ckjs_get_args(napi_env env, napi_callback_info info, napi_value *argv, size_t max,
                  napi_value *this_arg) {
    size_t argc = max;
    NODE_API_CALL_RC(env, napi_get_cb_info(env, info, &argc, argv, this_arg, NULL));
    for (size_t i = argc; i < max; i++)
        argv[i] = NULL;
    return CK_OK;
}

int ckjs_construct_args(napi_env env, napi_callback_info info, const char *cls,
                        napi_value *this_arg, napi_value *options) {
    napi_value argv[1], target;
    if (ckjs_get_args(env, info, argv, 1, this_arg)) return CKJS_THROWN;
    NODE_API_CALL_RC(env, napi_get_new_target(env, info, &target));
    if (!target) {
        ckjs_throw_type_error(env, "%s must be called with new", cls);
        return CKJS_THROWN;
    }
    napi_valuetype type = napi_undefined;
    bool is_array = false;
    if (argv[0]) {
        NODE_API_CALL_RC(env, napi_typeof(env, argv[0], &type));
        NODE_API_CALL_RC(env, napi_is_array(env, argv[0], &is_array));
    }
    if (type != napi_object || is_array) {
        ckjs_throw_type_error(env, "options must be an object, not %s",
                              argv[0] ? ckjs_type_name(env, argv[0]) : "undefined");
        return CKJS_THROWN;
    }
    *options = argv[0];
    return CK_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* estimateTokens                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* True when `list` is a message list, not a list of tool schemas (ck_list_is_tools()). */
static int looks_like_messages(napi_env env, napi_value list, bool *yes) {
    ck_history *h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    if (!h) return CK_ENOMEM;
    ckjs_paths paths = {0};
    ckjs_values values;
    ckjs_values_init(&values, env, h, &paths);
    bool tools = false;
    int rc = ckjs_values_list_is_tools(&values, list, &tools);
    *yes = !tools;
    ck_history_free(h);
    ckjs_paths_dispose(&paths);
    return rc;
}

/* A ck_counter over a JS function, for estimateTokens(x, {estimator: fn}). After a failure
 * the error is pending and fn is not called again. */
typedef struct js_counter {
    napi_env env;
    napi_value fn;
    int failed;
} js_counter;

static uint64_t js_count(void *ctx, const char *text, size_t len) {
    js_counter *jc = ctx;
    uint64_t tokens = UINT64_MAX;
    napi_handle_scope scope;
    if (jc->failed || napi_open_handle_scope(jc->env, &scope) != napi_ok) return UINT64_MAX;
    if (ckjs_call_counter(jc->env, jc->fn, text, len, &tokens)) {
        jc->failed = 1;
        tokens = UINT64_MAX;
    }
    if (napi_close_handle_scope(jc->env, scope) != napi_ok) return UINT64_MAX;
    return tokens;
}

/* A count of the counter, or CKJS_THROWN (it failed; the error is pending) or CK_ENOMEM. */
static int counted(const js_counter *jc, uint64_t tokens, uint64_t *out) {
    if (tokens == UINT64_MAX) return jc->failed ? CKJS_THROWN : CK_ENOMEM;
    *out = tokens;
    return CK_OK;
}

/* Estimates a string's tokens, or, for the tool-schema path, the JSON text of any value; with
 * a counter (jc->fn not NULL), counts them with it instead. */
static int estimate_string(napi_env env, napi_value value, int tools, ck_estimator est,
                           js_counter *jc, uint64_t *tokens) {
    char *text = NULL;
    size_t len = 0;
    int rc = ckjs_dup_string(env, value, &text, &len);
    if (rc) return rc;
    if (jc->fn)
        rc = counted(jc, js_count(jc, text, len), tokens);
    else
        *tokens = tools ? ck_estimate_tools(text, len, est) : ck_estimate_text(text, len, est);
    free(text);
    return rc;
}

/* The estimator names, from the core (ck_estimator_name), in ck_estimator order. */
#define CKJS_MAX_ESTIMATORS 16
static int estimator_names(const char **names) {
    int n = 0;
    while (n < CKJS_MAX_ESTIMATORS && (names[n] = ck_estimator_name((ck_estimator)n))) n++;
    return n;
}

/* The same as a JS array, for index.js and the errors it throws. */
static napi_value estimator_name_list(napi_env env) {
    const char *names[CKJS_MAX_ESTIMATORS];
    int n = estimator_names(names);
    napi_value list, name;
    NODE_API_CALL(env, napi_create_array_with_length(env, (size_t)n, &list));
    for (int i = 0; i < n; i++) {
        NODE_API_CALL(env, napi_create_string_utf8(env, names[i], NAPI_AUTO_LENGTH, &name));
        NODE_API_CALL(env, napi_set_element(env, list, (uint32_t)i, name));
    }
    return list;
}

/* The tokens of a message list, or of one message (`one`), read through the core's format
 * layer. Returns CK_OK, a core status with `err` naming the place, or CKJS_THROWN. */
static int estimate_messages(napi_env env, napi_value x, int one, ck_estimator est,
                             js_counter *jc, const ck_counter *counter, uint64_t *tokens,
                             ck_error *err) {
    ck_history *h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    if (!h) return CK_ENOMEM;
    ckjs_paths paths = {0};
    ckjs_values values;
    napi_value list;
    ckjs_values_init(&values, env, h, &paths);
    int rc = one ? ckjs_values_read_one(&values, x, &list, CK_FORMAT_AUTO, NULL, err)
                 : ckjs_values_read(&values, x, 0, CK_FORMAT_AUTO, NULL, err);
    if (!rc && jc->fn)
        rc = counted(jc, one ? ck_count_message(h, 0, counter) : ck_count_history(h, counter),
                     tokens);
    else if (!rc)
        *tokens = one ? ck_estimate_message(h, 0, est) : ck_estimate_history(h, est);
    ck_history_free(h);
    ckjs_paths_dispose(&paths);
    return rc;
}

/* estimateTokens(x, estimator): a string, a message, a message list or a tool list; the
 * estimator is a name or a token-counting function. */
static napi_value estimate_tokens(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (ckjs_get_args(env, info, argv, 2, NULL)) return NULL;
    int est = 0;
    js_counter jc = {env, NULL, 0};
    napi_valuetype type = napi_undefined;
    if (argv[1]) NODE_API_CALL(env, napi_typeof(env, argv[1], &type));
    const char *names[CKJS_MAX_ESTIMATORS];
    int n_names = estimator_names(names);
    if (type == napi_function)
        jc.fn = argv[1];
    else if (ckjs_choice(env, argv[1], "options.estimator", names, n_names, 0, &est))
        return NULL;
    ck_counter counter = {js_count, &jc};
    napi_value x = argv[0];
    bool is_array = false;
    type = napi_undefined;
    if (x) {
        NODE_API_CALL(env, napi_typeof(env, x, &type));
        NODE_API_CALL(env, napi_is_array(env, x, &is_array));
    }
    uint64_t tokens = 0;
    ck_error err;
    memset(&err, 0, sizeof err);
    int rc = CK_OK;
    if (type == napi_string) {
        rc = estimate_string(env, x, 0, (ck_estimator)est, &jc, &tokens);
    } else if (is_array) {
        bool messages = false;
        rc = looks_like_messages(env, x, &messages);
        if (!rc && messages) {
            rc = estimate_messages(env, x, 0, (ck_estimator)est, &jc, &counter, &tokens, &err);
        } else if (!rc) {
            napi_value json;
            if (!(rc = ckjs_json_stringify(env, x, &json)))
                rc = estimate_string(env, json, 1, (ck_estimator)est, &jc, &tokens);
        }
    } else if (type == napi_object) {
        rc = estimate_messages(env, x, 1, (ck_estimator)est, &jc, &counter, &tokens, &err);
    } else {
        return ckjs_throw_type_error(
            env, "x must be a string, a message, a message list or a tool list, not %s",
            x ? ckjs_type_name(env, x) : "undefined");
    }
    if (rc) return ckjs_fail(env, rc, &err);
    napi_value result;
    NODE_API_CALL(env, napi_create_double(env, (double)tokens, &result));
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* Anchors                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* The anchors as a JS object with the five snake_case keys in order; N/A is null. */
static napi_value anchors_to_js(napi_env env, const ck_anchors *anchors) {
    napi_value obj;
    NODE_API_CALL(env, napi_create_object(env, &obj));
    for (int a = 0; a < CK_ANCHOR_COUNT; a++) {
        size_t len = 0;
        const char *text = ck_anchors_get(anchors, (ck_anchor)a, &len);
        napi_value value;
        if (text) {
            NODE_API_CALL(env, napi_create_string_utf8(env, text, len, &value));
        } else {
            NODE_API_CALL(env, napi_get_null(env, &value));
        }
        NODE_API_CALL(env, napi_set_named_property(env, obj, ck_anchor_key((ck_anchor)a), value));
    }
    return obj;
}

static napi_value parse_anchors(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (ckjs_get_args(env, info, argv, 1, NULL)) return NULL;
    napi_valuetype type = napi_undefined;
    if (argv[0]) NODE_API_CALL(env, napi_typeof(env, argv[0], &type));
    if (type != napi_string)
        return ckjs_throw_type_error(env, "text must be a string, not %s",
                                     argv[0] ? ckjs_type_name(env, argv[0]) : "undefined");
    char *text = NULL;
    size_t len = 0;
    int rc = ckjs_dup_string(env, argv[0], &text, &len);
    if (rc) return ckjs_fail(env, rc, NULL);
    ck_anchors *anchors = ck_anchors_parse(text, len);
    free(text);
    if (!anchors) return ckjs_fail(env, CK_ENOMEM, NULL);
    napi_value result = NULL, obj, summary;
    size_t summary_len = 0;
    const char *summary_text = ck_anchors_summary(anchors, &summary_len);
    if (napi_create_object(env, &result) != napi_ok || !(obj = anchors_to_js(env, anchors)) ||
        napi_set_named_property(env, result, "anchors", obj) != napi_ok ||
        napi_create_string_utf8(env, summary_text, summary_len, &summary) != napi_ok ||
        napi_set_named_property(env, result, "summary", summary) != napi_ok) {
        ckjs_throw_last_error(env, "building the parseAnchors result");
        result = NULL;
    }
    ck_anchors_free(anchors);
    return result;
}

/*
 * Reads a JS anchors object into `out`: each key that holds a string is set (N/A text stays
 * N/A, as ck_anchors_set decides); null and missing keys are N/A; other types are CK_ETYPE
 * errors naming "<what>.<key>".
 */
static int anchors_from_js(napi_env env, napi_value obj, const char *what, ck_anchors *out,
                           ck_error *err) {
    napi_valuetype type = napi_undefined;
    if (obj) NODE_API_CALL_RC(env, napi_typeof(env, obj, &type));
    if (type == napi_undefined || type == napi_null) return CK_OK;
    for (int a = 0; a < CK_ANCHOR_COUNT; a++) {
        const char *key = ck_anchor_key((ck_anchor)a);
        napi_value value;
        NODE_API_CALL_RC(env, napi_get_named_property(env, obj, key, &value));
        NODE_API_CALL_RC(env, napi_typeof(env, value, &type));
        if (type == napi_undefined || type == napi_null) continue;
        if (type != napi_string) {
            err->code = CK_ETYPE;
            err->msg = "expected a string or null";
            err->offset = 0;
            err->index = CK_NONE;
            snprintf(err->where, sizeof err->where, "%s.%s", what, key);
            return CK_ETYPE;
        }
        char *text = NULL;
        size_t len = 0;
        int rc = ckjs_dup_string(env, value, &text, &len);
        if (!rc) rc = ck_anchors_set(out, (ck_anchor)a, text, len);
        free(text);
        if (rc) return rc;
    }
    return CK_OK;
}

static napi_value merge_anchors(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (ckjs_get_args(env, info, argv, 2, NULL)) return NULL;
    static const char *const names[2] = {"old", "new"};
    for (int i = 0; i < 2; i++) {
        napi_valuetype type = napi_undefined;
        bool is_array = false;
        if (argv[i]) {
            NODE_API_CALL(env, napi_typeof(env, argv[i], &type));
            NODE_API_CALL(env, napi_is_array(env, argv[i], &is_array));
        }
        if ((type != napi_object && type != napi_null && type != napi_undefined) || is_array)
            return ckjs_throw_type_error(env, "%s must be an anchors object or null, not %s",
                                         names[i], ckjs_type_name(env, argv[i]));
    }
    ck_anchors *older = ck_anchors_new(), *newer = ck_anchors_new(), *merged = NULL;
    ck_error err;
    memset(&err, 0, sizeof err);
    int rc = older && newer ? CK_OK : CK_ENOMEM;
    if (!rc) rc = anchors_from_js(env, argv[0], "old", older, &err);
    if (!rc) rc = anchors_from_js(env, argv[1], "new", newer, &err);
    if (!rc && !(merged = ck_anchors_merge(older, newer))) rc = CK_ENOMEM;
    ck_anchors_free(older);
    ck_anchors_free(newer);
    napi_value result = rc ? ckjs_fail(env, rc, &err) : anchors_to_js(env, merged);
    ck_anchors_free(merged);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* Status codes, version, error classes                                                       */
/* ------------------------------------------------------------------------------------------ */

static int add_status(napi_env env, napi_value table, const char *name, int code,
                      const char *text) {
    napi_value entry;
    NODE_API_CALL_RC(env, napi_create_object(env, &entry));
    if (set_number(env, entry, "code", code) ||
        set_string(env, entry, "text", text, NAPI_AUTO_LENGTH))
        return CKJS_THROWN;
    NODE_API_CALL_RC(env, napi_set_named_property(env, table, name, entry));
    return CK_OK;
}

/* statusCodes: every code of CK_STATUS_LIST, name -> {code, text}, generated from the list
 * itself so that the JS names cannot drift from the core's. */
static napi_value status_table(napi_env env) {
    napi_value table;
    NODE_API_CALL(env, napi_create_object(env, &table));
#define CKJS_STATUS_ENTRY(name, value, text)                                                       \
    if (add_status(env, table, "CK_" #name, value, text)) return NULL;
    CK_STATUS_LIST(CKJS_STATUS_ENTRY)
#undef CKJS_STATUS_ENTRY
    return table;
}

/*
 * _setErrorClasses(ErrorClass, InputErrorClass): index.js hands over the classes that thrown
 * errors should be instances of. Until it does (a bare addon), plain Errors are thrown.
 */
static napi_value set_error_classes(napi_env env, napi_callback_info info) {
    napi_value argv[2];
    if (ckjs_get_args(env, info, argv, 2, NULL)) return NULL;
    for (int i = 0; i < 2; i++) {
        napi_valuetype type = napi_undefined;
        if (argv[i]) NODE_API_CALL(env, napi_typeof(env, argv[i], &type));
        if (type != napi_function)
            return ckjs_throw_type_error(env, "error class %d must be a function", i);
    }
    ckjs_state *state = ckjs_state_get(env);
    if (!state) return ckjs_throw_type_error(env, "addon state is missing");
    napi_ref *slots[2] = {&state->error_class, &state->input_error_class};
    for (int i = 0; i < 2; i++) {
        napi_ref ref;
        NODE_API_CALL(env, napi_create_reference(env, argv[i], 1, &ref));
        if (*slots[i]) NODE_API_CALL(env, napi_delete_reference(env, *slots[i]));
        *slots[i] = ref;
    }
    napi_value undefined;
    NODE_API_CALL(env, napi_get_undefined(env, &undefined));
    return undefined;
}

/* ------------------------------------------------------------------------------------------ */
/* Module                                                                                     */
/* ------------------------------------------------------------------------------------------ */

NAPI_MODULE_INIT() {
    ckjs_state *state = calloc(1, sizeof *state);
    if (!state) {
        NODE_API_CALL(env, napi_throw_error(env, "CK_ENOMEM", "ctxkeel: out of memory"));
        return NULL;
    }
    if (napi_set_instance_data(env, state, state_finalize, NULL) != napi_ok) {
        ckjs_throw_last_error(env, "napi_set_instance_data");
        free(state);
        return NULL;
    }
    /* JSON.stringify is looked up once per instance: tool_use inputs and non-string arguments
     * go through it, and user code could replace the global later. */
    napi_value global, json, stringify, parse;
    NODE_API_CALL(env, napi_get_global(env, &global));
    NODE_API_CALL(env, napi_get_named_property(env, global, "JSON", &json));
    NODE_API_CALL(env, napi_get_named_property(env, json, "stringify", &stringify));
    NODE_API_CALL(env, napi_create_reference(env, stringify, 1, &state->json_stringify));
    NODE_API_CALL(env, napi_get_named_property(env, json, "parse", &parse));
    NODE_API_CALL(env, napi_create_reference(env, parse, 1, &state->json_parse));
    /* The field names the dialects read, made once (values.c looks them up by ck_key). */
    napi_value keys, key;
    NODE_API_CALL(env, napi_create_array_with_length(env, CK_KEY_COUNT, &keys));
    for (uint32_t i = 0; i < CK_KEY_COUNT; i++) {
        NODE_API_CALL(env, napi_create_string_utf8(env, ck_key_name((ck_key)i), NAPI_AUTO_LENGTH,
                                                   &key));
        NODE_API_CALL(env, napi_set_element(env, keys, i, key));
    }
    NODE_API_CALL(env, napi_create_reference(env, keys, 1, &state->keys));

    napi_value version, codes, estimators;
    NODE_API_CALL(env, napi_create_string_utf8(env, ck_version(), NAPI_AUTO_LENGTH, &version));
    if (!(codes = status_table(env)) || !(estimators = estimator_name_list(env))) return NULL;
    const napi_property_descriptor props[] = {
        {"estimateTokens", NULL, estimate_tokens, NULL, NULL, NULL, napi_enumerable, NULL},
        {"checkPairs", NULL, ckjs_check_pairs, NULL, NULL, NULL, napi_enumerable, NULL},
        {"repairPairs", NULL, ckjs_repair_pairs, NULL, NULL, NULL, napi_enumerable, NULL},
        {"parseAnchors", NULL, parse_anchors, NULL, NULL, NULL, napi_enumerable, NULL},
        {"mergeAnchors", NULL, merge_anchors, NULL, NULL, NULL, napi_enumerable, NULL},
        {"_setErrorClasses", NULL, set_error_classes, NULL, NULL, NULL, napi_default, NULL},
        {"version", NULL, NULL, NULL, NULL, version, napi_enumerable, NULL},
        {"statusCodes", NULL, NULL, NULL, NULL, codes, napi_enumerable, NULL},
        {"_estimatorNames", NULL, NULL, NULL, NULL, estimators, napi_default, NULL},
    };
    NODE_API_CALL(env, napi_define_properties(env, exports, sizeof props / sizeof props[0], props));
    if (ckjs_compactor_init(env, exports) || ckjs_http_init(env, exports) ||
        ckjs_replay_init(env, exports))
        return NULL;
    return exports;
}
