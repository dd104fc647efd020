"""The evidence store through the Compactor: offload(), read_evidence(), search_evidence(),
the read_evidence tool and handle_read_evidence(), with hostile tool-call ids and every tool
output of the real transcripts."""

import asyncio
import copy
import json
import os
import pathlib
import random
import re
import stat
import threading
import time

import pytest

import ctxkeel
from compaction_support import (
    fresh_dir,
    load_corpus,
    read_all,
    synthetic_history,
    window_for,
)

MARK = "[ctxkeel: tool output offloaded]"


def tool_message(call_id, text, **extra):
    message = {"role": "tool", "tool_call_id": call_id, "content": text}
    message.update(extra)
    return message


def numbered(lines, width=60, prefix="line"):
    return "".join("%s %05d %s\n" % (prefix, k, "x" * width) for k in range(lines))


def placeholder_path(text):
    match = re.search(r"^full text: (.*)$", text, re.M)
    assert match, text
    return match.group(1)


def store_files(store):
    out = []
    for root, _, files in os.walk(store):
        out += [os.path.join(root, f) for f in files]
    return out


# ---- the tool-time gate ------------------------------------------------------------------


def test_offload_replaces_a_large_output_with_a_placeholder(tmp_path):
    store = fresh_dir(tmp_path)
    c = ctxkeel.Compactor(100000, store_dir=store, session_id="gate")
    text = numbered(400)
    message = tool_message("call_big", text, name="grep", x_meta={"keep": True})
    before = copy.deepcopy(message)
    out = c.offload(message)
    assert message == before
    assert out is not message
    assert out["role"] == "tool" and out["tool_call_id"] == "call_big"
    assert out["name"] == "grep" and out["x_meta"] is message["x_meta"]  # other keys kept
    assert out["content"].startswith(MARK)
    assert len(out["content"]) < 4000 and "400 lines" in out["content"]
    assert "%d bytes" % len(text.encode()) in out["content"]
    assert 'read_evidence(ref="call_big"' in out["content"]
    # A 20-line preview of the head.
    assert "line 00019" in out["content"] and "line 00020" not in out["content"]
    path = placeholder_path(out["content"])
    assert path == os.path.join(store, "tool_results", "gate", "call_big.txt")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    assert c.read_evidence("call_big", limit=10 ** 6) == text


def test_offload_gate_threshold(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=1000)
    at = tool_message("at", "a" * 1000)
    above = tool_message("above", "a" * 1001)
    assert c.offload(at) is at
    assert c.offload(above) is not above
    assert c.offload(tool_message("small", "ok")) is not None
    small = tool_message("small", "ok")
    assert c.offload(small) is small
    for message in ({"role": "user", "content": "x" * 5000},
                    {"role": "assistant", "content": "y" * 5000},
                    {"role": "tool", "tool_call_id": "", "content": "z" * 5000}):
        assert c.offload(message) is message  # only tool results with an id are offloaded


def test_the_preview_is_capped_in_bytes(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path))
    line = "".join(chr(ord("a") + k % 26) for k in range(50 * 1024))  # one 50 KB line
    out = c.offload(tool_message("one_line", line))
    assert line not in out["content"] and len(out["content"].encode()) < 4096
    assert "more bytes on this line" in out["content"]
    multibyte = "\u00e9\u4e2d" * 20000  # a cut must not split a character
    out = c.offload(tool_message("utf8", multibyte))
    assert len(out["content"].encode()) < 4096
    assert c.read_evidence("utf8") == multibyte


def test_an_anthropic_result_block_is_offloaded_alone(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path))
    big = {"type": "tool_result", "tool_use_id": "toolu_1", "content": numbered(300),
           "cache_control": {"type": "ephemeral"}}
    small = {"type": "tool_result", "tool_use_id": "toolu_2", "content": "fine"}
    message = {"role": "user", "content": [big, small]}
    before = copy.deepcopy(message)
    out = c.offload(message)
    assert message == before and out is not message
    new_big, same_small = out["content"]
    assert same_small is small
    assert new_big is not big and new_big["tool_use_id"] == "toolu_1"
    assert new_big["cache_control"] is big["cache_control"]
    assert new_big["content"].startswith(MARK)
    assert c.read_evidence("toolu_1", limit=1000) == big["content"]


