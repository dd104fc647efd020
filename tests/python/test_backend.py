"""A host evidence backend (Compactor(backend=...)): put(key, text) and get(key), sync or
async, in place of the files under store_dir.

Every large tool output of each real transcript goes through compact -> read_evidence
paging -> the exact text; search works through get; a failing put fails open and is
recorded; a failing get is a clear error naming the ref; keys never leave their prefix. The
async tests drive their own loops with asyncio.run.
"""

import asyncio
import os
import re
import threading
import time
import warnings

import pytest

import ctxkeel
from compaction_support import folding_history, fresh_dir, synthetic_history, window_for

KEY = re.compile(r"^tool_results/[A-Za-z0-9._~-]+/[A-Za-z0-9._~-]+\.txt$")

# A Compactor whose backend is async runs the sync methods' coroutines on a private loop in a
# helper thread, which ends a moment after the Compactor is dropped: --leak-loops then sees
# the thread's last allocations in some rounds and not others (a few KB that do not grow with
# the number of runs).
private_loop = pytest.mark.no_leak_check


class DictBackend:
    """Evidence in a dict; records the keys it is asked about."""

    def __init__(self):
        self.data = {}
        self.puts = []
        self.gets = []

    def put(self, key, text):
        self.puts.append(key)
        self.data[key] = text

    def get(self, key):
        self.gets.append(key)
        return self.data.get(key)


class AsyncDictBackend(DictBackend):
    """The same with coroutine methods that really suspend."""

    async def put(self, key, text):
        await asyncio.sleep(0)
        DictBackend.put(self, key, text)

    async def get(self, key):
        await asyncio.sleep(0)
        return DictBackend.get(self, key)


def warn_compactor(tmp_path, messages, backend, **options):
    """A compactor for which `messages` is a warn-tier compaction that offloads every output
    over 1000 bytes outside the last two messages."""
    return ctxkeel.Compactor(window_for(messages, 0.65), store_dir=fresh_dir(tmp_path),
                             backend=backend, offload_threshold=1000, keep_tail=2, **options)


def outputs(messages):
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def read_paged(read, ref, page=7):
    chunks, offset = [], 0
    while True:
        chunk = read(ref, offset=offset, limit=page)
        if not chunk:
            return "".join(chunks)
        chunks.append(chunk)
        offset += page


def check_round_trip(c, backend, messages, result, read):
    """Every offloaded output reads back exactly, through the backend only."""
    offloaded = result.record["offloaded"]
    assert offloaded
    texts = outputs(messages)
    for o in offloaded:
        assert KEY.match(o["path"]) and o["path"] in backend.data
        assert read_paged(read, o["tool_call_id"]) == texts[o["tool_call_id"]]
        assert backend.data[o["path"]] == texts[o["tool_call_id"]]
    assert all(KEY.match(key) for key in backend.puts + backend.gets)
    # The evidence lives in the backend; the audit log stays in store_dir.
    store = c.options["store_dir"]
    assert not os.path.exists(os.path.join(store, "tool_results"))
    assert os.path.exists(os.path.join(store, "compactions", c.session_id + ".jsonl"))


def check_session_search(search, result, texts):
    """A session-wide search finds each offloaded output by its longest line."""
    refs = {o["tool_call_id"] for o in result.record["offloaded"]}
    for ref in refs:
        longest = max(texts[ref].split("\n"), key=len)
        hits = search(None, re.escape(longest[:60]))
        assert ref in {h["ref"] for h in hits} and {h["ref"] for h in hits} <= refs


