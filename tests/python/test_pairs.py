"""check_pairs and repair_pairs on hand-made message lists, in both formats."""

import copy

import json

import pytest

import ctxkeel

STUB = "result unavailable: context was compacted"


# ---- builders: every call makes fresh objects ------------------------------------------------


def user(text="go on", **extra):
    return {"role": "user", "content": text, **extra}


# OpenAI Chat Completions shapes.


def call(cid, name="run", args='{"cmd":"ls"}'):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def oa_assistant(*calls, content=None, **extra):
    return {"role": "assistant", "content": content, "tool_calls": list(calls), **extra}


def tool(cid, text="ok", **extra):
    return {"role": "tool", "tool_call_id": cid, "content": text, **extra}


# Anthropic Messages shapes.


def text_block(text):
    return {"type": "text", "text": text}


def use(cid, name="run"):
    return {"type": "tool_use", "id": cid, "name": name, "input": {"cmd": "ls"}}


def result(cid, text="ok"):
    return {"type": "tool_result", "tool_use_id": cid, "content": text}


def an_assistant(*blocks, text="Let me look.", **extra):
    return {"role": "assistant", "content": [text_block(text), *blocks], **extra}


def results(*blocks, **extra):
    return {"role": "user", "content": list(blocks), **extra}


# ---- the rules: (format, name, messages, expected violations as (kind, index, part, id)) ----

CASES = [
    ("openai", "orphan_result", lambda: [user(), tool("x")], [("orphan_result", 1, 0, "x")]),
    (
        "openai",
        "missing_result",
        lambda: [user(), oa_assistant(call("a")), user()],
        [("missing_result", 1, 0, "a")],
    ),
    (
        "openai",
        "not_adjacent",
        lambda: [user(), oa_assistant(call("a")), user("wait"), tool("a")],
        [("not_adjacent", 3, 0, "a")],
    ),
    (
        "openai",
        "duplicate_result",
        lambda: [user(), oa_assistant(call("a")), tool("a"), tool("a", "again")],
        [("duplicate_result", 3, 0, "a")],
    ),
    (
        "openai",
        "duplicate_call",
        lambda: [user(), oa_assistant(call("a"), call("a")), tool("a")],
        [("duplicate_call", 1, 1, "a")],
    ),
    (
        "openai",
        "empty_id_call",
        lambda: [user(), oa_assistant(call(""), content="hm")],
        [("empty_id", 1, 1, "")],
    ),
    (
        "openai",
        "empty_id_result",
        lambda: [user(), oa_assistant(call("a")), tool("a"), tool("")],
        [("empty_id", 3, 0, "")],
    ),
    (
        "openai",
        "misplaced",
        lambda: [user(), {"role": "user", "content": "x", "tool_calls": [call("a")]}],
        [("misplaced", 1, 1, "a")],
    ),
    (
        "openai",
        "misplaced_only_calls",
        lambda: [user(), {"role": "user", "content": None, "tool_calls": [call("a")]}, user()],
        [("misplaced", 1, 0, "a")],
    ),
    (
        "anthropic",
        "orphan_result",
        lambda: [user(), an_assistant(), results(result("x"))],
        [("orphan_result", 2, 0, "x")],
    ),
    (
        "anthropic",
        "missing_result",
        lambda: [user(), an_assistant(use("a")), user("next")],
        [("missing_result", 1, 1, "a")],
    ),
    (
        "anthropic",
        "not_adjacent",
        lambda: [
            user(), an_assistant(use("a")), user("wait"), an_assistant(), results(result("a"))
        ],
        [("not_adjacent", 4, 0, "a")],
    ),
    (
        "anthropic",
        "duplicate_result",
        lambda: [user(), an_assistant(use("a")), results(result("a"), result("a", "again"))],
        [("duplicate_result", 2, 1, "a")],
    ),
    (
        "anthropic",
        "duplicate_call",
        lambda: [user(), an_assistant(use("a"), use("a")), results(result("a"))],
        [("duplicate_call", 1, 2, "a")],
    ),
    (
        "anthropic",
        "empty_id_call",
        lambda: [user(), an_assistant(use(""))],
        [("empty_id", 1, 1, "")],
    ),
    (
        "anthropic",
        "empty_id_result",
        lambda: [user(), an_assistant(), results(result(""), text_block("and"))],
        [("empty_id", 2, 0, "")],
    ),
    (
        "anthropic",
        "misplaced_call",
        lambda: [user(), results(text_block("hi"), use("a")), an_assistant()],
        [("misplaced", 1, 1, "a")],
    ),
    (
        "anthropic",
        "misplaced_only_calls",
        lambda: [user(), results(use("a")), an_assistant()],
        [("misplaced", 1, 0, "a")],
    ),
    (
        "anthropic",
        "misplaced_result",
        lambda: [user(), an_assistant(use("a"), result("a")), results(result("a"))],
        [("misplaced", 1, 2, "a")],
    ),
    (
        "anthropic",
        "result_order",
        lambda: [user(), an_assistant(use("a")), results(text_block("hey"), result("a"))],
        [("result_order", 2, 1, "a")],
    ),
]

