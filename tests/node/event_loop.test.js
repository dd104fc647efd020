'use strict';

// The host's event loop during a compaction: the core's work and the store's writes run on the
// libuv pool, with the default file store and no backend; only reading the new messages and
// building the view happen on the loop. And fsync is spent only where durability needs it.

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { execFileSync } = require('node:child_process');
const h = require('./helpers.js');
const s = require('./sessions.js');

const { ctxkeel } = h;
const { Compactor } = ctxkeel;

after(s.removeStores);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** How many times the loop turns while `promise` is pending: a setImmediate chain (which keeps
 * the loop spinning), or with `ms` a chain of timers that far apart. */
async function turnsDuring(promise, ms = 0) {
  let turns = 0;
  let pending = true;
  const later = (fn) => (ms ? setTimeout(fn, ms) : setImmediate(fn));
  const tick = () => {
    if (!pending) return;
    turns++;
    later(tick);
  };
  later(tick);
  try {
    return { value: await promise, turns };
  } finally {
    pending = false;
  }
}

/** The result of call `id` with an output of about `tokens` tokens. */
function bigResult(id, tokens) {
  const lines = (n) => Array.from({ length: n }, (_, i) => `line ${i}: value=${i * 7} ok`);
  const per = ctxkeel.estimateTokens([h.tool(id, lines(1000).join('\n'))]) / 1000;
  return h.tool(id, lines(Math.ceil(tokens / per)).join('\n'));
}

describe('the event loop during compact()', () => {
  it('stays free while a 5,000-message history is compacted at the full tier', async () => {
    const history = s.syntheticHistory(2370, 7, { bigEvery: 0 });
    assert.ok(history.length >= 5000);
    const contextWindow = Math.ceil(ctxkeel.estimateTokens(history) / 0.55);
    const store = s.tmpStore();
    const compactor = new Compactor({ contextWindow, storeDir: store, sessionId: 'loop' });
    assert.equal((await compactor.compact(history)).tier, 'none');
    // A new turn whose output alone is 30% of the window: the history goes past `full`.
    history.push(h.asst(h.call('call_big', 'bash', '{"cmd":"make test"}')));
    history.push(bigResult('call_big', contextWindow * 0.3));
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    await sleep(20); // the histogram's timer is running before compact() starts
    const started = process.hrtime.bigint();
    const { value: result, turns } = await turnsDuring(compactor.compact(history), 1);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    await sleep(5); // a block at the very end is sampled too
    delay.disable();
    console.log(`event loop during a full compaction of ${history.length} messages: ` +
      `max delay ${(delay.max / 1e6).toFixed(1)} ms, compact() took ${ms.toFixed(1)} ms, ` +
      `${turns} loop turns`);
    assert.equal(result.tier, 'full');
    assert.equal(result.record.fallback, null);
    s.assertView(history, result, { window: contextWindow });
    // The large output went to the store, written on a worker.
    const last = result.messages[result.messages.length - 1];
    assert.ok(s.hasPlaceholder(last), 'the large output was not offloaded');
    assert.ok(fs.readdirSync(path.join(store, 'tool_results', 'loop')).includes('call_big.txt'));
    // No timing bound: on a loaded 2-core machine the max delay ranged 16-50 ms of a
    // 110-190 ms compact() (the core on the loop: all of it, 110-130 ms), too wide for one. What
    // holds on any machine: the loop turned while the core worked, which it cannot when the
    // core runs inside compact()'s own call.
    assert.ok(turns >= 1, 'the event loop never turned during compact()');
  });

  it('turns while begin() runs the core, without a summarizer and with one', async () => {
    const history = s.syntheticHistory(400, 3);
    const contextWindow = Math.ceil(ctxkeel.estimateTokens(history) / 0.85);
    for (const summarize of [undefined, s.checkpointFor]) {
      const compactor = new Compactor({ contextWindow, storeDir: s.tmpStore() });
      const { value: result, turns } = await turnsDuring(compactor.compact(history,
        summarize ? { summarize } : undefined));
      assert.equal(result.tier, 'full');
      assert.ok(turns >= 1);
      // The steady state: nothing to do, the caller's list back as it was viewed.
      const again = await compactor.compact(history, summarize ? { summarize } : undefined);
      assert.deepEqual(again.messages, result.messages);
      compactor.close();
    }
  });
});

