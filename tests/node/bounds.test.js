'use strict';

// The bound always holds and compaction never thrashes (issue 12), through the public Node API:
//   - over random agent histories (generators.js agentHistories: up to 6 parallel calls, ids
//     reused as call_0 / call_<k>, a 0.3-1.7 MB newest output, 5-40 KB user messages), random
//     windows and tool schemas, replayed as agent loops: every view at most the window, after
//     any compaction at most soft x window unless the record says why, never larger, pairs
//     valid, pinned messages the caller's objects, the newest turn's assistant message there,
//     the newest outputs the caller's objects or placeholders that read back exactly, and
//     CK_EOVERFLOW only when the pinned messages do not fit;
//   - the 1.6 MB cat at a 128,000-token window;
//   - corpus replays at 15%, 25%, 35% and 60% of each session's tokens: no rapid re-compaction
//     (issue 12 item 3), at most one summary call per compaction.
// A held-back slice of generated sessions (HELD_OUT_SEEDS) is replayed by its own test; see
// the comment there.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fc = require('fast-check');
const h = require('./helpers.js');
const s = require('./sessions.js');
const g = require('./generators.js');

const { ctxkeel } = h;
const { Compactor } = ctxkeel;

after(s.removeStores);

const SCALE = Number(process.env.CTXKEEL_PROP_SCALE || 1);
const SEED = process.env.CTXKEEL_PROP_RANDOM === '1' ? undefined : 20261202;

const BIG_TOOL = { type: 'function', function: { name: 'run_tests',
  description: 'Runs the test suite and reports every failure with its traceback. '.repeat(40),
  parameters: { type: 'object', properties: { path: { type: 'string' } } } } };
const TOOL_SETS = [[], [ctxkeel.readEvidenceTool()], [ctxkeel.readEvidenceTool(), BIG_TOOL]];

/** The tokens of a history without its largest message (the window of a history with a huge
 * newest output is drawn against the rest, or every window would swallow the rest whole). */
function restTokens(messages) {
  const sizes = messages.map((m) => ctxkeel.estimateTokens(m));
  return ctxkeel.estimateTokens(messages) - Math.max(0, ...sizes);
}

// CK_EOVERFLOWs whose err.where states a need that fits the window (asserted empty below).
const unexplained = [];

/**
 * compact() of `prefix` and every invariant of the result (sessions.js assertView and
 * assertRecoverable, the summarizer discipline). A CK_EOVERFLOW must come with the pinned
 * messages and tool schemas as its stated need; returns null then.
 */
async function step(c, prefix, { window, tools, toolTokens, told, summarize, format, pinned }) {
  const before = structuredClone(prefix);
  const calls = summarize.requests.length;
  let result;
  try {
    result = await c.compact(prefix, { tools, summarize });
  } catch (err) {
    if (err.code !== 'CK_EOVERFLOW') throw err;
    const m = new RegExp('^the pinned messages and tool schemas need (\\d+) tokens; the ' +
      'window is (\\d+)(?:; with a checkpoint: (\\d+))?$').exec(err.where);
    assert.ok(m, err.where);
    assert.equal(Number(m[2]), window);
    const need = ctxkeel.estimateTokens(pinned.filter((i) => i < prefix.length)
      .map((i) => prefix[i])) + toolTokens;
    assert.ok(Number(m[1]) >= need, `${err.where}: the pinned messages need ${need}`);
    const stated = m[3] === undefined ? Number(m[1]) : Number(m[3]);
    if (stated <= window && unexplained.length < 5) unexplained.push(err.where);
    return null;
  }
  assert.deepEqual(prefix, before, 'compact() changed its input');
  s.assertView(prefix, result, { window, told, toolTokens, format });
  await s.assertRecoverable(c, prefix, result);
  const made = summarize.requests.length - calls;
  assert.ok(made <= 1, `${made} summary calls in one compaction`);
  if (!s.atLeast(result.tier, 'soft') || result.tier === 'emergency') assert.equal(made, 0);
  return result;
}

