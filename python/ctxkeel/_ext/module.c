/*
 * module.c - the ctxkeel._ext module object: method table, docstrings, state and
 * multi-phase initialisation.
 *
 * The functions themselves live in history_ops.c, anchors.c, compactor.c (which also
 * defines the Compactor and Compaction types, with the host callbacks of host.c) and http.c
 * (HttpSummarizer, CancelToken);
 * module.c wires them up, owns the module state (exceptions, types, interned strings, the
 * JSON functions) and installs the core's allocator. Every function keeps the GIL for its
 * whole run, because each one reads Python objects while it works, except the HTTP transfer
 * of an HttpSummarizer, which runs on copies without it (see state.h and http.c).
 */
#include "state.h"

#include <string.h>

/* ---- docstrings (the first line is the text signature that inspect.signature reads) ----- */

PyDoc_STRVAR(estimate_tokens_doc,
             "estimate_tokens($module, /, x, *, estimator='default')\n"
             "--\n"
             "\n"
             "Estimates the tokens of x: a str, a message dict, a list of message dicts\n"
             "(with the per-message and per-request overhead) or a list of tool schemas\n"
             "(dicts without \"role\", counted as their compact JSON). An empty list is 0.\n"
             "estimator is 'o200k' or 'cl100k' (exact counts of that encoding, as tiktoken's),\n"
             "'default' (o200k, estimated only for one unbroken run over 64 KB), 'chars4'\n"
             "(UTF-8 bytes / 4, rounded up) or a function fn(text) -> int: a str is\n"
             "then fn(x), a message fn(its strings joined by newlines) plus the per-message\n"
             "overhead, a tool list fn(its compact JSON); what fn raises is raised, and a\n"
             "return that is not an int >= 0 raises TypeError or ValueError.\n"
             "Raises TypeError for any other x, InputError for a malformed message.");

PyDoc_STRVAR(check_pairs_doc,
             "check_pairs($module, /, messages, *, format='auto')\n"
             "--\n"
             "\n"
             "Returns every tool-call pairing violation in messages as a list of dicts\n"
             "{'kind', 'index', 'part', 'tool_call_id', 'message'}, in message order;\n"
             "[] when the list is valid. format is 'auto', 'openai' or 'anthropic'.\n"
             "Raises InputError for malformed messages or mixed formats.");

PyDoc_STRVAR(repair_pairs_doc,
             "repair_pairs($module, /, messages, *, format='auto')\n"
             "--\n"
             "\n"
             "Returns a new list in which every tool call has its result right after it:\n"
             "results without a call are dropped, a stub result is added for a call without\n"
             "one, and misplaced results are moved. Unchanged messages are the same objects;\n"
             "changed ones are shallow copies; the input is never modified. Repairing the\n"
             "result again changes nothing.");

PyDoc_STRVAR(parse_anchors_doc,
             "parse_anchors($module, /, text)\n"
             "--\n"
             "\n"
             "Parses a checkpoint reply (Markdown sections or JSON, fenced or bare) into\n"
             "(anchors, summary). anchors has the keys user_intent, execution_progress,\n"
             "key_decisions, tried_solutions and next_steps, in that order, each a str or\n"
             "None when N/A. text is a str or UTF-8 bytes. Never fails on odd text.");

PyDoc_STRVAR(merge_anchors_doc,
             "merge_anchors($module, /, old, new)\n"
             "--\n"
             "\n"
             "Merges two anchor dicts: a value of new that is not N/A replaces old's; N/A\n"
             "(a missing key, None, 'N/A', '- N/A', 'none'...) keeps old's. Returns the\n"
             "five-key dict.");

PyDoc_STRVAR(read_evidence_tool_doc,
             "read_evidence_tool($module, /, format='openai')\n"
             "--\n"
             "\n"
             "The definition of the read_evidence tool, for a request's tool list: OpenAI's\n"
             "function shape (format='openai') or Anthropic's tool shape ('anthropic'), as the\n"
             "core defines it: read by 'ref' ('offset' and 'limit' in lines from 0), or find a\n"
             "'pattern' in one piece of evidence or the whole session; no argument is required.\n"
             "A new dict on every call.");

PyDoc_STRVAR(raise_status_doc,
             "_raise_status($module, code, /)\n"
             "--\n"
             "\n"
             "Raises the exception ctxkeel raises for status code `code` (testing aid);\n"
             "returns None for CK_OK.");

PyDoc_STRVAR(replay_doc,
             "_replay($module, /, compactor, messages_json, summarize=None, title=None)\n"
             "--\n"
             "\n"
             "Runs the core's replay of a JSON message list through an _ext.Compactor and\n"
             "returns (rows, totals, svg); ctxkeel.replay() wraps it.");

PyDoc_STRVAR(cli_main_doc,
             "_cli_main($module, argv, /)\n"
             "--\n"
             "\n"
             "Runs the ctxkeel command (argv[0] is the program name) and returns its exit\n"
             "status; it writes to the process's stdout and stderr.");

