"""Retention policies (Compactor(retention=...)): what the placeholder of an offloaded output
keeps, per tool, on a real failing build log, and the errors that bad policies raise.

The corpus has no pytest, cargo or go test run; its failing runs are the build of
openhands-ponyc-4588 (execute_bash: apt-get that cannot fetch, cmake that cannot find LLVM or
GTest), which are used here.
"""

import re

import pytest

import ctxkeel
from compaction_support import fresh_dir, load_corpus, window_for

CORPUS = "openhands-ponyc-4588.json"
APT = 88  # apt-get update && apt-get install -y llvm-dev: 30 lines ending in "E: Unable..."
CMAKE = 98  # cmake: "CMake Error ... GTest", "-- Configuring incomplete, errors occurred!"
GAP = re.compile(r"^\[\.\.\. (\d+) lines \.\.\.\]$")
CUT = re.compile(r" \[\.\.\. \d+ more bytes on this line\]$")


@pytest.fixture
def build_log():
    """The transcript up to the last failing cmake run (messages 0-99)."""
    try:
        messages = load_corpus(CORPUS)
    except FileNotFoundError:
        pytest.skip("corpus not found")
    return messages[:100]


def compact_warn(tmp_path, messages, **options):
    """One warn-tier compaction that offloads every tool output over 500 bytes outside the
    last two messages."""
    c = ctxkeel.Compactor(window_for(messages, 0.65), store_dir=fresh_dir(tmp_path),
                          offload_threshold=500, keep_tail=2, **options)
    result = c.compact(messages)
    assert result.tier == "warn"
    return c, result


def output_of(result, source):
    """The view's tool message for the source tool message `source`."""
    return next(m for m in result.messages
                if m["role"] == "tool" and m["tool_call_id"] == source["tool_call_id"])


def preview(placeholder):
    """The preview of a placeholder: its kept lines and the gaps, as (kept, skipped)."""
    assert placeholder.startswith("[ctxkeel: tool output offloaded]")
    body = placeholder.split("):\n", 1)[1]
    kept, skipped = [], 0
    for line in body.split("\n")[:-1]:
        gap = GAP.match(line)
        if gap:
            skipped += int(gap.group(1))
        else:
            kept.append(line)
    return kept, skipped


def test_a_policy_keeps_head_error_lines_and_tail_of_a_failing_build(tmp_path, build_log):
    policy = {"execute_bash": {"head": 2, "tail": 3, "errors": 4}}
    c, result = compact_warn(tmp_path, build_log, retention=policy)
    source = build_log[APT]
    lines = source["content"].split("\n")
    out = output_of(result, source)
    kept, skipped = preview(out["content"])
    assert kept[:2] == lines[:2]
    assert kept[-3:] == lines[-3:] and kept[-1] == "E: Unable to locate package llvm-dev"
    errors = kept[2:-3]
    assert len(errors) == 4
    assert all("Temporary failure resolving" in line for line in errors)
    # Kept lines are the log's own, in order, and the gaps account for all the others.
    at = 0
    for line in kept:
        at = lines.index(line, at) + 1
    assert len(kept) + skipped == len(lines)
    # The full text is one read away, byte for byte.
    assert c.read_evidence(source["tool_call_id"], limit=1000) == source["content"]
    # The other failing run: "errors occurred" is in its tail, which the policy keeps.
    kept, _ = preview(output_of(result, build_log[CMAKE])["content"])
    assert kept[-2] == "-- Configuring incomplete, errors occurred!"
    assert kept[:2] == build_log[CMAKE]["content"].split("\n")[:2]


def test_without_a_policy_the_automatic_rule_applies(tmp_path, build_log):
    _, result = compact_warn(tmp_path, build_log)
    kept, _ = preview(output_of(result, build_log[APT])["content"])
    # At compaction: five first lines, up to five error lines, five last lines (the apt log's
    # last line is its "E: Unable to locate package" error).
    lines = build_log[APT]["content"].split("\n")
    assert kept[:5] == lines[:5] and kept[-5:] == lines[-5:]
    assert any(line.startswith("E: Unable to locate package") for line in kept)


def test_offload_false_keeps_the_output_verbatim(tmp_path, build_log):
    policy = {"secrets*": {"head": 1}, "execute_bash": {"offload": False}}
    _, result = compact_warn(tmp_path, build_log, retention=policy)
    for i in (APT, CMAKE):
        assert any(m is build_log[i] for m in result.messages)
    offloaded = {o["tool_call_id"] for o in result.record["offloaded"]}
    bash_ids = {call["id"] for m in build_log for call in m.get("tool_calls") or []
                if call["function"]["name"] == "execute_bash"}
    assert offloaded and not offloaded & bash_ids  # the other tools' outputs still go
    # The tool-time gate follows policies too. A tool message without "name" does not say
    # which tool made it (its placeholder says "tool: tool"): only a pattern such as "*"
    # reaches it.
    c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=100,
                          retention={"*": {"offload": False}})
    message = dict(build_log[APT])
    assert c.offload(message) is message


