/*
 * compactor.c - the Compactor and Compaction types of ctxkeel._ext.
 *
 * _ext.Compactor owns a ck_compactor: the options, the session state and the evidence store of
 * one agent session. A compaction is split into steps so that the summarizer, which is Python
 * code (a plain function or a coroutine, run with a timeout by ctxkeel/_compactor.py), runs
 * between core calls rather than inside one:
 *
 *     job = compactor.begin(messages, tool_tokens)           ck_compactor_begin
 *     if job.needs_summary:
 *         request = job.request()                            ck_compaction_request
 *         job.set_summary(text) or job.set_failure(why)      ck_compaction_set_summary/_failure
 *     messages, tier, record, before, after = job.finish()   ck_compactor_finish, then values.c
 *     job.close()                                            ck_compaction_free
 *
 * While the summarizer runs, other threads and other coroutines run too. So the Compaction
 * holds strong references to everything its history borrows (the snapshot of the message list
 * and every str whose UTF-8 buffer the core reads, see ck_py_history), and the Compactor is
 * marked busy from begin() until the job is finished or closed: a second compaction, reset()
 * or observe_usage() in that window raises ctxkeel.Error CK_EBUSY instead of changing the
 * session state under the first. Methods that leave the state alone (offload, read_evidence,
 * search_evidence) stay usable, so a tool call can be handled while a summary is written.
 *
 * GIL: every function here keeps it for its whole run but search_evidence(). begin() and
 * offload() read dicts, lists and strs while the core works on them, and the core calls
 * themselves are short (the longest write a few small files to the evidence store and the
 * audit log). Holding the GIL across the check of the busy flag and the core call is also
 * what makes the flag enough: no other thread can enter the same ck_compactor in between. On
 * a free-threaded build the flag is claimed inside a critical section on the object. A search
 * may scan megabytes, so without a backend (whose methods are Python code) it runs without
 * the GIL, after claiming the `calling` flag: a second core call on the compactor meanwhile
 * raises CK_EBUSY, and other threads, other compactors and Ctrl-C go on.
 *
 * Host callbacks (host.c): with estimator=fn or a backend, the core calls Python code in the
 * middle of a core call, and that code may let other threads run (a backend's awaitable is
 * waited for without the GIL). So each core call also claims the `calling` flag, which keeps
 * every other core call off this ck_compactor until it returns, and a Compaction defers a
 * close() that comes while one of its own core calls runs. What a callback left to raise (a
 * failing counter) is raised once the call returns; a compaction that did not finish then
 * leaves the session as it was.
 */
#include "state.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char MSG_BUSY[] = "concurrent use of Compactor";
static const char MSG_CLOSED[] = "the compaction is closed";
static const char MSG_DONE[] = "the compaction is finished already";
static const char MSG_NO_SUMMARY[] = "the compaction needs no summary";
static const char MSG_NO_VIEW[] = "ctxkeel: the core finished a compaction without a view";
static const char MSG_INT_TYPE[] = "ctxkeel: %s must be an int, not %.200s";
static const char MSG_NUMBER_TYPE[] = "ctxkeel: %s must be a float, not %.200s";
static const char MSG_BOOL_TYPE[] = "ctxkeel: %s must be a bool, not %.200s";
static const char MSG_STR_TYPE[] = "ctxkeel: %s must be a str, not %.200s";
static const char MSG_OPT_STR_TYPE[] = "ctxkeel: %s must be a str or None, not %.200s";
static const char MSG_DICT_TYPE[] =
    "ctxkeel: offload() argument 'message' must be a dict, not %.200s";
static const char MSG_POSITIVE[] = "must be a positive int";
static const char MSG_NOT_NEGATIVE[] = "must be an int >= 0";
static const char MSG_FRACTION[] = "must be a number in (0, 1]";
static const char MSG_NUL[] = "must not contain a NUL character";
static const char MSG_EMPTY[] = "must not be empty";
static const char MSG_TOOL_FORMAT[] = "ctxkeel: format must be 'openai' or 'anthropic', not %R";
static const char MSG_OFFLOAD_FAILED[] =
    "ctxkeel: offload failed, the message is kept as it is: %s (%s)";
static const char MSG_RETENTION_TYPE[] =
    "ctxkeel: retention must be a dict or a list of (pattern, policy) pairs, not %.200s";
static const char MSG_PAIR_TYPE[] =
    "ctxkeel: retention[%zd] must be a (pattern, policy) pair, not %.200s";
static const char MSG_KEY_TYPE[] = "ctxkeel: retention[%R]: a pattern must be a str, not %.200s";
static const char MSG_PATTERN_TYPE[] =
    "ctxkeel: retention[%zd][0]: a pattern must be a str, not %.200s";
static const char MSG_POLICY_TYPE[] = "ctxkeel: %s must be a dict, not %.200s";
static const char MSG_POLICY_KEY_TYPE[] = "ctxkeel: the keys of %s must be str, not %.200s";
static const char MSG_POLICY_KEY[] =
    "unknown key; a policy has head, tail, errors, max_bytes and offload";
static const char MSG_LINES[] = "must be an int in [0, 2**32 - 1]";

/* The module state of an object of one of our types. The types cannot be subclassed, so the
 * object's type is always the one that PyType_FromModuleAndSpec tied to the module. */
static ck_module_state *state_of(PyObject *op) {
    return (ck_module_state *)PyType_GetModuleState(Py_TYPE(op));
}

/* The name of tier `t` (a new reference to the interned str). */
static PyObject *tier_name(const ck_module_state *st, ck_tier t) {
    PyObject *name = st->tier_names[(unsigned)t <= CK_TIER_EMERGENCY ? t : CK_TIER_NONE];
    Py_INCREF(name);
    return name;
}

/* ---- option and argument conversion ------------------------------------------------------ */

/* Raises InputError CK_EINVAL naming `name`, the way the core names a bad option. */
static int bad_value(const ck_module_state *st, const char *name, const char *msg) {
    ck_py_raise(st, CK_EINVAL, -1, name, msg, -1);
    return -1;
}

/* An int in [lo, hi]. A bool is not taken for an int: Compactor(True) is a mistake. */
static int to_uint(const ck_module_state *st, PyObject *obj, const char *name,
                   unsigned long long lo, unsigned long long hi, const char *range_msg,
                   unsigned long long *out) {
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, MSG_INT_TYPE, name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        /* Negative or wider than 64 bits: out of range, not a crash in the conversion. */
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return bad_value(st, name, range_msg);
    }
    if (v < lo || v > hi) return bad_value(st, name, range_msg);
    *out = v;
    return 0;
}

/* A threshold: a float (or int) in (0, 1]. The core checks their order and names the option
 * that breaks it; 0 would mean "the default" to the core, so it is refused here. */
