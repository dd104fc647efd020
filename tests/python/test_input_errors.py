"""Bad input: every malformed message raises the right exception, naming index and field."""

import pytest

import ctxkeel


def u(content="x"):
    return {"role": "user", "content": content}


def asst_calls(*calls):
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


class Unserializable:
    pass


# (name, messages, code, index, where, message text after the place)
BAD = [
    ("message_not_dict", [u(), 3], "CK_ETYPE", 1, "messages[1]", "expected an object"),
    ("message_is_list", [[u()]], "CK_ETYPE", 0, "messages[0]", "expected an object"),
    ("missing_role", [u(), {"content": "x"}], "CK_EMISSING", 1, "messages[1].role",
     "required field is missing"),
    ("role_not_str", [{"role": 1, "content": "x"}], "CK_ETYPE", 0, "messages[0].role",
     "expected a string"),
    ("content_int", [u(), u(), u(), u(5)], "CK_ETYPE", 3, "messages[3].content",
     "expected a string, a list or null"),
    ("content_dict", [u({"text": "x"})], "CK_ETYPE", 0, "messages[0].content",
     "expected a string, a list or null"),
    ("item_not_dict", [u([1])], "CK_ETYPE", 0, "messages[0].content[0]",
     "expected an object"),
    ("item_type_missing", [u([{"text": "x"}])], "CK_EMISSING", 0, "messages[0].content[0].type",
     "required field is missing"),
    ("item_type_not_str", [u([{"type": 3}])], "CK_ETYPE", 0, "messages[0].content[0].type",
     "expected a string"),
    ("item_text_not_str", [u([{"type": "text", "text": "a"}, {"type": "text", "text": 5}])],
     "CK_ETYPE", 0, "messages[0].content[1].text", "expected a string"),
    ("item_text_missing", [u([{"type": "text"}])], "CK_EMISSING", 0,
     "messages[0].content[0].text", "required field is missing"),
    ("tool_call_id_missing", [u(), {"role": "tool", "content": "x"}], "CK_EMISSING", 1,
     "messages[1].tool_call_id", "required field is missing"),
    ("tool_call_id_not_str", [{"role": "tool", "content": "x", "tool_call_id": 7}], "CK_ETYPE",
     0, "messages[0].tool_call_id", "expected a string"),
    ("tool_content_int", [{"role": "tool", "content": 7, "tool_call_id": "a"}], "CK_ETYPE", 0,
     "messages[0].content", "expected a string or a list"),
    ("tool_content_text_not_str",
     [{"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": None},
                                                         {"type": "text", "text": 1}]}],
     "CK_ETYPE", 0, "messages[0].content[1].text", "expected a string"),
    ("tool_calls_not_list", [{"role": "assistant", "tool_calls": {"id": "a"}}], "CK_ETYPE", 0,
     "messages[0].tool_calls", "expected a list"),
    ("tool_call_not_dict", [asst_calls("a")], "CK_ETYPE", 0, "messages[0].tool_calls[0]",
     "expected an object"),
    ("tool_call_id_absent", [u(), asst_calls({"id": "a", "function": {"name": "f"}},
                                              {"function": {"name": "f"}})],
     "CK_EMISSING", 1, "messages[1].tool_calls[1].id", "required field is missing"),
    ("tool_call_id_int", [asst_calls({"id": 1, "function": {"name": "f"}})], "CK_ETYPE", 0,
     "messages[0].tool_calls[0].id", "expected a string"),
    ("function_missing", [asst_calls({"id": "a"})], "CK_EMISSING", 0,
     "messages[0].tool_calls[0].function", "required field is missing"),
    ("function_not_dict", [asst_calls({"id": "a", "function": "f"})], "CK_ETYPE", 0,
     "messages[0].tool_calls[0].function", "expected an object"),
    ("function_name_missing", [asst_calls({"id": "a", "function": {"arguments": "{}"}})],
     "CK_EMISSING", 0, "messages[0].tool_calls[0].function.name", "required field is missing"),
    ("function_name_not_str", [asst_calls({"id": "a", "function": {"name": None}})], "CK_ETYPE",
     0, "messages[0].tool_calls[0].function.name", "expected a string"),
    ("arguments_unserializable",
     [asst_calls({"id": "a", "function": {"name": "f", "arguments": {"x": Unserializable()}}})],
     "CK_ETYPE", 0, "messages[0].tool_calls[0].function.arguments",
     "cannot be serialized as JSON"),
    ("tool_use_id_missing", [{"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}],
     "CK_EMISSING", 0, "messages[0].content[0].id", "required field is missing"),
    ("tool_use_name_missing", [{"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]}],
     "CK_EMISSING", 0, "messages[0].content[0].name", "required field is missing"),
    ("tool_use_input_unserializable",
     [{"role": "assistant",
       "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {1j: 2}}]}],
     "CK_ETYPE", 0, "messages[0].content[0].input", "cannot be serialized as JSON"),
    ("tool_result_id_missing", [u([{"type": "tool_result", "content": "x"}])], "CK_EMISSING", 0,
     "messages[0].content[0].tool_use_id", "required field is missing"),
    ("tool_result_content_int", [u([{"type": "tool_result", "tool_use_id": "a", "content": 4}])],
     "CK_ETYPE", 0, "messages[0].content[0].content", "expected a string or a list"),
    ("tool_result_block_text_not_str",
     [u([{"type": "text", "text": "a"},
         {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": 4}]}])],
     "CK_ETYPE", 0, "messages[0].content[1].content[0].text", "expected a string"),
    ("surrogate_in_content", [u("ok"), u("ab\ud800cd")], "CK_EUTF8", 1, "messages[1].content",
     "text is not valid UTF-8"),
    ("surrogate_in_role", [{"role": "\udcff", "content": "x"}, u(), u("\udcff")], "CK_EUTF8", 0,
     "messages[0].role", "text is not valid UTF-8"),
    ("surrogate_in_item_text", [u([{"type": "text", "text": "\ud83d"}])], "CK_EUTF8", 0,
     "messages[0].content[0].text", "text is not valid UTF-8"),
    ("surrogate_in_call_id", [asst_calls({"id": "\udc80", "function": {"name": "f"}})],
     "CK_EUTF8", 0, "messages[0].tool_calls[0].id", "text is not valid UTF-8"),
    ("surrogate_in_function_name", [asst_calls({"id": "a", "function": {"name": "f\ud800"}})],
     "CK_EUTF8", 0, "messages[0].tool_calls[0].function.name", "text is not valid UTF-8"),
    ("surrogate_in_arguments",
     [asst_calls({"id": "a", "function": {"name": "f", "arguments": "{\"a\":\"\ud800\"}"}})],
     "CK_EUTF8", 0, "messages[0].tool_calls[0].function.arguments", "text is not valid UTF-8"),
    ("surrogate_in_dict_arguments",
     [asst_calls({"id": "a", "function": {"name": "f", "arguments": {"a": "\ud800"}}})],
     "CK_EUTF8", 0, "messages[0].tool_calls[0].function.arguments", "text is not valid UTF-8"),
    ("surrogate_in_tool_call_id", [{"role": "tool", "tool_call_id": "\ud800", "content": ""}],
     "CK_EUTF8", 0, "messages[0].tool_call_id", "text is not valid UTF-8"),
]

FUNCS = [ctxkeel.check_pairs, ctxkeel.repair_pairs, ctxkeel.estimate_tokens]


@pytest.mark.parametrize("func", FUNCS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("name,messages,code,index,where,text", BAD, ids=[b[0] for b in BAD])
def test_bad_message_raises_input_error(func, name, messages, code, index, where, text):
    with pytest.raises(ctxkeel.InputError) as info:
        func(messages)
    err = info.value
    assert isinstance(err, ctxkeel.Error) and isinstance(err, ValueError)
    assert err.code == code
    assert err.index == index
    assert err.where == where
    assert str(err) == "ctxkeel: %s: %s" % (where, text)


def test_lone_surrogate_offset_is_a_byte_offset():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.check_pairs([{"role": "user", "content": "h\u00e9\u65e5\ud800!"}])
    # "h" is 1 byte, "é" 2, "日" 3: the bad code point starts at byte 6.
    assert info.value.offset == 6
    assert isinstance(info.value.__cause__, UnicodeEncodeError)


def test_unserializable_arguments_chain_the_json_error():
    messages = [asst_calls({"id": "a", "function": {"name": "f", "arguments": {"x": {1, 2}}}})]
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.repair_pairs(messages)
    assert isinstance(info.value.__cause__, TypeError)


def test_circular_arguments_are_an_input_error():
    args = {}
    args["self"] = args
    messages = [asst_calls({"id": "a", "function": {"name": "f", "arguments": args}})]
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.check_pairs(messages)
    assert info.value.code == "CK_ETYPE"
    assert isinstance(info.value.__cause__, ValueError)


def test_single_message_errors_name_message():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens({"role": "user", "content": 3})
    assert info.value.where == "message.content"
    assert str(info.value) == "ctxkeel: message.content: expected a string, a list or null"


def test_non_list_messages_is_type_error():
    for bad in (5, None, "text", {"messages": []}):
        for func in (ctxkeel.check_pairs, ctxkeel.repair_pairs):
            with pytest.raises(TypeError) as info:
                func(bad)
            assert not isinstance(info.value, ctxkeel.Error)
            expected = "ctxkeel: messages must be a list or a tuple, not %s" % type(bad).__name__
            assert str(info.value) == expected


def test_errors_do_not_mutate_input():
    messages = [u("fine"), {"role": "tool", "content": "x"}]
    snapshot = [dict(m) for m in messages]
    with pytest.raises(ctxkeel.InputError):
        ctxkeel.repair_pairs(messages)
    assert messages == snapshot


def test_dict_subclass_and_str_subclass_are_accepted():
    class Msg(dict):
        pass

    class Text(str):
        pass

    messages = [Msg(role=Text("user"), content=Text("hi"))]
    assert ctxkeel.check_pairs(messages) == []
    out = ctxkeel.repair_pairs(messages)
    assert out[0] is messages[0]


def test_reentrant_key_comparison_is_safe():
    # A key whose __eq__ runs Python code (and calls ctxkeel) while a message is being read.
    class Sneaky:
        def __hash__(self):
            return hash("content")

        def __eq__(self, other):
            ctxkeel.check_pairs([{"role": "user", "content": "inner"}])
            return False

    message = {"role": "user", Sneaky(): 1, "content": "outer"}
    assert ctxkeel.check_pairs([message]) == []
    assert ctxkeel.estimate_tokens([message], estimator="chars4") == 2


class Boom(Exception):
    pass


def test_an_exception_while_reading_is_raised_as_it_is():
    # A key whose __eq__ raises while the core looks a field up: the very exception comes out
    # once the core has returned, not an InputError about it, and nothing else is reported.
    class Raising:
        armed = False

        def __hash__(self):
            return hash("content")

        def __eq__(self, other):
            if Raising.armed:
                raise Boom("from __eq__")
            return False

    messages = [u("fine"), {"role": "user", Raising(): 1, "content": "x"}]
    Raising.armed = True
    for func in (ctxkeel.check_pairs, ctxkeel.repair_pairs, ctxkeel.estimate_tokens):
        with pytest.raises(Boom, match="from __eq__") as info:
            func(messages)
        assert info.value.__cause__ is None


def test_an_exception_of_the_json_encoder_is_raised_as_it_is(tmp_path):
    # Arguments given as a mapping the encoder cannot walk (its items() raises): not a value
    # JSON cannot express, so not an InputError; the host's own exception.
    class Mapping(dict):
        def items(self):
            raise Boom("from items")

    call = {"id": "a", "type": "function", "function": {"name": "f", "arguments": Mapping(x=1)}}
    messages = [u(), asst_calls(call), {"role": "tool", "tool_call_id": "a", "content": "r"}]
    with pytest.raises(Boom, match="from items"):
        ctxkeel.check_pairs(messages)
    c = ctxkeel.Compactor(1000, store_dir=str(tmp_path))
    with pytest.raises(Boom):
        c.compact(messages)
    assert c.compact([u()]).messages[0] == u()  # the compactor is usable afterwards
