import os
from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    final,
    overload,
)

from ._ext import CancelToken
# Every name of ctxkeel.types (its __all__), re-exported: the same objects at run time.
from .types import *

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

__version__: str

# Every status code of the core: name -> (value, text), e.g. "CK_ETYPE": (-4, "...").
STATUS_CODES: Dict[str, Tuple[int, str]]

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

# The message functions take lists and tuples of message mappings or SDK message objects
# (read as their model_dump()).
def estimate_tokens(
    x: Union[str, Mapping[str, Any], SdkMessage, Sequence[AnyM]],
    *,
    estimator: Estimator = "default",
) -> int: ...
def check_pairs(messages: Sequence[AnyM], *, format: Format = "auto") -> List[PairIssue]: ...
def repair_pairs(messages: Sequence[AnyM], *, format: Format = "auto") -> List[AnyM]: ...
def parse_anchors(text: Union[str, bytes, bytearray, memoryview]) -> Tuple[Anchors, str]: ...
def merge_anchors(old: AnchorsArg, new: AnchorsArg) -> Anchors: ...

class CompactionResult(Generic[AnyM]):
    """What Compactor.compact returns: `messages` are of the caller's own message type."""

    messages: List[AnyM]
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
        messages: List[AnyM],
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
        prompt_cache: Optional[PromptCache] = None,
        cache_breakpoints: bool = False,
        retention: Optional[Retention] = None,
        on_fallback: Optional[Callable[[str], Any]] = None,
        backend: Optional[EvidenceBackend] = None,
        backend_timeout: float = 10.0,
        store: Optional[str] = None,  # "s3://BUCKET/PREFIX?region=R&endpoint=E"
        min_gain: Optional[int] = None,  # None: context_window / 20
    ) -> None: ...
    def compact(
        self,
        messages: Sequence[AnyM],
        *,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        summarize: Optional[Summarize] = None,
    ) -> CompactionResult[AnyM]: ...
    async def acompact(
        self,
        messages: Sequence[AnyM],
        *,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        summarize: Optional[Summarize] = None,
    ) -> CompactionResult[AnyM]: ...
    def append(self, message: Union[Mapping[str, Any], SdkMessage]) -> int: ...
    @property
    def session(self) -> Tuple[Any, ...]: ...
    def view(
        self,
        *,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        summarize: Optional[Summarize] = None,
    ) -> CompactionResult[Any]: ...
    async def aview(
        self,
        *,
        tools: Optional[Sequence[Mapping[str, Any]]] = None,
        summarize: Optional[Summarize] = None,
    ) -> CompactionResult[Any]: ...
    def offload(self, message: AnyM) -> AnyM: ...
    def read_evidence(
        self, ref: Union[str, "os.PathLike[str]"], *, offset: int = 0, limit: int = 200
    ) -> str: ...
    def search_evidence(
        self, ref: Union[str, "os.PathLike[str]", None], pattern: str
    ) -> List[EvidenceHit]: ...
    async def aoffload(self, message: AnyM) -> AnyM: ...
    async def aread_evidence(
        self, ref: Union[str, "os.PathLike[str]"], *, offset: int = 0, limit: int = 200
    ) -> str: ...
    async def asearch_evidence(
        self, ref: Union[str, "os.PathLike[str]", None], pattern: str
    ) -> List[EvidenceHit]: ...
    def handle_read_evidence(self, call: Mapping[str, Any]) -> Dict[str, Any]: ...
    def observe_usage(self, usage: Union[int, Mapping[str, Any], object]) -> None: ...
    def reset(self) -> None: ...
    @property
    def session_id(self) -> str: ...
    @property
    def usage_factor(self) -> float: ...
    @property
    def options(self) -> Dict[str, Any]: ...

# In OpenAI's shape, a ChatCompletionFunctionToolParam; in Anthropic's, a dict for a ToolParam
# list (a TypedDict would have to copy each of ToolParam's optional keys to be one).
@overload
def read_evidence_tool(format: Literal["openai"] = "openai") -> OpenAIToolDefinition: ...
@overload
def read_evidence_tool(format: Literal["anthropic"]) -> Dict[str, Any]: ...

@final
class HttpSummarizer:
    """The built-in summarizer: asks a model over HTTP to write the checkpoint.

    Usable as summarize= in Compactor.compact and acompact. Calling it returns the reply
    text or raises Error with .code "CK_ESUMMARY", "CK_ETIMEDOUT", "CK_EIO", "CK_EINVAL"
    (an API key with a line break, never sent) or "CK_ECANCELED". The API key is read from
    the environment variable api_key_env at each call and never stored. timeout bounds the
    whole call, retries included. One object may serve several threads at once.
    """

    def __new__(
        cls,
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
    ) -> "HttpSummarizer": ...
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

class Replay:
    """What replay() returns: one row per model call, totals, the chart."""

    rows: List[ReplayRow]
    totals: ReplayTotals
    context_window: int
    session_id: str
    def __init__(
        self,
        rows: List[ReplayRow],
        totals: ReplayTotals,
        svg: str,
        context_window: int,
        session_id: str,
    ) -> None: ...
    def __len__(self) -> int: ...
    def to_svg(self) -> str: ...
    def _repr_html_(self) -> str: ...

def replay(
    messages: Union[List[M], Mapping[str, Any], str],
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
    prompt_cache: Optional[PromptCache] = None,
    cache_breakpoints: bool = False,
    min_gain: Optional[int] = None,
) -> Replay: ...
