from typing import Any, Awaitable, List, Optional, Protocol

from agents.run_config import CallModelData, ModelInputData

from .. import CompactionResult, Compactor
from . import AdapterSummarize, ToolSchemas

__all__ = ["call_model_input_filter"]

class InputFilter(Protocol):
    """A RunConfig(call_model_input_filter=...): a coroutine function the SDK awaits."""

    last_result: Optional[CompactionResult]
    def __call__(self, data: CallModelData[Any], /) -> Awaitable[ModelInputData]: ...

def call_model_input_filter(
    compactor: Compactor,
    *,
    summarize: Optional[AdapterSummarize] = None,
    tools: ToolSchemas = None,
) -> InputFilter: ...
