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

  it('throws CK_EINVAL for an unknown ref', async () => {
    const c = compactor();
    assert.throws(() => c.readEvidence('never-stored'),
      { name: 'InputError', code: 'CK_EINVAL', where: 'never-stored' });
    assert.throws(() => c.readEvidence('/etc/passwd'), { code: 'CK_EINVAL' });
    assert.throws(() => c.readEvidence('../../../etc/passwd'), { code: 'CK_EINVAL' });
    await assert.rejects(c.searchEvidence('never-stored', 'x'), { code: 'CK_EINVAL' });
  });

  it('checks its arguments', async () => {
    const c = compactor();
    assert.throws(() => c.readEvidence(5), { name: 'TypeError', message: /ref must be a string/ });
    assert.throws(() => c.readEvidence('x', { offset: -1 }),
      { name: 'RangeError', message: /options\.offset/ });
    assert.throws(() => c.readEvidence('x', { limit: 0 }),
      { name: 'RangeError', message: /options\.limit/ });
    assert.throws(() => c.readEvidence('x', { limit: 1.5 }), RangeError);
    assert.throws(() => c.readEvidence('x', { offset: '1' }), TypeError);
    assert.throws(() => c.readEvidence('x', { page: 1 }), RangeError);
    await assert.rejects(c.searchEvidence(5, 'x'), TypeError);
    await assert.rejects(c.searchEvidence(null, /x/),
      { name: 'TypeError', message: /pattern must be a string/ });
    await assert.rejects(c.searchEvidence(null, 'a\0b'), RangeError);
  });

  it('finds matching lines with their numbers, in one output or the whole session', async () => {
    const c = compactor({ toolOffloadThreshold: 10 });
    c.offload(h.tool('log_a', 'start\nError: E1001 disk full\nretry\nError: E1002 again\n'));
    c.offload(h.tool('log_b', 'ok\nall good\nwarning: Error: E2001 late\n'));
    // Lines count from 0, as read offsets do.
    assert.deepEqual(await c.searchEvidence('log_a', 'E1[0-9]+'), [
      { ref: 'log_a', line: 1, text: 'Error: E1001 disk full' },
      { ref: 'log_a', line: 3, text: 'Error: E1002 again' },
    ]);
    const all = await c.searchEvidence(null, '^(Error|warning): ');
    assert.deepEqual(all.map((hit) => [hit.ref, hit.line]), [['log_a', 1], ['log_a', 3],
      ['log_b', 2]]);
    // Reading one line at the line a hit reports gives that very line.
    for (const hit of all) {
      assert.equal(c.readEvidence(hit.ref, { offset: hit.line, limit: 1 }), `${hit.text}\n`);
    }
    assert.deepEqual(await c.searchEvidence(undefined, 'nothing matches this'), []);
    await assert.rejects(c.searchEvidence(null, 'E(1'),
      { name: 'InputError', code: 'CK_EINVAL', where: 'pattern' });
  });

  it('refuses backreferences and answers pathological patterns at once', async () => {
    const c = compactor({ toolOffloadThreshold: 10 });
    c.offload(h.tool('line', `${'a'.repeat(4000)}\n${'x'.repeat(4000)}\n`));
    // glibc's regexec took 289 s over this on one 4,000-byte line, blocking the event loop.
    await assert.rejects(c.searchEvidence('line', '(.*)\\1\\1x'),
      { name: 'InputError', code: 'CK_EINVAL', where: 'pattern', message: /backreferences/ });
    for (const pattern of ['(a|aa)*c', '(a+a+)+b', '(.*a){12}b', '((a{1,10}){1,10}){1,10}b']) {
      assert.deepEqual(await c.searchEvidence('line', pattern), [], pattern);
    }
    assert.deepEqual((await c.searchEvidence('line', '^(x+x+)+$')).map((hit) => hit.line), [1]);
    await assert.rejects(c.searchEvidence('line', 'a{1001}'), { code: 'CK_EINVAL' });
    c.offload(h.tool('words', 'caf\u00e9 ok\nerror[E0308] at line 12\n\u65e5\u672c\n'));
    assert.deepEqual((await c.searchEvidence('words', '\\bE\\d{4}\\b')).map((x) => x.line),
      [1]);
    assert.deepEqual((await c.searchEvidence('words', '^..$')).map((x) => x.line), [2]);
  });

  // A pattern whose DFA has 2**13 states: on random a/b lines nearly every byte makes a new
  // one, so searching 600 KB takes a good fraction of a second.
  const SLOW = '(a|b)*a(a|b){12}x';
  const abLines = (n) => {
    const rng = s.rng(5);
    return Array.from({ length: n }, () =>
      Array.from({ length: 200 }, () => (rng() < 0.5 ? 'a' : 'b')).join('')).join('\n') + '\n';
  };

  it('searches on the libuv pool, so the event loop runs meanwhile', async () => {
    const c = compactor({ toolOffloadThreshold: 10 });
    c.offload(h.tool('ab', abLines(3000)));
    let ticks = 0;
    const timer = setInterval(() => { ticks += 1; }, 5);
    const pending = c.searchEvidence('ab', SLOW);
    assert.ok(pending instanceof Promise);
    // While it runs, the compactor stays usable: the search reads nothing they change.
    assert.equal(c.readEvidence('ab', { limit: 1 }).length, 201);
    c.reset();
    c.observeUsage(1000);
    assert.deepEqual(await pending, []);
    clearInterval(timer);
    assert.ok(ticks > 1, `the event loop ran ${ticks} times during the search`);
    assert.equal(c.readEvidence('ab', { limit: 1 }).length, 201);
  });

  it('runs searches side by side, beside the other methods', async () => {
    const c = compactor({ toolOffloadThreshold: 10 });
    c.offload(h.tool('ab', `${abLines(300)}a needle\n`));
    const results = await Promise.all([c.searchEvidence('ab', SLOW),
      c.searchEvidence(null, 'needle'), c.searchEvidence('ab', 'E(1').catch((err) => err.code),
      c.searchEvidence('ab', 'needle$')]);
    assert.deepEqual(results, [[], [{ ref: 'ab', line: 300, text: 'a needle' }], 'CK_EINVAL',
      [{ ref: 'ab', line: 300, text: 'a needle' }]]);
    // A compaction, and closing the compactor, while a search runs.
    const search = c.searchEvidence('ab', SLOW);
    const result = await c.compact([h.user('hello')]);
    assert.equal(result.tier, 'none');
    c.close();
    assert.deepEqual(await search, []);
    await assert.rejects(c.searchEvidence('ab', 'x'), { code: 'CK_ECLOSED' });
  });
});

