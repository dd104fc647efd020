/*
 * http.c - the HttpSummarizer class: a ck_http_summarizer wrapped in a JS object. Each
 * summary is one transfer on the libuv thread pool (napi_create_async_work) that settles a
 * promise, so the event loop never waits for the model.
 *
 * node/index.js drives it:
 *
 *     const { promise, id } = native.start(system, prompt, maxTokens);
 *     signal.addEventListener('abort', () => native.cancel(id));
 *     return await promise;
 *
 * A call owns copies of its inputs and a `volatile int` that cancel() sets on the main thread
 * and the core polls on the pool thread (it aborts within about 100 ms). One core summarizer
 * serves any number of calls at once: it is read-only once made. Each call holds a reference
 * to the HttpSummarizer object, so the object (and the core summarizer it owns) outlives every
 * transfer; whichever of the object's finalizer and the last call's completion comes last
 * frees the core summarizer.
 *
 * The API key is never in this file's memory: the core reads the environment variable when it
 * builds the request, and blanks the key out of any error text a provider echoes it in.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_util.h"

/* See compactor.c: a method only unwraps objects of its own class. */
static const napi_type_tag HTTP_TAG = {0x63746b65656c2d68ull, 0x7474702d73756df3ull};

/* The largest integer a JS number holds exactly. */
#define MAX_SAFE 9007199254740991.0

/* The bounds the core accepts (csrc/src/http.c); node/index.js states the same ones. */
#define MAX_TIMEOUT 86400.0
#define MAX_BACKOFF 3600.0
#define MAX_RETRIES 20

typedef struct http_call http_call;

typedef struct ckjs_http {
    ck_http_summarizer *ck; /* NULL once freed */
    http_call *calls;       /* the calls in flight; only the main thread touches the list */
    double next_id;         /* ids are never reused, so a late cancel() cannot hit a new call */
    uint64_t usage_prompt, usage_completion;
    int has_usage; /* a call has succeeded */
    int reasoning; /* requests send max_completion_tokens and no temperature */
    int closed;    /* close() was called */
    int wrapped;   /* the JS object's finalizer has not run yet */
} ckjs_http;

struct http_call {
    ckjs_http *owner;
    http_call *next;
    double id;
    ck_http_summarizer *ck; /* owner->ck, read by execute without touching the owner */
    napi_async_work work;
    napi_deferred deferred;
    napi_ref owner_ref; /* keeps the HttpSummarizer object alive until complete */
    volatile int cancel;
    ck_summary_request req; /* points into `system` and `prompt` */
    char *system, *prompt;
    /* Written by execute, read by complete. */
    int rc;
    char *reply, *why;
    size_t reply_len;
    uint64_t prompt_tokens, completion_tokens;
};

static const char MSG_CLOSED[] = "HttpSummarizer is closed";

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static napi_value throw_code(napi_env env, int code, const char *msg) {
    ck_error err;
    memset(&err, 0, sizeof err);
    err.code = code;
    err.msg = msg;
    err.index = CK_NONE;
    return ckjs_throw_status(env, &err);
}

static ckjs_http *unwrap_http(napi_env env, napi_value obj) {
    napi_valuetype type = napi_undefined;
    bool tagged = false;
    void *data = NULL;
    if (obj) NODE_API_CALL(env, napi_typeof(env, obj, &type));
    if (type == napi_object) NODE_API_CALL(env, napi_check_object_type_tag(env, obj, &HTTP_TAG,
                                                                           &tagged));
    if (!tagged) {
        ckjs_throw_type_error(env, "Illegal invocation: this is not an HttpSummarizer");
        return NULL;
    }
    NODE_API_CALL(env, napi_unwrap(env, obj, &data));
    return data;
}

static int set_value(napi_env env, napi_value obj, const char *key, napi_value value) {
    if (!value) return CKJS_THROWN;
    NODE_API_CALL_RC(env, napi_set_named_property(env, obj, key, value));
    return CK_OK;
}

static napi_value number_value(napi_env env, double number) {
    napi_value value;
    NODE_API_CALL(env, napi_create_double(env, number, &value));
    return value;
}

