"""The Compactor: a bounded, provider-valid view of an agent's history before every model call.

The C type ``_ext.Compactor`` does the work: tiers, cut points, offloading, the checkpoint,
the audit log. A compaction there is three steps (``begin``, an optional summary, ``finish``)
so that the summarizer, which is the host's own code, runs between core calls. This module is
the orchestration around those steps: it runs the summarizer (a plain function in a daemon
thread, a coroutine on the running loop) under ``summarize_timeout``, turns every way a
summarizer can fail into a recorded fallback instead of an exception, and calls
``on_compaction``. The built-in ``HttpSummarizer`` is run with a ``CancelToken``, so running
out of time or cancelling ``acompact`` stops its transfer rather than leaving it running.

Nothing a summarizer or ``on_compaction`` does can break the agent: an exception, a hang, a
reply that is not a str, an empty or unusable reply all end in a result built by the
extractive summarizer, and the record's ``fallback`` says why. What does raise: bad input
(``InputError``), pinned messages and tool schemas that alone exceed the window
(``ContextOverflowError``), wrong argument types (``TypeError``), concurrent use of one Compactor
(``Error`` CK_EBUSY), a host token counter (``estimator=fn``) that fails and, in ``acompact``,
the cancellation of the calling task.

A host evidence backend (``backend=``) is called by the core from inside its calls. Its
methods may be coroutine functions: ``_Awaiter`` runs what they return, on the caller's loop
when the core call runs in a worker thread of ``acompact`` (or ``aoffload``...), else on a
private loop in a helper thread, so that the sync methods work even inside a running loop.
It waits at most ``backend_timeout`` seconds, then cancels the coroutine and raises
TimeoutError, which the core takes as a storage failure (fail-open): a backend that never
answers cannot keep ``compact()`` from returning, nor leave the Compactor busy.
"""

import asyncio
import collections.abc
import concurrent.futures
import copy
import inspect
import json
import logging
import threading
import warnings
import weakref
from typing import Generic

from . import _ext
from ._ext import Error, HttpSummarizer, InputError
from ._sdk import SdkMessages, estimate_tokens, plain, through
from .types import AnyM

__all__ = ["Compactor", "CompactionResult"]

# Every summarizer fallback is logged here as a WARNING, once per distinct reason per Compactor.
_log = logging.getLogger("ctxkeel")

_REASON_MAX = 300  # characters of an exception's text kept in a fallback reason
# Seconds to wait for an HttpSummarizer's transfer to end once its token is tripped (the core
# polls the flag every 100 ms or so); past this the daemon thread is left to finish alone.
_ABORT_GRACE = 1.0


def _as_list(x):
    """A tuple or other sequence (but text) as a list, as the core reads lists only; anything
    else as it is, for the core's own error."""
    if isinstance(x, list) or not isinstance(x, collections.abc.Sequence) or \
            isinstance(x, (str, bytes, bytearray)):
        return x
    return list(x)


class CompactionResult(Generic[AnyM]):
    """What ``Compactor.compact`` returns.

    ``messages``: the list to send (unchanged messages are the caller's own objects; a
    message the compaction changed, such as the newest one with its output turned into a
    placeholder, is a new dict);
    ``tier``: "none", "warn", "soft", "full" or "emergency";
    ``record``: the audit record as a dict (DESIGN section 8: with ``notes``, ``error``,
    ``ratio_before`` / ``ratio_after``, ``window``, ``repairs``, ``archive``, ``state`` and
    ``mac``), or None when no record was written;
    ``tokens_before`` / ``tokens_after``: the raw estimates of the view before and after,
    tool schemas included;
    ``ratio_before`` / ``ratio_after``: the view before and after as a fraction of the
    window, tool schemas included and the usage factor applied (the figures the tiers are
    chosen on);
    ``repairs``: every change the tool-call pairing repair made, as a list of
    ``{"kind", "index", "tool_call_id"}`` (kind: "orphan_dropped", "duplicate_dropped",
    "misplaced_dropped", "stub_added", "call_dropped", "result_moved" or "kept_as_text";
    index: the message in the list given to compact), also at tier "none";
    ``cache``: ``{"prefix_kept", "prefix_broken"}``, the tokens of the view that are a prefix
    of the view this Compactor returned before (a provider's prompt cache can hold them) and
    the tokens of that earlier view after the prefix (billed again); both 0 on the first.
    """

    __slots__ = ("messages", "tier", "record", "tokens_before", "tokens_after",
                 "ratio_before", "ratio_after", "repairs", "cache")

    def __init__(self, messages, tier, record, tokens_before, tokens_after,
                 ratio_before=0.0, ratio_after=0.0, repairs=(), cache=None):
        self.messages = messages
        self.tier = tier
        self.record = record
        self.tokens_before = tokens_before
        self.tokens_after = tokens_after
        self.ratio_before = ratio_before
        self.ratio_after = ratio_after
        self.repairs = list(repairs)
        self.cache = dict(cache) if cache else {"prefix_kept": 0, "prefix_broken": 0}

    def __repr__(self):
        return ("CompactionResult(tier=%r, messages=%d, tokens_before=%d, tokens_after=%d, "
                "ratio_after=%.3f, repairs=%d)" % (
                    self.tier, len(self.messages), self.tokens_before, self.tokens_after,
                    self.ratio_after, len(self.repairs)))

    def _repr_html_(self):
        from ._replay import compaction_html  # a notebook's view; _replay imports this module

        return compaction_html(self)


