'use strict';

// Property tests in the Gemini dialect (fast-check), as tests/python/test_gemini_properties.py:
// random `contents` histories (generators.renderGemini: the plans of properties.test.js, calls
// with ids, results shuffled, missing, duplicated or misplaced, Unicode of every kind, outputs
// up to ~200 KB), replayed as an agent loop with one compactor at windows from far above the
// history to far below it, with the extractive summarizer or a good model reply. After every
// compact() call:
//   - the input is not mutated;
//   - the view passes checkPairs in the Gemini dialect;
//   - turns alternate: the histories alternate (as generateContent demands), so no two turns
//     of one side may stand next to each other in a view;
//   - the task opens the view, as the caller's object or a copy whose parts start with its own;
//   - at most one checkpoint, in a user turn; a message the view did not change is the caller's
//     object; on a fresh compactor at tier none the view is repairPairs(history), object for
//     object;
//   - tokensAfter is the estimate of the view sent, never above the window nor tokensBefore.
// CTXKEEL_PROP_RANDOM=1 explores new seeds; CTXKEEL_PROP_SCALE=N multiplies numRuns.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fc = require('fast-check');
const h = require('./helpers.js');
const s = require('./sessions.js');
const g = require('./generators.js');

const { ctxkeel } = h;

after(s.removeStores);

const SCALE = Number(process.env.CTXKEEL_PROP_SCALE || 1);
const RANDOM = process.env.CTXKEEL_PROP_RANDOM === '1';
const MARKER = '[Context Compaction]';
const RATIOS = [0.3, 0.68, 0.73, 0.83, 0.97, 1.3, 3.0, 20.0];
const GEMINI = { format: 'gemini' };

const side = (turn) => (turn.role === 'model' ? 'model' : 'user');
const isCheckpointPart = (p) => typeof p.text === 'string' && p.text.startsWith(MARKER);

function scenarios() {
  return fc.tuple(g.plans(), fc.constantFrom(...RATIOS), fc.option(g.goodReplies(), { nil: null }),
    fc.constantFrom(1, 2, 6), fc.constantFrom(4000, 300), fc.constantFrom('gemini', 'auto'),
    fc.array(fc.nat(), { maxLength: 3 }))
    .map(([plan, ratio, reply, keepTail, offloadThreshold, format, picks]) => {
      const { messages, info } = g.renderGemini(plan);
      const tokens = ctxkeel.estimateTokens(ctxkeel.repairPairs(messages, GEMINI));
      const options = { contextWindow: Math.max(1, Math.floor(tokens / ratio)), keepTail,
        offloadThreshold, format };
      const points = s.replayPoints(info.ends, picks, messages.length);
      return { messages, options, reply, points };
    });
}

function checkView(compactor, messages, result, fresh) {
  const view = result.messages;
  assert.deepEqual(ctxkeel.checkPairs(view, GEMINI), [], 'the view breaks tool-call pairs');
  for (let j = 1; j < view.length; j++) {
    assert.notEqual(side(view[j]), side(view[j - 1]),
      `turns ${j - 1} and ${j} of the view are both ${side(view[j])} turns`);
  }
  const task = messages[0];
  assert.ok(view[0] === task ||
    s.canonical(view[0].parts.slice(0, task.parts.length)) === s.canonical(task.parts),
  'the view does not open with the task');
  const checkpoints = [];
  view.forEach((m, j) => m.parts.forEach((p) => { if (isCheckpointPart(p)) checkpoints.push(j); }));
  assert.ok(checkpoints.length <= 1, `${checkpoints.length} checkpoints`);
  for (const j of checkpoints) assert.equal(side(view[j]), 'user');
  s.assertViewObjects(messages, view, GEMINI, result.tier === 'none' && fresh);
  s.assertViewBound(compactor, result);
}

describe('gemini properties', () => {
  it('views alternate, pair and stay in the window', async () => {
    const p = { numRuns: Math.max(1, Math.round(120 * SCALE)), interruptAfterTimeLimit: 90000,
      reporter: g.reporter };
    if (!RANDOM) p.seed = 20261204;
    await fc.assert(fc.asyncProperty(scenarios(), ({ messages, options, reply, points }) =>
      s.replayInDialect(messages, options, reply, points, checkView)), p);
  });
});
