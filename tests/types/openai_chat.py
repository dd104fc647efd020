"""OpenAI Chat Completions under mypy --strict and pyright --strict: the SDK's TypedDicts go into
ctxkeel and the view comes back as the same type, for client.chat.completions.create, without a
cast. Type-checked only (make py-types); never run."""

from typing import List, Optional, Sequence, Tuple

from openai import OpenAI
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam

import ctxkeel
from ctxkeel.types import CompactionRecord, SummaryRequest, Tier

client = OpenAI()
compactor = ctxkeel.Compactor(128_000)
tools: List[ChatCompletionToolUnionParam] = [
    {"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}},
    ctxkeel.read_evidence_tool(),
]


def summarize(request: SummaryRequest) -> str:
    reply = client.chat.completions.create(
        model="gpt-5-mini",
        messages=[
            {"role": "developer", "content": request["system"]},
            {"role": "user", "content": request["prompt"]},
        ],
        max_completion_tokens=request["max_tokens"],
    )
    return reply.choices[0].message.content or ""


def turn(history: List[ChatCompletionMessageParam]) -> Optional[str]:
    history.append({"role": "developer", "content": "Be brief."})
    result = compactor.compact(history, tools=tools, summarize=summarize)
    view: List[ChatCompletionMessageParam] = result.messages
    tier: Tier = result.tier
    record: Optional[CompactionRecord] = result.record
    if record is not None:
        # Keys every record has need no .get().
        print(tier, record["tokens_after"], record["window"], record["fallback"])
        for archive in record.get("archived", []):
            print(archive["ref"])
    response = client.chat.completions.create(model="gpt-5-mini", messages=view, tools=tools)
    if response.usage is not None:
        compactor.observe_usage(response.usage)
    return response.choices[0].message.content


def readonly(history: Sequence[ChatCompletionMessageParam]) -> int:
    # Any sequence, a tuple included; the other functions take the same lists.
    as_tuple: Tuple[ChatCompletionMessageParam, ...] = tuple(history)
    again: List[ChatCompletionMessageParam] = compactor.compact(as_tuple).messages
    repaired: List[ChatCompletionMessageParam] = ctxkeel.repair_pairs(again)
    last: ChatCompletionMessageParam = compactor.offload(repaired[-1])
    as_tuple = tuple(repaired)  # a tuple is read as the list of its messages
    return len(ctxkeel.check_pairs(as_tuple)) + ctxkeel.estimate_tokens(repaired) + len(last)


async def aturn(history: List[ChatCompletionMessageParam]) -> List[ChatCompletionMessageParam]:
    result = await compactor.acompact(history, summarize=ctxkeel.HttpSummarizer(
        "https://api.openai.com/v1", "gpt-5-mini"))
    return result.messages


def session_turn(message: ChatCompletionMessageParam) -> int:
    # The append-only session: each message appended once, the view sent.
    length: int = compactor.append(message)
    view = compactor.view(tools=tools, summarize=summarize)
    client.chat.completions.create(model="gpt-5-mini", messages=view.messages, tools=tools)
    return length + len(compactor.session)


def sdk_objects_turn(history: List[ChatCompletionMessageParam]) -> None:
    # The SDK's reply object itself goes into the list, as OpenAI loops append it; the view's
    # messages are the caller's objects or dicts.
    reply = client.chat.completions.create(model="gpt-5-mini", messages=history)
    mixed: List[object] = []
    messages = [*history, reply.choices[0].message]
    result = compactor.compact(messages)
    mixed.extend(result.messages)
    compactor.append(reply.choices[0].message)
    # The module's message functions read them the same way.
    tokens: int = ctxkeel.estimate_tokens(messages)
    tokens += ctxkeel.estimate_tokens(reply.choices[0].message)
    issues = ctxkeel.check_pairs(messages)
    repaired = ctxkeel.repair_pairs(messages)
    mixed.extend(repaired)
    print(tokens, len(issues), compactor.offload(reply.choices[0].message))