def test_a_placeholder_is_never_offloaded_again(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=50)
    once = c.offload(tool_message("again", numbered(100)))
    assert len(once["content"]) > 50
    assert c.offload(once) is once
    assert c.read_evidence("again", limit=1000) == numbered(100)


def test_a_store_that_cannot_be_written_leaves_the_message(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store should be")
    c = ctxkeel.Compactor(100000, store_dir=str(blocker))
    message = tool_message("blocked", numbered(300))
    with pytest.warns(RuntimeWarning, match="offload failed"):
        out = c.offload(message)
    assert out is message


def test_offload_rejects_what_is_not_a_message(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path))
    with pytest.raises(TypeError):
        c.offload([tool_message("a", "b")])
    with pytest.raises(ctxkeel.InputError) as info:
        c.offload({"role": "tool", "content": "no id"})
    assert info.value.where == "message.tool_call_id"
    anthropic_only = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path),
                                       format="anthropic")
    with pytest.raises(ctxkeel.InputError):
        anthropic_only.offload(tool_message("a", "x" * 20000))


# ---- reading and searching ---------------------------------------------------------------


@pytest.mark.parametrize("text", [
    numbered(1000),
    numbered(999) + "last line without a newline",
    "\n\n\nblank lines first\n\n" * 40,
    "\r\n".join("crlf %d" % k for k in range(300)) + "\r\n",
    "\u4e2d\u6587 " * 5000,
])
def test_read_evidence_pages_exactly(text, tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=100)
    c.offload(tool_message("paged", text))
    for page in (1, 7, 200, 10 ** 6):
        assert read_all(c, "paged", page) == text
    lines = text.splitlines(keepends=True)
    assert c.read_evidence("paged", offset=2, limit=3) == "".join(lines[2:5])
    assert c.read_evidence("paged") == "".join(lines[:200])
    assert c.read_evidence("paged", offset=len(lines)) == ""
    assert c.read_evidence("paged", offset=10 ** 12) == ""
    assert c.read_evidence("paged", limit=0) == ""


def test_every_corpus_output_reads_back_exactly(corpus_name, tmp_path):
    if corpus_name == "<absent>":
        pytest.skip("corpus not found")
    messages = load_corpus(corpus_name)
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=1)
    outputs = {}
    for m in messages:
        if m["role"] != "tool":
            continue
        text = m["content"] if isinstance(m["content"], str) else ""
        out = c.offload(m)
        if len(text.encode()) <= 1:
            assert out is m
            continue
        assert out is not m and out["content"].startswith(MARK)
        outputs[m["tool_call_id"]] = (text, placeholder_path(out["content"]))
    assert outputs
    for call_id, (text, path) in outputs.items():
        assert read_all(c, call_id, 50) == text
        assert read_all(c, path, 1000) == text  # the path the placeholder states works too


def test_read_evidence_by_path(tmp_path):
    store = fresh_dir(tmp_path)
    c = ctxkeel.Compactor(100000, store_dir=store, session_id="paths")
    out = c.offload(tool_message("by_path", numbered(300)))
    path = placeholder_path(out["content"])
    assert c.read_evidence(path, limit=1000) == numbered(300)
    assert c.read_evidence(pathlib.Path(path), limit=1000) == numbered(300)
    # Paths that leave this session's folder are refused, even to files that exist.
    other = ctxkeel.Compactor(100000, store_dir=store, session_id="other")
    other.offload(tool_message("theirs", numbered(300)))
    for ref in ("/etc/passwd", os.path.join(store, "tool_results", "other", "theirs.txt"),
                os.path.join(os.path.dirname(path), "..", "other", "theirs.txt"),
                os.path.join(store, "compactions", "paths.jsonl"), "../../../etc/passwd"):
        with pytest.raises(ctxkeel.InputError):
            c.read_evidence(ref)


