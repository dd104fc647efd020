'use strict';

// HttpSummarizer: the built-in HTTP summarizer against a real local server that plays both the
// OpenAI Chat Completions and the Anthropic Messages API. Requests are checked as the server
// sees them; failures (HTTP errors, retries, timeouts, bad replies, no server) come back as
// coded errors or as a compaction's fallback; transfers run off the event loop, concurrently,
// and stop when their signal aborts; the API key never shows.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const util = require('node:util');
const { execFile } = require('node:child_process');
const { Worker } = require('node:worker_threads');
const h = require('./helpers.js');
const s = require('./sessions.js');

const { ctxkeel } = h;
const { Compactor, HttpSummarizer } = ctxkeel;
const addonPath = path.join(h.repoRoot, 'build', 'Release', 'ctxkeel.node');

const KEY_ENV = 'CTXKEEL_TEST_HTTP_KEY';
const KEY = 'sk-test-SECRET';

const CHECKPOINT = [
  '## User Intent',
  'Fix the failing test in tests/test_api.py without changing the public API.',
  '## Execution Progress',
  'Read the handlers; the bug is in the date parser.',
  '## Key Decisions',
  '- Keep the public API unchanged.',
  '## Tried Solutions',
  '- Re-running the tests without changes: still failing.',
  '## Next Steps',
  '- Deploy the patched parser to staging-7731 and re-run the suite.',
].join('\n');
const NEXT_STEP = 'Deploy the patched parser to staging-7731';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Every error text, record and inspect output the tests produce; none may hold the key.
const shown = [];
function keep(value) {
  if (value instanceof Error) shown.push(`${value.message}\n${value.stack}`);
  else shown.push(typeof value === 'string' ? value : JSON.stringify(value));
  return value;
}

/** Awaits `promise`, expecting a rejection; returns the error (and keeps its text). */
async function failure(promise) {
  try {
    await promise;
  } catch (err) {
    return keep(err);
  }
  assert.fail('the promise resolved');
}

// ---- the fake model server ----

function openaiReply(text, usage = { prompt_tokens: 120, completion_tokens: 45 }) {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    model: 'cheap-model',
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  };
}

function anthropicReply(text, usage = { input_tokens: 99, output_tokens: 33 }) {
  return {
    id: 'msg_1',
    type: 'message',
    role: 'assistant',
    model: 'cheap-model',
    content: [{ type: 'text', text }],
    stop_reason: 'end_turn',
    usage,
  };
}