describe('a hostile store', () => {
  it('refuses a symbolic link planted in it, and fails open', async () => {
    const store = s.tmpStore();
    const outside = s.tmpStore();
    fs.symlinkSync(outside, path.join(store, 'tool_results'));
    fs.symlinkSync(outside, path.join(store, 'compactions'));
    const c = new Compactor({ contextWindow: 100000, storeDir: store, sessionId: 's',
      toolOffloadThreshold: 10 });
    const message = h.tool('call_1', numbered(50));
    assert.equal(c.offload(message), message); // the output stays
    assert.throws(() => c.readEvidence('call_1'),
      { code: 'CK_EIO', message: /symlink refused: tool_results/ });
    await assert.rejects(c.searchEvidence(null, 'line'), { code: 'CK_EIO' });
    const history = s.syntheticHistory(30);
    const window = Math.ceil(ctxkeel.estimateTokens(history) / 0.65);
    const d = new Compactor({ contextWindow: window, storeDir: store, sessionId: 't' });
    const result = await d.compact(history);
    assert.equal(result.tier, 'warn');
    assert.deepEqual(result.record.offloaded, []);
    assert.match(result.record.error, /symlink refused: tool_results/);
    assert.match(result.record.error, /symlink refused: compactions/);
    assert.ok(result.messages.every((m) => history.includes(m)));
    assert.deepEqual(fs.readdirSync(outside), []);
  });

  it('removes the temporary files that dead writers left', () => {
    const store = s.tmpStore();
    const c = new Compactor({ contextWindow: 100000, storeDir: store, sessionId: 's',
      toolOffloadThreshold: 10 });
    c.offload(h.tool('kept', 'kept line of text\n'));
    const folder = path.join(store, 'tool_results', 's');
    const { spawnSync } = require('node:child_process');
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'])
      .stdout.toString();
    const left = path.join(folder, `.tmp-${dead}-0-00000000000000aa`);
    const live = path.join(folder, `.tmp-${process.pid}-0-00000000000000bb`);
    fs.writeFileSync(left, 'half written');
    fs.writeFileSync(live, 'being written');
    const again = new Compactor({ contextWindow: 100000, storeDir: store, sessionId: 's' });
    assert.equal(again.readEvidence('kept'), 'kept line of text\n');
    assert.equal(fs.existsSync(left), false);
    assert.equal(fs.existsSync(live), true);
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
  c.offload(h.tool('ev_2', 'alpha\nError: E7001 in ev_2\nomega\n'));

  it('answers an OpenAI tool call with a tool message', () => {
    const call = { id: 'call_r1', type: 'function', function: { name: 'read_evidence',
      arguments: JSON.stringify({ ref: 'ev_1', offset: 10, limit: 5 }) } };
    const out = c.handleReadEvidence(call);
    assert.deepEqual(Object.keys(out), ['role', 'tool_call_id', 'content']);
    assert.equal(out.role, 'tool');
    assert.equal(out.tool_call_id, 'call_r1');
    assert.equal(out.content, c.readEvidence('ev_1', { offset: 10, limit: 5 }));
    assert.equal(out.content, 'line 11: xxxxx\nline 12: xxxxx\nline 13: xxxxx\nline 14: xxxxx\n' +
      'line 15: xxxxx\n');
  });

  it('answers an Anthropic tool_use block with a tool_result block', () => {
    const block = { type: 'tool_use', id: 'toolu_1', name: 'read_evidence',
      input: { ref: 'ev_1', offset: 495 } };
    const out = c.handleReadEvidence(block);
    assert.deepEqual(out, { type: 'tool_result', tool_use_id: 'toolu_1',
      content: c.readEvidence('ev_1', { offset: 495 }) });
  });

  it('takes defaults, arguments given as an object, and empty arguments', () => {
    const all = c.handleReadEvidence({ id: 'c', function: { name: 'read_evidence',
      arguments: { ref: 'ev_1', offset: 0, limit: 1000 } } });
    assert.equal(all.content, text);
    const first = c.handleReadEvidence({ id: 'c', function: { name: 'read_evidence',
      arguments: '{"ref":"ev_1"}' } });
    assert.equal(first.content, c.readEvidence('ev_1'), 'the default is 200 lines from 0');
    // No arguments at all read as {}: the model is told what to give.
    for (const args of [undefined, '']) {
      const none = c.handleReadEvidence({ id: 'c', function: { name: 'read_evidence',
        arguments: args } });
      assert.match(none.content, /give a 'ref' to read .* or a 'pattern'/);
    }
  });

  it('finds a pattern in the whole session or in one ref, with the offset that reads it', () => {
    for (const args of [{ pattern: 'E7[0-9]+' }, { ref: 'ev_2', pattern: 'E7[0-9]+' }]) {
      const out = c.handleReadEvidence({ type: 'tool_use', id: 'p', name: 'read_evidence',
        input: args });
      assert.equal(out.content, 'ref="ev_2" offset=1: Error: E7001 in ev_2\n');
      assert.equal(out.is_error, undefined);
      const offset = Number(/offset=(\d+)/.exec(out.content)[1]);
      assert.equal(c.readEvidence('ev_2', { offset, limit: 1 }), 'Error: E7001 in ev_2\n');
    }
    const none = c.handleReadEvidence({ id: 'p', function: { name: 'read_evidence',
      arguments: '{"pattern":"no line has this"}' } });
    assert.equal(none.content, 'read_evidence: no stored line matches the pattern ' +
      'no line has this\n');
  });

  it('cuts a page of huge lines and says where to go on', () => {
    const long = Array.from({ length: 100 }, (_, i) => `${i}:${'w'.repeat(2000)}`).join('\n');
    c.offload(h.tool('ev_wide', long));
    const out = c.handleReadEvidence({ id: 'w', function: { name: 'read_evidence',
      arguments: '{"ref":"ev_wide"}' } });
    const cut = /\n\[read_evidence: cut at (\d+) bytes; continue with offset=(\d+)\]\n$/
      .exec(out.content);
    assert.ok(cut, out.content.slice(-200));
    const shown = out.content.slice(0, cut.index);
    assert.equal(Buffer.byteLength(shown), Number(cut[1]));
    assert.ok(Buffer.byteLength(shown) <= 65536);
    assert.ok(long.startsWith(shown));
    // The offset to go on at reads the line the cut went through.
    const partial = shown.slice(shown.lastIndexOf('\n') + 1);
    const next = c.readEvidence('ev_wide', { offset: Number(cut[2]), limit: 1 });
    assert.ok(next.startsWith(partial), `${next.slice(0, 20)} does not go on from ${partial.slice(0, 20)}`);
  });

  // The core writes these answers (ck_compactor_answer_read_evidence); the binding only puts
  // them into the caller's format.
  const MISTAKES = [
    ['arguments that are not JSON', '{"ref": "ev_1", offset: 3',
      /^read_evidence: the arguments are not valid JSON\n$/],
    ['arguments that are a list', '["ev_1"]', /^read_evidence: the arguments must be a JSON object\n$/],
    ['no ref and no pattern', '{"offset": 3}', /^read_evidence: give a 'ref' to read/],
    ['a negative offset', '{"ref": "ev_1", "offset": -3}', /^read_evidence: 'offset' must be a whole number, 0 or more\n$/],
    ['an offset written as a string', '{"ref": "ev_1", "offset": "3"}', /'offset' must be a whole number/],
    ['a zero limit', '{"ref": "ev_1", "limit": 0}', /^read_evidence: 'limit' must be a whole number, at least 1\n$/],
    ['a ref that is not a string', '{"ref": 5}', /'ref' must be a non-empty string/],
    ['an unknown ref', '{"ref": "no_such_output"}',
      /^read_evidence: cannot read no_such_output: no evidence for this ref in this session\n$/],
    ['a bad pattern', '{"pattern": "E(1"}', /^read_evidence: the pattern is not a valid regular expression \(unmatched \(\)\n$/],
  ];
  for (const [label, args, why] of MISTAKES) {
    it(`explains ${label} instead of throwing`, () => {
      const out = c.handleReadEvidence({ id: 'm', type: 'function',
        function: { name: 'read_evidence', arguments: args } });
      assert.deepEqual(Object.keys(out), ['role', 'tool_call_id', 'content']);
      assert.equal(out.tool_call_id, 'm');
      assert.match(out.content, why);
      const block = c.handleReadEvidence({ type: 'tool_use', id: 'b', name: 'read_evidence',
        input: (() => { try { return JSON.parse(args); } catch { return args; } })() });
      assert.match(block.content, why);
      assert.equal(block.is_error, true);
    });
  }

  it('answers an offset past the end with a sentence, not as an error', () => {
    const out = c.handleReadEvidence({ type: 'tool_use', id: 'e', name: 'read_evidence',
      input: { ref: 'ev_1', offset: 9999 } });
    assert.deepEqual(out, { type: 'tool_result', tool_use_id: 'e', content: 'read_evidence: ' +
      'ev_1 has no lines from offset 9999 on (offsets count lines from 0)\n' });
  });

  it('throws for calls that are not read_evidence calls, and when closed', () => {
    assert.throws(() => c.handleReadEvidence(null), TypeError);
    assert.throws(() => c.handleReadEvidence({ id: 'x' }), TypeError);
    assert.throws(() => c.handleReadEvidence({ id: 'x', function: { name: 'bash',
      arguments: '{}' } }), { name: 'RangeError', message: /not of "bash"/ });
    assert.throws(() => c.handleReadEvidence({ type: 'tool_use', name: 'read_evidence',
      input: {} }), { name: 'TypeError', message: /call\.id/ });
    const cyclic = {};
    cyclic.self = cyclic;
    assert.throws(() => c.handleReadEvidence({ type: 'tool_use', id: 'x', name: 'read_evidence',
      input: cyclic }), { name: 'TypeError', message: /call\.input cannot be written as JSON/ });
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
    // Every argument is optional: a ref reads, a pattern searches (in a ref, or everywhere).
    assert.equal(openai.function.parameters.required, undefined);
    assert.equal(openai.function.parameters.type, 'object');
    assert.deepEqual(Object.keys(openai.function.parameters.properties),
      ['ref', 'offset', 'limit', 'pattern']);
    assert.equal(openai.function.parameters.properties.pattern.type, 'string');
    // The shape node/index.d.ts declares for it (ReadEvidenceSchema): [type, minimum] each.
    assert.deepEqual(Object.fromEntries(Object.entries(openai.function.parameters.properties)
      .map(([key, p]) => [key, [p.type, typeof p.description, p.minimum]])), {
      ref: ['string', 'string', undefined],
      offset: ['integer', 'string', 0],
      limit: ['integer', 'string', 1],
      pattern: ['string', 'string', undefined],
    });
    assert.match(openai.function.description, /pattern/);
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
