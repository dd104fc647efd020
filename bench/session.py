"""session.py - the per-turn cost of a decision before every model call (issue 16), in Python.

    python bench/session.py BENCH_DIR STORE OUT.jsonl

The same sessions and method as bench/session.mjs: before each assistant message the tool sees
the history up to it; the window is ten times the session, so only the decision is timed.
ctxkeel is one Compactor kept for the whole session and runs every call; langchain-core
trim_messages(strategy="last", include_system=True, start_on="human") with its own
count_tokens_approximately keeps nothing between calls and runs SAMPLE calls spread over the
session (on the history as LangChain message objects, converted once); ratios are taken over
those same calls. A second Compactor replays the session as an append-only session
(append() of each message once, view() at every call). Times are process CPU time.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))

import ctxkeel  # noqa: E402
from bench import to_langchain  # noqa: E402

try:
    from langchain_core.messages import trim_messages
    from langchain_core.messages.utils import count_tokens_approximately
except ImportError:  # the peer's rows are left out
    trim_messages = None

SAMPLE = 200
PEER_BUDGET = 60.0


def read_history(path):
    with open(path, encoding="utf-8") as f:
        v = json.load(f)
    return v if isinstance(v, list) else v["messages"]


def sessions(bench_dir):
    """workloads.tsv (bench/histories.py): name, messages, text bytes, JSON bytes, files..."""
    out = []
    with open(os.path.join(bench_dir, "workloads.tsv"), encoding="utf-8") as f:
        for line in f.read().strip().split("\n"):
            cols = line.split("\t")
            name, files = cols[0], cols[4:]
            if name == "corpus":
                for path in files:
                    base = os.path.splitext(os.path.basename(path))[0]
                    out.append(("corpus/" + base, read_history(path)))
            elif name == "synthetic-100000":
                h = read_history(files[0])
                out.append(("session-5000", h[:5000]))
                out.append(("session-20000", h[:20000]))
    return out


def calls_of(h):
    calls = [m for m in range(1, len(h)) if h[m]["role"] == "assistant"]
    calls.append(len(h))
    return calls


def replay(name, what, history, calls, sampled, call):
    """Times call(m) at every model call m: (the total, the sampled calls' total, the mean per
    call near 1,000 messages of history, the mean over the last 400), in CPU milliseconds."""
    total, in_sample, at_1k, at_end = 0.0, 0.0, [], []
    for m in calls:
        t0 = time.process_time()
        r = call(m)
        dt = (time.process_time() - t0) * 1e3
        if r.tier != "none":
            raise SystemExit("%s: %stier %s at %d" % (name, what, r.tier, m))
        total += dt
        if m in sampled:
            in_sample += dt
        if 900 <= m <= 1100:
            at_1k.append(dt)
        if m > len(history) - 400:
            at_end.append(dt)
    return (total, in_sample, sum(at_1k) / len(at_1k) if at_1k else None,
            sum(at_end) / len(at_end) if at_end else None)


def main():
    bench_dir, store, out_file = sys.argv[1:4]
    rows = []
    for n, (name, history) in enumerate(sessions(bench_dir)):
        calls = calls_of(history)
        step = max(1, len(calls) // SAMPLE)
        sampled = {m for k, m in enumerate(calls) if k % step == 0 or k == len(calls) - 1}
        window = ctxkeel.estimate_tokens(history) * 10
        c = ctxkeel.Compactor(window, store_dir=os.path.join(store, "s%d" % n))
        ours = replay(name, "", history, calls, sampled, lambda m: c.compact(history[:m]))
        # The append-only session: a second compactor, each message appended once, a view()
        # at every call; a call's time is its appends since the last call plus the view.
        sc = ctxkeel.Compactor(window, store_dir=os.path.join(store, "v%d" % n))
        appended = [0]

        def session_call(m):
            while appended[0] < m:
                sc.append(history[appended[0]])
                appended[0] += 1
            return sc.view()

        mine = replay(name, "session ", history, calls, sampled, session_call)
        row = dict(workload=name, messages=len(history), calls=len(calls), sampled=len(sampled),
                   session_ms=mine[0], session_sampled_ms=mine[1], session_at_1k_ms=mine[2],
                   session_at_end_ms=mine[3], ctxkeel_ms=ours[0], ctxkeel_sampled_ms=ours[1],
                   ctxkeel_at_1k_ms=ours[2], ctxkeel_at_end_ms=ours[3])
        if trim_messages is not None:
            lc = to_langchain(history)
            spent, done = 0.0, 0
            for m in sorted(sampled):
                t0 = time.process_time()
                trim_messages(lc[:m], max_tokens=window, token_counter=count_tokens_approximately,
                              strategy="last", include_system=True, start_on="human")
                spent += (time.process_time() - t0) * 1e3
                done += 1
                if spent > PEER_BUDGET * 1e3:
                    break
            row["trim_ms"] = spent if done == len(sampled) else None
        rows.append(row)
        print("session %s (%d messages, %d calls): ctxkeel %.3f ms/call"
              % (name, len(history), len(calls), ours[0] / len(calls)), file=sys.stderr)
    try:
        import langchain_core
        lc_version = langchain_core.__version__
    except ImportError:
        lc_version = None
    with open(out_file, "w", encoding="utf-8") as f:
        for row in rows:
            row["versions"] = {"langchain-core": lc_version, "python": sys.version.split()[0]}
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
