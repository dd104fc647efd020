'use strict';

// ctxkeel's token counts against the reference tokenizers, gpt-tokenizer and js-tiktoken (the
// first, several times faster, for the bulk; the second where they differ, on U+FEFF, which
// gpt-tokenizer counts as two tokens where tiktoken has one). Texts with U+FEFF or U+0085 are
// left out: JavaScript's \s takes the first and not the second, tiktoken's (Rust's: Unicode
// White_Space) the opposite, so both packages cut them differently from tiktoken, which ctxkeel
// follows; tests/python/test_tokens.py checks them against the tiktoken wheel itself.
//  - 'o200k' and 'cl100k' equal it, text for text, on every text of tests/data/tokens, every
//    string of every message of ../shared/corpus and 100,000 random strings;
//  - the default estimator is within 3% (weighted by tokens) in every category of the corpus,
//    of the generated kinds and of the held-back slice, and never more than 10% under the count
//    of any script or whitespace class;
//  - the rank tables in csrc/src match what js-tiktoken and gpt-tokenizer ship.

const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const h = require('./helpers.js');
const { rng } = require('../../tools/tokens_util.js');

const { ctxkeel, repoRoot } = h;

let O200K = null;
let CL100K = null;
try {
  const { getEncoding } = require('js-tiktoken');
  const gpt = {
    o200k: require('gpt-tokenizer/encoding/o200k_base'),
    cl100k: require('gpt-tokenizer/encoding/cl100k_base'),
  };
  const noSpecial = { disallowedSpecial: new Set() };
  const reference = (tiktoken, gptEnc) => ({
    count: (t) => (t.includes('\ufeff') ? tiktoken.encode(t, [], []).length
      : gptEnc.encode(t, noSpecial).length),
  });
  O200K = reference(getEncoding('o200k_base'), gpt.o200k);
  CL100K = reference(getEncoding('cl100k_base'), gpt.cl100k);
} catch (e) {
  // Without the references there is nothing to compare with.
}
const noReference = O200K ? false : 'js-tiktoken or gpt-tokenizer is not installed (npm install)';
const exact = (enc, t) => enc.count(t);

const DATA = path.join(repoRoot, 'tests', 'data', 'tokens');
const SHARED = path.join(repoRoot, '..', 'shared', 'corpus');
const CATEGORIES = ['prose', 'code', 'logs', 'json', 'markdown', 'chinese', 'japanese', 'mixed'];
const KINDS = ['paths', 'minjs', 'base64', 'hexdump', 'traces', 'csv', 'sql', 'maven'];

/* [{ cat, name, texts }] for one split of tests/data/tokens. */
function docs(split, categories) {
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

function classDocs() {
  const dir = path.join(DATA, 'classes');
  return fs.readdirSync(dir).filter((f) => f.endsWith('.txt')).sort().map((f) => ({
    cat: f.replace(/\.txt$/, ''), name: f, texts: [fs.readFileSync(path.join(dir, f), 'utf8')],
  }));
}

// Every string of a message that ctxkeel counts: content, tool-call ids, names and arguments.
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
  for (const [, messages] of h.loadCorpus()) {
    for (const m of messages) {
      const texts = messageTexts(m);
      if (texts.length) out.push({ cat: 'transcripts', texts });
    }
  }
  return out;
}

// { category: { abs, signed, exact, docs } } plus 'all': the default estimator's error.
function score(list) {
  const out = {};
  for (const d of list) {
    let est = 0;
    let x = 0;
    for (const t of d.texts) {
      est += ctxkeel.estimateTokens(t);
      x += exact(O200K, t);
    }
    for (const key of [d.cat, 'all']) {
      const s = out[key] || (out[key] = { abs: 0, signed: 0, exact: 0, docs: 0 });
      s.abs += Math.abs(est - x);
      s.signed += est - x;
      s.exact += x;
      s.docs++;
    }
  }
  return out;
}

const pct = (v, n) => (100 * v) / n;

function within3(s, name) {
  assert.ok(s && s.docs > 0, `${name}: no documents`);
  const abs = pct(s.abs, s.exact);
  assert.ok(abs <= 3, `${name}: ${abs.toFixed(2)}% weighted error, more than 3%`);
}

/* A seeded generator of awkward strings: every class the pre-tokenizers treat apart, runs,
 * contractions, special tokens, lone surrogates' replacements, long repeated stretches. */
