"""Writes BENCHMARKS.md from what one `make bench` run measured.

    python3 bench/report.py OUT.md BENCH_DIR [--store DIR] [--disk-store DIR]

BENCH_DIR holds workloads.tsv (bench/histories.py), c.jsonl, python.jsonl and node.jsonl
(bench/bench.c, bench.py, bench.js), memory.jsonl (their `mem` mode), tokens.md (the output of
tools/tokens_measure.js), tokens_speed.json (bench/tokens.js) and loadavg.start. Every sentence that states a figure is computed
here from those files, so the report stays true when it is regenerated.
"""
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

LANGS = (("c", "C"), ("python", "Python"), ("node", "Node"))
MiB = 1024 * 1024


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Data:
    def __init__(self, bench_dir):
        self.dir = bench_dir
        self.workloads = []
        with open(os.path.join(bench_dir, "workloads.tsv")) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if len(p) >= 5:
                    self.workloads.append(dict(name=p[0], messages=int(p[1]),
                                               text_bytes=int(p[2]), json_bytes=int(p[3]),
                                               files=len(p) - 4))
        self.rows, self.meta = [], {}
        for lang, _ in LANGS:
            for r in read_jsonl(os.path.join(bench_dir, lang + ".jsonl")):
                if r["case"] == "versions":
                    self.meta[lang] = r
                else:
                    self.rows.append(r)
        self.memory = read_jsonl(os.path.join(bench_dir, "memory.jsonl"))
        self.alone = read_jsonl(os.path.join(bench_dir, "none.jsonl"))
        self.loop = read_jsonl(os.path.join(bench_dir, "loop.jsonl"))
        self.stall = read_jsonl(os.path.join(bench_dir, "stall.jsonl"))

    def get(self, lang, workload, case, tool="ctxkeel"):
        for r in self.rows:
            if (r["lang"], r["workload"], r["case"], r["tool"]) == (lang, workload, case, tool):
                return r
        return None

    def ms(self, *key, **kw):
        r = self.get(*key, **kw)
        return r["ms"] if r and r.get("ms") is not None else None

    def cpu(self, *key, **kw):
        r = self.get(*key, **kw)
        return r["cpu_ms"] if r and r.get("cpu_ms") is not None else None

    def tools(self, lang, case):
        seen = []
        for r in self.rows:
            if r["lang"] == lang and r["case"] == case and r["tool"] != "ctxkeel" \
                    and r["tool"] not in seen:
                seen.append(r["tool"])
        return seen


# ---- formatting ------------------------------------------------------------------------------

def fmt_ms(ms):
    if ms is None:
        return "-"
    if ms < 10:
        return "%.3f" % ms
    if ms < 1000:
        return "%.1f" % ms
    return "{:,.0f}".format(ms)


def fmt_row_ms(r):
    """A peer's time, or why there is none."""
    if r is None:
        return "-"
    if r.get("capped_s") is not None:
        return "> %s s (stopped)" % fmt_num(r["capped_s"])
    if r.get("skipped"):
        return "not run (%s)" % r["skipped"]
    if r.get("ms") is None:
        return "not run"
    return fmt_ms(r["ms"])


def fmt_num(x):
    return ("%d" % x) if float(x).is_integer() else ("%g" % x)


def fmt_x(x):
    if x is None:
        return "-"
    return ("%.2fx" % x) if x < 10 else ("%.0fx" % x) if x >= 100 else ("%.1fx" % x)


def speed_ratio(ours, peer):
    """ctxkeel speed / peer speed = peer time / ctxkeel time, in process CPU time; for a peer
    stopped at its budget, a lower bound in wall-clock time."""
    if not ours or not peer or ours.get("ms") is None:
        return "-"
    if peer.get("capped_s") is not None:
        return "> %s (wall)" % fmt_x(peer["capped_s"] * 1e3 / ours["ms"])
    if peer.get("cpu_ms") is None or not ours.get("cpu_ms"):
        return "-"
    return fmt_x(peer["cpu_ms"] / ours["cpu_ms"])


def ratio_value(ours, peer):
    """speed_ratio() as a number (a lower bound for a peer stopped at its budget), or None."""
    if not ours or not peer or not ours.get("cpu_ms"):
        return None
    if peer.get("capped_s") is not None:
        return peer["capped_s"] * 1e3 / ours["ms"]
    return peer["cpu_ms"] / ours["cpu_ms"] if peer.get("cpu_ms") is not None else None


PEER_CASES = [
    ("compact_none", "nothing to trim, on a compactor kept across calls"),
    ("compact_none_chars4", "the same, counting with chars/4 as the peer does"),
    ("compact_none_first", "nothing to trim, on a fresh compactor per call (every message "
     "estimated with the calibrated estimator)"),
    ("compact_none_first_chars4", "the same, counting with chars/4"),
    ("compact_emergency", "cut to budget (emergency tier, fresh compactor per call)"),
    ("compact_emergency_chars4", "the same, counting with chars/4"),
]


def peer_summary(d):
    """One line per language: the range over workloads of ctxkeel speed / LangChain speed for
    each bounding case, and which cases lose anywhere."""
    out = []
    for lang, peer_name in (("python", "langchain-core trim_messages"),
                            ("node", "@langchain/core trimMessages")):
        if not d.tools(lang, "compact_none"):
            continue
        tool = d.tools(lang, "compact_none")[0]
        parts, behind = [], []
        for case, how in PEER_CASES:
            peer_case = case.replace("_first", "").replace("_chars4", "")
            xs = [ratio_value(d.get(lang, w["name"], case), d.get(lang, w["name"], peer_case, tool))
                  for w in d.workloads]
            xs = [x for x in xs if x is not None]
            if not xs:
                continue
            parts.append("%s %s-%s" % (how, fmt_x(min(xs)), fmt_x(max(xs))))
            if min(xs) < 1:
                behind.append(how)
        if parts:
            out.append("- Bounding a history to a budget beside %s (%s), ctxkeel speed / its "
                       "speed over the workloads, CPU time in the same process: %s. %s" % (
                           peer_name, dict(LANGS)[lang], "; ".join(parts),
                           "ctxkeel is ahead in every case on every workload." if not behind
                           else "Behind on some workload: %s." % "; ".join(behind)))
    return out


