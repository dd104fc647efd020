"""Histories, summarizers and invariant checks shared by the Compactor tests.

Not a test module itself (no test_ prefix); test files import it by name, which works because
pytest puts each test file's folder on sys.path.
"""

import contextlib
import copy
import json
import math
import os
import re
import shutil
import tempfile
import weakref

import hypothesis

import ctxkeel

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "..", "shared", "corpus")

# The record fields DESIGN section 8 lists, every one of which each record must carry.
RECORD_FIELDS = ("id", "session_id", "timestamp", "tier", "tokens_before", "tokens_after",
                 "msgs_before", "msgs_after", "summarized", "preserved_tail", "offloaded",
                 "anchors", "checkpoint", "covered", "duration_ms", "error", "fallback",
                 "estimator", "notes", "ratio_before", "ratio_after", "window", "repairs",
                 "state", "mac")

SOFT_AND_ABOVE = ("soft", "full", "emergency")


@contextlib.contextmanager
def workdir():
    """A fresh temporary folder made the current one (stores are relative to it, so the
    placeholders of two runs state the same paths), removed afterwards."""
    old = os.getcwd()
    path = tempfile.mkdtemp(prefix="ck-prop-")
    os.chdir(path)
    try:
        yield path
    finally:
        os.chdir(old)
        shutil.rmtree(path, ignore_errors=True)


def fresh_dir(tmp_path):
    """A new, empty store folder under tmp_path. --leak-loops re-runs a test with the same
    tmp_path, and a store left by an earlier run would resume that run's session."""
    return tempfile.mkdtemp(dir=str(tmp_path))


def call(call_id, name, args):
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


def synthetic_history(turns=40, big_every=4, big_lines=250, prefix="call", notes_every=9):
    """system + task + `turns` assistant tool-call turns with their results (every
    `big_every`-th one large), and a user note every `notes_every` turns."""
    messages = [
        {"role": "system", "content": "You are a careful coding agent. Never push to main."},
        {"role": "user", "content": "Fix the failing test in src/app/parser.py. Do not edit "
                                    "the CI configuration."},
    ]
    for t in range(turns):
        call_id = "%s_%03d" % (prefix, t)
        path = "src/app/module_%02d.py" % (t % 17)
        messages.append({"role": "assistant", "content": "Turn %d: looking at %s." % (t, path),
                         "tool_calls": [call("%s" % call_id, "read_file", {"path": path})]})
        lines = big_lines if t % big_every == 0 else 4
        body = "\n".join("%s:%d: value_%d = compute(%d, %d)  # turn %d"
                         % (path, k + 1, k, k, t, t) for k in range(lines))
        messages.append({"role": "tool", "tool_call_id": call_id, "content": body})
        if t % notes_every == notes_every - 1:
            messages.append({"role": "user", "content": "Note %d: always run pytest -q before "
                                                        "you report." % t})
    return messages


def folding_history(turns=40, prefix="call"):
    """synthetic_history whose outputs all stay under the 4000-byte offload gate (40 lines of
    about 45 bytes at most), so its size is not dominated by large outputs: offloading cannot
    bring it to the target, and a compaction at soft or above must fold (POLICY-CHANGES 3)."""
    return synthetic_history(turns=turns, big_lines=40, prefix=prefix)


def window_for(messages, ratio):
    """A context window in which `messages` fill `ratio` of it."""
    return int(ctxkeel.estimate_tokens(messages) / ratio)


def checkpoint_reply(request):
    """A valid Markdown checkpoint that depends only on the request (so two runs on the same
    input give the same reply)."""
    return ("## User Intent\nFix the failing parser test.\n\n"
            "## Execution Progress\nRead %d messages of the session (tier %s).\n\n"
            "## Key Decisions\nKeep the public API unchanged.\n\n"
            "## Tried Solutions\nN/A\n\n"
            "## Next Steps\nRun pytest -q and report.\n"
            % (len(request["messages"]), request["tier"]))


class Scripted:
    """A summarizer that records every request and answers with checkpoint_reply()."""

    def __init__(self, reply=checkpoint_reply):
        self.requests = []
        self.reply = reply

    def __call__(self, request):
        self.requests.append(request)
        return self.reply(request)

    @property
    def calls(self):
        return len(self.requests)


def corpus_names():
    if not os.path.isdir(CORPUS_DIR):
        return []
    return sorted(n for n in os.listdir(CORPUS_DIR) if n.endswith(".json"))


