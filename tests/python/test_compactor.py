"""ctxkeel.Compactor: options, tiers, the summarizer contract, state, audit, threads, usage.

Every compact() call checks the invariants of compaction_support.check_result: a valid view
(check_pairs == []), never larger than the input view, bounded by soft x window after soft,
at most one summary call and none below soft, the system message, the task and the newest
message returned as the caller's own objects; and the input list is compared with a deep
copy taken before the call.
"""

import asyncio
import copy
import gc
import inspect
import json
import logging
import math
import os
import stat
import threading
import time

import pytest

import ctxkeel
from compaction_support import (
    RECORD_FIELDS,
    Scripted,
    check_result,
    corpus_names,
    find_message,
    fresh_dir,
    is_checkpoint,
    load_corpus,
    replay,
    folding_history,
    synthetic_history,
    window_for,
)


def compact_checked(compactor, messages, summarize=None, **kwargs):
    """compact() plus every invariant, with the number of summary calls it made."""
    before = copy.deepcopy(messages)
    calls = summarize.calls if isinstance(summarize, Scripted) else 0
    result = compactor.compact(messages, summarize=summarize, **kwargs)
    made = (summarize.calls if isinstance(summarize, Scripted) else 0) - calls
    assert messages == before
    check_result(compactor, messages, result, made)
    return result, made


def checkpoints(messages):
    return [m for m in messages if is_checkpoint(m)]


# ---- the public surface ------------------------------------------------------------------


@pytest.mark.no_leak_check  # inspect's text-signature parser keeps a few strings per call
def test_signature_matches_the_design():
    sig = inspect.signature(ctxkeel.Compactor)
    expected = [("context_window", inspect.Parameter.empty), ("session_id", None),
                ("store_dir", ".ctxkeel"), ("warn", 0.60), ("soft", 0.70), ("full", 0.80),
                ("emergency", 0.95), ("keep_tail", 6), ("offload_threshold", 4000),
                ("tool_offload_threshold", 10000), ("summary_max_tokens", None),
                ("summarize_timeout", 60.0), ("estimator", "default"), ("format", "auto"),
                ("pin_first_user", True), ("on_compaction", None), ("target", None),
                ("keep_tail_tokens", None), ("prompt_cache", None), ("cache_breakpoints", False),
                ("retention", None), ("on_fallback", None), ("backend", None),
                ("backend_timeout", 10.0), ("store", None), ("min_gain", None)]
    assert [(p.name, p.default) for p in sig.parameters.values()] == expected
    assert all(p.kind == p.KEYWORD_ONLY for p in list(sig.parameters.values())[1:])
    for name in ("compact", "acompact", "offload", "read_evidence", "search_evidence",
                 "observe_usage", "reset", "handle_read_evidence"):
        assert getattr(ctxkeel.Compactor, name).__doc__
    assert inspect.iscoroutinefunction(ctxkeel.Compactor.acompact)
    assert str(inspect.signature(ctxkeel.Compactor.compact)) == (
        "(self, messages, *, tools=None, summarize=None)")
    assert str(inspect.signature(ctxkeel.Compactor.read_evidence)) == (
        "(self, ref, *, offset=0, limit=200)")


def test_options_in_force(tmp_path):
    store = fresh_dir(tmp_path)
    c = ctxkeel.Compactor(100000, store_dir=store, session_id="opts")
    o = c.options
    assert o["context_window"] == 100000 and o["session_id"] == "opts"
    assert o["store_dir"] == store
    assert (o["warn"], o["soft"], o["full"], o["emergency"]) == (0.60, 0.70, 0.80, 0.95)
    assert (o["keep_tail"], o["offload_threshold"], o["tool_offload_threshold"]) == (6, 4000,
                                                                                     10000)
    assert o["summary_max_tokens"] == 5000  # window / 20 within [256, 8192]
    # target and keep_tail_tokens: None takes the core's defaults (POLICY-CHANGES 2).
    assert o["target"] == 0.50 and o["keep_tail_tokens"] == 25000  # window / 4
    assert o["summarize_timeout"] == 60.0 and o["pin_first_user"] is True
    assert c.session_id == "opts" and c.usage_factor == 1.0
    other = ctxkeel.Compactor(1000, store_dir=tmp_path / "p", summary_max_tokens=300,
                              estimator="chars4", format="openai", pin_first_user=False,
                              summarize_timeout=None)
    o = other.options
    assert (o["target"], o["keep_tail_tokens"]) == (0.50, 250)
    assert o["summary_max_tokens"] == 300 and o["estimator"] == "chars4"
    assert o["format"] == "openai" and o["pin_first_user"] is False
    assert o["summarize_timeout"] is None and o["store_dir"] == str(tmp_path / "p")
    o = ctxkeel.Compactor(1000, store_dir=store, target=0.4, keep_tail_tokens=123).options
    assert (o["target"], o["keep_tail_tokens"]) == (0.4, 123)
    # Without a session_id each compactor gets its own random one.
    a, b = ctxkeel.Compactor(1000, store_dir=store), ctxkeel.Compactor(1000, store_dir=store)
    assert a.session_id != b.session_id and len(a.session_id) >= 8


