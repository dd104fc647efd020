"""The asyncio loop while many sessions compact at once (`make bench`):

    python bench/stall.py STORE_DIR OUT.jsonl [SESSIONS] [MESSAGES] [RUNS]

SESSIONS compactors (default 300), one per session of MESSAGES messages (default 300: a task,
then turns of a bash call and its output), each history at 85% of its window so that every
acompact() is a full-tier compaction with the built-in extractive summarizer. All of them are
started at once with asyncio.gather while a ticker task sleeps 1 ms at a time and records how
late each wake-up was: the loop's longest stall. The longest pause of Python's garbage
collector during the run is recorded beside it (a collection of the oldest generation walks
every object of the process, here mostly the harness's own histories, on whichever thread
allocates). One JSON line per run.
"""
import asyncio
import gc
import json
import os
import sys
import time

import ctxkeel


def session(s, messages):
    """A session of `messages` messages, distinct per `s`."""
    out = [{"role": "system", "content": "You are a coding agent."},
           {"role": "user", "content": "Session %d: fix the failing test in src/parser.c." % s}]
    t = 0
    while len(out) < messages:
        out.append({"role": "assistant", "content": "Step %d: run the tests." % t,
                    "tool_calls": [{"id": "call_%d_%d" % (s, t), "type": "function",
                                    "function": {"name": "bash", "arguments": "{}"}}]})
        size = 3000 if t % 5 == 0 else 300
        text = "".join("\n" if i % 60 == 59 else chr(97 + (i + t + s) % 26)
                       for i in range(size))
        out.append({"role": "tool", "tool_call_id": "call_%d_%d" % (s, t), "content": text})
        t += 1
    return out


async def ticker(stop, worst):
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(0.001)
        late = (time.perf_counter() - start - 0.001) * 1000.0
        worst[0] = max(worst[0], late)


class GcPauses:
    """The longest garbage-collector pause while it is installed (gc.callbacks)."""

    def __init__(self):
        self.longest, self._start = 0.0, 0.0

    def __call__(self, phase, info):
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.longest = max(self.longest, (time.perf_counter() - self._start) * 1000.0)


async def one_run(store, histories):
    compactors = []
    for s, h in enumerate(histories):
        window = int(ctxkeel.estimate_tokens(h) / 0.85)
        compactors.append(ctxkeel.Compactor(window, store_dir=store, session_id="stall-%d" % s))
    stop, worst = asyncio.Event(), [0.0]
    tick = asyncio.ensure_future(ticker(stop, worst))
    await asyncio.sleep(0.01)
    worst[0] = 0.0
    pauses = GcPauses()
    gc.callbacks.append(pauses)
    start = time.perf_counter()
    try:
        results = await asyncio.gather(*(c.acompact(h) for c, h in zip(compactors, histories)))
    finally:
        took = (time.perf_counter() - start) * 1000.0
        gc.callbacks.remove(pauses)
    stop.set()
    await tick
    tiers = sorted({r.tier for r in results})
    return {"sessions": len(histories), "messages": len(histories[0]), "tiers": tiers,
            "max_delay_ms": round(worst[0], 2), "gc_ms": round(pauses.longest, 2),
            "ms": round(took, 1)}


def main():
    store, out = sys.argv[1], sys.argv[2]
    sessions = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    messages = int(sys.argv[4]) if len(sys.argv) > 4 else 300
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    histories = [session(s, messages) for s in range(sessions)]
    with open(out, "w") as f:
        for run in range(runs):
            r = asyncio.run(one_run(os.path.join(store, "run-%d" % run), histories))
            f.write(json.dumps(r) + "\n")
            print("stall: %d sessions of %d messages at %s: loop max delay %.1f ms (longest "
                  "garbage collection %.1f ms), %.0f ms in all"
                  % (r["sessions"], r["messages"], "/".join(r["tiers"]), r["max_delay_ms"],
                     r["gc_ms"], r["ms"]))


if __name__ == "__main__":
    main()
