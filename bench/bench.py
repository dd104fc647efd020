"""The Python side of `make bench`: ctxkeel beside langchain-core on the same histories.

    python bench/bench.py WORKLOADS.tsv STORE_DIR OUT.jsonl [PEER_BUDGET_S]
    python bench/bench.py mem FILE STORE_DIR      peak RSS of one full compaction of FILE
    python bench/bench.py none FILE STORE_DIR     compact() of FILE when nothing needs
                                                  compacting, alone (as `bench none`)

Reads the workloads that bench/histories.py wrote (the files the C and Node benchmarks read)
and writes one JSON line per measurement for bench/report.py.

Timing is bench.c's: one untimed call, then rounds of calls lasting about 60 ms each; a figure
is the median over rounds of the mean time per call, in wall-clock and in process CPU time.
Jobs compared with each other are timed in one group whose rounds alternate between them, so
that a busy moment of the machine falls on all of them alike. A peer whose first call runs past
PEER_BUDGET_S seconds (default 5) is stopped from inside its token counter, reported as capped,
and not run on larger workloads.

Peers (langchain-core, a dev-only dependency; their rows are left out when it is missing):
trim_messages(strategy="last", include_system=True, start_on="human") with the library's own
count_tokens_approximately as its counter, and that counter beside estimate_tokens.
"""
import json
import os
import platform
import statistics
import sys
import sysconfig
import time

import ctxkeel

try:
    import langchain_core
    from langchain_core.messages import (AIMessage, HumanMessage, SystemMessage, ToolMessage,
                                         trim_messages)
    from langchain_core.messages.utils import count_tokens_approximately
except ImportError:  # the peer is optional: its rows are left out
    langchain_core = None

MIN_ROUND_MS = 60.0
FOREVER = float("inf")
REPLY = ("## User Intent\nFix the failing build.\n## Execution Progress\nReproduced the "
         "failure; the parser change is in.\n## Key Decisions\nKeep the public API.\n"
         "## Tried Solutions\n- a clean rebuild: same error\n## Next Steps\nRun the whole test "
         "suite.")


# The window of the "checkpoint reused" case, as a fraction of the history's estimate (the same
# in bench.c and bench.js).
STEADY_FACTOR = 0.4


def trivial(request):
    """The trivial summarizer: a fixed reply, at once."""
    return REPLY


class OverBudget(Exception):
    pass


