/*
 * host.c - the host's own callbacks as the core calls them: an evidence backend (a JS object
 * with put(key, text) and get(key)) and a token counter (a JS function of a string).
 *
 * The core calls them synchronously, from inside its own functions. A compactor answers them
 * in one of two ways, chosen per call into the core (a ckjs_host_call):
 *
 *   - on the main thread, for the ops that a compactor without a backend runs at once: the
 *     core runs inside the method's own napi callback, and each callback calls the JS
 *     function at once;
 *   - on a libuv worker thread, for every op of a compactor with a backend (whose methods may
 *     return Promises) and for a compaction's ops without one (compactor.c, op_threaded()):
 *     the core runs in napi_async_work, and each callback posts its request to the main thread
 *     through a napi_threadsafe_function, then waits on a condition variable until the JS
 *     value, or the settlement of the Promise it returned, has been turned into C data. The
 *     worker never touches a JS value; the main thread never touches the core during a call.
 *
 * A callback that fails does not unwind the core: put and get report CK_EIO with a short
 * reason, which the core turns into a fail-open note or a read error naming the key, and a
 * counter that fails answers UINT64_MAX (the core then estimates) while the call remembers
 * the error, so the method can fail with it once the core has returned.
 *
 * Only native Promises are waited for, and for backendTimeout seconds at most (the core's
 * ck_backend_timeout(), 10 s by default), or until the compaction's AbortSignal fires
 * (ckjs_host_cancel()): then the worker stops waiting, the put or get fails like one that
 * threw ("backend timed out"), and the backend is not called again during that call into the
 * core, so a backend that never answers delays one operation by one timeout and leaves the
 * compactor free afterwards. A request the worker stopped waiting for is "abandoned": it lives
 * on the heap and holds its call, and whichever of its settlement callbacks runs later frees
 * it (a Promise that never settles keeps those few bytes). When the main thread can no longer
 * run JS (a Worker being terminated), the waiting worker notices through a periodic probe and
 * gives up as well, so that the termination can finish.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "napi_util.h"

/* The largest integer a JS number holds exactly. */
#define MAX_SAFE 9007199254740991.0

/* How long a worker waits for an answer before it checks that the main thread can still run
 * JS: a worker_threads Worker being terminated cannot, and a Promise pending there would
 * never settle, leaving the termination waiting for this work forever. */
#define PROBE_NS (200ull * 1000 * 1000)

struct ckjs_host {
    napi_ref receiver;           /* the backend object, or NULL */
    napi_ref counter;            /* the token-counting function, or NULL */
    ck_evidence_backend backend; /* what the core calls; ctx is this struct */
    ckjs_host_call *active;      /* the call whose callbacks are being answered, or NULL */
    double timeout;              /* seconds a put or get may take (backendTimeout) */
};

struct ckjs_host_call {
    ckjs_host *host;
    napi_threadsafe_function tsfn; /* NULL: the callbacks run on the calling thread */
    napi_env env;                  /* the main thread's env (used when tsfn is NULL) */
    uv_mutex_t lock;               /* guards `done` of the request in flight, and the next two */
    uv_cond_t cond;
    int probing;            /* a probe is queued (see ask()); the probe frees an ended call */
    int stopped;            /* the main thread cannot run JS any more: stop waiting for answers */
    int ended;              /* ckjs_host_call_end() ran while a probe was queued */
    int count_failed;       /* the counter failed once: it is not called again */
    napi_ref count_error;   /* what it threw (or the TypeError/RangeError for its answer) */
    napi_ref backend_error; /* what put or get threw or rejected with, last */
    double timeout;         /* the host's, when the call started */
    int cancelled;          /* the operation's AbortSignal fired: stop waiting for the backend */
    int hung;               /* a put or get timed out: the backend is not called again */
    size_t abandoned;       /* requests the worker stopped waiting for, not settled yet */
};

enum { REQ_COUNT, REQ_PUT, REQ_GET };

/* One callback's request and its answer. It is made by the core's thread, which waits for
 * `done` and frees it, unless it stopped waiting (`abandoned`): the main thread frees it then. */
