'use strict';

// The evidence store from Node: the tool-time offload gate, exact paging, search, hostile ids,
// the read_evidence tool and its handler.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const h = require('./helpers.js');
const s = require('./sessions.js');

const { ctxkeel } = h;
const { Compactor } = ctxkeel;

after(s.removeStores);

function compactor(options = {}) {
  return new Compactor({ contextWindow: 100000, storeDir: s.tmpStore(), ...options });
}

/** Reads a piece of evidence page by page until "" and returns the pages. */
function readAll(c, ref, limit) {
  const pages = [];
  for (let offset = 0; ; offset += limit) {
    const page = c.readEvidence(ref, { offset, limit });
    if (page === '') return pages;
    pages.push(page);
    assert.ok(pages.length < 100000, 'paging does not end');
  }
}

/** Every file below `dir`, as paths relative to it. */
function walk(dir, base = dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    return e.isDirectory() ? walk(full, base) : [path.relative(base, full)];
  });
}

const numbered = (n, width = 30) =>
  Array.from({ length: n }, (_, i) => `line ${i + 1}: ${'x'.repeat(width)}`).join('\n') + '\n';

describe('offload(): the tool-time gate', () => {
  it('stores a large OpenAI tool result and returns a new message with a placeholder', () => {
    const c = compactor();
    const big = numbered(1000);
    const message = { ...h.tool('call_big', big), name: 'bash', extra: { kept: true } };
    const before = structuredClone(message);
    const out = c.offload(message);
    assert.deepEqual(message, before, 'offload() mutated its input');
    assert.notEqual(out, message);
    assert.equal(out.role, 'tool');
    assert.equal(out.tool_call_id, 'call_big');
    assert.equal(out.extra, message.extra, 'an unknown field was not kept as is');
    assert.ok(out.content.startsWith(s.PLACEHOLDER));
    assert.match(out.content, /call_big/);
    assert.match(out.content, /1000 lines/);
    assert.match(out.content, new RegExp(`${Buffer.byteLength(big)} bytes`));
    assert.match(out.content, /read_evidence/);
    assert.ok(out.content.includes('line 1: '));
    assert.ok(!out.content.includes('line 500: '), 'the preview is not bounded in lines');
    assert.ok(Buffer.byteLength(out.content) < 4096, 'the placeholder is too large');
    assert.equal(readAll(c, 'call_big', 97).join(''), big);
    // The path the placeholder states reads the same text.
    const where = /full text: (.*)\n/.exec(out.content)[1];
    assert.ok(fs.existsSync(where));
    assert.equal(c.readEvidence(where, { limit: 5000 }), big);
  });

  it('returns the same object below the threshold and for a placeholder', () => {
    const c = compactor({ toolOffloadThreshold: 500 });
    const small = h.tool('small', 'y'.repeat(500));
    assert.equal(c.offload(small), small);
    const user = h.user('z'.repeat(5000));
    assert.equal(c.offload(user), user, 'a user message is not a tool output');
    const out = c.offload(h.tool('big', 'y'.repeat(501)));
    assert.ok(out.content.startsWith(s.PLACEHOLDER));
    assert.equal(c.offload(out), out, 'a placeholder was offloaded again');
  });

  it('caps the preview in bytes: one 50 KB line never comes back whole', () => {
    const c = compactor();
    const line = 'A'.repeat(50 * 1024);
    for (const content of [line, `${line}\n`, `head\n${line}\ntail\n`]) {
      const id = `one_line_${content.length}`;
      const out = c.offload(h.tool(id, content));
      assert.ok(Buffer.byteLength(out.content) < 4096, `${Buffer.byteLength(out.content)} bytes`);
      assert.ok(!out.content.includes(line));
      assert.equal(c.readEvidence(id), content);
    }
  });

  it('offloads Anthropic tool_result blocks and keeps the other blocks as they are', () => {
    const c = compactor();
    const note = h.text('see the results');
    const small = h.result('a_small', 'fine');
    const large = { ...h.result('a_large', [h.text(numbered(400)), h.text('tail')]), cache: 1 };
    const message = h.aUser(small, large, note);
    const before = structuredClone(message);
    const out = c.offload(message);
    assert.deepEqual(message, before);
    assert.notEqual(out, message);
    assert.equal(out.content[0], small);
    assert.equal(out.content[2], note);
    assert.notEqual(out.content[1], large);
    assert.equal(out.content[1].type, 'tool_result');
    assert.equal(out.content[1].tool_use_id, 'a_large');
    assert.equal(out.content[1].cache, 1);
    assert.ok(out.content[1].content.startsWith(s.PLACEHOLDER));
    assert.equal(c.readEvidence('a_large', { limit: 1000 }), `${numbered(400)}\ntail`);
    assert.deepEqual(ctxkeel.checkPairs([h.aAsst(h.use('a_small'), h.use('a_large')), out]), []);
  });

  it('rejects what is not a message', () => {
    const c = compactor();
    assert.throws(() => c.offload('text'),
      { name: 'TypeError', message: /message must be an object/ });
    assert.throws(() => c.offload([]), TypeError);
    assert.throws(() => c.offload({ content: 'x' }),
      { code: 'CK_EMISSING', where: 'message.role' });
  });
});

