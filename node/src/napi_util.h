/*
 * napi_util.h - what the files of the Node-API addon share: the checked-call macros, the
 * per-addon state, error helpers, and the core's host reader and builder over JS values
 * (values.c), through which the core's format layer reads and builds messages as it does the
 * CLI's JSON (csrc/src/json.c).
 */
#ifndef CKJS_NAPI_UTIL_H_
#define CKJS_NAPI_UTIL_H_

#include <node_api.h>
#include <stddef.h>
#include <stdint.h>

#include "ctxkeel.h"

/*
 * Every napi_* call goes through one of these. On failure the last error info is turned into
 * a JS exception, unless one is already pending (a getter threw, say), and the caller returns
 * at once. NODE_API_CALL suits napi callbacks (they return NULL to signal a pending
 * exception), NODE_API_CALL_RETURN_VOID void helpers, and NODE_API_CALL_RC the int-returning
 * helpers of this addon, which report a pending exception as CKJS_THROWN.
 */
#define NODE_API_CALL_BASE(env, call, ret_val)                                                     \
    do {                                                                                           \
        napi_status ckjs_status_ = (call);                                                         \
        if (ckjs_status_ != napi_ok) {                                                             \
            ckjs_throw_last_error((env), #call);                                                   \
            return ret_val;                                                                        \
        }                                                                                          \
    } while (0)

#define NODE_API_CALL(env, call) NODE_API_CALL_BASE(env, call, NULL)
#define NODE_API_CALL_RETURN_VOID(env, call) NODE_API_CALL_BASE(env, call, )
#define NODE_API_CALL_RC(env, call) NODE_API_CALL_BASE(env, call, CKJS_THROWN)

/*
 * The result of an addon helper that may fail in two ways: with a core status (<= 0, the
 * ck_error says where), or with a JS exception already pending. Core codes are never positive,
 * so this value cannot be mistaken for one.
 */
#define CKJS_THROWN 1

/*
 * Per-addon state, one per loaded instance (main thread or a worker), held with
 * napi_set_instance_data so that no C static ever holds a napi value.
 */
typedef struct ckjs_state {
    napi_ref json_stringify;    /* the global JSON.stringify, looked up once at load */
    napi_ref json_parse;        /* the global JSON.parse, likewise */
    napi_ref error_class;       /* ctxkeel.Error from index.js; NULL when the addon is used bare */
    napi_ref input_error_class; /* ctxkeel.InputError, likewise */
    napi_ref job_class;         /* the Job constructor (compactor.c); never exported */
    napi_ref keys;              /* an array of the field names of ck_key_name(), by ck_key */
} ckjs_state;

/* The state of the instance that `env` belongs to (NULL only if loading failed half-way). */
ckjs_state *ckjs_state_get(napi_env env);

/* Turns the last napi error into a JS exception unless one is pending. `call` names the
 * failed call for the message. */
void ckjs_throw_last_error(napi_env env, const char *call);

/*
 * Throws the Error for a core status: code = the CK_E... name, message "ctxkeel: <where>:
 * <msg>", and `index`, `where`, `offset` properties where known. Input errors use the
 * registered InputError class, others the Error class. Returns NULL so that napi callbacks can
 * `return ckjs_throw_status(...)`.
 */
napi_value ckjs_throw_status(napi_env env, const ck_error *err);

/* Takes the pending exception and returns it (the value thrown), or NULL when none is pending
 * or it cannot be taken. */
napi_value ckjs_take_exception(napi_env env);

/* Throws for a helper's result `rc`: nothing when an exception is already pending
 * (CKJS_THROWN), the core error otherwise. Returns NULL. */
napi_value ckjs_fail(napi_env env, int rc, const ck_error *err);

/* Throws TypeError (code ERR_INVALID_ARG_TYPE) or RangeError (code ERR_INVALID_ARG_VALUE)
 * with a "ctxkeel: " message built from a printf format. Both return NULL. */
napi_value ckjs_throw_type_error(napi_env env, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
napi_value ckjs_throw_range_error(napi_env env, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A name for the type of `value` in messages ("a number", "null", "an array"...). Static
 * string. Returns "a value" if even napi_typeof fails. */
const char *ckjs_type_name(napi_env env, napi_value value);

/*
 * Reads an optional string argument against a list of names: undefined -> `fallback`; a known
 * name -> its index; another string -> RangeError; another type -> TypeError. `what` names the
 * argument in messages. Returns 0 with *out set, or -1 with an exception pending.
 */
int ckjs_choice(napi_env env, napi_value value, const char *what, const char *const *names,
                int n_names, int fallback, int *out);

/* The accepted values of the `estimator` option, in ck_estimator order. */
extern const char *const ckjs_estimator_names[3];

/* Reads an optional format name (any ck_format_from_name() takes): undefined keeps *out;
 * another string -> RangeError; another type -> TypeError, both naming `what` and listing the
 * names. Returns 0, or -1 with an exception pending. */
int ckjs_format_arg(napi_env env, napi_value value, const char *what, ck_format *out);

/* Reads the optional promptCache option: undefined or null keeps the prices; a preset's name
 * ('anthropic', 'openai', see ck_prompt_cache_preset()) or { read, write } sets them (the
 * core checks their range); anything else -> TypeError or RangeError naming `what`. Returns 0,
 * or -1 with an exception pending. */
int ckjs_prompt_cache_arg(napi_env env, napi_value value, const char *what, double *read,
                          double *write);

/* Returns a new JS string holding `len` bytes of UTF-8 `s`, or NULL with an exception
 * pending. */
napi_value ckjs_string(napi_env env, const char *s, size_t len);

/* Calls the cached JSON.stringify on `value`. *out is undefined when JSON.stringify returns
 * undefined (a function, a symbol). Returns CK_OK or CKJS_THROWN (a cycle, a BigInt). */
int ckjs_json_stringify(napi_env env, napi_value value, napi_value *out);

/* Calls the cached JSON.parse on `len` bytes of JSON text the core produced. Returns CK_OK or
 * CKJS_THROWN. */
int ckjs_json_parse(napi_env env, const char *text, size_t len, napi_value *out);

/*
 * Copies a JS string into a new NUL-terminated buffer (malloc; release it with free()).
 * Returns CK_OK, CK_ENOMEM or CKJS_THROWN. The length is asked for first so that the copy is
 * exact. The string may hold NUL characters; *len counts them.
 */
int ckjs_dup_string(napi_env env, napi_value value, char **out, size_t *len);

/* Reads up to `max` arguments (missing ones are NULL) and, when `this_arg` is not NULL, the
 * receiver. Returns CK_OK or CKJS_THROWN. */
int ckjs_get_args(napi_env env, napi_callback_info info, napi_value *argv, size_t max,
                  napi_value *this_arg);

/*
 * The prologue of a constructor that takes one options object: checks that it was called with
 * `new` (else a TypeError naming `cls`) and that its argument is an object and not an array
 * (else a TypeError naming `options`). Sets *this_arg and *options. Returns CK_OK or
 * CKJS_THROWN.
 */
int ckjs_construct_args(napi_env env, napi_callback_info info, const char *cls,
                        napi_value *this_arg, napi_value *options);

/* ------------------------------------------------------------------------------------------ */
/* values.c - the core's host reader and builder over JS values                              */
/* ------------------------------------------------------------------------------------------ */

/*
 * Where every value read lies, from the message list down (list[3].content[1]): the history
 * keeps read values for building, and the napi_values die with the message (or call) that read
 * them, so a read value's `aux` names its path and the builder (or a later look at an earlier
 * message) finds the value again in the list it is given (the same list, or one whose leading
 * messages are unchanged since). A path of up to four steps below its message, each a field or
 * an item below 64, is held in `aux` itself; only a deeper or wider one takes a node here.
 * Kept with the history it describes and cut with it (ckjs_paths_truncate()).
 */
typedef struct ckjs_path_node {
    uint64_t parent; /* the aux of the value this one is a field or an item of */
    uint32_t step;   /* an item index, or a field (values.c) */
    uint32_t msg;    /* the message the path starts at */
} ckjs_path_node;

typedef struct ckjs_paths {
    ckjs_path_node *nodes;
    size_t n, cap;
} ckjs_paths;

/* Keeps the paths of messages [0, n) only. */
void ckjs_paths_truncate(ckjs_paths *self, size_t n);
void ckjs_paths_dispose(ckjs_paths *self);

/* A read or a build of JS messages through the core's format layer, within one call. */
#define CKJS_SHORTS 256   /* slots of ckjs_values.shorts (a power of two) */
#define CKJS_SHORT_MAX 32 /* the longest string shared there, in bytes */

typedef struct ckjs_values {
    napi_env env;
    ck_history *history; /* read into; strings copied into its storage */
    ckjs_paths *paths;   /* where the values read lie */
    size_t taken;        /* bytes of that storage the strings took */
    char *at, *end;      /* the free part of the current chunk of it */
    napi_value list;     /* the message list read, or built from */
    napi_handle_scope scope; /* the scope of the message being read, or NULL */
    size_t current;          /* the index of that message, or SIZE_MAX */
    ck_host_reader reader;
    napi_value keys; /* the addon's array of field names, fetched once per call */
    napi_value key[CK_KEY_COUNT];
    /* Short strings copied in this read, by content: the core reads the same roles, item
     * types and ids again and again, and each copy would stay in the history's storage.
     * One slot a hash, the newest string wins; an empty slot has s == NULL. */
    struct ckjs_short {
        const char *s;
        size_t len;
    } shorts[CKJS_SHORTS];
} ckjs_values;

void ckjs_values_init(ckjs_values *self, napi_env env, ck_history *history, ckjs_paths *paths);

/* ck_history_read() of messages [from, length) of the JS array `list`, each message in its own
 * handle scope. Returns CK_OK, a core status with `err` naming the place, or CKJS_THROWN (a
 * getter threw; the exception is pending). */
int ckjs_values_read(ckjs_values *self, napi_value list, size_t from, ck_format format,
                     ck_format *format_out, ck_error *err);

/* Whether the JS array `list` holds tool schemas rather than messages (ck_list_is_tools()):
 * *yes, and CK_OK, CKJS_THROWN (a getter threw) or CK_ENOMEM. */
int ckjs_values_list_is_tools(ckjs_values *self, napi_value list, bool *yes);

/* ckjs_values_read() of one message object, as a one-item list (*list, for building); places
 * are named "message.content"... */
int ckjs_values_read_one(ckjs_values *self, napi_value message, napi_value *list,
                         ck_format format, ck_format *format_out, ck_error *err);

/* ck_view_build() of `view` over self->history, finding the values read in `list` (the list
 * read, or one whose messages the view keeps are unchanged since). NULL with an exception
 * pending on failure. */
napi_value ckjs_values_build(ckjs_values *self, napi_value list, const ck_view *view);

/* checkPairs(messages, format?) and repairPairs(messages, format?) as the addon exports them. */
napi_value ckjs_check_pairs(napi_env env, napi_callback_info info);
napi_value ckjs_repair_pairs(napi_env env, napi_callback_info info);

/* ------------------------------------------------------------------------------------------ */
/* compactor.c - the Compactor class, its Job class, readEvidenceTool                          */
/* ------------------------------------------------------------------------------------------ */

/* Defines `Compactor` and `readEvidenceTool` on `exports` and keeps the (unexported) Job
 * class in the instance state. Returns CK_OK or CKJS_THROWN. */
int ckjs_compactor_init(napi_env env, napi_value exports);

/* ------------------------------------------------------------------------------------------ */
/* host.c - the host's callbacks: an evidence backend and a token counter                     */
/* ------------------------------------------------------------------------------------------ */

/* A compactor's host callbacks, as JS values held by references. Opaque. */
typedef struct ckjs_host ckjs_host;

/* One call into the core during which the host's callbacks are answered. Opaque. */
typedef struct ckjs_host_call ckjs_host_call;

/*
 * Makes the host callbacks of a compactor: `backend`, an object whose put and get methods are
 * looked up at each call (or NULL), and `counter`, a function (or NULL). The caller has checked
 * their types. *out is NULL when there is neither. Returns CK_OK, CK_ENOMEM or CKJS_THROWN.
 */
int ckjs_host_new(napi_env env, napi_value backend, napi_value counter, ckjs_host **out);

/* Releases the references and the struct. NULL is a no-op. No call may be in progress. */
void ckjs_host_free(napi_env env, ckjs_host *host);

/* The backend and the counter as the core takes them (in ck_compactor_options): NULL, and a
 * counter whose count is NULL, when the host has none. Both serve only during a call. */
const ck_evidence_backend *ckjs_host_backend(const ckjs_host *host);
ck_counter ckjs_host_counter(ckjs_host *host);

/*
 * Starts a call on the main thread: until ckjs_host_call_end(), the host's callbacks are
 * answered for it. With `threaded`, the core will run on another thread, and each callback
 * is posted to the main thread (threadsafe function) while that thread waits; without, the
 * core runs on the main thread and callbacks call JS at once. A NULL host gives *out NULL
 * (there is nothing to answer). Returns CK_OK, CK_ENOMEM or CKJS_THROWN.
 */
int ckjs_host_call_start(napi_env env, ckjs_host *host, int threaded, ckjs_host_call **out);

/* True once the counter failed during the call. Read it on the core's thread after the core
 * returned, or on the main thread after the work completed. */
int ckjs_host_call_count_failed(const ckjs_host_call *call);

/* Sets how long a put or get may take, in seconds (the value ck_backend_timeout() gave), for
 * the calls started from now on. NULL is a no-op. */
void ckjs_host_set_timeout(ckjs_host *host, double seconds);

/* Main thread: the operation in progress was aborted (its AbortSignal fired). The worker stops
 * waiting for the backend, whose pending and later calls in this call fail at once. A no-op
 * when no call runs on a worker. */
void ckjs_host_cancel(ckjs_host *host);

/*
 * Ends a call (main thread) and frees it. *count_error is what the counter threw, or the
 * TypeError/RangeError made for a bad answer (NULL when it did not fail): the operation fails
 * with it. *backend_error is the last value a put or get threw or rejected with (NULL when
 * none), for the `cause` of an error. Either pointer may be NULL. A NULL call is a no-op.
 */
void ckjs_host_call_end(napi_env env, ckjs_host_call *call, napi_value *count_error,
                        napi_value *backend_error);

/*
 * Calls a token counter `fn` on `len` bytes of UTF-8 text and checks its answer: a
 * non-negative safe integer. A Promise is refused with a TypeError (counting is synchronous),
 * another type with a TypeError, a negative or fractional number with a RangeError. Returns
 * CK_OK, or CKJS_THROWN with the error (or what fn threw) pending.
 */
int ckjs_call_counter(napi_env env, napi_value fn, const char *text, size_t len, uint64_t *out);

/* ------------------------------------------------------------------------------------------ */
/* http.c - the HttpSummarizer class                                                          */
/* ------------------------------------------------------------------------------------------ */

/* Defines `HttpSummarizer` (the built-in HTTP summarizer, whose transfers run on the libuv
 * thread pool) on `exports`. Returns CK_OK or CKJS_THROWN. */
int ckjs_http_init(napi_env env, napi_value exports);

/* ------------------------------------------------------------------------------------------ */
/* replay.c - replay() and cliMain()                                                          */
/* ------------------------------------------------------------------------------------------ */

/* Defines `replay` (the core's ck_replay_run) and `cliMain` (ck_cli_main) on `exports`.
 * Returns CK_OK or CKJS_THROWN. */
int ckjs_replay_init(napi_env env, napi_value exports);

#endif /* CKJS_NAPI_UTIL_H_ */