typedef struct host_request {
    ckjs_host_call *call;
    int kind;
    const char *key; /* put, get: NUL-terminated */
    const char *data;
    size_t len;
    /* The answer, written on the main thread. */
    int done;
    int rc;       /* CK_OK or CK_EIO */
    char why[96]; /* the reason, when rc is CK_EIO */
    char *out;    /* get: the text (ck_malloc), or NULL for "nothing stored" */
    size_t out_len;
    uint64_t tokens; /* count: the answer, or UINT64_MAX */
    int abandoned;   /* the worker stopped waiting (under call->lock): see answer() */
} host_request;

/* ------------------------------------------------------------------------------------------ */
/* Host objects                                                                               */
/* ------------------------------------------------------------------------------------------ */

static int host_put(void *ctx, const char *key, const char *data, size_t len, ck_error *err);
static int host_get(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err);
static uint64_t host_count(void *ctx, const char *text, size_t len);

static int make_ref(napi_env env, napi_value value, napi_ref *out) {
    *out = NULL;
    if (!value) return CK_OK;
    NODE_API_CALL_RC(env, napi_create_reference(env, value, 1, out));
    return CK_OK;
}

int ckjs_host_new(napi_env env, napi_value backend, napi_value counter, ckjs_host **out) {
    *out = NULL;
    if (!backend && !counter) return CK_OK;
    ckjs_host *host = calloc(1, sizeof *host);
    if (!host) return CK_ENOMEM;
    if (make_ref(env, backend, &host->receiver) || make_ref(env, counter, &host->counter)) {
        ckjs_host_free(env, host);
        return CKJS_THROWN;
    }
    host->backend.ctx = host;
    host->backend.put = host_put;
    host->backend.get = host_get;
    *out = host;
    return CK_OK;
}

void ckjs_host_free(napi_env env, ckjs_host *host) {
    if (!host) return;
    /* Called from finalizers too, where there is no one to report a failed deletion to. */
    napi_ref refs[] = {host->receiver, host->counter};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
        if (refs[i] && napi_delete_reference(env, refs[i]) != napi_ok) continue;
    free(host);
}

const ck_evidence_backend *ckjs_host_backend(const ckjs_host *host) {
    return host && host->receiver ? &host->backend : NULL;
}

ck_counter ckjs_host_counter(ckjs_host *host) {
    ck_counter counter = {NULL, NULL};
    if (host && host->counter) {
        counter.count = host_count;
        counter.ctx = host;
    }
    return counter;
}

/* ------------------------------------------------------------------------------------------ */
/* The counter, checked                                                                       */
/* ------------------------------------------------------------------------------------------ */

static napi_value ignore_rejection(napi_env env, napi_callback_info info) {
    (void)info;
    napi_value undefined;
    NODE_API_CALL(env, napi_get_undefined(env, &undefined));
    return undefined;
}

/* Calls promise.then(on_fulfilled, on_rejected). Returns CK_OK or CKJS_THROWN. */
static int promise_then(napi_env env, napi_value promise, napi_callback on_fulfilled,
                        napi_callback on_rejected, void *data) {
    napi_value then, handlers[2];
    NODE_API_CALL_RC(env, napi_get_named_property(env, promise, "then", &then));
    NODE_API_CALL_RC(env, napi_create_function(env, "ctxkeelSettled", NAPI_AUTO_LENGTH,
                                               on_fulfilled, data, &handlers[0]));
    NODE_API_CALL_RC(env, napi_create_function(env, "ctxkeelSettled", NAPI_AUTO_LENGTH, on_rejected,
                                               data, &handlers[1]));
    NODE_API_CALL_RC(env, napi_call_function(env, promise, then, 2, handlers, NULL));
    return CK_OK;
}