CASE_IDS = ["%s-%s" % (fmt, name) for fmt, name, _, _ in CASES]


def issues_of(found):
    return [(v["kind"], v["index"], v["part"], v["tool_call_id"]) for v in found]


def tagged(messages):
    """Marks every message with an unknown field, which repair must carry into copies."""
    for n, m in enumerate(messages):
        m["x_tag"] = n
    return messages


def is_real_turn(message):
    """A user or assistant message that says something (not one that only carries results)."""
    if message.get("role") not in ("user", "assistant"):
        return False
    content = message.get("content")
    if isinstance(content, list) and content:
        return any(
            not (isinstance(b, dict) and b.get("type") == "tool_result") for b in content
        )
    return True


@pytest.mark.parametrize("fmt,name,build,expected", CASES, ids=CASE_IDS)
def test_check_pairs_reports_rule(fmt, name, build, expected):
    messages = build()
    found = ctxkeel.check_pairs(messages, format=fmt)
    assert issues_of(found) == expected
    for v in found:
        assert v["message"].startswith("messages[%d]" % v["index"])
        # The id quoted as JSON quotes it (the core's sentence, the same in Node).
        assert json.dumps(v["tool_call_id"], ensure_ascii=False) in v["message"]
    # Auto detection finds the same format from the shapes.
    assert ctxkeel.check_pairs(messages) == found


@pytest.mark.parametrize("fmt,name,build,expected", CASES, ids=CASE_IDS)
def test_repair_fixes_rule(fmt, name, build, expected):
    messages = tagged(build())
    before = copy.deepcopy(messages)
    items_before = list(messages)
    out = ctxkeel.repair_pairs(messages, format=fmt)
    assert ctxkeel.check_pairs(out, format=fmt) == []
    # The input list and every dict in it are untouched.
    assert messages == before
    assert all(a is b for a, b in zip(messages, items_before)) and len(messages) == len(before)
    assert out is not messages
    # User and assistant turns keep their order and none is dropped (Anthropic user messages
    # that only carried tool results may go: their results moved next to the calls).
    turns_in = [m["x_tag"] for m in messages if is_real_turn(m)]
    turns_out = [m["x_tag"] for m in out if "x_tag" in m and is_real_turn(m)]
    assert turns_out == turns_in
    # Idempotent: repairing again hands back the very same objects.
    again = ctxkeel.repair_pairs(out, format=fmt)
    assert len(again) == len(out)
    assert all(a is b for a, b in zip(again, out))


def test_orphan_result_is_dropped_openai():
    messages = [user(), tool("x"), user("more")]
    out = ctxkeel.repair_pairs(messages)
    assert out == [messages[0], messages[2]]
    assert out[0] is messages[0] and out[1] is messages[2]


def test_missing_result_gets_stub_openai():
    messages = [user(), oa_assistant(call("a"), call("b")), tool("a"), user("next")]
    out = ctxkeel.repair_pairs(messages)
    assert out[:3] == messages[:3]
    assert out[3] == {"role": "tool", "tool_call_id": "b", "content": STUB}
    assert out[4] is messages[3]


def test_missing_result_gets_stub_anthropic():
    messages = [user(), an_assistant(use("a")), user("next", name="bob")]
    out = ctxkeel.repair_pairs(messages)
    assert len(out) == 3
    zone = out[2]
    assert zone is not messages[2]
    assert zone["content"][0] == {"type": "tool_result", "tool_use_id": "a", "content": STUB}
    # The string content becomes a text block after the results; unknown fields stay.
    assert zone["content"][1] == {"type": "text", "text": "next"}
    assert zone["content"][1]["text"] == messages[2]["content"]
    assert zone["name"] == "bob"


def test_not_adjacent_result_moves_next_to_call_openai():
    messages = [user(), oa_assistant(call("a")), user("wait"), tool("a")]
    out = ctxkeel.repair_pairs(messages)
    assert [m is s for m, s in zip(out, [messages[0], messages[1], messages[3], messages[2]])] == [
        True
    ] * 4


