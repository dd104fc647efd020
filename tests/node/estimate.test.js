'use strict';

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers.js');
const sessions = require('./sessions.js');

const { ctxkeel, call, asst, tool, user, use, result, text, aAsst, aUser } = h;
const est = ctxkeel.estimateTokens;
const chars4 = (x) => est(x, { estimator: 'chars4' });
const bytes = (s) => Buffer.byteLength(s, 'utf8');
const ceil4 = (n) => Math.ceil(n / 4);

after(sessions.removeStores);

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

  // Exact o200k_base counts (js-tiktoken's): 'o200k' counts exactly, and so does the default
  // (it estimates only a single unbroken run of more than 64 KB).
  it('counts exactly as o200k_base does, by default and with "o200k"', () => {
    const cases = [
      ['hello world', 2], ['Hello, world!', 4], ['1234567890', 4], ['    return x;\n', 4],
      ['def main():\n    print("hi")\n', 8], ['{"role": "user", "content": "hi"}', 12],
      ['Traceback (most recent call last):', 8], ['你好，世界！', 4], ['日本語', 2], ['😀', 1],
      ['<|endoftext|>', 7], // special tokens are text
      ['\ufeff', 1],
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
      [' '.repeat(200), 2], ['='.repeat(1000), 16], ['ab'.repeat(500), 250],
    ];
    for (const [text, exact] of cases) {
      assert.equal(est(text), exact, text);
      assert.equal(est(text, { estimator: 'o200k' }), exact, text);
    }
  });

  it('counts exactly as cl100k_base does with "cl100k"', () => {
    const cl = (x) => est(x, { estimator: 'cl100k' });
    assert.equal(cl('getUserName'), 2); // cl100k does not cut words at a capital; o200k does
    assert.equal(est('getUserName'), 3);
    assert.equal(cl('你好，世界！'), 7);
    assert.equal(cl('😀'), 2);
    assert.equal(cl('='.repeat(1000)), 17);
    assert.equal(cl('ab'.repeat(500)), 500);
  });

  it('names its estimators as the core does, and refuses others', () => {
    for (const name of ['default', 'chars4', 'cl100k', 'o200k']) {
      assert.equal(typeof est('x y', { estimator: name }), 'number');
    }
    assert.throws(() => est('x', { estimator: 'o200k_base' }), {
      name: 'RangeError',
      message: /'default', 'chars4', 'cl100k' or 'o200k'/,
    });
    assert.throws(() => est('x', { estimator: 7 }), { name: 'TypeError' });
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

  it('counts ids, names and arguments with the default estimator', () => {
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
    // Items without a role that no dialect reads as messages are tool schemas.
    assert.notEqual(chars4([{ name: 'user', content: 'x' }]),
      chars4([{ role: 'user', content: 'x' }]));
  });

  it('counts LangChain dicts and Responses items as the messages they are', async () => {
    // Neither has a "role" on every item; both were once counted as tool schemas (their JSON).
    const lists = {
      langchain: [{ type: 'human', content: 'Fix the parser.' },
        { type: 'ai', content: '', tool_calls: [{ id: 'c1', name: 'bash', args: { cmd: 'ls' },
          type: 'tool_call' }] },
        { type: 'tool', tool_call_id: 'c1', name: 'bash', content: 'src tests' }],
      responses: [{ type: 'function_call', call_id: 'c1', name: 'bash', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'src tests' }],
    };
    for (const [format, list] of Object.entries(lists)) {
      const c = new ctxkeel.Compactor({ contextWindow: 100000, format, storeDir: sessions.tmpStore(),
        sessionId: 'est' });
      const r = await c.compact(list);
      c.close();
      assert.equal(est(list), r.tokensBefore, format);
      assert.notEqual(chars4(list), ceil4(bytes(JSON.stringify(list))), format);
    }
    // A Responses tool schema ({type: 'function', name}) stays a tool schema.
    const tools = [{ type: 'function', name: 'bash', parameters: { type: 'object' } }];
    assert.equal(chars4(tools), ceil4(bytes(JSON.stringify(tools))));
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