def test_the_tool_named_on_the_result_is_matched_at_tool_time(tmp_path):
    text = "\n".join(f"row {i}" for i in range(500))
    c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path), tool_offload_threshold=100,
                          retention={"query_db": {"offload": False}, "*": {"head": 1}})
    named = {"role": "tool", "tool_call_id": "q1", "name": "query_db", "content": text}
    assert c.offload(named) is named
    other = {"role": "tool", "tool_call_id": "r1", "name": "ls", "content": text}
    assert "tool: ls," in c.offload(other)["content"]


def test_the_first_matching_policy_wins_in_order(tmp_path, build_log):
    for retention in ({"execute_*": {"head": 1}, "execute_bash": {"offload": False}},
                      [("execute_*", {"head": 1}), ("execute_bash", {"offload": False})],
                      (("exec?te_[a-z]ash", {"head": 1}), ("*", {"offload": False}))):
        _, result = compact_warn(tmp_path, build_log, retention=retention)
        kept, _ = preview(output_of(result, build_log[APT])["content"])
        assert kept == build_log[APT]["content"].split("\n")[:1]


def test_zero_means_zero_and_max_bytes_caps_the_preview(tmp_path, build_log):
    _, result = compact_warn(tmp_path, build_log, retention={"execute_bash": {},
                                                            "str_replace_editor":
                                                                {"head": 40, "max_bytes": 300}})
    assert "preview: none (retention policy)" in output_of(result, build_log[APT])["content"]
    viewed = [m for m in result.messages if m["role"] == "tool"
              and m["content"].startswith("[ctxkeel: tool output offloaded]\ntool: str_replace")]
    assert viewed
    for m in viewed:
        kept, _ = preview(m["content"])
        # The cap counts the bytes kept of the lines, not the cut markers.
        assert sum(len(CUT.sub("", line).encode()) for line in kept) <= 300
        assert len(kept) < 40


def test_the_options_show_the_policies(tmp_path):
    c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path), retention={
        "pytest*": {"head": 5, "tail": 30, "errors": 20},
        "read_file": {"head": 40, "max_bytes": 4000}, "secrets*": {"offload": False}})
    assert c.options["retention"] == {
        "pytest*": {"head": 5, "tail": 30, "errors": 20, "max_bytes": 0, "offload": True},
        "read_file": {"head": 40, "tail": 0, "errors": 0, "max_bytes": 4000, "offload": True},
        "secrets*": {"head": 0, "tail": 0, "errors": 0, "max_bytes": 0, "offload": False}}
    assert list(c.options["retention"]) == ["pytest*", "read_file", "secrets*"]
    assert ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path)).options["retention"] == {}


BAD = [
    ({"pytest*": {"tail": -1}}, ctxkeel.InputError, "retention['pytest*'].tail"),
    ({"pytest*": {"head": 2 ** 32}}, ctxkeel.InputError, "retention['pytest*'].head"),
    ({"pytest*": {"errors": 1.5}}, TypeError, "retention['pytest*'].errors must be an int"),
    ({"pytest*": {"tail": True}}, TypeError, "retention['pytest*'].tail must be an int"),
    ({"pytest*": {"max_bytes": -5}}, ctxkeel.InputError, "retention['pytest*'].max_bytes"),
    ({"pytest*": {"lines": 3}}, ctxkeel.InputError, "retention['pytest*'].lines: unknown key"),
    ({"pytest*": {"offload": 0}}, TypeError, "retention['pytest*'].offload must be a bool"),
    ({"pytest*": {1: 2}}, TypeError, "keys of retention['pytest*']"),
    ({"pytest*": [("head", 1)]}, TypeError, "retention['pytest*'] must be a dict"),
    ({5: {"head": 1}}, TypeError, "retention[5]: a pattern must be a str"),
    ([(b"pytest*", {})], TypeError, "retention[0][0]: a pattern must be a str"),
    ([("pytest*",)], TypeError, "retention[0] must be a (pattern, policy) pair"),
    (["pytest*"], TypeError, "retention[0] must be a (pattern, policy) pair"),
    ({"": {}}, ctxkeel.InputError, "retention['']: must not be empty"),
    ({"a\x00b": {}}, ctxkeel.InputError, "NUL"),
    ("pytest*", TypeError, "retention must be a dict or a list"),
]


@pytest.mark.parametrize("retention,error,text", BAD)
def test_bad_policies_are_refused_naming_the_place(tmp_path, retention, error, text):
    with pytest.raises(error) as caught:
        ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path), retention=retention)
    assert text in str(caught.value)
    if error is ctxkeel.InputError:
        assert caught.value.code == "CK_EINVAL"
        assert caught.value.where.startswith("retention[")
