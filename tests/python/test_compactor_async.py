"""Compactor.acompact: coroutine and plain summarizers, timeouts, cancellation, concurrency.

Each test drives its own event loop with asyncio.run, so the suite needs no asyncio plugin.
"""

import asyncio
import copy
import os
import threading
import time

import pytest

import ctxkeel
from compaction_support import (
    Scripted,
    check_result,
    checkpoint_reply,
    folding_history,
    fresh_dir,
    is_checkpoint,
    window_for,
)


def full_compactor(tmp_path, messages, **options):
    """A compactor for which `messages` is a full-tier compaction."""
    return ctxkeel.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path),
                             **options)


async def acompact_checked(compactor, messages, summarize=None, calls=None):
    before = copy.deepcopy(messages)
    made_before = calls() if calls else 0
    result = await compactor.acompact(messages, summarize=summarize)
    assert messages == before
    check_result(compactor, messages, result, (calls() if calls else 0) - made_before)
    return result


class AsyncScripted:
    """A coroutine summarizer that records its requests."""

    def __init__(self, delay=0.0):
        self.requests = []
        self.delay = delay

    async def __call__(self, request):
        self.requests.append(request)
        await asyncio.sleep(self.delay)
        return checkpoint_reply(request)


def test_a_coroutine_summarizer(tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages)
    s = AsyncScripted(delay=0.01)

    async def main():
        return await acompact_checked(c, messages, s, lambda: len(s.requests))

    result = asyncio.run(main())
    assert result.tier == "full" and len(s.requests) == 1
    assert result.record["fallback"] is None
    assert "Keep the public API unchanged." in result.record["checkpoint"]
    span = s.requests[0]["messages"]
    assert span and all(any(m is o for o in messages) for m in span)
    # The same compaction with the sync API gives the same view.
    sync = full_compactor(tmp_path, messages).compact(messages, summarize=Scripted())
    assert len(sync.messages) == len(result.messages)
    assert [is_checkpoint(m) for m in sync.messages] == [is_checkpoint(m) for m in
                                                          result.messages]


def test_a_plain_summarizer_runs_off_the_loop(tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages)
    where = {}
    ticks = []

    def slow(request):
        where["thread"] = threading.current_thread()
        time.sleep(0.3)
        return checkpoint_reply(request)

    async def ticker(stop):
        while not stop.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.02)

    async def main():
        stop = asyncio.Event()
        tick = asyncio.ensure_future(ticker(stop))
        result = await c.acompact(messages, summarize=slow)
        stop.set()
        await tick
        return result

    result = asyncio.run(main())
    assert result.record["fallback"] is None
    assert where["thread"] is not threading.main_thread() and where["thread"].daemon
    assert len(ticks) >= 5  # the loop ran other tasks during the 0.3 s summary


def test_a_function_that_returns_an_awaitable(tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages)
    s = AsyncScripted()

    async def main():
        return await c.acompact(messages, summarize=lambda request: s(request))

    result = asyncio.run(main())
    assert result.record["fallback"] is None and len(s.requests) == 1


def test_summarize_none_in_acompact(tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages)
    result = asyncio.run(acompact_checked(c, messages))
    assert result.tier == "full" and result.record["fallback"] is None
    assert any(is_checkpoint(m) for m in result.messages)


def test_other_coroutines_run_while_the_summarizer_awaits(tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages, summarize_timeout=5)
    progress = []

    async def main():
        handed_over = asyncio.Event()

        async def summarize(request):
            # Waits for a result that only another coroutine produces.
            await handed_over.wait()
            return checkpoint_reply(request)

        async def other():
            for k in range(5):
                progress.append(k)
                await asyncio.sleep(0)
            handed_over.set()

        result, _ = await asyncio.gather(c.acompact(messages, summarize=summarize), other())
        return result

    result = asyncio.run(main())
    assert progress == [0, 1, 2, 3, 4]
    assert result.record["fallback"] is None


def async_failures():
    async def raises(request):
        raise ValueError("bad gateway")

    async def own_timeout(request):
        raise asyncio.TimeoutError("read timed out")

    async def returns_int(request):
        return 42

    async def returns_empty(request):
        return ""

    async def garbage(request):
        return "<html>502</html>"

    async def hangs(request):
        await asyncio.sleep(5)

    return [
        ("raises", raises, "summarizer raised ValueError: bad gateway"),
        ("own-timeout", own_timeout, "summarizer raised TimeoutError: read timed out"),
        ("int", returns_int, "summarizer returned int"),
        ("empty", returns_empty, "summarizer returned an empty reply"),
        ("garbage", garbage, "summarizer reply had no usable anchors"),
        ("hangs", hangs, "summarizer timed out after 0.2 s"),
        ("sync-raises", lambda r: 1 / 0, "summarizer raised ZeroDivisionError"),
        ("sync-list", lambda r: ["x"], "summarizer returned list"),
    ]


@pytest.mark.parametrize("name,summarize,reason", async_failures(),
                         ids=[f[0] for f in async_failures()])
def test_async_failures_fall_back(name, summarize, reason, tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages, summarize_timeout=0.2)
    started = time.monotonic()
    result = asyncio.run(acompact_checked(c, messages, summarize))
    assert time.monotonic() - started < 2.0
    assert result.tier == "full"
    assert result.record["fallback"].startswith(reason), result.record["fallback"]
    assert any(is_checkpoint(m) for m in result.messages)


