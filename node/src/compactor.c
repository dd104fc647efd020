/*
 * compactor.c - the Compactor class (a ck_compactor wrapped in a JS object), its Job class
 * (one ck_compaction in progress) and readEvidenceTool.
 *
 * node/index.js drives a compaction in steps around one await, so the event loop is never
 * held while a model writes the checkpoint:
 *
 *     job = await native.begin(snapshot, toolTokens, useModel)
 *     if (job.needsSummary) { reply = await summarize(job.request()); job.setSummary(reply) }
 *     result = await job.finish(snapshot)
 *
 * Between the steps the Job owns everything the core reads: the history (whose strings values.c
 * copied into the history's own storage, so nothing is borrowed from V8) and the compaction.
 * The Job holds a reference to its Compactor object so that the compactor outlives it, and a
 * compactor runs one job at a time, because a compaction reads and updates the session state
 * from begin to finish. When the environment is torn down the finalizers may run in any order,
 * so whichever of the two structs is released last frees the core compactor.
 *
 * The methods that reach the core (begin, finish, offload, readEvidence, searchEvidence,
 * answerReadEvidence) are each one "op". With a backend, whose methods may return Promises,
 * every op runs on a libuv worker (napi_async_work) and the method returns a Promise; host.c
 * carries the backend's and the counter's calls to the main thread and back. Without one, the
 * ops of a compaction run on a worker too, so that the event loop never waits for the core's
 * work on a long history nor for the store's writes and fsyncs: begin() reads the messages on
 * the main thread (values.c needs it), then returns a Promise of its Job; finish() returns a
 * Promise when the core's part is left to do (a summarizer's reply to fold in), and builds the
 * view at once when begin() finished the compaction already (see op_threaded()). The other
 * ops without a backend (offload, readEvidence, answerReadEvidence: one message or one file)
 * run at once and the method returns its value (a token counter is then called on this
 * thread). A search always runs on a worker and returns a Promise: it may scan megabytes.
 * Without a backend it leaves the compactor usable (`searches`), since it reads nothing a
 * method changes.
 * While an op runs on a worker the compactor is busy: every other method that would touch the
 * core throws CK_EBUSY, so the core is only ever used by one thread at a time.
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

/*
 * The history of the last begin() that read all its messages, kept for the next one: an agent
 * hands over the same list each turn with a message or two added, and index.js tells begin()
 * how many leading messages are unchanged since (node/unchanged.js), so only the rest is read
 * and copied again. While a job runs, the job holds the history and `history` is NULL; the
 * counts describe whichever holds it. `live` is the bytes of its messages' strings and `taken`
 * the storage its reads took; once the difference (strings of messages dropped since, unused
 * ends of chunks) outgrows what is live by SLACK, the next begin() reads the whole list into a
 * cleared history, so the memory held stays within about twice what the list needs.
 */
typedef struct reuse_cache {
    ck_history *history;
    ckjs_paths paths; /* where the history's values lie in the list (values.c) */
    size_t live, taken;
} reuse_cache;

#define SLACK ((size_t)1 << 20)

