/*
 * convert.c - reads message dicts into a ck_history, following docs/mapping.md.
 *
 * The history borrows: each part's text, id and name point into the UTF-8 buffer that
 * PyUnicode_AsUTF8AndSize keeps inside the str object, so nothing is copied except text that
 * has to be made (the joined text of a list content, JSON text of tool-call arguments). Joined
 * text lives in ck_history_alloc() storage; JSON text is a new str pinned in the history.
 *
 * Places in errors are built only when an error happens: a `field` carries a printf format
 * and up to two indices, and is formatted behind the message prefix ("messages[3]") on the
 * error path alone.
 */
#include "state.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static const char MSG_NOT_A_LIST[] = "ctxkeel: messages must be a list, not %.200s";
static const char MSG_MISSING[] = "required field is missing";
static const char MSG_NOT_STR[] = "expected a string";
static const char MSG_NOT_DICT[] = "expected a dict";
static const char MSG_NOT_LIST[] = "expected a list";
static const char MSG_NOT_ITEM[] = "expected a dict or a string";
static const char MSG_NOT_CONTENT[] = "expected a string, a list or null";
static const char MSG_NOT_TEXT[] = "expected a string or a list";
static const char MSG_NOT_JSON[] = "cannot be serialized as JSON";
static const char MSG_TOO_MANY[] = "too many items";
static const char MSG_TOO_BIG[] = "a string is larger than 256 MiB";

/* A place inside a message, relative to its prefix: ".content[%zd].text" and its indices.
 * Places go by pointer, to a compound literal of the caller's block: by value, every call
 * copied one through the stack, although only the error path reads it. */
typedef struct field {
    const char *fmt;
    Py_ssize_t a, b;
} field;

#define FIELD0(fmt) (&(const field){(fmt), 0, 0})
#define FIELD1(fmt, a) (&(const field){(fmt), (a), 0})
#define FIELD2(fmt, a, b) (&(const field){(fmt), (a), (b)})

/* Formats the full place of `f` in message `i` into `buf`. */
static void format_place(const ck_py_history *ph, Py_ssize_t i, const field *f, char *buf,
                         size_t size) {
    int n = ph->single ? snprintf(buf, size, "message") : snprintf(buf, size, "messages[%zd]", i);
    if (n < 0 || (size_t)n >= size) return;
    /* Every format names at most two indices; unused arguments are ignored by printf. */
    snprintf(buf + n, size - (size_t)n, f->fmt, f->a, f->b);
}

/* Raises InputError `code` at field `f` of message `i`. Always returns -1. */
static int fail(const ck_py_history *ph, int code, Py_ssize_t i, const char *msg, const field *f) {
    char where[CK_PY_WHERE_MAX];
    format_place(ph, i, f, where, sizeof where);
    ck_py_raise(ph->st, code, i, where, msg, -1);
    return -1;
}

/* Raises what a failed core call reported. Always returns -1. */
static int fail_core(const ck_py_history *ph, int rc, const ck_error *err) {
    ck_py_raise_core(ph->st, rc, err);
    return -1;
}

/* Makes room for `more` pins. Growing the array allocates no Python object, so it cannot
 * start a garbage collection, and with it Python code, between two pins. */
