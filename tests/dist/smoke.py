"""The installed wheel, in a fresh venv with no compiler, pkg-config or -dev packages at hand:
the extension resolves libcurl (and whatever else it links) from the wheel's own ctxkeel.libs/,
a compaction works, an HttpSummarizer call reaches a loopback server, and the console script
answers. Run with the venv's python, from outside the source tree."""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import ctxkeel
from ctxkeel import _ext

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL %s %s" % (name, detail))


here = os.path.dirname(ctxkeel.__file__)
libs = os.path.join(os.path.dirname(here), "ctxkeel.libs")
check("installed from the wheel", here.startswith(sys.prefix), here)
check("not the source tree", "python" + os.sep + "ctxkeel" not in here, here)

# ldd: every library of the extension is found, libcurl (and libcjson while the core links it)
# from ctxkeel.libs/, nothing from a -dev package's place.
ldd = subprocess.run(["ldd", _ext.__file__], capture_output=True, text=True, check=True).stdout
check("ldd finds everything", "not found" not in ldd, ldd)
resolved = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M))
for soname, path in resolved.items():
    if soname.startswith(("libcurl", "libcjson", "libssl", "libcrypto", "libnghttp2")):
        check("%s from ctxkeel.libs" % soname,
              os.path.dirname(os.path.realpath(path)) == os.path.realpath(libs), path)
check("libcurl is linked", any(s.startswith("libcurl") for s in resolved), ldd)
check("license texts ship", os.path.isfile(os.path.join(libs, "licenses", "libcurl4.copyright")))
bundled = sorted(f for f in os.listdir(libs) if ".so" in f)
print("ctxkeel.libs: %d libraries, %d bytes" % (
    len(bundled), sum(os.path.getsize(os.path.join(libs, f)) for f in bundled)))

# A compaction: a session whose history is three times the window.
messages = [{"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Fix src/parser.c. Never touch vendor/."}]
for t in range(24):
    messages.append({"role": "assistant", "content": "step %d" % t, "tool_calls": [
        {"id": "c%d" % t, "type": "function", "function": {"name": "bash", "arguments": "{}"}}]})
    messages.append({"role": "tool", "tool_call_id": "c%d" % t,
                     "content": ("line %d of the output\n" % t) * (40 if t % 4 else 400)})
store = tempfile.mkdtemp()
result = ctxkeel.Compactor(4000, store_dir=store).compact(messages)
check("compaction compacts", result.tier != "none" and result.tokens_after < result.tokens_before,
      repr(result))
check("the view is valid", ctxkeel.check_pairs(result.messages) == [])

# An HttpSummarizer call against a loopback server.
REPLY = ("## User Intent\nFix src/parser.c (marker WHEEL-OK)\n## Execution Progress\nran\n"
         "## Key Decisions\nN/A\n## Tried Solutions\nN/A\n## Next Steps\nN/A\n")
seen = []


class Provider(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        body = json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
            "role": "assistant", "content": REPLY}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


server = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
threading.Thread(target=server.serve_forever, daemon=True).start()
llm = ctxkeel.HttpSummarizer("http://127.0.0.1:%d/v1" % server.server_address[1], "m",
                             api_key_env="")
# A window at which the history is half full, a soft tier from 30% and a target of 5% (the
# offloads alone reach 14%): one summary call.
window = 2 * ctxkeel.estimate_tokens(messages)
done = ctxkeel.Compactor(window, store_dir=tempfile.mkdtemp(), warn=0.2, soft=0.3, full=0.9,
                         emergency=0.95, target=0.05).compact(messages, summarize=llm)
server.shutdown()
check("the summarizer was called", len(seen) == 1 and seen[0].get("model") == "m", seen)
check("its reply is the checkpoint", done.record is not None and done.record["fallback"] is None
      and "WHEEL-OK" in done.record["checkpoint"], done.record and done.record["fallback"])

# The console script and python -m ctxkeel.
binary = os.path.join(os.path.dirname(sys.executable), "ctxkeel")
out = subprocess.run([binary, "--help"], capture_output=True, text=True)
check("ctxkeel --help", out.returncode == 0 and "  history " in out.stdout, out.stderr)
out = subprocess.run([sys.executable, "-m", "ctxkeel", "--version"], capture_output=True,
                     text=True)
check("python -m ctxkeel --version", out.stdout == "ctxkeel %s\n" % ctxkeel.__version__, out)
r = ctxkeel.replay(messages, 4000, store_dir=tempfile.mkdtemp())
check("replay", len(r.rows) == 25 and r.to_svg().startswith("<svg"), repr(r))

print("dist wheel: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
