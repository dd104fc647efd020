"""The evidence store through the Compactor: offload(), read_evidence(), search_evidence(),
the read_evidence tool and handle_read_evidence(), with hostile tool-call ids and every tool
output of the real transcripts."""

import copy
import json
import os
import pathlib
import re
import stat

import pytest

import ctxkeel
from compaction_support import fresh_dir, load_corpus, synthetic_history, window_for

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


def read_all(compactor, ref, page):
    """Every line of `ref`, page by page, until a page comes back empty."""
    chunks, offset = [], 0
    while True:
        chunk = compactor.read_evidence(ref, offset=offset, limit=page)
        if not chunk:
            return "".join(chunks)
        chunks.append(chunk)
        offset += page


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
    assert hits == [
        {"ref": "build", "line": 2, "text": "error: E0425 unresolved name"},
        {"ref": "build", "line": 4, "text": "error: E0308 mismatched types"},
    ]
    everywhere = c.search_evidence(None, "E0308")
    assert sorted((h["ref"], h["line"]) for h in everywhere) == [("build", 4), ("tests", 3)]
    for hit in everywhere:  # each ref reads back its line
        assert c.read_evidence(hit["ref"], offset=hit["line"] - 1, limit=1).rstrip("\n") == (
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
        assert [h["line"] for h in hits] == [8]


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
    assert params["required"] == ["ref"] and set(params["properties"]) == {"ref", "offset",
                                                                           "limit"}
    anthropic = ctxkeel.read_evidence_tool(format="anthropic")
    assert anthropic["name"] == "read_evidence"
    assert anthropic["input_schema"]["required"] == ["ref"]
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
    # Defaults, arguments given as a dict, and numbers sent as strings.
    call["function"]["arguments"] = json.dumps({"ref": "call_log"})
    assert offloaded.handle_read_evidence(call)["content"] == "".join(lines[:200])
    call["function"]["arguments"] = {"ref": "call_log", "offset": "498", "limit": 10.0}
    assert offloaded.handle_read_evidence(call)["content"] == "".join(lines[498:])
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


@pytest.mark.parametrize("arguments,fragment", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ("{}", "'ref' is required"),
    (json.dumps({"ref": 7}), "'ref' is required"),
    (json.dumps({"ref": ""}), "'ref' is required"),
    (json.dumps({"ref": "call_log", "offset": -1}), "'offset' must be at least 0"),
    (json.dumps({"ref": "call_log", "limit": 0}), "'limit' must be at least 1"),
    (json.dumps({"ref": "call_log", "offset": "ten"}), "'offset' must be an integer"),
    (json.dumps({"ref": "call_log", "limit": True}), "'limit' must be an integer"),
    (json.dumps({"ref": "call_log", "offset": 1.5}), "'offset' must be an integer"),
    (json.dumps({"ref": "nope"}), "cannot read 'nope'"),
    (json.dumps({"ref": "../../etc/passwd"}), "cannot read"),
])
def test_handle_read_evidence_explains_model_mistakes(offloaded, arguments, fragment):
    call = {"id": "c", "function": {"name": "read_evidence", "arguments": arguments}}
    result = offloaded.handle_read_evidence(call)
    assert result["role"] == "tool" and result["tool_call_id"] == "c"
    assert result["content"].startswith("read_evidence error: ")
    assert fragment in result["content"]
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


def test_handle_read_evidence_needs_a_tool_call(offloaded):
    with pytest.raises(TypeError):
        offloaded.handle_read_evidence("call_log")
    with pytest.raises(ValueError):
        offloaded.handle_read_evidence({"id": "c", "arguments": "{}"})
