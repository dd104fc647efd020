/*
 * http.c - the HttpSummarizer and CancelToken types of ctxkeel._ext.
 *
 * HttpSummarizer wraps the core's ck_http_summarizer (libcurl; OpenAI Chat Completions or
 * Anthropic Messages). Calling it with a summary request dict returns the model's reply as a
 * str, or raises ctxkeel.Error whose .code is the core's status (CK_ESUMMARY, CK_ETIMEDOUT,
 * CK_EIO, CK_ECANCELED) and whose text is the core's one-line reason. _summarize(request,
 * token) does the same with a CancelToken that another thread may trip; ctxkeel/_compactor.py
 * uses it so that summarize_timeout and task cancellation abort the transfer instead of
 * leaving it running.
 *
 * The GIL. A transfer blocks for as long as the provider takes (seconds, longer with
 * retries), so ck_http_summarize() runs with the GIL released. It is the one core call in the
 * binding that does, and STYLE rule 26 holds for it as follows:
 *   - it calls no Python code: the core talks to libcurl, reads the key with getenv() and
 *     allocates through the PyMem_Raw* hook, none of which needs the GIL;
 *   - its inputs cannot change or go away: the request's strings are copied into a C buffer
 *     of our own before the GIL is released and freed after it is taken back, and the
 *     summarizer and the token are held by strong references for the whole call;
 *   - no busy flag: the core documents one ck_http_summarizer as safe for concurrent calls
 *     from several threads (it is read-only once made and each call runs its own libcurl
 *     handle), so two threads summarizing through one HttpSummarizer is supported rather
 *     than refused. The one field the binding writes, the last usage, is written after the
 *     GIL is taken back, like every Python object the call returns.
 *
 * Secrets. The object never holds the API key: the core reads it from the environment at
 * call time. Its repr shows extra headers by name only and the base URL without a
 * user:password part. A server may quote the key back in an error; the core blanks it in
 * the reason before the reason reaches the binding.
 */
#include "state.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char MSG_STR_TYPE[] = "ctxkeel: %s must be a str, not %.200s";
static const char MSG_OPT_STR_TYPE[] = "ctxkeel: %s must be a str or None, not %.200s";
static const char MSG_NUMBER_TYPE[] = "ctxkeel: %s must be a number, not %.200s";
static const char MSG_INT_TYPE[] = "ctxkeel: %s must be an int, not %.200s";
static const char MSG_HEADERS_TYPE[] = "ctxkeel: headers must be a dict or None, not %.200s";
static const char MSG_REQUEST_TYPE[] = "ctxkeel: request must be a dict, not %.200s";
static const char MSG_TOKEN_TYPE[] = "ctxkeel: cancel must be a CancelToken or None, not %.200s";
static const char MSG_API[] = "must be 'openai' or 'anthropic'";
static const char MSG_NUL[] = "must not contain a NUL character";
static const char MSG_TIMEOUT[] = "must be a number of seconds in (0, 86400]";
static const char MSG_BACKOFF[] = "must be a number of seconds in [0, 3600]";
static const char MSG_RETRIES[] = "must be an int in [0, 20]";
static const char MSG_HEADER_NAME[] = "must be a header name (letters, digits, -, _ ...)";
static const char MSG_HEADER_VALUE[] = "must be a single line";
static const char MSG_MISSING[] = "required field is missing";
static const char MSG_MAX_TOKENS[] = "must be a positive int";
static const char MSG_CANCELED[] = "canceled";
static const char MSG_BOOL_TYPE[] = "ctxkeel: %s must be a bool or None, not %.200s";
static const char MSG_USAGE_TYPE[] = "ctxkeel: usage must be a str (JSON text), not %.200s";

/* What the core takes as the largest values; the binding refuses more rather than let the
 * core clamp silently. */
#define MAX_TIMEOUT 86400.0
#define MAX_BACKOFF 3600.0
#define MAX_RETRIES 20
/* The core reads a backoff of 0 as "the default" (0.5 s); backoff=0 here means no wait. */
#define NO_BACKOFF 1e-6
/* Usage fields the provider did not report keep this value. */
#define NO_USAGE UINT64_MAX
/* The reply budget of a request without max_tokens (as in the Node binding). */
#define DEFAULT_MAX_TOKENS 1024

/* The module state of an object of one of our types (they cannot be subclassed). */
static ck_module_state *state_of(PyObject *op) {
    return (ck_module_state *)PyType_GetModuleState(Py_TYPE(op));
}

/* Raises InputError CK_EINVAL naming `name`. Always returns -1. */
static int bad_value(const ck_module_state *st, const char *name, const char *msg) {
    ck_py_raise(st, CK_EINVAL, -1, name, msg, -1);
    return -1;
}

/* ---- argument conversion ----------------------------------------------------------------- */

/* The UTF-8 text of a str argument as a new bytes object, for an option the core takes as a
 * NUL-terminated string (and copies). */
