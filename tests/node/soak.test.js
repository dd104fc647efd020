'use strict';

// Soak, leak and limit tests for the Node addon. Each runs in a child process (started with
// --expose-gc where it measures the heap), so its memory figures are its own:
//   - 3,000 compactions on a rotating set of histories (OpenAI, Anthropic, damaged, Unicode),
//     windows (none to emergency) and summarizers (sync and async replies, throwing,
//     rejecting, '', garbage, non-string, past a short timeout, none = extractive), with
//     compactors made and closed or left to the garbage collector, and the other entry points
//     called too: the V8 heap (after forced gc), external memory and RSS stay flat;
//   - worker threads loading the addon, compacting and exiting, one after another: RSS flat;
//   - a 100,000-message history compacts, with the peak RSS during compaction a small
//     multiple of the input's JSON size;
//   - a string over CK_MAX_STRING (256 MiB) is refused with InputError CK_ETOOBIG.
// (Workers compacting side by side are in compactor.test.js: 'works inside worker threads,
// several at once'.)

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const s = require('./sessions.js');

after(s.removeStores);

const HERE = __dirname;

/** Runs `script` in a new node (with `flags`), the tests folder as its cwd; the last line of
 * its output, parsed as JSON. */
function runChild(script, { flags = [], args = [], timeout = 120000, env = {} } = {}) {
  const out = execFileSync(process.execPath, [...flags, '-e', script, ...args], {
    cwd: HERE, encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, ...env },
  });
  return JSON.parse(out.trim().split('\n').pop());
}

const MB = 1024 * 1024;

