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
    Union,
    final,
)

from ._ext import CancelToken

__version__: str

# Every status code of the core: name -> (value, text), e.g. "CK_ETYPE": (-4, "...").
STATUS_CODES: Dict[str, Tuple[int, str]]

Message = Dict[str, Any]
Format = Literal["auto", "openai", "anthropic"]
EstimatorName = Literal["default", "chars4", "cl100k", "o200k"]
# A host counter: the number of tokens in a string, from the host's own tokenizer.
TokenCounter = Callable[[str], int]
Estimator = Union[EstimatorName, TokenCounter]
AnchorKey = Literal[
    "user_intent", "execution_progress", "key_decisions", "tried_solutions", "next_steps"
]

class Error(Exception):
    """Base class of ctxkeel's errors."""

    code: Optional[str]
    index: Optional[int]
    where: Optional[str]
    offset: Optional[int]

class InputError(Error, ValueError):
    """The input is wrong; the message names the message index and field."""

class ContextOverflowError(Error):
    """The pinned messages and the tool schemas alone (with a bare checkpoint) exceed the
    window (code "CK_EOVERFLOW"); the message says how many tokens they need."""

class PairIssue(TypedDict):
    kind: Literal[
        "orphan_result",
        "missing_result",
        "not_adjacent",
        "duplicate_result",
        "duplicate_call",
        "empty_id",
        "misplaced",
        "result_order",
    ]
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

def estimate_tokens(
    x: Union[str, Message, List[Message], List[Dict[str, Any]]],
    *,
    estimator: Estimator = "default",
) -> int: ...
def check_pairs(messages: List[Message], *, format: Format = "auto") -> List[PairIssue]: ...
def repair_pairs(messages: List[Message], *, format: Format = "auto") -> List[Message]: ...
def parse_anchors(text: Union[str, bytes, bytearray, memoryview]) -> Tuple[Anchors, str]: ...
# old and new: a dict like parse_anchors' (missing keys and None are N/A), or None.
AnchorsArg = Union[Anchors, Dict[str, Optional[str]], None]

def merge_anchors(old: AnchorsArg, new: AnchorsArg) -> Anchors: ...

Tier = Literal["none", "warn", "soft", "full", "emergency"]
ToolFormat = Literal["openai", "anthropic"]

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

class Offloaded(TypedDict):
    tool_call_id: str
    tool_name: str
    path: str
    bytes: int
    lines: int

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

class RecordCache(TypedDict):
    prefix_kept: int  # tokens of the view that are a prefix of the view returned before
    prefix_broken: int  # tokens of that earlier view after the prefix (re-sent or gone)

class CompactionRecord(TypedDict, total=False):
    """One line of <store_dir>/compactions/<session_id>.jsonl (DESIGN section 8)."""

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
    archive: Archive  # only when a span was folded
    anchors: Dict[str, Optional[str]]
    checkpoint: Optional[str]
    covered: Optional[Covered]
    duration_ms: float
    error: Optional[str]  # what went wrong, or None
    notes: List[str]  # routine decisions (escalations, folded tail messages, a fresh start)
    fallback: Optional[str]
    estimator: Union[EstimatorName, Literal["host"]]
    state: Dict[str, Any]  # "kind": "snapshot" or "delta"
    mac: str  # HMAC tag under the store's key

class RetentionPolicy(TypedDict, total=False):
    """What the placeholder of an offloaded output keeps, for the tools a pattern matches.
    A key left out is 0 (zero means zero), except offload (True)."""

    head: int  # first lines
    tail: int  # last lines
    errors: int  # at most this many error lines
    max_bytes: int  # the preview's cap in bytes; 0: the gate's
    offload: bool  # False: the outputs always stay in the view

# {pattern: policy} (first match wins, in order) or [(pattern, policy), ...].
Retention = Union[Dict[str, RetentionPolicy], Sequence[Tuple[str, RetentionPolicy]]]

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

class CompactionResult:
    """What Compactor.compact returns."""

    messages: List[Message]
    tier: Tier
    record: Optional[CompactionRecord]
    tokens_before: int
    tokens_after: int
    ratio_before: float
    ratio_after: float
    repairs: List[Repair]
    cache: RecordCache
    def __init__(
        self,
        messages: List[Message],
        tier: Tier,
        record: Optional[CompactionRecord],
        tokens_before: int,
        tokens_after: int,
        ratio_before: float = 0.0,
        ratio_after: float = 0.0,
        repairs: Sequence[Repair] = (),
        cache: Optional[RecordCache] = None,
    ) -> None: ...
    def _repr_html_(self) -> str: ...