static PyObject *c_string(const ck_module_state *st, PyObject *obj, const char *name) {
    if (!PyUnicode_Check(obj)) {
        PyErr_Format(PyExc_TypeError, MSG_STR_TYPE, name, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyObject *bytes = PyUnicode_AsUTF8String(obj);
    if (!bytes) return ck_py_raise_utf8(st, obj, -1, name);
    if (strlen(PyBytes_AS_STRING(bytes)) != (size_t)PyBytes_GET_SIZE(bytes)) {
        Py_DECREF(bytes);
        bad_value(st, name, MSG_NUL);
        return NULL;
    }
    return bytes;
}

/* A number of seconds in [0, max] (0 only with `zero_ok`). A bool is not a number here. */
static int to_seconds(const ck_module_state *st, PyObject *obj, const char *name, int zero_ok,
                      double max, const char *range_msg, double *out) {
    if ((!PyFloat_Check(obj) && !PyLong_Check(obj)) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, MSG_NUMBER_TYPE, name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    double v = PyFloat_AsDouble(obj);
    if (v == -1.0 && PyErr_Occurred()) {
        /* An int too large for a double is out of range, not a failure of the conversion. */
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        return bad_value(st, name, range_msg);
    }
    if (!isfinite(v) || v < 0 || (v == 0 && !zero_ok) || v > max)
        return bad_value(st, name, range_msg);
    *out = v;
    return 0;
}

/* An int in [lo, hi]; a bool is refused. */
static int to_int(const ck_module_state *st, PyObject *obj, const char *name, long lo, long hi,
                  const char *range_msg, long *out) {
    if (!PyLong_Check(obj) || PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, MSG_INT_TYPE, name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < lo || v > hi) return bad_value(st, name, range_msg);
    *out = v;
    return 0;
}

/* True for a character allowed in an HTTP header name (an RFC 9110 token). */
static int is_token_char(unsigned char ch) {
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) return 1;
    return ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/* The extra headers, from a dict of str to str: `*lines` receives a new list of bytes objects
 * "Name: value", `*names` a new tuple of the names, and `*array` a NULL-terminated array
 * pointing into `*lines` for ck_http_options.headers (PyMem_Free it). None gives no lines,
 * an empty tuple and a NULL array. Returns 0, or -1 with an exception set. */
static int read_headers(const ck_module_state *st, PyObject *headers, PyObject **lines,
                        PyObject **names, const char ***array) {
    PyObject *items = NULL, *name_list = NULL, *name = NULL, *value = NULL;
    char where[CK_PY_WHERE_MAX];
    *lines = NULL;
    *names = NULL;
    *array = NULL;
    if (headers == Py_None) {
        *names = PyTuple_New(0);
        return *names ? 0 : -1;
    }
    if (!PyDict_Check(headers)) {
        PyErr_Format(PyExc_TypeError, MSG_HEADERS_TYPE, Py_TYPE(headers)->tp_name);
        return -1;
    }
    /* A snapshot of the pairs, so nothing the loop does can change what it walks over. */
    items = PyDict_Items(headers);
    if (!items) return -1;
    Py_ssize_t n = PyList_GET_SIZE(items);
    *lines = PyList_New(0);
    name_list = PyList_New(0);
    if (!*lines || !name_list) goto error;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(items, i);
        PyObject *key = PyTuple_GET_ITEM(pair, 0), *val = PyTuple_GET_ITEM(pair, 1);
        if (!PyUnicode_Check(key)) {
            PyErr_Format(PyExc_TypeError, MSG_STR_TYPE, "a header name", Py_TYPE(key)->tp_name);
            goto error;
        }
        if (!(name = c_string(st, key, "headers"))) goto error;
        const char *name_text = PyBytes_AS_STRING(name);
        snprintf(where, sizeof where, "headers[%.100s]", name_text);
        int name_ok = name_text[0] != '\0';
        for (const char *p = name_text; name_ok && *p; p++)
            name_ok = is_token_char((unsigned char)*p);
        if (!name_ok) {
            bad_value(st, where, MSG_HEADER_NAME);
            goto error;
        }
        if (!PyUnicode_Check(val)) {
            PyErr_Format(PyExc_TypeError, MSG_STR_TYPE, where, Py_TYPE(val)->tp_name);
            goto error;
        }
        if (!(value = c_string(st, val, where))) goto error;
        if (strpbrk(PyBytes_AS_STRING(value), "\r\n")) {
            bad_value(st, where, MSG_HEADER_VALUE);
            goto error;
        }
        PyObject *line = PyBytes_FromFormat("%s: %s", name_text, PyBytes_AS_STRING(value));
        if (!line) goto error;
        int rc = PyList_Append(*lines, line);
        Py_DECREF(line);
        PyObject *shown =
            rc < 0 ? NULL : PyUnicode_DecodeUTF8(name_text, PyBytes_GET_SIZE(name), "strict");
        if (!shown) goto error;
        rc = PyList_Append(name_list, shown);
        Py_DECREF(shown);
        if (rc < 0) goto error;
        Py_CLEAR(name);
        Py_CLEAR(value);
    }
    *array = PyMem_Calloc((size_t)n + 1, sizeof **array);
    if (!*array) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        (*array)[i] = PyBytes_AS_STRING(PyList_GET_ITEM(*lines, i));
    *names = PyList_AsTuple(name_list);
    if (!*names) goto error;
    Py_DECREF(name_list);
    Py_DECREF(items);
    return 0;

error:
    Py_XDECREF(items);
    Py_XDECREF(name_list);
    Py_XDECREF(name);
    Py_XDECREF(value);
    Py_CLEAR(*lines);
    PyMem_Free(*array);
    *array = NULL;
    return -1;
}

/* extra_body as JSON text (json.dumps), a new bytes object; None gives NULL without an
 * error. Whether it is an object is the core's to decide. */
static PyObject *json_text(PyObject *obj) {
    if (obj == Py_None) return NULL;
    PyObject *json = PyImport_ImportModule("json");
    PyObject *text = json ? PyObject_CallMethod(json, "dumps", "O", obj) : NULL;
    Py_XDECREF(json);
    PyObject *bytes = text ? PyUnicode_AsUTF8String(text) : NULL;
    Py_XDECREF(text);
    return bytes;
}

/* The base URL as the repr shows it: a user:password@ part becomes ***@. */
static PyObject *shown_url(const char *url, size_t len) {
    const char *sep = strstr(url, "://");
    const char *at = NULL;
    if (sep) {
        const char *host = sep + 3;
        size_t authority = strcspn(host, "/?#");
        for (size_t i = 0; i < authority; i++)
            if (host[i] == '@') at = host + i;
    }
    if (!at) return PyUnicode_DecodeUTF8(url, (Py_ssize_t)len, "strict");
    size_t prefix = (size_t)(sep + 3 - url), rest = len - (size_t)(at - url);
    char *text = PyMem_Malloc(prefix + 3 + rest);
    if (!text) return PyErr_NoMemory();
    memcpy(text, url, prefix);
    memcpy(text + prefix, "***", 3);
    memcpy(text + prefix + 3, at, rest);
    PyObject *shown = PyUnicode_DecodeUTF8(text, (Py_ssize_t)(prefix + 3 + rest), "strict");
    PyMem_Free(text);
    return shown;
}

/* ---- CancelToken ------------------------------------------------------------------------- */

static PyObject *token_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, ":CancelToken", kwlist)) return NULL;
    ck_py_cancel_token *self = (ck_py_cancel_token *)type->tp_alloc(type, 0);
    if (self) self->flag = 0;
    return (PyObject *)self;
}

