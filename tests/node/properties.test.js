'use strict';

// Property tests (fast-check): random agent histories and summarizers against every compaction
// invariant. Histories come from generators.js: system/developer messages, the task, assistant
// turns with 0-3 parallel tool calls whose results are in order, shuffled, missing, duplicated
// or misplaced, tool outputs up to ~200 KB, Unicode of every kind, empty strings, in the OpenAI
// and the Anthropic shape. Summarizers reply with a good Markdown checkpoint (as a string or a
// Promise), '' or blanks, garbage, a non-string, throw, reject, or resolve after 300 ms against
// a 0.05 s summarizeTimeout.
//
// Each example replays the history as an agent loop (compact() at up to three turn ends and at
// the end, one compactor) and checks after every call:
//   - the input is not mutated (structuredClone compared);
//   - every view passes checkPairs; on a compactor's first call at tier none the view is
//     repairPairs(history), object for object;
//   - a message the view did not change is the caller's object (no new object equal to one);
//   - system/developer messages and the task are in the view as the caller's objects; the
//     newest message of repairPairs(history) that is the caller's is there as that object or
//     as a copy whose outputs are placeholders (or whose text is an excerpt) that read back
//     exactly; the newest turn's assistant message is there (object or edited copy);
//   - every view is at most the window; at warn and above, at most soft x window unless the
//     record says the soft limit could not be met (or said so on an earlier call, which the
//     core tells once); tokensAfter <= tokensBefore always; tokensAfter is the estimate of the
//     view sent;
//   - compact() fails only with CK_EOVERFLOW, and only when the pinned messages with a bare
//     checkpoint do not fit the window;
//   - no summary call below soft nor at emergency, at most one per compaction, over the caller's
//     own messages; a failing, hanging or nonsensical summarizer never rejects, and
//     record.fallback says why;
//   - at most one checkpoint; the record (when there is one) matches the result;
// and over the whole replay: a second fresh compactor with its own store, given the same input
// and the same replies, returns the same views (store paths normalized).
//
// repairPairs is checked on its own with helpers.assertRepairContract.
//
// Runs use a fixed seed (stable suite); CTXKEEL_PROP_RANDOM=1 explores new ones and
// CTXKEEL_PROP_SCALE=N multiplies numRuns. A failure writes its whole counterexample to a file
// that CTXKEEL_PROP_REPLAY=<file> runs again (with --test-name-pattern selecting its test).

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const fc = require('fast-check');
const h = require('./helpers.js');
const s = require('./sessions.js');
const g = require('./generators.js');

const { ctxkeel } = h;
const { Compactor } = ctxkeel;

after(s.removeStores);

const SCALE = Number(process.env.CTXKEEL_PROP_SCALE || 1);
const RANDOM = process.env.CTXKEEL_PROP_RANDOM === '1';
const SLOW_MS = 300;
const SLOW_TIMEOUT = 0.05;
const RATIOS = [0.3, 0.63, 0.68, 0.73, 0.78, 0.83, 0.9, 0.97, 1.3, 3.0, 20.0];

const REPLAY = process.env.CTXKEEL_PROP_REPLAY; // a counterexample file written on failure

function params(numRuns) {
  if (REPLAY) {
    return { examples: [JSON.parse(fs.readFileSync(REPLAY, 'utf8'))], numRuns: 1,
      reporter: g.reporter };
  }
  // A failing example is shrunk (fc.gen values with 200 KB strings shrink slowly): the time
  // limit bounds the whole run, and a failure found before it is still reported.
  const p = { numRuns: Math.max(1, Math.round(numRuns * SCALE)), interruptAfterTimeLimit: 90000,
    reporter: g.reporter };
  if (!RANDOM) p.seed = 20260101;
  return p;
}

/** The history's tokens as the compactor sees it: repaired (a duplicated result dropped). */
function viewTokens(messages, shape) {
  return ctxkeel.estimateTokens(ctxkeel.repairPairs(messages, { format: shape }));
}