static napi_value bool_value(napi_env env, int yes) {
    napi_value value;
    NODE_API_CALL(env, napi_get_boolean(env, yes != 0, &value));
    return value;
}

static napi_value undefined_value(napi_env env) {
    napi_value value;
    NODE_API_CALL(env, napi_get_undefined(env, &value));
    return value;
}

/* The type of `value` (undefined for a missing argument), null folded into undefined. */
static int type_of(napi_env env, napi_value value, napi_valuetype *type) {
    *type = napi_undefined;
    if (value) NODE_API_CALL_RC(env, napi_typeof(env, value, type));
    if (*type == napi_null) *type = napi_undefined;
    return CK_OK;
}

/* A malloc'd copy of a string argument without NUL characters (the core takes C strings).
 * Returns 0, or -1 with a TypeError or RangeError naming `what` pending. */
static int c_string(napi_env env, napi_value value, const char *what, char **out) {
    napi_valuetype type;
    size_t len = 0;
    *out = NULL;
    if (type_of(env, value, &type)) return -1;
    if (type != napi_string) {
        ckjs_throw_type_error(env, "%s must be a string, not %s", what,
                              value ? ckjs_type_name(env, value) : "undefined");
        return -1;
    }
    int rc = ckjs_dup_string(env, value, out, &len);
    if (rc) {
        ckjs_fail(env, rc, NULL);
        return -1;
    }
    if (strlen(*out) != len) {
        free(*out);
        *out = NULL;
        ckjs_throw_range_error(env, "%s must not contain NUL characters", what);
        return -1;
    }
    return 0;
}

/* A number option in (0, max]; absent keeps *out. Returns 0 or -1 with an error pending. */
static int seconds_option(napi_env env, napi_value obj, const char *key, double max, double *out) {
    napi_value value;
    napi_valuetype type;
    NODE_API_CALL_BASE(env, napi_get_named_property(env, obj, key, &value), -1);
    if (type_of(env, value, &type)) return -1;
    if (type == napi_undefined) return 0;
    if (type != napi_number) {
        ckjs_throw_type_error(env, "options.%s must be a number, not %s", key,
                              ckjs_type_name(env, value));
        return -1;
    }
    double v = 0;
    NODE_API_CALL_BASE(env, napi_get_value_double(env, value, &v), -1);
    if (!(v > 0 && v <= max)) {
        ckjs_throw_range_error(env, "options.%s must be a number of seconds in (0, %.0f]", key,
                               max);
        return -1;
    }
    *out = v;
    return 0;
}