const SOAK = `
  const h = require('./helpers.js');
  const s = require('./sessions.js');
  const g = require('./generators.js');
  const { ctxkeel } = h;
  const storeDir = process.argv[1];
  const CALLS = Number(process.argv[2]);

  // A Unicode history: an empty task, CJK/RTL/emoji text, a 60 KB single-line output, a
  // missing result and a duplicated one.
  function unicodeHistory() {
    const out = [{ role: 'developer', content: '规则：不要推送到 main。🙂' }, { role: 'user', content: '' }];
    for (let t = 0; t < 16; t++) {
      const id = '调用_' + t;
      out.push({ role: 'assistant', content: 'שלום e\\u0301 ' + t,
        tool_calls: [h.call(id, 'read_file', JSON.stringify({ path: 'src/模块_' + t + '.py' }))] });
      if (t === 5) continue;
      const body = g.bigText(t % 6 === 0 ? 60000 : 900, t, t % 2 === 0);
      out.push(h.tool(id, body));
      if (t === 9) out.push(h.tool(id, body));
    }
    out.push(h.user('مرحبا 👨‍👩‍👧‍👦 continue'));
    return out;
  }

  const sleep = (ms, v) => new Promise((r) => setTimeout(r, ms, v));
  const SUMMARIZERS = [
    null,
    (r) => s.checkpointFor(r),
    async (r) => s.checkpointFor(r),
    () => { throw new Error('model overloaded'); },
    async () => { throw new Error('HTTP 529'); },
    () => '',
    () => 'lorem ipsum dolor',
    () => 42,
    (r) => sleep(30, s.checkpointFor(r)),
  ];
  // Every summarizer meets the soft and the full tier; the other tiers use a good one. (The
  // first two histories have no large output: offloads cannot reach the target, so soft and
  // full fold and ask the summarizer. The Unicode one has three 60 KB outputs.)
  const histories = [s.syntheticHistory(24, 1, { bigEvery: 0 }),
    s.anthropicHistory(24, 2, { bigEvery: 0 }), unicodeHistory()];
  const plan = [];
  for (const history of histories) {
    for (const ratio of [0.4, 0.65, 0.97, 3.0]) plan.push([history, ratio, SUMMARIZERS[1]]);
  }
  SUMMARIZERS.forEach((summarize, k) => {
    const history = histories[k % 2];
    for (const ratio of [0.75, 0.85]) plan.push([history, ratio, summarize]);
  });
  const configs = plan.map(([history, ratio, summarize]) => ({ history, summarize, options: {
    contextWindow: Math.ceil(ctxkeel.estimateTokens(history) / ratio),
    summarizeTimeout: summarize === SUMMARIZERS[SUMMARIZERS.length - 1] ? 0.005 : 30 } }));

  async function collect() {
    for (let k = 0; k < 3; k++) {
      global.gc();
      await new Promise((r) => setImmediate(r));
    }
    const m = process.memoryUsage();
    return { heapUsed: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers, rss: m.rss };
  }

  (async () => {
    const compactors = configs.map((c, k) => new ctxkeel.Compactor({ ...c.options, storeDir,
      sessionId: 'soak-' + k }));
    const samples = {};
    const tiers = {};
    const fallbacks = new Set();
    for (let i = 1; i <= CALLS; i++) {
      const k = i % configs.length;
      const { history, summarize, options } = configs[k];
      let c = compactors[k];
      const fresh = i % 10 === 0;
      if (fresh) c = new ctxkeel.Compactor({ ...options, storeDir });
      else if (Math.floor(i / configs.length) % 2 === 0) c.reset();
      const result = await c.compact(history, summarize ? { summarize } : undefined);
      tiers[result.tier] = (tiers[result.tier] || 0) + 1;
      if (result.record && result.record.fallback) fallbacks.add(result.record.fallback);
      if (ctxkeel.checkPairs(result.messages).length) throw new Error('invalid view at ' + i);
      if (i % 7 === 0) {
        ctxkeel.estimateTokens(history);
        ctxkeel.repairPairs(history);
        ctxkeel.parseAnchors(s.checkpointFor({ messages: history, tier: 'full' }));
        const id = 'soak_' + (i % 50);
        const m = c.offload(h.tool(id, 'x = 1\\n'.repeat(3000)));
        if (String(m.content).startsWith('[ctxkeel')) c.readEvidence(id, { limit: 5 });
        c.searchEvidence(null, 'value_1[0-9]');
      }
      if (fresh && i % 20 === 0) c.close(); // the others are left to the garbage collector
      if (i % 1000 === 0) samples[i] = await collect();
    }
    for (const c of compactors) c.close();
    console.log(JSON.stringify({ samples, tiers, fallbacks: [...fallbacks] }));
  })().catch((err) => { console.error(err); process.exit(1); });
`;

