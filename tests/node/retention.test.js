'use strict';

// Retention policies: what the placeholder of an offloaded output keeps, per tool, on a real
// failing build log from the corpus; never-offloaded tools; first match wins; bad policies.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const h = require('./helpers.js');
const s = require('./sessions.js');

const { ctxkeel } = h;
const { Compactor, estimateTokens } = ctxkeel;

after(s.removeStores);

// openhands-ponyc-4588: the agent runs `apt-get update && apt-get install -y llvm-dev`
// (execute_bash, call toolu_43, message 88); 30 lines of fetch errors ending in
// "E: Unable to locate package llvm-dev". The corpus has no failing pytest, cargo or go test
// run; this failing build-setup log is the closest real one.
const CORPUS_FILE = path.join(h.repoRoot, '..', 'shared', 'corpus', 'openhands-ponyc-4588.json');
const transcript = fs.existsSync(CORPUS_FILE)
  ? JSON.parse(fs.readFileSync(CORPUS_FILE, 'utf8'))
  : null;
const skip = transcript ? false : 'shared/corpus is absent';
const LOG_ID = 'toolu_43';

/** The history up to a few turns past the log, so that it lies outside the tail. */
function history() {
  return transcript.slice(0, 95);
}

/** Compacts the history at the warn tier (offloads only) with the given retention policies;
 * returns the result and the log's message in the view. */
async function compactLog(retention) {
  const messages = history();
  const window = Math.ceil(estimateTokens(messages) / 0.65);
  const c = new Compactor({ contextWindow: window, storeDir: s.tmpStore(), offloadThreshold: 1000,
    retention });
  const result = await c.compact(messages);
  assert.equal(result.tier, 'warn');
  const log = result.messages.find((m) => m.tool_call_id === LOG_ID);
  return { c, result, log, original: messages.find((m) => m.tool_call_id === LOG_ID) };
}

/** The preview lines of a placeholder (after the "preview (...):" line). */
function previewLines(placeholder) {
  const at = placeholder.indexOf('\npreview');
  assert.ok(at >= 0, `no preview in ${placeholder}`);
  return placeholder.slice(placeholder.indexOf('\n', at + 1) + 1).split('\n');
}

describe('retention policies on a real failing build log', { skip }, () => {
  it('keeps the head, every error line and the tail that the policy asks for', async () => {
    const retention = {
      'pytest*': { head: 1 },
      'execute_*': { head: 2, tail: 1, errors: 20, maxBytes: 4000 },
    };
    const { c, result, log, original } = await compactLog(retention);
    const lines = original.content.split('\n');
    const errorLines = lines.filter((l) => /fail/i.test(l));
    assert.ok(errorLines.length >= 9, 'the log has fewer error lines than expected');
    assert.notEqual(log, original);
    assert.ok(log.content.startsWith(s.PLACEHOLDER));
    const shown = previewLines(log.content);
    assert.ok(log.content.includes('preview (first lines, error lines, last lines)'));
    assert.equal(shown[0], lines[0]);
    assert.equal(shown[1], lines[1]);
    for (const line of errorLines) assert.ok(shown.includes(line), `error line lost: ${line}`);
    assert.ok(shown.includes('E: Unable to locate package llvm-dev'), 'the last line was lost');
    // Only one last line: the line before it is neither head, error nor tail.
    assert.ok(!shown.includes('Reading state information... Done'));
    assert.ok(!shown.includes(lines[2]), 'a third head line was kept');
    // The record lists it under its tool, and the full text reads back exactly.
    const entry = result.record.offloaded.find((o) => o.tool_call_id === LOG_ID);
    assert.equal(entry.tool_name, 'execute_bash');
    assert.equal(c.readEvidence(LOG_ID, { limit: 1000 }), original.content);
  });

  it('keeps more of it than the built-in rule does', async () => {
    const { log, original } = await compactLog(undefined);
    const errorLines = original.content.split('\n').filter((l) => /fail/i.test(l));
    const shown = previewLines(log.content);
    const kept = errorLines.filter((l) => shown.includes(l)).length;
    assert.ok(kept < errorLines.length,
      `the built-in rule already keeps all ${errorLines.length} error lines`);
  });

  it('keeps the output verbatim when the policy says offload: false', async () => {
    const { result, log, original } = await compactLog({ execute_bash: { offload: false } });
    assert.equal(log, original, 'the log is not the very same message object');
    const offloaded = result.record.offloaded.map((o) => o.tool_call_id);
    assert.ok(!offloaded.includes(LOG_ID));
    assert.ok(result.record.offloaded.every((o) => o.tool_name !== 'execute_bash'));
    assert.ok(result.record.offloaded.length > 0, 'other tools are no longer offloaded');
    s.assertView(history(), result);
  });

  it('lets the first matching pattern win, in object order and in array order', async () => {
    const keep = { offload: false };
    const short = { head: 1 };
    const first = await compactLog({ execute_bash: keep, 'execute_*': short });
    assert.equal(first.log, first.original);
    const second = await compactLog([['execute_*', short], ['execute_bash', keep]]);
    assert.notEqual(second.log, second.original);
    assert.deepEqual(previewLines(second.log.content).filter((l) => l && !l.startsWith('[...')),
      [second.original.content.split('\n')[0]]);
  });

  it('shows no preview for a policy that keeps no lines', async () => {
    const { log } = await compactLog({ execute_bash: {} });
    assert.ok(log.content.startsWith(s.PLACEHOLDER));
    assert.match(log.content, /preview: none \(retention policy\)/);
    assert.ok(!log.content.includes('Ign:1'));
  });

  it('caps the preview at maxBytes, above or below the gate\'s 1 KB', async () => {
    const wide = await compactLog({ execute_bash: { head: 30, maxBytes: 1400 } });
    const narrow = await compactLog({ execute_bash: { head: 30, maxBytes: 300 } });
    const size = (log) => Buffer.byteLength(previewLines(log.content).join('\n'));
    assert.ok(size(wide.log) > 1024, `the wide preview has ${size(wide.log)} bytes`);
    assert.ok(size(wide.log) < 1400 + 200, `the wide preview has ${size(wide.log)} bytes`);
    assert.ok(size(narrow.log) < 300 + 200, `the narrow preview has ${size(narrow.log)} bytes`);
  });
});

