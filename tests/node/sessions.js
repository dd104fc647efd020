// Agent sessions for the compactor and evidence tests (not a test file itself): temporary
// stores, synthetic histories, scripted summarizers, and the invariants every view must keep.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers.js');

const { ctxkeel } = h;
const MARKER = '[Context Compaction]';
const PLACEHOLDER = '[ctxkeel: tool output offloaded]';

// ---- temporary stores ----

const made = [];

/** A fresh store folder under the system temp folder, removed by removeStores(). */
function tmpStore() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxkeel-test-'));
  made.push(dir);
  return dir;
}

function removeStores() {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
}

// ---- synthetic histories ----

/** A small deterministic PRNG (mulberry32), so every run builds the same histories. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TOOLS = ['read_file', 'bash', 'edit_file', 'grep'];
const NOTES = [
  'Note: never touch the migrations folder.',
  'From now on, run the unit tests before every commit.',
  'Also, please keep the public API of src/api/handlers.py unchanged.',
  'Do not use sudo in any command.',
];

function toolOutput(rand, i, big) {
  const lines = [];
  const n = big ? 120 + Math.floor(rand() * 80) : 3 + Math.floor(rand() * 8);
  for (let k = 0; k < n; k++) {
    const code = 'value = compute(x) + 1; '.repeat(1 + Math.floor(rand() * 3));
    lines.push(`src/module_${i % 7}/file_${k}.py:${k + 1}: ${code}`);
  }
  if (rand() < 0.3) lines.push(`Error: E${1000 + i} assertion failed in test_case_${i}`);
  return lines.join('\n');
}

/**
 * An OpenAI history: a system prompt, the task, then `turns` assistant turns, each one tool call
 * and its result (every `bigEvery`th result large, none with 0), with user notes and assistant
 * remarks between.
 */
function syntheticHistory(turns, seed = 1, { bigEvery = 5 } = {}) {
  const rand = rng(seed);
  const messages = [
    h.sys('You are a careful coding agent. Use the tools to inspect and change the repository.'),
    h.user('Fix the failing test in tests/test_api.py without changing the public API. ' +
      'The bug report is at https://example.com/issues/4242.'),
  ];
  for (let i = 0; i < turns; i++) {
    const name = TOOLS[i % TOOLS.length];
    const id = `call_${seed}_${i}`;
    const args = JSON.stringify({ path: `src/module_${i % 7}/file_${i}.py`, cmd: `step ${i}` });
    messages.push({
      role: 'assistant',
      content: i % 3 === 0 ? `Step ${i}: looking at module ${i % 7}.` : null,
      tool_calls: [h.call(id, name, args)],
    });
    messages.push(h.tool(id, toolOutput(rand, i, bigEvery > 0 && i % bigEvery === bigEvery - 1)));
    if (i % 9 === 8) messages.push(h.user(NOTES[(i / 9 | 0) % NOTES.length]));
  }
  return messages;
}

/** The same history in Anthropic shapes (system prompt dropped, as Anthropic keeps it apart). */
function anthropicHistory(turns, seed = 1, options = {}) {
  return h.toAnthropic(syntheticHistory(turns, seed, options));
}

// ---- summarizers ----

/** A valid Markdown checkpoint that depends only on the request. */
function checkpointFor(request) {
  return [
    '## User Intent',
    'Fix the failing test in tests/test_api.py without changing the public API.',
    '## Execution Progress',
    `Went through ${request.messages.length} messages (${request.tier} compaction).`,
    '## Key Decisions',
    '- Keep the public API unchanged.',
    '## Tried Solutions',
    '- Re-running the tests without changes: still failing.',
    '## Next Steps',
    '- Patch src/api/handlers.py and re-run the tests.',
  ].join('\n');
}

/** A summarizer that answers with checkpointFor() and records every request. */
function scripted({ async = true } = {}) {
  const requests = [];
  const fn = (request) => {
    requests.push(request);
    const reply = checkpointFor(request);
    return async ? Promise.resolve(reply) : reply;
  };
  fn.requests = requests;
  return fn;
}

