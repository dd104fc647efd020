/*
 * host.c - the host's own code inside core calls: a token counter (estimator=fn) and an
 * evidence backend (backend=obj with put and get).
 *
 * The core calls these through plain C function pointers (ck_counter, ck_evidence_backend)
 * from inside a core call that a method of this binding made with the GIL held, so each one
 * calls Python directly; nothing here takes or releases the GIL. A backend method may return
 * an awaitable: it is handed to the `awaiter` (ctxkeel/_compactor.py) with the time limit
 * (backend_timeout), which runs it on the right loop and returns its value, or cancels it and
 * raises TimeoutError when the limit passes; while it waits, the GIL is free. After one
 * timeout the backend is taken for hung: its later calls in the same core call fail at once,
 * so one compaction waits for it once, not once per output. A synchronous method cannot be
 * interrupted; it is called as it is.
 *
 * The core cannot be stopped halfway, so a callback never raises into it. A failure becomes
 * what the core understands (UINT64_MAX from the counter, CK_EIO from the backend, with the
 * reason in err->where), and the Python exception is kept in the ck_py_host:
 *   raise_after  what the binding raises once the core call returns: the counter's exception
 *                or bad return, and exceptions that are not Exceptions (KeyboardInterrupt,
 *                asyncio.CancelledError) from the backend. Once it is set, every callback
 *                fails at once without calling Python again.
 *   cause        the last backend failure that is an ordinary Exception: a storage failure,
 *                which the core handles (fail-open for put); read_evidence chains it to the
 *                error it raises.
 */
#include "state.h"

#include <stdio.h>
#include <string.h>

static const char MSG_COUNT_TYPE[] = "ctxkeel: the estimator must return an int, not %.200s";
static const char MSG_COUNT_VALUE[] =
    "ctxkeel: the estimator returned %R; a token count is an int in [0, 2**64 - 2]";
static const char MSG_GET_TYPE[] = "ctxkeel: backend.get() returned %.200s, not a str or None";
static const char MSG_NO_AWAITER[] = "ctxkeel: backend.%s() returned an awaitable, which this "
                                     "object cannot wait for";
static const char MSG_NOT_CALLABLE[] = "ctxkeel: backend.%s must be callable, not %.200s";
static const char ABORTED[] = "an earlier callback of this call was interrupted";
static const char HUNG[] = "backend timed out earlier in this call; not called again";

/* "ValueError: text" for an exception, cut to fit `size` bytes, into `out`. */
static void describe(PyObject *exc, char *out, size_t size) {
    const char *name = Py_TYPE(exc)->tp_name;
    const char *dot = strrchr(name, '.');
    PyObject *text = PyObject_Str(exc);
    const char *utf8 = text ? PyUnicode_AsUTF8(text) : NULL;
    if (!utf8) PyErr_Clear();
    snprintf(out, size, utf8 && utf8[0] ? "%s: %s" : "%s", dot ? dot + 1 : name, utf8);
    Py_XDECREF(text);
}

void ck_py_host_reset(ck_py_host *h) {
    Py_CLEAR(h->raise_after);
    Py_CLEAR(h->cause);
    h->timed_out = 0;
}

int ck_py_host_end(ck_py_host *h) {
    Py_CLEAR(h->cause);
    if (!h->raise_after) return 0;
    PyObject *exc = h->raise_after;
    h->raise_after = NULL;
    /* PyErr_SetObject keeps the instance, and with it its traceback. */
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return -1;
}

PyObject *ck_py_host_take_cause(ck_py_host *h) {
    PyObject *cause = h->cause;
    h->cause = NULL;
    return cause;
}

/* Closes a coroutine that will never run, so that it does not warn that it was never awaited. */
static void close_coroutine(PyObject *obj) {
    if (!PyCoro_CheckExact(obj)) return;
    PyObject *exc = ck_py_take_exception();
    PyObject *closed = PyObject_CallMethod(obj, "close", NULL);
    Py_XDECREF(closed);
    PyErr_Clear();
    if (exc) PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_XDECREF(exc);
}

/* ---- the counter --------------------------------------------------------------------------- */

uint64_t ck_py_host_count(void *ctx, const char *text, size_t len) {
    ck_py_host *h = (ck_py_host *)ctx;
    if (h->raise_after || !h->counter) return UINT64_MAX;
    PyObject *arg = ck_py_text(text, len);
    PyObject *result = arg ? PyObject_CallOneArg(h->counter, arg) : NULL;
    Py_XDECREF(arg);
    uint64_t tokens = UINT64_MAX;
    if (result && (!PyLong_Check(result) || PyBool_Check(result))) {
        close_coroutine(result); /* counting is synchronous */
        PyErr_Format(PyExc_TypeError, MSG_COUNT_TYPE, Py_TYPE(result)->tp_name);
    } else if (result) {
        tokens = PyLong_AsUnsignedLongLong(result);
        if (tokens == UINT64_MAX) {
            /* Negative, too wide, or UINT64_MAX itself (the core's "cannot answer"). */
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, MSG_COUNT_VALUE, result);
        }
    }
    Py_XDECREF(result);
    if (tokens == UINT64_MAX) ck_py_keep_exception(&h->raise_after);
    return tokens;
}

/* ---- the evidence backend ------------------------------------------------------------------ */

