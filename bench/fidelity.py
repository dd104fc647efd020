"""What survives compaction: each corpus transcript with planted canaries of five kinds, replayed
as an agent loop (compact() before every assistant message) through ten or more compactions,
with a summarizer that keeps nothing but a one-line intent. Afterwards each canary is looked for
in the view the model gets (survival) and through the evidence store: search_evidence() for it,
then read_evidence() at the line the hit names (recoverability).

    python bench/fidelity.py CORPUS_DIR OUT.md

The kinds: a rule in the task; a rule in the middle of a long user message mid-session; an
identifier in a tool output; a decision in assistant text; a file the agent wrote (write_file).
Prints a Markdown table (also written to OUT.md) and exits 1 when a canary is lost: neither in
the view nor recoverable.
"""
import json
import os
import sys
import tempfile

import ctxkeel

KINDS = [
    ("task rule", "a rule in the task (pinned)"),
    ("mid-session rule", "a rule inside a 6,000-byte user message mid-session"),
    ("tool identifier", "an identifier in an early tool output"),
    ("decision", "a decision in early assistant text"),
    ("modified file", "a file written by an early write_file call"),
]
MIN_COMPACTIONS = 10


def keeps_nothing(request):
    return "## User Intent\nContinue the task."


def plant(messages, tag):
    """A copy of `messages` with one canary of each kind (tokens ending in `tag`); returns
    (messages, {kind: token})."""
    out = [dict(m) for m in messages]
    tokens = {k: "CANARY-%s-%s" % (k.upper().replace(" ", "-"), tag) for k, _ in KINDS}
    task = next(i for i, m in enumerate(out) if m["role"] == "user")
    out[task]["content"] = (str(out[task].get("content") or "") + "\nNever edit files under "
                            "vendor/ (%s)." % tokens["task rule"])
    assistants = [i for i, m in enumerate(out) if m["role"] == "assistant"]
    early = assistants[max(1, len(assistants) // 8)]
    out[early]["content"] = (str(out[early].get("content") or "") + "\nDecision: keep the "
                             "iterative parser, not the recursive one (%s)." % tokens["decision"])
    tool = next((i for i, m in enumerate(out) if m["role"] == "tool" and i > early), None)
    if tool is not None:
        text = str(out[tool].get("content") or "")
        half = len(text) // 2
        out[tool]["content"] = text[:half] + "\nbuild id %s\n" % tokens["tool identifier"] + \
            text[half:]
    # A write_file turn right after the decision, and a long user message at a third.
    path = "src/%s.c" % tokens["modified file"]
    write = [{"role": "assistant", "content": None, "tool_calls": [{
                 "id": "fidelity_write", "type": "function", "function": {
                     "name": "write_file",
                     "arguments": json.dumps({"path": path, "content": "int x;\n"})}}]},
             {"role": "tool", "tool_call_id": "fidelity_write", "content": "wrote " + path}]
    filler = " ".join("The build log shows the usual warnings about unused variables in the "
                      "test helpers, nothing new." for _ in range(30))
    long_user = {"role": "user", "content": filler + " Always run make check before you commit "
                 "(%s). " % tokens["mid-session rule"] + filler}
    at_third = assistants[len(assistants) // 3]
    insert_write = early + 1
    while insert_write < len(out) and out[insert_write]["role"] == "tool":
        insert_write += 1
    out = out[:insert_write] + write + out[insert_write:]
    at_third += 2 if at_third >= insert_write else 0
    out = out[:at_third] + [long_user] + out[at_third:]
    return out, tokens, path


def replay(messages, window):
    store = tempfile.mkdtemp(prefix="ctxkeel-fidelity-")
    c = ctxkeel.Compactor(window, store_dir=store)
    folds, last = 0, None
    points = [k for k in range(1, len(messages)) if messages[k]["role"] == "assistant"]
    for k in points + [len(messages)]:
        last = c.compact(messages[:k], summarize=keeps_nothing)
        if last.record and last.record.get("summarized"):
            folds += 1
    return c, last, folds


def recoverable(c, token):
    for hit in c.search_evidence(None, token):
        if token in c.read_evidence(hit["ref"], offset=hit["line"], limit=1):
            return True
    return False


def main():
    corpus, out_path = sys.argv[1], sys.argv[2]
    names = sorted(n for n in os.listdir(corpus) if n.endswith(".json"))
    seen = {k: [0, 0, 0] for k, _ in KINDS}  # in view, recoverable, lost
    rows = []
    for n, name in enumerate(names):
        with open(os.path.join(corpus, name), encoding="utf-8") as f:
            data = json.load(f)
        messages, tokens, path = plant(data["messages"] if isinstance(data, dict) else data,
                                       "%02d" % n)
        total = ctxkeel.estimate_tokens(messages)
        # The widest window (from a quarter of the session down) that gives enough compactions.
        for fraction in (0.25, 0.2, 0.15, 0.12, 0.1, 0.08):
            try:
                c, last, folds = replay(messages, int(total * fraction))
            except ctxkeel.ContextOverflowError:
                break
            if folds >= MIN_COMPACTIONS:
                break
        view = json.dumps(last.messages, ensure_ascii=False)
        for kind, _ in KINDS:
            token = tokens[kind]
            in_view = token in view or (kind == "modified file" and path in view)
            back = recoverable(c, token)
            seen[kind][0] += in_view
            seen[kind][1] += back
            seen[kind][2] += not (in_view or back)
        rows.append("%s: window %d%% of the session, %d compactions" % (
            name, round(fraction * 100), folds))
    lines = ["Each transcript of the corpus with one canary of each kind, replayed through the "
             "compactions listed, with a summarizer that keeps only a one-line intent "
             "(`make fidelity`, bench/fidelity.py). *In the view*: the canary's text is in "
             "what the model gets after the last call; *recoverable*: search_evidence() finds "
             "it and read_evidence() at the hit's line returns it.", ""]
    lines += ["- " + r for r in rows] + [""]
    lines += ["| canary | planted as | in the view | recoverable | lost |",
              "|---|---|---:|---:|---:|"]
    for kind, how in KINDS:
        v, r, lost = seen[kind]
        lines.append("| %s | %s | %d of %d | %d of %d | %d |" % (kind, how, v, len(names), r,
                                                            len(names), lost))
    text = "\n".join(lines) + "\n"
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(text)
    print(text, end="")
    if any(lost for _, _, lost in seen.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