describe('retention policies in offload() and options', () => {
  it('applies a * policy at tool time to a result that does not name its tool', () => {
    const text = Array.from({ length: 500 }, (_, i) => `row ${i}`).join('\n');
    const c = new Compactor({ contextWindow: 100000, storeDir: s.tmpStore(),
      toolOffloadThreshold: 100, retention: [['*', { head: 3, tail: 2 }]] });
    const out = c.offload(h.tool('call_rows', text));
    assert.ok(out.content.startsWith(s.PLACEHOLDER));
    assert.deepEqual(previewLines(out.content).filter((l) => l && !l.startsWith('[...')),
      ['row 0', 'row 1', 'row 2', 'row 498', 'row 499']);
    assert.equal(c.readEvidence('call_rows', { limit: 1000 }), text);
  });

  it('matches the tool named on the result ("name") at tool time', () => {
    const text = Array.from({ length: 500 }, (_, i) => `row ${i}`).join('\n');
    const c = new Compactor({ contextWindow: 100000, storeDir: s.tmpStore(),
      toolOffloadThreshold: 100,
      retention: { query_db: { offload: false }, '*': { head: 1 } } });
    const named = { ...h.tool('call_q', text), name: 'query_db' };
    assert.equal(c.offload(named), named);
    const other = { ...h.tool('call_r', text), name: 'ls' };
    assert.ok(c.offload(other).content.includes('tool: ls,'));
  });

  it('reports the policies in force, every key filled, as [pattern, policy] pairs', () => {
    const c = new Compactor({ contextWindow: 1000, storeDir: s.tmpStore(), retention: {
      'pytest*': { head: 5, tail: 30, errors: 20 },
      read_file: { head: 40, maxBytes: 4000 },
      'secrets*': { offload: false },
    } });
    assert.deepEqual(c.options.retention, [
      ['pytest*', { head: 5, tail: 30, errors: 20, maxBytes: 0, offload: true }],
      ['read_file', { head: 40, tail: 0, errors: 0, maxBytes: 4000, offload: true }],
      ['secrets*', { head: 0, tail: 0, errors: 0, maxBytes: 0, offload: false }],
    ]);
    const none = new Compactor({ contextWindow: 1000, storeDir: s.tmpStore(), retention: {} });
    assert.equal(none.options.retention, undefined);
  });

  const BAD = [
    ['a negative line count', { 'pytest*': { tail: -1 } }, RangeError,
      "options.retention['pytest*'].tail must be an integer from 0 to 4294967295"],
    ['a fractional line count', { x: { head: 1.5 } }, RangeError, "options.retention['x'].head"],
    ['more than 2^32-1 lines', { x: { errors: 2 ** 32 } }, RangeError,
      "options.retention['x'].errors must be an integer from 0 to 4294967295"],
    ['a string line count', { x: { head: '5' } }, TypeError,
      "options.retention['x'].head must be a number, not a string"],
    ['a negative maxBytes', { x: { maxBytes: -5 } }, RangeError, "options.retention['x'].maxBytes"],
    ['an unknown key', { read_file: { max_bytes: 10 } }, RangeError,
      "options.retention['read_file'].max_bytes is not a policy key"],
    ['a non-boolean offload', { x: { offload: 0 } }, TypeError,
      "options.retention['x'].offload must be a boolean, not a number"],
    ['a policy that is not an object', { x: 5 }, TypeError,
      "options.retention['x'] must be a policy object, not a number"],
    ['a policy that is an array', { x: [1] }, TypeError, "options.retention['x'] must be a policy"],
    ['a non-string pattern', [[7, { head: 1 }]], TypeError,
      'options.retention[0][0] must be a string, not a number'],
    ['a pattern with NUL', [['a\0b', {}]], RangeError, 'options.retention[0][0]'],
    ['a pair of three', [['a', {}, {}]], RangeError,
      'options.retention[0] must be a [pattern, policy] pair'],
    ['an item that is not a pair', [['a', {}], 'b'], TypeError,
      'options.retention[1] must be a [pattern, policy] pair, not a string'],
    ['a bad key in the array form', [['a', { head: -1 }]], RangeError,
      'options.retention[0][1].head'],
    ['a string', 'pytest*', TypeError, 'options.retention must be an object of policies'],
  ];
  for (const [what, retention, ErrorClass, message] of BAD) {
    it(`refuses ${what}, naming the place`, () => {
      assert.throws(
        () => new Compactor({ contextWindow: 1000, storeDir: s.tmpStore(), retention }),
        (err) => {
          assert.ok(err instanceof ErrorClass, `${err.name}: ${err.message}`);
          assert.ok(err.message.includes(message), err.message);
          return true;
        },
      );
    });
  }
});