def test_a_hung_plain_summarizer_times_out(tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages, summarize_timeout=0.2)
    release, finished = threading.Event(), threading.Event()

    def hang(request):
        try:
            release.wait(5)
        finally:
            finished.set()
        return checkpoint_reply(request)

    started = time.monotonic()
    try:
        result = asyncio.run(c.acompact(messages, summarize=hang))
        assert time.monotonic() - started < 2.0
        assert result.record["fallback"] == "summarizer timed out after 0.2 s"
    finally:
        release.set()
        finished.wait(5)


@pytest.mark.parametrize("kind", ["coroutine", "thread"])
def test_cancelling_acompact(kind, tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages, summarize_timeout=30)
    state = {"cancelled": False}
    release = threading.Event()

    async def waits_forever(request):
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise

    def blocks(request):
        release.wait(5)
        return checkpoint_reply(request)

    async def main():
        task = asyncio.ensure_future(
            c.acompact(messages, summarize=waits_forever if kind == "coroutine" else blocks))
        await asyncio.sleep(0.05)
        assert c._core.busy
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)  # let the summarizer's task see its cancellation

    try:
        asyncio.run(main())
    finally:
        release.set()
    if kind == "coroutine":
        assert state["cancelled"]
    # The abandoned compaction wrote no audit record, and the compactor is free again.
    log = os.path.join(c.options["store_dir"], "compactions", c.session_id + ".jsonl")
    assert not os.path.exists(log) or os.path.getsize(log) == 0
    assert not c._core.busy
    before = copy.deepcopy(messages)
    result = c.compact(messages, summarize=Scripted())
    assert messages == before and ctxkeel.check_pairs(result.messages) == []
    assert result.messages[-1] is messages[-1]


def test_a_second_acompact_waits_its_turn(tmp_path):
    """While one acompact awaits its summarizer, a sync compact() is refused (CK_EBUSY), and
    a second acompact on the same Compactor waits for the first instead of failing."""
    messages = folding_history()
    c = full_compactor(tmp_path, messages)
    order = []

    async def first():
        result = await c.acompact(messages, summarize=AsyncScripted(delay=0.2))
        order.append("first")
        return result

    async def second():
        await asyncio.sleep(0.05)
        with pytest.raises(ctxkeel.Error) as sync_err:
            c.compact(messages)
        assert sync_err.value.code == "CK_EBUSY"
        result = await c.acompact(messages)
        order.append("second")
        return result

    async def main():
        return await asyncio.gather(first(), second())

    done, waited = asyncio.run(main())
    assert order == ["first", "second"]
    assert isinstance(done, ctxkeel.CompactionResult) and done.record["fallback"] is None
    assert isinstance(waited, ctxkeel.CompactionResult)
    # The second saw the first one's checkpoint: nothing more to fold.
    assert ctxkeel.check_pairs(waited.messages) == []
    assert any(is_checkpoint(m) for m in waited.messages)


def test_many_acompacts_on_one_compactor_all_answer(tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages)

    async def main():
        return await asyncio.gather(*(c.acompact(messages[: len(messages) - 2 * (k % 3)])
                                      for k in range(12)))

    results = asyncio.run(main())
    assert len(results) == 12
    for result in results:
        assert ctxkeel.check_pairs(result.messages) == []
    assert not c._core.busy


def test_the_loop_runs_while_the_core_works(tmp_path):
    """No host code: the core's work runs in a worker thread, so other tasks of the loop
    run meanwhile (they did not at all when the core ran on the loop's thread)."""
    messages = folding_history(turns=1500)
    c = full_compactor(tmp_path, messages)
    state = {"running": True, "ticks": 0}

    async def ticker():
        while state["running"]:
            state["ticks"] += 1
            await asyncio.sleep(0)

    async def main():
        task = asyncio.ensure_future(ticker())
        await asyncio.sleep(0)
        start = state["ticks"]
        result = await c.acompact(messages)
        during = state["ticks"] - start
        state["running"] = False
        await task
        return result, during

    result, during = asyncio.run(main())
    assert result.tier in ("full", "emergency") and result.record is not None
    assert during > 1, during


def test_many_compactors_in_one_loop(tmp_path):
    messages = folding_history()
    window = window_for(messages, 0.85)
    store = fresh_dir(tmp_path)
    options = dict(session_id="loop", offload_threshold=10 ** 9)
    compactors = [ctxkeel.Compactor(window, store_dir=os.path.join(store, str(i)), **options)
                  for i in range(5)]

    async def main():
        return await asyncio.gather(*(c.acompact(messages, summarize=AsyncScripted(0.01))
                                      for c in compactors))

    results = asyncio.run(main())
    assert all(r.messages == results[0].messages for r in results)
    assert all(r.record["fallback"] is None for r in results)


def test_compact_runs_a_coroutine_summarizer_on_a_private_loop(tmp_path):
    messages = folding_history()
    c = full_compactor(tmp_path, messages)
    s = AsyncScripted(delay=0.01)
    result = c.compact(messages, summarize=s)
    assert result.record["fallback"] is None and len(s.requests) == 1
    assert "Run pytest -q and report." in result.record["checkpoint"]