describe('soak', () => {
  it('keeps the heap, external memory and RSS flat over 3,000 compactions', () => {
    // Measured (2-core machine, about 15-20 s): heap -0.06..-0.03 MB, external +0 MB, RSS
    // +1.4..+7.4 MB between the 1,000th and the 3,000th call.
    const { samples, tiers, fallbacks } = runChild(SOAK, { flags: ['--expose-gc'],
      args: [s.tmpStore(), '3000'], timeout: 180000 });
    // Every tier and every way a summarizer fails were exercised.
    assert.deepEqual(Object.keys(tiers).sort(), ['emergency', 'full', 'none', 'soft', 'warn']);
    for (const reason of [/^summarizer failed: .*model overloaded/,
      /^summarizer failed: .*HTTP 529/, /^summarizer returned an empty reply/,
      /no usable anchors/, /not a string/, /timed out/]) {
      assert.ok(fallbacks.some((f) => reason.test(f)), `${reason} not in ${fallbacks.join(' | ')}`);
    }
    const [a, b, c] = [samples[1000], samples[2000], samples[3000]];
    const d = (key, x, y) => ((y[key] - x[key]) / MB).toFixed(2);
    const report = `heap ${d('heapUsed', b, c)} / ${d('heapUsed', a, c)} MB, external ` +
      `${d('external', a, c)} MB, rss ${d('rss', b, c)} / ${d('rss', a, c)} MB`;
    console.log(report);
    assert.ok(c.heapUsed - b.heapUsed < 1 * MB, report);
    assert.ok(c.heapUsed - a.heapUsed < 2 * MB, report);
    assert.ok(c.external - a.external < 1 * MB, report);
    assert.ok(c.rss - a.rss < 32 * MB, report);
  });

  it('frees what each worker thread loaded when it exits', () => {
    // Measured: RSS +3.0..+3.6 MB between the 10th and the 40th worker (each one loads the
    // addon, compacts 10 times, exits). About 5 s.
    const script = `
      const { Worker } = require('node:worker_threads');
      const storeDir = process.argv[1];
      const code = \`
        const { parentPort, workerData } = require('node:worker_threads');
        const s = require(workerData.dir + '/sessions.js');
        const { ctxkeel } = require(workerData.dir + '/helpers.js');
        (async () => {
          const history = s.syntheticHistory(20, 3);
          const window = Math.ceil(ctxkeel.estimateTokens(history) / 0.85);
          for (let i = 0; i < 10; i++) {
            const c = new ctxkeel.Compactor({ contextWindow: window, storeDir: workerData.store });
            const r = await c.compact(history, { summarize: async (q) => s.checkpointFor(q) });
            if (r.tier !== 'full' || r.record.fallback !== null) throw new Error('bad ' + r.tier);
            if (i % 2) c.close();
          }
          parentPort.postMessage('done');
        })();\`;
      const run = () => new Promise((resolve, reject) => {
        const w = new Worker(code, { eval: true,
          workerData: { dir: process.cwd(), store: storeDir } });
        let done = false;
        w.on('message', (m) => { done = m === 'done'; });
        w.on('error', reject);
        w.on('exit', (c) => (done && c === 0 ? resolve() : reject(new Error('exit ' + c))));
      });
      (async () => {
        const rss = {};
        for (let k = 1; k <= 40; k++) {
          await run();
          if (k === 10 || k === 40) { global.gc(); rss[k] = process.memoryUsage().rss; }
        }
        console.log(JSON.stringify(rss));
      })().catch((err) => { console.error(err); process.exit(1); });`;
    const rss = runChild(script, { flags: ['--expose-gc'], args: [s.tmpStore()] });
    const growth = (rss[40] - rss[10]) / MB;
    console.log(`RSS after 40 workers vs 10: ${growth.toFixed(1)} MB`);
    assert.ok(growth < 24, `RSS grew by ${growth.toFixed(1)} MB over 30 workers`);
  });
});

const HUNDRED_K = `
  const h = require('./helpers.js');
  const { ctxkeel } = h;
  const messages = [h.sys('You are a careful coding agent.'),
    h.user('Fix the failing test in src/app/parser.py.')];
  for (let i = 0; messages.length < 100000 - 3; i++) {
    const id = 'call_' + i;
    messages.push({ role: 'assistant', content: 'Step ' + i + ': reading src/m_' + (i % 97) + '.py',
      tool_calls: [h.call(id, 'read_file',
        JSON.stringify({ path: 'src/m_' + (i % 97) + '.py' }))] });
    const lines = [];
    for (let k = 0; k < 3 + (i % 7); k++) {
      lines.push('line ' + k + ' of output ' + i + ': value = compute(' + k + ')');
    }
    messages.push(h.tool(id, lines.join('\\n')));
    if (i % 50 === 49) messages.push(h.user('Note ' + i + ': never push to main.'));
  }
  while (messages.length < 100000) messages.push(h.user('Go on (' + messages.length + ').'));
  const jsonBytes = messages.reduce((n, m) => n + Buffer.byteLength(JSON.stringify(m)), 0);
  const tokens = ctxkeel.estimateTokens(messages);
  const window = Math.floor(tokens / 0.85);
  const c = new ctxkeel.Compactor({ contextWindow: window, storeDir: process.argv[1] });
  global.gc();
  // The peak is read as VmHWM after resetting it here: a lifetime peak would count building
  // and estimating the history, whose memory may or may not have gone back to the system.
  const fs = require('fs');
  fs.writeFileSync('/proc/self/clear_refs', '5');
  const rssBefore = process.memoryUsage().rss;
  const started = Date.now();
  c.compact(messages).then((r) => {
    const seconds = (Date.now() - started) / 1000;
    const hwm = /VmHWM:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    const maxRss = hwm ? Number(hwm[1]) * 1024 : process.resourceUsage().maxRSS * 1024;
    console.log(JSON.stringify({
      n: messages.length, jsonBytes, tokens, window, rssBefore, maxRss, seconds,
      tier: r.tier, tokensAfter: r.tokensAfter, pairs: ctxkeel.checkPairs(r.messages).length,
      pinned: r.messages[0] === messages[0] && r.messages[1] === messages[1],
      newest: r.messages[r.messages.length - 1] === messages[messages.length - 1],
      checkpoints: r.messages.filter((m) =>
        String(m.content).startsWith('[Context Compaction]')).length,
    }));
  }).catch((err) => { console.error(err); process.exit(1); });
`;