// ---- invariants ----

function isCheckpoint(m) {
  const first = typeof m.content === 'string'
    ? m.content
    : Array.isArray(m.content) && m.content[0] && m.content[0].text;
  return typeof first === 'string' && first.startsWith(MARKER);
}

function hasPlaceholder(m) {
  return JSON.stringify(m).includes(PLACEHOLDER);
}

const TIER_ORDER = ['none', 'warn', 'soft', 'full', 'emergency'];
const atLeast = (tier, floor) => TIER_ORDER.indexOf(tier) >= TIER_ORDER.indexOf(floor);

// The pointer an over-long message's excerpt carries to its full text.
const EXCERPT = /\n\[ctxkeel: (\d+) of (\d+) bytes of this message left out here; the full text: read_evidence\(ref="([^"]*)"\)\]\n/;

/** Every string of a message the reader takes: content text, text items, tool results. */
function messageTexts(m) {
  const out = [];
  const add = (content) => {
    if (typeof content === 'string') out.push(content);
    else if (Array.isArray(content)) {
      for (const item of content) {
        if (typeof item === 'string') out.push(item);
        else if (item && typeof item === 'object') {
          if (typeof item.text === 'string') out.push(item.text);
          if (item.type === 'tool_result') add(item.content);
        }
      }
    }
  };
  if (m && typeof m === 'object') add(m.content);
  return out;
}

/** The text the reader makes of a tool result's content (list items joined by newlines). */
function resultText(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((item) => (typeof item === 'string' ? item
    : item && typeof item.text === 'string' ? item.text : null))
    .filter((t) => t !== null).join('\n');
}

function isExcerpt(m) {
  return messageTexts(m).some((t) => EXCERPT.test(t));
}

function isRepairNote(m) {
  return messageTexts(m).some((t) => h.isRemovedNote(t));
}

/** The newest assistant message of a list, or undefined. */
function lastAssistant(list) {
  for (let i = list.length - 1; i >= 0; i--) if (list[i] && list[i].role === 'assistant') return list[i];
  return undefined;
}

/** The ids of an assistant message's tool calls (both shapes), in order. */
function callIds(m) {
  const ids = (Array.isArray(m.tool_calls) ? m.tool_calls : []).map((c) => c && c.id);
  for (const item of Array.isArray(m.content) ? m.content : []) {
    if (h.isUseBlock(item)) ids.push(item.id);
  }
  return ids;
}

/** The ids of the tool_result blocks of a message. */
function resultIds(m) {
  return (Array.isArray(m.content) ? m.content : []).filter(h.isResultBlock)
    .map((b) => b.tool_use_id);
}

/** True when `copy` is `source` with only its content (or calls) changed: the same other
 * keys, calls only of the source's, and (for a message of results) a result of the source's. */
function isCopyOf(copy, source) {
  if (!copy || copy.role !== source.role) return false;
  for (const key of Object.keys(source)) {
    if (key === 'content' || key === 'tool_calls') continue;
    if (copy[key] !== source[key]) return false;
  }
  const kept = callIds(copy);
  const had = callIds(source);
  const results = source.role === 'assistant' ? [] : resultIds(source);
  return kept.every((id) => had.includes(id)) &&
    (results.length === 0 || resultIds(copy).some((id) => results.includes(id)));
}

/** The caller's content items, tool calls and content strings, to tell a repaired copy. */
function inputParts(messages) {
  const objects = new Set();
  const strings = new Set();
  for (const m of messages) {
    if (!m || typeof m !== 'object') continue;
    if (typeof m.content === 'string') strings.add(m.content);
    for (const item of Array.isArray(m.content) ? m.content : []) objects.add(item);
    for (const c of Array.isArray(m.tool_calls) ? m.tool_calls : []) objects.add(c);
  }
  return { objects, strings };
}

/** True when message `m` is made only of the caller's own items (a copy that a repair left
 * some parts out of, or moved parts into; a string content moved into a text block). */
