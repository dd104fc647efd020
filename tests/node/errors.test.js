'use strict';

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const h = require('./helpers.js');

const { ctxkeel, call, asst, tool, user, use, text, aAsst, aUser } = h;
const addonPath = path.join(h.repoRoot, 'build', 'Release', 'ctxkeel.node');

// Each bad input: the list, the code, the message index and the place the error must name.
const BAD = [
  ['a message that is a number', [user('go'), 5], 'CK_ETYPE', 1, 'messages[1]'],
  ['a message that is null', [null], 'CK_ETYPE', 0, 'messages[0]'],
  ['a message that is an array', [[user('go')]], 'CK_ETYPE', 0, 'messages[0]'],
  ['a missing role', [{ content: 'x' }], 'CK_EMISSING', 0, 'messages[0].role'],
  ['an undefined role', [{ role: undefined, content: 'x' }], 'CK_EMISSING', 0, 'messages[0].role'],
  ['a role that is not a string', [{ role: 7, content: 'x' }], 'CK_ETYPE', 0, 'messages[0].role'],
  ['a role that is null', [{ role: null }], 'CK_ETYPE', 0, 'messages[0].role'],
  ['content of the wrong type', [user('a'), { role: 'user', content: 5 }], 'CK_ETYPE', 1,
    'messages[1].content', 'expected a string, a list or null'],
  ['content that is an object', [{ role: 'user', content: { text: 'x' } }], 'CK_ETYPE', 0,
    'messages[0].content'],
  ['a content item that is not an object', [{ role: 'user', content: [text('a'), 5] }],
    'CK_ETYPE', 0, 'messages[0].content[1]', 'expected an object'],
  ['a content item without type', [{ role: 'user', content: [{ text: 'a' }] }], 'CK_EMISSING',
    0, 'messages[0].content[0].type'],
  ['a content item with a non-string type', [{ role: 'user', content: [{ type: 1 }] }],
    'CK_ETYPE', 0, 'messages[0].content[0].type'],
  ['a text item with non-string text', [user('a'), { role: 'user', content: [text('a'),
    { type: 'text', text: 5 }] }], 'CK_ETYPE', 1, 'messages[1].content[1].text',
    'expected a string'],
  ['a text item without text', [{ role: 'user', content: [{ type: 'text' }] }], 'CK_EMISSING',
    0, 'messages[0].content[0].text'],
  ['a tool message without tool_call_id', [user('a'), asst(call('a')),
    { role: 'tool', content: 'x' }], 'CK_EMISSING', 2, 'messages[2].tool_call_id',
    'required field is missing'],
  ['a tool message with a numeric tool_call_id', [{ role: 'tool', tool_call_id: 3, content: '' }],
    'CK_ETYPE', 0, 'messages[0].tool_call_id'],
  ['a tool message with numeric content', [{ role: 'tool', tool_call_id: 'a', content: 3 }],
    'CK_ETYPE', 0, 'messages[0].content', 'expected a string or a list'],
  ['a tool message with a bad text item', [{ role: 'tool', tool_call_id: 'a',
    content: [text('x'), { type: 'text', text: {} }] }], 'CK_ETYPE', 0,
    'messages[0].content[1].text'],
  ['tool_calls that is not a list', [{ role: 'assistant', content: '', tool_calls: {} }],
    'CK_ETYPE', 0, 'messages[0].tool_calls', 'expected a list'],
  ['a tool call that is not an object', [{ role: 'assistant', tool_calls: [call('a'), 'b'] }],
    'CK_ETYPE', 0, 'messages[0].tool_calls[1]'],
  ['a tool call without id', [user('q'), { role: 'assistant', tool_calls: [
    { type: 'function', function: { name: 'f', arguments: '{}' } }] }], 'CK_EMISSING', 1,
    'messages[1].tool_calls[0].id'],
  ['a tool call with a numeric id', [{ role: 'assistant', tool_calls: [
    { id: 1, function: { name: 'f' } }] }], 'CK_ETYPE', 0, 'messages[0].tool_calls[0].id'],
  ['a tool call without function', [{ role: 'assistant', tool_calls: [{ id: 'a' }] }],
    'CK_EMISSING', 0, 'messages[0].tool_calls[0].function'],
  ['a tool call whose function is a string', [{ role: 'assistant', tool_calls: [
    { id: 'a', function: 'f' }] }], 'CK_ETYPE', 0, 'messages[0].tool_calls[0].function'],
  ['a tool call without function.name', [{ role: 'assistant', tool_calls: [call('a'),
    { id: 'b', function: { arguments: '{}' } }] }], 'CK_EMISSING', 0,
    'messages[0].tool_calls[1].function.name'],
  ['a tool call with a numeric function.name', [{ role: 'assistant', tool_calls: [
    { id: 'b', function: { name: 5 } }] }], 'CK_ETYPE', 0,
    'messages[0].tool_calls[0].function.name'],
  ['a tool_use block without id', [user('q'), aAsst({ type: 'tool_use', name: 'f', input: {} })],
    'CK_EMISSING', 1, 'messages[1].content[0].id'],
  ['a tool_use block without name', [aAsst({ type: 'tool_use', id: 'a', input: {} })],
    'CK_EMISSING', 0, 'messages[0].content[0].name'],
  ['a tool_result block without tool_use_id', [aUser({ type: 'tool_result', content: 'x' })],
    'CK_EMISSING', 0, 'messages[0].content[0].tool_use_id'],
  ['a tool_result block with numeric content', [aUser(text('a'),
    { type: 'tool_result', tool_use_id: 'a', content: 9 })], 'CK_ETYPE', 0,
    'messages[0].content[1].content'],
  ['a tool_result block with a bad text item', [aUser({ type: 'tool_result', tool_use_id: 'a',
    content: [text('ok'), { type: 'text', text: false }] })], 'CK_ETYPE', 0,
    'messages[0].content[0].content[1].text'],
];

