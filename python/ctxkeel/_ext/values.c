/*
 * values.c - Python objects as the core's host values: the ck_host_reader that the core's
 * format layer reads message dicts through, and the ck_host_builder it builds views with.
 * The dialects themselves (which field means what) live in the core, once, for every host.
 *
 * A ck_value's `ptr` is a PyObject *. Read values are borrowed, and kept alive by the
 * history's pins: the message tuple (the snapshot), every value a `field` or an `item` of a
 * list handed the core (a list may change under Python code that runs while reading: a key's
 * __eq__, a value's JSON encoding), and the JSON strs made for arguments. The core borrows
 * the UTF-8 buffers of those strs until the history is freed. Built values are new
 * references, owned by the builder until `set` or `push` takes them.
 *
 * A Python exception raised inside a callback is taken off the error indicator and kept
 * (values_keep); the callback returns CK_PY_RAISED, which the core passes back unchanged, and
 * the binding raises the kept exception once the core has returned.
 */
#include "state.h"

#include <stdio.h>
#include <string.h>

/* The status a callback returns when Python raised; no core status has this value. */
#define CK_PY_RAISED (-1000)

static const char MSG_NOT_A_LIST[] = "ctxkeel: messages must be a list or a tuple, not %.200s";
static const char MSG_NOT_JSON[] = "cannot be serialized as JSON";

