#!/usr/bin/env node
'use strict';
/*
 * tokens_measure.js - scores ctxkeel's token estimator against exact counts.
 *
 *     node tools/tokens_measure.js [--write] [--speed SECONDS] [--bench PATH]
 *
 * Needs gpt-tokenizer (exact o200k_base / cl100k_base counts) and, for the comparison column,
 * tokenx. It compiles tools/tokens_bench.c (which includes csrc/src/tokens.c) unless --bench
 * names a built one, then:
 *
 *   1. checks that the C pre-tokenizers cut every corpus text, and a few thousand random
 *      strings of awkward characters, exactly where the tokenizers' regexes do;
 *   2. estimates every document of tests/data/tokens (train and test halves) and every
 *      message of the transcripts in ../shared/corpus (content, tool-call ids, names and
 *      arguments, each string on its own, summed per message), and reports per category the
 *      weighted absolute error sum|est - exact| / sum exact over documents (messages for the
 *      transcripts) and the signed total error, beside chars/4 and tokenx;
 *   3. times the estimators on all TEST texts joined (mixed text) and per category.
 *
 * --write saves the tables to tools/tokens_report.md. The targets (TEST half and transcripts,
 * default estimator against o200k_base): at most 4% overall, 6% per category, signed total
 * within +-2%, and 300 MB/s; tests/node/tokens_accuracy.test.js enforces the accuracy part.
 */

const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const ROOT = path.resolve(__dirname, '..');
const DATA = path.join(ROOT, 'tests', 'data', 'tokens');
const SHARED = path.resolve(ROOT, '..', 'shared', 'corpus');
const REPORT = path.join(__dirname, 'tokens_report.md');
const CATEGORIES = ['prose', 'code', 'logs', 'json', 'markdown', 'chinese', 'japanese', 'mixed'];

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};

const o200k = require('gpt-tokenizer/encoding/o200k_base');
const cl100k = require('gpt-tokenizer/encoding/cl100k_base');
const { O200K_PATTERN, CL100K_PATTERN, NO_SPECIAL } = require('./gen_token_table.js');

/* Documents of one half: [{ cat, name, texts: [text] }]. */
function corpusDocs(split) {
  const out = [];
  for (const cat of CATEGORIES) {
    const dir = path.join(DATA, split, cat);
    if (!fs.existsSync(dir)) continue;
    for (const f of fs.readdirSync(dir).sort()) {
      if (f.endsWith('.txt')) {
        out.push({ cat, name: f, texts: [fs.readFileSync(path.join(dir, f), 'utf8')] });
      }
    }
  }
  return out;
}

/* The strings of one chat message that an estimate of it counts. */
function messageTexts(m) {
  const texts = [];
  if (typeof m.content === 'string') texts.push(m.content);
  else if (Array.isArray(m.content)) {
    for (const c of m.content) if (c && typeof c.text === 'string') texts.push(c.text);
  }
  if (typeof m.tool_call_id === 'string') texts.push(m.tool_call_id);
  for (const tc of m.tool_calls || []) {
    const f = tc.function || {};
    texts.push(tc.id || '', f.name || '');
    texts.push(typeof f.arguments === 'string' ? f.arguments : JSON.stringify(f.arguments));
  }
  return texts.filter((t) => t.length > 0);
}

function transcriptDocs() {
  if (!fs.existsSync(SHARED)) return [];
  const out = [];
  for (const f of fs.readdirSync(SHARED).filter((x) => x.endsWith('.json')).sort()) {
    const msgs = JSON.parse(fs.readFileSync(path.join(SHARED, f), 'utf8'));
    msgs.forEach((m, i) => {
      const texts = messageTexts(m);
      if (texts.length) out.push({ cat: 'transcripts', name: `${f}#${i}`, texts });
    });
  }
  return out;
}

/* tokenx does not export its package.json; find it beside the resolved entry point. */
function tokenxVersion() {
  let dir = path.dirname(require.resolve('tokenx'));
  while (!fs.existsSync(path.join(dir, 'package.json'))) dir = path.dirname(dir);
  return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
}

function buildBench() {
  const given = opt('--bench');
  if (given) return path.resolve(given);
  const exe = path.join(os.tmpdir(), `ctxkeel_tokens_bench_${process.pid}`);
  execFileSync('cc', ['-std=c11', '-O2', '-D_POSIX_C_SOURCE=200112L', '-DCK_STATIC',
    '-I' + path.join(ROOT, 'csrc', 'include'), path.join(__dirname, 'tokens_bench.c'),
    '-o', exe], { stdio: 'inherit' });
  return exe;
}

function records(texts) {
  const parts = [];
  for (const t of texts) {
    const b = Buffer.from(t, 'utf8');
    parts.push(Buffer.from(`${b.length}\n`), b);
  }
  return Buffer.concat(parts);
}