def test_every_large_output_round_trips(tmp_path, corpus_messages):
    backend = DictBackend()
    c = warn_compactor(tmp_path, corpus_messages, backend)
    result = c.compact(corpus_messages)
    assert result.tier == "warn"
    check_round_trip(c, backend, corpus_messages, result, c.read_evidence)
    # The placeholder's path is a ref too, and search goes through get.
    o = result.record["offloaded"][0]
    text = outputs(corpus_messages)[o["tool_call_id"]]
    first = text.split("\n", 1)[0]
    assert c.read_evidence(o["path"], limit=1).rstrip("\n") == first
    hits = c.search_evidence(o["tool_call_id"], re.escape(first[:30]) if first else ".")
    # Lines count from 0, as read offsets do (POLICY-CHANGES 9).
    assert hits and hits[0]["line"] == 0 and hits[0]["ref"] == o["tool_call_id"]
    check_session_search(c.search_evidence, result, outputs(corpus_messages))


@private_loop
def test_an_async_backend_round_trips_with_compact_and_acompact(tmp_path, corpus_messages):
    backend = AsyncDictBackend()
    c = warn_compactor(tmp_path, corpus_messages, backend)
    # The sync API drives the coroutines on a private loop, even inside a running loop.

    async def inside_a_loop():
        return c.compact(corpus_messages)

    result = asyncio.run(inside_a_loop())
    check_round_trip(c, backend, corpus_messages, result, c.read_evidence)

    backend = AsyncDictBackend()
    c = warn_compactor(tmp_path, corpus_messages, backend)

    async def main():
        result = await c.acompact(corpus_messages)
        texts = outputs(corpus_messages)
        for o in result.record["offloaded"]:
            chunks, offset = [], 0
            while True:
                chunk = await c.aread_evidence(o["tool_call_id"], offset=offset, limit=7)
                if not chunk:
                    break
                chunks.append(chunk)
                offset += 7
            assert "".join(chunks) == texts[o["tool_call_id"]]
        hits = await c.asearch_evidence(None, ".")
        assert {h["ref"] for h in hits} <= {o["tool_call_id"] for o in result.record["offloaded"]}
        return result

    result = asyncio.run(main())
    check_round_trip(c, backend, corpus_messages, result, c.read_evidence)


@private_loop
def test_offload_goes_through_the_backend(tmp_path):
    for backend in (DictBackend(), AsyncDictBackend()):
        c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path), backend=backend)
        text = "".join("line %04d of a long log\n" % k for k in range(1000))
        message = {"role": "tool", "tool_call_id": "call_log", "content": text}
        out = c.offload(message)
        assert out["content"].startswith("[ctxkeel: tool output offloaded]")
        assert list(backend.data.values()) == [text]
        assert c.read_evidence("call_log", limit=10 ** 6) == text
        assert asyncio.run(c.aoffload(message))["content"] == out["content"]
        assert backend.puts == [next(iter(backend.data))]  # the same id is written once
        hits = c.search_evidence(None, "line 0999")
        assert [h["line"] for h in hits] == [999]  # counted from 0 (POLICY-CHANGES 9)
        assert c.read_evidence(hits[0]["ref"], offset=999, limit=1) == "line 0999 of a long log\n"


def test_a_failing_put_fails_open_and_is_recorded(tmp_path, corpus_messages):
    probe = warn_compactor(tmp_path, corpus_messages, DictBackend()).compact(corpus_messages)
    victim = probe.record["offloaded"][0]

    class FailingPut(DictBackend):
        def put(self, key, text):
            if key == victim["path"].replace(probe.record["session_id"], c.session_id):
                raise OSError("quota exceeded")
            DictBackend.put(self, key, text)

    backend = FailingPut()
    c = warn_compactor(tmp_path, corpus_messages, backend)
    result = c.compact(corpus_messages)
    source = next(m for m in corpus_messages if m.get("tool_call_id") == victim["tool_call_id"])
    assert any(m is source for m in result.messages)  # the output stays in the view
    assert victim["tool_call_id"] not in {o["tool_call_id"] for o in result.record["offloaded"]}
    error = result.record["error"]
    key = "tool_results/%s/" % c.session_id
    assert key in error and "OSError: quota exceeded" in error
    assert victim["tool_call_id"] in error
    with pytest.raises(ctxkeel.InputError):
        c.read_evidence(victim["tool_call_id"])

    # Every put failing: nothing changes in the view, and the record still says why.
    class Down(DictBackend):
        def put(self, key, text):
            raise OSError("backend down")

    c = warn_compactor(tmp_path, corpus_messages, Down())
    result = c.compact(corpus_messages)
    assert result.record is not None and result.record["offloaded"] == []
    assert result.record["error"].count("OSError: backend down") == len(probe.record["offloaded"])
    assert all(m in corpus_messages for m in result.messages)