class Compactor:
    """One agent session's compactor.

    Call ``compact(messages)`` (or ``await acompact(messages)``) before every model call and
    send ``result.messages``. The history stays the caller's: it is never modified, and the
    view is derived from it anew each time.

    ``context_window`` is the model's window in tokens. ``warn``, ``soft``, ``full`` and
    ``emergency`` are the tier thresholds as fractions of it; a compaction brings the view
    down to ``target`` (None: the core's 0.50; it must be below ``soft``). After any
    compaction the view is at most ``soft`` x window, and no view is ever above the window:
    when the newest turn is too large its largest outputs become placeholders and over-long
    texts are shown as head and tail. Only when the pinned messages and the tool schemas
    alone do not fit does ``compact`` raise ``ContextOverflowError``. The verbatim tail is
    the newest turns within ``keep_tail`` messages and ``keep_tail_tokens`` tokens (None:
    the core's window / 4), never less than the newest turn. Tool outputs above
    ``offload_threshold`` bytes are moved to
    the evidence store at compaction (warn and above), and above ``tool_offload_threshold``
    by ``offload()``. ``summary_max_tokens`` bounds the checkpoint (None: window / 20 within
    [256, 8192]). ``summarize_timeout`` (seconds, None for no limit) bounds a summarizer call.
    ``session_id`` names the session; with an existing audit log under ``store_dir`` the
    session resumes where it stopped. ``on_compaction(record)`` is called after each
    compaction that wrote a record; an exception in it becomes a RuntimeWarning. A summarizer
    that fails is logged as a WARNING on the "ctxkeel" logger (once per distinct reason), and
    ``on_fallback(reason)`` is called on every compaction whose checkpoint the extractive
    summarizer wrote instead.

    ``estimator`` is "default", "o200k", "cl100k", "chars4" or the host's own counter, a function
    ``fn(text) -> int``: every estimate then comes from it (each message is counted once as
    its strings joined, plus the per-message overhead, and the count is cached by content).
    If it raises or returns something other than an int >= 0, ``compact`` raises that error
    (a TypeError or ValueError for a bad return), and a compaction that did not finish
    leaves the session as it was.

    ``retention`` says what the placeholder of an offloaded output keeps, per tool: a dict
    ``{pattern: policy}`` (first match wins, in order; a list of (pattern, policy) pairs works
    too), where a pattern is a tool name or a shell-style pattern (``"pytest*"``) and a policy
    a dict of ``head``, ``tail`` (lines), ``errors`` (at most that many error lines),
    ``max_bytes`` (the preview's cap; 0 or absent: the gate's) and ``offload`` (False: the
    tool's outputs always stay in the view). A key left out is 0. In ``offload()`` the tool is
    the message's own ``"name"`` when it has one (the call is not at hand there); without it
    the name matched is "tool", which ``"*"`` matches.

    ``backend`` is the host's own evidence storage, used instead of the files under
    ``store_dir`` (the audit log stays there): an object with ``put(key, text)`` and
    ``get(key) -> str | None``, either of which may be a coroutine function. Keys are
    "tool_results/<session>/<file>.txt", made only of ``[A-Za-z0-9._~-]`` and "/". A put
    that raises leaves the output in the view and the record's "error" says why; a get that
    raises (or returns another type) makes ``read_evidence`` and ``search_evidence`` raise
    ``Error`` CK_EIO naming the ref, with the backend's exception as its cause. The sync
    methods run a coroutine on a private event loop in a helper thread; ``acompact``,
    ``aoffload``, ``aread_evidence`` and ``asearch_evidence`` run the core in a worker thread
    and the coroutine on the caller's loop, which keeps running meanwhile.
    ``backend_timeout`` (seconds, default 10, at most 86400) bounds each call of a coroutine
    method: one that has not answered by then is cancelled and fails like a raising one, with
    "backend timed out" in the record, and the backend is not called again during that
    compaction (or read, or search). A plain method is called in the caller's thread and
    cannot be interrupted.

    ``store`` is the URL of the built-in S3 backend,
    ``"s3://BUCKET/PREFIX?region=R&endpoint=E"`` (credentials from ``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN``), which the core makes: evidence,
    audit records ("compactions/<session>/<seq>.json") and the state a session resumes from
    all go there, so a ``Compactor`` with the same ``session_id`` in another process or on
    another machine resumes with no summary call. Two compactors on one session never lose a
    record; one that cannot place its record raises ``Error`` CK_ECONFLICT. ``options``
    gives it normalized, without credentials. It excludes ``backend``.

    The provider's prompt cache bills a prefix sent before at a fraction of the price, and
    every change to the view re-bills all that follows it. So the warn tier's offloads of old
    outputs wait until together they free ``min_gain`` tokens (None: window / 20), and with
    ``prompt_cache`` (``"anthropic"``: reads 0.1x and writes 1.25x of uncached input,
    ``"openai"``: 0.1x and 1x, or ``{"read": r, "write": w}``) a soft compaction or a batched
    offload happens only when the reads it saves before the view would reach ``full`` (at the
    session's growth per call) outweigh the cache it re-bills; the record's ``cache`` then
    holds the ``estimate``. Full and emergency never wait. ``cache_breakpoints=True`` puts
    Anthropic ``cache_control`` markers on the checkpoint and on the last pinned message
    before it (within the provider's four, the caller's own markers counted) in an Anthropic
    view; the caller's messages keep theirs and gain none.

    One compaction at a time: a second call while one runs (``compact`` from another thread,
    or while an ``acompact`` is under way) raises ``Error`` with code "CK_EBUSY"; concurrent
    ``acompact`` calls wait their turn instead.
    ``offload``, ``read_evidence`` and ``search_evidence`` may run meanwhile, though not while
    a step of the compaction waits for the backend or the counter (CK_EBUSY then too).
    """

    def __init__(self, context_window, *, session_id=None, store_dir=".ctxkeel", warn=0.60,
                 soft=0.70, full=0.80, emergency=0.95, keep_tail=6, offload_threshold=4000,
                 tool_offload_threshold=10000, summary_max_tokens=None, summarize_timeout=60.0,
                 estimator="default", format="auto", pin_first_user=True, on_compaction=None,
                 target=None, keep_tail_tokens=None, prompt_cache=None, cache_breakpoints=False,
                 retention=None, on_fallback=None, backend=None,
                 backend_timeout=_ext.BACKEND_TIMEOUT, store=None, min_gain=None):
        self._timeout = _check_timeout(summarize_timeout)
        for name, fn in (("on_compaction", on_compaction), ("on_fallback", on_fallback)):
            if fn is not None and not callable(fn):
                raise TypeError("ctxkeel: %s must be callable or None, not %s"
                                % (name, type(fn).__name__))
        awaiter = _Awaiter() if backend is not None else None
        self._core = _ext.Compactor(
            context_window, session_id=session_id, store_dir=store_dir, warn=warn, soft=soft,
            full=full, emergency=emergency, keep_tail=keep_tail,
            offload_threshold=offload_threshold, tool_offload_threshold=tool_offload_threshold,
            summary_max_tokens=summary_max_tokens, estimator=estimator, format=format,
            pin_first_user=pin_first_user, retention=retention, backend=backend,
            backend_timeout=backend_timeout, awaiter=awaiter, target=target,
            keep_tail_tokens=keep_tail_tokens, store=store, prompt_cache=prompt_cache,
            cache_breakpoints=cache_breakpoints, min_gain=min_gain)
        self._estimator = estimator
        self._on_compaction = on_compaction
        self._on_fallback = on_fallback
        self._fallbacks_logged = set()
        # With host code in the core's calls, acompact runs those calls in a worker thread.
        self._host = backend is not None or callable(estimator)
        self._turns = weakref.WeakKeyDictionary()
        self._session = []  # append(): the session's copies, all read by the core when...
        self._session_read = False  # ...this is True

    def __repr__(self):
        return "Compactor(%d, session_id=%r)" % (self.options["context_window"], self.session_id)

    # ---- compaction ----------------------------------------------------------------------

    def compact(self, messages, *, tools=None, summarize=None):
        """Returns a CompactionResult for ``messages`` (a list or tuple of message dicts).

        ``tools`` is the tool-schema list sent with the request (its tokens count).
        ``summarize(request) -> str`` writes the checkpoint when the soft or full tier needs
        one; None uses the built-in extractive summarizer. It runs in a daemon thread for at
        most ``summarize_timeout`` seconds (a coroutine function runs on a private event loop
        there; prefer ``acompact`` for those). Its failures never raise here. An
        ``HttpSummarizer`` runs its transfer without the GIL, and running out of time aborts
        the transfer.
        """
        return self._compact(messages, tools, summarize, False)

    def _compact(self, messages, tools, summarize, session):
        _check_summarize(summarize)
        job, sdk = self._begin(messages, tools, summarize, session)
        try:
            if job.needs_summary:
                _check_signature(summarize)
                request = self._request(job, sdk)
                if isinstance(summarize, HttpSummarizer):
                    reply, failure = _call_http(summarize, request, self._timeout)
                else:
                    reply, failure = _call_in_thread(summarize, request, self._timeout)
                _answer(job, reply, failure)
            out = _finish_parsed(job)
        finally:
            job.close()
        return self._result(out, sdk)

    async def acompact(self, messages, *, tools=None, summarize=None):
        """``compact`` for asyncio. ``summarize`` may be a coroutine function, a function
        that returns an awaitable, or a plain function (run in a daemon thread, so a slow one
        does not block the loop). The loop keeps running other tasks while the summary is
        written. Cancelling the task cancels the summarizer's coroutine (or aborts an
        ``HttpSummarizer``'s transfer) and propagates; the Compactor stays usable.

        The core's steps (begin, which reads ``messages``, and finish, which writes the
        store and the record) run in a worker thread of the loop's default executor, without
        the GIL when no host code (a backend, a counter) runs in them; a backend's coroutines
        run on this loop. So the loop keeps serving other tasks while a compaction works.
        Concurrent ``acompact`` calls on one Compactor (from tasks of one loop) wait their
        turn, in order, rather than raising CK_EBUSY."""
        return await self._acompact(messages, tools, summarize, False)

    async def _acompact(self, messages, tools, summarize, session):
        _check_summarize(summarize)
        async with self._turn():
            job, out, sdk = await self._off_loop(self._begin_off_loop, messages, tools,
                                                 summarize, session, abandon=_close_first,
                                                 thread=True)
            if job is not None:
                try:
                    _check_signature(summarize)
                    request = await self._off_loop(self._request, job, sdk)
                    if isinstance(summarize, HttpSummarizer):
                        reply, failure = await _call_http_async(summarize, request,
                                                                self._timeout)
                    else:
                        reply, failure = await _call_async(summarize, request, self._timeout)
                    _answer(job, reply, failure)
                    out = await self._off_loop(_finish_parsed, job, thread=True)
                finally:
                    # A finish still running in the worker (the task was cancelled) closes
                    # the job itself when it returns; the binding defers this close until
                    # then.
                    job.close()
        return self._result(out, sdk)

    # ---- the append-only session -----------------------------------------------------------

    def append(self, message):
        """Adds ``message`` to this compactor's append-only session and returns the session's
        length. The session keeps a deep copy (``copy.deepcopy``), which the core reads at
        once: a bad message raises ``InputError`` naming its index in the session and is not
        added. ``view`` then costs only what was appended since the last one, where
        ``compact`` reads its whole list again. The copies are the session's: the messages a
        view returns are those copies, to be treated as read-only."""
        self._session.append(copy.deepcopy(plain(message, "messages[%d]" % len(self._session))))
        try:
            self._core.read(self._session, len(self._session) - 1 if self._session_read else 0)
        except BaseException:
            self._session.pop()
            self._session_read = False
            raise
        self._session_read = True
        return len(self._session)

    @property
    def session(self):
        """The messages appended so far (a tuple of the session's copies)."""
        return tuple(self._session)

    def view(self, *, tools=None, summarize=None):
        """``compact`` of the append-only session: a CompactionResult for the messages
        appended so far. Arguments as ``compact``'s."""
        try:
            return self._compact(self._session, tools, summarize, True)
        finally:
            self._session_read = self._core.has_session

    async def aview(self, *, tools=None, summarize=None):
        """``view`` for asyncio, as ``acompact`` is ``compact``'s."""
        try:
            return await self._acompact(self._session, tools, summarize, True)
        finally:
            self._session_read = self._core.has_session

    def _begin_off_loop(self, messages, tools, summarize, session):
        """acompact's first step, in the worker: begin, and when no summary is needed finish
        too, so that a compaction costs the loop one wake-up (300 sessions compacting at once
        wake it 300 times, each time between its other tasks). Returns (None, the finished
        output) or (the job, None) when the summarizer has to write the checkpoint."""
        job, sdk = self._begin(messages, tools, summarize, session)
        if job.needs_summary:
            return job, None, sdk
        try:
            return None, _finish_parsed(job), sdk
        finally:
            job.close()

    def _turn(self):
        """The lock that orders this Compactor's ``acompact`` calls on the running loop
        (an asyncio.Lock belongs to one loop; a Compactor may serve several in turn)."""
        loop = asyncio.get_running_loop()
        lock = self._turns.get(loop)
        if lock is None:
            lock = self._turns[loop] = asyncio.Lock()
        return lock

    async def _off_loop(self, fn, *args, abandon=None, thread=False):
        """``fn(*args)``, a step that calls into the core: here when no host code runs in
        the core's calls (and not ``thread``), else in a worker thread, in which ``_Awaiter``
        runs a backend's awaitables on this loop. If the caller is cancelled, the awaitables
        in flight are cancelled and the step is left to end by itself; ``abandon(result)``
        then disposes of its result."""
        if not self._host and not thread:
            return fn(*args)
        loop = asyncio.get_running_loop()
        calls = _LoopCalls(loop)

        def work():
            _local.calls = calls
            try:
                return fn(*args)
            finally:
                _local.calls = None

        future = loop.run_in_executor(None, work)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            calls.cancel()
            future.add_done_callback(lambda done: _abandoned(done, abandon))
            raise

    def _begin(self, messages, tools, summarize, session):
        messages = _as_list(messages)
        tools = _as_list(tools)
        if tools is None:
            tool_tokens = 0
        elif isinstance(tools, list):
            tool_tokens = estimate_tokens(tools, estimator=self._estimator) if tools else 0
        else:
            raise TypeError("ctxkeel: tools must be a list or None, not %s"
                            % type(tools).__name__)

        def begin(messages):
            return self._core.begin(messages, tool_tokens, extractive=summarize is None,
                                    session=session)

        if session:
            return begin(messages), None
        return through(begin, messages)

    @staticmethod
    def _request(job, sdk):
        """The request handed to the summarizer: the core's, with the span as the caller's
        own message objects (from the snapshot taken when the compaction began)."""
        request = job.request()
        start, end = request.pop("span_start"), request.pop("span_end")
        span = job.snapshot[start:end]
        request["messages"] = list(span) if sdk is None else sdk.back(span)
        return request

    def _result(self, out, sdk=None):
        messages, tier, record, tokens_before, tokens_after = out[:5]
        if sdk is not None:
            messages = sdk.back(messages)
        if record is not None and self._on_compaction is not None:
            self._tell("on_compaction", self._on_compaction, record)
        reason = record.get("fallback") if record is not None else None
        if reason:
            # A summarizer that fails (a bad key, a timeout) must not fail every compaction
            # unnoticed: the log hears each reason once, on_fallback every time.
            if reason not in self._fallbacks_logged:
                self._fallbacks_logged.add(reason)
                _log.warning("ctxkeel: session %s: the summarizer failed (%s); the checkpoint "
                             "was written by the extractive summarizer", self.session_id, reason)
            if self._on_fallback is not None:
                self._tell("on_fallback", self._on_fallback, reason)
        return CompactionResult(messages, tier, record, tokens_before, tokens_after, *out[5:])

    @staticmethod
    def _tell(name, fn, value):
        try:
            fn(value)
        except Exception as exc:  # the agent goes on; the host hears about it
            warnings.warn("ctxkeel: %s raised %s" % (name, _describe(exc)), RuntimeWarning,
                          stacklevel=4)

    # ---- evidence ------------------------------------------------------------------------

    def offload(self, message):
        """The tool-time gate: a new message whose tool results above
        ``tool_offload_threshold`` bytes are replaced by placeholders (their full text goes
        to the evidence store), or ``message`` itself when nothing was offloaded. An SDK
        message object is read as its ``model_dump()``."""
        return _offload(self._core, message)

    def read_evidence(self, ref, *, offset=0, limit=200):
        """Lines [offset, offset + limit) of an offloaded output, exactly as stored; "" past
        the end. ``ref`` is its tool-call id or the path stated in its placeholder. An
        unknown ref raises InputError."""
        return self._core.read_evidence(ref, offset=offset, limit=limit)

    def search_evidence(self, ref, pattern):
        """Lines matching ``pattern`` in the output ``ref``, or in all of the session's
        evidence when ``ref`` is None (offloaded outputs, archived folded messages, stored
        repairs), as a list of ``{"ref", "line", "text"}``. ``line`` counts from 0, as
        ``read_evidence`` offsets do: ``read_evidence(hit["ref"], offset=hit["line"],
        limit=1)`` reads the line found.

        The pattern is a POSIX extended regular expression, as ``grep -E`` takes it, plus
        ``\\d \\w \\s \\b`` and ``(?:...)``; it is matched case-sensitively, on UTF-8
        characters, in time linear in the text. Backreferences (``\\1``) are refused with
        InputError. One search does at most about a second of work: a search cut short
        returns what it found, then ``{"ref": "", "line": 0, "text": why, "cut": True}``.
        Without a backend the search runs without the GIL, so other threads go on."""
        return self._core.search_evidence(ref, pattern)

    async def aoffload(self, message):
        """``offload`` for asyncio: with a backend, the store is written from a worker
        thread and the backend's coroutines run on this loop."""
        return await self._off_loop(_offload, self._core, message)

    async def aread_evidence(self, ref, *, offset=0, limit=200):
        """``read_evidence`` for asyncio (see ``aoffload``)."""
        return await self._off_loop(
            lambda: self._core.read_evidence(ref, offset=offset, limit=limit))

    async def asearch_evidence(self, ref, pattern):
        """``search_evidence`` for asyncio: the search runs in a worker thread of the loop's
        default executor (a backend's coroutines on this loop), so the loop never waits for
        it."""
        return await self._off_loop(self._core.search_evidence, ref, pattern, thread=True)

    def handle_read_evidence(self, call):
        """Answers a model's call of the read_evidence tool (see ``read_evidence_tool``).

        ``call`` is an OpenAI tool call (``{"id", "function": {"name", "arguments"}}``) or an
        Anthropic tool_use block (``{"type": "tool_use", "id", "name", "input"}``). Returns
        the tool-result message for it: ``{"role": "tool", "tool_call_id", "content"}`` or
        ``{"type": "tool_result", "tool_use_id", "content"}`` (with ``"is_error": True`` when
        the call was wrong). The answer is the core's (lines read by ``ref``, ``offset`` and
        ``limit``, or the lines a ``pattern`` matches with the offset to read at); mistakes in
        the arguments and unknown refs are explained in its text, never raised.
        """
        if not isinstance(call, dict):
            raise TypeError("ctxkeel: handle_read_evidence() takes a tool call dict, not %s"
                            % type(call).__name__)
        if call.get("type") == "tool_use":
            text, failed = self._core.answer_read_evidence(_arguments_text(call.get("input")))
            result = {"type": "tool_result", "tool_use_id": call.get("id"), "content": text}
            if failed:
                result["is_error"] = True
            return result
        function = call.get("function")
        if not isinstance(function, dict):
            raise ValueError("ctxkeel: handle_read_evidence() takes an OpenAI tool call "
                             "({'id', 'function'}) or an Anthropic tool_use block")
        text, _ = self._core.answer_read_evidence(_arguments_text(function.get("arguments")))
        return {"role": "tool", "tool_call_id": call.get("id"), "content": text}

    # ---- usage and state -----------------------------------------------------------------

    def observe_usage(self, usage):
        """The provider's prompt size for the last view sent: an int, or its usage object as
        returned (``response.usage`` of OpenAI or Anthropic, Gemini's ``usage_metadata``, a
        dict, any object with ``model_dump()`` or attributes), of which the core counts the
        whole prompt, Anthropic's cached part included. The ratio to ctxkeel's estimate
        corrects later tier decisions (see ``usage_factor``)."""
        if not isinstance(usage, _USAGE_SCALARS):  # the core checks scalars as before
            usage = _ext.usage_prompt_tokens(json.dumps(usage, default=_usage_plain))
        self._core.observe_usage(usage)

    def reset(self):
        """Forgets the session state (checkpoint, coverage, offloads) and the appended
        messages; the audit log stays."""
        self._core.reset()
        self._session = []
        self._session_read = False

    @property
    def session_id(self):
        """The session id (given, or a new random one)."""
        return self._core.session_id

    @property
    def usage_factor(self):
        """The correction applied to token estimates: 1.0 until usage was observed."""
        return self._core.usage_factor

    @property
    def options(self):
        """The options in force, defaults filled in (a new dict on every read)."""
        options = self._core.options
        options["summarize_timeout"] = self._timeout
        return options


