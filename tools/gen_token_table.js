#!/usr/bin/env node
'use strict';
/*
 * gen_token_table.js - generates csrc/src/token_table.h, the data of ctxkeel's token estimator.
 *
 *     npm install --no-save gpt-tokenizer     # or have it as a devDependency
 *     node tools/gen_token_table.js           # writes csrc/src/token_table.h
 *     node tools/gen_token_table.js --check   # fails if the committed file is out of date
 *
 * The estimator (csrc/src/tokens.c) models how tiktoken-family tokenizers count: a pre-tokenizer
 * regex cuts text into pieces, BPE runs on each piece alone, so the count of a text is the sum
 * of the counts of its pieces. This script measures, with an exact tokenizer (gpt-tokenizer,
 * o200k_base and cl100k_base) over the TRAIN half of tests/data/tokens, everything the C side
 * needs and cannot compute cheaply:
 *
 *   - a Unicode class for every code point, as the regexes see it (letter case, mark, number,
 *     space, other), plus its script group and whether the character alone is one token;
 *   - per profile, the exact count of the most frequent pieces (an open-addressing hash table
 *     keyed by the piece's bytes, hashed as tokens.c hashes them);
 *   - per profile, for every other piece, the chance that a token boundary falls between two
 *     adjacent characters ("units": an ASCII byte, or a script group of other characters),
 *     estimated from where BPE actually split the rarer training pieces, and the expected
 *     number of extra tokens inside characters that are not one token by themselves;
 *   - per profile, the pairs of CJK characters that sit side by side inside some vocabulary
 *     token (BPE cuts nearly every other pair apart) and how often BPE cuts them anyway;
 *   - per profile, which two-byte ASCII pieces are one token.
 *
 * A piece missing from the table then costs 1 + the sum of those chances + the inner extras,
 * in 1/256ths of a token. The TEST half and the transcripts in ../shared/corpus are never read
 * here; tools/tokens_measure.js scores the result on them. The output depends only on the
 * corpus and the tokenizer version, and is byte-for-byte reproducible.
 */

const fs = require('fs');
const path = require('path');

const ROOT = path.resolve(__dirname, '..');
const OUT = path.join(ROOT, 'csrc', 'src', 'token_table.h');
const TRAIN = path.join(ROOT, 'tests', 'data', 'tokens', 'train');

let o200k, cl100k;
try {
  o200k = require('gpt-tokenizer/encoding/o200k_base');
  cl100k = require('gpt-tokenizer/encoding/cl100k_base');
} catch (e) {
  console.error('gen_token_table: needs gpt-tokenizer (npm install --no-save gpt-tokenizer)');
  process.exit(2);
}
const TOKENIZER_VERSION = require('gpt-tokenizer/package.json').version;

/* The pre-tokenizer regexes, as tiktoken and gpt-tokenizer define them. tokens.c implements
 * the same rules by hand; tools/tokens_measure.js checks that both cut identically. */
const CONTRACTION = String.raw`'(?:[sS]|[dD]|[mM]|[tT]|[lL][lL]|[vV][eE]|[rR][eE])`;
const O200K_PATTERN = new RegExp(
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+` +
    `(?:${CONTRACTION})?` +
    String.raw`|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*` +
    `(?:${CONTRACTION})?` +
    String.raw`|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
  'gu');
const CL100K_PATTERN = new RegExp(
  `${CONTRACTION}` +
    String.raw`|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s+$|\s*[\r\n]` +
    String.raw`|\s+(?!\S)|\s`,
  'gu');

/* How many pieces each profile's exact table holds, and the longest piece it may hold. */
const TABLE_PIECES = 4096;
const MAX_PIECE_BYTES = 48;

const NO_SPECIAL = { disallowedSpecial: new Set() };

/* ---- Unicode classes ---------------------------------------------------------------------- */

/* Regex classes (bits 0-2 of a class byte). NL is \r or \n, WS any other \s. */
const RC = { P: 0, LU: 1, LL: 2, LO: 3, M: 4, N: 5, WS: 6, NL: 7 };
/* Script groups of letters (bits 3-5). 1-4 are the CJK scripts, whose joined pairs count. */
const SCRIPT = {
  OTHER: 0, HAN: 1, HIRAGANA: 2, KATAKANA: 3, HANGUL: 4, LATIN: 5, CYRILLIC_GREEK: 6,
};
const SINGLE_O200K = 0x40;
const SINGLE_CL100K = 0x80;

