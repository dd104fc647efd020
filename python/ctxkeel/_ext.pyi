# The C extension module. Its functions, STATUS_CODES, Error, InputError and HttpSummarizer are
# typed in ctxkeel/__init__.pyi, which re-exports them; Compactor and Compaction here are the
# building blocks of ctxkeel.Compactor (ctxkeel/_compactor.py), and CancelToken is what it
# hands to HttpSummarizer._summarize().
import os
from typing import Any, Dict, List, Optional, Tuple, Union, final

from . import STATUS_CODES as STATUS_CODES
from . import Error as Error
from . import EvidenceHit, Estimator, Format, Message, Tier
from . import HttpSummarizer as HttpSummarizer
from . import InputError as InputError
from . import __version__ as __version__
from . import check_pairs as check_pairs
from . import estimate_tokens as estimate_tokens
from . import merge_anchors as merge_anchors
from . import parse_anchors as parse_anchors
from . import read_evidence_tool as read_evidence_tool
from . import repair_pairs as repair_pairs

TIERS: Tuple[Tier, Tier, Tier, Tier, Tier]
CHECKPOINT_MARKER: str

class Compaction:
    """One compaction in progress, made by Compactor.begin()."""

    @property
    def needs_summary(self) -> bool: ...
    @property
    def tier(self) -> Tier: ...
    @property
    def snapshot(self) -> Tuple[Message, ...]: ...
    def request(self) -> Dict[str, Any]: ...
    def set_summary(self, text: str, /) -> None: ...
    def set_failure(self, reason: str, /) -> None: ...
    # (messages, tier, record JSON text or None, tokens_before, tokens_after)
    def finish(self) -> Tuple[List[Message], Tier, Optional[str], int, int]: ...
    def close(self) -> None: ...

class Compactor:
    """The core of ctxkeel.Compactor: session state, evidence store, audit log."""

    def __init__(
        self,
        context_window: int,
        *,
        session_id: Optional[str] = None,
        store_dir: Union[str, bytes, "os.PathLike[str]"] = ".ctxkeel",
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
    ) -> None: ...
    def begin(
        self, messages: List[Message], tool_tokens: int = 0, /, *, extractive: bool = False
    ) -> Compaction: ...
    def offload(self, message: Message, /) -> Message: ...
    def read_evidence(
        self, ref: Union[str, bytes, "os.PathLike[str]"], *, offset: int = 0, limit: int = 200
    ) -> str: ...
    def search_evidence(
        self, ref: Union[str, bytes, "os.PathLike[str]", None], pattern: str
    ) -> List[EvidenceHit]: ...
    def observe_usage(self, prompt_tokens: int, /) -> None: ...
    def reset(self) -> None: ...
    @property
    def session_id(self) -> str: ...
    @property
    def usage_factor(self) -> float: ...
    @property
    def busy(self) -> bool: ...
    @property
    def options(self) -> Dict[str, Any]: ...

def _raise_status(code: int, /) -> None: ...

@final
class CancelToken:
    """A flag that aborts the HttpSummarizer._summarize() call it was given."""

    def __init__(self) -> None: ...
    def cancel(self) -> None: ...
    @property
    def cancelled(self) -> bool: ...