PyDoc_STRVAR(module_doc,
             "The C core of ctxkeel. Import the public names from the ctxkeel package.");

static PyMethodDef ck_methods[] = {
    {
        .ml_name = "estimate_tokens",
        .ml_meth = (PyCFunction)(void (*)(void))ck_py_estimate_tokens,
        .ml_flags = METH_VARARGS | METH_KEYWORDS,
        .ml_doc = estimate_tokens_doc,
    },
    {
        .ml_name = "check_pairs",
        .ml_meth = (PyCFunction)(void (*)(void))ck_py_check_pairs,
        .ml_flags = METH_VARARGS | METH_KEYWORDS,
        .ml_doc = check_pairs_doc,
    },
    {
        .ml_name = "repair_pairs",
        .ml_meth = (PyCFunction)(void (*)(void))ck_py_repair_pairs,
        .ml_flags = METH_VARARGS | METH_KEYWORDS,
        .ml_doc = repair_pairs_doc,
    },
    {
        .ml_name = "parse_anchors",
        .ml_meth = (PyCFunction)(void (*)(void))ck_py_parse_anchors,
        .ml_flags = METH_VARARGS | METH_KEYWORDS,
        .ml_doc = parse_anchors_doc,
    },
    {
        .ml_name = "merge_anchors",
        .ml_meth = (PyCFunction)(void (*)(void))ck_py_merge_anchors,
        .ml_flags = METH_VARARGS | METH_KEYWORDS,
        .ml_doc = merge_anchors_doc,
    },
    {
        .ml_name = "read_evidence_tool",
        .ml_meth = (PyCFunction)(void (*)(void))ck_py_read_evidence_tool,
        .ml_flags = METH_VARARGS | METH_KEYWORDS,
        .ml_doc = read_evidence_tool_doc,
    },
    {
        .ml_name = "_raise_status",
        .ml_meth = ck_py_raise_status,
        .ml_flags = METH_O,
        .ml_doc = raise_status_doc,
    },
    {
        .ml_name = "_replay",
        .ml_meth = (PyCFunction)(void (*)(void))ck_py_replay,
        .ml_flags = METH_VARARGS | METH_KEYWORDS,
        .ml_doc = replay_doc,
    },
    {
        .ml_name = "_cli_main",
        .ml_meth = ck_py_cli_main,
        .ml_flags = METH_O,
        .ml_doc = cli_main_doc,
    },
    {NULL, NULL, 0, NULL},
};

/* ---- state ------------------------------------------------------------------------------- */

/* Visits (or clears, with `clear`) every object the state holds, so traverse and clear list
 * the fields once. */
#define CK_PY_STATE_FIELDS(X, st)                                                                  \
    X((st)->Error);                                                                                \
    X((st)->InputError);                                                                           \
    X((st)->ContextOverflowError);                                                                 \
    X((st)->json_encode);                                                                          \
    X((st)->json_loads);                                                                           \
    X((st)->CompactorType);                                                                        \
    X((st)->CompactionType);                                                                       \
    X((st)->HttpSummarizerType);                                                                   \
    X((st)->CancelTokenType);                                                                      \
    X((st)->s_kind);                                                                               \
    X((st)->s_index);                                                                              \
    X((st)->s_part);                                                                               \
    X((st)->s_message)

static int ck_traverse(PyObject *module, visitproc visit, void *arg) {
    ck_module_state *st = ck_py_state(module);
    if (!st) return 0;
    CK_PY_STATE_FIELDS(Py_VISIT, st);
    for (int k = 0; k < CK_KEY_COUNT; k++)
        Py_VISIT(st->keys[k]);
    for (int k = 0; k <= CK_TIER_EMERGENCY; k++)
        Py_VISIT(st->tier_names[k]);
    for (int k = 0; k <= CK_PAIR_RESULT_ORDER; k++)
        Py_VISIT(st->issue_names[k]);
    for (int k = 0; k < CK_ANCHOR_COUNT; k++)
        Py_VISIT(st->anchor_keys[k]);
    return 0;
}

static int ck_clear(PyObject *module) {
    ck_module_state *st = ck_py_state(module);
    if (!st) return 0;
    CK_PY_STATE_FIELDS(Py_CLEAR, st);
    for (int k = 0; k < CK_KEY_COUNT; k++)
        Py_CLEAR(st->keys[k]);
    for (int k = 0; k <= CK_TIER_EMERGENCY; k++)
        Py_CLEAR(st->tier_names[k]);
    for (int k = 0; k <= CK_PAIR_RESULT_ORDER; k++)
        Py_CLEAR(st->issue_names[k]);
    for (int k = 0; k < CK_ANCHOR_COUNT; k++)
        Py_CLEAR(st->anchor_keys[k]);
    return 0;
}

