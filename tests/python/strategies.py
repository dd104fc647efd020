"""Hypothesis strategies for agent histories and summarizer replies (not a test module).

A history is drawn as a *plan* (shape-independent turns), then rendered in the OpenAI or the
Anthropic shape. Each assistant turn makes 0-3 parallel tool calls whose results come in
order, shuffled, with some missing, with one duplicated, or misplaced (moved after the next
turn). Texts mix CJK, emoji (with ZWJ sequences and skin tones), combining marks, RTL and
bidi controls, empty strings and arbitrary code points; tool outputs go up to ~200 KB. The
last turn is always clean, so the newest message of the full history is a valid one.
"""

import json
import random

from hypothesis import strategies as st

FRAGMENTS = [
    "修复解析器里的错误", "不要修改 CI 配置", "必须先运行测试", "テストを直す", "한국어 메시지",
    "🙂", "👍🏽", "👨‍👩‍👧‍👦", "🇨🇳", "e\u0301", "n\u0303\u0323", "Z\u0351\u0352\u0353",
    "مرحبا بالعالم", "שלום עולם", "\u202eevil\u202c", "\u200f", "\u200b", "\ufeff",
    "never push to main", "always run pytest -q", "src/app/parser.py", "/etc/hosts",
    "https://example.com/issues/4242?x=1&y=2", "3f2a9c1e0b7d4a65a1c2e3f4b5a6c7d8e9f0a1b2",
    "123e4567-e89b-12d3-a456-426614174000", "E1234", "JIRA-981", "\t", "\n", "\r\n", " ",
    "", "{\"json\": [1, 2, {\"k\": null}]}", "```python\nprint('hi')\n```", "## User Intent",
    "- N/A", "\\", "\"", "'", "<script>alert(1)</script>", "\x01\x7f", "\U0010fffd",
]

TOOL_NAMES = ["read_file", "bash", "edit_file", "grep", "write_file", "工具", "search 🔍"]

# Call-id forms: each one is made unique by the turn and call numbers.
ID_FORMS = [
    "call_{t}_{k}", "toolu_{t:02d}{k}", "../../etc/passwd_{t}_{k}", "调用-{t}-{k}",
    "id with spaces {t} {k}", "{t}.{k}", "call/{t}\\{k}",
]

RESULT_MODES = ["ordered"] * 5 + ["shuffled", "missing", "duplicated", "misplaced"]


def fragment_text():
    return st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join)


def short_text():
    """Short texts: arbitrary code points (no surrogates), fragments, or empty."""
    return st.one_of(st.text(max_size=30), fragment_text(), st.just(""))


def big_text(size, seed, one_line):
    """A deterministic text of about `size` bytes: many numbered lines of mixed scripts, or
    one single line (the preview must still be capped in bytes)."""
    rng = random.Random(seed)
    parts, total, n = [], 0, 0
    while total < size:
        piece = rng.choice(FRAGMENTS) + " value_%d = compute(%d)" % (n, rng.randrange(10 ** 6))
        parts.append(piece)
        total += len(piece.encode("utf-8")) + 1
        n += 1
    return (" " if one_line else "\n").join(parts)


def low_entropy_text(char, size):
    """Padding, rules, blank lines: many bytes, few tokens."""
    return char * size


def tool_output():
    """Tool outputs: mostly short, sometimes over the 4000-byte offload gate (or the 300-byte
    one some examples use), rarely huge; some are runs of one character (cheap in tokens)."""
    sized = st.builds(big_text, st.integers(4_001, 16_000), st.integers(0, 2 ** 16),
                      st.booleans())
    huge = st.builds(big_text, st.integers(50_000, 200_000), st.integers(0, 2 ** 16),
                     st.booleans())
    small = st.builds(big_text, st.integers(250, 700), st.integers(0, 2 ** 16), st.booleans())
    runs = st.builds(low_entropy_text, st.sampled_from([" ", "=", "-", "\n", "0", "\t"]),
                     st.integers(250, 9_000))
    return st.one_of(short_text(), short_text(), short_text(), short_text(), sized, huge,
                     small, runs)


@st.composite
def call_turn(draw, t, clean=False):
    n = draw(st.integers(1 if clean else 0, 3))
    calls, results = [], []
    for k in range(n):
        cid = draw(st.sampled_from(ID_FORMS)).format(t=t, k=k)
        name = draw(st.sampled_from(TOOL_NAMES))
        key = draw(st.sampled_from(["path", "cmd", "query"]))
        calls.append((cid, name, {key: draw(short_text())}))
        results.append((cid, draw(tool_output()), draw(st.booleans())))  # (id, text, as_blocks)
    mode = "ordered" if clean or n == 0 else draw(st.sampled_from(RESULT_MODES))
    order = list(range(n))
    later = []
    if mode == "shuffled":
        order = draw(st.permutations(order))
    elif mode == "missing":
        keep = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        if all(keep):
            keep[draw(st.integers(0, n - 1))] = False
        order = [i for i in order if keep[i]]
    elif mode == "duplicated":
        order = order + [draw(st.integers(0, n - 1))]
    elif mode == "misplaced":
        moved = draw(st.integers(0, n - 1))
        order = [i for i in order if i != moved]
        later = [moved]
    text = draw(st.one_of(st.none(), short_text()))
    return {"kind": "call", "text": text, "calls": calls, "results": results, "mode": mode,
            "now": order, "later": later}


@st.composite
def turn(draw, t, clean=False):
    kind = draw(st.sampled_from(["call", "call", "call", "user", "say"]))
    if kind == "call":
        return draw(call_turn(t, clean))
    return {"kind": kind, "text": draw(short_text())}


