'use strict';

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers.js');

const { ctxkeel, STUB, call, asst, tool, user, sys, use, result, text, aAsst, aUser } = h;

// One case per rule and format: the messages and the violations checkPairs must report.
const OPENAI_CASES = {
  orphan_result: {
    messages: [user('go'), tool('x')],
    expect: [{ kind: 'orphan_result', index: 1, part: 0, toolCallId: 'x' }],
  },
  missing_result: {
    messages: [user('go'), asst(call('a'))],
    expect: [{ kind: 'missing_result', index: 1, part: 0, toolCallId: 'a' }],
  },
  not_adjacent: {
    messages: [user('go'), asst(call('a')), user('wait'), tool('a')],
    expect: [{ kind: 'not_adjacent', index: 3, part: 0, toolCallId: 'a' }],
  },
  duplicate_result: {
    messages: [user('go'), asst(call('a')), tool('a'), tool('a', 'again')],
    expect: [{ kind: 'duplicate_result', index: 3, part: 0, toolCallId: 'a' }],
  },
  // In OpenAI histories an id may come back in a later turn (pairs are matched turn by turn);
  // only a repeat within one message is a duplicate.
  duplicate_call: {
    messages: [user('go'), asst(call('a'), call('a', 'grep')), tool('a'), user('ok')],
    expect: [{ kind: 'duplicate_call', index: 1, part: 1, toolCallId: 'a' }],
  },
  empty_id: {
    messages: [user('go'), asst(call('')), tool('')],
    expect: [
      { kind: 'empty_id', index: 1, part: 0, toolCallId: '' },
      { kind: 'empty_id', index: 2, part: 0, toolCallId: '' },
    ],
  },
  misplaced: {
    messages: [{ role: 'user', content: 'go', tool_calls: [call('a')] }, user('ok')],
    expect: [{ kind: 'misplaced', index: 0, part: 1, toolCallId: 'a' }],
  },
};

const ANTHROPIC_CASES = {
  orphan_result: {
    messages: [user('go'), aAsst(text('hi')), aUser(result('x'))],
    expect: [{ kind: 'orphan_result', index: 2, part: 0, toolCallId: 'x' }],
  },
  missing_result: {
    messages: [user('go'), aAsst(text('running'), use('a'))],
    expect: [{ kind: 'missing_result', index: 1, part: 1, toolCallId: 'a' }],
  },
  not_adjacent: {
    messages: [
      user('go'),
      aAsst(use('a')),
      aUser(text('hm')),
      aAsst(text('ok')),
      aUser(result('a')),
    ],
    expect: [{ kind: 'not_adjacent', index: 4, part: 0, toolCallId: 'a' }],
  },
  duplicate_result: {
    messages: [user('go'), aAsst(use('a')), aUser(result('a'), result('a', 'again'))],
    expect: [{ kind: 'duplicate_result', index: 2, part: 1, toolCallId: 'a' }],
  },
  duplicate_call: {
    messages: [user('go'), aAsst(use('a')), aUser(result('a')), aAsst(text('again'), use('a'))],
    expect: [{ kind: 'duplicate_call', index: 3, part: 1, toolCallId: 'a' }],
  },
  empty_id: {
    messages: [user('go'), aAsst(use('')), aUser(result(''))],
    expect: [
      { kind: 'empty_id', index: 1, part: 0, toolCallId: '' },
      { kind: 'empty_id', index: 2, part: 0, toolCallId: '' },
    ],
  },
  misplaced: {
    messages: [aUser(use('a')), aAsst(text('ok'), result('b'))],
    expect: [
      { kind: 'misplaced', index: 0, part: 0, toolCallId: 'a' },
      { kind: 'misplaced', index: 1, part: 1, toolCallId: 'b' },
    ],
  },
  result_order: {
    messages: [user('go'), aAsst(use('a')), aUser(text('note'), result('a'))],
    expect: [{ kind: 'result_order', index: 2, part: 1, toolCallId: 'a' }],
  },
};

