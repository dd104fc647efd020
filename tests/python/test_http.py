"""HttpSummarizer: the built-in summarizer against a real HTTP server started in the test.

The server (http.server.ThreadingHTTPServer on 127.0.0.1, port 0) plays both providers:
OpenAI Chat Completions at POST /v1/chat/completions (base_url "http://127.0.0.1:PORT/v1")
and Anthropic Messages at POST /v1/messages (base_url "http://127.0.0.1:PORT"). It records
every request, can answer from a script (errors, Retry-After, broken bodies) and can stall
before answering, which is how timeouts and cancellation are shown.

Every test starts with provider.reset() and ends its talk with the server by reading
provider.seen(); both first wait for the server's handler threads and the compactor's
transfer threads to end. So a run leaves nothing in flight for --leak-loops to count, only
what the code under test keeps. Tests that wait on purpose (stalls, Retry-After,
concurrency) are excluded from --leak-loops.
"""

import asyncio
import copy
import inspect
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import ctxkeel
from ctxkeel import _ext
from compaction_support import check_result, folding_history, fresh_dir, synthetic_history, window_for

KEY_ENV = "CTXKEEL_TEST_HTTP_KEY"
SECRET = "sk-test-SECRET"
NEXT_STEPS = "Ship the parser fix from commit 7f3a9c1 after pytest -q passes."
REPLY = ("## User Intent\nFix the failing parser test.\n\n"
         "## Execution Progress\nRead the parser and its tests.\n\n"
         "## Key Decisions\nKeep the public API unchanged.\n\n"
         "## Tried Solutions\nN/A\n\n"
         "## Next Steps\n" + NEXT_STEPS + "\n")
REQUEST = {"system": "You write checkpoints.", "prompt": "Summarize: the agent read files.",
           "max_tokens": 321}
THREAD_NAME = "ctxkeel-http-summarize"


def error_body(message):
    return json.dumps({"error": {"type": "test_error", "message": message}}).encode()


class Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that keeps its handler threads, so that a test can wait for them."""

    daemon_threads = True

    def process_request(self, request, client_address):
        thread = threading.Thread(target=self.process_request_thread,
                                  args=(request, client_address), daemon=True)
        with self.provider.lock:
            self.provider.handlers.append(thread)
        thread.start()


class Provider:
    """The fake provider: a server thread, the requests it saw, what it answers next."""

    def __init__(self):
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.handlers = []
        self.requests = []
        self.script = []
        self.stall = 0.0
        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.provider = self
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def openai_url(self):
        return "http://127.0.0.1:%d/v1" % self.port

    @property
    def anthropic_url(self):
        return "http://127.0.0.1:%d" % self.port

    def reset(self, script=(), stall=0.0):
        """Forgets the requests seen; answers with `script` first (each item a (status,
        headers, body) tuple or a function of the recorded request returning one), then with
        a successful reply; sleeps `stall` seconds before each answer."""
        self.quiesce()
        with self.lock:
            self.requests = []
            self.script = list(script)
            self.stall = stall
        return self

    def seen(self):
        """The requests received since the last reset(), once every answer is sent."""
        self.quiesce()
        with self.lock:
            return list(self.requests)

    def count(self):
        """How many requests arrived so far, without waiting for anything."""
        with self.lock:
            return len(self.requests)

    def quiesce(self, limit=5.0):
        """Waits for the handler threads and the compactor's transfer threads to end. A
        stalled handler whose client has gone is let go (its answer fails at once)."""
        with self.lock:
            stalled = self.stall > 0
            threads, self.handlers = self.handlers, []
        if stalled:
            self.released.set()
        threads += transfer_threads()
        for thread in threads:
            thread.join(limit)
        self.released.clear()

    def close(self):
        self.released.set()  # stalled handlers answer at once
        self.server.shutdown()
        self.server.server_close()


def success(record):
    """The provider's normal reply for the API that `record` was sent to."""
    if record["path"] == "/v1/messages":
        body = {"id": "msg_1", "type": "message", "role": "assistant",
                "content": [{"type": "text", "text": REPLY}],
                "usage": {"input_tokens": 101, "output_tokens": 57}}
    else:
        body = {"id": "chatcmpl-1", "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}}
    return 200, {}, json.dumps(body).encode()


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1, so that a client sending "Expect: 100-continue" is answered at once.
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_one_request(self):
        # The base class looks the method up as getattr(self, "do_" + command), a new str per
        # request that CPython's attribute cache then keeps: noise for --leak-loops.
        self.raw_requestline = self.rfile.readline(65537)
        if not self.raw_requestline:
            self.close_connection = True
        elif self.parse_request():
            if self.command == "POST":
                self.do_POST()
            else:
                self.send_error(405)
            self.wfile.flush()

    def do_POST(self):
        provider = self.server.provider
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        record = {"path": self.path, "body": body,
                  "headers": {k.lower(): v for k, v in self.headers.items()}}
        with provider.lock:
            provider.requests.append(record)
            answer = provider.script.pop(0) if provider.script else success
            stall = provider.stall
        if stall:
            provider.released.wait(stall)
        status, headers, payload = answer(record) if callable(answer) else answer
        try:
            self.send_response_only(status)  # no Date header: less to allocate
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            pass  # the client gave up (a timeout or a cancellation under test)


@pytest.fixture(scope="module")
def provider():
    server = Provider()
    yield server
    server.close()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def openai(provider, **options):
    options.setdefault("api_key_env", KEY_ENV)
    return ctxkeel.HttpSummarizer(provider.openai_url, "gpt-test", **options)


def anthropic(provider, **options):
    options.setdefault("api_key_env", KEY_ENV)
    return ctxkeel.HttpSummarizer(provider.anthropic_url, "claude-test", api="anthropic",
                                  **options)


def soft_compactor(tmp_path, messages, **options):
    """A compactor for which `messages` is a soft-tier compaction."""
    return ctxkeel.Compactor(window_for(messages, 0.75), store_dir=fresh_dir(tmp_path),
                             **options)


def closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def transfer_threads():
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def wait_for_no_transfer(limit):
    """Seconds until no transfer thread is left, or None if some are after `limit`."""
    start = time.monotonic()
    while transfer_threads():
        if time.monotonic() - start > limit:
            return None
        time.sleep(0.01)
    return time.monotonic() - start


def expect_error(code, fn, *args):
    with pytest.raises(ctxkeel.Error) as info:
        fn(*args)
    assert info.value.code == code, (info.value.code, str(info.value))
    assert str(info.value).startswith("ctxkeel: ")
    return info.value


# ---- success ------------------------------------------------------------------------------


def test_openai_request_and_reply(provider, key):
    provider.reset()
    s = openai(provider, headers={"X-Trace": "t-1"})
    assert s.last_usage is None
    assert s(dict(REQUEST)) == REPLY
    assert s.last_usage == (11, 22)
    (seen,) = provider.seen()
    assert seen["path"] == "/v1/chat/completions"
    body = seen["body"]
    assert body["model"] == "gpt-test" and body["max_tokens"] == 321
    assert body["messages"] == [{"role": "system", "content": REQUEST["system"]},
                                {"role": "user", "content": REQUEST["prompt"]}]
    assert "system" not in body
    headers = seen["headers"]
    assert headers["authorization"] == "Bearer " + SECRET
    assert headers["content-type"] == "application/json"
    assert headers["x-trace"] == "t-1"
    assert "x-api-key" not in headers and "anthropic-version" not in headers


def test_anthropic_request_and_reply(provider, key):
    provider.reset()
    s = anthropic(provider)
    assert s(dict(REQUEST)) == REPLY
    assert s.last_usage == (101, 57)
    (seen,) = provider.seen()
    assert seen["path"] == "/v1/messages"
    body = seen["body"]
    assert body["model"] == "claude-test" and body["max_tokens"] == 321
    assert body["system"] == REQUEST["system"]
    assert body["messages"] == [{"role": "user", "content": REQUEST["prompt"]}]
    headers = seen["headers"]
    assert headers["x-api-key"] == SECRET
    assert headers["anthropic-version"]
    assert "authorization" not in headers


def test_the_key_comes_from_the_environment_at_call_time(provider, monkeypatch):
    provider.reset()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-1")
    s = ctxkeel.HttpSummarizer(provider.openai_url, "m")
    assert s.api_key_env == "OPENAI_API_KEY"
    s(REQUEST)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-2")
    s(REQUEST)
    monkeypatch.delenv("OPENAI_API_KEY")
    s(REQUEST)
    keys = [r["headers"].get("authorization") for r in provider.seen()]
    assert keys == ["Bearer sk-default-1", "Bearer sk-default-2", None]
    assert ctxkeel.HttpSummarizer(provider.anthropic_url, "m",
                                  api="anthropic").api_key_env == "ANTHROPIC_API_KEY"
    # "" sends no key at all, whatever the environment holds.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-default-3")
    none = ctxkeel.HttpSummarizer(provider.openai_url, "m", api_key_env="")
    assert none.api_key_env is None
    none(REQUEST)
    assert "authorization" not in provider.seen()[-1]["headers"]


def test_a_summary_request_dict_is_accepted_as_it_is(provider, key):
    provider.reset()
    # The compactor's request carries more keys than the summarizer reads.
    request = dict(REQUEST, tier="soft", messages=[{"role": "user", "content": "x"}],
                   previous=None)
    request["system"] = None  # no system prompt: sent as an empty one
    assert openai(provider)(request) == REPLY
    assert provider.seen()[0]["body"]["messages"][0] == {"role": "system", "content": ""}
    # Text goes over as it is, non-ASCII included; a NUL (tool output may hold one) does not
    # cut the prompt short.
    provider.reset()
    openai(provider)({"prompt": "naïve 中文 🇨🇳 a\0b end", "max_tokens": 5})
    sent = provider.seen()[0]["body"]["messages"][-1]["content"]
    assert sent == "naïve 中文 🇨🇳 a\ufffdb end"


def test_no_usage_in_the_reply(provider, key):
    provider.reset()
    body = json.dumps({"choices": [{"message": {"content": REPLY}}]}).encode()
    s = openai(provider, backoff=0.01)
    provider.reset(script=[(200, {}, body), (500, {}, error_body("down"))])
    assert s(REQUEST) == REPLY and s.last_usage == (0, 0)
    s(REQUEST)  # the 500 is retried
    assert s.last_usage == (11, 22)
    provider.reset(script=[(400, {}, error_body("no"))])
    expect_error("CK_ESUMMARY", s, REQUEST)
    assert s.last_usage == (11, 22)  # a failed call leaves the last success's usage
    assert len(provider.seen()) == 1


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_compact_writes_the_checkpoint_with_the_model(provider, key, tmp_path, api):
    provider.reset()
    messages = folding_history()
    before = copy.deepcopy(messages)
    c = soft_compactor(tmp_path, messages)
    s = openai(provider) if api == "openai" else anthropic(provider)
    result = c.compact(messages, summarize=s)
    assert messages == before
    check_result(c, messages, result, len(provider.seen()))
    assert result.tier == "soft"
    assert result.record["fallback"] is None
    assert NEXT_STEPS in result.record["checkpoint"]
    assert result.record["anchors"]["next_steps"] == NEXT_STEPS
    (seen,) = provider.seen()
    body = seen["body"]
    assert body["max_tokens"] > 0
    prompt = body["messages"][-1]["content"]
    assert "src/app/module_" in prompt  # the span being summarized is in the prompt
    system = body["system"] if api == "anthropic" else body["messages"][0]["content"]
    assert system.strip()


# ---- retries and failures -----------------------------------------------------------------


@pytest.mark.no_leak_check
def test_429_with_retry_after_then_success(provider, key):
    provider.reset(script=[(429, {"Retry-After": "1"}, error_body("slow down"))])
    s = openai(provider, max_retries=2, backoff=0.01)
    start = time.monotonic()
    assert s(REQUEST) == REPLY
    elapsed = time.monotonic() - start
    assert elapsed >= 0.9, elapsed  # Retry-After, not the 10 ms backoff
    assert len(provider.seen()) == 2


def test_500_until_the_retries_run_out(provider, key, tmp_path):
    always = [(500, {}, error_body("the model is overloaded"))] * 3
    s = openai(provider, max_retries=2, backoff=0.01)
    provider.reset(script=always)
    err = expect_error("CK_ESUMMARY", s, REQUEST)
    assert "HTTP 500" in str(err) and "overloaded" in str(err) and "3 attempts" in str(err)
    assert len(provider.seen()) == 3
    assert s.last_usage is None

    # In a compaction the failure becomes the record's fallback; compact() does not raise.
    messages = folding_history()
    c = soft_compactor(tmp_path, messages)
    provider.reset(script=always)
    result = c.compact(messages, summarize=s)
    check_result(c, messages, result, 1)
    assert result.tier == "soft"
    assert "HTTP 500" in result.record["fallback"]
    assert "CK_ESUMMARY" in result.record["fallback"]
    assert NEXT_STEPS not in result.record["checkpoint"]
    assert len(provider.seen()) == 3


def test_no_retries(provider, key):
    provider.reset(script=[(503, {}, error_body("down"))] * 2)
    expect_error("CK_ESUMMARY", openai(provider, max_retries=0), REQUEST)
    assert len(provider.seen()) == 1


def test_a_client_error_is_not_retried(provider, key):
    provider.reset(script=[(400, {}, error_body("max_tokens is too large"))] * 4)
    err = expect_error("CK_ESUMMARY", openai(provider, backoff=0.01), REQUEST)
    assert "HTTP 400" in str(err) and "max_tokens is too large" in str(err)
    assert len(provider.seen()) == 1


@pytest.mark.no_leak_check
def test_a_server_that_stalls_past_the_timeout(provider, key):
    provider.reset(stall=3.0)
    s = openai(provider, timeout=0.3, max_retries=0)
    start = time.monotonic()
    err = expect_error("CK_ETIMEDOUT", s, REQUEST)
    assert time.monotonic() - start < 1.5
    assert "0.3 s" in str(err)
    assert len(provider.seen()) == 1


def test_malformed_replies(provider, key):
    s = openai(provider, backoff=0.01)
    provider.reset(script=[(200, {}, b'{"choices": [{"message": ')])
    assert "not JSON" in str(expect_error("CK_ESUMMARY", s, REQUEST))
    provider.reset(script=[(200, {}, b'{"choices": []}')])
    assert "no text" in str(expect_error("CK_ESUMMARY", s, REQUEST))
    provider.reset(script=[(200, {}, b"<html>oops</html>")])
    expect_error("CK_ESUMMARY", s, REQUEST)
    # A broken reply is not retried: the server answered.
    assert len(provider.seen()) == 1


def test_connection_refused(key):
    s = ctxkeel.HttpSummarizer("http://127.0.0.1:%d/v1" % closed_port(), "m",
                               api_key_env=KEY_ENV, max_retries=1, backoff=0.01)
    err = expect_error("CK_EIO", s, REQUEST)
    assert "connection failed" in str(err) and "2 attempts" in str(err)


def test_a_cancelled_token_sends_nothing(provider, key):
    provider.reset()
    token = _ext.CancelToken()
    assert not token.cancelled
    token.cancel()
    token.cancel()
    assert token.cancelled and "cancelled" in repr(token)
    expect_error("CK_ECANCELED", openai(provider)._summarize, REQUEST, token)
    assert provider.seen() == []
    assert openai(provider)._summarize(REQUEST, None) == REPLY
    assert len(provider.seen()) == 1


# ---- cancellation -------------------------------------------------------------------------


@pytest.mark.no_leak_check
def test_a_token_aborts_a_stalled_transfer(provider, key):
    provider.reset(stall=5.0)
    s = openai(provider, timeout=10)
    token = _ext.CancelToken()
    outcome = {}

    def work():
        try:
            s._summarize(REQUEST, token)
        except ctxkeel.Error as exc:
            outcome["error"] = exc
            outcome["at"] = time.monotonic()

    thread = threading.Thread(target=work)
    thread.start()
    while not provider.count():
        time.sleep(0.01)
    cancelled_at = time.monotonic()
    token.cancel()
    thread.join(3.0)
    assert not thread.is_alive()
    assert outcome["error"].code == "CK_ECANCELED"
    # The core polls the flag about every 100 ms: well before the 5 s stall ends.
    assert outcome["at"] - cancelled_at < 0.3


@pytest.mark.no_leak_check
def test_cancellation_latency_while_the_server_is_silent(provider, key):
    # Cancelled at different points of a silent wait: each time the transfer stops within
    # the core's poll interval (libcurl's own progress callback fires only once a second).
    provider.reset(stall=5.0)
    s = openai(provider, timeout=10)
    for delay in (0.15, 0.45, 0.7):
        token = _ext.CancelToken()
        timer = threading.Timer(delay, token.cancel)
        start = time.monotonic()
        timer.start()
        err = expect_error("CK_ECANCELED", s._summarize, REQUEST, token)
        assert time.monotonic() - start - delay < 0.3, (delay, str(err))


@pytest.mark.no_leak_check
def test_acompact_cancelled_mid_transfer(provider, key, tmp_path):
    messages = folding_history()
    c = soft_compactor(tmp_path, messages)
    s = openai(provider, timeout=10)
    provider.reset(stall=5.0)

    async def main():
        task = asyncio.ensure_future(c.acompact(messages, summarize=s))
        for _ in range(300):
            if provider.count():
                break
            await asyncio.sleep(0.01)
        assert provider.count() == 1  # the request reached the server
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - start

    assert asyncio.run(main()) < 0.5
    assert not c._core.busy
    # The transfer was aborted, not left to run for the server's 5 s.
    assert wait_for_no_transfer(0.5) is not None
    # The compactor is usable afterwards, with the same summarizer.
    provider.reset()
    result = asyncio.run(c.acompact(messages, summarize=s))
    assert result.tier == "soft" and result.record["fallback"] is None
    assert NEXT_STEPS in result.record["checkpoint"]


@pytest.mark.no_leak_check
def test_compact_summarize_timeout_aborts_the_transfer(provider, key, tmp_path):
    messages = folding_history()
    c = soft_compactor(tmp_path, messages, summarize_timeout=0.3)
    s = openai(provider, timeout=10)
    provider.reset(stall=5.0)
    start = time.monotonic()
    result = c.compact(messages, summarize=s)
    assert time.monotonic() - start < 0.8
    check_result(c, messages, result, 1)
    assert result.record["fallback"] == "summarizer timed out after 0.3 s"
    assert transfer_threads() == []  # aborted before compact() returned
    # The compactor is free again; the fallback checkpoint already covers the span.
    provider.reset()
    again = c.compact(messages, summarize=s)
    assert again.record is None and provider.seen() == []


@pytest.mark.no_leak_check
def test_acompact_summarize_timeout_aborts_the_transfer(provider, key, tmp_path):
    messages = folding_history()
    c = soft_compactor(tmp_path, messages, summarize_timeout=0.3)
    s = anthropic(provider, timeout=10)
    provider.reset(stall=5.0)

    async def main():
        start = time.monotonic()
        result = await c.acompact(messages, summarize=s)
        return result, time.monotonic() - start

    result, elapsed = asyncio.run(main())
    assert elapsed < 0.8
    assert result.record["fallback"] == "summarizer timed out after 0.3 s"
    assert wait_for_no_transfer(0.1) is not None  # aborted before acompact() returned


def test_acompact_failure_becomes_the_fallback(provider, key, tmp_path):
    messages = folding_history()
    c = soft_compactor(tmp_path, messages)
    provider.reset(script=[(200, {}, b"not json")])
    result = asyncio.run(c.acompact(messages, summarize=openai(provider)))
    assert "not JSON" in result.record["fallback"]
    assert "CK_ESUMMARY" in result.record["fallback"]
    assert len(provider.seen()) == 1


# ---- the GIL ------------------------------------------------------------------------------


@pytest.mark.no_leak_check
def test_two_threads_on_one_summarizer_overlap(provider, key):
    # No busy flag here, unlike Compactor: the core serves concurrent calls on one object.
    provider.reset(stall=1.0)
    s = openai(provider)
    replies = []

    def work():
        replies.append(s(REQUEST))

    threads = [threading.Thread(target=work) for _ in range(2)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    assert replies == [REPLY, REPLY]
    assert elapsed < 1.7, elapsed  # one stall, not two in a row: the GIL was released
    assert len(provider.seen()) == 2


@pytest.mark.no_leak_check
def test_threads_on_separate_summarizers(provider, key):
    provider.reset(stall=0.5)
    summarizers = [openai(provider), anthropic(provider), openai(provider), anthropic(provider)]
    replies = [None] * len(summarizers)

    def work(k):
        replies[k] = summarizers[k](REQUEST)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(summarizers))]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - start < 1.5
    assert replies == [REPLY] * 4
    assert [s.last_usage for s in summarizers] == [(11, 22), (101, 57)] * 2