static void token_dealloc(PyObject *op) {
    PyTypeObject *tp = Py_TYPE(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyObject *token_cancel(PyObject *op, PyObject *unused) {
    (void)unused;
    /* A plain store: the transfer polls the flag through a volatile pointer, and a value
     * seen one poll late only delays the abort by one poll. */
    ((ck_py_cancel_token *)op)->flag = 1;
    Py_RETURN_NONE;
}

static PyObject *token_get_cancelled(PyObject *op, void *closure) {
    (void)closure;
    return PyBool_FromLong(((ck_py_cancel_token *)op)->flag != 0);
}

static PyObject *token_repr(PyObject *op) {
    return PyUnicode_FromFormat("<CancelToken %s>",
                                ((ck_py_cancel_token *)op)->flag ? "cancelled" : "armed");
}

PyDoc_STRVAR(token_doc,
             "CancelToken()\n"
             "--\n"
             "\n"
             "A flag for HttpSummarizer._summarize(): cancel() (from any thread) makes the\n"
             "transfer that was given the token stop at its next poll of the flag (about\n"
             "every 100 ms) and raise Error CK_ECANCELED. A token cannot be reset; use a new\n"
             "one for each call.");
PyDoc_STRVAR(token_cancel_doc, "cancel($self, /)\n--\n\n"
                               "Trips the token. Calling it again does nothing.");

static PyMethodDef token_methods[] = {
    {
        .ml_name = "cancel",
        .ml_meth = token_cancel,
        .ml_flags = METH_NOARGS,
        .ml_doc = token_cancel_doc,
    },
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef token_getset[] = {
    {
        .name = "cancelled",
        .get = token_get_cancelled,
        .doc = "True once cancel() was called.",
    },
    {NULL, NULL, NULL, NULL, NULL},
};

/* clang-format off */
static PyType_Slot token_slots[] = {
    {Py_tp_doc, (void *)token_doc},
    {Py_tp_new, (void *)token_new},
    {Py_tp_dealloc, (void *)token_dealloc},
    {Py_tp_repr, (void *)token_repr},
    {Py_tp_methods, token_methods},
    {Py_tp_getset, token_getset},
    {0, NULL},
};
/* clang-format on */

static PyType_Spec token_spec = {
    .name = "ctxkeel._ext.CancelToken",
    .basicsize = sizeof(ck_py_cancel_token),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = token_slots,
};

/* ---- HttpSummarizer: construction -------------------------------------------------------- */

static PyObject *http_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"base_url",        "model",      "api",     "api_key_env",
                             "timeout",         "max_retries", "headers", "backoff",
                             "reasoning_model", "extra_body", NULL};
    ck_module_state *st = (ck_module_state *)PyType_GetModuleState(type);
    PyObject *url_obj, *model_obj, *api_obj = NULL, *key_obj = Py_None, *timeout_obj = NULL;
    PyObject *retries_obj = NULL, *headers_obj = Py_None, *backoff_obj = NULL;
    PyObject *reasoning_obj = Py_None, *extra_obj = Py_None;
    if (!st || !PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$OOOOOOOO:HttpSummarizer", kwlist,
                                            &url_obj, &model_obj, &api_obj, &key_obj, &timeout_obj,
                                            &retries_obj, &headers_obj, &backoff_obj,
                                            &reasoning_obj, &extra_obj))
        return NULL;

    PyObject *url = NULL, *model = NULL, *key = NULL, *lines = NULL, *names = NULL;
    PyObject *extra = NULL;
    const char **header_array = NULL;
    ck_py_http_summarizer *self = NULL;
    ck_http_api api = CK_HTTP_OPENAI;
    double timeout = 60.0, backoff = 0.5;
    long retries = 3;

    if (!(url = c_string(st, url_obj, "base_url")) || !(model = c_string(st, model_obj, "model")))
        goto done;
    if (api_obj) {
        if (!PyUnicode_Check(api_obj)) {
            PyErr_Format(PyExc_TypeError, MSG_STR_TYPE, "api", Py_TYPE(api_obj)->tp_name);
            goto done;
        }
        if (PyUnicode_CompareWithASCIIString(api_obj, "anthropic") == 0) {
            api = CK_HTTP_ANTHROPIC;
        } else if (PyUnicode_CompareWithASCIIString(api_obj, "openai") != 0) {
            bad_value(st, "api", MSG_API);
            goto done;
        }
    }
    if (key_obj != Py_None) {
        if (!PyUnicode_Check(key_obj)) {
            PyErr_Format(PyExc_TypeError, MSG_OPT_STR_TYPE, "api_key_env",
                         Py_TYPE(key_obj)->tp_name);
            goto done;
        }
        if (!(key = c_string(st, key_obj, "api_key_env"))) goto done;
    }
    if ((timeout_obj &&
         to_seconds(st, timeout_obj, "timeout", 0, MAX_TIMEOUT, MSG_TIMEOUT, &timeout) < 0) ||
        (backoff_obj &&
         to_seconds(st, backoff_obj, "backoff", 1, MAX_BACKOFF, MSG_BACKOFF, &backoff) < 0) ||
        (retries_obj &&
         to_int(st, retries_obj, "max_retries", 0, MAX_RETRIES, MSG_RETRIES, &retries) < 0))
        goto done;
    if (read_headers(st, headers_obj, &lines, &names, &header_array) < 0) goto done;
    if (reasoning_obj != Py_None && !PyBool_Check(reasoning_obj)) {
        PyErr_Format(PyExc_TypeError, MSG_BOOL_TYPE, "reasoning_model",
                     Py_TYPE(reasoning_obj)->tp_name);
        goto done;
    }
    if (!(extra = json_text(extra_obj)) && PyErr_Occurred()) goto done;

    ck_http_options o;
    memset(&o, 0, sizeof o);
    o.base_url = PyBytes_AS_STRING(url);
    o.model = PyBytes_AS_STRING(model);
    o.api = api;
    o.api_key_env = key ? PyBytes_AS_STRING(key) : NULL;
    o.timeout = timeout;
    /* The core reads 0 as "the default" for both; here 0 means none. */
    o.max_retries = retries == 0 ? -1 : (int)retries;
    o.backoff = backoff > 0 ? backoff : NO_BACKOFF;
    o.headers = header_array;
    /* None leaves the choice to the core, by the model's name. */
    o.reasoning_model = reasoning_obj == Py_None ? 0 : reasoning_obj == Py_True ? 1 : -1;
    o.extra_body = extra ? PyBytes_AS_STRING(extra) : NULL;

    self = (ck_py_http_summarizer *)type->tp_alloc(type, 0);
    if (!self) goto done;
    ck_error err;
    self->hs = ck_http_summarizer_new(&o, &err);
    if (!self->hs) {
        ck_py_raise_core(st, err.code, &err);
        Py_CLEAR(self);
        goto done;
    }
    self->api = api;
    self->max_retries = (int)retries;
    self->reasoning_given = o.reasoning_model;
    self->reasoning = api == CK_HTTP_OPENAI &&
                      (o.reasoning_model > 0 ||
                       (o.reasoning_model == 0 && ck_http_reasoning_model(o.model)));
    self->shown_url = shown_url(PyBytes_AS_STRING(url), (size_t)PyBytes_GET_SIZE(url));
    self->model = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(model), PyBytes_GET_SIZE(model), "strict");
    /* The variable the core reads: the one given, the API's usual one, or none for "". */
    if (key && PyBytes_GET_SIZE(key) == 0) {
        self->key_env = Py_None;
        Py_INCREF(Py_None);
    } else if (key) {
        self->key_env =
            PyUnicode_DecodeUTF8(PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), "strict");
    } else {
        self->key_env =
            PyUnicode_FromString(api == CK_HTTP_ANTHROPIC ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
    }
    self->timeout = PyFloat_FromDouble(timeout);
    self->backoff = PyFloat_FromDouble(backoff);
    self->header_names = names;
    names = NULL;
    if (!self->shown_url || !self->model || !self->key_env || !self->timeout || !self->backoff)
        Py_CLEAR(self);

done:
    /* The core copied every string it keeps. */
    Py_XDECREF(url);
    Py_XDECREF(model);
    Py_XDECREF(key);
    Py_XDECREF(lines);
    Py_XDECREF(names);
    Py_XDECREF(extra);
    PyMem_Free(header_array);
    return (PyObject *)self;
}