static int to_fraction(const ck_module_state *st, PyObject *obj, const char *name, double *out) {
    if ((!PyFloat_Check(obj) && !PyLong_Check(obj)) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, MSG_NUMBER_TYPE, name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    double v = PyFloat_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    if (!isfinite(v) || !(v > 0.0 && v <= 1.0)) return bad_value(st, name, MSG_FRACTION);
    *out = v;
    return 0;
}

/* UTF-8 bytes of a str argument, as a new bytes object, refusing an embedded NUL when the
 * core wants a NUL-terminated string. */
static PyObject *to_utf8(const ck_module_state *st, PyObject *obj, const char *name,
                         int nul_terminated) {
    PyObject *bytes = PyUnicode_AsUTF8String(obj);
    if (!bytes) return ck_py_raise_utf8(st, obj, -1, name);
    if (nul_terminated && (size_t)PyBytes_GET_SIZE(bytes) != strlen(PyBytes_AS_STRING(bytes))) {
        Py_DECREF(bytes);
        bad_value(st, name, MSG_NUL);
        return NULL;
    }
    return bytes;
}

/* A str-or-None option: its UTF-8 bytes in *ref (kept until the core copied them) and *out
 * pointing into them; untouched for None or absent. */
static int str_option(const ck_module_state *st, PyObject *obj, const char *name,
                      PyObject **ref, const char **out) {
    if (!obj || obj == Py_None) return 0;
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, MSG_OPT_STR_TYPE, name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (!(*ref = to_utf8(st, obj, name, 1))) return -1;
    *out = PyBytes_AS_STRING(*ref);
    return 0;
}

/* An evidence ref: a tool-call id (str) or the path a placeholder states (str, bytes or
 * os.PathLike). Returns a new bytes object. */
static PyObject *to_ref(const ck_module_state *st, PyObject *obj) {
    PyObject *path = PyOS_FSPath(obj);
    if (!path) return NULL;
    PyObject *bytes;
    if (PyUnicode_Check(path)) {
        bytes = to_utf8(st, path, "ref", 0);
    } else {
        bytes = path;
        Py_INCREF(bytes);
    }
    Py_DECREF(path);
    return bytes;
}

/* ---- the busy flag ----------------------------------------------------------------------- */

/* Sets one of the compactor's flags (busy, calling), or raises CK_EBUSY when it is set. */
static int claim_flag(ck_py_compactor *self, int *flag) {
    int taken;
#ifdef Py_GIL_DISABLED
    Py_BEGIN_CRITICAL_SECTION(self);
#endif
    taken = *flag;
    if (!taken) *flag = 1;
#ifdef Py_GIL_DISABLED
    Py_END_CRITICAL_SECTION();
#endif
    if (!taken) return 0;
    ck_py_raise(state_of((PyObject *)self), CK_EBUSY, -1, NULL, MSG_BUSY, -1);
    return -1;
}

/* Marks the compactor busy, or raises CK_EBUSY when it is already. */
static int claim(ck_py_compactor *self) { return claim_flag(self, &self->busy); }

static void release(ck_py_compactor *self) { self->busy = 0; }

/* Claims the compactor for a short call that changes the session state (reset,
 * observe_usage): neither busy nor inside a core call whose callback let this thread in. */
static int claim_idle(ck_py_compactor *self) {
    if (claim(self) < 0) return -1;
    if (!self->calling) return 0;
    release(self);
    ck_py_raise(state_of((PyObject *)self), CK_EBUSY, -1, NULL, MSG_BUSY, -1);
    return -1;
}

/* Starts a core call on the compactor (see `calling`), or raises CK_EBUSY. */
static int enter(ck_py_compactor *self) {
    if (claim_flag(self, &self->calling) < 0) return -1;
    ck_py_host_reset(&self->host);
    return 0;
}

/* Ends it: returns -1 with the exception a callback left to raise, else 0. */
static int leave(ck_py_compactor *self) {
    self->calling = 0;
    return ck_py_host_end(&self->host);
}

/* ---- Compaction -------------------------------------------------------------------------- */

/* Frees the core compaction and its history, then lets go of the busy flag. The compaction is
 * freed first: it borrows from the history, which borrows from the pinned objects. */
static void job_close(ck_py_compaction *job) {
    ck_compaction_free(job->c);
    job->c = NULL;
    ck_py_compactor *owner = job->owner;
    if (job->from_session && owner && !owner->has_session && job->ph.h) {
        /* Given back for the next view: the session only grows. */
        owner->session = job->ph;
        owner->has_session = 1;
        memset(&job->ph, 0, sizeof job->ph);
    }
    job->from_session = 0;
    ck_py_history_dispose(&job->ph);
    if (job->holds_busy && job->owner) release(job->owner);
    job->holds_busy = 0;
}

/* The open compaction, or NULL with Error CK_ECLOSED raised. */
static ck_compaction *job_open(ck_py_compaction *job) {
    if (job->c) return job->c;
    ck_py_raise(state_of((PyObject *)job), CK_ECLOSED, -1, NULL, MSG_CLOSED, -1);
    return NULL;
}

/* Starts a core call on the job's compaction (see enter()), or raises CK_EBUSY. */
static int job_enter(ck_py_compaction *job) {
    if (enter(job->owner) < 0) return -1;
    job->in_core = 1;
    return 0;
}

/* Ends it (see leave()). A close() asked for meanwhile is done by job_settle(), once the
 * caller has used what the compaction holds. */
static int job_leave(ck_py_compaction *job) {
    job->in_core = 0;
    return leave(job->owner);
}

static void job_settle(ck_py_compaction *job) {
    if (job->close_asked) job_close(job);
}

/* The open compaction that still takes a reply (not finished by begin(extractive=True)), and
 * that no core call is using from another thread. */
static ck_compaction *job_unfinished(ck_py_compaction *job) {
    if (!job_open(job)) return NULL;
    const ck_module_state *st = state_of((PyObject *)job);
    if (!job->in_core && !job->done_in_core) return job->c;
    ck_py_raise(st, job->in_core ? CK_EBUSY : CK_ESTATE, -1, NULL,
                job->in_core ? MSG_BUSY : MSG_DONE, -1);
    return NULL;
}

static int job_traverse(PyObject *op, visitproc visit, void *arg) {
    ck_py_compaction *job = (ck_py_compaction *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT((PyObject *)job->owner);
    return ck_py_history_traverse(&job->ph, visit, arg);
}

static int job_clear(PyObject *op) {
    ck_py_compaction *job = (ck_py_compaction *)op;
    job_close(job);
    Py_CLEAR(job->owner);
    return 0;
}

static void job_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    job_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *job_get_needs_summary(PyObject *op, void *closure) {
    (void)closure;
    ck_py_compaction *job = (ck_py_compaction *)op;
    return PyBool_FromLong(job->c && !job->done_in_core && ck_compaction_needs_summary(job->c));
}

static PyObject *job_get_tier(PyObject *op, void *closure) {
    (void)closure;
    ck_compaction *c = job_open((ck_py_compaction *)op);
    return c ? tier_name(state_of(op), ck_compaction_tier(c)) : NULL;
}

static PyObject *job_get_snapshot(PyObject *op, void *closure) {
    (void)closure;
    ck_py_compaction *job = (ck_py_compaction *)op;
    if (!job_open(job)) return NULL;
    Py_INCREF(job->ph.snapshot);
    return job->ph.snapshot;
}

/* d[key] = value, releasing `value` (a new reference; NULL means a failure already raised). */
static int put(PyObject *d, const char *key, PyObject *value) {
    if (!value) return -1;
    int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc;
}

/* d[key] = value for an interned key, releasing `value` (as put()). */
static int put_key(PyObject *d, PyObject *key, PyObject *value) {
    if (!value) return -1;
    int rc = PyDict_SetItem(d, key, value);
    Py_DECREF(value);
    return rc;
}

/* The request as a dict; `req` is borrowed from the open compaction. */
static PyObject *request_dict(const ck_summary_request *req) {
    PyObject *previous = Py_None;
    if (req->previous)
        previous = ck_py_text(req->previous, req->previous_len);
    else
        Py_INCREF(previous);
    if (!previous) return NULL;
    PyObject *d = PyDict_New();
    if (!d || put(d, "system", ck_py_text(req->system, req->system_len)) < 0 ||
        put(d, "prompt", ck_py_text(req->prompt, req->prompt_len)) < 0 ||
        put(d, "max_tokens", PyLong_FromUnsignedLongLong(req->max_tokens)) < 0 ||
        put(d, "tier", PyUnicode_FromString(ck_tier_name(req->tier))) < 0 ||
        put(d, "span_start", PyLong_FromSize_t(req->span_start)) < 0 ||
        put(d, "span_end", PyLong_FromSize_t(req->span_end)) < 0) {
        Py_DECREF(previous);
        Py_XDECREF(d);
        return NULL;
    }
    /* put() releases `previous` whatever happens. */
    if (put(d, "previous", previous) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *job_request(PyObject *op, PyObject *unused) {
    (void)unused;
    ck_py_compaction *job = (ck_py_compaction *)op;
    ck_module_state *st = state_of(op);
    ck_compaction *c = job_unfinished(job);
    if (!c || job_enter(job) < 0) return NULL;
    /* The request is built here, on first use, and measured with the session's counter. */
    ck_summary_request req;
    int rc = ck_compaction_request(c, &req);
    PyObject *result = NULL;
    if (job_leave(job) == 0) {
        if (rc)
            ck_py_raise(st, rc, -1, NULL, rc == CK_ESTATE ? MSG_NO_SUMMARY : NULL, -1);
        else
            result = request_dict(&req);
    }
    job_settle(job);
    return result;
}

/* set_summary and set_failure: the text is copied by the core. */
static PyObject *job_set_text(PyObject *op, PyObject *text, const char *name, int failure) {
    ck_py_compaction *job = (ck_py_compaction *)op;
    ck_module_state *st = state_of(op);
    ck_compaction *c = job_unfinished(job);
    if (!c) return NULL;
    if (!PyUnicode_Check(text))
        return PyErr_Format(PyExc_TypeError, MSG_STR_TYPE, name, Py_TYPE(text)->tp_name);
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    if (!utf8) return ck_py_raise_utf8(st, text, -1, name);
    int rc = failure ? ck_compaction_set_failure(c, utf8, (size_t)len)
                     : ck_compaction_set_summary(c, utf8, (size_t)len);
    if (rc) return ck_py_raise(st, rc, -1, NULL, NULL, -1);
    Py_RETURN_NONE;
}

static PyObject *job_set_summary(PyObject *op, PyObject *text) {
    return job_set_text(op, text, "summary", 0);
}

static PyObject *job_set_failure(PyObject *op, PyObject *reason) {
    return job_set_text(op, reason, "reason", 1);
}

/* The repairs of a compaction as a list of {"kind", "index", "tool_call_id"} dicts, in message
 * order (an empty list when the pairing needed none). */
static PyObject *repairs_list(const ck_module_state *st, const ck_compaction *c) {
    size_t n = 0;
    const ck_repair *r = ck_compaction_repairs(c, &n);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; list && k < n; k++) {
        const char *kind = ck_repair_kind_name(r[k].kind);
        PyObject *d = PyDict_New();
        /* The list owns the dict from here on, so a failure below releases both. */
        PyList_SET_ITEM(list, (Py_ssize_t)k, d);
        if (!d || put_key(d, st->s_kind, PyUnicode_FromString(kind ? kind : "unknown")) < 0 ||
            put_key(d, st->s_index, PyLong_FromSize_t(r[k].index)) < 0 ||
            put_key(d, st->keys[CK_KEY_TOOL_CALL_ID], ck_py_text(r[k].id, r[k].id_len)) < 0)
            Py_CLEAR(list);
    }
    return list;
}

/* True when no Python code can run inside this compactor's core calls (no host counter, no
 * backend): they then run without the GIL. What they read is safe without it: the history's
 * strings are the UTF-8 buffers of strs its pins hold, and `calling`, claimed by enter(),
 * keeps every other core call off this compactor (a close() asked for meanwhile waits for
 * job_settle()). */
static int no_host_code(const ck_py_compactor *self) {
    return !self->host.counter && !self->host.put;
}

/* ck_compactor_finish(), without the GIL when no host code can run in it. */
static int finish_in_core(ck_py_compactor *self, ck_compaction *c, ck_error *err) {
    if (!no_host_code(self)) return ck_compactor_finish(self->ck, c, err);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ck_compactor_finish(self->ck, c, err);
    Py_END_ALLOW_THREADS
    return rc;
}

static PyObject *job_finish(PyObject *op, PyObject *unused) {
    (void)unused;
    ck_py_compaction *job = (ck_py_compaction *)op;
    ck_module_state *st = state_of(op);
    ck_compaction *c = job_open(job);
    if (!c) return NULL;
    PyObject *messages = NULL, *tier = NULL, *record = NULL, *before = NULL, *after = NULL;
    PyObject *ratio_before = NULL, *ratio_after = NULL, *repairs = NULL, *cache = NULL;
    PyObject *result = NULL;
    if (!job->done_in_core) {
        ck_error err;
        if (job_enter(job) < 0) return NULL;
        int rc = finish_in_core(job->owner, c, &err);
        /* A counter that failed while the compaction was finished is raised although the
         * compaction is done (and recorded): the caller asked for that error. */
        if (job_leave(job) < 0) goto done;
        if (rc) {
            ck_py_raise_core(st, rc, &err);
            goto done;
        }
    }
    const ck_view *view = ck_compaction_view(c);
    if (!view) {
        PyErr_SetString(PyExc_SystemError, MSG_NO_VIEW);
        goto done;
    }
    messages = ck_py_view_build(&job->ph, view);
    if (!messages) goto done;
    tier = tier_name(st, ck_compaction_tier(c));
    size_t record_len;
    const char *record_text = ck_compaction_record(c, &record_len);
    if (record_text) {
        record = ck_py_text(record_text, record_len);
    } else {
        record = Py_None;
        Py_INCREF(record);
    }
    before = PyLong_FromUnsignedLongLong(ck_compaction_tokens_before(c));
    after = PyLong_FromUnsignedLongLong(ck_compaction_tokens_after(c));
    ratio_before = PyFloat_FromDouble(ck_compaction_ratio_before(c));
    ratio_after = PyFloat_FromDouble(ck_compaction_ratio_after(c));
    repairs = repairs_list(st, c);
    uint64_t kept, broken;
    ck_compaction_cache(c, &kept, &broken);
    cache = Py_BuildValue("{s:K,s:K}", "prefix_kept", (unsigned long long)kept, "prefix_broken",
                          (unsigned long long)broken);
    if (tier && record && before && after && ratio_before && ratio_after && repairs && cache)
        result = PyTuple_Pack(9, messages, tier, record, before, after, ratio_before, ratio_after,
                              repairs, cache);

done:
    /* Finished or failed, the job is over: the list holds what it needs of the snapshot. */
    job_close(job);
    Py_XDECREF(messages);
    Py_XDECREF(tier);
    Py_XDECREF(record);
    Py_XDECREF(before);
    Py_XDECREF(after);
    Py_XDECREF(ratio_before);
    Py_XDECREF(ratio_after);
    Py_XDECREF(repairs);
    Py_XDECREF(cache);
    return result;
}

static PyObject *job_close_method(PyObject *op, PyObject *unused) {
    (void)unused;
    ck_py_compaction *job = (ck_py_compaction *)op;
    /* Called from another thread while a core call of this job waits on a host callback:
     * the compaction is in use, so that call closes the job when it returns. */
    if (job->in_core)
        job->close_asked = 1;
    else
        job_close(job);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(job_doc,
             "One compaction in progress, made by Compactor.begin(). It holds the snapshot of\n"
             "the message list and every str the core reads, so the caller's objects may change\n"
             "while a summary is written. Finish it with finish() or give it up with close();\n"
             "until then its Compactor is busy.");
PyDoc_STRVAR(job_request_doc,
             "request($self, /)\n--\n\n"
             "The summary request: a dict with 'system', 'prompt', 'max_tokens', 'tier',\n"
             "'span_start', 'span_end' (the messages of the snapshot being summarized) and\n"
             "'previous' (the previous checkpoint's text, or None). Raises Error CK_ESTATE\n"
             "when the compaction needs no summary.");
PyDoc_STRVAR(job_set_summary_doc,
             "set_summary($self, text, /)\n--\n\n"
             "Gives the summarizer's reply (copied). A reply without usable anchors makes\n"
             "finish() fall back to the extractive summarizer; the record says so.");
PyDoc_STRVAR(job_set_failure_doc,
             "set_failure($self, reason, /)\n--\n\n"
             "Says that the summarizer failed and why; finish() then uses the extractive\n"
             "summarizer and the record's 'fallback' gives the reason.");
PyDoc_STRVAR(job_finish_doc,
             "finish($self, /)\n--\n\n"
             "Builds the checkpoint and the view, appends the audit record and updates the\n"
             "session state. Returns (messages, tier, record, tokens_before, tokens_after,\n"
             "ratio_before, ratio_after, repairs, cache): the new message list (unchanged\n"
             "messages are\n"
             "the very objects of the snapshot), the tier name, the record as JSON text (None\n"
             "when nothing was written), the two raw estimates, the view before and after as a\n"
             "fraction of the window (tool schemas and the usage factor included) and the\n"
             "pairing repairs as a list of {'kind', 'index', 'tool_call_id'}, and the prompt\n"
             "cache figures {'prefix_kept', 'prefix_broken'}. Closes the compaction.");
PyDoc_STRVAR(job_close_doc,
             "close($self, /)\n--\n\n"
             "Gives the compaction up without finishing it and frees the Compactor for the\n"
             "next call. Closing twice does nothing.");

static PyMethodDef job_methods[] = {
    {
        .ml_name = "request",
        .ml_meth = job_request,
        .ml_flags = METH_NOARGS,
        .ml_doc = job_request_doc,
    },
    {
        .ml_name = "set_summary",
        .ml_meth = job_set_summary,
        .ml_flags = METH_O,
        .ml_doc = job_set_summary_doc,
    },
    {
        .ml_name = "set_failure",
        .ml_meth = job_set_failure,
        .ml_flags = METH_O,
        .ml_doc = job_set_failure_doc,
    },
    {
        .ml_name = "finish",
        .ml_meth = job_finish,
        .ml_flags = METH_NOARGS,
        .ml_doc = job_finish_doc,
    },
    {
        .ml_name = "close",
        .ml_meth = job_close_method,
        .ml_flags = METH_NOARGS,
        .ml_doc = job_close_doc,
    },
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef job_getset[] = {
    {
        .name = "needs_summary",
        .get = job_get_needs_summary,
        .doc = "True when the compaction wants a summary before it can finish.",
    },
    {
        .name = "tier",
        .get = job_get_tier,
        .doc = "The tier chosen: 'none' ... 'emergency'.",
    },
    {
        .name = "snapshot",
        .get = job_get_snapshot,
        .doc = "The message list as it was read, as a tuple of the caller's objects.",
    },
    {NULL, NULL, NULL, NULL, NULL},
};

/* Jobs come from Compactor.begin() only. Py_TPFLAGS_DISALLOW_INSTANTIATION says so from 3.10
 * on (and then clears tp_new); before that a heap type without tp_new would inherit object's. */
static PyObject *job_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    (void)args;
    (void)kwargs;
    return PyErr_Format(PyExc_TypeError, "cannot create '%.100s' instances", type->tp_name);
}

/* One slot per line, which clang-format would pack. */
/* clang-format off */
static PyType_Slot job_slots[] = {
    {Py_tp_doc, (void *)job_doc},
    {Py_tp_new, (void *)job_new},
    {Py_tp_dealloc, (void *)job_dealloc},
    {Py_tp_traverse, (void *)job_traverse},
    {Py_tp_clear, (void *)job_clear},
    {Py_tp_methods, job_methods},
    {Py_tp_getset, job_getset},
    {0, NULL},
};
/* clang-format on */

static PyType_Spec job_spec = {
    .name = "ctxkeel._ext.Compaction",
    .basicsize = sizeof(ck_py_compaction),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC
#ifdef Py_TPFLAGS_DISALLOW_INSTANTIATION
             | Py_TPFLAGS_DISALLOW_INSTANTIATION
#endif
    ,
    .slots = job_slots,
};

/* ---- Compactor --------------------------------------------------------------------------- */

/* The keyword arguments of Compactor(); NULL for those not given. */
typedef struct compactor_args {
    PyObject *context_window, *session_id, *store_dir, *warn, *soft, *full, *emergency;
    PyObject *keep_tail, *offload_threshold, *tool_offload_threshold, *summary_max_tokens;
    PyObject *estimator, *format, *pin_first_user, *retention, *backend, *backend_timeout;
    PyObject *awaiter, *target, *keep_tail_tokens, *store, *prompt_cache, *cache_breakpoints;
    PyObject *min_gain;
} compactor_args;

/* What the options point at until ck_compactor_new() has copied it. */
typedef struct option_refs {
    PyObject *session, *store, *url; /* bytes */
    PyObject *patterns;        /* list of bytes: the retention patterns */
    ck_retention *retention;   /* PyMem_Calloc */
} option_refs;

static void option_refs_dispose(option_refs *refs) {
    Py_CLEAR(refs->session);
    Py_CLEAR(refs->store);
    Py_CLEAR(refs->url);
    Py_CLEAR(refs->patterns);
    PyMem_Free(refs->retention);
    refs->retention = NULL;
}

/* A place in the retention option as errors name it, from the repr of its pattern:
 * "retention['pytest*']", or "retention['pytest*'].tail" with a `field`. */
static int format_place(char *out, PyObject *pattern_repr, const char *field) {
    const char *text = PyUnicode_AsUTF8(pattern_repr);
    if (!text) return -1;
    snprintf(out, CK_PY_WHERE_MAX, field ? "retention[%.80s].%.40s" : "retention[%.80s]", text,
             field);
    return 0;
}

/* One retention policy, a dict such as {"head": 5, "tail": 30, "errors": 20}, for the pattern
 * whose repr is `pattern_repr`. A key left out is 0, as in ck_retention (zero means zero
 * there), except offload, which is True. */
static int read_policy(const ck_module_state *st, PyObject *policy, PyObject *pattern_repr,
                       ck_retention *r) {
    char where[CK_PY_WHERE_MAX];
    if (!PyDict_Check(policy)) {
        if (format_place(where, pattern_repr, NULL) < 0) return -1;
        PyErr_Format(PyExc_TypeError, MSG_POLICY_TYPE, where, Py_TYPE(policy)->tp_name);
        return -1;
    }
    unsigned long long v[4] = {0, 0, 0, 0}; /* head, tail, errors, max_bytes */
    static const char *const names[4] = {"head", "tail", "errors", "max_bytes"};
    PyObject *items = PyDict_Items(policy);
    if (!items) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items) && rc == 0; i++) {
        PyObject *key = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 0);
        PyObject *value = PyTuple_GET_ITEM(PyList_GET_ITEM(items, i), 1);
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!name) {
            rc = -1;
            if (PyErr_Occurred() || format_place(where, pattern_repr, NULL) < 0) break;
            PyErr_Format(PyExc_TypeError, MSG_POLICY_KEY_TYPE, where, Py_TYPE(key)->tp_name);
            break;
        }
        if ((rc = format_place(where, pattern_repr, name)) < 0) break;
        int k = 0;
        while (k < 4 && strcmp(name, names[k]) != 0)
            k++;
        if (k < 4) {
            rc = to_uint(st, value, where, 0, k < 3 ? UINT32_MAX : UINT64_MAX,
                         k < 3 ? MSG_LINES : MSG_NOT_NEGATIVE, &v[k]);
        } else if (strcmp(name, "offload") != 0) {
            rc = bad_value(st, where, MSG_POLICY_KEY);
        } else if (!PyBool_Check(value)) {
            PyErr_Format(PyExc_TypeError, MSG_BOOL_TYPE, where, Py_TYPE(value)->tp_name);
            rc = -1;
        } else if (value == Py_False) {
            r->flags |= CK_RETAIN_NEVER_OFFLOAD;
        }
    }
    Py_DECREF(items);
    r->head = (uint32_t)v[0];
    r->tail = (uint32_t)v[1];
    r->error_lines = (uint32_t)v[2];
    r->max_bytes = v[3];
    return rc;
}

