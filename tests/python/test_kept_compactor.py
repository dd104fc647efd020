"""compact() on a Compactor kept across calls, as an agent keeps it, when nothing needs
compacting.

Such a compactor has the messages' token counts cached by content, and the reader takes key
objects and strs from the caller's dicts without copying them. These tests hold it to what a
fresh read gives: the same objects back, every change the caller made in place seen on the
next call, and bad input named as before, whatever made the dicts (dict displays, json.loads,
str subclasses as keys).
"""

import copy
import json

import pytest

import ctxkeel
from compaction_support import fresh_dir, synthetic_history


def kept(messages, tmp_path):
    """A compactor with a window far above `messages`, and its first call already made."""
    c = ctxkeel.Compactor(ctxkeel.estimate_tokens(messages) * 10 + 1000,
                          store_dir=fresh_dir(tmp_path))
    assert c.compact(messages).tier == "none"
    return c


def fresh_tokens(messages, tmp_path):
    """tokens_before of a new compactor on a copy of `messages`: nothing cached."""
    c = ctxkeel.Compactor(ctxkeel.estimate_tokens(messages) * 10 + 1000,
                          store_dir=fresh_dir(tmp_path))
    return c.compact(copy.deepcopy(messages)).tokens_before


@pytest.mark.parametrize("summarize", [None, lambda request: "unused"])
def test_unchanged_messages_come_back_as_the_same_objects(summarize, tmp_path):
    messages = synthetic_history(turns=8)
    before = copy.deepcopy(messages)
    c = kept(messages, tmp_path)
    for _ in range(3):
        result = c.compact(messages, summarize=summarize)
        assert result.tier == "none" and result.record is None
        # A new list (the caller's may change under it), holding the caller's objects.
        assert result.messages is not messages and isinstance(result.messages, list)
        assert len(result.messages) == len(messages)
        assert all(a is b for a, b in zip(result.messages, messages))
        assert messages == before


def test_a_json_loaded_history_reads_as_its_dict_displays(tmp_path):
    # json.loads gives every dict of a document the same key objects, not the interned ones.
    messages = synthetic_history(turns=8)
    loaded = json.loads(json.dumps(messages))
    assert ctxkeel.estimate_tokens(loaded) == ctxkeel.estimate_tokens(messages)
    c = kept(loaded, tmp_path)
    result = c.compact(loaded)
    assert result.tokens_before == fresh_tokens(messages, tmp_path)
    assert all(a is b for a, b in zip(result.messages, loaded))
    # Loaded and literal messages mixed, in both orders.
    for mixed in (loaded[:5] + messages[5:], messages[:5] + loaded[5:]):
        assert c.compact(mixed).tokens_before == result.tokens_before


@pytest.mark.parametrize("where", ["content", "tool_call_id", "arguments", "role"])
def test_changes_made_in_place_between_calls_are_seen(where, tmp_path):
    messages = json.loads(json.dumps(synthetic_history(turns=6)))
    c = kept(messages, tmp_path)
    first = c.compact(messages).tokens_before
    tool = next(m for m in messages if m["role"] == "tool")
    assistant = next(m for m in messages if m.get("tool_calls"))
    if where == "content":
        tool["content"] = tool["content"] + " and then some more words" * 50
    elif where == "tool_call_id":
        # Renamed in place on both sides of the pair; the pair stays valid.
        new_id = "renamed_" + "x" * 40
        call = next(t for t in assistant["tool_calls"])
        for m in messages:
            if m.get("tool_call_id") == call["id"]:
                m["tool_call_id"] = new_id
        call["id"] = new_id
    elif where == "arguments":
        fn = assistant["tool_calls"][0]["function"]
        fn["arguments"] = json.dumps({"path": "a/much/longer/path/" * 20})
    else:
        messages[1]["role"] = "developer"
    result = c.compact(messages)
    assert result.tier == "none"
    assert result.tokens_before == fresh_tokens(messages, tmp_path)
    if where != "role":
        assert result.tokens_before > first
    assert all(a is b for a, b in zip(result.messages, messages))


def test_a_list_changed_in_place_is_seen(tmp_path):
    messages = synthetic_history(turns=6)
    c = kept(messages, tmp_path)
    assistant = next(m for m in messages if m.get("tool_calls"))
    extra = {"id": "call_extra", "type": "function",
             "function": {"name": "grep", "arguments": '{"pattern": "TODO"}'}}
    assistant["tool_calls"].append(extra)
    at = messages.index(assistant) + 1
    messages.insert(at + 1, {"role": "tool", "tool_call_id": "call_extra", "content": "none"})
    result = c.compact(messages)
    assert result.tokens_before == fresh_tokens(messages, tmp_path)
    assert ctxkeel.check_pairs(result.messages) == []
    assert result.messages[messages.index(assistant)] is assistant


@pytest.mark.parametrize("change,where", [
    (lambda m: m[3].__setitem__("content", 42), "messages[3].content"),
    (lambda m: m[3].pop("tool_call_id"), "messages[3].tool_call_id"),
    (lambda m: m[2]["tool_calls"][0]["function"].pop("name"),
     "messages[2].tool_calls[0].function.name"),
    (lambda m: m[4].__setitem__("role", None), "messages[4].role"),
])
def test_bad_input_after_good_calls_names_the_place(change, where, tmp_path):
    messages = json.loads(json.dumps(synthetic_history(turns=6)))
    assert messages[2]["role"] == "assistant" and messages[3]["role"] == "tool"
    c = kept(messages, tmp_path)
    change(messages)
    with pytest.raises(ctxkeel.InputError) as info:
        c.compact(messages)
    assert info.value.where == where
    assert not c._core.busy


class Key(str):
    """A str subclass as a dict key: its lookups may call __eq__, so the reader must not take
    it for one of its own keys' objects."""

    def __eq__(self, other):
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_keys_of_other_types_read_as_plain_keys(tmp_path):
    messages = synthetic_history(turns=6)
    odd = []
    for m in messages:
        d = {Key(k): v for k, v in m.items()}
        d[7] = "a key that is no str"
        odd.append(d)
    # The first dicts read lend their key objects to the reader; these must not be taken.
    c = kept(odd, tmp_path)
    result = c.compact(odd)
    assert result.tokens_before == fresh_tokens(messages, tmp_path)
    assert all(a is b for a, b in zip(result.messages, odd))
    # Then plain dicts on the same compactor.
    assert c.compact(messages).tokens_before == result.tokens_before