for (const [format, cases] of [
  ['openai', OPENAI_CASES],
  ['anthropic', ANTHROPIC_CASES],
]) {
  describe(`checkPairs and repairPairs, ${format}`, () => {
    for (const [rule, { messages, expect }] of Object.entries(cases)) {
      it(`reports ${rule}`, () => {
        assert.deepEqual(h.kinds(messages), expect);
        assert.deepEqual(h.kinds(messages, { format }), expect);
        for (const v of ctxkeel.checkPairs(messages)) {
          assert.equal(typeof v.message, 'string');
          assert.ok(v.message.startsWith(`messages[${v.index}]: tool `), v.message);
          assert.ok(v.message.includes(JSON.stringify(v.toolCallId)), v.message);
        }
      });

      it(`repairs ${rule}`, () => {
        h.assertRepairContract(messages);
        h.assertRepairContract(messages, { format });
      });
    }

    it('returns [] and the same objects for a valid list', () => {
      const valid =
        format === 'openai'
          ? [sys('rules'), user('go'), asst(call('a'), call('b')), tool('b'), tool('a'), user('ok')]
          : [
            user('go'),
            aAsst(text('t'), use('a'), use('b')),
            aUser(result('b'), result('a'), text('x')),
          ];
      assert.deepEqual(ctxkeel.checkPairs(valid), []);
      const repaired = ctxkeel.repairPairs(valid);
      assert.notEqual(repaired, valid);
      assert.equal(repaired.length, valid.length);
      repaired.forEach((m, i) => assert.equal(m, valid[i]));
    });
  });
}

describe('ids reused across turns', () => {
  it('are valid in OpenAI histories: every pair is kept, nothing is repaired', () => {
    // An agent whose server names every call call_0.
    const messages = [user('go')];
    for (let i = 0; i < 10; i++) {
      messages.push(asst(call('call_0', 'bash', `{"cmd":"step ${i}"}`)),
        tool('call_0', `output ${i}`));
    }
    messages.push(user('done?'));
    assert.deepEqual(ctxkeel.checkPairs(messages), []);
    const out = ctxkeel.repairPairs(messages);
    assert.equal(out.length, messages.length);
    out.forEach((m, i) => assert.equal(m, messages[i], `message ${i} was copied`));
  });

  it('pair each result with the newest call of its id before it', () => {
    // The second call_0 has no result of its own: it gets the stub; the first keeps its own.
    const messages = [user('go'), asst(call('call_0')), tool('call_0', 'first'),
      asst(call('call_0')), user('next')];
    assert.deepEqual(h.kinds(messages),
      [{ kind: 'missing_result', index: 3, part: 0, toolCallId: 'call_0' }]);
    const out = h.assertRepairContract(messages);
    assert.deepEqual(out.map((m) => messages.indexOf(m)), [0, 1, 2, 3, -1, 4]);
    assert.deepEqual(out[4], { role: 'tool', tool_call_id: 'call_0', content: STUB });
  });

  it('are duplicates in Anthropic histories: the later call goes, with a note', () => {
    const messages = [user('go'), aAsst(use('a')), aUser(result('a')),
      aAsst(use('a', 'grep', { q: 'x' })), aUser(result('a', 'second'))];
    assert.deepEqual(h.kinds(messages).map((v) => [v.kind, v.index]),
      [['duplicate_call', 3], ['duplicate_result', 4]]);
    const out = h.assertRepairContract(messages);
    assert.deepEqual(out[3].content, [{ type: 'text', text: '(tool call grep removed by ' +
      'ctxkeel: its id was already used; its arguments were: {"q":"x"})' }]);
  });
});

describe('violation messages', () => {
  it('word each kind and quote the id as JSON', () => {
    const texts = ctxkeel.checkPairs([
      user('go'),
      asst(call('a"b'), call('a"b'), call('')),
      tool('a"b'),
      tool('a"b'),
      tool('ghost\n'),
    ]).map((v) => v.message);
    assert.deepEqual(texts, [
      'messages[1]: tool call "a\\"b" reuses the id of an earlier call',
      'messages[1]: tool call has an empty id ""',
      'messages[3]: tool result "a\\"b" is a second result for the same call',
      'messages[4]: tool result "ghost\\n" answers no tool call',
    ]);
  });
});