PyObject *ck_py_str(const char *text, size_t len) {
    if (len > (size_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
    return PyUnicode_DecodeUTF8(text ? text : "", (Py_ssize_t)len, "strict");
}

PyObject *ck_py_text(const char *text, size_t len) {
    if (len > (size_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
    return PyUnicode_DecodeUTF8(text ? text : "", (Py_ssize_t)len, "replace");
}

PyObject *ck_py_compact_json(const ck_module_state *st, PyObject *obj) {
    return PyObject_CallOneArg(st->json_encode, obj);
}

/* Keeps the exception just raised for after the core call (the first one wins), and returns
 * the status that says so. */
static int values_keep(ck_py_history *ph) {
    ck_py_keep_exception(&ph->raised);
    return CK_PY_RAISED;
}

/* Makes room for one more pin. Growing the array allocates no Python object, so no Python
 * code runs between a value being found and it being pinned. */
static int pin(ck_py_history *ph, PyObject *obj) {
    if (ph->n_pins == ph->cap_pins) {
        Py_ssize_t cap = ph->cap_pins ? ph->cap_pins * 2 : 256;
        PyObject **pins = cap <= PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(PyObject *)
                              ? PyMem_Realloc(ph->pins, (size_t)cap * sizeof *pins)
                              : NULL;
        if (!pins) return CK_ENOMEM;
        ph->pins = pins;
        ph->cap_pins = cap;
    }
    Py_INCREF(obj);
    ph->pins[ph->n_pins++] = obj;
    return CK_OK;
}

static PyObject *obj_of(ck_value v) { return (PyObject *)v.ptr; }
static ck_value value_of(PyObject *o) { return (ck_value){o, 0}; }

/* ---- the reader -------------------------------------------------------------------------- */

static ck_value_kind py_kind(void *ctx, ck_value v) {
    (void)ctx;
    PyObject *o = obj_of(v);
    if (!o) return CK_VALUE_ABSENT;
    if (o == Py_None) return CK_VALUE_NULL;
    if (PyBool_Check(o)) return CK_VALUE_BOOL;
    if (PyUnicode_Check(o)) return CK_VALUE_STRING;
    if (PyDict_Check(o)) return CK_VALUE_OBJECT;
    if (PyList_Check(o) || PyTuple_Check(o)) return CK_VALUE_ARRAY;
    if (PyLong_Check(o) || PyFloat_Check(o)) return CK_VALUE_NUMBER;
    return CK_VALUE_OTHER;
}

/*
 * A lookup finds the entry by hash and then compares the dict's key object with ours: at once
 * when they are the same object, else by their text. json.loads gives all the dicts of one
 * document the same key objects, its own rather than the interned ones that a dict display in
 * Python code uses. So the reader looks keys up with the key objects of the first dicts it
 * reads, when they are exact strs with a key's text: an exact str with the same text finds the
 * same entry in any dict, so this changes no result, only the cost (a third of reading a
 * history that json.loads made, measured).
 */
#define LEARN_DICTS 16

/* Adopts the key objects of `dict` that are exact strs with the text of a key (pinned, so that
 * each stays what it is). PyDict_Next runs no Python code. */
static int learn_keys(ck_py_history *ph, PyObject *dict) {
    ph->dicts_met++;
    ph->last_dict = dict;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(dict, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k) || !PyUnicode_IS_COMPACT_ASCII(k)) continue;
        const char *text = (const char *)PyUnicode_DATA(k);
        size_t len = (size_t)PyUnicode_GET_LENGTH(k);
        for (int j = 0; j < CK_KEY_COUNT; j++) {
            if (ph->keys[j] == k) break;
            const char *name = ck_key_name((ck_key)j);
            if (strlen(name) != len || memcmp(name, text, len) != 0) continue;
            if (pin(ph, k)) return CK_ENOMEM;
            ph->keys[j] = k;
            break;
        }
    }
    return CK_OK;
}

static int py_field(void *ctx, ck_value v, ck_key key, ck_value *out) {
    ck_py_history *ph = ctx;
    PyObject *o = obj_of(v);
    *out = value_of(NULL);
    if (!o || !PyDict_Check(o) || (unsigned)key >= CK_KEY_COUNT) return 0;
    if (ph->dicts_met < LEARN_DICTS && o != ph->last_dict && learn_keys(ph, o)) return CK_ENOMEM;
    PyObject *f = PyDict_GetItemWithError(o, ph->keys[key]);
    if (!f) return PyErr_Occurred() ? values_keep(ph) : 0;
    /* Borrowed from the dict, which Python code could change before the core is done. */
    if (pin(ph, f)) return CK_ENOMEM;
    *out = value_of(f);
    return 1;
}

static int py_count(void *ctx, ck_value v, size_t *n) {
    (void)ctx;
    PyObject *o = obj_of(v);
    *n = o && PyList_Check(o) ? (size_t)PyList_GET_SIZE(o)
         : o && PyTuple_Check(o) ? (size_t)PyTuple_GET_SIZE(o)
                                  : 0;
    return CK_OK;
}

static int py_item(void *ctx, ck_value v, size_t i, ck_value *out) {
    ck_py_history *ph = ctx;
    PyObject *o = obj_of(v);
    *out = value_of(NULL);
    if (o && PyTuple_Check(o)) {
        /* A tuple cannot change; the one being read is pinned already. */
        if (i < (size_t)PyTuple_GET_SIZE(o)) *out = value_of(PyTuple_GET_ITEM(o, (Py_ssize_t)i));
        return CK_OK;
    }
    /* A list may have shrunk since it was counted: an item gone reads as absent. */
    if (!o || !PyList_Check(o) || i >= (size_t)PyList_GET_SIZE(o)) return CK_OK;
    PyObject *item = PyList_GET_ITEM(o, (Py_ssize_t)i);
    if (pin(ph, item)) return CK_ENOMEM;
    *out = value_of(item);
    return CK_OK;
}

/* The UTF-8 buffer of a pinned str. A str that cannot be encoded (a lone surrogate) is
 * CK_EUTF8 and one over CK_MAX_STRING bytes CK_ETOOBIG, which the core names by field. */
static int py_string(void *ctx, ck_value v, const char **s, size_t *len) {
    ck_py_history *ph = ctx;
    PyObject *o = obj_of(v);
    if (!o || !PyUnicode_Check(o)) return CK_ETYPE;
    /* More code points than the limit is too many bytes in any encoding: refused before a
     * non-ASCII str gets a UTF-8 copy of that size. */
    if ((size_t)PyUnicode_GET_LENGTH(o) > CK_MAX_STRING) return CK_ETOOBIG;
    Py_ssize_t n;
    const char *text;
    if (PyUnicode_IS_COMPACT_ASCII(o)) {
        /* What PyUnicode_AsUTF8AndSize returns for these, without the call. */
        text = (const char *)PyUnicode_DATA(o);
        n = PyUnicode_GET_LENGTH(o);
    } else if (!(text = PyUnicode_AsUTF8AndSize(o, &n))) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return values_keep(ph);
        /* Kept for the error's .offset and __cause__ (see ck_py_history_raise). */
        Py_XDECREF(ph->bad_str);
        Py_INCREF(o);
        ph->bad_str = o;
        Py_XDECREF(ph->bad_exc);
        ph->bad_exc = ck_py_take_exception();
        return CK_EUTF8;
    }
    if ((size_t)n > CK_MAX_STRING) return CK_ETOOBIG;
    *s = text;
    *len = (size_t)n;
    return CK_OK;
}

static int py_boolean(void *ctx, ck_value v, int *out) {
    (void)ctx;
    *out = obj_of(v) == Py_True;
    return CK_OK;
}

/* The compact JSON of any value, as a pinned str. A value that JSON cannot express (or a
 * circular one) is the caller's input error, CK_ETYPE at the field; any other exception of
 * the encoder is raised as it is. */
static int py_json(void *ctx, ck_value v, const char **s, size_t *len) {
    ck_py_history *ph = ctx;
    PyObject *text = ck_py_compact_json(ph->st, obj_of(v) ? obj_of(v) : Py_None);
    if (!text) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError))
            return values_keep(ph);
        /* Kept as the cause of the InputError (see history_raise). */
        Py_XDECREF(ph->bad_exc);
        ph->bad_exc = ck_py_take_exception();
        ph->json_failed = 1;
        return CK_ETYPE;
    }
    int rc = pin(ph, text);
    Py_DECREF(text);
    return rc ? rc : py_string(ctx, value_of(text), s, len);
}

