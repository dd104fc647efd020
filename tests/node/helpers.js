// Shared builders and invariants for the Node tests (not a test file itself).
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const repoRoot = path.resolve(__dirname, '..', '..');
const ctxkeel = require(path.join(repoRoot, 'node', 'index.js'));

const STUB = 'result unavailable: context was compacted';

// ---- OpenAI shapes ----
const call = (id, name = 'bash', args = '{"cmd":"ls"}') => ({
  id,
  type: 'function',
  function: { name, arguments: args },
});
const asst = (...calls) => ({ role: 'assistant', content: null, tool_calls: calls });
const tool = (id, content = `output of ${id}`) => ({ role: 'tool', tool_call_id: id, content });
const user = (text) => ({ role: 'user', content: text });
const sys = (text) => ({ role: 'system', content: text });

// ---- Anthropic shapes ----
const use = (id, name = 'bash', input = { cmd: 'ls' }) => ({ type: 'tool_use', id, name, input });
const result = (id, content = `output of ${id}`) => ({
  type: 'tool_result',
  tool_use_id: id,
  content,
});
const text = (t) => ({ type: 'text', text: t });
const aAsst = (...blocks) => ({ role: 'assistant', content: blocks });
const aUser = (...blocks) => ({ role: 'user', content: blocks });

/** The violations without their sentence, for deepEqual. */
function kinds(messages, options) {
  return ctxkeel.checkPairs(messages, options).map(({ kind, index, part, toolCallId }) => ({
    kind,
    index,
    part,
    toolCallId,
  }));
}

function isUseBlock(item) {
  return item !== null && typeof item === 'object' && item.type === 'tool_use';
}

function isResultBlock(item) {
  return item !== null && typeof item === 'object' && item.type === 'tool_result';
}

/**
 * Assistant messages keep their number and order: each output assistant message is its source
 * itself, or a copy of it whose every other key holds the very same value.
 */
function assertAssistantsKept(input, output) {
  const ins = input.filter((m) => m.role === 'assistant');
  const outs = output.filter((m) => m.role === 'assistant');
  assert.equal(outs.length, ins.length, 'assistant messages were dropped or added');
  outs.forEach((out, i) => {
    if (out === ins[i]) return;
    for (const key of Object.keys(ins[i])) {
      if (key === 'content' || key === 'tool_calls') continue;
      assert.equal(out[key], ins[i][key], `assistant ${i}: key ${key} changed`);
    }
  });
}

// The note repair leaves where it removed a tool call: its name, why, and its arguments.
const REMOVED_NOTE = /^\(tool call [^]* removed by ctxkeel: [^]*; its arguments were: [^]*\)$/;

function itemText(item) {
  if (typeof item === 'string') return item;
  return item && typeof item === 'object' && item.type === 'text' && typeof item.text === 'string'
    ? item.text : null;
}

function isRemovedNote(item) {
  const t = itemText(item);
  return t !== null && REMOVED_NOTE.test(t);
}

/** The removal notes of a list, as texts, in order. */
function removedNotes(messages) {
  const notes = [];
  for (const m of messages) {
    if (!m || typeof m !== 'object') continue;
    const items = Array.isArray(m.content) ? m.content : [m.content];
    for (const item of items) if (isRemovedNote(item)) notes.push(itemText(item));
  }
  return notes;
}

/** Every tool call of a list (OpenAI tool_calls entries and tool_use blocks, wherever they
 * stand), as {name, args} with args the JSON text the core reads. */
function callsOf(messages) {
  const calls = [];
  for (const m of messages) {
    if (!m || typeof m !== 'object') continue;
    for (const c of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
      const fn = c && c.function;
      const args = fn && fn.arguments;
      calls.push({ name: fn && fn.name, args: typeof args === 'string' ? args
        : args === undefined ? '' : JSON.stringify(args) });
    }
    for (const item of Array.isArray(m.content) ? m.content : []) {
      if (isUseBlock(item)) {
        calls.push({ name: item.name, args: item.input === undefined ? ''
          : JSON.stringify(item.input) });
      }
    }
  }
  return calls;
}

/**
 * Every call a repair removed left a note that names it and quotes its arguments: as many new
 * notes as calls gone, each one the note of a call of the input.
 */
function assertRemovedCallsNoted(input, output) {
  const before = removedNotes(input);
  const added = removedNotes(output).slice(before.length);
  const gone = callsOf(input).length - callsOf(output).length;
  assert.equal(added.length, gone, `${gone} calls removed, ${added.length} notes added`);
  const calls = callsOf(input);
  for (const note of added) {
    assert.ok(calls.some((c) => note.startsWith(`(tool call ${c.name} removed by ctxkeel: `) &&
      note.endsWith(`; its arguments were: ${c.args})`)), `a note of no call: ${note}`);
  }
}

/**
 * User-authored content keeps its order: the items of every user message other than tool
 * blocks, in order, are the same objects (or, for string content, the same text) before and
 * after. (A tool_use block in a user message is misplaced, not user content; repair drops it.)
 */
