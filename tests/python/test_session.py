"""The append-only session: Compactor.append(message) / view() / aview(). A session is a
compact() of the list of what was appended, read as it grows; these tests hold it to exactly
that. The property replays random histories in every dialect as an agent loop twice in one
store (emptied between the runs, so that placeholders name the same paths): compact() of each
prefix, then append() of every message and view() at the turn ends. Tier, token counts, record
and every message of the views must be the same. The other tests cover what a list cannot show:
the copies are the session's own, a refused message is not added, compact() and view() share a
compactor, aview, reset.
"""

import asyncio
import json
import shutil
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxkeel
from compaction_support import prop_settings
from strategies import good_replies, plans, render, render_dialect, render_gemini

RATIOS = [0.5, 0.75, 0.85, 0.97, 1.3, 20.0]
DIALECTS = ["openai", "anthropic", "gemini", "responses", "ai-sdk", "langchain"]


def rendered(plan, dialect):
    if dialect == "gemini":
        return render_gemini(plan)
    if dialect in ("openai", "anthropic"):
        return render(plan, dialect)
    return render_dialect(plan, dialect)


@st.composite
def scenarios(draw):
    dialect = draw(st.sampled_from(DIALECTS))
    messages, info = rendered(draw(plans(max_turns=12)), dialect)
    tokens = ctxkeel.estimate_tokens(ctxkeel.repair_pairs(messages, format=dialect))
    options = {
        "context_window": max(1, int(tokens / draw(st.sampled_from(RATIOS)))),
        "keep_tail": draw(st.sampled_from([1, 2, 6])),
        "offload_threshold": draw(st.sampled_from([4000, 300])),
        "format": dialect,
    }
    ends = sorted({e for e in info["ends"] + [len(messages)] if e > 0})
    return messages, ends, options, draw(st.one_of(st.none(), good_replies()))


def outcome(call):
    try:
        return call(), None
    except ctxkeel.Error as err:
        return None, err.code


def assert_same(got, want, what):
    (a, a_code), (b, b_code) = got, want
    assert a_code == b_code, what + ": error"
    if b is None:
        return
    assert a.tier == b.tier, what + ": tier"
    assert a.tokens_before == b.tokens_before, what + ": tokens_before"
    assert a.tokens_after == b.tokens_after, what + ": tokens_after"
    assert (a.record is None) == (b.record is None), what + ": record"
    assert len(a.messages) == len(b.messages), what + ": messages"
    for i, (x, y) in enumerate(zip(a.messages, b.messages)):
        assert json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True), \
            "%s: message %d differs" % (what, i)


def run_twice(messages, ends, options, reply, use_async=False):
    store = tempfile.mkdtemp(prefix="ctxkeel-session-")
    summarize = None if reply is None else (lambda request: reply)
    try:
        listed = ctxkeel.Compactor(store_dir=store, session_id="same", **options)
        wanted = [outcome(lambda: listed.compact(messages[:end], summarize=summarize))
                  for end in ends]
        del listed
        shutil.rmtree(store)
        session = ctxkeel.Compactor(store_dir=store, session_id="same", **options)
        appended = 0
        for end, want in zip(ends, wanted):
            while appended < end:
                appended += 1
                assert session.append(messages[appended - 1]) == appended
            if use_async:
                got = outcome(lambda: asyncio.run(session.aview(summarize=summarize)))
            else:
                got = outcome(lambda: session.view(summarize=summarize))
            assert_same(got, want, "view at %d" % end)
        assert session.session == tuple(messages), "the session is not a copy of the list"
    finally:
        shutil.rmtree(store, ignore_errors=True)


@pytest.mark.no_leak_check
@prop_settings(60)
@given(scenarios())
def test_view_is_compact_of_what_was_appended(scenario):
    run_twice(*scenario)


@pytest.mark.no_leak_check
@prop_settings(10)
@given(scenarios())
def test_aview_is_acompact_of_what_was_appended(scenario):
    run_twice(*scenario, use_async=True)


def synthetic(turns, tag="a"):
    out = [{"role": "system", "content": "You are a careful coding agent."},
           {"role": "user", "content": "Fix the failing test in tests/test_%s.py." % tag}]
    for i in range(turns):
        cid = "call_%s_%d" % (tag, i)
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": "read_file", "arguments": json.dumps({"path": "f%d.py" % i})}}]})
        out.append({"role": "tool", "tool_call_id": cid,
                    "content": "\n".join("line %d of f%d.py" % (k, i) for k in range(40 * i))})
    return out


