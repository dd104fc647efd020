"""Histories, summarizers and invariant checks shared by the Compactor tests.

Not a test module itself (no test_ prefix); test files import it by name, which works because
pytest puts each test file's folder on sys.path.
"""

import copy
import json
import os
import tempfile

import ctxkeel

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "..", "shared", "corpus")

# The record fields DESIGN section 8 lists, every one of which each record must carry.
RECORD_FIELDS = ("id", "session_id", "timestamp", "tier", "tokens_before", "tokens_after",
                 "msgs_before", "msgs_after", "summarized", "preserved_tail", "offloaded",
                 "anchors", "checkpoint", "covered", "duration_ms", "error", "fallback",
                 "estimator")

SOFT_AND_ABOVE = ("soft", "full", "emergency")


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


def first_user_index(messages):
    for i, m in enumerate(messages):
        if m["role"] == "user" and isinstance(m.get("content"), str):
            return i
    return None


def check_result(compactor, messages, result, calls_made):
    """Every invariant of one compact() call. `messages` is the input list (compared with a
    deep copy taken by the caller), `calls_made` the number of summarizer calls it made."""
    window = compactor.options["context_window"]
    soft = compactor.options["soft"]
    assert result.tier in ctxkeel._ext.TIERS
    assert ctxkeel.check_pairs(result.messages) == []
    assert result.tokens_after <= result.tokens_before
    assert calls_made <= 1
    if result.tier not in SOFT_AND_ABOVE:
        assert calls_made == 0
    if result.tier in SOFT_AND_ABOVE:
        # The limit is in the provider's tokens: estimates scaled by the learned factor.
        error = (result.record or {}).get("error") or ""
        provider_tokens = result.tokens_after * compactor.usage_factor
        assert provider_tokens <= soft * window * (1 + 1e-9) or (
            "more than the soft limit" in error), (result.tier, provider_tokens, soft * window,
                                                   error)
    # Pinned messages and the newest one come back as the caller's own objects.
    ids = {id(m) for m in result.messages}
    assert id(messages[-1]) in ids
    for m in messages:
        if m["role"] == "system":
            assert id(m) in ids
    task = first_user_index(messages)
    if task is not None and not is_checkpoint(messages[task]):
        assert id(messages[task]) in ids
    if result.record is not None:
        for field in RECORD_FIELDS:
            assert field in result.record, field
        assert result.record["tier"] == result.tier
        assert result.record["tokens_after"] == result.tokens_after


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