function summarizer({ kind, value, async }) {
  const state = { kind, value, calls: 0, bad: [], snapshot: new Set() };
  state.fn = (request, context) => {
    state.calls++;
    const keys = Object.keys(request).sort().join();
    if (keys !== 'maxTokens,messages,previous,prompt,system,tier') state.bad.push(`keys ${keys}`);
    else if (!request.messages.every((m) => state.snapshot.has(m))) {
      state.bad.push('request messages are not the caller\'s objects');
    } else if (request.messages.some(s.isCheckpoint)) {
      state.bad.push('a checkpoint handed to the summarizer as a message');
    }
    if (!context || !context.signal) state.bad.push('no signal in the context');
    if (kind === 'throw') throw new Error(value);
    if (kind === 'reject') return Promise.reject(new Error(value));
    if (kind === 'slow') return new Promise((resolve) => setTimeout(resolve, SLOW_MS, value));
    return async ? Promise.resolve(value) : value;
  };
  return state;
}

function fallbackOk(kind, value, fallback) {
  switch (kind) {
    case 'good': return fallback === null;
    case 'empty': return fallback === 'summarizer returned an empty reply';
    case 'throw':
    case 'reject': return typeof fallback === 'string' && fallback.startsWith('summarizer failed');
    case 'slow': return fallback === `summarizer timed out after ${SLOW_TIMEOUT} s`;
    case 'nonstring': return typeof fallback === 'string' &&
      fallback.startsWith('summarizer returned ') && fallback.endsWith(', not a string');
    default: {
      const { anchors, summary } = ctxkeel.parseAnchors(value);
      const nothing = Object.values(anchors).every((v) => v === null) && summary.trim() === '';
      const why = 'summarizer reply had no usable anchors';
      return nothing ? fallback === why : fallback === null || fallback === why;
    }
  }
}