/* True for the characters of an HTTP header name (RFC 9110 "token"). */
static int is_token_char(char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Lifetimes                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Frees the core summarizer once it is closed and no transfer uses it. */
static void core_free_if_idle(ckjs_http *self) {
    if (self->closed && !self->calls && self->ck) {
        ck_http_summarizer_free(self->ck);
        self->ck = NULL;
    }
}

/* Frees the struct once neither its JS object nor a call refers to it. */
static void http_free_if_unused(ckjs_http *self) {
    if (self->wrapped || self->calls) return;
    ck_http_summarizer_free(self->ck);
    free(self);
}

static void http_finalize(napi_env env, void *data, void *hint) {
    (void)env;
    (void)hint;
    ckjs_http *self = data;
    self->wrapped = 0;
    http_free_if_unused(self);
}

static void call_unlink(http_call *call) {
    ckjs_http *owner = call->owner;
    if (!owner) return;
    for (http_call **p = &owner->calls; *p; p = &(*p)->next) {
        if (*p == call) {
            *p = call->next;
            break;
        }
    }
    call->owner = NULL;
    call->next = NULL;
}

static void call_free(http_call *call) {
    free(call->system);
    free(call->prompt);
    ck_free(call->reply);
    ck_free(call->why);
    free(call);
}

/* ------------------------------------------------------------------------------------------ */
/* new HttpSummarizer(options)                                                                */
/* ------------------------------------------------------------------------------------------ */

/* The option a core error names ("base_url"...), under the name the constructor takes. */
static const char *option_name(const char *where) {
    static const char *const names[][2] = {
        {"base_url", "options.baseUrl"}, {"model", "options.model"},
        {"api", "options.api"},          {"timeout", "options.timeout"},
        {"backoff", "options.backoff"},  {"connect_timeout", "options.timeout"},
        {"extra_body", "options.extraBody"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(where, names[i][0]) == 0) return names[i][1];
    return strncmp(where, "headers", 7) == 0 ? "options.headers" : where;
}

/* Reads options.headers (an object of name -> value) into a NULL-terminated list of
 * "Name: value" lines. Returns 0 (with *out NULL when there are none) or -1 with an error
 * pending. */
static int read_headers(napi_env env, napi_value obj, char ***out) {
    napi_value headers, keys;
    napi_valuetype type;
    bool is_array = false;
    uint32_t n = 0;
    *out = NULL;
    NODE_API_CALL_BASE(env, napi_get_named_property(env, obj, "headers", &headers), -1);
    if (type_of(env, headers, &type)) return -1;
    if (type == napi_undefined) return 0;
    NODE_API_CALL_BASE(env, napi_is_array(env, headers, &is_array), -1);
    if (type != napi_object || is_array) {
        ckjs_throw_type_error(env, "options.headers must be an object of strings, not %s",
                              ckjs_type_name(env, headers));
        return -1;
    }
    NODE_API_CALL_BASE(env, napi_get_property_names(env, headers, &keys), -1);
    NODE_API_CALL_BASE(env, napi_get_array_length(env, keys, &n), -1);
    char **lines = calloc((size_t)n + 1, sizeof *lines);
    if (!lines) {
        ckjs_fail(env, CK_ENOMEM, NULL);
        return -1;
    }
    int failed = 0;
    for (uint32_t i = 0; i < n && !failed; i++) {
        napi_value key, value;
        char *name = NULL, *text = NULL, what[96];
        failed = napi_get_element(env, keys, i, &key) != napi_ok ||
                 napi_get_property(env, headers, key, &value) != napi_ok;
        if (failed) {
            ckjs_throw_last_error(env, "reading options.headers");
            break;
        }
        failed = c_string(env, key, "an options.headers name", &name);
        if (!failed) {
            snprintf(what, sizeof what, "options.headers[\"%.60s\"]", name);
            int bad = !name[0];
            for (const char *c = name; *c && !bad; c++) bad = !is_token_char(*c);
            if (bad) {
                ckjs_throw_range_error(env, "%s: a header name is letters, digits and "
                                            "!#$%%&'*+-.^_`|~", what);
                failed = 1;
            }
        }
        if (!failed) failed = c_string(env, value, what, &text);
        if (!failed && strpbrk(text, "\r\n")) {
            ckjs_throw_range_error(env, "%s must be one line", what);
            failed = 1;
        }
        if (!failed) {
            size_t size = strlen(name) + strlen(text) + 3;
            if (!(lines[i] = malloc(size))) {
                ckjs_fail(env, CK_ENOMEM, NULL);
                failed = 1;
            } else {
                snprintf(lines[i], size, "%s: %s", name, text);
            }
        }
        free(name);
        free(text);
    }
    if (failed) {
        for (uint32_t i = 0; i < n; i++) free(lines[i]);
        free(lines);
        return -1;
    }
    if (n == 0) free(lines);
    else *out = lines;
    return 0;
}

/* The string options: baseUrl and model are required; apiKeyEnv may be absent or null. */
static int read_strings(napi_env env, napi_value obj, char **base_url, char **model,
                        char **key_env, int *has_key_env) {
    napi_value value;
    napi_valuetype type;
    NODE_API_CALL_BASE(env, napi_get_named_property(env, obj, "baseUrl", &value), -1);
    if (c_string(env, value, "options.baseUrl", base_url)) return -1;
    if (strncmp(*base_url, "http://", 7) != 0 && strncmp(*base_url, "https://", 8) != 0) {
        ckjs_throw_range_error(env, "options.baseUrl must be an http:// or https:// URL");
        return -1;
    }
    NODE_API_CALL_BASE(env, napi_get_named_property(env, obj, "model", &value), -1);
    if (c_string(env, value, "options.model", model)) return -1;
    if (!(*model)[0]) {
        ckjs_throw_range_error(env, "options.model must not be empty");
        return -1;
    }
    NODE_API_CALL_BASE(env, napi_get_named_property(env, obj, "apiKeyEnv", &value), -1);
    if (type_of(env, value, &type)) return -1;
    *has_key_env = type != napi_undefined;
    if (*has_key_env && c_string(env, value, "options.apiKeyEnv", key_env)) return -1;
    if (*has_key_env && strchr(*key_env, '=')) {
        ckjs_throw_range_error(env, "options.apiKeyEnv must be the name of a variable");
        return -1;
    }
    return 0;
}

/* Reads every option into `o`; the strings it points to are returned for the caller to free.
 * Returns 0 or -1 with an error pending. */
static int read_http_options(napi_env env, napi_value obj, ck_http_options *o, char **strings,
                             char ***headers) {
    static const char *const apis[2] = {"openai", "anthropic"};
    napi_value value;
    napi_valuetype type;
    int has_key_env = 0, api = 0;
    if (read_strings(env, obj, &strings[0], &strings[1], &strings[2], &has_key_env)) return -1;
    o->base_url = strings[0];
    o->model = strings[1];
    /* NULL asks the core for the API's usual variable; "" (the caller's choice) for no key. */
    o->api_key_env = has_key_env ? strings[2] : NULL;
    NODE_API_CALL_BASE(env, napi_get_named_property(env, obj, "api", &value), -1);
    if (type_of(env, value, &type)) return -1;
    if (ckjs_choice(env, type == napi_undefined ? NULL : value, "options.api", apis, 2, 0, &api))
        return -1;
    o->api = api ? CK_HTTP_ANTHROPIC : CK_HTTP_OPENAI;
    o->timeout = 60;
    o->backoff = 0.5;
    if (seconds_option(env, obj, "timeout", MAX_TIMEOUT, &o->timeout) ||
        seconds_option(env, obj, "backoff", MAX_BACKOFF, &o->backoff))
        return -1;
    NODE_API_CALL_BASE(env, napi_get_named_property(env, obj, "maxRetries", &value), -1);
    if (type_of(env, value, &type)) return -1;
    double retries = 3;
    if (type != napi_undefined) {
        if (type != napi_number) {
            ckjs_throw_type_error(env, "options.maxRetries must be a number, not %s",
                                  ckjs_type_name(env, value));
            return -1;
        }
        NODE_API_CALL_BASE(env, napi_get_value_double(env, value, &retries), -1);
        if (!isfinite(retries) || floor(retries) != retries || retries < 0 ||
            retries > MAX_RETRIES) {
            ckjs_throw_range_error(env, "options.maxRetries must be an integer from 0 to %d",
                                   MAX_RETRIES);
            return -1;
        }
    }
    /* The core reads 0 as "the default" and a negative count as "no retries". */
    o->max_retries = retries == 0 ? -1 : (int)retries;
    if (read_headers(env, obj, headers)) return -1;
    o->headers = (const char *const *)*headers;
    /* reasoningModel: true, false, or absent/null for the core's choice by the model name. */
    NODE_API_CALL_BASE(env, napi_get_named_property(env, obj, "reasoningModel", &value), -1);
    if (type_of(env, value, &type)) return -1;
    if (type != napi_undefined && type != napi_boolean) {
        ckjs_throw_type_error(env, "options.reasoningModel must be a boolean or null, not %s",
                              ckjs_type_name(env, value));
        return -1;
    }
    bool yes = false;
    if (type == napi_boolean) NODE_API_CALL_BASE(env, napi_get_value_bool(env, value, &yes), -1);
    o->reasoning_model = type == napi_undefined ? 0 : yes ? 1 : -1;
    /* extraBody arrives as JSON text (index.js stringifies it); the core checks it. */
    NODE_API_CALL_BASE(env, napi_get_named_property(env, obj, "extraBody", &value), -1);
    if (type_of(env, value, &type)) return -1;
    if (type != napi_undefined) {
        if (c_string(env, value, "options.extraBody", &strings[3])) return -1;
        o->extra_body = strings[3];
    }
    return 0;
}

static napi_value http_construct(napi_env env, napi_callback_info info) {
    napi_value this_arg, options;
    if (ckjs_construct_args(env, info, "HttpSummarizer", &this_arg, &options)) return NULL;
    ck_http_options o;
    memset(&o, 0, sizeof o);
    char *strings[4] = {NULL, NULL, NULL, NULL}, **headers = NULL;
    int failed = read_http_options(env, options, &o, strings, &headers);
    ck_error err;
    memset(&err, 0, sizeof err);
    ck_http_summarizer *ck = failed ? NULL : ck_http_summarizer_new(&o, &err);
    /* What the core chose, for the reasoningModel getter; o's strings are freed next. */
    int reasoning = !failed && o.api == CK_HTTP_OPENAI &&
                    (o.reasoning_model > 0 ||
                     (o.reasoning_model == 0 && ck_http_reasoning_model(o.model)));
    for (size_t i = 0; headers && headers[i]; i++) free(headers[i]);
    free(headers);
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) free(strings[i]);
    if (failed) return NULL;
    if (!ck) {
        if (err.where[0]) {
            char where[sizeof err.where];
            snprintf(where, sizeof where, "%s", option_name(err.where));
            snprintf(err.where, sizeof err.where, "%s", where);
        }
        return ckjs_fail(env, err.code, &err);
    }
    ckjs_http *self = calloc(1, sizeof *self);
    if (!self) {
        ck_http_summarizer_free(ck);
        return ckjs_fail(env, CK_ENOMEM, NULL);
    }
    self->ck = ck;
    self->next_id = 1;
    self->reasoning = reasoning;
    if (napi_wrap(env, this_arg, self, http_finalize, NULL, NULL) != napi_ok) {
        ckjs_throw_last_error(env, "napi_wrap");
        ck_http_summarizer_free(ck);
        free(self);
        return NULL;
    }
    self->wrapped = 1;
    NODE_API_CALL(env, napi_type_tag_object(env, this_arg, &HTTP_TAG));
    return this_arg;
}

/* ------------------------------------------------------------------------------------------ */
/* The transfer                                                                               */
/* ------------------------------------------------------------------------------------------ */

/*
 * Runs on a thread-pool thread. It must not call any napi_* function nor touch the JS heap:
 * it calls only the core, on the copies that start() made, and leaves the outcome in the call
 * for call_complete to turn into JS values on the main thread.
 */
static void call_execute(napi_env env, void *data) {
    (void)env;
    http_call *call = data;
    call->rc = ck_http_summarize(call->ck, &call->req, &call->cancel, &call->reply,
                                 &call->reply_len, &call->prompt_tokens, &call->completion_tokens,
                                 &call->why);
}

/* The rejection value for a failed call: a ctxkeel Error (the class index.js registered, or
 * a plain Error for a bare addon) whose message is the core's one-line reason and whose code
 * is the CK_E... name. NULL with an exception pending on failure. */
static napi_value call_error(napi_env env, int code, const char *why) {
    const char *text = why && why[0] ? why : ck_strerror(code);
    napi_value message, code_value, error, ctor = NULL;
    ckjs_state *state = ckjs_state_get(env);
    NODE_API_CALL(env, napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &message));
    NODE_API_CALL(env,
                  napi_create_string_utf8(env, ck_err_name(code), NAPI_AUTO_LENGTH, &code_value));
    if (state && state->error_class)
        NODE_API_CALL(env, napi_get_reference_value(env, state->error_class, &ctor));
    if (ctor)
        NODE_API_CALL(env, napi_new_instance(env, ctor, 1, &message, &error));
    else
        NODE_API_CALL(env, napi_create_error(env, code_value, message, &error));
    NODE_API_CALL(env, napi_set_named_property(env, error, "code", code_value));
    return error;
}