@pytest.mark.no_leak_check
def test_the_loop_keeps_running_during_an_http_summary(provider, key, tmp_path):
    messages = folding_history()
    c = soft_compactor(tmp_path, messages)
    s = openai(provider)
    provider.reset(stall=0.6)

    async def main():
        ticks = 0
        done = False

        async def ticker():
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0.01)

        tick_task = asyncio.ensure_future(ticker())
        try:
            result = await c.acompact(messages, summarize=s)
        finally:
            done = True
            await tick_task
        return result, ticks

    result, ticks = asyncio.run(main())
    assert result.record["fallback"] is None
    assert NEXT_STEPS in result.record["checkpoint"]
    assert ticks >= 20, ticks


# ---- the key ------------------------------------------------------------------------------


def echo_key(record):
    """A 401 that quotes the key it received, as some providers do."""
    sent = record["headers"].get("authorization", "").replace("Bearer ", "")
    sent = sent or record["headers"].get("x-api-key", "")
    return 401, {}, error_body("Incorrect API key provided: %s." % sent)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_the_key_appears_nowhere(provider, key, tmp_path, api):
    provider.reset()
    make = openai if api == "openai" else anthropic
    s = make(provider, headers={"X-Org": "org-1"})
    texts = [repr(s)]
    texts += [str(getattr(s, name)) for name in ("base_url", "model", "api", "api_key_env",
                                                 "header_names")]

    provider.reset(script=[echo_key])
    err = expect_error("CK_ESUMMARY", s, REQUEST)
    assert "HTTP 401" in str(err) and "Incorrect API key provided" in str(err)
    texts += [str(err), repr(err), repr(err.args)]

    messages = folding_history()
    store = fresh_dir(tmp_path)
    c = ctxkeel.Compactor(window_for(messages, 0.75), store_dir=store)
    provider.reset(script=[echo_key])
    failed = c.compact(messages, summarize=s)
    assert "HTTP 401" in failed.record["fallback"]
    provider.reset()
    c2 = ctxkeel.Compactor(window_for(messages, 0.75), store_dir=store)
    succeeded = c2.compact(messages, summarize=s)
    assert succeeded.record["fallback"] is None
    texts += [json.dumps(failed.record), json.dumps(succeeded.record)]
    for folder, _, files in os.walk(store):
        for name in files:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
    # The key was sent...
    sent = provider.seen()[0]["headers"]
    assert SECRET in (sent.get("authorization", "") + sent.get("x-api-key", ""))
    # ...and shows up in nothing the caller can see.
    for text in texts:
        assert SECRET not in text


