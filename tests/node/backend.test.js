'use strict';

// A host evidence backend: every large output of a real transcript goes through put and comes
// back exactly through get (paging, search), with plain and Promise-returning methods; failing
// puts fail open and are recorded, failing gets fail the read with a clear error; keys never
// escape; the event loop keeps running while the backend's Promises are pending.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const h = require('./helpers.js');
const s = require('./sessions.js');

const { ctxkeel } = h;
const { Compactor, estimateTokens, InputError, CtxkeelError } = ctxkeel;

after(s.removeStores);

const KEY = /^tool_results\/[A-Za-z0-9._~-]+\/[A-Za-z0-9._~-]+\.txt$/;
const corpus = h.loadCorpus();
const transcript = (corpus.find(([name]) => name === 'openhands-ponyc-4588.json') || [])[1];
const skip = transcript ? false : 'shared/corpus is absent';

/**
 * A Map-backed backend. `async` makes both methods answer through a Promise settled on a later
 * turn of the event loop; failPut / failGet (key -> boolean) make them throw or reject.
 */
function mapBackend({ async = false, failPut = () => false, failGet = () => false } = {}) {
  const store = new Map();
  const calls = [];
  const answer = (fn) => {
    if (!async) return fn();
    return new Promise((resolve, reject) => setImmediate(() => {
      try {
        resolve(fn());
      } catch (err) {
        reject(err);
      }
    }));
  };
  return {
    store,
    calls,
    put(key, text) {
      calls.push(['put', key]);
      return answer(() => {
        if (failPut(key)) throw new Error(`disk full while writing ${key}`);
        store.set(key, text);
      });
    },
    get(key) {
      calls.push(['get', key]);
      return answer(() => {
        if (failGet(key)) throw new Error('backend is down');
        return store.has(key) ? store.get(key) : null;
      });
    },
  };
}

function compactor(backend, options = {}) {
  return new Compactor({ contextWindow: 100000, storeDir: s.tmpStore(), backend, ...options });
}

/** Reads a piece of evidence page by page until "" and joins the pages. */
async function readAll(c, ref, limit) {
  let text = '';
  for (let offset = 0; ; offset += limit) {
    const page = await c.readEvidence(ref, { offset, limit });
    if (page === '') return text;
    text += page;
  }
}

/** The transcript compacted at the warn tier (offloads only) with outputs over 1000 bytes. */
async function compactTranscript(c, messages) {
  const result = await c.compact(messages);
  assert.equal(result.tier, 'warn');
  s.assertView(messages, result);
  return result;
}

function warnCompactor(backend, messages) {
  const window = Math.ceil(estimateTokens(messages) / 0.65);
  return compactor(backend, { contextWindow: window, offloadThreshold: 1000 });
}

/** Every file below `dir`, as paths relative to it. */
function walk(dir, base = dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    return e.isDirectory() ? walk(full, base) : [path.relative(base, full)];
  });
}