def _offload(core, message):
    """``core.offload`` of ``message``, an SDK object read as its dump (a LangChain message
    given back as one); ``message`` itself when nothing was offloaded."""
    sdk = SdkMessages.of([message])
    if sdk is None:
        return core.offload(message)
    return sdk.back([core.offload(sdk.dicts[0])])[0]


# ---- arguments -----------------------------------------------------------------------------


def _check_timeout(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError("ctxkeel: summarize_timeout must be a number or None, not %s"
                        % type(timeout).__name__)
    if not timeout > 0 or timeout == float("inf"):
        err = InputError("ctxkeel: summarize_timeout: must be a positive number of seconds")
        err.code, err.where = "CK_EINVAL", "summarize_timeout"
        raise err
    return float(timeout)


def _check_summarize(summarize):
    if summarize is not None and not callable(summarize):
        raise TypeError("ctxkeel: summarize must be callable or None, not %s"
                        % type(summarize).__name__)


def _check_signature(summarize):
    """A summarizer that cannot take the request is the caller's mistake, not a fallback: a
    TypeError from the compact() that would call it (inspect costs microseconds, so only
    then)."""
    if summarize is None or isinstance(summarize, HttpSummarizer):
        return
    try:
        signature = inspect.signature(summarize)
    except (TypeError, ValueError):  # a builtin without one: called as it is
        return
    try:
        signature.bind(None)
    except TypeError:
        raise TypeError("ctxkeel: summarize must take one argument (the request), but its "
                        "signature is %s%s" % (getattr(summarize, "__name__", "summarize"),
                                               signature)) from None


def _arguments_text(arguments):
    """A tool call's arguments as the JSON text the core reads: an OpenAI call carries text
    already, an Anthropic block a decoded value (None: no arguments). Only the encoding is
    done here; what the arguments mean, and what is wrong with them, is the core's."""
    if arguments is None:
        return ""
    if not isinstance(arguments, str):
        # ASCII escapes, so that a lone surrogate reaches the core as text it can judge.
        return json.dumps(arguments, default=repr)
    try:
        arguments.encode("utf-8")
    except UnicodeEncodeError:
        arguments = arguments.encode("utf-8", "replace").decode("utf-8")
    return arguments


# ---- running the summarizer ----------------------------------------------------------------


def _describe(exc):
    """"ValueError: text" for an exception, whatever its __str__ does."""
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    if len(text) > _REASON_MAX:
        text = text[:_REASON_MAX] + "..."
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


def _timed_out(timeout):
    return "summarizer timed out after %g s" % timeout


def _plain_reply(reply):
    """(text, None) with the summarizer's reply as a plain str, or (None, why it is not one).

    Only the reply's type is looked at, and a str subclass is copied with ``str.__str__``,
    which runs none of its methods: a reply whose ``strip``, ``__str__`` or ``__class__``
    raises becomes a fallback reason here rather than an exception in ``compact()``."""
    kind = type(reply)
    if not issubclass(kind, str):
        try:
            name = str.__str__(kind.__name__)
        except BaseException:  # a metaclass may do anything
            name = "an object"
        return None, "summarizer returned %s" % name
    try:
        text = str.__str__(reply)
    except Exception as exc:
        return None, "summarizer returned an unusable str: " + _describe(exc)
    if not text.strip():
        return None, "summarizer returned an empty reply"
    return text, None


def _answer(job, reply, failure):
    """Hands the summarizer's outcome to the compaction: the reply, or why there is none."""
    if failure is None:
        reply, failure = _plain_reply(reply)
        if failure is None:
            try:
                job.set_summary(reply)
                return
            except InputError:
                failure = "summarizer returned text that is not valid UTF-8"
    # The reason may quote an exception's text, which may hold a lone surrogate.
    job.set_failure(failure.encode("utf-8", "replace").decode("utf-8"))


def _is_async_callable(fn):
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))


