"""Writes the seeds of fuzz/fuzz_resume.c into tests/data/fuzz/resume/: real audit logs of
session "fz", made with the fuzz target's fixed key on the history it compacts, so that their
MACs are valid and mutations of them reach past the MAC check. Run with the venv's python
after `make py-test` (which installs the package):

    .venv/bin/python tools/fuzz_resume_seeds.py
"""
import json
import os
import shutil
import tempfile

import ctxkeel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = b"ctxkeel-fuzz-resume-fixed-key-32"
HISTORY = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the parser. Never touch vendor/."},
    {"role": "assistant", "content": "Reading it.", "tool_calls": [{
        "id": "c1", "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": "src/parser.c"})}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "int parse(void) { return 1; }"},
    {"role": "assistant", "content": "Running the tests.", "tool_calls": [{
        "id": "c2", "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"cmd": "make test"})}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "FAIL test_parse: expected 2"},
    {"role": "assistant", "content": "The parser returns 1; it should return 2."},
    {"role": "user", "content": "Go ahead and fix it."},
]


def log_after(prefixes, window=160):
    store = tempfile.mkdtemp(prefix="ctxkeel-seeds-")
    try:
        os.makedirs(os.path.join(store, "compactions"), mode=0o700)
        with open(os.path.join(store, "compactions", ".key"), "wb") as f:
            f.write(KEY)
        c = ctxkeel.Compactor(window, store_dir=store, session_id="fz")
        for k in prefixes:
            c.compact(HISTORY[:k])
        path = os.path.join(store, "compactions", "fz.jsonl")
        with open(path, "rb") as f:
            return f.read()
    finally:
        shutil.rmtree(store)


def main():
    out = os.path.join(ROOT, "tests", "data", "fuzz", "resume")
    os.makedirs(out, exist_ok=True)
    seeds = {"one_record": log_after([len(HISTORY)]),
             "empty": b"", "not_json": b"{\"id\": \"fz:1\", \"tier\": \n"}
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        print("%s: %d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