static int reserve(ck_py_history *ph, Py_ssize_t more) {
    if (more <= ph->cap_pins - ph->n_pins) return 0;
    Py_ssize_t want = ph->n_pins + more, cap = ph->cap_pins ? ph->cap_pins : 64;
    while (cap < want) {
        if (cap > PY_SSIZE_T_MAX / 2 / (Py_ssize_t)sizeof(PyObject *)) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    PyObject **pins = PyMem_Realloc(ph->pins, (size_t)cap * sizeof *pins);
    if (!pins) {
        PyErr_NoMemory();
        return -1;
    }
    ph->pins = pins;
    ph->cap_pins = cap;
    return 0;
}

/* Keeps `obj` alive until the history is disposed of. */
static int pin(ck_py_history *ph, PyObject *obj) {
    if (reserve(ph, 1) < 0) return -1;
    Py_INCREF(obj);
    ph->pins[ph->n_pins++] = obj;
    return 0;
}

/* The UTF-8 buffer of str `s` (field `f` of message `i`), for a str that is pinned already. A
 * str that cannot be encoded (a lone surrogate) raises InputError CK_EUTF8 naming the field,
 * and one over CK_MAX_STRING bytes CK_ETOOBIG; the place is formatted only then. (The core
 * refuses such a string too, but it can only name the part's own field, "text", "id" or
 * "name".) */
static int utf8_of(ck_py_history *ph, PyObject *s, const char **out, size_t *len, Py_ssize_t i,
                   const field *f) {
    /* More code points than the limit is too many bytes in any encoding: refused before a
     * non-ASCII str gets a UTF-8 copy of that size. */
    if (PyUnicode_Check(s) && (size_t)PyUnicode_GET_LENGTH(s) > CK_MAX_STRING)
        return fail(ph, CK_ETOOBIG, i, MSG_TOO_BIG, f);
    Py_ssize_t n;
    const char *text;
    if (PyUnicode_Check(s) && PyUnicode_IS_COMPACT_ASCII(s)) {
        /* What PyUnicode_AsUTF8AndSize returns for these, without the call: most strs of a
         * history are ASCII, and a message has several. */
        text = (const char *)PyUnicode_DATA(s);
        n = PyUnicode_GET_LENGTH(s);
    } else {
        text = PyUnicode_AsUTF8AndSize(s, &n);
    }
    if (!text) {
        char where[CK_PY_WHERE_MAX];
        format_place(ph, i, f, where, sizeof where);
        ck_py_raise_utf8(ph->st, s, i, where);
        return -1;
    }
    if ((size_t)n > CK_MAX_STRING) return fail(ph, CK_ETOOBIG, i, MSG_TOO_BIG, f);
    *out = text;
    *len = (size_t)n;
    return 0;
}

/* Borrows the UTF-8 buffer of str `s` as utf8_of() does, and pins `s`. */
static int borrow(ck_py_history *ph, PyObject *s, const char **out, size_t *len, Py_ssize_t i,
                  const field *f) {
    if (utf8_of(ph, s, out, len, i, f) < 0) return -1;
    return pin(ph, s);
}

PyObject *ck_py_compact_json(const ck_module_state *st, PyObject *obj) {
    return PyObject_CallOneArg(st->json_encode, obj);
}

/* `obj` as compact JSON text, borrowed like any other str. A value that JSON cannot express
 * (or a circular one) is the caller's input error, named at field `f`. */
static int borrow_json(ck_py_history *ph, PyObject *obj, const char **out, size_t *len,
                       Py_ssize_t i, const field *f) {
    PyObject *text = ck_py_compact_json(ph->st, obj);
    if (!text) {
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError))
            return fail(ph, CK_ETYPE, i, MSG_NOT_JSON, f);
        return -1;
    }
    int rc = borrow(ph, text, out, len, i, f);
    Py_DECREF(text);
    return rc;
}

/* True when str `s` is the ASCII text `name` of `len` bytes. The bytes are compared in place:
 * role and type are tried against several names for every message and block, and
 * PyUnicode_CompareWithASCIIString costs a call and a strlen per try. */
static int str_is(PyObject *s, const char *name, size_t len) {
#if PY_VERSION_HEX < 0x030C0000
    /* A str made by the legacy wchar_t API may not be ready; its fields are not set yet. */
    if (!PyUnicode_IS_READY(s)) return PyUnicode_CompareWithASCIIString(s, name) == 0;
#endif
    return (size_t)PyUnicode_GET_LENGTH(s) == len && PyUnicode_IS_ASCII(s) &&
           memcmp(PyUnicode_DATA(s), name, len) == 0;
}

/* str_is() for a string literal. */
#define TYPE_IS(s, literal) str_is((s), literal, sizeof literal - 1)

/*
 * The keys read. A lookup finds the entry by hash and then compares the dict's key object
 * with ours: at once when they are the same object, else by their text. json.loads gives all
 * the dicts of one document the same key objects, its own rather than the interned ones that
 * a dict display in Python code uses. So the reader looks keys up with the key objects of the
 * first dicts it reads, when they are exact strs with our text (see learn_keys). An exact str
 * with the same text finds the same entry in any dict, so this changes no result, only the
 * cost (about 8% of reading a history that json.loads made, measured).
 */
typedef enum key {
    K_ROLE,
    K_CONTENT,
    K_NAME,
    K_TOOL_CALL_ID,
    K_TOOL_CALLS,
    K_ID,
    K_FUNCTION,
    K_ARGUMENTS,
    K_TYPE,
    K_TEXT,
    K_THINKING,
    K_INPUT,
    K_TOOL_USE_ID,
    K_IS_ERROR,
    K_COUNT
} key;