describe('limits', () => {
  it('compacts a 100,000-message history in bounded memory', () => {
    // Measured: 23.9 MiB of JSON; RSS 147-149 MiB before compact() (the JS objects), peak
    // +34.7..+36.4 MiB during it (1.45-1.52 x the JSON size, of which ~3 MiB are the records
    // node/unchanged.js keeps for the next call; 1.31-1.34 x before it, and 1.39-1.40 x while
    // check_pairs sized its id map by every part rather than by the calls); about 0.5 s.
    // glibc returns freed heap to the system or keeps it in its free lists depending on how
    // the blocks lay, so the RSS before compact() held 23 MB of estimateTokens' freed memory in
    // one build and none in another, and the growth measured compact() plus that luck (+36 MB
    // against +52 MB for the same need). With trimming off, the freed memory stays counted in
    // the RSS before, and the growth is what compact() needs beyond what the process holds.
    const out = runChild(HUNDRED_K, { flags: ['--expose-gc'], args: [s.tmpStore()],
      timeout: 300000, env: { GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=268435456' } });
    assert.equal(out.n, 100000);
    assert.equal(out.tier, 'full');
    assert.equal(out.pairs, 0);
    assert.ok(out.pinned && out.newest);
    assert.equal(out.checkpoints, 1);
    assert.ok(out.tokensAfter <= 0.7 * out.window, JSON.stringify(out));
    const growth = Math.max(out.maxRss - out.rssBefore, 0);
    console.log(`100k messages: ${(out.jsonBytes / MB).toFixed(1)} MB JSON, RSS before ` +
      `${(out.rssBefore / MB).toFixed(0)} MB, peak +${(growth / MB).toFixed(1)} MB ` +
      `(${(growth / out.jsonBytes).toFixed(2)} x), ${out.seconds.toFixed(1)} s`);
    assert.ok(growth <= 2 * out.jsonBytes,
      `peak RSS grew by ${(growth / MB).toFixed(1)} MB for ${(out.jsonBytes / MB).toFixed(1)} MB`);
  });

  const TOO_BIG = `
    const { ctxkeel } = require('./helpers.js');
    const big = 'a'.repeat(256 * 2 ** 20 + 1); // CK_MAX_STRING + 1 bytes
    const half = big.slice(0, 128 * 2 ** 20 + 1); // two of them joined with "\\n" are over it
    const task = { role: 'user', content: 'task' };
    const call = { role: 'assistant', content: null,
      tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{}' } }] };
    const cases = {
      'messages[1].content': [task, { role: 'user', content: big }],
      'messages[1].content[1].text': [task, { role: 'user', content: [{ type: 'text', text: 'x' },
        { type: 'text', text: big }] }],
      'messages[2].content': [task, call, { role: 'tool', tool_call_id: 'a', content: big }],
      'messages[1].tool_calls[0].function.arguments': [task, { role: 'assistant', content: null,
        tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: big } }] }],
      'messages[1].tool_calls[0].id': [task, { role: 'assistant', content: null,
        tool_calls: [{ id: big, type: 'function', function: { name: 'f', arguments: '{}' } }] }],
      'messages[2].content[0].content': [task, { role: 'assistant', content: [
        { type: 'tool_use', id: 'a', name: 'f', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: big }] }],
      // Joined text: each piece is within the limit, the whole is not.
      'messages[3].content': [task, call, { role: 'tool', tool_call_id: 'a', content: 'ok' },
        { role: 'tool', tool_call_id: 'a', content: [{ type: 'text', text: half }, half] }],
      'messages[2].content[1].content': [task, { role: 'assistant', content: [
        { type: 'tool_use', id: 'a', name: 'f', input: {} },
        { type: 'tool_use', id: 'b', name: 'f', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 'ok' },
        { type: 'tool_result', tool_use_id: 'b', content: [{ type: 'text', text: half },
          { type: 'text', text: half }] }] }],
    };
    (async () => {
      const out = {};
      for (const [where, messages] of Object.entries(cases)) {
        for (const [name, fn] of [['estimateTokens', () => ctxkeel.estimateTokens(messages)],
          ['checkPairs', () => ctxkeel.checkPairs(messages)],
          ['compact', () => new ctxkeel.Compactor({ contextWindow: 1000,
            storeDir: process.argv[1] }).compact(messages)]]) {
          try {
            await fn();
            out[where + ' ' + name] = null;
          } catch (err) {
            out[where + ' ' + name] = { name: err.name, code: err.code, index: err.index,
              where: err.where, message: err.message };
          }
        }
      }
      out.maxRss = process.resourceUsage().maxRSS * 1024;
      console.log(JSON.stringify(out));
    })();
  `;
  const WHERE = ['messages[1].content', 'messages[1].content[1].text', 'messages[2].content',
    'messages[1].tool_calls[0].function.arguments', 'messages[1].tool_calls[0].id',
    'messages[2].content[0].content', 'messages[3].content', 'messages[2].content[1].content'];
  let tooBig = null;
  const refusals = () => {
    // One child for every case: about 1.5 s and 306 MB peak RSS (the 256 MiB and 128 MiB strings;
    // the binding measures a string before it copies it, so an over-limit one is never copied:
    // 561 MB before it did).
    if (tooBig === null) tooBig = runChild(TOO_BIG, { args: [s.tmpStore()], timeout: 180000 });
    return tooBig;
  };

  it('refuses a string over 256 MiB with InputError CK_ETOOBIG naming the message', () => {
    const out = refusals();
    for (const where of WHERE) {
      for (const name of ['estimateTokens', 'checkPairs', 'compact']) {
        const got = out[`${where} ${name}`];
        assert.ok(got, `${name} accepted a string over 256 MiB in ${where}`);
        const index = Number(where.slice('messages['.length, where.indexOf(']')));
        assert.deepEqual([got.name, got.code, got.index], ['InputError', 'CK_ETOOBIG', index],
          JSON.stringify(got));
        assert.match(got.message, new RegExp(`messages\\[${index}\\]`));
      }
    }
    // One copy of the big string would not pass this bound.
    assert.ok(out.maxRss < 512 * MB, `peak RSS ${(out.maxRss / MB).toFixed(0)} MB`);
  });

  it('names the field that is too large, as the other InputErrors do', () => {
    const out = refusals();
    for (const where of WHERE) {
      for (const name of ['estimateTokens', 'checkPairs', 'compact']) {
        const got = out[`${where} ${name}`];
        assert.equal(got.where, where, JSON.stringify(got));
        assert.equal(got.message, `ctxkeel: ${where}: a string is larger than 256 MiB`);
      }
    }
  });
});