@private_loop
def test_a_failing_put_at_the_tool_time_gate_warns(tmp_path):
    class Full(DictBackend):
        async def put(self, key, text):
            raise OSError("no space left")

    c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path), backend=Full(),
                          session_id="gate")
    message = {"role": "tool", "tool_call_id": "call_big", "content": "x\n" * 10000}
    with pytest.warns(RuntimeWarning) as caught:
        assert c.offload(message) is message
    text = str(caught[0].message)
    assert "tool_results/gate/call_big.txt" in text and "OSError: no space left" in text


class Breakable(DictBackend):
    """A dict backend whose get can be broken after the evidence is stored."""

    broken = None

    def get(self, key):
        if self.broken == "raises":
            raise ConnectionError("backend offline")
        if self.broken in ("bytes", "int"):
            return b"bytes" if self.broken == "bytes" else 7
        if self.broken == "async raises":
            return self.offline()
        return DictBackend.get(self, key)

    async def offline(self):
        await asyncio.sleep(0)
        raise ConnectionError("backend offline")


@private_loop
@pytest.mark.parametrize("broken", ["raises", "bytes", "int", "async raises"])
def test_a_failing_get_is_a_clear_error_naming_the_ref(tmp_path, broken):
    backend = Breakable()
    c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path), backend=backend)
    c.offload({"role": "tool", "tool_call_id": "call_7", "content": "y\n" * 10000})
    backend.broken = broken
    for call in (lambda: c.read_evidence("call_7"), lambda: c.search_evidence("call_7", "y"),
                 lambda: c.search_evidence(None, "y"),
                 lambda: asyncio.run(c.aread_evidence("call_7"))):
        with pytest.raises(ctxkeel.Error) as caught:
            call()
        err = caught.value
        assert err.code == "CK_EIO" and not isinstance(err, ctxkeel.InputError)
        assert "tool_results/%s/call_7.txt" % c.session_id in str(err)
        if broken.endswith("raises"):
            assert isinstance(err.__cause__, ConnectionError)
            assert "ConnectionError: backend offline" in str(err)
        else:
            assert isinstance(err.__cause__, TypeError) and "not a str or None" in str(err)
    # read_evidence names the ref as the caller gave it.
    with pytest.raises(ctxkeel.Error) as caught:
        c.read_evidence("call_7")
    assert caught.value.where == "call_7" and str(caught.value).startswith("ctxkeel: call_7: ")
    backend.broken = None
    assert c.read_evidence("call_7", limit=2) == "y\ny\n"


HOSTILE = ["../../etc/passwd", "/abs/path", "a/b/c", ".", "..", ".hidden", "x" * 500,
           "ünïcödé id", "id with spaces", "..\\..\\win", "tab\tand\nnewline", "%2e%2e%2f"]


def test_keys_never_escape_whatever_the_id(tmp_path):
    backend = DictBackend()
    c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path), backend=backend,
                          session_id="../../session")
    for k, call_id in enumerate(HOSTILE):
        text = ("output %d\n" % k) * 2000
        c.offload({"role": "tool", "tool_call_id": call_id, "content": text})
        assert c.read_evidence(call_id, limit=10 ** 6) == text
    assert len(backend.data) == len(HOSTILE)
    for key in backend.puts + backend.gets:
        assert KEY.match(key), key
        assert not any(part in ("", ".", "..") or part.startswith(".")
                       for part in key.split("/")), key
    assert not os.path.exists(os.path.join(c.options["store_dir"], "tool_results"))


