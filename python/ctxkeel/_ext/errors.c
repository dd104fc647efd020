/*
 * errors.c - the exception hierarchy and the status-code table.
 *
 * Every status code of the core is listed once, in CK_STATUS_LIST. The table below is
 * generated from that list, and so are STATUS_CODES and the choice of exception class for
 * each code, so the C, Python and Node surfaces cannot disagree about a code's name, value,
 * text or kind. A test loops over every code through _raise_status().
 */
#include "state.h"

#include <string.h>

/* What a status code becomes in Python. */
typedef enum exc_kind {
    EXC_NONE = 0, /* CK_OK: nothing is raised */
    EXC_MEMORY,   /* CK_ENOMEM: MemoryError */
    EXC_INPUT,    /* the caller's input is wrong: InputError, which is also a ValueError */
    EXC_OVERFLOW, /* CK_EOVERFLOW: ContextOverflowError, an Error */
    EXC_ERROR,    /* everything else: Error */
} exc_kind;

typedef struct status_row {
    const char *name;
    int value;
    const char *text;
    exc_kind kind;
} status_row;

#define CK_PY_EXC_KIND(value)                                                                      \
    ((value) == CK_OK           ? EXC_NONE                                                         \
     : (value) == CK_ENOMEM     ? EXC_MEMORY                                                       \
     : (value) == CK_EOVERFLOW  ? EXC_OVERFLOW                                                     \
     : CK_IS_INPUT_ERROR(value) ? EXC_INPUT                                                        \
                                : EXC_ERROR)
#define CK_PY_STATUS_ROW(name, value, text) {"CK_" #name, value, text, CK_PY_EXC_KIND(value)},
static const status_row status_rows[] = {CK_STATUS_LIST(CK_PY_STATUS_ROW)};
#undef CK_PY_STATUS_ROW

#define STATUS_ROWS ((Py_ssize_t)(sizeof status_rows / sizeof status_rows[0]))

static const char ERROR_DOC[] =
    "Base class of the errors ctxkeel raises.\n\n"
    "Attributes: code (the status name, such as 'CK_ETYPE'), index (the index of the offending\n"
    "message, or None), where (the place inside the input, such as\n"
    "'messages[3].tool_calls[0].id', or None) and offset (a byte offset where one applies,\n"
    "or None).";
static const char INPUT_ERROR_DOC[] =
    "Raised when the input is wrong: a message of the wrong shape, a missing field, text\n"
    "that is not valid UTF-8, messages that do not match the format. Also a ValueError.";

static const char OVERFLOW_ERROR_DOC[] =
    "Raised when the pinned messages (system prompt and task) and the tool schemas alone,\n"
    "with a bare checkpoint, do not fit the context window, so that no view can. The message\n"
    "says how many tokens they need and the window (code 'CK_EOVERFLOW').";

static const char MSG_BAD_STATUS[] = "ctxkeel: %ld is not a ctxkeel status code";
static const char MSG_PLACED[] = "ctxkeel: %s: %s";
static const char MSG_UNPLACED[] = "ctxkeel: %s";

static const status_row *find_row(int code) {
    for (Py_ssize_t k = 0; k < STATUS_ROWS; k++)
        if (status_rows[k].value == code) return &status_rows[k];
    return NULL;
}

/* PyErr_Fetch is deprecated from 3.12 on, so each version gets its own spelling. */
PyObject *ck_py_take_exception(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (!type) return NULL;
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb) PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

/* Puts an exception taken by ck_py_take_exception() back (steals the reference). */
void ck_py_restore_exception(PyObject *exc) {
    if (!exc) return;
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyObject *type = (PyObject *)Py_TYPE(exc);
    Py_INCREF(type);
    PyErr_Restore(type, exc, PyException_GetTraceback(exc));
#endif
}

void ck_py_keep_exception(PyObject **slot) {
    PyObject *exc = ck_py_take_exception();
    if (!*slot)
        *slot = exc;
    else
        Py_XDECREF(exc);
}

