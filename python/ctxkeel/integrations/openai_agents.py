"""``call_model_input_filter(compactor, **options)``: ctxkeel for the OpenAI Agents SDK.

    from agents import RunConfig, Runner
    from ctxkeel.integrations.openai_agents import call_model_input_filter

    run_config = RunConfig(call_model_input_filter=call_model_input_filter(Compactor(128_000)))

Before every model call of ``Runner.run`` (and ``run_sync``, ``run_streamed``) the filter
compacts ``model_data.input``, the Responses items, in the core's ``responses`` dialect:
reasoning items stay with the call they led to, items keep their ids, unchanged items are the
SDK's own objects. The instructions count against the window (as a system message in front,
taken off again) and are returned as they were. The filter is a coroutine function, which
the SDK awaits, so the loop keeps running while a summary is written. ``options`` are
Compactor.compact's keywords (``summarize=`` may also be a LangChain chat model; ``tools=``
the schemas sent, to count them).

This module imports without the SDK; the filter needs ``pip install openai-agents``.
"""

from typing import Any, Awaitable, Optional, Protocol

from ._common import Options, check_compactor, require

__all__ = ["call_model_input_filter"]


class InputFilter(Protocol):
    """A RunConfig(call_model_input_filter=...): a coroutine function the SDK awaits, with
    the CompactionResult of its latest call."""

    last_result: Optional[Any]

    def __call__(self, data: Any, /) -> Awaitable[Any]: ...


def _item(item):
    """An input item as the dict the core reads (the SDK's items are dicts; a pydantic item
    is dumped as the API would be sent it)."""
    if isinstance(item, dict):
        return item
    dump = getattr(item, "model_dump", None)
    if not callable(dump):
        raise TypeError("ctxkeel: call_model_input_filter: an input item must be a dict or "
                        "a pydantic model, not %s" % type(item).__name__)
    return dump(exclude_unset=True, mode="json")


def call_model_input_filter(compactor, **options):
    """A ``RunConfig(call_model_input_filter=...)`` that compacts every model input with
    ``compactor`` (one per conversation)."""
    check_compactor(compactor, "call_model_input_filter", "responses")
    sdk = require("agents.run_config", "openai-agents")
    per_call = Options("call_model_input_filter", options)

    async def compact_model_input(data):
        model_data = data.model_data
        instructions = model_data.instructions
        items = [_item(item) for item in model_data.input]
        # A pydantic item left unchanged goes back as the SDK's own object.
        dumped = {id(d): item for d, item in zip(items, model_data.input) if d is not item}
        system = None
        if isinstance(instructions, str) and instructions:
            system = {"type": "message", "role": "system", "content": instructions}
            items.insert(0, system)
        result = await compactor.acompact(items, **per_call.call(True))
        compact_model_input.last_result = result
        view = result.messages
        if system is not None and view and isinstance(view[0], dict) \
                and view[0].get("role") == "system":
            # Pinned, so it leads the view: back into the instructions it came from.
            if view[0] is not system and isinstance(view[0].get("content"), str):
                instructions = view[0]["content"]
            view = view[1:]
        return sdk.ModelInputData(input=[dumped.get(id(d), d) for d in view],
                                  instructions=instructions)

    compact_model_input.last_result = None
    return compact_model_input