static void http_dealloc(PyObject *op) {
    ck_py_http_summarizer *self = (ck_py_http_summarizer *)op;
    PyTypeObject *tp = Py_TYPE(op);
    /* No transfer can be running: each one holds a strong reference to the object. */
    ck_http_summarizer_free(self->hs);
    Py_XDECREF(self->shown_url);
    Py_XDECREF(self->model);
    Py_XDECREF(self->key_env);
    Py_XDECREF(self->timeout);
    Py_XDECREF(self->backoff);
    Py_XDECREF(self->header_names);
    tp->tp_free(op);
    Py_DECREF(tp);
}

/* ---- HttpSummarizer: a summary ----------------------------------------------------------- */

/* request[name] as a new reference, or NULL: *found says whether the key was there, and an
 * exception is set only when the lookup itself failed. */
static PyObject *request_item(PyObject *request, const char *name, int *found) {
    *found = 0;
    PyObject *key = PyUnicode_FromString(name);
    if (!key) return NULL;
    PyObject *value = PyDict_GetItemWithError(request, key);
    Py_DECREF(key);
    *found = value != NULL;
    Py_XINCREF(value);
    return value;
}

/* Reads request['prompt'], ['system'] (optional) and ['max_tokens'] (optional) into `req`.
 * The text is copied into one new C buffer, `*buffer` (release it with PyMem_RawFree), so the
 * transfer reads nothing that Python code could change or free while the GIL is released.
 * Returns 0, or -1 with an exception set. */