function builtFrom(m, { objects, strings }) {
  const content = m.content;
  const contentOk = content === null || content === undefined ||
    (typeof content === 'string' && strings.has(content)) ||
    (Array.isArray(content) && content.every((item) => objects.has(item) ||
      (item && item.type === 'text' && strings.has(item.text))));
  const calls = Array.isArray(m.tool_calls) ? m.tool_calls : [];
  return contentOk && calls.every((c) => objects.has(c));
}

/** True when a message that is not the caller's object has a reason to be new: a
 * placeholder, an excerpt, a stub result, a repair note, or a repair (reported) that left some
 * of the caller's items out. */
function changedFor(m, result, parts) {
  return hasPlaceholder(m) || isExcerpt(m) || isRepairNote(m) ||
    JSON.stringify(m).includes(h.STUB) || (result.repairs.length > 0 && builtFrom(m, parts));
}

/**
 * Everything a compaction result must satisfy for the input `messages` and a compactor with
 * `window` and `soft` (DESIGN section 2, issues 12 and 13):
 * - the view passes checkPairs; the pinned messages (system prompt, task) are the caller's own
 *   objects; at most one checkpoint; the view never grows;
 * - the newest message is the caller's object or a copy whose outputs are placeholders (or
 *   whose text is an excerpt); the newest turn's assistant message is there, as the object or
 *   an edited copy of it;
 * - every new object has a reason (checkpoint, placeholder, excerpt, stub, repair note, or a
 *   repair, reported in result.repairs, that left parts out of the caller's items);
 * - every view is at most the window, and after any compaction (tier warn and up) at most
 *   soft x window, unless the record says why (or said so before: `told.over`, which the
 *   replay keeps, since the core tells it once while it lasts);
 * - the view's own estimate (plus `toolTokens`) is tokensAfter (with a named `estimator`);
 * - below warn with nothing repaired, offloaded or folded, the view is the history itself.
 */
/**
 * Whether the newest turn may be missing from the view: 'now' when the record says that not
 * even it fitted (every turn was folded: the last resort of a window the pinned messages
 * nearly fill; its archives then cover the newest message), 'before' when such a fold on an
 * earlier call (remembered in `told`) covers the newest turn, else false.
 */
/** JSON with sorted keys, to compare messages by value. */
function canonical(value) {
  return JSON.stringify(value, (key, v) => (v && typeof v === 'object' && !Array.isArray(v)
    ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]])) : v));
}

/**
 * Unchanged messages are the caller's objects: no new object of the view equals an input (the
 * copies repairPairs itself makes aside: the 'keeps a moved Anthropic result message' test of
 * properties.test.js). With `identity` (a fresh compactor at tier none) the view is
 * repairPairs(messages), object for object. Returns repairPairs(messages).
 */
function assertViewObjects(messages, view, format, identity) {
  const repaired = ctxkeel.repairPairs(messages, format);
  const inputs = new Set(messages);
  const values = new Set(messages.map(canonical));
  const repairCopies = new Set(repaired.filter((m) => !inputs.has(m)).map(canonical));
  for (const m of view) {
    if (inputs.has(m)) continue;
    const text = canonical(m);
    assert.ok(!values.has(text) || repairCopies.has(text),
      `an unchanged message was copied: ${text.slice(0, 200)}`);
  }
  if (identity) {
    assert.equal(view.length, repaired.length, 'tier none: the view is not repairPairs(history)');
    view.forEach((m, i) => {
      if (inputs.has(repaired[i])) assert.equal(m, repaired[i], `tier none: message ${i} copied`);
      else assert.deepEqual(m, repaired[i]);
    });
  }
  return repaired;
}

/**
 * Compacts messages.slice(0, k) for each k in `points` with one new compactor (its own store),
 * the extractive summarizer or one that always gives `reply`; checks the input is not mutated
 * and each result with checkView(compactor, prefix, result, fresh). A CK_EOVERFLOW is allowed
 * (the window may be below what the pinned messages need).
 */
