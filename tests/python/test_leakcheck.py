"""The --leak-loops option of conftest.py, run on small test files through pytester."""

import os

import pytest

pytest_plugins = ["pytester"]

CONFTEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conftest.py")


@pytest.fixture
def leak_project(pytester):
    with open(CONFTEST, encoding="utf-8") as f:
        pytester.makeconftest(f.read())
    return pytester


@pytest.mark.no_leak_check
def test_leaking_test_fails(leak_project):
    leak_project.makepyfile(
        test_leaky="""
        KEPT = []

        def test_leaks():
            KEPT.append(bytearray(2000))
        """
    )
    result = leak_project.runpytest_subprocess("--leak-loops", "10", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*leak check: traced memory grew by*"])


@pytest.mark.no_leak_check
def test_clean_test_passes(leak_project):
    leak_project.makepyfile(
        test_clean="""
        import ctxkeel

        def test_clean():
            call = {"id": "a", "type": "function", "function": {"name": "f", "arguments": {}}}
            msgs = [{"role": "user", "content": "hi"},
                    {"role": "assistant", "content": None, "tool_calls": [call]}]
            assert ctxkeel.repair_pairs(msgs)[2]["role"] == "tool"
            assert ctxkeel.check_pairs(msgs)[0]["kind"] == "missing_result"
            ctxkeel.parse_anchors("## User Intent\\nx")
        """
    )
    result = leak_project.runpytest_subprocess("--leak-loops", "50", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


@pytest.mark.no_leak_check
def test_runs_each_test_repeatedly(leak_project, monkeypatch):
    leak_project.makepyfile(
        test_count="""
        import os
        CALLS = []

        def test_counted():
            CALLS.append(1)
            with open(os.environ["CK_COUNT_FILE"], "w") as f:
                f.write(str(len(CALLS)))
        """
    )
    count_file = leak_project.path / "count.txt"
    monkeypatch.setenv("CK_COUNT_FILE", str(count_file))
    result = leak_project.runpytest_subprocess("--leak-loops", "3", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    # One warm-up run and two rounds of three.
    assert count_file.read_text() == "7"