/* A new exception class whose instances default to None for each attribute, so that an
 * Error raised by Python code (or by a subclass) still has them. */
static PyObject *new_exception(const char *name, const char *doc, PyObject *bases) {
    static const char *const attrs[] = {"code", "index", "where", "offset"};
    PyObject *dict = PyDict_New();
    if (!dict) return NULL;
    for (size_t k = 0; k < sizeof attrs / sizeof attrs[0]; k++) {
        if (PyDict_SetItemString(dict, attrs[k], Py_None) < 0) {
            Py_DECREF(dict);
            return NULL;
        }
    }
    PyObject *cls = PyErr_NewExceptionWithDoc(name, doc, bases, dict);
    Py_DECREF(dict);
    return cls;
}

/* Adds `value` (a new reference, stolen even on failure) to the module. PyModule_AddObjectRef
 * only exists from 3.10 on; this is its equivalent for a reference we own. */
static int add_new(PyObject *module, const char *name, PyObject *value) {
    if (!value) return -1;
    if (PyModule_AddObject(module, name, value) < 0) {
        Py_DECREF(value);
        return -1;
    }
    return 0;
}

/* STATUS_CODES: {"CK_ETYPE": (-4, "value has the wrong type"), ...}, every code once. */
static PyObject *status_codes(void) {
    PyObject *codes = PyDict_New();
    if (!codes) return NULL;
    for (Py_ssize_t k = 0; k < STATUS_ROWS; k++) {
        PyObject *row = Py_BuildValue("(is)", status_rows[k].value, status_rows[k].text);
        if (!row || PyDict_SetItemString(codes, status_rows[k].name, row) < 0) {
            Py_XDECREF(row);
            Py_DECREF(codes);
            return NULL;
        }
        Py_DECREF(row);
    }
    return codes;
}

int ck_py_errors_init(PyObject *module, ck_module_state *st) {
    PyObject *bases = NULL;
    st->Error = new_exception("ctxkeel.Error", ERROR_DOC, PyExc_Exception);
    if (!st->Error) goto error;
    bases = PyTuple_Pack(2, st->Error, PyExc_ValueError);
    if (!bases) goto error;
    st->InputError = new_exception("ctxkeel.InputError", INPUT_ERROR_DOC, bases);
    if (!st->InputError) goto error;
    Py_CLEAR(bases);
    st->ContextOverflowError =
        new_exception("ctxkeel.ContextOverflowError", OVERFLOW_ERROR_DOC, st->Error);
    if (!st->ContextOverflowError) goto error;
    /* The module holds its own references; the state keeps the ones made above. */
    Py_INCREF(st->Error);
    if (add_new(module, "Error", st->Error) < 0) goto error;
    Py_INCREF(st->InputError);
    if (add_new(module, "InputError", st->InputError) < 0) goto error;
    Py_INCREF(st->ContextOverflowError);
    if (add_new(module, "ContextOverflowError", st->ContextOverflowError) < 0) goto error;
    if (add_new(module, "STATUS_CODES", status_codes()) < 0) goto error;
    return 0;

error:
    /* The state's references are released by the module's m_clear. */
    Py_XDECREF(bases);
    return -1;
}

PyObject *ck_py_error_class(const ck_module_state *st, int code) {
    const status_row *row = find_row(code);
    if (row && row->kind == EXC_INPUT) return st->InputError;
    return row && row->kind == EXC_OVERFLOW ? st->ContextOverflowError : st->Error;
}