/* The resolution value of a successful call (and lastUsage is updated), or NULL with an
 * exception pending. */
static napi_value call_reply(napi_env env, http_call *call, ckjs_http *owner) {
    napi_value text = ckjs_string(env, call->reply, call->reply_len);
    if (text && owner) {
        owner->has_usage = 1;
        owner->usage_prompt = call->prompt_tokens;
        owner->usage_completion = call->completion_tokens;
    }
    return text;
}

/*
 * Runs on the main thread when the transfer is over (or was cancelled before it began). It
 * always settles the promise, deletes the work item and frees the call, whatever fails on the
 * way; it calls no user code. A value that cannot be built becomes the rejection: the pending
 * exception is taken and the promise rejects with it.
 */
static void call_complete(napi_env env, napi_status status, void *data) {
    http_call *call = data;
    ckjs_http *owner = call->owner;
    call_unlink(call);
    int ok = status == napi_ok && call->rc == CK_OK;
    napi_value value = NULL;
    if (ok) {
        value = call_reply(env, call, owner);
    } else {
        int code = status == napi_cancelled ? CK_ECANCELED : call->rc;
        if (status != napi_ok && status != napi_cancelled) code = CK_EIO;
        value = call_error(env, code, status == napi_ok ? call->why : NULL);
    }
    bool pending = false;
    if (!value) {
        ok = 0;
        if (napi_is_exception_pending(env, &pending) != napi_ok || !pending ||
            napi_get_and_clear_last_exception(env, &value) != napi_ok)
            value = NULL;
    }
    if (!value && napi_get_undefined(env, &value) != napi_ok) value = NULL;
    napi_status settled = napi_generic_failure;
    if (value) {
        settled = ok ? napi_resolve_deferred(env, call->deferred, value)
                     : napi_reject_deferred(env, call->deferred, value);
    }
    /* A promise that cannot be settled (the environment is being torn down) has no one left
     * to tell: throwing here would be a fatal exception. The cleanup happens regardless. */
    if (settled != napi_ok) call->deferred = NULL;
    if (napi_delete_async_work(env, call->work) != napi_ok) call->work = NULL;
    if (call->owner_ref && napi_delete_reference(env, call->owner_ref) != napi_ok)
        call->owner_ref = NULL;
    if (owner) {
        core_free_if_idle(owner);
        http_free_if_unused(owner);
    }
    call_free(call);
}

