"""Wrong uses the stubs refuse: every line marked `# type: ignore` must be an error, since mypy
--strict (warn_unused_ignores) and pyright (reportUnnecessaryTypeIgnoreComment, in
pyrightconfig.json) both fail on a mark that suppresses nothing. Type-checked only; never run."""

from typing import List

from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam

import ctxkeel
from ctxkeel.types import CompactionRecord, SummaryRequest


def wrong(openai: List[ChatCompletionMessageParam], record: CompactionRecord) -> None:
    compactor = ctxkeel.Compactor(8_000)
    compactor.compact("hello")  # type: ignore
    compactor.compact([1, 2])  # type: ignore
    # The view keeps the caller's dialect: OpenAI in, not Anthropic out.
    view: List[MessageParam] = compactor.compact(openai).messages  # type: ignore
    # The core's own functions read lists and tuples, not other iterables.
    as_set = frozenset(["hello"])
    ctxkeel.check_pairs(as_set)  # type: ignore
    ctxkeel.Compactor("8000")  # type: ignore
    ctxkeel.read_evidence_tool("gemini")  # type: ignore
    ctxkeel.Compactor(8_000, format="xml")  # type: ignore

    def count(request: SummaryRequest) -> int:
        return len(request["prompt"])

    compactor.compact(openai, summarize=count)  # type: ignore
    compactor.compact(openai, tools=["read_evidence"])  # type: ignore
    tokens: str = record["tokens_after"]  # type: ignore
    print(view, tokens)