class Compactor:
    """One agent session's compactor: call compact() before every model call."""

    def __init__(
        self,
        context_window: int,
        *,
        session_id: Optional[str] = None,
        store_dir: Union[str, "os.PathLike[str]"] = ".ctxkeel",
        warn: float = 0.60,
        soft: float = 0.70,
        full: float = 0.80,
        emergency: float = 0.95,
        keep_tail: int = 6,
        offload_threshold: int = 4000,
        tool_offload_threshold: int = 10000,
        summary_max_tokens: Optional[int] = None,
        summarize_timeout: Optional[float] = 60.0,
        estimator: Estimator = "default",
        format: Format = "auto",
        pin_first_user: bool = True,
        on_compaction: Optional[Callable[[CompactionRecord], Any]] = None,
        target: Optional[float] = None,  # None: 0.50
        keep_tail_tokens: Optional[int] = None,  # None: context_window / 4
        retention: Optional[Retention] = None,
        on_fallback: Optional[Callable[[str], Any]] = None,
        backend: Optional[EvidenceBackend] = None,
        backend_timeout: float = 10.0,
        store: Optional[str] = None,  # "s3://BUCKET/PREFIX?region=R&endpoint=E"
    ) -> None: ...
    def compact(
        self,
        messages: List[Message],
        *,
        tools: Optional[List[Dict[str, Any]]] = None,
        summarize: Optional[Summarize] = None,
    ) -> CompactionResult: ...
    async def acompact(
        self,
        messages: List[Message],
        *,
        tools: Optional[List[Dict[str, Any]]] = None,
        summarize: Optional[Summarize] = None,
    ) -> CompactionResult: ...
    def offload(self, message: Message) -> Message: ...
    def read_evidence(
        self, ref: Union[str, "os.PathLike[str]"], *, offset: int = 0, limit: int = 200
    ) -> str: ...
    def search_evidence(
        self, ref: Union[str, "os.PathLike[str]", None], pattern: str
    ) -> List[EvidenceHit]: ...
    async def aoffload(self, message: Message) -> Message: ...
    async def aread_evidence(
        self, ref: Union[str, "os.PathLike[str]"], *, offset: int = 0, limit: int = 200
    ) -> str: ...
    async def asearch_evidence(
        self, ref: Union[str, "os.PathLike[str]", None], pattern: str
    ) -> List[EvidenceHit]: ...
    def handle_read_evidence(self, call: Dict[str, Any]) -> Dict[str, Any]: ...
    def observe_usage(self, usage: Union[int, Mapping[str, Any], object]) -> None: ...
    def reset(self) -> None: ...
    @property
    def session_id(self) -> str: ...
    @property
    def usage_factor(self) -> float: ...
    @property
    def options(self) -> Dict[str, Any]: ...

def read_evidence_tool(format: ToolFormat = "openai") -> Dict[str, Any]: ...

HttpApi = Literal["openai", "anthropic"]

class HttpRequest(TypedDict, total=False):
    """What HttpSummarizer reads from a request: a SummaryRequest has all of it."""

    system: Optional[str]  # default ""
    prompt: str  # required
    max_tokens: Optional[int]  # > 0; default 1024

@final
class HttpSummarizer:
    """The built-in summarizer: asks a model over HTTP to write the checkpoint.

    Usable as summarize= in Compactor.compact and acompact. Calling it returns the reply
    text or raises Error with .code "CK_ESUMMARY", "CK_ETIMEDOUT", "CK_EIO", "CK_EINVAL"
    (an API key with a line break, never sent) or "CK_ECANCELED". The API key is read from
    the environment variable api_key_env at each call and never stored. timeout bounds the
    whole call, retries included. One object may serve several threads at once.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api: HttpApi = "openai",
        api_key_env: Optional[str] = None,
        timeout: float = 60,
        max_retries: int = 3,
        headers: Optional[Dict[str, str]] = None,
        backoff: float = 0.5,
        reasoning_model: Optional[bool] = None,
        extra_body: Optional[Mapping[str, Any]] = None,
    ) -> None: ...
    def __call__(self, request: Union[SummaryRequest, HttpRequest]) -> str: ...
    # For ctxkeel.Compactor: the same call, aborted when `cancel` is cancelled.
    def _summarize(
        self, request: Union[SummaryRequest, HttpRequest], cancel: Optional[CancelToken], /
    ) -> str: ...
    @property
    def base_url(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def api(self) -> HttpApi: ...
    @property
    def api_key_env(self) -> Optional[str]: ...
    @property
    def timeout(self) -> float: ...
    @property
    def max_retries(self) -> int: ...
    @property
    def backoff(self) -> float: ...
    @property
    def header_names(self) -> Tuple[str, ...]: ...
    @property
    def reasoning_model(self) -> bool: ...
    @property
    def last_usage(self) -> Optional[Tuple[int, int]]: ...

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

class Replay:
    """What replay() returns: one row per model call, totals, the chart."""

    rows: List[ReplayRow]
    totals: ReplayTotals
    context_window: int
    session_id: str
    def __len__(self) -> int: ...
    def to_svg(self) -> str: ...
    def _repr_html_(self) -> str: ...

def replay(
    messages: Union[List[Message], Dict[str, Any], str],
    context_window: int,
    *,
    summarize: Optional[HttpSummarizer] = None,
    title: Optional[str] = None,
    session_id: Optional[str] = None,
    store_dir: Union[str, "os.PathLike[str]"] = ".ctxkeel",
    warn: float = 0.60,
    soft: float = 0.70,
    full: float = 0.80,
    emergency: float = 0.95,
    keep_tail: int = 6,
    offload_threshold: int = 4000,
    tool_offload_threshold: int = 10000,
    summary_max_tokens: Optional[int] = None,
    estimator: Estimator = "default",
    format: Format = "auto",
    pin_first_user: bool = True,
    retention: Optional[Retention] = None,
    backend: Optional[EvidenceBackend] = None,
) -> Replay: ...