describe('readEvidence() and searchEvidence()', () => {
  const corpus = h.loadCorpus();
  for (const [name, transcript] of corpus) {
    it(`pages exactly through every tool output of ${name}`, () => {
      const c = compactor({ toolOffloadThreshold: 1 });
      const outputs = transcript.filter((m) => m.role === 'tool' &&
        Buffer.byteLength(m.content) > 1);
      assert.ok(outputs.length > 0);
      for (const m of outputs) {
        const out = c.offload(m);
        assert.ok(out.content.startsWith(s.PLACEHOLDER), m.tool_call_id);
        for (const limit of [1, 7, 200]) {
          assert.equal(readAll(c, m.tool_call_id, limit).join(''), m.content,
            `${m.tool_call_id}, pages of ${limit}`);
        }
      }
    });
  }
  if (corpus.length === 0) {
    it('pages through the corpus', { skip: 'shared/corpus is absent' }, () => {});
  }

  it('counts lines from 0 and returns "" past the end', () => {
    const c = compactor({ toolOffloadThreshold: 5 });
    c.offload(h.tool('five', 'a\nb\nc\nd\ne'));
    assert.equal(c.readEvidence('five'), 'a\nb\nc\nd\ne');
    assert.equal(c.readEvidence('five', { offset: 1, limit: 2 }), 'b\nc\n');
    assert.equal(c.readEvidence('five', { offset: 4 }), 'e');
    assert.equal(c.readEvidence('five', { offset: 5 }), '');
    assert.equal(c.readEvidence('five', { offset: 1e9 }), '');
  });

  it('reads evidence that a compaction offloaded, by the ref its placeholder names', async () => {
    const history = s.syntheticHistory(30);
    const window = Math.ceil(ctxkeel.estimateTokens(history) / 0.65);
    const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore() });
    const result = await c.compact(history);
    assert.equal(result.tier, 'warn');
    assert.ok(result.record.offloaded.length > 0);
    for (const o of result.record.offloaded) {
      const original = history.find((m) => m.tool_call_id === o.tool_call_id).content;
      assert.equal(readAll(c, o.tool_call_id, 50).join(''), original);
      const placeholder = result.messages.find((m) => m.tool_call_id === o.tool_call_id);
      assert.ok(placeholder.content.includes(`read_evidence(ref="${o.tool_call_id}"`));
      assert.equal(o.lines, original.split('\n').length);
    }
  });

  it('throws CK_EINVAL for an unknown ref', () => {
    const c = compactor();
    assert.throws(() => c.readEvidence('never-stored'),
      { name: 'InputError', code: 'CK_EINVAL', where: 'never-stored' });
    assert.throws(() => c.readEvidence('/etc/passwd'), { code: 'CK_EINVAL' });
    assert.throws(() => c.readEvidence('../../../etc/passwd'), { code: 'CK_EINVAL' });
    assert.throws(() => c.searchEvidence('never-stored', 'x'), { code: 'CK_EINVAL' });
  });

  it('checks its arguments', () => {
    const c = compactor();
    assert.throws(() => c.readEvidence(5), { name: 'TypeError', message: /ref must be a string/ });
    assert.throws(() => c.readEvidence('x', { offset: -1 }),
      { name: 'RangeError', message: /options\.offset/ });
    assert.throws(() => c.readEvidence('x', { limit: 0 }),
      { name: 'RangeError', message: /options\.limit/ });
    assert.throws(() => c.readEvidence('x', { limit: 1.5 }), RangeError);
    assert.throws(() => c.readEvidence('x', { offset: '1' }), TypeError);
    assert.throws(() => c.readEvidence('x', { page: 1 }), RangeError);
    assert.throws(() => c.searchEvidence(5, 'x'), TypeError);
    assert.throws(() => c.searchEvidence(null, /x/),
      { name: 'TypeError', message: /pattern must be a string/ });
    assert.throws(() => c.searchEvidence(null, 'a\0b'), RangeError);
  });

  it('finds matching lines with their numbers, in one output or the whole session', () => {
    const c = compactor({ toolOffloadThreshold: 10 });
    c.offload(h.tool('log_a', 'start\nError: E1001 disk full\nretry\nError: E1002 again\n'));
    c.offload(h.tool('log_b', 'ok\nall good\nwarning: Error: E2001 late\n'));
    assert.deepEqual(c.searchEvidence('log_a', 'E1[0-9]+'), [
      { ref: 'log_a', line: 2, text: 'Error: E1001 disk full' },
      { ref: 'log_a', line: 4, text: 'Error: E1002 again' },
    ]);
    const all = c.searchEvidence(null, '^(Error|warning): ');
    assert.deepEqual(all.map((hit) => [hit.ref, hit.line]), [['log_a', 2], ['log_a', 4],
      ['log_b', 3]]);
    assert.deepEqual(c.searchEvidence(undefined, 'nothing matches this'), []);
    assert.throws(() => c.searchEvidence(null, 'E(1'),
      { name: 'InputError', code: 'CK_EINVAL', where: 'pattern' });
  });
});

