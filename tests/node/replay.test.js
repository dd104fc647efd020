'use strict';

// replay(): the core's agent-loop replay as a library call; the ctxkeel bin; the loader's
// explanation when no addon loads.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { pathToFileURL } = require('node:url');
const h = require('./helpers.js');
const ck = require(path.join(h.repoRoot, 'node', 'index.js'));
const loader = require(path.join(h.repoRoot, 'node', 'loader.js'));

const BIN = path.join(h.repoRoot, 'node', 'bin', 'ctxkeel.js');
const DEMO = path.join(h.repoRoot, '..', 'shared', 'corpus', 'openhands-ponyc-4588.json');

function tmp() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'ck-replay-'));
}

/** A task, then turns of a bash call and its output (every third one large). */
function session(turns = 30) {
  const messages = [{ role: 'system', content: 'You are a coding agent.' },
    { role: 'user', content: 'Fix the failing test in src/parser.c.' }];
  for (let t = 0; t < turns; t++) {
    messages.push({ role: 'assistant', content: `Step ${t}: run the tests.`,
      tool_calls: [{ id: `call_${t}`, type: 'function',
        function: { name: 'bash', arguments: '{}' } }] });
    const size = t % 3 === 0 ? 6000 : 400;
    let text = '';
    for (let i = 0; i < size; i++) {
      text += i % 50 === 49 ? '\n' : String.fromCharCode(97 + (i + t) % 26);
    }
    messages.push({ role: 'tool', tool_call_id: `call_${t}`, content: text });
  }
  return messages;
}

describe('replay', () => {
  it('gives one row per model call, from the core', () => {
    const messages = session();
    const before = JSON.stringify(messages);
    const r = ck.replay(messages, { contextWindow: 6000, storeDir: tmp(), keepTail: 4 });
    assert.equal(JSON.stringify(messages), before);
    const calls = messages.filter((m) => m.role === 'assistant').length + 1;
    assert.ok(r instanceof ck.Replay);
    assert.equal(r.rows.length, calls);
    assert.equal(r.totals.calls, calls);
    assert.equal(r.contextWindow, 6000);
    assert.deepEqual(r.rows.map((row) => row.call), Array.from({ length: calls }, (_, i) => i + 1));
    const numbered = r.rows.filter((row) => row.compaction).map((row) => row.compaction);
    assert.ok(numbered.length > 0);
    assert.deepEqual(numbered, numbered.map((_, i) => i + 1));
    for (const row of r.rows) {
      assert.ok(row.tokensAfter <= row.tokensBefore);
      assert.equal(row.ratioAfter, row.tokensAfter / 6000);
      // The prompt cache: the view's prefix changes only where a compaction is recorded.
      assert.ok(row.prefixKept <= row.tokensAfter);
      if (row.compaction) {
        assert.deepEqual(row.record.cache,
          { prefix_kept: row.prefixKept, prefix_broken: row.prefixBroken });
      } else {
        assert.equal(row.prefixBroken, 0);
      }
      if (row.compaction) {
        assert.equal(row.record.tier, row.tier);
        assert.ok(row.action.startsWith(`>> compaction ${row.compaction}:`));
      } else {
        assert.equal(row.record, null);
        assert.equal(row.action, '-');
      }
    }
    assert.equal(r.rows[0].historyTokens,
      ck.estimateTokens(messages.slice(0, r.rows[0].messages)));
    assert.equal(r.totals.tokensSent, r.rows.reduce((s, row) => s + row.tokensAfter, 0));
    assert.ok(r.totals.tokensSent < r.totals.tokensWithout);
    assert.equal(r.rows[0].prefixKept + r.rows[0].prefixBroken, 0);
    assert.equal(r.totals.prefixKept, r.rows.reduce((s, row) => s + row.prefixKept, 0));
    assert.ok(r.totals.prefixKept > 0);
    assert.equal(r.totals.prefixBreaks, r.rows.filter((row) => row.prefixBroken > 0).length);
    const svg = r.toSvg();
    assert.ok(svg.startsWith('<svg xmlns=') && svg.endsWith('</svg>\n'));
    assert.equal(svg.split('<circle').length - 1, r.totals.compactions);
  });

  it('agrees with the ctxkeel bin on a real transcript', { skip: !fs.existsSync(DEMO) }, () => {
    const root = tmp();
    const out = spawnSync(process.execPath, [BIN, 'replay', DEMO, '--window', '10000', '--store',
      path.join(root, 'a'), '--session', 'same'], { encoding: 'utf8' });
    assert.equal(out.status, 0, out.stderr);
    const printed = [...out.stdout.matchAll(/^ *(\d+) +(\d+) +(\d+) +(\d+) +(\d+) /gm)]
      .map((m) => m.slice(1, 6).map(Number));
    const r = ck.replay(JSON.parse(fs.readFileSync(DEMO, 'utf8')),
      { contextWindow: 10000, storeDir: path.join(root, 'b'), sessionId: 'same' });
    assert.deepEqual(printed, r.rows.map((row) => [row.call, row.messages, row.historyTokens,
      row.tokensBefore, row.tokensAfter]));
    assert.ok(out.stdout.includes(`with ctxkeel:    ${r.totals.tokensSent} tokens sent`));
    assert.ok(out.stdout.includes(`prompt cache:    ${r.totals.prefixKept} of those tokens`));
  });

  it('checks its arguments', () => {
    assert.throws(() => ck.replay(session(2)), { code: 'ERR_INVALID_ARG_TYPE' });
    assert.throws(() => ck.replay(session(2), {}), /contextWindow is required/);
    assert.throws(() => ck.replay(42, { contextWindow: 1000 }), { code: 'ERR_INVALID_ARG_TYPE' });
    assert.throws(() => ck.replay(session(2), { contextWindow: 1000, backend: {} }),
      { code: 'ERR_INVALID_ARG_VALUE' });
    assert.throws(() => ck.replay(session(2), { contextWindow: 1000, keepTail: 'x' }),
      { code: 'ERR_INVALID_ARG_TYPE' });
    assert.throws(() => ck.replay(session(2), { contextWindow: 1000, format: 'klingon' }),
      { code: 'ERR_INVALID_ARG_VALUE' });
    assert.throws(() => ck.replay(session(2), { contextWindow: 1000, warn: 0.9, soft: 0.5,
      storeDir: tmp() }), (err) => err instanceof ck.InputError && err.code === 'CK_EINVAL');
    assert.throws(() => ck.replay([{ role: 'user', content: 7 }], { contextWindow: 1000,
      storeDir: tmp() }),
    (err) => err instanceof ck.InputError && /messages\[0\]\.content/.test(err.message));
  });

  it('is exported from ESM too', async () => {
    const esm = await import(pathToFileURL(path.join(h.repoRoot, 'node', 'index.mjs')).href);
    assert.equal(esm.replay, ck.replay);
    assert.equal(esm.Replay, ck.Replay);
  });
});