def test_a_resumed_session_reads_and_searches_through_the_backend(tmp_path, corpus_messages):
    backend = DictBackend()
    store = fresh_dir(tmp_path)
    first = ctxkeel.Compactor(window_for(corpus_messages, 0.65), store_dir=store,
                              backend=backend, offload_threshold=1000, keep_tail=2,
                              session_id="resumed")
    result = first.compact(corpus_messages)
    again = ctxkeel.Compactor(window_for(corpus_messages, 0.65), store_dir=store,
                              backend=backend, offload_threshold=1000, keep_tail=2,
                              session_id="resumed")
    texts = outputs(corpus_messages)
    refs = {o["tool_call_id"] for o in result.record["offloaded"]}
    for ref in refs:
        assert again.read_evidence(ref, limit=10 ** 6) == texts[ref]
    check_session_search(again.search_evidence, result, texts)


def test_a_backend_needs_callable_put_and_get(tmp_path):
    class NoGet:
        def put(self, key, text):
            pass

    with pytest.raises(TypeError, match="backend.get must be callable"):
        ctxkeel.Compactor(1000, store_dir=fresh_dir(tmp_path), backend=NoGet())

    class NotCallable(DictBackend):
        put = "nope"

    with pytest.raises(TypeError, match="backend.put must be callable, not str"):
        ctxkeel.Compactor(1000, store_dir=fresh_dir(tmp_path), backend=NotCallable())
    backend = DictBackend()
    c = ctxkeel.Compactor(1000, store_dir=fresh_dir(tmp_path), backend=backend)
    assert c.options["backend"] is backend


def test_an_interrupt_in_put_is_not_a_storage_failure(tmp_path):
    class Interrupted(BaseException):
        pass

    class Backend(DictBackend):
        def put(self, key, text):
            raise Interrupted()

    c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path), backend=Backend())
    with pytest.raises(Interrupted):
        c.offload({"role": "tool", "tool_call_id": "c", "content": "z\n" * 10000})
    assert not c._core.busy
    messages = synthetic_history(turns=8)
    c = warn_compactor(tmp_path, messages, Backend())
    with pytest.raises(Interrupted):
        c.compact(messages, summarize=lambda request: "## User Intent\nx")
    assert not c._core.busy


# ---- asyncio -------------------------------------------------------------------------------


class GatedBackend(DictBackend):
    """Its put waits until another task opens the gate; records what happened meanwhile."""

    def __init__(self):
        DictBackend.__init__(self)
        self.gate = None
        self.waiting = None
        self.threads = set()

    async def put(self, key, text):
        self.threads.add(threading.get_ident())
        self.waiting.set()
        await self.gate.wait()
        DictBackend.put(self, key, text)


def test_acompact_keeps_the_loop_running_while_put_awaits(tmp_path):
    messages = synthetic_history(turns=16)
    backend = GatedBackend()
    c = warn_compactor(tmp_path, messages, backend)
    ticks = []

    async def other_task():
        # Runs on the loop while the compaction is in the middle of its core call.
        await backend.waiting.wait()
        for k in range(5):
            ticks.append(k)
            await asyncio.sleep(0)
        assert c._core.busy and not backend.data  # the compaction has not moved on
        # Other calls on the compactor wait for no lock: they are refused.
        with pytest.raises(ctxkeel.Error) as caught:
            c.read_evidence("call_000")
        assert caught.value.code == "CK_EBUSY"
        backend.gate.set()

    async def main():
        backend.gate, backend.waiting = asyncio.Event(), asyncio.Event()
        loop_thread = threading.get_ident()
        result, _ = await asyncio.wait_for(
            asyncio.gather(c.acompact(messages), other_task()), timeout=60)
        return result, loop_thread

    result, loop_thread = asyncio.run(main())
    assert ticks == [0, 1, 2, 3, 4]
    assert result.tier == "warn" and result.record["offloaded"]
    assert len(backend.data) == len(result.record["offloaded"])
    assert backend.threads == {loop_thread}  # the coroutines ran on the caller's loop
    assert not c._core.busy


