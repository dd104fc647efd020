/*
 * replay.c - _replay() and _cli_main(): the core's replay (ck_replay_run) and command line
 * (ck_cli_main), which ctxkeel.replay(), `python -m ctxkeel` and the ctxkeel console script
 * call. The rows come from the core as they are; this file only turns them into dicts.
 */
#include "state.h"

#include <string.h>

/* A str, or None for NULL. */
static PyObject *replay_text(const char *text, size_t len) {
    if (!text) Py_RETURN_NONE;
    return ck_py_text(text, len);
}

/* One row as a dict; the record parsed with json.loads (None without a compaction). */
static PyObject *replay_row(const ck_module_state *st, const ck_replay_row *row) {
    PyObject *record = NULL, *dict = NULL;
    if (row->record) {
        PyObject *text = ck_py_text(row->record, row->record_len);
        record = text ? PyObject_CallOneArg(st->json_loads, text) : NULL;
        Py_XDECREF(text);
        if (!record) return NULL;
    } else {
        Py_INCREF(Py_None);
        record = Py_None;
    }
    PyObject *action = replay_text(row->action, strlen(row->action));
    PyObject *checkpoint = replay_text(row->checkpoint, row->checkpoint_len);
    PyObject *placeholder = replay_text(row->placeholder, row->placeholder_len);
    if (action && checkpoint && placeholder)
        dict = Py_BuildValue(
            "{s:n,s:n,s:n,s:K,s:K,s:K,s:d,s:d,s:K,s:K,s:O,s:n,s:n,s:n,s:n,s:K,s:O,s:O,s:O,s:O,"
            "s:O}",
            "call", (Py_ssize_t)row->call, "messages", (Py_ssize_t)row->messages,
            "view_messages", (Py_ssize_t)row->view_messages, "history_tokens",
            (unsigned long long)row->history_tokens, "tokens_before",
            (unsigned long long)row->tokens_before, "tokens_after",
            (unsigned long long)row->tokens_after, "ratio_before", row->ratio_before,
            "ratio_after", row->ratio_after, "prefix_kept", (unsigned long long)row->prefix_kept,
            "prefix_broken", (unsigned long long)row->prefix_broken, "tier",
            st->tier_names[row->tier], "compaction",
            (Py_ssize_t)row->compaction, "summarized", (Py_ssize_t)row->summarized, "offloaded",
            (Py_ssize_t)row->offloaded, "summary_calls", (Py_ssize_t)row->summary_calls,
            "summary_tokens", (unsigned long long)row->summary_tokens, "fallback",
            row->fallback ? Py_True : Py_False, "action", action, "checkpoint", checkpoint,
            "placeholder", placeholder, "record", record);
    Py_XDECREF(action);
    Py_XDECREF(checkpoint);
    Py_XDECREF(placeholder);
    Py_DECREF(record);
    return dict;
}

static PyObject *replay_totals(const ck_replay *r) {
    ck_replay_total t;
    ck_replay_totals(r, &t);
    return Py_BuildValue(
        "{s:n,s:{s:n,s:n,s:n,s:n,s:n},s:n,s:n,s:K,s:n,s:K,s:K,s:K,s:n,s:d,s:d,s:n,s:n}", "calls",
        (Py_ssize_t)t.calls, "per_tier", "none", (Py_ssize_t)t.per_tier[CK_TIER_NONE], "warn",
        (Py_ssize_t)t.per_tier[CK_TIER_WARN], "soft", (Py_ssize_t)t.per_tier[CK_TIER_SOFT],
        "full", (Py_ssize_t)t.per_tier[CK_TIER_FULL], "emergency",
        (Py_ssize_t)t.per_tier[CK_TIER_EMERGENCY], "compactions", (Py_ssize_t)t.compactions,
        "summary_calls", (Py_ssize_t)t.summary_calls, "summary_tokens",
        (unsigned long long)t.summary_tokens, "offloaded", (Py_ssize_t)t.offloaded,
        "tokens_sent", (unsigned long long)t.tokens_sent, "tokens_without",
        (unsigned long long)t.tokens_without, "prefix_kept", (unsigned long long)t.prefix_kept,
        "prefix_breaks", (Py_ssize_t)t.prefix_breaks, "peak_ratio", t.peak_ratio, "peak_ratio_without",
        t.peak_ratio_without, "over_window_without", (Py_ssize_t)t.over_window_without,
        "first_over_without", (Py_ssize_t)t.first_over_without);
}

