from typing import Any, Awaitable, Callable, Dict, List, Optional, Protocol, Sequence, Union

from .. import HttpSummarizer, Summarize

__all__ = ["AdapterSummarize", "ChatModelLike", "ToolSchemas"]

class ChatModelLike(Protocol):
    """A LangChain chat model (any Runnable taking chat messages): asked for the checkpoint
    with invoke() in compact() and ainvoke() in acompact()."""

    def invoke(self, input: Sequence[Any], /, *args: Any, **kwargs: Any) -> Any: ...
    def ainvoke(self, input: Sequence[Any], /, *args: Any, **kwargs: Any) -> Awaitable[Any]: ...

# What an adapter's summarize= takes.
AdapterSummarize = Union[Summarize, HttpSummarizer, ChatModelLike]
# The tool schemas sent with each request, to count them (Compactor.compact's tools=).
ToolSchemas = Optional[List[Dict[str, Any]]]
