"""Drop-ins for agent frameworks: each module adapts a ``ctxkeel.Compactor`` to one framework's
own hook, so that the model sees the compacted view while the framework keeps the full history.

- ``ctxkeel.integrations.langchain.CompactionMiddleware(compactor, **options)``: an
  ``AgentMiddleware`` for LangChain v1 ``langchain.agents.create_agent``;
- ``ctxkeel.integrations.langgraph.pre_model_hook(compactor, **options)``: for
  ``langgraph.prebuilt.create_react_agent(..., pre_model_hook=...)``;
- ``ctxkeel.integrations.openai_agents.call_model_input_filter(compactor, **options)``: for the
  OpenAI Agents SDK's ``RunConfig(call_model_input_filter=...)``.

Every module imports without its framework installed; the framework is imported when an
adapter is made, and its absence is an ImportError naming the pip package. ``options`` are
``Compactor.compact``'s keywords (``summarize=``, ``tools=``), passed on to every compaction;
``summarize`` may also be a LangChain chat model, whose ``invoke`` / ``ainvoke`` is then asked
for the checkpoint. One compactor per conversation: the adapter's compactor holds that
session's checkpoint and coverage.
"""

from typing import Any, Awaitable, Callable, Dict, List, Optional, Protocol, Sequence, Union

from .._ext import HttpSummarizer

__all__ = ["AdapterSummarize", "ChatModelLike", "ToolSchemas"]


class ChatModelLike(Protocol):
    """A LangChain chat model (any Runnable taking chat messages): asked for the checkpoint
    with invoke() in compact() and ainvoke() in acompact()."""

    def invoke(self, input: Sequence[Any], /, *args: Any, **kwargs: Any) -> Any: ...
    def ainvoke(self, input: Sequence[Any], /, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...


# What an adapter's summarize= takes (the stubs spell the function's type exactly).
AdapterSummarize = Union[Callable[[Dict[str, Any]], Union[str, Awaitable[str]]],
                         HttpSummarizer, ChatModelLike]
# The tool schemas sent with each request, to count them (Compactor.compact's tools=).
ToolSchemas = Optional[List[Dict[str, Any]]]
