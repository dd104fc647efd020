/*
 * state.h - shared declarations of the CPython binding (ctxkeel._ext).
 *
 * The binding is split by concept: module.c (the module object, its method table and its
 * state), errors.c (the exception hierarchy and the status table generated from
 * CK_STATUS_LIST), values.c (Python objects as the core's host values: message dicts read
 * into a ck_history and a ck_view built back into dicts by the core's format layer, which
 * owns the dialects), history_ops.c (estimate_tokens,
 * check_pairs, repair_pairs), anchors.c (parse_anchors, merge_anchors), compactor.c (the
 * Compactor and Compaction types), host.c (the host's token counter and evidence backend,
 * which the core calls back) and http.c (the HttpSummarizer and CancelToken types).
 *
 * The GIL rule for this module: every function keeps the GIL for its whole run, except the
 * HTTP transfer in http.c and an evidence search without a backend (compactor.c), which work
 * on C copies only. The others all read Python objects (dicts, lists, strs) while they
 * work, and the core borrows the UTF-8 buffers of those strs, so there is no stretch of pure C
 * work that could run with the GIL released. Core objects that outlive a call (a Compactor's
 * ck_compactor, a Compaction's ck_compaction and the history it borrows) are owned by a Python
 * object that holds strong references to everything they borrow; see compactor.c. The HTTP
 * transfer is the one long wait: http.c copies its inputs into C buffers first and releases
 * the GIL around ck_http_summarize() alone (see the comment there). The host's callbacks
 * (host.c) run inside core calls with the GIL held, as Python code; when one of them waits
 * for an awaitable, the Python code that waits lets the GIL go, not the binding.
 */
#ifndef CK_PY_STATE_H_
#define CK_PY_STATE_H_

/* setup.py defines _POSIX_C_SOURCE=200112L for the core, while pyconfig.h defines its own,
 * newer value. Python.h must be the first include and must see only its own definition, or
 * the compiler reports a macro redefinition. */
#undef _POSIX_C_SOURCE
#include <Python.h>

#include <stddef.h>
#include <stdint.h>

#include "ctxkeel.h"

/* Room for a place such as "messages[123].content[4].content[5].text". */
#define CK_PY_WHERE_MAX 160

/* Everything the module owns. One instance per module object, so that the module works when
 * it is imported again (importlib) or in a subinterpreter; there is no global PyObject *. */
typedef struct ck_module_state {
    /* Exceptions. */
    PyObject *Error;      /* ctxkeel.Error(Exception) */
    PyObject *InputError; /* ctxkeel.InputError(Error, ValueError) */
    PyObject *ContextOverflowError; /* ctxkeel.ContextOverflowError(Error): CK_EOVERFLOW */

    /* JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode, which gives the same
     * text as json.dumps with those arguments without building an encoder per call. */
    PyObject *json_encode;
    /* json.loads, for the JSON text the core hands back (search results, the tool schema). */
    PyObject *json_loads;

    /* Types (compactor.c, http.c). */
    PyObject *CompactorType;
    PyObject *CompactionType;
    PyObject *HttpSummarizerType;
    PyObject *CancelTokenType;

    /* The field names of the dialects (ck_key_name()), interned: the host reader's and
     * builder's keys. */
    PyObject *keys[CK_KEY_COUNT];
    PyObject *tier_names[CK_TIER_EMERGENCY + 1]; /* ck_tier_name(), interned */

    /* Keys of the dicts that check_pairs returns. */
    PyObject *s_kind;
    PyObject *s_index;
    PyObject *s_part;
    PyObject *s_message;
    PyObject *issue_names[CK_PAIR_RESULT_ORDER + 1]; /* ck_pair_issue_name(), interned */

    /* Keys of the anchor dicts, in their fixed order. */
    PyObject *anchor_keys[CK_ANCHOR_COUNT];
} ck_module_state;

/* The state of the module object `module`. */
static inline ck_module_state *ck_py_state(PyObject *module) {
    return (ck_module_state *)PyModule_GetState(module);
}

/* ---- errors.c ---------------------------------------------------------------------------- */

/* Creates Error, InputError and ContextOverflowError in `st` and adds them and STATUS_CODES
 * to `module`.
 * Returns 0, or -1 with an exception set. */
int ck_py_errors_init(PyObject *module, ck_module_state *st);

/* The exception class for a status code: InputError for input errors, ContextOverflowError
 * for CK_EOVERFLOW, Error for the rest. Borrowed from `st`. CK_ENOMEM is not handled here (it becomes MemoryError). */
PyObject *ck_py_error_class(const ck_module_state *st, int code);

