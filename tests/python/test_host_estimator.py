"""The host's own token counter: estimator=fn for estimate_tokens() and the Compactor.

fn(text) -> int counts a string; a message is counted as its strings joined by newlines plus
the per-message overhead, and the Compactor caches counts by content (placeholders and
checkpoints included), so a replay asks the counter about each content once rather than once
per turn. A counter that fails makes the
call raise, and a compaction that did not finish leaves the session as it was.
"""

import asyncio
import gc
import json
import os
import warnings

import pytest

import ctxkeel
from compaction_support import Scripted, fresh_dir, replay, synthetic_history, window_for

OVERHEAD = 4  # CK_MESSAGE_OVERHEAD
REQUEST = 3  # CK_REQUEST_OVERHEAD


class Counter:
    """A counter that records what it is asked: words, so counts are easy to predict."""

    def __init__(self, fail_on=None):
        self.texts = []
        self.fail_on = fail_on  # a predicate on the text, or None

    def __call__(self, text):
        self.texts.append(text)
        if self.fail_on is not None and self.fail_on(text):
            raise LookupError("tokenizer unavailable")
        return len(text.split())


class Boom(Exception):
    pass


# ---- estimate_tokens -----------------------------------------------------------------------


def test_estimate_tokens_of_a_str_is_the_counters_answer():
    fn = Counter()
    assert ctxkeel.estimate_tokens("three small words", estimator=fn) == 3
    assert ctxkeel.estimate_tokens("", estimator=fn) == 0
    assert fn.texts == ["three small words", ""]


def test_estimate_tokens_of_messages_joins_their_strings():
    fn = Counter()
    message = {"role": "assistant", "content": "let me look",
               "tool_calls": [{"id": "call_1", "type": "function",
                               "function": {"name": "read_file",
                                            "arguments": "{\"path\": \"a.py\"}"}}]}
    joined = "let me look\nread_file\ncall_1\n{\"path\": \"a.py\"}"
    assert ctxkeel.estimate_tokens(message, estimator=fn) == len(joined.split()) + OVERHEAD
    assert fn.texts == [joined]
    user = {"role": "user", "content": "hello there"}
    assert ctxkeel.estimate_tokens([user, user], estimator=fn) == 2 * (2 + OVERHEAD) + REQUEST
    assert ctxkeel.estimate_tokens([], estimator=fn) == 0


def test_estimate_tokens_of_tools_counts_their_json():
    fn = Counter()
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Reads é",
                                               "parameters": {"type": "object"}}}]
    text = json.dumps(tools, separators=(",", ":"), ensure_ascii=False)
    assert ctxkeel.estimate_tokens(tools, estimator=fn) == len(text.split())
    assert fn.texts == [text]


@pytest.mark.parametrize("value,error", [
    ("12", TypeError), (1.5, TypeError), (True, TypeError), (None, TypeError),
    (-1, ValueError), (2 ** 64 - 1, ValueError), (2 ** 70, ValueError)])
def test_a_bad_count_raises(value, error):
    with pytest.raises(error, match="estimator"):
        ctxkeel.estimate_tokens("text", estimator=lambda text: value)
    with pytest.raises(error, match="estimator"):
        ctxkeel.estimate_tokens([{"role": "user", "content": "x"}], estimator=lambda t: value)


def test_the_counters_own_exception_is_raised():
    error = Boom("no tokenizer")

    def fn(text):
        raise error

    with pytest.raises(Boom) as caught:
        ctxkeel.estimate_tokens({"role": "user", "content": "x"}, estimator=fn)
    assert caught.value is error


def test_a_coroutine_counter_is_refused_without_a_warning():
    async def fn(text):
        return 1

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(TypeError, match="coroutine"):
            ctxkeel.estimate_tokens("text", estimator=fn)
        gc.collect()


def test_an_estimator_that_is_neither_a_name_nor_callable():
    with pytest.raises(TypeError, match="a str or a callable"):
        ctxkeel.estimate_tokens("text", estimator=42)
    with pytest.raises(TypeError, match="a str or a callable"):
        ctxkeel.Compactor(1000, estimator=42)


# ---- the Compactor -------------------------------------------------------------------------


def words_window(messages, ratio):
    """A window in which `messages` fill `ratio` of it, counted in words."""
    return int(ctxkeel.estimate_tokens(messages, estimator=lambda t: len(t.split())) / ratio)


def joined(message):
    """A message's strings as the counter sees them, for OpenAI messages of text and calls."""
    parts = [message["content"]] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        parts += [call["function"]["name"], call["id"], call["function"]["arguments"]]
    if message.get("tool_call_id"):
        parts.insert(0, message["tool_call_id"])
    return "\n".join(parts)


def test_a_replay_counts_each_message_once(tmp_path):
    # 50 turns, outputs under the offload threshold: warn and soft tiers are reached (with a
    # summary each time), and nothing is offloaded.
    messages = synthetic_history(turns=50, big_lines=30)
    fn = Counter()
    c = ctxkeel.Compactor(words_window(messages, 1.5), store_dir=fresh_dir(tmp_path),
                          estimator=fn)
    summarize = Scripted()
    results = replay(c, messages, summarize)
    tiers = {result.tier for _, result, _ in results}
    assert {"warn", "soft"} <= tiers and summarize.calls >= 2
    for m in messages:
        assert fn.texts.count(joined(m)) == 1, m
    # The rest is the checkpoints and summary requests that compactions wrote (116 calls in
    # all for 107 messages when this was written). Without the cache the counter would be
    # asked about every message of every prefix: ~2,800 times.
    assert len(fn.texts) < 1.5 * len(messages)
    assert c.options["estimator"] is fn
    records = [result.record for _, result, _ in results if result.record]
    assert records and all(r["estimator"] == "host" for r in records)