async def _await(awaitable):
    return await awaitable


def _call_in_thread(fn, request, timeout):
    """Runs ``fn(request)`` in a daemon thread and waits at most ``timeout`` seconds.

    Returns (reply, None) or (None, reason). A summarizer that hangs is left behind: it is a
    daemon thread, so it neither holds up the agent nor keeps the interpreter from exiting.
    An awaitable it returns is run to completion on a private event loop in that thread.
    """
    outcome = {}
    done = threading.Event()

    def work():
        try:
            value = fn(request)
            if inspect.isawaitable(value):
                value = asyncio.run(_await(value))
            outcome["reply"] = value
        except BaseException as exc:  # a thread has nowhere else to send it
            outcome["reason"] = "summarizer raised " + _describe(exc)
        finally:
            done.set()

    threading.Thread(target=work, name="ctxkeel-summarize", daemon=True).start()
    if not done.wait(timeout):
        return None, _timed_out(timeout)
    if "reason" in outcome:
        return None, outcome["reason"]
    return outcome["reply"], None


def _retrieve(task):
    """Done callback for an abandoned task: reads its exception so that asyncio does not log
    "exception was never retrieved" for a summarizer we stopped waiting for."""
    if not task.cancelled():
        task.exception()


async def _await_with_timeout(awaitable, timeout, left=None):
    """Awaits the summarizer's awaitable for at most ``timeout`` seconds (``left`` of them
    when part of the time is spent already): (reply, None) or (None, reason). Its own
    exceptions (a TimeoutError of its HTTP client, say) are told apart from running out of
    time. Cancellation of the caller cancels it and propagates."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout if left is None else left)
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(_retrieve)
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_retrieve)
        return None, _timed_out(timeout)
    if task.cancelled():
        return None, "summarizer was cancelled"
    exc = task.exception()
    if exc is not None:
        return None, "summarizer raised " + _describe(exc)
    return task.result(), None


async def _call_async(fn, request, timeout):
    """``fn(request)`` for acompact: a coroutine function runs on this loop; anything else
    runs in a daemon thread whose result settles a future here (an awaitable it returns is
    then awaited on this loop within what is left of the timeout)."""
    loop = asyncio.get_running_loop()
    if _is_async_callable(fn):
        try:
            awaitable = fn(request)
        except Exception as exc:
            return None, "summarizer raised " + _describe(exc)
        return await _await_with_timeout(awaitable, timeout)

    future = loop.create_future()

    def settle(value, reason):
        if future.done():
            # Nobody waits any more (timed out or cancelled); do not leave a coroutine
            # that will never run to warn about it later.
            if inspect.iscoroutine(value):
                value.close()
            return
        future.set_result((value, reason))

    def work():
        try:
            value, reason = fn(request), None
        except BaseException as exc:  # a thread has nowhere else to send it
            value, reason = None, "summarizer raised " + _describe(exc)
        try:
            loop.call_soon_threadsafe(settle, value, reason)
        except RuntimeError:
            pass  # the loop is closed: the compaction is long over

    started = loop.time()
    threading.Thread(target=work, name="ctxkeel-summarize", daemon=True).start()
    # wait() leaves the future alone when it times out or is cancelled; settle() copes.
    done, _ = await asyncio.wait({future}, timeout=timeout)
    if not done:
        return None, _timed_out(timeout)
    value, reason = future.result()
    if reason is not None:
        return None, reason
    if inspect.isawaitable(value):
        left = None if timeout is None else max(0.0, timeout - (loop.time() - started))
        return await _await_with_timeout(value, timeout, left)
    return value, None


# ---- the built-in HTTP summarizer ----------------------------------------------------------


_USAGE_SCALARS = (int, float, str, bytes, bytearray, type(None))


def _usage_plain(obj):
    """A usage object as plain data for json.dumps: what model_dump() gives (pydantic, as the
    SDKs use), else its public attributes. Which fields count is the core's to say."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    fields = getattr(obj, "__dict__", None)
    if fields is None:
        fields = {name: getattr(obj, name, None) for name in dir(obj)}
    fields = {k: v for k, v in fields.items() if not k.startswith("_") and not callable(v)}
    if not fields:
        raise TypeError("ctxkeel: usage must be an int, a dict or a usage object, not %s"
                        % type(obj).__name__)
    return fields


