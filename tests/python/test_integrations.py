"""ctxkeel.integrations: each adapter in its framework's own agent loop.

Every loop runs 30+ model calls against the framework's own fake chat model (the Agents SDK: a
``Model`` of ours, as the SDK's tests do), with 20 KB tool outputs (one of 120 KB, which only
the emergency tier can fit), 3 KB of the model's own text per call and a small window, so that
compaction (offloading and folding into a checkpoint) happens again and again.
Each test checks what the model was given on every call: within the window by the
compactor's own estimate (tool schemas included where the adapter counts them), no tool-call
pairing violation, the task there verbatim; and that the framework's state still holds the
whole history, that the summarizer was called through the adapter and that the compactions
were recorded.
"""

import asyncio
import json
import subprocess
import sys
import textwrap
import warnings

import pytest

import ctxkeel
from compaction_support import checkpoint_reply, fresh_dir
from test_http import KEY_ENV, NEXT_STEPS, provider  # noqa: F401 (provider: a fixture)

pytest.importorskip("langchain")
pytest.importorskip("langgraph")
pytest.importorskip("agents")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import AgentMiddleware  # noqa: E402
from langchain_core.language_models.fake_chat_models import (  # noqa: E402
    FakeListChatModel,
    FakeMessagesListChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from ctxkeel.integrations._common import to_dict  # noqa: E402
from ctxkeel.integrations.langchain import CompactionMiddleware  # noqa: E402
from ctxkeel.integrations.langgraph import pre_model_hook  # noqa: E402
from ctxkeel.integrations.openai_agents import call_model_input_filter  # noqa: E402

WINDOW = 24000
CALLS = 32  # model calls per loop: 31 tool calls, then the answer
BIG_STEP = 20  # the step whose output is 120 KB
TASK = "Find the step whose log reports the checksum mismatch and explain it."
SYSTEM = "You are a careful log reader."


def log_text(step):
    """The output of read_log(step): 20 KB of distinct lines (120 KB at BIG_STEP)."""
    size = 120_000 if step == BIG_STEP else 20_000
    lines, n = [], 0
    while sum(len(x) + 1 for x in lines) < size:
        lines.append("step %d line %d: worker=%d state=ok bytes=%d" % (step, n, n % 7, n * 31))
        n += 1
    return "\n".join(lines)


def notes(step):
    """What the model writes with each call: 3 KB of reasoning, which offloading cannot
    shrink, so that the history must be folded into a checkpoint too."""
    return " ".join("Step %d: the counters look plausible, checking worker %d next." % (step, k)
                    for k in range(48))


def read_log(step: int) -> str:
    """Returns the log of one step."""
    return log_text(step)


def compactor_for(tmp_path, records):
    return ctxkeel.Compactor(WINDOW, store_dir=fresh_dir(tmp_path), on_compaction=records.append)


class Summaries:
    """A summarizer, sync or async, that counts its calls and writes a valid checkpoint."""

    def __init__(self):
        self.calls = 0
        self.spans = []  # the messages of each request

    def __call__(self, request):
        self.calls += 1
        assert request["prompt"] and request["messages"]
        self.spans.append(request["messages"])
        return checkpoint_reply(request)

    async def asummarize(self, request):
        await asyncio.sleep(0)
        return self(request)


def tools_tokens(schemas):
    return ctxkeel.estimate_tokens(schemas) if schemas else 0


def check_view(dicts, fmt, tool_tokens=0):
    """What one model call was given: within the window, validly paired, the task there."""
    tokens = ctxkeel.estimate_tokens(dicts) + tool_tokens
    assert tokens <= WINDOW, "the model was given %d tokens" % tokens
    assert ctxkeel.check_pairs(dicts, format=fmt) == []
    texts = [d.get("content") for d in dicts]
    assert TASK in texts, "the task is not in the view verbatim"
    return tokens


def check_unchanged_kept(view, history):
    """Every message of the view that equals one of the history is that very object."""
    dumps = [(h, to_dict(h)) for h in history]
    for message in view:
        same = [h for h, d in dumps if d == to_dict(message)]
        if same:
            assert any(message is h for h in same), message


def check_records(records, summaries):
    tiers = {r["tier"] for r in records}
    assert summaries.calls >= 1
    assert {"soft", "full", "emergency"} <= tiers, tiers


# ---- LangChain v1 create_agent ---------------------------------------------------------------


class ToolCallingFake(FakeMessagesListChatModel):
    """LangChain's fake chat model, able to take tools (it answers from its script anyway)."""

    def bind_tools(self, tools, **kwargs):
        return self


def scripted_replies(prefix):
    replies = [AIMessage(content=notes(step), tool_calls=[
        {"name": "read_log", "args": {"step": step}, "id": "%s%d" % (prefix, step),
         "type": "tool_call"}]) for step in range(1, CALLS)]
    return replies + [AIMessage(content="Step 7 reports the mismatch.")]


class Seen(AgentMiddleware):
    """Inside CompactionMiddleware: records each request the model is handed, with the
    state's messages at that point."""

    def __init__(self):
        super().__init__()
        self.requests = []

    def wrap_model_call(self, request, handler):
        self.requests.append((request, list(request.state["messages"])))
        return handler(request)

    async def awrap_model_call(self, request, handler):
        self.requests.append((request, list(request.state["messages"])))
        return await handler(request)


def run_create_agent(tmp_path, asynchronous):
    records, summaries, seen = [], Summaries(), Seen()
    compactor = compactor_for(tmp_path, records)
    summarize = summaries.asummarize if asynchronous else summaries
    middleware = CompactionMiddleware(compactor, summarize=summarize)
    agent = create_agent(ToolCallingFake(responses=scripted_replies("lc")), [tool(read_log)],
                         system_prompt=SYSTEM, middleware=[middleware, seen])
    task = {"messages": [HumanMessage(TASK)]}
    config = {"recursion_limit": 4 * CALLS}
    state = asyncio.run(agent.ainvoke(task, config)) if asynchronous else agent.invoke(task, config)
    return state, records, summaries, seen, middleware


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_create_agent_middleware(tmp_path, asynchronous):
    state, records, summaries, seen, middleware = run_create_agent(tmp_path, asynchronous)
    assert len(seen.requests) == CALLS
    schemas = middleware._tools[1]
    assert schemas and schemas[0]["function"]["name"] == "read_log"
    compacted = 0
    for request, history in seen.requests:
        given = [request.system_message] + list(request.messages)
        check_view([to_dict(m) for m in given], "langchain", tools_tokens(schemas))
        assert request.system_message.content == SYSTEM
        assert request.messages[0] is history[0]  # the task, the state's own object
        check_unchanged_kept(request.messages, history)
        compacted += len(request.messages) < len(history)
    assert compacted >= CALLS // 2
    # The graph state keeps the whole history: every call, every full output.
    messages = state["messages"]
    assert len(messages) == 1 + 2 * (CALLS - 1) + 1
    outputs = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.content for m in outputs] == [log_text(s) for s in range(1, CALLS)]
    check_records(records, summaries)
    # The summarizer is shown the span as the request's own message objects.
    state_ids = {id(m) for m in messages} | {id(r.system_message) for r, _ in seen.requests}
    assert all(id(m) in state_ids for span in summaries.spans for m in span)
    assert middleware.last_result.record is not None or middleware.last_result.tier == "none"