/* Undoes a start() that failed half-way, with an exception pending that start() will throw.
 * The promise, if made, is never handed out; it is resolved (rejecting it would be reported as
 * an unhandled rejection) only to release the deferred. The call is unlinked and freed. */
static void call_abandon(napi_env env, http_call *call) {
    napi_value reason = NULL, undefined;
    bool pending = false;
    if (call->deferred) {
        /* Settling is refused while an exception is pending: set it aside meanwhile. */
        if (napi_is_exception_pending(env, &pending) == napi_ok && pending &&
            napi_get_and_clear_last_exception(env, &reason) != napi_ok)
            reason = NULL;
        if (napi_get_undefined(env, &undefined) == napi_ok &&
            napi_resolve_deferred(env, call->deferred, undefined) != napi_ok)
            call->deferred = NULL;
        if (reason && napi_throw(env, reason) != napi_ok) reason = NULL;
    }
    if (call->work && napi_delete_async_work(env, call->work) != napi_ok) call->work = NULL;
    if (call->owner_ref && napi_delete_reference(env, call->owner_ref) != napi_ok)
        call->owner_ref = NULL;
    call_unlink(call);
    call_free(call);
}

/*
 * start(system, prompt, maxTokens) -> {promise, id}: queues one transfer. The promise resolves
 * with the reply text, or rejects with an Error whose code is CK_ESUMMARY, CK_ETIMEDOUT,
 * CK_EIO, CK_ECANCELED or CK_ENOMEM and whose message is the core's reason. cancel(id) aborts.
 */