for (const async of [false, true]) {
  const kind = async ? 'Promise-returning' : 'plain';
  describe(`a ${kind} backend on a real transcript`, { skip }, () => {
    it('round-trips every offloaded output exactly: paging, the placeholder key, search',
      async () => {
        const messages = transcript.slice(0, 95);
        const backend = mapBackend({ async });
        const c = warnCompactor(backend, messages);
        const result = await compactTranscript(c, messages);
        const offloaded = result.record.offloaded;
        const tail = result.record.preserved_tail;
        const large = messages.slice(0, messages.length - tail)
          .filter((m) => m.role === 'tool' && Buffer.byteLength(m.content) > 1000);
        assert.ok(large.length >= 8, `only ${large.length} large outputs`);
        assert.deepEqual(offloaded.map((o) => o.tool_call_id).sort(),
          large.map((m) => m.tool_call_id).sort(), 'not every large output was offloaded');
        assert.equal(backend.store.size, offloaded.length);
        for (const m of large) {
          const o = offloaded.find((x) => x.tool_call_id === m.tool_call_id);
          assert.match(o.path, KEY);
          assert.equal(backend.store.get(o.path), m.content, `${o.path} holds other text`);
          assert.equal(await readAll(c, m.tool_call_id, 7), m.content);
          // The key the placeholder states reads the same text.
          const view = result.messages.find((x) => x.tool_call_id === m.tool_call_id);
          assert.ok(view.content.includes(`full text: ${o.path}\n`));
          assert.equal(await c.readEvidence(o.path, { limit: 100000 }), m.content);
        }
        // Search reads through get too: one output, then the whole session. Lines count from
        // 0, so reading at the line found lands on it.
        const hits = await c.searchEvidence('toolu_43', 'Unable to locate');
        assert.deepEqual(hits, [{ ref: 'toolu_43', line: 29,
          text: 'E: Unable to locate package llvm-dev' }]);
        const log = messages.find((m) => m.tool_call_id === 'toolu_43').content;
        assert.equal(await c.readEvidence('toolu_43', { offset: 29, limit: 1 }),
          log.split('\n')[29] + (log.split('\n').length > 30 ? '\n' : ''));
        assert.equal(log.split('\n')[29], 'E: Unable to locate package llvm-dev');
        const all = await c.searchEvidence(null, 'Temporary failure resolving');
        assert.ok(all.length >= 4 && all.every((hit) => hit.ref === 'toolu_43'));
        // Evidence went to the backend only; the audit log stays under storeDir.
        // (beside the log, the store's key for the records' integrity tags, private).
        const files = walk(c.options.storeDir);
        assert.deepEqual(files, [path.join('compactions', '.key'),
          path.join('compactions', `${c.sessionId}.jsonl`)]);
        assert.equal(fs.statSync(path.join(c.options.storeDir, 'compactions', '.key')).mode &
          0o777, 0o600);
        assert.ok(backend.calls.every(([, key]) => KEY.test(key)));
      });

    it('returns Promises from offload, readEvidence, searchEvidence and handleReadEvidence',
      async () => {
        const backend = mapBackend({ async });
        const c = compactor(backend, { toolOffloadThreshold: 100 });
        const text = Array.from({ length: 300 }, (_, i) => `line ${i}`).join('\n');
        const pending = c.offload(h.tool('call_x', text));
        assert.ok(pending instanceof Promise);
        const out = await pending;
        assert.ok(out.content.startsWith(s.PLACEHOLDER));
        const read = c.readEvidence('call_x', { offset: 299, limit: 1 });
        assert.ok(read instanceof Promise);
        assert.equal(await read, 'line 299');
        assert.deepEqual(await c.searchEvidence(null, '^line 12$'),
          [{ ref: 'call_x', line: 12, text: 'line 12' }]);
        const pendingAnswer = c.handleReadEvidence(h.call('r1', 'read_evidence',
          JSON.stringify({ ref: 'call_x', offset: 0, limit: 2 })));
        assert.ok(pendingAnswer instanceof Promise);
        const answer = await pendingAnswer;
        assert.deepEqual(answer, { role: 'tool', tool_call_id: 'r1', content: 'line 0\nline 1\n' });
        // A pattern searches through get as well; each match names the offset that reads it.
        const found = await c.handleReadEvidence(h.call('r3', 'read_evidence',
          JSON.stringify({ pattern: '^line 12$' })));
        assert.equal(found.content, 'ref="call_x" offset=12: line 12\n');
        const unknown = await c.handleReadEvidence(h.call('r2', 'read_evidence',
          JSON.stringify({ ref: 'nope' })));
        assert.match(unknown.content, /^read_evidence: cannot read nope: no evidence/);
        // The call's own shape is the host's mistake: a rejection, not an answer.
        await assert.rejects(c.handleReadEvidence(h.call('r4', 'bash', '{}')), RangeError);
        await assert.rejects(c.readEvidence('nope'), (err) => err instanceof InputError &&
          err.code === 'CK_EINVAL');
        // Argument errors reject too, rather than throw.
        await assert.rejects(c.readEvidence(5), TypeError);
        // A small output is the very same message, still through a Promise.
        const small = h.tool('call_small', 'tiny');
        assert.equal(await c.offload(small), small);
      });

    it('fails open when put fails: the output stays, the record names key and reason',
      async () => {
        const messages = transcript.slice(0, 95);
        const backend = mapBackend({ async, failPut: (key) => key.endsWith('/toolu_43.txt') });
        const c = warnCompactor(backend, messages);
        const result = await compactTranscript(c, messages);
        const log = messages.find((m) => m.tool_call_id === 'toolu_43');
        assert.ok(result.messages.includes(log), 'the output did not stay in the view');
        assert.ok(!result.record.offloaded.some((o) => o.tool_call_id === 'toolu_43'));
        assert.ok(result.record.offloaded.length >= 7, 'the other outputs were not offloaded');
        const error = result.record.error;
        assert.match(error, /offload of toolu_43 failed/);
        assert.match(error, /tool_results\/[^ ]+\/toolu_43\.txt/);
        assert.match(error, async ? /put rejected: disk full while writing/
          : /put threw: disk full while writing/);
        await assert.rejects(c.readEvidence('toolu_43'), InputError);
        // At tool time the message comes back as it was.
        const big = h.tool('toolu_43', 'z'.repeat(20000));
        assert.equal(await c.offload(big), big);
      });

    it('fails a read with a clear error when get fails, naming the ref', async () => {
      let down = false;
      const backend = mapBackend({ async, failGet: () => down });
      const c = compactor(backend, { toolOffloadThreshold: 100 });
      await c.offload(h.tool('call_7', 'q'.repeat(500)));
      down = true;
      await assert.rejects(c.readEvidence('call_7'), (err) => {
        assert.ok(err instanceof CtxkeelError);
        assert.equal(err.code, 'CK_EIO');
        assert.match(err.message, /tool_results\/[^ ]+\/call_7\.txt/);
        assert.match(err.message, async ? /get rejected: backend is down/
          : /get threw: backend is down/);
        assert.ok(err.cause instanceof Error && err.cause.message === 'backend is down');
        return true;
      });
      await assert.rejects(c.searchEvidence('call_7', 'q'), { code: 'CK_EIO' });
      down = false;
      assert.equal(await c.readEvidence('call_7'), 'q'.repeat(500));
    });
  });
}

