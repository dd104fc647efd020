"""The provider's prompt cache through the Python API: min_gain batching of warn offloads,
prompt_cache prices that decide whether a soft fold pays, and Anthropic cache breakpoints."""

import copy
import json

import pytest

import ctxkeel
from compaction_support import checkpoint_reply

MARK = {"type": "ephemeral"}


def anthropic_session(turns, own_marks=0, big_every=0):
    """An Anthropic session: the task, then turns of a text + tool_use and a user message with
    its tool_result (every big_every-th output 6000 bytes, else 600); the last own_marks
    results carry the caller's own cache_control."""
    messages = [{"role": "user", "content": "Fix the failing test in src/parser.c. "
                                            "Never touch the vendor/ folder."}]
    for t in range(turns):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": "Step %d: run the tests again." % t},
            {"type": "tool_use", "id": "toolu_%d" % t, "name": "bash",
             "input": {"command": "make test T=%d" % t}}]})
        size = 6000 if big_every and t % big_every == 0 else 600
        text = "".join(" " if i % 60 == 59 else chr(97 + (i + t) % 26) for i in range(size))
        block = {"type": "tool_result", "tool_use_id": "toolu_%d" % t, "content": text}
        if t >= turns - own_marks:
            block["cache_control"] = dict(MARK)
        messages.append({"role": "user", "content": [block]})
    return messages


def tokens_of(messages, tmp_path):
    return ctxkeel.Compactor(10 ** 8, store_dir=str(tmp_path / "count"),
                             estimator="chars4").compact(messages).tokens_before


def marked_blocks(messages):
    """(message index, block index) of every block that carries cache_control."""
    return [(i, k) for i, m in enumerate(messages) if isinstance(m.get("content"), list)
            for k, b in enumerate(m["content"]) if isinstance(b, dict) and "cache_control" in b]


def billed(rows, read=0.1, write=1.25):
    """The replay's input as Anthropic bills it: the prefix kept from the call before read from
    the cache, the rest written to it."""
    return sum(read * r["prefix_kept"] + write * (r["tokens_after"] - r["prefix_kept"])
               for r in rows)


def test_prompt_cache_presets_prices_and_errors(tmp_path):
    d = str(tmp_path)
    assert ctxkeel.Compactor(1000, store_dir=d).options["prompt_cache"] is None
    assert ctxkeel.Compactor(1000, store_dir=d).options["cache_breakpoints"] is False
    assert ctxkeel.Compactor(1000, store_dir=d).options["min_gain"] == 50  # window / 20
    assert ctxkeel.Compactor(1000, store_dir=d, prompt_cache="anthropic").options[
        "prompt_cache"] == {"read": 0.1, "write": 1.25}
    assert ctxkeel.Compactor(1000, store_dir=d, prompt_cache="openai").options[
        "prompt_cache"] == {"read": 0.1, "write": 1.0}
    own = ctxkeel.Compactor(1000, store_dir=d, prompt_cache={"read": 0.5, "write": 2},
                            cache_breakpoints=True, min_gain=7).options
    assert (own["prompt_cache"], own["cache_breakpoints"], own["min_gain"]) == (
        {"read": 0.5, "write": 2.0}, True, 7)
    for bad in ("gemini", {"read": 0.1}, {"read": 0, "write": 0}, {"read": 1.5, "write": 2},
                {"read": 0.1, "write": 0.5}, {"read": 0.1, "write": 11},
                {"read": 0.1, "write": 1.25, "ttl": 300}, {"read": float("nan"), "write": 1}):
        with pytest.raises(ctxkeel.InputError, match="prompt_cache"):
            ctxkeel.Compactor(1000, store_dir=d, prompt_cache=bad)
    for bad in (3, ["anthropic"], {"read": True, "write": 1.25}, {"read": "0.1", "write": 1}):
        with pytest.raises(TypeError, match="prompt_cache"):
            ctxkeel.Compactor(1000, store_dir=d, prompt_cache=bad)
    with pytest.raises(TypeError, match="cache_breakpoints"):
        ctxkeel.Compactor(1000, store_dir=d, cache_breakpoints=1)
    with pytest.raises(ctxkeel.InputError, match="min_gain"):
        ctxkeel.Compactor(1000, store_dir=d, min_gain=0)