async function replayInDialect(messages, options, reply, points, checkView) {
  const compactor = new ctxkeel.Compactor({ ...options, storeDir: tmpStore(), sessionId: 'prop' });
  const summarize = reply === null ? undefined : () => reply;
  try {
    for (const [n, k] of points.entries()) {
      const prefix = messages.slice(0, k);
      const before = structuredClone(prefix);
      let result;
      try {
        result = await compactor.compact(prefix, summarize ? { summarize } : {});
      } catch (err) {
        if (err.code !== 'CK_EOVERFLOW') throw err;
        assert.deepEqual(prefix, before);
        continue;
      }
      assert.deepEqual(prefix, before, 'compact() changed its input');
      checkView(compactor, prefix, result, n === 0);
    }
  } finally {
    compactor.close();
  }
}

/** The points of an agent-loop replay: the turn ends `picks` choose, and the whole list. */
function replayPoints(ends, picks, length) {
  const points = ends.length ? [...new Set(picks.map((p) => ends[p % ends.length]))]
    .sort((a, b) => a - b) : [];
  if (!points.length || points[points.length - 1] !== length) points.push(length);
  return points;
}

/** The bound of one view: tokensAfter is the estimate of the view sent, never above the
 * window (unless a store failed, which the record says) nor above tokensBefore. */
function assertViewBound(compactor, result) {
  assert.equal(result.tokensAfter, ctxkeel.estimateTokens(result.messages),
    'tokensAfter is not the estimate of the view sent');
  assert.ok(result.tokensAfter <= result.tokensBefore);
  const error = (result.record && result.record.error) || '';
  if (!/could not be stored|offload of|could not be archived/.test(error)) {
    assert.ok(result.ratioAfter <= 1 + 1e-12, `a view above the window: ${result.ratioAfter}`);
  }
}

function newestTurnFolded(messages, result, told) {
  const record = result.record || {};
  if ((record.notes || []).some((n) => n.includes('every turn was folded'))) {
    const ends = (record.archived || []).map((a) => a.end);
    // (Archive ranges count the messages of the history as repaired: a moved result joins
    // its call's result message, so with repairs the range can end before messages.length.)
    assert.ok(ends.length && (Math.max(...ends) >= messages.length || result.repairs.length),
      'the newest turn was folded but not archived');
    if (told) told.foldedTo = Math.max(...ends);
    return 'now';
  }
  const a = messages.lastIndexOf(lastAssistant(messages));
  return told && told.foldedTo && a >= 0 && a < told.foldedTo ? 'before' : false;
}