int ckjs_call_counter(napi_env env, napi_value fn, const char *text, size_t len, uint64_t *out) {
    napi_value arg, recv, result;
    napi_valuetype type;
    bool promise = false;
    double tokens = 0;
    if (!(arg = ckjs_string(env, text, len))) return CKJS_THROWN;
    NODE_API_CALL_RC(env, napi_get_undefined(env, &recv));
    NODE_API_CALL_RC(env, napi_call_function(env, recv, fn, 1, &arg, &result));
    NODE_API_CALL_RC(env, napi_is_promise(env, result, &promise));
    if (promise) {
        /* Refused, but it may still reject: without a handler that would be an unhandled
         * rejection, which ends the process. */
        if (promise_then(env, result, ignore_rejection, ignore_rejection, NULL)) return CKJS_THROWN;
        ckjs_throw_type_error(env, "options.estimator returned a Promise; a token counter must "
                                   "answer synchronously");
        return CKJS_THROWN;
    }
    NODE_API_CALL_RC(env, napi_typeof(env, result, &type));
    if (type != napi_number) {
        ckjs_throw_type_error(env, "options.estimator must return a number of tokens, not %s",
                              ckjs_type_name(env, result));
        return CKJS_THROWN;
    }
    NODE_API_CALL_RC(env, napi_get_value_double(env, result, &tokens));
    if (!isfinite(tokens) || floor(tokens) != tokens || tokens < 0 || tokens > MAX_SAFE) {
        ckjs_throw_range_error(env,
                               "options.estimator must return an integer from 0 to %.0f, "
                               "not %g",
                               MAX_SAFE, tokens);
        return CKJS_THROWN;
    }
    *out = (uint64_t)tokens;
    return CK_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Answering a request on the main thread                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Replaces *slot with a reference to `value` (nothing when value is NULL). */
static void keep_value(napi_env env, napi_ref *slot, napi_value value) {
    if (!value) return;
    napi_ref ref;
    if (napi_create_reference(env, value, 1, &ref) != napi_ok) return;
    if (*slot && napi_delete_reference(env, *slot) != napi_ok) *slot = NULL;
    *slot = ref;
}

/* A one-line description of a thrown value: its message, or the value as a string. */
static void thrown_text(napi_env env, napi_value value, char *buf, size_t size) {
    napi_value message = value, text;
    napi_valuetype type = napi_undefined;
    size_t len = 0;
    snprintf(buf, size, "an unprintable value");
    if (!value || napi_typeof(env, value, &type) != napi_ok) return;
    if (type == napi_object && napi_get_named_property(env, value, "message", &text) == napi_ok &&
        napi_typeof(env, text, &type) == napi_ok && type == napi_string)
        message = text;
    if (napi_coerce_to_string(env, message, &text) != napi_ok ||
        napi_get_value_string_utf8(env, text, buf, size, &len) != napi_ok) {
        napi_value ignored = ckjs_take_exception(env); /* String(Symbol()) throws */
        (void)ignored;
        snprintf(buf, size, "an unprintable value");
    }
}

static void call_release(ckjs_host_call *call);

static void request_free(host_request *req) {
    ck_free(req->out);
    free(req);
}

/* Delivers the answer: the thread that asked may go on. A request it stopped waiting for is
 * freed instead, and lets go of its call (main thread). */
static void answer(host_request *req) {
    ckjs_host_call *call = req->call;
    if (!call->tsfn) {
        req->done = 1;
        return;
    }
    uv_mutex_lock(&call->lock);
    int abandoned = req->abandoned;
    if (abandoned) call->abandoned--;
    req->done = 1;
    uv_cond_signal(&call->cond);
    uv_mutex_unlock(&call->lock);
    if (!abandoned) return;
    request_free(req);
    call_release(call);
}

/* Whether nobody waits for `req` any more (then it is answered, which frees it): a request
 * whose worker timed out before the main thread got to it is not served at all. */
static int request_dropped(host_request *req) {
    ckjs_host_call *call = req->call;
    if (!call->tsfn) return 0;
    uv_mutex_lock(&call->lock);
    int abandoned = req->abandoned;
    uv_mutex_unlock(&call->lock);
    if (abandoned) answer(req);
    return abandoned;
}

/* A put or get that threw, rejected, or gave a value of the wrong kind. */
static void answer_failure(napi_env env, host_request *req, const char *how, napi_value error,
                           const char *detail) {
    char text[80];
    if (detail)
        snprintf(text, sizeof text, "%s", detail);
    else
        thrown_text(env, error, text, sizeof text);
    snprintf(req->why, sizeof req->why, "%s %s: %s", req->kind == REQ_PUT ? "put" : "get", how,
             text);
    req->rc = CK_EIO;
    /* After the call ended nobody would take the error (nor delete the reference). */
    if (error && env && !req->call->ended) keep_value(env, &req->call->backend_error, error);
    answer(req);
}

/* The value put() or get() returned, or its Promise fulfilled with. */
static void answer_value(napi_env env, host_request *req, napi_value value) {
    if (req->kind == REQ_PUT) {
        answer(req);
        return;
    }
    napi_valuetype type = napi_undefined;
    if (napi_typeof(env, value, &type) != napi_ok) {
        answer_failure(env, req, "failed", ckjs_take_exception(env), "its value cannot be read");
        return;
    }
    if (type == napi_undefined || type == napi_null) {
        answer(req); /* nothing stored under the key */
        return;
    }
    if (type != napi_string) {
        char detail[64];
        snprintf(detail, sizeof detail, "returned %s, not a string or null",
                 ckjs_type_name(env, value));
        answer_failure(env, req, "failed", NULL, detail);
        return;
    }
    size_t n = 0;
    char *text = NULL;
    if (napi_get_value_string_utf8(env, value, NULL, 0, &n) != napi_ok ||
        !(text = ck_malloc(n + 1)) ||
        napi_get_value_string_utf8(env, value, text, n + 1, &req->out_len) != napi_ok) {
        ck_free(text);
        answer_failure(env, req, "failed", ckjs_take_exception(env), "its text cannot be copied");
        return;
    }
    req->out = text;
    answer(req);
}

static host_request *settled_request(napi_env env, napi_callback_info info, napi_value *value) {
    size_t argc = 1;
    void *data = NULL;
    *value = NULL;
    if (napi_get_cb_info(env, info, &argc, value, NULL, &data) != napi_ok) return data;
    if (argc < 1 && napi_get_undefined(env, value) != napi_ok) *value = NULL;
    return data;
}

static napi_value on_fulfilled(napi_env env, napi_callback_info info) {
    napi_value value;
    host_request *req = settled_request(env, info, &value);
    if (req) answer_value(env, req, value);
    return NULL;
}

static napi_value on_rejected(napi_env env, napi_callback_info info) {
    napi_value reason;
    host_request *req = settled_request(env, info, &reason);
    if (req) answer_failure(env, req, "rejected", reason, NULL);
    return NULL;
}

/* Calls the counter for a request; a failure is remembered for the method to raise. */
static void serve_count(napi_env env, host_request *req, napi_value fn) {
    ckjs_host_call *call = req->call;
    if (ckjs_call_counter(env, fn, req->data, req->len, &req->tokens)) {
        napi_value error = ckjs_take_exception(env);
        req->tokens = UINT64_MAX;
        call->count_failed = 1;
        keep_value(env, &call->count_error, error);
    }
    answer(req);
}

/* Calls backend.put(key, text) or backend.get(key), the method looked up now, as a method
 * call is. A Promise is answered when it settles; anything else at once. */
static void serve_backend(napi_env env, host_request *req, napi_value receiver) {
    napi_value args[2], fn, result;
    napi_valuetype type = napi_undefined;
    size_t argc = req->kind == REQ_PUT ? 2 : 1;
    bool promise = false;
    if (napi_get_named_property(env, receiver, req->kind == REQ_PUT ? "put" : "get", &fn) !=
            napi_ok ||
        napi_typeof(env, fn, &type) != napi_ok) {
        napi_value error = ckjs_take_exception(env);
        answer_failure(env, req, "failed", error, error ? NULL : "the method cannot be read");
        return;
    }
    if (type != napi_function) {
        answer_failure(env, req, "failed", NULL, "the backend's method is not a function");
        return;
    }
    if (!(args[0] = ckjs_string(env, req->key, strlen(req->key))) ||
        (argc == 2 && !(args[1] = ckjs_string(env, req->data, req->len)))) {
        answer_failure(env, req, "failed", ckjs_take_exception(env),
                       "its arguments cannot be made");
        return;
    }
    if (napi_call_function(env, receiver, fn, argc, args, &result) != napi_ok) {
        napi_value error = ckjs_take_exception(env);
        answer_failure(env, req, "threw", error, error ? NULL : "the call failed");
        return;
    }
    if (napi_is_promise(env, result, &promise) == napi_ok && promise) {
        /* Waiting needs a thread that can block: a call on the main thread cannot (nor does
         * one ever run with a backend), so there the Promise is only kept from going
         * unhandled, and refused. */
        if (!req->call->tsfn) {
            if (promise_then(env, result, ignore_rejection, ignore_rejection, NULL) != CK_OK)
                ckjs_take_exception(env);
            answer_failure(env, req, "failed", NULL, "returned a Promise to a synchronous call");
        } else if (promise_then(env, result, on_fulfilled, on_rejected, req) != CK_OK) {
            answer_failure(env, req, "failed", ckjs_take_exception(env),
                           "cannot wait for its Promise");
        }
        return;
    }
    answer_value(env, req, result);
}

/* Answers a request on the main thread (or starts waiting for its Promise). */
static void serve(napi_env env, host_request *req) {
    if (request_dropped(req)) return;
    ckjs_host *host = req->call->host;
    napi_handle_scope scope;
    if (napi_open_handle_scope(env, &scope) != napi_ok) {
        if (req->kind == REQ_COUNT)
            answer(req);
        else
            answer_failure(env, req, "failed", NULL, "no handle scope");
        return;
    }
    napi_ref ref = req->kind == REQ_COUNT ? host->counter : host->receiver;
    napi_value value = NULL;
    if (napi_get_reference_value(env, ref, &value) != napi_ok || !value) {
        napi_value ignored = ckjs_take_exception(env);
        (void)ignored;
        /* A counter that cannot be reached leaves the count to the estimator. */
        if (req->kind == REQ_COUNT)
            answer(req);
        else
            answer_failure(env, req, "failed", NULL, "the backend cannot be reached");
    } else if (req->kind == REQ_COUNT) {
        serve_count(env, req, value);
    } else {
        serve_backend(env, req, value);
    }
    if (napi_close_handle_scope(env, scope) != napi_ok) return;
}

static void call_free(ckjs_host_call *call) {
    if (call->tsfn) {
        uv_cond_destroy(&call->cond);
        uv_mutex_destroy(&call->lock);
    }
    free(call);
}

/* Frees an ended call once nothing refers to it: no probe queued, no abandoned request (main
 * thread; after the end, only the main thread touches the call). */
static void call_release(ckjs_host_call *call) {
    if (call->ended && !call->probing && !call->abandoned) call_free(call);
}

/* A probe from a waiting worker (main thread): can JS still run here? If not, the worker
 * stops waiting. A probe still queued when its call ended lets go of the call. */
static void probe(napi_env env, ckjs_host_call *call) {
    if (call->ended) {
        call->probing = 0;
        call_release(call);
        return;
    }
    int alive = 0;
    napi_value fn, recv;
    if (env &&
        napi_create_function(env, "ctxkeelProbe", NAPI_AUTO_LENGTH, ignore_rejection, NULL, &fn) ==
            napi_ok &&
        napi_get_undefined(env, &recv) == napi_ok)
        alive = napi_call_function(env, recv, fn, 0, NULL, NULL) == napi_ok;
    if (env) {
        napi_value ignored = ckjs_take_exception(env);
        (void)ignored;
    }
    uv_mutex_lock(&call->lock);
    call->probing = 0;
    if (!alive) call->stopped = 1;
    uv_cond_signal(&call->cond);
    uv_mutex_unlock(&call->lock);
}

/* The threadsafe function's callback, on the main thread: a request (data), or a probe (data is
 * the call itself, the function's context). env is NULL when the environment is going away: the
 * request fails, so that the waiting worker goes on. */
static void tsfn_call_js(napi_env env, napi_value js_cb, void *context, void *data) {
    (void)js_cb;
    if (data == context) {
        probe(env, context);
        return;
    }
    host_request *req = data;
    if (!env) {
        req->tokens = UINT64_MAX;
        answer_failure(NULL, req, "failed", NULL, "the JS environment is shutting down");
        return;
    }
    serve(env, req);
}

/* ------------------------------------------------------------------------------------------ */
/* Asking, on the core's thread                                                               */
/* ------------------------------------------------------------------------------------------ */

/* Gets the answer to `req`: at once on the main thread, else through the threadsafe function,
 * waiting until the main thread has answered, or has been found unable to run JS, or (for a
 * put or get) the time limit passed or the operation was cancelled. Returns 1 when `req` was
 * answered and is the caller's to free; 0 when it was given up (then the main thread frees
 * it), with the reason in `why` and the outcome CK_EIO. */
static int ask(ckjs_host_call *call, host_request *req, char *why, size_t why_size) {
    req->call = call;
    req->done = 0;
    req->rc = CK_OK;
    req->why[0] = '\0';
    req->out = NULL;
    req->out_len = 0;
    req->tokens = UINT64_MAX;
    req->abandoned = 0;
    int backend = req->kind != REQ_COUNT;
    const char *what = req->kind == REQ_PUT ? "put" : "get";
    if (!call->tsfn) {
        serve(call->env, req);
        return 1;
    }
    /* Once stopped, nothing is posted: it could be served after the call is gone. */
    uv_mutex_lock(&call->lock);
    int stopped = call->stopped, hung = backend && call->hung;
    int cancelled = backend && call->cancelled;
    uv_mutex_unlock(&call->lock);
    if (hung || cancelled) {
        snprintf(req->why, sizeof req->why,
                 hung ? "%s: backend timed out earlier in this call; not called again"
                      : "%s: the operation was aborted",
                 what);
        req->rc = CK_EIO;
        return 1;
    }
    if (stopped || napi_call_threadsafe_function(call->tsfn, req, napi_tsfn_blocking) != napi_ok) {
        snprintf(req->why, sizeof req->why, "the JS environment is shutting down");
        req->rc = CK_EIO;
        return 1;
    }
    uint64_t limit = backend ? (uint64_t)(call->timeout * 1e9) : 0;
    uint64_t deadline = limit ? uv_hrtime() + limit : 0;
    int timed_out = 0;
    uv_mutex_lock(&call->lock);
    while (!req->done && !call->stopped && !(backend && call->cancelled)) {
        uint64_t wait = PROBE_NS, now = deadline ? uv_hrtime() : 0;
        if (deadline && now >= deadline) {
            timed_out = 1;
            break;
        }
        if (deadline && deadline - now < wait) wait = deadline - now;
        if (uv_cond_timedwait(&call->cond, &call->lock, wait) != UV_ETIMEDOUT || call->probing)
            continue;
        if (deadline && uv_hrtime() >= deadline) continue; /* time is up: no probe needed */
        call->probing = 1;
        uv_mutex_unlock(&call->lock);
        int posted = napi_call_threadsafe_function(call->tsfn, call, napi_tsfn_nonblocking);
        uv_mutex_lock(&call->lock);
        if (posted != napi_ok) {
            call->probing = 0;
            call->stopped = posted == napi_closing;
        }
    }
    int answered = req->done;
    if (!answered && !backend) {
        /* A count is only given up when JS cannot run: nothing touches `req` any more. */
        snprintf(why, why_size, "the JS environment is shutting down");
    } else if (!answered) {
        /* The main thread may still serve the request or settle its Promise: it is left to
         * the main thread, which frees it then (see answer()). */
        req->abandoned = 1;
        call->abandoned++;
        if (timed_out) {
            call->hung = 1;
            snprintf(why, why_size, "%s: backend timed out after %g s (backendTimeout)", what,
                     call->timeout);
        } else if (!call->stopped) {
            snprintf(why, why_size, "%s: the operation was aborted", what);
        } else {
            snprintf(why, why_size, "the JS environment is shutting down");
        }
    }
    uv_mutex_unlock(&call->lock);
    return answered;
}

/* A put or get: a request on the heap (see host_request), asked; its outcome in err->where
 * and *out. */
static int backend_request(ckjs_host *host, int kind, const char *key, const char *data,
                           size_t len, char **out, size_t *out_len, ck_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!host->active) {
        if (err) snprintf(err->where, sizeof err->where, "no call in progress");
        return CK_EIO;
    }
    host_request *req = malloc(sizeof *req);
    if (!req) return CK_ENOMEM;
    req->kind = kind;
    req->key = key;
    req->data = data;
    req->len = len;
    char why[sizeof req->why];
    if (!ask(host->active, req, why, sizeof why)) {
        if (err) snprintf(err->where, sizeof err->where, "%s", why);
        return CK_EIO;
    }
    int rc = req->rc;
    if (rc != CK_OK && err) snprintf(err->where, sizeof err->where, "%s", req->why);
    if (out && rc == CK_OK) {
        *out = req->out;
        *out_len = req->out_len;
        req->out = NULL;
    }
    request_free(req);
    return rc;
}

