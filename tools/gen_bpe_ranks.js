#!/usr/bin/env node
'use strict';
/*
 * gen_bpe_ranks.js - generates the BPE rank tables of ctxkeel's exact token counter:
 * csrc/src/bpe_o200k.h and csrc/src/bpe_cl100k.h.
 *
 *     npm install                              # js-tiktoken and gpt-tokenizer are devDependencies
 *     node tools/gen_bpe_ranks.js              # writes both headers
 *     node tools/gen_bpe_ranks.js --check      # fails if a committed header differs from what
 *                                              # the packages give (tests/node run this)
 *
 * The ranks come from js-tiktoken (its dist/ranks/<encoding>.cjs, the tiktoken rank files of
 * OpenAI in a compressed text form) and are checked, token for token, against the second copy
 * that gpt-tokenizer ships (bpeRanks/<encoding>); the two must agree or nothing is written.
 *
 * What a header holds, for one encoding, tokens in rank order (rank = position):
 *   - CK_BPE_<ENC>_TOKENS, the number of tokens, and CK_BPE_<ENC>_BYTES, their total length;
 *   - ck_bpe_<enc>_lens: one byte per token, its length in bytes (1 to 128) plus
 *     CK_BPE_LEN_BIAS (64), which keeps most of them one printable character in the file;
 *   - ck_bpe_<enc>_bytes: the bytes of every token, one after another.
 * Both arrays are written as rows of string literals (rows of CK_BPE_ROW bytes, the longest
 * literal ISO C requires compilers to take), so the data is in the binary as it stands in the
 * file: nothing is decoded or parsed at run time. bpe.c indexes it on first use. Printable
 * ASCII stays as it is; any other byte is a three-digit octal escape, which can never run into
 * the character after it. Special tokens (<|endoftext|> and the like) are not in these tables:
 * ctxkeel counts them as the text they are. The output depends only on the package versions
 * and is byte-for-byte reproducible.
 */

const fs = require('fs');
const path = require('path');

const { versionOf } = require('./tokens_util.js');

const ROOT = path.resolve(__dirname, '..');
const ROW = 4095;
/* Lengths are stored plus 64, so that the common ones (1 to 27) are single printable
 * characters in the literal rather than four-character escapes. */
const LEN_BIAS = 64;
const ENCODINGS = [
  { name: 'o200k_base', tag: 'o200k', out: path.join(ROOT, 'csrc', 'src', 'bpe_o200k.h') },
  { name: 'cl100k_base', tag: 'cl100k', out: path.join(ROOT, 'csrc', 'src', 'bpe_cl100k.h') },
];

function need(mod) {
  try {
    return require(mod);
  } catch (e) {
    console.error(`gen_bpe_ranks: needs ${mod.split('/')[0]} (npm install)`);
    process.exit(2);
  }
}

/* The tokens of an encoding as Buffers in rank order, from js-tiktoken's compressed ranks:
 * lines of "<prefix> <first rank> <base64 token> <base64 token> ...". */
function tiktokenTokens(name) {
  const ranks = need(`js-tiktoken/ranks/${name}`);
  const byRank = [];
  for (const line of ranks.bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, first, ...tokens] = line.split(' ');
    tokens.forEach((b64, i) => {
      byRank[Number(first) + i] = Buffer.from(b64, 'base64');
    });
  }
  for (let r = 0; r < byRank.length; r++) {
    if (!byRank[r]) throw new Error(`${name}: js-tiktoken has no token of rank ${r}`);
  }
  return byRank;
}

/* The same from gpt-tokenizer: an array of strings (UTF-8 tokens) and byte arrays. */
function gptTokenizerTokens(name) {
  const ranks = need(`gpt-tokenizer/cjs/bpeRanks/${name}`).default;
  return ranks.map((t) => (typeof t === 'string' ? Buffer.from(t, 'utf8') : Buffer.from(t)));
}