#define KEY(k, text, member) [k] = {text, sizeof text - 1, offsetof(ck_module_state, member)}

static const struct key_name {
    const char *text;
    size_t len;
    size_t state_offset; /* of the interned key object in ck_module_state */
} key_names[K_COUNT] = {
    KEY(K_ROLE, "role", s_role),
    KEY(K_CONTENT, "content", s_content),
    KEY(K_NAME, "name", s_name),
    KEY(K_TOOL_CALL_ID, "tool_call_id", s_tool_call_id),
    KEY(K_TOOL_CALLS, "tool_calls", s_tool_calls),
    KEY(K_ID, "id", s_id),
    KEY(K_FUNCTION, "function", s_function),
    KEY(K_ARGUMENTS, "arguments", s_arguments),
    KEY(K_TYPE, "type", s_type),
    KEY(K_TEXT, "text", s_text),
    KEY(K_THINKING, "thinking", s_thinking),
    KEY(K_INPUT, "input", s_input),
    KEY(K_TOOL_USE_ID, "tool_use_id", s_tool_use_id),
    KEY(K_IS_ERROR, "is_error", s_is_error),
};

_Static_assert(K_COUNT == CK_PY_KEY_COUNT, "state.h: CK_PY_KEY_COUNT");

/* The module's interned object for key `k`. */
static PyObject *interned_key(const ck_module_state *st, key k) {
    return *(PyObject *const *)(const void *)((const char *)st + key_names[k].state_offset);
}

/* How many dicts of a history lend the reader their key objects: enough for a message of
 * every shape near the start, few enough that a history of mixed origins does not pay for
 * passes that find nothing new. */
#define LEARN_DICTS 16

/* Adopts the key objects of `dict` that are exact strs with the text of one of our keys
 * (pinned, so that each stays what it is). Returns 0, or -1 with MemoryError set. PyDict_Next
 * runs no Python code. */
static int adopt_keys(ck_py_history *ph, PyObject *dict) {
    ph->dicts_met++;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(dict, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k)) continue;
        for (int j = 0; j < K_COUNT; j++) {
            if (ph->keys[j] == k) break;
            if (str_is(k, key_names[j].text, key_names[j].len)) {
                if (pin(ph, k) < 0) return -1;
                ph->keys[j] = k;
                break;
            }
        }
    }
    return 0;
}

/* Before `dict` is read: adopt_keys() while few dicts were met. */
static inline int learn_keys(ck_py_history *ph, PyObject *dict) {
    return ph->dicts_met < LEARN_DICTS ? adopt_keys(ph, dict) : 0;
}

/* dict[key], borrowed, or NULL when absent (check PyErr_Occurred()). The dict holds the value
 * only until Python code runs, so callers pin what they keep. */
static PyObject *get(const ck_py_history *ph, PyObject *dict, key k) {
    return PyDict_GetItemWithError(dict, ph->keys[k]);
}

/* A required str field: absent is CK_EMISSING, any other type CK_ETYPE, both at `f`. */
static int need_str(ck_py_history *ph, PyObject *dict, key k, const char **out, size_t *len,
                    Py_ssize_t i, const field *f) {
    PyObject *value = get(ph, dict, k);
    if (!value) return PyErr_Occurred() ? -1 : fail(ph, CK_EMISSING, i, MSG_MISSING, f);
    if (!PyUnicode_Check(value)) return fail(ph, CK_ETYPE, i, MSG_NOT_STR, f);
    return borrow(ph, value, out, len, i, f);
}

/* An optional str field: absent or not a str leaves the text empty. */
static int opt_str(ck_py_history *ph, PyObject *dict, key k, const char **out, size_t *len,
                   Py_ssize_t i, const field *f) {
    PyObject *value = get(ph, dict, k);
    if (!value) return PyErr_Occurred() ? -1 : 0;
    return PyUnicode_Check(value) ? borrow(ph, value, out, len, i, f) : 0;
}

/* The items of a list, pinned one after the other in one go: later reads (and apply.c) see
 * them as they were when they were read, even if Python code changes the list in between.
 * (A tuple copy would do the same, at the cost of an object per list.) */
