/*
 * compactor.c - the Compactor class (a ck_compactor wrapped in a JS object), its Job class
 * (one ck_compaction in progress) and readEvidenceTool.
 *
 * node/index.js drives a compaction in synchronous steps around one await, so the event loop
 * is never held while a model writes the checkpoint:
 *
 *     job = native.begin(snapshot, toolTokens, useModel)
 *     if (job.needsSummary) { reply = await summarize(job.request()); job.setSummary(reply) }
 *     result = job.finish(snapshot)
 *
 * Between the steps the Job owns everything the core reads: the history (whose strings convert.c
 * copied into the history's own storage, so nothing is borrowed from V8) and the compaction.
 * The Job holds a reference to its Compactor object so that the compactor outlives it, and a
 * compactor runs one job at a time, because a compaction reads and updates the session state
 * from begin to finish. When the environment is torn down the finalizers may run in any order,
 * so whichever of the two structs is released last frees the core compactor.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "napi_util.h"

/* Type tags make sure a method runs on the kind of object it was written for: napi_unwrap
 * alone would hand a Job's struct to a Compactor method called on a Job. */
static const napi_type_tag COMPACTOR_TAG = {0x63746b65656c2d63ull, 0x6f6d7061637430f1ull};
static const napi_type_tag JOB_TAG = {0x63746b65656c2d6aull, 0x6f622d636f6d70f2ull};

/* The largest integer a JS number holds exactly. */
#define MAX_SAFE 9007199254740991.0

typedef struct ckjs_job ckjs_job;

typedef struct ckjs_compactor {
    ck_compactor *ck; /* NULL once freed: after close() with no job left */
    ckjs_job *job;    /* the live job, if any */
    int closed;       /* close() was called; every later call throws CK_ECLOSED */
    int wrapped;      /* the JS object's finalizer has not run yet */
} ckjs_compactor;

struct ckjs_job {
    ckjs_compactor *owner; /* NULL once released */
    napi_ref owner_ref;    /* keeps the Compactor object alive while the job exists */
    ck_history *history;   /* the messages given to begin, strings copied */
    ck_compaction *c;
    ck_format format; /* the history's resolved format, for building new messages */
    size_t count;     /* messages in the history; finish() checks its snapshot against it */
    int finished;     /* ck_compactor_finish() has run (or ck_compactor_compact() did it) */
    int wrapped;      /* a JS object owns this struct */
};

static const char MSG_BUSY[] = "concurrent use of Compactor";
static const char MSG_CLOSED[] = "Compactor is closed";
static const char MSG_RELEASED[] = "compaction was finished or released already";

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Throws the ctxkeel Error for `code` with the message "ctxkeel: <msg>". Returns NULL. */
static napi_value throw_code(napi_env env, int code, const char *msg) {
    ck_error err;
    memset(&err, 0, sizeof err);
    err.code = code;
    err.msg = msg;
    err.index = CK_NONE;
    return ckjs_throw_status(env, &err);
}

/* The struct behind `obj` if it carries `tag`; else a TypeError naming `cls`, and NULL. */
static void *unwrap_tagged(napi_env env, napi_value obj, const napi_type_tag *tag,
                           const char *cls) {
    napi_valuetype type = napi_undefined;
    bool tagged = false;
    void *data = NULL;
    if (obj) NODE_API_CALL(env, napi_typeof(env, obj, &type));
    if (type == napi_object) NODE_API_CALL(env, napi_check_object_type_tag(env, obj, tag, &tagged));
    if (!tagged) {
        ckjs_throw_type_error(env, "Illegal invocation: this is not a %s", cls);
        return NULL;
    }
    NODE_API_CALL(env, napi_unwrap(env, obj, &data));
    return data;
}

/* Reads an integer argument in [min, max]; undefined (or a missing argument) gives `fallback`.
 * Returns 0, or -1 with a TypeError or RangeError pending that names `what`. */