function regexClass(ch) {
  if (ch === '\r' || ch === '\n') return RC.NL;
  if (/[\p{Lu}\p{Lt}]/u.test(ch)) return RC.LU;
  if (/\p{Ll}/u.test(ch)) return RC.LL;
  if (/[\p{Lm}\p{Lo}]/u.test(ch)) return RC.LO;
  if (/\p{M}/u.test(ch)) return RC.M;
  if (/\p{N}/u.test(ch)) return RC.N;
  if (/\s/u.test(ch)) return RC.WS;
  return RC.P;
}

function scriptOf(ch) {
  if (/\p{Script=Han}/u.test(ch)) return SCRIPT.HAN;
  /* Marks shared by both kana (the long vowel mark, voicing marks) count as katakana. */
  if (/\p{Script_Extensions=Katakana}/u.test(ch)) return SCRIPT.KATAKANA;
  if (/\p{Script_Extensions=Hiragana}/u.test(ch)) return SCRIPT.HIRAGANA;
  if (/\p{Script=Hangul}/u.test(ch)) return SCRIPT.HANGUL;
  if (/\p{Script=Latin}/u.test(ch)) return SCRIPT.LATIN;
  if (/[\p{Script=Cyrillic}\p{Script=Greek}]/u.test(ch)) return SCRIPT.CYRILLIC_GREEK;
  return SCRIPT.OTHER;
}