# ---- the object ---------------------------------------------------------------------------


def test_repr_and_attributes(provider):
    provider.reset()
    s = ctxkeel.HttpSummarizer("https://user:pa55@api.example.com/v1", "gpt-x",
                               api_key_env="MY_KEY", timeout=12.5, max_retries=0,
                               headers={"X-Org": "secret-org-value", "X-Trace": "t"},
                               backoff=0)
    text = repr(s)
    assert text == ("HttpSummarizer('https://***@api.example.com/v1', 'gpt-x', api='openai', "
                    "api_key_env='MY_KEY', timeout=12.5, max_retries=0, backoff=0.0, "
                    "headers={'X-Org': '***', 'X-Trace': '***'})")
    assert "pa55" not in text and "secret-org-value" not in text
    assert s.base_url == "https://***@api.example.com/v1"
    assert (s.model, s.api, s.api_key_env, s.timeout, s.max_retries, s.backoff) == (
        "gpt-x", "openai", "MY_KEY", 12.5, 0, 0.0)
    assert s.header_names == ("X-Org", "X-Trace")
    d = ctxkeel.HttpSummarizer(provider.anthropic_url, "c", api="anthropic")
    assert repr(d) == ("HttpSummarizer(%r, 'c', api='anthropic', api_key_env="
                       "'ANTHROPIC_API_KEY', timeout=60.0, max_retries=3, backoff=0.5)"
                       % provider.anthropic_url)
    assert "api_key_env=''" in repr(ctxkeel.HttpSummarizer(provider.openai_url, "m",
                                                           api_key_env=""))
    with pytest.raises(AttributeError):
        s.model = "other"
    assert callable(s)


