'use strict';
// The packed npm tarball installed with --ignore-scripts in a fresh folder: the prebuilt addon
// loads (its libraries from its own folder), CommonJS require works, a compaction runs. Run
// from that folder.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const ck = require('ctxkeel');
const pkg = path.dirname(require.resolve('ctxkeel/package.json'));
const prebuilt = path.join(pkg, 'prebuilds', `${process.platform}-${process.arch}`);
assert.ok(!fs.existsSync(path.join(pkg, 'build')), 'nothing was compiled');
const ldd = execFileSync('ldd', [path.join(prebuilt, 'ctxkeel.node')], { encoding: 'utf8' });
assert.ok(!ldd.includes('not found'), ldd);
for (const [, name, file] of ldd.matchAll(/^\s*(libcurl\S*|libcjson\S*|libssl\S*) => (\S+)/gm)) {
  assert.equal(path.dirname(fs.realpathSync(file)), fs.realpathSync(prebuilt), `${name}: ${file}`);
}
assert.match(ldd, /libcurl-[0-9a-f]{8}\.so/);
assert.ok(fs.existsSync(path.join(prebuilt, 'licenses', 'libcurl4.copyright')), 'license texts');

const messages = [{ role: 'user', content: 'Fix src/parser.c.' }];
for (let t = 0; t < 24; t++) {
  messages.push({ role: 'assistant', content: `step ${t}`, tool_calls: [{ id: `c${t}`,
    type: 'function', function: { name: 'bash', arguments: '{}' } }] });
  messages.push({ role: 'tool', tool_call_id: `c${t}`,
    content: `line ${t} of the output\n`.repeat(t % 4 ? 40 : 400) });
}
const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ck-npm-'));
const compactor = new ck.Compactor({ contextWindow: 4000, storeDir });
compactor.compact(messages).then((res) => {
  assert.notEqual(res.tier, 'none');
  assert.deepEqual(ck.checkPairs(res.messages), []);
  const r = ck.replay(messages, { contextWindow: 4000, storeDir });
  assert.equal(r.rows.length, 25);
  console.log('dist npm (require): 5 passed, 0 failed');
});
