'use strict';
// A driver for profiling the Node hot path: compact() when nothing needs compacting (tier
// none) on one long history, on one Compactor kept across calls, as an agent keeps it.
//
//   node bench/node_profile.js [CORPUS_DIR|HISTORY.json] [MESSAGES] [SECONDS]
//
// A HISTORY.json (a message list, as bench/histories.py writes them) is used as it is. Otherwise
// the history is the system prompt and task of the first transcript, then the assistant turns
// of every transcript with their tool results, in order and round and round, call ids
// renumbered so that pairs stay whole, until MESSAGES (default 1000) messages. The window is
// 10 times the history's estimate. Prints the median over rounds of the CPU and wall-clock
// milliseconds per call; run it under `perf record -g node --perf-basic-prof ...` to see where
// the time goes.
const fs = require('node:fs');
const path = require('node:path');
const ctxkeel = require('../node/index.js');

const corpus = process.argv[2] || path.join(__dirname, '..', '..', 'shared', 'corpus');
const size = Number(process.argv[3] || 1000);
const seconds = Number(process.argv[4] || 3);

function turnsOf(msgs) {
  const out = [];
  msgs.forEach((m, i) => {
    if (m.role !== 'assistant' || !m.tool_calls || !m.tool_calls.length) return;
    const ids = new Set(m.tool_calls.map((c) => c.id));
    const results = msgs.slice(i + 1, i + 1 + ids.size)
      .filter((r) => r.role === 'tool' && ids.has(r.tool_call_id));
    out.push([m, results]);
  });
  return out;
}

function history(n) {
  const files = fs.readdirSync(corpus).filter((f) => f.endsWith('.json')).sort();
  const transcripts = files.map((f) => JSON.parse(fs.readFileSync(path.join(corpus, f), 'utf8')));
  const head = transcripts[0];
  const msgs = [head.find((m) => m.role === 'system'), head.find((m) => m.role === 'user')];
  const pool = transcripts.flatMap(turnsOf);
  let next = 0;
  for (let t = 0; msgs.length < n; t++) {
    const [assistant, results] = pool[t % pool.length];
    const names = new Map();
    const calls = assistant.tool_calls.map((c) => {
      names.set(c.id, `call_${next++}`);
      return { ...c, id: names.get(c.id) };
    });
    const turn = [{ role: 'assistant', content: assistant.content || '', tool_calls: calls },
      ...results.map((r) => ({ ...r, tool_call_id: names.get(r.tool_call_id) }))];
    if (msgs.length + turn.length > n) break;
    msgs.push(...turn);
  }
  while (msgs.length < n) msgs.push({ role: 'user', content: 'Keep going.' });
  return msgs;
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e3;
};
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  const msgs = corpus.endsWith('.json') ? JSON.parse(fs.readFileSync(corpus, 'utf8'))
    : history(size);
  const bytes = Buffer.byteLength(JSON.stringify(msgs));
  const tokens = ctxkeel.estimateTokens(msgs);
  const c = new ctxkeel.Compactor({ contextWindow: tokens * 10 });
  const first = await c.compact(msgs);
  if (first.tier !== 'none' || first.messages.length !== msgs.length) {
    throw new Error(`expected tier none with every message, got ${first.tier}`);
  }
  const reps = 200;
  const cpu = [];
  const wall = [];
  const end = nowMs() + seconds * 1000;
  while (nowMs() < end) {
    const t0 = nowMs();
    const c0 = cpuMs();
    for (let i = 0; i < reps; i++) await c.compact(msgs);
    cpu.push((cpuMs() - c0) / reps);
    wall.push((nowMs() - t0) / reps);
  }
  c.close();
  console.log(`${msgs.length} messages, ${(bytes / 1e6).toFixed(2)} MB JSON, ${tokens} tokens: ` +
    `${median(cpu).toFixed(4)} ms CPU, ${median(wall).toFixed(4)} ms wall per call ` +
    `(median of ${cpu.length} rounds of ${reps})`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
