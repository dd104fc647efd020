'use strict';

// Random message lists in both formats (a fixed seed, so failures reproduce): whatever the
// damage, repairPairs must honour its whole contract.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers.js');

const ROUNDS = 1500;
const IDS = ['a', 'b', 'c', 'd', ''];

function prng(seed) {
  let state = seed;
  const next = () => {
    state = (Math.imul(state, 1103515245) + 12345) & 0x7fffffff;
    return state / 0x7fffffff;
  };
  return { next, pick: (list) => list[Math.floor(next() * list.length)] };
}

function openaiList(r) {
  const out = [];
  const n = 1 + Math.floor(r.next() * 8);
  for (let i = 0; i < n; i++) {
    const x = r.next();
    if (x < 0.2) {
      out.push(h.user(`u${i}`));
    } else if (x < 0.5) {
      const calls = Array.from({ length: Math.floor(r.next() * 3) }, () => h.call(r.pick(IDS)));
      const content = r.next() < 0.5 ? null : `t${i}`;
      out.push(calls.length ? { role: 'assistant', content, tool_calls: calls, n: i }
        : { role: 'assistant', content: `x${i}` });
    } else if (x < 0.9) {
      out.push(h.tool(r.pick(IDS)));
    } else if (x < 0.95) {
      out.push({ role: 'user', content: 'asks', tool_calls: [h.call(r.pick(IDS))] });
    } else {
      out.push(h.sys('rules'));
    }
  }
  return out;
}

function anthropicList(r) {
  const out = [];
  const n = 1 + Math.floor(r.next() * 8);
  for (let i = 0; i < n; i++) {
    const blocks = [];
    const k = Math.floor(r.next() * 4);
    if (r.next() < 0.5) {
      for (let j = 0; j < k; j++) {
        const y = r.next();
        blocks.push(y < 0.7 ? h.use(r.pick(IDS)) : y < 0.85 ? h.text('t') : h.result(r.pick(IDS)));
      }
      out.push({ role: 'assistant', content: blocks, n: i });
    } else if (r.next() < 0.2) {
      out.push(h.user(`plain ${i}`));
    } else {
      for (let j = 0; j < k; j++) {
        const y = r.next();
        if (y < 0.7) blocks.push(h.result(r.pick(IDS)));
        else if (y < 0.94) blocks.push(h.text(`u${j}`));
        else blocks.push(h.use(r.pick(IDS)));
      }
      out.push({ role: 'user', content: blocks });
    }
  }
  out.push(h.aAsst(h.use('z'))); // at least one Anthropic block, so the format is clear
  return out;
}

// A misplaced tool_use standing in the user message that answers a tool turn is removed with
// its note (pairs.c emit_results once left the note out).

describe('random damage', () => {
  for (const [format, make, seed] of [
    ['openai', openaiList, 7],
    ['anthropic', anthropicList, 11],
  ]) {
    const run = (notes) => {
      const r = prng(seed);
      let damaged = 0;
      for (let round = 0; round < ROUNDS; round++) {
        const messages = make(r);
        if (h.ctxkeel.checkPairs(messages, { format }).length) damaged++;
        try {
          h.assertRepairContract(messages, { format }, { notes });
          h.assertRepairContract(messages, undefined, { notes });
        } catch (err) {
          err.message += `\n  input: ${JSON.stringify(messages)}`;
          throw err;
        }
      }
      assert.ok(damaged > ROUNDS / 2, `only ${damaged} of ${ROUNDS} lists were damaged`);
    };
    it(`repairs ${ROUNDS} random ${format} lists under the full contract`, () => run(false));
    it(`notes every call it removes in ${ROUNDS} random ${format} lists`,
      () => run(true));
  }

  it('notes a misplaced tool_use in the message of results (minimal case)', () => {
      const messages = [h.user('go'), h.aAsst(h.use('d')),
        h.aUser(h.result('d', 'ok'), h.use('a', 'bash', { cmd: 'ls' }))];
      const out = h.assertRepairContract(messages);
      assert.deepEqual(out[2].content[1], { type: 'text', text: '(tool call bash removed by ' +
        'ctxkeel: it stood outside an assistant message; its arguments were: {"cmd":"ls"})' });
    });
});