def test_not_adjacent_result_moves_next_to_call_anthropic():
    messages = [user(), an_assistant(use("a")), user("wait"), an_assistant(), results(result("a"))]
    out = ctxkeel.repair_pairs(messages)
    assert len(out) == 4
    assert out[2]["content"][0] is messages[4]["content"][0]
    assert out[2]["content"][1] == text_block("wait")
    assert out[3] is messages[3]


def test_duplicate_result_keeps_first():
    messages = [user(), oa_assistant(call("a")), tool("a", "first"), tool("a", "second")]
    out = ctxkeel.repair_pairs(messages)
    assert len(out) == 3 and out[2] is messages[2]


def test_duplicate_call_dropped_from_tool_calls():
    first, dup = call("a"), call("a", name="other")
    messages = [user(), oa_assistant(first, dup, content="two"), tool("a")]
    out = ctxkeel.repair_pairs(messages)
    assert out[1] is not messages[1]
    assert out[1]["tool_calls"] == [first] and out[1]["tool_calls"][0] is first
    # The dropped call leaves a note with its name and arguments (POLICY-CHANGES 6), so the
    # content becomes a list: the original text, then the note.
    assert out[1]["content"] == [
        {"type": "text", "text": "two"},
        {"type": "text", "text": "(tool call other removed by ctxkeel: its id was already "
                                 'used; its arguments were: {"cmd":"ls"})'}]
    assert messages[1]["tool_calls"] == [first, dup] and messages[1]["content"] == "two"
    assert ctxkeel.check_pairs(out) == []


def test_result_order_puts_results_first():
    hey = text_block("hey")
    res = result("a")
    messages = [user(), an_assistant(use("a")), results(hey, res)]
    out = ctxkeel.repair_pairs(messages)
    assert out[2]["content"][0] is res and out[2]["content"][1] is hey


def test_unknown_fields_preserved_on_edited_messages():
    meta = {"trace": [1, 2, 3]}
    first, dup = call("a"), call("a")
    asst = oa_assistant(first, dup, content="c", refusal=None, x_meta=meta, name="agent")
    messages = [user(), asst, tool("a", x_extra=7)]
    out = ctxkeel.repair_pairs(messages)
    edited = out[1]
    assert edited is not asst
    assert list(edited) == list(asst)  # same keys, same order
    assert edited["x_meta"] is meta and edited["refusal"] is None and edited["name"] == "agent"
    assert out[2] is messages[2]


def test_unknown_fields_preserved_on_edited_blocks_anthropic():
    cached = {"type": "text", "text": "hey", "cache_control": {"type": "ephemeral"}}
    res = dict(result("a"), is_error=True, x_block=1)
    messages = [user(), an_assistant(use("a")), results(cached, res, x_msg="keep")]
    out = ctxkeel.repair_pairs(messages)
    assert out[2]["x_msg"] == "keep"
    assert out[2]["content"] == [res, cached]
    assert out[2]["content"][0] is res and out[2]["content"][1] is cached


def test_valid_input_returns_same_objects_openai():
    messages = [
        {"role": "system", "content": "be brief"},
        user("list files"),
        oa_assistant(call("a"), call("b"), content="two at once"),
        tool("b"),
        tool("a"),
        {"role": "assistant", "content": "done", "x_unknown": True},
    ]
    out = ctxkeel.repair_pairs(messages)
    assert ctxkeel.check_pairs(messages) == []
    assert out is not messages and len(out) == len(messages)
    assert all(a is b for a, b in zip(out, messages))


def test_valid_input_returns_same_objects_anthropic():
    messages = [
        user("list files"),
        an_assistant(use("a"), use("b")),
        results(result("b"), result("a"), text_block("thanks")),
        an_assistant(text="done"),
    ]
    out = ctxkeel.repair_pairs(messages)
    assert ctxkeel.check_pairs(messages) == []
    assert all(a is b for a, b in zip(out, messages)) and len(out) == len(messages)


def test_empty_list():
    assert ctxkeel.check_pairs([]) == []
    assert ctxkeel.repair_pairs([]) == []


def test_auto_detects_anthropic_from_blocks():
    messages = [user(), an_assistant(use("a")), user("next")]
    assert ctxkeel.repair_pairs(messages) == ctxkeel.repair_pairs(messages, format="anthropic")
    # An Anthropic stub is a block inside a user message, never a role "tool" message.
    assert all(m["role"] != "tool" for m in ctxkeel.repair_pairs(messages))


def test_auto_detects_openai_from_tool_calls():
    messages = [user(), oa_assistant(call("a"))]
    out = ctxkeel.repair_pairs(messages)
    assert out == ctxkeel.repair_pairs(messages, format="openai")
    assert out[2] == {"role": "tool", "tool_call_id": "a", "content": STUB}


