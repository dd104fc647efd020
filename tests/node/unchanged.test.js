'use strict';

// A compactor kept across calls reads again only the messages that changed since its last call
// (node/unchanged.js finds how many leading ones did not; the addon keeps the rest of what it
// read). These tests change a history in every way a host can between two calls, in place or
// not, and check that the kept compactor answers exactly as a fresh one given the same list:
// same tier, same token counts, the same messages (the caller's objects where the view keeps
// them). The window is far larger than any history, so both stay at tier none, where the
// answer is a function of the list alone (a fresh compactor has no session to differ in);
// tokensBefore counts every text, id and name the core read, and a pairing change shows in
// the repaired view.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fc = require('fast-check');
const h = require('./helpers.js');
const s = require('./sessions.js');
const g = require('./generators.js');
const { Records } = require('../../node/unchanged.js');

const { ctxkeel } = h;
const { Compactor } = ctxkeel;

after(s.removeStores);

const WINDOW = 1e9;
const store = s.tmpStore();
let sessions = 0;

function compactor() {
  return new Compactor({ contextWindow: WINDOW, storeDir: store, sessionId: `u${sessions++}` });
}

/** The kept compactor's answer for `messages` is the fresh compactor's. */
async function assertSame(kept, messages, what) {
  const got = await h.outcome(() => kept.compact(messages));
  const fresh = compactor();
  const want = await h.outcome(() => fresh.compact(messages));
  fresh.close();
  h.assertSameOutcome(got, want, what);
  if (want.code) return;
  const a = got.result;
  const b = want.result;
  a.messages.forEach((m, i) => {
    // A kept message is the caller's object of this call, never one from an earlier list.
    assert.ok(m === b.messages[i] || !messages.includes(b.messages[i]),
      `${what}: message ${i} is not the caller's object`);
  });
}

function openaiHistory() {
  return [
    h.sys('You are a careful coding agent.'),
    h.user('Fix the failing test in src/app/parser.py.'),
    { role: 'assistant', content: 'Reading the parser.',
      tool_calls: [h.call('call_1', 'read_file', '{"path":"src/app/parser.py"}')] },
    { role: 'tool', tool_call_id: 'call_1', name: 'read_file', content: 'def parse(x):\n  pass' },
    { role: 'user', content: [h.text('Remember: never push to main.')] },
    h.asst(h.call('call_2', 'bash', '{"cmd":"pytest -q"}'), h.call('call_3')),
    h.tool('call_2', [h.text('1 failed'), 'E   AssertionError']),
    h.tool('call_3'),
    { role: 'assistant', content: 'The test fails on empty input.' },
  ];
}

function anthropicHistory() {
  return [
    h.aUser(h.text('Fix the failing test in src/app/parser.py.')),
    h.aAsst({ type: 'thinking', thinking: 'Look at the parser first.', signature: 'sig' },
      h.use('toolu_1', 'read_file', { path: 'src/app/parser.py', lines: [1, 40] })),
    h.aUser({ type: 'tool_result', tool_use_id: 'toolu_1', is_error: false,
      content: [h.text('def parse(x):'), h.text('  pass')] }),
    h.aAsst(h.text('Running the tests.'), h.use('toolu_2', 'bash', { cmd: 'pytest -q' })),
    h.aUser(h.result('toolu_2', '1 failed'), h.text('Do not touch the CI config.')),
    h.aAsst(h.text('The test fails on empty input.')),
  ];
}

