'use strict';

// Real agent transcripts from shared/corpus (OpenAI messages), valid as they are, then
// corrupted in the ways compactors and hand-edited histories break them, in both formats.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers.js');

const { ctxkeel } = h;
const corpus = h.loadCorpus();
const skip = corpus.length === 0 ? 'shared/corpus is absent' : false;

// Three spread-out picks from a list of candidate indices.
function picks(indices) {
  if (indices.length <= 3) return indices;
  return [indices[0], indices[Math.floor(indices.length / 2)], indices[indices.length - 1]];
}

const without = (list, i) => list.filter((_, k) => k !== i);
const indicesOf = (list, pred) => list.flatMap((m, i) => (pred(m) ? [i] : []));

// ---- OpenAI corruptions: each returns [label, corrupted list] ----
function openaiCorruptions(messages) {
  const out = [];
  const results = indicesOf(messages, (m) => m.role === 'tool');
  const callers = indicesOf(messages, (m) => Array.isArray(m.tool_calls) && m.tool_calls.length);
  for (const i of picks(results)) out.push([`drop result ${i}`, without(messages, i)]);
  for (const i of picks(callers)) out.push([`drop call message ${i}`, without(messages, i)]);
  for (const i of picks(results)) {
    const copy = messages.slice();
    copy.splice(i + 1, 0, { ...messages[i] });
    out.push([`duplicate result ${i}`, copy]);
  }
  for (const i of picks(results)) {
    if (i + 3 > messages.length) continue;
    const copy = without(messages, i);
    copy.splice(i + 2, 0, messages[i]);
    out.push([`move result ${i} later`, copy]);
  }
  return out;
}

/*
 * The transcripts have no parallel calls, so one is made: two consecutive single-call turns
 * become one assistant message with both calls, followed by the two results in reverse order.
 * Returns the list and the position of the merged turn, or null when there is no such pair.
 */
function parallelTurn(messages) {
  for (let i = 0; i + 3 < messages.length; i++) {
    const [a1, t1, a2, t2] = messages.slice(i, i + 4);
    if (a1.role === 'assistant' && a1.tool_calls?.length === 1 && t1.role === 'tool' &&
        a2.role === 'assistant' && a2.tool_calls?.length === 1 && t2.role === 'tool') {
      const merged = { ...a1, tool_calls: [a1.tool_calls[0], a2.tool_calls[0]] };
      return [[...messages.slice(0, i), merged, t2, t1, ...messages.slice(i + 4)], i];
    }
  }
  return null;
}

// ---- Anthropic corruptions ----
function resultMessages(messages) {
  return indicesOf(messages, (m) => m.role === 'user' && Array.isArray(m.content) &&
    m.content.some(h.isResultBlock));
}

function anthropicCorruptions(messages) {
  const out = [];
  const results = resultMessages(messages);
  const callers = indicesOf(messages, (m) => m.role === 'assistant' &&
    m.content.some((b) => b.type === 'tool_use'));
  for (const i of picks(results)) {
    const copy = messages.slice();
    const rest = messages[i].content.slice(1);
    if (rest.length) copy[i] = { ...messages[i], content: rest };
    else copy.splice(i, 1);
    out.push([`drop result block in ${i}`, copy]);
  }
  for (const i of picks(callers)) out.push([`drop tool_use message ${i}`, without(messages, i)]);
  for (const i of picks(results)) {
    const copy = messages.slice();
    const block = messages[i].content[0];
    copy[i] = { ...messages[i], content: [block, { ...block }, ...messages[i].content.slice(1)] };
    out.push([`duplicate result in ${i}`, copy]);
  }
  for (const i of picks(results)) {
    const later = results.find((k) => k >= i + 2);
    if (later === undefined) continue;
    const copy = messages.slice();
    const block = messages[i].content[0];
    const rest = messages[i].content.slice(1);
    copy[later] = { ...messages[later], content: [...messages[later].content, block] };
    if (rest.length) copy[i] = { ...messages[i], content: rest };
    else copy[i] = { role: 'user', content: [h.text('(result moved)')] };
    out.push([`move result of ${i} later`, copy]);
  }
  return out;
}