static int read_request(const ck_module_state *st, PyObject *request, ck_summary_request *req,
                        char **buffer) {
    PyObject *system = NULL, *prompt = NULL, *max_tokens = NULL;
    int found, rc = -1;
    const char *system_text = "", *prompt_text;
    Py_ssize_t system_len = 0, prompt_len;
    unsigned long long tokens;
    *buffer = NULL;
    memset(req, 0, sizeof *req);
    if (!PyDict_Check(request)) {
        PyErr_Format(PyExc_TypeError, MSG_REQUEST_TYPE, Py_TYPE(request)->tp_name);
        return -1;
    }
    system = request_item(request, "system", &found);
    if (!system && PyErr_Occurred()) goto done;
    if (system && system != Py_None) {
        if (!PyUnicode_Check(system)) {
            PyErr_Format(PyExc_TypeError, MSG_OPT_STR_TYPE, "request['system']",
                         Py_TYPE(system)->tp_name);
            goto done;
        }
        system_text = PyUnicode_AsUTF8AndSize(system, &system_len);
        if (!system_text) {
            ck_py_raise_utf8(st, system, -1, "request['system']");
            goto done;
        }
    }
    prompt = request_item(request, "prompt", &found);
    if (!found) {
        if (!PyErr_Occurred())
            ck_py_raise(st, CK_EMISSING, -1, "request['prompt']", MSG_MISSING, -1);
        goto done;
    }
    if (!PyUnicode_Check(prompt)) {
        PyErr_Format(PyExc_TypeError, MSG_STR_TYPE, "request['prompt']", Py_TYPE(prompt)->tp_name);
        goto done;
    }
    prompt_text = PyUnicode_AsUTF8AndSize(prompt, &prompt_len);
    if (!prompt_text) {
        ck_py_raise_utf8(st, prompt, -1, "request['prompt']");
        goto done;
    }
    max_tokens = request_item(request, "max_tokens", &found);
    if (!found && PyErr_Occurred()) goto done;
    if (!found || max_tokens == Py_None) {
        tokens = DEFAULT_MAX_TOKENS;
    } else if (!PyLong_Check(max_tokens) || PyBool_Check(max_tokens)) {
        PyErr_Format(PyExc_TypeError, MSG_INT_TYPE, "request['max_tokens']",
                     Py_TYPE(max_tokens)->tp_name);
        goto done;
    } else {
        tokens = PyLong_AsUnsignedLongLong(max_tokens);
        if (tokens == (unsigned long long)-1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) goto done;
            PyErr_Clear();
            tokens = 0;
        }
    }
    /* Beyond 2^53 a JSON number loses digits; no model takes a budget near that. */
    if (tokens == 0 || tokens > ((unsigned long long)1 << 53)) {
        bad_value(st, "request['max_tokens']", MSG_MAX_TOKENS);
        goto done;
    }
    *buffer = PyMem_RawMalloc((size_t)system_len + (size_t)prompt_len + 1);
    if (!*buffer) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(*buffer, system_text, (size_t)system_len);
    memcpy(*buffer + system_len, prompt_text, (size_t)prompt_len);
    (*buffer)[system_len + prompt_len] = '\0';
    req->system = *buffer;
    req->system_len = (size_t)system_len;
    req->prompt = *buffer + system_len;
    req->prompt_len = (size_t)prompt_len;
    req->max_tokens = tokens;
    rc = 0;