function runBench(exe, argv, texts) {
  return execFileSync(exe, argv, { input: records(texts), maxBuffer: 1 << 30 })
    .toString()
    .split('\n');
}

/* Random strings from a palette of characters the pre-tokenizers treat specially. */
function fuzzTexts(count) {
  const palette = ['a', 'B', 'é', 'É', 'ǅ', 'ʰ', '中', 'の', 'ー', '한', '\u0301', '\u0300',
    '1', '٣', 'Ⅻ', ' ', '  ', '\t', '\n', '\r\n', '\r', '\u00a0', '\u3000', "'", "'s", "'LL",
    "'Ve", "'d", '(', '/', '\\', '😀', '\u200d', '\ufeff', '\u2028', '-', '_', 'A', 'z', '’',
    'ß', 'ǈ', '0', '.', '\u000b', 'ﾟ', '\u0085'];
  let seed = 12345;
  const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
  const out = [];
  for (let k = 0; k < count; k++) {
    let s = '';
    const n = 1 + Math.floor(rnd() * 14);
    for (let i = 0; i < n; i++) s += palette[Math.floor(rnd() * palette.length)];
    out.push(s);
  }
  return out;
}

function checkPieces(exe, texts) {
  const result = {};
  for (const [name, re] of [['o200k', O200K_PATTERN], ['cl100k', CL100K_PATTERN]]) {
    const lines = runBench(exe, ['pieces', name], texts);
    let bad = 0;
    texts.forEach((t, i) => {
      const js = (t.match(re) || []).map((p) => Buffer.byteLength(p, 'utf8')).join(' ');
      if (js !== lines[i]) {
        if (bad < 3) console.error(`${name} pieces differ for ${JSON.stringify(t.slice(0, 60))}`);
        bad++;
      }
    });
    result[name] = bad;
  }
  return result;
}