def _http_failure(exc):
    """The fallback reason for a failed HttpSummarizer call, such as
    "HttpSummarizer failed (CK_ESUMMARY): HTTP 500: overloaded (4 attempts)"."""
    if isinstance(exc, Error) and exc.code:
        text = str(exc)
        if text.startswith("ctxkeel: "):
            text = text[len("ctxkeel: "):]
        return "HttpSummarizer failed (%s): %s" % (exc.code, text)
    return "summarizer raised " + _describe(exc)


def _start_transfer(summarizer, request, token, report):
    """Runs ``summarizer._summarize(request, token)`` in a daemon thread and hands
    (reply, None) or (None, reason) to ``report`` in that thread. The transfer itself runs
    without the GIL, so the thread costs the caller nothing while it waits. Returns the
    thread."""

    def work():
        try:
            outcome = summarizer._summarize(request, token), None
        except BaseException as exc:  # a thread has nowhere else to send it
            outcome = None, _http_failure(exc)
        report(outcome)

    thread = threading.Thread(target=work, name="ctxkeel-http-summarize", daemon=True)
    thread.start()
    return thread


def _call_http(summarizer, request, timeout):
    """An HttpSummarizer in compact(): (reply, None) or (None, reason).

    The transfer runs in a daemon thread rather than in this one, so that this thread stays
    responsive: it waits at most ``timeout`` seconds and can take a KeyboardInterrupt. Either
    way the token is tripped before returning, and the thread is given a moment to end, so
    no transfer is left running behind the caller.
    """
    token = _ext.CancelToken()
    outcome = []
    done = threading.Event()

    def report(result):
        outcome.append(result)
        done.set()

    thread = _start_transfer(summarizer, request, token, report)
    finished = False
    try:
        finished = done.wait(timeout)
    finally:
        if not finished:
            token.cancel()
            thread.join(_ABORT_GRACE)
    if not finished:
        return None, _timed_out(timeout)
    return outcome[0]