static int snapshot(ck_py_history *ph, PyObject *list, ck_py_items *out) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (reserve(ph, n) < 0) return -1;
    /* Nothing above ran Python code, so the list still has n items. */
    out->at = ph->n_pins;
    out->n = n;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *item = PyList_GET_ITEM(list, k);
        Py_INCREF(item);
        ph->pins[ph->n_pins++] = item;
    }
    return 0;
}

/* One piece of a joined text. */
typedef struct piece {
    const char *text;
    size_t len;
} piece;

/*
 * The text of a tool result: a str, or the "text" of every item of a list (bare str items
 * count too) joined with "\n"; items without text are skipped. `whole` names the content and
 * `item_fmt` an item's text (formatted with `outer` and the item index when `outer` >= 0,
 * with the item index alone otherwise).
 */
static int join_text(ck_py_history *ph, PyObject *content, const char **out, size_t *len,
                     Py_ssize_t i, const field *whole, const char *item_fmt, Py_ssize_t outer) {
    *out = "";
    *len = 0;
    if (!content || content == Py_None) return 0;
    if (PyUnicode_Check(content)) return borrow(ph, content, out, len, i, whole);
    if (!PyList_Check(content)) return fail(ph, CK_ETYPE, i, MSG_NOT_TEXT, whole);
    ck_py_items items;
    if (snapshot(ph, content, &items) < 0) return -1;
    Py_ssize_t n = items.n;
    if (n == 0) return 0;
    piece *pieces = PyMem_Malloc((size_t)n * sizeof *pieces);
    if (!pieces) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t used = 0;
    size_t total = 0;
    int rc = -1;
    for (Py_ssize_t m = 0; m < n; m++) {
        /* Read by index on every turn: borrow() may move the pins array. */
        PyObject *item = ph->pins[items.at + m];
        const field *f = outer >= 0 ? FIELD2(item_fmt, outer, m) : FIELD1(item_fmt, m);
        PyObject *text = item;
        if (PyDict_Check(item)) {
            if (learn_keys(ph, item) < 0) goto done;
            text = get(ph, item, K_TEXT);
            if (!text && PyErr_Occurred()) goto done;
            if (!text || text == Py_None) continue;
            if (!PyUnicode_Check(text)) {
                fail(ph, CK_ETYPE, i, MSG_NOT_STR, f);
                goto done;
            }
        } else if (!PyUnicode_Check(item)) {
            continue;
        }
        if (borrow(ph, text, &pieces[used].text, &pieces[used].len, i, f) < 0) goto done;
        total += pieces[used].len;
        used++;
    }
    if (used == 1) {
        /* One piece needs no copy: its buffer is pinned already. */
        *out = pieces[0].text;
        *len = pieces[0].len;
    } else if (used > 1) {
        total += (size_t)used - 1;
        if (total > CK_MAX_STRING) {
            fail(ph, CK_ETOOBIG, i, MSG_TOO_BIG, whole);
            goto done;
        }
        char *buf = ck_history_alloc(ph->h, total ? total : 1);
        if (!buf) {
            PyErr_NoMemory();
            goto done;
        }
        size_t at = 0;
        for (Py_ssize_t k = 0; k < used; k++) {
            if (k) buf[at++] = '\n';
            if (pieces[k].len) memcpy(buf + at, pieces[k].text, pieces[k].len);
            at += pieces[k].len;
        }
        *out = buf;
        *len = at;
    }
    rc = 0;

done:
    PyMem_Free(pieces);
    return rc;
}

static ck_role role_of(PyObject *role) {
    static const struct {
        const char *name;
        size_t len;
    } roles[] = {{"system", 6}, {"developer", 9}, {"user", 4}, {"assistant", 9}, {"tool", 4}};
    for (int r = 0; r < (int)(sizeof roles / sizeof roles[0]); r++)
        if (str_is(role, roles[r].name, roles[r].len)) return (ck_role)r;
    return CK_ROLE_OTHER;
}

