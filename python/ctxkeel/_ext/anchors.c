/*
 * anchors.c - parse_anchors and merge_anchors: the five anchors of a checkpoint as a dict.
 *
 * The dict always has the five keys, in their fixed order (user_intent, execution_progress,
 * key_decisions, tried_solutions, next_steps); an anchor that is N/A maps to None. The core
 * owns the rules (what counts as N/A, how sections are recognised, that N/A never overwrites
 * a value); this file only moves text across. The GIL is kept (see state.h): the work is a
 * linear scan of one reply, shorter than the round trip of releasing and taking it back.
 */
#include "state.h"

#include <stdio.h>
#include <string.h>

static const char MSG_TEXT_TYPE[] =
    "ctxkeel: parse_anchors() argument 'text' must be a str or bytes-like, not %.200s";
static const char MSG_ANCHORS_TYPE[] =
    "ctxkeel: merge_anchors() argument '%s' must be a dict or None, not %.200s";
static const char MSG_VALUE_TYPE[] = "ctxkeel: %s['%s'] must be a str or None, not %.200s";

/* The five-key dict of an anchor set. */
static PyObject *anchors_dict(const ck_module_state *st, const ck_anchors *anchors) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
        size_t len;
        const char *text = ck_anchors_get(anchors, (ck_anchor)k, &len);
        PyObject *value;
        if (text) {
            value = ck_py_text(text, len);
        } else {
            value = Py_None;
            Py_INCREF(value);
        }
        int rc = value ? PyDict_SetItem(d, st->anchor_keys[k], value) : -1;
        Py_XDECREF(value);
        if (rc < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

/* The text argument as a str: a str as it is, a bytes-like object decoded from UTF-8 (the
 * buffer is released before returning, since the str is a copy). Returns a new reference. */
static PyObject *text_argument(const ck_module_state *st, PyObject *text) {
    if (PyUnicode_Check(text)) {
        Py_INCREF(text);
        return text;
    }
    if (!PyObject_CheckBuffer(text))
        return PyErr_Format(PyExc_TypeError, MSG_TEXT_TYPE, Py_TYPE(text)->tp_name);
    Py_buffer view;
    if (PyObject_GetBuffer(text, &view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    PyObject *str = PyUnicode_DecodeUTF8(view.buf, view.len, "strict");
    PyBuffer_Release(&view);
    if (!str && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        return ck_py_raise_utf8(st, NULL, -1, "text");
    return str;
}

PyObject *ck_py_parse_anchors(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"text", NULL};
    ck_module_state *st = ck_py_state(module);
    PyObject *text, *str = NULL, *dict = NULL, *summary = NULL, *result = NULL;
    ck_anchors *anchors = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:parse_anchors", kwlist, &text)) return NULL;
    str = text_argument(st, text);
    if (!str) goto done;
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(str, &len);
    if (!utf8) {
        ck_py_raise_utf8(st, str, -1, "text");
        goto done;
    }
    /* The core copies what it keeps, so the str need only live through this call. */
    anchors = ck_anchors_parse(utf8, (size_t)len);
    if (!anchors) {
        PyErr_NoMemory();
        goto done;
    }
    size_t summary_len;
    const char *summary_text = ck_anchors_summary(anchors, &summary_len);
    dict = anchors_dict(st, anchors);
    summary = dict ? ck_py_text(summary_text, summary_len) : NULL;
    if (summary) result = PyTuple_Pack(2, dict, summary);

done:
    ck_anchors_free(anchors);
    Py_XDECREF(str);
    Py_XDECREF(dict);
    Py_XDECREF(summary);
    return result;
}

/* Sets anchor `k` of `anchors` from `value` (a str or None) found in argument `arg`. */
static int set_anchor(const ck_module_state *st, ck_anchors *anchors, int k, PyObject *value,
                      const char *arg) {
    const char *key = ck_anchor_key((ck_anchor)k);
    if (value == Py_None) return 0;
    if (!PyUnicode_Check(value)) {
        PyErr_Format(PyExc_TypeError, MSG_VALUE_TYPE, arg, key, Py_TYPE(value)->tp_name);
        return -1;
    }
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(value, &len);
    if (!text) {
        char where[CK_PY_WHERE_MAX];
        snprintf(where, sizeof where, "%s['%s']", arg, key);
        ck_py_raise_utf8(st, value, -1, where);
        return -1;
    }
    /* ck_anchors_set treats "N/A", "- N/A", "none" and the like as N/A, which is what keeps
     * such a value from overwriting a real one when merging. */
    int rc = ck_anchors_set(anchors, (ck_anchor)k, text, (size_t)len);
    if (rc == CK_ENOMEM) {
        PyErr_NoMemory();
        return -1;
    }
    if (rc != CK_OK) {
        ck_py_raise(st, rc, -1, NULL, NULL, -1);
        return -1;
    }
    return 0;
}

/* An anchor set from a dict like parse_anchors' (missing keys and None are N/A; other keys
 * are ignored) or from None (all N/A). Returns NULL with an exception set on failure. */
static ck_anchors *anchors_from(const ck_module_state *st, PyObject *obj, const char *arg) {
    if (obj != Py_None && !PyDict_Check(obj)) {
        PyErr_Format(PyExc_TypeError, MSG_ANCHORS_TYPE, arg, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    ck_anchors *anchors = ck_anchors_new();
    if (!anchors) {
        PyErr_NoMemory();
        return NULL;
    }
    if (obj == Py_None) return anchors;
    for (int k = 0; k < CK_ANCHOR_COUNT; k++) {
        PyObject *value = PyDict_GetItemWithError(obj, st->anchor_keys[k]);
        if (!value && PyErr_Occurred()) goto error;
        if (!value) continue;
        /* Held across the call: AsUTF8 keeps its buffer in the str, and the dict could drop
         * the str if a key comparison ran Python code. */
        Py_INCREF(value);
        int rc = set_anchor(st, anchors, k, value, arg);
        Py_DECREF(value);
        if (rc < 0) goto error;
    }
    return anchors;

error:
    ck_anchors_free(anchors);
    return NULL;
}

PyObject *ck_py_merge_anchors(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"old", "new", NULL};
    ck_module_state *st = ck_py_state(module);
    PyObject *old_obj, *new_obj, *result = NULL;
    ck_anchors *older = NULL, *newer = NULL, *merged = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:merge_anchors", kwlist, &old_obj, &new_obj))
        return NULL;
    older = anchors_from(st, old_obj, "old");
    if (!older) goto done;
    newer = anchors_from(st, new_obj, "new");
    if (!newer) goto done;
    merged = ck_anchors_merge(older, newer);
    if (!merged) {
        PyErr_NoMemory();
        goto done;
    }
    result = anchors_dict(st, merged);

done:
    ck_anchors_free(merged);
    ck_anchors_free(newer);
    ck_anchors_free(older);
    return result;
}
