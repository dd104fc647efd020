"""SDK objects in a message list, as agent loops put them there: an OpenAI loop appends
``response.choices[0].message`` (a ``ChatCompletionMessage``), an Anthropic loop appends
``{"role": "assistant", "content": response.content}`` (a list of ``TextBlock`` /
``ToolUseBlock``), a LangChain user hands ``BaseMessage`` objects to plain ``compact()``. The
core reads them through ``model_dump()``; a view's message made from one is the caller's own
object, and the summarizer sees the caller's objects too.

The property replays random OpenAI and Anthropic histories with their assistant turns as SDK
objects against the same histories as the dicts those objects dump to, on compactors of the
same options: the views must be the same, message for message, with the caller's SDK object
wherever the dict view keeps the dict.
"""

import asyncio
import copy
import shutil
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxkeel
from compaction_support import prop_settings
from strategies import good_replies, plans, render

anthropic_types = pytest.importorskip("anthropic.types")
chat = pytest.importorskip("openai.types.chat")
lc_messages = pytest.importorskip("langchain_core.messages")

REPLY = ("## User intent\nFix the parser.\n## Execution progress\nRead files.\n"
         "## Key decisions\nNone.\n## Tried solutions\nNone.\n## Next steps\nRun the tests.")


def openai_object(message):
    """An OpenAI assistant message dict as the SDK returns it."""
    return chat.ChatCompletionMessage.model_validate(message)


def anthropic_blocks(message):
    """An Anthropic assistant message dict with its content as the SDK's blocks."""
    blocks = []
    for b in message["content"] if isinstance(message["content"], list) else []:
        if b.get("type") == "text":
            blocks.append(anthropic_types.TextBlock.model_validate(b))
        elif b.get("type") == "tool_use":
            blocks.append(anthropic_types.ToolUseBlock.model_validate(b))
        else:
            return message
    return {"role": "assistant", "content": blocks} if blocks else message


def dumped(m):
    """What the core reads for an SDK object: model_dump without the None fields."""
    if isinstance(m, dict):
        if isinstance(m.get("content"), list):
            return dict(m, content=[b if isinstance(b, dict)
                                    else b.model_dump(mode="json", exclude_none=True)
                                    for b in m["content"]])
        return m
    return m.model_dump(mode="json", exclude_none=True)


def compactor(store, window):
    return ctxkeel.Compactor(window, store_dir=store, session_id="same")


@pytest.fixture
def store():
    d = tempfile.mkdtemp(prefix="ck-sdk-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def openai_loop():
    call = chat.ChatCompletionMessageToolCall if hasattr(
        chat, "ChatCompletionMessageToolCall") else None
    messages = [{"role": "system", "content": "You are a careful coding agent."},
                {"role": "user", "content": "Fix the failing test in src/app/parser.py."}]
    for i in range(40):
        messages.append(chat.ChatCompletionMessage.model_validate({
            "role": "assistant", "content": "Step %d." % i,
            "tool_calls": [{"id": "call_%d" % i, "type": "function",
                            "function": {"name": "read_file",
                                         "arguments": '{"path": "src/m_%d.py"}' % i}}]}))
        messages.append({"role": "tool", "tool_call_id": "call_%d" % i,
                         "content": "line of output %d\n" % i * 40})
    assert call is not None
    return messages


def test_openai_messages_are_the_callers_objects(store):
    messages = openai_loop()
    before = [dumped(m) for m in messages]
    r = compactor(store, 10 ** 7).compact(messages)
    assert r.tier == "none"
    assert len(r.messages) == len(messages)
    assert all(a is b for a, b in zip(r.messages, messages))
    assert [dumped(m) for m in messages] == before  # nothing was changed


def test_openai_objects_fold_and_the_summarizer_sees_them(store):
    messages = openai_loop()
    tokens = ctxkeel.estimate_tokens([dumped(m) for m in messages])
    seen = []

    def summarize(request):
        seen.extend(request["messages"])
        return REPLY

    r = compactor(store, int(tokens / 0.85)).compact(messages, summarize=summarize)
    assert r.tier == "full"
    assert seen and all(any(s is m for m in messages) for s in seen)
    assert any(isinstance(s, chat.ChatCompletionMessage) for s in seen)
    assert ctxkeel.check_pairs([dumped(m) for m in r.messages]) == []
    kept = [m for m in r.messages if any(m is x for x in messages)]
    assert isinstance(r.messages[-1], dict) and r.messages[-1] is messages[-1]
    assert any(isinstance(m, chat.ChatCompletionMessage) for m in kept)
    # Everything else is a dict a request takes: the checkpoint, edited copies.
    assert all(isinstance(m, (dict, chat.ChatCompletionMessage)) for m in r.messages)


def test_tool_calls_as_objects_in_a_dict(store):
    call = chat.ChatCompletionMessageToolCall.model_validate(
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}})
    messages = [{"role": "user", "content": "List the files."},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "a.py"}]
    r = compactor(store, 10 ** 6).compact(messages)
    assert r.repairs == [] and all(a is b for a, b in zip(r.messages, messages))


