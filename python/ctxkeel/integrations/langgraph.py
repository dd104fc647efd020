"""``pre_model_hook(compactor, **options)``: ctxkeel as LangGraph's pre-model hook.

    from langgraph.prebuilt import create_react_agent
    from ctxkeel.integrations.langgraph import pre_model_hook

    agent = create_react_agent(model, tools, pre_model_hook=pre_model_hook(Compactor(128_000)))

The hook compacts the state's ``messages`` before every model call and returns
``{"llm_input_messages": view}``, which the model is given instead; the state keeps the full
history. It is a Runnable with a sync and an async body, so ``invoke`` and ``ainvoke`` (and
streaming) of the graph both work, the async one through ``Compactor.acompact``. Messages the
view leaves unchanged are the state's own objects. ``options`` are Compactor.compact's
keywords (``summarize=`` may also be a LangChain chat model; ``tools=`` the schemas sent, to
count them). The agent's ``prompt`` is added after the hook and is not counted.

This module imports without LangGraph; ``pre_model_hook`` needs ``pip install langgraph``.
"""

from ._common import Converted, Options, check_compactor, require

__all__ = ["pre_model_hook"]


def _messages(state):
    """The state's messages: a dict state's key or a pydantic state's attribute."""
    messages = state.get("messages") if isinstance(state, dict) else getattr(
        state, "messages", None)
    if not isinstance(messages, (list, tuple)):
        raise TypeError("ctxkeel: pre_model_hook needs a state with a 'messages' list, not %s"
                        % type(messages).__name__)
    return messages


def pre_model_hook(compactor, **options):
    """A Runnable for ``create_react_agent(..., pre_model_hook=...)`` that compacts the
    model's input with ``compactor`` (one per conversation)."""
    check_compactor(compactor, "pre_model_hook", "langchain")
    runnables = require("langchain_core.runnables", "langgraph")
    per_call = Options("pre_model_hook", options)

    def compact_messages(state):
        converted = Converted(_messages(state))
        result = compactor.compact(converted.dicts, **per_call.call(False, converted))
        return {"llm_input_messages": converted.back(result.messages)}

    async def acompact_messages(state):
        converted = Converted(_messages(state))
        result = await compactor.acompact(converted.dicts, **per_call.call(True, converted))
        return {"llm_input_messages": converted.back(result.messages)}

    return runnables.RunnableLambda(compact_messages, afunc=acompact_messages,
                                    name="ctxkeel_pre_model_hook")