describe('the ctxkeel bin', () => {
  function bin(args, input) {
    return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', input });
  }

  it('explains every column in --help', () => {
    const out = bin(['--help']);
    assert.equal(out.status, 0);
    assert.equal(out.stderr, '');
    for (const column of ['call', 'msgs', 'history', 'before', 'after', 'ratio', 'view', 'tier',
      'action']) {
      assert.ok(out.stdout.includes(`\n  ${column} `), column);
    }
  });

  it('has the C program\'s exit codes', () => {
    const dir = tmp();
    const broken = path.join(dir, 'broken.json');
    fs.writeFileSync(broken, JSON.stringify([{ role: 'user', content: 'go' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function',
        function: { name: 'bash', arguments: '{}' } }] }]));
    const check = bin(['check', broken]);
    assert.equal(check.status, 1);
    assert.ok(check.stdout.endsWith('2 messages, 1 violation\n'));
    const fixed = bin(['repair', '-'], fs.readFileSync(broken, 'utf8'));
    assert.equal(fixed.status, 0);
    assert.equal(bin(['check', '-'], fixed.stdout).status, 0);
    assert.equal(bin(['frobnicate', 'x']).status, 2);
    assert.equal(bin(['--version']).stdout, `ctxkeel ${ck.version}\n`);
  });
});

describe('the loader', () => {
  it('says what was tried and what to do', () => {
    const text = loader.explain(['prebuilds/linux-x64/ctxkeel.node: not there']);
    assert.match(text, /cannot load the native addon for/);
    assert.match(text, /prebuilds\/linux-x64\/ctxkeel.node: not there/);
    assert.match(text, /npm rebuild ctxkeel/);
    assert.match(text, /libcurl4-openssl-dev/);
    assert.match(text, /onlyBuiltDependencies/);
  });

  it('tells a bundled copy to keep ctxkeel external', () => {
    // A copy of the loader outside the package, as a bundler would leave it.
    const dir = tmp();
    fs.mkdirSync(path.join(dir, 'node'));
    fs.copyFileSync(path.join(h.repoRoot, 'node', 'loader.js'),
      path.join(dir, 'node', 'loader.js'));
    const out = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(path.join(dir,
      'node', 'loader.js'))}).loadAddon()`], { encoding: 'utf8' });
    assert.notEqual(out.status, 0);
    assert.match(out.stderr, /serverExternalPackages/);
    assert.match(out.stderr, /--external:ctxkeel/);
  });

  it('loads the prebuilt addon first', () => {
    // A package folder whose prebuilds/ holds this build's addon: it is the one loaded.
    const dir = tmp();
    fs.mkdirSync(path.join(dir, 'node'));
    fs.mkdirSync(path.join(dir, 'prebuilds', loader.target), { recursive: true });
    fs.copyFileSync(path.join(h.repoRoot, 'node', 'loader.js'),
      path.join(dir, 'node', 'loader.js'));
    fs.copyFileSync(path.join(h.repoRoot, 'build', 'Release', 'ctxkeel.node'),
      path.join(dir, 'prebuilds', loader.target, 'ctxkeel.node'));
    const fresh = require(path.join(dir, 'node', 'loader.js'));
    const { addon, file } = fresh.tryLoad();
    assert.equal(file, path.join(dir, 'prebuilds', loader.target, 'ctxkeel.node'));
    assert.equal(typeof addon.replay, 'function');
    const skipped = fresh.tryLoad({ skipPrebuild: true });
    assert.equal(skipped.addon, null);
    assert.match(skipped.tried.join('\n'), /build\/Release\/ctxkeel.node: not there/);
  });
});