/* Content list item `k` of message `i` into `p` (zeroed by the caller, host set). */
static int read_block(ck_py_history *ph, PyObject *item, Py_ssize_t i, Py_ssize_t k, ck_part *p) {
    if (PyUnicode_Check(item)) {
        p->kind = CK_PART_TEXT;
        return borrow(ph, item, &p->text, &p->text_len, i, FIELD1(".content[%zd]", k));
    }
    if (!PyDict_Check(item)) return fail(ph, CK_ETYPE, i, MSG_NOT_ITEM, FIELD1(".content[%zd]", k));
    if (learn_keys(ph, item) < 0) return -1;
    PyObject *type = get(ph, item, K_TYPE);
    if (!type) {
        if (PyErr_Occurred()) return -1;
        return fail(ph, CK_EMISSING, i, MSG_MISSING, FIELD1(".content[%zd].type", k));
    }
    if (!PyUnicode_Check(type))
        return fail(ph, CK_ETYPE, i, MSG_NOT_STR, FIELD1(".content[%zd].type", k));
    if (TYPE_IS(type, "text")) {
        p->kind = CK_PART_TEXT;
        return need_str(ph, item, K_TEXT, &p->text, &p->text_len, i,
                        FIELD1(".content[%zd].text", k));
    }
    if (TYPE_IS(type, "image_url") || TYPE_IS(type, "image")) {
        p->kind = CK_PART_IMAGE;
        p->flags = TYPE_IS(type, "image") ? CK_PART_ANTHROPIC : CK_PART_OPENAI;
        return 0;
    }
    if (TYPE_IS(type, "tool_use")) {
        p->kind = CK_PART_TOOL_CALL;
        p->flags = CK_PART_ANTHROPIC;
        if (need_str(ph, item, K_ID, &p->id, &p->id_len, i, FIELD1(".content[%zd].id", k)) < 0 ||
            need_str(ph, item, K_NAME, &p->name, &p->name_len, i,
                     FIELD1(".content[%zd].name", k)) < 0)
            return -1;
        PyObject *input = get(ph, item, K_INPUT);
        if (!input) return PyErr_Occurred() ? -1 : 0;
        /* Pinned before encoding: the encoder may run Python code that edits the item. */
        if (pin(ph, input) < 0) return -1;
        return borrow_json(ph, input, &p->text, &p->text_len, i, FIELD1(".content[%zd].input", k));
    }
    if (TYPE_IS(type, "tool_result")) {
        p->kind = CK_PART_TOOL_RESULT;
        p->flags = CK_PART_ANTHROPIC;
        PyObject *is_error = get(ph, item, K_IS_ERROR);
        if (!is_error && PyErr_Occurred()) return -1;
        if (is_error == Py_True) p->flags |= CK_PART_IS_ERROR;
        if (need_str(ph, item, K_TOOL_USE_ID, &p->id, &p->id_len, i,
                     FIELD1(".content[%zd].tool_use_id", k)) < 0)
            return -1;
        PyObject *content = get(ph, item, K_CONTENT);
        if (!content && PyErr_Occurred()) return -1;
        return join_text(ph, content, &p->text, &p->text_len, i, FIELD1(".content[%zd].content", k),
                         ".content[%zd].content[%zd].text", k);
    }
    /* Any other block is kept as it is; its text, if it has one, still costs tokens. */
    p->kind = CK_PART_OTHER;
    int thinking = TYPE_IS(type, "thinking");
    if (thinking || TYPE_IS(type, "redacted_thinking")) p->flags = CK_PART_ANTHROPIC;
    PyObject *text = get(ph, item, thinking ? K_THINKING : K_TEXT);
    if (!text) return PyErr_Occurred() ? -1 : 0;
    if (!PyUnicode_Check(text)) return 0;
    return borrow(ph, text, &p->text, &p->text_len, i,
                  FIELD2(thinking ? ".content[%zd].thinking" : ".content[%zd].text", k, 0));
}

/* The content list of message `i`: one part per item, host = the item's index. */
static int read_content_list(ck_py_history *ph, ck_py_source *src, PyObject *content,
                             Py_ssize_t i) {
    if (snapshot(ph, content, &src->content) < 0) return -1;
    Py_ssize_t n = src->content.n;
    if (n > CK_PY_HOST_INDEX_MAX) return fail(ph, CK_ETOOBIG, i, MSG_TOO_MANY, FIELD0(".content"));
    for (Py_ssize_t k = 0; k < n; k++) {
        ck_part p;
        ck_error err;
        memset(&p, 0, sizeof p);
        p.host = (uint32_t)k;
        if (read_block(ph, ph->pins[src->content.at + k], i, k, &p) < 0) return -1;
        int rc = ck_history_add_part(ph->h, &p, &err);
        if (rc) return fail_core(ph, rc, &err);
    }
    return 0;
}