function fuzzStrings(count, seed) {
  const rnd = rng(seed);
  const pools = [' \t\n\r\u000b\f', 'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ',
    '0123456789', "'sdmtlvreSDMTLVRE", '.,;:!?-_=+*/\\()[]{}<>"#$%&@^`|~', 'éèêëàâäôöûüçñßÉǅǈ',
    '\u00a0\u2003\u3000\u2028\u2029\u200b\u200d', 'абвгдежзийклмнопрАБВГД', 'αβγδεζηθΩ',
    '中文字符测试汉语言的是了我你好', 'ひらがなカタカナーッゃ', '한국어텍스트', 'العربيةשלום',
    'हिन्दीभाषा', '\u0301\u0308\u0327\u064b\u093f\u0300', '\ue000\uf8ff', '😀👍🏽🎉🇺🇸❤️',
    '𝐀𝐁𝑎𝟙𠀀', 'Ⅻ①٣', 'ʰˆ゛ﾟ'];
  const specials = ['<|endoftext|>', '<|fim_prefix|>', "'s", "'LL", '\r\n', '    ', '://'];
  const out = [];
  for (let k = 0; k < count; k++) {
    let str = '';
    for (let j = 0, parts = 1 + Math.floor(rnd() * 6); j < parts; j++) {
      if (rnd() < 0.08) {
        str += specials[Math.floor(rnd() * specials.length)];
        continue;
      }
      const pool = [...pools[Math.floor(rnd() * pools.length)]];
      for (let i = 0, n = 1 + Math.floor(rnd() * 8); i < n; i++) {
        str += pool[Math.floor(rnd() * pool.length)];
      }
    }
    /* Now and then a long stretch: a run, or a long word, for bpe.c's long-piece methods. */
    if (k % 500 === 0) str = str.repeat(20 + Math.floor(rnd() * 60));
    out.push(str);
  }
  return out;
}

describe('exact counts equal the reference', { skip: noReference }, () => {
  function compare(all, what) {
    let wrong = 0;
    let first = null;
    const texts = all.filter((t) => !/[\ufeff\u0085]/.test(t));
    for (const t of texts) {
      const o = ctxkeel.estimateTokens(t, { estimator: 'o200k' });
      const c = ctxkeel.estimateTokens(t, { estimator: 'cl100k' });
      const xo = exact(O200K, t);
      const xc = exact(CL100K, t);
      if (o !== xo || c !== xc) {
        wrong++;
        first = first || `${JSON.stringify(t.slice(0, 80))}: o200k ${o}/${xo}, cl100k ${c}/${xc}`;
      }
    }
    assert.equal(wrong, 0, `${wrong} of ${texts.length} ${what} miscounted, e.g. ${first}`);
  }

  it('on every text of tests/data/tokens', () => {
    const all = [...docs('train', CATEGORIES), ...docs('test', CATEGORIES),
      ...docs('kinds', KINDS), ...docs('heldout', KINDS), ...classDocs()];
    assert.ok(all.length > 300);
    compare(all.flatMap((d) => d.texts), 'corpus texts');
  });

  it('on every string of the shared transcripts', {
    skip: fs.existsSync(SHARED) ? false : 'shared/corpus is absent',
  }, () => {
    compare(transcriptDocs().flatMap((d) => d.texts), 'message strings');
  });

  it('on 100,000 random strings', () => {
    compare(fuzzStrings(100000, 20261202), 'random strings');
  });
});

describe('default estimator accuracy (against o200k_base)', { skip: noReference }, () => {
  it('is within 3% in every category of the corpus and on the transcripts', () => {
    const s = score([...docs('test', CATEGORIES), ...docs('train', CATEGORIES),
      ...transcriptDocs()]);
    for (const cat of CATEGORIES) within3(s[cat], cat);
    if (fs.existsSync(SHARED)) within3(s.transcripts, 'transcripts');
    within3(s.all, 'all');
  });

  it('is within 3% on each kind of text the corpus lacks', () => {
    const s = score(docs('kinds', KINDS));
    for (const kind of KINDS) within3(s[kind], kind);
  });

  it('is within 3% on the held-back slice', () => {
    const s = score(docs('heldout', KINDS));
    for (const kind of KINDS) within3(s[kind], `held-back ${kind}`);
  });

  it('stays within 3% above a giant unbroken run, which it estimates from samples', () => {
    let seed = 7;
    const rnd = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296;
    let text = '';
    while (text.length < 300000) text += 'abcdefghijklmnopqrstuvwxyz'[Math.floor(rnd() * 26)];
    const x = ctxkeel.estimateTokens(text, { estimator: 'o200k' });
    const d = ctxkeel.estimateTokens(text);
    assert.ok(d >= x && d <= 1.03 * x, `default ${d}, exact ${x}`);
  });
});

describe('no script or whitespace class is undercounted', { skip: noReference }, () => {
  for (const d of fs.existsSync(path.join(DATA, 'classes')) ? classDocs() : []) {
    it(`${d.cat}: the default is at least 90% of the exact count`, () => {
      const x = exact(O200K, d.texts[0]);
      const e = ctxkeel.estimateTokens(d.texts[0]);
      assert.ok(e >= 0.9 * x, `${d.cat}: ${e} for ${x} tokens`);
    });
  }
});

describe('the rank tables', { skip: noReference }, () => {
  it('are what js-tiktoken and gpt-tokenizer ship (tools/gen_bpe_ranks.js --check)', () => {
    const out = execFileSync(process.execPath,
      [path.join(repoRoot, 'tools', 'gen_bpe_ranks.js'), '--check'], { encoding: 'utf8' });
    assert.match(out, /both tables match/);
  });
});