/* retention=: a dict {pattern: policy} in match order, or a list of (pattern, policy) pairs.
 * Fills opt->retention with storage kept in `refs`. */
static int read_retention(const ck_module_state *st, PyObject *obj, ck_compactor_options *opt,
                          option_refs *refs) {
    if (!obj || obj == Py_None) return 0;
    PyObject *pairs = NULL;
    int from_dict = PyDict_Check(obj);
    if (from_dict) {
        pairs = PyDict_Items(obj);
    } else if (PyList_Check(obj) || PyTuple_Check(obj)) {
        pairs = PySequence_List(obj);
    } else {
        PyErr_Format(PyExc_TypeError, MSG_RETENTION_TYPE, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (!pairs) return -1;
    Py_ssize_t n = PyList_GET_SIZE(pairs);
    refs->patterns = PyList_New(0);
    refs->retention = PyMem_Calloc((size_t)(n ? n : 1), sizeof *refs->retention);
    int rc = refs->patterns && refs->retention ? 0 : -1;
    if (rc == 0 && !refs->retention) PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *pair = PyList_GET_ITEM(pairs, i);
        PyObject *pattern = NULL, *policy = NULL;
        if ((PyTuple_Check(pair) || PyList_Check(pair)) && PySequence_Fast_GET_SIZE(pair) == 2) {
            pattern = PySequence_Fast_GET_ITEM(pair, 0);
            policy = PySequence_Fast_GET_ITEM(pair, 1);
        }
        if (!pattern || !PyUnicode_Check(pattern)) {
            if (!pattern)
                PyErr_Format(PyExc_TypeError, MSG_PAIR_TYPE, i, Py_TYPE(pair)->tp_name);
            else if (from_dict)
                PyErr_Format(PyExc_TypeError, MSG_KEY_TYPE, pattern, Py_TYPE(pattern)->tp_name);
            else
                PyErr_Format(PyExc_TypeError, MSG_PATTERN_TYPE, i, Py_TYPE(pattern)->tp_name);
            rc = -1;
            break;
        }
        char where[CK_PY_WHERE_MAX];
        PyObject *shown = PyObject_Repr(pattern);
        PyObject *bytes = NULL;
        rc = shown ? format_place(where, shown, NULL) : -1;
        if (rc == 0 && PyUnicode_GET_LENGTH(pattern) == 0) rc = bad_value(st, where, MSG_EMPTY);
        if (rc == 0) rc = (bytes = to_utf8(st, pattern, where, 1)) ? 0 : -1;
        if (rc == 0) rc = PyList_Append(refs->patterns, bytes);
        if (rc == 0) rc = read_policy(st, policy, shown, &refs->retention[i]);
        if (rc == 0) refs->retention[i].tool = PyBytes_AS_STRING(bytes);
        Py_XDECREF(bytes);
        Py_XDECREF(shown);
    }
    Py_DECREF(pairs);
    opt->retention = refs->retention;
    opt->n_retention = rc == 0 ? (size_t)n : 0;
    return rc;
}

/* prompt_cache: None, a preset's name ("anthropic", "openai") or a dict {"read": r, "write": w}
 * of prices relative to uncached input. The core checks the prices' range; a 0 given here goes
 * to it as NaN, since 0 would mean "no cost model" to the core. */
static int read_prompt_cache(const ck_module_state *st, PyObject *obj, ck_compactor_options *opt) {
    if (!obj || obj == Py_None) return 0;
    ck_error err;
    if (PyUnicode_Check(obj)) {
        const char *name = PyUnicode_AsUTF8(obj);
        if (!name) return -1;
        if (ck_prompt_cache_preset(name, &opt->cache_read, &opt->cache_write, &err) == CK_OK)
            return 0;
        ck_py_raise_core(st, err.code, &err);
        return -1;
    }
    if (!PyDict_Check(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "ctxkeel: prompt_cache must be None, 'anthropic', 'openai' or a dict "
                     "{'read': float, 'write': float}, not %.200s",
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(obj, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        if (!name && PyErr_Occurred()) return -1;
        double *out = !name ? NULL
                      : strcmp(name, "read") == 0  ? &opt->cache_read
                      : strcmp(name, "write") == 0 ? &opt->cache_write
                                                   : NULL;
        if (!out) return bad_value(st, "prompt_cache", "takes only the keys 'read' and 'write'");
        if ((!PyFloat_Check(value) && !PyLong_Check(value)) || PyBool_Check(value)) {
            PyErr_Format(PyExc_TypeError, MSG_NUMBER_TYPE,
                         out == &opt->cache_read ? "prompt_cache['read']"
                                                 : "prompt_cache['write']",
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        *out = PyFloat_AsDouble(value);
        if (*out == -1.0 && PyErr_Occurred()) return -1;
        if (*out == 0) *out = NAN;
    }
    if (opt->cache_read == 0 || opt->cache_write == 0)
        return bad_value(st, "prompt_cache", "needs both 'read' and 'write'");
    return 0;
}

/* Fills `opt` from the keyword arguments of Compactor(), and `self->host` with the counter
 * and the backend. The strings the options point at are kept in `refs` until
 * ck_compactor_new() has copied them. */
static int fill_options(const ck_module_state *st, const compactor_args *a, ck_py_compactor *self,
                        ck_compactor_options *opt, option_refs *refs) {
    memset(opt, 0, sizeof *opt);
    /* Counts and thresholds: positive ints; the ones not given stay 0, the default. */
    unsigned long long v[7] = {0, 0, 0, 0, 0, 0, 0};
    struct {
        PyObject *obj;
        const char *name;
        unsigned long long max;
    } ints[] = {{a->context_window, "context_window", UINT64_MAX},
                {a->keep_tail, "keep_tail", UINT32_MAX},
                {a->offload_threshold, "offload_threshold", UINT64_MAX},
                {a->tool_offload_threshold, "tool_offload_threshold", UINT64_MAX},
                {a->summary_max_tokens != Py_None ? a->summary_max_tokens : NULL,
                 "summary_max_tokens", UINT64_MAX},
                {a->keep_tail_tokens != Py_None ? a->keep_tail_tokens : NULL, "keep_tail_tokens",
                 UINT64_MAX},
                {a->min_gain != Py_None ? a->min_gain : NULL, "min_gain", UINT64_MAX}};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        if (ints[k].obj &&
            to_uint(st, ints[k].obj, ints[k].name, 1, ints[k].max, MSG_POSITIVE, &v[k]) < 0)
            return -1;
    opt->context_window = v[0];
    opt->keep_tail = (uint32_t)v[1];
    opt->offload_threshold = v[2];
    opt->tool_offload_threshold = v[3];
    opt->summary_max_tokens = v[4];
    opt->keep_tail_tokens = v[5];
    opt->min_gain = v[6];
    struct {
        PyObject *obj;
        const char *name;
        double *out;
    } fractions[] = {{a->warn, "warn", &opt->warn},
                     {a->soft, "soft", &opt->soft},
                     {a->full, "full", &opt->full},
                     {a->emergency, "emergency", &opt->emergency},
                     {a->target != Py_None ? a->target : NULL, "target", &opt->target}};
    for (size_t k = 0; k < sizeof fractions / sizeof fractions[0]; k++)
        if (fractions[k].obj &&
            to_fraction(st, fractions[k].obj, fractions[k].name, fractions[k].out) < 0)
            return -1;
    PyObject *counter = NULL;
    if (ck_py_parse_estimator(a->estimator, &opt->estimator, &counter) < 0 ||
        ck_py_parse_format(a->format, &opt->format) < 0)
        return -1;
    if (counter) {
        Py_INCREF(counter);
        Py_XSETREF(self->host.counter, counter);
        opt->counter.count = ck_py_host_count;
        opt->counter.ctx = &self->host;
    }
    struct {
        PyObject *obj;
        const char *name;
        PyObject *sets; /* the value that sets the flag */
        uint32_t flag;
    } flags[] = {{a->pin_first_user, "pin_first_user", Py_False, CK_OPT_NO_PIN_FIRST_USER},
                 {a->cache_breakpoints, "cache_breakpoints", Py_True, CK_OPT_CACHE_BREAKPOINTS}};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        if (!flags[k].obj) continue;
        if (!PyBool_Check(flags[k].obj)) {
            PyErr_Format(PyExc_TypeError, MSG_BOOL_TYPE, flags[k].name,
                         Py_TYPE(flags[k].obj)->tp_name);
            return -1;
        }
        if (flags[k].obj == flags[k].sets) opt->flags |= flags[k].flag;
    }
    if (read_prompt_cache(st, a->prompt_cache, opt) < 0) return -1;
    if (str_option(st, a->session_id, "session_id", &refs->session, &opt->session_id) < 0)
        return -1;
    /* "s3://...": the core makes the built-in S3 backend from it. */
    if (str_option(st, a->store, "store", &refs->url, &opt->store) < 0) return -1;
    if (a->store_dir) {
        /* str, bytes or os.PathLike; a NUL inside raises ValueError, another type TypeError. */
        if (!PyUnicode_FSConverter(a->store_dir, &refs->store)) return -1;
        if (PyBytes_GET_SIZE(refs->store) == 0) return bad_value(st, "store_dir", MSG_EMPTY);
        opt->store_dir = PyBytes_AS_STRING(refs->store);
    }
    if (read_retention(st, a->retention, opt, refs) < 0) return -1;
    if (a->backend && a->backend != Py_None) {
        if (ck_py_host_set_backend(&self->host, a->backend, a->awaiter) < 0) return -1;
        Py_INCREF(a->backend);
        Py_XSETREF(self->backend, a->backend);
    }
    /* The core's default and range; the binding enforces the limit on its host calls. */
    double seconds = 0;
    PyObject *t = a->backend_timeout;
    if (t && t != Py_None) {
        if (PyBool_Check(t) || !(PyFloat_Check(t) || PyLong_Check(t))) {
            PyErr_Format(PyExc_TypeError, MSG_NUMBER_TYPE, "backend_timeout",
                         Py_TYPE(t)->tp_name);
            return -1;
        }
        seconds = PyFloat_AsDouble(t);
        if (seconds == -1.0 && PyErr_Occurred()) return -1;
        /* 0 in the core's struct means "the default"; given here it is out of range, which
         * NaN makes the core say. */
        if (seconds == 0) seconds = NAN;
    }
    ck_error err;
    if (ck_backend_timeout(seconds, &opt->backend_timeout, &err) != CK_OK) {
        ck_py_raise_core(st, err.code, &err);
        return -1;
    }
    self->host.timeout = opt->backend_timeout;
    return 0;
}

static PyObject *compactor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"context_window",
                             "session_id",
                             "store_dir",
                             "warn",
                             "soft",
                             "full",
                             "emergency",
                             "keep_tail",
                             "offload_threshold",
                             "tool_offload_threshold",
                             "summary_max_tokens",
                             "estimator",
                             "format",
                             "pin_first_user",
                             "retention",
                             "backend",
                             "backend_timeout",
                             "awaiter",
                             "target",
                             "keep_tail_tokens",
                             "store",
                             "prompt_cache",
                             "cache_breakpoints",
                             "min_gain",
                             NULL};
    ck_module_state *st = (ck_module_state *)PyType_GetModuleState(type);
    compactor_args a;
    memset(&a, 0, sizeof a);
    if (!st ||
        !PyArg_ParseTupleAndKeywords(
            args, kwargs, "O|$OOOOOOOOOOOOOOOOOOOOOOO:Compactor", kwlist, &a.context_window,
            &a.session_id, &a.store_dir, &a.warn, &a.soft, &a.full, &a.emergency, &a.keep_tail,
            &a.offload_threshold, &a.tool_offload_threshold, &a.summary_max_tokens, &a.estimator,
            &a.format, &a.pin_first_user, &a.retention, &a.backend, &a.backend_timeout,
            &a.awaiter, &a.target, &a.keep_tail_tokens, &a.store, &a.prompt_cache,
            &a.cache_breakpoints, &a.min_gain))
        return NULL;
    ck_compactor_options opt;
    option_refs refs = {NULL, NULL, NULL, NULL, NULL};
    /* Made first: the counter and the backend the core calls back live in it. */
    ck_py_compactor *self = (ck_py_compactor *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    ck_evidence_backend backend = {&self->host, ck_py_host_put, ck_py_host_get};
    ck_error err;
    if (fill_options(st, &a, self, &opt, &refs) < 0) goto fail;
    if (self->host.put) opt.backend = &backend; /* copied by the core */
    self->ck = ck_compactor_new(&opt, &err);
    if (!self->ck) {
        ck_py_raise_core(st, err.code, &err);
        goto fail;
    }
    self->format = opt.format;
    option_refs_dispose(&refs);
    return (PyObject *)self;

fail:
    option_refs_dispose(&refs);
    Py_DECREF(self);
    return NULL;
}

static int compactor_traverse(PyObject *op, visitproc visit, void *arg) {
    ck_py_compactor *self = (ck_py_compactor *)op;
    Py_VISIT(Py_TYPE(op));
    Py_VISIT(self->backend);
    if (self->has_session) {
        int rc = ck_py_history_traverse(&self->session, visit, arg);
        if (rc) return rc;
    }
    return ck_py_host_traverse(&self->host, visit, arg);
}

/* Lets go of the session's history (its objects stay in the Python layer's list). */
static void session_drop(ck_py_compactor *self) {
    if (!self->has_session) return;
    self->has_session = 0;
    ck_py_history_dispose(&self->session);
}

static int compactor_clear(PyObject *op) {
    ck_py_compactor *self = (ck_py_compactor *)op;
    /* The core may still call back (through a Compaction in the same garbage cycle); with
     * the callables gone the callbacks fail instead. */
    Py_CLEAR(self->backend);
    session_drop(self);
    ck_py_host_clear(&self->host);
    return 0;
}

static void compactor_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    /* No Compaction can be open here: each one holds a strong reference to its Compactor. */
    ck_compactor_free(((ck_py_compactor *)op)->ck);
    compactor_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

/* The core's part of begin(): begins the compaction and, with `extractive`, finishes it with
 * the built-in summarizer. Returns -1 with an exception set (one a callback left, or
 * CK_EBUSY), else 0 with the core's status in *status. */
static int begin_in_core(ck_py_compactor *self, ck_py_compaction *job, uint64_t tool_tokens,
                         int extractive, int *status, ck_error *err) {
    const ck_history *h = job->ph.h;
    if (enter(self) < 0) return -1;
    int rc;
    if (extractive && !self->host.counter) {
        /* One core call, so that the record shows the built-in summarizer as the default
         * rather than as a fallback. */
        if (no_host_code(self)) {
            Py_BEGIN_ALLOW_THREADS
            rc = ck_compactor_compact(self->ck, h, tool_tokens, NULL, NULL, &job->c, err);
            Py_END_ALLOW_THREADS
        } else {
            rc = ck_compactor_compact(self->ck, h, tool_tokens, NULL, NULL, &job->c, err);
        }
        job->done_in_core = rc == CK_OK;
    } else {
        if (no_host_code(self)) {
            Py_BEGIN_ALLOW_THREADS
            rc = ck_compactor_begin(self->ck, h, tool_tokens, &job->c, err);
            Py_END_ALLOW_THREADS
        } else {
            rc = ck_compactor_begin(self->ck, h, tool_tokens, &job->c, err);
        }
        /* With a host counter, begin runs alone first: a counter that fails there must leave
         * the session as it was, and ck_compactor_compact() would finish regardless. */
        if (rc == CK_OK && extractive && !self->host.raise_after) {
            ck_compaction_use_extractive(job->c);
            rc = finish_in_core(self, job->c, err);
            job->done_in_core = rc == CK_OK;
        }
    }
    *status = rc;
    return leave(self);
}

/* The arguments of begin(messages, tool_tokens=0, /, *, extractive=False), read by hand from
 * a vectorcall: begin() runs before every model call, and PyArg_ParseTupleAndKeywords took
 * as long as reading a short history. Returns 0, or -1 with TypeError set. */
static int begin_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      PyObject **messages, PyObject **tool_obj, int *extractive, int *session) {
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "begin() takes 1 or 2 positional arguments (%zd given)",
                     nargs);
        return -1;
    }
    *messages = args[0];
    *tool_obj = nargs > 1 ? args[1] : NULL;
    Py_ssize_t n_kw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < n_kw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int *flag = PyUnicode_CompareWithASCIIString(name, "extractive") == 0 ? extractive
                    : PyUnicode_CompareWithASCIIString(name, "session") == 0  ? session
                                                                               : NULL;
        if (!flag) {
            PyErr_Format(PyExc_TypeError, "begin() got an unexpected keyword argument '%S'",
                         name);
            return -1;
        }
        if ((*flag = PyObject_IsTrue(args[nargs + k])) < 0) return -1;
    }
    return 0;
}