def rate(w, row):
    """MB of the workload's text per second of CPU time, or why there is no figure."""
    if not row or not row.get("cpu_ms"):
        return fmt_row_ms(row)
    return "%.0f" % (w["text_bytes"] / 1e3 / row["cpu_ms"])


def label(w):
    if w["name"] == "corpus":
        return "corpus (%d transcripts, %d messages)" % (w["files"], w["messages"])
    return "{:,} messages".format(w["messages"])


def table(head, align, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


# ---- sections --------------------------------------------------------------------------------

def machine(d, args):
    cpu = sh("lscpu | sed -n 's/^Model name: *//p'") or platform.processor()
    mem = sh("free -b | awk '/^Mem:/ {print $2}'")
    start = ""
    path = os.path.join(d.dir, "loadavg.start")
    if os.path.exists(path):
        start = open(path).read().split()[:3]
    end = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
    py = d.meta.get("python", {})
    nd = d.meta.get("node", {})
    lines = [
        "- date: %s (when this report was written, at the end of the run)"
        % time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "- CPU: %s, %s cores (`nproc`: %s)" % (cpu, sh("lscpu | sed -n 's/^Core(s) per socket: *//p'")
                                               or "?", os.cpu_count()),
        "- memory: %.1f GiB" % (int(mem) / 1024 ** 3) if mem.isdigit() else "- memory: ?",
        "- OS: %s, kernel %s" % (sh(". /etc/os-release && echo $PRETTY_NAME"), platform.release()),
        "- C compiler: %s" % sh("cc --version | head -1"),
        "- Python %s, Node %s" % (py.get("python") or "?", nd.get("node") or "?"),
        "- builds: the C library with `%s` (the Makefile's OPT) and bench.c with `-O2`; the "
        "Python extension with CPython's flags (%s); the Node addon by node-gyp (%s)" % (
            args.get("c_flags", "?"), opt_flags(py.get("cflags") or ""),
            opt_flags(gyp_release_flags()) or "Release"),
        "- peers: %s" % ", ".join(
            "%s %s" % (k, v) for k, v in sorted(list(nd.items()) + list(py.items()))
            if k not in ("lang", "case", "budget_s", "node", "python", "cflags") and v)
        or "none installed",
    ]
    if start or end:
        lines.append("- load average (1, 5, 15 min): %s at the start of the run, %s at the end; "
                     "the machine is shared, so compare figures within this report"
                     % (" ".join(start) or "?", " ".join(end) or "?"))
    store = args.get("store")
    if store:
        lines.append("- evidence store and audit logs of the compactions: %s (%s)"
                     % (store, fs_type(store)))
    disk = args.get("disk_store")
    if disk:
        lines.append("- the `disk` column of the full compaction: %s (%s)" % (disk, fs_type(disk)))
    return lines


def opt_flags(cflags):
    """The optimization flags in a compiler command line: "-O3", "-O2 -g"..."""
    found = re.findall(r"(?<!\S)(-O[0-3sz]?|-g)(?!\S)", cflags)
    return " ".join("`%s`" % f for f in found) if found else ""


def gyp_release_flags():
    """The Release cflags node-gyp used for the core, from the generated makefile."""
    path = os.path.join("build", "ck_core.target.mk")
    if not os.path.exists(path):
        return ""
    text = open(path).read()
    at = text.find("CFLAGS_Release")
    return text[at:text.find("\n\n", at)] if at >= 0 else ""


def fs_type(path):
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    return sh("stat -f -c %%T '%s'" % (path or ".")) or "?"


def method(d):
    budgets = {lang: d.meta[lang].get("budget_s") for lang in ("python", "node") if lang in d.meta}
    return [
        "Each figure is the median over rounds of the mean time per call in a round, taken both "
        "in wall-clock time and in the process's CPU time (user + system, all threads). A case "
        "first makes one untimed call (which fills caches), then a second one that sizes the "
        "rounds to about 60 ms each; there are 7 rounds, 5 when a call takes over 150 ms, and 3 "
        "when it takes over a second, the first call then sizing them and being one of them "
        "(rounds and calls per round are in the JSON lines "
        "the run leaves in build-bench/). In Python and Node, the jobs compared with each other "
        "(ctxkeel and its peers) are timed in one group whose rounds alternate between them. "
        "Ratios are taken on CPU time: on this shared machine, waiting for a core inflates wall "
        "time by different amounts from minute to minute.",
        "",
        "Every compaction checks that it ran at the tier its case names. \"Nothing to compact\" "
        "uses a window 10 times the history's estimate (tier none); \"full\" a fresh compactor "
        "(a new session) at 85% of the window (tier full) and a summarizer that returns a fixed "
        "five-anchor reply at once; \"checkpoint reused\" one compaction at a window of 40% of "
        "the history first (offloads alone cannot reach the target there, so a "
        "checkpoint is made), then the same history again on the same compactor, which "
        "rebuilds the view from the checkpoint without a model (tier none); \"emergency\" a fresh compactor at 97% of the window: no "
        "model, the dropped span folded into the checkpoint extractively, the view cut to at "
        "most 70% of the window. Python and Node times include reading the host's message objects and "
        "building the result list; Node's compact() is async and each call is awaited.",
        "",
        "A peer whose first call runs past %s is stopped (from inside its own token counter or "
        "loop) and shown as \"> N s (stopped)\"; it is then not run on larger workloads." % (
            " / ".join("%s s in %s" % (fmt_num(v), k.capitalize()) for k, v in budgets.items()
                       if v is not None) or "its time budget"),
    ]


def workloads_section(d):
    rows = []
    for w in d.workloads:
        tok = d.get("c", w["name"], "estimate") or d.get("python", w["name"], "estimate")
        rows.append((w["name"], w["files"], "{:,}".format(w["messages"]),
                     "%.2f" % (w["text_bytes"] / 1e6), "%.2f" % (w["json_bytes"] / 1e6),
                     "{:,}".format(tok["tokens"]) if tok else "-"))
    return [
        "Made by bench/histories.py from the transcripts in ../shared/corpus; C, Python and Node "
        "read the same JSON files. `corpus` is the five real transcripts, each its own history. "
        "`synthetic-N` is one history of N messages: the system prompt and task of the first "
        "transcript, then assistant turns (text and one tool call) with their tool results "
        "drawn from all five transcripts by a seeded generator, call ids renumbered, and a short "
        "user note every 20 messages or so. Tool outputs keep their real sizes, so some of "
        "them pass the 4000-byte offload gate, as in the transcripts. Text is what an estimator reads "
        "(content, tool-call ids, names and arguments).", ""] + table(
        ["workload", "histories", "messages", "text MB", "JSON MB", "tokens (default estimate)"],
        ["---", "---:", "---:", "---:", "---:", "---:"], rows)


def per_lang_table(d, case, extra=None):
    """Per workload: wall time in C, Python, Node; process CPU time in each; CPU ratios."""
    rows = []
    for w in d.workloads:
        got = [d.get(lang, w["name"], case) for lang, _ in LANGS]
        wall = [r["ms"] if r else None for r in got]
        cpu = [r.get("cpu_ms") if r else None for r in got]
        ratio = lambda x, base: fmt_x(x / base) if x and base else "-"  # noqa: E731
        row = [label(w)] + [fmt_ms(x) for x in wall] + [fmt_ms(x) for x in cpu] + [
            ratio(cpu[1], cpu[0]), ratio(cpu[2], cpu[0])]
        if extra:
            row += extra(w)
        rows.append(row)
    return rows


PER_LANG_HEAD = ["workload", "C", "Python", "Node", "C, CPU", "Python, CPU", "Node, CPU",
                 "Python / C, CPU", "Node / C, CPU"]
PER_LANG_NOTE = (
    "Time per call in ms: wall clock, then process CPU time. C, Python and Node ran one after "
    "the other, minutes apart, so the ratios are taken on CPU time, which the load of the "
    "shared machine disturbs less than wall-clock time.")


def alone_figures(d, case):
    """From the alternated runs (none.jsonl) of `case`: per language the median wall and CPU
    times of its runs, and the medians of the per-alternation CPU ratios to C; None when there
    are none."""
    runs = {lang: [r for r in d.alone if r["lang"] == lang and r["case"] == case]
            for lang, _ in LANGS}
    if not all(runs.values()):
        return None
    n = min(len(v) for v in runs.values())
    out = {"runs": n, "table": runs}
    for lang, v in runs.items():
        out[lang] = statistics.median(r["ms"] for r in v)
        out[lang + " cpu"] = statistics.median(r["cpu_ms"] for r in v)
    for lang in ("python", "node"):
        out[lang + "/c"] = statistics.median(runs[lang][i]["cpu_ms"] / runs["c"][i]["cpu_ms"]
                                             for i in range(n))
    return out


def verdict(py, nd):
    ok = [name for name, x in (("Python", py), ("Node", nd)) if x is not None and x <= 2]
    return "met by both" if len(ok) == 2 else ("met by %s only" % ok[0]) if ok else "not met"


NONE_CASES = (("compact_none", "on the compactor that saw it before (its token counts cached)"),
              ("compact_none_first", "on a fresh compactor (the first call of a session, the "
               "compactor made within the call)"))


def summary(d):
    out = []
    w1k = next((w for w in d.workloads if w["messages"] == 1000 and w["name"] != "corpus"), None)
    if w1k:
        n = w1k["name"]
        for case, how in NONE_CASES:
            a = alone_figures(d, case)
            if not a:
                continue
            out.append(
                "- compact() of the 1,000-message history (%.2f MB of JSON) when nothing needs "
                "compacting, %s; medians of %d alternated runs of the three programs: C %s ms "
                "of CPU time, %s ms wall clock (target under 1 ms: %s); Python %s ms CPU (%s "
                "C), Node %s ms CPU (%s C) (target within 2x of C: %s)." % (
                    w1k["json_bytes"] / 1e6, how, a["runs"], fmt_ms(a["c cpu"]), fmt_ms(a["c"]),
                    "met" if max(a["c cpu"], a["c"]) < 1 else
                    "met in CPU time only" if a["c cpu"] < 1 else "not met",
                    fmt_ms(a["python cpu"]), fmt_x(a["python/c"]), fmt_ms(a["node cpu"]),
                    fmt_x(a["node/c"]), verdict(a["python/c"], a["node/c"])))
        est = d.get("c", n, "estimate")
        if est:
            out.append("- Estimating the tokens of that history alone (ck_estimate_history) "
                       "took %s ms of CPU time in the main C run." % fmt_ms(est["cpu_ms"]))
        full = [d.get(lang, n, "compact_full") for lang, _ in LANGS]
        steady = [d.get(lang, n, "compact_steady") for lang, _ in LANGS]
        if any(full):
            out.append("- A full compaction of it with a trivial summarizer, in CPU time: C %s "
                       "ms, Python %s ms, Node %s ms; with the checkpoint reused afterwards: C %s "
                       "ms, Python %s ms, Node %s ms." % tuple(
                           fmt_ms(r.get("cpu_ms") if r else None) for r in full + steady))
    corpus = next((w for w in d.workloads if w["name"] == "corpus"), None)
    if corpus:
        ours = d.get("node", "corpus", "estimate_texts")
        peers = [(t, d.get("node", "corpus", "estimate_texts", t))
                 for t in d.tools("node", "estimate_texts")]
        if ours and peers:
            out.append("- Counting the tokens of the corpus texts in Node, MB per CPU second: "
                       "ctxkeel %s; " % rate(corpus, ours) + "; ".join(
                           "%s %s (ctxkeel speed / its speed: %s)" % (
                               t, rate(corpus, r), speed_ratio(ours, r)) for t, r in peers) + ".")
    out += peer_summary(d)
    for r in d.loop:
        delays = r["max_delay_ms"]
        out.append("- The event loop during a full compaction in Node (the default file store; a "
                   "compactor that had seen the first %s messages of the 10,000-message history, "
                   "then a turn whose tool output is 30%% of the window; tier %s): max delay "
                   "median %.1f ms, worst %.1f ms over %d runs, while compact() took %.0f ms "
                   "(median); target at most 20 ms: %s." % (
                       "{:,}".format(r["messages"] - 2), r["tier"], statistics.median(delays),
                       max(delays), len(delays), statistics.median(r["ms"]),
                       "met" if max(delays) <= 20 else
                       "met by the median" if statistics.median(delays) <= 20 else "not met"))
    if d.stall:
        delays = [r["max_delay_ms"] for r in d.stall]
        r = d.stall[0]
        gcs = [x.get("gc_ms", 0.0) for x in d.stall]
        out.append("- The asyncio loop while %d Python sessions of %d messages each acompact() "
                   "at once at the %s tier (bench/stall.py; the extractive summarizer): max "
                   "delay median %.1f ms, worst %.1f ms over %d runs; the longest garbage "
                   "collection in a run took up to %.1f ms (Python's collector walking the "
                   "whole heap, mostly the harness's own histories); target at most 20 ms: %s."
                   % (r["sessions"], r["messages"], "/".join(r["tiers"]),
                      statistics.median(delays), max(delays), len(delays), max(gcs),
                      "met" if max(delays) <= 20 else
                      "met by the median" if statistics.median(delays) <= 20 else "not met"))
    mem = [m for m in d.memory if m.get("peak")]
    if mem:
        out.append("- Peak RSS during a full compaction of the %s-message history (%.0f MiB of "
                   "JSON), above the RSS before it: " % (
                       "{:,}".format(mem[0]["messages"]), mem[0]["json_bytes"] / MiB) +
                   ", ".join("%s +%.0f MiB" % (dict(LANGS)[m["lang"]],
                                                (m["peak"] - m["rss_before"]) / MiB)
                             for m in mem) + ".")
    return out


def alone_section(d):
    out = []
    for case, how in NONE_CASES:
        a = alone_figures(d, case)
        if not a:
            continue
        rows = []
        t = a["table"]
        for i in range(a["runs"]):
            c, p, n = (t[lang][i] for lang, _ in LANGS)
            rows.append([i + 1] + [fmt_ms(r["ms"]) for r in (c, p, n)] +
                        [fmt_ms(r["cpu_ms"]) for r in (c, p, n)] +
                        [fmt_x(p["cpu_ms"] / c["cpu_ms"]), fmt_x(n["cpu_ms"] / c["cpu_ms"])])
        rows.append(["**median**"] + [fmt_ms(a[lang]) for lang, _ in LANGS] +
                    [fmt_ms(a[lang + " cpu"]) for lang, _ in LANGS] +
                    [fmt_x(a["python/c"]), fmt_x(a["node/c"])])
        out += ["", "**%s**:" % (how[0].upper() + how[1:]), ""] + table(
            ["round"] + PER_LANG_HEAD[1:], ["---:"] * 9, rows)
    if out:
        out = ["", "The 1,000-message history once more, after the main runs: `bench none`, "
               "`bench.py none` and `bench.js none` run one after the other, %s, each a "
               "process of its own timing these cases alone; the ratios are taken within each "
               "round of three, then their median." % (
                   "once" if a["runs"] == 1 else "%d times" % a["runs"])] + out
    return out


def none_section(d):
    out = [PER_LANG_NOTE]
    for case, how in NONE_CASES:
        out += ["", "**%s**:" % (how[0].upper() + how[1:]), ""] + table(
            PER_LANG_HEAD, ["---"] + ["---:"] * 8, per_lang_table(d, case))
    return out + alone_section(d)


def steady_section(d):
    return [
        "The second call after a full compaction, with nothing new: the view is pinned + "
        "checkpoint + the uncovered tail, without a model. " + PER_LANG_NOTE, ""] + table(
        PER_LANG_HEAD, ["---"] + ["---:"] * 8, per_lang_table(d, "compact_steady"))


def full_section(d):
    out = [
        "A fresh compactor at 85% of its window: offload the large tool outputs outside the "
        "tail to the evidence store; when that leaves the view above the target (50%), extract "
        "identifiers, build the summary request, take the summarizer's fixed reply and build "
        "the checkpoint (on the synthetic histories the offloads alone reach the target, so no "
        "summary is made); build the view, append the audit record. "
        + PER_LANG_NOTE, ""] + table(PER_LANG_HEAD, ["---"] + ["---:"] * 8,
                                     per_lang_table(d, "compact_full"))
    rows = []
    for w in d.workloads:
        r = d.get("c", w["name"], "compact_full")
        disk = d.get("c", w["name"], "compact_full_disk")
        if r:
            rows.append([label(w), fmt_ms(r["ms"]), fmt_ms(disk["ms"]) if disk else "not run",
                         "{:,} -> {:,}".format(r["tokens"], r["tokens_after"]),
                         "{:,} -> {:,}".format(w["messages"], r["messages_after"])])
    if rows:
        out += ["", "The C job again, beside the same job with its store on the disk, where "
                "each offloaded output and each audit record is written with fsync (wall clock, "
                "ms; on disk only up to 10,000 messages, DISK_MAX_MESSAGES in bench/bench.c, to "
                "keep `make bench` short), and what the compaction did:", ""] + table(
            ["workload", "C", "C, store on disk", "tokens before -> after", "messages"],
            ["---", "---:", "---:", "---:", "---:"], rows)
    return out


def compact_rate_section(d):
    rows = []
    for w in d.workloads:
        rows.append([label(w)] + [rate(w, d.get(lang, w["name"], case))
                                  for case in ("compact_none_first", "compact_full")
                                  for lang, _ in LANGS])
    return [
        "MB of message text per second of CPU time (text bytes of the workload / process CPU "
        "time per call), for compact() with nothing to compact on a fresh compactor and for a "
        "full compaction with the trivial summarizer (the store where the Machine section "
        "says).", ""] + table(
        ["workload", "nothing to compact, C", "Python", "Node", "full, C", "Python", "Node"],
        ["---"] + ["---:"] * 6, rows)


def estimate_section(d):
    py_peers = d.tools("python", "estimate")
    node_peers = d.tools("node", "estimate_texts")
    head = ["workload", "C list", "C texts", "Python list", "Python texts", "Node list",
            "Node texts"] + ["%s (Node)" % t for t in node_peers] + \
        ["%s (Python)" % t for t in py_peers]
    rows = []
    for w in d.workloads:
        row = [label(w)]
        for lang, _ in LANGS:
            for case in ("estimate", "estimate_texts"):
                row.append(rate(w, d.get(lang, w["name"], case)))
        row += [rate(w, d.get("node", w["name"], "estimate_texts", t)) for t in node_peers]
        row += [rate(w, d.get("python", w["name"], "estimate", t)) for t in py_peers]
        rows.append(row)
    ratio_rows = []
    for w in d.workloads:
        ours = d.get("node", w["name"], "estimate_texts")
        ratio_rows.append([label(w)] + [speed_ratio(ours, d.get("node", w["name"],
                                                                 "estimate_texts", t))
                                        for t in node_peers])
    out = [
        "MB of text per second of CPU time (text bytes of the workload / process CPU time per "
        "call; CPU time because the columns come from three processes run minutes apart). "
        "\"list\": the "
        "estimate of whole message lists (estimate_tokens(messages) / ck_estimate_history), "
        "per-message overheads included. \"texts\": the job the Node peers do: every message "
        "text (content and tool-call arguments) counted on its own and summed, one call per "
        "text. tokenx is an approximation; gpt-tokenizer counts exact o200k_base tokens, with "
        "its default merge cache, which is warm after the first, untimed call (each round "
        "counts the same texts again). langchain-core's count_tokens_approximately is chars/4 "
        "plus 3 per message, on the history as LangChain message objects.", ""]
    out += table(head, ["---"] + ["---:"] * (len(head) - 1), rows)
    if node_peers:
        out += ["", "ctxkeel speed / peer speed on the same texts in the same Node process, "
                "in CPU time (above 1: ctxkeel is faster):", ""]
        out += table(["workload"] + node_peers, ["---"] + ["---:"] * len(node_peers), ratio_rows)
    return out


def trim_section(d, lang, peer, counter, start_on):
    if not d.tools(lang, "compact_none"):
        return ["%s peer not installed: no rows." % peer]
    tool = d.tools(lang, "compact_none")[0]
    out = []
    for case, title in (("compact_none", "Nothing to trim (budget 10 times the history)"),
                        ("compact_emergency", "Cut to 70% of a window that the history fills "
                         "to 97%")):
        variants = [("ctxkeel", case), ("ctxkeel, first call", case + "_first"),
                    ("ctxkeel, chars4", case + "_chars4"),
                    ("ctxkeel, first call, chars4", case + "_first_chars4")]
        variants = [v for v in variants if any(d.get(lang, w["name"], v[1])
                                               for w in d.workloads)]
        rows = []
        for w in d.workloads:
            ours = [d.get(lang, w["name"], c) for _, c in variants]
            p = d.get(lang, w["name"], case, tool)
            kept = "-"
            if ours[0] and p and p.get("messages_after") is not None:
                kept = "{:,} / {:,}".format(ours[0]["messages_after"], p["messages_after"])
            rows.append([label(w)] + [fmt_row_ms(r) for r in ours] + [fmt_row_ms(p)] +
                        [speed_ratio(r, p) for r in ours] + [kept])
        head = ["workload"] + [name for name, _ in variants] + [tool] + [
            "speed ratio" + name[len("ctxkeel"):] for name, _ in variants] + [
            "messages kept (ctxkeel / peer)"]
        out += ["**%s**, wall-clock time per call in ms:" % title, ""] + table(
            head, ["---"] + ["---:"] * (len(head) - 1), rows) + [""]
    w = next((w for w in d.workloads if w["messages"] == 1000 and w["name"] != "corpus"), None)
    ours = d.get(lang, w["name"], "compact_emergency") if w else None
    theirs = d.get(lang, w["name"], "compact_emergency", tool) if w else None
    if ours and theirs and theirs.get("messages_after") is not None:
        out += ["At 1,000 messages, ctxkeel's emergency view is %s messages (large outputs "
                "offloaded, then the newest turns that fit under the warn threshold kept and the "
                "rest folded into a checkpoint), %s tokens by its estimate, %.0f%% of the "
                "window, while %s keeps the "
                "newest %s messages that fit its budget of %.0f%% of the window. The two jobs "
                "do not produce the same view." % (
                    "{:,}".format(ours["messages_after"]), "{:,}".format(ours["tokens_after"]),
                    100 * ours["tokens_after"] * 0.97 / ours["tokens"], tool,
                    "{:,}".format(theirs["messages_after"]), 70), ""]
    out.append(
        "Speed ratio: ctxkeel speed / %s speed in CPU time, from the same process, the rounds "
        "of the two alternated (above 1: ctxkeel is faster). What differs: %s keeps the newest messages that fit and drops the "
        "rest (they are gone from what the model sees; %s makes the kept part start at a "
        "user message so that no tool result loses its call). It counts with %s. "
        "ctxkeel at the emergency tier does more: it offloads large tool outputs to the evidence "
        "store, folds the dropped span into a checkpoint (user messages, identifiers, files, "
        "offloaded references) with the extractive summarizer, keeps the system prompt and the "
        "task, keeps each tool result with its call, and appends an audit record. ctxkeel counts with its "
        "calibrated estimator, or with chars/4 (\"chars4\", closest to the peer's counting); "
        "each tool's budget is the same fraction of the history as it counts it. With nothing "
        "to trim, \"ctxkeel\" is a compactor kept across calls, as an agent keeps it, so it has "
        "the token counts of the messages it saw before, while %s keeps no state and counts "
        "every message on every call; \"first call\" is a fresh compactor per call, made "
        "within the call. At the emergency tier every call is on a fresh compactor." % (
            tool, tool, start_on, counter, tool))
    return out


def memory_section(d):
    if not d.memory:
        return ["Not measured in this run."]
    rows = []
    for m in d.memory:
        rows.append((dict(LANGS)[m["lang"]], "{:,}".format(m["messages"]),
                     "%.1f" % (m["json_bytes"] / MiB), "%.1f" % (m["rss_before"] / MiB),
                     "%.1f" % (m["peak"] / MiB),
                     "%.1f" % ((m["peak"] - m["rss_before"]) / MiB),
                     "%.2f" % ((m["peak"] - m["rss_before"]) / m["json_bytes"]),
                     "%.2f" % (m["peak"] / m["json_bytes"]), fmt_ms(m["ms"])))
    reset = all(m.get("peak_reset") for m in d.memory)
    return [
        "One full compaction (trivial summarizer, store on tmpfs where there is one) of the "
        "largest synthetic history, each language in a process of its own: the history is read "
        "from its JSON file (C: ck_json_read; Python: json.load; Node: JSON.parse), then %s" % (
            "the peak RSS is reset (/proc/self/clear_refs) and read again (VmHWM) after "
            "compact(), so \"peak\" is the highest RSS during the compaction itself."
            if reset else "VmHWM is read after compact(); it could not be reset before it, so "
            "\"peak\" may be the peak of reading the history."), ""] + table(
        ["language", "messages", "input JSON MiB", "RSS before MiB", "peak MiB",
         "peak - before MiB", "(peak - before) / JSON", "peak / JSON", "compact() ms"],
        ["---"] + ["---:"] * 8, rows)


def token_speed_section(d):
    """The table of bench/tokens.js: exact counting beside the exact peers, the default beside
    tokenx, all in one Node process."""
    path = os.path.join(d.dir, "tokens_speed.json")
    if not os.path.exists(path):
        return ["bench/tokens.js did not run: no figures in this report."]
    with open(path) as f:
        r = json.load(f)
    base = {k: next((x for x in r["results"] if x["tool"] == name), None)
            for k, name in (("exact", "ctxkeel o200k"), ("estimate", "ctxkeel default"))}
    rows = []
    for x in r["results"]:
        ours = base.get(x["kind"])
        rows.append([x["tool"], x["kind"], "{:,}".format(x["tokens"]), "%.1f" % x["first"],
                     "%.1f" % x["best"],
                     "%.1fx" % (ours["best"] / x["best"]) if ours and x["best"] else "-"])
    versions = ", ".join("%s %s" % kv for kv in sorted(r.get("versions", {}).items()))
    out = [
        "Written by `node bench/tokens.js` (Node %s, one process, one thread): %d texts, %.2f MB "
        "(the TEST half and the generated kinds of tests/data/tokens, and every string of every "
        "message of the transcripts), each counted on its own. MB of UTF-8 per CPU second: the "
        "first round (every cache empty, ctxkeel's rank table indexed in it; ctxkeel default "
        "runs after ctxkeel o200k and shares its cache, so its first round is warm) and the "
        "best of %d more. ctxkeel's exact o200k counts differ from js-tiktoken's on %s of the texts. "
        "Peers: %s; load average %.1f." % (
            r["node"], r["texts"], r["bytes"] / 1e6, r["rounds"],
            "none" if r.get("mismatches") == 0 else r.get("mismatches"), versions or "none",
            r.get("loadavg", 0)), ""]
    out += table(["tool", "kind", "tokens", "MB/s, first round", "MB/s, best round",
                  "ctxkeel / it (best)"], ["---", "---", "---:", "---:", "---:", "---:"], rows)
    return out


def tokens_section(d):
    path = os.path.join(d.dir, "tokens.md")
    if not os.path.exists(path):
        return ["tools/tokens_measure.js did not run: no figures in this report "
                "(tools/tokens_report.md has the last ones written)."]
    body = [l.rstrip("\n") for l in open(path)]
    body = [l for l in body if not l.startswith("pre-tokenizer check on ")]
    nd = d.meta.get("node", {})
    return [
        "Regenerated in this run by `node tools/tokens_measure.js` (without --write, so "
        "tools/tokens_report.md is left alone), against exact counts from js-tiktoken "
        "(o200k_base, cl100k_base), beside chars/4 and tokenx %s. "
        "\"abs\" is the weighted absolute error, sum |estimate - exact| / sum exact, per "
        "document (per message for the transcripts); \"signed\" is sum (estimate - exact) / "
        "sum exact. Its throughput table is the C counter alone (tools/tokens_bench.c, "
        "`cc -O2`), in thread CPU time, which is that tool's own method." % (
            nd.get("tokenx", "?"),),
        ""] + [("#" + l if l.startswith("### ") else l) for l in body]


def read_tsv(path):
    """Rows of a tab-separated file with a header line (lines starting with # skipped)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
    head = lines[0].split("\t")
    return [dict(zip(head, l.split("\t"))) for l in lines[1:]]


def rhythm_section(d):
    """bench/rhythm.c over the corpus now, beside bench/rhythm_before.tsv (the same program
    built against the policy before issue 12)."""
    after = read_tsv(os.path.join(d.dir, "rhythm.tsv"))
    before = {(r["name"], r["fraction"]): r
              for r in read_tsv(os.path.join(os.path.dirname(__file__), "rhythm_before.tsv"))}
    if not after:
        return ["(not measured in this run)"]
    out = [
        "Each transcript replayed as an agent loop by `bench/rhythm.c` (compact() before every "
        "assistant message, a summarizer that answers at once) at windows of 20%, 35% and 50% "
        "of its tokens. Per 100 model calls: compactions (calls at soft or above that made the "
        "view smaller) and summary calls; the peak view as a fraction of the window; *quick*: "
        "compactions that came before the history grew by (soft - target) / 2 x window since "
        "the previous one, of them *forced*: those whose previous compaction could not reach "
        "the target because the pinned messages alone exceed it. Before: the same program "
        "built against commit 8e7d69f (bench/rhythm_before.tsv).", ""]
    rows = []
    for r in after:
        b = before.get((r["name"], r["fraction"]))
        calls = int(r["calls"]) or 1

        def per100(row, key, n):
            return "%.0f" % (100.0 * int(row[key]) / n) if row else "-"
        rows.append([
            r["name"].replace(".json", ""), "%d%%" % round(100 * float(r["fraction"])),
            "%s / %s" % (per100(b, "compactions", int(b["calls"]) if b else 1),
                         per100(r, "compactions", calls)),
            "%s / %s" % (per100(b, "summary_calls", int(b["calls"]) if b else 1),
                         per100(r, "summary_calls", calls)),
            "%s / %s" % (b["peak_ratio"] if b else "-", r["peak_ratio"]),
            "%s / %s" % ("%s (%s)" % (b["quick"], b["forced"]) if b else "-",
                         "%s (%s)" % (r["quick"], r["forced"])),
            "%.0f%%" % (100.0 * int(r["prefix_kept"]) / max(1, int(r["sent"])))
            if "sent" in r else "-",
            per100(r, "prefix_breaks", calls) if "prefix_breaks" in r else "-"])
    out += table(["transcript", "window", "compactions /100 calls", "summary calls /100 calls",
                  "peak view / window", "quick (forced)", "prefix kept",
                  "prefix breaks /100 calls"],
                 ["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:"],
                 [[c if i < 2 else c.replace(" / ", " → ") for i, c in enumerate(row)]
                  for row in rows])
    out += ["", "Each cell: before → after (the last two columns: after only). *Prefix kept*: of "
            "the tokens sent over the replay, the share that was a prefix of the view the call "
            "before sent (ck_compaction_cache(): what a provider's prompt cache can hold); "
            "*prefix breaks*: calls whose view changed a message of the one before. "
            "A peak above 1.0 was a view the provider refuses. "
            "Where quick compactions remain, all of them are forced: the pinned messages and "
            "the newest turn alone are above the target, and the view is kept under the "
            "window rather than the target."]
    return out


def prompt_cache_section(d):
    """bench/rhythm.c twice over the corpus: the plain policy and prompt_cache="anthropic",
    each view's input billed at Anthropic's prices."""
    plain = read_tsv(os.path.join(d.dir, "rhythm.tsv"))
    priced = {(r["name"], r["fraction"]): r
              for r in read_tsv(os.path.join(d.dir, "rhythm_cached.tsv"))}
    if not plain or not priced:
        return ["(not measured in this run)"]

    def billed(r):
        kept, sent = int(r["prefix_kept"]), int(r["sent"])
        return 0.1 * kept + 1.25 * (sent - kept)
    rows = []
    for fraction in sorted({r["fraction"] for r in plain}) + [None]:
        a = [r for r in plain if fraction is None or r["fraction"] == fraction]
        b = [priced[(r["name"], r["fraction"])] for r in a if (r["name"], r["fraction"]) in priced]
        if len(b) != len(a):
            continue

        def total(rs, key):
            return sum(int(r[key]) for r in rs)
        calls = total(a, "calls") or 1
        ba, bb = sum(map(billed, a)), sum(map(billed, b))
        rows.append([
            "all" if fraction is None else "%d%%" % round(100 * float(fraction)), str(calls),
            "%.1f → %.1f" % (100.0 * total(a, "compactions") / calls,
                             100.0 * total(b, "compactions") / calls),
            "%.1f → %.1f" % (100.0 * total(a, "prefix_breaks") / calls,
                             100.0 * total(b, "prefix_breaks") / calls),
            "%.1f%% → %.1f%%" % (100.0 * total(a, "prefix_kept") / max(1, total(a, "sent")),
                                 100.0 * total(b, "prefix_kept") / max(1, total(b, "sent"))),
            "%.0f → %.0f (%+.1f%%)" % (ba, bb, 100.0 * (bb - ba) / max(1.0, ba))])
    out = ["The replays of the compaction rhythm (a summarizer that answers at once), once with "
           "the default policy and once with `prompt_cache=\"anthropic\"`, summed per window "
           "over the transcripts. Each cell: default → priced. *Billed input*: every view's "
           "tokens as Anthropic bills them, the prefix kept from the call before at 0.1x (a "
           "cache read), the rest at 1.25x (a cache write).", ""]
    out += table(["window", "model calls", "compactions /100 calls", "prefix breaks /100 calls",
                  "prefix kept", "billed input (tokens)"],
                 ["---:", "---:", "---:", "---:", "---:", "---:"], rows)
    fresh = [100.0 * 1.25 * (int(r["sent"]) - int(r["prefix_kept"])) / max(1.0, billed(r))
             for r in plain]
    out += ["", "What is not a prefix of the call before (above all the new turn of every call) "
            "is billed as a cache write whatever the policy: %.0f-%.0f%% of each replay's bill "
            "under the default policy here, which bounds what a fold policy can save."
            % (min(fresh), max(fresh))]
    return out


def included(d, name):
    """The lines of a table a bench step wrote into the bench folder as `name`."""
    path = os.path.join(d.dir, name)
    if not os.path.exists(path):
        return ["(not measured in this run)"]
    with open(path, encoding="utf-8") as f:
        return f.read().rstrip("\n").split("\n")


def fidelity_section(d):
    return included(d, "fidelity.md")


def fleet_section(d):
    return ["Written by bench/fleet.c (`make bench-fleet`): worker processes that share "
            "sessions, each turn of a session on another worker, through the built-in S3 "
            "backend on a SeaweedFS server on loopback, and through one local store folder. "
            "\"resume\" is ck_compactor_new() for the session (listing and reading its "
            "newest records), compact() the compaction with its offloads and its record. With "
            "128 calls per row, p99 is about the second slowest call.", ""] + included(
                d, "fleet.md")


def session_section(d):
    """bench/session.mjs and bench/session.py: a decision before every model call."""
    node = read_jsonl(os.path.join(d.dir, "session_node.jsonl"))
    py = {r["workload"]: r for r in read_jsonl(os.path.join(d.dir, "session_python.jsonl"))}
    if not node and not py:
        return ["(not measured in this run)"]
    versions = (node or list(py.values()))[0].get("versions", {})
    peers = ", ".join("%s %s" % (k, v) for k, v in sorted(versions.items()) if v)
    if py:
        pv = list(py.values())[0].get("versions", {})
        peers += ", " + ", ".join("%s %s" % (k, v) for k, v in sorted(pv.items()) if v)
    out = ["Written by bench/session.mjs (Node) and bench/session.py (Python): each session "
           "replayed as an agent loop, a decision before every model call (the history up to "
           "each assistant message) at a window of ten times the session, so nothing is "
           "compacted and only the decision costs. ctxkeel is one Compactor kept for the "
           "session and runs every call; the peers keep nothing between calls and run 200 "
           "calls spread over the session; every figure is CPU ms per call over those same "
           "calls, and each ratio is the peer's time / ctxkeel's (above 1: ctxkeel is faster). "
           "pi: @mariozechner/pi-coding-agent's estimateContextTokens() + shouldCompact() on "
           "the history in pi's message form, without provider usage on its assistant "
           "messages (with usage it counts only the messages after the last one). "
           "trimMessages / trim_messages: strategy \"last\" with a chars/4 + 3 per message "
           "counter. *At 1k* / *at end*: ctxkeel's mean call with 900-1,100 messages of "
           "history / in the last 400 messages of the session. *Session*: the same loop as "
           "an append-only session (a second Compactor, append() of each message once, view() "
           "at every call): its ms per call, compact()'s time over it, and its at 1k / at "
           "end. Sessions: the corpus "
           "transcripts, and the first 5,000 and 20,000 messages of synthetic-100000. "
           "Versions: %s." % peers, ""]
    def session(r, mine):
        """The append-only session's ms per call, compact()'s over it, and at 1k / at end."""
        if r.get("session_sampled_ms") is None:
            return "-"
        ms = r["session_sampled_ms"] / r["sampled"]
        edges = ("; %.3f / %.3f" % (r["session_at_1k_ms"], r["session_at_end_ms"])
                 if r.get("session_at_1k_ms") else "")
        return "%.3f (%.2fx%s)" % (ms, mine / ms if ms else float("inf"), edges)

    rows = []
    for r in node:
        s = r["sampled"]
        ours = r["ctxkeel_sampled_ms"] / s
        p = py.get(r["workload"])
        pours = p["ctxkeel_sampled_ms"] / p["sampled"] if p else None
        ratio = lambda peer, mine: ("%.3f (%.2fx)" % (peer, peer / mine)) if peer is not None else "-"
        rows.append([r["workload"], "{:,}".format(r["messages"]), "{:,}".format(r["calls"]),
                     "%.3f" % ours,
                     ratio(r["pi_ms"] / s if r.get("pi_ms") is not None else None, ours),
                     ratio(r["trim_ms"] / s if r.get("trim_ms") is not None else None, ours),
                     "%.3f" % pours if pours is not None else "-",
                     ratio(p["trim_ms"] / p["sampled"] if p and p.get("trim_ms") is not None
                           else None, pours) if p else "-",
                     "%.3f / %.3f" % (r["ctxkeel_at_1k_ms"], r["ctxkeel_at_end_ms"])
                     if r.get("ctxkeel_at_1k_ms") else "-",
                     session(r, ours), session(p, pours) if p else "-"])
    out += table(["session", "messages", "calls", "ctxkeel (Node)", "pi (Node)",
                  "trimMessages (Node)", "ctxkeel (Python)", "trim_messages (Python)",
                  "ctxkeel Node at 1k / at end", "session (Node)", "session (Python)"],
                 ["---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:",
                  "---:"], rows)
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out_path, bench_dir = sys.argv[1], sys.argv[2]
    args, rest = {}, sys.argv[3:]
    while rest:
        key, value, rest = rest[0], rest[1], rest[2:]
        args[key.lstrip("-").replace("-", "_")] = value
    d = Data(bench_dir)
    lines = [
        "# Benchmarks", "",
        "Written by `make bench` (bench/histories.py, bench/bench.c, bench/bench.py, "
        "bench/bench.js, bench/session.mjs, bench/session.py, bench/fleet.c, bench/report.py, "
        "tools/tokens_measure.js); regenerate it with `make "
        "bench` rather than editing it. All figures come from one run on the machine below.",
        "", "## Summary", ""] + summary(d) + [
        "", "## Machine", ""] + machine(d, args) + [
        "", "## Method", ""] + method(d) + [
        "", "## Workloads", ""] + workloads_section(d) + [
        "", "## compact() when nothing needs compacting", ""] + none_section(d) + [
        "", "## compact() with the checkpoint reused", ""] + steady_section(d) + [
        "", "## A decision before every model call (session replay)", ""] + session_section(d) + [
        "", "## A full compaction with a trivial summarizer", ""] + full_section(d) + [
        "", "## Compaction throughput", ""] + compact_rate_section(d) + [
        "", "## Token estimation throughput", ""] + estimate_section(d) + [
        "", "## Bounding a history to a budget, beside LangChain (Python)", ""] + trim_section(
            d, "python", "langchain-core", "its own count_tokens_approximately (chars/4 + 3 "
            "per message)", 'start_on="human"') + [
        "", "## Bounding a history to a budget, beside LangChain (Node)", ""] + trim_section(
            d, "node", "@langchain/core", "a chars/4 + 3 per message counter shaped like the "
            "Python one (@langchain/core has no built-in counter); as read in the source of "
            "@langchain/core 1.4.0, trimMessages drops one message at a time and counts the "
            "whole remaining list again after each, so its time grows with the square of the "
            "messages dropped", "startOn: 'human'") + [
        "", "## Compaction rhythm", ""] + rhythm_section(d) + [
        "", "## The provider's prompt cache", ""] + prompt_cache_section(d) + [
        "", "## What survives compaction", ""] + fidelity_section(d) + [
        "", "## A fleet of workers sharing sessions", ""] + fleet_section(d) + [
        "", "## Memory", ""] + memory_section(d) + [
        "", "## Token counting speed beside the tokenizers (Node)", ""] + token_speed_section(d) + [
        "", "## Token estimation accuracy", ""] + tokens_section(d)
    with open(out_path, "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
