/*
 * history_ops.c - the functions that read a message list: estimate_tokens, check_pairs and
 * repair_pairs.
 *
 * Each one reads its input into a ck_history (values.c), calls the core once and builds its
 * result. All of them keep the GIL throughout (see state.h): the history borrows the buffers
 * of Python strs, and the core calls are short next to the reading itself.
 */
#include "state.h"

#include <stdio.h>
#include <string.h>

static const char MSG_X_TYPE[] =
    "ctxkeel: estimate_tokens() argument 'x' must be a str, a message dict, a list or a tuple, "
    "not %.200s";
static const char MSG_ESTIMATOR_TYPE[] =
    "ctxkeel: estimator must be a str or a callable, not %.200s";
static const char MSG_ESTIMATOR_VALUE[] = "ctxkeel: estimator must be %s, not %R";
static const char MSG_FORMAT_TYPE[] = "ctxkeel: format must be a str, not %.200s";
static const char MSG_FORMAT_VALUE[] = "ctxkeel: format must be %s, not %R";

/* ---- arguments --------------------------------------------------------------------------- */

/* Raises ValueError `msg` (its %s: the `n` names, "'a', 'b' or 'c'"; its %R: `value`).
 * Returns -1. */
static int raise_not_one_of(const char *msg, const char *const *names, int n, PyObject *value) {
    char list[192];
    size_t at = 0;
    for (int k = 0; k < n && at < sizeof list; k++) {
        const char *sep = k == 0 ? "" : k + 1 < n ? ", " : " or ";
        int w = snprintf(list + at, sizeof list - at, "%s'%s'", sep, names[k]);
        if (w < 0) break;
        at += (size_t)w;
    }
    PyErr_Format(PyExc_ValueError, msg, list, value);
    return -1;
}

int ck_py_parse_estimator(PyObject *value, ck_estimator *out, PyObject **counter) {
    *out = CK_EST_DEFAULT;
    *counter = NULL;
    if (!value) return 0;
    if (!PyUnicode_Check(value) && PyCallable_Check(value)) {
        *counter = value;
        return 0;
    }
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, MSG_ESTIMATOR_TYPE, Py_TYPE(value)->tp_name);
        return -1;
    }
    /* The names are the core's (ck_estimator_from_name); only the message is put together here. */
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(value, &len);
    if (!name) return -1;
    if (ck_estimator_from_name(name, (size_t)len, out) == CK_OK) return 0;
    const char *names[16];
    int n = 0;
    while (n < 16 && (names[n] = ck_estimator_name((ck_estimator)n))) n++;
    return raise_not_one_of(MSG_ESTIMATOR_VALUE, names, n, value);
}

int ck_py_parse_format(PyObject *value, ck_format *out) {
    *out = CK_FORMAT_AUTO;
    if (!value) return 0;
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, MSG_FORMAT_TYPE, Py_TYPE(value)->tp_name);
        return -1;
    }
    /* The names are the core's (ck_format_from_name); only the message is put together here. */
    Py_ssize_t len;
    const char *name = PyUnicode_AsUTF8AndSize(value, &len);
    if (!name) return -1;
    if (ck_format_from_name(name, (size_t)len, out) == CK_OK) return 0;
    const char *names[CK_FORMAT_COUNT];
    for (int f = 0; f < CK_FORMAT_COUNT; f++) names[f] = ck_format_name((ck_format)f);
    return raise_not_one_of(MSG_FORMAT_VALUE, names, CK_FORMAT_COUNT, value);
}

/* ---- estimate_tokens --------------------------------------------------------------------- */

/* A count from the host's counter (UINT64_MAX: it failed, and its error is raised now). */
static PyObject *counted(ck_py_host *host, uint64_t tokens) {
    if (ck_py_host_end(host) < 0) return NULL;
    if (tokens == UINT64_MAX) return PyErr_NoMemory();
    return PyLong_FromUnsignedLongLong(tokens);
}

/* Tokens of a tool-schema list: the core estimates its compact JSON text, or the host's
 * counter counts it. */