def test_a_replay_with_offloads_counts_each_content_about_once(tmp_path):
    # Large outputs are offloaded at warn: a message with a placeholder, and the placeholder
    # against its output, are counted once too, not once per turn.
    messages = synthetic_history(turns=50)
    fn = Counter()
    c = ctxkeel.Compactor(words_window(messages, 1.5), store_dir=fresh_dir(tmp_path),
                          estimator=fn)
    results = replay(c, messages, Scripted())
    assert any(r.record and r.record["offloaded"] for _, r, _ in results)
    assert len(fn.texts) < 1.5 * len(messages)
    assert len(set(fn.texts)) == len(fn.texts)


def test_the_counter_decides_the_tier(tmp_path):
    messages = synthetic_history(turns=6, big_lines=4)
    window = 10000
    plain = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path))
    assert plain.compact(messages).tier == "none"
    # A counter that charges 1000 tokens a message puts the same history over the top.
    heavy = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path), estimator=lambda t: 1000)
    result = heavy.compact(messages)
    assert result.tier == "emergency"
    assert result.tokens_before == len(messages) * (1000 + OVERHEAD) + REQUEST
    # Tool schemas go through it too.
    light = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path), estimator=lambda t: 1)
    bare = light.compact(messages).tokens_before
    assert light.compact(messages, tools=[{"name": "t"}]).tokens_before == bare + 1


def audit_lines(c):
    path = os.path.join(c.options["store_dir"], "compactions", c.session_id + ".jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


@pytest.mark.parametrize("make", [lambda: None, Scripted], ids=["extractive", "summarizer"])
def test_a_failing_counter_raises_and_leaves_the_session_unchanged(tmp_path, make):
    summarize = make()
    messages = synthetic_history(turns=20, big_lines=30)
    window = words_window(messages, 0.75)  # soft: a summary is wanted
    healthy = Counter()
    expected = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path), estimator=healthy)
    want = expected.compact(messages, summarize=summarize)
    assert want.tier == "soft" and want.record is not None

    fn = Counter(fail_on=lambda text: True)
    c = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path), estimator=fn)
    with pytest.raises(LookupError, match="tokenizer unavailable"):
        c.compact(messages, summarize=summarize)
    assert not c._core.busy and audit_lines(c) == []
    # Nothing of the failed call stayed: once the counter works, the same compaction.
    fn.fail_on = None
    got = c.compact(messages, summarize=summarize)
    assert got.tier == want.tier and got.tokens_after == want.tokens_after
    assert len(got.messages) == len(want.messages)
    assert len(audit_lines(c)) == 1


def test_a_counter_failing_at_any_call_never_breaks_the_compactor(tmp_path):
    messages = synthetic_history(turns=12, big_lines=30)
    window = words_window(messages, 0.75)
    total = Counter()
    ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path), estimator=total).compact(
        messages, summarize=Scripted())
    assert len(total.texts) > len(messages)
    for n in range(1, len(total.texts) + 1):
        asked = []
        fn = Counter(fail_on=lambda text: len(asked.append(text) or asked) == n)
        c = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path), estimator=fn)
        with pytest.raises(LookupError):
            c.compact(messages, summarize=Scripted())
        assert not c._core.busy
        # The next call counts again and succeeds.
        assert c.compact(messages, summarize=Scripted()).tier in ("soft", "none")


def test_a_counter_that_calls_the_compactor_gets_ebusy(tmp_path):
    messages = synthetic_history(turns=4, big_lines=4)
    c = None

    def fn(text):
        c.search_evidence(None, "x")
        return 1

    c = ctxkeel.Compactor(1000, store_dir=fresh_dir(tmp_path), estimator=fn)
    with pytest.raises(ctxkeel.Error) as caught:
        c.compact(messages)
    assert caught.value.code == "CK_EBUSY"
    assert not c._core.busy


def test_acompact_with_a_counter_raises_its_error(tmp_path):
    messages = synthetic_history(turns=10, big_lines=4)
    threads = set()

    def fn(text):
        import threading
        threads.add(threading.get_ident())
        raise Boom("count failed")

    c = ctxkeel.Compactor(1000, store_dir=fresh_dir(tmp_path), estimator=fn)

    async def main():
        import threading
        loop_thread = threading.get_ident()
        with pytest.raises(Boom):
            await c.acompact(messages)
        return loop_thread

    loop_thread = asyncio.run(main())
    # The core (and so the counter) ran in a worker thread, not on the loop.
    assert threads and loop_thread not in threads
    assert not c._core.busy


def test_without_a_summarizer_the_extractive_one_is_the_default_with_a_counter(tmp_path):
    # A full compaction with a host counter and no summarizer: the extractive summary is the
    # default, not a fallback, and the counter is asked once per content.
    messages = synthetic_history(turns=40, big_lines=4)
    seen = []

    def words(text):
        seen.append(text)
        return len(text.split())

    c = ctxkeel.Compactor(words_window(messages, 0.85), store_dir=fresh_dir(tmp_path),
                          estimator=words)
    result = c.compact(messages)
    assert result.tier == "full"
    assert result.record["fallback"] is None and result.record["estimator"] == "host"
    assert any(str(m.get("content", "")).startswith("[Context Compaction]")
               for m in result.messages)
    for text in set(seen):  # a checkpoint: once rendered, once as a message of the view
        assert seen.count(text) == 1 or (seen.count(text) == 2 and "[Context Compaction]" in text)