describe('repairPairs output shapes', () => {
  it('adds an OpenAI stub result right after the call and keeps the other objects', () => {
    const input = [user('go'), asst(call('a')), user('next')];
    const out = ctxkeel.repairPairs(input);
    assert.equal(out.length, 4);
    assert.equal(out[0], input[0]);
    assert.equal(out[1], input[1]);
    assert.deepEqual(out[2], { role: 'tool', tool_call_id: 'a', content: STUB });
    assert.equal(out[3], input[2]);
  });

  it('adds an Anthropic stub as a new user message of tool_result blocks', () => {
    const input = [user('go'), aAsst(use('a'), use('b'))];
    const out = ctxkeel.repairPairs(input);
    assert.equal(out.length, 3);
    assert.equal(out[1], input[1]);
    assert.deepEqual(out[2], {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'a', content: STUB },
        { type: 'tool_result', tool_use_id: 'b', content: STUB },
      ],
    });
  });

  it('puts stubs first in the next Anthropic user message and keeps its items', () => {
    const note = text('what now?');
    const input = [user('go'), aAsst(use('a')), { role: 'user', content: [note], tag: 7 }];
    const out = ctxkeel.repairPairs(input);
    assert.equal(out.length, 3);
    assert.deepEqual(out[2].content[0], { type: 'tool_result', tool_use_id: 'a', content: STUB });
    assert.equal(out[2].content[1], note);
    assert.equal(out[2].tag, 7);
    assert.notEqual(out[2], input[2]);
  });

  it('turns a string user message into blocks when results join it', () => {
    const input = [user('go'), aAsst(use('a')), user('plain words')];
    const out = ctxkeel.repairPairs(input);
    assert.deepEqual(out[2], {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'a', content: STUB },
        { type: 'text', text: 'plain words' },
      ],
    });
  });

  it('moves a late OpenAI result up without copying it', () => {
    const input = OPENAI_CASES.not_adjacent.messages;
    const out = ctxkeel.repairPairs(input);
    assert.deepEqual(out.map((m) => input.indexOf(m)), [0, 1, 3, 2]);
  });

  it('moves a late Anthropic result into the next user message, reusing the block', () => {
    const input = ANTHROPIC_CASES.not_adjacent.messages;
    const out = ctxkeel.repairPairs(input);
    assert.equal(out.length, 4);
    assert.equal(out[2].content[0], input[4].content[0]);
    assert.equal(out[2].content[1], input[2].content[0]);
    assert.equal(out[3], input[3]);
  });

  it('keeps unknown fields and source items on edited OpenAI messages', () => {
    // A repeat within one message: the later call goes and a note takes its place, so the
    // content becomes a list (the text, then the note).
    const keep = call('b');
    const dup = { role: 'assistant', content: 'again', name: 'bot', x_meta: { deep: [1] },
      tool_calls: [keep, call('a'), call('b', 'edit_file', '{"path":"x.py"}')] };
    const input = [user('go'), dup, tool('b'), tool('a')];
    const out = h.assertRepairContract(input);
    const edited = out[1];
    assert.notEqual(edited, dup);
    assert.deepEqual(Object.keys(edited), ['role', 'content', 'name', 'x_meta', 'tool_calls']);
    assert.deepEqual(edited.content, [{ type: 'text', text: 'again' }, { type: 'text',
      text: '(tool call edit_file removed by ctxkeel: its id was already used; its arguments ' +
        'were: {"path":"x.py"})' }]);
    assert.equal(edited.name, 'bot');
    assert.equal(edited.x_meta, dup.x_meta);
    assert.deepEqual(edited.tool_calls, [keep, dup.tool_calls[1]]);
    assert.equal(edited.tool_calls[0], keep);
    assert.equal(edited.tool_calls[1], dup.tool_calls[1]);
    assert.equal(dup.tool_calls.length, 3, 'the source message was changed');
    assert.equal(dup.content, 'again', 'the source message was changed');
  });

  it('removes tool_calls when no call is left, and notes the removal', () => {
    const empty = { role: 'assistant', content: null, tool_calls: [call('', 'grep', '{"q":1}')],
      extra: 1 };
    const input = [user('go'), asst(call('a')), tool('a'), empty, user('ok')];
    const out = h.assertRepairContract(input);
    assert.equal(out[3].extra, 1);
    assert.equal('tool_calls' in out[3], false);
    assert.deepEqual(out[3].content, [{ type: 'text', text: '(tool call grep removed by ' +
      'ctxkeel: its id was empty; its arguments were: {"q":1})' }]);
  });

  it('keeps unknown fields and blocks on edited Anthropic messages', () => {
    const again = text('again');
    const dup = { role: 'assistant', content: [again, use('a')], id: 'msg_1', usage: { n: 3 } };
    const input = [user('go'), aAsst(use('a')), aUser(result('a')), dup];
    const out = h.assertRepairContract(input);
    const edited = out[3];
    assert.deepEqual(Object.keys(edited), ['role', 'content', 'id', 'usage']);
    assert.equal(edited.usage, dup.usage);
    assert.deepEqual(edited.content, [again, { type: 'text', text: '(tool call bash removed by ' +
      'ctxkeel: its id was already used; its arguments were: {"cmd":"ls"})' }]);
    assert.equal(edited.content[0], again);
  });

  it('keeps is_error and unknown block fields on moved results', () => {
    const bad = { type: 'tool_result', tool_use_id: 'a', content: [text('boom')], is_error: true,
      cache_control: { type: 'ephemeral' } };
    const input = [user('go'), aAsst(use('a')), aUser(text('hm')), aAsst(text('k')), aUser(bad)];
    const out = h.assertRepairContract(input);
    assert.equal(out[2].content[0], bad);
  });

  it('never mutates frozen input', () => {
    const deepFreeze = (o) => {
      if (o && typeof o === 'object') {
        Object.values(o).forEach(deepFreeze);
        Object.freeze(o);
      }
      return o;
    };
    const input = deepFreeze([user('go'), asst(call('a'), call('a')), tool('x'), user('ok')]);
    const out = h.assertRepairContract(input);
    assert.equal(Object.isFrozen(out), false);
  });

  it('keeps the very blocks of a long list, past those a value names without a table', () => {
    // values.c holds a path of items below 64 in the value itself; later items take a node.
    const blocks = [];
    for (let k = 0; k < 70; k++) blocks.push(text('block ' + k));
    blocks.push(result('nobody', 'stray'), { ...text('after'), cache_control: { type: 'ephemeral' } });
    const input = [user('go'), aAsst(text('ok')), aUser(...blocks)];
    assert.deepEqual(ctxkeel.checkPairs(input).map((v) => [v.kind, v.part]), [['orphan_result', 70]]);
    const out = h.assertRepairContract(input);
    const kept = blocks.filter((_, k) => k !== 70);
    assert.equal(out[2].content.length, kept.length);
    out[2].content.forEach((b, k) => assert.equal(b, kept[k], `content[${k}]`));
  });

  it('keeps symbol keys and an own __proto__ key as plain data on copies', () => {
    const sym = Symbol('meta');
    const dup = JSON.parse('{"role":"assistant","content":"x","__proto__":{"evil":1}}');
    dup.tool_calls = [call('a')];
    dup[sym] = 'tagged';
    const input = [user('go'), asst(call('a')), tool('a'), dup, user('ok')];
    // structuredClone drops symbol keys, so this case checks the contract by hand.
    const out = ctxkeel.repairPairs(input);
    assert.deepEqual(ctxkeel.checkPairs(out), []);
    assert.equal(dup.tool_calls.length, 1);
    assert.equal(dup[sym], 'tagged');
    assert.equal(Object.getPrototypeOf(dup), Object.prototype);
    assert.equal(out[3][sym], 'tagged');
    assert.equal(Object.getPrototypeOf(out[3]), Object.prototype);
    assert.deepEqual(Object.getOwnPropertyDescriptor(out[3], '__proto__').value, { evil: 1 });
  });
});

