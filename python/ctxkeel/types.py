"""The types of ctxkeel's API, importable at run time (``from ctxkeel.types import
CompactionRecord``) as well as by type checkers; ``ctxkeel/__init__.pyi`` types the functions with
them, and ``ctxkeel`` re-exports each name.

Messages are whatever mappings the caller's SDK uses: the functions that return messages are
typed with ``M``, a TypeVar bound to ``Mapping[str, Any]``, so that a list of an SDK's TypedDicts
(openai ``ChatCompletionMessageParam``, anthropic ``MessageParam``) comes back as that type.
``Compactor.compact`` also takes an SDK's message objects (``SdkMessage``: what has
``model_dump()``), so its result is typed with ``AnyM``, bound to either.

TypedDicts whose keys are always present list them in a total base class; the keys that only
some records carry are in a ``total=False`` subclass (``typing.Required`` is 3.11+, and ctxkeel
supports 3.9).
"""

import os
from typing import (
    Any,
    Awaitable,
    Callable,
    Dict,
    List,
    Literal,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
)

__all__ = [
    "AnyM",
    "AnchorKey",
    "Anchors",
    "AnchorsArg",
    "Archive",
    "CacheEstimate",
    "CachePrices",
    "CompactionRecord",
    "Covered",
    "Estimator",
    "EstimatorName",
    "EvidenceBackend",
    "EvidenceHit",
    "Format",
    "HttpApi",
    "HttpRequest",
    "M",
    "Message",
    "OpenAIToolDefinition",
    "Offloaded",
    "PairIssue",
    "PairIssueKind",
    "PathArg",
    "PromptCache",
    "RecordCache",
    "RecordState",
    "Repair",
    "RepairKind",
    "ReplayRow",
    "ReplayTotals",
    "Retention",
    "RetentionPolicy",
    "SdkMessage",
    "Summarize",
    "SummaryRequest",
    "Tier",
    "TokenCounter",
    "ToolFormat",
]

class SdkMessage(Protocol):
    """A message object of a provider's SDK (a pydantic model: openai ``ChatCompletionMessage``,
    a LangChain ``BaseMessage``), which ctxkeel reads through ``model_dump()``."""

    def model_dump(self, *args: Any, **kwargs: Any) -> Any: ...


# A message of any dialect: the caller's own mappings (dicts, an SDK's TypedDicts).
Message = Mapping[str, Any]
M = TypeVar("M", bound=Mapping[str, Any])
# What compact() also takes: those, or an SDK's message objects (CompactionResult is of it).
AnyM = TypeVar("AnyM", bound=Union[Mapping[str, Any], SdkMessage])

Format = Literal["auto", "openai", "anthropic", "responses", "gemini", "ai-sdk", "langchain"]
EstimatorName = Literal["default", "chars4", "cl100k", "o200k"]
# A host counter: the number of tokens in a string, from the host's own tokenizer.
TokenCounter = Callable[[str], int]
Estimator = Union[EstimatorName, TokenCounter]
Tier = Literal["none", "warn", "soft", "full", "emergency"]
ToolFormat = Literal["openai", "anthropic"]
HttpApi = Literal["openai", "anthropic"]
PathArg = Union[str, "os.PathLike[str]"]
AnchorKey = Literal[
    "user_intent", "execution_progress", "key_decisions", "tried_solutions", "next_steps"
]

PairIssueKind = Literal[
    "orphan_result",
    "missing_result",
    "not_adjacent",
    "duplicate_result",
    "duplicate_call",
    "empty_id",
    "misplaced",
    "result_order",
]


class PairIssue(TypedDict):
    kind: PairIssueKind
    index: int
    part: int
    tool_call_id: str
    message: str


class Anchors(TypedDict):
    user_intent: Optional[str]
    execution_progress: Optional[str]
    key_decisions: Optional[str]
    tried_solutions: Optional[str]
    next_steps: Optional[str]


# merge_anchors' arguments: a dict like parse_anchors' (missing keys and None are N/A), or None.
AnchorsArg = Union[Anchors, Mapping[str, Optional[str]], None]


class SummaryRequest(TypedDict):
    """What a summarizer is asked: write the checkpoint for `messages`."""

    system: str
    prompt: str
    max_tokens: int
    tier: Tier
    messages: List[Message]  # the caller's own message objects being summarized
    previous: Optional[str]  # the previous checkpoint's text


# A summarizer returns the checkpoint text (Markdown sections or JSON with the anchor keys),
# directly or as an awaitable.
Summarize = Callable[[SummaryRequest], Union[str, Awaitable[str]]]


class _Offloaded(TypedDict):
    tool_call_id: str
    tool_name: str
    path: str
    bytes: int
    lines: int


class Offloaded(_Offloaded, total=False):
    ref: str  # the evidence id: the tool-call id, or "<id>#<hash>" for a reused id
    hash: str  # 16 hex digits of the output's hash


class Covered(TypedDict):
    count: int
    fingerprint: str


RepairKind = Literal[
    "orphan_dropped",
    "duplicate_dropped",
    "misplaced_dropped",
    "stub_added",
    "call_dropped",
    "result_moved",
    "kept_as_text",
]


class Repair(TypedDict):
    """One change the tool-call pairing repair made."""

    kind: RepairKind
    index: int  # the message in the list given to compact()
    tool_call_id: str


class Archive(TypedDict):
    """The evidence object that holds a folded span (messages [first, end))."""

    ref: str  # "history:<first>-<end>", readable with read_evidence
    path: str
    first: int
    end: int