function checkStep(compactor, messages, info, shape, result, made, summ, fresh, told) {
  const window = compactor.options.contextWindow;
  const soft = compactor.options.soft;
  const view = result.messages;
  const format = { format: shape };
  assert.ok(s.atLeast(result.tier, 'none'), `unknown tier ${result.tier}`);
  assert.deepEqual(ctxkeel.checkPairs(view, format), [], 'the view breaks tool-call pairs');
  const repaired = s.assertViewObjects(messages, view, format, result.tier === 'none' && fresh);
  const inputs = new Set(messages);
  const inView = new Set(view);
  for (const i of info.pinned) {
    assert.ok(inView.has(messages[i]),
      `pinned message ${i} (${messages[i].role}) is not in the view`);
  }
  // The newest message of the repaired history (a misplaced result moves up next to its call;
  // a stub is not the caller's): the newest real message the model would see, as the object or
  // as a copy whose outputs are placeholders (assertRecoverable reads them back).
  const newest = repaired.findLast((m) => inputs.has(m));
  const folded = s.newestTurnFolded(messages, result, told);
  if (newest !== undefined && !inView.has(newest) && folded !== 'now') {
    const copy = view.find((m) => !inputs.has(m) && s.isCopyOf(m, newest) &&
      (s.hasPlaceholder(m) || s.isExcerpt(m)));
    assert.ok(copy, 'the newest message is not in the view, nor a copy of it with placeholders');
  }
  const assistant = s.lastAssistant(messages);
  if (assistant && !inView.has(assistant) && !folded) {
    assert.ok(s.isCopyOf(s.lastAssistant(view), assistant),
      'the newest turn\'s assistant message is not in the view');
  }
  assert.equal(result.tokensAfter, ctxkeel.estimateTokens(view),
    'tokensAfter is not the estimate of the view sent');
  assert.ok(result.ratioAfter <= 1 + 1e-12, `a view above the window: ${result.ratioAfter}`);
  // Never larger ('counts a view rebuilt from its state as it is sent' and 'never grows the view
  // by offloading' are the cases that once broke it).
  assert.ok(result.tokensAfter <= result.tokensBefore,
    `the view grew: ${result.tokensBefore} -> ${result.tokensAfter}`);
  const placeholders = JSON.stringify(view).split(s.PLACEHOLDER).length - 1;
  const error = (result.record && result.record.error) || '';
  const over = result.tier !== 'none' && result.ratioAfter > soft + 1e-12;
  const said = /more than the soft limit/.test(error);
  if (s.atLeast(result.tier, 'soft') && result.record === null) {
    // A compaction that can make no progress changes nothing and writes no record. (Known
    // bug, 'counts a placeholder kept in the tail in the tier': the tier and tokensBefore of
    // the raw history, with the state's placeholders in the view.)
    const staleTier = !fresh && result.tokensAfter < result.tokensBefore && placeholders > 0;
    assert.ok(result.tokensAfter === result.tokensBefore || staleTier,
      `tier ${result.tier}, no record: ${result.tokensBefore} -> ${result.tokensAfter}`);
  }
  if (over) {
    // Over the bound only when the record says why, now or before: the core tells it once
    // while it lasts (a record written meanwhile, for a fold, does not repeat it).
    assert.ok(said || told.over, `tier ${result.tier}: ratio ` +
      `${result.ratioAfter} > soft ${soft} of ${window}, and the record does not say why (${error})`);
  }
  told.over = over && (said || told.over);
  assert.ok(made <= 1, `${made} summary calls in one compaction`);
  if (!s.atLeast(result.tier, 'soft') || result.tier === 'emergency') {
    assert.equal(made, 0, `a summary call at tier ${result.tier}`);
  }
  assert.deepEqual(summ.bad, []);
  if (made) {
    // A summary call leaves a record ('does not ask again every turn for a summary it throws
    // away').
    assert.ok(result.record !== null, 'a summary call without a record');
    assert.ok(fallbackOk(summ.kind, summ.value, result.record.fallback),
      `summarizer ${summ.kind} ${JSON.stringify(summ.value)}: fallback ${result.record.fallback}`);
  }
  const checkpoints = view.filter(s.isCheckpoint);
  assert.ok(checkpoints.length <= 1, 'more than one checkpoint');
  if (made && checkpoints.length === 0 && result.record !== null) {
    // A routine decision: a note, not an error.
    assert.ok(result.record.notes.some((n) => /nothing was folded|would not shrink/.test(n)),
      `notes ${JSON.stringify(result.record.notes)}`);
    assert.doesNotMatch(error, /nothing was folded|would not shrink/);
  }
  const record = result.record;
  if (record !== null) {
    assert.equal(record.tier, result.tier);
    assert.equal(record.tokens_before, result.tokensBefore);
    assert.equal(record.tokens_after, result.tokensAfter);
    assert.equal(record.msgs_before, messages.length);
    assert.equal(record.msgs_after, view.length);
  }
}

// CK_EOVERFLOWs whose message does not explain them (the need it states fits the window):
// checked by the todo test at the end of 'compaction properties'.
const unexplainedOverflows = [];

/**
 * A CK_EOVERFLOW is a CtxkeelError (not an input error) whose place says what the pinned
 * messages (system, developer, the task) need, at least their estimate, and the window.
 */
function assertOverflow(err, messages, info, window) {
  assert.ok(err instanceof ctxkeel.CtxkeelError && !(err instanceof ctxkeel.InputError));
  assert.match(err.message, /^ctxkeel: the pinned messages and tool schemas need/);
  const m = new RegExp('^the pinned messages and tool schemas need (\\d+) tokens; the window ' +
    'is (\\d+)(?:; with a checkpoint: (\\d+))?$')
    .exec(err.where);
  assert.ok(m, `CK_EOVERFLOW where: ${err.where}`);
  const [pinnedNeed, said] = [Number(m[1]), Number(m[2])];
  const need = m[3] === undefined ? pinnedNeed : Number(m[3]);
  assert.equal(said, window);
  const pinned = ctxkeel.estimateTokens(info.pinned.filter((i) => i < messages.length)
    .map((i) => messages[i]));
  assert.ok(pinned <= pinnedNeed, `pinned ${pinned} > need ${pinnedNeed}`);
  if (need <= window && unexplainedOverflows.length < 5) {
    unexplainedOverflows.push(`${err.where} (pinned ${pinned}, ${messages.length} messages)`);
  }
}