static PyObject *compactor_begin(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
    ck_py_compactor *self = (ck_py_compactor *)op;
    ck_module_state *st = state_of(op);
    PyObject *messages, *tool_obj;
    int extractive = 0, session = 0;
    unsigned long long tool_tokens = 0;
    if (begin_args(args, nargs, kwnames, &messages, &tool_obj, &extractive, &session) < 0)
        return NULL;
    if (tool_obj &&
        to_uint(st, tool_obj, "tool_tokens", 0, UINT64_MAX, MSG_NOT_NEGATIVE, &tool_tokens) < 0)
        return NULL;
    /* Claimed before the messages are read: reading runs Python code (a key's __eq__, JSON
     * encoding), which could otherwise start a second compaction on this compactor. */
    if (claim(self) < 0) return NULL;
    ck_py_compaction *job = PyObject_GC_New(ck_py_compaction, (PyTypeObject *)st->CompactionType);
    if (!job) {
        release(self);
        return NULL;
    }
    job->owner = self;
    Py_INCREF(self);
    job->c = NULL;
    job->holds_busy = 1;
    job->done_in_core = 0;
    job->in_core = 0;
    job->close_asked = 0;
    job->format = CK_FORMAT_AUTO;
    job->from_session = 0;
    memset(&job->ph, 0, sizeof job->ph);
    PyObject_GC_Track((PyObject *)job);
    if (session && self->has_session && PyList_Check(messages) &&
        PyList_GET_SIZE(messages) == (Py_ssize_t)ck_history_count(self->session.h)) {
        /* The session's messages, every one read by read() already. */
        job->ph = self->session;
        self->has_session = 0;
        memset(&self->session, 0, sizeof self->session);
    } else if ((session && (session_drop(self), 0)) || ck_py_history_init(&job->ph, st) < 0 ||
               ck_py_history_read_list(&job->ph, messages, self->format) < 0) {
        goto error;
    }
    job->from_session = session;
    job->format = self->format;
    ck_error err;
    int rc;
    if (begin_in_core(self, job, tool_tokens, extractive, &rc, &err) < 0) goto error;
    if (rc != CK_OK) {
        ck_py_raise_core(st, rc, &err);
        goto error;
    }
    return (PyObject *)job;

error:
    /* The dealloc closes the job, which frees the busy flag. */
    Py_DECREF(job);
    return NULL;
}