@pytest.mark.no_leak_check
def test_signature_and_names():
    assert ctxkeel.HttpSummarizer is _ext.HttpSummarizer
    assert str(inspect.signature(ctxkeel.HttpSummarizer)) == (
        "(base_url, model, *, api='openai', api_key_env=None, timeout=60, max_retries=3, "
        "headers=None, backoff=0.5, reasoning_model=None, extra_body=None)")
    assert str(inspect.signature(_ext.HttpSummarizer._summarize)) == "(self, request, cancel, /)"
    assert "HttpSummarizer" in ctxkeel.__all__


@pytest.mark.parametrize("kwargs,exc,where", [
    ({"base_url": "ftp://example.com"}, ctxkeel.InputError, "base_url"),
    ({"base_url": "http://a\0b"}, ctxkeel.InputError, "base_url"),
    ({"base_url": b"http://x"}, TypeError, None),
    ({"model": ""}, ctxkeel.InputError, "model"),
    ({"model": None}, TypeError, None),
    ({"api": "gemini"}, ctxkeel.InputError, "api"),
    ({"api": 1}, TypeError, None),
    ({"api_key_env": 5}, TypeError, None),
    ({"timeout": 0}, ctxkeel.InputError, "timeout"),
    ({"timeout": -1.0}, ctxkeel.InputError, "timeout"),
    ({"timeout": float("nan")}, ctxkeel.InputError, "timeout"),
    ({"timeout": float("inf")}, ctxkeel.InputError, "timeout"),
    ({"timeout": 10 ** 400}, ctxkeel.InputError, "timeout"),
    ({"timeout": True}, TypeError, None),
    ({"timeout": "60"}, TypeError, None),
    ({"max_retries": -1}, ctxkeel.InputError, "max_retries"),
    ({"max_retries": 21}, ctxkeel.InputError, "max_retries"),
    ({"max_retries": 2 ** 80}, ctxkeel.InputError, "max_retries"),
    ({"max_retries": 1.0}, TypeError, None),
    ({"backoff": -0.1}, ctxkeel.InputError, "backoff"),
    ({"headers": [("X-A", "b")]}, TypeError, None),
    ({"headers": {"X-A": 1}}, TypeError, None),
    ({"headers": {1: "b"}}, TypeError, None),
    ({"headers": {"Bad Name": "b"}}, ctxkeel.InputError, "headers[Bad Name]"),
    ({"headers": {"X-A:": "b"}}, ctxkeel.InputError, "headers[X-A:]"),
    ({"headers": {"": "b"}}, ctxkeel.InputError, "headers[]"),
    ({"headers": {"X-A": "b\r\nX-Evil: 1"}}, ctxkeel.InputError, "headers[X-A]"),
    ({"headers": {"X-A": "b\0"}}, ctxkeel.InputError, "headers[X-A]"),
    ({"reasoning_model": 1}, TypeError, None),
    ({"reasoning_model": "yes"}, TypeError, None),
    ({"extra_body": [1, 2]}, ctxkeel.InputError, "extra_body"),
    ({"extra_body": "text"}, ctxkeel.InputError, "extra_body"),
    ({"extra_body": 3}, ctxkeel.InputError, "extra_body"),
    ({"extra_body": {"a": object()}}, TypeError, None),
])
def test_bad_arguments(kwargs, exc, where):
    args = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    args.update(kwargs)
    base_url, model = args.pop("base_url"), args.pop("model")
    with pytest.raises(exc) as info:
        ctxkeel.HttpSummarizer(base_url, model, **args)
    if where is not None:
        assert info.value.code == "CK_EINVAL" and info.value.where == where, str(info.value)