def fresh_compact(messages, **options):
    compactor = ctxkeel.Compactor(store_dir=tempfile.mkdtemp(prefix="ctxkeel-session-"),
                                  **options)
    try:
        return compactor.compact(messages)
    finally:
        shutil.rmtree(compactor.options["store_dir"], ignore_errors=True)


def test_the_session_keeps_copies_of_its_own(tmp_path):
    compactor = ctxkeel.Compactor(100000, store_dir=str(tmp_path))
    task = {"role": "user", "content": [{"type": "text", "text": "Fix the bug in a.py"}]}
    compactor.append({"role": "system", "content": "You are an agent."})
    compactor.append(task)
    task["content"][0]["text"] = "something else entirely, much longer than the task was"
    task["role"] = "assistant"
    copy = compactor.session[1]
    assert copy is not task
    assert copy["content"][0]["text"] == "Fix the bug in a.py"
    got = compactor.view()
    want = fresh_compact([{"role": "system", "content": "You are an agent."},
                          {"role": "user", "content": [{"type": "text",
                                                        "text": "Fix the bug in a.py"}]}],
                         context_window=100000)
    assert got.tokens_before == want.tokens_before
    assert got.messages == want.messages
    assert got.messages[1] is copy
    assert isinstance(compactor.session, tuple)


def test_a_refused_message_is_not_added(tmp_path):
    compactor = ctxkeel.Compactor(100000, store_dir=str(tmp_path))
    good = synthetic(3)
    for m in good:
        compactor.append(m)
    for bad in [{"role": "user", "content": 42}, {"role": 7, "content": "x"}, "text", None]:
        with pytest.raises(ctxkeel.InputError, match=r"messages\[%d\]" % len(good)):
            compactor.append(bad)
        assert len(compactor.session) == len(good)
    got = compactor.view()
    assert got.tokens_before == fresh_compact(good, context_window=100000).tokens_before
    assert len(got.messages) == len(good)
    assert compactor.append({"role": "user", "content": "one more"}) == len(good) + 1
    assert compactor.view().tokens_before > got.tokens_before


def test_compact_and_view_share_a_compactor(tmp_path):
    compactor = ctxkeel.Compactor(100000, store_dir=str(tmp_path))
    mine, other = synthetic(6, "m"), synthetic(4, "o")
    for m in mine[:8]:
        compactor.append(m)
    results = [(compactor.compact(other), other), (compactor.view(), mine[:8])]
    for m in mine[8:]:
        compactor.append(m)
    results += [(compactor.compact(other), other), (compactor.view(), mine)]
    for got, listed in results:
        want = fresh_compact(listed, context_window=100000)
        assert got.tokens_before == want.tokens_before
        assert got.messages == want.messages


def test_reset_empties_the_session_and_a_compaction_shows(tmp_path):
    compactor = ctxkeel.Compactor(3000, keep_tail=2, store_dir=str(tmp_path))
    for m in synthetic(12):
        compactor.append(m)
    result = compactor.view()
    assert result.tier != "none"
    assert result.tokens_after <= 3000
    assert len(compactor.session) == 26
    compactor.reset()
    assert compactor.session == ()
    compactor.append({"role": "user", "content": "a new conversation"})
    again = compactor.view()
    assert again.tier == "none"
    assert again.messages == [{"role": "user", "content": "a new conversation"}]


def test_append_while_a_view_waits_for_its_summary_is_busy(tmp_path):
    chat = [{"role": "user", "content": "Fix the failing test."}]
    for i in range(150):
        chat += [{"role": "assistant", "content": "Step %d: module %d looks fine so far." % (i, i)},
                 {"role": "user", "content": "Keep going with step %d please." % i}]
    # At the full tier (0.85 of the window), where the summarizer writes the checkpoint.
    window = int(ctxkeel.estimate_tokens(chat) / 0.85)
    compactor = ctxkeel.Compactor(window, keep_tail=2, store_dir=str(tmp_path))
    for m in chat:
        compactor.append(m)
    seen = []

    def summarize(request):
        try:
            compactor.append({"role": "user", "content": "now"})
            seen.append("added")
        except ctxkeel.Error as err:
            seen.append(err.code)
        return "## User Intent\nFix the test.\n## Next Steps\nRun it."

    result = compactor.view(summarize=summarize)
    assert seen == ["CK_EBUSY"]
    assert result.tier == "full"
    assert result.record["fallback"] is None
    assert len(compactor.session) == len(chat)
    compactor.append({"role": "user", "content": "now"})
    after = compactor.view(summarize=summarize)
    assert after.messages[-1] == {"role": "user", "content": "now"}
    assert after.messages[:-1] == result.messages  # the checkpoint stands; no new compaction