describe('bad messages', () => {
  for (const [name, messages, code, index, where, detail] of BAD) {
    it(`rejects ${name}`, () => {
      const check = (err) => {
        assert.equal(err.code, code);
        assert.equal(err.index, index);
        assert.equal(err.where, where);
        assert.ok(err.message.startsWith(`ctxkeel: ${where}: `), err.message);
        if (detail) assert.equal(err.message, `ctxkeel: ${where}: ${detail}`);
        assert.ok(err instanceof ctxkeel.InputError);
        assert.ok(err instanceof ctxkeel.Error);
        assert.ok(err instanceof Error);
        assert.equal(err.name, 'InputError');
        return true;
      };
      assert.throws(() => ctxkeel.checkPairs(messages), { code });
      assert.throws(() => ctxkeel.checkPairs(messages), check);
      assert.throws(() => ctxkeel.repairPairs(messages), check);
      // estimateTokens takes a list whose first item has no role for a tool-schema list.
      if (messages[0] && messages[0].role !== undefined) {
        assert.throws(() => ctxkeel.estimateTokens(messages), check);
      }
    });
  }

  it('names a lone message as "message" in estimateTokens', () => {
    assert.throws(() => ctxkeel.estimateTokens({ role: 'user', content: 5 }), (err) => {
      assert.equal(err.code, 'CK_ETYPE');
      assert.equal(err.where, 'message.content');
      assert.equal(err.index, undefined);
      assert.equal(err.message, 'ctxkeel: message.content: expected a string, a list or null');
      return true;
    });
    assert.throws(() => ctxkeel.estimateTokens({ content: 'x' }), { code: 'CK_EMISSING',
      where: 'message.role' });
  });

  it('lets an exception from a getter through unchanged', () => {
    const boom = new Error('getter failed');
    const msg = { role: 'user', get content() { throw boom; } };
    assert.throws(() => ctxkeel.checkPairs([user('a'), msg]), (err) => err === boom);
    assert.throws(() => ctxkeel.estimateTokens(msg), (err) => err === boom);
  });

  it('lets JSON.stringify errors through for arguments and inputs', () => {
    const cyclic = {};
    cyclic.self = cyclic;
    assert.throws(() => ctxkeel.checkPairs([aAsst(use('a', 'f', cyclic))]), TypeError);
    const big = [asst({ id: 'a', function: { name: 'f', arguments: { n: 1n } } })];
    assert.throws(() => ctxkeel.repairPairs(big), TypeError);
  });

  it('reads odd but valid shapes without error', () => {
    const messages = [
      { role: 'system', content: null },
      { role: 'user' },
      { role: 'user', content: ['bare string item', { type: 'image_url', image_url: {} }] },
      { role: 'assistant', content: [{ type: 'refusal', refusal: 'no' }], tool_calls: null },
      { role: 'assistant', content: '', tool_calls: [{ id: 'a', function: { name: 'f' } }] },
      { role: 'tool', tool_call_id: 'a', content: null },
      { role: 'critic', content: 'other roles pass through' },
      { role: 'user', content: 'text with \u0000 NUL and a lone surrogate \ud800' },
    ];
    assert.deepEqual(ctxkeel.checkPairs(messages), []);
    const out = ctxkeel.repairPairs(messages);
    out.forEach((m, i) => assert.equal(m, messages[i]));
    const anthropic = [
      { role: 'user', content: [{ type: 'image', source: {} }, { type: 'document' }] },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: 's' },
        { type: 'redacted_thinking', data: 'x' }, { type: 'tool_use', id: 'a', name: 'f' }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a' }] },
    ];
    assert.deepEqual(ctxkeel.checkPairs(anthropic, { format: 'anthropic' }), []);
    assert.deepEqual(ctxkeel.checkPairs(anthropic), []);
  });
});

