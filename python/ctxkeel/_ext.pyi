# The C extension module. Its functions, STATUS_CODES, Error and InputError are typed in
# ctxkeel/__init__.pyi, which re-exports them; Compactor and Compaction here are the building
# blocks of ctxkeel.Compactor (ctxkeel/_compactor.py).
import os
from typing import Any, Dict, List, Optional, Tuple, Union

from . import EvidenceHit, Estimator, Format, Message, Tier

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
