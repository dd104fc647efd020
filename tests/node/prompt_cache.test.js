'use strict';

// The provider's prompt cache through the Node API: minGain batching of warn offloads,
// promptCache prices that decide whether a soft fold pays, and Anthropic cache breakpoints.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers.js');
const ck = require(path.join(h.repoRoot, 'node', 'index.js'));

const MARK = { type: 'ephemeral' };

function tmp() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'ck-cache-'));
}

/** The task, then turns of a text + tool_use and a user message with its tool_result (every
 * bigEvery-th output 6000 bytes, else 600); the last ownMarks results carry the caller's own
 * cache_control. */
function anthropicSession(turns, { ownMarks = 0, bigEvery = 0 } = {}) {
  const messages = [{ role: 'user',
    content: 'Fix the failing test in src/parser.c. Never touch the vendor/ folder.' }];
  for (let t = 0; t < turns; t++) {
    messages.push({ role: 'assistant', content: [
      { type: 'text', text: `Step ${t}: run the tests again.` },
      { type: 'tool_use', id: `toolu_${t}`, name: 'bash', input: { command: `make test T=${t}` } },
    ] });
    const size = bigEvery && t % bigEvery === 0 ? 6000 : 600;
    let text = '';
    for (let i = 0; i < size; i++) text += i % 60 === 59 ? ' ' : String.fromCharCode(97 + (i + t) % 26);
    const block = { type: 'tool_result', tool_use_id: `toolu_${t}`, content: text };
    if (t >= turns - ownMarks) block.cache_control = { ...MARK };
    messages.push({ role: 'user', content: [block] });
  }
  return messages;
}

async function tokensOf(messages) {
  const c = new ck.Compactor({ contextWindow: 1e8, storeDir: tmp(), estimator: 'chars4' });
  return (await c.compact(messages)).tokensBefore;
}

/** [message index, block index] of every block that carries cache_control. */
function markedBlocks(messages) {
  const out = [];
  messages.forEach((m, i) => {
    if (Array.isArray(m.content)) {
      m.content.forEach((b, k) => { if (b && 'cache_control' in b) out.push([i, k]); });
    }
  });
  return out;
}

function checkpointReply() {
  return '## User Intent\nFix the parser test.\n\n## Execution Progress\nRan make test.\n\n' +
    '## Key Decisions\nKeep vendor/ untouched.\n\n## Tried Solutions\n- reran tests\n\n' +
    '## Next Steps\nInspect src/parser.c.\n';
}