@pytest.mark.parametrize("kwargs", [
    {"context_window": "1000"}, {"context_window": 1000.0}, {"context_window": True},
    {"warn": "0.6"}, {"soft": None}, {"full": True}, {"keep_tail": 2.0},
    {"offload_threshold": "4000"}, {"tool_offload_threshold": None},
    {"summary_max_tokens": 1.5}, {"session_id": 7}, {"session_id": b"id"},
    {"store_dir": 5}, {"estimator": 1}, {"format": None}, {"pin_first_user": 1},
    {"summarize_timeout": "60"}, {"summarize_timeout": True}, {"on_compaction": 5},
    {"target": "0.5"}, {"target": True}, {"keep_tail_tokens": 1.5}, {"keep_tail_tokens": "9"},
])
def test_option_types(kwargs, tmp_path):
    kwargs = dict(kwargs)
    window = kwargs.pop("context_window", 1000)
    kwargs.setdefault("store_dir", str(tmp_path))
    with pytest.raises(TypeError):
        ctxkeel.Compactor(window, **kwargs)


@pytest.mark.parametrize("kwargs,where", [
    ({"context_window": 0}, "context_window"), ({"context_window": -5}, "context_window"),
    ({"context_window": 2 ** 70}, "context_window"), ({"warn": 0}, "warn"),
    ({"warn": -0.1}, "warn"), ({"emergency": 1.5}, "emergency"),
    ({"soft": float("nan")}, "soft"), ({"warn": 0.75}, "warn"),
    ({"soft": 0.9}, "soft"), ({"full": 0.97}, "full"), ({"keep_tail": 0}, "keep_tail"),
    ({"offload_threshold": 0}, "offload_threshold"),
    ({"tool_offload_threshold": -1}, "tool_offload_threshold"),
    ({"summary_max_tokens": 0}, "summary_max_tokens"), ({"session_id": ""}, "session_id"),
    ({"session_id": "a\x00b"}, "session_id"), ({"store_dir": ""}, "store_dir"),
    ({"summarize_timeout": 0}, "summarize_timeout"),
    ({"summarize_timeout": -1.0}, "summarize_timeout"),
    ({"summarize_timeout": float("inf")}, "summarize_timeout"),
    ({"summarize_timeout": float("nan")}, "summarize_timeout"),
    ({"target": 0}, "target"), ({"target": -0.5}, "target"), ({"target": 0.7}, "target"),
    ({"target": 0.75}, "target"), ({"target": float("nan")}, "target"),
    ({"soft": 0.65, "target": 0.66}, "target"), ({"keep_tail_tokens": 0}, "keep_tail_tokens"),
    ({"keep_tail_tokens": -1}, "keep_tail_tokens"),
])
def test_option_values_name_the_option(kwargs, where, tmp_path):
    kwargs = dict(kwargs)
    window = kwargs.pop("context_window", 1000)
    kwargs.setdefault("store_dir", str(tmp_path))
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.Compactor(window, **kwargs)
    assert isinstance(info.value, ValueError)
    assert info.value.where == where and info.value.code == "CK_EINVAL"
    assert where in str(info.value)


@pytest.mark.parametrize("kwargs", [{"estimator": "exact"}, {"format": "gpt-chat"},
                                    {"store_dir": "a\x00b"}])
def test_option_names_are_values_too(kwargs, tmp_path):
    with pytest.raises(ValueError):
        ctxkeel.Compactor(1000, **kwargs)


def test_bad_arguments_to_compact(tmp_path):
    c = ctxkeel.Compactor(1000, store_dir=fresh_dir(tmp_path))
    with pytest.raises(TypeError):
        c.compact("not a list")
    with pytest.raises(TypeError):
        c.compact([], tools={"name": "x"})
    with pytest.raises(TypeError):
        c.compact([], summarize="not callable")
    with pytest.raises(ctxkeel.InputError) as info:
        c.compact([{"role": "user", "content": "hi"}, {"content": "no role"}])
    assert info.value.where == "messages[1].role" and info.value.index == 1
    # A failed call leaves the compactor free for the next one.
    result = c.compact([{"role": "user", "content": "hi"}])
    assert result.tier == "none" and result.record is None


# ---- tiers -------------------------------------------------------------------------------


def test_below_warn_the_view_is_the_history(tmp_path):
    messages = synthetic_history(turns=6)
    on = []
    c = ctxkeel.Compactor(window_for(messages, 0.3), store_dir=fresh_dir(tmp_path),
                          on_compaction=on.append)
    s = Scripted()
    result, made = compact_checked(c, messages, summarize=s)
    assert result.tier == "none" and made == 0 and result.record is None and on == []
    assert len(result.messages) == len(messages)
    assert all(a is b for a, b in zip(result.messages, messages))
    assert result.tokens_before == result.tokens_after
    # The compactor sums per-message estimates; the two may differ by rounding and overhead.
    assert abs(result.tokens_before - ctxkeel.estimate_tokens(messages)) <= len(messages) + 3


