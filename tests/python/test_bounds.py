"""The bound always holds and compaction never thrashes (issue 12), seen from Python.

- Properties over random histories (strategies.bound_plans: huge newest outputs, up to eight
  parallel calls, long user messages with rules inside, ids reused across turns, long system
  prompts, heavy tool schemas), replayed as an agent loop: every view at most the window; after
  any compaction at most soft x window unless the record says why; never larger than before;
  check_pairs == []; the newest turn's assistant message and results present (the objects, or
  edited copies and placeholders that read back); a ContextOverflowError only when the pinned
  messages and the schemas leave no room (compaction_support.check_overflow).
- The 1.6 MB cat: a 128,000-token window and a newest output of 1.6 MB.
- No rapid re-compaction over the corpus at windows of 15%, 25%, 35% and 60% of each session.

Held-back data: the property runs on fixed seeds (derandomized); HELD_BACK_SEEDS are more
seeds of the same generator that were not run while the checks and the strategies were
written, kept for a final run (and for the report), and run by the suite like the others.
"""

import copy

import pytest
from hypothesis import HealthCheck, event, given, seed, settings
from hypothesis import strategies as st

import ctxkeel
from compaction_support import (
    PLACEHOLDER_MARK,
    Scripted,
    check_overflow,
    check_result,
    corpus_names,
    fresh_dir,
    history_fits,
    load_corpus,
    pinned_indices,
    read_all,
    ref_in,
    results_of,
    workdir,
)
from strategies import bound_plans, render, tool_schemas, with_filler

pytestmark = pytest.mark.no_leak_check  # hypothesis examples and replays: run once

RATIOS = [0.3, 0.65, 0.75, 0.85, 0.97, 1.3, 3.0, 20.0]


@st.composite
def scenarios(draw):
    plan, features = draw(bound_plans())
    shape = draw(st.sampled_from(["openai", "anthropic"]))
    tools = tool_schemas(draw(st.integers(0, 6)), draw(st.integers(100, 3000)))
    if not draw(st.integers(0, 2)):
        tools = []
    ratio = draw(st.sampled_from(RATIOS))
    # Windows of real models: at least a few thousand tokens (below that the bare checkpoint
    # and the newest turn alone fill it; test_properties covers tiny windows). A history too
    # small for its ratio at such a window gets plain turns before its own.
    n_filler = draw(st.sampled_from([0, 0, 10, 30, 60]))
    if n_filler:
        with_filler(plan, n_filler)
        features.add("filler %d" % n_filler)
    messages, info = render(plan, shape)
    tokens = ctxkeel.estimate_tokens(ctxkeel.repair_pairs(messages, format=shape))
    tokens += ctxkeel.estimate_tokens(tools) if tools else 0
    window = max(2_000, int(tokens / ratio))
    options = {"context_window": window, "keep_tail": draw(st.sampled_from([1, 2, 6])),
               "offload_threshold": draw(st.sampled_from([4000, 4000, 300]))}
    ends = info["ends"]
    points = sorted(set(draw(st.lists(st.sampled_from(ends), max_size=3)))) if ends else []
    if not points or points[-1] != len(messages):
        points.append(len(messages))
    return messages, shape, tools, options, points, features


def replay_bounded(messages, shape, tools, options, points):
    """compact() at each point with one compactor (a good summarizer); every invariant of
    check_result after each call, and of check_overflow for a ContextOverflowError. Returns
    what happened at each point, for the event log."""
    summarize = Scripted()
    compactor = ctxkeel.Compactor(session_id="bounds", **options)
    seen = []
    for k in points:
        prefix = messages[:k]
        before = copy.deepcopy(prefix)
        calls = summarize.calls
        try:
            result = compactor.compact(prefix, tools=tools, summarize=summarize)
        except ctxkeel.ContextOverflowError as err:
            assert summarize.calls == calls and prefix == before
            found = check_overflow(compactor, prefix, err, tools=tools, shape=shape)
            # The history as given would fit: the known core bug of tiny windows
            # (test_properties.py::test_no_overflow_while_the_history_fits_the_window) must
            # not reach the windows drawn here.
            assert not history_fits(compactor, prefix, tools=tools, shape=shape), (
                "ContextOverflowError although the history fits the window")
            seen.append("overflow (%s)" % found)
            continue
        assert prefix == before, "compact() changed its input"
        check_result(compactor, prefix, result, summarize.calls - calls, tools=tools)
        seen.append(result.tier)
    return seen


SETTINGS = settings(max_examples=80, deadline=None, database=None, derandomize=True,
                    print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example])


@SETTINGS
@given(scenarios())
def test_every_view_is_bounded(scenario):
    messages, shape, tools, options, points, features = scenario
    for feature in sorted(features):
        event(feature)
    with workdir():
        for outcome in replay_bounded(messages, shape, tools, options, points):
            event("outcome " + outcome)


# Seeds of the same generator not run while the checks were written (see the module doc).
HELD_BACK_SEEDS = [20261201, 7_000_003, 424242]


