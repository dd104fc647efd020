// session.mjs - the per-turn cost of a decision before every model call (issue 16), in Node.
//
//   node bench/session.mjs BENCH_DIR STORE OUT.jsonl
//
// Each session is replayed as an agent loop: before each assistant message (a model call) the
// tool sees the history up to it and decides whether to compact; the window is ten times the
// session, so nothing is ever compacted and only the decision is timed. The tools:
//   ctxkeel        one Compactor kept for the whole session, compact() of the prefix;
//   pi             @mariozechner/pi-coding-agent's estimateContextTokens() + shouldCompact() on
//                  the same prefix in pi's own message form (converted once, as pi holds its
//                  history; the system prompt, which pi keeps outside the list, left out);
//                  without provider usage on the assistant messages, so it counts them all;
//   trimMessages   @langchain/core trimMessages(strategy 'last') with a chars/4 + 3 counter.
// ctxkeel runs every call (what it keeps from one call to the next is the point); the peers,
// which keep nothing, run SAMPLE calls spread over the session, and every ratio is taken over
// those same calls. Sessions: the corpus transcripts and the first 5,000 and 20,000 messages
// of bench/histories.py's synthetic-100000.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const ctxkeel = require('../node/index.js');

const SAMPLE = 200;
const PEER_BUDGET_MS = 60000;

const [benchDir, store, outFile] = process.argv.slice(2);

function cpuMs() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function version(name) {
  try {
    const dir = path.dirname(require.resolve(`${name}/package.json`));
    return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
  } catch {
    return null;
  }
}

/* The version of pi (its exports hide package.json from require.resolve). */
function piVersion() {
  const root = new URL('../package.json', import.meta.resolve('@mariozechner/pi-coding-agent'));
  return JSON.parse(fs.readFileSync(root, 'utf8')).version;
}

async function loadPi() {
  try {
    // estimateContextTokens is what pi's agent session calls; the package root re-exports
    // shouldCompact but not it, so both come from the compaction module beside the root.
    const root = import.meta.resolve('@mariozechner/pi-coding-agent');
    const pi = await import(new URL('./core/compaction/index.js', root).href);
    if (typeof pi.estimateContextTokens !== 'function') return null;
    return pi;
  } catch {
    return null;
  }
}

function loadLangchain() {
  try {
    return require('@langchain/core/messages');
  } catch {
    return null;
  }
}

/* pi's AgentMessage form of one Chat Completions message, or null (system). */
function toPi(m, names) {
  if (m.role === 'system') return null;
  if (m.role === 'user') return { role: 'user', content: m.content || '', timestamp: 0 };
  if (m.role === 'tool') {
    return { role: 'toolResult', toolCallId: m.tool_call_id, toolName: names.get(m.tool_call_id) || '',
      content: [{ type: 'text', text: m.content || '' }], isError: false, timestamp: 0 };
  }
  const content = [];
  if (m.content) content.push({ type: 'text', text: m.content });
  for (const c of m.tool_calls || []) {
    names.set(c.id, c.function.name);
    content.push({ type: 'toolCall', id: c.id, name: c.function.name,
      arguments: JSON.parse(c.function.arguments || '{}') });
  }
  return { role: 'assistant', content, stopReason: 'toolUse', timestamp: 0 };
}

function toLangchain(L, m) {
  if (m.role === 'system') return new L.SystemMessage(m.content);
  if (m.role === 'user') return new L.HumanMessage(m.content);
  if (m.role === 'tool') return new L.ToolMessage({ content: m.content, tool_call_id: m.tool_call_id });
  return new L.AIMessage({ content: m.content || '', tool_calls: (m.tool_calls || []).map((c) => (
    { id: c.id, name: c.function.name, args: JSON.parse(c.function.arguments || '{}') })) });
}

/* chars/4 + 3 per message, as bench.js counts for trimMessages. */
function approxTokens(msgs) {
  let total = 0;
  for (const m of msgs) {
    const type = m.getType();
    let chars = (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)).length +
      type.length;
    if (type === 'ai' && m.tool_calls && m.tool_calls.length) chars += JSON.stringify(m.tool_calls).length;
    if (type === 'tool') chars += m.tool_call_id.length;
    total += Math.ceil(chars / 4) + 3;
  }
  return total;
}

function readHistory(file) {
  const v = JSON.parse(fs.readFileSync(file, 'utf8'));
  return Array.isArray(v) ? v : v.messages;
}

/* workloads.tsv (bench/histories.py): name, messages, text bytes, JSON bytes, files... */
function sessions() {
  const out = [];
  const tsv = fs.readFileSync(path.join(benchDir, 'workloads.tsv'), 'utf8').trim().split('\n');
  for (const line of tsv) {
    const [name, , , , ...files] = line.split('\t');
    if (name === 'corpus') {
      for (const f of files) out.push({ name: `corpus/${path.basename(f, '.json')}`, history: readHistory(f) });
    } else if (name === 'synthetic-100000') {
      const h = readHistory(files[0]);
      out.push({ name: 'session-5000', history: h.slice(0, 5000) });
      out.push({ name: 'session-20000', history: h.slice(0, 20000) });
    }
  }
  return out;
}