def test_warn_offloads_outside_the_tail_without_a_model(tmp_path):
    messages = synthetic_history()
    c = ctxkeel.Compactor(window_for(messages, 0.65), store_dir=fresh_dir(tmp_path))
    s = Scripted()
    result, made = compact_checked(c, messages, summarize=s)
    assert result.tier == "warn" and made == 0
    assert len(result.messages) == len(messages) and not checkpoints(result.messages)
    offloaded = {o["tool_call_id"]: o for o in result.record["offloaded"]}
    assert offloaded
    for original, out in zip(messages, result.messages):
        if original["role"] == "tool" and original["tool_call_id"] in offloaded:
            assert out is not original and out["tool_call_id"] == original["tool_call_id"]
            assert out["content"].startswith("[ctxkeel: tool output offloaded]")
            assert len(out["content"].encode()) < len(original["content"].encode())
            o = offloaded[original["tool_call_id"]]
            assert o["bytes"] == len(original["content"].encode())
            assert o["lines"] == original["content"].count("\n") + 1
            with open(o["path"], encoding="utf-8") as f:
                assert f.read() == original["content"]
        else:
            assert out is original
    # The tail (the last keep_tail messages) is never offloaded.
    assert all(a is b for a, b in zip(result.messages[-6:], messages[-6:]))
    assert result.tokens_after < result.tokens_before


@pytest.mark.parametrize("ratio,tiers", [(0.75, ("soft", "full")), (0.85, ("full",))])
def test_soft_and_full_summarize_once(ratio, tiers, tmp_path):
    messages = folding_history()
    c = ctxkeel.Compactor(window_for(messages, ratio), store_dir=fresh_dir(tmp_path))
    s = Scripted()
    result, made = compact_checked(c, messages, summarize=s)
    assert result.tier in tiers and made == 1
    request = s.requests[0]
    assert set(request) == {"system", "prompt", "max_tokens", "tier", "messages", "previous"}
    assert request["tier"] in tiers and request["previous"] is None
    assert request["max_tokens"] == c.options["summary_max_tokens"]
    assert isinstance(request["system"], str) and isinstance(request["prompt"], str)
    # The span is the caller's own objects, a contiguous run of the history.
    span = request["messages"]
    start = next(i for i, m in enumerate(messages) if m is span[0])
    assert all(a is b for a, b in zip(span, messages[start:start + len(span)]))
    # The view: pinned + checkpoint + the rest, the checkpoint carrying the reply.
    cps = checkpoints(result.messages)
    assert len(cps) == 1 and cps[0]["role"] == "user"
    text = cps[0]["content"]
    assert "Keep the public API unchanged." in text and "Run pytest -q and report." in text
    assert result.messages[0] is messages[0] and result.messages[1] is messages[1]
    assert result.messages[2] is cps[0]
    record = result.record
    assert record["fallback"] is None and record["summarized"] > 0
    assert record["checkpoint"] == text and record["anchors"]["key_decisions"]
    assert record["msgs_before"] == len(messages)
    assert record["msgs_after"] == len(result.messages)
    assert record["covered"]["count"] > 0 and record["estimator"] == "default"


def test_emergency_needs_no_model_and_keeps_the_task(tmp_path):
    messages = synthetic_history(turns=60, big_lines=4)  # nothing to offload: it must fold
    c = ctxkeel.Compactor(window_for(messages, 1.3), store_dir=fresh_dir(tmp_path))
    s = Scripted()
    result, made = compact_checked(c, messages, summarize=s)
    assert result.tier == "emergency" and made == 0
    assert result.record["fallback"] is None
    assert result.messages[1] is messages[1]  # the task, which an idle agent would lack
    assert len(checkpoints(result.messages)) == 1
    assert "Fix the failing test" in result.messages[1]["content"]


def test_emergency_keeps_the_newest_turns_that_fit(tmp_path):
    # Small turns: the fold keeps as many of the newest whole turns as fit within the target
    # (POLICY-CHANGES 4: the target, 0.50, not the warn threshold).
    messages = synthetic_history(turns=60, big_lines=4)
    window = window_for(messages, 1.3)
    c = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path))
    result = c.compact(messages)
    assert result.tier == "emergency"
    assert window * 0.3 < result.tokens_after <= window * c.options["target"]
    assert len(result.messages) > 40
    # The kept tail is whole turns: it starts at an assistant message, and the record counts
    # what was kept after the folded span.
    kept = result.record["preserved_tail"]
    assert kept > 30 and messages[len(messages) - kept]["role"] == "assistant"
    assert all(a is b for a, b in zip(result.messages[-kept:], messages[-kept:]))
    # Large outputs: offloading them is enough, and every message stays (nothing is folded).
    messages = synthetic_history()
    result = ctxkeel.Compactor(window_for(messages, 1.3),
                               store_dir=fresh_dir(tmp_path)).compact(messages)
    assert result.tier == "emergency" and not checkpoints(result.messages)
    assert len(result.messages) == len(messages) and result.record["offloaded"]


def test_tool_schemas_count(tmp_path):
    messages = synthetic_history(turns=8)
    description = "Read a file of the workspace and return its numbered lines. " * 8
    tools = [{"type": "function", "function": {"name": "read_file", "description": description,
                                               "parameters": {"type": "object"}}}]
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path))
    plain = c.compact(messages)
    with_tools = c.compact(messages, tools=tools)
    assert with_tools.tokens_before == plain.tokens_before + ctxkeel.estimate_tokens(tools)
    assert c.compact(messages, tools=[]).tokens_before == plain.tokens_before
    # Enough schema tokens push the same history over a threshold.
    small = ctxkeel.Compactor(window_for(messages, 0.5), store_dir=fresh_dir(tmp_path))
    assert small.compact(messages).tier == "none"
    assert small.compact(messages, tools=tools * 60).tier != "none"