static PyObject *estimate_tools(const ck_module_state *st, PyObject *tools, ck_estimator est,
                                ck_py_host *host) {
    PyObject *json = ck_py_compact_json(st, tools);
    if (!json) {
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError))
            return ck_py_raise(st, CK_ETYPE, -1, "tools", "cannot be serialized as JSON", -1);
        return NULL;
    }
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(json, &len);
    if (!text) {
        ck_py_raise_utf8(st, json, -1, "tools");
        Py_DECREF(json);
        return NULL;
    }
    uint64_t tokens = host->counter ? ck_py_host_count(host, text, (size_t)len)
                                    : ck_estimate_tools(text, (size_t)len, est);
    Py_DECREF(json);
    return host->counter ? counted(host, tokens) : PyLong_FromUnsignedLongLong(tokens);
}

/* Tokens of one message or of a message list, read into a history first. */
static PyObject *estimate_messages(ck_module_state *st, PyObject *x, int single, ck_estimator est,
                                   ck_py_host *host) {
    ck_py_history ph;
    if (ck_py_history_init(&ph, st) < 0) return NULL;
    int rc = single ? ck_py_history_read_message(&ph, x, CK_FORMAT_AUTO)
                    : ck_py_history_read_list(&ph, x, CK_FORMAT_AUTO);
    PyObject *result = NULL;
    if (rc == 0 && host->counter) {
        ck_counter counter = {ck_py_host_count, host};
        result = counted(host, single ? ck_count_message(ph.h, 0, &counter)
                                      : ck_count_history(ph.h, &counter));
    } else if (rc == 0) {
        uint64_t tokens =
            single ? ck_estimate_message(ph.h, 0, est) : ck_estimate_history(ph.h, est);
        result = PyLong_FromUnsignedLongLong(tokens);
    }
    ck_py_history_dispose(&ph);
    return result;
}

/* The tokens of a list of messages or of tool schemas. */
static PyObject *estimate_list(ck_module_state *st, PyObject *list, ck_estimator est,
                               ck_py_host *host) {
    if (PyList_GET_SIZE(list) == 0) return PyLong_FromLong(0);
    int tools = ck_py_list_is_tools(st, list);
    if (tools < 0) return NULL;
    if (tools) return estimate_tools(st, list, est, host);
    return estimate_messages(st, list, 0, est, host);
}

PyObject *ck_py_estimate_tokens(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"x", "estimator", NULL};
    ck_module_state *st = ck_py_state(module);
    PyObject *x, *estimator = NULL;
    ck_estimator est;
    /* A callable estimator is borrowed from the arguments for the length of the call. */
    ck_py_host host = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:estimate_tokens", kwlist, &x,
                                     &estimator) ||
        ck_py_parse_estimator(estimator, &est, &host.counter) < 0)
        return NULL;
    if (PyUnicode_Check(x)) {
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(x, &len);
        if (!text) return ck_py_raise_utf8(st, x, -1, "x");
        if (host.counter) return counted(&host, ck_py_host_count(&host, text, (size_t)len));
        return PyLong_FromUnsignedLongLong(ck_estimate_text(text, (size_t)len, est));
    }
    if (PyDict_Check(x)) return estimate_messages(st, x, 1, est, &host);
    if (PyTuple_Check(x)) {
        /* A tuple of messages or tools counts as the list of them. */
        PyObject *list = PySequence_List(x);
        if (!list) return NULL;
        PyObject *n = estimate_list(st, list, est, &host);
        Py_DECREF(list);
        return n;
    }
    if (!PyList_Check(x)) return PyErr_Format(PyExc_TypeError, MSG_X_TYPE, Py_TYPE(x)->tp_name);
    return estimate_list(st, x, est, &host);
}

/* ---- check_pairs ------------------------------------------------------------------------- */

/* The core's sentence for a violation (ck_pair_violation_describe()). */
static PyObject *describe(const ck_py_history *ph, const ck_pair_violation *v, ck_format format) {
    char *text = NULL;
    size_t len = 0;
    if (ck_pair_violation_describe(ph->h, v, format, &text, &len)) return PyErr_NoMemory();
    PyObject *s = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "replace");
    ck_free(text);
    return s;
}