function scenarios() {
  return fc.tuple(g.agentHistories(), fc.constantFrom(0.15, 0.25, 0.4, 0.7, 0.9, 1.5, 3),
    fc.constantFrom(...TOOL_SETS.keys()), fc.constantFrom(1, 2, 6),
    fc.array(fc.nat(), { maxLength: 3 }))
    .map(([hist, ratio, tools, keepTail, picks]) => {
      const basis = hist.features.hugeNewest ? restTokens(hist.messages)
        : ctxkeel.estimateTokens(hist.messages);
      const ends = hist.info.ends;
      const points = [...new Set(picks.map((p) => ends[p % ends.length]))]
        .filter((k) => k < hist.messages.length).sort((a, b) => a - b);
      points.push(hist.messages.length);
      return { ...hist, window: Math.max(1, Math.floor(basis / ratio)), tools, keepTail, points };
    });
}

async function runScenario(sc) {
  const tools = TOOL_SETS[sc.tools];
  const toolTokens = tools.length ? ctxkeel.estimateTokens(tools) : 0;
  const c = new Compactor({ contextWindow: sc.window, keepTail: sc.keepTail,
    storeDir: s.tmpStore(), sessionId: 'bounds' });
  const told = { over: false };
  const summarize = s.scripted();
  for (const k of sc.points) {
    await step(c, sc.messages.slice(0, k), { window: sc.window, tools, toolTokens, told,
      summarize, format: sc.shape, pinned: sc.info.pinned });
  }
  c.close();
}

describe('the bound over random agent histories', () => {
  it('holds for every view: window, soft limit, pairs, newest turn, what left reads back',
    async () => {
      await fc.assert(fc.asyncProperty(scenarios(), runScenario), {
        numRuns: Math.max(1, Math.round(60 * SCALE)), seed: SEED,
        interruptAfterTimeLimit: 120000, reporter: g.reporter,
      });
    });

  // Held back: the tests and invariants were developed against the property above (its seed)
  // and the corpus; these eight sessions (seeds never used while developing) were replayed
  // once, when the suite was done (all passed), and are kept as a check of their own.
  const HELD_OUT_SEEDS = [73301, 73302, 73303, 73304, 73305, 73306, 73307, 73308];
  it('holds on the held-back generated sessions', async () => {
    for (const sc of g.sampleBySeed(scenarios(), HELD_OUT_SEEDS)) await runScenario(sc);
  });

  // Every CK_EOVERFLOW met above states a need above the window: the pinned messages and tool
  // schemas alone, or, when they fit, with the smallest checkpoint beside them.
  it('states a need above the window in every CK_EOVERFLOW met above', () => {
      assert.deepEqual(unexplained, []);
    });
});