typedef struct ckjs_compactor {
    ck_compactor *ck; /* NULL once freed: after close() with no job or op left */
    ckjs_host *host;  /* the backend and the counter, or NULL */
    ckjs_job *job;    /* the live job, if any */
    reuse_cache reuse;
    int running; /* an op is running on a worker thread */
    /* Searches without a backend running on workers. Such a search reads only what the core
     * set up when the compactor was made (see ck_compactor_search_evidence()), so they run
     * beside each other and beside every other method; only freeing the core waits. */
    int searches;
    int closed;  /* close() was called; every later call throws CK_ECLOSED */
    int wrapped; /* the JS object's finalizer has not run yet */
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

/* Frees the core compactor once it is closed and no job or op needs it any more. */
static void core_free_if_closed(ckjs_compactor *self) {
    if (self->closed && !self->job && !self->running && !self->searches && self->ck) {
        ck_compactor_free(self->ck);
        self->ck = NULL;
    }
}

/* Frees the struct once neither its JS object nor a job nor an op refers to it. */
static void compactor_free_if_unused(napi_env env, ckjs_compactor *self) {
    if (self->wrapped || self->job || self->running || self->searches) return;
    ck_compactor_free(self->ck);
    ckjs_host_free(env, self->host);
    ck_history_free(self->reuse.history);
    ckjs_paths_dispose(&self->reuse.paths);
    free(self);
}

/* Bytes of the strings of messages [from, count) of `h`, as the reader copied them (each with
 * its terminator). */
static size_t string_bytes(const ck_history *h, size_t from) {
    size_t bytes = 0, count = ck_history_count(h);
    for (size_t i = from; i < count; i++) {
        const ck_part *parts;
        size_t n = 0;
        ck_history_get(h, i, NULL, NULL, &parts, &n);
        for (size_t k = 0; k < n; k++)
            bytes += parts[k].text_len + parts[k].id_len + parts[k].name_len + 3;
    }
    return bytes;
}

/*
 * The history for a begin() whose list starts with `unchanged` messages that the last one
 * read as well: the kept history cut after them, or an empty one (the kept one cleared when it
 * holds too much that is no longer live). *from says where reading starts. NULL when out of
 * memory.
 */
static ck_history *reuse_take(reuse_cache *cache, size_t unchanged, size_t *from) {
    ck_history *h = cache->history;
    cache->history = NULL;
    *from = 0;
    if (!h) {
        cache->live = cache->taken = 0;
        return ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    }
    if (unchanged > ck_history_count(h)) unchanged = ck_history_count(h);
    cache->live -= string_bytes(h, unchanged);
    if (unchanged == 0 || cache->taken - cache->live > cache->live + SLACK) {
        ck_history_clear(h);
        cache->live = cache->taken = 0;
        return h;
    }
    ck_history_truncate(h, unchanged);
    *from = unchanged;
    return h;
}

/* Keeps a released job's history for the next begin() while the compactor stays open (a job
 * is made only once every message was read); frees it otherwise. */
static void reuse_keep(ckjs_compactor *self, ckjs_job *job) {
    if (!self->closed && !self->reuse.history)
        self->reuse.history = job->history;
    else
        ck_history_free(job->history);
    job->history = NULL;
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
    job->c = NULL;
    reuse_keep(owner, job);
    job->owner = NULL;
    owner->job = NULL;
    napi_status status = napi_ok;
    if (job->owner_ref) status = napi_delete_reference(env, job->owner_ref);
    job->owner_ref = NULL;
    core_free_if_closed(owner);
    compactor_free_if_unused(env, owner);
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
    (void)hint;
    ckjs_compactor *self = data;
    self->wrapped = 0;
    compactor_free_if_unused(env, self);
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
    if (job->owner->running) {
        /* The job's own finish() is running on a worker. */
        throw_code(env, CK_EBUSY, MSG_BUSY);
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

/* The receiver of a method that starts an op: open, and no op running. With a backend, a
 * compaction in progress (begin() to finish()) also makes it busy: its ops would run on a
 * worker beside the job's own. */
static ckjs_compactor *idle_compactor(napi_env env, napi_value this_arg) {
    ckjs_compactor *self = open_compactor(env, this_arg);
    if (!self) return NULL;
    if (self->running || (self->job && ckjs_host_backend(self->host))) {
        throw_code(env, CK_EBUSY, MSG_BUSY);
        return NULL;
    }
    return self;
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

/* A threshold or the target: a fraction in (0, 1]. The core checks their order (and that the
 * target is below soft). */
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

/* options.backendTimeout, seconds: the core's default when absent, checked by the core. */
static int timeout_option(option_reader *r, const char *key, double *out) {
    napi_value value;
    napi_valuetype type;
    double v = 0;
    if (read_option(r, key, &value, &type)) return -1;
    if (type != napi_undefined) {
        if (type != napi_number) {
            ckjs_throw_type_error(r->env, "%s must be a number of seconds, not %s", r->name,
                                  ckjs_type_name(r->env, value));
            return -1;
        }
        NODE_API_CALL_BASE(r->env, napi_get_value_double(r->env, value, &v), -1);
        /* 0 in the core's struct means "the default"; given here it is out of range, which
         * NaN makes the core say. */
        if (v == 0) v = NAN;
    }
    ck_error err;
    if (ck_backend_timeout(v, out, &err) != CK_OK) {
        ckjs_fail(r->env, err.code, &err);
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

static int format_option(option_reader *r, const char *key, ck_format *out) {
    napi_value value;
    napi_valuetype type;
    if (read_option(r, key, &value, &type)) return -1;
    return ckjs_format_arg(r->env, type == napi_undefined ? NULL : value, r->name, out);
}

/* Reads a boolean argument. Returns 0, or -1 with a TypeError naming `what` pending. */
static int get_boolean(napi_env env, napi_value value, const char *what, bool *out) {
    napi_valuetype type;
    NODE_API_CALL_BASE(env, napi_typeof(env, value, &type), -1);
    if (type != napi_boolean) {
        ckjs_throw_type_error(env, "%s must be a boolean, not %s", what,
                              ckjs_type_name(env, value));
        return -1;
    }
    NODE_API_CALL_BASE(env, napi_get_value_bool(env, value, out), -1);
    return 0;
}

/* A boolean option; absent or null leaves *out as it is. */
static int boolean_option(option_reader *r, const char *key, bool *out) {
    napi_value value;
    napi_valuetype type;
    if (read_option(r, key, &value, &type)) return -1;
    return type == napi_undefined ? 0 : get_boolean(r->env, value, r->name, out);
}

/* The own enumerable string keys of an object, in property order. */
static int own_keys(napi_env env, napi_value obj, napi_value *keys, uint32_t *n) {
    NODE_API_CALL_BASE(env,
                       napi_get_all_property_names(env, obj, napi_key_own_only,
                                                   napi_key_enumerable | napi_key_skip_symbols,
                                                   napi_key_numbers_to_strings, keys),
                       -1);
    NODE_API_CALL_BASE(env, napi_get_array_length(env, *keys, n), -1);
    return 0;
}

/* What read_options gathers for ck_compactor_new: copies that the constructor frees once the
 * core has made its own, and the JS values of the host callbacks. */
typedef struct option_store {
    char *session_id, *store_dir, *store;
    ck_retention *retention; /* each `tool` a malloc'd copy */
    size_t n_retention;
    napi_value backend, counter; /* NULL when absent */
} option_store;

static void option_store_dispose(option_store *st) {
    free(st->session_id);
    free(st->store_dir);
    free(st->store);
    for (size_t k = 0; k < st->n_retention; k++)
        free((char *)st->retention[k].tool);
    free(st->retention);
}

/* The keys of a retention policy, in the order of the error message. */
static const char *const POLICY_KEYS[] = {"head", "tail", "errors", "maxBytes", "offload"};
#define N_POLICY_KEYS 5

/* Reads one retention policy object into *p; `where` names it in messages
 * ("options.retention['pytest*']"). A key left out is 0 (maxBytes 0: the gate's cap), and
 * offload defaults to true. Returns 0 or -1 with a TypeError or RangeError pending. */
static int read_policy(napi_env env, napi_value policy, const char *where, ck_retention *p) {
    napi_valuetype type;
    bool is_array = false;
    napi_value keys;
    uint32_t n = 0;
    NODE_API_CALL_BASE(env, napi_typeof(env, policy, &type), -1);
    NODE_API_CALL_BASE(env, napi_is_array(env, policy, &is_array), -1);
    if (type != napi_object || is_array) {
        ckjs_throw_type_error(env, "%s must be a policy object, not %s", where,
                              ckjs_type_name(env, policy));
        return -1;
    }
    if (own_keys(env, policy, &keys, &n)) return -1;
    for (uint32_t i = 0; i < n; i++) {
        napi_value key, value;
        char *name = NULL, what[224];
        size_t len = 0;
        int k = 0;
        NODE_API_CALL_BASE(env, napi_get_element(env, keys, i, &key), -1);
        if (get_string(env, key, where, 0, &name, &len)) return -1;
        while (k < N_POLICY_KEYS && strcmp(name, POLICY_KEYS[k]) != 0)
            k++;
        snprintf(what, sizeof what, "%s.%.60s", where, name);
        free(name);
        if (k == N_POLICY_KEYS) {
            ckjs_throw_range_error(env,
                                   "%s is not a policy key (head, tail, errors, maxBytes, "
                                   "offload)",
                                   what);
            return -1;
        }
        NODE_API_CALL_BASE(env, napi_get_property(env, policy, key, &value), -1);
        double v = 0;
        bool offload = true;
        if (k == 4 ? get_boolean(env, value, what, &offload)
                   : get_integer(env, value, what, 0, k == 3 ? MAX_SAFE : 4294967295.0, 0, &v))
            return -1;
        if (k == 0) p->head = (uint32_t)v;
        if (k == 1) p->tail = (uint32_t)v;
        if (k == 2) p->error_lines = (uint32_t)v;
        if (k == 3) p->max_bytes = (uint64_t)v;
        if (!offload) p->flags |= CK_RETAIN_NEVER_OFFLOAD;
    }
    return 0;
}

/*
 * options.retention: an object of pattern -> policy (property order is match order), or an
 * array of [pattern, policy] pairs. Fills st->retention. Returns 0 or -1 with an error pending
 * that names the place: "options.retention['pytest*'].tail", "options.retention[2][0]".
 */
static int retention_option(option_reader *r, option_store *st) {
    napi_env env = r->env;
    napi_value list, keys = NULL;
    napi_valuetype type;
    bool is_array = false;
    uint32_t n = 0;
    if (read_option(r, "retention", &list, &type)) return -1;
    if (type == napi_undefined) return 0;
    NODE_API_CALL_BASE(env, napi_is_array(env, list, &is_array), -1);
    if (type != napi_object) {
        ckjs_throw_type_error(env,
                              "options.retention must be an object of policies or an "
                              "array of [pattern, policy] pairs, not %s",
                              ckjs_type_name(env, list));
        return -1;
    }
    if (is_array)
        NODE_API_CALL_BASE(env, napi_get_array_length(env, list, &n), -1);
    else if (own_keys(env, list, &keys, &n))
        return -1;
    if (!n) return 0;
    if (!(st->retention = calloc(n, sizeof *st->retention))) {
        ckjs_fail(env, CK_ENOMEM, NULL);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        napi_value pattern, policy, item;
        char where[160], pattern_what[48];
        snprintf(pattern_what, sizeof pattern_what, "an options.retention pattern");
        if (!is_array) {
            NODE_API_CALL_BASE(env, napi_get_element(env, keys, i, &pattern), -1);
            NODE_API_CALL_BASE(env, napi_get_property(env, list, pattern, &policy), -1);
        } else {
            bool pair = false;
            uint32_t len = 0;
            NODE_API_CALL_BASE(env, napi_get_element(env, list, i, &item), -1);
            NODE_API_CALL_BASE(env, napi_is_array(env, item, &pair), -1);
            if (pair) NODE_API_CALL_BASE(env, napi_get_array_length(env, item, &len), -1);
            if (!pair) {
                ckjs_throw_type_error(env,
                                      "options.retention[%u] must be a [pattern, policy] "
                                      "pair, not %s",
                                      i, ckjs_type_name(env, item));
                return -1;
            }
            if (len != 2) {
                ckjs_throw_range_error(env,
                                       "options.retention[%u] must be a [pattern, policy] "
                                       "pair, not an array of %u items",
                                       i, len);
                return -1;
            }
            NODE_API_CALL_BASE(env, napi_get_element(env, item, 0, &pattern), -1);
            NODE_API_CALL_BASE(env, napi_get_element(env, item, 1, &policy), -1);
            snprintf(pattern_what, sizeof pattern_what, "options.retention[%u][0]", i);
        }
        char *tool = NULL;
        size_t len = 0;
        if (get_string(env, pattern, pattern_what, 1, &tool, &len)) return -1;
        st->retention[i].tool = tool;
        st->n_retention = i + 1;
        if (is_array)
            snprintf(where, sizeof where, "options.retention[%u][1]", i);
        else
            snprintf(where, sizeof where, "options.retention['%.100s']", tool);
        if (read_policy(env, policy, where, &st->retention[i])) return -1;
    }
    return 0;
}

/* options.backend: an object with put(key, text) and get(key) methods, or absent. */
static int backend_option(option_reader *r, option_store *st) {
    napi_env env = r->env;
    napi_value backend;
    napi_valuetype type;
    bool is_array = false;
    if (read_option(r, "backend", &backend, &type)) return -1;
    if (type == napi_undefined) return 0;
    NODE_API_CALL_BASE(env, napi_is_array(env, backend, &is_array), -1);
    if (type != napi_object || is_array) {
        ckjs_throw_type_error(env,
                              "options.backend must be an object with put and get "
                              "methods, not %s",
                              ckjs_type_name(env, backend));
        return -1;
    }
    /* The methods are looked up again at each call, as method calls are; here they are
     * only checked. */
    for (int i = 0; i < 2; i++) {
        const char *method = i ? "get" : "put";
        napi_value fn;
        NODE_API_CALL_BASE(env, napi_get_named_property(env, backend, method, &fn), -1);
        NODE_API_CALL_BASE(env, napi_typeof(env, fn, &type), -1);
        if (type != napi_function) {
            ckjs_throw_type_error(env, "options.backend.%s must be a function, not %s", method,
                                  ckjs_type_name(env, fn));
            return -1;
        }
    }
    st->backend = backend;
    return 0;
}

/* options.estimator: a name ('default', 'chars4', 'cl100k') or a token-counting function. */
static int estimator_option(option_reader *r, option_store *st, ck_compactor_options *o) {
    napi_value value;
    napi_valuetype type;
    int estimator = CK_EST_DEFAULT;
    if (read_option(r, "estimator", &value, &type)) return -1;
    if (type == napi_function) {
        st->counter = value;
        return 0;
    }
    if (type != napi_undefined && type != napi_string) {
        ckjs_throw_type_error(r->env,
                              "options.estimator must be 'default', 'chars4', 'cl100k' "
                              "or a function, not %s",
                              ckjs_type_name(r->env, value));
        return -1;
    }
    if (ckjs_choice(r->env, type == napi_undefined ? NULL : value, r->name, ckjs_estimator_names, 3,
                    estimator, &estimator))
        return -1;
    o->estimator = (ck_estimator)estimator;
    return 0;
}

/* Reads the options object (camelCase keys, as node/index.js passes them on) into `o`, with
 * what the core copies kept in `st` (disposed by the caller, whatever the result). */
static int read_options(napi_env env, napi_value obj, ck_compactor_options *o, option_store *st) {
    option_reader r;
    r.env = env;
    r.obj = obj;
    napi_value value;
    napi_valuetype type;
    ck_format format = CK_FORMAT_AUTO;
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
        integer_option(&r, "summaryMaxTokens", 1, MAX_SAFE, &o->summary_max_tokens) ||
        fraction_option(&r, "target", &o->target) ||
        integer_option(&r, "keepTailTokens", 1, MAX_SAFE, &o->keep_tail_tokens) ||
        integer_option(&r, "minGain", 1, MAX_SAFE, &o->min_gain))
        return -1;
    uint64_t keep_tail = 0;
    if (integer_option(&r, "keepTail", 1, 4294967295.0, &keep_tail)) return -1;
    o->keep_tail = (uint32_t)keep_tail;
    if (estimator_option(&r, st, o) || format_option(&r, "format", &format)) return -1;
    o->format = format;
    bool pin = true, marks = false;
    if (boolean_option(&r, "pinFirstUser", &pin) ||
        boolean_option(&r, "cacheBreakpoints", &marks))
        return -1;
    if (!pin) o->flags |= CK_OPT_NO_PIN_FIRST_USER;
    if (marks) o->flags |= CK_OPT_CACHE_BREAKPOINTS;
    if (read_option(&r, "promptCache", &value, &type) ||
        ckjs_prompt_cache_arg(env, value, r.name, &o->cache_read, &o->cache_write))
        return -1;
    if (string_option(&r, "sessionId", &st->session_id) ||
        string_option(&r, "storeDir", &st->store_dir) || string_option(&r, "store", &st->store) ||
        retention_option(&r, st) ||
        backend_option(&r, st) || timeout_option(&r, "backendTimeout", &o->backend_timeout))
        return -1;
    o->session_id = st->session_id;
    o->store_dir = st->store_dir;
    o->store = st->store; /* "s3://...": the core makes its S3 backend from it */
    o->retention = st->retention;
    o->n_retention = st->n_retention;
    return 0;
}

static napi_value compactor_construct(napi_env env, napi_callback_info info) {
    napi_value this_arg, options;
    if (ckjs_construct_args(env, info, "Compactor", &this_arg, &options)) return NULL;
    ck_compactor_options o;
    memset(&o, 0, sizeof o);
    option_store st;
    memset(&st, 0, sizeof st);
    ckjs_host *host = NULL;
    ck_error err;
    memset(&err, 0, sizeof err);
    ck_compactor *ck = NULL;
    int rc = read_options(env, options, &o, &st) ? CKJS_THROWN : CK_OK;
    if (!rc) rc = ckjs_host_new(env, st.backend, st.counter, &host);
    if (!rc) {
        ckjs_host_set_timeout(host, o.backend_timeout);
        /* The core calls the host's callbacks only during the calls that compactor methods
         * make (see host.c), never from ck_compactor_new. */
        o.backend = ckjs_host_backend(host);
        o.counter = ckjs_host_counter(host);
        if (!(ck = ck_compactor_new(&o, &err))) rc = err.code;
    }
    option_store_dispose(&st);
    if (rc) {
        ckjs_host_free(env, host);
        return ckjs_fail(env, rc, &err);
    }
    ckjs_compactor *self = calloc(1, sizeof *self);
    if (!self) {
        ck_compactor_free(ck);
        ckjs_host_free(env, host);
        return ckjs_fail(env, CK_ENOMEM, NULL);
    }
    self->ck = ck;
    self->host = host;
    if (napi_wrap(env, this_arg, self, compactor_finalize, NULL, NULL) != napi_ok) {
        ckjs_throw_last_error(env, "napi_wrap");
        ck_compactor_free(ck);
        ckjs_host_free(env, host);
        free(self);
        return NULL;
    }
    self->wrapped = 1;
    NODE_API_CALL(env, napi_type_tag_object(env, this_arg, &COMPACTOR_TAG));
    return this_arg;
}

/* ------------------------------------------------------------------------------------------ */
/* Jobs in the making                                                                         */
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

/* ------------------------------------------------------------------------------------------ */
/* Ops: a method's work in the core, run at once or on a worker                               */
/* ------------------------------------------------------------------------------------------ */

typedef enum op_kind { OP_BEGIN, OP_FINISH, OP_OFFLOAD, OP_READ, OP_SEARCH, OP_ANSWER } op_kind;

/* One method's work in the core: the inputs it copied, and what the core gave back. Only the
 * main thread uses its napi fields; op_run uses the rest. */
typedef struct compactor_op {
    op_kind kind;
    ckjs_compactor *owner;
    ckjs_job *job;        /* begin: the job being made; finish: the job */
    ckjs_host_call *call; /* the host callbacks' call, or NULL without a host */
    /* On a worker only. */
    napi_async_work work;
    napi_deferred deferred;
    napi_ref this_ref;  /* the receiver (Compactor or Job), kept alive until complete */
    napi_ref input_ref; /* finish: the snapshot; offload: the message */
    /* Inputs. */
    ck_history *history; /* offload: the message as a history (strings copied) */
    ckjs_paths paths;    /* offload: where its values lie (values.c) */
    uint64_t tool_tokens;
    int use_model;
    char *ref, *pattern; /* read, search (ref NULL: the whole session) */
    size_t ref_len, offset, limit, max_hits;
    int shared; /* a search without a backend: counted in `searches`, not `running` */
    char *args; /* answer: the call's arguments as JSON text */
    size_t args_len;
    /* Outputs. */
    int rc; /* a core status, or CKJS_THROWN: the token counter failed */
    ck_error err;
    ck_view *view; /* offload */
    char *text;    /* read: the lines; search: the JSON text; answer: its text (ck_free) */
    size_t len;
    int is_error; /* answer: the text says what was wrong with the call */
} compactor_op;

static napi_value job_result(napi_env env, ckjs_job *job, napi_value snapshot);
static napi_value job_result_object(napi_env env, ckjs_job *job, napi_value messages);

/* begin's core part. With useModel false there is no summarizer: the compaction is finished
 * at once by the extractive summarizer, as the default rather than as a fallback, and
 * finish() only builds the result. */
static int begin_compaction(compactor_op *op) {
    ckjs_job *job = op->job;
    ck_compactor *ck = op->owner->ck;
    int counted = ckjs_host_counter(op->owner->host).count != NULL;
    int rc;
    if (!op->use_model && !counted) {
        rc = ck_compactor_compact(ck, job->history, op->tool_tokens, NULL, NULL, &job->c, &op->err);
        job->finished = !rc;
        return rc;
    }
    rc = ck_compactor_begin(ck, job->history, op->tool_tokens, &job->c, &op->err);
    /* A counter that failed makes the method fail, and a compaction that is not finished
     * leaves the session as it was. */
    if (!rc && ckjs_host_call_count_failed(op->call)) rc = CKJS_THROWN;
    if (!rc && !op->use_model) {
        ck_compaction_use_extractive(job->c);
        rc = ck_compactor_finish(ck, job->c, &op->err);
        job->finished = !rc;
    }
    if (rc) {
        ck_compaction_free(job->c);
        job->c = NULL;
    }
    return rc;
}

/* The common begin, on the main thread: a call that needs only the decision (tier none,
 * nothing to store, no record: ck_compactor_compact_quiet()) is finished here, because a hop
 * to the pool and back costs several times that call (about 0.1 ms against 0.03 ms for a
 * 30-message history). Only without a backend or a token counter, which are host code; any
 * other call, and an error, are left to the worker, which does the call in full. Returns
 * whether the job is finished. */
static int begin_quietly(compactor_op *op) {
    if (ckjs_host_counter(op->owner->host).count != NULL) return 0;
    ck_compaction *c = NULL;
    ck_error err;
    if (ck_compactor_compact_quiet(op->owner->ck, op->job->history, op->tool_tokens, &c,
                                   &err) != CK_OK || !c)
        return 0;
    op->job->c = c;
    op->job->finished = 1;
    op->rc = CK_OK;
    return 1;
}

/*
 * The core part of an op. On a worker thread it must not call napi_* nor touch a JS value, and
 * it does not: it calls only the core, on the copies the method made; the core's calls to the
 * backend and the counter go through host.c, which takes them to the main thread.
 */
static void op_run(compactor_op *op) {
    ck_compactor *ck = op->owner->ck;
    memset(&op->err, 0, sizeof op->err);
    op->err.index = CK_NONE;
    switch (op->kind) {
        case OP_BEGIN: op->rc = begin_compaction(op); break;
        case OP_FINISH:
            op->rc = op->job->finished ? CK_OK : ck_compactor_finish(ck, op->job->c, &op->err);
            if (!op->rc) op->job->finished = 1;
            break;
        case OP_OFFLOAD:
            /* A store that cannot be written is not an error here (fail-open): the core
             * returns CK_OK with an identity view and fills err. */
            op->rc = ck_compactor_offload(ck, op->history, 0, &op->view, &op->err);
            break;
        case OP_READ:
            op->rc = ck_compactor_read_evidence(ck, op->ref, op->ref_len, op->offset, op->limit,
                                                &op->text, &op->len, &op->err);
            break;
        case OP_SEARCH:
            op->rc = ck_compactor_search_evidence(ck, op->ref, op->ref_len, op->pattern,
                                                  op->max_hits, &op->text, &op->len, &op->err);
            break;
        case OP_ANSWER:
            /* Fails only for want of memory; a bad call is answered in words. */
            op->rc = ck_compactor_answer_read_evidence(ck, op->args, op->args_len, &op->text,
                                                       &op->len, &op->is_error);
            break;
    }
}

/* The JS result of an op that succeeded, built from `input` (finish: the snapshot; offload:
 * the message). NULL with an exception pending on failure. */
static napi_value op_result(napi_env env, compactor_op *op, napi_value input) {
    napi_value result = NULL, list;
    switch (op->kind) {
        case OP_BEGIN: return job_object(env, op->job);
        case OP_FINISH:
            result = job_result(env, op->job, input);
            if (result) NODE_API_CALL(env, job_release(env, op->job));
            return result;
        case OP_OFFLOAD: {
            if (ck_view_is_identity(op->view)) return input;
            ckjs_values values;
            ckjs_values_init(&values, env, op->history, &op->paths);
            NODE_API_CALL(env, napi_create_array_with_length(env, 1, &list));
            NODE_API_CALL(env, napi_set_element(env, list, 0, input));
            if (!(list = ckjs_values_build(&values, list, op->view))) return NULL;
            NODE_API_CALL(env, napi_get_element(env, list, 0, &result));
            return result;
        }
        case OP_READ: return ckjs_string(env, op->text, op->len);
        case OP_SEARCH: return ckjs_json_parse(env, op->text, op->len, &result) ? NULL : result;
        case OP_ANSWER:
            NODE_API_CALL(env, napi_create_object(env, &result));
            if (set_value(env, result, "text", ckjs_string(env, op->text, op->len)) ||
                set_value(env, result, "isError", bool_value(env, op->is_error)))
                return NULL;
            return result;
    }
    return NULL;
}

/*
 * Ends the op's host call and gives its outcome (main thread): the result, with *ok set, or
 * the error to throw or reject with: what the counter threw, else the core's error, whose
 * `cause` is what the backend threw or rejected with. NULL if even the error cannot be made.
 */
static napi_value op_outcome(napi_env env, compactor_op *op, napi_value input, bool *ok) {
    napi_value count_error, backend_error, result;
    ckjs_host_call_end(env, op->call, &count_error, &backend_error);
    op->call = NULL;
    *ok = false;
    if (count_error) return count_error;
    if (op->rc == CKJS_THROWN)
        throw_code(env, CK_EIO, "the token counter failed");
    else if (op->rc)
        ckjs_fail(env, op->rc, &op->err);
    else if ((result = op_result(env, op, input))) {
        *ok = true;
        return result;
    }
    napi_value error = ckjs_take_exception(env);
    if (error && backend_error &&
        napi_set_named_property(env, error, "cause", backend_error) != napi_ok)
        ckjs_take_exception(env);
    return error;
}

/* Releases what the op holds; a begin that failed gives its job up. */
static void op_dispose(napi_env env, compactor_op *op, bool ok) {
    ckjs_host_call_end(env, op->call, NULL, NULL);
    op->call = NULL;
    if (op->kind == OP_BEGIN && !ok) job_discard(env, op->job);
    ck_history_free(op->history);
    ckjs_paths_dispose(&op->paths);
    ck_view_free(op->view);
    ck_free(op->text);
    free(op->ref);
    free(op->pattern);
    free(op->args);
}

static void op_execute(napi_env env, void *data) {
    (void)env;
    op_run(data);
}

/*
 * Runs on the main thread when a worker's op is over. It always settles the promise, deletes
 * the work item and the references and frees the op, whatever fails on the way; it calls no
 * user code (the backend and the counter were called while the op ran).
 */
static void op_complete(napi_env env, napi_status status, void *data) {
    compactor_op *op = data;
    ckjs_compactor *owner = op->owner;
    if (op->shared)
        owner->searches--;
    else
        owner->running = 0;
    if (status != napi_ok) op->rc = status == napi_cancelled ? CK_ECANCELED : CK_EIO;
    napi_value input = NULL, value;
    if (op->input_ref && napi_get_reference_value(env, op->input_ref, &input) != napi_ok)
        input = NULL;
    bool ok = false;
    value = op_outcome(env, op, input, &ok);
    if (!value && napi_get_undefined(env, &value) != napi_ok) value = NULL;
    napi_status settled = napi_generic_failure;
    if (value) {
        settled = ok ? napi_resolve_deferred(env, op->deferred, value)
                     : napi_reject_deferred(env, op->deferred, value);
    }
    /* A promise that cannot be settled (the environment is going away) has no one left to
     * tell; throwing here would be fatal. The cleanup happens regardless. */
    if (settled != napi_ok) op->deferred = NULL;
    op_dispose(env, op, ok);
    if (napi_delete_async_work(env, op->work) != napi_ok) op->work = NULL;
    napi_ref refs[2] = {op->input_ref, op->this_ref};
    for (int i = 0; i < 2; i++)
        if (refs[i] && napi_delete_reference(env, refs[i]) != napi_ok) continue;
    core_free_if_closed(owner);
    compactor_free_if_unused(env, owner);
    free(op);
}

/* Queues a copy of `tmpl` on the thread pool; returns its promise, or NULL with an exception
 * pending (and `tmpl` disposed). */
static napi_value op_queue(napi_env env, compactor_op *tmpl, napi_value this_arg,
                           napi_value input) {
    compactor_op *op = malloc(sizeof *op);
    if (!op) {
        op_dispose(env, tmpl, false);
        return ckjs_fail(env, CK_ENOMEM, NULL);
    }
    *op = *tmpl;
    napi_value promise, resource;
    if (napi_create_reference(env, this_arg, 1, &op->this_ref) != napi_ok ||
        (input && napi_create_reference(env, input, 1, &op->input_ref) != napi_ok) ||
        napi_create_string_utf8(env, "ctxkeel.Compactor", NAPI_AUTO_LENGTH, &resource) != napi_ok ||
        napi_create_async_work(env, NULL, resource, op_execute, op_complete, op, &op->work) !=
            napi_ok ||
        napi_create_promise(env, &op->deferred, &promise) != napi_ok ||
        napi_queue_async_work(env, op->work) != napi_ok) {
        ckjs_throw_last_error(env, "starting the work");
        /* The promise, if made, was never handed out; an unsettled deferred is only leaked. */
        if (op->work && napi_delete_async_work(env, op->work) != napi_ok) op->work = NULL;
        napi_ref refs[2] = {op->input_ref, op->this_ref};
        for (int i = 0; i < 2; i++)
            if (refs[i] && napi_delete_reference(env, refs[i]) != napi_ok) continue;
        op_dispose(env, op, false);
        free(op);
        return NULL;
    }
    if (op->shared)
        op->owner->searches++;
    else
        op->owner->running = 1;
    return promise;
}

/*
 * Whether an op runs on a worker: every op with a backend; without one, a search, a begin
 * (but the common one, begin_quietly()), and a finish that still has the core's part to do
 * (the store writes of a compaction, its extractive summary, the session update). A finish
 * whose compaction was completed in begin (no summarizer) only builds the view, which reads JS
 * values: one hop to the pool and back would only add its latency then.
 */
static int op_threaded(const compactor_op *op, int backend) {
    if (backend) return 1;
    switch (op->kind) {
        case OP_SEARCH:
        case OP_BEGIN: return 1;
        case OP_FINISH: return !op->job->finished;
        default: return 0;
    }
}

/*
 * Runs an op from a method: on a worker when op_threaded() says so, returning a Promise of
 * the result; otherwise at once, returning the result or throwing. `tmpl` is filled by the
 * method and always disposed; `input` is what finish and offload build their results from.
 * A search may scan megabytes and a compaction writes the store and summarizes a history of
 * thousands of messages, so neither runs on the event loop.
 */
static napi_value op_launch(napi_env env, compactor_op *tmpl, napi_value this_arg,
                            napi_value input) {
    int backend = ckjs_host_backend(tmpl->owner->host) != NULL;
    int threaded = op_threaded(tmpl, backend);
    int done = threaded && tmpl->kind == OP_BEGIN && !backend && begin_quietly(tmpl);
    if (done) threaded = 0;
    tmpl->shared = !backend && tmpl->kind == OP_SEARCH;
    int rc = ckjs_host_call_start(env, tmpl->owner->host, threaded, &tmpl->call);
    if (rc) {
        op_dispose(env, tmpl, false);
        return ckjs_fail(env, rc, NULL);
    }
    if (threaded) return op_queue(env, tmpl, this_arg, input);
    if (!done) op_run(tmpl);
    bool ok = false;
    napi_value value = op_outcome(env, tmpl, input, &ok);
    op_dispose(env, tmpl, ok);
    if (done && value) {
        /* begin's result is a Promise either way. */
        napi_deferred deferred;
        napi_value promise;
        NODE_API_CALL(env, napi_create_promise(env, &deferred, &promise));
        NODE_API_CALL(env, ok ? napi_resolve_deferred(env, deferred, value)
                              : napi_reject_deferred(env, deferred, value));
        return promise;
    }
    if (ok) return value;
    if (value) NODE_API_CALL(env, napi_throw(env, value));
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Compactor methods                                                                          */
/* ------------------------------------------------------------------------------------------ */

/*
 * begin(messages, toolTokens = 0, useModel = true, unchanged = 0) -> a Promise of a Job: the
 * messages are read (and a bad one thrown) at once, the core runs on a worker (the common call
 * at once: begin_quietly(), the Promise then settled already). With useModel
 * false the compaction is finished at once (see
 * begin_compaction()). `unchanged` says how many leading messages are, field for field, those
 * the last begin() of this compactor read (index.js checks that); they are not read again.
 * A wrong count would make the view of stale messages, so 0, which reads every message, is
 * what a caller that has not checked must pass. With `vouched` true the count is trusted in
 * every dialect: the messages are a session's (append()), which never change once read.
 */
static napi_value compactor_begin(napi_env env, napi_callback_info info) {
    napi_value argv[5], this_arg;
    if (ckjs_get_args(env, info, argv, 5, &this_arg)) return NULL;
    ckjs_compactor *self = idle_compactor(env, this_arg);
    if (!self) return NULL;
    if (self->job) return throw_code(env, CK_EBUSY, MSG_BUSY);
    bool is_array = false, use_model = true;
    if (argv[0]) NODE_API_CALL(env, napi_is_array(env, argv[0], &is_array));
    if (!is_array)
        return ckjs_throw_type_error(env, "messages must be an array, not %s",
                                     argv[0] ? ckjs_type_name(env, argv[0]) : "undefined");
    double tool_tokens = 0, unchanged = 0;
    bool vouched = false;
    if (get_integer(env, argv[1], "toolTokens", 0, MAX_SAFE, 0, &tool_tokens) ||
        get_integer(env, argv[3], "unchanged", 0, MAX_SAFE, 0, &unchanged) ||
        (argv[4] && get_boolean(env, argv[4], "vouched", &vouched)))
        return NULL;
    if (argv[2]) {
        napi_valuetype type;
        NODE_API_CALL(env, napi_typeof(env, argv[2], &type));
        if (type != napi_undefined && type != napi_boolean)
            return ckjs_throw_type_error(env, "useModel must be a boolean, not %s",
                                         ckjs_type_name(env, argv[2]));
        if (type == napi_boolean) NODE_API_CALL(env, napi_get_value_bool(env, argv[2], &use_model));
    }
    /* Only the history is kept: the napi values of the objects die with this call. The
     * history owns copies of every string, so a worker may read it. */
    size_t from = 0;
    /* unchanged.js follows the fields the OpenAI and Anthropic readers take; a history of
     * another dialect is read again whole rather than trusted on a weaker check. */
    ck_format kept = self->reuse.history ? ck_history_dialect(self->reuse.history)
                                         : CK_FORMAT_AUTO;
    if (!vouched && kept != CK_FORMAT_OPENAI && kept != CK_FORMAT_ANTHROPIC) unchanged = 0;
    ck_history *history = reuse_take(&self->reuse, (size_t)unchanged, &from);
    ck_compactor_options o;
    ck_compactor_get_options(self->ck, &o);
    ck_error err;
    ck_format format = CK_FORMAT_OPENAI;
    ckjs_values values;
    ckjs_values_init(&values, env, history, &self->reuse.paths);
    int rc = history ? ckjs_values_read(&values, argv[0], from, o.format, &format, &err)
                     : CK_ENOMEM;
    size_t taken = values.taken;
    ckjs_job *job = rc ? NULL : calloc(1, sizeof *job);
    if (!job) {
        ck_history_free(history);
        return ckjs_fail(env, rc ? rc : CK_ENOMEM, rc ? &err : NULL);
    }
    self->reuse.taken += taken;
    self->reuse.live += string_bytes(history, from);
    job->history = history;
    job->count = ck_history_count(history);
    job->owner = self;
    self->job = job;
    job->format = format;
    if (napi_create_reference(env, this_arg, 1, &job->owner_ref) != napi_ok) {
        ckjs_throw_last_error(env, "napi_create_reference");
        job_discard(env, job);
        return NULL;
    }
    compactor_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_BEGIN;
    op.owner = self;
    op.job = job;
    op.tool_tokens = (uint64_t)tool_tokens;
    op.use_model = use_model;
    return op_launch(env, &op, this_arg, NULL);
}

/*
 * read(messages, from): reads messages [from, n) of the array into the kept history, the one
 * the next begin() takes (index.js's append-only session: `messages` is the session, of which
 * the kept history holds the first `from` when index.js says so; with no history kept, or one
 * that holds fewer, every message is read). A bad message throws, naming its index, and the
 * kept history then holds the messages before it.
 */
static napi_value compactor_read(napi_env env, napi_callback_info info) {
    napi_value argv[2], this_arg;
    if (ckjs_get_args(env, info, argv, 2, &this_arg)) return NULL;
    ckjs_compactor *self = idle_compactor(env, this_arg);
    if (!self) return NULL;
    if (self->job) return throw_code(env, CK_EBUSY, MSG_BUSY);
    bool is_array = false;
    if (argv[0]) NODE_API_CALL(env, napi_is_array(env, argv[0], &is_array));
    if (!is_array)
        return ckjs_throw_type_error(env, "messages must be an array, not %s",
                                     argv[0] ? ckjs_type_name(env, argv[0]) : "undefined");
    double asked = 0;
    if (get_integer(env, argv[1], "from", 0, MAX_SAFE, 0, &asked)) return NULL;
    size_t from = 0;
    ck_history *history = reuse_take(&self->reuse, (size_t)asked, &from);
    if (!history) return ckjs_fail(env, CK_ENOMEM, NULL);
    ck_compactor_options o;
    ck_compactor_get_options(self->ck, &o);
    ck_error err;
    ckjs_values values;
    ckjs_values_init(&values, env, history, &self->reuse.paths);
    int rc = ckjs_values_read(&values, argv[0], from, o.format, NULL, &err);
    self->reuse.taken += values.taken;
    self->reuse.live += string_bytes(history, from);
    self->reuse.history = history;
    if (rc) return ckjs_fail(env, rc, &err);
    napi_value undefined;
    NODE_API_CALL(env, napi_get_undefined(env, &undefined));
    return undefined;
}

/* offload(message) -> the message with large tool results replaced by placeholders (a new
 * object), or the very same object when nothing was offloaded (a Promise with a backend). */
static napi_value compactor_offload(napi_env env, napi_callback_info info) {
    napi_value argv[1], this_arg;
    if (ckjs_get_args(env, info, argv, 1, &this_arg)) return NULL;
    ckjs_compactor *self = idle_compactor(env, this_arg);
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
    compactor_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_OFFLOAD;
    op.owner = self;
    if (!(op.history = ck_history_new(CK_HISTORY_TRUSTED_UTF8)))
        return ckjs_fail(env, CK_ENOMEM, NULL);
    ck_compactor_options o;
    ck_compactor_get_options(self->ck, &o);
    ck_error err;
    ckjs_values values;
    napi_value list;
    ckjs_values_init(&values, env, op.history, &op.paths);
    int rc = ckjs_values_read_one(&values, argv[0], &list, o.format, NULL, &err);
    if (rc) {
        ck_history_free(op.history);
        ckjs_paths_dispose(&op.paths);
        return ckjs_fail(env, rc, &err);
    }
    return op_launch(env, &op, this_arg, argv[0]);
}

/* readEvidence(ref, offset = 0, limit = 200) -> the text of lines [offset, offset + limit)
 * (a Promise with a backend). */
static napi_value compactor_read_evidence(napi_env env, napi_callback_info info) {
    napi_value argv[3], this_arg;
    if (ckjs_get_args(env, info, argv, 3, &this_arg)) return NULL;
    ckjs_compactor *self = idle_compactor(env, this_arg);
    if (!self) return NULL;
    double offset = 0, limit = 0;
    if (get_integer(env, argv[1], "offset", 0, MAX_SAFE, 0, &offset) ||
        get_integer(env, argv[2], "limit", 0, MAX_SAFE, 200, &limit))
        return NULL;
    compactor_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_READ;
    op.owner = self;
    op.offset = (size_t)offset;
    op.limit = (size_t)limit;
    if (get_string(env, argv[0], "ref", 0, &op.ref, &op.ref_len)) return NULL;
    return op_launch(env, &op, this_arg, NULL);
}

/* searchEvidence(ref | null, pattern, maxHits = 0) -> a Promise of [{ref, line, text}]: the
 * search runs on the libuv pool. Without a backend the compactor stays usable meanwhile
 * (see `searches`); with one it is busy (CK_EBUSY) until the search is done. */
static napi_value compactor_search_evidence(napi_env env, napi_callback_info info) {
    napi_value argv[3], this_arg;
    if (ckjs_get_args(env, info, argv, 3, &this_arg)) return NULL;
    ckjs_compactor *self = idle_compactor(env, this_arg);
    if (!self) return NULL;
    double max_hits = 0;
    if (get_integer(env, argv[2], "maxHits", 0, MAX_SAFE, 0, &max_hits)) return NULL;
    napi_valuetype type = napi_undefined;
    if (argv[0]) NODE_API_CALL(env, napi_typeof(env, argv[0], &type));
    compactor_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_SEARCH;
    op.owner = self;
    op.max_hits = (size_t)max_hits;
    size_t pattern_len = 0;
    if (type != napi_undefined && type != napi_null &&
        get_string(env, argv[0], "ref", 0, &op.ref, &op.ref_len))
        return NULL;
    if (get_string(env, argv[1], "pattern", 1, &op.pattern, &pattern_len)) {
        free(op.ref);
        return NULL;
    }
    return op_launch(env, &op, this_arg, NULL);
}

/* cancelBackend(): the operation running on a worker was aborted (compact()'s AbortSignal):
 * it stops waiting for the backend, whose calls fail (fail-open) until the operation ends. */
static napi_value compactor_cancel_backend(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_compactor *self = unwrap_tagged(env, this_arg, &COMPACTOR_TAG, "Compactor");
    if (!self) return NULL;
    ckjs_host_cancel(self->host);
    return undefined_value(env);
}

/* answerReadEvidence(args) -> {text, isError}: the core's answer to a model's read_evidence
 * call whose arguments are the JSON text `args` ("" means {}): the lines read, the matches
 * found, or what was wrong with the call (a Promise with a backend). */
static napi_value compactor_answer_read_evidence(napi_env env, napi_callback_info info) {
    napi_value argv[1], this_arg;
    if (ckjs_get_args(env, info, argv, 1, &this_arg)) return NULL;
    ckjs_compactor *self = idle_compactor(env, this_arg);
    if (!self) return NULL;
    compactor_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_ANSWER;
    op.owner = self;
    if (get_string(env, argv[0], "args", 0, &op.args, &op.args_len)) return NULL;
    return op_launch(env, &op, this_arg, NULL);
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
    if (self->running) return throw_code(env, CK_EBUSY, MSG_BUSY);
    ck_compactor_observe_usage(self->ck, (uint64_t)tokens);
    return undefined_value(env);
}

static napi_value compactor_reset(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_compactor *self = open_compactor(env, this_arg);
    if (!self) return NULL;
    /* A job in progress points into the session state that a reset would free. */
    if (self->job || self->running) return throw_code(env, CK_EBUSY, MSG_BUSY);
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
    ck_history_free(self->reuse.history);
    self->reuse.history = NULL;
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

/* The retention policies in force as [pattern, {head, tail, errors, maxBytes, offload}] pairs,
 * the array form the constructor takes. */
static napi_value retention_value(napi_env env, const ck_compactor_options *o) {
    napi_value list, pair, policy;
    NODE_API_CALL(env, napi_create_array_with_length(env, o->n_retention, &list));
    for (size_t k = 0; k < o->n_retention; k++) {
        const ck_retention *p = &o->retention[k];
        NODE_API_CALL(env, napi_create_array_with_length(env, 2, &pair));
        NODE_API_CALL(env, napi_create_object(env, &policy));
        if (set_value(env, policy, "head", number_value(env, p->head)) ||
            set_value(env, policy, "tail", number_value(env, p->tail)) ||
            set_value(env, policy, "errors", number_value(env, p->error_lines)) ||
            set_value(env, policy, "maxBytes", number_value(env, (double)p->max_bytes)) ||
            set_value(env, policy, "offload",
                      bool_value(env, !(p->flags & CK_RETAIN_NEVER_OFFLOAD))))
            return NULL;
        napi_value tool = cstring_value(env, p->tool ? p->tool : "*");
        if (!tool) return NULL;
        NODE_API_CALL(env, napi_set_element(env, pair, 0, tool));
        NODE_API_CALL(env, napi_set_element(env, pair, 1, policy));
        NODE_API_CALL(env, napi_set_element(env, list, (uint32_t)k, pair));
    }
    return list;
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
        set_value(env, obj, "store", o.store ? cstring_value(env, o.store) : null_value(env)) ||
        set_value(env, obj, "warn", number_value(env, o.warn)) ||
        set_value(env, obj, "soft", number_value(env, o.soft)) ||
        set_value(env, obj, "full", number_value(env, o.full)) ||
        set_value(env, obj, "emergency", number_value(env, o.emergency)) ||
        set_value(env, obj, "keepTail", number_value(env, o.keep_tail)) ||
        set_value(env, obj, "offloadThreshold", number_value(env, (double)o.offload_threshold)) ||
        set_value(env, obj, "toolOffloadThreshold",
                  number_value(env, (double)o.tool_offload_threshold)) ||
        set_value(env, obj, "summaryMaxTokens", number_value(env, (double)o.summary_max_tokens)) ||
        set_value(env, obj, "target", number_value(env, o.target)) ||
        set_value(env, obj, "keepTailTokens", number_value(env, (double)o.keep_tail_tokens)) ||
        set_value(env, obj, "estimator", cstring_value(env, ckjs_estimator_names[o.estimator])) ||
        set_value(env, obj, "format", cstring_value(env, ck_format_name(o.format))) ||
        set_value(env, obj, "pinFirstUser",
                  bool_value(env, !(o.flags & CK_OPT_NO_PIN_FIRST_USER))) ||
        set_value(env, obj, "backendTimeout", number_value(env, o.backend_timeout)) ||
        set_value(env, obj, "minGain", number_value(env, (double)o.min_gain)) ||
        set_value(env, obj, "cacheBreakpoints",
                  bool_value(env, (o.flags & CK_OPT_CACHE_BREAKPOINTS) != 0)))
        return NULL;
    napi_value prices = null_value(env);
    if (prices && o.cache_read != 0) {
        NODE_API_CALL(env, napi_create_object(env, &prices));
        if (set_value(env, prices, "read", number_value(env, o.cache_read)) ||
            set_value(env, prices, "write", number_value(env, o.cache_write)))
            return NULL;
    }
    if (set_value(env, obj, "promptCache", prices)) return NULL;
    return o.n_retention && set_value(env, obj, "retention", retention_value(env, &o)) ? NULL : obj;
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
    int idle = job->owner && !job->owner->running;
    return bool_value(env, idle && job->c && !job->finished && ck_compaction_needs_summary(job->c));
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
    napi_value messages = NULL;
    const ck_view *view = ck_compaction_view(job->c);
    /* Every message kept, in order: the view is the snapshot itself (a copy the caller never
     * sees), so it is not rebuilt element by element. */
    uint32_t length = 0;
    NODE_API_CALL(env, napi_get_array_length(env, snapshot, &length));
    if (length == job->count && ck_view_count(view) == job->count && ck_view_is_identity(view))
        return job_result_object(env, job, snapshot);
    ckjs_values values;
    ckjs_values_init(&values, env, job->history, &job->owner->reuse.paths);
    if (!(messages = ckjs_values_build(&values, snapshot, view))) return NULL;
    return job_result_object(env, job, messages);
}

/* The repairs of a compaction as [{kind, index, toolCallId}], in message order; `index` is
 * the message's index in the list given to begin. */
static napi_value repairs_value(napi_env env, const ck_compaction *c) {
    size_t n = 0;
    const ck_repair *repairs = ck_compaction_repairs(c, &n);
    napi_value list, item;
    NODE_API_CALL(env, napi_create_array_with_length(env, n, &list));
    for (size_t k = 0; k < n; k++) {
        const char *kind = ck_repair_kind_name(repairs[k].kind);
        NODE_API_CALL(env, napi_create_object(env, &item));
        if (set_value(env, item, "kind", kind ? cstring_value(env, kind) : null_value(env)) ||
            set_value(env, item, "index", number_value(env, (double)repairs[k].index)) ||
            set_value(env, item, "toolCallId", ckjs_string(env, repairs[k].id, repairs[k].id_len)))
            return NULL;
        NODE_API_CALL(env, napi_set_element(env, list, (uint32_t)k, item));
    }
    return list;
}

/* The result object of finish() around its message list: {messages, tier, record (JSON text
 * or null), tokensBefore, tokensAfter, ratioBefore, ratioAfter, repairs, prefixKept,
 * prefixBroken}. */
static napi_value job_result_object(napi_env env, ckjs_job *job, napi_value messages) {
    napi_value obj;
    size_t record_len = 0;
    const char *record = ck_compaction_record(job->c, &record_len);
    uint64_t kept, broken;
    ck_compaction_cache(job->c, &kept, &broken);
    NODE_API_CALL(env, napi_create_object(env, &obj));
    if (set_value(env, obj, "messages", messages) ||
        set_value(env, obj, "tier", cstring_value(env, ck_tier_name(ck_compaction_tier(job->c)))) ||
        set_value(env, obj, "record",
                  record ? ckjs_string(env, record, record_len) : null_value(env)) ||
        set_value(env, obj, "tokensBefore",
                  number_value(env, (double)ck_compaction_tokens_before(job->c))) ||
        set_value(env, obj, "tokensAfter",
                  number_value(env, (double)ck_compaction_tokens_after(job->c))) ||
        set_value(env, obj, "ratioBefore", number_value(env, ck_compaction_ratio_before(job->c))) ||
        set_value(env, obj, "ratioAfter", number_value(env, ck_compaction_ratio_after(job->c))) ||
        set_value(env, obj, "repairs", repairs_value(env, job->c)) ||
        set_value(env, obj, "prefixKept", number_value(env, (double)kept)) ||
        set_value(env, obj, "prefixBroken", number_value(env, (double)broken)))
        return NULL;
    return obj;
}

/*
 * finish(snapshot) -> the result, or a Promise of it (see op_threaded()). `snapshot` is the very array
 * given to begin (index.js takes it with messages.slice() so the caller cannot change it in
 * between): kept messages are its objects, and when every message is kept in order, the result
 * list is the snapshot itself. The job is released afterwards; its result holds everything.
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
    compactor_op op;
    memset(&op, 0, sizeof op);
    op.kind = OP_FINISH;
    op.owner = job->owner;
    op.job = job;
    return op_launch(env, &op, this_arg, argv[0]);
}

/* free(): releases the compaction without finishing it. Safe to call twice. */
static napi_value job_free(napi_env env, napi_callback_info info) {
    napi_value this_arg;
    if (ckjs_get_args(env, info, NULL, 0, &this_arg)) return NULL;
    ckjs_job *job = unwrap_tagged(env, this_arg, &JOB_TAG, "Job");
    if (!job) return NULL;
    if (job->owner && job->owner->running) return throw_code(env, CK_EBUSY, MSG_BUSY);
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
        METHOD("read", compactor_read),
        METHOD("offload", compactor_offload),
        METHOD("readEvidence", compactor_read_evidence),
        METHOD("searchEvidence", compactor_search_evidence),
        METHOD("cancelBackend", compactor_cancel_backend),
        METHOD("answerReadEvidence", compactor_answer_read_evidence),
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