/* read(messages, from): reads messages [from, n) of the list (the append-only session's)
 * into the session's history, which holds the first `from` of them when the Python layer says
 * so (with none kept, or fewer, every message is read). A bad message raises, naming its
 * index; the history then holds the messages before it. */
static PyObject *compactor_read(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    ck_py_compactor *self = (ck_py_compactor *)op;
    ck_module_state *st = state_of(op);
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "read() takes 2 positional arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyList_Check(args[0]))
        return PyErr_Format(PyExc_TypeError, "ctxkeel: messages must be a list, not %.200s",
                            Py_TYPE(args[0])->tp_name);
    unsigned long long from = 0;
    if (to_uint(st, args[1], "from", 0, UINT64_MAX, MSG_NOT_NEGATIVE, &from) < 0) return NULL;
    if (claim(self) < 0) return NULL;
    if (!self->has_session || from > ck_history_count(self->session.h)) from = 0;
    if (from == 0) session_drop(self);
    if (!self->has_session) {
        if (ck_py_history_init(&self->session, st) < 0) {
            release(self);
            return NULL;
        }
        self->has_session = 1;
    }
    ck_history_truncate(self->session.h, (size_t)from);
    int rc = ck_py_history_read_more(&self->session, args[0], (size_t)from, self->format);
    release(self);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *compactor_offload(PyObject *op, PyObject *message) {
    ck_py_compactor *self = (ck_py_compactor *)op;
    ck_module_state *st = state_of(op);
    if (!PyDict_Check(message))
        return PyErr_Format(PyExc_TypeError, MSG_DICT_TYPE, Py_TYPE(message)->tp_name);
    ck_py_history ph;
    ck_view *view = NULL;
    PyObject *result = NULL;
    ck_format format;
    ck_error err;
    if (ck_py_history_init(&ph, st) < 0) return NULL;
    if (ck_py_history_read_message(&ph, message, self->format) < 0) goto done;
    int rc = ck_history_format(ph.h, self->format, &format, &err);
    if (rc == CK_OK) {
        if (enter(self) < 0) goto done;
        rc = ck_compactor_offload(self->ck, ph.h, 0, &view, &err);
        if (leave(self) < 0) goto done;
    }
    if (rc != CK_OK) {
        ck_py_raise_core(st, rc, &err);
        goto done;
    }
    /* Fail-open: a store that cannot be written leaves the output in place, and says why. */
    if (err.code == CK_EIO &&
        PyErr_WarnFormat(PyExc_RuntimeWarning, 1, MSG_OFFLOAD_FAILED, err.msg, err.where) < 0)
        goto done;
    if (ck_view_is_identity(view)) {
        result = message;
        Py_INCREF(result);
        goto done;
    }
    PyObject *list = ck_py_view_build(&ph, view);
    if (list) {
        result = PyList_GET_ITEM(list, 0);
        Py_INCREF(result);
        Py_DECREF(list);
    }

done:
    ck_view_free(view);
    ck_py_history_dispose(&ph);
    return result;
}

/* Ends a read or a search of `ref` (bytes, or NULL for the whole session) begun with enter():
 * returns 0 when it succeeded, else -1 with its error raised. A storage failure of the backend
 * becomes the error's __cause__, and the message names the ref as the caller gave it. */
static int leave_read(ck_py_compactor *self, int rc, const ck_error *err, PyObject *ref) {
    PyObject *cause = ck_py_host_take_cause(&self->host);
    int raised = leave(self) < 0;
    if (raised || rc != CK_EIO) {
        Py_XDECREF(cause);
        if (raised) return -1;
        if (rc == CK_OK) return 0;
        ck_py_raise_core(state_of((PyObject *)self), rc, err);
        return -1;
    }
    char where[CK_PY_WHERE_MAX], msg[CK_PY_WHERE_MAX + 64];
    snprintf(where, sizeof where, "%.*s", ref ? (int)PyBytes_GET_SIZE(ref) : 0,
             ref ? PyBytes_AS_STRING(ref) : "");
    snprintf(msg, sizeof msg, "%s (%s)", err->msg ? err->msg : ck_strerror(rc), err->where);
    if (cause) {
        /* ck_py_raise() makes the exception being raised the new one's __cause__. */
        PyErr_SetObject((PyObject *)Py_TYPE(cause), cause);
        Py_DECREF(cause);
    }
    ck_py_raise(state_of((PyObject *)self), rc, -1, where, msg, -1);
    return -1;
}

static PyObject *compactor_read_evidence(PyObject *op, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"ref", "offset", "limit", NULL};
    ck_py_compactor *self = (ck_py_compactor *)op;
    ck_module_state *st = state_of(op);
    PyObject *ref_obj, *offset_obj = NULL, *limit_obj = NULL;
    unsigned long long offset = 0, limit = 200;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO:read_evidence", kwlist, &ref_obj,
                                     &offset_obj, &limit_obj))
        return NULL;
    if ((offset_obj &&
         to_uint(st, offset_obj, "offset", 0, SIZE_MAX, MSG_NOT_NEGATIVE, &offset) < 0) ||
        (limit_obj && to_uint(st, limit_obj, "limit", 0, SIZE_MAX, MSG_NOT_NEGATIVE, &limit) < 0))
        return NULL;
    PyObject *ref = to_ref(st, ref_obj);
    if (!ref) return NULL;
    char *text = NULL;
    size_t len = 0;
    ck_error err;
    PyObject *result = NULL;
    if (enter(self) < 0) goto done;
    int rc =
        ck_compactor_read_evidence(self->ck, PyBytes_AS_STRING(ref), (size_t)PyBytes_GET_SIZE(ref),
                                   (size_t)offset, (size_t)limit, &text, &len, &err);
    if (leave_read(self, rc, &err, ref) == 0) result = ck_py_text(text, len);
    ck_free(text);