def test_bad_requests(provider, key):
    provider.reset()
    s = openai(provider)
    with pytest.raises(TypeError):
        s("not a dict")
    with pytest.raises(TypeError):
        s()
    with pytest.raises(ctxkeel.InputError) as info:
        s({"system": "x", "max_tokens": 5})
    assert info.value.code == "CK_EMISSING" and info.value.where == "request['prompt']"
    for bad in ({"prompt": 1, "max_tokens": 5}, {"prompt": "x", "max_tokens": "5"},
                {"prompt": "x", "max_tokens": True}, {"prompt": "x", "system": 3,
                                                       "max_tokens": 5}):
        with pytest.raises(TypeError):
            s(bad)
    for tokens in (0, -1, 2 ** 70):
        with pytest.raises(ctxkeel.InputError) as info:
            s({"prompt": "x", "max_tokens": tokens})
        assert info.value.where == "request['max_tokens']"
    with pytest.raises(ctxkeel.InputError) as info:
        s({"prompt": "bad \ud800 text", "max_tokens": 5})
    assert info.value.code == "CK_EUTF8"
    with pytest.raises(TypeError):
        s._summarize(REQUEST, "token")
    with pytest.raises(TypeError):
        _ext.CancelToken(1)
    assert provider.seen() == []
    # Only the prompt is required: no system prompt is an empty one, max_tokens is 1024.
    assert s({"prompt": "x"}) == REPLY
    (seen,) = provider.seen()
    assert seen["body"]["max_tokens"] == 1024
    assert seen["body"]["messages"][0] == {"role": "system", "content": ""}


