#!/usr/bin/env node
'use strict';
/*
 * gen_token_table.js - generates csrc/src/token_table.h, the pre-tokenizer's character classes
 * and the table of frequent pieces of ctxkeel's token counter.
 *
 *     npm install                             # js-tiktoken is a devDependency
 *     node tools/gen_token_table.js           # writes csrc/src/token_table.h
 *     node tools/gen_token_table.js --check   # fails if the committed file is out of date
 *
 * tiktoken-family tokenizers cut text into pieces with a pre-tokenizer regex and run BPE on each
 * piece alone, so the count of a text is the sum of the counts of its pieces. tokens.c cuts
 * with hand-written scanners for the o200k_base and cl100k_base regexes and counts each piece
 * exactly (bpe.c, on the rank tables of tools/gen_bpe_ranks.js). This script gives it:
 *
 *   - the regex class of every code point (letter case, mark, number, space, other), as a
 *     two-stage table;
 *   - per encoding, the exact count of the 4,096 most frequent pieces of the TRAIN half of
 *     tests/data/tokens (an open-addressing hash table keyed by the piece's bytes, hashed as
 *     tokens.c hashes them), which answers most pieces of most text from the second-level
 *     cache before the larger index of bpe.c is touched.
 *
 * The counts come from js-tiktoken (o200k_base, cl100k_base; no training piece has U+FEFF or
 * U+0085, where its JavaScript \s differs from tiktoken's). The output depends only on the
 * corpus and the tokenizer version, and is byte-for-byte reproducible.
 */

const fs = require('fs');
const path = require('path');

const ROOT = path.resolve(__dirname, '..');
const OUT = path.join(ROOT, 'csrc', 'src', 'token_table.h');
const TRAIN = path.join(ROOT, 'tests', 'data', 'tokens', 'train');

let o200k, cl100k, TOKENIZER_VERSION;
try {
  const { getEncoding } = require('js-tiktoken');
  const counter = (name) => {
    const enc = getEncoding(name);
    return { count: (text) => enc.encode(text, [], []).length };
  };
  o200k = counter('o200k_base');
  cl100k = counter('cl100k_base');
  TOKENIZER_VERSION = require('./tokens_util.js').versionOf('js-tiktoken');
} catch (e) {
  console.error('gen_token_table: needs js-tiktoken (npm install)');
  process.exit(2);
}

/* The pre-tokenizer regexes, as tiktoken defines them, with \s written as Unicode's White_Space
 * (as tiktoken's Rust regex reads \s; see regexClass()). tokens.c implements the same rules by
 * hand; tools/tokens_measure.js checks that both cut identically. */