/* (rows, totals, svg) of a finished replay. */
static PyObject *replay_result(const ck_module_state *st, const ck_replay *r, const char *title) {
    PyObject *rows = PyList_New((Py_ssize_t)ck_replay_count(r)), *totals = NULL, *svg = NULL;
    for (size_t i = 0; rows && i < ck_replay_count(r); i++) {
        PyObject *row = replay_row(st, ck_replay_get(r, i));
        if (!row) {
            Py_CLEAR(rows);
            break;
        }
        PyList_SET_ITEM(rows, (Py_ssize_t)i, row);
    }
    char *text = NULL;
    size_t len = 0;
    if (rows && (totals = replay_totals(r)) != NULL) {
        if (ck_replay_svg(r, title, &text, &len) != CK_OK) PyErr_NoMemory();
        else svg = ck_py_str(text, len);
    }
    ck_free(text);
    PyObject *result = svg ? PyTuple_Pack(3, rows, totals, svg) : NULL;
    Py_XDECREF(rows);
    Py_XDECREF(totals);
    Py_XDECREF(svg);
    return result;
}

/* The HTTP summarizer's call, made without the GIL: it reads only the request and the
 * compaction, C memory that the compactor (marked busy) owns, and allocates through the raw
 * allocator. Holding the GIL through a transfer would stall every other thread, a server in
 * this process included, for as long as the model takes. */
static int replay_http(void *ctx, const ck_summary_request *req, ck_compaction *c) {
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ck_http_summarize_fn(ctx, req, c);
    Py_END_ALLOW_THREADS
    return rc;
}

PyObject *ck_py_replay(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"compactor", "messages_json", "summarize", "title", NULL};
    ck_module_state *st = ck_py_state(module);
    PyObject *obj, *summarize = Py_None;
    const char *json, *title = NULL;
    Py_ssize_t json_len;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Os#|Oz:_replay", kwlist, &obj, &json,
                                     &json_len, &summarize, &title))
        return NULL;
    if (!PyObject_TypeCheck(obj, (PyTypeObject *)st->CompactorType))
        return PyErr_Format(PyExc_TypeError, "ctxkeel: compactor must be a _ext.Compactor");
    ck_http_summarizer *llm = NULL;
    if (summarize != Py_None) {
        if (!PyObject_TypeCheck(summarize, (PyTypeObject *)st->HttpSummarizerType))
            return PyErr_Format(PyExc_TypeError,
                                "ctxkeel: replay() takes summarize=None (the extractive "
                                "summarizer) or an HttpSummarizer, not %s",
                                Py_TYPE(summarize)->tp_name);
        llm = ((ck_py_http_summarizer *)summarize)->hs;
    }
    ck_py_compactor *self = (ck_py_compactor *)obj;
    if (self->busy || self->calling)
        return ck_py_raise(st, CK_EBUSY, -1, NULL, "concurrent use of Compactor", -1);
    ck_error err;
    ck_history *h = ck_json_read(json, (size_t)json_len, &err);
    if (!h) return ck_py_raise_core(st, err.code, &err);
    /* The host's counter and backend run inside the replay with the GIL held, as for
     * compact(); the HTTP transfers let it go (replay_http). */
    self->busy = self->calling = 1;
    ck_py_host_reset(&self->host);
    ck_replay *r = NULL;
    int rc = ck_replay_run(self->ck, h, llm ? replay_http : NULL, llm, &r, &err);
    self->busy = self->calling = 0;
    PyObject *result = NULL;
    if (ck_py_host_end(&self->host) == 0) {
        if (rc) ck_py_raise_core(st, rc, &err);
        else result = replay_result(st, r, title);
    }
    ck_replay_free(r);
    ck_history_free(h);
    return result;
}

PyObject *ck_py_cli_main(PyObject *module, PyObject *arg) {
    (void)module;
    if (!PyList_Check(arg))
        return PyErr_Format(PyExc_TypeError, "ctxkeel: _cli_main takes a list of str, not %s",
                            Py_TYPE(arg)->tp_name);
    /* The arguments are copied into C strings: ck_cli_main takes a char ** as main() does. */
    Py_ssize_t n = PyList_GET_SIZE(arg);
    char **argv = PyMem_Calloc((size_t)n + 1, sizeof *argv);
    if (!argv) return PyErr_NoMemory();
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        PyObject *item = PyList_GET_ITEM(arg, i);
        const char *s = PyUnicode_Check(item) ? PyUnicode_AsUTF8(item) : NULL;
        if (!s && !PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "ctxkeel: argument %zd must be a str, not %s", i,
                         Py_TYPE(item)->tp_name);
        ok = s && (argv[i] = PyMem_Malloc(strlen(s) + 1)) != NULL;
        if (ok) strcpy(argv[i], s);
        else if (s) PyErr_NoMemory();
    }
    /* The GIL stays held: the command is a process's main, with no other thread to serve. */
    int rc = ok ? ck_cli_main((int)n, argv) : 2;
    for (Py_ssize_t i = 0; i < n; i++) PyMem_Free(argv[i]);
    PyMem_Free(argv);
    return ok ? PyLong_FromLong(rc) : NULL;
}
