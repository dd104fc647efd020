# The C extension module. Its functions, STATUS_CODES, Error, InputError, ContextOverflowError
# and HttpSummarizer are typed in ctxkeel/__init__.pyi, which re-exports them; Compactor and
# Compaction here are the building blocks of ctxkeel.Compactor (ctxkeel/_compactor.py), and
# CancelToken is what it hands to HttpSummarizer._summarize().
import os
from typing import Any, Dict, List, Optional, Tuple, Union, final

from . import STATUS_CODES as STATUS_CODES
from . import ContextOverflowError as ContextOverflowError
from . import Error as Error
from . import EvidenceHit, Message, Repair, Tier
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
BACKEND_TIMEOUT: float

def _replay(
    compactor: "Compactor",
    messages_json: str,
    summarize: Optional[HttpSummarizer] = None,
    title: Optional[str] = None,
) -> Tuple[List[Dict[str, Any]], Dict[str, Any], str]: ...
def _cli_main(argv: List[str], /) -> int: ...

@final
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
    # (messages, tier, record JSON text or None, tokens_before, tokens_after, ratio_before,
    # ratio_after, repairs)
    def finish(
        self,
    ) -> Tuple[List[Message], Tier, Optional[str], int, int, float, float, List[Repair]]: ...
    def close(self) -> None: ...

@final
class Compactor:
    """The core of ctxkeel.Compactor: session state, evidence store, audit log."""

    # The options of ctxkeel.Compactor (see there) but summarize_timeout and on_compaction,
    # plus awaiter(awaitable, timeout): runs an awaitable a backend method returned.
    def __new__(cls, context_window: int, **options: Any) -> "Compactor": ...
    def begin(
        self,
        messages: List[Message],
        tool_tokens: int = 0,
        /,
        *,
        extractive: bool = False,
        session: bool = False,
    ) -> Compaction: ...
    def read(self, messages: List[Message], from_: int, /) -> None: ...
    def offload(self, message: Message, /) -> Message: ...
    def read_evidence(
        self, ref: Union[str, bytes, "os.PathLike[str]"], *, offset: int = 0, limit: int = 200
    ) -> str: ...
    def search_evidence(
        self, ref: Union[str, bytes, "os.PathLike[str]", None], pattern: str
    ) -> List[EvidenceHit]: ...
    # The core's answer to a read_evidence call: (text, is_error).
    def answer_read_evidence(self, arguments: str, /) -> Tuple[str, bool]: ...
    def observe_usage(self, prompt_tokens: int, /) -> None: ...
    def reset(self) -> None: ...
    @property
    def session_id(self) -> str: ...
    @property
    def usage_factor(self) -> float: ...
    @property
    def busy(self) -> bool: ...
    @property
    def has_session(self) -> bool: ...
    @property
    def options(self) -> Dict[str, Any]: ...

def _raise_status(code: int, /) -> None: ...

# The whole prompt's tokens of a provider's usage object given as JSON text
# (ck_usage_prompt_tokens); Compactor.observe_usage() calls it for anything but an int.
def usage_prompt_tokens(usage: str, /) -> int: ...

@final
class CancelToken:
    """A flag that aborts the HttpSummarizer._summarize() call it was given."""

    def __init__(self) -> None: ...
    def cancel(self) -> None: ...
    @property
    def cancelled(self) -> bool: ...