describe('hostile tool-call ids', () => {
  const IDS = ['../../x', 'a/b', 'a\u0000b', 'i'.repeat(10 * 1024), 'CaseId', 'caseid', 'caseId',
    '.', '..', '.hidden', 'a\\b', 'sp ace', 'ü-ñ-中', 'x~0000000000000000', '/abs/olute'];

  it('stay inside the store and never collide', () => {
    const base = s.tmpStore();
    const storeDir = path.join(base, 'store');
    const c = new Compactor({ contextWindow: 1000, storeDir, toolOffloadThreshold: 10,
      sessionId: '../../session' });
    IDS.forEach((id, k) => {
      const content = `evidence number ${k} for this id\n`.repeat(3);
      const out = c.offload(h.tool(id, content));
      assert.ok(out.content.startsWith(s.PLACEHOLDER), JSON.stringify(id.slice(0, 20)));
      const where = /full text: (.*)\n/.exec(out.content)[1];
      assert.ok(path.resolve(where).startsWith(storeDir + path.sep), where);
    });
    IDS.forEach((id, k) => {
      assert.equal(c.readEvidence(id), `evidence number ${k} for this id\n`.repeat(3),
        JSON.stringify(id.slice(0, 20)));
    });
    assert.deepEqual(fs.readdirSync(base), ['store'], 'something was written outside the store');
    const files = walk(storeDir);
    assert.equal(files.length, IDS.length);
    for (const f of files) {
      assert.ok(!f.split(path.sep).includes('..'));
      assert.ok(Buffer.byteLength(path.basename(f)) <= 255, 'a file name is too long');
      assert.equal(fs.statSync(path.join(storeDir, f)).mode & 0o777, 0o600);
    }
  });
});

