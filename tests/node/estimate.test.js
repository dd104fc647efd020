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
    assert.ok(est('x'.repeat(4000)) > est('x'.repeat(40)));
    assert.equal(typeof est('abc'), 'number');
    assert.ok(Number.isInteger(est('some text')));
  });

  // Exact o200k_base counts (checked with gpt-tokenizer) that the default estimator reproduces:
  // frequent pieces come from its exact table, digit groups and short pieces follow rules.
  it('matches exact o200k_base counts on common text', () => {
    assert.equal(est('hello world'), 2);
    assert.equal(est('Hello, world!'), 4);
    assert.equal(est('1234567890'), 4); // 123|456|789|0
    assert.equal(est('    return x;\n'), 4);
    assert.equal(est('def main():\n    print("hi")\n'), 8);
    assert.equal(est('{"role": "user", "content": "hi"}'), 12);
    assert.equal(est('Traceback (most recent call last):'), 8);
    assert.equal(est('你好，世界！'), 4);
    assert.equal(est('日本語'), 2);
    assert.equal(est('😀'), 1);
  });

  // Longer text mixes exact pieces with modelled ones: within 10% of the exact count.
  it('stays close to exact o200k_base counts on longer text', () => {
    const cases = [
      ["Compaction keeps the agent's working set small: old tool outputs move to an evidence " +
        'store, and the oldest turns are folded into a checkpoint that records what the user ' +
        'asked for, what was done, what was decided, what failed, and what comes next. Each ' +
        'tier is chosen from the estimated size of the request, so the estimate has to be ' +
        'close to what the provider will count.', 78],
      ["def parse(line):\n    key, _, value = line.partition('=')\n    if not key:\n" +
        "        raise ValueError(f'bad line: {line!r}')\n    return key.strip(), value.strip()\n",
      41],
      ['FAILED tests/test_upload.py::test_resume - AssertionError: expected 200, got 409\n', 20],
      ['上下文压缩不是删历史，而是按预算渐进地收缩。', 17],
      ['{"command":"grep -rn \\"TODO\\" src/ | head -20"}', 16],
    ];
    for (const [text, exact] of cases) {
      const n = est(text);
      assert.ok(Math.abs(n - exact) <= Math.max(1, 0.1 * exact), `${n} vs ${exact}: ${text}`);
    }
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
    const s = 'abcdefghijklmnop';
    assert.equal(est(user(s)), est(s) + 4);
    assert.equal(est(user('hello world')), 2 + 4);
    assert.equal(est({ role: 'user' }), 4);
    assert.equal(chars4({ role: 'user' }), 0);
  });

  it('counts ids, names and arguments with the calibrated estimator', () => {
    // Exact o200k_base counts: "call_1" 3, "bash" 1, '{"a":1}' 5, "done" 1.
    assert.equal(est(asst(call('call_1', 'bash', '{"a":1}'))), 3 + 1 + 5 + 4);
    assert.equal(est(tool('call_1', 'done')), 3 + 1 + 4);
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
