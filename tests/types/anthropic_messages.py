"""Anthropic Messages under mypy --strict and pyright --strict: MessageParam lists into ctxkeel and
the view back to client.messages.create, read_evidence in the SDK's own tool list. Type-checked
only (make py-types); never run."""

from typing import Dict, List, Optional

from anthropic import Anthropic
from anthropic.types import MessageParam, ToolParam

import ctxkeel
from ctxkeel.types import EvidenceHit, Repair, RetentionPolicy

client = Anthropic()
store: Dict[str, str] = {}


class Backend:
    def put(self, key: str, text: str, /) -> None:
        store[key] = text

    def get(self, key: str, /) -> Optional[str]:
        return store.get(key)


policy: RetentionPolicy = {"head": 20, "tail": 20}
compactor = ctxkeel.Compactor(
    200_000, format="anthropic", backend=Backend(), retention={"bash": policy})
tools: List[ToolParam] = [{"name": "bash", "input_schema": {"type": "object"}}]


async def summarize(request: ctxkeel.SummaryRequest) -> str:
    reply = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=request["max_tokens"],
        system=request["system"],
        messages=[{"role": "user", "content": request["prompt"]}],
    )
    first = reply.content[0]
    return first.text if first.type == "text" else ""


async def turn(history: List[MessageParam]) -> List[Repair]:
    result = await compactor.acompact(history, tools=tools, summarize=summarize)
    response = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=4096, messages=result.messages, tools=tools)
    compactor.observe_usage(response.usage)
    history.append({"role": "assistant", "content": response.content})
    hits: List[EvidenceHit] = compactor.search_evidence(None, "error")
    print([hit["line"] for hit in hits])
    return result.repairs
