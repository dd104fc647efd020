'use strict';

// A host token counter as the estimator: estimateTokens(x, {estimator: fn}), a Compactor that
// counts every estimate with it (each message content once, cached by the core), and what
// happens when it throws or answers badly: compact() rejects and the session stays as it was.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const h = require('./helpers.js');
const s = require('./sessions.js');

const { ctxkeel } = h;
const { Compactor, estimateTokens } = ctxkeel;

after(s.removeStores);

const MESSAGE_OVERHEAD = 4;
const REQUEST_OVERHEAD = 3;
const IMAGE_TOKENS = 765;

/** A counter that records every text it is asked about: one token per 4 UTF-16 units. */
function recordingCounter() {
  const texts = [];
  const fn = (text) => {
    texts.push(text);
    return Math.ceil(text.length / 4);
  };
  fn.texts = texts;
  return fn;
}

/** A Map-backed backend (plain methods). */
function mapBackend() {
  const store = new Map();
  return { put: (key, text) => void store.set(key, text), get: (key) => store.get(key) ?? null };
}

/** The audit log's lines for a compactor (0 when there is no log yet). */
function logLines(c) {
  const file = path.join(c.options.storeDir, 'compactions', `${c.sessionId}.jsonl`);
  return fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean).length : 0;
}

describe('estimateTokens with a counting function', () => {
  it('counts a string with one call on the string itself', () => {
    const fn = recordingCounter();
    assert.equal(estimateTokens('hello, world', { estimator: fn }), 3);
    assert.deepEqual(fn.texts, ['hello, world']);
  });

  it('counts a message as its strings joined, plus the overhead and images', () => {
    const fn = recordingCounter();
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } };
    const message = { role: 'user', content: [h.text('look at this'), image, h.text('and this')] };
    assert.equal(estimateTokens(message, { estimator: fn }),
      Math.ceil('look at this\nand this'.length / 4) + IMAGE_TOKENS + MESSAGE_OVERHEAD);
    assert.deepEqual(fn.texts, ['look at this\nand this']);
  });

  it('counts a list message by message, plus the request overhead', () => {
    const fn = recordingCounter();
    const list = [h.sys('be brief'), h.user('what is 2 + 2?'), h.asst(h.call('c1', 'calc')),
      h.tool('c1', '4')];
    const each = list.map((m) => estimateTokens(m, { estimator: fn }));
    fn.texts.length = 0;
    assert.equal(estimateTokens(list, { estimator: fn }),
      each.reduce((a, b) => a + b, 0) + REQUEST_OVERHEAD);
    assert.equal(fn.texts.length, list.length);
    assert.equal(estimateTokens([], { estimator: fn }), 0);
    assert.equal(fn.texts.length, list.length, 'an empty list called the counter');
  });

  it('counts a tool list as its JSON text', () => {
    const fn = recordingCounter();
    const tools = [{ type: 'function', function: { name: 'bash', parameters: {} } }];
    const json = JSON.stringify(tools);
    assert.equal(estimateTokens(tools, { estimator: fn }), Math.ceil(json.length / 4));
    assert.deepEqual(fn.texts, [json]);
  });

  it('passes on what the counter throws, and refuses bad answers', () => {
    const thrown = new Error('tokenizer crashed');
    const raising = () => {
      throw thrown;
    };
    assert.throws(() => estimateTokens('x', { estimator: raising }), (err) => err === thrown);
    assert.throws(() => estimateTokens([h.user('a'), h.user('b')], { estimator: raising }),
      (err) => err === thrown);
    const BAD = [
      [-1, RangeError, /must return an integer from 0/],
      [2.5, RangeError, /must return an integer from 0/],
      [NaN, RangeError, /must return an integer from 0/],
      ['3', TypeError, /must return a number of tokens, not a string/],
      [null, TypeError, /must return a number of tokens, not null/],
      [Promise.resolve(3), TypeError, /returned a Promise; a token counter must answer synchron/],
    ];
    for (const [answer, ErrorClass, message] of BAD) {
      assert.throws(() => estimateTokens(h.user('hi'), { estimator: () => answer }),
        (err) => err instanceof ErrorClass && message.test(err.message), String(answer));
    }
    assert.throws(() => estimateTokens('x', { estimator: async () => 1 }),
      { name: 'TypeError', message: /async function/ });
  });
});

