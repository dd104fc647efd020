"""parse_anchors and merge_anchors."""

import pytest

import ctxkeel

KEYS = ["user_intent", "execution_progress", "key_decisions", "tried_solutions", "next_steps"]


def anchors(**values):
    return {key: values.get(key) for key in KEYS}


def test_markdown_sections():
    text = (
        "## User Intent\nFix the parser.\n\n"
        "## Execution Progress\n- read the file\n- wrote a test\n\n"
        "## Key Decisions\nUse cJSON.\n\n"
        "## Tried Solutions\n- N/A\n\n"
        "## Next Steps\nRun CI.\n\n"
        "## Summary\nAll good."
    )
    found, summary = ctxkeel.parse_anchors(text)
    assert found == anchors(
        user_intent="Fix the parser.",
        execution_progress="- read the file\n- wrote a test",
        key_decisions="Use cJSON.",
        next_steps="Run CI.",
    )
    assert summary == "All good."


def test_result_always_has_five_keys_in_order():
    for text in ["", "## Next Steps\nship", '{"key_decisions": "x"}', "nothing here"]:
        found, summary = ctxkeel.parse_anchors(text)
        assert list(found) == KEYS
        assert isinstance(summary, str)


def test_markdown_variants():
    text = (
        "Here is the checkpoint you asked for.\n"
        "### user intent:\nfix it\n"
        "### NEXT STEP\nship it\n"
        "## Key decision\nkeep the API\n"
    )
    found, summary = ctxkeel.parse_anchors(text)
    assert found == anchors(user_intent="fix it", next_steps="ship it",
                            key_decisions="keep the API")
    assert summary == ""


def test_bold_headers():
    text = "**User Intent:** fix the bug\n**Key Decisions**\nkeep API\n**Next Steps:**\n1. test\n"
    found, _ = ctxkeel.parse_anchors(text)
    assert found == anchors(user_intent="fix the bug", key_decisions="keep API",
                            next_steps="1. test")


def test_crlf_lines():
    found, _ = ctxkeel.parse_anchors("## Execution progress\r\nline1\r\nline2\r\n")
    assert found["execution_progress"] == "line1\nline2"


def test_json_bare():
    text = ('{"user_intent": "a", "execution_progress": "N/A", "key_decisions": "b", '
            '"tried_solutions": "none", "next_steps": "c", "summary": "s"}')
    found, summary = ctxkeel.parse_anchors(text)
    assert found == anchors(user_intent="a", key_decisions="b", next_steps="c")
    assert summary == "s"


def test_json_fenced():
    text = ('Sure!\n```json\n{"user_intent": "fenced", "next_steps": "- N/A", '
            '"summary": "fs"}\n```\n')
    found, summary = ctxkeel.parse_anchors(text)
    assert found == anchors(user_intent="fenced")
    assert summary == "fs"


@pytest.mark.parametrize("na", ["N/A", "- N/A", "none", "None", "n/a", "", "  "])
def test_na_values_are_none(na):
    found, _ = ctxkeel.parse_anchors("## User Intent\n%s\n## Next Steps\nreal\n" % na)
    assert found["user_intent"] is None
    assert found["next_steps"] == "real"


def test_odd_text_never_fails():
    for text in ["\x00\x01", "#" * 10000, "```\nunclosed", "{not json", "## \n##\n**"]:
        found, summary = ctxkeel.parse_anchors(text)
        assert list(found) == KEYS


def test_non_ascii_text():
    text = "## User Intent\n\u4fee\u590d\u89e3\u6790\u5668 \u00e9\n## Summary\n\u5b8c\u6210"
    found, summary = ctxkeel.parse_anchors(text)
    assert found["user_intent"] == "\u4fee\u590d\u89e3\u6790\u5668 \u00e9"
    assert summary == "\u5b8c\u6210"


def test_bytes_like_text():
    for text in (b"## User Intent\nbytes", bytearray(b"## User Intent\nbytes"),
                 memoryview(b"## User Intent\nbytes")):
        found, _ = ctxkeel.parse_anchors(text)
        assert found["user_intent"] == "bytes"


