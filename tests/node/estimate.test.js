'use strict';

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers.js');

const { ctxkeel, call, asst, tool, user, use, result, text, aAsst, aUser } = h;
const est = ctxkeel.estimateTokens;
const chars4 = (x) => est(x, { estimator: 'chars4' });
const bytes = (s) => Buffer.byteLength(s, 'utf8');
const ceil4 = (n) => Math.ceil(n / 4);

describe('estimateTokens on strings', () => {
  it('counts chars4 as UTF-8 bytes / 4, rounded up', () => {
    assert.equal(chars4(''), 0);
    assert.equal(chars4('abcd'), 1);
    assert.equal(chars4('abcde'), 2);
    assert.equal(chars4('日本語'), ceil4(9));
    assert.equal(chars4('😀'), 1);
    assert.equal(chars4('x'.repeat(4001)), 1001);
  });

  it('gives a positive default estimate for text and 0 for the empty string', () => {
    assert.equal(est(''), 0);
    assert.equal(est('', { estimator: 'default' }), 0);
    assert.ok(est('hello world') > 0);
    assert.ok(est('x'.repeat(4000)) > est('x'.repeat(40)));
    assert.equal(typeof est('abc'), 'number');
    assert.ok(Number.isInteger(est('some text')));
  });
});

describe('estimateTokens on messages', () => {
  it('counts content, ids, names, arguments and tool_call_id in chars4', () => {
    const m = {
      role: 'assistant',
      content: 'I will look.',
      tool_calls: [call('call_1', 'read_file', '{"path":"/etc/hosts"}'), call('c2', 'ls', '')],
    };
    const expected = ceil4(bytes('I will look.') + bytes('call_1') + bytes('read_file') +
      bytes('{"path":"/etc/hosts"}') + bytes('c2') + bytes('ls'));
    assert.equal(chars4(m), expected);
    const t = tool('call_1', 'résumé of the file');
    assert.equal(chars4(t), ceil4(bytes('call_1') + bytes('résumé of the file')));
    assert.equal(chars4(user('abcdefgh')), 2);
    assert.equal(chars4({ role: 'user', content: null }), 0);
  });

  it('counts non-string arguments and tool_use input as their JSON text', () => {
    const args = { path: '/tmp/a', n: [1, 2] };
    const asObject = asst({ id: 'a', type: 'function', function: { name: 'f', arguments: args } });
    const asString = asst(call('a', 'f', JSON.stringify(args)));
    assert.equal(chars4(asObject), chars4(asString));
    const block = aAsst(use('id1', 'grep', { q: 'x' }));
    assert.equal(chars4(block), ceil4(bytes('id1') + bytes('grep') + bytes('{"q":"x"}')));
  });

  it('counts text items, tool results and images', () => {
    const m = aUser(result('t1', [text('line one'), text('two')]), text('hello'), 'bare');
    assert.equal(chars4(m), ceil4(bytes('t1') + bytes('line one\ntwo') + 5 + 4));
    const img = { role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] };
    assert.equal(chars4(img), 765);
    assert.equal(est(img), 765 + 4);
  });

  it('adds 4 per message in the default estimator', () => {
    const s = 'abcdefghijklmnop'; // 16 bytes: no rounding
    assert.equal(est(user(s)), est(s) + 4);
    assert.equal(est({ role: 'user' }), 4);
    assert.equal(chars4({ role: 'user' }), 0);
  });
});

describe('estimateTokens on lists', () => {
  it('divides the whole list once in chars4', () => {
    const list = [user('abc'), user('abcde')];
    assert.equal(chars4(list), ceil4(8));
    assert.equal(chars4([]), 0);
  });

  it('adds 4 per message and 3 per list in the default estimator', () => {
    const a = user('abcdefgh');
    const b = { role: 'assistant', content: 'ijklmnopqrstuvwx' };
    assert.equal(est([a, b]), est(a) + est(b) + 3);
    assert.equal(est([a]), est('abcdefgh') + 4 + 3);
    assert.equal(est([]), 0);
  });

  it('counts a tool-schema list by its JSON text', () => {
    const tools = [
      { type: 'function', function: { name: 'bash', description: 'run a command',
        parameters: { type: 'object', properties: { cmd: { type: 'string' } } } } },
      { name: 'read', input_schema: { type: 'object' } },
    ];
    assert.equal(chars4(tools), ceil4(bytes(JSON.stringify(tools))));
    assert.ok(est(tools) > 0);
    // A list is a message list only when its first item has a role.
    assert.notEqual(chars4([{ name: 'user', content: 'x' }]),
      chars4([{ role: 'user', content: 'x' }]));
  });

  it('reads Anthropic and OpenAI lists alike', () => {
    const openai = [user('go'), asst(call('a')), tool('a', 'out')];
    const anthropic = [
      user('go'),
      aAsst(use('a', 'bash', { cmd: 'ls' })),
      aUser(result('a', 'out')),
    ];
    assert.equal(chars4(openai), chars4(anthropic));
  });
});