/*
 * Raises the exception for `code`: MemoryError for CK_ENOMEM, otherwise one of the class
 * that ck_py_error_class() names, whose text is "ctxkeel: <where>: <msg>" (or "ctxkeel: <msg>" without a place) and whose
 * attributes are .code (the "CK_E..." name), .index (`index`, or None when it is negative),
 * .where (None when empty) and .offset (None when negative). `msg` NULL means
 * ck_strerror(code). If an exception is already set it becomes the new one's __cause__.
 * Always returns NULL, so a caller may write `return ck_py_raise(...)`.
 */
PyObject *ck_py_raise(const ck_module_state *st, int code, Py_ssize_t index, const char *where,
                      const char *msg, Py_ssize_t offset);

/* Raises the exception that a core ck_error describes. Always returns NULL. */
PyObject *ck_py_raise_core(const ck_module_state *st, int code, const ck_error *err);

/* The UTF-8 text of a str whose encoding just failed (a lone surrogate): raises InputError
 * CK_EUTF8 at `where` with .offset the byte offset of the first bad code point, and the
 * UnicodeEncodeError as its cause. Always returns NULL. */
PyObject *ck_py_raise_utf8(const ck_module_state *st, PyObject *str, Py_ssize_t index,
                           const char *where);

/* _raise_status(code): raises what the binding raises for `code`; returns None for CK_OK. */
PyObject *ck_py_raise_status(PyObject *module, PyObject *arg);

/* The exception being raised, taken off the error indicator (a new reference, or NULL), and
 * put back (stealing the reference; NULL does nothing). */
PyObject *ck_py_take_exception(void);
void ck_py_restore_exception(PyObject *exc);

/* Takes the exception being raised into *slot, unless *slot holds one already (the first one
 * wins; a later one is dropped). */
void ck_py_keep_exception(PyObject **slot);

/* ---- values.c ---------------------------------------------------------------------------- */

/*
 * A host message list read into a core history by the core's format layer (values.c is the
 * reader). The history borrows the UTF-8 buffers of the strs in the messages, so every object
 * it relies on is held by `pins` until the history is disposed of: a dict key's __eq__ or a
 * value's JSON encoding can run Python code that changes the input while it is being read,
 * and a borrowed buffer must not be freed under the core.
 */
typedef struct ck_py_history {
    ck_module_state *st;
    ck_history *h;
    PyObject *snapshot; /* tuple: the message objects, as they were when reading began (the
                           append-only session's own list: ck_py_history_read_more) */
    PyObject **pins;    /* strong references: every value the core was handed */
    Py_ssize_t n_pins, cap_pins;
    PyObject *raised;   /* an exception a callback raised, to raise after the core call */
    PyObject *bad_str;  /* the str that could not be encoded */
    PyObject *bad_exc;  /* its UnicodeEncodeError, or the JSON encoder's error */
    int json_failed;    /* a value could not be serialized as JSON */
    /* The key objects lookups use: the module's interned ones, or equal exact strs from the
     * first dicts read (pinned); see values.c. */
    PyObject *keys[CK_KEY_COUNT];
    PyObject *last_dict; /* the dict whose keys were learnt last (never dereferenced) */
    int dicts_met;
    int single;         /* read from one message dict: places start with "message" */
    ck_format format;   /* the dialect the messages were read in */
} ck_py_history;

/* Prepares an empty history. Returns 0, or -1 with MemoryError set. */
int ck_py_history_init(ck_py_history *ph, ck_module_state *st);

/* Reads a list of message dicts in `format` (CK_FORMAT_AUTO: the one the messages show). A
 * non-list raises TypeError; bad messages raise InputError naming the message index and
 * field. Returns 0, or -1 with an exception set. */
int ck_py_history_read_list(ck_py_history *ph, PyObject *messages, ck_format format);

/* Reads messages [from, n) of the list `messages` into a history that holds [0, from) of it
 * already, read from the same message objects (an append-only session's copies): the list
 * itself becomes the snapshot (it must only ever grow). Errors as ck_py_history_read_list(); the history then holds the
 * messages before the one that failed. Returns 0, or -1 with an exception set. */
int ck_py_history_read_more(ck_py_history *ph, PyObject *messages, size_t from, ck_format format);

/* Reads one message dict as a one-message history. Returns 0, or -1 with an exception set. */
int ck_py_history_read_message(ck_py_history *ph, PyObject *message, ck_format format);

/* Whether a list holds tool schemas rather than messages (the core's ck_list_is_tools()):
 * 1 or 0, or -1 with an exception set (one a key's __eq__ raised, say). */