static napi_value http_start(napi_env env, napi_callback_info info) {
    napi_value argv[3], this_arg, promise, resource, result;
    if (ckjs_get_args(env, info, argv, 3, &this_arg)) return NULL;
    ckjs_http *self = unwrap_http(env, this_arg);
    if (!self) return NULL;
    if (self->closed || !self->ck) return throw_code(env, CK_ECLOSED, MSG_CLOSED);
    napi_valuetype type;
    double max_tokens = 0;
    if (type_of(env, argv[2], &type)) return NULL;
    if (type != napi_number)
        return ckjs_throw_type_error(env, "maxTokens must be a number, not %s",
                                     argv[2] ? ckjs_type_name(env, argv[2]) : "undefined");
    NODE_API_CALL(env, napi_get_value_double(env, argv[2], &max_tokens));
    if (!isfinite(max_tokens) || floor(max_tokens) != max_tokens || max_tokens < 1 ||
        max_tokens > MAX_SAFE)
        return ckjs_throw_range_error(env, "maxTokens must be a positive integer");
    http_call *call = calloc(1, sizeof *call);
    if (!call) return ckjs_fail(env, CK_ENOMEM, NULL);
    size_t system_len = 0, prompt_len = 0;
    int rc = CK_OK;
    for (int i = 0; i < 2 && !rc; i++) {
        if (type_of(env, argv[i], &type)) {
            rc = CKJS_THROWN;
        } else if (type != napi_string) {
            ckjs_throw_type_error(env, "%s must be a string, not %s", i ? "prompt" : "system",
                                  argv[i] ? ckjs_type_name(env, argv[i]) : "undefined");
            rc = CKJS_THROWN;
        } else {
            rc = ckjs_dup_string(env, argv[i], i ? &call->prompt : &call->system,
                                 i ? &prompt_len : &system_len);
        }
    }
    if (rc) {
        call_free(call);
        return ckjs_fail(env, rc, NULL);
    }
    call->req.system = call->system;
    call->req.system_len = system_len;
    call->req.prompt = call->prompt;
    call->req.prompt_len = prompt_len;
    call->req.max_tokens = (uint64_t)max_tokens;
    call->req.tier = CK_TIER_SOFT;
    call->rc = CK_ECANCELED; /* what complete reports if execute never runs */
    call->ck = self->ck;
    call->id = self->next_id++;
    call->owner = self;
    call->next = self->calls;
    self->calls = call;
    if (napi_create_reference(env, this_arg, 1, &call->owner_ref) != napi_ok ||
        napi_create_promise(env, &call->deferred, &promise) != napi_ok ||
        napi_create_string_utf8(env, "ctxkeel.HttpSummarizer.summarize", NAPI_AUTO_LENGTH,
                                &resource) != napi_ok ||
        napi_create_async_work(env, NULL, resource, call_execute, call_complete, call,
                               &call->work) != napi_ok ||
        napi_create_object(env, &result) != napi_ok ||
        set_value(env, result, "promise", promise) ||
        set_value(env, result, "id", number_value(env, call->id)) ||
        napi_queue_async_work(env, call->work) != napi_ok) {
        ckjs_throw_last_error(env, "starting a summary");
        call_abandon(env, call);
        return NULL;
    }
    return result;
}