def test_anthropic_content_blocks(store):
    messages = [{"role": "user", "content": "List the files."},
                {"role": "assistant", "content": [
                    anthropic_types.TextBlock(type="text", text="Listing."),
                    anthropic_types.ToolUseBlock(type="tool_use", id="toolu_1", name="ls",
                                                 input={"path": "."})]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": "a.py"}]}]
    r = compactor(store, 10 ** 6).compact(messages)
    assert r.tier == "none" and r.repairs == []
    assert all(a is b for a, b in zip(r.messages, messages))


def test_acompact_with_sdk_objects(store):
    messages = openai_loop()
    tokens = ctxkeel.estimate_tokens([dumped(m) for m in messages])

    async def summarize(request):
        assert any(isinstance(m, chat.ChatCompletionMessage) for m in request["messages"])
        return REPLY

    r = asyncio.run(compactor(store, int(tokens / 0.85)).acompact(messages,
                                                                  summarize=summarize))
    assert r.tier == "full" and r.record["fallback"] is None
    assert ctxkeel.check_pairs([dumped(m) for m in r.messages]) == []


def test_append_keeps_an_sdk_object_as_its_dict(store):
    c = compactor(store, 10 ** 6)
    for m in openai_loop()[:6]:
        c.append(m)
    assert all(isinstance(m, dict) for m in c.session)
    assert isinstance(c.session[2], dict) and c.session[2]["tool_calls"][0]["id"] == "call_0"
    assert c.view().tier == "none"


def test_langchain_objects_in_plain_compact(store):
    messages = [lc_messages.SystemMessage("You are a careful coding agent."),
                lc_messages.HumanMessage("Fix the failing test in src/app/parser.py.")]
    for i in range(30):
        messages.append(lc_messages.AIMessage("Step %d." % i, tool_calls=[
            {"id": "call_%d" % i, "name": "read_file", "args": {"path": "m_%d.py" % i}}]))
        messages.append(lc_messages.ToolMessage("output line\n" * 60, tool_call_id="call_%d" % i))
    r = compactor(store, 10 ** 7).compact(messages)
    assert r.tier == "none" and all(a is b for a, b in zip(r.messages, messages))
    tokens = r.tokens_before
    r = ctxkeel.Compactor(int(tokens / 0.85), store_dir=store + "/b").compact(
        messages, summarize=lambda request: REPLY)
    assert r.tier == "full"
    assert all(isinstance(m, lc_messages.BaseMessage) for m in r.messages)
    assert r.messages[0] is messages[0] and r.messages[-1] is messages[-1]


def test_an_object_without_model_dump_is_refused_by_index(store):
    class Opaque:
        pass

    messages = [{"role": "user", "content": "hi"}, Opaque()]
    with pytest.raises(ctxkeel.InputError) as info:
        compactor(store, 10 ** 6).compact(messages)
    assert info.value.index == 1 and info.value.where == "messages[1]"
    assert str(info.value).startswith("ctxkeel: messages[1]: ") and "Opaque" in str(info.value)
    for fn in (ctxkeel.check_pairs, ctxkeel.repair_pairs, ctxkeel.estimate_tokens):
        with pytest.raises(ctxkeel.InputError, match=r"messages\[1\]: .*Opaque"):
            fn(messages)


def test_a_model_dump_that_is_not_a_dict(store):
    class Odd:
        def model_dump(self, **kwargs):
            return ["not", "a", "dict"]

    with pytest.raises(ctxkeel.InputError, match=r"messages\[1\]: Odd.model_dump\(\) gave list") \
            as info:
        compactor(store, 10 ** 6).compact([{"role": "user", "content": "hi"}, Odd()])
    assert info.value.index == 1


def test_a_model_dump_that_raises_is_placed(store):
    class Broken:
        def model_dump(self, **kwargs):
            raise RuntimeError("no dump today")

    messages = [{"role": "user", "content": "hi"},
                {"role": "assistant", "content": [Broken()]}]
    for fn in (compactor(store, 10 ** 6).compact, ctxkeel.check_pairs):
        with pytest.raises(ctxkeel.InputError) as info:
            fn(messages)
        assert info.value.index == 1 and info.value.where == "messages[1].content[0]"
        assert "Broken.model_dump() raised RuntimeError: no dump today" in str(info.value)
        assert isinstance(info.value.__cause__, RuntimeError)
    assert isinstance(messages[1]["content"][0], Broken)  # the caller's list is as it was


def test_module_functions_take_sdk_objects():
    """estimate_tokens, check_pairs and repair_pairs read SDK objects as compact() does."""
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    obj = chat.ChatCompletionMessage.model_validate(asked)
    user = {"role": "user", "content": "List the files."}
    result = {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"}
    as_dicts = [user, dumped(obj), result]
    assert ctxkeel.estimate_tokens(obj) == ctxkeel.estimate_tokens(dumped(obj))
    assert ctxkeel.estimate_tokens([user, obj, result]) == ctxkeel.estimate_tokens(as_dicts)
    assert ctxkeel.estimate_tokens((user, obj, result)) == ctxkeel.estimate_tokens(as_dicts)
    blocks = anthropic_blocks({"role": "assistant", "content": [
        {"type": "text", "text": "Listing."},
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}}]})
    assert ctxkeel.estimate_tokens(blocks) == ctxkeel.estimate_tokens(dumped(blocks))

    assert ctxkeel.check_pairs([user, obj, result]) == []
    unanswered = ctxkeel.check_pairs((user, obj))
    assert unanswered == ctxkeel.check_pairs([user, dumped(obj)]) and unanswered
    assert unanswered[0]["index"] == 1

    repaired = ctxkeel.repair_pairs([user, obj, {"role": "user", "content": "Go on."}])
    assert repaired[0] is user and repaired[1] is obj  # the caller's own objects
    assert ctxkeel.check_pairs([dumped(m) for m in repaired]) == []
    assert len(repaired) == 4 and repaired[2]["tool_call_id"] == "c1"  # the stub result


def test_offload_takes_sdk_objects(store):
    c = ctxkeel.Compactor(10 ** 6, store_dir=store, tool_offload_threshold=1000)
    big = lc_messages.ToolMessage("a line of a long listing\n" * 200, tool_call_id="call_7")
    out = c.offload(big)
    assert isinstance(out, lc_messages.ToolMessage) and out is not big
    assert out.tool_call_id == "call_7" and len(out.content) < len(big.content)
    assert c.read_evidence("call_7", limit=1000) == big.content
    small = lc_messages.ToolMessage("short", tool_call_id="call_8")
    assert c.offload(small) is small
    assert asyncio.run(c.aoffload(small)) is small


@st.composite
def sdk_histories(draw):
    shape = draw(st.sampled_from(["openai", "anthropic"]))
    messages, info = render(draw(plans(max_turns=10)), shape)
    convert = openai_object if shape == "openai" else anthropic_blocks
    sdk = []
    for m in messages:
        if m.get("role") == "assistant":
            try:
                m = convert(m)
            except Exception:  # a message the SDK's model does not take stays a dict
                pass
        sdk.append(m)
    plain = [dumped(m) for m in sdk]
    tokens = ctxkeel.estimate_tokens(ctxkeel.repair_pairs(plain, format=shape))
    ratio = draw(st.sampled_from([0.5, 0.75, 0.85, 0.97, 20.0]))
    return sdk, plain, max(1, int(tokens / ratio)), draw(good_replies())


@prop_settings(60)
@given(sdk_histories())
def test_property_sdk_objects_compact_as_their_dumps(case):
    sdk, plain, window, reply = case
    untouched = copy.deepcopy(plain)
    outcomes = []
    # One store, emptied between the runs, so that placeholders name the same paths.
    store = tempfile.mkdtemp(prefix="ck-sdkp-")
    try:
        for messages in (plain, sdk):
            shutil.rmtree(store, ignore_errors=True)
            try:
                r = compactor(store, window).compact(messages, summarize=lambda q: reply)
                outcomes.append(r)
            except ctxkeel.Error as err:
                outcomes.append(err.code)
    finally:
        shutil.rmtree(store, ignore_errors=True)
    want, got = outcomes
    if not isinstance(want, ctxkeel.CompactionResult):
        assert got == want
        return
    assert (got.tier, got.tokens_before, got.tokens_after) == \
        (want.tier, want.tokens_before, want.tokens_after)
    assert len(got.messages) == len(want.messages)
    for g, w in zip(got.messages, want.messages):
        i = next((k for k, p in enumerate(plain) if p is w), None)
        if i is not None:
            assert g is sdk[i]  # kept: the caller's own message, SDK object or dict
        else:
            assert g == w
    assert [dumped(m) for m in sdk] == untouched
