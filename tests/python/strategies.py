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


def walk_turns(plan, user, say, call, results, end):
    """The turns of a plan in order, as render() lays them out: user(text), say(text),
    call(turn) then results(the results given now), a misplaced result after the next turn
    (before the last, which stays clean), and end() after each turn."""
    pending, last = [], len(plan["turns"]) - 1
    for index, t in enumerate(plan["turns"]):
        carried, pending = pending, []
        if index == last and carried:
            results(carried)
            carried = []
        if t["kind"] == "user":
            user(t["text"])
        elif t["kind"] == "say":
            say(t["text"])
        else:
            call(t)
            results([t["results"][i] for i in t["now"]])
            pending = [t["results"][i] for i in t["later"]]
        if carried:
            results(carried)
        end()


def render_gemini(plan):
    """(messages, info) as render() gives them, for the plan as Gemini `contents`: the
    system and developer messages go to systemInstruction (not rendered), calls are
    functionCall parts with ids, results functionResponse parts ("output" or, for a result
    drawn as blocks, "result"). A caller must send turns that alternate, so a turn of the same
    side as the one before it is joined to it, as a Gemini agent's own history is: a misplaced
    result lands after the next turn's text, a call whose results are all missing shares its
    model turn with the next reply. info["ends"] counts messages as joined, and leaves out the
    ends whose last message a later turn joined (an agent loop never sees it half made)."""
    out, ends, names = [], [], {}

    def add(role, parts):
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": list(parts)})

    def results(done):
        add("user", [{"functionResponse": {"id": cid, "name": names[cid],
                                           "response": {"result" if as_blocks else "output":
                                                        text}}}
                     for cid, text, as_blocks in done])

    add("user", [{"text": plan["task"]}])

    def call(t):
        names.update((cid, name) for cid, name, _ in t["calls"])
        parts = [] if t["text"] is None else [{"text": t["text"]}]
        parts += [{"functionCall": {"id": cid, "name": name, "args": args}}
                  for cid, name, args in t["calls"]]
        add("model", parts or [{"text": ""}])

    def end():
        ends.append((len(out), len(out[-1]["parts"])))

    walk_turns(plan, lambda text: add("user", [{"text": text}]),
               lambda text: add("model", [{"text": text}]), call,
               lambda done: done and results(done), end)
    ends = [n for n, size in ends if len(out[n - 1]["parts"]) == size]
    return out, {"pinned": [0], "task": 0, "ends": ends}


def render_dialect(plan, dialect):
    """(messages, info) as render() gives them, for the plan in the Responses ("responses":
    input items, calls as function_call items, outputs as function_call_output items), AI SDK
    ("ai-sdk": ModelMessages, the results of a turn in one tool message) or LangChain
    ("langchain": model_dump() dicts) dialect. Misplaced results come after the next turn, as
    in render()."""
    out, pinned, ends, names = [], [], [], {}

    def say(role, text):
        if dialect == "responses":
            kind = "output_text" if role == "assistant" else "input_text"
            out.append({"type": "message", "role": role,
                        "content": [{"type": kind, "text": text}]})
        elif dialect == "ai-sdk":
            out.append({"role": role, "content": text if role != "assistant"
                        else [{"type": "text", "text": text}]})
        else:
            out.append({"type": {"user": "human", "assistant": "ai"}.get(role, role),
                        "content": text})

    def call(t):
        names.update((cid, name) for cid, name, _ in t["calls"])
        if dialect == "responses":
            if t["text"] is not None:
                say("assistant", t["text"])
            out.extend({"type": "function_call", "call_id": cid, "name": name,
                        "arguments": json.dumps(args, ensure_ascii=False)}
                       for cid, name, args in t["calls"])
            if not t["calls"] and t["text"] is None:
                say("assistant", "")
        elif dialect == "ai-sdk":
            parts = [] if t["text"] is None else [{"type": "text", "text": t["text"]}]
            parts += [{"type": "tool-call", "toolCallId": cid, "toolName": name, "input": args}
                      for cid, name, args in t["calls"]]
            out.append({"role": "assistant", "content": parts or [{"type": "text", "text": ""}]})
        else:
            out.append({"type": "ai", "content": t["text"] or "",
                        "tool_calls": [{"id": cid, "name": name, "args": args,
                                        "type": "tool_call"} for cid, name, args in t["calls"]]})

    def results(done):
        if not done:
            return
        if dialect == "responses":
            out.extend({"type": "function_call_output", "call_id": cid, "output": text}
                       for cid, text, _ in done)
        elif dialect == "ai-sdk":
            out.append({"role": "tool", "content": [
                {"type": "tool-result", "toolCallId": cid, "toolName": names[cid],
                 "output": {"type": "text", "value": text}} for cid, text, _ in done]})
        else:
            out.extend({"type": "tool", "tool_call_id": cid, "name": names[cid],
                        "content": text} for cid, text, _ in done)

    for role, text in plan["pinned"]:
        pinned.append(len(out))
        say("system" if dialect != "responses" else role, text)
    task = len(out)
    say("user", plan["task"])
    pinned.append(task)
    walk_turns(plan, lambda text: say("user", text), lambda text: say("assistant", text), call,
               results, lambda: ends.append(len(out)))
    return out, {"pinned": pinned, "task": task, "ends": ends}


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