describe('handleReadEvidence()', () => {
  const c = compactor({ toolOffloadThreshold: 10 });
  const text = numbered(500, 5);
  c.offload(h.tool('ev_1', text));

  it('answers an OpenAI tool call with a tool message', () => {
    const call = { id: 'call_r1', type: 'function', function: { name: 'read_evidence',
      arguments: JSON.stringify({ ref: 'ev_1', offset: 10, limit: 5 }) } };
    const out = c.handleReadEvidence(call);
    assert.deepEqual(Object.keys(out), ['role', 'tool_call_id', 'content']);
    assert.equal(out.role, 'tool');
    assert.equal(out.tool_call_id, 'call_r1');
    const page = c.readEvidence('ev_1', { offset: 10, limit: 5 });
    assert.ok(out.content.startsWith(page));
    assert.match(out.content.slice(page.length), /more lines follow.*offset 15/);
  });

  it('answers an Anthropic tool_use block with a tool_result block', () => {
    const block = { type: 'tool_use', id: 'toolu_1', name: 'read_evidence',
      input: { ref: 'ev_1', offset: 495 } };
    const out = c.handleReadEvidence(block);
    assert.deepEqual(out, { type: 'tool_result', tool_use_id: 'toolu_1',
      content: c.readEvidence('ev_1', { offset: 495 }) });
  });

  it('accepts defaults, numeric strings and arguments given as an object', () => {
    const all = c.handleReadEvidence({ id: 'c', function: { name: 'read_evidence',
      arguments: { ref: 'ev_1', offset: '0', limit: '1000' } } });
    assert.equal(all.content, text);
    const first = c.handleReadEvidence({ id: 'c', function: { name: 'read_evidence',
      arguments: '{"ref":"ev_1"}' } });
    assert.ok(first.content.startsWith(c.readEvidence('ev_1')));
  });

  const MISTAKES = [
    ['arguments that are not JSON', '{"ref": "ev_1", offset: 3', /not valid JSON/],
    ['arguments that are a list', '["ev_1"]', /must be a JSON object/],
    ['no ref', '{"offset": 3}', /"ref" is missing/],
    ['a negative offset', '{"ref": "ev_1", "offset": -3}', /"offset"/],
    ['a zero limit', '{"ref": "ev_1", "limit": 0}', /"limit"/],
    ['an unknown ref', '{"ref": "no_such_output"}', /no evidence named "no_such_output"/],
    ['an offset past the end', '{"ref": "ev_1", "offset": 9999}', /no lines from line 9999/],
  ];
  for (const [label, args, why] of MISTAKES) {
    it(`explains ${label} instead of throwing`, () => {
      const out = c.handleReadEvidence({ id: 'm', type: 'function',
        function: { name: 'read_evidence', arguments: args } });
      assert.equal(out.tool_call_id, 'm');
      assert.match(out.content, why);
      const block = c.handleReadEvidence({ type: 'tool_use', id: 'b', name: 'read_evidence',
        input: (() => { try { return JSON.parse(args); } catch { return args; } })() });
      assert.match(block.content, why);
      assert.equal(block.is_error, true);
    });
  }

  it('throws for calls that are not read_evidence calls, and when closed', () => {
    assert.throws(() => c.handleReadEvidence(null), TypeError);
    assert.throws(() => c.handleReadEvidence({ id: 'x' }), TypeError);
    assert.throws(() => c.handleReadEvidence({ id: 'x', function: { name: 'bash',
      arguments: '{}' } }), { name: 'RangeError', message: /not of "bash"/ });
    assert.throws(() => c.handleReadEvidence({ type: 'tool_use', name: 'read_evidence',
      input: {} }), { name: 'TypeError', message: /call\.id/ });
    const closed = compactor();
    closed.close();
    assert.throws(() => closed.handleReadEvidence({ id: 'x', function: { name: 'read_evidence',
      arguments: '{"ref":"a"}' } }), { code: 'CK_ECLOSED' });
  });
});

describe('readEvidenceTool()', () => {
  it('defines the tool for OpenAI (the default) and Anthropic tool lists', () => {
    const openai = ctxkeel.readEvidenceTool();
    assert.deepEqual(ctxkeel.readEvidenceTool('openai'), openai);
    assert.equal(openai.type, 'function');
    assert.equal(openai.function.name, 'read_evidence');
    assert.deepEqual(openai.function.parameters.required, ['ref']);
    assert.deepEqual(Object.keys(openai.function.parameters.properties),
      ['ref', 'offset', 'limit']);
    const anthropic = ctxkeel.readEvidenceTool('anthropic');
    assert.equal(anthropic.name, 'read_evidence');
    assert.deepEqual(anthropic.input_schema, openai.function.parameters);
    assert.notEqual(ctxkeel.readEvidenceTool(), openai, 'callers get their own copy');
  });

  it('rejects other formats', () => {
    assert.throws(() => ctxkeel.readEvidenceTool('auto'), RangeError);
    assert.throws(() => ctxkeel.readEvidenceTool(1), TypeError);
  });
});