def test_cancelling_acompact_while_put_awaits(tmp_path):
    messages = synthetic_history(turns=16)
    backend = GatedBackend()
    c = warn_compactor(tmp_path, messages, backend)

    async def main():
        backend.gate, backend.waiting = asyncio.Event(), asyncio.Event()
        task = asyncio.ensure_future(c.acompact(messages))
        await backend.waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The worker ends by itself and lets go of the compactor.
        for _ in range(1000):
            if not c._core.busy:
                break
            await asyncio.sleep(0.01)
        assert not c._core.busy
        backend.gate.set()
        return await c.acompact(messages)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a cancelled coroutine never ran
        result = asyncio.run(main())
    assert result.tier == "warn" and result.record["offloaded"]
    assert len(backend.data) == len(result.record["offloaded"])


def test_a_plain_backend_in_acompact_runs_off_the_loop(tmp_path):
    messages = synthetic_history(turns=8)
    threads = set()

    class Backend(DictBackend):
        def put(self, key, text):
            threads.add(threading.get_ident())
            DictBackend.put(self, key, text)

    backend = Backend()
    c = warn_compactor(tmp_path, messages, backend)

    async def main():
        await c.acompact(messages)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads and loop_thread not in threads


# ---- a backend that never answers ----------------------------------------------------------


class Hung(DictBackend):
    """Coroutine methods that never finish; counts the calls that started and were
    cancelled."""

    def __init__(self):
        DictBackend.__init__(self)
        self.started = 0
        self.cancelled = 0

    async def wait_forever(self):
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def put(self, key, text):
        await self.wait_forever()

    async def get(self, key):
        await self.wait_forever()


def within(seconds, fn):
    """fn() in a thread, which must be done within `seconds` (generous: it only tells
    "returned" from "hung")."""
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "still waiting for the backend after %g s" % seconds
    assert out, "the call raised"
    return out[0]


