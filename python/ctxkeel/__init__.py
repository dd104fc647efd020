"""ctxkeel keeps a long-running LLM agent on course when its history outgrows the model's
context window.

The functions here are thin names for the C core in ``ctxkeel._ext``:

- ``estimate_tokens(x, *, estimator="default")`` counts the tokens of a str, a message,
  a message list or a tool-schema list (``estimator`` may be a function ``fn(text) -> int``);
- ``check_pairs(messages, *, format="auto")`` lists every tool-call pairing violation;
- ``repair_pairs(messages, *, format="auto")`` returns a list that has none, reusing the
  unchanged message objects and never modifying the input;
- ``parse_anchors(text)`` reads a checkpoint reply into its five anchors and a summary;
- ``merge_anchors(old, new)`` merges two anchor dicts, N/A never overwriting a value;
- ``Compactor(context_window, ...)`` keeps one session's history within the window:
  ``compact(messages)`` / ``await acompact(messages)`` before every model call return a
  ``CompactionResult`` whose ``messages`` are what to send; ``offload``, ``read_evidence``
  and ``search_evidence`` (and their ``a``-prefixed async forms) work with the evidence
  store (offloaded outputs and the archive of every folded span), which may be the host's own (``backend=``, sync or async ``put``/``get``);
  ``retention=`` says per tool what an offloaded output's placeholder keeps, and
  ``estimator=fn`` counts tokens with the host's own tokenizer;
- ``read_evidence_tool(format="openai")`` is the core's tool definition that lets the model
  read offloaded outputs and folded history back by ``ref`` or find them by ``pattern``
  (answer its calls with ``Compactor.handle_read_evidence``);
- ``HttpSummarizer(base_url, model, *, api="openai", ...)`` is the built-in summarizer that
  asks a model over HTTP (OpenAI-compatible or Anthropic endpoints) to write the checkpoint;
  pass it as ``summarize=`` to ``compact`` or ``acompact``;
- ``replay(messages, context_window, **compactor_options)`` feeds a recorded transcript to a
  new Compactor as an agent loop would and returns a ``Replay``: one row per model call,
  ``to_svg()``, and a chart in a notebook. ``python -m ctxkeel`` (or the ``ctxkeel`` command)
  is the command line.

Errors: ``Error`` is the base class; bad input raises ``InputError``, which is also a
``ValueError`` and names the message index and field; ``ContextOverflowError`` says that the
pinned messages and tool schemas alone do not fit the window (code "CK_EOVERFLOW").

Types: ``ctxkeel.types`` holds every type name of the stubs (``SummaryRequest``,
``CompactionRecord``, ``Tier``...), importable at run time; they are re-exported here too.
"""

from ._compactor import CompactionResult, Compactor
from ._replay import Replay, replay
from ._ext import (
    STATUS_CODES,
    ContextOverflowError,
    Error,
    HttpSummarizer,
    InputError,
    __version__,
    merge_anchors,
    parse_anchors,
    read_evidence_tool,
)
from ._sdk import check_pairs, estimate_tokens, repair_pairs
# The type names of the stubs (ctxkeel/__init__.pyi), importable here as from ctxkeel.types.
from .types import *  # noqa: F401,F403

__all__ = [
    "STATUS_CODES",
    "CompactionResult",
    "Compactor",
    "ContextOverflowError",
    "Error",
    "HttpSummarizer",
    "InputError",
    "Replay",
    "__version__",
    "check_pairs",
    "estimate_tokens",
    "merge_anchors",
    "parse_anchors",
    "read_evidence_tool",
    "repair_pairs",
    "replay",
]