function sendJson(res, status, body, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

/** The usual model: the checkpoint for the API the URL names, 404 for any other path. */
function answer(req, res, text = CHECKPOINT) {
  if (req.url === '/v1/chat/completions') return sendJson(res, 200, openaiReply(text));
  if (req.url === '/v1/messages') return sendJson(res, 200, anthropicReply(text));
  return sendJson(res, 404, { error: { message: `no route ${req.url}` } });
}

/**
 * A local HTTP server that records every request ({method, url, headers, body, raw, closed})
 * and answers with the handler a test sets: handler(record, res).
 */
class FakeModel {
  constructor() {
    this.requests = [];
    this.handler = answer;
    this.arrivals = [];
    this.server = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        let body = null;
        try {
          body = JSON.parse(raw);
        } catch {
          body = null;
        }
        const record = { method: req.method, url: req.url, headers: req.headers, body, raw };
        // Set when the client goes away before the reply is complete.
        record.closed = new Promise((resolve) => res.on('close', () => resolve(Date.now())));
        this.requests.push(record);
        for (const resolve of this.arrivals.splice(0)) resolve(record);
        this.handler(record, res);
      });
    });
  }

  async start() {
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = this.server.address().port;
    this.openai = `http://127.0.0.1:${this.port}/v1`;
    this.anthropic = `http://127.0.0.1:${this.port}`;
  }

  /** Forgets earlier requests and answers the next ones with `handler`. */
  use(handler) {
    this.requests = [];
    this.handler = handler;
  }

  /** Resolves with the record of the next request that arrives. */
  nextRequest() {
    return new Promise((resolve) => this.arrivals.push(resolve));
  }

  async stop() {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

const model = new FakeModel();
const made = [];

/** An HttpSummarizer for `api` against the fake model, with the test key. */
function summarizer(api = 'openai', options = {}) {
  const summarizerObject = new HttpSummarizer({
    baseUrl: api === 'anthropic' ? model.anthropic : model.openai,
    model: 'cheap-model',
    api,
    apiKeyEnv: KEY_ENV,
    ...options,
  });
  made.push(summarizerObject);
  return summarizerObject;
}

/** A compactor whose window puts HISTORY at the soft tier. HISTORY has one large output in
 * thirty turns, so offloads cannot reach the target alone: the span is folded, with a summary. */
const HISTORY = s.syntheticHistory(30, 1, { bigEvery: 15 });
const stores = [];
function softCompactor(options = {}) {
  const contextWindow = Math.ceil(ctxkeel.estimateTokens(HISTORY) / 0.75);
  const storeDir = s.tmpStore();
  stores.push(storeDir);
  return new Compactor({ contextWindow, storeDir, ...options });
}

const REQUEST = { system: 'You write checkpoints.', prompt: 'Summarize: the agent ran ls.',
  maxTokens: 300 };

before(async () => {
  process.env[KEY_ENV] = KEY;
  await model.start();
});

after(async () => {
  for (const x of made) x.close();
  await model.stop();
  delete process.env[KEY_ENV];
  s.removeStores();
});

describe('new HttpSummarizer()', () => {
  it('shows its options in util.inspect, header values and the key left out', () => {
    const x = summarizer('anthropic', { headers: { 'X-Org': 'org-hidden-value' }, timeout: 5 });
    const text = keep(util.inspect(x));
    assert.match(text, /^HttpSummarizer \{/);
    for (const part of [model.anthropic, 'cheap-model', "'anthropic'", KEY_ENV, 'X-Org',
      'timeout: 5', 'maxRetries: 3', 'backoff: 0.5']) {
      assert.ok(text.includes(part), `${part} is not in ${text}`);
    }
    assert.ok(!text.includes('org-hidden-value'));
    assert.ok(!text.includes(KEY));
    assert.equal(util.inspect({ a: { b: x } }, { depth: 0 }), '{ a: [Object] }');
    assert.equal(x.lastUsage, null);
    assert.equal(x.pending, 0);
    assert.equal(x.closed, false);
    assert.equal(keep(util.inspect(summarizer())).includes(KEY), false);
  });

  const base = { baseUrl: 'http://127.0.0.1:1/v1', model: 'm' };
  const BAD = [
    ['no options', undefined, TypeError, /options must be an object/],
    ['no baseUrl', { model: 'm' }, TypeError, /options\.baseUrl is required/],
    ['a numeric baseUrl', { ...base, baseUrl: 8000 }, TypeError, /options\.baseUrl/],
    ['a baseUrl that is not http', { ...base, baseUrl: 'ftp://x' }, RangeError,
      /options\.baseUrl/],
    ['no model', { baseUrl: base.baseUrl }, TypeError, /options\.model is required/],
    ['an empty model', { ...base, model: '' }, RangeError, /options\.model/],
    ['an unknown api', { ...base, api: 'gemini' }, RangeError, /options\.api/],
    ['a numeric apiKeyEnv', { ...base, apiKeyEnv: 1 }, TypeError, /options\.apiKeyEnv/],
    ['an apiKeyEnv with =', { ...base, apiKeyEnv: 'A=B' }, RangeError, /options\.apiKeyEnv/],
    ['a zero timeout', { ...base, timeout: 0 }, RangeError, /options\.timeout/],
    ['a string timeout', { ...base, timeout: '60' }, TypeError, /options\.timeout/],
    ['a fractional maxRetries', { ...base, maxRetries: 1.5 }, RangeError, /options\.maxRetries/],
    ['a negative maxRetries', { ...base, maxRetries: -1 }, RangeError, /options\.maxRetries/],
    ['too many retries', { ...base, maxRetries: 21 }, RangeError, /options\.maxRetries/],
    ['a negative backoff', { ...base, backoff: -1 }, RangeError, /options\.backoff/],
    ['headers as an array', { ...base, headers: ['X: y'] }, TypeError, /options\.headers/],
    ['a bad header name', { ...base, headers: { 'X Org': 'y' } }, RangeError,
      /options\.headers\["X Org"\]/],
    ['a numeric header value', { ...base, headers: { 'X-Org': 1 } }, TypeError,
      /options\.headers\["X-Org"\]/],
    ['a header value on two lines', { ...base, headers: { 'X-Org': 'a\r\nEvil: 1' } },
      RangeError, /options\.headers\["X-Org"\]/],
    ['a snake_case option', { ...base, api_key_env: 'K' }, RangeError,
      /options\.api_key_env is not an option/],
  ];
  for (const [label, options, type, message] of BAD) {
    it(`rejects ${label}`, () => {
      assert.throws(() => new HttpSummarizer(options), (err) => {
        assert.ok(err instanceof type, `${err.name}: ${err.message}`);
        assert.match(err.message, message);
        return true;
      });
    });
  }

  it('checks the options in C too (the addon loaded directly)', () => {
    const addon = require(addonPath);
    const base2 = { baseUrl: 'http://127.0.0.1:1', model: 'm' };
    assert.throws(() => new addon.HttpSummarizer({ ...base2, baseUrl: 5 }),
      { name: 'TypeError', message: /options\.baseUrl/ });
    assert.throws(() => new addon.HttpSummarizer({ ...base2, maxRetries: 30 }),
      { name: 'RangeError', message: /options\.maxRetries/ });
    assert.throws(() => new addon.HttpSummarizer({ ...base2, headers: { 'a:b': 'c' } }),
      { name: 'RangeError', message: /options\.headers/ });
    assert.throws(() => new addon.HttpSummarizer({ ...base2, api: 'x' }), RangeError);
    assert.throws(() => addon.HttpSummarizer(base2), TypeError);
    const bare = new addon.HttpSummarizer(base2);
    assert.throws(() => bare.start('s', 'p', 0), RangeError);
    assert.throws(() => bare.start('s', 5, 10), { name: 'TypeError', message: /prompt/ });
    assert.throws(() => bare.cancel.call({}, 1), { name: 'TypeError', message: /Illegal/ });
    assert.equal(bare.cancel(12345), false);
    bare.close();
  });

  it('rejects bad summarize() arguments', async () => {
    const x = summarizer();
    await assert.rejects(x.summarize('hi'), { name: 'TypeError', message: /request must be/ });
    await assert.rejects(x.summarize({ system: 's' }), { name: 'TypeError',
      message: /request\.prompt/ });
    await assert.rejects(x.summarize({ prompt: 'p', maxTokens: 0 }), { name: 'RangeError',
      message: /request\.maxTokens/ });
    await assert.rejects(x.summarize({ prompt: 'p' }, { signal: {} }), { name: 'TypeError',
      message: /context\.signal/ });
    assert.equal(model.requests.length, 0);
  });
});

describe('HttpSummarizer.summarize()', () => {
  it('asks an OpenAI-compatible server and returns the reply', async () => {
    model.use(answer);
    const x = summarizer('openai');
    assert.equal(await x.summarize(REQUEST), CHECKPOINT);
    assert.equal(model.requests.length, 1);
    const [req] = model.requests;
    assert.equal(req.method, 'POST');
    assert.equal(req.url, '/v1/chat/completions');
    assert.equal(req.headers.authorization, `Bearer ${KEY}`);
    assert.equal(req.headers['x-api-key'], undefined);
    assert.match(req.headers['content-type'], /^application\/json/);
    assert.equal(req.body.model, 'cheap-model');
    assert.equal(req.body.max_tokens, 300);
    assert.deepEqual(req.body.messages, [
      { role: 'system', content: REQUEST.system },
      { role: 'user', content: REQUEST.prompt },
    ]);
    assert.deepEqual(x.lastUsage, { promptTokens: 120, completionTokens: 45 });
  });

  it('asks Anthropic\'s Messages API and returns the reply', async () => {
    model.use(answer);
    const x = summarizer('anthropic');
    assert.equal(await x.summarize(REQUEST), CHECKPOINT);
    const [req] = model.requests;
    assert.equal(req.url, '/v1/messages');
    assert.equal(req.headers['x-api-key'], KEY);
    assert.equal(req.headers['anthropic-version'], '2023-06-01');
    assert.equal(req.headers.authorization, undefined);
    assert.equal(req.body.model, 'cheap-model');
    assert.equal(req.body.max_tokens, 300);
    assert.equal(req.body.system, REQUEST.system);
    assert.deepEqual(req.body.messages, [{ role: 'user', content: REQUEST.prompt }]);
    assert.deepEqual(x.lastUsage, { promptTokens: 99, completionTokens: 33 });
  });

  it('sends extra headers, and no key when apiKeyEnv is empty', async () => {
    model.use(answer);
    const x = summarizer('anthropic', { apiKeyEnv: '', headers: { 'X-Org': 'acme' } });
    // A base URL that ends in /v1 is accepted for Anthropic as well.
    const y = new HttpSummarizer({ baseUrl: `${model.anthropic}/v1`, model: 'm',
      api: 'anthropic', apiKeyEnv: '' });
    assert.equal(await x.summarize(REQUEST), CHECKPOINT);
    assert.equal(await y.summarize(REQUEST), CHECKPOINT);
    y.close();
    assert.equal(model.requests[0].headers['x-org'], 'acme');
    assert.equal(model.requests[0].headers['x-api-key'], undefined);
    assert.equal(model.requests[1].url, '/v1/messages');
  });

  it('sends the whole prompt when it holds a NUL character', async () => {
    model.use(answer);
    await summarizer().summarize({ system: 'a\0b', prompt: 'binary \0 output, then the rest' });
    assert.deepEqual(model.requests[0].body.messages, [
      { role: 'system', content: 'a\uFFFDb' },
      { role: 'user', content: 'binary \uFFFD output, then the rest' },
    ]);
  });

  it('waits as Retry-After says after a 429, then succeeds', async () => {
    model.use((req, res) => {
      if (model.requests.length === 1) {
        return sendJson(res, 429, { error: { message: 'rate limited' } }, { 'retry-after': '1' });
      }
      return answer(req, res);
    });
    const x = summarizer('openai', { backoff: 0.01 });
    const start = Date.now();
    assert.equal(await x.summarize(REQUEST), CHECKPOINT);
    const elapsed = Date.now() - start;
    assert.equal(model.requests.length, 2);
    assert.ok(elapsed >= 900, `retried after ${elapsed} ms, not after Retry-After: 1`);
  });

  it('retries a 500 until the retries run out, and says so', async () => {
    model.use((req, res) => sendJson(res, 500, { error: { message: 'upstream overloaded' } }));
    const x = summarizer('openai', { maxRetries: 2, backoff: 0.01 });
    const err = await failure(x.summarize(REQUEST));
    assert.ok(err instanceof ctxkeel.CtxkeelError);
    assert.equal(err.code, 'CK_ESUMMARY');
    assert.match(err.message, /^HTTP 500: upstream overloaded \(3 attempts\)$/);
    assert.equal(model.requests.length, 3);
  });

  it('does not retry a 400', async () => {
    model.use((req, res) => sendJson(res, 400, { error: { message: 'max_tokens too large' } }));
    const err = await failure(summarizer('anthropic', { backoff: 0.01 }).summarize(REQUEST));
    assert.equal(err.code, 'CK_ESUMMARY');
    assert.equal(err.message, 'HTTP 400: max_tokens too large');
    assert.equal(model.requests.length, 1);
  });

  it('rejects a reply that is not JSON, or has no text', async () => {
    model.use((req, res) => sendJson(res, 200, '{"choices": [ {"message": '));
    let err = await failure(summarizer().summarize(REQUEST));
    assert.equal(err.code, 'CK_ESUMMARY');
    assert.match(err.message, /not JSON/);
    model.use((req, res) => sendJson(res, 200, { choices: [] }));
    err = await failure(summarizer().summarize(REQUEST));
    assert.equal(err.code, 'CK_ESUMMARY');
    assert.match(err.message, /no text/);
  });

  it('times out a server that stalls', async () => {
    model.use(() => {});
    const x = summarizer('openai', { timeout: 0.3, maxRetries: 0 });
    const start = Date.now();
    const err = await failure(x.summarize(REQUEST));
    assert.equal(err.code, 'CK_ETIMEDOUT');
    assert.match(err.message, /0\.3 s/);
    assert.ok(Date.now() - start < 2000);
  });

  it('reports a refused connection', async () => {
    const closed = http.createServer();
    await new Promise((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address();
    await new Promise((resolve) => closed.close(resolve));
    const x = new HttpSummarizer({ baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm',
      apiKeyEnv: KEY_ENV, maxRetries: 0 });
    const err = await failure(x.summarize(REQUEST));
    assert.equal(err.code, 'CK_EIO');
    assert.match(err.message, /^connection failed: /);
  });

  it('stops mid-transfer when the signal aborts', async () => {
    model.use((req, res) => res.writeHead(200, { 'content-type': 'application/json' }));
    const x = summarizer();
    const controller = new AbortController();
    const arrived = model.nextRequest();
    const pending = x.summarize(REQUEST, { signal: controller.signal });
    const req = await arrived;
    assert.equal(x.pending, 1);
    const start = Date.now();
    controller.abort(new Error('the user pressed stop'));
    const err = await failure(pending);
    assert.ok(Date.now() - start < 1000, `took ${Date.now() - start} ms`);
    assert.equal(err.code, 'CK_ECANCELED');
    assert.equal(err.cause.message, 'the user pressed stop');
    assert.equal(model.requests.length, 1);
    // The transfer itself stops: the client goes away and the work item ends.
    const gone = await Promise.race([req.closed, sleep(3000).then(() => null)]);
    assert.ok(gone !== null, 'the connection stayed open after the abort');
    while (x.pending) await sleep(10);
  });

  it('rejects at once for a signal aborted already', async () => {
    model.use(answer);
    const err = await failure(summarizer().summarize(REQUEST, { signal: AbortSignal.abort() }));
    assert.equal(err.code, 'CK_ECANCELED');
    assert.equal(model.requests.length, 0);
  });

  it('runs two summaries at the same time', async () => {
    // Neither request is answered until both are in: two sequential transfers would wait for
    // the 3 s safety valve instead.
    const held = [];
    model.use((req, res) => {
      held.push([req, res]);
      const release = () => {
        for (const [r, out] of held.splice(0)) {
          sendJson(out, 200, openaiReply(`reply to ${r.body.messages[1].content}`));
        }
      };
      if (held.length === 2) release();
      else setTimeout(release, 3000);
    });
    const x = summarizer();
    const start = Date.now();
    const replies = await Promise.all([
      x.summarize({ ...REQUEST, prompt: 'first' }),
      x.summarize({ ...REQUEST, prompt: 'second' }),
    ]);
    assert.deepEqual(replies, ['reply to first', 'reply to second']);
    assert.ok(Date.now() - start < 2500, 'the two transfers did not overlap');
  });

  it('keeps the event loop free while a reply is slow', async () => {
    model.use((req, res) => setTimeout(() => answer(req, res), 1000));
    const x = summarizer();
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    try {
      assert.equal(await x.summarize(REQUEST), CHECKPOINT);
    } finally {
      clearInterval(timer);
    }
    assert.ok(ticks >= 50, `only ${ticks} ticks of 10 ms during a 1 s summary`);
  });

  it('never shows a key that the provider echoes back', async () => {
    model.use((req, res) => sendJson(res, 401, {
      error: { message: `Incorrect API key provided: ${req.headers.authorization}` },
    }));
    const err = await failure(summarizer().summarize(REQUEST));
    assert.equal(err.code, 'CK_ESUMMARY');
    assert.match(err.message, /^HTTP 401: Incorrect API key provided: Bearer \[redacted\]$/);
    assert.ok(!err.message.includes(KEY) && !err.stack.includes(KEY));
  });

  it('close() cancels what is in flight; later calls reject with CK_ECLOSED', async () => {
    model.use(() => {});
    const x = summarizer();
    const arrived = model.nextRequest();
    const pending = x.summarize(REQUEST);
    await arrived;
    x.close();
    x.close();
    assert.equal(x.closed, true);
    assert.equal((await failure(pending)).code, 'CK_ECANCELED');
    assert.equal((await failure(x.summarize(REQUEST))).code, 'CK_ECLOSED');
    assert.equal(x.pending, 0);
  });
});

describe('HttpSummarizer as compact()\'s summarizer', () => {
  for (const api of ['openai', 'anthropic']) {
    it(`writes the checkpoint through the ${api} API at the soft tier`, async () => {
      model.use(answer);
      const compactor = softCompactor();
      const result = keep(await compactor.compact(HISTORY, { summarize: summarizer(api) }));
      assert.equal(result.tier, 'soft');
      assert.equal(result.record.fallback, null);
      assert.ok(result.record.checkpoint.includes(NEXT_STEP), result.record.checkpoint);
      assert.ok(result.record.anchors.next_steps.includes(NEXT_STEP));
      assert.equal(result.messages.filter(s.isCheckpoint).length, 1);
      assert.equal(model.requests.length, 1);
      const { body } = model.requests[0];
      assert.ok(Number.isSafeInteger(body.max_tokens) && body.max_tokens > 0);
      const prompt = body.messages.at(-1).content;
      assert.ok(prompt.includes('tests/test_api.py'), 'the history is not in the prompt');
    });
  }

  it('falls back with the reason when every attempt gets a 500', async () => {
    model.use((req, res) => sendJson(res, 500, { error: { message: 'internal error' } }));
    const result = keep(await softCompactor().compact(HISTORY, {
      summarize: summarizer('openai', { maxRetries: 1, backoff: 0.01 }),
    }));
    assert.equal(result.tier, 'soft');
    assert.match(result.record.fallback, /HTTP 500/);
    assert.equal(result.messages.filter(s.isCheckpoint).length, 1);
    assert.equal(model.requests.length, 2);
  });

  it('falls back when the server stalls past the timeout', async () => {
    model.use(() => {});
    const result = keep(await softCompactor().compact(HISTORY, {
      summarize: summarizer('anthropic', { timeout: 0.3, maxRetries: 0 }),
    }));
    assert.match(result.record.fallback, /within 0\.3 s/);
  });

  it('falls back on a malformed reply and on a refused connection', async () => {
    model.use((req, res) => sendJson(res, 200, 'not json at all'));
    let result = keep(await softCompactor().compact(HISTORY, { summarize: summarizer() }));
    assert.match(result.record.fallback, /not JSON/);
    const x = new HttpSummarizer({ baseUrl: 'http://127.0.0.1:1/v1', model: 'm',
      apiKeyEnv: KEY_ENV, maxRetries: 0 });
    result = keep(await softCompactor().compact(HISTORY, { summarize: x }));
    assert.match(result.record.fallback, /connection failed/);
  });

  it('cancels the transfer when summarizeTimeout passes first', async () => {
    model.use(() => {});
    const x = summarizer();
    const arrived = model.nextRequest();
    const result = keep(await softCompactor({ summarizeTimeout: 0.3 }).compact(HISTORY,
      { summarize: x }));
    assert.match(result.record.fallback, /timed out after 0\.3 s/);
    const req = await arrived;
    assert.ok(await Promise.race([req.closed, sleep(3000).then(() => null)]),
      'the transfer went on after the timeout');
    while (x.pending) await sleep(10);
  });

  it('rejects compact() with AbortError when its signal aborts mid-summary', async () => {
    model.use(() => {});
    const x = summarizer();
    const controller = new AbortController();
    const arrived = model.nextRequest();
    const pending = softCompactor().compact(HISTORY, { summarize: x, signal: controller.signal });
    const req = await arrived;
    controller.abort();
    await assert.rejects(pending, { name: 'AbortError' });
    assert.ok(await Promise.race([req.closed, sleep(3000).then(() => null)]));
    while (x.pending) await sleep(10);
  });

  it('still rejects a summarize option that is neither a function nor a summarizer', async () => {
    await assert.rejects(softCompactor().compact(HISTORY, { summarize: { summarise() {} } }),
      { name: 'TypeError', message: /options\.summarize must be a function or an object/ });
  });
});

describe('HttpSummarizer and hostile providers (issue 21)', () => {
  it('blanks a key that a provider echoes in a 200 reply, in the reply and the record', async () => {
    model.use((req, res) => {
      const key = (req.headers.authorization || '').replace('Bearer ', '') ||
        req.headers['x-api-key'];
      return answer(req, res, `${CHECKPOINT}\nDebug: used key ${key}.`);
    });
    for (const api of ['openai', 'anthropic']) {
      const text = keep(await summarizer(api).summarize(REQUEST));
      assert.ok(text.endsWith('Debug: used key [redacted].') && !text.includes(KEY), text);
    }
    const compactor = softCompactor();
    const result = keep(await compactor.compact(HISTORY, { summarize: summarizer() }));
    assert.equal(result.record.fallback, null);
    assert.ok(result.record.checkpoint.includes('[redacted]'));
    keep(result.messages);
  });

  for (const bad of ['sk-a\r\nX-Injected: 1', 'sk-a\n', 'sk\u0001a']) {
    it(`never sends a key holding ${JSON.stringify(bad.slice(-3))}`, async () => {
      model.use(answer);
      process.env.CTXKEEL_TEST_BAD_KEY = bad;
      try {
        const err = await failure(summarizer('openai', { apiKeyEnv: 'CTXKEEL_TEST_BAD_KEY' })
          .summarize(REQUEST));
        assert.equal(err.code, 'CK_EINVAL');
        assert.match(err.message, /CTXKEEL_TEST_BAD_KEY holds a control character/);
        assert.ok(!err.message.includes('sk'));
      } finally {
        delete process.env.CTXKEEL_TEST_BAD_KEY;
      }
      assert.equal(model.requests.length, 0);
    });
  }

  it('ends the whole call within timeout, Retry-After included', async () => {
    model.use((req, res) => sendJson(res, 429, { error: { message: 'slow down' } },
      { 'retry-after': '60' }));
    const started = Date.now();
    const err = await failure(summarizer('openai', { timeout: 1, maxRetries: 3 })
      .summarize(REQUEST));
    assert.ok(Date.now() - started < 10000, 'the old code slept 60 s before its second try');
    assert.equal(err.code, 'CK_ESUMMARY');
    assert.match(err.message, /HTTP 429: slow down; a retry in 60\.0 s would pass the 1\.0 s/);
    assert.equal(model.requests.length, 1);
  });
});

describe('HttpSummarizer options for current models (issue 15)', () => {
  const CASES = [['gpt-4o', false], ['llama3', false], ['o1', true], ['o3-mini', true],
    ['o4-mini', true], ['gpt-5', true], ['gpt-5-mini', true], ['openai/o3', true]];
  for (const [name, reasoning] of CASES) {
    it(`sends the fields ${name} takes`, async () => {
      model.use(answer);
      const x = summarizer('openai', { model: name });
      assert.equal(x.reasoningModel, reasoning);
      assert.ok(util.inspect(x).includes(`reasoningModel: ${reasoning}`));
      await x.summarize(REQUEST);
      const { body } = model.requests[0];
      if (reasoning) {
        assert.equal(body.max_completion_tokens, 300);
        assert.ok(!('max_tokens' in body) && !('temperature' in body), JSON.stringify(body));
      } else {
        assert.equal(body.max_tokens, 300);
        assert.equal(body.temperature, 0);
        assert.ok(!('max_completion_tokens' in body));
      }
    });
  }

  it('lets reasoningModel override the name, and ignores it for Anthropic', async () => {
    model.use(answer);
    await summarizer('openai', { model: 'o3-mini', reasoningModel: false }).summarize(REQUEST);
    await summarizer('openai', { model: 'my-reasoner', reasoningModel: true }).summarize(REQUEST);
    const a = summarizer('anthropic', { model: 'o3', reasoningModel: true });
    assert.equal(a.reasoningModel, false);
    await a.summarize(REQUEST);
    const [first, second, third] = model.requests.map((r) => r.body);
    assert.equal(first.max_tokens, 300);
    assert.equal(first.temperature, 0);
    assert.equal(second.max_completion_tokens, 300);
    assert.ok(!('temperature' in second));
    assert.equal(third.max_tokens, 300);
  });

  it('merges extraBody into every request body', async () => {
    model.use(answer);
    const extraBody = { reasoning_effort: 'low', temperature: 0.7, metadata: { n: [1, '\0x'] } };
    const x = summarizer('openai', { extraBody });
    extraBody.temperature = 9; // copied when the summarizer is made
    await x.summarize(REQUEST);
    await summarizer('anthropic', { extraBody: { metadata: { user_id: 'u-1' } } })
      .summarize(REQUEST);
    const [openai, anthropic] = model.requests;
    assert.equal(openai.body.reasoning_effort, 'low');
    assert.equal(openai.body.temperature, 0.7);
    assert.equal((openai.raw.match(/"temperature"/g) || []).length, 1);
    assert.deepEqual(openai.body.metadata, { n: [1, '\0x'] });
    assert.equal(openai.body.max_tokens, 300);
    assert.deepEqual(anthropic.body.metadata, { user_id: 'u-1' });
    assert.ok(util.inspect(x).includes("extraBody: [ 'reasoning_effort', 'temperature'"));
  });

  it('refuses an extraBody or reasoningModel of the wrong kind', () => {
    const base = { baseUrl: 'http://127.0.0.1:1/v1', model: 'm' };
    for (const extraBody of [[1, 2], 'text', 5]) {
      assert.throws(() => new HttpSummarizer({ ...base, extraBody }), (err) => {
        assert.equal(err.code, 'CK_EINVAL');
        assert.match(err.message, /extraBody|JSON object/);
        return true;
      });
    }
    assert.throws(() => new HttpSummarizer({ ...base, extraBody: () => 1 }), TypeError);
    assert.throws(() => new HttpSummarizer({ ...base, reasoningModel: 'yes' }),
      { name: 'TypeError', message: /options\.reasoningModel/ });
    const addon = require(addonPath);
    assert.throws(() => new addon.HttpSummarizer({ ...base, extraBody: { a: 1 } }),
      { name: 'TypeError', message: /options\.extraBody/ });
    assert.throws(() => new addon.HttpSummarizer({ ...base, reasoningModel: 1 }),
      { name: 'TypeError', message: /options\.reasoningModel/ });
  });
});

describe('Compactor.observeUsage() with usage objects (issue 15)', () => {
  /** Every shape observeUsage() reads, each saying the whole prompt is n tokens. */
  function shapes(n) {
    const cached = Math.floor(n / 2);
    const created = Math.floor(n / 4);
    const anthropic = { input_tokens: n - cached - created, cache_read_input_tokens: cached,
      cache_creation_input_tokens: created, output_tokens: 9 };
    return [
      { prompt_tokens: n, completion_tokens: 5, prompt_tokens_details: { cached_tokens: cached } },
      { input_tokens: n, input_tokens_details: { cached_tokens: cached }, output_tokens: 5 },
      anthropic,
      { id: 'msg_1', type: 'message', usage: anthropic },
      { inputTokens: n, outputTokens: 5, cachedInputTokens: cached, reasoningTokens: undefined },
      { inputTokens: n, inputTokenDetails: { noCacheTokens: n - cached, cacheReadTokens: cached } },
      { promptTokens: n, completionTokens: 5 },
      { text: 'hi', usage: { inputTokens: n }, totalUsage: { inputTokens: 10 * n } },
      { promptTokenCount: n, cachedContentTokenCount: cached },
      { candidates: [], usageMetadata: { promptTokenCount: n } },
    ];
  }

  it('counts the whole prompt of each provider shape', async () => {
    const count = shapes(0).length;
    for (let i = 0; i < count; i++) {
      const c = softCompactor();
      const result = await c.compact(HISTORY.slice(0, 8));
      const shape = shapes(Math.round(result.tokensAfter * 1.5))[i];
      c.observeUsage(shape);
      assert.ok(Math.abs(c.usageFactor - 1.5) < 0.01, `${JSON.stringify(shape)}: ${c.usageFactor}`);
      c.close();
    }
  });

  it("counts Anthropic's cached prompt (input_tokens alone drove the factor to 0.5)", async () => {
    const c = softCompactor();
    const n = (await c.compact(HISTORY.slice(0, 8))).tokensAfter;
    c.observeUsage({ input_tokens: 12, cache_read_input_tokens: n - 12,
      cache_creation_input_tokens: 0, output_tokens: 40 });
    assert.ok(Math.abs(c.usageFactor - 1) < 0.01, String(c.usageFactor));
    c.close();
  });

  it('refuses shapes it does not know, naming the fields it looked for', () => {
    const c = softCompactor();
    assert.throws(() => c.observeUsage({ completion_tokens: 5 }), (err) => {
      assert.equal(err.code, 'CK_EINVAL');
      assert.match(err.message, /prompt_tokens/);
      return true;
    });
    assert.throws(() => c.observeUsage({ usage: { input_tokens: 1, cache_read_input_tokens: -1 } }),
      { code: 'CK_EINVAL', message: /usage\.cache_read_input_tokens/ });
    assert.throws(() => c.observeUsage('100'), TypeError);
    c.observeUsage(100); // numbers as before
    const addon = require(addonPath);
    assert.equal(addon.usagePromptTokens('{"prompt_tokens": 7}'), 7);
    assert.throws(() => addon.usagePromptTokens({}), TypeError);
    assert.throws(() => addon.usagePromptTokens('{'), { code: 'CK_ESYNTAX' });
    c.close();
  });
});

describe('HttpSummarizer lifetimes', () => {
  it('stays alive while a transfer runs, with no reference left to it', async () => {
    const script = `
      const http = require('node:http');
      const { HttpSummarizer } = require(${JSON.stringify(path.join(h.repoRoot, 'node'))});
      const server = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => setTimeout(() => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ choices: [{ message: { content: 'late reply' } }] }));
        }, 300));
      });
      server.listen(0, '127.0.0.1', async () => {
        const baseUrl = 'http://127.0.0.1:' + server.address().port + '/v1';
        const pending = new HttpSummarizer({ baseUrl, model: 'm', apiKeyEnv: '' })
          .summarize({ prompt: 'p' });
        for (let i = 0; i < 5; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 20)); }
        console.log(await pending);
        server.close();
      });`;
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, ['--expose-gc', '-e', script], { timeout: 10000 },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`))
          : resolve(stdout)));
    });
    assert.equal(out.trim(), 'late reply');
  });

  it('works in a worker thread', async () => {
    model.use(answer);
    const source = `
      const { parentPort, workerData } = require('node:worker_threads');
      const { HttpSummarizer } = require(workerData.pkg);
      const x = new HttpSummarizer({ baseUrl: workerData.baseUrl, model: 'm', apiKeyEnv: '' });
      x.summarize({ prompt: 'from a worker' }).then((reply) => parentPort.postMessage(reply),
        (err) => parentPort.postMessage('error: ' + err.message));`;
    const reply = await new Promise((resolve, reject) => {
      const worker = new Worker(source, { eval: true,
        workerData: { pkg: path.join(h.repoRoot, 'node'), baseUrl: model.openai } });
      worker.on('message', resolve);
      worker.on('error', reject);
    });
    assert.equal(reply, CHECKPOINT);
    assert.equal(model.requests[0].body.messages[1].content, 'from a worker');
  });

  it('never showed the key: errors, records, audit logs, inspect output', () => {
    for (const x of made) shown.push(util.inspect(x));
    assert.ok(shown.length > 30, `only ${shown.length} texts were collected`);
    for (const text of shown) {
      assert.ok(!text.includes(KEY), `the key is in: ${text.slice(0, 300)}`);
    }
    // The audit logs on disk too.
    assert.ok(stores.length >= 5);
    for (const store of stores) {
      const dir = path.join(store, 'compactions');
      for (const f of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
        assert.ok(!fs.readFileSync(path.join(dir, f), 'utf8').includes(KEY), f);
      }
    }
  });
});