# ---- issue 21: the key and the deadline ---------------------------------------------------


def echo_key_in_a_reply(record):
    """A 200 whose text quotes the key it received (a proxy that echoes its input)."""
    status, headers, payload = success(record)
    sent = record["headers"].get("authorization", "").replace("Bearer ", "")
    sent = sent or record["headers"].get("x-api-key", "")
    body = json.loads(payload)
    text = REPLY + "\nDebug: the key %s was used." % sent
    if record["path"] == "/v1/messages":
        body["content"][0]["text"] = text
    else:
        body["choices"][0]["message"]["content"] = text
    return status, headers, json.dumps(body).encode()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_key_echoed_in_a_reply_is_redacted(provider, key, tmp_path, api):
    make = openai if api == "openai" else anthropic
    s = make(provider)
    provider.reset(script=[echo_key_in_a_reply])
    text = s(REQUEST)
    assert SECRET not in text and "the key [redacted] was used" in text
    messages = folding_history()
    store = fresh_dir(tmp_path)
    c = ctxkeel.Compactor(window_for(messages, 0.75), store_dir=store)
    provider.reset(script=[echo_key_in_a_reply])
    result = c.compact(messages, summarize=s)
    assert result.record["fallback"] is None and "[redacted]" in result.record["checkpoint"]
    texts = [json.dumps(result.record)] + [json.dumps(m) for m in result.messages]
    for folder, _, files in os.walk(store):
        for name in files:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
    assert all(SECRET not in t for t in texts)
    assert len(provider.seen()) == 1


@pytest.mark.parametrize("bad", ["sk-a\r\nX-Injected: 1", "sk-a\n", "sk\x01a"])
def test_a_key_with_a_line_break_is_never_sent(provider, monkeypatch, bad):
    monkeypatch.setenv(KEY_ENV, bad)
    provider.reset()
    err = expect_error("CK_EINVAL", openai(provider), REQUEST)
    assert KEY_ENV in str(err) and "control character" in str(err) and "sk" not in str(err)
    assert provider.seen() == []


@pytest.mark.no_leak_check
def test_timeout_bounds_the_whole_call(provider, key):
    # Retry-After: 60 with 1 s left: the call ends now instead of sleeping through it.
    provider.reset(script=[(429, {"Retry-After": "60"}, error_body("slow down"))] * 3)
    s = openai(provider, timeout=1, max_retries=3)
    start = time.monotonic()
    err = expect_error("CK_ESUMMARY", s, REQUEST)
    assert time.monotonic() - start < 10  # the old code slept 60 s before its second try
    assert "HTTP 429" in str(err) and "would pass the 1.0 s timeout" in str(err)
    assert len(provider.seen()) == 1


# ---- issue 15: fields per model, extra_body ----------------------------------------------


@pytest.mark.parametrize("model,reasoning", [
    ("gpt-4o", False), ("gpt-4.1-mini", False), ("llama3", False),
    ("o1", True), ("o3-mini", True), ("o4-mini", True), ("gpt-5", True), ("gpt-5-mini", True),
    ("openai/o3", True),
])
def test_the_model_name_picks_the_fields(provider, key, model, reasoning):
    provider.reset()
    s = ctxkeel.HttpSummarizer(provider.openai_url, model, api_key_env=KEY_ENV)
    assert s.reasoning_model is reasoning
    assert "reasoning_model" not in repr(s)
    assert s(REQUEST) == REPLY
    (seen,) = provider.seen()
    body = seen["body"]
    if reasoning:
        assert body["max_completion_tokens"] == 321
        assert "max_tokens" not in body and "temperature" not in body
    else:
        assert body["max_tokens"] == 321 and body["temperature"] == 0
        assert "max_completion_tokens" not in body


def test_reasoning_model_overrides_the_name(provider, key):
    provider.reset()
    s = ctxkeel.HttpSummarizer(provider.openai_url, "o3-mini", api_key_env=KEY_ENV,
                               reasoning_model=False)
    assert s.reasoning_model is False and "reasoning_model=False" in repr(s)
    s(REQUEST)
    t = ctxkeel.HttpSummarizer(provider.openai_url, "my-reasoner", api_key_env=KEY_ENV,
                               reasoning_model=True)
    assert t.reasoning_model is True and repr(t).endswith("reasoning_model=True)")
    t(REQUEST)
    # Anthropic's API always takes max_tokens.
    a = anthropic(provider, reasoning_model=True)
    assert a.reasoning_model is False
    a(REQUEST)
    first, second, third = (r["body"] for r in provider.seen())
    assert first["max_tokens"] == 321 and first["temperature"] == 0
    assert second["max_completion_tokens"] == 321 and "temperature" not in second
    assert third["max_tokens"] == 321