class ChatSummarizer(FakeListChatModel):
    """LangChain's fake chat model as a summarizer, counting how it was called."""

    used: list = []

    def invoke(self, input, *args, **kwargs):
        self.used.append("invoke")
        return super().invoke(input, *args, **kwargs)

    async def ainvoke(self, input, *args, **kwargs):
        self.used.append("ainvoke")
        return await super().ainvoke(input, *args, **kwargs)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_create_agent_chat_model_summarizer(tmp_path, asynchronous):
    """A LangChain chat model as summarize=: the adapter asks it for the checkpoint (invoke
    in a sync loop, ainvoke in an async one), and its reply is the checkpoint the model is
    shown."""
    records, seen = [], Seen()
    compactor = compactor_for(tmp_path, records)
    reply = checkpoint_reply({"messages": [1], "tier": "full"}).replace(
        "Keep the public API unchanged.", "Written by the chat model.")
    summarizer = ChatSummarizer(responses=[reply], used=[])
    agent = create_agent(ToolCallingFake(responses=scripted_replies("cm")), [tool(read_log)],
                         middleware=[CompactionMiddleware(compactor, summarize=summarizer),
                                     seen])
    task = {"messages": [HumanMessage(TASK)]}
    config = {"recursion_limit": 4 * CALLS}
    asyncio.run(agent.ainvoke(task, config)) if asynchronous else agent.invoke(task, config)
    summarized = [r for r in records if r["tier"] in ("soft", "full") and r["summarized"]]
    assert summarized
    assert all(not r["fallback"] for r in summarized), summarized
    assert all(r["anchors"]["key_decisions"] == "Written by the chat model."
               for r in summarized)
    assert set(summarizer.used) == {"ainvoke" if asynchronous else "invoke"}
    shown = [m for request, _ in seen.requests for m in request.messages
             if isinstance(m, HumanMessage) and "Written by the chat model." in m.content]
    assert shown