# ---- the summarizer contract -------------------------------------------------------------


def failing_summarizers():
    """(name, summarize, expected start of record["fallback"])."""
    def raises(request):
        raise ValueError("model overloaded")

    def returns(value):
        return lambda request: value

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no text either")

    def raises_unprintable(request):
        raise Unprintable()

    def raises_surrogate(request):
        raise OSError("disk \udcff full")

    def exits(request):
        raise SystemExit(3)

    return [
        ("raises", raises, "summarizer raised ValueError: model overloaded"),
        ("unprintable", raises_unprintable, "summarizer raised Unprintable: <unprintable>"),
        ("surrogate-error", raises_surrogate, "summarizer raised OSError: disk ? full"),
        ("exits", exits, "summarizer raised SystemExit: 3"),
        ("empty", returns(""), "summarizer returned an empty reply"),
        ("blank", returns("  \n\t"), "summarizer returned an empty reply"),
        ("int", returns(42), "summarizer returned int"),
        ("none", returns(None), "summarizer returned NoneType"),
        ("bytes", returns(b"## User Intent\nx"), "summarizer returned bytes"),
        ("garbage", returns("lorem ipsum dolor sit amet\nqwerty uiop\n"),
         "summarizer reply had no usable anchors"),
        ("surrogate", returns("## User Intent\n\ud800"),
         "summarizer returned text that is not valid UTF-8"),
    ]


@pytest.mark.parametrize("name,summarize,reason",
                         failing_summarizers(), ids=[f[0] for f in failing_summarizers()])
def test_a_failing_summarizer_falls_back(name, summarize, reason, tmp_path):
    messages = folding_history()
    c = ctxkeel.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    result, _ = compact_checked(c, messages, summarize=summarize)
    assert result.tier == "full"
    assert result.record["fallback"].startswith(reason), result.record["fallback"]
    assert len(checkpoints(result.messages)) == 1  # built by the extractive summarizer


def test_a_fallback_is_logged_once_per_reason_and_told_every_time(tmp_path, caplog):
    told = []
    reasons = iter(["HTTP 401: invalid api key"] * 3 + ["HTTP 429: slow down"])

    def broken(request):
        raise PermissionError(next(reasons))

    messages = folding_history()
    c = ctxkeel.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path),
                          on_fallback=told.append)
    with caplog.at_level(logging.WARNING, logger="ctxkeel"):
        for _ in range(4):
            c.reset()  # the same history folds again, and the summarizer fails again
            assert c.compact(messages, summarize=broken).record["fallback"]
    assert told == ["summarizer raised PermissionError: HTTP 401: invalid api key"] * 3 + [
        "summarizer raised PermissionError: HTTP 429: slow down"]
    logged = [r for r in caplog.records if r.name == "ctxkeel"]
    assert [r.levelno for r in logged] == [logging.WARNING] * 2
    assert "HTTP 401" in logged[0].getMessage() and "HTTP 429" in logged[1].getMessage()
    assert c.session_id in logged[0].getMessage()


def test_the_result_says_what_the_view_keeps_of_the_cached_prefix(tmp_path):
    messages = folding_history()
    c = ctxkeel.Compactor(window_for(messages, 0.3), store_dir=fresh_dir(tmp_path))
    first = c.compact(messages[:-2])
    assert first.cache == {"prefix_kept": 0, "prefix_broken": 0}  # nothing was sent before
    grown = c.compact(messages)  # two messages more, nothing to compact
    assert grown.tier == "none" and grown.cache["prefix_broken"] == 0
    # All of the first view (its messages; the request's own few tokens of overhead aside).
    assert first.tokens_after - 8 <= grown.cache["prefix_kept"] < first.tokens_after
    # Compacting changes the view inside what was sent: the rest of it is billed again.
    tight = ctxkeel.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    assert tight.compact(messages[:len(messages) // 2]).tier == "none"
    full = tight.compact(messages)
    assert full.record["cache"] == full.cache and full.cache["prefix_broken"] > 0


def test_a_summarizer_of_the_wrong_shape_is_a_type_error(tmp_path):
    messages = folding_history()
    c = ctxkeel.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    for wrong in (lambda: "x", lambda request, model: "x"):
        with pytest.raises(TypeError, match="one argument"):
            c.compact(messages, summarize=wrong)
        with pytest.raises(TypeError, match="one argument"):
            asyncio.run(c.acompact(messages, summarize=wrong))
    # Checked when a summary is wanted (inspect costs microseconds on every call otherwise).
    roomy = ctxkeel.Compactor(window_for(messages, 0.3), store_dir=fresh_dir(tmp_path))
    assert roomy.compact(messages, summarize=lambda: "x").tier == "none"

    class Writer:
        def __call__(self, request, style="short"):
            return "## User Intent\nFix it."

    assert c.compact(messages, summarize=Writer()).record["fallback"] is None
    with pytest.raises(TypeError, match="on_fallback must be callable"):
        ctxkeel.Compactor(1000, store_dir=fresh_dir(tmp_path), on_fallback="log")


def test_a_hung_summarizer_times_out(tmp_path):
    messages = folding_history()
    c = ctxkeel.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path),
                          summarize_timeout=0.2)
    release, finished = threading.Event(), threading.Event()
    threads = []

    def hang(request):
        threads.append(threading.current_thread())
        try:
            release.wait(5)
        finally:
            finished.set()
        return "## User Intent\ntoo late"

    started = time.monotonic()
    result, _ = compact_checked(c, messages, summarize=hang)
    elapsed = time.monotonic() - started
    try:
        assert 0.15 < elapsed < 2.0
        assert result.record["fallback"] == "summarizer timed out after 0.2 s"
        assert len(checkpoints(result.messages)) == 1
        # The hung call runs in a daemon thread: it cannot keep the interpreter alive.
        assert threads and threads[0].daemon and threads[0] is not threading.current_thread()
        # The compactor is free again while the old call still hangs.
        assert c.compact(messages + [{"role": "user", "content": "next"}]).tier in (
            "none", "warn")
    finally:
        release.set()
        finished.wait(5)