async def _call_http_async(summarizer, request, timeout):
    """An HttpSummarizer in acompact(): the transfer runs in a daemon thread (without the
    GIL, so the loop keeps serving other tasks) and settles a future on this loop. Running
    out of time or the cancellation of the calling task trips the token, which aborts the
    transfer. After a timeout the transfer is given a moment to end (awaited, so the loop
    runs on); a cancellation propagates at once, and the thread ends by itself."""
    loop = asyncio.get_running_loop()
    token = _ext.CancelToken()
    future = loop.create_future()

    def settle(result):
        if not future.done():
            future.set_result(result)

    def report(result):
        try:
            loop.call_soon_threadsafe(settle, result)
        except RuntimeError:
            pass  # the loop is closed: the compaction is long over

    _start_transfer(summarizer, request, token, report)
    try:
        done, _ = await asyncio.wait({future}, timeout=timeout)
    except BaseException:
        token.cancel()
        raise
    if not done:
        token.cancel()
        await asyncio.wait({future}, timeout=_ABORT_GRACE)
        return None, _timed_out(timeout)
    return future.result()


# ---- awaitables of a host backend ----------------------------------------------------------

# What a worker thread of _off_loop waits on (a _LoopCalls), or nothing in any other thread.
_local = threading.local()


async def _run(awaitable):
    return await awaitable


