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


def main():
    bench_dir, store, out_file = sys.argv[1:4]
    rows = []
    for n, (name, history) in enumerate(sessions(bench_dir)):
        calls = calls_of(history)
        step = max(1, len(calls) // SAMPLE)
        sampled = {m for k, m in enumerate(calls) if k % step == 0 or k == len(calls) - 1}
        window = ctxkeel.estimate_tokens(history) * 10
        c = ctxkeel.Compactor(window, store_dir=os.path.join(store, "s%d" % n))
        ours, ours_sampled, at_1k, at_end = 0.0, 0.0, [], []
        for m in calls:
            prefix = history[:m]
            t0 = time.process_time()
            r = c.compact(prefix)
            dt = (time.process_time() - t0) * 1e3
            if r.tier != "none":
                raise SystemExit("%s: tier %s at %d" % (name, r.tier, m))
            ours += dt
            if m in sampled:
                ours_sampled += dt
            if 900 <= m <= 1100:
                at_1k.append(dt)
            if m > len(history) - 400:
                at_end.append(dt)
        # The append-only session: a second compactor, each message appended once, a view()
        # at every call; a call's time is its appends since the last call plus the view.
        sc = ctxkeel.Compactor(window, store_dir=os.path.join(store, "v%d" % n))
        mine, mine_sampled, mine_1k, mine_end, appended = 0.0, 0.0, [], [], 0
        for m in calls:
            t0 = time.process_time()
            while appended < m:
                sc.append(history[appended])
                appended += 1
            r = sc.view()
            dt = (time.process_time() - t0) * 1e3
            if r.tier != "none":
                raise SystemExit("%s: session tier %s at %d" % (name, r.tier, m))
            mine += dt
            if m in sampled:
                mine_sampled += dt
            if 900 <= m <= 1100:
                mine_1k.append(dt)
            if m > len(history) - 400:
                mine_end.append(dt)
        row = dict(workload=name, messages=len(history), calls=len(calls), sampled=len(sampled),
                   session_ms=mine, session_sampled_ms=mine_sampled,
                   session_at_1k_ms=sum(mine_1k) / len(mine_1k) if mine_1k else None,
                   session_at_end_ms=sum(mine_end) / len(mine_end) if mine_end else None,
                   ctxkeel_ms=ours, ctxkeel_sampled_ms=ours_sampled,
                   ctxkeel_at_1k_ms=sum(at_1k) / len(at_1k) if at_1k else None,
                   ctxkeel_at_end_ms=sum(at_end) / len(at_end) if at_end else None)
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
              % (name, len(history), len(calls), ours / len(calls)), file=sys.stderr)
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