def test_plain_chat_is_valid_in_every_format():
    messages = [
        {"role": "system", "content": "s"}, user("a"), {"role": "assistant", "content": "b"}
    ]
    for fmt in ("auto", "openai", "anthropic"):
        assert ctxkeel.check_pairs(messages, format=fmt) == []
        assert all(a is b for a, b in zip(ctxkeel.repair_pairs(messages, format=fmt), messages))


def test_mixed_formats_raise_input_error():
    messages = [
        user(),
        oa_assistant(call("a")),
        tool("a"),
        an_assistant(use("b")),
        results(result("b")),
    ]
    for func in (ctxkeel.check_pairs, ctxkeel.repair_pairs):
        with pytest.raises(ctxkeel.InputError) as info:
            func(messages)
        err = info.value
        assert isinstance(err, ValueError)
        assert err.code == "CK_EFORMAT"
        assert err.index == 3 and err.where == "messages[3] (anthropic, not openai)"
        assert str(err).startswith("ctxkeel: messages[3] (anthropic, not openai): ")


@pytest.mark.parametrize(
    "fmt,build",
    [
        ("anthropic", lambda: [user(), oa_assistant(call("a")), tool("a")]),
        ("openai", lambda: [user(), an_assistant(use("a")), results(result("a"))]),
    ],
)
def test_shape_of_other_format_raises(fmt, build):
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.check_pairs(build(), format=fmt)
    assert info.value.code == "CK_EFORMAT" and info.value.index == 1


def test_format_argument_checked():
    names = "'auto', 'openai', 'anthropic', 'responses', 'gemini', 'ai-sdk' or 'langchain'"
    with pytest.raises(ValueError, match="format must be " + names + ", not 'gpt'"):
        ctxkeel.check_pairs([], format="gpt")
    # Every name the core knows is a name here (its aliases too); what follows is the core's,
    # which refuses in its own words a dialect it cannot read yet.
    try:
        ctxkeel.check_pairs([], format="ai_sdk")
    except ctxkeel.InputError as exc:
        assert exc.where == "format" and "format must be" not in str(exc)
    with pytest.raises(ValueError):
        ctxkeel.repair_pairs([], format="OpenAI")
    with pytest.raises(TypeError, match="format must be a str"):
        ctxkeel.repair_pairs([], format=1)
    with pytest.raises(TypeError):
        ctxkeel.check_pairs([], "openai")  # format is keyword-only


def test_messages_must_be_a_list_or_a_tuple():
    for func in (ctxkeel.check_pairs, ctxkeel.repair_pairs):
        with pytest.raises(TypeError) as info:
            func(5)
        assert str(info.value) == "ctxkeel: messages must be a list or a tuple, not int"
    # A tuple is read as the list of its messages.
    broken = (user(), {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
    assert ctxkeel.check_pairs(broken) == ctxkeel.check_pairs(list(broken)) != []
    repaired = ctxkeel.repair_pairs(broken)
    assert repaired == ctxkeel.repair_pairs(list(broken))
    assert repaired[0] is broken[0] and ctxkeel.check_pairs(repaired) == []
    assert ctxkeel.estimate_tokens(broken) == ctxkeel.estimate_tokens(list(broken)) > 0


def test_violation_dicts_have_fixed_keys():
    found = ctxkeel.check_pairs([user(), tool("x")])
    assert list(found[0]) == ["kind", "index", "part", "tool_call_id", "message"]


def test_tool_result_list_content_and_dict_arguments_keep_identity():
    # Shapes that need conversion (joined text, serialized arguments) still come back as the
    # same objects when nothing changes.
    messages = [
        user(),
        oa_assistant(call("a", args={"cmd": "ls", "n": 1})),
        {"role": "tool", "tool_call_id": "a", "content": [text_block("one"), text_block("two")]},
    ]
    out = ctxkeel.repair_pairs(messages)
    assert all(a is b for a, b in zip(out, messages))


def test_repair_of_long_history_of_many_turns():
    messages = [user("start")]
    for n in range(300):
        cid = "call_%d" % n
        messages.append(oa_assistant(call(cid), content="step %d" % n))
        if n % 7:
            messages.append(tool(cid, "out %d" % n))
    missing = sum(1 for n in range(300) if n % 7 == 0)
    assert len(ctxkeel.check_pairs(messages)) == missing
    out = ctxkeel.repair_pairs(messages)
    assert ctxkeel.check_pairs(out) == []
    assert len(out) == len(messages) + missing