def test_the_summarizer_sees_the_snapshot_while_the_caller_changes_its_objects(tmp_path):
    messages = folding_history()
    newest = messages[-1]
    seen = {}

    def meddle(request):
        # The caller drops and rewrites everything it holds while the summary is written.
        for m in request["messages"]:
            if m["role"] == "tool":
                m["content"] = "rewritten"
        messages.clear()
        gc.collect()
        seen["count"] = len(request["messages"])
        return "## User Intent\nFix the failing parser test.\n"

    c = ctxkeel.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    result = c.compact(messages, summarize=meddle)
    assert messages == [] and seen["count"] > 0
    assert result.tier == "full" and ctxkeel.check_pairs(result.messages) == []
    assert result.messages[-1] is newest
    # What the core read was the original text, not the rewritten one.
    assert "src/app/module_" in result.record["checkpoint"]


def test_summarize_none_is_the_extractive_summarizer_not_a_fallback(tmp_path):
    messages = folding_history()
    c = ctxkeel.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    result, _ = compact_checked(c, messages)
    assert result.tier == "full" and result.record["fallback"] is None
    assert len(checkpoints(result.messages)) == 1
    assert "src/app/parser.py" in result.record["checkpoint"]


def test_the_summarizer_cannot_reenter_its_compactor(tmp_path):
    messages = folding_history()
    c = ctxkeel.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    errors = []

    def reenter(request):
        for action in (lambda: c.compact(messages), c.reset, lambda: c.observe_usage(10)):
            try:
                action()
            except ctxkeel.Error as err:
                errors.append((err.code, str(err)))
        # Methods that leave the session state alone stay usable meanwhile.
        assert c.search_evidence(None, "turn 0") is not None
        return "## Next Steps\ncarry on"

    result = c.compact(messages, summarize=reenter)
    assert errors == [("CK_EBUSY", "ctxkeel: concurrent use of Compactor")] * 3
    assert result.record["fallback"] is None
    assert c.compact(messages + [{"role": "user", "content": "more"}]).tier in ("none", "warn")


# ---- state -------------------------------------------------------------------------------


def test_the_next_turn_needs_no_summary(tmp_path):
    # Tool outputs of ~60 lines: the history grows steadily, through soft, turn by turn.
    history = synthetic_history(turns=60, big_lines=60)
    c = ctxkeel.Compactor(window_for(history[:90], 0.9), store_dir=fresh_dir(tmp_path))
    s = Scripted()
    summarized_at = []
    # An agent loop: the history grows by one message per step.
    for k in range(40, len(history) + 1):
        result, made = compact_checked(c, history[:k], summarize=s)
        if made:
            summarized_at.append(k)
        elif summarized_at and summarized_at[-1] == k - 1:
            # Right after a compaction: the checkpoint comes from the state, no model.
            assert len(checkpoints(result.messages)) == 1
    assert len(summarized_at) >= 2, "the loop compacted %d times" % len(summarized_at)
    assert all(b - a > 1 for a, b in zip(summarized_at, summarized_at[1:]))
    # Each later summary merges the previous checkpoint with new messages only.
    for request in s.requests[1:]:
        assert request["previous"] and request["previous"].startswith("[Context Compaction]")
        assert not any(is_checkpoint(m) for m in request["messages"])


def test_a_view_written_back_as_history_is_recognized(tmp_path):
    history = folding_history()
    window = window_for(history, 0.85)
    c = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path))
    s = Scripted()
    first, made = compact_checked(c, history, summarize=s)
    assert made == 1
    old_checkpoint = first.record["checkpoint"]
    # The host keeps the view as its history from now on.
    written = first.messages + [{"role": "user", "content": "Carry on with the fix."}]
    again, made = compact_checked(c, written, summarize=s)
    assert made == 0 and again.tier in ("none", "warn")
    assert checkpoints(again.messages) == checkpoints(written)
    # The history grows until it needs a new summary: the old checkpoint is handed over as
    # `previous`, never summarized again as one of the messages.
    grown = written + folding_history(prefix="later")[2:]
    third, made = compact_checked(c, grown, summarize=s)
    assert made == 1
    request = s.requests[-1]
    assert request["previous"] == old_checkpoint
    assert not any(is_checkpoint(m) for m in request["messages"])
    assert len(checkpoints(third.messages)) == 1
    # A fresh compactor that never saw the session adopts the written-back checkpoint.
    other = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path))
    adopted, made = compact_checked(other, written, summarize=s)
    assert made == 0 and len(checkpoints(adopted.messages)) == 1


