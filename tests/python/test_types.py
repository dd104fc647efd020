"""ctxkeel.types at run time: every type name the stubs use is importable, the TypedDicts say
which keys a real record always has, and compact() takes a tuple where it takes a list."""

import ast
import os
import typing

import pytest

import ctxkeel
import ctxkeel.types


def test_every_stub_type_name_is_importable_at_run_time():
    # The stubs re-export ctxkeel.types whole (stubtest checks that each name they export
    # exists at run time); every name is the same object from ctxkeel.
    here = os.path.dirname(ctxkeel.__file__)
    with open(os.path.join(here, "__init__.pyi"), encoding="utf-8") as f:
        stub = ast.parse(f.read())
    assert any(isinstance(node, ast.ImportFrom) and node.module == "types" and
               [alias.name for alias in node.names] == ["*"] for node in stub.body)
    assert {"SummaryRequest", "CompactionRecord", "Tier", "M"} <= set(ctxkeel.types.__all__)
    for name in ctxkeel.types.__all__:
        assert getattr(ctxkeel, name) is getattr(ctxkeel.types, name), name
    from ctxkeel import SummaryRequest  # noqa: F401  (the ImportError of issue 15)


def _compacted(tmp_path):
    compactor = ctxkeel.Compactor(2000, store_dir=str(tmp_path), keep_tail=2)
    big = "line of output\n" * 400
    history = [{"role": "user", "content": "fix the build"}]
    for i in range(6):
        call = {"id": "c%d" % i, "type": "function",
                "function": {"name": "bash", "arguments": "{}"}}
        history += [{"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "c%d" % i, "content": big}]
    return compactor, history


def test_the_required_keys_are_those_every_record_has(tmp_path):
    compactor, history = _compacted(tmp_path)
    record = compactor.compact(history).record
    assert record is not None
    required = ctxkeel.types.CompactionRecord.__required_keys__
    optional = ctxkeel.types.CompactionRecord.__optional_keys__
    assert required <= set(record), required - set(record)
    assert set(record) <= required | optional, set(record) - required - optional
    assert optional == {"archived", "mac"}
    for offloaded in record["offloaded"]:
        assert ctxkeel.types.Offloaded.__required_keys__ <= set(offloaded)


def test_compact_takes_a_tuple_as_a_list(tmp_path):
    compactor, history = _compacted(tmp_path)
    tools = (ctxkeel.read_evidence_tool(),)
    by_tuple = compactor.compact(tuple(history), tools=tools)
    compactor.reset()
    by_list = compactor.compact(history, tools=list(tools))
    assert by_tuple.messages == by_list.messages
    assert by_tuple.tier == by_list.tier != "none"
    assert by_tuple.messages[0] is history[0]


def test_text_is_not_read_as_a_sequence_of_messages(tmp_path):
    compactor = ctxkeel.Compactor(2000, store_dir=str(tmp_path))
    with pytest.raises(TypeError, match="must be a list or a tuple, not str"):
        compactor.compact("hello")
    with pytest.raises(TypeError, match="tools must be a list or None, not str"):
        compactor.compact([], tools="read_evidence")


def test_compaction_result_is_generic():
    assert typing.get_origin(ctxkeel.CompactionResult[ctxkeel.types.Message]) is \
        ctxkeel.CompactionResult