done:
    Py_XDECREF(system);
    Py_XDECREF(prompt);
    Py_XDECREF(max_tokens);
    return rc;
}

/* Raises the Error for a failed transfer: its .code is the status and its text the core's
 * reason (in which the core has already blanked the API key). Always returns NULL. */
static PyObject *raise_failure(const ck_module_state *st, int rc, const char *why) {
    if (rc == CK_ENOMEM) return PyErr_NoMemory();
    /* ck_py_raise formats `why` with %s, which decodes invalid UTF-8 with "replace". */
    return ck_py_raise(st, rc, -1, NULL, why, -1);
}

/* One summary: the request read and copied with the GIL, the transfer without it, the result
 * built with it again. `token` may be NULL. */
static PyObject *run_summary(ck_py_http_summarizer *self, PyObject *request,
                             ck_py_cancel_token *token) {
    ck_module_state *st = state_of((PyObject *)self);
    ck_summary_request req;
    char *buffer = NULL, *reply = NULL, *why = NULL;
    size_t reply_len = 0;
    uint64_t prompt_tokens = NO_USAGE, completion_tokens = NO_USAGE;
    const volatile int *cancel = token ? &token->flag : NULL;
    PyObject *result = NULL;
    int rc;

    if (read_request(st, request, &req, &buffer) < 0) return NULL;
    if (token && token->flag) {
        PyMem_RawFree(buffer);
        return ck_py_raise(st, CK_ECANCELED, -1, NULL, MSG_CANCELED, -1);
    }
    /* Held for the transfer: the core uses both without the GIL. */
    Py_INCREF(self);
    Py_XINCREF(token);
    Py_BEGIN_ALLOW_THREADS
    rc = ck_http_summarize(self->hs, &req, cancel, &reply, &reply_len, &prompt_tokens,
                           &completion_tokens, &why);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(buffer);

    if (rc == CK_OK) {
        result = ck_py_text(reply, reply_len);
        if (result) {
            self->has_usage = 1;
            self->usage_prompt = prompt_tokens != NO_USAGE ? prompt_tokens : 0;
            self->usage_completion = completion_tokens != NO_USAGE ? completion_tokens : 0;
        }
    } else {
        raise_failure(st, rc, why);
    }
    ck_free(reply);
    ck_free(why);
    Py_XDECREF(token);
    Py_DECREF(self);
    return result;
}

static PyObject *http_call(PyObject *op, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"request", NULL};
    PyObject *request;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:HttpSummarizer", kwlist, &request))
        return NULL;
    return run_summary((ck_py_http_summarizer *)op, request, NULL);
}

static PyObject *http_summarize(PyObject *op, PyObject *args) {
    ck_module_state *st = state_of(op);
    PyObject *request, *cancel;
    if (!PyArg_ParseTuple(args, "OO:_summarize", &request, &cancel)) return NULL;
    if (cancel != Py_None && !PyObject_TypeCheck(cancel, (PyTypeObject *)st->CancelTokenType))
        return PyErr_Format(PyExc_TypeError, MSG_TOKEN_TYPE, Py_TYPE(cancel)->tp_name);
    return run_summary((ck_py_http_summarizer *)op, request,
                       cancel == Py_None ? NULL : (ck_py_cancel_token *)cancel);
}

/* ---- HttpSummarizer: attributes and repr ------------------------------------------------- */

static const char *api_name(ck_http_api api) {
    return api == CK_HTTP_ANTHROPIC ? "anthropic" : "openai";
}

static PyObject *http_repr(PyObject *op) {
    ck_py_http_summarizer *self = (ck_py_http_summarizer *)op;
    PyObject *key = NULL, *headers = NULL, *parts = NULL, *sep = NULL, *joined = NULL;
    PyObject *text = NULL;
    key = self->key_env != Py_None ? PyObject_Repr(self->key_env) : PyUnicode_FromString("''");
    if (!key) goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(self->header_names);
    if (n == 0) {
        headers = PyUnicode_FromString("");
    } else {
        /* Names only: a header's value may be a credential. */
        parts = PyList_New(n);
        if (!parts) goto done;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *part =
                PyUnicode_FromFormat("%R: '***'", PyTuple_GET_ITEM(self->header_names, i));
            if (!part) goto done;
            PyList_SET_ITEM(parts, i, part);
        }
        sep = PyUnicode_FromString(", ");
        joined = sep ? PyUnicode_Join(sep, parts) : NULL;
        headers = joined ? PyUnicode_FromFormat(", headers={%U}", joined) : NULL;
    }
    if (!headers) goto done;
    /* reasoning_model only when given: by default the core decides by the model's name. */
    const char *reasoning = self->reasoning_given > 0   ? ", reasoning_model=True"
                            : self->reasoning_given < 0 ? ", reasoning_model=False"
                                                        : "";
    text = PyUnicode_FromFormat(
        "HttpSummarizer(%R, %R, api='%s', api_key_env=%U, timeout=%R, max_retries=%d, "
        "backoff=%R%U%s)",
        self->shown_url, self->model, api_name(self->api), key, self->timeout, self->max_retries,
        self->backoff, headers, reasoning);