def test_a_new_compactor_resumes_the_session(tmp_path):
    history = folding_history()
    window = window_for(history, 0.85)
    store = fresh_dir(tmp_path)
    first = ctxkeel.Compactor(window, store_dir=store, session_id="resume-me")
    s = Scripted()
    before, made = compact_checked(first, history, summarize=s)
    assert made == 1
    del first
    gc.collect()
    resumed = ctxkeel.Compactor(window, store_dir=store, session_id="resume-me")
    after, made = compact_checked(resumed, history + [{"role": "user", "content": "go on"}],
                                  summarize=s)
    assert made == 0 and s.calls == 1
    assert checkpoints(after.messages) == checkpoints(before.messages)
    # Another session in the same store starts from nothing.
    stranger = ctxkeel.Compactor(window, store_dir=store, session_id="someone-else")
    fresh, made = compact_checked(stranger, history, summarize=s)
    assert made == 1


def test_reset_forgets_the_checkpoint(tmp_path):
    history = folding_history()
    store = fresh_dir(tmp_path)
    c = ctxkeel.Compactor(window_for(history, 0.85), store_dir=store, session_id="r")
    s = Scripted()
    compact_checked(c, history, summarize=s)
    compact_checked(c, history, summarize=s)
    assert s.calls == 1
    c.reset()
    compact_checked(c, history, summarize=s)
    assert s.calls == 2
    with open(os.path.join(store, "compactions", "r.jsonl"), encoding="utf-8") as f:
        assert len(f.read().splitlines()) == 2  # the log stays across reset()


def test_same_input_and_replies_give_the_same_view(tmp_path, monkeypatch):
    # Placeholders state where the full text is; relative store folders make them equal.
    history = folding_history()
    views = []
    for _ in range(2):
        monkeypatch.chdir(fresh_dir(tmp_path))
        c = ctxkeel.Compactor(window_for(history, 0.85), session_id="same")
        views.append([c.compact(history, summarize=Scripted()).messages,
                      c.compact(history + [{"role": "user", "content": "x"}]).messages])
    assert views[0] == views[1]
    assert len(checkpoints(views[0][0])) == 1
    # A different reply gives a different view, so the comparison above means something.
    monkeypatch.chdir(fresh_dir(tmp_path))
    c = ctxkeel.Compactor(window_for(history, 0.85), session_id="same")
    other = c.compact(history, summarize=lambda r: "## Next Steps\nsomething else").messages
    assert other != views[0][0]


# ---- audit -------------------------------------------------------------------------------


def test_on_compaction_and_the_audit_log(tmp_path):
    history = synthetic_history(turns=60)
    store = fresh_dir(tmp_path)
    records = []
    c = ctxkeel.Compactor(window_for(history[:90], 0.9), store_dir=store, session_id="audit",
                          on_compaction=records.append)
    results = []
    for k in range(40, len(history) + 1, 3):
        result, _ = compact_checked(c, history[:k], summarize=Scripted())
        results.append(result)
    with_record = [r for r in results if r.record is not None]
    assert with_record and len(records) == len(with_record)
    for got, result in zip(records, with_record):
        assert got is result.record
        for field in RECORD_FIELDS:
            assert field in got
        assert got["session_id"] == "audit" and got["id"].startswith("audit:")
        assert isinstance(got["timestamp"], str) and got["timestamp"][:2] == "20"
        assert got["duration_ms"] >= 0 and isinstance(got["offloaded"], list)
        assert set(got["anchors"]) >= {"user_intent", "execution_progress", "key_decisions",
                                       "tried_solutions", "next_steps"}
    log = os.path.join(store, "compactions", "audit.jsonl")
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    with open(log, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert [json.loads(line) for line in lines] == records
    assert len({r["id"] for r in records}) == len(records)


def test_on_compaction_errors_warn_and_do_not_break_the_agent(tmp_path):
    history = synthetic_history()

    def broken(record):
        raise KeyError("dashboard down")

    c = ctxkeel.Compactor(window_for(history, 0.85), store_dir=fresh_dir(tmp_path),
                          on_compaction=broken)
    with pytest.warns(RuntimeWarning, match="on_compaction raised KeyError"):
        result = c.compact(history)
    assert result.tier == "full" and result.record is not None


# ---- threads -----------------------------------------------------------------------------


def test_threads_on_one_compactor_get_busy_errors(tmp_path):
    history = folding_history()
    c = ctxkeel.Compactor(window_for(history, 0.85), store_dir=fresh_dir(tmp_path))
    n = 6
    barrier = threading.Barrier(n)
    results, errors = [], []

    def slow(request):
        time.sleep(0.3)
        return "## Next Steps\nslowly"

    def work():
        barrier.wait()
        try:
            results.append(c.compact(history, summarize=slow))
        except ctxkeel.Error as err:
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors and results and len(errors) + len(results) == n
    for err in errors:
        assert type(err) is ctxkeel.Error and err.code == "CK_EBUSY"
        assert str(err) == "ctxkeel: concurrent use of Compactor"
    for result in results:
        assert ctxkeel.check_pairs(result.messages) == []
    assert c.compact(history).tier in ("none", "warn")  # usable afterwards


def test_threads_on_their_own_compactors_all_succeed(tmp_path):
    history = synthetic_history()
    window = window_for(history, 0.85)
    store = fresh_dir(tmp_path)
    # No offloading, so no view states a path that differs between compactors.
    options = dict(session_id="t", offload_threshold=10 ** 9)
    expected = ctxkeel.Compactor(window, store_dir=os.path.join(store, "ref"),
                                 **options).compact(history, summarize=Scripted()).messages
    n = 6
    barrier = threading.Barrier(n)
    outcomes = [None] * n

    def work(i):
        c = ctxkeel.Compactor(window, store_dir=os.path.join(store, str(i)), **options)
        barrier.wait()
        try:
            outcomes[i] = c.compact(history, summarize=Scripted()).messages
        except Exception as exc:  # recorded, then reported by the assertion below
            outcomes[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(out == expected for out in outcomes), outcomes
    assert len(checkpoints(expected)) == 1


# ---- usage -------------------------------------------------------------------------------


def test_observed_usage_corrects_the_tier(tmp_path):
    history = synthetic_history()
    window = window_for(history, 0.55)
    store = fresh_dir(tmp_path)
    c = ctxkeel.Compactor(window, store_dir=store, session_id="usage")
    plain = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path))
    assert plain.compact(history).tier == "none"
    tiers = []
    for _ in range(6):
        result, _ = compact_checked(c, history, summarize=Scripted())
        tiers.append(result.tier)
        # The provider counts 1.5 x ctxkeel's estimate of what was sent.
        c.observe_usage(round(result.tokens_after * 1.5))
    assert tiers[0] == "none"
    assert math.isclose(c.usage_factor, 1.5, abs_tol=0.01)
    # 0.55 x 1.5 = 0.83 of the window: the same history is now a full compaction.
    assert tiers[1] == "full" and all(t == "none" for t in tiers[2:])
    assert plain.compact(history).tier == "none" and plain.usage_factor == 1.0
    # The factor is part of the saved state.
    resumed = ctxkeel.Compactor(window, store_dir=store, session_id="usage")
    assert math.isclose(resumed.usage_factor, 1.5, abs_tol=0.01)