/* cancel(id) -> true when the call was still running: its transfer stops within about 100 ms
 * and its promise rejects with CK_ECANCELED. A finished or unknown id is ignored. */
static napi_value http_cancel(napi_env env, napi_callback_info info) {
    napi_value argv[1], this_arg;
    if (ckjs_get_args(env, info, argv, 1, &this_arg)) return NULL;
    ckjs_http *self = unwrap_http(env, this_arg);
    if (!self) return NULL;
    napi_valuetype type;
    double id = 0;
    if (type_of(env, argv[0], &type)) return NULL;
    if (type != napi_number)
        return ckjs_throw_type_error(env, "id must be a number, not %s",
                                     argv[0] ? ckjs_type_name(env, argv[0]) : "undefined");
    NODE_API_CALL(env, napi_get_value_double(env, argv[0], &id));
    for (http_call *call = self->calls; call; call = call->next) {
        if (call->id == id) {
            call->cancel = 1;
            return bool_value(env, 1);
        }
    }
    return bool_value(env, 0);
}

/* close(): cancels the transfers in flight and frees the core summarizer once they are over;
 * later start() calls throw CK_ECLOSED. Safe to call twice. */
static napi_value http_close(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_http *self = unwrap_http(env, this_arg);
    if (!self) return NULL;
    self->closed = 1;
    for (http_call *call = self->calls; call; call = call->next) call->cancel = 1;
    core_free_if_idle(self);
    return undefined_value(env);
}

