"""Python benchmarks: ctxkeel beside langchain-core's trim_messages on the same histories.

Writes JSON lines (one per case) to the file named by the first argument.
"""
import json
import os
import statistics
import sys
import tempfile
import time

import ctxkeel

try:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.messages import trim_messages
except ImportError:  # the peer is optional: its rows are left out
    trim_messages = None

WORDS = "the parser fails on nested brackets in src/parse.c line 42 "


def text(n, seed):
    s = WORDS * (n // len(WORDS) + 2)
    k = seed % len(WORDS)
    return s[k:k + n]


def history(n):
    """The same synthetic agent history as bench/bench.c and bench/bench.js."""
    out = []
    for i in range(n):
        if i == 0:
            out.append({"role": "system", "content": text(1400, i)})
        elif i == 1 or (i > 2 and i % 20 == 1):
            out.append({"role": "user", "content": text(1400, i)})
        elif i % 2 == 0:
            m = {"role": "assistant", "content": text(350, i)}
            if i + 1 < n and not (i + 1 > 2 and (i + 1) % 20 == 1):
                m["tool_calls"] = [{"id": "call_%d" % i, "type": "function",
                                    "function": {"name": "bash",
                                                 "arguments": '{"command":"make test"}'}}]
            out.append(m)
        else:
            out.append({"role": "tool", "tool_call_id": "call_%d" % (i - 1),
                        "content": text(1400, i)})
    return out


def timed(fn, reps, rounds=5):
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        samples.append((time.perf_counter() - t0) * 1e3 / reps)
    return statistics.median(samples)


def to_langchain(msgs):
    out = []
    for m in msgs:
        if m["role"] == "system":
            out.append(SystemMessage(m["content"]))
        elif m["role"] == "user":
            out.append(HumanMessage(m["content"]))
        elif m["role"] == "tool":
            out.append(ToolMessage(m["content"], tool_call_id=m["tool_call_id"]))
        else:
            calls = [{"id": c["id"], "name": c["function"]["name"],
                      "args": json.loads(c["function"]["arguments"])}
                     for c in m.get("tool_calls", [])]
            out.append(AIMessage(m["content"], tool_calls=calls))
    return out


def main():
    out = open(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdout", "w")

    def emit(**row):
        out.write(json.dumps(dict(lang="python", **row)) + "\n")

    reply = "## User Intent\nfix the parser\n## Next Steps\nread src/parse.c"
    with tempfile.TemporaryDirectory() as store:
        for n in (200, 1000, 10000, 100000):
            msgs = history(n)
            nbytes = sum(len(m["content"].encode()) for m in msgs)
            small = n <= 10000
            reps = 50 if n <= 1000 else (5 if small else 1)
            emit(case="estimate", tool="ctxkeel", messages=n, bytes=nbytes,
                 ms=timed(lambda: ctxkeel.estimate_tokens(msgs), reps))
            total = ctxkeel.estimate_tokens(msgs)
            k = ctxkeel.Compactor(total * 10, store_dir=store)
            emit(case="compact_none", tool="ctxkeel", messages=n, bytes=nbytes,
                 ms=timed(lambda: k.compact(msgs), reps))
            if small:
                window = int(total / 0.85)
                emit(case="compact_full", tool="ctxkeel", messages=n, bytes=nbytes,
                     ms=timed(lambda: ctxkeel.Compactor(window, store_dir=store).compact(
                         msgs, summarize=lambda request: reply), max(1, reps // 5), 3))
            if trim_messages is not None:
                lc = to_langchain(msgs)

                def counter(ms):
                    return sum(len(str(m.content)) // 4 + 4 for m in ms)

                lreps = max(1, reps // 5)
                emit(case="compact_none", tool="langchain-core trim_messages", messages=n,
                     bytes=nbytes, ms=timed(lambda: trim_messages(
                         lc, max_tokens=total * 10, strategy="last", token_counter=counter,
                         include_system=True), lreps, 3))
                emit(case="compact_full", tool="langchain-core trim_messages", messages=n,
                     bytes=nbytes, ms=timed(lambda: trim_messages(
                         lc, max_tokens=int(total * 0.7), strategy="last",
                         token_counter=counter, include_system=True, start_on="human"),
                         lreps, 3))
    out.close()


if __name__ == "__main__":
    main()
