"""Compactor(store="s3://...") against a SeaweedFS server started for this module by
tools/seaweedfs.sh on loopback ports (as tests/c/s3_server.h starts it for the C tests).

A session compacted here resumes in another Python process through the server, with no
summary call and the same messages, and leaves nothing in either local folder; the URL is
reported without credentials; bad URLs, a backend given too and wrong types are named.
Skipped when the SeaweedFS binary is not built (``make s3-server``), unless CK_REQUIRE_S3=1.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest

import ctxkeel
from compaction_support import Scripted, folding_history, fresh_dir, window_for

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEAWEEDFS = os.path.join(REPO_ROOT, "tools", "seaweedfs.sh")
ACCESS = "ckPyAccessKey"
SECRET = "ckPySecretKey0123456789abcdefghijklmnopq"
BUCKET = "ctxkeel-py"
AWS_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION")


# The sanitizer runs (make asan) preload libasan into this interpreter; the server script and
# its curl, python3 and weed must run without it (under it the start never finished).
SANITIZER_VARS = ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")


def server_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in SANITIZER_VARS}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def endpoint():
    if subprocess.run(["bash", SEAWEEDFS, "path"], capture_output=True,
                      env=server_env()).returncode != 0:
        if os.environ.get("CK_REQUIRE_S3") == "1":
            pytest.fail("CK_REQUIRE_S3=1 but there is no SeaweedFS binary (make s3-server)")
        pytest.skip("no SeaweedFS binary: `make s3-server` builds it once per machine")
    folder = tempfile.mkdtemp(prefix="ck-s3-py-")
    env = server_env(CK_S3_ACCESS_KEY=ACCESS, CK_S3_SECRET_KEY=SECRET,
                     CK_S3_BUCKET=BUCKET, CK_S3_WATCH_PID=str(os.getpid()))
    started = subprocess.run(["bash", SEAWEEDFS, "start", folder], env=env,
                             capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stderr
    saved = {name: os.environ.get(name) for name in AWS_VARS}
    os.environ.update(AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    try:
        yield started.stdout.splitlines()[0]
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        subprocess.run(["bash", SEAWEEDFS, "stop", folder], capture_output=True,
                       env=server_env())
        shutil.rmtree(folder, ignore_errors=True)


def url_for(endpoint):
    return "s3://%s/py-%s?region=us-east-1&endpoint=%s" % (BUCKET, uuid.uuid4().hex, endpoint)


# Runs in another process: the same compactor on the same session, a counting summarizer.
CHILD = r"""
import json, sys
import ctxkeel
args = json.load(sys.stdin)
calls = []
def summarize(request):
    calls.append(request)
    return "## Next Steps\nNothing."
c = ctxkeel.Compactor(args["window"], session_id=args["session"], store=args["store"],
                      store_dir=args["dir"])
result = c.compact(args["messages"], summarize=summarize)
json.dump({"calls": len(calls), "messages": result.messages, "record": result.record},
          sys.stdout)
"""


def test_session_moves_to_another_process(endpoint, tmp_path):
    store = url_for(endpoint)
    messages = folding_history()
    window = window_for(messages, 0.75)
    session = "py/moves 1\n../x"
    here = fresh_dir(tmp_path)
    c = ctxkeel.Compactor(window, session_id=session, store=store, store_dir=here)
    s = Scripted()
    first = c.compact(messages, summarize=s)
    assert first.tier in ("soft", "full") and s.calls == 1
    assert first.record is not None and first.record["error"] is None
    again = c.compact(messages, summarize=s)
    assert s.calls == 1
    del c
    there = fresh_dir(tmp_path)
    args = {"window": window, "session": session, "store": store, "dir": there,
            "messages": messages}
    child = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(args),
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    out = json.loads(child.stdout)
    assert out["calls"] == 0
    assert out["record"] is None
    assert out["messages"] == json.loads(json.dumps(again.messages))
    assert os.listdir(here) == [] and os.listdir(there) == []
    assert SECRET not in child.stdout + child.stderr and ACCESS not in child.stdout


def test_store_is_reported_without_credentials(endpoint, tmp_path):
    store = url_for(endpoint)
    c = ctxkeel.Compactor(10000, store=store, store_dir=fresh_dir(tmp_path))
    shown = c.options["store"]
    assert shown.startswith("s3://%s/py-" % BUCKET) and "region=us-east-1" in shown
    assert SECRET not in shown and ACCESS not in shown
    assert ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path)).options["store"] is None


def test_bad_stores_are_named(endpoint, tmp_path):
    with pytest.raises(ctxkeel.InputError) as e:
        ctxkeel.Compactor(1000, store="s3://Bad_bucket/p?region=us-east-1")
    assert "store.bucket" in str(e.value)
    with pytest.raises(ctxkeel.InputError) as e:
        ctxkeel.Compactor(1000, store="file:///tmp/x")
    assert "store.scheme" in str(e.value)

    class Backend:
        def put(self, key, text):
            pass

        def get(self, key):
            return None

    with pytest.raises(ctxkeel.InputError) as e:
        ctxkeel.Compactor(1000, store=url_for(endpoint), backend=Backend())
    assert "store" in str(e.value)
    with pytest.raises(TypeError):
        ctxkeel.Compactor(1000, store=5)
    secret = os.environ.pop("AWS_SECRET_ACCESS_KEY")
    try:
        with pytest.raises(ctxkeel.InputError) as e:
            ctxkeel.Compactor(1000, store=url_for(endpoint))
        assert "AWS_SECRET_ACCESS_KEY" in str(e.value) and secret not in str(e.value)
    finally:
        os.environ["AWS_SECRET_ACCESS_KEY"] = secret