function checkCorrupted(label, corrupted, format) {
  const before = structuredClone(corrupted);
  const violations = ctxkeel.checkPairs(corrupted, { format });
  assert.ok(violations.length > 0, `${label}: the corruption went unnoticed`);
  const repaired = h.assertRepairContract(corrupted, { format });
  assert.deepEqual(corrupted, before, `${label}: input changed`);
  return repaired;
}

describe('corpus transcripts', { skip }, () => {
  for (const [name, messages] of corpus) {
    describe(name, () => {
      it('is valid and repairs to the same objects', () => {
        assert.deepEqual(ctxkeel.checkPairs(messages), []);
        const repaired = ctxkeel.repairPairs(messages);
        assert.equal(repaired.length, messages.length);
        repaired.forEach((m, i) => assert.equal(m, messages[i]));
        assert.ok(ctxkeel.estimateTokens(messages) > messages.length * 4);
        assert.equal(ctxkeel.estimateTokens(messages, { estimator: 'chars4' }),
          Math.ceil(messages.reduce((n, m) => n + Buffer.byteLength(m.content ?? '') +
            Buffer.byteLength(m.tool_call_id ?? '') + (m.tool_calls ?? []).reduce((k, c) =>
            k + Buffer.byteLength(c.id + c.function.name + c.function.arguments), 0), 0) / 4));
      });

      it('repairs corrupted copies (OpenAI)', () => {
        const cases = openaiCorruptions(messages);
        assert.ok(cases.length >= 8);
        for (const [label, corrupted] of cases) checkCorrupted(label, corrupted, 'openai');
      });

      it('accepts shuffled parallel results and repairs a parallel result moved away', () => {
        const made = parallelTurn(messages);
        assert.ok(made, 'no two consecutive single-call turns');
        const [parallel, at] = made;
        assert.deepEqual(ctxkeel.checkPairs(parallel), []);
        ctxkeel.repairPairs(parallel).forEach((m, i) => assert.equal(m, parallel[i]));
        // One of the two results now comes after the next non-tool message.
        const moved = parallel.slice();
        const [first] = moved.splice(at + 1, 1);
        moved.splice(at + 3, 0, first);
        const repaired = checkCorrupted('parallel result moved', moved, 'openai');
        assert.deepEqual(repaired.slice(at, at + 3).map((m) => m.role),
          ['assistant', 'tool', 'tool']);
      });

      it('is valid in Anthropic shape and repairs corrupted copies', () => {
        const anthropic = h.toAnthropic(messages);
        assert.deepEqual(ctxkeel.checkPairs(anthropic), []);
        assert.deepEqual(ctxkeel.checkPairs(anthropic, { format: 'anthropic' }), []);
        ctxkeel.repairPairs(anthropic).forEach((m, i) => assert.equal(m, anthropic[i]));
        const cases = anthropicCorruptions(anthropic);
        assert.ok(cases.length >= 8);
        for (const [label, corrupted] of cases) checkCorrupted(label, corrupted, 'anthropic');
      });

      it('repairs shuffled and out-of-order Anthropic results', () => {
        const [parallel] = parallelTurn(messages);
        const anthropic = h.toAnthropic(parallel);
        const i = anthropic.findIndex((m) => m.role === 'user' && m.content.length === 2 &&
          m.content.every(h.isResultBlock));
        assert.ok(i > 0);
        const shuffled = anthropic.slice();
        shuffled[i] = { role: 'user', content: [anthropic[i].content[1], anthropic[i].content[0]] };
        assert.deepEqual(ctxkeel.checkPairs(shuffled), []);
        const late = anthropic.slice();
        late[i] = { role: 'user', content: [anthropic[i].content[0], h.text('note'),
          anthropic[i].content[1]] };
        assert.deepEqual(h.kinds(late).map((v) => v.kind), ['result_order']);
        const repaired = checkCorrupted('result after text', late, 'anthropic');
        assert.deepEqual(repaired[i].content.map((b) => b.type),
          ['tool_result', 'tool_result', 'text']);
      });
    });
  }
});