done:
    Py_DECREF(ref);
    return result;
}

static PyObject *compactor_search_evidence(PyObject *op, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"ref", "pattern", NULL};
    ck_py_compactor *self = (ck_py_compactor *)op;
    ck_module_state *st = state_of(op);
    PyObject *ref_obj, *pattern_obj, *ref = NULL, *pattern = NULL, *result = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:search_evidence", kwlist, &ref_obj,
                                     &pattern_obj))
        return NULL;
    if (!PyUnicode_Check(pattern_obj))
        return PyErr_Format(PyExc_TypeError, MSG_STR_TYPE, "pattern",
                            Py_TYPE(pattern_obj)->tp_name);
    if (ref_obj != Py_None && !(ref = to_ref(st, ref_obj))) return NULL;
    pattern = to_utf8(st, pattern_obj, "pattern", 1);
    if (!pattern || enter(self) < 0) goto done;
    char *json = NULL;
    size_t len = 0;
    ck_error err;
    const char *ref_text = ref ? PyBytes_AS_STRING(ref) : NULL;
    size_t ref_len = ref ? (size_t)PyBytes_GET_SIZE(ref) : 0;
    const char *pattern_text = PyBytes_AS_STRING(pattern);
    int rc;
    if (self->host.put) {
        /* The backend is Python code that the search calls: the GIL stays. The work of one
         * search is capped in the core, so this holds it for a second at most. */
        rc = ck_compactor_search_evidence(self->ck, ref_text, ref_len, pattern_text, 0, &json,
                                          &len, &err);
    } else {
        /* No Python code runs in a search without a backend; its inputs are the bytes objects
         * `ref` and `pattern`, held until after; and `calling`, claimed by enter(), keeps
         * every other core call off this compactor. So the matcher runs without the GIL. */
        Py_BEGIN_ALLOW_THREADS
        rc = ck_compactor_search_evidence(self->ck, ref_text, ref_len, pattern_text, 0, &json,
                                          &len, &err);
        Py_END_ALLOW_THREADS
    }
    if (leave_read(self, rc, &err, ref) == 0) {
        PyObject *text = ck_py_text(json, len);
        if (text) {
            result = PyObject_CallOneArg(st->json_loads, text);
            Py_DECREF(text);
        }
    }
    ck_free(json);