def _close_first(step):
    """Disposes of an abandoned first step's job, if it left one open."""
    if step[0] is not None:
        step[0].close()


def _finish_parsed(job):
    """``job.finish()`` with the record parsed, where the finish runs (in acompact, the
    worker rather than the loop)."""
    out = job.finish()
    if out[2] is None:
        return out
    return out[:2] + (json.loads(out[2]),) + out[3:]


def _abandoned(future, abandon):
    """Done callback of a step whose caller was cancelled: disposes of its result and reads
    its exception, so that asyncio does not log it as never retrieved."""
    if future.cancelled() or future.exception() is not None:
        return
    if abandon is not None:
        abandon(future.result())


class _LoopCalls:
    """The awaitables a worker thread of ``_off_loop`` waits for, run on the caller's loop."""

    def __init__(self, loop):
        self._loop = loop
        self._futures = set()
        self._cancelled = False

    def wait(self, awaitable, timeout):
        future = asyncio.run_coroutine_threadsafe(_run(awaitable), self._loop)
        self._futures.add(future)
        if self._cancelled:
            future.cancel()
        try:
            return _result(future, timeout)
        except concurrent.futures.CancelledError:
            # Not a storage failure: the caller is gone. The core call ends early, and the
            # binding raises this once it returns.
            raise asyncio.CancelledError() from None
        finally:
            self._futures.discard(future)

    def cancel(self):
        self._cancelled = True
        for future in list(self._futures):
            future.cancel()