async function main() {
  /* tokenx is an ES module: import it by file so that NODE_PATH installs work too. */
  let tokenx = null;
  try {
    tokenx = await import(require('url').pathToFileURL(require.resolve('tokenx')).href);
  } catch (e) {
    console.error('tokenx not installed: its column is left out');
  }
  const exe = buildBench();
  const halves = { train: corpusDocs('train'), test: [...corpusDocs('test'), ...transcriptDocs()] };

  const allTexts = [...halves.train, ...halves.test].flatMap((d) => d.texts);
  const fuzz = fuzzTexts(20000);
  const mismatches = checkPieces(exe, [...allTexts, ...fuzz]);
  console.log(`pre-tokenizer check on ${allTexts.length + fuzz.length} texts: ` +
    `o200k ${mismatches.o200k} mismatches, cl100k ${mismatches.cl100k}`);

  const tables = {};
  for (const [half, docs] of Object.entries(halves)) {
    const texts = docs.flatMap((d) => d.texts);
    const est = runBench(exe, ['estimate'], texts).map((l) => l.split(' ').map(Number));
    const stats = new Map();
    let at = 0;
    for (const d of docs) {
      const sum = { o: 0, c: 0, x: 0, xc: 0, c4: 0, tx: 0 };
      for (const t of d.texts) {
        const [eo, ec, e4] = est[at++];
        sum.o += eo;
        sum.c += ec;
        sum.c4 += e4;
        sum.x += o200k.encode(t, NO_SPECIAL).length;
        sum.xc += cl100k.encode(t, NO_SPECIAL).length;
        if (tokenx) sum.tx += tokenx.estimateTokenCount(t);
      }
      for (const key of [d.cat, 'ALL']) {
        const s = stats.get(key) || { docs: 0, bytes: 0, x: 0, xc: 0, o: [0, 0], c: [0, 0],
          c4: [0, 0], tx: [0, 0] };
        s.docs++;
        s.bytes += d.texts.reduce((a, t) => a + Buffer.byteLength(t, 'utf8'), 0);
        s.x += sum.x;
        s.xc += sum.xc;
        s.o[0] += Math.abs(sum.o - sum.x);
        s.o[1] += sum.o - sum.x;
        s.c[0] += Math.abs(sum.c - sum.xc);
        s.c[1] += sum.c - sum.xc;
        s.c4[0] += Math.abs(sum.c4 - sum.x);
        s.c4[1] += sum.c4 - sum.x;
        s.tx[0] += Math.abs(sum.tx - sum.x);
        s.tx[1] += sum.tx - sum.x;
        stats.set(key, s);
      }
    }
    tables[half] = stats;
  }

  const pct = (v, n) => `${((100 * v) / n).toFixed(1)}%`;
  const signed = (v, n) => `${v >= 0 ? '+' : ''}${((100 * v) / n).toFixed(1)}%`;
  const lines = [];
  const table = (half, title) => {
    lines.push(`### ${title}`, '');
    lines.push('| category | docs | KB | o200k tokens | default: abs / signed | chars/4: abs / ' +
      'signed | tokenx: abs / signed | cl100k tokens | cl100k profile: abs / signed |');
    lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
    const keys = [...CATEGORIES, 'transcripts', 'ALL'].filter((k) => tables[half].has(k));
    for (const k of keys) {
      const s = tables[half].get(k);
      const name = k === 'ALL' ? '**all**' : k === 'transcripts' ? 'transcripts (per message)' : k;
      lines.push(`| ${name} | ${s.docs} | ${(s.bytes / 1024).toFixed(0)} | ${s.x} | ` +
        `${pct(s.o[0], s.x)} / ${signed(s.o[1], s.x)} | ${pct(s.c4[0], s.x)} / ` +
        `${signed(s.c4[1], s.x)} | ` +
        (tokenx ? `${pct(s.tx[0], s.x)} / ${signed(s.tx[1], s.x)}` : 'n/a') +
        ` | ${s.xc} | ${pct(s.c[0], s.xc)} / ${signed(s.c[1], s.xc)} |`);
    }
    lines.push('');
  };
  table('test', 'TEST half and transcripts (never used for fitting)');
  table('train', 'TRAIN half (the table and the constants were fitted here)');

  const seconds = Number(opt('--speed', '1'));
  const speed = [];
  if (seconds > 0) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxkeel-tokens-'));
    const groups = [['mixed text: every TEST text joined', halves.test]];
    for (const cat of [...CATEGORIES, 'transcripts']) {
      groups.push([cat, halves.test.filter((d) => d.cat === cat)]);
    }
    for (const [label, docs] of groups) {
      if (!docs.length) continue;
      const file = path.join(tmp, 'all.txt');
      fs.writeFileSync(file, docs.flatMap((d) => d.texts).join('\n'));
      const out = execFileSync(exe, ['speed', String(seconds), file]).toString();
      const rate = (name) => out.match(new RegExp(`^${name} ([0-9.]+) MB/s`, 'm'))[1];
      speed.push(`| ${label} | ${rate('default')} | ${rate('cl100k')} |`);
    }
    fs.rmSync(tmp, { recursive: true, force: true });
    lines.push('### Throughput (MB/s, one core, `cc -O2`)', '',
      'Best of several rounds of `ck_estimate_text` over the texts joined, timed in thread CPU ' +
        `time (tools/tokens_bench.c) on ${os.cpus().length} CPUs with a load average of ` +
        `${os.loadavg()[0].toFixed(1)} when measured.`, '');
    lines.push('| text | default (o200k) | cl100k |', '|---|---:|---:|', ...speed, '');
  }
  lines.push(`Pre-tokenizer check: the C pre-tokenizers cut ${allTexts.length} corpus texts and ` +
    `${fuzz.length} random strings exactly where the regexes do (mismatches: o200k ` +
    `${mismatches.o200k}, cl100k ${mismatches.cl100k}).`, '');

  const body = lines.join('\n');
  console.log(body);
  if (args.includes('--write')) {
    const now = new Date().toISOString().slice(0, 10);
    const head = [
      '# Token estimator accuracy',
      '',
      `Measured by \`node tools/tokens_measure.js --write\` on ${now}, on ${os.cpus()[0].model}.`,
      'Errors are against exact counts from gpt-tokenizer ' +
        `${require('gpt-tokenizer/package.json').version} (o200k_base; cl100k_base for ` +
        'the cl100k profile); tokenx ' +
        `${tokenx ? tokenxVersion() : '(not installed)'} is ` +
        'measured against o200k_base the same way.',
      '"abs" is the weighted absolute error, sum |estimate - exact| / sum exact, per ' +
        'document (per message for the transcripts of ../shared/corpus: content, ' +
        'tool-call ids, names and arguments, each string estimated on its own); ' +
        '"signed" is sum (estimate - exact) / sum exact.',
      '',
    ].join('\n');
    fs.writeFileSync(REPORT, head + '\n' + body);
    console.log(`wrote ${path.relative(ROOT, REPORT)}`);
  }
  if (args.includes('--write')) {
    /* Exact counts of every corpus document, for the C test (which has no tokenizer). */
    const rows = ['# split\tcategory\tfile\to200k_base\tcl100k_base (exact, gpt-tokenizer ' +
      `${require('gpt-tokenizer/package.json').version}; written by tools/tokens_measure.js)`];
    for (const [half, docs] of Object.entries(halves)) {
      for (const d of docs) {
        if (d.cat === 'transcripts') continue;
        rows.push([half, d.cat, d.name, o200k.encode(d.texts[0], NO_SPECIAL).length,
          cl100k.encode(d.texts[0], NO_SPECIAL).length].join('\t'));
      }
    }
    fs.writeFileSync(path.join(DATA, 'exact_counts.tsv'), rows.join('\n') + '\n');
    console.log('wrote tests/data/tokens/exact_counts.tsv');
  }
  if (!opt('--bench')) fs.rmSync(exe, { force: true });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