def test_middleware_options_are_checked(tmp_path):
    compactor = ctxkeel.Compactor(WINDOW, store_dir=fresh_dir(tmp_path))
    with pytest.raises(TypeError, match="keep_tail"):
        CompactionMiddleware(compactor, keep_tail=3)
    with pytest.raises(TypeError, match="Compactor"):
        CompactionMiddleware(object())
    with pytest.raises(TypeError, match="one argument"):
        CompactionMiddleware(compactor, summarize=lambda a, b: "")
    with pytest.raises(TypeError, match="summarize must be"):
        pre_model_hook(compactor, summarize="a model name")
    with pytest.raises(ValueError, match="format='openai'"):
        pre_model_hook(ctxkeel.Compactor(WINDOW, store_dir=fresh_dir(tmp_path),
                                         format="openai"))
    with pytest.raises(ValueError, match="responses"):
        call_model_input_filter(ctxkeel.Compactor(WINDOW, store_dir=fresh_dir(tmp_path),
                                                  format="langchain"))
    call_model_input_filter(ctxkeel.Compactor(WINDOW, store_dir=fresh_dir(tmp_path),
                                              format="responses"))


# ---- LangGraph create_react_agent ------------------------------------------------------------


class RecordingFake(ToolCallingFake):
    """Records the messages of every call."""

    received: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.received.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


def run_react_agent(tmp_path, asynchronous, summarize):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph 1
        from langgraph.prebuilt import create_react_agent

        records = []
        compactor = compactor_for(tmp_path, records)
        model = RecordingFake(responses=scripted_replies("lg"), received=[])
        agent = create_react_agent(model, [tool(read_log)], prompt=SYSTEM,
                                   pre_model_hook=pre_model_hook(compactor, summarize=summarize))
    task = {"messages": [HumanMessage(TASK)]}
    config = {"recursion_limit": 4 * CALLS}
    state = asyncio.run(agent.ainvoke(task, config)) if asynchronous else agent.invoke(task, config)
    return state, records, model


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_react_agent_pre_model_hook(tmp_path, asynchronous):
    summaries = Summaries()
    state, records, model = run_react_agent(
        tmp_path, asynchronous, summaries.asummarize if asynchronous else summaries)
    assert len(model.received) == CALLS
    sizes = []
    for given in model.received:
        assert given[0].content == SYSTEM
        sizes.append(check_view([to_dict(m) for m in given], "langchain"))
    assert max(sizes) > WINDOW * 0.5  # the views were full enough for compaction to matter
    messages = state["messages"]
    assert len(messages) == 1 + 2 * (CALLS - 1) + 1
    assert [m.content for m in messages if isinstance(m, ToolMessage)] == [
        log_text(s) for s in range(1, CALLS)]
    assert model.received[-1][1] is messages[0]  # the state's own task message
    for given in model.received:
        check_unchanged_kept(given[1:], messages)
    check_records(records, summaries)