def test_read_evidence_of_an_unknown_ref(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path))
    with pytest.raises(ctxkeel.InputError) as info:
        c.read_evidence("call_never_made")
    assert info.value.code == "CK_EINVAL" and info.value.where == "call_never_made"
    with pytest.raises(TypeError):
        c.read_evidence(42)
    with pytest.raises(ValueError):
        c.read_evidence("x", offset=-1)
    with pytest.raises(TypeError):
        c.read_evidence("x", limit="10")
    with pytest.raises(TypeError):
        c.read_evidence("x", 0)  # offset and limit are keyword-only


def test_search_evidence(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=10)
    c.offload(tool_message("build", "compiling\nerror: E0425 unresolved name\nok\n"
                                    "error: E0308 mismatched types\n"))
    c.offload(tool_message("tests", "test a ... ok\ntest b ... FAILED\nsee error: E0308 above"))
    hits = c.search_evidence("build", r"E0[0-9]+")
    # Lines count from 0, as read_evidence offsets do (POLICY-CHANGES 9).
    assert hits == [
        {"ref": "build", "line": 1, "text": "error: E0425 unresolved name"},
        {"ref": "build", "line": 3, "text": "error: E0308 mismatched types"},
    ]
    everywhere = c.search_evidence(None, "E0308")
    assert sorted((h["ref"], h["line"]) for h in everywhere) == [("build", 3), ("tests", 2)]
    for hit in everywhere:  # each ref reads back its line at the offset found
        assert c.read_evidence(hit["ref"], offset=hit["line"], limit=1).rstrip("\n") == (
            hit["text"])
    assert c.search_evidence("tests", "^nothing$") == []
    with pytest.raises(ctxkeel.InputError) as info:
        c.search_evidence("build", "(unclosed")
    assert info.value.where == "pattern"
    with pytest.raises(ctxkeel.InputError):
        c.search_evidence("no-such-ref", "x")
    with pytest.raises(ValueError):
        c.search_evidence(None, "a\x00b")
    with pytest.raises(TypeError):
        c.search_evidence(None, b"x")
    empty = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path))
    assert empty.search_evidence(None, "x") == []


def test_search_is_linear_and_refuses_backreferences(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=10)
    c.offload(tool_message("line", "a" * 4000 + "\n" + "x" * 4000 + "\n"))
    # glibc's regexec ran 289 s over this on one 4,000-byte line, holding the GIL.
    with pytest.raises(ctxkeel.InputError) as info:
        c.search_evidence("line", r"(.*)\1\1x")
    err = info.value
    assert err.code == "CK_EINVAL" and err.where == "pattern"
    assert "backreferences" in str(err) and "not supported" in str(err)
    # The patterns that make backtracking engines explode are one pass here.
    for pattern in ("(a|aa)*c", "(a+a+)+b", "(.*a){12}b", "((a{1,10}){1,10}){1,10}b"):
        assert c.search_evidence("line", pattern) == []
    assert [h["line"] for h in c.search_evidence("line", "^(x+x+)+$")] == [1]
    # Counts are capped; the syntax grep users write works.
    with pytest.raises(ctxkeel.InputError, match="above 1000"):
        c.search_evidence("line", "a{1001}")
    c.offload(tool_message("words", "caf\u00e9 ok\nerror[E0308] at line 12\n\u65e5\u672c\n"))
    assert [h["line"] for h in c.search_evidence("words", r"\bE\d{4}\b")] == [1]
    assert [h["line"] for h in c.search_evidence("words", "^caf.\\s")] == [0]
    assert [h["line"] for h in c.search_evidence("words", "^..$")] == [2]  # two characters
    assert [h["line"] for h in c.search_evidence("words", "[[:digit:]]+$")] == [1]


