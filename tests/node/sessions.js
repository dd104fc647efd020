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
 * and its result (every fifth result large), with user notes and assistant remarks between.
 */
function syntheticHistory(turns, seed = 1) {
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
    messages.push(h.tool(id, toolOutput(rand, i, i % 5 === 4)));
    if (i % 9 === 8) messages.push(h.user(NOTES[(i / 9 | 0) % NOTES.length]));
  }
  return messages;
}

/** The same history in Anthropic shapes (system prompt dropped, as Anthropic keeps it apart). */
function anthropicHistory(turns, seed = 1) {
  return h.toAnthropic(syntheticHistory(turns, seed));
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

/**
 * Everything a compaction result must satisfy for the input `messages` and a compactor with
 * `window` and `soft`: pairs valid, pinned and newest messages kept as the same objects, new
 * objects only where something changed, bounded size, never larger.
 */
function assertView(messages, result, { window, soft = 0.7, format } = {}) {
  const view = result.messages;
  const opts = format ? { format } : undefined;
  assert.deepEqual(ctxkeel.checkPairs(view, opts), [], 'the view breaks tool-call pairs');
  const inputs = new Set(messages);
  const system = messages.find((m) => m.role === 'system');
  if (system) assert.ok(view.includes(system), 'the system message is not the same object');
  const task = messages.find((m) => m.role === 'user' && !isCheckpoint(m) &&
    !(Array.isArray(m.content) && m.content.some(h.isResultBlock)));
  if (task) assert.ok(view.includes(task), 'the first user message is not the same object');
  if (messages.length) {
    assert.equal(view[view.length - 1], messages[messages.length - 1],
      'the newest message is not the same object');
  }
  for (const m of view) {
    if (inputs.has(m)) continue;
    assert.ok(isCheckpoint(m) || hasPlaceholder(m) || JSON.stringify(m).includes(h.STUB),
      `a new object in the view changed nothing: ${JSON.stringify(m).slice(0, 200)}`);
  }
  assert.equal(view.filter(isCheckpoint).length <= 1, true, 'more than one checkpoint');
  assert.ok(result.tokensAfter <= result.tokensBefore,
    `the view grew: ${result.tokensBefore} -> ${result.tokensAfter}`);
  if (window && atLeast(result.tier, 'soft') && result.tokensAfter > soft * window) {
    assert.ok(result.record && /soft limit/.test(result.record.error || ''),
      `tier ${result.tier}: ${result.tokensAfter} tokens > soft limit ${soft * window}, ` +
      `and the record does not say why (${result.record && result.record.error})`);
  }
  if (result.tier === 'none' && !view.some(isCheckpoint) && !view.some(hasPlaceholder)) {
    assert.equal(view.length, messages.length);
    view.forEach((m, i) => assert.equal(m, messages[i], `tier none: message ${i} was copied`));
  }
}

/**
 * Replays `messages` as an agent loop: before each assistant message the prefix so far is
 * compacted, as an agent does before each model call. Checks every view and the summarizer
 * discipline; returns the results.
 */
async function replay(compactor, messages, { window, soft = 0.7, summarize, format } = {}) {
  const results = [];
  for (let i = 1; i < messages.length; i++) {
    if (messages[i].role !== 'assistant') continue;
    const prefix = messages.slice(0, i);
    const before = structuredClone(prefix);
    const calls = summarize ? summarize.requests.length : 0;
    const result = await compactor.compact(prefix, summarize ? { summarize } : undefined);
    assert.deepEqual(prefix, before, `compact() mutated its input at message ${i}`);
    assertView(prefix, result, { window, soft, format });
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
  replay,
};