const CONTRACTION = String.raw`'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE])`;
const WS = String.raw`\p{White_Space}`;
const NOT_WS = String.raw`\P{White_Space}`;
const spaces = (re) => re.replace(/\\s/g, WS).replace(/\\S/g, NOT_WS);
const O200K_PATTERN = new RegExp(spaces(
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` +
    `(?:${CONTRACTION})?` +
    String.raw`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` +
    `(?:${CONTRACTION})?` +
    String.raw`|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
  'gu');
const CL100K_PATTERN = new RegExp(spaces(
  `${CONTRACTION}` +
    String.raw`|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]` +
    String.raw`|\s+(?!\S)|\s`),
  'gu');

/* How many pieces each encoding's table holds, and the longest piece it may hold. */
const TABLE_PIECES = 4096;
const MAX_PIECE_BYTES = 48;


/* ---- Unicode classes ---------------------------------------------------------------------- */

/* Regex classes (bits 0-2 of a class byte). NL is \r or \n, WS any other \s. \s is Unicode's
 * White_Space, as in tiktoken (Rust's regex): JavaScript's \s differs on two characters, taking
 * U+FEFF and leaving out U+0085, so js-tiktoken and gpt-tokenizer cut texts with those
 * characters differently from tiktoken, and ctxkeel follows tiktoken. */
const RC = { P: 0, LU: 1, LL: 2, LO: 3, M: 4, N: 5, WS: 6, NL: 7 };
function regexClass(ch) {
  if (ch === '\r' || ch === '\n') return RC.NL;
  if (/[\p{Lu}\p{Lt}]/u.test(ch)) return RC.LU;
  if (/\p{Ll}/u.test(ch)) return RC.LL;
  if (/[\p{Lm}\p{Lo}]/u.test(ch)) return RC.LO;
  if (/\p{M}/u.test(ch)) return RC.M;
  if (/\p{N}/u.test(ch)) return RC.N;
  if (/\p{White_Space}/u.test(ch)) return RC.WS;
  return RC.P;
}

/* One class byte per code point; surrogates (never in valid UTF-8) stay 0, class P. */
function buildClasses() {
  const cls = new Uint8Array(0x110000);
  for (let cp = 0; cp < 0x110000; cp++) {
    if (cp >= 0xd800 && cp < 0xe000) continue;
    cls[cp] = regexClass(String.fromCodePoint(cp));
  }
  return cls;
}

/* Two-stage table: stage1[cp >> 8] names a 256-entry block of stage2; equal blocks shared. */
function twoStage(cls) {
  const stage1 = [];
  const blocks = [];
  const seen = new Map();
  for (let hi = 0; hi < 0x1100; hi++) {
    const block = cls.subarray(hi << 8, (hi + 1) << 8);
    const key = Buffer.from(block).toString('latin1');
    let idx = seen.get(key);
    if (idx === undefined) {
      idx = blocks.length;
      seen.set(key, idx);
      blocks.push(block);
    }
    stage1.push(idx);
  }
  return { stage1, blocks };
}

/* ---- Hashing (must equal tokens.c) ------------------------------------------------------- */

const M64 = (1n << 64n) - 1n;
const K_LEN = 0x9e3779b97f4a7c15n;
const K_MIX = 0xbf58476d1ce4e5b9n;

/* The piece's bytes as little-endian 64-bit words, the last one padded with zeros; each word is
 * xored in and multiplied. The slot is the top half of the result (which every input bit
 * reaches), masked. */
function pieceHash(bytes) {
  let h = (BigInt(bytes.length) * K_LEN) & M64;
  for (let i = 0; i < bytes.length; i += 8) {
    let w = 0n;
    for (let k = Math.min(7, bytes.length - 1 - i); k >= 0; k--) {
      w = (w << 8n) | BigInt(bytes[i + k]);
    }
    h = ((h ^ w) * K_MIX) & M64;
  }
  return Number(h >> 32n);
}

/* ---- Training ---------------------------------------------------------------------------- */

function listDocs(dir) {
  const out = [];
  for (const cat of fs.readdirSync(dir).sort()) {
    const d = path.join(dir, cat);
    if (!fs.statSync(d).isDirectory()) continue;
    for (const f of fs.readdirSync(d).sort()) {
      if (f.endsWith('.txt')) out.push(fs.readFileSync(path.join(d, f), 'utf8'));
    }
  }
  return out;
}

function compareBytes(a, b) {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/* The most frequent pieces of the training texts with their exact counts, ties broken by bytes
 * so the choice is stable. One-byte pieces (one token) and digit groups (one token) stay out:
 * tokens.c counts them without looking them up. */
function frequentPieces(prof, docs) {
  const freq = new Map();
  for (const text of docs) {
    for (const p of text.match(prof.pattern) || []) freq.set(p, (freq.get(p) || 0) + 1);
  }
  const candidates = [...freq.entries()].filter(
    ([p]) => !/^[0-9]{2,3}$/.test(p) && Buffer.byteLength(p, 'utf8') > 1 &&
      Buffer.byteLength(p, 'utf8') <= MAX_PIECE_BYTES);
  candidates.sort((a, b) => b[1] - a[1] || compareBytes(a[0], b[0]));
  const table = new Map();
  for (const [p] of candidates.slice(0, TABLE_PIECES)) {
    if (/[\ufeff\u0085]/.test(p)) throw new Error('a training piece has U+FEFF or U+0085');
    table.set(p, prof.enc.count(p));
  }
  return { table, pieces: freq.size };
}

/* The table as open addressing with linear probing, a power-of-two number of slots at most a
 * quarter full: a quarter of the pieces of new text miss the table. A slot is two parallel
 * entries: `meta` (tokens << 26 | length << 20 | MORE | offset into the byte blob; 0 for an
 * empty slot) and `key`, the piece's first eight bytes as a little-endian word. Most pieces
 * are eight bytes or shorter, so a lookup usually reads one meta and one key; longer pieces
 * compare the rest in the blob, which holds their bytes and ends with 8 zero bytes so that
 * whole words can be read.
 *
 * Each extra probe is a branch the CPU may mispredict, so probes are kept few. `table` lists
 * the pieces most frequent first, and they are placed in that order: the frequent ones sit in
 * their home slot and collisions fall on the rare ones. And MORE (bit 19) marks the slots that
 * some piece probes past to reach its own: a lookup that does not match in a slot without it
 * is a miss, as surely as one that meets an empty slot. */
const META_MORE = 1 << 19;

function buildHash(table) {
  const entries = [...table.entries()];
  let size = 1;
  while (size < entries.length * 4) size <<= 1;
  const meta = new Uint32Array(size);
  const keys = new Array(size).fill(0n);
  const blobParts = [];
  const placed = [];
  let offset = 0;
  for (const [piece, tokens] of entries) {
    const bytes = Buffer.from(piece, 'utf8');
    if (tokens > 63 || bytes.length > 63) throw new Error('piece too long: ' + piece);
    const home = pieceHash(bytes) & (size - 1);
    let i = home;
    while (meta[i]) i = (i + 1) & (size - 1);
    placed.push([home, i]);
    let key = 0n;
    for (let k = Math.min(7, bytes.length - 1); k >= 0; k--) key = (key << 8n) | BigInt(bytes[k]);
    keys[i] = key;
    meta[i] = ((tokens << 26) | (bytes.length << 20) | (bytes.length > 8 ? offset : 0)) >>> 0;
    if (bytes.length > 8) {
      blobParts.push(bytes);
      offset += bytes.length;
    }
  }
  if (offset >= META_MORE) throw new Error('blob too large');
  for (const [home, at] of placed) {
    for (let i = home; i !== at; i = (i + 1) & (size - 1)) meta[i] = (meta[i] | META_MORE) >>> 0;
  }
  blobParts.push(Buffer.alloc(8));
  return { meta, keys, blob: Buffer.concat(blobParts) };
}

/* ---- Output ------------------------------------------------------------------------------ */

function cArray(type, name, values, perLine) {
  const lines = [];
  for (let i = 0; i < values.length; i += perLine) {
    lines.push('    ' + Array.from(values.slice(i, i + perLine)).join(',') + ',');
  }
  return `static const ${type} ${name}[${values.length}] = {\n${lines.join('\n')}\n};\n`;
}

function render(classes, profiles) {
  const { stage1, blocks } = twoStage(classes);
  if (stage1[0] !== 0) throw new Error('tokens.c reads ASCII classes from block 0');
  const stage2 = new Uint8Array(blocks.length * 256);
  blocks.forEach((b, i) => stage2.set(b, i * 256));
  let s = [
    '/* token_table.h - GENERATED by tools/gen_token_table.js; do not edit by hand.',
    ' * The character classes of the pre-tokenizers in tokens.c and the frequent pieces of',
    ` * tests/data/tokens/train with their exact counts (js-tiktoken ${TOKENIZER_VERSION}, o200k_base`,
    ' * and cl100k_base). Regenerate with `node tools/gen_token_table.js` after changing the',
    ' * corpus or the tokenizer; see that file for what each array holds. */',
    '#ifndef CK_TOKEN_TABLE_H_',
    '#define CK_TOKEN_TABLE_H_',
    '',
    '#include <stdint.h>',
    '',
    '/* Regex class of a code point: ck_tt_stage2[ck_tt_stage1[cp >> 8] * 256 + (cp & 255)]. */',
    '',
  ].join('\n');
  s += `#define CK_TT_MAX_PIECE ${MAX_PIECE_BYTES}\n\n`;
  s += cArray('uint16_t', 'ck_tt_stage1', stage1, 24);
  s += cArray('uint8_t', 'ck_tt_stage2', stage2, 64);
  for (const { prof, model } of profiles) {
    const { meta, keys, blob } = buildHash(model.table);
    const n = prof.name;
    s += `\n/* ---- ${n}: ${model.table.size} pieces, ${meta.length} slots ---- */\n`;
    s += `#define CK_TT_${n.toUpperCase()}_MASK ${meta.length - 1}u\n`;
    s += cArray('uint32_t', `ck_tt_${n}_meta`, meta, 10);
    s += cArray('uint64_t', `ck_tt_${n}_keys`, keys.map((k) => '0x' + k.toString(16)), 6);
    s += cArray('uint8_t', `ck_tt_${n}_blob`, blob, 32);
  }
  s += '\n#endif\n';
  return s;
}

function main() {
  const check = process.argv.includes('--check');
  const docs = listDocs(TRAIN);
  const classes = buildClasses();
  const profiles = [];
  for (const prof of [
    { name: 'o200k', enc: o200k, pattern: O200K_PATTERN },
    { name: 'cl100k', enc: cl100k, pattern: CL100K_PATTERN },
  ]) {
    const model = frequentPieces(prof, docs);
    console.log(`${prof.name}: ${model.pieces} distinct pieces, table ${model.table.size}`);
    profiles.push({ prof, model });
  }
  const text = render(classes, profiles);
  if (check) {
    const old = fs.existsSync(OUT) ? fs.readFileSync(OUT, 'utf8') : '';
    if (old !== text) {
      console.error('gen_token_table: csrc/src/token_table.h is out of date');
      process.exit(1);
    }
    console.log('token_table.h is up to date');
    return;
  }
  fs.writeFileSync(OUT, text);
  console.log(`wrote ${path.relative(ROOT, OUT)} (${text.length} bytes)`);
}

if (require.main === module) main();

module.exports = { O200K_PATTERN, CL100K_PATTERN, pieceHash };