def load_corpus(name):
    with open(os.path.join(CORPUS_DIR, name), encoding="utf-8") as f:
        data = json.load(f)
    return data["messages"] if isinstance(data, dict) else data


def is_checkpoint(message):
    content = message.get("content")
    if isinstance(content, list):
        content = next((b.get("text") for b in content
                        if isinstance(b, dict) and b.get("type") == "text"), None)
    return isinstance(content, str) and content.startswith(ctxkeel._ext.CHECKPOINT_MARKER)


def task_index(messages):
    """The task: the first user message that is not tool results (text or blocks), or None."""
    for i, m in enumerate(messages):
        if m["role"] == "user" and not results_of(m):
            return i
    return None


# ---- parts of messages, in either shape ------------------------------------------------------

PLACEHOLDER_MARK = "[ctxkeel: tool output offloaded]"
EXCERPT_MARK = " bytes of this message left out here; the full text: read_evidence(ref=\""
# Record errors that explain a view above the soft limit (the core words them, and only
# store failures may also keep a view above the window).
OVER_SOFT_REASONS = ("more than the soft limit",)
STORE_REASONS = ("could not be stored", "offload of", "could not be archived")


def text_of(content):
    """The text of a content value: a str, or the text blocks of a list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content
                       if isinstance(b, dict) and b.get("type") == "text")
    return ""


def call_ids(message):
    """The tool-call ids of an assistant message, in order (OpenAI tool_calls or Anthropic
    tool_use blocks)."""
    ids = [c.get("id") for c in message.get("tool_calls") or []]
    content = message.get("content")
    if isinstance(content, list):
        ids += [b.get("id") for b in content
                if isinstance(b, dict) and b.get("type") == "tool_use"]
    return ids


def results_of(message):
    """[(tool_call_id, text, holder)] for the tool results in a message: the message itself
    for an OpenAI tool message, each tool_result block of an Anthropic user message."""
    if message.get("role") == "tool":
        return [(message.get("tool_call_id"), text_of(message.get("content")), message)]
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, list):
        return []
    return [(b.get("tool_use_id"), text_of(b.get("content")), b) for b in content
            if isinstance(b, dict) and b.get("type") == "tool_result"]


def ref_in(text, mark):
    """The ref a placeholder or an excerpt names, or None."""
    if mark == PLACEHOLDER_MARK:
        if not text.startswith(PLACEHOLDER_MARK):
            return None
        at = text.find('read_evidence(ref="')
        start = at + len('read_evidence(ref="')
    else:
        at = text.find(EXCERPT_MARK)
        start = at + len(EXCERPT_MARK)
    if at < 0:
        return None
    end = text.find('"', start)
    return text[start:end] if end > start else None


def read_all(compactor, ref, page=500):
    """Everything stored under `ref`, read a page of lines at a time."""
    parts, offset = [], 0
    while True:
        text = compactor.read_evidence(ref, offset=offset, limit=page)
        if not text:
            return "".join(parts)
        parts.append(text)
        offset += page


def newest_turn(messages):
    """(index of the newest assistant message after the task, or None)."""
    task = task_index(messages)
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "assistant":
            return i if task is None or i > task else None
    return None


def _dropped(repairs, index, kinds=("call_dropped",)):
    return {r["tool_call_id"] for r in repairs if r["index"] == index and r["kind"] in kinds}


def find_message(compactor, original, index, view, repairs):
    """The view's message for `original` (the message at `index` of the history): the object
    itself, or an edited copy of it (same role, the same tool calls but those the repair
    dropped, its text whole or excerpted with a pointer whose ref reads the full text back).
    None when the view holds neither."""
    for m in view:
        if m is original:
            return m
    dropped = _dropped(repairs, index)
    wanted = [i for i in call_ids(original) if i not in dropped]
    text = text_of(original.get("content"))
    for m in view:
        if m.get("role") != original["role"] or call_ids(m) != wanted or is_checkpoint(m):
            continue
        got = text_of(m.get("content"))
        if got == text or (got.startswith(text) and (text or dropped)):
            return m  # whole (a dropped call adds a note after it)
        ref = ref_in(got, EXCERPT_MARK)
        if ref is not None and text[:16] == got[:16] and read_all(compactor, ref) == text:
            return m
    return None


# Compactors whose record said that every turn was folded, and how far its archives reached.
_FOLDED_TO = weakref.WeakKeyDictionary()


def newest_turn_folded(compactor, messages, result):
    """True when the record says not even the newest turn fitted (so every turn was folded,
    the legitimate last resort of a window the pinned messages nearly fill), or when such a
    fold on an earlier call covers the newest turn. Then the archives named cover it, so
    nothing of it is lost."""
    record = result.record or {}
    if any("every turn was folded" in n for n in record.get("notes") or []):
        ends = [a["end"] for a in record.get("archived") or []]
        assert ends and max(ends) >= len(messages), (
            "the newest turn was folded but not archived", record.get("archived"))
        _FOLDED_TO[compactor] = max(ends)
        return True
    a = newest_turn(messages)
    return a is not None and a < _FOLDED_TO.get(compactor, 0)


def folded_to(compactor):
    return _FOLDED_TO.get(compactor, 0)


def check_newest_turn(compactor, messages, view, repairs):
    """The newest turn's assistant message is in the view (object or edited copy), and each
    of the newest tool results is the caller's object or a placeholder whose full text reads
    back through read_evidence."""
    a = newest_turn(messages)
    if a is None:
        return
    assert find_message(compactor, messages[a], a, view, repairs) is not None, (
        "the newest assistant message (history[%d]) is not in the view" % a)
    holders = {id(h) for m in view for _, _, h in results_of(m)} | {id(m) for m in view}
    view_results = {}
    for m in view:
        for rid, text, holder in results_of(m):
            view_results.setdefault(rid, []).append((text, holder))
    for i in range(a + 1, len(messages)):
        dropped = _dropped(repairs, i, ("orphan_dropped", "duplicate_dropped",
                                        "misplaced_dropped", "kept_as_text"))
        for rid, text, holder in results_of(messages[i]):
            if rid in dropped or id(holder) in holders:
                continue
            found = view_results.get(rid, [])
            ok = False
            for got, _ in found:
                if got == text:
                    ok = True
                    break
                ref = ref_in(got, PLACEHOLDER_MARK)
                if ref is not None and read_all(compactor, ref) == text:
                    ok = True
                    break
            assert ok, "the newest result %r (history[%d]) is neither kept nor readable" % (
                rid, i)


# Compactors whose view was told (by a record's error) to stay above the soft limit: the core
# tells it once, not on every call while it lasts.
_TOLD_OVER = weakref.WeakKeyDictionary()


def check_view_objects(messages, view, shape, identity):
    """Unchanged messages are the caller's own objects: no new object of the view equals an
    input (the copies repair_pairs itself makes aside: test_repair_keeps_moved_messages, an
    Anthropic result message moved next to its call comes back as an equal copy). With
    `identity` (a fresh compactor at tier none) the view is repair_pairs(messages) object for
    object. Returns repair_pairs(messages)."""
    repaired = ctxkeel.repair_pairs(messages, format=shape)
    input_ids = {id(m) for m in messages}
    values = {_canonical(m) for m in messages}
    repair_copies = {_canonical(m) for m in repaired if id(m) not in input_ids}
    for m in view:
        if id(m) not in input_ids:
            text = _canonical(m)
            assert text not in values or text in repair_copies, (
                "an unchanged message was copied: %r" % (text[:200],))
    if identity:
        assert len(view) == len(repaired), "tier none: the view is not repair_pairs(history)"
        for got, want in zip(view, repaired):
            if id(want) in input_ids:
                assert got is want, "tier none: a kept message is not the caller's object"
            else:
                assert got == want
    return repaired


def _canonical(message):
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


def check_bound(compactor, result, tool_tokens=0):
    """The view is never above the window, and after any compaction at most soft x window,
    unless the record's error says why. Checked on the core's ratio and on an estimate of the
    returned messages made here."""
    window = compactor.options["context_window"]
    soft = compactor.options["soft"]
    factor = compactor.usage_factor
    error = (result.record or {}).get("error") or ""
    store_failed = any(reason in error for reason in STORE_REASONS)
    # The ratio is the raw estimate with the usage factor, over the window.
    assert math.isclose(result.ratio_after, result.tokens_after * factor / window,
                        rel_tol=1e-6, abs_tol=1e-9), (result.ratio_after, result.tokens_after)
    assert math.isclose(result.ratio_before, result.tokens_before * factor / window,
                        rel_tol=1e-6, abs_tol=1e-9), (result.ratio_before, result.tokens_before)
    if not store_failed:
        assert result.ratio_after <= 1.0 + 1e-9, (result.tier, result.ratio_after, error)
    # Our own estimate of the view: per-message sums may differ from one estimate of the list
    # by rounding and overhead (a token or so per message). Not with a host counter, whose
    # calls the tests that use one count.
    estimator = compactor.options["estimator"]
    if not callable(estimator):
        mine = ctxkeel.estimate_tokens(result.messages, estimator=estimator) + tool_tokens
        slack = len(result.messages) + 3
        assert abs(mine - result.tokens_after) <= slack, (mine, result.tokens_after)
        if not store_failed:
            assert (mine - slack) * factor <= window, (mine, window)
    over = result.ratio_after > soft * (1 + 1e-9)
    if not over:
        _TOLD_OVER.pop(compactor, None)
        return
    assert result.tier != "none", (result.ratio_before, result.ratio_after)
    if any(reason in error for reason in OVER_SOFT_REASONS + STORE_REASONS):
        _TOLD_OVER[compactor] = True
    else:
        # The core tells a view over the soft limit once, not on every call while it lasts:
        # an earlier record said why, and no view since was under the limit.
        assert _TOLD_OVER.get(compactor), (result.tier, result.ratio_after, soft, error)


# What a view holds besides the pinned messages at the very least: the bare checkpoint (its
# header and the archive pointer, about 100 tokens) and the newest turn with its outputs as
# minimal placeholders and its text excerpted (a few hundred). The core raises
# ContextOverflowError when the pinned messages, the tool schemas and this floor exceed the
# window; measured below 350 tokens on these histories, so 512 leaves a margin.
OVERFLOW_FLOOR = 512


def pinned_indices(messages, pin_first_user=True):
    """The messages the core pins: system and developer messages, and the task (the first
    user message that is not tool results)."""
    out = [i for i, m in enumerate(messages) if m["role"] in ("system", "developer")]
    task = task_index(messages) if pin_first_user else None
    return sorted(out + ([task] if task is not None else []))


def check_overflow(compactor, messages, err, tools=None, shape="auto", pinned=None):
    """A ContextOverflowError is raised only when the pinned messages and the tool schemas
    (estimated here) with the floor above exceed the window, and never while the history as
    given would fit the window whole. Returns what the check found, for the caller's event
    log: "pinned" when the pinned messages and schemas alone exceed the window, "floor" when
    they need the floor to. `pinned`: the indices of the pinned messages, for a dialect whose
    messages have no "role" (else pinned_indices())."""
    assert isinstance(err, ctxkeel.ContextOverflowError) and isinstance(err, ctxkeel.Error)
    assert err.code == "CK_EOVERFLOW"
    window = compactor.options["context_window"]
    factor = compactor.usage_factor
    estimator = compactor.options["estimator"]
    schemas = ctxkeel.estimate_tokens(tools, estimator=estimator) if tools else 0
    if pinned is None:
        pinned = pinned_indices(messages, compactor.options["pin_first_user"])
    pinned = [messages[i] for i in pinned if i < len(messages)]
    need = ctxkeel.estimate_tokens(pinned, estimator=estimator) * factor + schemas
    assert need + OVERFLOW_FLOOR > window, (
        "ContextOverflowError although the pinned messages and schemas need %d of %d tokens"
        % (need, window))
    # The message names what they need and the window.
    match = re.search(r"need (\d+) tokens; the window is (\d+)", err.where or "")
    assert match and int(match.group(2)) == window, (err.where, str(err))
    assert abs(int(match.group(1)) - need) <= len(pinned) + 3 + schemas, (err.where, need)
    assert str(err).startswith("ctxkeel: " + err.where)
    return "pinned" if need > window else "floor"


def history_fits(compactor, messages, tools=None, shape="auto"):
    """True when the history as given (its pairs repaired) fits the window whole."""
    estimator = compactor.options["estimator"]
    schemas = ctxkeel.estimate_tokens(tools, estimator=estimator) if tools else 0
    repaired = ctxkeel.repair_pairs(messages, format=shape)
    tokens = ctxkeel.estimate_tokens(repaired, estimator=estimator) + schemas
    return (tokens + len(repaired) + 3) * compactor.usage_factor <= compactor.options[
        "context_window"]


def check_result(compactor, messages, result, calls_made, tools=None):
    """Every invariant of one compact() call. `messages` is the input list (compared with a
    deep copy taken by the caller), `calls_made` the number of summarizer calls it made,
    `tools` the tool schemas sent with it."""
    assert result.tier in ctxkeel._ext.TIERS
    assert ctxkeel.check_pairs(result.messages) == []
    # A compaction never makes the view larger.
    assert result.tokens_after <= result.tokens_before
    assert result.ratio_after <= result.ratio_before + 1e-12
    assert calls_made <= 1
    if result.tier not in SOFT_AND_ABOVE:
        assert calls_made == 0
    tool_tokens = ctxkeel.estimate_tokens(tools, estimator=compactor.options["estimator"]) \
        if tools else 0
    check_bound(compactor, result, tool_tokens)
    # Pinned messages come back as the caller's own objects (system and developer messages,
    # and the task: the first user message, text or blocks, unless it is a checkpoint).
    ids = {id(m) for m in result.messages}
    for i in pinned_indices(messages, compactor.options["pin_first_user"]):
        if not is_checkpoint(messages[i]):
            assert id(messages[i]) in ids, "pinned message %d is not in the view" % i
    # The newest message is there, as the object or an edited copy (POLICY-CHANGES 1).
    folded = newest_turn_folded(compactor, messages, result)
    if messages and (not folded or len(messages) > folded_to(compactor)):
        assert find_message(compactor, messages[-1], len(messages) - 1, result.messages,
                            result.repairs) is not None or results_of(messages[-1]), (
            "the newest message is not in the view")
    if not folded:
        check_newest_turn(compactor, messages, result.messages, result.repairs)
    for r in result.repairs:
        assert set(r) == {"kind", "index", "tool_call_id"}
        assert 0 <= r["index"] < len(messages)
    if result.record is not None:
        for field in RECORD_FIELDS:
            assert field in result.record, field
        assert result.record["tier"] == result.tier
        assert result.record["tokens_after"] == result.tokens_after
        assert result.record["window"] == compactor.options["context_window"]
        assert math.isclose(result.record["ratio_after"], result.ratio_after, rel_tol=1e-9)
        assert result.record["repairs"] == result.repairs


def replay(compactor, messages, summarize, check=True):
    """Replays a transcript as an agent loop: compact() before every assistant message (the
    prefix ends right before it) and once at the end. Returns the results."""
    results = []
    points = [k for k in range(1, len(messages)) if messages[k]["role"] == "assistant"]
    points.append(len(messages))
    for k in points:
        prefix = messages[:k]
        before = copy.deepcopy(prefix)
        calls = summarize.calls if summarize is not None else 0
        result = compactor.compact(prefix, summarize=summarize)
        made = (summarize.calls if summarize is not None else 0) - calls
        if check:
            assert prefix == before, "compact() changed its input at prefix %d" % k
            check_result(compactor, prefix, result, made)
        results.append((k, result, made))
    return results


def replay_in_dialect(messages, options, reply, points, shape, pinned, check_view):
    """Compacts messages[:k] for each k in `points` with one new compactor (its store in a fresh
    folder), the extractive summarizer or one that always gives `reply`; checks the input is
    not mutated, a ContextOverflowError with check_overflow (`pinned`: its indices), and each
    result with check_view(compactor, prefix, result, fresh)."""
    with workdir():
        compactor = ctxkeel.Compactor(session_id="prop", **options)
        summarize = None if reply is None else (lambda request: reply)
        for n, k in enumerate(points):
            prefix = messages[:k]
            before = copy.deepcopy(prefix)
            try:
                result = compactor.compact(prefix, summarize=summarize)
            except ctxkeel.ContextOverflowError as err:
                assert prefix == before
                check_overflow(compactor, prefix, err, shape=shape, pinned=pinned)
                hypothesis.event("overflow")
                continue
            assert prefix == before, "compact() changed its input"
            hypothesis.event("%s: tier %s" % (shape, result.tier))
            check_view(compactor, prefix, result, n == 0)


def prop_settings(examples):
    """Hypothesis settings of the property suites: `examples` times CTXKEEL_PROP_SCALE, a fixed
    seed unless CTXKEEL_PROP_RANDOM=1, no deadline and no example database."""
    scale = int(os.environ.get("CTXKEEL_PROP_SCALE", "1"))
    return hypothesis.settings(
        max_examples=examples * scale, deadline=None, database=None,
        derandomize=os.environ.get("CTXKEEL_PROP_RANDOM") != "1", print_blob=True,
        suppress_health_check=[hypothesis.HealthCheck.too_slow,
                               hypothesis.HealthCheck.data_too_large,
                               hypothesis.HealthCheck.large_base_example])