describe('CK_EOVERFLOW', () => {
  const pinned = [h.sys(`You are a careful agent. ${'Follow the house rules. '.repeat(300)}`),
    h.user('Fix the failing test in tests/test_api.py.')];

  it('comes only when the pinned messages and the tool schemas alone do not fit', async () => {
    const history = [...pinned, h.asst(h.call('c1', 'bash', '{"cmd":"pytest"}')),
      h.tool('c1', 'x\n'.repeat(50000)), { role: 'assistant', content: 'Looking.' },
      h.user('go on')];
    const need = ctxkeel.estimateTokens(pinned);
    const tools = [BIG_TOOL];
    const toolTokens = ctxkeel.estimateTokens(tools);
    // Room for the pinned messages, a checkpoint and the newest turn: a view, within the bound.
    for (const window of [need * 3, need * 2]) {
      const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
      const result = await c.compact(history);
      s.assertView(history, result, { window });
      await s.assertRecoverable(c, history, result);
    }
    // The pinned messages alone over the window: no view can be made.
    for (const [window, withTools] of [[need - 1, false], [Math.floor(need / 2), false],
      [need + Math.floor(toolTokens / 2), true]]) {
      const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
      await assert.rejects(c.compact(history, withTools ? { tools } : undefined), (err) => {
        assert.ok(err instanceof ctxkeel.CtxkeelError);
        assert.ok(!(err instanceof ctxkeel.InputError));
        assert.equal(err.code, 'CK_EOVERFLOW');
        assert.equal(err.where, `the pinned messages and tool schemas need ` +
          `${need + (withTools ? toolTokens : 0)} tokens; the window is ${window}`);
        assert.ok(err.message.startsWith(`ctxkeel: ${err.where}: `), err.message);
        return true;
      });
      // The compactor is left usable: with the window the history needs, no error.
      assert.equal((await c.compact([h.user('hi')])).tier, 'none');
    }
    assert.equal(ctxkeel.statusCodes.CK_EOVERFLOW.code, -17);
  });

  // The planner's checkpoint estimate (an upper bound) once decided, so windows into which the
  // core's own smallest view fits were refused: this history compacts to a 154-token view at
  // window 160 and above, yet windows 154-159 failed. The bare checkpoint is tried first now.
  it('is not raised where a view the core makes would fit', async () => {
      const history = [h.sys('s'.repeat(400)), h.user('task '.repeat(20)),
        ...Array.from({ length: 30 }, (_, i) => [{ role: 'assistant', content: `step ${i}` },
          h.user(`ok ${i}`)]).flat()];
      // The smallest view the core makes as the window shrinks, until it refuses.
      let smallest = Infinity;
      for (let window = 400; ; window--) {
        const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
        try {
          smallest = Math.min(smallest, (await c.compact(history)).tokensAfter);
        } catch (err) {
          assert.equal(err.code, 'CK_EOVERFLOW');
          break;
        }
      }
      // A window of that size takes it.
      const fits = await new Compactor({ contextWindow: smallest, storeDir: s.tmpStore() })
        .compact(history);
      assert.ok(fits.tokensAfter <= smallest);
    });
});

describe('a 1.6 MB output in the newest turn', () => {
  const log = Array.from({ length: 20000 }, (_, i) =>
    `2026-12-01T10:${String(i % 60).padStart(2, '0')}:00Z worker-${i % 13} INFO request ` +
    `id=${i * 7919} path=/api/v1/items/${i} status=200 took=${i % 97}ms`).join('\n');
  const task = h.user('The service is slow; find out why from its log.');

  for (const shape of ['openai', 'anthropic']) {
    it(`fits a 128,000-token window as a placeholder whose text reads back (${shape})`,
      async () => {
        assert.ok(Buffer.byteLength(log) > 1.6e6, String(Buffer.byteLength(log)));
        let history = [h.sys('You are an SRE agent.'), task,
          h.asst(h.call('cat_1', 'bash', '{"cmd":"cat /var/log/app.log"}')), h.tool('cat_1', log)];
        if (shape === 'anthropic') history = h.toAnthropic(history);
        const window = 128000;
        const tools = [ctxkeel.readEvidenceTool(shape)];
        const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
        const result = await c.compact(history, { tools });
        assert.ok(result.ratioBefore > 3, String(result.ratioBefore));
        assert.ok(result.ratioAfter <= 0.7, String(result.ratioAfter));
        s.assertView(history, result, { window, format: shape,
          toolTokens: ctxkeel.estimateTokens(tools) });
        await s.assertRecoverable(c, history, result);
        // The newest turn: the call as it is, its output a placeholder.
        const last = result.messages[result.messages.length - 1];
        const text = shape === 'openai' ? last.content : last.content[0].content;
        assert.ok(text.startsWith(s.PLACEHOLDER), text.slice(0, 100));
        assert.ok(Buffer.byteLength(text) < 8192, `a placeholder of ${Buffer.byteLength(text)} B`);
        assert.ok(result.messages.includes(history[history.length - 2]));
        // Every byte reads back, by the call id and page by page.
        assert.equal(c.readEvidence('cat_1', { limit: 1e6 }), log);
        let paged = '';
        for (let offset = 0; ; offset += 2000) {
          const page = c.readEvidence('cat_1', { offset, limit: 2000 });
          if (page === '') break;
          paged += page;
        }
        assert.equal(paged, log);
        // And through the model's tool: a search names the line, reading there gives it.
        const hit = c.handleReadEvidence({ id: 'r', type: 'function', function: {
          name: 'read_evidence', arguments: JSON.stringify({ pattern: 'id=79190000 ' }) } });
        const at = /^ref="cat_1" offset=(\d+): /.exec(hit.content);
        assert.ok(at, hit.content);
        assert.equal(Number(at[1]), 10000);
        const line = c.handleReadEvidence({ id: 'r', type: 'function', function: {
          name: 'read_evidence', arguments: JSON.stringify({ ref: 'cat_1', offset: 10000,
            limit: 1 }) } });
        assert.equal(line.content, `${log.split('\n')[10000]}\n`);
      });
  }

  // Issue 12 item 5: placeholdering the newest turn is always noted in the record.
  it('notes in the record that the newest turn was placeholdered', async () => {
      const history = [task, h.asst(h.call('cat_1')), h.tool('cat_1', log)];
      const c = new Compactor({ contextWindow: 128000, storeDir: s.tmpStore() });
      const result = await c.compact(history);
      assert.ok(result.record.notes.some((n) => /newest/.test(n)),
        JSON.stringify(result.record.notes));
    });
});