def eventually(condition, seconds=30):
    """Whether `condition()` holds within `seconds` (it is polled)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@private_loop
def test_a_backend_that_never_answers_times_out_and_fails_open(tmp_path):
    messages = synthetic_history(turns=16)
    backend = Hung()
    c = warn_compactor(tmp_path, messages, backend, backend_timeout=0.2)
    assert c.options["backend_timeout"] == 0.2
    result = within(60, lambda: c.compact(messages))
    # The outputs stay in the view, the record says why, and the backend was waited for once:
    # its later calls in the same compaction failed at once.
    assert result.tier == "warn" and result.record["offloaded"] == []
    assert all(m in messages for m in result.messages)
    error = result.record["error"]
    assert "TimeoutError: backend timed out after 0.2 s" in error
    assert "backend timed out earlier in this call" in error
    assert backend.started == 1
    assert eventually(lambda: backend.cancelled == 1)  # on the loop, a moment later
    assert not c._core.busy
    # Nothing is left busy: the next calls run (and time out) as well.
    assert within(60, lambda: c.compact(messages)).record["offloaded"] == []
    message = {"role": "tool", "tool_call_id": "call_big", "content": "x\n" * 10000}
    with pytest.warns(RuntimeWarning, match="backend timed out"):
        assert within(60, lambda: c.offload(message)) is message
    with pytest.raises(ctxkeel.Error) as caught:
        c.read_evidence("call_big")
    assert caught.value.code == "CK_EIO" and isinstance(caught.value.__cause__, TimeoutError)
    with pytest.raises(ctxkeel.Error, match="backend timed out"):
        c.search_evidence("call_big", "x")


def test_acompact_with_a_backend_that_never_answers(tmp_path):
    messages = synthetic_history(turns=16)
    backend = Hung()
    c = warn_compactor(tmp_path, messages, backend, backend_timeout=0.2)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        other = asyncio.ensure_future(ticker())
        try:
            first = await asyncio.wait_for(c.acompact(messages), timeout=60)
            second = await asyncio.wait_for(c.acompact(messages), timeout=60)
        finally:
            other.cancel()
        return first, second, ticks

    first, second, ticks = asyncio.run(main())
    for result in (first, second):
        assert result.record["offloaded"] == []
        assert "backend timed out after 0.2 s" in result.record["error"]
    assert ticks > 0  # the loop ran while the backend was waited for
    assert backend.started == backend.cancelled == 2
    assert not c._core.busy


def test_backend_timeout_is_checked_by_the_core(tmp_path):
    store = fresh_dir(tmp_path)
    assert ctxkeel.Compactor(1000, store_dir=store).options["backend_timeout"] == 10.0
    assert ctxkeel.Compactor(1000, store_dir=store,
                             backend_timeout=3).options["backend_timeout"] == 3.0
    for bad in (0, -1, 0.0, float("nan"), float("inf"), 86401):
        with pytest.raises(ctxkeel.InputError) as caught:
            ctxkeel.Compactor(1000, store_dir=store, backend_timeout=bad)
        assert caught.value.where == "backend_timeout" and caught.value.code == "CK_EINVAL"
    for bad in ("10", True, [1]):
        with pytest.raises(TypeError, match="backend_timeout"):
            ctxkeel.Compactor(1000, store_dir=store, backend_timeout=bad)


# ---- other host code that misbehaves ---------------------------------------------------------


class Sneaky(str):
    """A reply that is a str, but whose methods raise."""

    def strip(self, *args):
        raise RuntimeError("strip is booby-trapped")

    def __str__(self):
        raise RuntimeError("__str__ is booby-trapped")

    def encode(self, *args, **kwargs):
        raise RuntimeError("encode is booby-trapped")


def test_a_str_subclass_reply_is_copied_not_trusted(tmp_path):
    history = folding_history()
    c = ctxkeel.Compactor(window_for(history, 0.85), store_dir=fresh_dir(tmp_path))
    reply = Sneaky("## User Intent\nfix the parser\n\n## Next Steps\nrun the tests")
    result = c.compact(history, summarize=lambda request: reply)
    assert result.tier == "full" and result.record["fallback"] is None
    assert "fix the parser" in result.record["checkpoint"]

    class Empty(str):
        def strip(self, *args):
            return "not empty, it says"

    c = ctxkeel.Compactor(window_for(history, 0.85), store_dir=fresh_dir(tmp_path))
    result = c.compact(history, summarize=lambda request: Empty("   "))
    assert result.record["fallback"] == "summarizer returned an empty reply"

    class Liar:
        @property
        def __class__(self):
            raise RuntimeError("no class")

    c = ctxkeel.Compactor(window_for(history, 0.85), store_dir=fresh_dir(tmp_path))
    result = c.compact(history, summarize=lambda request: Liar())
    assert result.record["fallback"].startswith("summarizer ")  # a reason, not an exception

    async def main():
        async def summarize(request):
            return reply

        cc = ctxkeel.Compactor(window_for(history, 0.85), store_dir=fresh_dir(tmp_path))
        return await cc.acompact(history, summarize=summarize)

    result = asyncio.run(main())
    assert result.record["fallback"] is None and "fix the parser" in result.record["checkpoint"]


def test_token_sums_saturate_with_a_huge_host_count(tmp_path):
    history = synthetic_history(turns=4)
    huge = 2 ** 64 - 2  # the largest count a host counter may give
    c = ctxkeel.Compactor(10 ** 6, store_dir=fresh_dir(tmp_path), estimator=lambda text: huge)
    # Each message costs at most the largest count, never a count that wrapped to a few
    # tokens (which made the view look nearly empty and skipped compaction): the task alone
    # exceeds the window, so no view can be built, and the count told is the saturated one.
    with pytest.raises(ctxkeel.ContextOverflowError) as info:
        c.compact(history)
    assert str(2 ** 64 - 1) in str(info.value) or str(huge) in str(info.value)
