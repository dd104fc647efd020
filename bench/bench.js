'use strict';
// Node benchmarks: ctxkeel beside the tools users reach for today, on the same histories and in
// the same process. Writes JSON lines (one per case) to the file named by argv[2].
//   estimation: ctxkeel.estimateTokens vs tokenx (approximate) and gpt-tokenizer (exact o200k)
//   bounding a history to a budget: Compactor.compact vs @langchain/core trimMessages
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const ctxkeel = require('../node/index.js');

function optional(name) {
  try {
    return require(name);
  } catch {
    return null;
  }
}
const tokenx = optional('tokenx');
const gptTokenizer = optional('gpt-tokenizer');
const langchain = optional('@langchain/core/messages');

const WORDS = 'the parser fails on nested brackets in src/parse.c line 42 ';
function text(n, seed) {
  let s = '';
  while (s.length < n + WORDS.length) s += WORDS;
  const k = seed % WORDS.length;
  return s.slice(k, k + n);
}

/** The same synthetic agent history as bench/bench.c: ~1.4 KB messages. */
function history(n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    if (i === 0) out.push({ role: 'system', content: text(1400, i) });
    else if (i === 1 || (i > 2 && i % 20 === 1)) out.push({ role: 'user', content: text(1400, i) });
    else if (i % 2 === 0) {
      const m = { role: 'assistant', content: text(350, i) };
      if (i + 1 < n && !((i + 1) > 2 && (i + 1) % 20 === 1)) {
        m.tool_calls = [{ id: `call_${i}`, type: 'function',
          function: { name: 'bash', arguments: '{"command":"make test"}' } }];
      }
      out.push(m);
    } else out.push({ role: 'tool', tool_call_id: `call_${i - 1}`, content: text(1400, i) });
  }
  return out;
}

function time(fn, minMs = 300) {
  // Median of rounds; each round repeats fn until it has run for a while.
  const rounds = [];
  for (let r = 0; r < 5; r++) {
    let reps = 0;
    const t0 = process.hrtime.bigint();
    let elapsed = 0;
    do {
      fn();
      reps++;
      elapsed = Number(process.hrtime.bigint() - t0) / 1e6;
    } while (elapsed < minMs / 5 && reps < 10000);
    rounds.push(elapsed / reps);
  }
  rounds.sort((a, b) => a - b);
  return rounds[2];
}

async function timeAsync(fn, reps) {
  const rounds = [];
  for (let r = 0; r < 3; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < reps; i++) await fn();
    rounds.push(Number(process.hrtime.bigint() - t0) / 1e6 / reps);
  }
  rounds.sort((a, b) => a - b);
  return rounds[1];
}

const toLangchain = (msgs) => msgs.map((m) => {
  if (m.role === 'system') return new langchain.SystemMessage(m.content);
  if (m.role === 'user') return new langchain.HumanMessage(m.content);
  if (m.role === 'tool') return new langchain.ToolMessage({ content: m.content, tool_call_id: m.tool_call_id });
  return new langchain.AIMessage({ content: m.content,
    tool_calls: (m.tool_calls || []).map((c) => ({ id: c.id, name: c.function.name, args: JSON.parse(c.function.arguments) })) });
});

async function main() {
  const out = fs.openSync(process.argv[2] || '/dev/stdout', 'w');
  const emit = (o) => fs.writeSync(out, JSON.stringify({ lang: 'node', ...o }) + '\n');
  const store = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxkeel-bench-'));
  for (const n of [200, 1000, 10000, 100000]) {
    const msgs = history(n);
    const bytes = msgs.reduce((a, m) => a + Buffer.byteLength(m.content || ''), 0);
    const joined = msgs.map((m) => m.content || '').join('\n');
    const small = n <= 10000;
    const est = time(() => ctxkeel.estimateTokens(msgs));
    emit({ case: 'estimate', tool: 'ctxkeel', messages: n, bytes, ms: est });
    if (tokenx) emit({ case: 'estimate', tool: 'tokenx', messages: n, bytes,
      ms: time(() => tokenx.estimateTokenCount(joined)) });
    if (gptTokenizer && small) emit({ case: 'estimate', tool: 'gpt-tokenizer', messages: n, bytes,
      ms: time(() => gptTokenizer.countTokens(joined), 100) });
    const total = ctxkeel.estimateTokens(msgs);
    // Nothing to compact: a window far above the history.
    const k = new ctxkeel.Compactor({ contextWindow: total * 10, storeDir: store });
    emit({ case: 'compact_none', tool: 'ctxkeel', messages: n, bytes,
      ms: await timeAsync(() => k.compact(msgs), small ? 50 : 5) });
    const counter = (ms) => ms.reduce((a, m) => a + Math.ceil(String(m.content).length / 4) + 4, 0);
    if (langchain) {
      const lc = toLangchain(msgs);
      emit({ case: 'compact_none', tool: '@langchain/core trimMessages', messages: n, bytes,
        ms: await timeAsync(() => langchain.trimMessages(lc, { maxTokens: total * 10,
          strategy: 'last', tokenCounter: counter, includeSystem: true }), small ? 20 : 2) });
      emit({ case: 'compact_full', tool: '@langchain/core trimMessages', messages: n, bytes,
        ms: await timeAsync(() => langchain.trimMessages(lc, { maxTokens: Math.floor(total * 0.7),
          strategy: 'last', tokenCounter: counter, includeSystem: true, startOn: 'human' }), small ? 5 : 1) });
    }
    if (small) {
      // A full compaction with a trivial summarizer, on a fresh compactor each time.
      const reply = '## User Intent\nfix the parser\n## Next Steps\nread src/parse.c';
      emit({ case: 'compact_full', tool: 'ctxkeel', messages: n, bytes,
        ms: await timeAsync(() => new ctxkeel.Compactor({ contextWindow: Math.floor(total / 0.85),
          storeDir: store }).compact(msgs, { summarize: () => reply }), n >= 10000 ? 2 : 10) });
    }
  }
  fs.rmSync(store, { recursive: true, force: true });
}

main().catch((e) => { console.error(e); process.exit(1); });