def test_observe_usage_arguments(tmp_path):
    c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path))
    c.observe_usage(500)  # nothing was returned yet: no reading to compare with
    assert c.usage_factor == 1.0
    c.compact(synthetic_history(turns=4))
    c.observe_usage(0)  # 0 is ignored
    assert c.usage_factor == 1.0
    c.observe_usage(10 ** 9)  # readings are clamped to [0.5, 2]
    assert c.usage_factor == 2.0
    with pytest.raises(TypeError):
        c.observe_usage("100")
    with pytest.raises(ValueError):
        c.observe_usage(-1)


# ---- real transcripts --------------------------------------------------------------------


def to_anthropic_messages(messages):
    from test_corpus import to_anthropic

    return to_anthropic(messages)


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_corpus_replay(corpus_name, shape, tmp_path):
    if corpus_name == "<absent>":
        pytest.skip("corpus not found")
    messages = load_corpus(corpus_name)
    if shape == "anthropic":
        messages = to_anthropic_messages(messages)
    window = ctxkeel.estimate_tokens(messages) // 2
    c = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path))
    s = Scripted()
    results = replay(c, messages, s)
    tiers = [r.tier for _, r, _ in results]
    assert any(t in ("soft", "full", "emergency") for t in tiers), tiers
    assert s.calls < len(results)
    target = c.options["target"]
    for _, r, made in results:
        if r.tier not in ("soft", "full") or r.record is None:
            continue
        # A summary call exactly when a span was folded; when nothing was folded, offloads
        # alone brought the view to the target (POLICY-CHANGES 3).
        assert made == (1 if r.record["summarized"] > 0 else 0), (made, r.record)
        if r.record["summarized"] == 0:
            assert r.ratio_after <= target + 1e-9, r.record
    final = results[-1][1]
    assert find_message(c, messages[-1], len(messages) - 1, final.messages, final.repairs)
    assert final.tokens_after <= 0.7 * window or "more than the soft limit" in (
        (final.record or {}).get("error") or "")


def test_corpus_same_replies_same_views(corpus_name, tmp_path, monkeypatch):
    if corpus_name == "<absent>":
        pytest.skip("corpus not found")
    messages = load_corpus(corpus_name)
    window = ctxkeel.estimate_tokens(messages) // 2
    runs = []
    for _ in range(2):
        monkeypatch.chdir(fresh_dir(tmp_path))
        c = ctxkeel.Compactor(window, session_id="det")
        runs.append([r.messages for _, r, _ in replay(c, messages, Scripted(), check=False)])
    assert runs[0] == runs[1]


# ---- the C layer: _ext.Compactor.begin() and its Compaction ------------------------------


