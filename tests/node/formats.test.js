'use strict';
// The shared format cases (tests/data/formats/, README there) through the Node API: the same
// errors, pair reports, repairs and compacted views the C and Python suites check, so that a
// difference between the surfaces fails here rather than in a user's agent.
const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const ctxkeel = require(path.join(__dirname, '..', '..', 'node', 'index.js'));

const ROOT = path.join(__dirname, '..', 'data', 'formats');
const CASES = fs.readdirSync(ROOT, { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .flatMap((d) => fs.readdirSync(path.join(ROOT, d.name))
    .filter((f) => f.endsWith('.json')).map((f) => `${d.name}/${f}`))
  .sort();

// The dialects this binding reads today; a case in another one is reported as skipped (by name),
// never passed, until the binding reads through the core's format layer.
const BINDING_FORMATS = new Set(['auto', 'openai', 'anthropic', 'responses', 'gemini', 'ai-sdk',
  'langchain']);
const dialectOf = (name) => name.split('/')[0];
const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
const report = (violations) => violations.map((v) =>
  ({ index: v.index, part: v.part, kind: v.kind, id: v.toolCallId }));
const home = process.cwd();
const dirs = [];
after(() => {
  process.chdir(home);
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

describe('the shared format cases', () => {
  it('are there', () => {
    assert.ok(CASES.length >= 15);
    assert.ok(CASES.some((c) => c.startsWith('openai/')) &&
      CASES.some((c) => c.startsWith('anthropic/')));
  });

  for (const name of CASES) {
    const skip = BINDING_FORMATS.has(dialectOf(name)) ? false
      : `the ${dialectOf(name)} dialect is not read by the Node binding yet`;
    it(name, { skip }, async () => {
      const c = JSON.parse(fs.readFileSync(path.join(ROOT, name), 'utf8'));
      const format = c.format;
      const given = structuredClone(c.input);
      if (c.error) {
        assert.throws(() => ctxkeel.checkPairs(given, { format }), (err) =>
          err.code === `CK_${c.error.code}` && err.where === c.error.where);
        return;
      }
      assert.deepEqual(report(ctxkeel.checkPairs(given, { format })), c.check);
      const repaired = ctxkeel.repairPairs(given, { format });
      assert.deepEqual(JSON.parse(JSON.stringify(repaired)), c.repair ?? c.input);
      assert.deepEqual(ctxkeel.checkPairs(repaired, { format }), []);
      if (c.compact) {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxkeel-formats-'));
        dirs.push(dir);
        process.chdir(dir);
        try {
          const options = { storeDir: 'st', sessionId: 'case', format };
          for (const [k, v] of Object.entries(c.compact.options)) options[camel(k)] = v;
          const compactor = new ctxkeel.Compactor(options);
          const view = (await compactor.compact(given)).messages;
          assert.deepEqual(JSON.parse(JSON.stringify(view)), c.compact.view);
          assert.deepEqual(ctxkeel.checkPairs(view, { format }), []);
        } finally {
          process.chdir(home);
        }
      }
      assert.deepEqual(given, c.input, "the caller's messages were changed");
    });
  }
});