/** Each change is made in place on the list or its objects; `name` says what it does. */
const CHANGES = [
  ['a string content replaced', (m) => { m[1].content += ' Also the lexer, please.'; }],
  ['a text item of a content list', (m) => { m[4].content[0].text = 'Do push to main.'; }],
  ['tool call arguments', (m) => { m[2].tool_calls[0].function.arguments = '{"path":"a.py"}'; }],
  ['a tool name', (m) => { m[5].tool_calls[0].function.name = 'run_tests_in_a_sandbox'; }],
  ['a call id and its result', (m) => {
    m[5].tool_calls[1].id = 'call_three_renamed';
    m[7].tool_call_id = 'call_three_renamed';
  }],
  ['a result whose call id no longer matches', (m) => { m[3].tool_call_id = 'call_gone'; }],
  ['a tool message name', (m) => { m[3].name = 'open_the_file_for_reading'; }],
  ['a role', (m) => { m[8].role = 'user'; }],
  ['a role that breaks a pair', (m) => { m[5].role = 'user'; }],
  ['content from a string to a list', (m) => { m[1].content = [h.text(m[1].content)]; }],
  ['content to null', (m) => { m[8].content = null; }],
  ['tool_calls removed', (m) => { delete m[2].tool_calls; }],
  ['a tool call added', (m) => {
    m[2].tool_calls.push(h.call('call_9', 'grep', '{"q":"parse"}'));
    m.splice(4, 0, h.tool('call_9', 'src/app/parser.py:1: def parse'));
  }],
  ['arguments as an object, then changed inside', (m) => {
    m[2].tool_calls[0].function.arguments = { path: 'x.py' };
  }, (m) => { m[2].tool_calls[0].function.arguments.path = 'a/much/longer/path/to/y.py'; }],
  ['an item of a result list', (m) => { m[6].content[1] = 'E   KeyError: 42 and a traceback'; }],
  ['a message replaced by an equal copy', (m) => { m[3] = structuredClone(m[3]); }],
  ['every message replaced by a copy', (m) => { m.splice(0, m.length, ...structuredClone(m)); }],
  ['a message removed from the middle', (m) => { m.splice(4, 1); }],
  ['a message inserted in the middle', (m) => { m.splice(2, 0, h.user('One more thing.')); }],
  ['the list cut short', (m) => { m.length = 3; }],
  ['the list emptied', (m) => { m.length = 0; }],
  ['messages appended', (m) => { m.push(h.user('Now run the linter.'), h.asst(h.call('c_10'))); }],
  ['a message made invalid', (m) => { m[3].content = 42; }],
];

const ANTHROPIC_CHANGES = [
  ['tool_use input changed inside', (m) => { m[1].content[1].input.path = 'src/app/lexer.py'; }],
  ['tool_use input array changed inside', (m) => { m[1].content[1].input.lines.push(80); }],
  ['thinking text', (m) => { m[1].content[0].thinking = 'Start with the lexer, then the parser.'; }],
  ['a block type', (m) => { m[1].content[0].type = 'redacted_thinking'; }],
  ['a nested result text', (m) => { m[2].content[0].content[1].text = '  return None  # x'; }],
  ['a result content from a list to a string', (m) => { m[2].content[0].content = 'def f(): 1'; }],
  ['a result id', (m) => { m[4].content[0].tool_use_id = 'toolu_unknown'; }],
  ['is_error', (m) => { m[2].content[0].is_error = true; }],
  ['a block replaced by a string', (m) => { m[4].content[1] = 'Do not touch the CI config!'; }],
  ['a use block id', (m) => { m[3].content[1].id = 'toolu_2b'; }],
];

describe('a kept compactor after the history changed', () => {
  for (const [shape, make, changes] of [['openai', openaiHistory, CHANGES],
    ['anthropic', anthropicHistory, ANTHROPIC_CHANGES]]) {
    for (const [name, ...steps] of changes) {
      it(`answers as a fresh one (${shape}): ${name}`, async () => {
        const messages = make();
        const kept = compactor();
        await assertSame(kept, messages, 'before');
        for (const [k, step] of steps.entries()) {
          step(messages);
          await assertSame(kept, messages, `after step ${k + 1}`);
          await assertSame(kept, messages, `again after step ${k + 1}`);
        }
        // And it goes on as usual once the list grows again.
        messages.push(shape === 'openai' ? h.user('Next.') : h.aUser(h.text('Next.')));
        await assertSame(kept, messages, 'after a push');
        kept.close();
      });
    }
  }

  it('reads everything again after a call that threw half way', async () => {
    const messages = openaiHistory();
    const kept = compactor();
    await assertSame(kept, messages, 'before');
    let armed = true;
    const trap = { role: 'user' };
    Object.defineProperty(trap, 'content', {
      enumerable: true,
      get() {
        if (armed) throw new Error('a getter failed');
        return 'content from a getter';
      },
    });
    messages[1].content = 'A changed task the next call must see.';
    messages.push(trap);
    await assert.rejects(kept.compact(messages), /a getter failed/);
    armed = false;
    await assertSame(kept, messages, 'after the failure');
    kept.close();
  });

  it('grows one message a call over a long session as a fresh compactor sees it', async () => {
    const base = openaiHistory();
    const messages = base.slice(0, 2);
    const kept = compactor();
    for (let t = 0; t < 120; t++) {
      const i = 2 + (t % (base.length - 2));
      messages.push(structuredClone(base[i]));
      if (t % 17 === 5) messages[messages.length - 2].content = `edited at turn ${t}`;
      await assertSame(kept, messages, `turn ${t}`);
    }
    kept.close();
  });
});