@pytest.mark.parametrize("held_back", HELD_BACK_SEEDS)
def test_every_view_is_bounded_on_held_back_seeds(held_back):
    @seed(held_back)
    @settings(SETTINGS, derandomize=False, max_examples=25)
    @given(scenarios())
    def run(scenario):
        messages, shape, tools, options, points, _ = scenario
        with workdir():
            replay_bounded(messages, shape, tools, options, points)

    run()


@SETTINGS
@given(st.integers(200, 30_000), st.integers(0, 8), st.integers(0, 4000),
       st.sampled_from([2_000, 8_000, 32_000]))
def test_overflow_only_when_the_pinned_messages_leave_no_room(system_bytes, n_tools,
                                                               tool_bytes, window):
    """A long system prompt and many tool schemas against windows of every size: compact()
    raises ContextOverflowError exactly when they leave no room (estimated here), and else
    returns a bounded view."""
    from strategies import long_prose

    messages = [{"role": "system", "content": long_prose(system_bytes, system_bytes)},
                {"role": "user", "content": "Fix the failing test."}]
    for t in range(12):
        messages.append({"role": "assistant", "content": "Step %d." % t})
        messages.append({"role": "user", "content": long_prose(600, t)})
    tools = tool_schemas(n_tools, tool_bytes) if n_tools and tool_bytes else []
    pinned = ctxkeel.estimate_tokens([messages[i] for i in pinned_indices(messages)])
    schemas = ctxkeel.estimate_tokens(tools) if tools else 0
    with workdir():
        c = ctxkeel.Compactor(window)
        try:
            result = c.compact(messages, tools=tools)
        except ctxkeel.ContextOverflowError as err:
            event("overflow")
            check_overflow(c, messages, err, tools=tools)
            return
        event("bounded")
        check_result(c, messages, result, 0, tools=tools)
        # It did not refuse what fits: the pinned messages and schemas were within the window.
        assert pinned + schemas <= window


# ---- the 1.6 MB cat -------------------------------------------------------------------------