def test_extra_body_is_merged(provider, key):
    provider.reset()
    extra = {"reasoning_effort": "low", "temperature": 0.7, "metadata": {"n": [1, "\0x"]}}
    s = openai(provider, extra_body=extra)
    extra["temperature"] = 9  # copied when the summarizer is made
    assert s(REQUEST) == REPLY
    a = anthropic(provider, extra_body={"metadata": {"user_id": "u-1"}})
    assert a(REQUEST) == REPLY
    openai_seen, anthropic_seen = provider.seen()
    body = openai_seen["body"]
    assert body["reasoning_effort"] == "low" and body["temperature"] == 0.7
    assert body["metadata"] == {"n": [1, "\0x"]}
    assert body["model"] == "gpt-test" and body["max_tokens"] == 321
    assert anthropic_seen["body"]["metadata"] == {"user_id": "u-1"}
    assert anthropic_seen["body"]["system"] == REQUEST["system"]


# ---- issue 15: usage objects ---------------------------------------------------------------


class Pydantic:
    """Stands in for an SDK's pydantic usage model: only model_dump() is used."""

    def __init__(self, **fields):
        self._fields = fields

    def model_dump(self):
        return dict(self._fields)


class Slotted:
    __slots__ = ("prompt_tokens", "completion_tokens")

    def __init__(self, prompt_tokens):
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = 3


def usage_shapes(n):
    """Every shape observe_usage() reads, each saying the whole prompt is n tokens."""
    import types
    cached, created = n // 2, n // 4
    anthropic_usage = {"input_tokens": n - cached - created, "cache_read_input_tokens": cached,
                       "cache_creation_input_tokens": created, "output_tokens": 9}
    return [
        {"prompt_tokens": n, "completion_tokens": 5, "total_tokens": n + 5,
         "prompt_tokens_details": {"cached_tokens": cached}},
        {"input_tokens": n, "input_tokens_details": {"cached_tokens": cached},
         "output_tokens": 5},
        anthropic_usage,
        Pydantic(**anthropic_usage),
        {"id": "msg_1", "type": "message", "usage": anthropic_usage},
        {"inputTokens": n, "outputTokens": 5, "cachedInputTokens": cached},
        {"promptTokens": n, "completionTokens": 5},
        {"promptTokenCount": n, "cachedContentTokenCount": cached},
        Pydantic(prompt_token_count=n, candidates_token_count=4),
        {"candidates": [], "usageMetadata": {"promptTokenCount": n}},
        types.SimpleNamespace(prompt_tokens=n, completion_tokens=2),
        Slotted(n),
        types.SimpleNamespace(usage=types.SimpleNamespace(input_tokens=n)),
    ]


def test_observe_usage_reads_each_provider_shape(tmp_path):
    messages = synthetic_history(turns=6)
    for i in range(len(usage_shapes(0))):
        c = ctxkeel.Compactor(window_for(messages, 0.9), store_dir=fresh_dir(tmp_path))
        result = c.compact(messages)
        shape = usage_shapes(round(result.tokens_after * 1.5))[i]
        c.observe_usage(shape)
        assert abs(c.usage_factor - 1.5) < 0.01, (shape, c.usage_factor)


def test_observe_usage_counts_anthropics_cached_prompt(tmp_path):
    # Anthropic's input_tokens alone (the uncached part) drove the factor to its 0.5 floor.
    messages = synthetic_history(turns=6)
    c = ctxkeel.Compactor(window_for(messages, 0.9), store_dir=fresh_dir(tmp_path))
    n = c.compact(messages).tokens_after
    c.observe_usage({"input_tokens": 12, "cache_read_input_tokens": n - 12,
                     "cache_creation_input_tokens": 0, "output_tokens": 40})
    assert abs(c.usage_factor - 1.0) < 0.01


def test_observe_usage_refuses_unknown_shapes(tmp_path):
    c = ctxkeel.Compactor(10000, store_dir=fresh_dir(tmp_path))
    with pytest.raises(ctxkeel.InputError) as info:
        c.observe_usage({"completion_tokens": 5})
    assert info.value.code == "CK_EINVAL" and "prompt_tokens" in info.value.where
    assert "input_tokens" in info.value.where and "promptTokenCount" in info.value.where
    with pytest.raises(ctxkeel.InputError) as info:
        c.observe_usage({"usage": {"input_tokens": 5, "cache_read_input_tokens": -1}})
    assert info.value.where == "usage.cache_read_input_tokens"
    with pytest.raises(ctxkeel.InputError):
        c.observe_usage({"prompt_tokens": float("nan")})
    with pytest.raises(TypeError):
        c.observe_usage(object())
    with pytest.raises(TypeError):
        c.observe_usage("100")  # a str stays a TypeError, as before
    with pytest.raises(TypeError):
        _ext.usage_prompt_tokens(b"{}")
    assert _ext.usage_prompt_tokens('{"prompt_tokens": 7}') == 7
