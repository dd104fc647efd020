"""The shared format cases (tests/data/formats/, README there) through the Python API: the same
errors, pair reports, repairs and compacted views the C suite (tests/c/test_formats.c) checks,
so that a difference between the surfaces fails here rather than in a user's agent."""
import glob
import json
import os

import pytest

import ctxkeel

ROOT = os.path.join(os.path.dirname(__file__), "..", "data", "formats")
CASES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "*", "*.json")))
# The dialects this binding reads today; a case in another one is reported as skipped (by name),
# never passed, until the binding reads through the core's format layer.
BINDING_FORMATS = {"auto", "openai", "anthropic", "responses", "gemini", "ai-sdk", "langchain"}


def load(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return json.load(f)


def report(violations):
    """check_pairs() entries in the cases' shape (the message text is the core's own)."""
    return [{"index": v["index"], "part": v["part"], "kind": v["kind"], "id": v["tool_call_id"]}
            for v in violations]


def test_the_cases_are_there():
    assert len(CASES) >= 15 and {c.split(os.sep)[0] for c in CASES} >= {"openai", "anthropic"}


@pytest.mark.parametrize("name", CASES)
def test_case(name, tmp_path, monkeypatch):
    case = load(name)
    fmt = case["format"]
    if fmt not in BINDING_FORMATS or name.split(os.sep)[0] not in BINDING_FORMATS:
        pytest.skip(f"the {name.split(os.sep)[0]} dialect is not read by the Python binding yet")
    given = json.loads(json.dumps(case["input"]))
    if "error" in case:
        with pytest.raises(ctxkeel.InputError) as info:
            ctxkeel.check_pairs(given, format=fmt)
        assert info.value.code == "CK_" + case["error"]["code"]
        assert info.value.where == case["error"]["where"]
        return
    assert report(ctxkeel.check_pairs(given, format=fmt)) == case["check"]
    repaired = ctxkeel.repair_pairs(given, format=fmt)
    assert repaired == case.get("repair", case["input"])
    assert ctxkeel.check_pairs(repaired, format=fmt) == []
    if "compact" in case:
        monkeypatch.chdir(tmp_path)
        options = dict(case["compact"]["options"])
        window = options.pop("context_window")
        c = ctxkeel.Compactor(window, store_dir="st", session_id="case", format=fmt, **options)
        view = c.compact(given).messages
        assert json.loads(json.dumps(view)) == case["compact"]["view"]
        assert ctxkeel.check_pairs(view, format=fmt) == []
    assert given == case["input"], "the caller's messages were changed"