done:
    Py_XDECREF(key);
    Py_XDECREF(headers);
    Py_XDECREF(parts);
    Py_XDECREF(sep);
    Py_XDECREF(joined);
    return text;
}

static PyObject *new_ref(PyObject *obj) {
    Py_INCREF(obj);
    return obj;
}

static PyObject *http_get_base_url(PyObject *op, void *closure) {
    (void)closure;
    return new_ref(((ck_py_http_summarizer *)op)->shown_url);
}

static PyObject *http_get_model(PyObject *op, void *closure) {
    (void)closure;
    return new_ref(((ck_py_http_summarizer *)op)->model);
}

static PyObject *http_get_api(PyObject *op, void *closure) {
    (void)closure;
    return PyUnicode_FromString(api_name(((ck_py_http_summarizer *)op)->api));
}

static PyObject *http_get_api_key_env(PyObject *op, void *closure) {
    (void)closure;
    return new_ref(((ck_py_http_summarizer *)op)->key_env);
}

static PyObject *http_get_timeout(PyObject *op, void *closure) {
    (void)closure;
    return new_ref(((ck_py_http_summarizer *)op)->timeout);
}

static PyObject *http_get_max_retries(PyObject *op, void *closure) {
    (void)closure;
    return PyLong_FromLong(((ck_py_http_summarizer *)op)->max_retries);
}

static PyObject *http_get_backoff(PyObject *op, void *closure) {
    (void)closure;
    return new_ref(((ck_py_http_summarizer *)op)->backoff);
}

static PyObject *http_get_header_names(PyObject *op, void *closure) {
    (void)closure;
    return new_ref(((ck_py_http_summarizer *)op)->header_names);
}

static PyObject *http_get_reasoning_model(PyObject *op, void *closure) {
    (void)closure;
    return PyBool_FromLong(((ck_py_http_summarizer *)op)->reasoning);
}

static PyObject *http_get_last_usage(PyObject *op, void *closure) {
    (void)closure;
    ck_py_http_summarizer *self = (ck_py_http_summarizer *)op;
    if (!self->has_usage) Py_RETURN_NONE;
    return Py_BuildValue("(KK)", self->usage_prompt, self->usage_completion);
}

PyDoc_STRVAR(
    http_doc,
    "HttpSummarizer(base_url, model, *, api='openai', api_key_env=None, timeout=60, "
    "max_retries=3, headers=None, backoff=0.5, reasoning_model=None, extra_body=None)\n"
    "--\n"
    "\n"
    "The built-in summarizer: asks a model over HTTP (libcurl) to write the checkpoint.\n"
    "Pass it as summarize= to Compactor.compact() or acompact(), or call it with a summary\n"
    "request dict ('prompt'; 'system' default '', 'max_tokens' default 1024); it returns\n"
    "the reply text, and last_usage then holds the provider's token counts.\n"
    "\n"
    "api='openai' posts to {base_url}/chat/completions (OpenAI and compatible servers:\n"
    "base_url 'https://api.openai.com/v1'); api='anthropic' posts to {base_url}/v1/messages\n"
    "(base_url 'https://api.anthropic.com'). The API key is read from the environment\n"
    "variable api_key_env at each call (None: OPENAI_API_KEY or ANTHROPIC_API_KEY; '':\n"
    "send none) and is never stored; a key holding a line break is refused, and a key the\n"
    "provider echoes is blanked from its reply. timeout bounds the whole call in seconds,\n"
    "retries and waits included; connection errors, HTTP 429 and 5xx are retried\n"
    "max_retries times, waiting backoff seconds and doubling (Retry-After wins). headers\n"
    "adds 'Name': 'value' pairs to every request; extra_body (a dict) adds fields to every\n"
    "request body, replacing ctxkeel's of the same name. reasoning_model=True sends\n"
    "max_completion_tokens and no temperature (OpenAI's reasoning models need that),\n"
    "False max_tokens and temperature 0; None decides by the model's name (o1, o3,\n"
    "o4-mini, gpt-5...).\n"
    "\n"
    "A failure raises ctxkeel.Error with .code CK_ESUMMARY (an HTTP error or a reply\n"
    "without text), CK_ETIMEDOUT, CK_EIO (no connection) or CK_ECANCELED, and a one-line\n"
    "reason. The transfer runs without the GIL, and one object may serve several threads\n"
    "at once. Inside a compaction a failure becomes the record's fallback, and\n"
    "summarize_timeout or cancelling acompact() aborts the transfer.");
PyDoc_STRVAR(http_summarize_doc,
             "_summarize($self, request, cancel, /)\n--\n\n"
             "Calls the summarizer like summarizer(request), with a CancelToken (or None):\n"
             "cancelling it from another thread aborts the transfer with Error CK_ECANCELED.");