static void ck_free_module(void *module) { ck_clear((PyObject *)module); }

/* Interns `text` into `*slot`. Returns 0, or -1 with an exception set. */
static int intern(PyObject **slot, const char *text) {
    *slot = PyUnicode_InternFromString(text);
    return *slot ? 0 : -1;
}

static int init_strings(ck_module_state *st) {
    if (intern(&st->s_kind, "kind") < 0 || intern(&st->s_index, "index") < 0 ||
        intern(&st->s_part, "part") < 0 || intern(&st->s_message, "message") < 0)
        return -1;
    for (int k = 0; k < CK_KEY_COUNT; k++)
        if (intern(&st->keys[k], ck_key_name((ck_key)k)) < 0) return -1;
    for (int k = 0; k <= CK_TIER_EMERGENCY; k++)
        if (intern(&st->tier_names[k], ck_tier_name((ck_tier)k)) < 0) return -1;
    for (int k = 0; k <= CK_PAIR_RESULT_ORDER; k++)
        if (intern(&st->issue_names[k], ck_pair_issue_name((ck_pair_issue)k)) < 0) return -1;
    for (int k = 0; k < CK_ANCHOR_COUNT; k++)
        if (intern(&st->anchor_keys[k], ck_anchor_key((ck_anchor)k)) < 0) return -1;
    return 0;
}

/* json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode: one encoder for the
 * module's life instead of the one json.dumps builds per call for non-default arguments. */
static PyObject *make_json_encode(void) {
    PyObject *json = NULL, *encoder_cls = NULL, *kwargs = NULL, *empty = NULL, *encoder = NULL;
    PyObject *encode = NULL;
    json = PyImport_ImportModule("json");
    if (!json) goto done;
    encoder_cls = PyObject_GetAttrString(json, "JSONEncoder");
    if (!encoder_cls) goto done;
    kwargs = Py_BuildValue("{s:(ss),s:O}", "separators", ",", ":", "ensure_ascii", Py_False);
    empty = PyTuple_New(0);
    if (!kwargs || !empty) goto done;
    encoder = PyObject_Call(encoder_cls, empty, kwargs);
    if (!encoder) goto done;
    encode = PyObject_GetAttrString(encoder, "encode");

done:
    Py_XDECREF(json);
    Py_XDECREF(encoder_cls);
    Py_XDECREF(kwargs);
    Py_XDECREF(empty);
    Py_XDECREF(encoder);
    return encode;
}

/* json.loads. */
static PyObject *make_json_loads(void) {
    PyObject *json = PyImport_ImportModule("json");
    if (!json) return NULL;
    PyObject *loads = PyObject_GetAttrString(json, "loads");
    Py_DECREF(json);
    return loads;
}

/* ---- initialisation ---------------------------------------------------------------------- */

static int ck_exec(PyObject *module) {
    ck_module_state *st = ck_py_state(module);
    PyObject *version = NULL;

    /* Core memory goes through the raw allocator: visible to tracemalloc, and safe to call
     * without the GIL, as the HTTP summarizer's transfer does (http.c). The hook is
     * process-wide and may only change while no core object exists. A second module object
     * (a re-import, another subinterpreter) installs the very same four functions again,
     * which changes nothing for the compactors that the first one made. */
    ck_set_allocator(PyMem_RawMalloc, PyMem_RawCalloc, PyMem_RawRealloc, PyMem_RawFree);

    if (init_strings(st) < 0) goto error;
    st->json_encode = make_json_encode();
    if (!st->json_encode) goto error;
    st->json_loads = make_json_loads();
    if (!st->json_loads) goto error;
    if (ck_py_errors_init(module, st) < 0) goto error;
    if (ck_py_compactor_init(module, st) < 0) goto error;
    if (ck_py_http_init(module, st) < 0) goto error;
    version = PyUnicode_FromString(ck_version());
    if (!version || PyModule_AddObject(module, "__version__", version) < 0) goto error;
    return 0;

error:
    /* PyModule_AddObject steals only on success; the state is released by m_clear when the
     * half-made module is dropped. */
    Py_XDECREF(version);
    return -1;
}

static PyModuleDef_Slot ck_slots[] = {
    {Py_mod_exec, (void *)ck_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* Subinterpreters that share the main GIL are fine: all state is per module. A GIL per
     * interpreter is not claimed, because ck_set_allocator() writes a process-wide hook. */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    /* The functions rely on the GIL to keep the objects they read from changing under them. */
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef ck_module = {
    PyModuleDef_HEAD_INIT,     .m_name = "ctxkeel._ext",
    .m_doc = module_doc,       .m_size = sizeof(ck_module_state),
    .m_methods = ck_methods,   .m_slots = ck_slots,
    .m_traverse = ck_traverse, .m_clear = ck_clear,
    .m_free = ck_free_module,
};

PyMODINIT_FUNC PyInit__ext(void) { return PyModuleDef_Init(&ck_module); }