done:
    Py_XDECREF(ref);
    Py_XDECREF(pattern);
    return result;
}

/* answer_read_evidence(arguments): the core's answer to a model's read_evidence call, as
 * (text, is_error). The wording and every check of the arguments are the core's. */
static PyObject *compactor_answer_read_evidence(PyObject *op, PyObject *arg) {
    ck_py_compactor *self = (ck_py_compactor *)op;
    ck_module_state *st = state_of(op);
    if (!PyUnicode_Check(arg))
        return PyErr_Format(PyExc_TypeError, MSG_STR_TYPE, "arguments", Py_TYPE(arg)->tp_name);
    Py_ssize_t len;
    const char *args = PyUnicode_AsUTF8AndSize(arg, &len);
    if (!args) return ck_py_raise_utf8(st, arg, -1, "arguments");
    if (enter(self) < 0) return NULL;
    char *text = NULL;
    size_t text_len = 0;
    int is_error = 0;
    int rc = ck_compactor_answer_read_evidence(self->ck, args, (size_t)len, &text, &text_len,
                                               &is_error);
    PyObject *result = NULL;
    /* A storage failure is told in the answer's text; what a callback left to raise
     * (KeyboardInterrupt, a cancellation) is raised by leave(). */
    if (leave(self) == 0) {
        if (rc)
            ck_py_raise(st, rc, -1, NULL, NULL, -1);
        else
            result = Py_BuildValue("(NO)", ck_py_text(text, text_len),
                                   is_error ? Py_True : Py_False);
    }
    ck_free(text);
    return result;
}

static PyObject *compactor_observe_usage(PyObject *op, PyObject *arg) {
    ck_py_compactor *self = (ck_py_compactor *)op;
    unsigned long long tokens;
    if (to_uint(state_of(op), arg, "prompt_tokens", 0, UINT64_MAX, MSG_NOT_NEGATIVE, &tokens) < 0 ||
        claim_idle(self) < 0)
        return NULL;
    ck_compactor_observe_usage(self->ck, tokens);
    release(self);
    Py_RETURN_NONE;
}

static PyObject *compactor_reset(PyObject *op, PyObject *unused) {
    (void)unused;
    ck_py_compactor *self = (ck_py_compactor *)op;
    if (claim_idle(self) < 0) return NULL;
    ck_compactor_reset(self->ck);
    release(self);
    Py_RETURN_NONE;
}

static PyObject *compactor_get_session_id(PyObject *op, void *closure) {
    (void)closure;
    const char *id = ck_compactor_session_id(((ck_py_compactor *)op)->ck);
    return ck_py_text(id, strlen(id));
}

static PyObject *compactor_get_usage_factor(PyObject *op, void *closure) {
    (void)closure;
    return PyFloat_FromDouble(ck_compactor_usage_factor(((ck_py_compactor *)op)->ck));
}

static PyObject *compactor_get_has_session(PyObject *op, void *closure) {
    (void)closure;
    return PyBool_FromLong(((ck_py_compactor *)op)->has_session);
}

static PyObject *compactor_get_busy(PyObject *op, void *closure) {
    (void)closure;
    return PyBool_FromLong(((ck_py_compactor *)op)->busy);
}

/* The retention policies in force as {pattern: {"head", "tail", "errors", "max_bytes",
 * "offload"}}, in match order. */
static PyObject *retention_dict(const ck_compactor_options *o) {
    PyObject *d = PyDict_New();
    for (size_t k = 0; d && k < o->n_retention; k++) {
        const ck_retention *r = &o->retention[k];
        PyObject *policy = Py_BuildValue("{s:I,s:I,s:I,s:K,s:O}", "head", (unsigned)r->head, "tail",
                                         (unsigned)r->tail, "errors", (unsigned)r->error_lines,
                                         "max_bytes", (unsigned long long)r->max_bytes, "offload",
                                         (r->flags & CK_RETAIN_NEVER_OFFLOAD) ? Py_False : Py_True);
        PyObject *pattern =
            policy ? ck_py_text(r->tool ? r->tool : "*", strlen(r->tool ? r->tool : "*")) : NULL;
        if (!pattern || PyDict_SetItem(d, pattern, policy) < 0) Py_CLEAR(d);
        Py_XDECREF(pattern);
        Py_XDECREF(policy);
    }
    return d;
}

static PyObject *compactor_get_options(PyObject *op, void *closure) {
    (void)closure;
    ck_py_compactor *self = (ck_py_compactor *)op;
    ck_compactor_options o;
    ck_compactor_get_options(self->ck, &o);
    PyObject *store = PyUnicode_DecodeFSDefault(o.store_dir);
    PyObject *retention = store ? retention_dict(&o) : NULL;
    PyObject *estimator = self->host.counter;
    if (estimator)
        Py_INCREF(estimator);
    else
        estimator = PyUnicode_FromString(ck_estimator_name(o.estimator));
    if (!store || !retention || !estimator) {
        Py_XDECREF(store);
        Py_XDECREF(retention);
        Py_XDECREF(estimator);
        return NULL;
    }
    /* N steals: store, estimator, retention and prompt_cache are released with the dict. */
    PyObject *prompt_cache = o.cache_read != 0 ? Py_BuildValue("{s:d,s:d}", "read", o.cache_read,
                                                               "write", o.cache_write)
                                               : (Py_INCREF(Py_None), Py_None);
    if (!prompt_cache) {
        Py_DECREF(store);
        Py_DECREF(retention);
        Py_DECREF(estimator);
        return NULL;
    }
    return Py_BuildValue(
        "{s:K,s:s,s:N,s:z,s:d,s:d,s:d,s:d,s:d,s:I,s:K,s:K,s:K,s:K,s:N,s:s,s:O,s:N,s:O,s:d,s:N,"
        "s:O,s:K}",
        "context_window", (unsigned long long)o.context_window, "session_id", o.session_id,
        "store_dir", store, "store", o.store, "warn", o.warn, "soft", o.soft, "full", o.full, "emergency",
        o.emergency, "target", o.target, "keep_tail", (unsigned int)o.keep_tail,
        "keep_tail_tokens", (unsigned long long)o.keep_tail_tokens, "offload_threshold",
        (unsigned long long)o.offload_threshold,
        "tool_offload_threshold", (unsigned long long)o.tool_offload_threshold,
        "summary_max_tokens", (unsigned long long)o.summary_max_tokens, "estimator", estimator,
        "format", ck_format_name(o.format) ? ck_format_name(o.format) : "auto",
        "pin_first_user", (o.flags & CK_OPT_NO_PIN_FIRST_USER) ? Py_False : Py_True, "retention",
        retention, "backend", self->backend ? self->backend : Py_None, "backend_timeout",
        o.backend_timeout ? o.backend_timeout : self->host.timeout, "prompt_cache", prompt_cache,
        "cache_breakpoints", (o.flags & CK_OPT_CACHE_BREAKPOINTS) ? Py_True : Py_False,
        "min_gain", (unsigned long long)o.min_gain);
}