describe('no rapid re-compaction over the corpus', () => {
  const corpus = h.loadCorpus();
  if (corpus.length === 0) it('replays the corpus', { skip: 'shared/corpus is absent' }, () => {});

  /**
   * Replays `transcript` at `window` as an agent loop (sessions.js replay checks every view)
   * and returns its rhythm: the folds (a new checkpoint: what costs a summary) with the
   * history's size at each, the summary calls, the peak ratio. A CK_EOVERFLOW is allowed only
   * where fewer than 400 tokens are left beside the pinned messages (no checkpoint and newest
   * turn fit there); it ends the replay, as every later history has the same pinned messages.
   */
  async function rhythm(transcript, window) {
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
    const summarize = s.scripted();
    const told = { over: false };
    const pinned = ctxkeel.estimateTokens(transcript.slice(0, 2));
    const folds = [];
    let calls = 0;
    let peak = 0;
    let overflow = false;
    for (let i = 1; i < transcript.length && !overflow; i++) {
      if (transcript[i].role !== 'assistant') continue;
      const prefix = transcript.slice(0, i);
      const before = summarize.requests.length;
      let result;
      try {
        result = await c.compact(prefix, { summarize });
      } catch (err) {
        assert.equal(err.code, 'CK_EOVERFLOW', err.message);
        assert.ok(window - pinned < 400, `CK_EOVERFLOW with ${window - pinned} tokens beside ` +
          `the pinned messages: ${err.message}`);
        overflow = true;
        break;
      }
      s.assertView(prefix, result, { window, told });
      await s.assertRecoverable(c, prefix, result);
      calls++;
      peak = Math.max(peak, result.ratioAfter);
      assert.ok(summarize.requests.length - before <= 1, 'two summary calls in one compaction');
      if (result.record && result.record.summarized > 0) {
        folds.push({ at: i, size: ctxkeel.estimateTokens(prefix),
          over: /more than the soft limit/.test(result.record.error || '') });
      }
    }
    return { folds, calls, summaries: summarize.requests.length, peak, overflow,
      gap: ((c.options.soft - c.options.target) / 2) * window };
  }

  /** The folds that came before the history grew by `gap` since the one before, with no new
   * message alone that large (issue 12 item 3). A fold after one that ended over the soft
   * limit, saying so, is not counted: that one could not meet the bound. */
  function rapid(transcript, { folds, gap }) {
    const out = [];
    for (let k = 1; k < folds.length; k++) {
      const [prev, cur] = [folds[k - 1], folds[k]];
      if (prev.over) continue;
      const largest = Math.max(...transcript.slice(prev.at, cur.at)
        .map((m) => ctxkeel.estimateTokens(m)));
      if (cur.size - prev.size < gap && largest < gap) {
        out.push(`${prev.at}->${cur.at} (+${cur.size - prev.size} < ${gap.toFixed(0)})`);
      }
    }
    return out;
  }

  // Issue 12 item 3: a compaction that follows the previous one before the history has grown
  // by (soft - target) / 2 x window tokens is a defect, unless one new message alone is that
  // large. A compaction here is a fold (a new checkpoint); offloads at warn cost no summary.
  // Where the pinned messages (system prompt and task) alone are above half the window, the
  // windows are the test after these.
  const FRACTIONS = [0.15, 0.25, 0.35, 0.6];
  const crowded = [];
  for (const [name, transcript] of corpus) {
    const total = ctxkeel.estimateTokens(transcript);
    const pinned = ctxkeel.estimateTokens(transcript.slice(0, 2));
    for (const fraction of FRACTIONS) {
      const window = Math.floor(total * fraction);
      if (pinned > 0.5 * window) {
        crowded.push([name, transcript, fraction, window]);
        continue;
      }
      it(`replays ${name} at ${fraction * 100}% of its tokens without rapid re-compaction`,
        async () => {
          const r = await rhythm(transcript, window);
          assert.equal(r.overflow, false);
          assert.deepEqual(rapid(transcript, r), [], `${name} at ${fraction}`);
          assert.ok(r.summaries <= r.folds.length, `${r.summaries} summaries, ` +
            `${r.folds.length} folds`);
          console.log(`${name} at ${fraction}: ${r.folds.length} folds in ${r.calls} calls, ` +
            `${r.summaries} summaries, peak ${r.peak.toFixed(2)}`);
        });
    }
  }

  // Core: the view is left between the soft limit and the window while the newest output's
  // preview could still shrink: sweagent-marshmallow-1867-fc's first 8 messages at 35% of its
  // tokens (2908) give 2085 tokens (0.718): pinned 1243, checkpoint 301, the assistant message
  // 102 and a placeholder of 439 tokens, whose preview alone would bring it to about 0.59. The
  // record once said "the pinned messages and the newest turn are all that is left"; previews
  // are minimized past soft now. The header promises at most soft x window after any
  // compaction.
  it('ends a compaction under the soft limit when a smaller preview gets it there', async () => {
      const found = corpus.find(([name]) => name === 'sweagent-marshmallow-1867-fc.json');
      if (!found) return;
      const transcript = found[1];
      const window = Math.floor(ctxkeel.estimateTokens(transcript) * 0.35);
      const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
      let result;
      for (const k of [2, 4, 6, 8]) result = await c.compact(transcript.slice(0, k));
      assert.ok(result.ratioAfter <= 0.7, `${result.ratioAfter}: ${result.record.error}`);
    });

  // With the pinned messages above the target (58-100% of these windows), no compaction can
  // reach it; the next fold then waits until the history has grown by the gap (it once folded
  // at nearly every call: openhands-ponyc-4588 at 15%, 39 folds in 49 calls).
  it('replays the windows where the pinned messages exceed the target without rapid ' +
    're-compaction', async () => {
    const found = [];
    for (const [name, transcript, fraction, window] of crowded) {
      const r = await rhythm(transcript, window);
      const fast = rapid(transcript, r);
      if (fast.length) found.push(`${name} at ${fraction}: ${fast.length} rapid folds`);
    }
    assert.deepEqual(found, []);
  });
});