/** JSON.stringify with BigInts written out, so that a change to one shows. */
function replacer(key, value) {
  return typeof value === 'bigint' ? `${value}n` : value;
}

describe('Records', () => {
  it('counts the leading messages whose fields are all equal, chunk boundaries included', () => {
    // Enough messages for records to span several chunks.
    const messages = [];
    for (let i = 0; i < 6000; i++) {
      messages.push({ role: 'assistant', content: `step ${i}`,
        tool_calls: [h.call(`c${i}`, 'bash', `{"i":${i}}`)] });
    }
    const r = new Records();
    assert.equal(r.update(messages), 0);
    assert.equal(r.update(messages), messages.length);
    assert.equal(r.update(structuredClone(messages)), messages.length);
    for (const at of [0, 1, 2047, 2048, 4095, 5999]) {
      const copy = messages.slice();
      copy[at] = { ...copy[at], content: `${copy[at].content}!` };
      assert.equal(r.update(copy), at, `changed at ${at}`);
      assert.equal(r.update(messages), at, `changed back at ${at}`);
    }
    assert.equal(r.update(messages.slice(0, 100)), 100);
    assert.equal(r.update(messages), 100);
    r.reset();
    assert.equal(r.update(messages), 0);
  });

  it('sees a change of every field the reader takes, wherever it is', () => {
    // Each entry changes one message (the last of its history) in place; Records must count
    // it as changed even when the change leaves every token count as it was.
    const cases = [
      ...CHANGES.map(([name, step]) => [name, openaiHistory, step]),
      ...ANTHROPIC_CHANGES.map(([name, step]) => [name, anthropicHistory, step]),
      ['is_error to false', anthropicHistory, (m) => { m[2].content[0].is_error = undefined; }],
      ['a thinking block to text', anthropicHistory, (m) => {
        m[1].content[0] = { type: 'text', text: m[1].content[0].thinking };
      }],
      ['an image block', anthropicHistory, (m) => {
        m[4].content[1] = { type: 'image', source: { type: 'base64', data: 'AAAA' } };
      }],
      ['a tool_use name', anthropicHistory, (m) => { m[3].content[1].name = 'sh'; }],
      ['a tool_use input that cannot be stringified', anthropicHistory, (m) => {
        m[3].content[1].input = { n: 1n };
      }],
      ['a tool_call_id', openaiHistory, (m) => { m[7].tool_call_id = 'call_4'; }],
      ['a role with the same token count', openaiHistory, (m) => { m[1].role = 'system'; }],
    ];
    for (const [name, make, step] of cases) {
      const before = make();
      const after = structuredClone(before);
      try {
        step(after);
      } catch {
        continue; // a change that needs an earlier step (arguments made an object first)
      }
      const first = before.findIndex((m, i) => JSON.stringify(m, replacer) !==
        JSON.stringify(after[i], replacer));
      const r = new Records();
      r.update(before);
      const expected = first < 0 ? Math.min(before.length, after.length) : first;
      assert.equal(r.update(after), expected, name);
    }
  });

  it('tells apart values that only look alike', () => {
    const r = new Records();
    const pairs = [
      [{ role: 'user', content: '1' }, { role: 'user', content: 1 }],
      [{ role: 'user', content: null }, { role: 'user' }],
      [{ role: 'user', content: 'x' }, { role: 'user', content: ['x'] }],
      [{ role: 'user', content: ['x'] }, { role: 'user', content: [{ type: 'text', text: 'x' }] }],
      [{ role: 'tool', tool_call_id: 'a', content: 'x' }, { role: 'tool', name: 'a', content: 'x' }],
      [{ role: 'assistant', tool_calls: [] }, { role: 'assistant', tool_calls: {} }],
      [{ role: 'assistant', tool_calls: [{ id: 'a', function: 'f' }] },
        { role: 'assistant', tool_calls: [{ id: 'a', function: { name: 'f' } }] }],
      [h.aUser({ type: 'tool_result', tool_use_id: 'a', content: 2 }),
        h.aUser({ type: 'tool_result', tool_use_id: 'a', content: [] })],
      ['not a message', { role: 'not a message' }],
    ];
    for (const [a, b] of pairs) {
      r.reset();
      r.update([a, h.user('after')]);
      assert.equal(r.update([b, h.user('after')]), 0, JSON.stringify([a, b]));
    }
  });

  it('keeps no string of a dropped message alive', () => {
    const r = new Records();
    const messages = [];
    for (let i = 0; i < 9000; i++) messages.push(h.user(`message ${i}`));
    r.update(messages);
    r.update(messages.slice(0, 10));
    const held = r.chunks.flat().filter((v) => typeof v === 'string');
    assert.deepEqual(held, messages.slice(0, 10).map((m) => m.content).flatMap((t) => ['user', t]));
  });
});