/** Compacts messages.slice(0, k) for each k in points with one new compactor; the views. */
async function runLoop(sc, storeDir, check = true) {
  const { messages, info, shape, options, reply, points } = sc;
  const summ = summarizer(reply);
  const compactor = new Compactor({ ...options, storeDir, sessionId: 'prop' });
  const views = [];
  const told = { over: false };
  for (const [n, k] of points.entries()) {
    const prefix = messages.slice(0, k);
    const before = structuredClone(prefix);
    summ.snapshot = new Set(prefix);
    const calls = summ.calls;
    let result;
    try {
      result = await compactor.compact(prefix, { summarize: summ.fn });
    } catch (err) {
      if (err.code !== 'CK_EOVERFLOW') throw err;
      if (check) assertOverflow(err, prefix, info, compactor.options.contextWindow);
      views.push(`overflow ${err.message}`);
      continue;
    }
    const made = summ.calls - calls;
    if (check) {
      assert.deepEqual(prefix, before, 'compact() changed its input');
      checkStep(compactor, prefix, info, shape, result, made, summ, n === 0, told);
      await s.assertRecoverable(compactor, prefix, result);
    }
    views.push(JSON.stringify(result.messages).split(storeDir).join('<store>'));
  }
  compactor.close();
  return views;
}

function scenarios({ ratios = RATIOS, minTurns, maxTurns, loop = true } = {}) {
  return fc.tuple(g.histories({ minTurns, maxTurns }), fc.constantFrom(...ratios), g.replyKinds(),
    fc.constantFrom(1, 2, 6), fc.constantFrom(4000, 4000, 300),
    fc.array(fc.nat(), { maxLength: 3 }))
    .map(([hist, ratio, reply, keepTail, offloadThreshold, picks]) => {
      const { messages, info, shape } = hist;
      const tokens = viewTokens(messages, shape);
      const options = {
        contextWindow: Math.max(1, Math.floor(tokens / ratio)),
        keepTail,
        offloadThreshold,
        summarizeTimeout: reply.kind === 'slow' ? SLOW_TIMEOUT : 30,
      };
      const ends = info.ends;
      const points = loop ? [...new Set(picks.map((p) => ends[p % ends.length]))]
        .sort((a, b) => a - b) : [];
      if (!points.length || points[points.length - 1] !== messages.length) {
        points.push(messages.length);
      }
      return { messages, info, shape, options, reply, points, ratio };
    });
}

/** Two fresh stores whose paths have the same length (placeholders name them). */
function twoStores() {
  const base = s.tmpStore();
  const a = path.join(base, 'a');
  const b = path.join(base, 'b');
  fs.mkdirSync(a);
  fs.mkdirSync(b);
  return [a, b];
}

describe('compaction properties', () => {
  it('keeps every invariant over random agent loops, and is deterministic', async () => {
    await fc.assert(fc.asyncProperty(scenarios(), async (sc) => {
      const [a, b] = twoStores();
      const first = await runLoop(sc, a);
      const second = await runLoop(sc, b, false);
      assert.deepEqual(second, first, 'the same input and replies gave different views');
    }), params(1000));
  });

  it('keeps every invariant where a summary is needed (soft, full, emergency)', async () => {
    await fc.assert(fc.asyncProperty(
      scenarios({ ratios: [0.75, 0.85, 0.97], minTurns: 6, maxTurns: 20, loop: false }),
      async (sc) => { await runLoop(sc, s.tmpStore()); },
    ), params(300));
  });

  // err.where of CK_EOVERFLOW states what the pinned messages and tool schemas need and, when
  // they fit alone, what they need with the smallest checkpoint: a need above the window.
  // Runs after the two properties above, which collect the cases.
  it('explains every CK_EOVERFLOW: the need it states is above the window', () => {
      assert.deepEqual(unexplainedOverflows, []);
    });
});

