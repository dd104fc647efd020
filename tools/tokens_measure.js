#!/usr/bin/env node
'use strict';
/*
 * tokens_measure.js - scores ctxkeel's token counts against exact counts.
 *
 *     node tools/tokens_measure.js [--write] [--speed SECONDS] [--bench PATH]
 *
 * Needs js-tiktoken (the exact o200k_base / cl100k_base reference, byte-level as tiktoken is)
 * and, for the comparison column, tokenx. It compiles tools/tokens_bench.c (which includes
 * csrc/src/tokens.c and bpe.c) unless --bench names a built one, then:
 *
 *   1. checks that the C pre-tokenizers cut every corpus text, and a few thousand random
 *      strings of awkward characters, exactly where the tokenizers' regexes do;
 *   2. counts every document of tests/data/tokens (train and test halves, the generated kinds,
 *      the held-back slice and the script and whitespace classes) and every message of the
 *      transcripts in ../shared/corpus (content, tool-call ids, names and arguments, each
 *      string on its own, summed per message), and reports per category the weighted absolute
 *      error sum|est - exact| / sum exact over documents (messages for the transcripts) and the
 *      signed total error of the default estimator, beside chars/4 and tokenx, and how many
 *      documents the exact estimators (o200k, cl100k) miscount;
 *   3. times the C counter per estimator (index build, first pass, best pass) on the texts.
 *
 * --write saves the tables to tools/tokens_report.md and the exact counts of the corpus halves
 * to tests/data/tokens/exact_counts.tsv (tools/tokens_kinds.js writes the generated part's).
 * The targets of the default estimator: at most 3% weighted error in every category, and
 * never more than 10% under the exact count for any class; tests enforce them.
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
const KINDS = ['paths', 'minjs', 'base64', 'hexdump', 'traces', 'csv', 'sql', 'maven'];

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};

const { getEncoding } = require('js-tiktoken');
const { O200K_PATTERN, CL100K_PATTERN } = require('./gen_token_table.js');
const { versionOf } = require('./tokens_util.js');

const O200K = getEncoding('o200k_base');
const CL100K = getEncoding('cl100k_base');
const exactO200k = (t) => O200K.encode(t, [], []).length;
const exactCl100k = (t) => CL100K.encode(t, [], []).length;

/* Documents of one split: [{ cat, name, texts: [text] }]. */
function corpusDocs(split, categories = CATEGORIES) {
  const out = [];
  for (const cat of categories) {
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

/* The script and whitespace classes: one document each. */
function classDocs() {
  const dir = path.join(DATA, 'classes');
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir).filter((f) => f.endsWith('.txt')).sort().map((f) => ({
    cat: f.replace(/\.txt$/, ''), name: f, texts: [fs.readFileSync(path.join(dir, f), 'utf8')],
  }));
}

function buildBench() {
  const given = opt('--bench');
  if (given) return path.resolve(given);
  const exe = path.join(os.tmpdir(), `ctxkeel_tokens_bench_${process.pid}`);
  execFileSync('cc', ['-std=c11', '-O2', '-D_POSIX_C_SOURCE=200112L', '-D_DEFAULT_SOURCE',
    '-DCK_STATIC', '-I' + path.join(ROOT, 'csrc', 'include'),
    path.join(__dirname, 'tokens_bench.c'), '-lpthread', '-o', exe], { stdio: 'inherit' });
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
  const splits = {
    test: [...corpusDocs('test'), ...transcriptDocs()],
    train: corpusDocs('train'),
    kinds: corpusDocs('kinds', KINDS),
    heldout: corpusDocs('heldout', KINDS),
    classes: classDocs(),
  };

  const allTexts = Object.values(splits).flat().flatMap((d) => d.texts);
  const fuzz = fuzzTexts(20000);
  const mismatches = checkPieces(exe, [...allTexts, ...fuzz]);
  console.log(`pre-tokenizer check on ${allTexts.length + fuzz.length} texts: ` +
    `o200k ${mismatches.o200k} mismatches, cl100k ${mismatches.cl100k}`);

  /* Per split, per category (and ALL): documents, bytes, exact tokens, the default's absolute
   * and signed error, chars/4's and tokenx's, and the documents o200k / cl100k miscount. */
  const tables = {};
  const perDoc = {};
  for (const [split, docs] of Object.entries(splits)) {
    const texts = docs.flatMap((d) => d.texts);
    const est = runBench(exe, ['estimate'], texts).map((l) => l.split(' ').map(Number));
    const stats = new Map();
    perDoc[split] = [];
    let at = 0;
    for (const d of docs) {
      const sum = { def: 0, o: 0, c: 0, c4: 0, x: 0, xc: 0, tx: 0 };
      for (const t of d.texts) {
        const [ed, eo, ec, e4] = est[at++];
        sum.def += ed;
        sum.o += eo;
        sum.c += ec;
        sum.c4 += e4;
        sum.x += exactO200k(t);
        sum.xc += exactCl100k(t);
        if (tokenx) sum.tx += tokenx.estimateTokenCount(t);
      }
      perDoc[split].push({ d, sum });
      for (const key of [d.cat, 'ALL']) {
        const s = stats.get(key) || { docs: 0, bytes: 0, x: 0, xc: 0, def: [0, 0], c4: [0, 0],
          tx: [0, 0], wrongO: 0, wrongC: 0 };
        s.docs++;
        s.bytes += d.texts.reduce((a, t) => a + Buffer.byteLength(t, 'utf8'), 0);
        s.x += sum.x;
        s.xc += sum.xc;
        s.def[0] += Math.abs(sum.def - sum.x);
        s.def[1] += sum.def - sum.x;
        s.c4[0] += Math.abs(sum.c4 - sum.x);
        s.c4[1] += sum.c4 - sum.x;
        s.tx[0] += Math.abs(sum.tx - sum.x);
        s.tx[1] += sum.tx - sum.x;
        s.wrongO += sum.o !== sum.x ? 1 : 0;
        s.wrongC += sum.c !== sum.xc ? 1 : 0;
        stats.set(key, s);
      }
    }
    tables[split] = stats;
  }

  const pct = (v, n) => `${((100 * v) / n).toFixed(1)}%`;
  const signed = (v, n) => `${v >= 0 ? '+' : ''}${((100 * v) / n).toFixed(1)}%`;
  const lines = [];
  const table = (split, title, keys) => {
    lines.push(`### ${title}`, '');
    lines.push('| category | docs | KB | o200k tokens | default: abs / signed | chars/4: abs / ' +
      'signed | tokenx: abs / signed | o200k, cl100k: docs miscounted |');
    lines.push('|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const k of [...keys, 'ALL'].filter((x) => tables[split].has(x))) {
      const s = tables[split].get(k);
      const name = k === 'ALL' ? '**all**' : k === 'transcripts' ? 'transcripts (per message)' : k;
      lines.push(`| ${name} | ${s.docs} | ${(s.bytes / 1024).toFixed(0)} | ${s.x} | ` +
        `${pct(s.def[0], s.x)} / ${signed(s.def[1], s.x)} | ${pct(s.c4[0], s.x)} / ` +
        `${signed(s.c4[1], s.x)} | ` +
        (tokenx ? `${pct(s.tx[0], s.x)} / ${signed(s.tx[1], s.x)}` : 'n/a') +
        ` | ${s.wrongO}, ${s.wrongC} |`);
    }
    lines.push('');
  };
  table('test', 'Corpus: TEST half and transcripts', [...CATEGORIES, 'transcripts']);
  table('train', 'Corpus: TRAIN half (the table of frequent pieces was chosen here)', CATEGORIES);
  table('kinds', 'Generated kinds the corpus lacks (tools/tokens_kinds.js)', KINDS);
  table('heldout', 'Held-back slice of the same kinds (other seeds, never tuned against)', KINDS);

  lines.push('### Script and whitespace classes', '',
    'Estimate / exact o200k count; below 0.90 would be an undercount past the target.', '',
    '| class | o200k tokens | default | chars/4 | tokenx |', '|---|---:|---:|---:|---:|');
  for (const { d, sum } of perDoc.classes) {
    const r = (v) => (v / sum.x).toFixed(2);
    lines.push(`| ${d.cat} | ${sum.x} | ${r(sum.def)} | ${r(sum.c4)} | ` +
      `${tokenx ? r(sum.tx) : 'n/a'} |`);
  }
  lines.push('');

  const seconds = Number(opt('--speed', '1'));
  if (seconds > 0) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ctxkeel-tokens-'));
    const groups = [
      ['corpus: every TEST text and transcript message', splits.test],
      ['transcript messages', splits.test.filter((d) => d.cat === 'transcripts')],
      ['generated kinds', splits.kinds],
      ['script and whitespace classes', splits.classes],
    ];
    const rows = [];
    for (const [label, docs] of groups) {
      if (!docs.length) continue;
      const file = path.join(tmp, 'all.txt');
      fs.writeFileSync(file, docs.flatMap((d) => d.texts).join('\n'));
      const cells = [];
      for (const est of ['default', 'o200k', 'cl100k']) {
        /* A fresh process for each, so that its first pass meets an empty cache. */
        const out = execFileSync(exe, ['speed', String(seconds), est, file]).toString();
        const m = out.match(/index ([0-9.]+) ms, first ([0-9.]+) MB\/s, best ([0-9.]+) MB\/s/);
        cells.push(`${m[2]} / ${m[3]}`);
        if (rows.length === 0) cells.indexMs = (cells.indexMs || []).concat(`${est} ${m[1]} ms`);
      }
      if (rows.length === 0) lines.indexMs = cells.indexMs;
      rows.push(`| ${label} | ${cells.join(' | ')} |`);
    }
    fs.rmSync(tmp, { recursive: true, force: true });
    lines.push('### Throughput of the C counter (MB/s, one core, `cc -O2`)', '',
      '`ck_estimate_text` over the texts joined, in thread CPU time (tools/tokens_bench.c): the ' +
        'first pass after the rank table is indexed (every piece new to the cache) / the best ' +
        `of several passes after it, on ${os.cpus().length} CPUs with a load average of ` +
        `${os.loadavg()[0].toFixed(1)} when measured. Indexing the rank table on first use ` +
        `took ${(lines.indexMs || []).join(', ')}.`, '');
    lines.push('| text | default | o200k (exact) | cl100k (exact) |', '|---|---:|---:|---:|',
      ...rows, '');
  }
  lines.push(`Pre-tokenizer check: the C pre-tokenizers cut ${allTexts.length} corpus texts and ` +
    `${fuzz.length} random strings exactly where the regexes do (mismatches: o200k ` +
    `${mismatches.o200k}, cl100k ${mismatches.cl100k}).`, '');

  const body = lines.join('\n');
  console.log(body);
  if (args.includes('--write')) {
    const now = new Date().toISOString().slice(0, 10);
    const head = [
      '# Token counting accuracy and speed',
      '',
      `Measured by \`node tools/tokens_measure.js --write\` on ${now}, on ${os.cpus()[0].model}.`,
      `Exact counts are js-tiktoken ${versionOf('js-tiktoken')}'s (o200k_base, cl100k_base, ` +
        'special tokens counted as text); tokenx ' +
        `${tokenx ? versionOf('tokenx') : '(not installed)'} is measured against o200k_base.`,
      '"abs" is the weighted absolute error, sum |estimate - exact| / sum exact, per ' +
        'document (per message for the transcripts of ../shared/corpus: content, ' +
        'tool-call ids, names and arguments, each string estimated on its own); ' +
        '"signed" is sum (estimate - exact) / sum exact.',
      '',
    ].join('\n');
    fs.writeFileSync(REPORT, head + '\n' + body);
    console.log(`wrote ${path.relative(ROOT, REPORT)}`);
    /* Exact counts of every corpus document, for the C test (which has no tokenizer). */
    const rows = ['# split\tcategory\tfile\to200k_base\tcl100k_base (exact, js-tiktoken ' +
      `${versionOf('js-tiktoken')}; written by tools/tokens_measure.js)`];
    for (const split of ['train', 'test']) {
      for (const d of splits[split]) {
        if (d.cat === 'transcripts') continue;
        rows.push([split, d.cat, d.name, exactO200k(d.texts[0]), exactCl100k(d.texts[0])]
          .join('\t'));
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
