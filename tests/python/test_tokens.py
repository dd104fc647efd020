"""estimate_tokens on every input kind, with both estimators.

chars4 is exact by contract: ceil(UTF-8 bytes / 4) over the text, ids, names, arguments and
tool_call_id of the messages (the whole list divided once), plus a fixed cost per image. The
default estimator's text cost is calibrated and may change, so its tests pin only what the
header fixes: CK_MESSAGE_OVERHEAD per message and CK_REQUEST_OVERHEAD per list.
"""

import json
import math

import pytest

import ctxkeel

MESSAGE_OVERHEAD = 4
REQUEST_OVERHEAD = 3
IMAGE_TOKENS = 765


def chars4(*texts):
    return math.ceil(sum(len(t.encode("utf-8")) for t in texts) / 4)


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    "text",
    ["", "a", "abcd", "abcde", "h\u00e9llo", "\u65e5\u672c\u8a9e", "\U0001f600" * 3, "x" * 1001],
)
def test_str_chars4_is_bytes_over_four_rounded_up(text):
    assert ctxkeel.estimate_tokens(text, estimator="chars4") == chars4(text)


def test_str_default():
    assert ctxkeel.estimate_tokens("") == 0
    n = ctxkeel.estimate_tokens("The quick brown fox jumps over the lazy dog.")
    assert isinstance(n, int) and n > 0
    assert ctxkeel.estimate_tokens("abc", estimator="default") == ctxkeel.estimate_tokens("abc")


def test_message_chars4_counts_content_ids_names_arguments():
    message = {
        "role": "assistant",
        "content": "abcd",
        "tool_calls": [{"id": "id01", "type": "function",
                        "function": {"name": "name", "arguments": '{"a":1}'}}],
        "x_unknown": "not counted",
    }
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == chars4("abcd", "id01", "name",
                                                                          '{"a":1}')


def test_tool_message_counts_tool_call_id():
    message = {"role": "tool", "tool_call_id": "call_123", "content": "result text"}
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == chars4("call_123",
                                                                          "result text")


def test_message_default_adds_message_overhead():
    empty = {"role": "user", "content": ""}
    assert ctxkeel.estimate_tokens(empty) == MESSAGE_OVERHEAD
    assert ctxkeel.estimate_tokens(empty, estimator="chars4") == 0
    assert ctxkeel.estimate_tokens({"role": "assistant", "content": None}) == MESSAGE_OVERHEAD
    text = "some words to count"
    with_text = ctxkeel.estimate_tokens({"role": "user", "content": text})
    assert with_text == ctxkeel.estimate_tokens(text) + MESSAGE_OVERHEAD


def test_list_default_adds_request_overhead():
    empties = [{"role": "user", "content": ""} for _ in range(3)]
    assert ctxkeel.estimate_tokens(empties) == 3 * MESSAGE_OVERHEAD + REQUEST_OVERHEAD
    assert ctxkeel.estimate_tokens(empties, estimator="chars4") == 0
    message = {"role": "user", "content": "hello there, how are you"}
    assert ctxkeel.estimate_tokens([message]) == ctxkeel.estimate_tokens(message) + REQUEST_OVERHEAD
    assert ctxkeel.estimate_tokens([message], estimator="chars4") == ctxkeel.estimate_tokens(
        message, estimator="chars4"
    )


def test_list_chars4_divides_the_whole_once():
    messages = [{"role": "user", "content": "abcde"}, {"role": "assistant", "content": "fghij"}]
    assert ctxkeel.estimate_tokens(messages, estimator="chars4") == 3  # ceil(10 / 4), not 2 + 2


def test_empty_list_is_zero():
    assert ctxkeel.estimate_tokens([]) == 0
    assert ctxkeel.estimate_tokens([], estimator="chars4") == 0


def test_dict_arguments_count_as_compact_json():
    args = {"path": "/tmp/\u00e9t\u00e9", "lines": [1, 2]}
    as_dict = {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c", "function": {"name": "read", "arguments": args}}]}
    as_text = {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c", "function": {"name": "read",
                                                       "arguments": compact(args)}}]}
    for est in ("default", "chars4"):
        assert ctxkeel.estimate_tokens(as_dict, estimator=est) == ctxkeel.estimate_tokens(
            as_text, estimator=est
        )
    # ensure_ascii=False: "é" costs its two UTF-8 bytes, not a six-byte escape.
    assert ctxkeel.estimate_tokens(as_dict, estimator="chars4") == chars4("c", "read",
                                                                          compact(args))


def test_anthropic_blocks():
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "tu_1", "name": "read", "input": {"path": "a.txt"}},
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        ],
    }
    expected = chars4("Reading.", "tu_1", "read", compact({"path": "a.txt"}), "hmm")
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == expected


def test_tool_result_list_content_is_joined_with_newlines():
    message = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu_1",
         "content": [{"type": "text", "text": "ab"}, {"type": "image", "source": {}},
                     {"type": "text", "text": "cd"}]},
    ]}
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == chars4("tu_1", "ab\ncd")
    tool = {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "abc"},
                                                             "def"]}
    assert ctxkeel.estimate_tokens(tool, estimator="chars4") == chars4("c", "abc\ndef")


def test_images_cost_a_fixed_amount():
    message = {"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 4000}},
    ]}
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == chars4("look") + IMAGE_TOKENS
    assert ctxkeel.estimate_tokens(message) >= IMAGE_TOKENS + MESSAGE_OVERHEAD


def test_tool_schemas_count_as_compact_json():
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}
    tools = [
        {"type": "function", "function": {"name": "read_file", "description": "Read a file \u00e9",
                                          "parameters": parameters}},
        {"name": "bash", "input_schema": {"type": "object"}},
    ]
    assert ctxkeel.estimate_tokens(tools, estimator="chars4") == chars4(compact(tools))
    assert ctxkeel.estimate_tokens(tools) > 0


def test_list_with_a_role_is_a_message_list():
    # One dict with "role" makes the list a message list; the other item then lacks a role.
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens([{"role": "user", "content": "x"}, {"name": "tool"}])
    assert info.value.where == "messages[1].role"


def test_list_of_non_dicts_is_read_as_messages():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens(["hello"])
    assert info.value.where == "messages[0]"


def test_unserializable_tool_schema():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens([{"name": "f", "default": object()}])
    assert info.value.code == "CK_ETYPE" and info.value.where == "tools"


@pytest.mark.parametrize("bad", [None, 3, 2.5, b"bytes", ("a",), {"a"}, object()])
def test_other_types_are_type_errors(bad):
    with pytest.raises(TypeError) as info:
        ctxkeel.estimate_tokens(bad)
    assert "argument 'x'" in str(info.value)
    assert str(info.value).startswith("ctxkeel: ")


def test_estimator_argument_checked():
    with pytest.raises(ValueError, match="estimator must be 'default' or 'chars4'"):
        ctxkeel.estimate_tokens("x", estimator="tiktoken")
    with pytest.raises(TypeError, match="estimator must be a str"):
        ctxkeel.estimate_tokens("x", estimator=4)
    with pytest.raises(TypeError):
        ctxkeel.estimate_tokens("x", "chars4")  # estimator is keyword-only
    assert ctxkeel.estimate_tokens(x="abcdefgh", estimator="chars4") == 2


def test_str_with_lone_surrogate():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens("ab\udc00")
    assert info.value.code == "CK_EUTF8" and info.value.where == "x" and info.value.offset == 2


def test_estimate_does_not_change_input():
    message = {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}
    before = json.dumps(message)
    ctxkeel.estimate_tokens([message])
    assert json.dumps(message) == before