describe('format detection', () => {
  it('detects Anthropic from its blocks and OpenAI otherwise', () => {
    const anthropic = [user('go'), aAsst(use('a'))];
    const openai = [user('go'), asst(call('a'))];
    assert.equal(ctxkeel.repairPairs(anthropic)[2].role, 'user');
    assert.equal(ctxkeel.repairPairs(openai)[2].role, 'tool');
    // No tool shapes at all: nothing to repair in either format.
    const plain = [sys('s'), user('a'), { role: 'assistant', content: 'b' }];
    assert.deepEqual(ctxkeel.checkPairs(plain), []);
    assert.deepEqual(ctxkeel.checkPairs(plain, { format: 'anthropic' }), []);
  });

  it('rejects a list that mixes the formats, naming the message', () => {
    const mixed = [user('go'), asst(call('a')), tool('a'), aAsst(use('b'))];
    for (const fn of [ctxkeel.checkPairs, ctxkeel.repairPairs]) {
      assert.throws(() => fn(mixed), (err) => {
        assert.equal(err.code, 'CK_EFORMAT');
        assert.equal(err.index, 3);
        assert.match(err.message, /^ctxkeel: messages\[3\] \(anthropic, not openai\): a message of another format/);
        assert.ok(err instanceof ctxkeel.InputError);
        return true;
      });
    }
  });

  it('rejects shapes of the other format when one is requested', () => {
    assert.throws(() => ctxkeel.checkPairs([user('go'), asst(call('a'))], { format: 'anthropic' }),
      { code: 'CK_EFORMAT', index: 1 });
    assert.throws(() => ctxkeel.repairPairs([user('go'), aAsst(use('a'))], { format: 'openai' }),
      { code: 'CK_EFORMAT', index: 1 });
  });
});