/* The tool_calls of message `i` (any role): one TOOL_CALL part per item. */
static int read_tool_calls(ck_py_history *ph, ck_py_source *src, PyObject *msg, Py_ssize_t i) {
    PyObject *calls = get(ph, msg, K_TOOL_CALLS);
    if (!calls) return PyErr_Occurred() ? -1 : 0;
    if (calls == Py_None) return 0;
    if (!PyList_Check(calls)) return fail(ph, CK_ETYPE, i, MSG_NOT_LIST, FIELD0(".tool_calls"));
    if (snapshot(ph, calls, &src->calls) < 0) return -1;
    Py_ssize_t n = src->calls.n;
    if (n > CK_PY_HOST_INDEX_MAX)
        return fail(ph, CK_ETOOBIG, i, MSG_TOO_MANY, FIELD0(".tool_calls"));
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *call = ph->pins[src->calls.at + j];
        if (!PyDict_Check(call))
            return fail(ph, CK_ETYPE, i, MSG_NOT_DICT, FIELD1(".tool_calls[%zd]", j));
        ck_part p;
        ck_error err;
        memset(&p, 0, sizeof p);
        p.kind = CK_PART_TOOL_CALL;
        p.flags = CK_PART_OPENAI;
        p.host = CK_PY_HOST_CALL | (uint32_t)j;
        if (learn_keys(ph, call) < 0 ||
            need_str(ph, call, K_ID, &p.id, &p.id_len, i, FIELD1(".tool_calls[%zd].id", j)) < 0)
            return -1;
        PyObject *fn = get(ph, call, K_FUNCTION);
        if (!fn) {
            if (PyErr_Occurred()) return -1;
            return fail(ph, CK_EMISSING, i, MSG_MISSING, FIELD1(".tool_calls[%zd].function", j));
        }
        if (!PyDict_Check(fn))
            return fail(ph, CK_ETYPE, i, MSG_NOT_DICT, FIELD1(".tool_calls[%zd].function", j));
        /* The function dict is pinned so that its strs stay reachable while we read it. */
        if (pin(ph, fn) < 0 || learn_keys(ph, fn) < 0 ||
            need_str(ph, fn, K_NAME, &p.name, &p.name_len, i,
                     FIELD1(".tool_calls[%zd].function.name", j)) < 0)
            return -1;
        PyObject *args = get(ph, fn, K_ARGUMENTS);
        const field *where = FIELD1(".tool_calls[%zd].function.arguments", j);
        if (!args && PyErr_Occurred()) return -1;
        if (args && PyUnicode_Check(args)) {
            if (borrow(ph, args, &p.text, &p.text_len, i, where) < 0) return -1;
        } else if (args && args != Py_None) {
            /* Arguments given as a dict (or any JSON value) count as their JSON text. */
            if (pin(ph, args) < 0 || borrow_json(ph, args, &p.text, &p.text_len, i, where) < 0)
                return -1;
        }
        int rc = ck_history_add_part(ph->h, &p, &err);
        if (rc) return fail_core(ph, rc, &err);
    }
    return 0;
}