def test_invalid_utf8_bytes():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.parse_anchors(b"## User Intent\n\xff")
    assert info.value.code == "CK_EUTF8" and info.value.offset == 15
    assert info.value.where == "text"


def test_lone_surrogate_text():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.parse_anchors("## User Intent\n\ud800")
    assert info.value.code == "CK_EUTF8" and info.value.offset == 15


@pytest.mark.parametrize("bad", [None, 3, ["## User Intent"], {"user_intent": "x"}])
def test_parse_wrong_type(bad):
    with pytest.raises(TypeError, match="argument 'text'"):
        ctxkeel.parse_anchors(bad)


# ---- merge -----------------------------------------------------------------------------------

OLD = anchors(user_intent="old intent", execution_progress="old progress",
              tried_solutions="tried x", next_steps="old next")


def test_merge_new_value_replaces_old():
    merged = ctxkeel.merge_anchors(OLD, {"execution_progress": "new progress"})
    assert merged == dict(OLD, execution_progress="new progress")
    assert list(merged) == KEYS


@pytest.mark.parametrize("na", [None, "N/A", "- N/A", "none", "n/a.", "", "   "])
def test_merge_na_keeps_old(na):
    merged = ctxkeel.merge_anchors(OLD, anchors(user_intent=na, next_steps=na))
    assert merged == OLD


def test_merge_missing_key_keeps_old():
    assert ctxkeel.merge_anchors(OLD, {}) == OLD


def test_merge_trims_values():
    merged = ctxkeel.merge_anchors({}, {"key_decisions": "  use C11 \n"})
    assert merged == anchors(key_decisions="use C11")


def test_merge_none_arguments():
    assert ctxkeel.merge_anchors(None, None) == anchors()
    assert ctxkeel.merge_anchors(OLD, None) == OLD
    assert ctxkeel.merge_anchors(None, OLD) == OLD


def test_merge_old_na_string_is_none():
    assert ctxkeel.merge_anchors({"user_intent": "- N/A"}, {}) == anchors()


def test_merge_parsed_replies():
    first, _ = ctxkeel.parse_anchors("## User Intent\nport the CLI\n## Next Steps\nwrite tests\n")
    second, _ = ctxkeel.parse_anchors("## User Intent\n- N/A\n## Next Steps\nrun tests\n"
                                      "## Tried Solutions\nvalgrind\n")
    assert ctxkeel.merge_anchors(first, second) == anchors(
        user_intent="port the CLI", next_steps="run tests", tried_solutions="valgrind")


def test_merge_ignores_other_keys_and_does_not_mutate():
    old = dict(OLD, summary="s", extra=1)
    new = {"next_steps": "n", "unknown": object()}
    old_copy, new_copy = dict(old), dict(new)
    merged = ctxkeel.merge_anchors(old, new)
    assert merged == dict(OLD, next_steps="n")
    assert old == old_copy and new == new_copy


@pytest.mark.parametrize("bad", [3, "text", ["user_intent"], ("a", "b")])
def test_merge_wrong_argument_type(bad):
    with pytest.raises(TypeError, match="argument 'old' must be a dict or None"):
        ctxkeel.merge_anchors(bad, {})
    with pytest.raises(TypeError, match="argument 'new' must be a dict or None"):
        ctxkeel.merge_anchors({}, bad)


@pytest.mark.parametrize("bad", [3, ["x"], {"a": 1}, b"bytes"])
def test_merge_wrong_value_type(bad):
    with pytest.raises(TypeError) as info:
        ctxkeel.merge_anchors({}, {"tried_solutions": bad})
    assert str(info.value).startswith("ctxkeel: new['tried_solutions'] must be a str or None")


def test_merge_lone_surrogate():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.merge_anchors({"next_steps": "ok \udc00"}, {})
    assert info.value.code == "CK_EUTF8"
    assert info.value.where == "old['next_steps']" and info.value.offset == 3