static int get_integer(napi_env env, napi_value value, const char *what, double min, double max,
                       double fallback, double *out) {
    napi_valuetype type = napi_undefined;
    if (value) NODE_API_CALL_BASE(env, napi_typeof(env, value, &type), -1);
    if (type == napi_undefined) {
        *out = fallback;
        return 0;
    }
    if (type != napi_number) {
        ckjs_throw_type_error(env, "%s must be a number, not %s", what, ckjs_type_name(env, value));
        return -1;
    }
    double v = 0;
    NODE_API_CALL_BASE(env, napi_get_value_double(env, value, &v), -1);
    if (!isfinite(v) || floor(v) != v || v < min || v > max) {
        ckjs_throw_range_error(env, "%s must be an integer from %.0f to %.0f", what, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

/* Reads a string argument into a malloc'd NUL-terminated copy. NUL characters are refused
 * (RangeError) when `c_string` is set, because the core takes such values as C strings.
 * Returns 0, or -1 with an exception pending. */
static int get_string(napi_env env, napi_value value, const char *what, int c_string, char **out,
                      size_t *len) {
    napi_valuetype type = napi_undefined;
    if (value) NODE_API_CALL_BASE(env, napi_typeof(env, value, &type), -1);
    if (type != napi_string) {
        ckjs_throw_type_error(env, "%s must be a string, not %s", what,
                              value ? ckjs_type_name(env, value) : "undefined");
        return -1;
    }
    int rc = ckjs_dup_string(env, value, out, len);
    if (rc) {
        ckjs_fail(env, rc, NULL);
        return -1;
    }
    if (c_string && strlen(*out) != *len) {
        free(*out);
        *out = NULL;
        ckjs_throw_range_error(env, "%s must not contain NUL characters", what);
        return -1;
    }
    return 0;
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

static napi_value cstring_value(napi_env env, const char *s) {
    return ckjs_string(env, s, strlen(s));
}

static napi_value null_value(napi_env env) {
    napi_value value;
    NODE_API_CALL(env, napi_get_null(env, &value));
    return value;
}

static napi_value undefined_value(napi_env env) {
    napi_value value;
    NODE_API_CALL(env, napi_get_undefined(env, &value));
    return value;
}

static napi_value bool_value(napi_env env, int yes) {
    napi_value value;
    NODE_API_CALL(env, napi_get_boolean(env, yes != 0, &value));
    return value;
}

/* ------------------------------------------------------------------------------------------ */
/* Lifetimes                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* Frees the core compactor once it is closed and no job needs it any more. */
static void core_free_if_closed(ckjs_compactor *self) {
    if (self->closed && !self->job && self->ck) {
        ck_compactor_free(self->ck);
        self->ck = NULL;
    }
}

/* Frees the struct once neither its JS object nor a job refers to it. */
static void compactor_free_if_unused(ckjs_compactor *self) {
    if (self->wrapped || self->job) return;
    ck_compactor_free(self->ck);
    free(self);
}

/*
 * Releases what a job holds: the compaction (before the compactor it was begun on can go),
 * the history, and the reference to the Compactor object. Safe to call twice. Returns the
 * status of deleting the reference, which only a method can report.
 */
static napi_status job_release(napi_env env, ckjs_job *job) {
    ckjs_compactor *owner = job->owner;
    if (!owner) return napi_ok;
    ck_compaction_free(job->c);
    ck_history_free(job->history);
    job->c = NULL;
    job->history = NULL;
    job->owner = NULL;
    owner->job = NULL;
    napi_status status = napi_ok;
    if (job->owner_ref) status = napi_delete_reference(env, job->owner_ref);
    job->owner_ref = NULL;
    core_free_if_closed(owner);
    compactor_free_if_unused(owner);
    return status;
}

static void job_finalize(napi_env env, void *data, void *hint) {
    (void)hint;
    ckjs_job *job = data;
    /* A finalizer has no caller to report a failed reference deletion to. */
    if (job_release(env, job) != napi_ok) job->owner_ref = NULL;
    free(job);
}

static void compactor_finalize(napi_env env, void *data, void *hint) {
    (void)env;
    (void)hint;
    ckjs_compactor *self = data;
    self->wrapped = 0;
    compactor_free_if_unused(self);
}

/* The receiver of a Compactor method, open. NULL with CK_ECLOSED (or a TypeError) pending. */
static ckjs_compactor *open_compactor(napi_env env, napi_value this_arg) {
    ckjs_compactor *self = unwrap_tagged(env, this_arg, &COMPACTOR_TAG, "Compactor");
    if (!self) return NULL;
    if (self->closed || !self->ck) {
        throw_code(env, CK_ECLOSED, MSG_CLOSED);
        return NULL;
    }
    return self;
}

/* The receiver of a Job method with its compaction still held. NULL with an error pending. */
static ckjs_job *live_job(napi_env env, napi_value this_arg) {
    ckjs_job *job = unwrap_tagged(env, this_arg, &JOB_TAG, "Job");
    if (!job) return NULL;
    if (!job->owner || !job->c) {
        throw_code(env, CK_ECLOSED, MSG_RELEASED);
        return NULL;
    }
    if (job->owner->closed) {
        /* The compactor was closed while this job waited: let both go now. */
        NODE_API_CALL(env, job_release(env, job));
        throw_code(env, CK_ECLOSED, MSG_CLOSED);
        return NULL;
    }
    return job;
}

/* ------------------------------------------------------------------------------------------ */
/* new Compactor(options)                                                                     */
/* ------------------------------------------------------------------------------------------ */

typedef struct option_reader {
    napi_env env;
    napi_value obj;
    char name[64]; /* "options.<key>" for messages */
} option_reader;

/* options[key] and its type; a missing key reads as undefined. */
static int read_option(option_reader *r, const char *key, napi_value *value, napi_valuetype *type) {
    snprintf(r->name, sizeof r->name, "options.%s", key);
    NODE_API_CALL_BASE(r->env, napi_get_named_property(r->env, r->obj, key, value), -1);
    NODE_API_CALL_BASE(r->env, napi_typeof(r->env, *value, type), -1);
    if (*type == napi_null) *type = napi_undefined;
    return 0;
}

/* An integer option; absent or null leaves *out as it is (0: the core's default). */
static int integer_option(option_reader *r, const char *key, double min, double max,
                          uint64_t *out) {
    napi_value value;
    napi_valuetype type;
    double v = 0;
    if (read_option(r, key, &value, &type)) return -1;
    if (type == napi_undefined) return 0;
    if (get_integer(r->env, value, r->name, min, max, 0, &v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* A threshold option: a fraction in (0, 1]. The core checks their order. */
static int fraction_option(option_reader *r, const char *key, double *out) {
    napi_value value;
    napi_valuetype type;
    if (read_option(r, key, &value, &type)) return -1;
    if (type == napi_undefined) return 0;
    if (type != napi_number) {
        ckjs_throw_type_error(r->env, "%s must be a number, not %s", r->name,
                              ckjs_type_name(r->env, value));
        return -1;
    }
    NODE_API_CALL_BASE(r->env, napi_get_value_double(r->env, value, out), -1);
    if (!(*out > 0 && *out <= 1)) {
        ckjs_throw_range_error(r->env, "%s must be a fraction of the window in (0, 1]", r->name);
        return -1;
    }
    return 0;
}

/* A string option; absent or null leaves *out NULL. Empty strings are refused. */
static int string_option(option_reader *r, const char *key, char **out) {
    napi_value value;
    napi_valuetype type;
    size_t len = 0;
    if (read_option(r, key, &value, &type)) return -1;
    if (type == napi_undefined) return 0;
    if (get_string(r->env, value, r->name, 1, out, &len)) return -1;
    if (len == 0) {
        ckjs_throw_range_error(r->env, "%s must not be empty", r->name);
        return -1;
    }
    return 0;
}

static int choice_option(option_reader *r, const char *key, const char *const *names, int n,
                         int *out) {
    napi_value value;
    napi_valuetype type;
    if (read_option(r, key, &value, &type)) return -1;
    return ckjs_choice(r->env, type == napi_undefined ? NULL : value, r->name, names, n, *out, out);
}

/* Reads the options object (camelCase keys, as node/index.js passes them on) into `o`, with
 * copies of the strings in *session_id and *store_dir (freed by the caller). */
static int read_options(napi_env env, napi_value obj, ck_compactor_options *o, char **session_id,
                        char **store_dir) {
    option_reader r;
    r.env = env;
    r.obj = obj;
    napi_value value;
    napi_valuetype type;
    int estimator = CK_EST_DEFAULT, format = CK_FORMAT_AUTO;
    if (read_option(&r, "contextWindow", &value, &type)) return -1;
    if (type == napi_undefined) {
        ckjs_throw_type_error(env, "options.contextWindow is required");
        return -1;
    }
    if (integer_option(&r, "contextWindow", 1, MAX_SAFE, &o->context_window) ||
        fraction_option(&r, "warn", &o->warn) || fraction_option(&r, "soft", &o->soft) ||
        fraction_option(&r, "full", &o->full) || fraction_option(&r, "emergency", &o->emergency) ||
        integer_option(&r, "offloadThreshold", 1, MAX_SAFE, &o->offload_threshold) ||
        integer_option(&r, "toolOffloadThreshold", 1, MAX_SAFE, &o->tool_offload_threshold) ||
        integer_option(&r, "summaryMaxTokens", 1, MAX_SAFE, &o->summary_max_tokens))
        return -1;
    uint64_t keep_tail = 0;
    if (integer_option(&r, "keepTail", 1, 4294967295.0, &keep_tail)) return -1;
    o->keep_tail = (uint32_t)keep_tail;
    if (choice_option(&r, "estimator", ckjs_estimator_names, 3, &estimator) ||
        choice_option(&r, "format", ckjs_format_names, 3, &format))
        return -1;
    o->estimator = (ck_estimator)estimator;
    o->format = (ck_format)format;
    if (read_option(&r, "pinFirstUser", &value, &type)) return -1;
    if (type != napi_undefined) {
        bool pin = true;
        if (type != napi_boolean) {
            ckjs_throw_type_error(env, "%s must be a boolean, not %s", r.name,
                                  ckjs_type_name(env, value));
            return -1;
        }
        NODE_API_CALL_BASE(env, napi_get_value_bool(env, value, &pin), -1);
        if (!pin) o->flags |= CK_OPT_NO_PIN_FIRST_USER;
    }
    if (string_option(&r, "sessionId", session_id) || string_option(&r, "storeDir", store_dir))
        return -1;
    o->session_id = *session_id;
    o->store_dir = *store_dir;
    return 0;
}

static napi_value compactor_construct(napi_env env, napi_callback_info info) {
    napi_value this_arg, options;
    if (ckjs_construct_args(env, info, "Compactor", &this_arg, &options)) return NULL;
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    char *session_id = NULL, *store_dir = NULL;
    int failed = read_options(env, options, &o, &session_id, &store_dir);
    ck_error err;
    memset(&err, 0, sizeof err);
    ck_compactor *ck = failed ? NULL : ck_compactor_new(&o, &err);
    free(session_id);
    free(store_dir);
    if (failed) return NULL;
    if (!ck) return ckjs_fail(env, err.code, &err);
    ckjs_compactor *self = calloc(1, sizeof *self);
    if (!self) {
        ck_compactor_free(ck);
        return ckjs_fail(env, CK_ENOMEM, NULL);
    }
    self->ck = ck;
    if (napi_wrap(env, this_arg, self, compactor_finalize, NULL, NULL) != napi_ok) {
        ckjs_throw_last_error(env, "napi_wrap");
        ck_compactor_free(ck);
        free(self);
        return NULL;
    }
    self->wrapped = 1;
    NODE_API_CALL(env, napi_type_tag_object(env, this_arg, &COMPACTOR_TAG));
    return this_arg;
}

/* ------------------------------------------------------------------------------------------ */
/* Compactor methods                                                                          */
/* ------------------------------------------------------------------------------------------ */

/* Undoes a begin() that failed half-way: the compactor is free for the next job, and the
 * struct is freed unless a Job object already owns it (its finalizer frees it then). */
static void job_discard(napi_env env, ckjs_job *job) {
    if (job_release(env, job) != napi_ok) job->owner_ref = NULL;
    if (job->wrapped) return;
    ck_compaction_free(job->c);
    ck_history_free(job->history);
    free(job);
}

/* Wraps a filled job in a new Job object (the constructor takes the struct as an external,
 * which JS code cannot forge). */
static napi_value job_object(napi_env env, ckjs_job *job) {
    ckjs_state *state = ckjs_state_get(env);
    napi_value ctor, external, obj;
    if (!state || !state->job_class) return ckjs_throw_type_error(env, "addon state is missing");
    NODE_API_CALL(env, napi_get_reference_value(env, state->job_class, &ctor));
    NODE_API_CALL(env, napi_create_external(env, job, NULL, NULL, &external));
    NODE_API_CALL(env, napi_new_instance(env, ctor, 1, &external, &obj));
    return obj;
}

/*
 * begin(messages, toolTokens = 0, useModel = true) -> Job. With useModel false there is no
 * summarizer: the compaction is finished at once by the extractive summarizer, as the default
 * rather than as a fallback, and finish() only builds the result.
 */
static napi_value compactor_begin(napi_env env, napi_callback_info info) {
    napi_value argv[3], this_arg;
    if (ckjs_get_args(env, info, argv, 3, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    if (!self) return NULL;
    if (self->job) return throw_code(env, CK_EBUSY, MSG_BUSY);
    bool is_array = false, use_model = true;
    if (argv[0]) NODE_API_CALL(env, napi_is_array(env, argv[0], &is_array));
    if (!is_array)
        return ckjs_throw_type_error(env, "messages must be an array, not %s",
                                     argv[0] ? ckjs_type_name(env, argv[0]) : "undefined");
    double tool_tokens = 0;
    if (get_integer(env, argv[1], "toolTokens", 0, MAX_SAFE, 0, &tool_tokens)) return NULL;
    if (argv[2]) {
        napi_valuetype type;
        NODE_API_CALL(env, napi_typeof(env, argv[2], &type));
        if (type != napi_undefined && type != napi_boolean)
            return ckjs_throw_type_error(env, "useModel must be a boolean, not %s",
                                         ckjs_type_name(env, argv[2]));
        if (type == napi_boolean) NODE_API_CALL(env, napi_get_value_bool(env, argv[2], &use_model));
    }
    ckjs_messages src;
    ck_error err;
    int rc = ckjs_messages_read(env, argv[0], &src, &err);
    if (rc) return ckjs_fail(env, rc, &err);
    /* Only the history is kept: the napi values of the objects die with this call. */
    free(src.objects);
    ckjs_job *job = calloc(1, sizeof *job);
    if (!job) {
        ck_history_free(src.history);
        return ckjs_fail(env, CK_ENOMEM, NULL);
    }
    job->history = src.history;
    job->count = src.count;
    ck_compactor_options o;
    ck_compactor_get_options(self->ck, &o);
    rc = ck_history_format(job->history, o.format, &job->format, &err);
    if (!rc && use_model)
        rc = ck_compactor_begin(self->ck, job->history, (uint64_t)tool_tokens, &job->c, &err);
    else if (!rc)
        rc = ck_compactor_compact(self->ck, job->history, (uint64_t)tool_tokens, NULL, NULL,
                                  &job->c, &err);
    if (rc) {
        job_discard(env, job);
        return ckjs_fail(env, rc, &err);
    }
    job->finished = !use_model;
    job->owner = self;
    self->job = job;
    if (napi_create_reference(env, this_arg, 1, &job->owner_ref) != napi_ok) {
        ckjs_throw_last_error(env, "napi_create_reference");
        job_discard(env, job);
        return NULL;
    }
    napi_value obj = job_object(env, job);
    if (!obj) job_discard(env, job);
    return obj;
}

/* offload(message) -> the message with large tool results replaced by placeholders (a new
 * object), or the very same object when nothing was offloaded. */
static napi_value compactor_offload(napi_env env, napi_callback_info info) {
    napi_value argv[1], this_arg;
    if (ckjs_get_args(env, info, argv, 1, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    if (!self) return NULL;
    napi_valuetype type = napi_undefined;
    bool is_array = false;
    if (argv[0]) {
        NODE_API_CALL(env, napi_typeof(env, argv[0], &type));
        NODE_API_CALL(env, napi_is_array(env, argv[0], &is_array));
    }
    if (type != napi_object || is_array)
        return ckjs_throw_type_error(env, "message must be an object, not %s",
                                     argv[0] ? ckjs_type_name(env, argv[0]) : "undefined");
    ckjs_messages src;
    ck_error err;
    int rc = ckjs_message_read_one(env, argv[0], &src, &err);
    if (rc) return ckjs_fail(env, rc, &err);
    ck_compactor_options o;
    ck_compactor_get_options(self->ck, &o);
    ck_format format = CK_FORMAT_OPENAI;
    ck_view *view = NULL;
    napi_value result = NULL, list;
    /* A store that cannot be written is not an error here (fail-open): the core returns CK_OK
     * with an identity view and fills err, and the message comes back as it was. */
    if ((rc = ck_history_format(src.history, o.format, &format, &err)) ||
        (rc = ck_compactor_offload(self->ck, src.history, 0, &view, &err)))
        ckjs_fail(env, rc, &err);
    else if (ck_view_is_identity(view))
        result = src.objects[0];
    else if ((list = ckjs_view_apply(env, &src, view, format)) &&
             napi_get_element(env, list, 0, &result) != napi_ok) {
        ckjs_throw_last_error(env, "napi_get_element");
        result = NULL;
    }
    ck_view_free(view);
    ckjs_messages_dispose(&src);
    return result;
}

/* readEvidence(ref, offset = 0, limit = 200) -> the text of lines [offset, offset + limit). */
static napi_value compactor_read_evidence(napi_env env, napi_callback_info info) {
    napi_value argv[3], this_arg;
    if (ckjs_get_args(env, info, argv, 3, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    if (!self) return NULL;
    double offset = 0, limit = 0;
    if (get_integer(env, argv[1], "offset", 0, MAX_SAFE, 0, &offset) ||
        get_integer(env, argv[2], "limit", 0, MAX_SAFE, 200, &limit))
        return NULL;
    char *ref = NULL, *text = NULL;
    size_t ref_len = 0, len = 0;
    if (get_string(env, argv[0], "ref", 0, &ref, &ref_len)) return NULL;
    ck_error err;
    int rc = ck_compactor_read_evidence(self->ck, ref, ref_len, (size_t)offset, (size_t)limit,
                                        &text, &len, &err);
    free(ref);
    napi_value result = rc ? ckjs_fail(env, rc, &err) : ckjs_string(env, text, len);
    ck_free(text);
    return result;
}

/* searchEvidence(ref | null, pattern, maxHits = 0) -> [{ref, line, text}]. */
static napi_value compactor_search_evidence(napi_env env, napi_callback_info info) {
    napi_value argv[3], this_arg;
    if (ckjs_get_args(env, info, argv, 3, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    if (!self) return NULL;
    double max_hits = 0;
    if (get_integer(env, argv[2], "maxHits", 0, MAX_SAFE, 0, &max_hits)) return NULL;
    napi_valuetype type = napi_undefined;
    if (argv[0]) NODE_API_CALL(env, napi_typeof(env, argv[0], &type));
    char *ref = NULL, *pattern = NULL, *json = NULL;
    size_t ref_len = 0, pattern_len = 0, len = 0;
    if (type != napi_undefined && type != napi_null &&
        get_string(env, argv[0], "ref", 0, &ref, &ref_len))
        return NULL;
    if (get_string(env, argv[1], "pattern", 1, &pattern, &pattern_len)) {
        free(ref);
        return NULL;
    }
    ck_error err;
    int rc = ck_compactor_search_evidence(self->ck, ref, ref_len, pattern, (size_t)max_hits, &json,
                                          &len, &err);
    free(ref);
    free(pattern);
    napi_value result = NULL;
    if (rc)
        ckjs_fail(env, rc, &err);
    else if (ckjs_json_parse(env, json, len, &result))
        result = NULL;
    ck_free(json);
    return result;
}

/* observeUsage(promptTokens): the provider's count for the last view returned. */
static napi_value compactor_observe_usage(napi_env env, napi_callback_info info) {
    napi_value argv[1], this_arg;
    if (ckjs_get_args(env, info, argv, 1, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    if (!self) return NULL;
    double tokens = 0;
    napi_valuetype type = napi_undefined;
    if (argv[0]) NODE_API_CALL(env, napi_typeof(env, argv[0], &type));
    if (type == napi_undefined)
        return ckjs_throw_type_error(env, "promptTokens must be a number, not undefined");
    if (get_integer(env, argv[0], "promptTokens", 0, MAX_SAFE, 0, &tokens)) return NULL;
    ck_compactor_observe_usage(self->ck, (uint64_t)tokens);
    return undefined_value(env);
}

static napi_value compactor_reset(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    if (!self) return NULL;
    /* A job in progress points into the session state that a reset would free. */
    if (self->job) return throw_code(env, CK_EBUSY, MSG_BUSY);
    ck_compactor_reset(self->ck);
    return undefined_value(env);
}

/* close(): frees the core compactor now, or when the job in progress is released. */
static napi_value compactor_close(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_compactor *self = unwrap_tagged(env, this_arg, &COMPACTOR_TAG, "Compactor");
    if (!self) return NULL;
    self->closed = 1;
    core_free_if_closed(self);
    return undefined_value(env);
}

static napi_value compactor_closed(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_compactor *self = unwrap_tagged(env, this_arg, &COMPACTOR_TAG, "Compactor");
    return self ? bool_value(env, self->closed) : NULL;
}

static napi_value compactor_session_id(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    return self ? cstring_value(env, ck_compactor_session_id(self->ck)) : NULL;
}

static napi_value compactor_usage_factor(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    return self ? number_value(env, ck_compactor_usage_factor(self->ck)) : NULL;
}

/* options: the options in force, defaults filled in, with the names the constructor takes. */
static napi_value compactor_options(napi_env env, napi_callback_info info) {
    napi_value this_arg, obj;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    if (!self) return NULL;
    ck_compactor_options o;
    ck_compactor_get_options(self->ck, &o);
    NODE_API_CALL(env, napi_create_object(env, &obj));
    if (set_value(env, obj, "contextWindow", number_value(env, (double)o.context_window)) ||
        set_value(env, obj, "sessionId", cstring_value(env, o.session_id)) ||
        set_value(env, obj, "storeDir", cstring_value(env, o.store_dir)) ||
        set_value(env, obj, "warn", number_value(env, o.warn)) ||
        set_value(env, obj, "soft", number_value(env, o.soft)) ||
        set_value(env, obj, "full", number_value(env, o.full)) ||
        set_value(env, obj, "emergency", number_value(env, o.emergency)) ||
        set_value(env, obj, "keepTail", number_value(env, o.keep_tail)) ||
        set_value(env, obj, "offloadThreshold", number_value(env, (double)o.offload_threshold)) ||
        set_value(env, obj, "toolOffloadThreshold",
                  number_value(env, (double)o.tool_offload_threshold)) ||
        set_value(env, obj, "summaryMaxTokens", number_value(env, (double)o.summary_max_tokens)) ||
        set_value(env, obj, "estimator", cstring_value(env, ckjs_estimator_names[o.estimator])) ||
        set_value(env, obj, "format", cstring_value(env, ckjs_format_names[o.format])) ||
        set_value(env, obj, "pinFirstUser", bool_value(env, !(o.flags & CK_OPT_NO_PIN_FIRST_USER))))
        return NULL;
    return obj;
}

/* ------------------------------------------------------------------------------------------ */
/* Job                                                                                        */
/* ------------------------------------------------------------------------------------------ */

static napi_value job_construct(napi_env env, napi_callback_info info) {
    napi_value argv[1], this_arg;
    if (ckjs_get_args(env, info, argv, 1, &this_arg)) return NULL;
    napi_valuetype type = napi_undefined;
    if (argv[0]) NODE_API_CALL(env, napi_typeof(env, argv[0], &type));
    if (type != napi_external)
        return ckjs_throw_type_error(env, "Job objects are made by Compactor.begin()");
    void *data = NULL;
    NODE_API_CALL(env, napi_get_value_external(env, argv[0], &data));
    ckjs_job *job = data;
    if (job->wrapped)
        return ckjs_throw_type_error(env, "Job objects are made by Compactor.begin()");
    NODE_API_CALL(env, napi_wrap(env, this_arg, job, job_finalize, NULL, NULL));
    job->wrapped = 1;
    NODE_API_CALL(env, napi_type_tag_object(env, this_arg, &JOB_TAG));
    return this_arg;
}

static napi_value job_needs_summary(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_job *job = unwrap_tagged(env, this_arg, &JOB_TAG, "Job");
    if (!job) return NULL;
    return bool_value(env, job->c && !job->finished && ck_compaction_needs_summary(job->c));
}

/* request() -> {system, prompt, maxTokens, tier, spanStart, spanEnd, previous}; the span
 * indexes the message list given to begin. */
static napi_value job_request(napi_env env, napi_callback_info info) {
    napi_value this_arg, obj;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_job *job = live_job(env, this_arg);
    if (!job) return NULL;
    ck_summary_request req;
    int rc = job->finished ? CK_ESTATE : ck_compaction_request(job->c, &req);
    if (rc) return throw_code(env, rc, "no summary is needed");
    NODE_API_CALL(env, napi_create_object(env, &obj));
    if (set_value(env, obj, "system", ckjs_string(env, req.system, req.system_len)) ||
        set_value(env, obj, "prompt", ckjs_string(env, req.prompt, req.prompt_len)) ||
        set_value(env, obj, "maxTokens", number_value(env, (double)req.max_tokens)) ||
        set_value(env, obj, "tier", cstring_value(env, ck_tier_name(req.tier))) ||
        set_value(env, obj, "spanStart", number_value(env, (double)req.span_start)) ||
        set_value(env, obj, "spanEnd", number_value(env, (double)req.span_end)) ||
        set_value(env, obj, "previous",
                  req.previous ? ckjs_string(env, req.previous, req.previous_len)
                               : null_value(env)))
        return NULL;
    return obj;
}

/* setSummary(text) and setFailure(reason) share everything but the core call. */
static napi_value job_set_text(napi_env env, napi_callback_info info, int failure) {
    napi_value argv[1], this_arg;
    if (ckjs_get_args(env, info, argv, 1, &this_arg)) return NULL;
    ckjs_job *job = live_job(env, this_arg);
    if (!job) return NULL;
    if (job->finished) return throw_code(env, CK_ESTATE, MSG_RELEASED);
    char *text = NULL;
    size_t len = 0;
    if (get_string(env, argv[0], failure ? "reason" : "text", 0, &text, &len)) return NULL;
    int rc = failure ? ck_compaction_set_failure(job->c, text, len)
                     : ck_compaction_set_summary(job->c, text, len);
    free(text);
    if (rc) return ckjs_fail(env, rc, NULL);
    return undefined_value(env);
}

static napi_value job_set_summary(napi_env env, napi_callback_info info) {
    return job_set_text(env, info, 0);
}

static napi_value job_set_failure(napi_env env, napi_callback_info info) {
    return job_set_text(env, info, 1);
}

/* The result object of finish(): {messages, tier, record, tokensBefore, tokensAfter}. */
static napi_value job_result(napi_env env, ckjs_job *job, napi_value snapshot) {
    napi_value obj, messages = NULL;
    ckjs_messages src;
    src.history = job->history;
    src.count = job->count;
    src.objects = malloc((job->count ? job->count : 1) * sizeof *src.objects);
    if (!src.objects) return ckjs_fail(env, CK_ENOMEM, NULL);
    size_t i = 0;
    for (; i < job->count; i++)
        if (napi_get_element(env, snapshot, (uint32_t)i, &src.objects[i]) != napi_ok) break;
    if (i < job->count)
        ckjs_throw_last_error(env, "napi_get_element");
    else
        messages = ckjs_view_apply(env, &src, ck_compaction_view(job->c), job->format);
    free(src.objects);
    if (!messages) return NULL;
    size_t record_len = 0;
    const char *record = ck_compaction_record(job->c, &record_len);
    NODE_API_CALL(env, napi_create_object(env, &obj));
    if (set_value(env, obj, "messages", messages) ||
        set_value(env, obj, "tier", cstring_value(env, ck_tier_name(ck_compaction_tier(job->c)))) ||
        set_value(env, obj, "record",
                  record ? ckjs_string(env, record, record_len) : null_value(env)) ||
        set_value(env, obj, "tokensBefore",
                  number_value(env, (double)ck_compaction_tokens_before(job->c))) ||
        set_value(env, obj, "tokensAfter",
                  number_value(env, (double)ck_compaction_tokens_after(job->c))))
        return NULL;
    return obj;
}

/*
 * finish(snapshot) -> the result. `snapshot` is the very array given to begin (index.js takes
 * it with messages.slice() so the caller cannot change it in between): kept messages are its
 * objects. The job is released afterwards; its result holds everything.
 */
static napi_value job_finish(napi_env env, napi_callback_info info) {
    napi_value argv[1], this_arg;
    if (ckjs_get_args(env, info, argv, 1, &this_arg)) return NULL;
    ckjs_job *job = live_job(env, this_arg);
    if (!job) return NULL;
    bool is_array = false;
    uint32_t n = 0;
    if (argv[0]) NODE_API_CALL(env, napi_is_array(env, argv[0], &is_array));
    if (is_array) NODE_API_CALL(env, napi_get_array_length(env, argv[0], &n));
    if (!is_array || n != job->count)
        return ckjs_throw_type_error(env,
                                     "snapshot must be the array of %zu messages given to "
                                     "begin()",
                                     job->count);
    if (!job->finished) {
        ck_error err;
        int rc = ck_compactor_finish(job->owner->ck, job->c, &err);
        if (rc) return ckjs_fail(env, rc, &err);
        job->finished = 1;
    }
    napi_value result = job_result(env, job, argv[0]);
    if (!result) return NULL;
    NODE_API_CALL(env, job_release(env, job));
    return result;
}

/* free(): releases the compaction without finishing it. Safe to call twice. */
static napi_value job_free(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_job *job = unwrap_tagged(env, this_arg, &JOB_TAG, "Job");
    if (!job) return NULL;
    NODE_API_CALL(env, job_release(env, job));
    return undefined_value(env);
}

/* ------------------------------------------------------------------------------------------ */
/* readEvidenceTool, module setup                                                             */
/* ------------------------------------------------------------------------------------------ */

/* readEvidenceTool(format = 'openai') -> the read_evidence tool definition for a tool list. */
static napi_value read_evidence_tool(napi_env env, napi_callback_info info) {
    static const char *const names[2] = {"openai", "anthropic"};
    napi_value argv[1], result;
    if (ckjs_get_args(env, info, argv, 1, NULL)) return NULL;
    int which = 0;
    if (ckjs_choice(env, argv[0], "format", names, 2, 0, &which)) return NULL;
    const char *json = ck_read_evidence_tool(which ? CK_FORMAT_ANTHROPIC : CK_FORMAT_OPENAI);
    if (ckjs_json_parse(env, json, strlen(json), &result)) return NULL;
    return result;
}

#define METHOD(name, fn) {name, NULL, fn, NULL, NULL, NULL, napi_default_method, NULL}
#define GETTER(name, fn) {name, NULL, NULL, fn, NULL, NULL, napi_configurable, NULL}

int ckjs_compactor_init(napi_env env, napi_value exports) {
    const napi_property_descriptor compactor_props[] = {
        METHOD("begin", compactor_begin),
        METHOD("offload", compactor_offload),
        METHOD("readEvidence", compactor_read_evidence),
        METHOD("searchEvidence", compactor_search_evidence),
        METHOD("observeUsage", compactor_observe_usage),
        METHOD("reset", compactor_reset),
        METHOD("close", compactor_close),
        GETTER("closed", compactor_closed),
        GETTER("sessionId", compactor_session_id),
        GETTER("usageFactor", compactor_usage_factor),
        GETTER("options", compactor_options),
    };
    const napi_property_descriptor job_props[] = {
        GETTER("needsSummary", job_needs_summary),
        METHOD("request", job_request),
        METHOD("setSummary", job_set_summary),
        METHOD("setFailure", job_set_failure),
        METHOD("finish", job_finish),
        METHOD("free", job_free),
    };
    ckjs_state *state = ckjs_state_get(env);
    napi_value compactor_class, job_class, tool_fn;
    if (!state) {
        NODE_API_CALL_RC(env, napi_throw_error(env, NULL, "ctxkeel: addon state is missing"));
        return CKJS_THROWN;
    }
    NODE_API_CALL_RC(env,
                     napi_define_class(env, "Compactor", NAPI_AUTO_LENGTH, compactor_construct,
                                       NULL, sizeof compactor_props / sizeof compactor_props[0],
                                       compactor_props, &compactor_class));
    NODE_API_CALL_RC(env, napi_define_class(env, "Job", NAPI_AUTO_LENGTH, job_construct, NULL,
                                            sizeof job_props / sizeof job_props[0], job_props,
                                            &job_class));
    NODE_API_CALL_RC(env, napi_create_reference(env, job_class, 1, &state->job_class));
    NODE_API_CALL_RC(env, napi_create_function(env, "readEvidenceTool", NAPI_AUTO_LENGTH,
                                               read_evidence_tool, NULL, &tool_fn));
    NODE_API_CALL_RC(env, napi_set_named_property(env, exports, "Compactor", compactor_class));
    NODE_API_CALL_RC(env, napi_set_named_property(env, exports, "readEvidenceTool", tool_fn));
    return CK_OK;
}