static int host_put(void *ctx, const char *key, const char *data, size_t len, ck_error *err) {
    return backend_request(ctx, REQ_PUT, key, data, len, NULL, NULL, err);
}

static int host_get(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err) {
    return backend_request(ctx, REQ_GET, key, NULL, 0, out, out_len, err);
}

static uint64_t host_count(void *ctx, const char *text, size_t len) {
    ckjs_host *host = ctx;
    ckjs_host_call *call = host->active;
    /* After one failure the call is lost anyway: the estimator answers the rest. */
    if (!call || call->count_failed) return UINT64_MAX;
    host_request req;
    req.kind = REQ_COUNT;
    req.key = NULL;
    req.data = text;
    req.len = len;
    char why[sizeof req.why];
    if (!ask(call, &req, why, sizeof why)) return UINT64_MAX;
    return req.tokens;
}

/* ------------------------------------------------------------------------------------------ */
/* Calls                                                                                      */
/* ------------------------------------------------------------------------------------------ */

int ckjs_host_call_start(napi_env env, ckjs_host *host, int threaded, ckjs_host_call **out) {
    *out = NULL;
    if (!host) return CK_OK;
    ckjs_host_call *call = calloc(1, sizeof *call);
    if (!call) return CK_ENOMEM;
    call->host = host;
    call->env = env;
    call->timeout = host->timeout;
    if (threaded) {
        napi_value name;
        if (uv_mutex_init(&call->lock) != 0) {
            free(call);
            return CK_ENOMEM;
        }
        if (uv_cond_init(&call->cond) != 0) {
            uv_mutex_destroy(&call->lock);
            free(call);
            return CK_ENOMEM;
        }
        if (napi_create_string_utf8(env, "ctxkeel.host", NAPI_AUTO_LENGTH, &name) != napi_ok ||
            napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, NULL, NULL, call,
                                            tsfn_call_js, &call->tsfn) != napi_ok) {
            ckjs_throw_last_error(env, "napi_create_threadsafe_function");
            uv_cond_destroy(&call->cond);
            uv_mutex_destroy(&call->lock);
            free(call);
            return CKJS_THROWN;
        }
    }
    host->active = call;
    *out = call;
    return CK_OK;
}