function assertView(messages, result, { window, soft = 0.7, format, told = null, toolTokens = 0,
  pinned = true, estimator, factor = 1 } = {}) {
  const view = result.messages;
  const opts = format ? { format } : undefined;
  assert.deepEqual(ctxkeel.checkPairs(view, opts), [], 'the view breaks tool-call pairs');
  const inputs = new Set(messages);
  const system = messages.find((m) => m.role === 'system');
  if (system) assert.ok(view.includes(system), 'the system message is not the same object');
  const task = messages.find((m) => m.role === 'user' && !isCheckpoint(m) &&
    !(Array.isArray(m.content) && m.content.some(h.isResultBlock)));
  if (task && pinned) assert.ok(view.includes(task), 'the first user message is not the same object');
  if (messages.length) {
    // The newest message of the history as repair leaves it (a misplaced result moves up to
    // its call, a stub is not the caller's): the object, or a copy of it with placeholders,
    // an excerpt or a repair; or gone whole by a repair that names it (Anthropic results of
    // a reused id, stored first).
    const repaired = ctxkeel.repairPairs(messages, opts);
    const newest = repaired.findLast((m) => inputs.has(m));
    const at = messages.indexOf(newest);
    const dropped = result.repairs.some((r) => r.index === at && /dropped$/.test(r.kind));
    const folded = newestTurnFolded(messages, result, told);
    if (newest && !view.includes(newest) && !dropped && folded !== 'now') {
      const parts = inputParts(messages);
      const copy = view.find((m) => !inputs.has(m) && !isCheckpoint(m) && isCopyOf(m, newest) &&
        m.tool_call_id === newest.tool_call_id && changedFor(m, result, parts));
      assert.ok(copy, `the newest message is neither the caller's object nor a copy with ` +
        `placeholders (or repaired): ${JSON.stringify(newest).slice(0, 300)}`);
    }
    const assistant = lastAssistant(messages);
    if (assistant && !view.includes(assistant) && !folded) {
      assert.ok(isCopyOf(lastAssistant(view), assistant),
        'the newest turn\'s assistant message is not in the view');
    }
  }
  const parts = inputParts(messages);
  for (const m of view) {
    if (inputs.has(m)) continue;
    assert.ok(isCheckpoint(m) || changedFor(m, result, parts),
      `a new object in the view changed nothing: ${JSON.stringify(m).slice(0, 200)}`);
  }
  assert.equal(view.filter(isCheckpoint).length <= 1, true, 'more than one checkpoint');
  assert.ok(result.tokensAfter <= result.tokensBefore,
    `the view grew: ${result.tokensBefore} -> ${result.tokensAfter}`);
  // (Not with a counting function: its tests count its calls.)
  if (typeof estimator !== 'function') {
    const counted = ctxkeel.estimateTokens(view, estimator ? { estimator } : undefined) +
      toolTokens;
    assert.equal(result.tokensAfter, counted, 'tokensAfter is not the estimate of the view sent');
  }
  if (window) {
    // The ratios are the estimates over the window, the usage factor applied.
    assert.ok(Math.abs(result.ratioAfter - result.tokensAfter * factor / window) < 1e-9,
      `ratioAfter ${result.ratioAfter} is not ${result.tokensAfter} x ${factor} / ${window}`);
    assert.ok(Math.abs(result.ratioBefore - result.tokensBefore * factor / window) < 1e-9,
      `ratioBefore ${result.ratioBefore} is not ${result.tokensBefore} x ${factor} / ${window}`);
  }
  assert.ok(result.ratioAfter <= 1 + 1e-12, `the view is above the window: ${result.ratioAfter}`);
  assert.ok(result.ratioAfter <= result.ratioBefore + 1e-12, 'the view grew');
  const over = result.tier !== 'none' && result.ratioAfter > soft + 1e-12;
  const said = result.record && /more than the soft limit/.test(result.record.error || '');
  if (over) {
    assert.ok(said || (told && told.over),
      `tier ${result.tier}: ratio ${result.ratioAfter} > soft ${soft}, and the record does ` +
      `not say why (${result.record && result.record.error})`);
  }
  if (told) told.over = over && (said || told.over);
  if (result.tier === 'none' && result.repairs.length === 0 && !view.some(isCheckpoint) &&
      !view.some(hasPlaceholder) && !view.some(isExcerpt)) {
    assert.equal(view.length, messages.length);
    view.forEach((m, i) => assert.equal(m, messages[i], `tier none: message ${i} was copied`));
  }
  for (const r of result.repairs) {
    assert.ok(Number.isInteger(r.index) && r.index >= 0 && r.index < messages.length,
      `a repair names message ${r.index}`);
    assert.equal(typeof r.toolCallId, 'string');
  }
}

/**
 * Everything the view no longer shows in full can be read back: each placeholder's path reads
 * the very output it stands for and each excerpt's ref the very text; for the newest message,
 * the output of that message itself.
 */