# ---- OpenAI Agents SDK -----------------------------------------------------------------------


def agents_model(received):
    """A Model of the Agents SDK that calls read_log for steps 1..CALLS-1, each call after a
    reasoning item, then answers; it records the input and instructions of every call."""
    from agents import Model, ModelResponse, Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
    )
    from openai.types.responses.response_reasoning_item import Summary

    class Scripted(Model):
        async def get_response(self, system_instructions, input, model_settings, tools,
                               output_schema, handoffs, tracing, **kwargs):
            received.append((system_instructions, list(input)))
            step = len(received)
            if step < CALLS:
                output = [
                    ResponseReasoningItem(id="rs_%d" % step, type="reasoning", summary=[
                        Summary(type="summary_text", text=notes(step))]),
                    ResponseFunctionToolCall(
                        id="fc_%d" % step, call_id="call_%d" % step, type="function_call",
                        name="read_log", arguments=json.dumps({"step": step}),
                        status="completed")]
            else:
                output = [ResponseOutputMessage(
                    id="msg_done", type="message", role="assistant", status="completed",
                    content=[ResponseOutputText(type="output_text", annotations=[],
                                                text="Step 7 reports the mismatch.")])]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        async def stream_response(self, *args, **kwargs):
            raise NotImplementedError
            yield  # an async generator, as the interface wants

    return Scripted()


def run_agents_sdk(tmp_path, asynchronous, summarize):
    from agents import Agent, RunConfig, Runner, function_tool

    records, received = [], []
    compactor = compactor_for(tmp_path, records)
    filt = call_model_input_filter(compactor, summarize=summarize)
    agent = Agent(name="reader", instructions=SYSTEM, tools=[function_tool(read_log)],
                  model=agents_model(received))
    run_config = RunConfig(call_model_input_filter=filt, tracing_disabled=True)
    if asynchronous:
        result = asyncio.run(Runner.run(agent, TASK, run_config=run_config, max_turns=CALLS + 5))
    else:
        result = Runner.run_sync(agent, TASK, run_config=run_config, max_turns=CALLS + 5)
    assert result.final_output == "Step 7 reports the mismatch."
    return result, records, received, filt


@pytest.mark.parametrize("asynchronous", [False, True], ids=["run_sync", "run"])
def test_agents_sdk_input_filter(tmp_path, asynchronous):
    summaries = Summaries()
    result, records, received, filt = run_agents_sdk(
        tmp_path, asynchronous, summaries.asummarize if asynchronous else summaries)
    assert len(received) == CALLS
    for instructions, items in received:
        assert instructions == SYSTEM
        check_view([{"type": "message", "role": "system", "content": SYSTEM}] + items,
                   "responses")
        # A reasoning item stays right before the call it led to, ids and all.
        for k, item in enumerate(items):
            if item.get("type") == "reasoning":
                follower = items[k + 1]
                assert follower.get("type") == "function_call"
                assert follower["id"] == "fc_" + item["id"][3:]
    # The run's own history is whole.
    history = result.to_input_list()
    outputs = [i["output"] for i in history if i.get("type") == "function_call_output"]
    assert outputs == [log_text(s) for s in range(1, CALLS)]
    check_records(records, summaries)
    assert filt.last_result is not None