def test_warn_offloads_wait_for_min_gain(tmp_path):
    messages = anthropic_session(8, big_every=2)  # four large outputs, two outside the tail
    window = int(tokens_of(messages, tmp_path) / 0.65)
    gated = ctxkeel.Compactor(window, store_dir=str(tmp_path / "a"), estimator="chars4",
                              keep_tail=4, min_gain=window // 2)
    r = gated.compact(messages)
    assert r.tier == "warn"
    assert r.record is None and r.messages == messages  # about 3,000 tokens < half the window
    free = ctxkeel.Compactor(window, store_dir=str(tmp_path / "b"), estimator="chars4",
                             keep_tail=4)
    r = free.compact(messages)
    assert r.tier == "warn"
    assert r.record is not None and len(r.record["offloaded"]) > 0
    assert r.tokens_after < r.tokens_before


@pytest.mark.parametrize("own", [0, 1, 2, 3, 4])
def test_cache_breakpoints_mark_the_checkpoint_and_the_task(tmp_path, own):
    messages = anthropic_session(30, own_marks=own)
    snapshot = copy.deepcopy(messages)
    window = int(tokens_of(messages, tmp_path) / 0.75)
    c = ctxkeel.Compactor(window, store_dir=str(tmp_path / "s"), estimator="chars4", keep_tail=4,
                          cache_breakpoints=True)
    r = c.compact(messages, summarize=checkpoint_reply)
    assert r.tier == "soft"
    assert messages == snapshot  # the caller's blocks gained no marker
    ours = min(2, 4 - own)
    view = r.messages
    marks = marked_blocks(view)
    assert len(marks) == own + ours
    checkpoint = next(i for i, m in enumerate(view)
                      if "[Context Compaction]" in json.dumps(m.get("content")))
    # The checkpoint's last block first, then the task, each while the four allow it.
    assert ((checkpoint, len(view[checkpoint]["content"]) - 1) in marks) == (ours >= 1)
    assert ((0, 0) in marks) == (ours >= 2)
    if ours >= 2:
        assert view[0]["content"] == [{"type": "text", "text": snapshot[0]["content"],
                                       "cache_control": MARK}]
    # The next call sends the same bytes: the marked prefix stays cached.
    again = c.compact(messages, summarize=checkpoint_reply)
    assert json.dumps(again.messages) == json.dumps(view)
    assert again.cache["prefix_broken"] == 0


def test_cache_breakpoints_only_in_anthropic_views(tmp_path):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    c = ctxkeel.Compactor(100000, store_dir=str(tmp_path), cache_breakpoints=True)
    assert c.compact(messages).messages == messages
    task_only = anthropic_session(2)
    r = ctxkeel.Compactor(100000, store_dir=str(tmp_path / "a"),
                          cache_breakpoints=True).compact(task_only)
    assert marked_blocks(r.messages) == [(0, 0)]  # no checkpoint yet: the task alone
    assert task_only == anthropic_session(2)


def test_prompt_cache_bills_less_and_says_why(tmp_path):
    messages = anthropic_session(90)
    window = tokens_of(messages, tmp_path) // 3
    runs = {}
    for name, prices in (("plain", None), ("priced", "anthropic")):
        rows = ctxkeel.replay(messages, window, store_dir=str(tmp_path / name),
                              estimator="chars4", keep_tail=4, prompt_cache=prices).rows
        assert all(row["ratio_after"] <= 0.95 for row in rows)
        runs[name] = rows
    folds = {k: [r for r in rows if r["summarized"]] for k, rows in runs.items()}
    assert any(r["tier"] == "soft" for r in folds["plain"])
    assert not any(r["tier"] == "soft" for r in folds["priced"])  # it waits for full there
    assert 0 < len(folds["priced"]) < len(folds["plain"])
    records = [r["record"] for r in runs["priced"] if r["record"]]
    estimates = [rec["cache"]["estimate"] for rec in records if "estimate" in rec["cache"]]
    assert estimates and all(e["horizon"] >= 1 for e in estimates)
    assert any("the fold at soft waits" in json.dumps(rec) for rec in records)
    assert billed(runs["priced"]) < billed(runs["plain"])