/* Sets attribute `name` of `exc` to `value` (a new reference, released here). */
static int set_attr(PyObject *exc, const char *name, PyObject *value) {
    if (!value) return -1;
    int rc = PyObject_SetAttrString(exc, name, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *ssize_or_none(Py_ssize_t value) {
    if (value >= 0) return PyLong_FromSsize_t(value);
    Py_INCREF(Py_None);
    return Py_None;
}

PyObject *ck_py_raise(const ck_module_state *st, int code, Py_ssize_t index, const char *where,
                      const char *msg, Py_ssize_t offset) {
    if (code == CK_ENOMEM) return PyErr_NoMemory();
    PyObject *cause = ck_py_take_exception();
    PyObject *text = NULL, *exc = NULL;
    PyObject *cls = ck_py_error_class(st, code);
    if (!msg) msg = ck_strerror(code);
    int placed = where && where[0];
    text = placed ? PyUnicode_FromFormat(MSG_PLACED, where, msg)
                  : PyUnicode_FromFormat(MSG_UNPLACED, msg);
    if (!text) goto error;
    exc = PyObject_CallOneArg(cls, text);
    if (!exc) goto error;
    if (set_attr(exc, "code", PyUnicode_FromString(ck_err_name(code))) < 0 ||
        set_attr(exc, "index", ssize_or_none(index)) < 0 ||
        set_attr(exc, "offset", ssize_or_none(offset)) < 0)
        goto error;
    if (placed) {
        if (set_attr(exc, "where", PyUnicode_FromString(where)) < 0) goto error;
    }
    if (cause) {
        /* PyException_SetCause steals the reference and suppresses the implicit context. */
        PyException_SetCause(exc, cause);
        cause = NULL;
    }
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    Py_DECREF(text);
    return NULL;

error:
    /* Building the exception failed (out of memory, most likely); that failure is what the
     * caller sees, and the original exception is dropped. */
    Py_XDECREF(cause);
    Py_XDECREF(text);
    Py_XDECREF(exc);
    return NULL;
}

PyObject *ck_py_raise_core(const ck_module_state *st, int code, const ck_error *err) {
    if (!err || err->code != code) return ck_py_raise(st, code, -1, NULL, NULL, -1);
    Py_ssize_t index = err->index == CK_NONE ? -1 : (Py_ssize_t)err->index;
    /* The core fills offset with 0 where it has none; it means something only for JSON
     * syntax errors and invalid UTF-8. */
    Py_ssize_t offset =
        (code == CK_ESYNTAX || code == CK_EUTF8) ? (Py_ssize_t)err->offset : (Py_ssize_t)-1;
    return ck_py_raise(st, code, index, err->where, err->msg, offset);
}

PyObject *ck_py_raise_utf8(const ck_module_state *st, PyObject *str, Py_ssize_t index,
                           const char *where) {
    PyObject *exc = ck_py_take_exception();
    Py_ssize_t offset = -1, start;
    if (exc && PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_UnicodeEncodeError) && str) {
        /* The encoder reports a code point index; .offset is a byte offset, which is the
         * length of the (valid) prefix in UTF-8. */
        if (PyUnicodeEncodeError_GetStart(exc, &start) == 0) {
            PyObject *prefix = PyUnicode_Substring(str, 0, start);
            Py_ssize_t bytes;
            if (prefix && PyUnicode_AsUTF8AndSize(prefix, &bytes)) offset = bytes;
            Py_XDECREF(prefix);
        }
        PyErr_Clear();
    } else if (exc && PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_UnicodeDecodeError)) {
        if (PyUnicodeDecodeError_GetStart(exc, &start) == 0) offset = start;
        PyErr_Clear();
    } else {
        /* Not an encoding problem (MemoryError, say): pass it on unchanged. */
        ck_py_restore_exception(exc);
        return NULL;
    }
    ck_py_restore_exception(exc);
    return ck_py_raise(st, CK_EUTF8, index, where, "text is not valid UTF-8", offset);
}

PyObject *ck_py_raise_status(PyObject *module, PyObject *arg) {
    ck_module_state *st = ck_py_state(module);
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return NULL;
    const status_row *row = code >= INT_MIN && code <= INT_MAX ? find_row((int)code) : NULL;
    if (!row) return PyErr_Format(PyExc_ValueError, MSG_BAD_STATUS, code);
    if (row->kind == EXC_NONE) Py_RETURN_NONE;
    return ck_py_raise(st, row->value, -1, NULL, NULL, -1);
}
