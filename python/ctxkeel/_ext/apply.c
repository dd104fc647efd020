/*
 * apply.c - turns a ck_view back into a list of message dicts, following docs/mapping.md.
 *
 * A view says, per output message, KEEP (the source object itself), EDIT (a shallow copy of
 * the source whose content and tool_calls are rebuilt from parts) or NEW. Source items are
 * reused wherever a part is unchanged, so unknown fields and object identity survive, and
 * the input is never mutated: only copies are changed.
 */
#include "state.h"

#include <string.h>

static const char MSG_BAD_VIEW[] = "ctxkeel: the view refers to a part the history lacks";

PyObject *ck_py_str(const char *text, size_t len) {
    if (len > (size_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
    return PyUnicode_DecodeUTF8(text ? text : "", (Py_ssize_t)len, "strict");
}

PyObject *ck_py_text(const char *text, size_t len) {
    if (len > (size_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
    return PyUnicode_DecodeUTF8(text ? text : "", (Py_ssize_t)len, "replace");
}

/* True for a part that lives in the tool_calls list of its source rather than in content. */
static int is_listed_call(const ck_out_part *op) {
    return op->part.kind == CK_PART_TOOL_CALL && (op->part.host & CK_PY_HOST_CALL) &&
           op->src_msg != CK_NONE;
}

/* Sets dict[key] = value, releasing `value` (a new reference, NULL allowed for failure). */
static int set_new(PyObject *dict, PyObject *key, PyObject *value) {
    if (!value) return -1;
    int rc = PyDict_SetItem(dict, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *bad_view(void) {
    PyErr_SetString(PyExc_SystemError, MSG_BAD_VIEW);
    return NULL;
}

/* The source item behind part `op` (content list item `host` of its source message), or NULL
 * without an exception when the part has no item (it came from a string content). */
static PyObject *source_item(const ck_py_history *ph, const ck_out_part *op) {
    if (op->src_msg >= (size_t)ph->n || op->part.host == CK_PY_HOST_WHOLE) return NULL;
    return ck_py_item(ph, ph->src[op->src_msg].content, op->part.host);
}

/* A new block for a part that has no source item: a tool_result block or a text block. */
static PyObject *new_block(const ck_module_state *st, const ck_part *p, PyObject *text) {
    PyObject *block = PyDict_New();
    if (!block) return NULL;
    if (text)
        Py_INCREF(text);
    else if (!(text = ck_py_str(p->text, p->text_len)))
        goto error;
    if (p->kind == CK_PART_TOOL_RESULT) {
        if (PyDict_SetItem(block, st->s_type, st->s_tool_result) < 0 ||
            set_new(block, st->s_tool_use_id, ck_py_str(p->id, p->id_len)) < 0 ||
            PyDict_SetItem(block, st->s_content, text) < 0)
            goto error;
        if ((p->flags & CK_PART_IS_ERROR) && PyDict_SetItem(block, st->s_is_error, Py_True) < 0)
            goto error;
    } else {
        if (PyDict_SetItem(block, st->s_type, st->s_text) < 0 ||
            PyDict_SetItem(block, st->s_text, text) < 0)
            goto error;
    }
    Py_DECREF(text);
    return block;

error:
    Py_XDECREF(text);
    Py_DECREF(block);
    return NULL;
}

/* The whole string content of source message `src_msg`, when it had one (borrowed). */
static PyObject *source_string(const ck_py_history *ph, size_t src_msg) {
    if (src_msg >= (size_t)ph->n) return NULL;
    return ph->src[src_msg].text;
}

/* The block for output part `op` inside a content list. */
static PyObject *content_block(const ck_py_history *ph, const ck_out_part *op) {
    const ck_module_state *st = ph->st;
    if (op->src_msg == CK_NONE) return new_block(st, &op->part, NULL);
    PyObject *item = source_item(ph, op);
    if (!op->replaced) {
        if (item) {
            Py_INCREF(item);
            return item;
        }
        /* A whole string content inside a list becomes a text block around that str. */
        return new_block(st, &op->part, source_string(ph, op->src_msg));
    }
    if (!item || !PyDict_Check(item)) return new_block(st, &op->part, NULL);
    /* A replaced part: the source block with only its text swapped, every other key kept. */
    PyObject *copy = PyDict_Copy(item);
    if (!copy) return NULL;
    PyObject *key = op->part.kind == CK_PART_TOOL_RESULT ? st->s_content : st->s_text;
    if (set_new(copy, key, ck_py_str(op->part.text, op->part.text_len)) < 0) {
        Py_DECREF(copy);
        return NULL;
    }
    return copy;
}

/* A str for part `op`: the source str itself when the part is that unchanged whole content. */
static PyObject *part_string(const ck_py_history *ph, const ck_out_part *op) {
    if (op->src_msg != CK_NONE && !op->replaced && op->part.host == CK_PY_HOST_WHOLE) {
        PyObject *s = source_string(ph, op->src_msg);
        if (s) {
            Py_INCREF(s);
            return s;
        }
    }
    return ck_py_str(op->part.text, op->part.text_len);
}

/* Texts of the TEXT parts joined with "\n" (how a new OpenAI message carries its content). */
static PyObject *joined_text(const ck_out_msg *m) {
    size_t total = 0, count = 0;
    for (size_t k = 0; k < m->n_parts; k++) {
        if (m->parts[k].part.kind != CK_PART_TEXT) continue;
        total += m->parts[k].part.text_len;
        count++;
    }
    if (count) total += count - 1;
    char *buf = PyMem_Malloc(total ? total : 1);
    if (!buf) return PyErr_NoMemory();
    size_t at = 0, seen = 0;
    for (size_t k = 0; k < m->n_parts; k++) {
        const ck_part *p = &m->parts[k].part;
        if (p->kind != CK_PART_TEXT) continue;
        if (seen++) buf[at++] = '\n';
        if (p->text_len) memcpy(buf + at, p->text, p->text_len);
        at += p->text_len;
    }
    PyObject *text = ck_py_str(buf, at);
    PyMem_Free(buf);
    return text;
}

/*
 * The content of an output message, or NULL with *absent set when it has none to give (an
 * OpenAI message left without content parts gets null, as an assistant message with only
 * tool calls has). Returns a new reference, or NULL with an exception set.
 */
static PyObject *build_content(const ck_py_history *ph, const ck_out_msg *m, ck_format format,
                               int *absent) {
    size_t n_content = 0;
    const ck_out_part *only = NULL;
    *absent = 0;
    for (size_t k = 0; k < m->n_parts; k++) {
        if (is_listed_call(&m->parts[k])) continue;
        n_content++;
        only = &m->parts[k];
    }
    int openai_tool = m->role == CK_ROLE_TOOL && format == CK_FORMAT_OPENAI;
    int same_string = m->op == CK_OP_EDIT && (m->flags & CK_MSG_STRING_CONTENT) && n_content == 1 &&
                      only->src_msg == m->src && only->part.host == CK_PY_HOST_WHOLE;
    if (n_content == 1 && (openai_tool || same_string)) return part_string(ph, only);
    if (n_content == 0 && format == CK_FORMAT_OPENAI) {
        *absent = 1;
        return NULL;
    }
    PyObject *list = PyList_New((Py_ssize_t)n_content);
    if (!list) return NULL;
    Py_ssize_t at = 0;
    for (size_t k = 0; k < m->n_parts; k++) {
        if (is_listed_call(&m->parts[k])) continue;
        PyObject *block = content_block(ph, &m->parts[k]);
        if (!block) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, at++, block);
    }
    return list;
}

/* The tool_calls of an edited message: the source items of its listed calls, in view order. */
static PyObject *build_tool_calls(const ck_py_history *ph, const ck_out_msg *m) {
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (size_t k = 0; k < m->n_parts; k++) {
        const ck_out_part *op = &m->parts[k];
        if (!is_listed_call(op)) continue;
        PyObject *call =
            op->src_msg < (size_t)ph->n
                ? ck_py_item(ph, ph->src[op->src_msg].calls, op->part.host & (CK_PY_HOST_CALL - 1))
                : NULL;
        if (!call) {
            Py_DECREF(list);
            return bad_view();
        }
        if (PyList_Append(list, call) < 0) {
            Py_DECREF(list);
            return NULL;
        }
    }
    return list;
}

/* EDIT: a shallow copy of the source message with content and tool_calls rebuilt. */
static PyObject *edit_message(const ck_py_history *ph, const ck_out_msg *m, ck_format format) {
    const ck_module_state *st = ph->st;
    if (m->src >= (size_t)ph->n) return bad_view();
    PyObject *source = ph->src[m->src].msg;
    PyObject *content = NULL, *calls = NULL;
    PyObject *copy = PyDict_Copy(source);
    if (!copy) return NULL;
    int absent;
    content = build_content(ph, m, format, &absent);
    if (!content && !absent) goto error;
    if (content) {
        if (PyDict_SetItem(copy, st->s_content, content) < 0) goto error;
    } else {
        /* No content parts left: null where the source had a content key, nothing where it
         * had none, so the copy does not grow a key the source never had. */
        int has = PyDict_Contains(copy, st->s_content);
        if (has < 0 || (has && PyDict_SetItem(copy, st->s_content, Py_None) < 0)) goto error;
    }
    calls = build_tool_calls(ph, m);
    if (!calls) goto error;
    if (PyList_GET_SIZE(calls)) {
        if (PyDict_SetItem(copy, st->s_tool_calls, calls) < 0) goto error;
    } else {
        int has = PyDict_Contains(copy, st->s_tool_calls);
        if (has < 0 || (has && PyDict_DelItem(copy, st->s_tool_calls) < 0)) goto error;
    }
    Py_XDECREF(content);
    Py_DECREF(calls);
    return copy;

error:
    Py_XDECREF(content);
    Py_XDECREF(calls);
    Py_DECREF(copy);
    return NULL;
}

/* NEW: a message made only of parts, shaped for the format. */
static PyObject *new_message(const ck_py_history *ph, const ck_out_msg *m, ck_format format) {
    const ck_module_state *st = ph->st;
    /* A role the core cannot name (CK_ROLE_OTHER) is never created by it; "user" is the safe
     * reading should that change. */
    PyObject *role =
        m->role < CK_ROLE_OTHER ? st->role_names[m->role] : st->role_names[CK_ROLE_USER];
    PyObject *msg = PyDict_New();
    if (!msg || PyDict_SetItem(msg, st->s_role, role) < 0) goto error;
    if (format == CK_FORMAT_OPENAI) {
        if (m->role == CK_ROLE_TOOL && m->n_parts && m->parts[0].part.kind == CK_PART_TOOL_RESULT) {
            const ck_part *p = &m->parts[0].part;
            if (set_new(msg, st->s_tool_call_id, ck_py_str(p->id, p->id_len)) < 0 ||
                set_new(msg, st->s_content, ck_py_str(p->text, p->text_len)) < 0)
                goto error;
        } else if (set_new(msg, st->s_content, joined_text(m)) < 0) {
            goto error;
        }
        return msg;
    }
    PyObject *blocks = PyList_New((Py_ssize_t)m->n_parts);
    if (!blocks) goto error;
    for (size_t k = 0; k < m->n_parts; k++) {
        PyObject *block = new_block(st, &m->parts[k].part, NULL);
        if (!block) {
            Py_DECREF(blocks);
            goto error;
        }
        PyList_SET_ITEM(blocks, (Py_ssize_t)k, block);
    }
    if (set_new(msg, st->s_content, blocks) < 0) goto error;
    return msg;

error:
    Py_XDECREF(msg);
    return NULL;
}

PyObject *ck_py_view_apply(const ck_py_history *ph, const ck_view *view, ck_format format) {
    const ck_module_state *st = ph->st;
    size_t n = ck_view_count(view);
    /* Nothing changed (the usual case below the warn threshold): the messages themselves, in
     * a list of their own. (A view of the first messages only is an identity too.) */
    if (n == (size_t)ph->n && ck_view_is_identity(view)) return PySequence_List(ph->snapshot);
    if (n > (size_t)PY_SSIZE_T_MAX) return PyErr_NoMemory();
    PyObject *out = PyList_New((Py_ssize_t)n);
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        ck_out_msg m;
        PyObject *item;
        if (ck_view_get(view, i, &m) != CK_OK) {
            bad_view();
            goto error;
        }
        if (m.op == CK_OP_KEEP) {
            if (m.src >= (size_t)ph->n) {
                bad_view();
                goto error;
            }
            item = ph->src[m.src].msg;
            Py_INCREF(item);
        } else {
            /* "auto" is resolved on the first message that is made, not kept: a view that
             * keeps every message needs no format, and finding it reads the whole history. */
            ck_error err;
            int rc = format == CK_FORMAT_AUTO ? ck_history_format(ph->h, format, &format, &err)
                                              : CK_OK;
            if (rc != CK_OK) {
                ck_py_raise_core(st, rc, &err);
                goto error;
            }
            item = m.op == CK_OP_EDIT ? edit_message(ph, &m, format) : new_message(ph, &m, format);
        }
        if (!item) goto error;
        PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    return out;

error:
    Py_DECREF(out);
    return NULL;
}
