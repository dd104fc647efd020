"""Writes the benchmark workloads: the real transcripts, and synthetic histories made of them.

    python3 bench/histories.py CORPUS_DIR OUT_DIR [SIZE...]

The C, Python and Node benchmarks all read the same JSON files, listed in OUT_DIR/workloads.tsv
(one workload a line: name, messages, text bytes, JSON bytes, then its files), so every
language does the same work on the same bytes.

- "corpus" is the five transcripts of CORPUS_DIR, each its own history (290 messages).
- "synthetic-N" is one history of N messages: the system prompt and task of the first
  transcript, then assistant turns (text + tool call) with their tool results drawn from every
  transcript by a seeded generator, ids renumbered so that pairs stay whole, and a short user
  note every 20 messages or so. Tool outputs keep their real sizes, so about one in twenty is
  over the 4000-byte offload gate, as in the transcripts.

"Text bytes" are the UTF-8 bytes of what an estimator reads: message content, tool-call ids,
names and arguments, and tool_call_id.
"""
import json
import os
import random
import sys

SEED = 20261130
SIZES = (200, 1000, 10000, 100000)
NOTE_EVERY = 20
NOTES = (
    "Keep going, and run the whole test suite before you say it is done.",
    "Do not change the public API; only the implementation may move.",
    "From now on, show me the diff of every file you edit.",
    "The CI log says the failure is in the release build too, not only debug.",
    "Never push to main; open a branch named after the issue.",
    "Please avoid touching the vendored code under lib/.",
    "Any progress? Summarize what you tried so far in two lines.",
    "Use the existing helpers in src/common instead of adding new ones.",
)


def load(corpus):
    files = sorted(os.path.join(corpus, f) for f in os.listdir(corpus) if f.endswith(".json"))
    if not files:
        sys.exit("bench: no transcripts (*.json) in %s" % corpus)
    return files, [json.load(open(f, encoding="utf-8")) for f in files]


def turns_of(msgs):
    """Each assistant message with the tool results that answer it."""
    out = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        ids = {c["id"] for c in m.get("tool_calls") or []}
        results = [r for r in msgs[i + 1:i + 1 + len(ids)]
                   if r["role"] == "tool" and r.get("tool_call_id") in ids]
        out.append((m, results))
    return out


def renumbered(turn, next_id):
    """A copy of one turn with fresh call ids; returns (messages, next free id)."""
    assistant, results = turn
    names = {}
    calls = []
    for c in assistant.get("tool_calls") or []:
        names[c["id"]] = "call_%d" % next_id
        next_id += 1
        calls.append(dict(c, id=names[c["id"]]))
    msg = {"role": "assistant", "content": assistant.get("content") or ""}
    if calls:
        msg["tool_calls"] = calls
    out = [msg]
    out += [dict(r, tool_call_id=names[r["tool_call_id"]]) for r in results]
    return out, next_id


def synthetic(n, transcripts, rng):
    head = transcripts[0]
    msgs = [next(m for m in head if m["role"] == "system"),
            next(m for m in head if m["role"] == "user")]
    pool = [t for msgs_ in transcripts for t in turns_of(msgs_) if t[0].get("tool_calls")]
    next_id, since_note, notes = 0, 0, 0
    while len(msgs) < n:
        if since_note >= NOTE_EVERY - 2:
            msgs.append({"role": "user", "content": "%s (note %d)" % (
                NOTES[notes % len(NOTES)], notes + 1)})
            notes += 1
            since_note = 0
            continue
        turn, next_id = renumbered(pool[int(rng.random() * len(pool))], next_id)
        if len(msgs) + len(turn) > n:  # no room for a whole turn: end on a user note
            since_note = NOTE_EVERY
            continue
        msgs += turn
        since_note += len(turn)
    return msgs


def text_bytes(msgs):
    total = 0
    for m in msgs:
        strings = [m.get("content") or "", m.get("tool_call_id") or ""]
        for c in m.get("tool_calls") or []:
            strings += [c["id"], c["function"]["name"], c["function"]["arguments"]]
        total += sum(len(s.encode("utf-8")) for s in strings)
    return total


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: histories.py CORPUS_DIR OUT_DIR [SIZE...]")
    corpus, out_dir = sys.argv[1], sys.argv[2]
    sizes = [int(s) for s in sys.argv[3:]] or SIZES
    os.makedirs(out_dir, exist_ok=True)
    files, transcripts = load(corpus)
    rows = [("corpus", sum(len(t) for t in transcripts), sum(text_bytes(t) for t in transcripts),
             sum(os.path.getsize(f) for f in files), [os.path.abspath(f) for f in files])]
    rng = random.Random(SEED)
    for n in sizes:
        msgs = synthetic(n, transcripts, rng)
        path = os.path.abspath(os.path.join(out_dir, "synthetic-%d.json" % n))
        with open(path, "w", encoding="utf-8") as f:
            json.dump(msgs, f, ensure_ascii=False, separators=(",", ":"))
        rows.append(("synthetic-%d" % n, len(msgs), text_bytes(msgs), os.path.getsize(path),
                     [path]))
    with open(os.path.join(out_dir, "workloads.tsv"), "w", encoding="utf-8") as f:
        for name, count, nbytes, jbytes, paths in rows:
            f.write("\t".join([name, str(count), str(nbytes), str(jbytes)] + paths) + "\n")
    for name, count, nbytes, jbytes, _ in rows:
        print("%-18s %7d messages %11d text bytes %11d JSON bytes" % (name, count, nbytes, jbytes))


if __name__ == "__main__":
    main()