def measure(jobs, budget=FOREVER):
    """Times jobs, each a function of a deadline (perf_counter seconds) that it may raise
    OverBudget past; only the first, untimed call has one. A second call, unless the first took
    over a second, sizes the rounds, as in bench.c. Returns per job (median ms per call, the
    same in process CPU time, rounds, calls per round), or None when its first call ran out of
    time."""
    firsts, sizes = [], []
    for job in jobs:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            job(t0 + budget)
            firsts.append(((time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3))
        except OverBudget:
            firsts.append(None)
            sizes.append(None)
            continue
        if firsts[-1][0] > 1000:
            sizes.append(firsts[-1][0])
        else:
            t0 = time.perf_counter()
            job(FOREVER)
            sizes.append((time.perf_counter() - t0) * 1e3)
    done = [f for f in sizes if f is not None]
    slowest = max(done) if done else 0
    rounds = 3 if slowest > 1000 else 5 if slowest > 150 else 7
    reps = [None if f is None else
            min(100000, int(MIN_ROUND_MS / max(f, 1e-3)) + 1) if f < MIN_ROUND_MS else 1
            for f in sizes]
    # A first call over a second is one of the (then 3) rounds.
    samples = [[f] if f is not None and f[0] > 1000 else [] for f in firsts]
    for _ in range(rounds):
        for job, n, out in zip(jobs, reps, samples):
            if n is None or len(out) == rounds:
                continue
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(n):
                job(FOREVER)
            out.append(((time.perf_counter() - t0) * 1e3 / n,
                        (time.process_time() - c0) * 1e3 / n))
    return [None if n is None else (statistics.median(w for w, _ in s),
                                    statistics.median(c for _, c in s), rounds, n)
            for n, s in zip(reps, samples)]


def texts_of(history):
    """What the Node peers count, per message: its content and its tool-call arguments."""
    out = []
    for m in history:
        if isinstance(m.get("content"), str) and m["content"]:
            out.append(m["content"])
        for c in m.get("tool_calls") or []:
            if c["function"]["arguments"]:
                out.append(c["function"]["arguments"])
    return out


def to_langchain(history):
    out = []
    for m in history:
        if m["role"] == "system":
            out.append(SystemMessage(m["content"]))
        elif m["role"] == "user":
            out.append(HumanMessage(m["content"]))
        elif m["role"] == "tool":
            out.append(ToolMessage(m["content"], tool_call_id=m["tool_call_id"]))
        else:
            calls = [{"id": c["id"], "name": c["function"]["name"],
                      "args": json.loads(c["function"]["arguments"] or "{}")}
                     for c in m.get("tool_calls") or []]
            out.append(AIMessage(m["content"] or "", tool_calls=calls))
    return out


class Compaction:
    """compact() of every history of a workload at a window of tokens * factor, on compactors
    made beforehand (`keep`) or on a fresh one (a new session) per call; checks the tier."""

    def __init__(self, w, store, estimator, factor, tier, keep):
        self.w, self.store, self.estimator, self.tier = w, store, estimator, tier
        counts = [ctxkeel.estimate_tokens(h, estimator=estimator) for h in w["histories"]]
        self.tokens = sum(counts)
        self.windows = [int(n * factor) for n in counts]
        self.kept = [self.new(win) for win in self.windows] if keep else None
        self.last = {}

    def new(self, window):
        return ctxkeel.Compactor(window, store_dir=self.store, estimator=self.estimator)

    def __call__(self, deadline=FOREVER):
        after = count = 0
        for i, h in enumerate(self.w["histories"]):
            k = self.kept[i] if self.kept else self.new(self.windows[i])
            r = k.compact(h, summarize=trivial)
            if r.tier != self.tier:
                sys.exit("bench: %s: tier %s, expected %s" % (self.w["name"], r.tier, self.tier))
            after += r.tokens_after
            count += len(r.messages)
        self.last = dict(tier=self.tier, tokens=self.tokens, tokens_after=after,
                         messages_after=count)


class Peer:
    """A peer's job over every history of a workload; `last` describes its latest result."""

    def __init__(self, tool, fn, **fixed):
        self.tool, self.fn, self.fixed, self.last = tool, fn, fixed, {}

    def __call__(self, deadline):
        self.last = dict(self.fixed, **(self.fn(deadline) or {}))


class Bench:
    def __init__(self, out, store, budget):
        self.out, self.store, self.budget = out, store, budget
        self.capped = set()  # (case, tool) stopped once: not run on larger workloads

    def emit(self, w, case, timing, tool="ctxkeel", **extra):
        row = dict(lang="python", tool=tool, workload=w["name"], case=case,
                   messages=w["messages"], text_bytes=w["text_bytes"], **extra)
        if timing:
            row.update(ms=timing[0], cpu_ms=timing[1], rounds=timing[2], reps=timing[3])
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()
        shown = "%12.4f ms  %12.4f CPU  (%d x %d)" % timing if timing else "%15s" % (
            extra.get("skipped") or "capped")
        print("python  %-18s %-26s %s  %s" % (w["name"], case, shown, tool), flush=True)

    def group(self, w, case, ours, peers):
        """ctxkeel jobs {case: job} and peer jobs, timed together; peers capped before (on a
        smaller workload) are left out."""
        for p in peers:
            if (case, p.tool) in self.capped:
                self.emit(w, case, None, tool=p.tool, skipped="stopped on a smaller workload")
        peers = [p for p in peers if (case, p.tool) not in self.capped]
        jobs = list(ours.values()) + peers
        timings = measure(jobs, self.budget)
        for (name, job), t in zip(ours.items(), timings):
            self.emit(w, name, t, **job.last)
        for p, t in zip(peers, timings[len(ours):]):
            if t is None:
                self.capped.add((case, p.tool))
                self.emit(w, case, None, tool=p.tool, capped_s=self.budget, **p.fixed)
            else:
                self.emit(w, case, t, tool=p.tool, **p.last)

    def run(self, w):
        hs = w["histories"]
        texts = [t for h in hs for t in texts_of(h)]
        new = lambda *a: Compaction(w, self.store, *a)  # noqa: E731
        lcs = [to_langchain(h) for h in hs] if langchain_core else []
        approx = [count_tokens_approximately(lc) for lc in lcs]

        def estimate(deadline=FOREVER):
            return sum(ctxkeel.estimate_tokens(h) for h in hs)
        estimate.last = dict(tokens=estimate())

        def estimate_texts(deadline=FOREVER):
            return sum(ctxkeel.estimate_tokens(t) for t in texts)
        estimate_texts.last = dict(tokens=estimate_texts())

        def count(deadline):
            for lc in lcs:
                count_tokens_approximately(lc)

        def trim(factor):
            def job(deadline):
                def counter(msgs):
                    if time.perf_counter() > deadline:
                        raise OverBudget()
                    return count_tokens_approximately(msgs)
                kept = [trim_messages(lc, max_tokens=int(a * factor), token_counter=counter,
                                      strategy="last", include_system=True, start_on="human")
                        for lc, a in zip(lcs, approx)]
                return dict(messages_after=sum(len(k) for k in kept))
            return job

        peer = (lambda tool, fn: [Peer(tool, fn, tokens=sum(approx))]) if lcs else (
            lambda tool, fn: [])
        self.group(w, "estimate", {"estimate": estimate},
                   peer("langchain-core count_tokens_approximately", count))
        self.group(w, "estimate_texts", {"estimate_texts": estimate_texts}, [])
        # Nothing to compact: on a fresh compactor per call (made within the call: nothing is
        # cached yet), and on kept ones, which have the messages' token counts from before.
        self.group(w, "compact_none", {
            "compact_none": new("default", 10.0, "none", True),
            "compact_none_first": new("default", 10.0, "none", False),
            "compact_none_chars4": new("chars4", 10.0, "none", True),
            "compact_none_first_chars4": new("chars4", 10.0, "none", False)},
            peer("langchain-core trim_messages", trim(10.0)))
        self.group(w, "compact_emergency", {
            "compact_emergency": new("default", 1 / 0.97, "emergency", False),
            "compact_emergency_chars4": new("chars4", 1 / 0.97, "emergency", False)},
            peer("langchain-core trim_messages", trim(0.7 / 0.97)))
        self.group(w, "compact_full", {"compact_full": new("default", 1 / 0.85, "full", False)},
                   [])
        # The checkpoint reused: one compaction of the history at 2.5 times the window first
        # (offloading alone cannot bring it under target, so a checkpoint is made), then the same
        # history again, which the compactor rebuilds as pinned + checkpoint + the uncovered tail
        # without a model.
        steady = new("default", STEADY_FACTOR, "emergency", True)
        steady()
        steady.tier = "none"
        self.group(w, "compact_steady", {"compact_steady": steady}, [])


def load_workloads(path):
    for line in open(path, encoding="utf-8"):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 5:
            yield dict(name=f[0], messages=int(f[1]), text_bytes=int(f[2]),
                       histories=[json.load(open(p, encoding="utf-8")) for p in f[4:]])


def status(key):
    """VmRSS / VmHWM of this process in bytes, from /proc/self/status."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def memory(path, store):
    """Peak RSS of one full compaction of the history in `path`, beside the RSS before it."""
    rss_start = status("VmRSS")
    history = json.load(open(path, encoding="utf-8"))
    window = int(ctxkeel.estimate_tokens(history) / 0.85)
    k = ctxkeel.Compactor(window, store_dir=store)
    rss_before = status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:  # resets VmHWM to the current RSS
            f.write("5")
        reset = True
    except OSError:
        reset = False
    t0 = time.perf_counter()
    r = k.compact(history, summarize=trivial)
    ms = (time.perf_counter() - t0) * 1e3
    print(json.dumps(dict(lang="python", case="memory", messages=len(history),
                          json_bytes=os.path.getsize(path), rss_start=rss_start,
                          rss_before=rss_before, peak=status("VmHWM"), peak_reset=reset, ms=ms,
                          tier=r.tier)))


def none_alone(path, store):
    """compact() of the history in `path` when nothing needs compacting, alone: on a fresh
    compactor per call, then on a kept one."""
    w = dict(name=path, histories=[json.load(open(path, encoding="utf-8"))])
    for case, keep in (("compact_none_first", False), ("compact_none", True)):
        (ms, cpu, rounds, reps), = measure([Compaction(w, store, "default", 10.0, "none", keep)])
        print(json.dumps(dict(lang="python", case=case, messages=len(w["histories"][0]), ms=ms,
                              cpu_ms=cpu, rounds=rounds, reps=reps)))


def main():
    if len(sys.argv) == 4 and sys.argv[1] in ("mem", "none"):
        return (memory if sys.argv[1] == "mem" else none_alone)(sys.argv[2], sys.argv[3])
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    budget = float(sys.argv[4]) if len(sys.argv) > 4 else 5.0
    with open(sys.argv[3], "w") as out:
        info = dict(lang="python", case="versions", budget_s=budget,
                    python=platform.python_version(),
                    cflags=sysconfig.get_config_var("CFLAGS"))
        if langchain_core:
            info["langchain-core"] = langchain_core.__version__
        out.write(json.dumps(info) + "\n")
        b = Bench(out, sys.argv[2], budget)
        for w in load_workloads(sys.argv[1]):
            b.run(w)


if __name__ == "__main__":
    main()
