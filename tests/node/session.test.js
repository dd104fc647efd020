'use strict';

// The append-only session: append(message) / view(options). A session is a compact() of the
// list of what was appended, read as it grows; these tests hold it to exactly that. The
// property replays random histories in every dialect as an agent loop twice, once appending
// each message and asking view() at the turn ends, once calling compact() on the same prefixes
// with a compactor of the same options before (same session id, same store, emptied between):
// tier, token counts, record and every message of the views must be the same. The
// other tests cover what a list cannot show: the copies are frozen and the caller's objects
// stay its own, a refused message is not added, compact() and view() share a compactor, busy,
// reset and close.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const fc = require('fast-check');
const h = require('./helpers.js');
const s = require('./sessions.js');
const g = require('./generators.js');

const { ctxkeel } = h;
const { Compactor } = ctxkeel;

after(s.removeStores);

const SCALE = Number(process.env.CTXKEEL_PROP_SCALE || 1);
const RANDOM = process.env.CTXKEEL_PROP_RANDOM === '1';
const RATIOS = [0.5, 0.75, 0.85, 0.97, 1.3, 20.0];
const DIALECTS = ['openai', 'anthropic', 'gemini', 'responses', 'ai-sdk', 'langchain'];

function rendered(plan, dialect) {
  if (dialect === 'gemini') return g.renderGemini(plan);
  if (dialect === 'openai' || dialect === 'anthropic') return g.render(plan, dialect);
  return g.renderDialect(plan, dialect);
}

/** The same loop run twice in one store (emptied between the runs, so that placeholders name
 * the same paths): compact() of each prefix, then append() and view(). */
async function replay({ messages, ends, options, reply }) {
  const store = s.tmpStore();
  const summarize = reply === null ? undefined : () => reply;
  const args = summarize ? { summarize } : {};
  const listed = new Compactor({ ...options, storeDir: store, sessionId: 'same' });
  const wanted = [];
  try {
    for (const end of ends) {
      wanted.push(await h.outcome(() => listed.compact(messages.slice(0, end), args)));
    }
  } finally {
    listed.close();
  }
  fs.rmSync(store, { recursive: true, force: true });
  fs.mkdirSync(store);
  const session = new Compactor({ ...options, storeDir: store, sessionId: 'same' });
  try {
    let appended = 0;
    for (const [k, end] of ends.entries()) {
      while (appended < end) assert.equal(session.append(messages[appended++]), appended);
      const got = await h.outcome(() => session.view(args));
      h.assertSameOutcome(got, wanted[k], `view at ${end}`);
      if (!got.code) {
        assert.equal(got.result.record === null, wanted[k].result.record === null,
          `view at ${end}: record`);
      }
      if (got.result) {
        const kept = new Set(session.session);
        for (const m of got.result.messages) {
          if (kept.has(m)) assert.ok(Object.isFrozen(m), 'a kept message is not frozen');
        }
      }
    }
  } finally {
    session.close();
  }
}

function scenarios() {
  return fc.tuple(fc.constantFrom(...DIALECTS), g.plans({ maxTurns: 12 }),
    fc.constantFrom(...RATIOS), fc.option(g.goodReplies(), { nil: null }),
    fc.constantFrom(1, 2, 6), fc.constantFrom(4000, 300))
    .map(([dialect, plan, ratio, reply, keepTail, offloadThreshold]) => {
      const { messages, info } = rendered(plan, dialect);
      const tokens = ctxkeel.estimateTokens(ctxkeel.repairPairs(messages, { format: dialect }));
      const options = { contextWindow: Math.max(1, Math.floor(tokens / ratio)), keepTail,
        offloadThreshold, format: dialect };
      const ends = [...new Set([...info.ends, messages.length])].filter((e) => e > 0);
      return { dialect, messages, ends, options, reply };
    });
}