int ck_py_list_is_tools(ck_module_state *st, PyObject *list);

/* Releases the history and every pinned object. Safe on a history that failed halfway. */
void ck_py_history_dispose(ck_py_history *ph);

/* Visits the snapshot and every pinned object (for the tp_traverse of a type that holds a
 * history). */
int ck_py_history_traverse(const ck_py_history *ph, visitproc visit, void *arg);

/* The message list that `view` describes, built by the core over the messages `ph` read:
 * kept messages are the source objects themselves, edited ones shallow copies, new ones
 * shaped in the dialect `ph` was read in. Returns a new list, or NULL with an exception set. */
PyObject *ck_py_view_build(ck_py_history *ph, const ck_view *view);

/* Compact JSON text of `obj` (json.dumps with separators=(",", ":") and ensure_ascii=False).
 * Returns a new str, or NULL with the encoder's exception set. */
PyObject *ck_py_compact_json(const ck_module_state *st, PyObject *obj);

/* A new str from UTF-8 text that the core hands back (always valid UTF-8 here). */
PyObject *ck_py_str(const char *text, size_t len);

/* A new str from text the core copied out of a reply, a file or JSON escapes, which may hold
 * bytes that are not UTF-8 (a lone surrogate spelled in JSON, a file someone else wrote):
 * those become U+FFFD rather than an error about text the caller never wrote. */
PyObject *ck_py_text(const char *text, size_t len);

/* ---- history_ops.c ----------------------------------------------------------------------- */