int ck_py_host_set_backend(ck_py_host *h, PyObject *backend, PyObject *awaiter) {
    static const char *const names[2] = {"put", "get"};
    PyObject **slots[2] = {&h->put, &h->get};
    for (int k = 0; k < 2; k++) {
        PyObject *method = PyObject_GetAttrString(backend, names[k]);
        if (!method && PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            method = Py_None;
            Py_INCREF(method);
        }
        if (!method) return -1;
        if (!PyCallable_Check(method)) {
            PyErr_Format(PyExc_TypeError, MSG_NOT_CALLABLE, names[k], Py_TYPE(method)->tp_name);
            Py_DECREF(method);
            return -1;
        }
        Py_XSETREF(*slots[k], method);
    }
    if (awaiter && awaiter != Py_None) {
        Py_INCREF(awaiter);
        Py_XSETREF(h->awaiter, awaiter);
    }
    return 0;
}

/* The value of a backend call's result: itself, or what the awaiter made of an awaitable.
 * Steals `result`; NULL with an exception set on failure. */
static PyObject *settle(ck_py_host *h, PyObject *result, const char *name) {
    if (!result) return NULL;
    PyAsyncMethods *am = Py_TYPE(result)->tp_as_async;
    if (!am || !am->am_await) return result;
    PyObject *value = NULL;
    if (h->awaiter) {
        value = PyObject_CallFunction(h->awaiter, "Od", result, h->timeout);
    } else {
        close_coroutine(result);
        PyErr_Format(PyExc_TypeError, MSG_NO_AWAITER, name);
    }
    Py_DECREF(result);
    return value;
}

/* A failed backend call: the reason goes to err->where for the core, the exception to the
 * host. Returns CK_EIO. */
static int backend_failed(ck_py_host *h, ck_error *err) {
    PyObject *exc = ck_py_take_exception();
    if (err) {
        if (exc)
            describe(exc, err->where, sizeof err->where);
        else
            snprintf(err->where, sizeof err->where, "%s", ABORTED);
    }
    if (exc && PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_TimeoutError)) h->timed_out = 1;
    if (exc && !PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_Exception)) {
        /* Not a storage failure: an interrupt or a cancellation, raised once the core is
         * done. */
        if (!h->raise_after)
            h->raise_after = exc;
        else
            Py_DECREF(exc);
    } else {
        Py_XSETREF(h->cause, exc);
    }
    return CK_EIO;
}

/* A backend that timed out earlier in this core call is not called again. */
static int backend_hung(ck_error *err) {
    if (err) snprintf(err->where, sizeof err->where, "%s", HUNG);
    return CK_EIO;
}

int ck_py_host_put(void *ctx, const char *key, const char *data, size_t len, ck_error *err) {
    ck_py_host *h = (ck_py_host *)ctx;
    if (h->timed_out && !h->raise_after) return backend_hung(err);
    if (h->raise_after || !h->put) return backend_failed(h, err);
    PyObject *text = ck_py_text(data, len);
    PyObject *result = text ? PyObject_CallFunction(h->put, "sO", key, text) : NULL;
    Py_XDECREF(text);
    result = settle(h, result, "put");
    if (!result) return backend_failed(h, err);
    Py_DECREF(result); /* whatever put returns means "stored" */
    return CK_OK;
}

int ck_py_host_get(void *ctx, const char *key, char **out, size_t *out_len, ck_error *err) {
    ck_py_host *h = (ck_py_host *)ctx;
    *out = NULL;
    *out_len = 0;
    if (h->timed_out && !h->raise_after) return backend_hung(err);
    if (h->raise_after || !h->get) return backend_failed(h, err);
    PyObject *result = settle(h, PyObject_CallFunction(h->get, "s", key), "get");
    if (!result) return backend_failed(h, err);
    if (result == Py_None) {
        Py_DECREF(result);
        return CK_OK;
    }
    Py_ssize_t n = 0;
    const char *utf8 = NULL;
    if (!PyUnicode_Check(result))
        PyErr_Format(PyExc_TypeError, MSG_GET_TYPE, Py_TYPE(result)->tp_name);
    else
        utf8 = PyUnicode_AsUTF8AndSize(result, &n);
    char *copy = utf8 ? ck_malloc((size_t)n) : NULL;
    if (utf8 && !copy) PyErr_NoMemory();
    if (copy) {
        memcpy(copy, utf8, (size_t)n);
        *out = copy;
        *out_len = (size_t)n;
    }
    Py_DECREF(result);
    return copy ? CK_OK : backend_failed(h, err);
}

/* ---- lifetime ------------------------------------------------------------------------------ */

int ck_py_host_traverse(const ck_py_host *h, visitproc visit, void *arg) {
    Py_VISIT(h->counter);
    Py_VISIT(h->put);
    Py_VISIT(h->get);
    Py_VISIT(h->awaiter);
    Py_VISIT(h->raise_after);
    Py_VISIT(h->cause);
    return 0;
}

void ck_py_host_clear(ck_py_host *h) {
    Py_CLEAR(h->counter);
    Py_CLEAR(h->put);
    Py_CLEAR(h->get);
    Py_CLEAR(h->awaiter);
    Py_CLEAR(h->raise_after);
    Py_CLEAR(h->cause);
}
