'use strict';

// new Compactor({ store: 's3://...' }) against a SeaweedFS server started for this file by
// tools/seaweedfs.sh on loopback ports (as tests/c/s3_server.h starts it for the C tests): a
// session compacted here resumes in another Node process with no summary call and the same
// messages, leaving nothing in either local folder; the URL is reported without credentials;
// bad URLs and a backend given too are named. Skipped when the SeaweedFS binary is not built
// (make s3-server), unless CK_REQUIRE_S3=1.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers.js');
const s = require('./sessions.js');

const { Compactor, InputError } = h.ctxkeel;
const repoRoot = path.join(__dirname, '..', '..');
const SEAWEEDFS = path.join(repoRoot, 'tools', 'seaweedfs.sh');
const ACCESS = 'ckNodeAccessKey';
const SECRET = 'ckNodeSecretKey0123456789abcdefghijklmno';
const BUCKET = 'ctxkeel-node';

const built = childProcess.spawnSync('bash', [SEAWEEDFS, 'path']).status === 0;
if (!built && process.env.CK_REQUIRE_S3 === '1')
  throw new Error('CK_REQUIRE_S3=1 but there is no SeaweedFS binary (make s3-server)');
const skip = built ? false : 'no SeaweedFS binary: `make s3-server` builds it once per machine';

const server = { dir: null, endpoint: null };

function storeUrl() {
  return `s3://${BUCKET}/node-${crypto.randomUUID()}?region=us-east-1&endpoint=${server.endpoint}`;
}

// Runs in another process: the same compactor on the same session, a counting summarizer.
const CHILD = `
const args = JSON.parse(require('node:fs').readFileSync(0, 'utf8'));
const { Compactor } = require(args.index);
const requests = [];
const c = new Compactor({ contextWindow: args.window, sessionId: args.session,
                          store: args.store, storeDir: args.dir });
c.compact(args.messages, { summarize: (r) => { requests.push(r); return '## Next Steps\\nNo.'; } })
  .then((result) => process.stdout.write(JSON.stringify(
    { calls: requests.length, messages: result.messages, record: result.record })));
`;

describe('Compactor({ store: "s3://..." })', { skip }, () => {
  before(() => {
    server.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ck-s3-node-'));
    const env = { ...process.env, CK_S3_ACCESS_KEY: ACCESS, CK_S3_SECRET_KEY: SECRET,
                  CK_S3_BUCKET: BUCKET, CK_S3_WATCH_PID: String(process.pid) };
    const out = childProcess.execFileSync('bash', [SEAWEEDFS, 'start', server.dir],
                                          { env, encoding: 'utf8', timeout: 300000 });
    server.endpoint = out.split('\n')[0];
    process.env.AWS_ACCESS_KEY_ID = ACCESS;
    process.env.AWS_SECRET_ACCESS_KEY = SECRET;
    delete process.env.AWS_SESSION_TOKEN;
  });
  after(() => {
    if (server.dir) {
      childProcess.spawnSync('bash', [SEAWEEDFS, 'stop', server.dir]);
      fs.rmSync(server.dir, { recursive: true, force: true });
    }
    s.removeStores();
  });

  it('resumes a session in another process with no summary call and the same view',
    async () => {
      const store = storeUrl();
      const messages = s.syntheticHistory(30, 1, { bigEvery: 15 });
      const window = Math.ceil(h.ctxkeel.estimateTokens(messages) / 0.75);
      const session = 'node/moves 1\n../x';
      const here = s.tmpStore();
      const c = new Compactor({ contextWindow: window, sessionId: session, store,
                                storeDir: here });
      const summarize = s.scripted();
      const first = await c.compact(messages, { summarize });
      assert.equal(first.tier, 'soft');
      assert.equal(summarize.requests.length, 1);
      assert.equal(first.record.error, null);
      const again = await c.compact(messages, { summarize });
      assert.equal(summarize.requests.length, 1);
      const there = s.tmpStore();
      const child = childProcess.spawnSync(process.execPath, ['-e', CHILD], {
        input: JSON.stringify({ index: path.join(repoRoot, 'node', 'index.js'), window, session,
                                store, dir: there, messages }),
        encoding: 'utf8', timeout: 120000,
      });
      assert.equal(child.status, 0, child.stderr);
      const out = JSON.parse(child.stdout);
      assert.equal(out.calls, 0);
      assert.equal(out.record, null);
      assert.deepEqual(out.messages, JSON.parse(JSON.stringify(again.messages)));
      assert.deepEqual(fs.readdirSync(here), []);
      assert.deepEqual(fs.readdirSync(there), []);
      assert.ok(!(child.stdout + child.stderr).includes(SECRET));
    });

  it('reports the store without credentials, and names bad ones', () => {
    const c = new Compactor({ contextWindow: 10000, store: storeUrl(), storeDir: s.tmpStore() });
    assert.match(c.options.store, /^s3:\/\/ctxkeel-node\/node-[0-9a-f-]+\/\?region=us-east-1/);
    assert.ok(!c.options.store.includes(SECRET) && !c.options.store.includes(ACCESS));
    assert.equal(new Compactor({ contextWindow: 10, storeDir: s.tmpStore() }).options.store,
                 null);
    assert.throws(() => new Compactor({ contextWindow: 10, store: 's3://Bad_bucket/p?region=x' }),
                  (e) => e instanceof InputError && e.message.includes('store.bucket'));
    const backend = { put() {}, get() { return null; } };
    assert.throws(() => new Compactor({ contextWindow: 10, store: storeUrl(), backend }),
                  (e) => e instanceof InputError && /\bstore\b/.test(e.message));
    assert.throws(() => new Compactor({ contextWindow: 10, store: 5 }), TypeError);
  });
});
