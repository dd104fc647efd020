'use strict';

// The Compactor: tiers, views over the caller's own objects, the summarizer discipline (at most
// one call, none below soft, failures fall back), state across calls and restarts, the audit
// log, and the async contract (abort, timeout, busy, close, workers, a free event loop).

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { execFileSync } = require('node:child_process');
const { getEventListeners } = require('node:events');
const h = require('./helpers.js');
const s = require('./sessions.js');

const { ctxkeel } = h;
const { Compactor } = ctxkeel;

after(s.removeStores);

/** A window in which `messages` fill `ratio` of it. */
function windowFor(messages, ratio) {
  return Math.ceil(ctxkeel.estimateTokens(messages) / ratio);
}

/** A compactor over a fresh store whose window puts `messages` at `ratio`. */
function compactorAt(messages, ratio, options = {}) {
  const contextWindow = windowFor(messages, ratio);
  const compactor = new Compactor({ contextWindow, storeDir: s.tmpStore(), ...options });
  return { compactor, window: contextWindow };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Most of this history's size is in large tool outputs: offloads alone bring it to the target,
// so no compaction folds anything. FOLD has one large output in thirty turns: a compaction of
// it has to fold (and summarize) the oldest part of the span.
const HISTORY = s.syntheticHistory(30);
const FOLD = s.syntheticHistory(30, 1, { bigEvery: 15 });

describe('new Compactor()', () => {
  it('fills in the defaults and reports them', () => {
    const c = new Compactor({ contextWindow: 100000, storeDir: s.tmpStore() });
    const o = c.options;
    assert.equal(o.contextWindow, 100000);
    assert.deepEqual([o.warn, o.soft, o.full, o.emergency], [0.6, 0.7, 0.8, 0.95]);
    assert.equal(o.keepTail, 6);
    assert.equal(o.offloadThreshold, 4000);
    assert.equal(o.toolOffloadThreshold, 10000);
    assert.equal(o.summaryMaxTokens, 5000);
    assert.equal(o.target, 0.5);
    assert.equal(o.keepTailTokens, 25000);
    assert.equal(o.summarizeTimeout, 60);
    assert.equal(o.estimator, 'default');
    assert.equal(o.format, 'auto');
    assert.equal(o.pinFirstUser, true);
    assert.match(c.sessionId, /^[0-9a-f]{16}$/);
    assert.equal(o.sessionId, c.sessionId);
    assert.equal(c.usageFactor, 1);
    assert.equal(c.closed, false);
    assert.notEqual(new Compactor({ contextWindow: 1000, storeDir: o.storeDir }).sessionId,
      c.sessionId);
  });

  it('takes every option', () => {
    const store = s.tmpStore();
    const c = new Compactor({
      contextWindow: 5000, sessionId: 'opts', storeDir: store, warn: 0.5, soft: 0.6, full: 0.7,
      emergency: 0.9, keepTail: 4, offloadThreshold: 100, toolOffloadThreshold: 200,
      summaryMaxTokens: 300, summarizeTimeout: 5, estimator: 'chars4', format: 'openai',
      pinFirstUser: false, onCompaction: null, backendTimeout: 2.5, target: 0.4, keepTailTokens: 900,
      promptCache: { read: 0.2, write: 1.5 }, cacheBreakpoints: true, minGain: 120,
    });
    assert.deepEqual({ ...c.options }, {
      contextWindow: 5000, sessionId: 'opts', storeDir: store, warn: 0.5, soft: 0.6, full: 0.7,
      emergency: 0.9, keepTail: 4, offloadThreshold: 100, toolOffloadThreshold: 200,
      summaryMaxTokens: 300, summarizeTimeout: 5, estimator: 'chars4', format: 'openai',
      pinFirstUser: false, backendTimeout: 2.5, target: 0.4, keepTailTokens: 900, store: null,
      promptCache: { read: 0.2, write: 1.5 }, cacheBreakpoints: true, minGain: 120,
    });
  });

  const BAD = [
    ['no options', undefined, TypeError, /options must be an object/],
    ['options that are an array', [], TypeError, /options must be an object, not an array/],
    ['no contextWindow', {}, TypeError, /options\.contextWindow is required/],
    ['a string contextWindow', { contextWindow: '8k' }, TypeError, /options\.contextWindow/],
    ['a zero contextWindow', { contextWindow: 0 }, RangeError, /options\.contextWindow/],
    ['a fractional contextWindow', { contextWindow: 10.5 }, RangeError, /options\.contextWindow/],
    ['a threshold above 1', { contextWindow: 10, warn: 1.5 }, RangeError, /options\.warn/],
    ['a NaN threshold', { contextWindow: 10, soft: NaN }, RangeError, /options\.soft/],
    ['a zero keepTail', { contextWindow: 10, keepTail: 0 }, RangeError, /options\.keepTail/],
    ['an unknown estimator', { contextWindow: 10, estimator: 'gpt' }, RangeError,
      /options\.estimator/],
    ['an unknown format', { contextWindow: 10, format: 'xml' }, RangeError, /options\.format/],
    ['a string pinFirstUser', { contextWindow: 10, pinFirstUser: 'yes' }, TypeError,
      /options\.pinFirstUser/],
    ['an empty sessionId', { contextWindow: 10, sessionId: '' }, RangeError,
      /options\.sessionId/],
    ['a sessionId with NUL', { contextWindow: 10, sessionId: 'a\0b' }, RangeError,
      /options\.sessionId/],
    ['a numeric storeDir', { contextWindow: 10, storeDir: 5 }, TypeError, /options\.storeDir/],
    ['a zero summarizeTimeout', { contextWindow: 10, summarizeTimeout: 0 }, RangeError,
      /options\.summarizeTimeout/],
    ['a string summarizeTimeout', { contextWindow: 10, summarizeTimeout: '60' }, TypeError,
      /options\.summarizeTimeout/],
    ['an onCompaction that is not a function', { contextWindow: 10, onCompaction: 1 }, TypeError,
      /options\.onCompaction/],
    ['a snake_case option', { contextWindow: 10, keep_tail: 3 }, RangeError,
      /options\.keep_tail is not an option/],
  ];
  for (const [label, options, type, message] of BAD) {
    it(`rejects ${label}`, () => {
      assert.throws(() => new Compactor(options), (err) => {
        assert.ok(err instanceof type, `${err.name}: ${err.message}`);
        assert.match(err.message, message);
        return true;
      });
    });
  }

  it('rejects thresholds out of order with InputError CK_EINVAL', () => {
    assert.throws(() => new Compactor({ contextWindow: 10, warn: 0.8, soft: 0.7 }),
      { name: 'InputError', code: 'CK_EINVAL', where: 'warn' });
    assert.throws(() => new Compactor({ contextWindow: 10, full: 0.99 }),
      { code: 'CK_EINVAL', where: 'full' });
  });

  it('cannot be called without new', () => {
    assert.throws(() => Compactor({ contextWindow: 10 }), TypeError);
  });
});

describe('compact(): tiers and views', () => {
  it('returns the same objects and no record below warn, asking no model', async () => {
    const { compactor } = compactorAt(HISTORY, 0.4);
    const summarize = s.scripted();
    const result = await compactor.compact(HISTORY, { summarize });
    assert.equal(result.tier, 'none');
    assert.equal(result.record, null);
    assert.notEqual(result.messages, HISTORY);
    result.messages.forEach((m, i) => assert.equal(m, HISTORY[i]));
    assert.equal(result.tokensAfter, result.tokensBefore);
    assert.equal(summarize.requests.length, 0);
  });

  it('offloads at warn without a model, keeping every other object', async () => {
    const { compactor, window } = compactorAt(HISTORY, 0.65);
    const summarize = s.scripted();
    const before = structuredClone(HISTORY);
    const result = await compactor.compact(HISTORY, { summarize });
    assert.deepEqual(HISTORY, before);
    assert.equal(result.tier, 'warn');
    assert.equal(summarize.requests.length, 0);
    assert.ok(result.record.offloaded.length > 0);
    assert.equal(result.messages.length, HISTORY.length);
    const changed = result.messages.filter((m, i) => m !== HISTORY[i]);
    assert.equal(changed.length, result.record.offloaded.length);
    for (const m of changed) assert.ok(m.content.startsWith(s.PLACEHOLDER));
    s.assertView(HISTORY, result, { window });
  });

  for (const [tier, ratio] of [['soft', 0.75], ['full', 0.85]]) {
    it(`summarizes once at ${tier} and brings the view to the target`, async () => {
      const { compactor, window } = compactorAt(FOLD, ratio);
      const summarize = s.scripted();
      const before = structuredClone(FOLD);
      const result = await compactor.compact(FOLD, { summarize });
      assert.deepEqual(FOLD, before);
      assert.equal(result.tier, tier);
      assert.equal(summarize.requests.length, 1);
      assert.equal(result.record.fallback, null);
      assert.ok(result.record.summarized > 0);
      assert.equal(result.messages.filter(s.isCheckpoint).length, 1);
      // Every compaction aims at the target (0.5), well under the soft limit.
      assert.ok(result.ratioAfter <= 0.5, `ratio after ${result.ratioAfter}`);
      assert.ok(result.tokensAfter <= 0.5 * window);
      assert.ok(Math.abs(result.ratioBefore - ratio) < 0.01, String(result.ratioBefore));
      s.assertView(FOLD, result, { window });
    });
  }

  it('folds nothing when offloads alone reach the target, whatever the tier', async () => {
    for (const [tier, ratio] of [['soft', 0.75], ['full', 0.85], ['emergency', 0.97]]) {
      const { compactor, window } = compactorAt(HISTORY, ratio);
      const summarize = s.scripted();
      const result = await compactor.compact(HISTORY, { summarize });
      assert.equal(result.tier, tier);
      assert.equal(summarize.requests.length, 0, `${tier}: a summary was asked for`);
      assert.equal(result.messages.some(s.isCheckpoint), false, `${tier}: something was folded`);
      assert.equal(result.messages.length, HISTORY.length);
      assert.equal(result.record.summarized, 0);
      assert.equal(result.record.checkpoint, null);
      assert.ok(result.record.offloaded.length > 0);
      assert.ok(result.ratioAfter <= 0.5, `${tier}: ratio after ${result.ratioAfter}`);
      s.assertView(HISTORY, result, { window });
    }
  });

  it('takes target and keepTailTokens, checked by the core', async () => {
    const { compactor, window } = compactorAt(FOLD, 0.75, { target: 0.3 });
    assert.equal(compactor.options.target, 0.3);
    assert.equal(compactor.options.keepTailTokens, Math.floor(window / 4));
    const result = await compactor.compact(FOLD);
    assert.equal(result.tier, 'soft');
    assert.ok(result.ratioAfter <= 0.3, `ratio after ${result.ratioAfter}`);
    s.assertView(FOLD, result, { window });
    // The newest output (10 KB) fits the default tail budget (window / 4) and stays verbatim;
    // with a budget of 300 tokens it becomes a placeholder, its text in the store.
    const newest = FOLD[FOLD.length - 1];
    const wide = await compactorAt(FOLD, 0.85).compactor.compact(FOLD);
    assert.equal(wide.messages[wide.messages.length - 1], newest);
    const narrow = compactorAt(FOLD, 0.85, { keepTailTokens: 300 });
    assert.equal(narrow.compactor.options.keepTailTokens, 300);
    const small = await narrow.compactor.compact(FOLD);
    const last = small.messages[small.messages.length - 1];
    assert.notEqual(last, newest);
    assert.equal(last.tool_call_id, newest.tool_call_id);
    assert.ok(last.content.startsWith(s.PLACEHOLDER));
    assert.equal(narrow.compactor.readEvidence(newest.tool_call_id, { limit: 1e6 }),
      newest.content);
    s.assertView(FOLD, small, { window: narrow.window });
    assert.throws(() => new Compactor({ contextWindow: 1000, target: 0.7 }),
      { name: 'InputError', code: 'CK_EINVAL', where: 'target' });
    assert.throws(() => new Compactor({ contextWindow: 1000, soft: 0.65, full: 0.7, warn: 0.5,
      target: 0.66 }), { code: 'CK_EINVAL', where: 'target' });
    assert.throws(() => new Compactor({ contextWindow: 1000, target: 0 }),
      { name: 'RangeError', message: /options\.target/ });
    assert.throws(() => new Compactor({ contextWindow: 1000, target: '0.4' }),
      { name: 'TypeError', message: /options\.target/ });
    assert.throws(() => new Compactor({ contextWindow: 1000, keepTailTokens: 0 }),
      { name: 'RangeError', message: /options\.keepTailTokens/ });
    assert.throws(() => new Compactor({ contextWindow: 1000, keepTailTokens: 2.5 }), RangeError);
  });

  it('folds without a model at emergency', async () => {
    // Outputs too small to offload, so the span has to be folded.
    const small = HISTORY.map((m) => (m.role === 'tool' ? { ...m, content: m.content.slice(0, 400) }
      : m));
    const { compactor, window } = compactorAt(small, 0.97);
    const summarize = s.scripted();
    const result = await compactor.compact(small, { summarize });
    assert.equal(result.tier, 'emergency');
    assert.equal(summarize.requests.length, 0);
    assert.equal(result.messages.filter(s.isCheckpoint).length, 1);
    s.assertView(small, result, { window });
  });

  it('uses the extractive summarizer when none is given, not as a fallback', async () => {
    const { compactor, window } = compactorAt(FOLD, 0.75);
    const result = await compactor.compact(FOLD);
    assert.equal(result.tier, 'soft');
    assert.equal(result.record.fallback, null);
    assert.equal(result.messages.filter(s.isCheckpoint).length, 1);
    s.assertView(FOLD, result, { window });
  });

  it('hands the summarizer the request with the caller\'s own messages', async () => {
    const { compactor } = compactorAt(FOLD, 0.75);
    const summarize = s.scripted();
    await compactor.compact(FOLD, { summarize });
    const [request] = summarize.requests;
    assert.deepEqual(Object.keys(request).sort(),
      ['maxTokens', 'messages', 'previous', 'prompt', 'system', 'tier'].sort());
    assert.equal(typeof request.system, 'string');
    assert.ok(request.prompt.length > 0);
    assert.equal(request.maxTokens, compactor.options.summaryMaxTokens);
    assert.equal(request.tier, 'soft');
    assert.equal(request.previous, null);
    assert.ok(request.messages.length > 0);
    const start = FOLD.indexOf(request.messages[0]);
    assert.ok(start >= 0, 'request.messages are not the caller\'s objects');
    request.messages.forEach((m, k) => assert.equal(m, FOLD[start + k]));
  });

  it('counts the tool schemas', async () => {
    const tools = [ctxkeel.readEvidenceTool(), {
      type: 'function',
      function: { name: 'bash', description: 'Run a command. '.repeat(50), parameters: {} },
    }];
    const { compactor } = compactorAt(HISTORY, 0.4);
    const bare = await compactor.compact(HISTORY);
    const withTools = await compactor.compact(HISTORY, { tools });
    assert.equal(withTools.tokensBefore - bare.tokensBefore, ctxkeel.estimateTokens(tools));
  });

  it('compacts an empty history to an empty view', async () => {
    const { compactor } = compactorAt(HISTORY, 0.75);
    const result = await compactor.compact([]);
    assert.deepEqual(result.messages, []);
    assert.equal(result.tier, 'none');
  });

  it('repairs broken pairs in the views it returns', async () => {
    const broken = HISTORY.filter((m, i) => i !== 11 && i !== 30);
    assert.notDeepEqual(ctxkeel.checkPairs(broken), []);
    for (const ratio of [0.4, 0.65, 0.75, 0.97]) {
      const { compactor, window } = compactorAt(broken, ratio);
      const result = await compactor.compact(broken, { summarize: s.scripted() });
      assert.deepEqual(ctxkeel.checkPairs(result.messages), [], `ratio ${ratio}`);
      assert.ok(result.tokensAfter <= result.tokensBefore || result.tier === 'none');
      if (s.atLeast(result.tier, 'soft')) s.assertView(broken, result, { window });
    }
  });

  it('rejects bad arguments', async () => {
    const c = new Compactor({ contextWindow: 1000, storeDir: s.tmpStore() });
    const BAD = [
      [['hi'], TypeError, /messages must be an array/],
      [[[], 5], TypeError, /options must be an object/],
      [[[], { tools: {} }], TypeError, /options\.tools/],
      [[[], { summarize: 'gpt' }], TypeError, /options\.summarize/],
      [[[], { signal: {} }], TypeError, /options\.signal/],
      [[[], { summarise: () => '' }], RangeError, /options\.summarise is not an option/],
    ];
    for (const [args, type, message] of BAD) {
      await assert.rejects(c.compact(...args), (err) => err instanceof type &&
        message.test(err.message));
    }
    await assert.rejects(c.compact([{ role: 5 }]),
      { name: 'InputError', code: 'CK_ETYPE', where: 'messages[0].role' });
    // The compactor is still usable after every one of those.
    assert.equal((await c.compact([h.user('hi')])).tier, 'none');
  });
});

describe('compact(): agent loops', () => {
  it('replays a synthetic OpenAI session', async () => {
    const history = s.syntheticHistory(60, 7);
    const window = windowFor(history, 2.5);
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
    const summarize = s.scripted();
    const results = await s.replay(c, history, { window, summarize });
    const tiers = new Set(results.map((r) => r.tier));
    assert.ok(tiers.has('soft') || tiers.has('full'), [...tiers].join());
    assert.ok(summarize.requests.length >= 1);
    assert.ok(summarize.requests.length < results.length / 4, 'the state was not reused');
  });

  it('replays a synthetic Anthropic session', async () => {
    const history = s.anthropicHistory(60, 8);
    const window = windowFor(history, 2.5);
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
    const summarize = s.scripted();
    const results = await s.replay(c, history, { window, summarize, format: 'anthropic' });
    assert.ok(results.some((r) => s.atLeast(r.tier, 'soft')));
    const checkpoint = results.at(-1).messages.find(s.isCheckpoint);
    assert.ok(Array.isArray(checkpoint.content), 'an Anthropic checkpoint has block content');
  });

  const corpus = h.loadCorpus();
  for (const [name, transcript] of corpus) {
    it(`replays the corpus transcript ${name}`, async () => {
      const window = windowFor(transcript, 2);
      const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
      const summarize = s.scripted();
      const results = await s.replay(c, transcript, { window, summarize });
      assert.ok(results.some((r) => s.atLeast(r.tier, 'warn')));
      assert.ok(summarize.requests.every((r) => !r.messages.some(s.isCheckpoint)));
    });
  }
  if (corpus.length === 0) {
    it('replays the corpus', { skip: 'shared/corpus is absent' }, () => {});
  }

  it('is deterministic: two compactors, two stores, the same views', async () => {
    const history = s.syntheticHistory(45, 3);
    const window = windowFor(history, 2);
    const views = [];
    for (let k = 0; k < 2; k++) {
      const storeDir = s.tmpStore();
      const c = new Compactor({ contextWindow: window, storeDir, sessionId: 'same' });
      const results = await s.replay(c, history, { window, summarize: s.scripted() });
      // Placeholders name the evidence file, which lives under each compactor's own store.
      views.push(JSON.parse(JSON.stringify(results.map((r) => r.messages)).split(storeDir)
        .join('<store>')));
    }
    assert.deepEqual(views[0], views[1]);
  });
});

describe('compact(): state', () => {
  it('needs no summarize call on the next turn', async () => {
    const { compactor, window } = compactorAt(FOLD, 0.75);
    const summarize = s.scripted();
    const first = await compactor.compact(FOLD, { summarize });
    assert.equal(summarize.requests.length, 1);
    const next = [...FOLD, h.asst(h.call('next_1')), h.tool('next_1', 'ok')];
    const second = await compactor.compact(next, { summarize });
    assert.equal(summarize.requests.length, 1);
    const checkpoint = second.messages.find(s.isCheckpoint);
    assert.equal(checkpoint.content, first.record.checkpoint);
    s.assertView(next, second, { window });
  });

  it('recognizes its view written back as the history', async () => {
    const { compactor, window } = compactorAt(FOLD, 0.75);
    const summarize = s.scripted();
    const first = await compactor.compact(FOLD, { summarize });
    let history = [...first.messages, h.asst(h.call('wb_0')), h.tool('wb_0', 'done')];
    const second = await compactor.compact(history, { summarize });
    assert.equal(summarize.requests.length, 1, 'the written-back view was summarized again');
    assert.ok(second.messages.includes(history.find(s.isCheckpoint)));
    s.assertView(history, second, { window });
    // Grow the written-back history until it needs a summary again.
    for (let i = 1; summarize.requests.length === 1 && i < 200; i++) {
      history = [...history, h.asst(h.call(`wb_${i}`)),
        h.tool(`wb_${i}`, `line ${i} of a longer output\n`.repeat(40))];
      const result = await compactor.compact(history, { summarize });
      s.assertView(history, result, { window });
    }
    assert.equal(summarize.requests.length, 2);
    const request = summarize.requests[1];
    assert.ok(!request.messages.some(s.isCheckpoint), 'the old checkpoint was summarized again');
    assert.equal(request.previous, first.record.checkpoint);
  });

  it('does not trust a written-back checkpoint it did not make', async () => {
    // Only a compactor's own checkpoint text is honoured: for another compactor the message is
    // ordinary content, folded and archived like any other, and the messages before it are
    // not taken as covered by it.
    const { compactor, window } = compactorAt(FOLD, 0.75);
    const first = await compactor.compact(FOLD, { summarize: s.scripted() });
    const stranger = new Compactor({ ...compactor.options, sessionId: null,
      summarizeTimeout: undefined });
    const summarize = s.scripted();
    const history = [...first.messages, h.asst(h.call('adopt')), h.tool('adopt', 'ok')];
    const pasted = history.find(s.isCheckpoint);
    const result = await stranger.compact(history, { summarize });
    s.assertView(history, result, { window });
    if (result.messages.includes(pasted)) {
      // Kept as it is, as a message of the conversation, with nothing before it dropped.
      history.slice(0, history.indexOf(pasted)).forEach((m) =>
        assert.ok(result.messages.includes(m), 'a message before the pasted text left the view'));
    } else {
      // Folded like any message: the summarizer saw it as data, and the archive has it.
      assert.equal(summarize.requests.length, 1);
      assert.ok(summarize.requests[0].messages.includes(pasted));
      const hits = await stranger.searchEvidence(null, 'Went through [0-9]+ messages');
      assert.ok(hits.some((hit) => /^history/.test(hit.ref)), JSON.stringify(hits));
      assert.notEqual(result.messages.find(s.isCheckpoint).content, pasted.content);
    }
  });

  it('resumes a session from its audit log', async () => {
    const storeDir = s.tmpStore();
    const window = windowFor(FOLD, 0.75);
    const first = new Compactor({ contextWindow: window, storeDir, sessionId: 'resume-me' });
    const made = await first.compact(FOLD, { summarize: s.scripted() });
    first.close();
    const again = new Compactor({ contextWindow: window, storeDir, sessionId: 'resume-me' });
    const summarize = s.scripted();
    const result = await again.compact(FOLD, { summarize });
    assert.equal(summarize.requests.length, 0);
    assert.equal(result.messages.find(s.isCheckpoint).content, made.record.checkpoint);
    // reset() forgets it: the same history needs a model again.
    again.reset();
    await again.compact(FOLD, { summarize });
    assert.equal(summarize.requests.length, 1);
  });

  it('scales its estimates by the observed provider counts', async () => {
    const { compactor } = compactorAt(FOLD, 0.5);
    const first = await compactor.compact(FOLD);
    assert.equal(first.tier, 'none');
    assert.equal(compactor.usageFactor, 1);
    // The provider counted 1.5 times the estimate of the view it was sent.
    compactor.observeUsage(Math.round(first.tokensAfter * 1.5));
    assert.ok(Math.abs(compactor.usageFactor - 1.5) < 0.01, String(compactor.usageFactor));
    const summarize = s.scripted();
    const biased = await compactor.compact(FOLD, { summarize });
    assert.equal(biased.tier, 'soft');
    assert.equal(summarize.requests.length, 1);
    const { compactor: fresh } = compactorAt(FOLD, 0.5);
    assert.equal((await fresh.compact(FOLD)).tier, 'none');
    compactor.observeUsage(0);
    assert.ok(Math.abs(compactor.usageFactor - 1.5) < 0.01, 'a reading of 0 counted');
    assert.throws(() => compactor.observeUsage(-1), RangeError);
    assert.throws(() => compactor.observeUsage('10'), TypeError);
    assert.throws(() => compactor.observeUsage(), TypeError);
  });
});

describe('compact(): summarizer failures fall back', () => {
  const FAILURES = [
    ['throws', () => { throw new Error('model down'); }, /model down/],
    ['rejects', async () => { throw new Error('HTTP 529'); }, /HTTP 529/],
    ['rejects with a non-Error', () => Promise.reject(42), /42/],
    ['hangs past the timeout', () => new Promise(() => {}), /timed out after 0\.2 s/],
    ['returns an empty string', () => '', /empty/],
    ['returns blank text', async () => '  \n ', /empty/],
    ['returns a number', () => 42, /a number, not a string/],
    ['returns nothing', () => undefined, /undefined, not a string/],
    ['returns garbage', () => 'lorem ipsum dolor sit amet', /no usable anchors/],
  ];
  for (const [label, summarize, why] of FAILURES) {
    it(`when the summarizer ${label}`, async () => {
      const { compactor, window } = compactorAt(FOLD, 0.75, { summarizeTimeout: 0.2 });
      const before = structuredClone(FOLD);
      const result = await compactor.compact(FOLD, { summarize });
      assert.deepEqual(FOLD, before);
      assert.equal(result.tier, 'soft');
      assert.match(result.record.fallback, why);
      assert.equal(result.messages.filter(s.isCheckpoint).length, 1);
      s.assertView(FOLD, result, { window });
      // The fallback checkpoint is state like any other: the next turn needs no model.
      const next = s.scripted();
      await compactor.compact(FOLD, { summarize: next });
      assert.equal(next.requests.length, 0);
    });
  }

  it('tells a timed-out summarizer to stop', async () => {
    const { compactor } = compactorAt(FOLD, 0.75, { summarizeTimeout: 0.1 });
    let signal = null;
    await compactor.compact(FOLD, {
      summarize: (request, context) => {
        signal = context.signal;
        return new Promise(() => {});
      },
    });
    assert.equal(signal.aborted, true);
  });
});

describe('compact(): the audit record', () => {
  it('passes each record to onCompaction with the fields of DESIGN section 8', async () => {
    const records = [];
    const { compactor } = compactorAt(FOLD, 0.75, {
      sessionId: 'audit-1',
      onCompaction: (record) => records.push(record),
    });
    const result = await compactor.compact(FOLD, { summarize: s.scripted() });
    assert.equal(records.length, 1);
    const [record] = records;
    assert.deepEqual(record, result.record);
    for (const key of ['id', 'session_id', 'timestamp', 'tier', 'tokens_before', 'tokens_after',
      'msgs_before', 'msgs_after', 'summarized', 'preserved_tail', 'offloaded', 'anchors',
      'checkpoint', 'covered', 'duration_ms', 'error', 'fallback', 'estimator',
      'notes', 'ratio_before', 'ratio_after', 'window', 'repairs', 'archived', 'state', 'mac']) {
      assert.ok(key in record, `the record lacks ${key}`);
    }
    // The ratios the tiers were chosen on, as on the result.
    assert.equal(record.ratio_before, result.ratioBefore);
    assert.equal(record.ratio_after, result.ratioAfter);
    assert.equal(record.window, compactor.options.contextWindow);
    assert.deepEqual(record.repairs, []);
    assert.deepEqual(result.repairs, []);
    // Routine decisions are notes; error is for failures only.
    assert.ok(Array.isArray(record.notes));
    assert.equal(record.error, null);
    // The folded span was archived before it left the view, and reads back by its ref.
    assert.ok(record.archived.length >= 1);
    let archived = '';
    for (const chunk of record.archived) {
      assert.match(chunk.ref, /^history:\d+-\d+$/);
      assert.equal(chunk.ref, `history:${chunk.first}-${chunk.end}`);
      const text = compactor.readEvidence(chunk.ref, { limit: 1e6 });
      assert.equal(compactor.readEvidence(chunk.path, { limit: 1e6 }), text);
      archived += text;
    }
    assert.ok(record.checkpoint.includes(`read_evidence(ref="${record.archived[0].ref}"`));
    assert.ok(archived.includes(FOLD[2].content), 'the archive lacks a folded message');
    assert.equal(record.state.kind, 'snapshot');
    assert.match(record.mac, /^[0-9a-f]{64}$/);
    // preserved_tail counts the messages kept after the folded span.
    const cp = result.messages.findIndex(s.isCheckpoint);
    assert.equal(record.preserved_tail, result.messages.length - cp - 1);
    assert.equal(record.session_id, 'audit-1');
    assert.equal(record.tier, 'soft');
    assert.ok(!Number.isNaN(Date.parse(record.timestamp)));
    assert.equal(record.tokens_before, result.tokensBefore);
    assert.equal(record.tokens_after, result.tokensAfter);
    assert.equal(record.msgs_before, FOLD.length);
    assert.equal(record.msgs_after, result.messages.length);
    assert.ok(record.offloaded.length > 0);
    for (const o of record.offloaded) {
      // DESIGN section 8's fields, at least (the core adds ref and hash).
      for (const key of ['bytes', 'lines', 'path', 'tool_call_id', 'tool_name']) {
        assert.ok(key in o, `an offloaded entry lacks ${key}`);
      }
      assert.equal(o.bytes, Buffer.byteLength(FOLD.find((m) => m.tool_call_id ===
        o.tool_call_id).content));
    }
    assert.equal(record.anchors.user_intent,
      'Fix the failing test in tests/test_api.py without changing the public API.');
    assert.ok(record.checkpoint.startsWith(s.MARKER));
    assert.equal(typeof record.covered.count, 'number');
    assert.match(record.covered.fingerprint, /^[0-9a-f]{16}$/);
    assert.equal(record.estimator, 'default');
  });

  it('writes one log line per record, mode 0600', async () => {
    const records = [];
    const storeDir = s.tmpStore();
    const history = s.syntheticHistory(50, 11);
    const window = windowFor(history, 2);
    const c = new Compactor({ contextWindow: window, storeDir, sessionId: 'log-1',
      onCompaction: (r) => records.push(r) });
    const results = await s.replay(c, history, { window, summarize: s.scripted() });
    const written = results.filter((r) => r.record !== null).map((r) => r.record);
    assert.ok(written.length >= 2);
    assert.deepEqual(records, written);
    const log = path.join(storeDir, 'compactions', 'log-1.jsonl');
    const lines = fs.readFileSync(log, 'utf8').split('\n').filter(Boolean);
    assert.equal(lines.length, written.length);
    assert.deepEqual(lines.map((l) => JSON.parse(l)), written);
    assert.equal(fs.statSync(log).mode & 0o777, 0o600);
    // The first record holds the whole state; later ones what changed (a snapshot every 16).
    assert.deepEqual(written.map((r) => r.state.kind),
      written.map((r, i) => (i % 16 === 0 ? 'snapshot' : 'delta')));
  });

  it('reports an onCompaction that throws or rejects as a warning', async () => {
    const warnings = [];
    const onWarning = (w) => { if (w.code === 'CK_ONCOMPACTION') warnings.push(w.message); };
    process.on('warning', onWarning);
    try {
      for (const onCompaction of [() => { throw new Error('sink full'); },
        async () => { throw new Error('sink gone'); }]) {
        const { compactor } = compactorAt(FOLD, 0.75, { onCompaction });
        const result = await compactor.compact(FOLD, { summarize: s.scripted() });
        assert.equal(result.tier, 'soft');
      }
      await sleep(20);
    } finally {
      process.off('warning', onWarning);
    }
    assert.equal(warnings.length, 2);
    assert.match(warnings[0], /sink full/);
    assert.match(warnings[1], /sink gone/);
  });
});

describe('compact(): fallbacks are loud', () => {
  it('warns once per distinct reason and tells onFallback every time', async () => {
    const warnings = [];
    const told = [];
    const onWarning = (w) => { if (w.code === 'CTXKEEL_FALLBACK') warnings.push(w.message); };
    process.on('warning', onWarning);
    const reasons = ['HTTP 401: invalid api key', 'HTTP 401: invalid api key',
      'HTTP 401: invalid api key', 'HTTP 429: slow down'];
    try {
      const { compactor } = compactorAt(FOLD, 0.75, { onFallback: (r) => told.push(r) });
      for (const reason of reasons) {
        compactor.reset(); // the same history folds again, and the summarizer fails again
        const result = await compactor.compact(FOLD, {
          summarize: () => { throw new Error(reason); } });
        assert.ok(result.record.fallback.includes(reason), result.record.fallback);
      }
      await sleep(20);
    } finally {
      process.off('warning', onWarning);
    }
    assert.equal(told.length, 4);
    assert.ok(told.every((r, i) => r.includes(reasons[i])));
    assert.equal(warnings.length, 2);
    assert.match(warnings[0], /HTTP 401/);
    assert.match(warnings[1], /HTTP 429/);
    assert.throws(() => new Compactor({ contextWindow: 1000, onFallback: 'log' }),
      /options.onFallback must be a function or null/);
  });

  it('says what the view keeps of the cached prefix', async () => {
    const { compactor } = compactorAt(FOLD, 0.3);
    const first = await compactor.compact(FOLD.slice(0, -2));
    assert.deepEqual(first.cache, { prefixKept: 0, prefixBroken: 0 });
    const grown = await compactor.compact(FOLD);
    assert.equal(grown.tier, 'none');
    assert.equal(grown.cache.prefixBroken, 0);
    assert.ok(grown.cache.prefixKept > first.tokensAfter - 8 &&
      grown.cache.prefixKept < first.tokensAfter, JSON.stringify(grown.cache));
  });
});

describe('compact(): async contract', () => {
  it('rejects promptly when the signal aborts mid-summary, and stays usable', async () => {
    const { compactor } = compactorAt(FOLD, 0.75);
    const controller = new AbortController();
    let seen = null;
    const started = Date.now();
    const pending = compactor.compact(FOLD, {
      signal: controller.signal,
      summarize: (request, context) => {
        seen = context.signal;
        return new Promise(() => {});
      },
    });
    setTimeout(() => controller.abort(new Error('user pressed stop')), 30);
    await assert.rejects(pending, (err) => {
      assert.equal(err.name, 'AbortError');
      assert.equal(err.code, 'ABORT_ERR');
      assert.equal(err.cause.message, 'user pressed stop');
      return true;
    });
    assert.ok(Date.now() - started < 1000);
    assert.equal(seen.aborted, true);
    // Usable after, and left as it was: the same history needs its summary again.
    const summarize = s.scripted();
    const result = await compactor.compact(FOLD, { summarize });
    assert.equal(result.tier, 'soft');
    assert.equal(summarize.requests.length, 1);
    s.assertView(FOLD, result, { window: compactor.options.contextWindow });
  });

  it('leaves no listener on the caller\'s signal', async () => {
    const { compactor } = compactorAt(FOLD, 0.75);
    const controller = new AbortController();
    const result = await compactor.compact(FOLD, { summarize: s.scripted(),
      signal: controller.signal });
    assert.equal(result.record.fallback, null);
    assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
  });

  it('keeps the process alive until the summarize timeout fires, then falls back', () => {
    // The child's only pending work is a summarizer that never settles: the process must
    // neither end early (exit code 0 with the compaction lost) nor hang past the timeout.
    const script = `
      const ck = require(${JSON.stringify(path.join(h.repoRoot, 'node', 'index.js'))});
      const history = ${JSON.stringify(FOLD)};
      const c = new ck.Compactor({ storeDir: process.argv[1], summarizeTimeout: 1.5,
        contextWindow: Math.ceil(ck.estimateTokens(history) / 0.75) });
      const started = Date.now();
      c.compact(history, { summarize: () => new Promise(() => {}) }).then((result) => {
        console.log(JSON.stringify({ tier: result.tier, fallback: result.record.fallback,
          ms: Date.now() - started }));
      });
      console.log('started');`;
    const started = Date.now();
    const out = execFileSync(process.execPath, ['-e', script, s.tmpStore()],
      { encoding: 'utf8', timeout: 30000, stdio: ['ignore', 'pipe', 'ignore'] });
    const lines = out.trim().split('\n');
    assert.equal(lines[0], 'started');
    assert.equal(lines.length, 2, `the process ended before the compaction settled: ${out}`);
    const settled = JSON.parse(lines[1]);
    assert.equal(settled.tier, 'soft');
    assert.match(settled.fallback, /summarizer timed out after 1\.5 s/);
    assert.ok(settled.ms >= 1400, `settled after ${settled.ms} ms, before the timeout`);
    assert.ok(Date.now() - started >= 1400);
  });

  it('rejects at once for a signal aborted already', async () => {
    const { compactor } = compactorAt(FOLD, 0.75);
    const summarize = s.scripted();
    await assert.rejects(compactor.compact(FOLD, { summarize, signal: AbortSignal.abort() }),
      { name: 'AbortError' });
    assert.equal(summarize.requests.length, 0);
    assert.equal((await compactor.compact(FOLD, { summarize })).tier, 'soft');
  });

  it('keeps the event loop free while the summarizer works', async () => {
    const { compactor } = compactorAt(FOLD, 0.75);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    try {
      const result = await compactor.compact(FOLD, {
        summarize: async (request) => {
          await sleep(200);
          return s.checkpointFor(request);
        },
      });
      assert.equal(result.record.fallback, null);
    } finally {
      clearInterval(timer);
    }
    assert.ok(ticks >= 5, `the interval fired only ${ticks} times`);
  });

  it('runs two compactors side by side', async () => {
    const a = compactorAt(FOLD, 0.75).compactor;
    const b = compactorAt(FOLD, 0.85).compactor;
    const slow = (ms) => async (request) => {
      await sleep(ms);
      return s.checkpointFor(request);
    };
    const [ra, rb] = await Promise.all([
      a.compact(FOLD, { summarize: slow(80) }),
      b.compact(FOLD, { summarize: slow(40) }),
    ]);
    assert.deepEqual([ra.tier, rb.tier], ['soft', 'full']);
    assert.equal(ra.record.fallback, null);
    assert.equal(rb.record.fallback, null);
  });

  it('refuses a second compact() on the same compactor with CK_EBUSY', async () => {
    const { compactor } = compactorAt(FOLD, 0.75);
    const first = compactor.compact(FOLD, {
      summarize: async (request) => {
        await sleep(50);
        return s.checkpointFor(request);
      },
    });
    await assert.rejects(compactor.compact(FOLD),
      { name: 'CtxkeelError', code: 'CK_EBUSY', message: 'ctxkeel: concurrent use of Compactor' });
    assert.throws(() => compactor.reset(), { code: 'CK_EBUSY' });
    assert.equal((await first).tier, 'soft');
    assert.equal((await compactor.compact(FOLD)).tier, 'none');
  });

  it('compacts the list as it was when called, even if the caller grows it meanwhile', async () => {
    const { compactor, window } = compactorAt(FOLD, 0.75);
    const history = FOLD.slice();
    const newest = history[history.length - 1];
    const result = await compactor.compact(history, {
      summarize: async (request) => {
        history.push(h.asst(h.call('late')), h.tool('late', 'arrived during the summary'));
        await sleep(10);
        return s.checkpointFor(request);
      },
    });
    assert.equal(result.messages[result.messages.length - 1], newest);
    s.assertView(FOLD, result, { window });
  });

  it('throws CK_ECLOSED after close()', async () => {
    const { compactor } = compactorAt(HISTORY, 0.75);
    compactor.close();
    compactor.close();
    assert.equal(compactor.closed, true);
    await assert.rejects(compactor.compact(HISTORY), { code: 'CK_ECLOSED' });
    for (const call of [() => compactor.sessionId, () => compactor.usageFactor,
      () => compactor.options, () => compactor.reset(), () => compactor.observeUsage(1),
      () => compactor.offload(h.tool('x', 'y')), () => compactor.readEvidence('x')]) {
      assert.throws(call, { name: 'CtxkeelError', code: 'CK_ECLOSED' });
    }
    await assert.rejects(compactor.searchEvidence(null, 'x'),
      { name: 'CtxkeelError', code: 'CK_ECLOSED' });
  });

  it('rejects a pending compact() with CK_ECLOSED when closed meanwhile', async () => {
    const { compactor } = compactorAt(FOLD, 0.75);
    const pending = compactor.compact(FOLD, {
      summarize: async (request) => {
        await sleep(30);
        return s.checkpointFor(request);
      },
    });
    await sleep(5);
    compactor.close();
    await assert.rejects(pending, { code: 'CK_ECLOSED' });
  });
});

describe('Compactor in other threads and processes', () => {
  const index = path.join(h.repoRoot, 'node', 'index.js');
  const WORKER = `
    const { parentPort, workerData } = require('node:worker_threads');
    const ck = require(workerData.index);
    (async () => {
      const c = new ck.Compactor({ contextWindow: workerData.window, storeDir: workerData.store });
      const r = await c.compact(workerData.history, {
        summarize: async (request) => workerData.reply + request.messages.length,
      });
      parentPort.postMessage({ tier: r.tier, fallback: r.record.fallback,
        checkpoint: r.messages.some((m) => m.content.startsWith('[Context Compaction]')),
        pairs: ck.checkPairs(r.messages).length });
      c.close();
    })().catch((err) => parentPort.postMessage({ error: String(err && err.stack) }));`;

  function runWorker(workerData) {
    return new Promise((resolve, reject) => {
      const worker = new Worker(WORKER, { eval: true, workerData });
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  }

  it('works inside worker threads, several at once', async () => {
    const workerData = {
      index,
      window: windowFor(FOLD, 0.75),
      history: FOLD,
      reply: '## User Intent\nfix the test\n## Next Steps\nrun it, messages: ',
    };
    const results = await Promise.all([1, 2, 3].map(() =>
      runWorker({ ...workerData, store: s.tmpStore() })));
    for (const r of results) {
      assert.equal(r.error, undefined, r.error);
      assert.deepEqual(r, { tier: 'soft', fallback: null, checkpoint: true, pairs: 0 });
    }
  });

  it('survives a worker terminated in the middle of a compaction', async () => {
    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      const ck = require(workerData.index);
      const c = new ck.Compactor({ contextWindow: workerData.window, storeDir: workerData.store });
      setInterval(() => {}, 1000);
      c.compact(workerData.history, { summarize: () => {
        parentPort.postMessage('waiting');
        return new Promise(() => {});
      } });`;
    const worker = new Worker(code, { eval: true, workerData: {
      index, window: windowFor(FOLD, 0.75), history: FOLD, store: s.tmpStore() } });
    await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    assert.equal(await worker.terminate(), 1);
  });

  it('frees compactors and pending jobs under garbage collection', () => {
    const script = `
      const ck = require(${JSON.stringify(index)});
      const history = ${JSON.stringify(FOLD)};
      const store = process.argv[1];
      const window = Math.ceil(ck.estimateTokens(history) / 0.75);
      (async () => {
        for (let round = 0; round < 20; round++) {
          const c = new ck.Compactor({ contextWindow: window, storeDir: store });
          await c.compact(history, { summarize: async () => '## Next Steps\\nmore' });
          // Left pending: the Job and the Compactor become garbage together. A timeout past
          // what a timer can wait means no timer, which would hold both (and the process).
          new ck.Compactor({ contextWindow: window, storeDir: store, summarizeTimeout: 3e6 })
            .compact(history, { summarize: () => new Promise(() => {}) });
          global.gc();
          await new Promise((r) => setImmediate(r));
        }
        global.gc();
        console.log('ok');
      })();`;
    const out = execFileSync(process.execPath, ['--expose-gc', '-e', script, s.tmpStore()],
      { encoding: 'utf8', timeout: 60000 });
    assert.equal(out.trim(), 'ok');
  });
});
