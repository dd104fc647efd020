"""Real agent transcripts from ../shared/corpus: valid as recorded, and repaired after damage.

Each transcript is an OpenAI message list. The tests also convert it to the Anthropic shape
and run the same checks there. Damage is applied to copies at several seeded positions:
a dropped tool result, a dropped assistant tool-call message, a duplicated result, a result
moved later, and shuffled results of a parallel call. Every repaired list must pass
check_pairs, the damaged input must stay exactly as it was, user and assistant turns must
keep their order, and repairing twice must give the same objects.
"""

import copy
import json
import random

import pytest

import ctxkeel

POSITIONS = 4  # damaged copies per kind and transcript


# ---- shapes ----------------------------------------------------------------------------------


def to_anthropic(messages):
    """The same conversation in the Anthropic Messages shape (system prompt left out)."""
    out = []
    for m in messages:
        role = m["role"]
        if role == "system":
            continue
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"],
                     "content": m.get("content") or ""}
            last = out[-1] if out else None
            if last and last["role"] == "user" and last.get("x_results"):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block], "x_results": True})
            continue
        if role == "assistant" and m.get("tool_calls"):
            blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            for c in m["tool_calls"]:
                try:
                    args = json.loads(c["function"]["arguments"] or "{}")
                except ValueError:
                    args = {"raw": c["function"]["arguments"]}
                blocks.append({"type": "tool_use", "id": c["id"], "name": c["function"]["name"],
                               "input": args})
            out.append({"role": "assistant", "content": blocks})
            continue
        out.append({"role": role, "content": m.get("content") or ""})
    return out


def make_parallel(messages, fmt):
    """Folds each pair of consecutive single-call turns into one turn with two parallel calls,
    keeping the results in call order. The result is still valid."""
    out = []
    i = 0
    while i < len(messages):
        m = messages[i]
        window = messages[i:i + 4]
        roles = [x["role"] for x in window]
        single = [len(x.get("tool_calls") or []) == 1 for x in window]
        if fmt == "openai" and roles == ["assistant", "tool", "assistant", "tool"] and (
            single[0] and single[2]
        ):
            merged = dict(window[0], tool_calls=window[0]["tool_calls"] + window[2]["tool_calls"])
            out += [merged, window[1], window[3]]
            i += 4
            continue
        if fmt == "anthropic" and roles == ["assistant", "user", "assistant", "user"] and (
            window[1].get("x_results") and window[3].get("x_results")
        ):
            merged = dict(window[0], content=window[0]["content"] + window[2]["content"])
            res = dict(window[1], content=window[1]["content"] + window[3]["content"])
            out += [merged, res]
            i += 4
            continue
        out.append(m)
        i += 1
    return out


def is_result_carrier(m, fmt):
    if fmt == "openai":
        return m["role"] == "tool"
    return m["role"] == "user" and bool(m.get("x_results"))


def has_calls(m, fmt):
    if m["role"] != "assistant":
        return False
    if fmt == "openai":
        return bool(m.get("tool_calls"))
    return any(b.get("type") == "tool_use" for b in m["content"] if isinstance(b, dict))


# ---- damage ----------------------------------------------------------------------------------


def positions(messages, predicate, rng):
    """Up to POSITIONS seeded indices i where predicate(i, messages[i]) holds."""
    found = [i for i, m in enumerate(messages) if predicate(i, m)]
    rng.shuffle(found)
    return found[:POSITIONS]


def drop_result(messages, fmt, rng):
    for i in positions(messages, lambda i, m: is_result_carrier(m, fmt), rng):
        yield messages[:i] + messages[i + 1:]


def drop_call_message(messages, fmt, rng):
    for i in positions(messages, lambda i, m: has_calls(m, fmt), rng):
        yield messages[:i] + messages[i + 1:]


def duplicate_result(messages, fmt, rng):
    for i in positions(messages, lambda i, m: is_result_carrier(m, fmt), rng):
        if fmt == "openai":
            yield messages[:i + 1] + [dict(messages[i])] + messages[i + 1:]
        else:
            m = messages[i]
            doubled = dict(m, content=m["content"] + [dict(m["content"][0])])
            yield messages[:i] + [doubled] + messages[i + 1:]


def move_result_later(messages, fmt, rng):
    # Only results that some assistant message follows, so the move really changes the order.
    def movable(i, m):
        return is_result_carrier(m, fmt) and any(
            x["role"] == "assistant" for x in messages[i + 1:])

    for i in positions(messages, movable, rng):
        rest = messages[:i] + messages[i + 1:]
        # Right past the next assistant message.
        j = next(k for k in range(i, len(rest)) if rest[k]["role"] == "assistant")
        yield rest[:j + 1] + [messages[i]] + rest[j + 1:]