def test_a_compaction_job_step_by_step(tmp_path):
    from ctxkeel import _ext

    messages = folding_history()
    core = _ext.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    job = core.begin(messages, 0)
    assert isinstance(job, _ext.Compaction) and core.busy
    assert job.tier == "full" and job.needs_summary
    assert type(job.snapshot) is tuple and all(a is b for a, b in zip(job.snapshot, messages))
    request = job.request()
    assert set(request) == {"system", "prompt", "max_tokens", "tier", "span_start", "span_end",
                            "previous"}
    assert 0 <= request["span_start"] < request["span_end"] <= len(messages)
    with pytest.raises(TypeError):
        job.set_summary(42)
    with pytest.raises(ctxkeel.InputError):
        job.set_summary("\ud800")
    job.set_summary("## Next Steps\nstep by step")
    out, tier, record, before, after, ratio_before, ratio_after, repairs, cache = job.finish()
    assert not core.busy and tier == "full" and before > after
    assert cache == {"prefix_kept": 0, "prefix_broken": 0}  # the compactor's first view
    window = core.options["context_window"]
    assert math.isclose(ratio_before, before / window) and math.isclose(ratio_after, after / window)
    assert 0.80 <= ratio_before < 0.95 and ratio_after <= core.options["soft"]
    assert repairs == []
    assert json.loads(record)["tier"] == "full"
    assert json.loads(record)["ratio_after"] == ratio_after
    assert "step by step" in out[2]["content"]
    # A finished job is closed: every use but close() says so.
    for use in (job.finish, job.request, lambda: job.set_summary("x"), lambda: job.snapshot,
                lambda: job.tier):
        with pytest.raises(ctxkeel.Error) as info:
            use()
        assert info.value.code == "CK_ECLOSED"
    assert job.needs_summary is False
    job.close()
    job.close()
    with pytest.raises(TypeError):
        _ext.Compaction()


def test_an_extractive_job_is_finished_by_begin(tmp_path):
    from ctxkeel import _ext

    messages = folding_history()
    core = _ext.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    job = core.begin(messages, extractive=True)
    assert job.tier == "full" and not job.needs_summary and core.busy
    with pytest.raises(ctxkeel.Error) as info:
        job.set_summary("too late")
    assert info.value.code == "CK_ESTATE"
    with pytest.raises(ctxkeel.Error) as info:
        job.request()
    assert info.value.code == "CK_ESTATE"
    out, tier, record = job.finish()[:3]
    assert json.loads(record)["fallback"] is None and any(is_checkpoint(m) for m in out)
    # A job that needs no summary says so when asked for a request.
    small = core.begin(messages[:4])
    assert small.tier == "none" and not small.needs_summary
    with pytest.raises(ctxkeel.Error) as info:
        small.request()
    assert info.value.code == "CK_ESTATE"
    # Four messages do not hold the 80 the checkpoint covers: the state starts afresh and a
    # record says so (POLICY-CHANGES 8).
    record = json.loads(small.finish()[2])
    assert record["tier"] == "none" and record["checkpoint"] is None and record["error"] is None
    assert any("the state was started afresh" in note for note in record["notes"])
    fresh = _ext.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    assert fresh.begin(messages[:4]).finish()[2] is None  # nothing to tell


def test_a_dropped_job_frees_its_compactor(tmp_path):
    from ctxkeel import _ext

    messages = folding_history()
    core = _ext.Compactor(window_for(messages, 0.85), store_dir=fresh_dir(tmp_path))
    job = core.begin(messages)
    with pytest.raises(ctxkeel.Error):
        core.begin(messages)
    del job
    assert not core.busy
    # A job caught in a reference cycle is freed by the collector, and frees the flag too.
    job = core.begin(messages)
    cycle = {"job": job}
    cycle["self"] = cycle
    del job, cycle
    gc.collect()
    assert not core.busy
    # The job keeps its compactor alive, so the core compaction never outlives it.
    job = core.begin(messages)
    del core
    gc.collect()
    assert job.needs_summary
    job.set_summary("## User Intent\nstill here")
    out, tier = job.finish()[:2]
    assert tier in _ext.TIERS and ctxkeel.check_pairs(out) == []


def test_the_job_keeps_what_the_core_borrows(tmp_path):
    from ctxkeel import _ext

    def history():
        out = synthetic_history()
        # Strs made at run time, so nothing else (the compiler's constants) holds them.
        for m in out:
            if isinstance(m.get("content"), str):
                m["content"] = "".join(list(m["content"]))
        return out

    messages = history()
    window = window_for(messages, 0.85)
    # No offloading, so the checkpoints state no store path and can be compared.
    control = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path), session_id="k",
                                offload_threshold=10 ** 9).compact(
        history(), summarize=lambda r: "## User Intent\nkept")
    core = _ext.Compactor(window, store_dir=fresh_dir(tmp_path), session_id="k",
                          offload_threshold=10 ** 9)
    job = core.begin(messages)
    expected = job.request()["prompt"]
    snapshot_ids = [id(m) for m in messages]
    for m in messages:
        m["content"] = "gone"
    messages.clear()
    del messages
    gc.collect()
    # Filling memory with other strs would overwrite freed buffers; the core still reads
    # the originals.
    junk = ["x" * 200 + str(k) for k in range(20000)]
    assert job.request()["prompt"] == expected
    assert [id(m) for m in job.snapshot] == snapshot_ids
    job.set_summary("## User Intent\nkept")
    out = job.finish()[0]
    assert len(out) == len(control.messages)
    assert out[2]["content"] == control.messages[2]["content"]
    del junk
