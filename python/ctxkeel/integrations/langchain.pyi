from typing import Any, Awaitable, Callable, List, Optional, Union

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage

from .. import CompactionResult, Compactor
from . import AdapterSummarize, ToolSchemas

__all__ = ["CompactionMiddleware"]

_Reply = Union[ModelResponse[Any], AIMessage, ExtendedModelResponse[Any]]

class CompactionMiddleware(AgentMiddleware[Any, Any, Any]):
    """create_agent middleware: the model is handed the compacted view of each request."""

    compactor: Compactor
    last_result: Optional[CompactionResult]
    def __init__(
        self,
        compactor: Compactor,
        *,
        summarize: Optional[AdapterSummarize] = None,
        tools: ToolSchemas = None,
    ) -> None: ...
    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> _Reply: ...
    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> _Reply: ...