# ---- histories that stress the bound ----------------------------------------------------------
# Huge newest outputs, wide parallel calls, long user messages with rules inside, agents that
# reuse one id across turns (call_0, call_1 in every turn, as some OpenAI-compatible servers
# do), long system prompts and heavy tool schemas.

RULES = ["Never push to the main branch.", "Always run pytest -q before you report.",
         "Do not edit the CI configuration.", "From now on, only touch files under src/.",
         "You must keep the public API unchanged.", "不要修改 CI 配置。"]


def long_prose(size, seed, rule=None):
    """About `size` bytes of sentences, with `rule` (a sentence) in the middle."""
    rng = random.Random(seed)
    words = ["the", "parser", "reads", "tokens", "from", "a", "buffer", "and", "then",
             "checks", "each", "line", "for", "errors", "before", "it", "moves", "on"]
    sentences, total = [], 0
    while total < size:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(6, 14)))
        sentence = sentence[0].upper() + sentence[1:] + "."
        sentences.append(sentence)
        total += len(sentence) + 1
    if rule:
        sentences.insert(len(sentences) // 2, rule)
    return " ".join(sentences)


def huge_output():
    """A newest output of 100 KB to 2 MB: many lines, or one line."""
    return st.builds(big_text, st.integers(100_000, 2_000_000), st.integers(0, 2 ** 16),
                     st.booleans())


@st.composite
def wide_call_turn(draw, t, huge=False):
    """A clean turn of 1-8 parallel calls; with `huge`, one of the outputs is huge."""
    n = draw(st.integers(1, 8))
    heavy = draw(st.integers(0, n - 1)) if huge else -1
    calls, results = [], []
    for k in range(n):
        cid = "call_%d_%d" % (t, k)
        calls.append((cid, draw(st.sampled_from(TOOL_NAMES)), {"path": "src/m_%d_%d.py" % (t, k)}))
        text = draw(huge_output()) if k == heavy else draw(tool_output())
        results.append((cid, text, draw(st.booleans())))
    return {"kind": "call", "text": draw(st.one_of(st.none(), short_text())), "calls": calls,
            "results": results, "mode": "ordered", "now": list(range(n)), "later": []}


def reuse_ids(plan):
    """The plan with every turn's calls named call_0, call_1, ... (unique within a turn,
    reused across turns)."""
    for t in plan["turns"]:
        if t["kind"] != "call":
            continue
        names = {}
        for k, (cid, name, args) in enumerate(t["calls"]):
            names[cid] = "call_%d" % k
            t["calls"][k] = ("call_%d" % k, name, args)
        t["results"] = [(names.get(cid, cid), text, blocks) for cid, text, blocks in t["results"]]
    return plan


@st.composite
def bound_plans(draw, max_turns=12):
    """A plan of plans() made harder: long user messages with a rule inside, wide parallel
    turns, a huge newest output, reused ids, a long system prompt. Returns (plan, features)."""
    plan = draw(plans(max_turns=max_turns))
    features = set()
    turns = plan["turns"]
    for i, t in enumerate(turns[:-1]):
        if t["kind"] == "user" and draw(st.booleans()):
            t["text"] = long_prose(draw(st.integers(2_000, 40_000)), draw(st.integers(0, 999)),
                                   draw(st.sampled_from(RULES)))
            features.add("long user")
        elif t["kind"] == "call" and draw(st.integers(0, 4)) == 0:
            turns[i] = draw(wide_call_turn(i))
            features.add("wide")
    newest = draw(st.sampled_from(["plain", "huge", "wide", "long user", "long say"]))
    n = len(turns) - 1
    if newest == "huge":
        turns[-1] = draw(wide_call_turn(n, huge=True))
    elif newest == "wide":
        turns[-1] = draw(wide_call_turn(n))
    elif newest in ("long user", "long say"):
        turns[-1] = {"kind": newest.split()[1],
                     "text": long_prose(draw(st.integers(20_000, 400_000)),
                                        draw(st.integers(0, 999)), draw(st.sampled_from(RULES)))}
    features.add("newest " + newest)
    if draw(st.integers(0, 3)) == 0:
        plan["pinned"] = [("system", long_prose(draw(st.integers(1_000, 60_000)),
                                                draw(st.integers(0, 999))))] + plan["pinned"]
        features.add("long system")
    if draw(st.booleans()):
        reuse_ids(plan)
        features.add("reused ids")
    return plan, features


def filler_turn(t):
    """A plain turn of the kind long sessions are made of: a call with an output of about
    2 KB (under the offload gate, so only a fold makes room)."""
    cid = "fill_%d" % t
    return {"kind": "call", "text": "Checking module %d." % t,
            "calls": [(cid, "read_file", {"path": "src/fill_%d.py" % t})],
            "results": [(cid, big_text(2_000, t, False), False)], "mode": "ordered",
            "now": [0], "later": []}


def with_filler(plan, n):
    """The plan with `n` filler turns before its own (its newest turn stays the newest)."""
    plan["turns"] = [filler_turn(t) for t in range(n)] + plan["turns"]
    return plan


def tool_schemas(n, size):
    """n OpenAI tool schemas whose descriptions take about `size` bytes each."""
    return [{"type": "function",
             "function": {"name": "tool_%d" % k, "description": long_prose(size, k),
                          "parameters": {"type": "object",
                                         "properties": {"path": {"type": "string"}}}}}
            for k in range(n)]


# ---- sessions with planted canaries -------------------------------------------------------------


def rule_with(rule, token):
    """`rule` (a sentence) naming `token`, still one sentence."""
    end = rule[-1] if rule[-1] in ".。" else ""
    return "%s (rule %s)%s" % (rule[:len(rule) - len(end)], token, end or ".")


def planted_session(seed, turns=60, tag="P", shape="openai", notes="own"):
    """An agent session of `turns` turns in which every kind of text carries a unique canary:
    assistant text (a decision), tool-call arguments, tool outputs (one line of a multi-line
    output), user messages (a long message with a rule sentence in its middle), and write_file
    calls (some to files read earlier). Deterministic in `seed`; `tag` starts every canary
    and identifier, so that two sessions share none. In the Anthropic shape a user note is
    its own message (notes="own") or a text block of the message that carries the turn's
    results (notes="with_results", as many Anthropic agents send it).

    Returns (messages, canaries) where canaries = {"tokens": {token: kind}, "rules": [rule
    sentences], "written": [paths written], "read": [paths only read]}."""
    rng = random.Random(seed)
    tokens, rules, written, read = {}, [], [], []
    serial = [0]

    def canary(kind):
        serial[0] += 1
        token = "%s%s%d%05d" % (tag, kind, seed, serial[0] * 7919 % 100000)
        tokens[token] = kind
        return token

    system = "You are a careful coding agent working in repository %s-repo." % tag
    task = "Fix the failing parser test of %s in src/%s/parser.py." % (tag, tag)
    msgs = [{"role": "system", "content": system}] if shape == "openai" else []
    msgs.append({"role": "user", "content": task})
    for t in range(turns):
        calls = []
        for k in range(rng.choice([1, 1, 1, 2, 3])):
            cid = "%s_call_%d_%d" % (tag.lower(), t, k)
            if read and rng.random() < 0.12:
                path = rng.choice(read) if rng.random() < 0.5 else "src/%s/new_%d.py" % (tag, t)
                if path in read:
                    read.remove(path)
                if path not in written:
                    written.append(path)
                calls.append((cid, "write_file", {"path": path,
                                                 "content": "VALUE = '%s'\n" % canary("arg")}))
            else:
                path = "src/%s/mod_%d_%d.py" % (tag, t, k)
                read.append(path)
                calls.append((cid, rng.choice(["read_file", "grep", "bash"]),
                              {"path": path, "query": canary("arg")}))
        decision = "Turn %d: I decided to %s." % (t, canary("decision"))
        outputs = []
        for cid, name, _ in calls:
            n = rng.randint(3, 45)
            lines = ["%s line %d: " % (cid, q) + "v" * rng.randint(8, 70) for q in range(n)]
            lines[rng.randrange(n)] += " " + canary("output")
            outputs.append((cid, "\n".join(lines)))
        if shape == "openai":
            msgs.append({"role": "assistant", "content": decision, "tool_calls": [
                {"id": cid, "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}
                for cid, name, args in calls]})
            msgs += [{"role": "tool", "tool_call_id": cid, "content": text}
                     for cid, text in outputs]
        else:
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": decision}] + [
                {"type": "tool_use", "id": cid, "name": name, "input": args}
                for cid, name, args in calls]})
            msgs.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": cid, "content": text}
                for cid, text in outputs]})
        if rng.random() < 0.18 or t == turns // 3:
            rule = rule_with(rng.choice(RULES), canary("rule"))
            rules.append(rule)
            text = "Update %s: %s" % (canary("user"), long_prose(rng.randint(600, 7000),
                                                                 rng.randrange(999), rule))
            if shape == "openai" or notes == "own":
                msgs.append({"role": "user", "content": text})
            else:
                msgs[-1]["content"].append({"type": "text", "text": text})
    if shape == "anthropic" and msgs[-1]["role"] == "user":
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": "Continuing."}]})
    return msgs, {"tokens": tokens, "rules": rules, "written": written, "read": read}