def test_agents_sdk_filter_on_its_own(tmp_path):
    """The filter called as the SDK calls it, on a history with a pydantic item (as a host may
    put in the input): unchanged items come back as the same objects, the pydantic one too,
    compacted ones as new dicts; the instructions are kept."""
    from agents.run_config import CallModelData, ModelInputData
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    answer = ResponseOutputMessage(id="msg_1", type="message", role="assistant",
                                   status="completed", content=[ResponseOutputText(
                                       type="output_text", annotations=[], text="Reading.")])
    items = [{"role": "user", "content": TASK}, answer]
    for step in range(1, 9):
        items.append({"type": "function_call", "call_id": "c%d" % step, "name": "read_log",
                      "arguments": json.dumps({"step": step})})
        items.append({"type": "function_call_output", "call_id": "c%d" % step,
                      "output": log_text(step)})
    compactor = ctxkeel.Compactor(WINDOW, store_dir=fresh_dir(tmp_path))
    filt = call_model_input_filter(compactor)
    data = CallModelData(model_data=ModelInputData(input=list(items), instructions=SYSTEM),
                         agent=None, context=None)
    out = asyncio.run(filt(data))
    assert isinstance(out, ModelInputData) and out.instructions == SYSTEM
    assert filt.last_result.tier != "none"
    assert out.input[0] is items[0] and out.input[1] is answer
    assert [i.get("call_id") for i in out.input[2:]] == [i["call_id"] for i in items[2:]]
    assert any(a is not b for a, b in zip(out.input, items))  # outputs became placeholders
    assert all(a is b or a != b for a, b in zip(out.input, items))
    check_view([{"type": "message", "role": "system", "content": SYSTEM}] + [
        i if isinstance(i, dict) else i.model_dump(exclude_unset=True) for i in out.input],
        "responses")


# ---- the built-in HTTP summarizer through the adapters ----------------------------------------


@pytest.mark.parametrize("loop", ["langgraph-sync", "agents-sdk-async"])
def test_http_summarizer_through_the_adapters(tmp_path, provider, monkeypatch, loop):
    """An HttpSummarizer as summarize= (compact()'s transfer thread in the LangGraph hook's
    sync body, acompact()'s in the Agents SDK's filter): the provider is asked, and its reply
    is the checkpoint."""
    monkeypatch.setenv(KEY_ENV, "sk-test")
    provider.reset()
    summarizer = ctxkeel.HttpSummarizer(provider.openai_url, "gpt-test", api_key_env=KEY_ENV)
    if loop == "langgraph-sync":
        records = run_react_agent(tmp_path, False, summarizer)[1]
    else:
        records = run_agents_sdk(tmp_path, True, summarizer)[1]
    summarized = [r for r in records if r["summarized"]]
    assert summarized and len(provider.seen()) >= len(
        [r for r in summarized if r["tier"] in ("soft", "full")]) > 0
    assert all(not r["fallback"] for r in summarized), [r["fallback"] for r in summarized]
    assert any(r["anchors"]["next_steps"] == NEXT_STEPS for r in summarized)


# ---- without the frameworks ------------------------------------------------------------------


def test_modules_import_without_frameworks(tmp_path):
    """With langchain, langgraph and the Agents SDK hidden, every module imports, and making
    an adapter is an ImportError naming the pip package."""
    script = textwrap.dedent("""
        import sys

        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("langchain", "langchain_core", "langgraph", "agents"):
                    raise ImportError("hidden: " + name)
                return None

        sys.meta_path.insert(0, Hide())
        import ctxkeel
        import ctxkeel.integrations
        from ctxkeel.integrations import langchain, langgraph, openai_agents
        compactor = ctxkeel.Compactor(10000, store_dir=sys.argv[1])
        for make, package in ((lambda: langchain.CompactionMiddleware, "langchain"),
                              (lambda: langgraph.pre_model_hook(compactor), "langgraph"),
                              (lambda: openai_agents.call_model_input_filter(compactor),
                               "openai-agents")):
            try:
                make()
            except ImportError as exc:
                assert "pip install " + package in str(exc), str(exc)
            else:
                raise AssertionError(package + " was not needed")
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script, fresh_dir(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_stubs_match_the_modules(tmp_path):
    """The .pyi files of ctxkeel.integrations say what the modules define (stubtest; skipped
    where mypy is not installed)."""
    pytest.importorskip("mypy.stubtest")
    done = subprocess.run([sys.executable, "-m", "mypy.stubtest", "ctxkeel.integrations"],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