describe('argument types', () => {
  const notArrays = [undefined, null, 5, 'messages', { length: 0 }];
  for (const bad of notArrays) {
    it(`throws TypeError for messages = ${String(bad)}`, () => {
      for (const fn of [ctxkeel.checkPairs, ctxkeel.repairPairs]) {
        assert.throws(() => fn(bad), (err) => {
          assert.ok(err instanceof TypeError);
          assert.equal(err.code, 'ERR_INVALID_ARG_TYPE');
          assert.match(err.message, /^ctxkeel: messages must be an array, not /);
          return true;
        });
      }
    });
  }

  it('checks options in index.js', () => {
    assert.deepEqual(ctxkeel.checkPairs([user('x')], null), []);
    assert.equal(ctxkeel.estimateTokens('abcd', {}), ctxkeel.estimateTokens('abcd'));
    assert.throws(() => ctxkeel.checkPairs([], 5), { name: 'TypeError', message: /options/ });
    assert.throws(() => ctxkeel.checkPairs([], []), { name: 'TypeError', message: /options/ });
    assert.throws(() => ctxkeel.checkPairs([], { format: 1 }),
      { name: 'TypeError', message: /options\.format/ });
    assert.throws(() => ctxkeel.repairPairs([], { format: 'xml' }),
      { name: 'RangeError', code: 'ERR_INVALID_ARG_VALUE',
        message: /'auto', 'openai', 'anthropic', 'responses', 'gemini', 'ai-sdk' or 'langchain'/ });
    assert.throws(() => ctxkeel.estimateTokens('x', { estimator: 'bpe' }),
      { name: 'RangeError', message: /options\.estimator/ });
    assert.throws(() => ctxkeel.estimateTokens(5),
      { name: 'TypeError', message: /^ctxkeel: x must be/ });
    assert.throws(() => ctxkeel.estimateTokens(null), TypeError);
    assert.throws(() => ctxkeel.parseAnchors(null),
      { name: 'TypeError', message: /text must be a string/ });
    assert.throws(() => ctxkeel.mergeAnchors(5, {}),
      { name: 'TypeError', message: /^ctxkeel: old / });
    assert.throws(() => ctxkeel.mergeAnchors({}, []),
      { name: 'TypeError', message: /^ctxkeel: new / });
  });

  it('checks argument types in C too (the addon loaded directly)', () => {
    const addon = require(addonPath);
    assert.throws(() => addon.checkPairs(5), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE',
      message: 'ctxkeel: messages must be an array, not a number' });
    assert.throws(() => addon.repairPairs(), { name: 'TypeError', message: /not undefined/ });
    assert.throws(() => addon.checkPairs([], 'xml'), { name: 'RangeError',
      code: 'ERR_INVALID_ARG_VALUE',
      message: /options\.format must be 'auto', 'openai', 'anthropic', 'responses', 'gemini', 'ai-sdk' or 'langchain'/ });
    assert.throws(() => addon.checkPairs([], 3), { name: 'TypeError', message: /options\.format/ });
    assert.throws(() => addon.estimateTokens(true), { name: 'TypeError', message: /x must be/ });
    assert.throws(() => addon.estimateTokens('x', 'bpe'), { name: 'RangeError' });
    assert.throws(() => addon.parseAnchors(1), { name: 'TypeError', message: /text must be/ });
    assert.throws(() => addon.mergeAnchors('a', null), { name: 'TypeError' });
    assert.throws(() => addon._setErrorClasses(1, 2), TypeError);
    assert.equal(addon.estimateTokens('abcd', 'chars4'), 1);
  });

  it('throws plain Errors with a code when no error classes are registered', () => {
    // A fresh process that loads only the addon, so index.js never registers its classes.
    const script = `
      const addon = require(${JSON.stringify(addonPath)});
      try { addon.checkPairs([{ role: 5 }]); } catch (err) {
        console.log(JSON.stringify([err.constructor.name, err.code, err.where, err.message]));
      }`;
    const out = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' });
    assert.deepEqual(JSON.parse(out), ['Error', 'CK_ETYPE', 'messages[0].role',
      'ctxkeel: messages[0].role: expected a string']);
  });
});