/* The calls of a session: the prefix lengths before each assistant message, and the whole. */
function callsOf(h) {
  const calls = [];
  for (let m = 1; m < h.length; m++) if (h[m].role === 'assistant') calls.push(m);
  calls.push(h.length);
  return calls;
}

async function main() {
  const pi = await loadPi();
  const L = loadLangchain();
  const rows = [];
  let n = 0;
  for (const { name, history } of sessions()) {
    const calls = callsOf(history);
    const step = Math.max(1, Math.floor(calls.length / SAMPLE));
    const sampled = new Set(calls.filter((_, k) => k % step === 0 || k === calls.length - 1));
    const tokens = ctxkeel.estimateTokens(history);
    const window = tokens * 10;
    const c = new ctxkeel.Compactor({ contextWindow: window, storeDir: path.join(store, `s${n++}`) });
    /** Times call(m) at every model call m: the total, the sampled calls' total, and the
     * mean per call near 1,000 messages of history and over the last 400. */
    const replay = async (what, call) => {
      const t = { all: 0, sampled: 0, first1k: [], last: [] };
      for (const m of calls) {
        const t0 = cpuMs();
        const r = await call(m);
        const dt = cpuMs() - t0;
        if (r.tier !== 'none') throw new Error(`${name}: ${what}tier ${r.tier} at ${m}`);
        t.all += dt;
        if (sampled.has(m)) t.sampled += dt;
        if (m >= 900 && m <= 1100) t.first1k.push(dt);
        if (m > history.length - 400) t.last.push(dt);
      }
      const mean = (list) => (list.length ? list.reduce((x, y) => x + y) / list.length : null);
      return { all: t.all, sampled: t.sampled, at1k: mean(t.first1k), atEnd: mean(t.last) };
    };
    const ours = await replay('', (m) => c.compact(history.slice(0, m)));
    // The append-only session: a second compactor, each message appended once, a view() at
    // every call; a call's time is its appends since the last call plus the view.
    const sc = new ctxkeel.Compactor({ contextWindow: window, storeDir: path.join(store, `s${n++}`) });
    let appended = 0;
    const mine = await replay('session ', (m) => {
      while (appended < m) sc.append(history[appended++]);
      return sc.view();
    });
    sc.close();
    const row = { workload: name, messages: history.length, calls: calls.length,
      session_ms: mine.all, session_sampled_ms: mine.sampled, session_at_1k_ms: mine.at1k,
      session_at_end_ms: mine.atEnd,
      sampled: sampled.size, ctxkeel_ms: ours.all, ctxkeel_sampled_ms: ours.sampled,
      ctxkeel_at_1k_ms: ours.at1k, ctxkeel_at_end_ms: ours.atEnd };
    if (pi) {
      const names = new Map();
      const piMsgs = [];
      const piIndex = []; // history prefix length -> pi prefix length
      for (let i = 0; i <= history.length; i++) {
        piIndex.push(piMsgs.length);
        if (i < history.length) {
          const p = toPi(history[i], names);
          if (p) piMsgs.push(p);
        }
      }
      let ms = 0, done = 0, compactions = 0;
      for (const m of sampled) {
        const t0 = cpuMs();
        const est = pi.estimateContextTokens(piMsgs.slice(0, piIndex[m]));
        if (pi.shouldCompact(est.tokens, window, pi.DEFAULT_COMPACTION_SETTINGS)) compactions++;
        ms += cpuMs() - t0;
        done++;
        if (ms > PEER_BUDGET_MS) break;
      }
      row.pi_ms = done === sampled.size ? ms : null;
      row.pi_would_compact = compactions;
    }
    if (L) {
      const lc = history.map((m) => toLangchain(L, m));
      let ms = 0, done = 0;
      for (const m of sampled) {
        const t0 = cpuMs();
        await L.trimMessages(lc.slice(0, m), { maxTokens: window, strategy: 'last',
          includeSystem: true, startOn: 'human', tokenCounter: approxTokens });
        ms += cpuMs() - t0;
        done++;
        if (ms > PEER_BUDGET_MS) break;
      }
      row.trim_ms = done === sampled.size ? ms : null;
    }
    rows.push(row);
    console.error(`session ${name} (${history.length} messages, ${calls.length} calls): ` +
      `ctxkeel ${(ours.all / calls.length).toFixed(3)} ms/call`);
  }
  const versions = { '@mariozechner/pi-coding-agent': pi ? piVersion() : null,
    '@langchain/core': version('@langchain/core'), node: process.version };
  fs.writeFileSync(outFile, rows.map((r) => JSON.stringify({ ...r, versions })).join('\n') + '\n');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