def ab_lines(n, seed=5):
    rng = random.Random(seed)
    return "".join("".join(rng.choice("ab") for _ in range(200)) + "\n" for _ in range(n))


# A pattern whose DFA has 2**13 states: on random a/b lines nearly every byte makes a new one,
# so a search over 600 KB takes a good fraction of a second.
SLOW = "(a|b)*a(a|b){12}x"


def test_search_runs_without_the_gil_and_one_compactor_is_busy(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=10)
    c.offload(tool_message("ab", ab_lines(3000)))
    c.offload(tool_message("small", "a needle in a haystack\n"))
    done = threading.Event()
    outcome = []

    def slow_search():
        while True:
            try:
                outcome.append(c.search_evidence("ab", SLOW))
                break
            except ctxkeel.Error as err:
                if err.code != "CK_EBUSY":
                    outcome.append(err)
                    break
        done.set()

    thread = threading.Thread(target=slow_search)
    thread.start()
    busy, ok = [], 0
    # This thread runs Python while the other one searches: with the GIL held through the
    # search, it could only run between searches, and would never find the compactor busy.
    while not done.is_set():
        try:
            assert c.search_evidence("small", "needle")[0]["line"] == 0
            ok += 1
        except ctxkeel.Error as err:
            busy.append(err)
    thread.join()
    assert outcome == [[]]
    assert busy, "no search overlapped the slow one"
    for err in busy:
        assert type(err) is ctxkeel.Error and err.code == "CK_EBUSY"
        assert str(err) == "ctxkeel: concurrent use of Compactor"
    assert c.search_evidence("small", "needle") != []  # usable afterwards


def test_searches_on_their_own_compactors_all_succeed(tmp_path):
    text = ab_lines(800, seed=9) + "a needle in line 801\n"
    n = 4
    compactors = []
    for i in range(n):
        c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=10)
        c.offload(tool_message("ab", text))
        compactors.append(c)
    barrier = threading.Barrier(n)
    outcomes = [None] * n

    def work(i):
        barrier.wait()
        try:
            outcomes[i] = (compactors[i].search_evidence("ab", SLOW),
                           compactors[i].search_evidence(None, "needle"))
        except Exception as exc:  # reported by the assertion below
            outcomes[i] = exc

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = ([], [{"ref": "ab", "line": 800, "text": "a needle in line 801"}])
    assert outcomes == [want] * n


def test_asearch_evidence_leaves_the_loop_running(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=10)
    c.offload(tool_message("ab", ab_lines(3000)))

    async def main():
        ticks = 0
        search = asyncio.ensure_future(c.asearch_evidence("ab", SLOW))
        while not search.done():
            await asyncio.sleep(0.005)
            ticks += 1
        return await search, ticks

    hits, ticks = asyncio.run(main())
    assert hits == [] and ticks > 1


# ---- hostile stores ----------------------------------------------------------------------


def test_a_symlink_planted_in_the_store_is_refused_and_fails_open(tmp_path):
    store = fresh_dir(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(store, "tool_results"))
    c = ctxkeel.Compactor(100000, store_dir=store, session_id="s", tool_offload_threshold=10)
    message = tool_message("call_1", numbered(50))
    with pytest.warns(RuntimeWarning, match="symlink refused: tool_results"):
        assert c.offload(message) is message  # fail-open: the output stays
    with pytest.raises(ctxkeel.Error) as info:
        c.read_evidence("call_1")
    assert info.value.code == "CK_EIO" and "symlink refused: tool_results" in str(info.value)
    with pytest.raises(ctxkeel.Error, match="symlink refused"):
        c.search_evidence(None, "line")
    # At compaction too: the outputs stay in the view and the record says why; the audit
    # log, whose folder is a link as well, is not written through it.
    os.symlink(str(outside), os.path.join(store, "compactions"))
    history = synthetic_history()
    c = ctxkeel.Compactor(window_for(history, 0.65), store_dir=store, session_id="t")
    result = c.compact(history)
    assert result.tier == "warn" and result.record["offloaded"] == []
    assert "symlink refused: tool_results" in result.record["error"]
    assert "symlink refused: compactions" in result.record["error"]
    assert all(m in history for m in result.messages)
    assert list(outside.iterdir()) == []