/* One class byte per code point; surrogates (never in valid UTF-8) stay 0, class P. */
function buildClasses() {
  const cls = new Uint8Array(0x110000);
  for (let cp = 0; cp < 0x110000; cp++) {
    if (cp >= 0xd800 && cp < 0xe000) continue;
    const ch = String.fromCodePoint(cp);
    const rc = regexClass(ch);
    let b = rc;
    if (rc === RC.LU || rc === RC.LL || rc === RC.LO) b |= scriptOf(ch) << 3;
    if (cp >= 0x80 && /\p{Assigned}/u.test(ch)) {
      if (o200k.encode(ch, NO_SPECIAL).length === 1) b |= SINGLE_O200K;
      if (cl100k.encode(ch, NO_SPECIAL).length === 1) b |= SINGLE_CL100K;
    }
    cls[cp] = b;
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

/* ---- Units: what the boundary model sees ------------------------------------------------- */

/* ASCII bytes are units 0-127; any other character is 128 + 2 * group + (one token alone),
 * with groups: 0-6 letter scripts, 7 mark, 8 number, 9 space, 10 other. Invalid UTF-8 bytes in
 * C are unit "other, not one token". */
const N_UNITS = 128 + 2 * 11;

function unitOf(cp, cls, singleBit) {
  if (cp < 0x80) return cp;
  const b = cls[cp];
  const rc = b & 7;
  let group;
  if (rc === RC.LU || rc === RC.LL || rc === RC.LO) group = (b >> 3) & 7;
  else if (rc === RC.M) group = 7;
  else if (rc === RC.N) group = 8;
  else if (rc === RC.WS || rc === RC.NL) group = 9;
  else group = 10;
  return 128 + 2 * group + (b & singleBit ? 1 : 0);
}

/* The CJK script (1-4) of a letter, else 0. */
function cjkOf(cp, cls) {
  const b = cls[cp];
  const rc = b & 7;
  if (rc !== RC.LU && rc !== RC.LL && rc !== RC.LO) return 0;
  const script = (b >> 3) & 7;
  return script >= SCRIPT.HAN && script <= SCRIPT.HANGUL ? script : 0;
}

/* CJK text is one long piece per clause, and BPE cuts it almost wherever two characters never
 * sit side by side inside a vocabulary token (measured: 99.9% of such pairs are cut, against
 * about 12% of the others). So each profile carries the set of such "joined" pairs. */
function joinedPairs(enc, cls) {
  const core = enc.default.bytePairEncodingCoreProcessor;
  const pairs = new Set();
  for (let id = 0; id < enc.default.vocabularySize; id++) {
    const t = core.tryDecodeToken(id);
    if (typeof t !== 'string') continue;
    const cps = [...t].map((ch) => ch.codePointAt(0));
    for (let k = 0; k + 1 < cps.length; k++) {
      if (cjkOf(cps[k], cls) && cjkOf(cps[k + 1], cls)) pairs.add(pairKey(cps[k], cps[k + 1]));
    }
  }
  return pairs;
}

function pairKey(a, b) {
  return (BigInt(a) << 21n) | BigInt(b);
}

/* A coarser unit, used to smooth pairs seen too rarely in training. */
function coarseOf(u) {
  if (u >= 128) return u;
  const ch = String.fromCharCode(u);
  if (/[aeiouy]/.test(ch)) return 200;
  if (/[a-z]/.test(ch)) return 201;
  if (/[AEIOUY]/.test(ch)) return 202;
  if (/[A-Z]/.test(ch)) return 203;
  if (/[0-9]/.test(ch)) return 204;
  if (ch === ' ') return 205;
  if (ch === '\n' || ch === '\r') return 206;
  if (/\s/.test(ch)) return 207;
  return 208;
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

/* Where BPE cut a piece: the token count and the byte offsets of the inner boundaries. */
function splitOf(enc, piece) {
  const ids = enc.encode(piece, NO_SPECIAL);
  const core = enc.default.bytePairEncodingCoreProcessor;
  const cuts = new Set();
  let at = 0;
  for (let k = 0; k + 1 < ids.length; k++) {
    const t = core.tryDecodeToken(ids[k]);
    at += typeof t === 'string' ? Buffer.byteLength(t, 'utf8') : t.length;
    cuts.add(at);
  }
  return { tokens: ids.length, cuts };
}

function isDigitGroup(piece) {
  return /^[0-9]{1,3}$/.test(piece);
}

/* Pieces tokens.c prices by rule, never by the model: one-byte pieces (one token, never looked
 * up), digit groups (never in the table: one token, or the pairOneToken() bit for two digits)
 * and, when the table does not have them, two-byte ASCII pieces (the pairOneToken() bits). Frequent two-byte pieces still go in the table, which every
 * longer piece tries first, so that the common path has no other branch. */
function isRuled(piece) {
  return isDigitGroup(piece) || /^[\x00-\x7f]{1,2}$/.test(piece);
}

function trainProfile(prof, docs, cls) {
  const freq = new Map();
  for (const text of docs) {
    for (const p of text.match(prof.pattern) || []) freq.set(p, (freq.get(p) || 0) + 1);
  }
  const splits = new Map();
  const split = (p) => {
    let s = splits.get(p);
    if (!s) splits.set(p, (s = splitOf(prof.enc, p)));
    return s;
  };

  /* The table: the most frequent pieces, ties broken by bytes so the choice is stable. Digit
   * groups stay out: tokens.c prices them without looking them up. */
  const candidates = [...freq.entries()].filter(
    ([p]) => !/^[0-9]{2,3}$/.test(p) && Buffer.byteLength(p, 'utf8') > 1 &&
      Buffer.byteLength(p, 'utf8') <= MAX_PIECE_BYTES);
  candidates.sort((a, b) => b[1] - a[1] || compareBytes(a[0], b[0]));
  const table = new Map();
  for (const [p] of candidates.slice(0, TABLE_PIECES)) table.set(p, split(p).tokens);

  /* Boundary statistics over the distinct pieces left out of the table: the estimator meets
   * such pieces in new text, and counting each once (not by frequency) keeps a few repeated
   * words from standing for all the rare ones. */
  const joined = joinedPairs(prof.enc, cls);
  const joinB = new Float64Array(16);
  const joinN = new Float64Array(16);
  const pairB = new Float64Array(N_UNITS * N_UNITS);
  const pairN = new Float64Array(N_UNITS * N_UNITS);
  const coarse = new Map();
  const innerB = new Float64Array(N_UNITS);
  const innerN = new Float64Array(N_UNITS);
  const residual = [...freq.keys()].filter((p) => !table.has(p) && !isRuled(p)).sort();
  for (const p of residual) {
    const { cuts } = split(p);
    let prev = -1;
    let prevCp = 0;
    let at = 0;
    for (const ch of p) {
      const cp = ch.codePointAt(0);
      const u = unitOf(cp, cls, prof.singleBit);
      const len = Buffer.byteLength(ch, 'utf8');
      const ja = prev >= 0 ? cjkOf(prevCp, cls) : 0;
      const jb = cjkOf(cp, cls);
      if (ja && jb && joined.has(pairKey(prevCp, cp))) {
        joinB[(ja - 1) * 4 + jb - 1] += cuts.has(at) ? 1 : 0;
        joinN[(ja - 1) * 4 + jb - 1] += 1;
      } else if (prev >= 0) {
        const hit = cuts.has(at) ? 1 : 0;
        pairB[prev * N_UNITS + u] += hit;
        pairN[prev * N_UNITS + u] += 1;
        const key = coarseOf(prev) * 1000 + coarseOf(u);
        const c = coarse.get(key) || [0, 0];
        c[0] += hit;
        c[1] += 1;
        coarse.set(key, c);
      }
      if (len > 1) {
        let inner = 0;
        for (let k = 1; k < len; k++) inner += cuts.has(at + k) ? 1 : 0;
        innerB[u] += inner;
        innerN[u] += 1;
      }
      at += len;
      prev = u;
      prevCp = cp;
    }
  }

  let allB = 0;
  let allN = 0;
  for (const [b, n] of coarse.values()) {
    allB += b;
    allN += n;
  }
  const global = allN ? allB / allN : 0.5;
  const pair = new Uint8Array(N_UNITS * N_UNITS);
  for (let u = 0; u < N_UNITS; u++) {
    for (let v = 0; v < N_UNITS; v++) {
      const c = coarse.get(coarseOf(u) * 1000 + coarseOf(v)) || [0, 0];
      const prior = (c[0] + 4 * global) / (c[1] + 4);
      const i = u * N_UNITS + v;
      const p = (pairB[i] + 4 * prior) / (pairN[i] + 4);
      pair[i] = Math.min(255, Math.round(p * 256));
    }
  }
  /* A long run of one whitespace character is one token up to some length: the chance of a
   * cut inside such a run is one in that length, which the table rarely gets to see. */
  for (const ch of [' ', '\t', '\n']) {
    let run = 1;
    while (run < 256 && prof.enc.encode(ch.repeat(run + 1), NO_SPECIAL).length === 1) run++;
    const u = ch.charCodeAt(0);
    pair[u * N_UNITS + u] = Math.max(1, Math.round(256 / run));
  }

  /* Inner cuts of characters that are not one token: measured, else by their byte length. */
  const inner = new Uint16Array(N_UNITS);
  for (let u = 128; u < N_UNITS; u++) {
    const single = (u - 128) & 1;
    const fallback = single ? 0 : 1.5;
    const v = innerN[u] >= 8 ? innerB[u] / innerN[u] : fallback;
    inner[u] = Math.round(v * 256);
  }

  /* Joined CJK pairs: the measured share of them cut, by script pair, smoothed toward the
   * share over all scripts. */
  let jb = 0;
  let jn = 0;
  for (let k = 0; k < 16; k++) {
    jb += joinB[k];
    jn += joinN[k];
  }
  const joinAll = jn ? jb / jn : 0.15;
  const joinCost = new Uint8Array(16);
  for (let k = 0; k < 16; k++) {
    joinCost[k] = Math.round(((joinB[k] + 8 * joinAll) / (joinN[k] + 8)) * 256);
  }

  return { table, pair, inner, joined, joinCost, residualTypes: residual.length,
    pieces: freq.size };
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

/* The joined CJK pairs as an open-addressing set of (first << 21 | second) keys, at most half
 * full, probed linearly from the top half of key * K_LEN. */
function buildJoined(pairs) {
  let size = 1;
  while (size < pairs.size * 2) size <<= 1;
  const slots = new Array(size).fill(0n);
  for (const key of [...pairs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    let i = Number(((key * K_LEN) & M64) >> 32n) & (size - 1);
    while (slots[i]) i = (i + 1) & (size - 1);
    slots[i] = key;
  }
  return slots;
}

/* Which two-byte ASCII pieces are one token (else two): a bit per pair, first byte major. Such
 * pieces are a sixth of most text, and this settles them without hashing. */
function pairOneToken(prof) {
  const bits = new Uint8Array((128 * 128) / 8);
  for (let a = 0; a < 128; a++) {
    for (let b = 0; b < 128; b++) {
      const piece = String.fromCharCode(a, b);
      if (prof.enc.encode(piece, NO_SPECIAL).length === 1) bits[(a * 128 + b) >> 3] |= 1 << (b & 7);
    }
  }
  return bits;
}

/* ---- The JS mirror of tokens.c's cost (used for the summary printed below) --------------- */

function estimateMirror(prof, model, cls, text) {
  let cost = 0;
  for (const p of text.match(prof.pattern) || []) {
    const hit = model.table.get(p);
    if (hit !== undefined) {
      cost += hit * 256;
      continue;
    }
    if (isRuled(p)) {
      cost += 256 * prof.enc.encode(p, NO_SPECIAL).length;
      continue;
    }
    cost += 256;
    let prev = -1;
    let prevCp = 0;
    for (const ch of p) {
      const cp = ch.codePointAt(0);
      const u = unitOf(cp, cls, prof.singleBit);
      const ja = prev >= 0 ? cjkOf(prevCp, cls) : 0;
      const jb = cjkOf(cp, cls);
      if (ja && jb && model.joined.has(pairKey(prevCp, cp))) {
        cost += model.joinCost[(ja - 1) * 4 + jb - 1];
      } else if (prev >= 0) {
        cost += model.pair[prev * N_UNITS + u];
      }
      cost += Math.min(model.inner[u], (Buffer.byteLength(ch, 'utf8') - 1) * 256);
      prev = u;
      prevCp = cp;
    }
  }
  return cost;
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
    ' * The data of the token estimator in tokens.c, measured with gpt-tokenizer ' +
      `${TOKENIZER_VERSION} (o200k_base,`,
    ' * cl100k_base) on tests/data/tokens/train. Regenerate with `node tools/gen_token_table.js`',
    ' * after changing the corpus, the model or the tokenizer; see that file for what each',
    ' * array holds. */',
    '#ifndef CK_TOKEN_TABLE_H_',
    '#define CK_TOKEN_TABLE_H_',
    '',
    '#include <stdint.h>',
    '',
    '/* Class byte of a code point (ck_tt_stage2[ck_tt_stage1[cp >> 8] * 256 + (cp & 255)]):',
    ' * bits 0-2 regex class, bits 3-5 script of a letter, bit 6 one token alone in o200k_base,',
    ' * bit 7 in cl100k_base. */',
    '',
  ].join('\n');
  s += `#define CK_TT_UNITS ${N_UNITS}\n`;
  s += `#define CK_TT_MAX_PIECE ${MAX_PIECE_BYTES}\n`;
  s += `#define CK_TT_SINGLE_O200K 0x${SINGLE_O200K.toString(16)}\n`;
  s += `#define CK_TT_SINGLE_CL100K 0x${SINGLE_CL100K.toString(16)}\n\n`;
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
    s += cArray('uint8_t', `ck_tt_${n}_pair`, model.pair, 37);
    s += cArray('uint16_t', `ck_tt_${n}_inner`, model.inner, 16);
    s += cArray('uint8_t', `ck_tt_${n}_pair1`, pairOneToken(prof), 32);
    const joinedSlots = buildJoined(model.joined);
    s += `#define CK_TT_${n.toUpperCase()}_JOINED_MASK ${joinedSlots.length - 1}u\n`;
    s += cArray('uint64_t', `ck_tt_${n}_joined`, joinedSlots.map((k) => '0x' + k.toString(16)), 6);
    s += cArray('uint8_t', `ck_tt_${n}_join_cost`, model.joinCost, 16);
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
    { name: 'o200k', enc: o200k, pattern: O200K_PATTERN, singleBit: SINGLE_O200K },
    { name: 'cl100k', enc: cl100k, pattern: CL100K_PATTERN, singleBit: SINGLE_CL100K },
  ]) {
    const model = trainProfile(prof, docs, classes);
    let exact = 0;
    let est = 0;
    for (const text of docs) {
      exact += prof.enc.encode(text, NO_SPECIAL).length;
      est += Math.round(estimateMirror(prof, model, classes, text) / 256);
    }
    console.log(`${prof.name}: ${model.pieces} distinct pieces, table ${model.table.size}, ` +
      `residual ${model.residualTypes}; train ${exact} tokens, estimate ${est} ` +
      `(${((100 * (est - exact)) / exact).toFixed(2)}%)`);
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

module.exports = { O200K_PATTERN, CL100K_PATTERN, pieceHash, NO_SPECIAL };
