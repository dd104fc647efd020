"""The ctxkeel command from Python: the console script and ``python -m ctxkeel`` run the core's
ck_cli_main() in the interpreter's process, with the C program's flags, output and exit codes."""

import json
import os
import shutil
import subprocess
import sys

import pytest

BIN = os.path.join(os.path.dirname(sys.executable), "ctxkeel")


def run(*args, stdin=None, command=None):
    command = command or [sys.executable, "-m", "ctxkeel"]
    return subprocess.run([*command, *args], input=stdin, capture_output=True, text=True)


@pytest.mark.parametrize("command", [None, [BIN]], ids=["python -m ctxkeel", "console script"])
def test_help_explains_every_column(command):
    done = run("--help", command=command)
    assert done.returncode == 0 and done.stderr == ""
    for column in ("call", "msgs", "history", "before", "after", "ratio", "view", "tier",
                   "action"):
        assert "\n  %s " % column in done.stdout
    for word in ("check", "repair", "tokens", "compact", "replay", "--format", "--svg",
                 "Exit status"):
        assert word in done.stdout


def test_console_script_is_installed():
    assert os.access(BIN, os.X_OK)
    assert shutil.which("ctxkeel", path=os.path.dirname(sys.executable)) == BIN


def test_exit_codes_and_output(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
    ]))
    done = run("check", str(broken))
    assert done.returncode == 1
    assert "messages[1] part 0: missing_result (tool call id \"call_1\")" in done.stdout
    assert done.stdout.endswith("2 messages, 1 violation\n")
    fixed = tmp_path / "fixed.json"
    assert run("repair", str(broken), "-o", str(fixed)).returncode == 0
    assert run("check", str(fixed)).returncode == 0
    done = run("tokens", "-", stdin=fixed.read_text())
    assert done.returncode == 0 and "-: 3 messages, " in done.stdout
    assert run("frobnicate", "x").returncode == 2
    done = run("check", str(tmp_path / "missing.json"))
    assert done.returncode == 2 and "missing.json" in done.stderr


def test_output_keeps_its_order_in_process():
    """What Python printed before and after the in-process command comes out around it."""
    code = ("import sys; print('before'); sys.stdout.write('still buffered '); "
            "from ctxkeel.__main__ import main; rc = main(['--version']); print('after', rc)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    import ctxkeel

    assert done.stdout == "before\nstill buffered ctxkeel %s\nafter 0\n" % ctxkeel.__version__