describe('a backend: wrong answers, keys, busy rule, lifetimes', () => {
  it('treats a get that returns something else than text or null as a failure', async () => {
    const backend = mapBackend();
    const c = compactor(backend, { toolOffloadThreshold: 10 });
    await c.offload(h.tool('call_n', 'n'.repeat(100)));
    backend.get = () => 42;
    await assert.rejects(c.readEvidence('call_n'), (err) => err.code === 'CK_EIO' &&
      /get failed: returned a number, not a string or null/.test(err.message));
    backend.get = async () => ({ text: 'x' });
    await assert.rejects(c.readEvidence('call_n'), /returned an object, not a string or null/);
    backend.get = () => undefined;
    await assert.rejects(c.readEvidence('call_n'), { code: 'CK_EINVAL' });
  });

  it('never lets a hostile id escape its key prefix, and keeps distinct ids apart', async () => {
    const ids = ['../../../etc/passwd', '/abs/path', 'a/b\\c', '.hidden', '..', 'x'.repeat(300),
      'ünï 😀', 'Case', 'case', 'call:1?2*3', 'tool_results/other/x.txt'];
    const backend = mapBackend({ async: true });
    const c = compactor(backend, { toolOffloadThreshold: 10 });
    for (const [i, id] of ids.entries()) {
      const out = await c.offload(h.tool(id, `secret ${i} `.repeat(10)));
      assert.ok(out.content.startsWith(s.PLACEHOLDER), `id ${JSON.stringify(id)} not offloaded`);
    }
    assert.equal(backend.store.size, ids.length, 'two ids share a key');
    const prefix = `tool_results/${c.sessionId.replace(/[^A-Za-z0-9._-]/g, '')}/`;
    for (const key of backend.store.keys()) {
      assert.match(key, KEY);
      assert.ok(key.startsWith(prefix), key);
      const name = key.slice(prefix.length);
      assert.ok(!name.includes('/') && !name.startsWith('.'), key);
    }
    for (const [i, id] of ids.entries()) {
      assert.equal(await c.readEvidence(id), `secret ${i} `.repeat(10), id);
    }
  });

  it('runs one call at a time: a second one rejects with CK_EBUSY', async () => {
    const backend = mapBackend({ async: true });
    const c = compactor(backend, { toolOffloadThreshold: 10 });
    await c.offload(h.tool('call_b', 'b'.repeat(100)));
    const first = c.readEvidence('call_b');
    await assert.rejects(c.readEvidence('call_b'), { code: 'CK_EBUSY' });
    assert.throws(() => c.observeUsage(100), { code: 'CK_EBUSY' });
    assert.throws(() => c.reset(), { code: 'CK_EBUSY' });
    assert.equal(await first, 'b'.repeat(100));
    // During a compaction too.
    const history = s.syntheticHistory(30, 2);
    const compaction = c.compact(history);
    await assert.rejects(c.readEvidence('call_b'), { code: 'CK_EBUSY' });
    await compaction;
    assert.equal(await c.readEvidence('call_b'), 'b'.repeat(100));
  });

  it('keeps the event loop running while put waits: other tasks make progress', async () => {
    const waiting = [];
    const store = new Map();
    const backend = {
      put(key, text) {
        return new Promise((resolve) => waiting.push(() => {
          store.set(key, text);
          resolve();
        }));
      },
      get: (key) => store.get(key) ?? null,
    };
    // Another task: it alone settles the pending puts, one per turn of the loop. If the loop
    // waited for the compaction, no put would ever settle and the test would time out.
    let done = false;
    let turns = 0;
    let released = 0;
    const other = (async () => {
      while (!done) {
        await new Promise((resolve) => setImmediate(resolve));
        turns++;
        const next = waiting.shift();
        if (next) {
          released++;
          next();
        }
      }
    })();
    const history = s.syntheticHistory(40, 5);
    const window = Math.ceil(estimateTokens(history) / 0.65);
    const c = compactor(backend, { contextWindow: window, offloadThreshold: 2000 });
    const result = await c.compact(history);
    done = true;
    await other;
    assert.ok(result.record.offloaded.length > 0);
    assert.equal(released, result.record.offloaded.length, 'a put was not waited for');
    assert.ok(turns > released, 'the other task did not run while the puts were pending');
    for (const o of result.record.offloaded) assert.ok(store.has(o.path));
  });

  it('finishes a call in flight after close(), then refuses with CK_ECLOSED', async () => {
    const backend = mapBackend({ async: true });
    const c = compactor(backend, { toolOffloadThreshold: 10 });
    await c.offload(h.tool('call_c', 'c'.repeat(100)));
    const reading = c.readEvidence('call_c');
    c.close();
    assert.equal(await reading, 'c'.repeat(100));
    await assert.rejects(c.readEvidence('call_c'), { code: 'CK_ECLOSED' });
  });

  it('lets a worker thread be terminated while a put waits on a Promise that never settles',
    { timeout: 60000 }, async () => {
      // Without a check that JS can still run, the terminating Worker would wait forever for
      // the compactor's work, which waits for the Promise.
      const { Worker } = require('node:worker_threads');
      const source = `
        const { parentPort, workerData } = require('node:worker_threads');
        const { Compactor } = require(workerData.index);
        const backend = { put: () => new Promise(() => {}), get: () => null };
        const c = new Compactor({ contextWindow: 1000, storeDir: workerData.store,
          toolOffloadThreshold: 10, backend });
        c.offload({ role: 'tool', tool_call_id: 'a', content: 'z'.repeat(100) });
        setImmediate(() => parentPort.postMessage('waiting'));`;
      const worker = new Worker(source, { eval: true,
        workerData: { index: path.join(h.repoRoot, 'node', 'index.js'), store: s.tmpStore() } });
      const [message] = await require('node:events').once(worker, 'message');
      assert.equal(message, 'waiting');
      assert.equal(await worker.terminate(), 1);
    });

  it('refuses a backend without both methods, naming the option', () => {
    const store = s.tmpStore();
    const putOnly = { put() {} };
    assert.throws(() => new Compactor({ contextWindow: 10, storeDir: store, backend: putOnly }),
      { name: 'TypeError', message: /options\.backend\.get must be a function, not undefined/ });
    assert.throws(() => new Compactor({ contextWindow: 10, storeDir: store, backend: 'redis' }),
      { name: 'TypeError', message: /options\.backend must be an object with put and get/ });
    const backend = mapBackend();
    const c = new Compactor({ contextWindow: 10, storeDir: store, backend });
    assert.equal(c.options.backend, backend);
  });
});