def test_temp_files_of_dead_writers_are_removed(tmp_path):
    store = fresh_dir(tmp_path)
    c = ctxkeel.Compactor(100000, store_dir=store, session_id="s", tool_offload_threshold=10)
    c.offload(tool_message("kept", "kept line of text\n"))
    folder = os.path.join(store, "tool_results", "s")
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    dead = os.path.join(folder, ".tmp-%d-0-00000000000000aa" % pid)
    mine = os.path.join(folder, ".tmp-%d-0-00000000000000bb" % os.getpid())
    for path in (dead, mine):
        with open(path, "w") as f:
            f.write("half written")
    again = ctxkeel.Compactor(100000, store_dir=store, session_id="s")
    assert again.read_evidence("kept") == "kept line of text\n"
    assert not os.path.exists(dead) and os.path.exists(mine)
    assert again.search_evidence(None, "half") == []


# ---- hostile ids -------------------------------------------------------------------------

HOSTILE_IDS = ["../../x", "a/b", "a_b", "a\x00b", "I" * 10240, "I" * 10239, "CaseId", "caseid",
               "CASEID", ".", "..", ".hidden", "-dash", "x~0123456789abcdef",
               "x~0123456789abcdef.txt", "\u4e2d\u6587", "sp ace", "new\nline", "/abs/path",
               "~", "a" * 200]


def test_hostile_ids_stay_inside_the_store_and_never_collide(tmp_path):
    root = fresh_dir(tmp_path)
    store = os.path.join(root, "store")
    c = ctxkeel.Compactor(100000, store_dir=store, session_id="../../evil/session")
    texts = {}
    for n, call_id in enumerate(HOSTILE_IDS):
        text = numbered(300, prefix="output-%d" % n)
        out = c.offload(tool_message(call_id, text))
        assert out["content"].startswith(MARK)
        texts[call_id] = text
    # Nothing outside the store; one file per id, all in one session folder.
    assert os.listdir(root) == ["store"]
    files = [f for f in store_files(store) if "tool_results" in f]
    assert len(files) == len(HOSTILE_IDS)
    folders = {os.path.dirname(f) for f in files}
    assert len(folders) == 1
    folder = folders.pop()
    assert os.path.dirname(folder) == os.path.join(store, "tool_results")
    for call_id, text in texts.items():
        assert c.read_evidence(call_id, limit=10 ** 6) == text
        hits = c.search_evidence(call_id, "output-[0-9]+ 00007")
        assert [h["line"] for h in hits] == [7]  # counted from 0
        assert c.read_evidence(call_id, offset=7, limit=1).rstrip("\n") == hits[0]["text"]


# ---- compaction writes evidence too ------------------------------------------------------


def test_outputs_offloaded_by_a_compaction_read_back(tmp_path):
    messages = synthetic_history()
    c = ctxkeel.Compactor(window_for(messages, 0.65), store_dir=fresh_dir(tmp_path))
    result = c.compact(messages)
    assert result.tier == "warn" and result.record["offloaded"]
    originals = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    for entry in result.record["offloaded"]:
        assert entry["tool_name"] == "read_file"
        assert read_all(c, entry["tool_call_id"], 64) == originals[entry["tool_call_id"]]
        assert read_all(c, entry["path"], 64) == originals[entry["tool_call_id"]]
    found = c.search_evidence(None, "value_17 = compute")
    assert {h["ref"] for h in found} == {e["tool_call_id"] for e in result.record["offloaded"]}