async function assertRecoverable(compactor, messages, result) {
  const known = new Set();
  for (const m of messages) {
    for (const t of messageTexts(m)) known.add(t);
    if (m && m.role === 'tool') known.add(resultText(m.content));
    for (const item of Array.isArray(m && m.content) ? m.content : []) {
      if (h.isResultBlock(item)) known.add(resultText(item.content));
    }
  }
  const inputs = new Set(messages);
  const newest = messages[messages.length - 1];
  for (const m of result.messages) {
    if (inputs.has(m) || isCheckpoint(m)) continue;
    for (const t of messageTexts(m)) {
      if (t.startsWith(PLACEHOLDER)) {
        const where = /\nfull text: (.*)\n/.exec(t)[1];
        const full = await compactor.readEvidence(where, { limit: 1e9 });
        assert.ok(known.has(full), `the placeholder's full text is no output of the history (${where})`);
      }
      const excerpt = EXCERPT.exec(t);
      if (excerpt) {
        const full = await compactor.readEvidence(excerpt[3], { limit: 1e9 });
        assert.ok(known.has(full), `the excerpt's full text is no text of the history`);
        assert.equal(Buffer.byteLength(full), Number(excerpt[2]));
      }
    }
  }
  // The newest message's own outputs: each placeholder of its copy reads back the output of
  // the same call in that message.
  const last = result.messages[result.messages.length - 1];
  if (newest && last !== newest && isCopyOf(last, newest) && hasPlaceholder(last)) {
    const pairs = newest.role === 'tool'
      ? [[newest.tool_call_id, newest.content, last.tool_call_id, last.content]]
      : (last.content || []).filter(h.isResultBlock).map((b) => {
        const source = (newest.content || []).filter(h.isResultBlock)
          .filter((x) => x.tool_use_id === b.tool_use_id).map((x) => x.content);
        return [b.tool_use_id, source, b.tool_use_id, b.content];
      });
    for (const [, original, , shown] of pairs) {
      for (const t of messageTexts({ content: shown }).filter((x) => x.startsWith(PLACEHOLDER))) {
        const where = /\nfull text: (.*)\n/.exec(t)[1];
        const full = await compactor.readEvidence(where, { limit: 1e9 });
        const texts = Array.isArray(original) && newest.role !== 'tool'
          ? original.map(resultText) : [resultText(original)];
        assert.ok(texts.includes(full), 'a placeholder of the newest message reads back ' +
          'another text');
      }
    }
  }
}

/**
 * Replays `messages` as an agent loop: before each assistant message the prefix so far is
 * compacted, as an agent does before each model call. Checks every view (and, with
 * `recover`, that what left it reads back) and the summarizer discipline: at most one call a
 * compaction, none below soft nor at emergency. Returns the results.
 */
async function replay(compactor, messages, { window, soft = 0.7, summarize, format,
  recover = false, tools = null } = {}) {
  const results = [];
  const told = { over: false };
  const { estimator } = compactor.options;
  const toolTokens = tools && tools.length ? ctxkeel.estimateTokens(tools, { estimator }) : 0;
  for (let i = 1; i < messages.length; i++) {
    if (messages[i].role !== 'assistant') continue;
    const prefix = messages.slice(0, i);
    const before = structuredClone(prefix);
    const calls = summarize ? summarize.requests.length : 0;
    const options = {};
    if (summarize) options.summarize = summarize;
    if (tools) options.tools = tools;
    const result = await compactor.compact(prefix, options);
    assert.deepEqual(prefix, before, `compact() mutated its input at message ${i}`);
    assertView(prefix, result, { window, soft, format, told, toolTokens, estimator });
    if (recover) await assertRecoverable(compactor, prefix, result);
    if (summarize) {
      const made = summarize.requests.length - calls;
      assert.ok(made <= 1, `${made} summarize calls in one compaction`);
      if (!atLeast(result.tier, 'soft') || result.tier === 'emergency') {
        assert.equal(made, 0, `a summarize call at tier ${result.tier}`);
      }
    }
    results.push(result);
  }
  return results;
}

module.exports = {
  canonical,
  assertViewObjects,
  assertViewBound,
  replayInDialect,
  replayPoints,
  MARKER,
  PLACEHOLDER,
  tmpStore,
  removeStores,
  rng,
  syntheticHistory,
  anthropicHistory,
  checkpointFor,
  scripted,
  isCheckpoint,
  hasPlaceholder,
  atLeast,
  assertView,
  assertRecoverable,
  replay,
  isExcerpt,
  isCopyOf,
  messageTexts,
  resultText,
  lastAssistant,
  newestTurnFolded,
  EXCERPT,
};