describe('repairPairs properties', () => {
  it('honours its whole contract on random histories', () => {
    fc.assert(fc.property(g.histories({ maxTurns: 10 }), ({ messages, shape, plan }) => {
      const found = ctxkeel.checkPairs(messages, { format: shape });
      h.assertRepairContract(messages, { format: shape });
      const repaired = ctxkeel.repairPairs(messages, { format: shape });
      if (found.length === 0) {
        assert.equal(repaired.length, messages.length);
        repaired.forEach((m, i) => assert.equal(m, messages[i], 'a valid list was copied'));
      }
      // The generator makes the damage it claims.
      const kinds = new Set(found.map((v) => v.kind));
      const modes = new Set(plan.turns.filter((t) => t.kind === 'call').map((t) => t.mode));
      if (modes.has('missing')) assert.ok(kinds.has('missing_result'));
      if (modes.has('duplicated')) assert.ok(kinds.has('duplicate_result'));
      if (!g.isDamaged(plan) && shape === 'openai' && !modes.has('shuffled')) {
        assert.deepEqual(found, []);
      }
    }), params(1000));
  });
});

// ---- regressions found by the properties above ----

describe('regressions', () => {
  // Fixed since they were found: plain tests. Still open: { todo }, which runs them and
  // reports their failure without failing the suite.

  it('keeps a moved Anthropic result message as the same object (an equal copy when found)',
    () => {
    const task = h.user('task');
    const call = h.aAsst(h.use('a'));
    const remark = h.aAsst(h.text('between'));
    const results = h.aUser(h.result('a', 'r'));
    const newest = h.user('go on');
    const messages = [task, call, remark, results, newest];
    assert.deepEqual(h.kinds(messages).map((v) => v.kind), ['not_adjacent']);
    const repaired = ctxkeel.repairPairs(messages);
    assert.deepEqual(repaired, [task, call, results, remark, newest]);
    [task, call, results, remark, newest].forEach((m, i) => assert.equal(repaired[i], m));
  });

  it('keeps a moved OpenAI result message as the same object', () => {
    const call = h.asst(h.call('a'));
    const remark = { role: 'assistant', content: 'between' };
    const result = h.tool('a', 'r');
    const messages = [h.user('task'), call, remark, result];
    const repaired = ctxkeel.repairPairs(messages);
    [messages[0], call, result, remark].forEach((m, i) => assert.equal(repaired[i], m));
  });

  /** Many turns with small tool outputs (nothing over the offload gate). */
  function smallTurnsHistory(turns) {
    const messages = [h.sys('You are a careful coding agent. Never push to main.'),
      h.user('Fix the failing test in src/app/parser.py.')];
    for (let t = 0; t < turns; t++) {
      const id = `call_${t}`;
      const file = `src/app/module_${t % 17}.py`;
      messages.push({ role: 'assistant', content: `Turn ${t}: looking at ${file}.`,
        tool_calls: [h.call(id, 'read_file', JSON.stringify({ path: file }))] });
      messages.push(h.tool(id, [0, 1, 2, 3].map((k) =>
        `${file}:${k + 1}: value_${k} = compute(${k}, ${t})  # turn ${t}`).join('\n')));
    }
    return messages;
  }

  async function requestSize(history, ratio) {
    const window = Math.floor(ctxkeel.estimateTokens(history) / ratio);
    const sizes = [];
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
    const result = await c.compact(history, { summarize: (request) => {
      sizes.push(ctxkeel.estimateTokens(request.system) + ctxkeel.estimateTokens(request.prompt) +
        request.maxTokens);
      return s.checkpointFor(request);
    } });
    return { window, sizes, tier: result.tier,
      offloaded: result.record ? result.record.offloaded.length : 0 };
  }

  it('builds a summary request that fits the model window (it did not, sized in bytes, when ' +
    'found)', async () => {
    // When found: 2,002 messages, window 164,483 tokens: a request of 193,937 tokens (prompt
    // and reply budget; DESIGN section 10 rules it out).
    const { window, sizes, tier } = await requestSize(smallTurnsHistory(1000), 0.9);
    assert.equal(tier, 'full');
    assert.equal(sizes.length, 1);
    assert.ok(sizes[0] <= window, `request ${sizes[0]} tokens, window ${window}`);
  });

  it('builds a summary request that fits the window when outputs are offloaded', async () => {
    // (A few large outputs: with more, offloading alone reaches the target and nothing is
    // summarized.)
    const { window, sizes, offloaded } = await requestSize(s.syntheticHistory(40, 5,
      { bigEvery: 13 }), 0.9);
    assert.ok(offloaded > 0);
    assert.equal(sizes.length, 1);
    assert.ok(sizes[0] <= window, `request ${sizes[0]} tokens, window ${window}`);
  });

  it('counts a view rebuilt from its state as it is sent (a token short per placeholder when ' +
    'found)', async () => {
    // Found by the agent-loop property; the placeholder states the store path, so the store is
    // relative ('.ctxkeel' in a temporary cwd) to keep its text, and the count, fixed.
    const say = (t) => h.aAsst(h.text(t));
    const use = (id, name = 'read_file') => h.use(id, name, { path: '' });
    const messages = [h.user(''), h.aAsst(use('toolu_070', 'bash'), use('call_7_1'),
      use('toolu_072')), h.aUser(h.result('toolu_070', g.bigText(4001, 0, false)),
      h.result('call_7_1', ''), h.result('toolu_072', '')), say(''), say(''),
    h.aAsst(use('call_10_0')), h.aUser(h.result('call_10_0', ''))];
    const cwd = process.cwd();
    process.chdir(s.tmpStore());
    try {
      const c = new Compactor({ contextWindow: 2300, keepTail: 1, storeDir: '.ctxkeel',
        sessionId: 'prop' });
      const first = await c.compact(messages.slice(0, 4));
      assert.equal(first.tier, 'warn');
      assert.ok(first.record.offloaded.length > 0);
      const second = await c.compact(messages);
      assert.equal(second.tier, 'none');
      assert.equal(second.tokensAfter, ctxkeel.estimateTokens(second.messages));
      // When found: tokensBefore 260, tokensAfter 261.
      assert.equal(second.tokensBefore, second.tokensAfter);
    } finally {
      process.chdir(cwd);
    }
  });

  const oneOutput = (body) => [h.user('task'), h.asst(h.call('c1')), h.tool('c1', body),
    ...Array.from({ length: 8 }, (_, i) => h.user(`note ${i}`))];
  for (const [label, body, offloadThreshold] of [['4001 spaces', ' '.repeat(4001), 4000],
    ['301 bytes', 'x'.repeat(301), 300], ['200 e-acute', '\u00e9'.repeat(200), 300]]) {
    it(`never grows the view by offloading (${label}; it did when found)`, async () => {
      const messages = oneOutput(body);
      const window = Math.floor(ctxkeel.estimateTokens(messages) / 0.65);
      const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore(), offloadThreshold });
      const result = await c.compact(messages);
      assert.equal(result.tier, 'warn');
      // When found, the output was offloaded into a placeholder costing more: 131 -> 172
      // tokens (4001 spaces), 102 -> 176 (301 x), 123 -> 182 (200 e-acute).
      assert.ok(result.tokensAfter <= result.tokensBefore,
        `${result.tokensBefore} -> ${result.tokensAfter}`);
      if (result.record === null || result.record.offloaded.length === 0) {
        assert.equal(result.messages[2], messages[2], 'kept, as cheaper than a placeholder');
      }
    });
  }

  it('counts a placeholder kept in the tail in the tier', async () => {
    // Found by the agent-loop property (keepTail 6; with keepTail 2 the same calls give tier
    // none, as they should).
    const say = (t) => h.aAsst(h.text(t));
    const use = (id) => h.use(id, 'read_file', { path: 'x' });
    const history = [h.aUser(h.text('Fix the bug.')), say('one'), say('two'), h.user('a'),
      h.user('b'), say('three'), h.aAsst(h.text('four'), use('big'), use('lost')),
      h.aUser(h.result('big', g.bigText(89000, 3, false))), h.user('note'), say('five'),
      say('six'), h.aAsst(use('c'), use('d')), h.aUser(h.result('c', 'ok'), h.result('d', ''))];
    const window = Math.floor(ctxkeel.estimateTokens(history.slice(0, 10)) / 0.97);
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore(), keepTail: 6,
      offloadThreshold: 300 });
    const first = await c.compact(history.slice(0, 10));
    assert.equal(first.tier, 'emergency');
    assert.ok(first.record.offloaded.length > 0);
    const second = await c.compact(history);
    const got = [second.tier, second.tokensBefore, second.tokensAfter,
      second.record && second.record.error];
    // Measured: ['emergency', 31294, 31294, 'this fold was tried before and did not shrink the
    // view'] (before that short-cut: the placeholder kept, 300 tokens, tier emergency, no record).
    assert.ok(second.tokensAfter < 0.05 * window, `the placeholder is in the view: ${got}`);
    assert.equal(second.tier, 'none', JSON.stringify(got));
    assert.ok(second.tokensBefore < 2 * second.tokensAfter, JSON.stringify(got));
  });

  it('keeps an offloaded output offloaded on the next turn', async () => {
    // Found by the agent-loop property; keepTail 6 (the default); keepTail 2 gives tier none
    // and the placeholder, as it should.
    const history = [h.sys('You are a careful coding agent.'), h.user('Find why the build fails.'),
      h.asst(h.call('c1', 'bash', '{"cmd":"cat build.log"}')),
      h.tool('c1', g.bigText(160000, 0, false)), { role: 'assistant', content: 'Reading.' },
      h.user('Go on.'), h.user('OK.')];
    const window = Math.floor(ctxkeel.estimateTokens(history.slice(0, 5)) / 1.3);
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
    const first = await c.compact(history.slice(0, 5));
    assert.equal(first.tier, 'emergency');
    assert.ok(first.tokensAfter < 0.7 * window);
    const second = await c.compact(history);
    const got = JSON.stringify([second.tier, second.tokensBefore, second.tokensAfter,
      second.record && second.record.error]);
    // Measured: ["emergency",56378,56378,"this fold was tried before and did not shrink the
    // view"] in a 43,357-token window.
    assert.ok(second.tokensAfter <= 0.7 * window, got);
    assert.ok(second.messages.some(s.hasPlaceholder), got);
  });

  it('does not ask again every turn for a summary it throws away (it did, with no record, ' +
    'when found)', async () => {
    const rules = Array.from({ length: 600 },
      (_, i) => `rule ${i}: always check file_${i} before editing.`).join(' ');
    const history = [h.sys(rules), h.user('Fix the bug in src/parser.py.'),
      { role: 'assistant', content: 'Looking.' }, h.user('Also never push to main.'),
      { role: 'assistant', content: 'OK.' }, h.user('Go on.')];
    const window = Math.floor(ctxkeel.estimateTokens(history) / 0.85);
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore(), keepTail: 2 });
    const summarize = s.scripted();
    const outcomes = [];
    for (let i = 0; i < 3; i++) {
      const before = summarize.requests.length;
      const result = await c.compact(history, { summarize });
      outcomes.push([summarize.requests.length - before, result.record !== null]);
      assert.equal(result.tier, 'full');
      assert.equal(result.tokensAfter, result.tokensBefore);
    }
    assert.ok(outcomes.every(([made, recorded]) => !made || recorded), JSON.stringify(outcomes));
    assert.ok(summarize.requests.length <= 1, JSON.stringify(outcomes));
  });
});