static PyMethodDef http_methods[] = {
    {
        .ml_name = "_summarize",
        .ml_meth = http_summarize,
        .ml_flags = METH_VARARGS,
        .ml_doc = http_summarize_doc,
    },
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef http_getset[] = {
    {.name = "base_url",
     .get = http_get_base_url,
     .doc = "The base URL (a user:password part shown as ***)."},
    {.name = "model", .get = http_get_model, .doc = "The model name sent with each request."},
    {.name = "api", .get = http_get_api, .doc = "'openai' or 'anthropic'."},
    {.name = "api_key_env",
     .get = http_get_api_key_env,
     .doc = "The environment variable the key is read from at each call; None: no key."},
    {.name = "timeout",
     .get = http_get_timeout,
     .doc = "Seconds allowed for the whole call, retries and waits included."},
    {.name = "max_retries", .get = http_get_max_retries, .doc = "Retries after the first try."},
    {.name = "backoff", .get = http_get_backoff, .doc = "The first retry delay in seconds."},
    {.name = "header_names",
     .get = http_get_header_names,
     .doc = "The names of the extra headers (their values are not kept for display)."},
    {.name = "reasoning_model",
     .get = http_get_reasoning_model,
     .doc = "True when requests send max_completion_tokens and no temperature (the option\n"
            "given, or the core's choice by the model's name)."},
    {.name = "last_usage",
     .get = http_get_last_usage,
     .doc = "(prompt_tokens, completion_tokens) the provider reported for the latest\n"
            "successful reply (0 for a count it did not give); None before one."},
    {NULL, NULL, NULL, NULL, NULL},
};

/* clang-format off */
static PyType_Slot http_slots[] = {
    {Py_tp_doc, (void *)http_doc},
    {Py_tp_new, (void *)http_new},
    {Py_tp_dealloc, (void *)http_dealloc},
    {Py_tp_call, (void *)http_call},
    {Py_tp_repr, (void *)http_repr},
    {Py_tp_methods, http_methods},
    {Py_tp_getset, http_getset},
    {0, NULL},
};
/* clang-format on */

static PyType_Spec http_spec = {
    .name = "ctxkeel._ext.HttpSummarizer",
    .basicsize = sizeof(ck_py_http_summarizer),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = http_slots,
};

/* ---- usage objects ----------------------------------------------------------------------- */

/* usage_prompt_tokens(json_text) -> int: the whole prompt's tokens of a provider's usage
 * object (ck_usage_prompt_tokens(); the shapes are the core's). ctxkeel/_compactor.py gives
 * it the JSON of whatever observe_usage() received. */
static PyObject *usage_prompt_tokens(PyObject *module, PyObject *arg) {
    ck_module_state *st = (ck_module_state *)PyModule_GetState(module);
    if (!PyUnicode_Check(arg))
        return PyErr_Format(PyExc_TypeError, MSG_USAGE_TYPE, Py_TYPE(arg)->tp_name);
    Py_ssize_t len = 0;
    const char *text = PyUnicode_AsUTF8AndSize(arg, &len);
    if (!text) return ck_py_raise_utf8(st, arg, -1, "usage");
    uint64_t tokens = 0;
    ck_error err;
    int rc = ck_usage_prompt_tokens(text, (size_t)len, &tokens, &err);
    if (rc != CK_OK) return ck_py_raise_core(st, rc, &err);
    return PyLong_FromUnsignedLongLong(tokens);
}

PyDoc_STRVAR(usage_prompt_tokens_doc,
             "usage_prompt_tokens($module, usage, /)\n--\n\n"
             "The whole prompt's token count from a provider's usage object given as JSON text\n"
             "(OpenAI Chat and Responses, Anthropic with its cache fields, the AI SDK, Gemini,\n"
             "or a response holding one under 'usage' / 'usageMetadata'). Raises InputError\n"
             "CK_EINVAL naming the field for any other shape, CK_ESYNTAX for bad JSON.");

static PyMethodDef usage_functions[] = {
    {
        .ml_name = "usage_prompt_tokens",
        .ml_meth = usage_prompt_tokens,
        .ml_flags = METH_O,
        .ml_doc = usage_prompt_tokens_doc,
    },
    {NULL, NULL, 0, NULL},
};

/* ---- module level ------------------------------------------------------------------------ */

/* Adds `type` under `name`; the module takes a new reference, the state keeps its own. */
static int add_type(PyObject *module, const char *name, PyObject *type) {
    Py_INCREF(type);
    if (PyModule_AddObject(module, name, type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

int ck_py_http_init(PyObject *module, ck_module_state *st) {
    st->HttpSummarizerType = PyType_FromModuleAndSpec(module, &http_spec, NULL);
    if (!st->HttpSummarizerType) return -1;
    st->CancelTokenType = PyType_FromModuleAndSpec(module, &token_spec, NULL);
    if (!st->CancelTokenType) return -1;
    if (add_type(module, "HttpSummarizer", st->HttpSummarizerType) < 0 ||
        add_type(module, "CancelToken", st->CancelTokenType) < 0 ||
        PyModule_AddFunctions(module, usage_functions) < 0)
        return -1;
    return 0;
}
