'use strict';

// How the package loads: CommonJS, ESM (named and default), by package name, and in workers.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const { Worker } = require('node:worker_threads');
const h = require('./helpers.js');

const PUBLIC = ['estimateTokens', 'checkPairs', 'repairPairs', 'parseAnchors', 'mergeAnchors',
  'Compactor', 'HttpSummarizer', 'readEvidenceTool', 'replay', 'Replay',
  'version', 'statusCodes', 'Error', 'CtxkeelError', 'InputError'];

describe('module loading', () => {
  it('exports the public API from CommonJS', () => {
    const ck = require(path.join(h.repoRoot, 'node', 'index.js'));
    for (const name of PUBLIC) assert.ok(name in ck, name);
    assert.equal(ck.Error, ck.CtxkeelError);
    assert.ok(Object.prototype.isPrototypeOf.call(ck.Error, ck.InputError));
  });

  it('imports node/index.mjs with named and default exports', async () => {
    const url = pathToFileURL(path.join(h.repoRoot, 'node', 'index.mjs')).href;
    const esm = await import(url);
    const cjs = require(path.join(h.repoRoot, 'node', 'index.js'));
    assert.equal(esm.default, cjs);
    for (const name of PUBLIC) assert.equal(esm[name], cjs[name], name);
    assert.deepEqual(esm.checkPairs([h.user('go'), h.asst(h.call('a'))]).map((v) => v.kind),
      ['missing_result']);
  });

  it('resolves the package by name through "exports"', async () => {
    const byName = require('ctxkeel');
    assert.equal(byName, require(path.join(h.repoRoot, 'node', 'index.js')));
    const esm = await import('ctxkeel');
    assert.equal(esm.default, byName);
    assert.equal(esm.estimateTokens, byName.estimateTokens);
  });
});

// Runs `code` in a worker (CommonJS, `ck` bound to the package) and resolves with its message.
function inWorker(code) {
  const source = `
    const { parentPort } = require('node:worker_threads');
    const ck = require(${JSON.stringify(path.join(h.repoRoot, 'node', 'index.js'))});
    parentPort.postMessage((() => { ${code} })());`;
  return new Promise((resolve, reject) => {
    const worker = new Worker(source, { eval: true });
    let answer;
    worker.on('message', (m) => { answer = m; });
    worker.on('error', reject);
    worker.on('exit', (code) => (code === 0 ? resolve(answer) : reject(new Error(`exit ${code}`))));
  });
}

describe('worker_threads', () => {
  it('loads and works in a worker', async () => {
    const answer = await inWorker(`
      const msgs = [
        { role: 'user', content: 'go' },
        { role: 'tool', tool_call_id: 'x', content: '' },
      ];
      let code;
      try {
        ck.checkPairs([{ role: 1 }]);
      } catch (err) {
        code = [err.code, err instanceof ck.InputError];
      }
      const withArgs = { role: 'assistant',
        tool_calls: [{ id: 'a', function: { name: 'f', arguments: { x: 1 } } }] };
      return {
        kinds: ck.checkPairs(msgs).map((v) => v.kind),
        repaired: ck.repairPairs(msgs).length,
        tokens: ck.estimateTokens('abcdefgh', { estimator: 'chars4' }),
        anchor: ck.parseAnchors('## Next Steps\\nship').anchors.next_steps,
        args: ck.estimateTokens(withArgs, { estimator: 'chars4' }),
        code,
      };`);
    assert.deepEqual(answer, {
      kinds: ['orphan_result'],
      repaired: 1,
      tokens: 2,
      anchor: 'ship',
      args: Math.ceil(('a' + 'f' + '{"x":1}').length / 4),
      code: ['CK_ETYPE', true],
    });
  });

  it('runs in several workers at once and after workers have exited', async () => {
    const work = `
      const list = [];
      for (let i = 0; i < 200; i++) {
        const call = { id: 'c' + i, function: { name: 'f', arguments: '{}' } };
        list.push({ role: 'assistant', tool_calls: [call] });
        if (i % 3) list.push({ role: 'tool', tool_call_id: 'c' + i, content: 'r' });
      }
      const out = ck.repairPairs(list);
      return [ck.checkPairs(list).length, ck.checkPairs(out).length, out.length];`;
    const answers = await Promise.all([1, 2, 3, 4].map(() => inWorker(work)));
    for (const a of answers) assert.deepEqual(a, [67, 0, 400]);
    // The main thread's instance is unaffected by the workers' teardown.
    assert.deepEqual(h.ctxkeel.checkPairs([h.user('x')]), []);
    assert.throws(() => h.ctxkeel.checkPairs([{ role: 2 }]), h.ctxkeel.InputError);
  });
});