def shuffle_parallel_results(messages, fmt, rng):
    parallel = make_parallel(messages, fmt)
    if fmt == "openai":
        starts = [i for i, m in enumerate(parallel)
                  if m["role"] == "assistant" and len(m.get("tool_calls") or []) > 1]
        for i in starts[:POSITIONS]:
            run = parallel[i + 1:i + 3]
            yield parallel[:i + 1] + run[::-1] + parallel[i + 3:]
            # Also scatter: the second result after the next assistant turn.
            tail = parallel[i + 3:]
            j = next((k for k, m in enumerate(tail) if m["role"] == "assistant"), None)
            if j is not None:
                yield parallel[:i + 1] + run[:1] + tail[:j + 1] + run[1:] + tail[j + 1:]
    else:
        starts = [i for i, m in enumerate(parallel)
                  if m.get("x_results") and len(m["content"]) > 1]
        for i in starts[:POSITIONS]:
            m = parallel[i]
            yield parallel[:i] + [dict(m, content=m["content"][::-1])] + parallel[i + 1:]
            # And with a text block in front of the results, which breaks result order.
            noted = dict(m, content=[{"type": "text", "text": "note"}] + m["content"][::-1])
            yield parallel[:i] + [noted] + parallel[i + 1:]


DAMAGE = [drop_result, drop_call_message, duplicate_result, move_result_later,
          shuffle_parallel_results]


# ---- checks ----------------------------------------------------------------------------------


def turns(messages, fmt):
    """The user and assistant messages that say something (text or tool calls), each as the
    tuple of what it says. A user message that only carries tool results is not a turn, and a
    string content counts the same as one text block holding it."""
    out = []
    for m in messages:
        if m["role"] not in ("user", "assistant"):
            continue
        content = m.get("content")
        said = []
        if isinstance(content, str):
            said.append(content)
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                said.append("call:" + block["id"])
            elif block.get("type") != "tool_result":
                said.append(block.get("text"))
        said += ["call:" + c["id"] for c in m.get("tool_calls") or []]
        if said:
            out.append(tuple(said))
    return out


def check_repair(damaged, fmt):
    before = copy.deepcopy(damaged)
    items = list(damaged)
    repaired = ctxkeel.repair_pairs(damaged, format=fmt)
    assert ctxkeel.check_pairs(repaired, format=fmt) == []
    assert damaged == before
    assert all(a is b for a, b in zip(damaged, items))
    assert turns(repaired, fmt) == turns(damaged, fmt)
    again = ctxkeel.repair_pairs(repaired)
    assert len(again) == len(repaired) and all(a is b for a, b in zip(again, repaired))
    return repaired


@pytest.fixture(params=["openai", "anthropic"])
def transcript(request, corpus_messages):
    fmt = request.param
    messages = corpus_messages if fmt == "openai" else to_anthropic(corpus_messages)
    return fmt, messages


def test_transcript_is_valid(transcript):
    fmt, messages = transcript
    assert ctxkeel.check_pairs(messages) == []
    assert ctxkeel.check_pairs(messages, format=fmt) == []
    out = ctxkeel.repair_pairs(messages)
    assert len(out) == len(messages) and all(a is b for a, b in zip(out, messages))
    chars4 = ctxkeel.estimate_tokens(messages, estimator="chars4")
    assert ctxkeel.estimate_tokens(messages) > chars4 > 0


def test_parallel_version_is_valid(transcript):
    fmt, messages = transcript
    parallel = make_parallel(messages, fmt)
    assert len(parallel) < len(messages)
    assert ctxkeel.check_pairs(parallel, format=fmt) == []


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda d: d.__name__)
def test_damaged_transcript_is_repaired(transcript, damage, corpus_name):
    fmt, messages = transcript
    rng = random.Random("%s/%s/%s" % (corpus_name, fmt, damage.__name__))
    copies = list(damage(messages, fmt, rng))
    assert copies, "no place to apply %s" % damage.__name__
    broken = 0
    for damaged in copies:
        if ctxkeel.check_pairs(damaged, format=fmt):
            broken += 1
        check_repair(damaged, fmt)
    if damage is not shuffle_parallel_results:
        # Every copy of these kinds breaks a rule (reordered parallel results may not).
        assert broken == len(copies)
    else:
        assert broken >= 1


def test_dropped_result_gets_the_stub(transcript):
    fmt, messages = transcript
    i = next(k for k, m in enumerate(messages) if is_result_carrier(m, fmt))
    damaged = messages[:i] + messages[i + 1:]
    repaired = ctxkeel.repair_pairs(damaged)
    stub = "result unavailable: context was compacted"
    if fmt == "openai":
        assert repaired[i]["role"] == "tool" and repaired[i]["content"] == stub
        assert repaired[i]["tool_call_id"] == messages[i]["tool_call_id"]
    else:
        assert any(b.get("content") == stub for b in repaired[i]["content"])
    assert len(repaired) == len(messages)