function assertUserContentKept(input, output) {
  const ids = new Map();
  const token = (item) => {
    if (typeof item === 'string') return `s:${item}`;
    if (ids.has(item)) return `o:${ids.get(item)}`;
    if (item && item.type === 'text' && typeof item.text === 'string') return `s:${item.text}`;
    return 'unknown';
  };
  const collect = (messages, register) =>
    messages
      .filter((m) => m.role === 'user')
      .map((m) => {
        // Repair leaves a note where it removed a (misplaced) call; the note is not user
        // content (assertRemovedCallsNoted checks it).
        if (typeof m.content === 'string') return isRemovedNote(m.content) ? [] : [m.content];
        if (!Array.isArray(m.content)) return [];
        return m.content.filter((item) => !isResultBlock(item) && !isUseBlock(item) &&
          !isRemovedNote(item));
      })
      .filter((items) => items.length > 0)
      .map((items) =>
        items.map((item) => {
          if (register && typeof item === 'object' && !ids.has(item)) ids.set(item, ids.size);
          return token(item);
        }),
      );
  const before = collect(input, true);
  const after = collect(output, false);
  assert.deepEqual(after, before, 'user content was reordered, dropped or changed');
}

/**
 * The contract of repairPairs on one input: the output passes checkPairs, the input is not
 * mutated, repairing again returns the very same objects, the conversation keeps its order,
 * and (unless `notes` is false) every call removed left its note. Returns the repaired list.
 */
function assertRepairContract(messages, options, { notes = true } = {}) {
  const before = structuredClone(messages);
  const repaired = ctxkeel.repairPairs(messages, options);
  assert.deepEqual(messages, before, 'repairPairs mutated its input');
  assert.notEqual(repaired, messages, 'repairPairs must return a new array');
  assert.deepEqual(ctxkeel.checkPairs(repaired, options), [], 'repaired list still has violations');
  const again = ctxkeel.repairPairs(repaired, options);
  assert.equal(again.length, repaired.length, 'repair is not idempotent');
  again.forEach((m, i) => assert.equal(m, repaired[i], `repair(repair(x))[${i}] is a new object`));
  assertAssistantsKept(messages, repaired);
  assertUserContentKept(messages, repaired);
  if (notes) assertRemovedCallsNoted(messages, repaired);
  return repaired;
}

/** The corpus transcripts ([name, messages]); [] when shared/corpus is absent. */
function loadCorpus() {
  const dir = path.join(repoRoot, '..', 'shared', 'corpus');
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => [f, JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'))]);
}

/**
 * An OpenAI transcript in Anthropic shape: system messages leave the list, tool_calls become
 * tool_use blocks (arguments parsed as JSON), and each run of tool messages becomes one user
 * message of tool_result blocks.
 */
function toAnthropic(messages) {
  const out = [];
  for (const m of messages) {
    if (m.role === 'system') continue;
    if (m.role === 'tool') {
      const block = { type: 'tool_result', tool_use_id: m.tool_call_id, content: m.content };
      const last = out[out.length - 1];
      if (last && last.role === 'user' && last.content.every(isResultBlock)) {
        last.content.push(block);
      } else {
        out.push({ role: 'user', content: [block] });
      }
      continue;
    }
    const content = [];
    if (typeof m.content === 'string' && m.content !== '') content.push(text(m.content));
    for (const c of m.tool_calls || []) {
      let input;
      try {
        input = JSON.parse(c.function.arguments);
      } catch {
        input = { raw: c.function.arguments };
      }
      content.push({ type: 'tool_use', id: c.id, name: c.function.name, input });
    }
    out.push({ role: m.role, content });
  }
  return out;
}

/** What a call gave: { result } or, when it threw, { code, message }. */
async function outcome(call) {
  try {
    return { result: await call() };
  } catch (err) {
    return { code: err.code ?? err.name, message: err.message };
  }
}

/**
 * Two outcomes are one answer: the same error code, or the same tier, token counts and
 * messages (JSON compared; assert.ok rather than deepEqual, since a diff of
 * histories with 200 KB outputs, made again at every shrinking step of a property, would take
 * gigabytes).
 */
function assertSameOutcome(got, want, what) {
  assert.equal(got.code, want.code, `${what}: error (${got.message} / ${want.message})`);
  if (want.code) return;
  const a = got.result;
  const b = want.result;
  assert.equal(a.tier, b.tier, `${what}: tier`);
  assert.equal(a.tokensBefore, b.tokensBefore, `${what}: tokensBefore`);
  assert.equal(a.tokensAfter, b.tokensAfter, `${what}: tokensAfter`);
  assert.equal(a.messages.length, b.messages.length, `${what}: messages`);
  a.messages.forEach((m, i) => {
    assert.ok(m === b.messages[i] || JSON.stringify(m) === JSON.stringify(b.messages[i]),
      `${what}: message ${i} differs`);
  });
}

module.exports = {
  outcome,
  assertSameOutcome,
  ctxkeel,
  repoRoot,
  STUB,
  call,
  asst,
  tool,
  user,
  sys,
  use,
  result,
  text,
  aAsst,
  aUser,
  kinds,
  isResultBlock,
  isUseBlock,
  assertRepairContract,
  assertAssistantsKept,
  assertUserContentKept,
  assertRemovedCallsNoted,
  isRemovedNote,
  loadCorpus,
  toAnthropic,
};