class CacheEstimate(TypedDict):
    """Why a change to the view was made or waited, under prompt_cache prices."""

    horizon: int  # the calls until the view would reach full at the session's growth
    saves: int  # billed input tokens the change saves over them
    invalidates: int  # billed input tokens it costs by re-writing the cache after it


class _RecordCache(TypedDict):
    prefix_kept: int  # tokens of the view that are a prefix of the view returned before
    prefix_broken: int  # tokens of that earlier view after the prefix (re-sent or gone)


class RecordCache(_RecordCache, total=False):
    estimate: CacheEstimate  # with prompt_cache, when the change was weighed


# The session state after a compaction: "kind" is "snapshot" or "delta".
RecordState = Dict[str, Any]


class _CompactionRecord(TypedDict):
    id: str
    session_id: str
    timestamp: str
    tier: Tier
    tokens_before: int
    tokens_after: int
    ratio_before: float
    ratio_after: float
    window: int
    cache: RecordCache
    msgs_before: int
    msgs_after: int
    summarized: int
    preserved_tail: int
    offloaded: List[Offloaded]
    repairs: List[Repair]
    anchors: Anchors
    checkpoint: Optional[str]
    covered: Optional[Covered]
    duration_ms: float
    error: Optional[str]  # what went wrong, or None
    notes: List[str]  # routine decisions (escalations, folded tail messages, a fresh start)
    fallback: Optional[str]
    estimator: Union[EstimatorName, Literal["host"]]
    state: Optional[RecordState]


class CompactionRecord(_CompactionRecord, total=False):
    """One line of <store_dir>/compactions/<session_id>.jsonl (DESIGN section 8)."""

    archived: List[Archive]  # only when the compaction folded messages
    mac: str  # HMAC tag under the store's key, when the store has one


class OpenAIToolDefinition(TypedDict):
    """read_evidence_tool()'s shape: an OpenAI function tool (ChatCompletionFunctionToolParam).
    `function` is {"name", "description", "parameters"}, typed Any so that it matches the SDK's
    own FunctionDefinition, whose keys a TypedDict here would have to copy exactly."""

    type: Literal["function"]
    function: Any


class RetentionPolicy(TypedDict, total=False):
    """What the placeholder of an offloaded output keeps, for the tools a pattern matches.
    A key left out is 0 (zero means zero), except offload (True)."""

    head: int  # first lines
    tail: int  # last lines
    errors: int  # at most this many error lines
    max_bytes: int  # the preview's cap in bytes; 0: the gate's
    offload: bool  # False: the outputs always stay in the view


class CachePrices(TypedDict):
    """Prompt-cache prices per token, relative to uncached input."""

    read: float  # in (0, 1]
    write: float  # in [1, 10]


# A preset ("anthropic": 0.1 and 1.25; "openai": 0.1 and 1.0) or the prices.
PromptCache = Union[Literal["anthropic", "openai"], CachePrices]

# {pattern: policy} (first match wins, in order) or [(pattern, policy), ...].
Retention = Union[Mapping[str, RetentionPolicy], Sequence[Tuple[str, RetentionPolicy]]]


class EvidenceBackend(Protocol):
    """The host's storage for offloaded outputs. Keys are "tool_results/<session>/<file>.txt"
    made of [A-Za-z0-9._~-] and "/". Either method may be a coroutine function."""

    def put(self, key: str, text: str, /) -> Union[None, Awaitable[None]]: ...
    def get(self, key: str, /) -> Union[Optional[str], Awaitable[Optional[str]]]: ...


class _EvidenceHit(TypedDict):
    ref: str
    line: int  # counted from 0: the read_evidence offset of the line
    text: str


class EvidenceHit(_EvidenceHit, total=False):
    # Only on the last entry of a search cut short at its work limit (ref "", line 0).
    cut: bool


class _HttpRequest(TypedDict):
    prompt: str


class HttpRequest(_HttpRequest, total=False):
    """What HttpSummarizer reads from a request: a SummaryRequest has all of it."""

    system: Optional[str]  # default ""
    max_tokens: Optional[int]  # > 0; default 1024


class ReplayRow(TypedDict):
    """One model call of a replay (see ck_replay_row in ctxkeel.h)."""

    call: int
    messages: int
    view_messages: int
    history_tokens: int  # the whole history: what would be sent without ctxkeel
    tokens_before: int
    tokens_after: int  # the view sent
    ratio_before: float
    ratio_after: float
    prefix_kept: int  # tokens of the view that are a prefix of the call before's view
    prefix_broken: int  # tokens of the call before's view after that prefix
    tier: Tier
    compaction: int  # its number, 0 when the view needed no change
    summarized: int
    offloaded: int
    summary_calls: int
    summary_tokens: int
    fallback: bool
    action: str
    checkpoint: Optional[str]
    placeholder: Optional[str]
    record: Optional[CompactionRecord]


class ReplayTotals(TypedDict):
    calls: int
    per_tier: Dict[Tier, int]
    compactions: int
    summary_calls: int
    summary_tokens: int
    offloaded: int
    tokens_sent: int
    tokens_without: int
    prefix_kept: int  # summed over the calls: tokens a prompt cache can hold
    prefix_breaks: int  # calls whose view changed a message of the call before's
    peak_ratio: float
    peak_ratio_without: float
    over_window_without: int
    first_over_without: int