# ---- the read_evidence tool --------------------------------------------------------------


def test_read_evidence_tool_definitions():
    openai = ctxkeel.read_evidence_tool()
    assert openai == ctxkeel.read_evidence_tool("openai")
    assert openai["type"] == "function" and openai["function"]["name"] == "read_evidence"
    params = openai["function"]["parameters"]
    # The core's definition (POLICY-CHANGES 10): ref is optional, pattern searches, nothing is
    # required, and offsets count from 0.
    assert "required" not in params and set(params["properties"]) == {"ref", "offset",
                                                                      "limit", "pattern"}
    assert params["properties"]["offset"]["minimum"] == 0
    assert params["properties"]["pattern"]["type"] == "string"
    assert "pattern" in openai["function"]["description"]
    anthropic = ctxkeel.read_evidence_tool(format="anthropic")
    assert anthropic["name"] == "read_evidence"
    assert "required" not in anthropic["input_schema"]
    assert anthropic["input_schema"]["properties"] == params["properties"]
    assert anthropic["description"] == openai["function"]["description"]
    # A new dict every time: editing one does not change the next.
    openai["function"]["name"] = "changed"
    assert ctxkeel.read_evidence_tool()["function"]["name"] == "read_evidence"
    with pytest.raises(ValueError):
        ctxkeel.read_evidence_tool("auto")
    with pytest.raises(ValueError):
        ctxkeel.read_evidence_tool("gemini")
    with pytest.raises(TypeError):
        ctxkeel.read_evidence_tool(1)


@pytest.fixture
def offloaded(tmp_path):
    c = ctxkeel.Compactor(100000, store_dir=fresh_dir(tmp_path))
    c.offload(tool_message("call_log", numbered(500)))
    return c


def test_handle_read_evidence_openai(offloaded):
    lines = numbered(500).splitlines(keepends=True)
    call = {"id": "call_r1", "type": "function",
            "function": {"name": "read_evidence",
                         "arguments": json.dumps({"ref": "call_log", "offset": 10,
                                                  "limit": 5})}}
    assert offloaded.handle_read_evidence(call) == {
        "role": "tool", "tool_call_id": "call_r1", "content": "".join(lines[10:15])}
    # Defaults, arguments given as a dict, and a whole number sent as a float.
    call["function"]["arguments"] = json.dumps({"ref": "call_log"})
    assert offloaded.handle_read_evidence(call)["content"] == "".join(lines[:200])
    call["function"]["arguments"] = {"ref": "call_log", "offset": 498, "limit": 10.0}
    assert offloaded.handle_read_evidence(call)["content"] == "".join(lines[498:])
    # A number sent as a string is the core's to judge (POLICY-CHANGES 10): it says so.
    call["function"]["arguments"] = {"ref": "call_log", "offset": "498"}
    content = offloaded.handle_read_evidence(call)["content"]
    assert content.startswith("read_evidence: 'offset' must be a whole number")
    # The result is a valid reply to the call.
    history = [{"role": "user", "content": "read it"},
               {"role": "assistant", "content": None, "tool_calls": [call]},
               offloaded.handle_read_evidence(call)]
    assert ctxkeel.check_pairs(history) == []


def test_handle_read_evidence_anthropic(offloaded):
    lines = numbered(500).splitlines(keepends=True)
    block = {"type": "tool_use", "id": "toolu_9", "name": "read_evidence",
             "input": {"ref": "call_log", "offset": 499, "limit": 50}}
    result = offloaded.handle_read_evidence(block)
    assert result == {"type": "tool_result", "tool_use_id": "toolu_9", "content": lines[499]}
    history = [{"role": "user", "content": "read it"},
               {"role": "assistant", "content": [block]},
               {"role": "user", "content": [result]}]
    assert ctxkeel.check_pairs(history) == []


