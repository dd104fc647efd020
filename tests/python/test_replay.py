"""ctxkeel.replay(): the core's agent-loop replay as a library call, its chart, and how a
notebook shows a Replay and a CompactionResult."""

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

import ctxkeel
from ctxkeel import _ext

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "corpus")
DEMO = os.path.join(CORPUS, "openhands-ponyc-4588.json")


def session(turns=30):
    """An agent session: a task, then turns of a bash call and its output (every third
    output large), in OpenAI shape."""
    messages = [{"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "Fix the failing test in src/parser.c."}]
    for t in range(turns):
        messages.append({"role": "assistant", "content": "Step %d: run the tests." % t,
                         "tool_calls": [{"id": "call_%d" % t, "type": "function",
                                         "function": {"name": "bash", "arguments": "{}"}}]})
        size = 6000 if t % 3 == 0 else 400
        text = "".join("\n" if i % 50 == 49 else chr(97 + (i + t) % 26) for i in range(size))
        messages.append({"role": "tool", "tool_call_id": "call_%d" % t, "content": text})
    return messages


def test_one_row_per_model_call(tmp_path):
    messages = session()
    before = json.dumps(messages)
    r = ctxkeel.replay(messages, 6000, store_dir=str(tmp_path), keep_tail=4)
    assert json.dumps(messages) == before  # the caller's list is not touched
    calls = sum(m["role"] == "assistant" for m in messages) + 1
    assert len(r) == len(r.rows) == calls == r.totals["calls"]
    assert [row["call"] for row in r.rows] == list(range(1, calls + 1))
    assert r.rows[-1]["messages"] == len(messages)
    numbers = [row["compaction"] for row in r.rows if row["compaction"]]
    assert numbers == list(range(1, len(numbers) + 1)) and numbers
    for row in r.rows:
        assert row["tokens_after"] <= row["tokens_before"]
        assert row["ratio_after"] == row["tokens_after"] / 6000
        assert row["tier"] in ("none", "warn", "soft", "full", "emergency")
        # The prompt cache: the view's prefix changes only where a compaction is recorded.
        assert row["prefix_kept"] <= row["tokens_after"]
        if row["compaction"]:
            assert row["record"]["cache"] == {"prefix_kept": row["prefix_kept"],
                                              "prefix_broken": row["prefix_broken"]}
        else:
            assert row["prefix_broken"] == 0
        if row["compaction"]:
            assert row["record"]["tier"] == row["tier"]
            assert row["record"]["tokens_after"] == row["tokens_after"]
            assert row["action"].startswith(">> compaction %d:" % row["compaction"])
        else:
            assert row["record"] is None and row["action"] == "-"
    # The history alone: what would be sent without ctxkeel.
    first = r.rows[0]
    assert first["history_tokens"] == ctxkeel.estimate_tokens(messages[:first["messages"]])
    totals = r.totals
    assert totals["tokens_sent"] == sum(row["tokens_after"] for row in r.rows)
    assert totals["tokens_without"] == sum(row["history_tokens"] for row in r.rows)
    assert totals["tokens_sent"] < totals["tokens_without"]
    assert r.rows[0]["prefix_kept"] == r.rows[0]["prefix_broken"] == 0  # nothing sent before
    assert 0 < totals["prefix_kept"] == sum(row["prefix_kept"] for row in r.rows)
    assert totals["prefix_breaks"] == sum(row["prefix_broken"] > 0 for row in r.rows) > 0
    assert sum(totals["per_tier"].values()) == calls
    assert "compactions=%d" % len(numbers) in repr(r)


def test_rows_are_what_the_command_prints(tmp_path):
    """The console script and ctxkeel.replay run the same C loop: same rows, same totals."""
    if not os.path.isfile(DEMO):
        pytest.skip("no corpus at ../shared/corpus")
    cli_store, lib_store = tmp_path / "a", tmp_path / "b"  # same length: same placeholders
    out = subprocess.run(
        [sys.executable, "-m", "ctxkeel", "replay", DEMO, "--window", "10000", "--store",
         str(cli_store), "--session", "same"],
        capture_output=True, text=True, check=True).stdout
    printed = [tuple(int(x) for x in m.groups()) for m in
               re.finditer(r"^ *(\d+) +(\d+) +(\d+) +(\d+) +(\d+) ", out, re.M)]
    with open(DEMO, encoding="utf-8") as f:
        transcript = json.load(f)
    r = ctxkeel.replay(transcript, 10000, store_dir=str(lib_store), session_id="same")
    rows = [(row["call"], row["messages"], row["history_tokens"], row["tokens_before"],
             row["tokens_after"]) for row in r.rows]
    assert printed == rows
    assert ("with ctxkeel:    %d tokens sent" % r.totals["tokens_sent"]) in out
    assert ("prompt cache:    %d of those tokens" % r.totals["prefix_kept"]) in out
    assert [row["tier"] for row in r.rows] == re.findall(
        r"^ *\d+ +\d+ +\d+ +\d+ +\d+ +[\d.]+ +[\d.]+  (\w+)", out, re.M)


def test_chart_and_notebook_view(tmp_path):
    r = ctxkeel.replay(session(), 6000, store_dir=str(tmp_path), title="parser <fix>")
    svg = r.to_svg()
    assert svg.startswith("<svg xmlns=") and svg.endswith("</svg>\n")
    assert "parser &lt;fix&gt;" in svg
    assert svg.count("<circle") == r.totals["compactions"]
    html = r._repr_html_()
    assert html.startswith(svg)
    assert "<details>" in html and "the first checkpoint" in html
    assert "Without ctxkeel: %d tokens sent" % r.totals["tokens_without"] in html


def test_options_go_to_the_compactor(tmp_path):
    counted = []

    def count(text):
        counted.append(len(text))
        return len(text) // 3

    r = ctxkeel.replay(session(10), 4000, store_dir=str(tmp_path), estimator=count)
    assert counted and r.rows[0]["history_tokens"] > 0
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.replay(session(3), 4000, store_dir=str(tmp_path), warn=0.9, soft=0.5)
    assert info.value.code == "CK_EINVAL"
    with pytest.raises(TypeError):
        ctxkeel.replay(session(3), 4000, store_dir=str(tmp_path), frobnicate=1)
    with pytest.raises(TypeError, match="on_compaction"):
        ctxkeel.replay(session(3), 4000, on_compaction=print)
    with pytest.raises(TypeError, match="HttpSummarizer"):
        ctxkeel.replay(session(3), 4000, store_dir=str(tmp_path), summarize=lambda req: "x")
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.replay([{"role": "user", "content": 7}], 4000, store_dir=str(tmp_path))
    assert "messages[0].content" in str(info.value)


REPLY = ("## User Intent\nFix src/parser.c (marker OKAPI-7)\n## Execution Progress\nran tests\n"
         "## Key Decisions\nN/A\n## Tried Solutions\nN/A\n## Next Steps\nrun again\n")


class _Provider(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen += 1
        body = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": REPLY}}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 5}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_http_summarizer_writes_the_checkpoints(tmp_path):
    server = HTTPServer(("127.0.0.1", 0), _Provider)
    server.seen = 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        llm = ctxkeel.HttpSummarizer("http://127.0.0.1:%d/v1" % server.server_address[1],
                                     "test-model", api_key_env="")
        r = ctxkeel.replay(session(), 6000, store_dir=str(tmp_path), summarize=llm)
    finally:
        server.shutdown()
        server.server_close()
    asked = sum(row["summary_calls"] for row in r.rows)
    assert asked > 0 and server.seen == asked == r.totals["summary_calls"]
    assert not any(row["fallback"] for row in r.rows)
    assert any("OKAPI-7" in (row["checkpoint"] or "") for row in r.rows)


def test_compaction_result_in_a_notebook(tmp_path):
    compactor = ctxkeel.Compactor(6000, store_dir=str(tmp_path), keep_tail=4)
    result = compactor.compact(session(20))
    assert result.record is not None and "state" in result.record  # the full dict stays
    html = result._repr_html_()
    assert "tier <b>%s</b>" % result.tier in html
    assert "%d &rarr; %d tokens" % (result.tokens_before, result.tokens_after) in html
    assert "<summary>checkpoint" in html and _ext.CHECKPOINT_MARKER.split("]")[0] in html
    assert "<summary>record</summary>" in html
    assert "&quot;state&quot;" not in html and "&quot;tier&quot;" in html
    quiet = ctxkeel.Compactor(10 ** 6, store_dir=str(tmp_path)).compact(session(2))
    assert quiet.record is None
    assert "tier <b>none</b>" in quiet._repr_html_() and "<details>" not in quiet._repr_html_()
