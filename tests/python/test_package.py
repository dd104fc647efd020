"""The installed package: where it comes from, what it exports, what it ships."""

import inspect
import os

import pytest

import ctxkeel
from ctxkeel import _ext

PUBLIC = ["STATUS_CODES", "CompactionResult", "Compactor", "ContextOverflowError", "Error",
          "HttpSummarizer", "InputError", "Replay", "__version__", "check_pairs",
          "estimate_tokens", "merge_anchors", "parse_anchors", "read_evidence_tool",
          "repair_pairs", "replay"]
# Written in Python on top of _ext (module by name); the rest comes from _ext itself.
PURE_PYTHON = {"CompactionResult": "ctxkeel._compactor", "Compactor": "ctxkeel._compactor",
               "Replay": "ctxkeel._replay", "replay": "ctxkeel._replay",
               # the core's, taking SDK message objects too
               "check_pairs": "ctxkeel._sdk", "estimate_tokens": "ctxkeel._sdk",
               "repair_pairs": "ctxkeel._sdk"}


def test_imports_the_installed_package(repo_root):
    # python/ctxkeel in the tree has no compiled _ext; the tests must run against the build.
    source_tree = os.path.join(repo_root, "python")
    assert not os.path.abspath(ctxkeel.__file__).startswith(source_tree + os.sep)
    assert os.path.dirname(_ext.__file__) == os.path.dirname(ctxkeel.__file__)


def test_version():
    assert ctxkeel.__version__ == _ext.__version__ == "0.1.0"


def test_public_names():
    assert sorted(ctxkeel.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        if name in PURE_PYTHON:
            assert getattr(ctxkeel, name).__module__ == PURE_PYTHON[name]
        else:
            assert getattr(ctxkeel, name) is getattr(_ext, name)


def test_typing_files_ship_with_the_package():
    here = os.path.dirname(ctxkeel.__file__)
    assert os.path.isfile(os.path.join(here, "py.typed"))
    with open(os.path.join(here, "__init__.pyi"), encoding="utf-8") as f:
        stub = f.read()
    for name in PUBLIC:
        assert name in stub


def test_c_sources_do_not_ship_inside_the_package():
    here = os.path.dirname(ctxkeel.__file__)
    assert not os.path.exists(os.path.join(here, "_ext", "module.c"))


# inspect's parser of text signatures (ast.NodeVisitor) keeps a few strings per call in
# CPython itself, which --leak-loops would report against this test.
@pytest.mark.no_leak_check
def test_text_signatures():
    def sig(func):
        return str(inspect.signature(func))

    assert sig(ctxkeel.estimate_tokens) == "(x, *, estimator='default')"
    assert sig(ctxkeel.check_pairs) == "(messages, *, format='auto')"
    assert sig(ctxkeel.repair_pairs) == "(messages, *, format='auto')"
    assert sig(ctxkeel.parse_anchors) == "(text)"
    assert sig(ctxkeel.merge_anchors) == "(old, new)"
    assert sig(ctxkeel.read_evidence_tool) == "(format='openai')"
    assert sig(_ext.Compactor.begin) == (
        "(self, messages, tool_tokens=0, /, *, extractive=False, session=False)")
    assert sig(_ext.Compactor.read) == "(self, messages, from_, /)"
    assert sig(_ext.Compactor.read_evidence) == "(self, /, ref, *, offset=0, limit=200)"
    for func in (ctxkeel.estimate_tokens, ctxkeel.check_pairs, ctxkeel.repair_pairs,
                 ctxkeel.parse_anchors, ctxkeel.merge_anchors, ctxkeel.read_evidence_tool,
                 _ext.Compactor.begin, _ext.Compactor.offload, _ext.Compaction.finish):
        assert len(func.__doc__.splitlines()[0]) > 20


def test_keyword_arguments():
    assert ctxkeel.check_pairs(messages=[], format="openai") == []
    assert ctxkeel.repair_pairs(messages=[], format="anthropic") == []
    assert ctxkeel.parse_anchors(text="")[1] == ""
    assert ctxkeel.merge_anchors(old=None, new=None)["user_intent"] is None


# CPython keeps a little memory for every extension module object it creates (stdlib modules
# such as array do the same), which --leak-loops would report against this test.
@pytest.mark.no_leak_check
def test_second_module_instance_has_its_own_state():
    # Multi-phase init: a second module object gets its own exceptions and strings, and both
    # keep working (nothing lives in C globals but the allocator hook).
    import importlib.util

    spec = importlib.util.find_spec("ctxkeel._ext")
    other = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(other)
    assert other is not _ext
    assert other.Error is not _ext.Error and other.InputError is not _ext.InputError
    try:
        other.check_pairs([{"content": "x"}])
    except other.InputError as err:
        assert not isinstance(err, _ext.Error)
        assert err.where == "messages[0].role"
    else:
        raise AssertionError("no error raised")
    messages = [{"role": "user", "content": "x"}]
    assert other.repair_pairs(messages)[0] is messages[0]
    assert _ext.repair_pairs(messages)[0] is messages[0]
    del other


def test_threads_share_nothing():
    import threading

    calls = [{"id": "c%d" % n, "type": "function", "function": {"name": "f", "arguments": "{}"}}
             for n in range(20)]
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": calls}]
    expected = ctxkeel.repair_pairs(messages)
    failures = []

    def work():
        for _ in range(200):
            out = ctxkeel.repair_pairs(messages)
            if out != expected or ctxkeel.check_pairs(out):
                failures.append(out)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