describe('the common call', () => {
  // The addon's work items on the libuv pool are async resources of this type.
  const poolWork = (fn) => {
    let made = 0;
    const hook = require('node:async_hooks').createHook({
      init(id, type) {
        if (type === 'ctxkeel.Compactor') made++;
      },
    }).enable();
    return Promise.resolve(fn()).then((value) => ({ value, made }),
      (err) => ({ err, made })).finally(() => hook.disable());
  };

  it('is decided on the loop; a compaction goes to the pool', async () => {
    const history = s.syntheticHistory(200, 3, { bigEvery: 4 });
    const total = ctxkeel.estimateTokens(history);
    const store = s.tmpStore();
    const kept = new Compactor({ contextWindow: total * 10, storeDir: store, sessionId: 'q' });
    const first = await poolWork(() => kept.compact(history));
    assert.equal(first.value.tier, 'none');
    // Tier none, nothing to store, no record: no work item at all, for compact() and for the
    // append-only session's view() alike, and the result is the one a fresh compactor gives.
    for (let i = 0; i < 3; i++) {
      const again = await poolWork(() => kept.compact(history));
      assert.equal(again.made, 0);
      assert.equal(again.value.tier, 'none');
      assert.equal(again.value.record, null);
      assert.deepEqual(again.value.messages, first.value.messages);
    }
    const session = new Compactor({ contextWindow: total * 10, storeDir: store,
      sessionId: 'q-session' });
    for (const m of history) session.append(m);
    await session.view();
    const viewed = await poolWork(() => session.view());
    assert.equal(viewed.made, 0);
    assert.deepEqual(viewed.value.messages, history);
    // A compaction at the full tier writes the store: the pool does it.
    const tight = new Compactor({ contextWindow: Math.ceil(total / 0.85), storeDir: store,
      sessionId: 'q-full' });
    const full = await poolWork(() => tight.compact(history));
    assert.equal(full.value.tier, 'full');
    assert.ok(full.made >= 1);
    // So does a call whose repair stores a dropped result (an orphan), every time.
    const orphaned = history.concat([h.tool('call_nobody', 'stray output')]);
    for (let i = 0; i < 2; i++) {
      const out = await poolWork(() => kept.compact(orphaned));
      assert.ok(out.made >= 1);
      assert.ok(out.value.repairs.some((r) => r.kind === 'orphan_dropped'));
    }
    for (const c of [kept, session, tight]) c.close();
  });
});

/** Whether strace can trace a child here (a container may forbid ptrace). */
function straceWorks() {
  try {
    execFileSync('strace', ['-f', '-qq', '-e', 'trace=fsync', '-o', '/dev/null', 'true'],
      { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

describe('fsync', () => {
  it('costs at most one per offloaded file', { skip: !straceWorks() && 'no strace' }, () => {
    const store = s.tmpStore();
    const trace = path.join(store, 'strace.out');
    const script = `
      const ck = require(${JSON.stringify(path.join(h.repoRoot, 'node', 'index.js'))});
      const history = ${JSON.stringify(s.syntheticHistory(60, 3, { bigEvery: 5 }))};
      const c = new ck.Compactor({ storeDir: process.argv[2], sessionId: 'fs',
        contextWindow: Math.ceil(ck.estimateTokens(history) / 0.9) });
      c.compact(history).then((r) => console.log(r.tier));`;
    const file = path.join(store, 'fsync.js');
    fs.writeFileSync(file, script);
    const out = execFileSync('strace', ['-f', '-qq', '-e', 'trace=fsync,fdatasync', '-o', trace,
      process.execPath, file, store], { encoding: 'utf8', timeout: 60000 });
    assert.equal(out.trim(), 'full');
    const files = fs.readdirSync(path.join(store, 'tool_results', 'fs')).length;
    const fsyncs = fs.readFileSync(trace, 'utf8').split('\n').filter((l) => /fsync\(/.test(l));
    console.log(`fsync: ${fsyncs.length} for ${files} offloaded files (a fresh store)`);
    assert.ok(files >= 10);
    // Each file's data, then once the session's folder; the rest is the store's first use:
    // three folders made (each synced in its parent), the audit log made, its record, its key.
    assert.ok(fsyncs.length <= files + 7, `${fsyncs.length} fsyncs for ${files} files`);
  });
});