int ck_py_history_init(ck_py_history *ph, ck_module_state *st) {
    memset(ph, 0, sizeof *ph);
    ph->st = st;
    memcpy(ph->keys, st->keys, sizeof ph->keys);
    /* Every str is taken from a Python str through UTF-8 encoding, which never produces
     * invalid UTF-8 (a lone surrogate fails to encode instead), so the core need not check. */
    ph->h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    if (!ph->h) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Raises what a failed read or build left: the kept exception, an encoding failure with its
 * offset, or the core's error. A one-message history names its places "message...".
 * Returns -1. */
static int history_raise(ck_py_history *ph, int rc, ck_error *err) {
    if (rc == CK_PY_RAISED && ph->raised) {
        PyObject *exc = ph->raised;
        ph->raised = NULL;
        ck_py_restore_exception(exc);
        return -1;
    }
    if (ph->single && err->code == rc && strncmp(err->where, "messages[0]", 11) == 0)
        memmove(err->where + 7, err->where + 11, strlen(err->where + 11) + 1);
    if (rc == CK_EUTF8 && ph->bad_str && err->code == rc) {
        ck_py_restore_exception(ph->bad_exc);
        ph->bad_exc = NULL;
        ck_py_raise_utf8(ph->st, ph->bad_str, (Py_ssize_t)err->index, err->where);
        return -1;
    }
    if (rc == CK_ETYPE && ph->json_failed && err->code == rc) {
        err->msg = MSG_NOT_JSON;
        ck_py_restore_exception(ph->bad_exc);
        ph->bad_exc = NULL;
    }
    ck_py_raise_core(ph->st, rc, err);
    return -1;
}

/* The core's reader over the snapshot of `ph`. No length callback: py_string lends the str's
 * own UTF-8, which costs no copy. */
static ck_host_reader py_reader(ck_py_history *ph) {
    return (ck_host_reader){ph,        py_kind,    py_field, py_count, py_item,
                            py_string, py_boolean, py_json,  NULL};
}

/* Reads the messages of the snapshot in `format`. */
static int read_snapshot(ck_py_history *ph, size_t from, ck_format format) {
    ck_host_reader r = py_reader(ph);
    ck_error err;
    /* Reading can run Python code (a key's __eq__, a value's JSON encoding) that calls
     * ctxkeel again; the guard turns unbounded re-entry into RecursionError rather than a
     * crash. */
    if (Py_EnterRecursiveCall(" while reading messages in ctxkeel")) return -1;
    int rc = ck_history_read(ph->h, &r, value_of(ph->snapshot), from, format, &ph->format, &err);
    Py_LeaveRecursiveCall();
    return rc ? history_raise(ph, rc, &err) : 0;
}

int ck_py_history_read_list(ck_py_history *ph, PyObject *messages, ck_format format) {
    if (PyTuple_Check(messages)) {
        Py_INCREF(messages); /* a tuple is a snapshot already */
        ph->snapshot = messages;
        return read_snapshot(ph, 0, format);
    }
    if (!PyList_Check(messages)) {
        PyErr_Format(PyExc_TypeError, MSG_NOT_A_LIST, Py_TYPE(messages)->tp_name);
        return -1;
    }
    ph->snapshot = PyList_AsTuple(messages);
    if (!ph->snapshot) return -1;
    return read_snapshot(ph, 0, format);
}

int ck_py_history_read_more(ck_py_history *ph, PyObject *messages, size_t from, ck_format format) {
    /* The session's own list is the snapshot: it only grows, and each message the core reads
     * from a list is pinned (py_item), so no tuple of the whole list is made per message. */
    Py_INCREF(messages);
    Py_XSETREF(ph->snapshot, messages);
    return read_snapshot(ph, from, format);
}

int ck_py_list_is_tools(ck_module_state *st, PyObject *list) {
    ck_py_history ph;
    if (ck_py_history_init(&ph, st) < 0) return -1;
    int yes = -1;
    if ((ph.snapshot = PyList_AsTuple(list))) {
        ck_host_reader r = py_reader(&ph);
        if (Py_EnterRecursiveCall(" while reading messages in ctxkeel") == 0) {
            yes = ck_list_is_tools(&r, value_of(ph.snapshot));
            Py_LeaveRecursiveCall();
        }
        if (yes < 0 && ph.raised) {
            PyObject *exc = ph.raised;
            ph.raised = NULL;
            ck_py_restore_exception(exc);
        } else if (yes < 0 && !PyErr_Occurred()) {
            PyErr_NoMemory();
        }
    }
    ck_py_history_dispose(&ph);
    return yes < 0 ? -1 : yes;
}

int ck_py_history_read_message(ck_py_history *ph, PyObject *message, ck_format format) {
    ph->single = 1;
    ph->snapshot = PyTuple_Pack(1, message);
    if (!ph->snapshot) return -1;
    return read_snapshot(ph, 0, format);
}

void ck_py_history_dispose(ck_py_history *ph) {
    /* The history goes first: it borrows from the pinned objects, never the other way. */
    ck_history_free(ph->h);
    ph->h = NULL;
    Py_CLEAR(ph->snapshot);
    Py_CLEAR(ph->raised);
    Py_CLEAR(ph->bad_str);
    Py_CLEAR(ph->bad_exc);
    /* Detached before the references go: a finalizer run by one of them sees no half-freed
     * array. */
    PyObject **pins = ph->pins;
    Py_ssize_t n_pins = ph->n_pins;
    ph->pins = NULL;
    ph->n_pins = ph->cap_pins = 0;
    for (Py_ssize_t k = 0; k < n_pins; k++) Py_DECREF(pins[k]);
    PyMem_Free(pins);
}

int ck_py_history_traverse(const ck_py_history *ph, visitproc visit, void *arg) {
    Py_VISIT(ph->snapshot);
    for (Py_ssize_t k = 0; k < ph->n_pins; k++) Py_VISIT(ph->pins[k]);
    return 0;
}

/* ---- the builder ------------------------------------------------------------------------- */

/* A new object as a built value: CK_OK, or the kept exception when making it failed. */
static int made(ck_py_history *ph, PyObject *o, ck_value *out) {
    *out = value_of(o);
    return o ? CK_OK : values_keep(ph);
}

static int py_b_object(void *ctx, ck_value *out) { return made(ctx, PyDict_New(), out); }

/* A message is a dict in every dialect this binding builds today. */
static int py_b_message(void *ctx, ck_value like, const char *type, ck_value *out) {
    (void)like;
    (void)type;
    return py_b_object(ctx, out);
}

static int py_b_array(void *ctx, ck_value *out) { return made(ctx, PyList_New(0), out); }

static int py_b_string(void *ctx, const char *s, size_t len, ck_value *out) {
    return made(ctx, ck_py_text(s, len), out);
}

static int py_b_boolean(void *ctx, int v, ck_value *out) {
    return made(ctx, PyBool_FromLong(v), out);
}

static int py_b_json(void *ctx, const char *json, size_t len, ck_value *out) {
    ck_py_history *ph = ctx;
    PyObject *text = ck_py_text(json, len);
    PyObject *o = text ? PyObject_CallOneArg(ph->st->json_loads, text) : NULL;
    Py_XDECREF(text);
    return made(ph, o, out);
}

static int py_b_set(void *ctx, ck_value obj, ck_key key, ck_value v) {
    ck_py_history *ph = ctx;
    PyObject *o = obj_of(obj), *value = obj_of(v);
    int rc = (unsigned)key < CK_KEY_COUNT && o && PyDict_Check(o) ? CK_OK : CK_EINVAL;
    if (!rc && PyDict_SetItem(o, ph->st->keys[key], value) < 0) rc = values_keep(ph);
    Py_XDECREF(value);
    return rc;
}

static int py_b_push(void *ctx, ck_value arr, ck_value v) {
    PyObject *o = obj_of(arr), *value = obj_of(v);
    int rc = o && PyList_Check(o) ? CK_OK : CK_EINVAL;
    if (!rc && PyList_Append(o, value) < 0) rc = values_keep(ctx);
    Py_XDECREF(value);
    return rc;
}

/* A shallow copy: every field of the caller's dict, the same values. */
static int py_b_copy(void *ctx, ck_value v, ck_value *out) {
    PyObject *o = obj_of(v);
    if (!o || !PyDict_Check(o)) return CK_ETYPE;
    return made(ctx, PyDict_Copy(o), out);
}

/* The caller's own object: an unchanged message comes back as itself. */
static int py_b_ref(void *ctx, ck_value v, ck_value *out) {
    (void)ctx;
    Py_XINCREF(obj_of(v));
    *out = v;
    return CK_OK;
}

static int py_b_unset(void *ctx, ck_value obj, ck_key key) {
    ck_py_history *ph = ctx;
    PyObject *o = obj_of(obj);
    if ((unsigned)key >= CK_KEY_COUNT || !o || !PyDict_Check(o)) return CK_EINVAL;
    if (PyDict_DelItem(o, ph->st->keys[key]) == 0) return CK_OK;
    if (!PyErr_ExceptionMatches(PyExc_KeyError)) return values_keep(ph);
    PyErr_Clear();
    return CK_OK;
}

static void py_b_drop(void *ctx, ck_value v) {
    (void)ctx;
    Py_XDECREF(obj_of(v));
}

PyObject *ck_py_view_build(ck_py_history *ph, const ck_view *view) {
    ck_host_builder b = {ph,          py_b_object, py_b_message, py_b_array, py_b_string,
                         py_b_boolean, py_b_json,  py_b_set,     py_b_push,  py_b_copy,
                         py_b_ref,    py_b_unset,  py_b_drop};
    ck_value out = value_of(NULL);
    ck_error err;
    int rc = ck_view_build(view, ph->h, &b, &out, &err);
    if (rc) {
        history_raise(ph, rc, &err);
        return NULL;
    }
    return obj_of(out);
}