/* {"kind", "index", "part", "tool_call_id", "message"} for one violation. */
static PyObject *issue_dict(const ck_py_history *ph, const ck_pair_violation *v, ck_format format) {
    const ck_module_state *st = ph->st;
    PyObject *id = ck_py_str(v->id, v->id_len);
    if (!id) return NULL;
    PyObject *d = PyDict_New();
    if (!d) goto error;
    PyObject *kind = (unsigned)v->kind <= CK_PAIR_RESULT_ORDER ? st->issue_names[v->kind] : NULL;
    if (kind) {
        if (PyDict_SetItem(d, st->s_kind, kind) < 0) goto error;
    } else {
        PyObject *name = PyUnicode_FromString(ck_pair_issue_name(v->kind));
        int rc = name ? PyDict_SetItem(d, st->s_kind, name) : -1;
        Py_XDECREF(name);
        if (rc < 0) goto error;
    }
    PyObject *index = PyLong_FromSize_t(v->index);
    if (!index || PyDict_SetItem(d, st->s_index, index) < 0) {
        Py_XDECREF(index);
        goto error;
    }
    Py_DECREF(index);
    PyObject *part = PyLong_FromSize_t(v->part);
    if (!part || PyDict_SetItem(d, st->s_part, part) < 0) {
        Py_XDECREF(part);
        goto error;
    }
    Py_DECREF(part);
    if (PyDict_SetItem(d, st->keys[CK_KEY_TOOL_CALL_ID], id) < 0) goto error;
    PyObject *message = describe(ph, v, format);
    if (!message || PyDict_SetItem(d, st->s_message, message) < 0) {
        Py_XDECREF(message);
        goto error;
    }
    Py_DECREF(message);
    Py_DECREF(id);
    return d;

error:
    Py_DECREF(id);
    Py_XDECREF(d);
    return NULL;
}

PyObject *ck_py_check_pairs(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"messages", "format", NULL};
    ck_module_state *st = ck_py_state(module);
    PyObject *messages, *format_obj = NULL, *result = NULL;
    ck_format requested, format;
    ck_pair_violation *issues = NULL;
    size_t n_issues = 0;
    ck_error err;
    ck_py_history ph;
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:check_pairs", kwlist, &messages,
                                     &format_obj) ||
        ck_py_parse_format(format_obj, &requested) < 0 || ck_py_history_init(&ph, st) < 0)
        return NULL;
    if (ck_py_history_read_list(&ph, messages, requested) < 0) goto done;
    /* The resolved format only words the messages; ck_check_pairs resolves it again. */
    rc = ck_history_format(ph.h, requested, &format, &err);
    if (rc == CK_OK) rc = ck_check_pairs(ph.h, requested, &issues, &n_issues, &err);
    if (rc != CK_OK) {
        ck_py_raise_core(st, rc, &err);
        goto done;
    }
    result = PyList_New((Py_ssize_t)n_issues);
    for (size_t k = 0; result && k < n_issues; k++) {
        PyObject *d = issue_dict(&ph, &issues[k], format);
        if (!d)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, (Py_ssize_t)k, d);
    }

done:
    ck_free(issues);
    ck_py_history_dispose(&ph);
    return result;
}

/* ---- repair_pairs ------------------------------------------------------------------------ */

PyObject *ck_py_repair_pairs(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"messages", "format", NULL};
    ck_module_state *st = ck_py_state(module);
    PyObject *messages, *format_obj = NULL, *result = NULL;
    ck_format requested, format;
    ck_view *view = NULL;
    ck_error err;
    ck_py_history ph;
    int rc;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:repair_pairs", kwlist, &messages,
                                     &format_obj) ||
        ck_py_parse_format(format_obj, &requested) < 0 || ck_py_history_init(&ph, st) < 0)
        return NULL;
    if (ck_py_history_read_list(&ph, messages, requested) < 0) goto done;
    rc = ck_history_format(ph.h, requested, &format, &err);
    if (rc == CK_OK) rc = ck_repair_pairs(ph.h, format, &view, &err);
    if (rc != CK_OK) {
        ck_py_raise_core(st, rc, &err);
        goto done;
    }
    result = ck_py_view_build(&ph, view);

done:
    /* The view borrows from the history, which borrows from the pinned objects. */
    ck_view_free(view);
    ck_py_history_dispose(&ph);
    return result;
}