# The wording is the core's (ck_compactor_answer_read_evidence, POLICY-CHANGES 10).
@pytest.mark.parametrize("arguments,fragment", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ("{}", "give a 'ref' to read"),
    (json.dumps({"ref": 7}), "'ref' must be a non-empty string"),
    (json.dumps({"ref": ""}), "'ref' must be a non-empty string"),
    (json.dumps({"pattern": ""}), "'pattern' must be a non-empty string"),
    (json.dumps({"pattern": "(unclosed"}), "not a valid regular expression"),
    (json.dumps({"ref": "call_log", "offset": -1}), "'offset' must be a whole number"),
    (json.dumps({"ref": "call_log", "limit": 0}), "'limit' must be a whole number"),
    (json.dumps({"ref": "call_log", "offset": "ten"}), "'offset' must be a whole number"),
    (json.dumps({"ref": "call_log", "limit": True}), "'limit' must be a whole number"),
    (json.dumps({"ref": "call_log", "offset": 1.5}), "'offset' must be a whole number"),
    (json.dumps({"ref": "nope"}), "cannot read nope"),
    (json.dumps({"ref": "../../etc/passwd"}), "cannot read"),
])
def test_handle_read_evidence_explains_model_mistakes(offloaded, arguments, fragment):
    call = {"id": "c", "function": {"name": "read_evidence", "arguments": arguments}}
    result = offloaded.handle_read_evidence(call)
    assert result["role"] == "tool" and result["tool_call_id"] == "c"
    assert result["content"].startswith("read_evidence: ")
    assert fragment in result["content"]
    assert set(result) == {"role", "tool_call_id", "content"}
    try:
        block_input = json.loads(arguments)
    except ValueError:
        block_input = arguments
    block = {"type": "tool_use", "id": "t", "name": "read_evidence", "input": block_input}
    answer = offloaded.handle_read_evidence(block)
    assert answer["is_error"] is True and fragment in answer["content"]


def test_handle_read_evidence_past_the_end(offloaded):
    call = {"id": "c", "function": {"name": "read_evidence",
                                    "arguments": json.dumps({"ref": "call_log",
                                                             "offset": 500})}}
    content = offloaded.handle_read_evidence(call)["content"]
    assert "no lines from offset 500" in content
    block = {"type": "tool_use", "id": "t", "name": "read_evidence",
             "input": {"ref": "call_log", "offset": 500}}
    assert "is_error" not in offloaded.handle_read_evidence(block)  # not a mistake


def test_handle_read_evidence_searches_with_a_pattern(offloaded):
    """A pattern finds lines across the session (no ref) or in one ref; each match names the
    offset that reads it, and reading there lands on the line."""
    lines = numbered(500).splitlines()
    for arguments in ({"pattern": "^line 00123 "}, {"ref": "call_log", "pattern": "^line 00123 "}):
        call = {"id": "s", "function": {"name": "read_evidence",
                                        "arguments": json.dumps(arguments)}}
        content = offloaded.handle_read_evidence(call)["content"]
        match = re.search(r'ref="([^"]+)" offset=(\d+): (.*)', content)
        assert match, content
        ref, offset, text = match.group(1), int(match.group(2)), match.group(3)
        assert offset == 123 and text == lines[offset]
        read = {"id": "r", "function": {"name": "read_evidence",
                                        "arguments": json.dumps({"ref": ref, "offset": offset,
                                                                 "limit": 1})}}
        assert offloaded.handle_read_evidence(read)["content"].rstrip("\n") == text
    block = {"type": "tool_use", "id": "t", "name": "read_evidence",
             "input": {"pattern": "no such line anywhere"}}
    answer = offloaded.handle_read_evidence(block)
    assert "no stored line matches" in answer["content"] and "is_error" not in answer


def test_handle_read_evidence_needs_a_tool_call(offloaded):
    with pytest.raises(TypeError):
        offloaded.handle_read_evidence("call_log")
    with pytest.raises(ValueError):
        offloaded.handle_read_evidence({"id": "c", "arguments": "{}"})
