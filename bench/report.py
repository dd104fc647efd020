"""Turns the JSON lines of the C, Python and Node benchmarks into BENCHMARKS.md.

Usage: python3 bench/report.py OUT.md C.jsonl PY.jsonl NODE.jsonl [ACCURACY.md]
Every figure in one report comes from one run on one machine, so ratios are comparable.
"""
import json
import os
import platform
import subprocess
import sys
import time


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except Exception:
        return ""


def machine():
    cpu = sh("lscpu | sed -n 's/^Model name: *//p'") or platform.processor()
    mem = sh("free -g | awk '/^Mem:/ {print $2}'")
    return [
        "- date: %s" % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "- CPU: %s, %s cores available (`nproc`)" % (cpu, os.cpu_count()),
        "- memory: %s GiB" % mem,
        "- OS: %s" % sh(". /etc/os-release && echo $PRETTY_NAME"),
        "- compilers and runtimes: %s; Python %s; Node %s" % (
            sh("cc --version | head -1"), platform.python_version(), sh("node --version")),
        "- the machine is shared: figures are medians of several rounds; compare ratios "
        "within this report, not absolute times across reports",
    ]


def load(paths):
    rows = []
    for p in paths:
        if os.path.exists(p):
            with open(p) as f:
                rows += [json.loads(line) for line in f if line.strip()]
    for r in rows:
        r.setdefault("tool", "ctxkeel")
    return rows


def find(rows, lang, case, n, tool="ctxkeel"):
    for r in rows:
        if r["lang"] == lang and r["case"] == case and r["messages"] == n and r["tool"] == tool:
            return r
    return None


def fmt_ms(r):
    return "%.3f" % r["ms"] if r else "-"


def main():
    out, c_path, py_path, node_path = sys.argv[1:5]
    accuracy = sys.argv[5] if len(sys.argv) > 5 else None
    rows = load([c_path, py_path, node_path])
    sizes = sorted({r["messages"] for r in rows})
    lines = ["# Benchmarks", "",
             "Written by `make bench` (bench/bench.c, bench/bench.py, bench/bench.js, "
             "bench/report.py). Histories are synthetic agent sessions (system prompt, task, "
             "assistant tool calls with ~1.4 KB results, a user note every 20 messages); "
             "1,000 messages are about 0.9 MB of text.", "", "## Machine", ""] + machine()

    lines += ["", "## compact() when nothing needs compacting", "",
              "Time per call in ms, message list in, view out (Python and Node include reading "
              "the host's objects and building the result list).", "",
              "| messages | C | Python | Node | Python / C | Node / C | langchain-core "
              "trim_messages (Python) | @langchain/core trimMessages (Node) |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        c, p, nd = (find(rows, l, "compact_none", n) for l in ("c", "python", "node"))
        lp = find(rows, "python", "compact_none", n, "langchain-core trim_messages")
        ln = find(rows, "node", "compact_none", n, "@langchain/core trimMessages")
        ratio = lambda a, b: "%.1fx" % (a["ms"] / b["ms"]) if a and b and b["ms"] else "-"
        lines.append("| %d | %s | %s | %s | %s | %s | %s | %s |" % (
            n, fmt_ms(c), fmt_ms(p), fmt_ms(nd), ratio(p, c), ratio(nd, c), fmt_ms(lp),
            fmt_ms(ln)))

    lines += ["", "## A full compaction with a trivial summarizer", "",
              "A fresh compactor at 85% of its window: offload, summarize the compactable span "
              "(the summarizer returns a fixed checkpoint at once), build the checkpoint, write "
              "the audit record (with fsync) and the view. The trimming peers only drop the "
              "oldest messages to 70% of the budget: less work, and what they drop is lost.", "",
              "| messages | C | Python | Node | langchain-core trim_messages | "
              "@langchain/core trimMessages |", "|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        c, p, nd = (find(rows, l, "compact_full", n) for l in ("c", "python", "node"))
        lp = find(rows, "python", "compact_full", n, "langchain-core trim_messages")
        ln = find(rows, "node", "compact_full", n, "@langchain/core trimMessages")
        if any((c, p, nd, lp, ln)):
            lines.append("| %d | %s | %s | %s | %s | %s |" % (
                n, fmt_ms(c), fmt_ms(p), fmt_ms(nd), fmt_ms(lp), fmt_ms(ln)))

    lines += ["", "## Token estimation throughput", "",
              "MB of message text per second (estimate of a whole message list).", "",
              "| messages | C | Python | Node | tokenx (Node) | gpt-tokenizer, exact (Node) |",
              "|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        cells = []
        for lang, tool in (("c", "ctxkeel"), ("python", "ctxkeel"), ("node", "ctxkeel"),
                           ("node", "tokenx"), ("node", "gpt-tokenizer")):
            r = find(rows, lang, "estimate", n, tool)
            cells.append("%.0f" % (r["bytes"] / 1e3 / r["ms"]) if r and r["ms"] else "-")
        lines.append("| %d | %s |" % (n, " | ".join(cells)))

    if accuracy and os.path.exists(accuracy):
        lines += ["", "## Token estimation accuracy", ""]
        with open(accuracy) as f:
            lines += [l.rstrip("\n") for l in f]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