def log_text(size):
    """About `size` bytes of a service log, every line distinct."""
    lines, total, n = [], 0, 0
    while total < size:
        line = ("2026-12-01T10:%02d:%02d.%03d app[%d]: GET /api/v1/items/%d -> 200 in %d ms "
                "(trace %08x)" % (n // 60 % 60, n % 60, n % 1000, n % 7, n, n % 997, n * 2654435761 % 2 ** 32))
        lines.append(line)
        total += len(line) + 1
        n += 1
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_a_16_mb_cat_in_a_128k_window(shape, tmp_path):
    """An agent cats a 1.6 MB log into a 128,000-token window: the view fits (at most 0.70 x
    the window), the output is a placeholder, and read_evidence gives back every byte (issue
    12: a 767,960-token view was returned for this window)."""
    log = log_text(1_600_000)
    assert len(log.encode()) >= 1_600_000
    system = {"role": "system", "content": "You are a careful SRE agent."}
    task = {"role": "user", "content": "Find why the API is slow since 10:00."}
    if shape == "openai":
        call = {"role": "assistant", "content": "Reading the log.", "tool_calls": [{
            "id": "call_cat", "type": "function",
            "function": {"name": "bash", "arguments": '{"cmd": "cat /var/log/app.log"}'}}]}
        output = {"role": "tool", "tool_call_id": "call_cat", "content": log}
    else:
        call = {"role": "assistant", "content": [
            {"type": "text", "text": "Reading the log."},
            {"type": "tool_use", "id": "toolu_cat", "name": "bash",
             "input": {"cmd": "cat /var/log/app.log"}}]}
        output = {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_cat", "content": log}]}
    messages = [system, task, call, output]
    window = 128_000
    c = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path))
    result = c.compact(messages)
    check_result(c, messages, result, 0)
    assert result.ratio_before > 5  # the raw view: several windows
    assert result.ratio_after <= 0.70 and result.tokens_after <= 0.70 * window
    assert result.messages[:3] == [system, task, call] and result.messages[2] is call
    [(_, text, _)] = results_of(result.messages[3])
    assert text.startswith(PLACEHOLDER_MARK) and len(text.encode()) < 10_000
    ref = ref_in(text, PLACEHOLDER_MARK)
    assert read_all(c, ref, page=5000) == log
    # The next model call (the agent reasons over the placeholder) stays bounded too.
    messages = messages + [{"role": "assistant", "content": "The log is large; searching."}]
    again = c.compact(messages)
    check_result(c, messages, again, 0)
    assert again.ratio_after <= 0.70


def test_placeholdering_the_newest_turn_is_noted(tmp_path):
    messages = [{"role": "user", "content": "Find why the API is slow."},
                {"role": "assistant", "content": None, "tool_calls": [{
                    "id": "c1", "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd": "cat app.log"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": log_text(400_000)}]
    result = ctxkeel.Compactor(32_000, store_dir=fresh_dir(tmp_path)).compact(messages)
    assert result.messages[2]["content"].startswith(PLACEHOLDER_MARK)
    assert result.record["notes"], result.record


# ---- no rapid re-compaction -----------------------------------------------------------------

WINDOW_FRACTIONS = [0.15, 0.25, 0.35, 0.60]


def rhythm(name, fraction, tmp_path):
    """Replays transcript `name` at a window of `fraction` of its tokens (compact() before
    every assistant message, and at the end), every check_result invariant after each call.
    Returns (window, compactor, [(k, result, calls)]) or None when the pinned messages leave
    no room at this window (checked as legitimate)."""
    messages = load_corpus(name)
    window = int(ctxkeel.estimate_tokens(messages) * fraction)
    c = ctxkeel.Compactor(window, store_dir=fresh_dir(tmp_path))
    summarize = Scripted()
    out = []
    points = [k for k in range(1, len(messages)) if messages[k]["role"] == "assistant"]
    for k in points + [len(messages)]:
        calls = summarize.calls
        try:
            result = c.compact(messages[:k], summarize=summarize)
        except ctxkeel.ContextOverflowError as err:
            check_overflow(c, messages[:k], err)
            return None
        made = summarize.calls - calls
        check_result(c, messages[:k], result, made)
        out.append((k, result, made))
    return messages, window, c, out


def folds(results):
    """The compactions of a replay: records of tier soft and above that folded a span."""
    return [(k, r) for k, r, _ in results
            if r.record and r.tier in ("soft", "full", "emergency") and r.record["summarized"] > 0]


@pytest.mark.parametrize("fraction", WINDOW_FRACTIONS)
def test_no_rapid_recompaction_over_the_corpus(corpus_name, fraction, tmp_path):
    """Between two compactions the history grew by at least (soft - target) / 2 x window
    tokens, unless one new message alone is that large, or the first of the two could not
    bring the view to the target (the pinned messages, the checkpoint and the newest turn
    alone are above it: the next compaction then comes sooner, and
    test_a_compaction_that_misses_the_target_says_why asks the record to say so). At most one
    summary call per compaction, and only at soft and full."""
    if corpus_name == "<absent>":
        pytest.skip("corpus not found")
    run = rhythm(corpus_name, fraction, tmp_path)
    if run is None:
        pytest.skip("the pinned messages alone leave no room at %d%%" % (fraction * 100))
    messages, window, c, results = run
    o = c.options
    need = (o["soft"] - o["target"]) / 2 * window
    for _, r, made in results:
        assert made <= 1
        if made:
            assert r.tier in ("soft", "full") and r.record is not None
    pairs = folds(results)
    thrash = []
    for (k1, r1), (k2, _) in zip(pairs, pairs[1:]):
        if r1.ratio_after > o["target"] + 1e-9:
            continue  # the first could not reach the target
        grown = (ctxkeel.estimate_tokens(messages[:k2]) - ctxkeel.estimate_tokens(messages[:k1]))
        largest = max(ctxkeel.estimate_tokens(m) for m in messages[k1:k2])
        if grown < need and largest < need:
            thrash.append((k1, k2, grown, largest))
    assert thrash == [], ("compactions before the history grew by %d tokens" % need, thrash)
    # Summary calls: at most one per compaction over the replay.
    assert sum(made for _, _, made in results) <= len(pairs)


@pytest.mark.parametrize("fraction", [0.25, 0.35, 0.60])
def test_compactions_are_rare_when_the_pinned_messages_are_small(corpus_name, fraction,
                                                                 tmp_path):
    """Where the pinned messages take less than the target, every fold reaches it, the
    exemption above never applies, and compactions stay a minority of the model calls."""
    if corpus_name == "<absent>":
        pytest.skip("corpus not found")
    run = rhythm(corpus_name, fraction, tmp_path)
    assert run is not None
    messages, window, c, results = run
    pinned = ctxkeel.estimate_tokens([messages[i] for i in pinned_indices(messages)])
    if pinned > 0.45 * window:
        pytest.skip("the pinned messages take %.0f%% of the window" % (100 * pinned / window))
    pairs = folds(results)
    assert len(pairs) <= len(results) / 2, (len(pairs), len(results))


def test_a_compaction_that_misses_the_target_says_why(tmp_path):
    """sweagent-ctf-web-i-got-id at a quarter of its tokens: the pinned messages take 55% of
    the window, above the 0.50 target, so folds leave the view above it; each such record
    should say why (an error or a note), and the view a model call then gets is not explained."""
    names = corpus_names()
    if "sweagent-ctf-web-i-got-id.json" not in names:
        pytest.skip("corpus not found")
    run = rhythm("sweagent-ctf-web-i-got-id.json", 0.25, tmp_path)
    _, window, c, results = run
    silent = [k for k, r in folds(results)
              if r.ratio_after > c.options["target"] and not r.record["error"]
              and not r.record["notes"]]
    assert silent == []