/* Message `i` of the snapshot into the history. */
static int read_message(ck_py_history *ph, Py_ssize_t i, PyObject *msg) {
    ck_py_source *src = &ph->src[i];
    ck_error err;
    if (!PyDict_Check(msg)) return fail(ph, CK_ETYPE, i, MSG_NOT_DICT, FIELD0(""));
    src->msg = msg;
    if (learn_keys(ph, msg) < 0) return -1;
    PyObject *role_obj = get(ph, msg, K_ROLE);
    if (!role_obj) {
        if (PyErr_Occurred()) return -1;
        return fail(ph, CK_EMISSING, i, MSG_MISSING, FIELD0(".role"));
    }
    if (!PyUnicode_Check(role_obj)) return fail(ph, CK_ETYPE, i, MSG_NOT_STR, FIELD0(".role"));
    ck_role role = role_of(role_obj);
    PyObject *content = get(ph, msg, K_CONTENT);
    if (!content && PyErr_Occurred()) return -1;
    int is_str = content && PyUnicode_Check(content);
    int rc = ck_history_add_message(ph->h, role, is_str ? CK_MSG_STRING_CONTENT : 0);
    if (rc) return fail(ph, rc, i, NULL, FIELD0(""));
    /* Pinned at once: reading other keys may run Python code that edits the message. */
    if (content && pin(ph, content) < 0) return -1;
    /* apply.c hands this very str back when the content survives unchanged. */
    if (is_str) src->text = content;

    ck_part p;
    memset(&p, 0, sizeof p);
    if (role == CK_ROLE_TOOL) {
        /* An OpenAI tool message is one tool result, whatever the shape of its content. */
        p.kind = CK_PART_TOOL_RESULT;
        p.flags = CK_PART_OPENAI;
        p.host = CK_PY_HOST_WHOLE;
        /* "name", when a host keeps the tool's name on its result, names the tool for
         * retention policies at tool time (the call is not at hand there). */
        if (opt_str(ph, msg, K_NAME, &p.name, &p.name_len, i, FIELD0(".name")) < 0 ||
            need_str(ph, msg, K_TOOL_CALL_ID, &p.id, &p.id_len, i, FIELD0(".tool_call_id")) < 0)
            return -1;
        if (is_str ? utf8_of(ph, content, &p.text, &p.text_len, i, FIELD0(".content"))
                   : join_text(ph, content, &p.text, &p.text_len, i, FIELD0(".content"),
                               ".content[%zd].text", -1))
            return -1;
        if ((rc = ck_history_add_part(ph->h, &p, &err))) return fail_core(ph, rc, &err);
    } else if (is_str) {
        p.kind = CK_PART_TEXT;
        p.host = CK_PY_HOST_WHOLE;
        if (utf8_of(ph, content, &p.text, &p.text_len, i, FIELD0(".content")) < 0) return -1;
        if ((rc = ck_history_add_part(ph->h, &p, &err))) return fail_core(ph, rc, &err);
    } else if (content && PyList_Check(content)) {
        if (read_content_list(ph, src, content, i) < 0) return -1;
    } else if (content && content != Py_None) {
        return fail(ph, CK_ETYPE, i, MSG_NOT_CONTENT, FIELD0(".content"));
    }
    return read_tool_calls(ph, src, msg, i);
}

int ck_py_history_init(ck_py_history *ph, ck_module_state *st) {
    memset(ph, 0, sizeof *ph);
    ph->st = st;
    for (int k = 0; k < K_COUNT; k++) ph->keys[k] = interned_key(st, (key)k);
    /* Every str is taken from a Python str through UTF-8 encoding, which never produces
     * invalid UTF-8 (a lone surrogate fails to encode instead), so the core need not check. */
    ph->h = ck_history_new(CK_HISTORY_TRUSTED_UTF8);
    if (!ph->h) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* Reads every message of the snapshot already in `ph`. */
static int read_all(ck_py_history *ph) {
    Py_ssize_t n = PyTuple_GET_SIZE(ph->snapshot);
    ph->src = PyMem_Calloc(n ? (size_t)n : 1, sizeof *ph->src);
    if (!ph->src) {
        PyErr_NoMemory();
        return -1;
    }
    ph->n = n;
    /* Room for the pins of a typical message (content, an id, a call and its strs); the
     * array grows past that as it must. */
    if (n <= PY_SSIZE_T_MAX / 8 && reserve(ph, 4 * n) < 0) return -1;
    /* Reading can run Python code (a key's __eq__, a value's JSON encoding) that calls
     * ctxkeel again; the guard turns unbounded re-entry into RecursionError rather than a
     * crash. One level per read is enough for that, and costs one call, not one per
     * message. */
    if (Py_EnterRecursiveCall(" while reading messages in ctxkeel")) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && rc == 0; i++)
        rc = read_message(ph, i, PyTuple_GET_ITEM(ph->snapshot, i));
    Py_LeaveRecursiveCall();
    return rc;
}

int ck_py_history_read_list(ck_py_history *ph, PyObject *messages) {
    if (!PyList_Check(messages)) {
        PyErr_Format(PyExc_TypeError, MSG_NOT_A_LIST, Py_TYPE(messages)->tp_name);
        return -1;
    }
    ph->snapshot = PyList_AsTuple(messages);
    if (!ph->snapshot) return -1;
    return read_all(ph);
}

int ck_py_history_read_message(ck_py_history *ph, PyObject *message) {
    ph->single = 1;
    ph->snapshot = PyTuple_Pack(1, message);
    if (!ph->snapshot) return -1;
    return read_all(ph);
}

void ck_py_history_dispose(ck_py_history *ph) {
    /* The history goes first: it borrows from the pinned objects, never the other way. */
    ck_history_free(ph->h);
    ph->h = NULL;
    PyMem_Free(ph->src);
    ph->src = NULL;
    ph->n = 0;
    Py_CLEAR(ph->snapshot);
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