@st.composite
def plans(draw, min_turns=0, max_turns=14):
    pinned = draw(st.lists(st.tuples(st.sampled_from(["system", "developer"]), short_text()),
                           max_size=2))
    n = draw(st.integers(min_turns, max_turns))
    turns = [draw(turn(t)) for t in range(n)]
    turns.append(draw(turn(n, clean=True)))
    return {"pinned": pinned, "task": draw(short_text()), "task_blocks": draw(st.booleans()),
            "turns": turns}


def is_damaged(plan):
    return any(t["kind"] == "call" and t["mode"] in ("missing", "duplicated", "misplaced")
               for t in plan["turns"])


# ---- rendering ------------------------------------------------------------------------------


def render(plan, shape):
    """(messages, info): the plan as an OpenAI or Anthropic message list, and
    info = {"pinned": indices of system/developer messages and the task,
            "task": index of the first user message,
            "ends": the message count at the end of each turn (agent-loop call points)}."""
    out, pinned, ends = [], [], []
    for role, text in plan["pinned"]:
        pinned.append(len(out))
        out.append({"role": role, "content": text})
    task = len(out)
    if plan["task_blocks"] and shape == "anthropic":
        out.append({"role": "user", "content": [{"type": "text", "text": plan["task"]}]})
    else:
        out.append({"role": "user", "content": plan["task"]})
    pinned.append(task)
    pending = []  # misplaced results, emitted after the next turn
    last = len(plan["turns"]) - 1
    for index, t in enumerate(plan["turns"]):
        carried, pending = pending, []
        if index == last and carried:  # the final turn stays clean: flush before it
            _emit_results(out, shape, carried)
            carried = []
        if t["kind"] == "user":
            out.append({"role": "user", "content": t["text"]})
        elif t["kind"] == "say":
            content = t["text"] if shape == "openai" else [{"type": "text", "text": t["text"]}]
            out.append({"role": "assistant", "content": content})
        else:
            _emit_call(out, shape, t)
            _emit_results(out, shape, [t["results"][i] for i in t["now"]])
            pending = [t["results"][i] for i in t["later"]]
        _emit_results(out, shape, carried)
        ends.append(len(out))
    return out, {"pinned": pinned, "task": task, "ends": ends}


def _emit_call(out, shape, t):
    if shape == "openai":
        out.append({"role": "assistant", "content": t["text"],
                    "tool_calls": [{"id": cid, "type": "function",
                                    "function": {"name": name,
                                                 "arguments": json.dumps(args,
                                                                         ensure_ascii=False)}}
                                   for cid, name, args in t["calls"]]})
        return
    blocks = [] if t["text"] is None else [{"type": "text", "text": t["text"]}]
    blocks += [{"type": "tool_use", "id": cid, "name": name, "input": args}
               for cid, name, args in t["calls"]]
    out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": ""}]})


def _emit_results(out, shape, results):
    if not results:
        return
    if shape == "openai":
        for cid, text, as_blocks in results:
            content = [{"type": "text", "text": text}] if as_blocks else text
            out.append({"role": "tool", "tool_call_id": cid, "content": content})
        return
    out.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": cid,
         "content": [{"type": "text", "text": text}] if as_blocks else text}
        for cid, text, as_blocks in results]})


@st.composite
def histories(draw, shapes=("openai", "anthropic"), **kwargs):
    """(messages, info, shape, plan)."""
    plan = draw(plans(**kwargs))
    shape = draw(st.sampled_from(shapes))
    messages, info = render(plan, shape)
    return messages, info, shape, plan


# ---- summarizer replies ---------------------------------------------------------------------

ANCHOR_TITLES = ["User Intent", "Execution Progress", "Key Decisions", "Tried Solutions",
                 "Next Steps"]

GARBAGE = ["lorem ipsum dolor sit amet", "{not json", "```json\n{]\n```", "<html></html>",
           "null", "[]", "# \n## \n###", "N/A", "- N/A", "I cannot help with that.",
           "\u202e\u202e\u202e", "🙂" * 50]


@st.composite
def good_replies(draw):
    """A Markdown checkpoint with all five sections (the first never empty)."""
    sections = []
    for i, title in enumerate(ANCHOR_TITLES):
        body = draw(short_text())
        if i == 0:
            body = "Fix the failing parser test. " + body
        sections.append("## %s\n%s\n" % (title, body))
    return "\n".join(sections)


def garbage_replies():
    return st.one_of(st.sampled_from(GARBAGE),
                     st.text(min_size=1, max_size=60).filter(lambda s: "#" not in s and
                                                              ":" not in s and "*" not in s
                                                              and "{" not in s))


@st.composite
def reply_kinds(draw):
    """(kind, value): what the summarizer does. kind is one of good, empty, garbage, raise,
    slow, nonstring; value is the reply (or the exception / non-string)."""
    kind = draw(st.sampled_from(["good", "good", "good", "empty", "garbage", "raise", "slow",
                                 "nonstring"]))
    if kind == "good" or kind == "slow":
        return kind, draw(good_replies())
    if kind == "empty":
        return kind, draw(st.sampled_from(["", " ", "\n\t  \n"]))
    if kind == "garbage":
        return kind, draw(garbage_replies())
    if kind == "raise":
        return kind, draw(st.sampled_from([ValueError("model overloaded 过载"),
                                           TimeoutError("read timed out"),
                                           RuntimeError(""), KeyError("choices")]))
    return kind, draw(st.sampled_from([42, None, b"## User Intent\nx", ["## Next Steps"],
                                       {"text": "x"}, 3.5]))