PyDoc_STRVAR(compactor_doc,
             "Compactor(context_window, *, session_id=None, store_dir='.ctxkeel', warn=0.6, "
             "soft=0.7, full=0.8, emergency=0.95, keep_tail=6, offload_threshold=4000, "
             "tool_offload_threshold=10000, summary_max_tokens=None, estimator='default', "
             "format='auto', pin_first_user=True, retention=None, backend=None,\n"
             "backend_timeout=None, awaiter=None, target=None, keep_tail_tokens=None, store=None,\n"
             "prompt_cache=None, cache_breakpoints=False, min_gain=None)\n"
             "--\n"
             "\n"
             "The core of ctxkeel.Compactor: one agent session's compaction state, its evidence\n"
             "store and its audit log. Use ctxkeel.Compactor, which runs the summarizer.\n"
             "A session_id whose audit log exists under store_dir resumes that session.\n"
             "target and keep_tail_tokens None (like summary_max_tokens None) take the core's\n"
             "defaults: 0.5 (below soft) and context_window / 4.\n"
             "estimator may be a callable, fn(text) -> int, which then counts every message.\n"
             "retention: {pattern: {'head', 'tail', 'errors', 'max_bytes', 'offload'}} or a\n"
             "list of (pattern, policy) pairs. backend: an object with put(key, text) and\n"
             "get(key) -> str | None used instead of the files under store_dir;\n"
             "awaiter(aw, timeout) runs an awaitable that one of them returns and gives its\n"
             "value, raising TimeoutError after backend_timeout seconds (None: the core's\n"
             "default, 10).\n"
             "store: 's3://BUCKET/PREFIX?region=...&endpoint=...', the core's S3 backend\n"
             "(credentials from AWS_*), which then holds evidence, audit records and state.\n"
             "Wrong types raise TypeError; bad values raise InputError naming the option.");
PyDoc_STRVAR(begin_doc,
             "begin($self, messages, tool_tokens=0, /, *, extractive=False, session=False)\n"
             "--\n\n"
             "Starts a compaction of messages (a list of message dicts, never modified) and\n"
             "returns it as a Compaction; the Compactor is busy until it is finished or\n"
             "closed. tool_tokens is the cost of the tool schemas sent with the request.\n"
             "With extractive=True the built-in summarizer is used and the compaction is\n"
             "finished at once (finish() then only builds the result). With session=True,\n"
             "messages is the append-only session's list, which read() read already.");
PyDoc_STRVAR(offload_doc,
             "offload($self, message, /)\n--\n\n"
             "The tool-time gate: stores each tool result of message longer than\n"
             "tool_offload_threshold bytes in the evidence store and returns a new message\n"
             "with placeholders; returns message itself when nothing was offloaded. A store\n"
             "that cannot be written leaves the message as it is (with a RuntimeWarning).");
PyDoc_STRVAR(read_evidence_doc,
             "read_evidence($self, /, ref, *, offset=0, limit=200)\n--\n\n"
             "Lines [offset, offset + limit) of an offloaded output, exactly as stored (''\n"
             "past the end). ref is its tool-call id or the path its placeholder states.\n"
             "An unknown ref raises InputError.");
PyDoc_STRVAR(search_evidence_doc,
             "search_evidence($self, /, ref, pattern)\n--\n\n"
             "Lines matching pattern (a POSIX extended regular expression) in one offloaded\n"
             "output, or in all of the session's when ref is None: a list of dicts\n"
             "{'ref', 'line', 'text'}, at most 1000, where 'line' counts from 0 as\n"
             "read_evidence offsets do (reading at that offset lands on the line).");
PyDoc_STRVAR(answer_read_evidence_doc,
             "answer_read_evidence($self, arguments, /)\n--\n\n"
             "The answer to a model's call of the read_evidence tool, whose arguments are the\n"
             "JSON text arguments ('' means {}): (text, is_error). The text is the lines read,\n"
             "the matches found, or what was wrong with the call; is_error says which.");
PyDoc_STRVAR(observe_usage_doc,
             "observe_usage($self, prompt_tokens, /)\n--\n\n"
             "The prompt tokens the provider counted for the last view returned. Their ratio\n"
             "to ctxkeel's estimate corrects later tier decisions (see usage_factor). 0 is\n"
             "ignored.");
PyDoc_STRVAR(read_doc, "read($self, messages, from_, /)\n--\n\n"
                       "Reads messages[from_:] of the append-only session's list into the\n"
                       "session's history (the first from_ are read already).");
PyDoc_STRVAR(reset_doc, "reset($self, /)\n--\n\n"
                        "Forgets the session state (checkpoint, coverage, offloads); the audit\n"
                        "log stays.");

static PyMethodDef compactor_methods[] = {
    {
        .ml_name = "begin",
        .ml_meth = (PyCFunction)(void (*)(void))compactor_begin,
        .ml_flags = METH_FASTCALL | METH_KEYWORDS,
        .ml_doc = begin_doc,
    },
    {
        .ml_name = "read",
        .ml_meth = (PyCFunction)(void (*)(void))compactor_read,
        .ml_flags = METH_FASTCALL,
        .ml_doc = read_doc,
    },
    {
        .ml_name = "offload",
        .ml_meth = compactor_offload,
        .ml_flags = METH_O,
        .ml_doc = offload_doc,
    },
    {
        .ml_name = "read_evidence",
        .ml_meth = (PyCFunction)(void (*)(void))compactor_read_evidence,
        .ml_flags = METH_VARARGS | METH_KEYWORDS,
        .ml_doc = read_evidence_doc,
    },
    {
        .ml_name = "search_evidence",
        .ml_meth = (PyCFunction)(void (*)(void))compactor_search_evidence,
        .ml_flags = METH_VARARGS | METH_KEYWORDS,
        .ml_doc = search_evidence_doc,
    },
    {
        .ml_name = "answer_read_evidence",
        .ml_meth = compactor_answer_read_evidence,
        .ml_flags = METH_O,
        .ml_doc = answer_read_evidence_doc,
    },
    {
        .ml_name = "observe_usage",
        .ml_meth = compactor_observe_usage,
        .ml_flags = METH_O,
        .ml_doc = observe_usage_doc,
    },
    {
        .ml_name = "reset",
        .ml_meth = compactor_reset,
        .ml_flags = METH_NOARGS,
        .ml_doc = reset_doc,
    },
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef compactor_getset[] = {
    {
        .name = "session_id",
        .get = compactor_get_session_id,
        .doc = "The session id.",
    },
    {
        .name = "usage_factor",
        .get = compactor_get_usage_factor,
        .doc = "The correction applied to estimates: 1.0 until usage was observed.",
    },
    {
        .name = "busy",
        .get = compactor_get_busy,
        .doc = "True while a Compaction begun on this compactor is open.",
    },
    {
        .name = "has_session",
        .get = compactor_get_has_session,
        .doc = "True when the session's history (read()) is kept for the next view.",
    },
    {
        .name = "options",
        .get = compactor_get_options,
        .doc = "The options in force, defaults filled in, as a dict.",
    },
    {NULL, NULL, NULL, NULL, NULL},
};

/* One slot per line, which clang-format would pack. */
/* clang-format off */
static PyType_Slot compactor_slots[] = {
    {Py_tp_doc, (void *)compactor_doc},
    {Py_tp_new, (void *)compactor_new},
    {Py_tp_dealloc, (void *)compactor_dealloc},
    {Py_tp_traverse, (void *)compactor_traverse},
    {Py_tp_clear, (void *)compactor_clear},
    {Py_tp_methods, compactor_methods},
    {Py_tp_getset, compactor_getset},
    {0, NULL},
};
/* clang-format on */

static PyType_Spec compactor_spec = {
    .name = "ctxkeel._ext.Compactor",
    .basicsize = sizeof(ck_py_compactor),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = compactor_slots,
};

/* ---- module level ------------------------------------------------------------------------ */

PyObject *ck_py_read_evidence_tool(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"format", NULL};
    ck_module_state *st = ck_py_state(module);
    PyObject *format_obj = NULL;
    ck_format format = CK_FORMAT_OPENAI;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:read_evidence_tool", kwlist, &format_obj))
        return NULL;
    if (format_obj) {
        if (ck_py_parse_format(format_obj, &format) < 0) return NULL;
        if (format != CK_FORMAT_OPENAI && format != CK_FORMAT_ANTHROPIC)
            return PyErr_Format(PyExc_ValueError, MSG_TOOL_FORMAT, format_obj);
    }
    PyObject *text = PyUnicode_FromString(ck_read_evidence_tool(format));
    if (!text) return NULL;
    /* A new dict on every call, so a caller may edit its copy. */
    PyObject *tool = PyObject_CallOneArg(st->json_loads, text);
    Py_DECREF(text);
    return tool;
}

/* Adds `value` (a new reference, stolen even on failure) to the module. */
static int add_new(PyObject *module, const char *name, PyObject *value) {
    if (!value) return -1;
    if (PyModule_AddObject(module, name, value) < 0) {
        Py_DECREF(value);
        return -1;
    }
    return 0;
}

int ck_py_compactor_init(PyObject *module, ck_module_state *st) {
    st->CompactorType = PyType_FromModuleAndSpec(module, &compactor_spec, NULL);
    if (!st->CompactorType) return -1;
    st->CompactionType = PyType_FromModuleAndSpec(module, &job_spec, NULL);
    if (!st->CompactionType) return -1;
    Py_INCREF(st->CompactorType);
    if (add_new(module, "Compactor", st->CompactorType) < 0) return -1;
    Py_INCREF(st->CompactionType);
    if (add_new(module, "Compaction", st->CompactionType) < 0) return -1;
    PyObject *tiers = PyTuple_New(CK_TIER_EMERGENCY + 1);
    if (!tiers) return -1;
    for (int t = 0; t <= CK_TIER_EMERGENCY; t++)
        PyTuple_SET_ITEM(tiers, t, tier_name(st, (ck_tier)t));
    if (add_new(module, "TIERS", tiers) < 0) return -1;
    /* The core's default backend_timeout, for the signature of ctxkeel.Compactor. */
    if (add_new(module, "BACKEND_TIMEOUT", PyFloat_FromDouble(CK_BACKEND_TIMEOUT_DEFAULT)) < 0)
        return -1;
    return add_new(module, "CHECKPOINT_MARKER", PyUnicode_FromString(ck_checkpoint_marker()));
}