describe('a Compactor with a counting function', () => {
  it('uses it for every estimate: the view and the tool schemas', async () => {
    const fn = recordingCounter();
    const history = s.syntheticHistory(20, 4);
    const c = new Compactor({ contextWindow: 10 ** 9, storeDir: s.tmpStore(), estimator: fn });
    const tools = [{ type: 'function', function: { name: 'bash', parameters: {} } }];
    const result = await c.compact(history, { tools });
    assert.equal(result.tier, 'none');
    assert.equal(result.tokensBefore, estimateTokens(history, { estimator: fn }) +
      estimateTokens(tools, { estimator: fn }));
    assert.notEqual(result.tokensBefore, estimateTokens(history) + estimateTokens(tools));
    assert.equal(c.options.estimator, fn);
  });

  it('calls it once per message over a 50-turn replay, not once per message per turn',
    async () => {
      const fn = recordingCounter();
      const history = s.syntheticHistory(50, 4);
      const c = new Compactor({ contextWindow: 10 ** 9, storeDir: s.tmpStore(), estimator: fn });
      const results = await s.replay(c, history);
      assert.equal(results.length, 50);
      const perTurn = results.reduce((sum, r) => sum + r.messages.length, 0);
      const counted = new Set(fn.texts);
      assert.equal(fn.texts.length, counted.size, 'a message content was counted twice');
      assert.ok(fn.texts.length < history.length, `${fn.texts.length} calls`);
      assert.ok(perTurn > 20 * fn.texts.length, `${perTurn} messages measured in all`);
    });

  it('counts each plain message once while compacting too', async () => {
    const fn = recordingCounter();
    const history = s.syntheticHistory(50, 4);
    const window = Math.ceil(estimateTokens(history, { estimator: fn }) / 2.5);
    fn.texts.length = 0;
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore(), estimator: fn });
    const results = await s.replay(c, history, { window, summarize: s.scripted() });
    assert.ok(results.some((r) => s.atLeast(r.tier, 'soft')), 'nothing was summarized');
    const offloaded = new Set(results.flatMap((r) => (r.record ? r.record.offloaded : []))
      .map((o) => o.tool_call_id));
    const times = new Map();
    for (const t of fn.texts) times.set(t, (times.get(t) || 0) + 1);
    // Every content is counted once: messages, outputs, their placeholders. A checkpoint is
    // measured while it is rendered (to bound it) and again as a message of the view.
    const checkpoint = (t) => t.includes(s.MARKER);
    const plain = [...times].filter(([t]) => !checkpoint(t));
    assert.ok(plain.length > 90, `${plain.length} plain messages`);
    assert.ok(offloaded.size > 0 && plain.some(([t]) => t.includes(s.PLACEHOLDER)));
    for (const [t, n] of plain) assert.equal(n, 1, `counted ${n} times: ${t.slice(0, 80)}`);
    for (const [t, n] of times) assert.ok(n <= 2, `counted ${n} times: ${t.slice(0, 80)}`);
    const perTurn = results.reduce((sum, r) => sum + r.messages.length, 0);
    assert.ok(fn.texts.length * 3 < perTurn, `${fn.texts.length} calls, ${perTurn} per turn`);
  });

  it('folds with the extractive summarizer as the default, not a fallback', async () => {
    const fn = recordingCounter();
    const small = s.syntheticHistory(40).map((m) => (m.role === 'tool'
      ? { ...m, content: m.content.slice(0, 400) } : m));
    const window = Math.ceil(estimateTokens(small, { estimator: fn }) / 0.85);
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore(), estimator: fn });
    const result = await c.compact(small);
    assert.equal(result.tier, 'full');
    assert.equal(result.record.fallback, null);
    assert.equal(result.record.estimator, 'host');
    assert.equal(result.messages.filter(s.isCheckpoint).length, 1);
  });

  it('rejects compact() with what it throws, and leaves the session unchanged', async () => {
    const thrown = new Error('tokenizer crashed');
    let failing = false;
    const flaky = (text) => {
      if (failing) throw thrown;
      return Math.ceil(text.length / 4);
    };
    const steady = (text) => Math.ceil(text.length / 4);
    const history = s.syntheticHistory(45, 6);
    const window = Math.ceil(estimateTokens(history, { estimator: steady }) / 2.5);
    // Store folders of the same length keep the placeholders the same size in both.
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore(), estimator: flaky,
      sessionId: 'flaky' });
    const control = new Compactor({ contextWindow: window, storeDir: s.tmpStore(),
      estimator: steady, sessionId: 'flaky' });
    const summarize = s.scripted();
    let failedAt = null;
    for (let i = 1; i < history.length; i++) {
      if (history[i].role !== 'assistant') continue;
      const prefix = history.slice(0, i);
      const expected = await control.compact(prefix, { summarize });
      if (failedAt === null && s.atLeast(expected.tier, 'soft') && logLines(c) > 0) {
        failedAt = i;
        const before = logLines(c);
        failing = true;
        await assert.rejects(c.compact(prefix, { summarize }), (err) => err === thrown);
        failing = false;
        assert.equal(logLines(c), before, 'the failed compaction wrote a record');
      }
      const got = await c.compact(prefix, { summarize });
      assert.equal(got.tier, expected.tier, `turn ${i}`);
      assert.equal(got.tokensBefore, expected.tokensBefore, `turn ${i}`);
      assert.equal(got.tokensAfter, expected.tokensAfter, `turn ${i}`);
      assert.equal(got.messages.length, expected.messages.length, `turn ${i}`);
    }
    assert.ok(failedAt !== null, 'no turn compacted at soft or above after a first record');
    assert.equal(logLines(c), logLines(control));
  });

  it('rejects compact() with a TypeError or RangeError for a bad answer', async () => {
    for (const [answer, ErrorClass] of [['12', TypeError], [-3, RangeError], [1.5, RangeError]]) {
      const c = new Compactor({ contextWindow: 1000, storeDir: s.tmpStore(),
        estimator: () => answer });
      await assert.rejects(c.compact([h.user('hi')]), ErrorClass);
    }
  });

  it('refuses a counter that returns a Promise, without an unhandled rejection', async () => {
    const unhandled = [];
    const onUnhandled = (reason) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const c = new Compactor({ contextWindow: 1000, storeDir: s.tmpStore(),
        estimator: () => Promise.reject(new Error('late')) });
      await assert.rejects(c.compact([h.user('hi')]),
        { name: 'TypeError', message: /must answer synchronously/ });
      for (let k = 0; k < 3; k++) await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    assert.throws(() => new Compactor({ contextWindow: 1000, storeDir: s.tmpStore(),
      estimator: async () => 1 }), { name: 'TypeError', message: /async function/ });
  });

  it('is called on the main thread from a worker when there is a backend', async () => {
    const history = s.syntheticHistory(30, 9);
    const fn = recordingCounter();
    const c = new Compactor({ contextWindow: 10 ** 9, storeDir: s.tmpStore(), estimator: fn,
      backend: mapBackend() });
    const plain = new Compactor({ contextWindow: 10 ** 9, storeDir: s.tmpStore(),
      estimator: recordingCounter() });
    const results = await s.replay(c, history);
    const expected = await s.replay(plain, history);
    assert.deepEqual(results.map((r) => r.tokensBefore), expected.map((r) => r.tokensBefore));
    assert.equal(fn.texts.length, new Set(fn.texts).size, 'a message content was counted twice');
    // A throwing counter rejects the same way through the worker.
    const thrown = new Error('worker-side failure');
    const failing = new Compactor({ contextWindow: 10 ** 9, storeDir: s.tmpStore(),
      backend: mapBackend(), estimator: () => {
        throw thrown;
      } });
    await assert.rejects(failing.compact(history), (err) => err === thrown);
    // And the compactor is free again afterwards.
    await assert.rejects(failing.compact(history), (err) => err === thrown);
  });
});