describe('statusCodes', () => {
  const EXPECTED_TEXT = {
    CK_OK: 'success',
    CK_ENOMEM: 'out of memory',
    CK_ETYPE: 'value has the wrong type',
    CK_EMISSING: 'required field is missing',
    CK_EFORMAT: 'messages do not match the message format',
    CK_ECONFLICT: 'object was changed by another writer',
    CK_EOVERFLOW: 'the pinned messages alone do not fit the context window',
  };

  it('lists every code of CK_STATUS_LIST, 0 down to -17, in order', () => {
    const entries = Object.entries(ctxkeel.statusCodes);
    assert.equal(entries.length, 18);
    assert.deepEqual(entries.slice(-3).map(([name]) => name),
      ['CK_ESTATE', 'CK_ECONFLICT', 'CK_EOVERFLOW']);
    entries.forEach(([name, entry], i) => {
      assert.match(name, /^CK_[A-Z0-9]+$/);
      assert.deepEqual(Object.keys(entry), ['code', 'text']);
      assert.equal(entry.code, i === 0 ? 0 : -i, `${name} has code ${entry.code}`);
      assert.equal(typeof entry.text, 'string');
      assert.ok(entry.text.length > 0);
      if (EXPECTED_TEXT[name]) assert.equal(entry.text, EXPECTED_TEXT[name]);
      assert.ok(Object.isFrozen(entry));
    });
    assert.ok(Object.isFrozen(ctxkeel.statusCodes));
  });

  it('gives every thrown code an entry', () => {
    const thrown = new Set();
    for (const [, messages] of BAD) {
      try {
        ctxkeel.checkPairs(messages);
      } catch (err) {
        thrown.add(err.code);
      }
    }
    try {
      ctxkeel.checkPairs([asst(call('a')), tool('a'), aAsst(use('b'))]);
    } catch (err) {
      thrown.add(err.code);
    }
    assert.deepEqual([...thrown].sort(), ['CK_EFORMAT', 'CK_EMISSING', 'CK_ETYPE']);
    for (const code of thrown) assert.ok(code in ctxkeel.statusCodes, code);
  });

  it('exports the version of the core', () => {
    assert.match(ctxkeel.version, /^\d+\.\d+\.\d+$/);
    assert.equal(ctxkeel.version, require(path.join(h.repoRoot, 'package.json')).version);
  });
});