describe('the addon loaded directly', () => {
  const addon = require('../../build/Release/ctxkeel.node');

  it('checks the unchanged count of begin() and never reads past what it kept', async () => {
    const c = new addon.Compactor({ contextWindow: WINDOW, storeDir: store, sessionId: 'bare' });
    const messages = openaiHistory();
    assert.throws(() => c.begin(messages, 0, false, 'all'),
      { name: 'TypeError', message: /unchanged must be a number, not a string/ });
    assert.throws(() => c.begin(messages, 0, false, -1),
      { name: 'RangeError', message: /unchanged must be an integer/ });
    assert.throws(() => c.begin(messages, 0, false, 1.5), { name: 'RangeError' });
    // begin() reads the list at once (a bad one throws) and runs the core on the thread pool:
    // its Job comes in a Promise.
    const tokens = async (on, list, unchanged) => {
      const pending = on.begin(list, 0, false, unchanged);
      assert.ok(pending instanceof Promise);
      const job = await pending;
      try {
        return job.finish(list).tokensBefore;
      } finally {
        job.free();
      }
    };
    const other = new addon.Compactor({ contextWindow: WINDOW, storeDir: store,
      sessionId: 'bare-other' });
    const longer = messages.concat([h.user('One more message with several words in it.')]);
    // Nothing kept yet: a count past the list reads every message.
    assert.equal(await tokens(c, messages, 1e6), await tokens(other, messages, 0));
    // A count past the history it kept is cut to that history: the new message is read.
    assert.equal(await tokens(c, longer, 1e6), await tokens(other, longer, 0));
    assert.ok(await tokens(c, longer, 0) > await tokens(c, messages, 0));
    c.close();
    other.close();
  });
});

describe('property: random changes between calls', () => {
  it('a kept compactor always answers as a fresh one', async () => {
    const strings = (value, out) => {
      if (Array.isArray(value)) value.forEach((v, k) => strings_at(value, k, v, out));
      else if (value && typeof value === 'object') {
        for (const key of Object.keys(value)) strings_at(value, key, value[key], out);
      }
      return out;
    };
    const strings_at = (obj, key, v, out) => {
      if (typeof v === 'string') out.push([obj, key]);
      else strings(v, out);
    };
    await fc.assert(fc.asyncProperty(
      g.histories({ maxTurns: 6 }),
      fc.array(fc.tuple(fc.nat(5), fc.nat(1e6), g.shortText()), { minLength: 1, maxLength: 6 }),
      async (history, steps) => {
        // fast-check hands the same value to every run it shrinks: change a copy.
        const messages = structuredClone(history.messages);
        const kept = compactor();
        try {
          await assertSame(kept, messages, 'first');
          for (const [op, pick, text] of steps) {
            const n = messages.length;
            if (op === 0 || op === 1) {
              const places = strings(messages, []);
              if (places.length) {
                const [obj, key] = places[pick % places.length];
                obj[key] = `${obj[key]} ${text} changed ${pick}`;
              }
            } else if (op === 2 && n) {
              messages[pick % n] = structuredClone(messages[pick % n]);
            } else if (op === 3 && n > 1) {
              messages.splice(pick % n, 1);
            } else if (op === 4) {
              messages.push(h.user(text));
            } else if (n) {
              const m = messages[pick % n];
              if (m && typeof m === 'object') m.role = ['user', 'assistant', 'system'][pick % 3];
            }
            await assertSame(kept, messages, `after op ${op}`);
          }
        } finally {
          kept.close();
        }
      },
    ), { seed: 20261201, numRuns: 60, endOnFailure: true });
  });
});