function tokensOf(name) {
  const a = tiktokenTokens(name);
  const b = gptTokenizerTokens(name);
  if (a.length !== b.length) {
    throw new Error(`${name}: js-tiktoken has ${a.length} tokens, gpt-tokenizer ${b.length}`);
  }
  for (let r = 0; r < a.length; r++) {
    if (!a[r].equals(b[r])) throw new Error(`${name}: the packages disagree on rank ${r}`);
  }
  const seen = new Set();
  for (const t of a) {
    if (t.length < 1 || t.length > 128) throw new Error(`${name}: a token of ${t.length} bytes`);
    const key = t.toString('latin1');
    if (seen.has(key)) throw new Error(`${name}: a token appears twice`);
    seen.add(key);
  }
  for (let c = 0; c < 256; c++) {
    if (!seen.has(String.fromCharCode(c))) throw new Error(`${name}: byte ${c} is no token`);
  }
  return a;
}

/* Rows of at most ROW bytes as C string literals, 96 source columns a line. */
function literalRows(buf) {
  const out = [];
  for (let at = 0; at < buf.length; at += ROW) {
    const row = buf.subarray(at, Math.min(at + ROW, buf.length));
    const lines = [];
    let line = '';
    for (const c of row) {
      const printable = c >= 0x20 && c < 0x7f && c !== 0x22 && c !== 0x5c && c !== 0x3f;
      const text = printable ? String.fromCharCode(c) : '\\' + c.toString(8).padStart(3, '0');
      if (line.length + text.length > 90) {
        lines.push(`    "${line}"`);
        line = '';
      }
      line += text;
    }
    if (line) lines.push(`    "${line}"`);
    out.push(lines.join('\n'));
  }
  return out.join(',\n');
}

function header(enc, tokens) {
  const lens = Buffer.from(tokens.map((t) => t.length + LEN_BIAS));
  const bytes = Buffer.concat(tokens);
  const total = bytes.length;
  const T = enc.tag.toUpperCase();
  const lensRows = Math.ceil(lens.length / ROW);
  const bytesRows = Math.ceil((total + 8) / ROW);
  return `/* Generated by tools/gen_bpe_ranks.js from js-tiktoken ${versionOf('js-tiktoken')} (checked against
 * gpt-tokenizer ${versionOf('gpt-tokenizer')}): the ${enc.name} tokens in rank order. Do not edit; run
 * \`node tools/gen_bpe_ranks.js\` to regenerate and \`--check\` to verify. */
#ifndef CK_BPE_${T}_H_
#define CK_BPE_${T}_H_

#ifndef CK_BPE_ROW
#define CK_BPE_ROW ${ROW}
#define CK_BPE_LEN_BIAS ${LEN_BIAS}
#endif
#define CK_BPE_${T}_TOKENS ${tokens.length}u
#define CK_BPE_${T}_BYTES ${total}u

/* The length of each token in bytes, plus CK_BPE_LEN_BIAS. */
static const unsigned char ck_bpe_${enc.tag}_lens[${lensRows}][CK_BPE_ROW] = {
${literalRows(lens)}};

/* The bytes of each token, one after another; the rows leave at least 8 zero bytes after the
 * last, so that bpe.c may read any token as whole 64-bit words. */
static const unsigned char ck_bpe_${enc.tag}_bytes[${bytesRows}][CK_BPE_ROW] = {
${literalRows(bytes)}};

#endif
`;
}

function main() {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const enc of ENCODINGS) {
    const text = header(enc, tokensOf(enc.name));
    if (check) {
      const have = fs.existsSync(enc.out) ? fs.readFileSync(enc.out, 'utf8') : '';
      if (have !== text) {
        console.error(`gen_bpe_ranks: ${path.relative(ROOT, enc.out)} is out of date`);
        stale++;
      }
    } else {
      fs.writeFileSync(enc.out, text);
      console.log(`wrote ${path.relative(ROOT, enc.out)} (${text.length} bytes)`);
    }
  }
  if (check && !stale) console.log('gen_bpe_ranks: both tables match js-tiktoken and gpt-tokenizer');
  process.exit(stale ? 1 : 0);
}

main();
