'use strict';

// Property tests in the Responses, AI SDK and LangChain dialects (fast-check), as
// tests/python/test_dialect_properties.py: random histories (generators.renderDialect: the plans
// of properties.test.js, results shuffled, missing, duplicated or misplaced, Unicode of every
// kind, outputs up to ~200 KB), replayed as an agent loop with one compactor at windows from far
// above the history to far below it, with the extractive summarizer or a good model reply.
// After every compact() call:
//   - the input is not mutated;
//   - the view passes checkPairs in its dialect;
//   - the system messages and the task are in the view as the caller's objects;
//   - at most one checkpoint; a message the view did not change is the caller's object; on a
//     fresh compactor at tier none the view is repairPairs(history), object for object;
//   - tokensAfter is the estimate of the view sent, never above the window nor tokensBefore.
// (Gemini has its own file, gemini_properties.test.js: its turns must alternate.)
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
const MARKER = JSON.stringify('[Context Compaction]').slice(0, -1); // a JSON string's start
const RATIOS = [0.3, 0.68, 0.73, 0.83, 0.97, 1.3, 3.0, 20.0];
const DIALECTS = ['responses', 'ai-sdk', 'langchain'];

function scenarios() {
  return fc.tuple(fc.constantFrom(...DIALECTS), g.plans(), fc.constantFrom(...RATIOS),
    fc.option(g.goodReplies(), { nil: null }), fc.constantFrom(1, 2, 6),
    fc.constantFrom(4000, 300), fc.boolean(), fc.array(fc.nat(), { maxLength: 3 }))
    .map(([dialect, plan, ratio, reply, keepTail, offloadThreshold, auto, picks]) => {
      const { messages, info } = g.renderDialect(plan, dialect);
      const tokens = ctxkeel.estimateTokens(ctxkeel.repairPairs(messages, { format: dialect }));
      const options = { contextWindow: Math.max(1, Math.floor(tokens / ratio)), keepTail,
        offloadThreshold, format: auto ? 'auto' : dialect };
      return { dialect, messages, info, options, reply,
        points: s.replayPoints(info.ends, picks, messages.length) };
    });
}

function checkView(dialect, info, compactor, messages, result, fresh) {
  const view = result.messages;
  const format = { format: dialect };
  assert.deepEqual(ctxkeel.checkPairs(view, format), [], 'the view breaks tool-call pairs');
  const inView = new Set(view);
  for (const i of info.pinned) {
    if (i < messages.length) {
      assert.ok(inView.has(messages[i]), `pinned message ${i} is not in the view`);
    }
  }
  const checkpoints = view.filter((m) => JSON.stringify(m).includes(MARKER));
  assert.ok(checkpoints.length <= 1, `${checkpoints.length} checkpoints`);
  s.assertViewObjects(messages, view, format, result.tier === 'none' && fresh);
  s.assertViewBound(compactor, result);
}

describe('dialect properties', () => {
  it('views pair, keep the pinned messages and stay in the window', async () => {
    const p = { numRuns: Math.max(1, Math.round(120 * SCALE)), interruptAfterTimeLimit: 90000,
      reporter: g.reporter };
    if (!RANDOM) p.seed = 20261204;
    await fc.assert(fc.asyncProperty(scenarios(), ({ dialect, messages, info, options, reply,
      points }) => s.replayInDialect(messages, options, reply, points,
      (compactor, prefix, result, fresh) => checkView(dialect, info, compactor, prefix, result,
        fresh))), p);
  });
});