PyObject *ck_py_estimate_tokens(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *ck_py_check_pairs(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *ck_py_repair_pairs(PyObject *module, PyObject *args, PyObject *kwargs);

/* The estimator= and format= arguments: NULL means the default; a non-str raises TypeError,
 * an unknown name ValueError. An estimator may also be a callable, fn(text) -> int, which is
 * then stored (borrowed) in *counter and *out is the default. Returns 0, or -1 with an
 * exception set. */
int ck_py_parse_estimator(PyObject *value, ck_estimator *out, PyObject **counter);
int ck_py_parse_format(PyObject *value, ck_format *out);

/* ---- host.c ------------------------------------------------------------------------------ */

/*
 * The host's callbacks for core calls: a token counter and an evidence backend, and what they
 * left to raise. Every field is a strong reference or NULL. A method that makes a core call
 * with these installed calls ck_py_host_reset() before it and ck_py_host_end() after it; see
 * host.c for what the callbacks do with failures.
 */
typedef struct ck_py_host {
    PyObject *counter;     /* estimator=fn: fn(text) -> int */
    PyObject *put, *get;   /* the backend's bound methods */
    PyObject *awaiter;     /* awaiter(awaitable) -> value, for backend methods that are async */
    PyObject *raise_after; /* an exception to raise when the core call returns */
    PyObject *cause;       /* the last storage failure (an Exception), for chaining */
    double timeout;        /* seconds an awaitable of the backend may take (backend_timeout) */
    int timed_out;         /* a backend call of this core call ran out of time */
} ck_py_host;

/* ck_counter.count, ck_evidence_backend.put and .get over a ck_py_host (the ctx). */
uint64_t ck_py_host_count(void *ctx, const char *text, size_t len);
int ck_py_host_put(void *ctx, const char *key, const char *data, size_t len, ck_error *err);
int ck_py_host_get(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err);

/* Reads backend.put and backend.get (TypeError when one is missing or not callable) and keeps
 * `awaiter` (None or NULL: awaitables are refused). Returns 0, or -1 with an exception set. */
int ck_py_host_set_backend(ck_py_host *h, PyObject *backend, PyObject *awaiter);

/* Before a core call: forgets what an earlier call left. */
void ck_py_host_reset(ck_py_host *h);

/* After a core call: raises what a callback left to raise (returns -1), else returns 0. The
 * storage failure is dropped either way; take it first with ck_py_host_take_cause(). */
int ck_py_host_end(ck_py_host *h);

/* The last storage failure of the backend (a new reference), or NULL. */
PyObject *ck_py_host_take_cause(ck_py_host *h);

int ck_py_host_traverse(const ck_py_host *h, visitproc visit, void *arg);
void ck_py_host_clear(ck_py_host *h);

/* ---- anchors.c --------------------------------------------------------------------------- */

PyObject *ck_py_parse_anchors(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *ck_py_merge_anchors(PyObject *module, PyObject *args, PyObject *kwargs);

/* ---- compactor.c ------------------------------------------------------------------------- */

/* _ext.Compactor: one agent session's compaction state. */
typedef struct ck_py_compactor {
    PyObject_HEAD
    ck_compactor *ck;
    /* Set while a Compaction begun on this compactor is open (from begin() until its
     * finish() or close()), and while begin() reads its messages. Every method that changes
     * the session state refuses to run then, with ctxkeel.Error CK_EBUSY. */
    int busy;
    /* Set during each core call on this compactor. A host callback runs Python code inside
     * one, which may switch threads or wait for a loop, so a second core call could otherwise
     * start in the middle of the first; every method that makes one raises CK_EBUSY then. */
    int calling;
    ck_format format; /* the format option, for reading single messages in offload() */
    ck_py_host host;  /* the counter and backend the core calls back; ctx of both */
    PyObject *backend; /* the backend object as given, or NULL (shown in options) */
    /* The append-only session's history (read()), while no Compaction holds it: a begin()
     * with session=True takes it, and the Compaction gives it back when it closes. */
    ck_py_history session;
    int has_session;
} ck_py_compactor;

/* _ext.Compaction: one compaction in progress. It owns the ck_compaction and the history the
 * compaction borrows, and holds the Python objects that history borrows from: the snapshot
 * tuple of the message list and the pins of every str whose UTF-8 buffer was lent to the
 * core (see ck_py_history). So nothing the core reads can be freed while a summarizer runs,
 * whatever the caller does to its own lists and dicts meanwhile. */
typedef struct ck_py_compaction {
    PyObject_HEAD
    ck_py_compactor *owner; /* strong reference; the ck_compaction points into owner->ck */
    ck_compaction *c;       /* NULL once closed */
    ck_py_history ph;
    ck_format format; /* the format option, which new messages are shaped for ("auto": found) */
    int holds_busy;   /* this job set owner->busy and must clear it */
    int done_in_core; /* begun with extractive=True: the core finished it already */
    int in_core;      /* a core call on `c` runs (request, finish): close() must wait */
    int close_asked;  /* close() was called meanwhile; the call closes the job when done */
    int from_session; /* ph is owner's session history, to give back on close */
} ck_py_compaction;

/* Creates the Compactor and Compaction types in `st` and adds Compactor, TIERS and
 * CHECKPOINT_MARKER to `module`. Returns 0, or -1 with an exception set. */
int ck_py_compactor_init(PyObject *module, ck_module_state *st);

PyObject *ck_py_read_evidence_tool(PyObject *module, PyObject *args, PyObject *kwargs);

/* ---- http.c ------------------------------------------------------------------------------ */

/* _ext.CancelToken: a flag that an HTTP transfer running without the GIL polls. cancel() sets
 * it from any thread; the core reads it through a `const volatile int *` (its documented
 * interface) and aborts at its next poll. A token is never reset: one per call. */
typedef struct ck_py_cancel_token {
    PyObject_HEAD
    volatile int flag;
} ck_py_cancel_token;

/* _ext.HttpSummarizer: a ck_http_summarizer plus what its repr and attributes show. It keeps
 * no secret: the core reads the API key from the environment at call time, headers are shown
 * by name only and the URL without its user:password part. No busy flag: one
 * ck_http_summarizer serves concurrent calls from several threads (see http.c). */
typedef struct ck_py_http_summarizer {
    PyObject_HEAD
    ck_http_summarizer *hs;
    ck_http_api api;
    int max_retries;
    int reasoning_given;    /* reasoning_model as given: 1 True, -1 False, 0 None */
    int reasoning;          /* what requests send: max_completion_tokens, no temperature */
    PyObject *shown_url;    /* str: base_url with any user:password@ replaced by ***@ */
    PyObject *model;        /* str */
    PyObject *key_env;      /* str: the environment variable read for the key; None: no key */
    PyObject *timeout;      /* float */
    PyObject *backoff;      /* float */
    PyObject *header_names; /* tuple of str */
    /* The usage of the latest successful reply; written only while holding the GIL. */
    int has_usage;
    unsigned long long usage_prompt, usage_completion;
} ck_py_http_summarizer;

/* Creates the HttpSummarizer and CancelToken types in `st` and adds them to `module`.
 * Returns 0, or -1 with an exception set. */
int ck_py_http_init(PyObject *module, ck_module_state *st);

/* ---- replay.c ---------------------------------------------------------------------------- */

/* _replay(compactor, messages_json, summarize=None, title=None) -> (rows, totals, svg) and
 * _cli_main(argv) -> exit status. */
PyObject *ck_py_replay(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *ck_py_cli_main(PyObject *module, PyObject *arg);

#endif /* CK_PY_STATE_H_ */