int ckjs_host_call_count_failed(const ckjs_host_call *call) { return call && call->count_failed; }

void ckjs_host_set_timeout(ckjs_host *host, double seconds) {
    if (host) host->timeout = seconds;
}

void ckjs_host_cancel(ckjs_host *host) {
    ckjs_host_call *call = host ? host->active : NULL;
    if (!call || !call->tsfn) return;
    uv_mutex_lock(&call->lock);
    call->cancelled = 1;
    uv_cond_broadcast(&call->cond);
    uv_mutex_unlock(&call->lock);
}

/* The value behind *ref (NULL when none), with the reference deleted. */
static napi_value take_ref(napi_env env, napi_ref *ref) {
    napi_value value = NULL;
    if (!*ref) return NULL;
    if (napi_get_reference_value(env, *ref, &value) != napi_ok) value = NULL;
    /* A reference that cannot be deleted is only leaked; the value is still good. */
    if (napi_delete_reference(env, *ref) != napi_ok) *ref = NULL;
    *ref = NULL;
    return value;
}

void ckjs_host_call_end(napi_env env, ckjs_host_call *call, napi_value *count_error,
                        napi_value *backend_error) {
    napi_value counted = NULL, backend = NULL;
    if (call) {
        if (call->host->active == call) call->host->active = NULL;
        counted = take_ref(env, &call->count_error);
        backend = take_ref(env, &call->backend_error);
        /* Every request was answered (the worker waited for each), so at most a probe is
         * still queued; the function closes once it has run, and it frees the call then. */
        if (call->tsfn &&
            napi_release_threadsafe_function(call->tsfn, napi_tsfn_release) != napi_ok)
            call->probing = 0;
        call->ended = 1;
        call_release(call);
    }
    if (count_error) *count_error = counted;
    if (backend_error) *backend_error = backend;
}
