"""Greps the binding's C sources for pairs that must balance in every file.

Each opening call needs its closing call in the same file: Py_BEGIN_ALLOW_THREADS and
Py_END_ALLOW_THREADS, Py_EnterRecursiveCall and Py_LeaveRecursiveCall, PyObject_GetBuffer and
PyBuffer_Release. Counting is crude on purpose (like msgspec's test_cpylint.py): a mismatch
means a path that forgets to close, which review then finds.
"""

import glob
import os
import re

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXT_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "python", "ctxkeel", "_ext")

PAIRS = [
    ("Py_BEGIN_ALLOW_THREADS", "Py_END_ALLOW_THREADS"),
    ("Py_EnterRecursiveCall", "Py_LeaveRecursiveCall"),
    ("PyObject_GetBuffer", "PyBuffer_Release"),
]


def sources():
    return sorted(glob.glob(os.path.join(EXT_DIR, "*.c")))


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def count(text, name):
    return len(re.findall(r"\b%s\b" % re.escape(name), text))


def test_sources_present():
    names = {os.path.basename(p) for p in sources()}
    if not names:
        pytest.skip("binding sources not found at %s" % EXT_DIR)
    assert "module.c" in names


@pytest.mark.parametrize("opening,closing", PAIRS)
def test_pairs_balance(opening, closing):
    files = sources()
    if not files:
        pytest.skip("binding sources not found at %s" % EXT_DIR)
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        opened, closed = count(text, opening), count(text, closing)
        assert opened == closed, "%s: %d x %s but %d x %s" % (
            os.path.basename(path), opened, opening, closed, closing)


# The stretches without the GIL (STYLE rule 26), by file, in file order: the HTTP transfer,
# an evidence search, and a compactor's begin and finish when no host code can run in them
# (compactor.c no_host_code()), each one core call and nothing else (no Python API call, no
# other core call).
RELEASED = {
    "http.c": ["ck_http_summarize"],
    "compactor.c": ["ck_compactor_finish", "ck_compactor_compact", "ck_compactor_begin",
                    "ck_compactor_search_evidence"],
    # replay.c makes the same transfer through the core's ck_summarize_fn for it.
    "replay.c": ["ck_http_summarize_fn"],
}


def test_only_the_listed_core_calls_release_the_gil():
    files = sources()
    if not files:
        pytest.skip("binding sources not found at %s" % EXT_DIR)
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = strip_comments(f.read())
        released = re.findall(r"\bPy_BEGIN_ALLOW_THREADS\b(.*?)\bPy_END_ALLOW_THREADS\b", text,
                              flags=re.S)
        calls = RELEASED.get(os.path.basename(path))
        if calls is None:
            assert released == [], os.path.basename(path)
            continue
        assert len(released) == len(calls)
        for body, call in zip(released, calls):
            assert re.findall(r"\b(ck_\w+)\s*\(", body) == [call]
            assert not re.search(r"\bPy[A-Z_]\w*", body), body


def test_recursion_guard_is_used_where_messages_are_read():
    path = os.path.join(EXT_DIR, "values.c")
    if not os.path.exists(path):
        pytest.skip("binding sources not found")
    with open(path, encoding="utf-8") as f:
        assert count(strip_comments(f.read()), "Py_EnterRecursiveCall") >= 1


def test_lint_catches_an_unbalanced_file(tmp_path):
    # The counting itself: a file with a missing release is caught, a comment is ignored.
    text = strip_comments(
        "/* Py_BEGIN_ALLOW_THREADS in a comment */\n"
        "if (PyObject_GetBuffer(o, &v, PyBUF_SIMPLE) < 0) return NULL;\n"
    )
    assert count(text, "PyObject_GetBuffer") == 1 and count(text, "PyBuffer_Release") == 0
    assert count(text, "Py_BEGIN_ALLOW_THREADS") == 0