describe('a backend that never answers', () => {
  /** put and get return Promises that never settle; `calls` records them. */
  function hung() {
    const calls = [];
    return {
      calls,
      put(key) {
        calls.push(['put', key]);
        return new Promise(() => {});
      },
      get(key) {
        calls.push(['get', key]);
        return new Promise(() => {});
      },
    };
  }

  const history = s.syntheticHistory(30);
  const window = Math.ceil(estimateTokens(history) / 0.65);

  it('times out after backendTimeout: outputs stay in the view, the record says why, ' +
    'nothing stays busy', { timeout: 60000 }, async () => {
    const backend = hung();
    const c = compactor(backend, { contextWindow: window, backendTimeout: 0.2 });
    assert.equal(c.options.backendTimeout, 0.2);
    const result = await c.compact(history);
    assert.equal(result.tier, 'warn');
    assert.deepEqual(result.record.offloaded, []);
    assert.ok(result.messages.every((m) => history.includes(m)));
    assert.match(result.record.error, /backend timed out after 0\.2 s/);
    // One wait per step: the backend is not called again once it timed out.
    assert.match(result.record.error, /backend timed out earlier in this call/);
    assert.equal(backend.calls.length, 1);
    // The compactor is free: the next calls run, and time out the same way.
    const again = await c.compact(history);
    assert.deepEqual(again.record.offloaded, []);
    const message = h.tool('call_big', 'z'.repeat(100000));
    assert.equal(await c.offload(message), message);
    await assert.rejects(c.readEvidence('call_big'), { code: 'CK_EIO', message: /timed out/ });
    await assert.rejects(c.searchEvidence('call_big', 'z'), { code: 'CK_EIO' });
    assert.equal(backend.calls.length, 5);
    c.observeUsage(100); // not busy
  });

  it('stops waiting when the signal given to compact() aborts', { timeout: 60000 }, async () => {
    const backend = hung();
    const c = compactor(backend, { contextWindow: window, backendTimeout: 3600 });
    const controller = new AbortController();
    const pending = c.compact(history, { signal: controller.signal });
    while (backend.calls.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const reason = new Error('the user pressed stop');
    controller.abort(reason);
    await assert.rejects(pending, (err) => err.name === 'AbortError' && err.cause === reason);
    assert.equal(backend.calls.length, 1);
    c.reset(); // not busy
    c.observeUsage(100);
  });

  it('takes backendTimeout within the core\'s range only', () => {
    const store = s.tmpStore();
    const backend = mapBackend();
    assert.equal(new Compactor({ contextWindow: 10, storeDir: store, backend })
      .options.backendTimeout, 10);
    for (const bad of [0, -1, NaN, Infinity, 86401]) {
      assert.throws(() => new Compactor({ contextWindow: 10, storeDir: store, backend,
        backendTimeout: bad }), { name: 'InputError', code: 'CK_EINVAL', where: 'backend_timeout' },
      String(bad));
    }
    for (const bad of ['10', true, {}]) {
      assert.throws(() => new Compactor({ contextWindow: 10, storeDir: store, backend,
        backendTimeout: bad }), { name: 'TypeError', message: /options\.backendTimeout/ });
    }
  });
});
