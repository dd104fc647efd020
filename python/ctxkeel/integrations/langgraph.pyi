from typing import Any, Dict, List, Optional

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableLambda

from .. import Compactor
from . import AdapterSummarize, ToolSchemas

__all__ = ["pre_model_hook"]

def pre_model_hook(
    compactor: Compactor,
    *,
    summarize: Optional[AdapterSummarize] = None,
    tools: ToolSchemas = None,
) -> RunnableLambda[Any, Dict[str, List[BaseMessage]]]:
    """For create_react_agent(pre_model_hook=...): returns {"llm_input_messages": view}."""