def _result(future, timeout):
    """The result of a backend awaitable's concurrent future, waited for at most ``timeout``
    seconds; then it is cancelled (on its loop) and TimeoutError is raised."""
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError("backend timed out after %g s" % timeout) from None


class _Awaiter:
    """``awaiter(awaitable, timeout) -> value`` for the core's Compactor: called, with the GIL
    held, from inside a core call when a backend method returned an awaitable. In a worker
    thread of ``_off_loop`` the awaitable runs on the caller's loop; anywhere else on this
    object's private loop, started on first use in a daemon thread and stopped with the
    object. The calling thread waits without the GIL either way, for ``timeout`` seconds at
    most (backend_timeout)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._loop = None
        self._thread = None

    def __call__(self, awaitable, timeout):
        calls = getattr(_local, "calls", None)
        if calls is not None:
            return calls.wait(awaitable, timeout)
        loop = self._private_loop()
        if threading.current_thread() is self._thread:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            raise RuntimeError("ctxkeel: a backend coroutine cannot wait for the Compactor "
                               "that is waiting for it")
        return _result(asyncio.run_coroutine_threadsafe(_run(awaitable), loop), timeout)

    def _private_loop(self):
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_serve, args=(loop,), daemon=True,
                                          name="ctxkeel-backend")
                thread.start()
                self._loop, self._thread = loop, thread
                weakref.finalize(self, loop.call_soon_threadsafe, loop.stop)
            return self._loop


def _serve(loop):
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()