describe('prompt cache', () => {
  it('takes the presets and prices and refuses bad ones by name', () => {
    const dir = tmp();
    const plain = new ck.Compactor({ contextWindow: 1000, storeDir: dir }).options;
    assert.equal(plain.promptCache, null);
    assert.equal(plain.cacheBreakpoints, false);
    assert.equal(plain.minGain, 50); // a twentieth of the window
    assert.deepEqual(new ck.Compactor({ contextWindow: 1000, storeDir: dir, promptCache: 'anthropic' })
      .options.promptCache, { read: 0.1, write: 1.25 });
    assert.deepEqual(new ck.Compactor({ contextWindow: 1000, storeDir: dir, promptCache: 'openai' })
      .options.promptCache, { read: 0.1, write: 1 });
    const own = new ck.Compactor({ contextWindow: 1000, storeDir: dir,
      promptCache: { read: 0.5, write: 2 }, cacheBreakpoints: true, minGain: 7 }).options;
    assert.deepEqual([own.promptCache, own.cacheBreakpoints, own.minGain],
      [{ read: 0.5, write: 2 }, true, 7]);
    for (const bad of ['gemini', { read: 0, write: 0 }, { read: 1.5, write: 2 },
      { read: 0.1, write: 0.5 }, { read: 0.1, write: 11 }, { read: NaN, write: 1 }]) {
      assert.throws(() => new ck.Compactor({ contextWindow: 1000, storeDir: dir, promptCache: bad }),
        (e) => /promptCache|prompt_cache/.test(e.message) &&
          (e.name === 'RangeError' || e.code === 'CK_EINVAL'), JSON.stringify(bad));
    }
    for (const bad of [3, ['anthropic'], { read: 0.1 }, { read: '0.1', write: 1 }]) {
      assert.throws(() => new ck.Compactor({ contextWindow: 1000, storeDir: dir, promptCache: bad }),
        { name: 'TypeError', message: /promptCache/ });
    }
    assert.throws(() => new ck.Compactor({ contextWindow: 1000, storeDir: dir, cacheBreakpoints: 1 }),
      { name: 'TypeError', message: /cacheBreakpoints/ });
    assert.throws(() => new ck.Compactor({ contextWindow: 1000, storeDir: dir, minGain: 0 }),
      { message: /minGain/ });
  });

  it('waits with warn offloads until they free minGain tokens', async () => {
    const messages = anthropicSession(8, { bigEvery: 2 });
    const window = Math.floor((await tokensOf(messages)) / 0.65);
    const gated = new ck.Compactor({ contextWindow: window, storeDir: tmp(), estimator: 'chars4',
      keepTail: 4, minGain: Math.floor(window / 2) });
    let r = await gated.compact(messages);
    assert.equal(r.tier, 'warn');
    assert.equal(r.record, null);
    assert.deepEqual(r.messages, messages);
    const free = new ck.Compactor({ contextWindow: window, storeDir: tmp(), estimator: 'chars4',
      keepTail: 4 });
    r = await free.compact(messages);
    assert.equal(r.tier, 'warn');
    assert.ok(r.record && r.record.offloaded.length > 0);
    assert.ok(r.tokensAfter < r.tokensBefore);
  });

  for (const own of [0, 1, 2, 3, 4]) {
    it(`marks the checkpoint and the task with ${own} marker(s) of the caller's`, async () => {
      const messages = anthropicSession(30, { ownMarks: own });
      const snapshot = structuredClone(messages);
      const window = Math.floor((await tokensOf(messages)) / 0.75);
      const c = new ck.Compactor({ contextWindow: window, storeDir: tmp(), estimator: 'chars4',
        keepTail: 4, cacheBreakpoints: true });
      const r = await c.compact(messages, { summarize: checkpointReply });
      assert.equal(r.tier, 'soft');
      assert.deepEqual(messages, snapshot); // the caller's blocks gained no marker
      const ours = Math.min(2, 4 - own);
      const marks = markedBlocks(r.messages).map(String);
      assert.equal(marks.length, own + ours);
      const cp = r.messages.findIndex((m) => JSON.stringify(m.content).includes('[Context Compaction]'));
      assert.ok(cp > 0);
      assert.equal(marks.includes(String([cp, r.messages[cp].content.length - 1])), ours >= 1);
      assert.equal(marks.includes('0,0'), ours >= 2);
      if (ours >= 2) {
        assert.deepEqual(r.messages[0].content,
          [{ type: 'text', text: snapshot[0].content, cache_control: MARK }]);
      }
      const again = await c.compact(messages, { summarize: checkpointReply });
      assert.equal(JSON.stringify(again.messages), JSON.stringify(r.messages));
      assert.equal(again.cache.prefixBroken, 0);
    });
  }

  it('marks only Anthropic views', async () => {
    const openai = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];
    const c = new ck.Compactor({ contextWindow: 100000, storeDir: tmp(), cacheBreakpoints: true });
    assert.deepEqual((await c.compact(openai)).messages, openai);
    const a = new ck.Compactor({ contextWindow: 100000, storeDir: tmp(), cacheBreakpoints: true });
    const r = await a.compact(anthropicSession(2));
    assert.deepEqual(markedBlocks(r.messages), [[0, 0]]); // no checkpoint yet: the task alone
  });

  it('bills less under Anthropic prices and says why in the records', async () => {
    const messages = anthropicSession(90);
    const window = Math.floor((await tokensOf(messages)) / 3);
    const runs = {};
    for (const [name, promptCache] of [['plain', null], ['priced', 'anthropic']]) {
      const { rows } = ck.replay(messages, { contextWindow: window, storeDir: tmp(),
        estimator: 'chars4', keepTail: 4, promptCache });
      assert.ok(rows.every((row) => row.ratioAfter <= 0.95));
      runs[name] = rows;
    }
    const billed = (rows) => rows.reduce((s, r) =>
      s + 0.1 * r.prefixKept + 1.25 * (r.tokensAfter - r.prefixKept), 0);
    const folds = (rows) => rows.filter((r) => r.summarized);
    assert.ok(folds(runs.plain).some((r) => r.tier === 'soft'));
    assert.ok(!folds(runs.priced).some((r) => r.tier === 'soft'));
    assert.ok(folds(runs.priced).length > 0 && folds(runs.priced).length < folds(runs.plain).length);
    const records = runs.priced.map((r) => r.record).filter(Boolean);
    const estimates = records.filter((rec) => rec.cache.estimate).map((rec) => rec.cache.estimate);
    assert.ok(estimates.length > 0 && estimates.every((e) => e.horizon >= 1));
    assert.ok(records.some((rec) => JSON.stringify(rec).includes('the fold at soft waits')));
    assert.ok(billed(runs.priced) < billed(runs.plain));
  });
});