describe('append-only session', () => {
  it('view() is compact() of what was appended, in every dialect', async () => {
    const p = { numRuns: Math.max(1, Math.round(60 * SCALE)), interruptAfterTimeLimit: 90000,
      reporter: g.reporter };
    if (!RANDOM) p.seed = 20261204;
    await fc.assert(fc.asyncProperty(scenarios(), replay), p);
  });

  it('keeps frozen copies: the caller may change its objects, and cannot change the copies',
    async () => {
      const c = new Compactor({ contextWindow: 100000, storeDir: s.tmpStore() });
      try {
        const task = { role: 'user', content: [{ type: 'text', text: 'Fix the bug in a.py' }] };
        c.append({ role: 'system', content: 'You are an agent.' });
        c.append(task);
        task.content[0].text = 'something else entirely, much longer than the task was';
        task.role = 'assistant';
        const copy = c.session[1];
        assert.notEqual(copy, task);
        assert.equal(copy.content[0].text, 'Fix the bug in a.py');
        assert.ok(Object.isFrozen(copy) && Object.isFrozen(copy.content) &&
          Object.isFrozen(copy.content[0]));
        assert.throws(() => { copy.content[0].text = 'x'; }, TypeError);
        assert.ok(Object.isFrozen(c.session));
        const got = await c.view();
        const fresh = new Compactor({ contextWindow: 100000, storeDir: s.tmpStore() });
        const want = await fresh.compact([{ role: 'system', content: 'You are an agent.' },
          { role: 'user', content: [{ type: 'text', text: 'Fix the bug in a.py' }] }]);
        fresh.close();
        assert.equal(got.tokensBefore, want.tokensBefore);
        assert.deepEqual(got.messages, want.messages);
        assert.equal(got.messages[1], copy, 'the view keeps the session\'s copy');
      } finally {
        c.close();
      }
    });

  it('copies a "__proto__" key as a key and shared objects once', () => {
    const c = new Compactor({ contextWindow: 100000, storeDir: s.tmpStore() });
    try {
      const parsed = JSON.parse('{"role":"user","content":"hi","__proto__":{"x":1}}');
      c.append(parsed);
      const copy = c.session[0];
      assert.equal(Object.getPrototypeOf(copy), Object.prototype);
      assert.deepEqual(Object.keys(copy), ['role', 'content', '__proto__']);
      const shared = { type: 'text', text: 'twice' };
      c.append({ role: 'assistant', content: [shared, shared] });
      const [first, second] = c.session[1].content;
      assert.equal(first, second);
      assert.notEqual(first, shared);
    } finally {
      c.close();
    }
  });

  it('refuses a bad message by its index in the session, and does not add it', async () => {
    const c = new Compactor({ contextWindow: 100000, storeDir: s.tmpStore() });
    try {
      const good = s.syntheticHistory(4);
      for (const m of good) c.append(m);
      for (const bad of [{ role: 'user', content: 42 }, { role: 7, content: 'x' }]) {
        assert.throws(() => c.append(bad), (err) => {
          assert.ok(err instanceof ctxkeel.InputError, `${err}`);
          assert.equal(err.index, good.length);
          return true;
        });
        assert.equal(c.session.length, good.length);
      }
      for (const bad of [null, 'text', 3]) {
        assert.throws(() => c.append(bad), TypeError);
      }
      assert.equal(c.session.length, good.length);
      const got = await c.view();
      const fresh = new Compactor({ contextWindow: 100000, storeDir: s.tmpStore() });
      const want = await fresh.compact(good);
      fresh.close();
      assert.equal(got.tokensBefore, want.tokensBefore);
      assert.equal(got.messages.length, good.length);
      assert.equal(c.append(h.user('one more')), good.length + 1);
      const more = await c.view();
      assert.ok(more.tokensBefore > got.tokensBefore);
    } finally {
      c.close();
    }
  });

  it('shares a compactor with compact(), either order', async () => {
    const opts = { contextWindow: 100000 };
    const c = new Compactor({ ...opts, storeDir: s.tmpStore() });
    const fresh = () => new Compactor({ ...opts, storeDir: s.tmpStore() });
    const other = s.anthropicHistory(6, 3);
    const mine = s.syntheticHistory(8, 5);
    try {
      for (const m of mine.slice(0, 10)) c.append(m);
      const listed = await c.compact(other);
      const v1 = await c.view();
      for (const m of mine.slice(10)) c.append(m);
      const again = await c.compact(other);
      const v2 = await c.view();
      for (const [got, list] of [[listed, other], [v1, mine.slice(0, 10)], [again, other],
        [v2, mine]]) {
        const f = fresh();
        const want = await f.compact(list);
        f.close();
        assert.equal(got.tokensBefore, want.tokensBefore);
        assert.equal(got.messages.length, want.messages.length);
        assert.deepEqual(got.messages, want.messages);
      }
    } finally {
      c.close();
    }
  });

  it('is busy while a view runs, and reset() empties the session', async () => {
    const c = new Compactor({ contextWindow: 2000, keepTail: 2, storeDir: s.tmpStore() });
    try {
      for (const m of s.syntheticHistory(30)) c.append(m);
      let release;
      const gate = new Promise((resolve) => { release = resolve; });
      const running = c.view({ summarize: async (req) => { await gate; return s.checkpointFor(req); } });
      assert.throws(() => c.append(h.user('now')), (err) => err.code === 'CK_EBUSY');
      assert.throws(() => c.reset(), (err) => err.code === 'CK_EBUSY');
      await assert.rejects(c.view(), (err) => err.code === 'CK_EBUSY');
      const n = c.session.length;
      release();
      const result = await running;
      assert.notEqual(result.tier, 'none');
      assert.equal(c.session.length, n);
      c.reset();
      assert.equal(c.session.length, 0);
      c.append(h.user('a new conversation'));
      const next = await c.view();
      assert.equal(next.tier, 'none');
      assert.deepEqual(next.messages, [h.user('a new conversation')]);
    } finally {
      c.close();
    }
    assert.throws(() => c.append(h.user('closed')), (err) => err.code === 'CK_ECLOSED');
  });
});