static napi_value http_closed(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_http *self = unwrap_http(env, this_arg);
    return self ? bool_value(env, self->closed) : NULL;
}

/* pending: the number of transfers in flight. */
static napi_value http_pending(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_http *self = unwrap_http(env, this_arg);
    if (!self) return NULL;
    double n = 0;
    for (http_call *call = self->calls; call; call = call->next) n++;
    return number_value(env, n);
}

/* lastUsage: {promptTokens, completionTokens} of the last successful call (0 where the
 * provider reported none), or null before the first. */
static napi_value http_last_usage(napi_env env, napi_callback_info info) {
    napi_value this_arg, obj;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_http *self = unwrap_http(env, this_arg);
    if (!self) return NULL;
    if (!self->has_usage) {
        NODE_API_CALL(env, napi_get_null(env, &obj));
        return obj;
    }
    NODE_API_CALL(env, napi_create_object(env, &obj));
    if (set_value(env, obj, "promptTokens", number_value(env, (double)self->usage_prompt)) ||
        set_value(env, obj, "completionTokens",
                  number_value(env, (double)self->usage_completion)))
        return NULL;
    return obj;
}

/* reasoningModel: whether requests send max_completion_tokens and no temperature. */
static napi_value http_reasoning_model(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_http *self = unwrap_http(env, this_arg);
    return self ? bool_value(env, self->reasoning) : NULL;
}

/* usagePromptTokens(json) -> number: the whole prompt's tokens of a provider's usage object
 * given as JSON text (ck_usage_prompt_tokens(); the shapes are the core's). Throws the core's
 * CK_EINVAL naming the field, or CK_ESYNTAX. */
static napi_value usage_prompt_tokens(napi_env env, napi_callback_info info) {
    napi_value argv[1];
    if (ckjs_get_args(env, info, argv, 1, NULL)) return NULL;
    napi_valuetype type;
    if (type_of(env, argv[0], &type)) return NULL;
    if (type != napi_string)
        return ckjs_throw_type_error(env, "usage must be a string of JSON, not %s",
                                     argv[0] ? ckjs_type_name(env, argv[0]) : "undefined");
    char *text = NULL;
    size_t len = 0;
    int rc = ckjs_dup_string(env, argv[0], &text, &len);
    if (rc) return ckjs_fail(env, rc, NULL);
    uint64_t tokens = 0;
    ck_error err;
    rc = ck_usage_prompt_tokens(text, len, &tokens, &err);
    free(text);
    if (rc != CK_OK) return ckjs_fail(env, rc, &err);
    return number_value(env, (double)tokens);
}

/* ------------------------------------------------------------------------------------------ */
/* Module setup                                                                               */
/* ------------------------------------------------------------------------------------------ */

#define METHOD(name, fn) {name, NULL, fn, NULL, NULL, NULL, napi_default_method, NULL}
#define GETTER(name, fn) {name, NULL, NULL, fn, NULL, NULL, napi_configurable, NULL}

int ckjs_http_init(napi_env env, napi_value exports) {
    const napi_property_descriptor props[] = {
        METHOD("start", http_start),         METHOD("cancel", http_cancel),
        METHOD("close", http_close),         GETTER("closed", http_closed),
        GETTER("pending", http_pending),     GETTER("lastUsage", http_last_usage),
        GETTER("reasoningModel", http_reasoning_model),
    };
    napi_value cls;
    NODE_API_CALL_RC(env, napi_define_class(env, "HttpSummarizer", NAPI_AUTO_LENGTH,
                                            http_construct, NULL, sizeof props / sizeof props[0],
                                            props, &cls));
    NODE_API_CALL_RC(env, napi_set_named_property(env, exports, "HttpSummarizer", cls));
    napi_value fn;
    NODE_API_CALL_RC(env, napi_create_function(env, "usagePromptTokens", NAPI_AUTO_LENGTH,
                                               usage_prompt_tokens, NULL, &fn));
    NODE_API_CALL_RC(env, napi_set_named_property(env, exports, "usagePromptTokens", fn));
    return CK_OK;
}
