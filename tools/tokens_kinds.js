#!/usr/bin/env node
'use strict';
/*
 * tokens_kinds.js - writes the generated part of the token corpus, with its exact counts:
 *
 *   tests/data/tokens/kinds/<kind>/*.txt     kinds of text the rest of the corpus lacks: path
 *                                            listings, minified JS, base64, hex dumps, stack
 *                                            traces, CSV, SQL, Maven module listings
 *   tests/data/tokens/heldout/<kind>/*.txt   more of the same kinds from other seeds: measured
 *                                            and reported apart, never used to tune anything
 *   tests/data/tokens/classes/<class>.txt    one script or whitespace class each (NBSP, EM
 *                                            SPACE, CRLF runs, Private Use Area, other planes,
 *                                            emoji, combining marks, CJK, ...)
 *   tests/data/tokens/generated_counts.tsv   split, category, file, exact o200k_base and
 *                                            cl100k_base counts (js-tiktoken, special tokens as
 *                                            text; checked against gpt-tokenizer; see counts())
 *
 *     node tools/tokens_kinds.js            # writes all of it
 *     node tools/tokens_kinds.js --check    # fails if any file or count differs
 *
 * Everything comes from a seeded generator, so the output is byte-for-byte reproducible.
 */

const fs = require('fs');
const path = require('path');

const { rng } = require('./tokens_util.js');

const ROOT = path.resolve(__dirname, '..');
const DATA = path.join(ROOT, 'tests', 'data', 'tokens');
const TSV = path.join(DATA, 'generated_counts.tsv');

let tiktoken, gptO200k, gptCl100k;
try {
  tiktoken = require('js-tiktoken');
  gptO200k = require('gpt-tokenizer/encoding/o200k_base');
  gptCl100k = require('gpt-tokenizer/encoding/cl100k_base');
} catch (e) {
  console.error('tokens_kinds: needs js-tiktoken and gpt-tokenizer (npm install)');
  process.exit(2);
}
const O200K = tiktoken.getEncoding('o200k_base');
const CL100K = tiktoken.getEncoding('cl100k_base');
const NO_SPECIAL = { disallowedSpecial: new Set() };

/* Exact counts by js-tiktoken, which must agree with gpt-tokenizer. No text here has U+FEFF or
 * U+0085: JavaScript's \s takes the first and not the second, where tiktoken's (Rust's,
 * Unicode White_Space) does the opposite, so both packages cut such text differently from
 * tiktoken, which ctxkeel follows (tests/python/test_tokens.py checks those against the tiktoken
 * wheel itself). gpt-tokenizer also counts U+FEFF as two tokens where tiktoken has one. */
function counts(text, name) {
  if (/[\ufeff\u0085]/.test(text)) throw new Error(`${name}: U+FEFF and U+0085 are left to Python`);
  const o = O200K.encode(text, [], []).length;
  const c = CL100K.encode(text, [], []).length;
  const go = gptO200k.encode(text, NO_SPECIAL).length;
  const gc = gptCl100k.encode(text, NO_SPECIAL).length;
  if (o !== go || c !== gc) {
    throw new Error(`${name}: the reference tokenizers disagree (${o}/${go}, ${c}/${gc})`);
  }
  return [o, c];
}

const WORDS = ('error warning info debug user session request response handler config value ' +
  'index table column module service client server cache buffer stream event thread worker ' +
  'parse build test deploy upload download account order invoice price amount total status ' +
  'created updated deleted enabled disabled timeout retry limit offset page query filter sort')
  .split(' ');
const NAMES = ['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'grace', 'heidi', 'ivan'];

/* Lines of text until about `bytes` long. */
function until(bytes, line) {
  const out = [];
  let n = 0;
  while (n < bytes) {
    const l = line();
    out.push(l);
    n += Buffer.byteLength(l) + 1;
  }
  return out.join('\n') + '\n';
}

/* ---- Kinds --------------------------------------------------------------------------------- */

const KINDS = {
  /* `find /sys/devices` output: long paths of bus addresses, device names and attributes. */
  paths(r, bytes) {
    const attrs = ['uevent', 'power/control', 'power/runtime_status', 'driver_override',
      'modalias', 'subsystem_vendor', 'subsystem_device', 'class', 'vendor', 'device', 'irq',
      'numa_node', 'enable', 'resource', 'local_cpus', 'msi_bus', 'consistent_dma_mask_bits'];
    return until(bytes, () => {
      const bus = `pci0000:${r.hex(2)}`;
      const dev = `0000:${r.hex(2)}:${r.hex(2)}.${r.int(8)}`;
      const parts = ['/sys/devices', bus, dev];
      if (r() < 0.5) parts.push(r.pick(['net', 'block', 'usb1', 'host0', 'nvme', 'drm']));
      if (r() < 0.4) parts.push(r.pick(['eth0', 'nvme0n1', 'card0', 'target0:0:0', '1-1:1.0']));
      if (r() < 0.7) parts.push(r.pick(attrs));
      return parts.join('/');
    });
  },
  /* Minified JavaScript: no spaces, short names, every operator. */
  minjs(r, bytes) {
    const id = () => r.pick('abcdefghijklmnopqrstuvwxyz$_') + (r() < 0.5 ? r.int(10) : '');
    const stmt = () => r.pick([
      () => `var ${id()}=${id()}(${id()},${r.int(1000)});`,
      () => `function ${id()}(${id()},${id()}){return ${id()}.${r.pick(WORDS)}(${id()})||{}}`,
      () => `if(!${id()}||${id()}.length<${r.int(64)})throw new Error("${r.pick(WORDS)}");`,
      () => `${id()}.prototype.${r.pick(WORDS)}=function(){return this.${id()}++}, `,
      () => `for(var ${id()}=0;${id()}<${id()}.length;${id()}++)${id()}[${id()}]^=${r.int(256)};`,
      () => `${id()}=${id()}?${id()}:void 0,${id()}=!0;`,
      () => `module.exports={${r.pick(WORDS)}:${id()},${r.pick(WORDS)}:${id()}};`,
    ])();
    let out = '';
    while (out.length < bytes) out += stmt();
    return out + '\n';
  },
  /* Base64 of random bytes, in 76-column lines (MIME) or as one long line. */
  base64(r, bytes) {
    const raw = Buffer.alloc(Math.ceil((bytes * 3) / 4));
    for (let i = 0; i < raw.length; i++) raw[i] = r.int(256);
    const b64 = raw.toString('base64');
    if (r() < 0.5) return b64 + '\n';
    return b64.replace(/(.{76})/g, '$1\n') + '\n';
  },
  /* xxd and hexdump -C style dumps. */
  hexdump(r, bytes) {
    let off = 0;
    const xxd = r() < 0.5;
    return until(bytes, () => {
      const row = [];
      for (let i = 0; i < 16; i++) row.push(r() < 0.3 ? 0x20 + r.int(95) : r.int(256));
      const ascii = row.map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
      const hx = row.map((b) => b.toString(16).padStart(2, '0'));
      let line;
      if (xxd) {
        const groups = [];
        for (let i = 0; i < 16; i += 2) groups.push(hx[i] + hx[i + 1]);
        line = `${off.toString(16).padStart(8, '0')}: ${groups.join(' ')}  ${ascii}`;
      } else {
        line = `${off.toString(16).padStart(8, '0')}  ${hx.slice(0, 8).join(' ')}  ` +
          `${hx.slice(8).join(' ')}  |${ascii}|`;
      }
      off += 16;
      return line;
    });
  },
  /* Java and Python stack traces. */
  traces(r, bytes) {
    const pkg = () => ['com', 'org', 'io'][r.int(3)] + '.' + r.pick(NAMES) + '.' + r.pick(WORDS);
    const cls = () => r.pick(WORDS).replace(/^./, (c) => c.toUpperCase()) +
      r.pick(['Service', 'Handler', 'Impl', 'Factory', 'Controller', '']);
    return until(bytes, () => {
      if (r() < 0.5) {
        const lines = [`Exception in thread "main" java.lang.${r.pick(['IllegalStateException',
          'NullPointerException', 'IllegalArgumentException'])}: ${r.pick(WORDS)} ${r.pick(WORDS)}`];
        for (let i = 0, n = 3 + r.int(12); i < n; i++) {
          lines.push(`\tat ${pkg()}.${cls()}.${r.pick(WORDS)}(${cls()}.java:${1 + r.int(900)})`);
        }
        if (r() < 0.4) lines.push(`\t... ${1 + r.int(40)} more`);
        return lines.join('\n');
      }
      const lines = ['Traceback (most recent call last):'];
      for (let i = 0, n = 2 + r.int(8); i < n; i++) {
        lines.push(`  File "/usr/lib/python3.11/${r.pick(WORDS)}/${r.pick(WORDS)}.py", line ` +
          `${1 + r.int(2000)}, in ${r.pick(WORDS)}_${r.pick(WORDS)}`);
        lines.push(`    ${r.pick(WORDS)} = self.${r.pick(WORDS)}(${r.pick(WORDS)}, ${r.int(99)})`);
      }
      lines.push(`${r.pick(['KeyError', 'ValueError', 'TypeError'])}: '${r.pick(WORDS)}'`);
      return lines.join('\n');
    });
  },
  /* CSV with a header, quoted fields, numbers, dates. */
  csv(r, bytes) {
    const header = 'id,name,email,created_at,amount,status,notes';
    return header + '\n' + until(bytes, () => [
      1 + r.int(1e6),
      r.pick(NAMES) + ' ' + r.pick(NAMES).toUpperCase(),
      `${r.pick(NAMES)}.${r.int(100)}@example.${r.pick(['com', 'org', 'net'])}`,
      `2025-${String(1 + r.int(12)).padStart(2, '0')}-${String(1 + r.int(28)).padStart(2, '0')}` +
        `T${String(r.int(24)).padStart(2, '0')}:${String(r.int(60)).padStart(2, '0')}:00Z`,
      (r() * 10000).toFixed(2),
      r.pick(['paid', 'pending', 'refunded', 'failed']),
      r() < 0.3 ? `"${r.pick(WORDS)}, ${r.pick(WORDS)}"` : '',
    ].join(','));
  },
  /* SQL: DDL, inserts, joins. */
  sql(r, bytes) {
    const t = () => r.pick(['users', 'orders', 'invoices', 'sessions', 'events', 'accounts']);
    const c = () => r.pick(WORDS) + '_' + r.pick(['id', 'at', 'count', 'name', 'total']);
    return until(bytes, () => r.pick([
      () => `SELECT ${t()}.${c()}, COUNT(*) AS n FROM ${t()} JOIN ${t()} ON ${t()}.${c()} = ` +
        `${t()}.${c()} WHERE ${c()} > ${r.int(1000)} GROUP BY 1 ORDER BY n DESC LIMIT ${r.int(100)};`,
      () => `INSERT INTO ${t()} (${c()}, ${c()}, ${c()}) VALUES (${r.int(1e5)}, '${r.pick(NAMES)}', ` +
        `'2025-0${1 + r.int(9)}-1${r.int(10)}');`,
      () => `CREATE TABLE IF NOT EXISTS ${t()} (\n  ${c()} BIGINT PRIMARY KEY,\n  ${c()} ` +
        `VARCHAR(${8 * (1 + r.int(32))}) NOT NULL,\n  ${c()} TIMESTAMP DEFAULT now()\n);`,
      () => `UPDATE ${t()} SET ${c()} = ${c()} + 1 WHERE ${c()} IN (${r.int(99)}, ${r.int(99)});`,
    ])());
  },
  /* `mvn` reactor output: module listings with build times. */
  maven(r, bytes) {
    const art = () => `${r.pick(NAMES)}-${r.pick(WORDS)}-${r.pick(['core', 'api', 'impl', 'web',
      'client', 'spi', 'parent', 'it'])}`;
    return '[INFO] Reactor Summary for platform 4.2.0-SNAPSHOT:\n[INFO]\n' + until(bytes, () => {
      const name = art();
      const dots = '.'.repeat(Math.max(1, 52 - name.length));
      return r() < 0.8
        ? `[INFO] ${name} ${dots} SUCCESS [  ${(r() * 20).toFixed(3)} s]`
        : `[INFO] --- maven-${r.pick(['compiler', 'surefire', 'jar', 'resources'])}-plugin:3.` +
          `${r.int(12)}.${r.int(5)}:${r.pick(['compile', 'test', 'jar'])} (default-` +
          `${r.pick(['compile', 'test', 'jar'])}) @ ${name} ---`;
    });
  },
};

/* ---- Script and whitespace classes --------------------------------------------------------- */

/* A text of about `bytes` of "words" drawn from `chars`, `sep` between them. */
function wordsOf(r, chars, bytes, sep = ' ', min = 1, max = 8) {
  const cs = [...chars];
  const out = [];
  let n = 0;
  while (n < bytes) {
    let w = '';
    for (let i = 0, k = min + r.int(max - min + 1); i < k; i++) w += r.pick(cs);
    out.push(w);
    n += Buffer.byteLength(w) + Buffer.byteLength(sep);
  }
  return out.join(sep) + '\n';
}

function range(a, b) {
  let s = '';
  for (let c = a; c <= b; c++) s += String.fromCodePoint(c);
  return s;
}

const LATIN = 'abcdefghijklmnopqrstuvwxyz';
const CLASSES = {
  nbsp: (r, n) => wordsOf(r, LATIN, n, '\u00a0'),
  nbsp_runs: (r, n) => wordsOf(r, LATIN, n, '\u00a0\u00a0\u00a0\u00a0'),
  em_space: (r, n) => wordsOf(r, LATIN, n, '\u2003'),
  ideographic_space: (r, n) => wordsOf(r, range(0x4e00, 0x4fff), n, '\u3000', 1, 4),
  crlf_runs: (r, n) => wordsOf(r, LATIN, n, '\r\n\r\n\r\n'),
  tabs: (r, n) => wordsOf(r, LATIN, n, '\t\t'),
  mixed_whitespace: (r, n) => wordsOf(r, LATIN, n, ' \u00a0\t\u2003\u2009\u3000 '),
  zero_width: (r, n) => wordsOf(r, LATIN + '\u200b\u200c\u200d\u2060', n),
  private_use: (r, n) => wordsOf(r, range(0xe000, 0xe0ff), n),
  supplementary_math: (r, n) => wordsOf(r, range(0x1d400, 0x1d4ff), n),
  supplementary_cjk: (r, n) => wordsOf(r, range(0x20000, 0x200ff), n, '', 4, 12),
  emoji: (r, n) => wordsOf(r, range(0x1f600, 0x1f64f) + range(0x1f300, 0x1f3ff), n, ' ', 1, 3),
  emoji_zwj: (r, n) => wordsOf(r, ['👨‍👩‍👧', '🏳️‍🌈', '👍🏽', '🇺🇸', '🧑‍💻', '❤️'], n, ' ', 1, 3),
  combining_marks: (r, n) => wordsOf(r, 'aeiou\u0301\u0300\u0308\u0327\u0323\u0336', n),
  cjk: (r, n) => wordsOf(r, range(0x4e00, 0x9fff), n, '，', 2, 10),
  hiragana_katakana: (r, n) => wordsOf(r, range(0x3041, 0x3096) + range(0x30a1, 0x30fa), n, '、'),
  hangul: (r, n) => wordsOf(r, range(0xac00, 0xd7a3), n),
  arabic: (r, n) => wordsOf(r, range(0x0621, 0x064a) + '\u064b\u064e\u0650', n),
  hebrew: (r, n) => wordsOf(r, range(0x05d0, 0x05ea), n),
  devanagari: (r, n) => wordsOf(r, range(0x0905, 0x0939) + '\u093e\u093f\u0940\u094d', n),
  thai: (r, n) => wordsOf(r, range(0x0e01, 0x0e2e) + '\u0e31\u0e34\u0e35', n, '', 5, 20),
  cyrillic: (r, n) => wordsOf(r, range(0x0430, 0x044f) + range(0x0410, 0x042f), n),
  greek: (r, n) => wordsOf(r, range(0x03b1, 0x03c9), n),
  latin_accents: (r, n) => wordsOf(r, 'àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿœšž', n),
  box_drawing: (r, n) => wordsOf(r, range(0x2500, 0x257f), n, '\n', 10, 40),
  math_symbols: (r, n) => wordsOf(r, range(0x2200, 0x22ff), n),
  rtl_marks: (r, n) => wordsOf(r, range(0x05d0, 0x05ea) + '\u200f\u200e\u202b\u202c', n),
  control_chars: (r, n) => wordsOf(r, LATIN + '\u0001\u0002\u001b\u007f', n),
  replacement_chars: (r, n) => wordsOf(r, LATIN + '\ufffd\u2060', n),
  special_tokens: (r, n) => wordsOf(r, ['<|endoftext|>', '<|fim_prefix|>', 'x', ' '], n, '', 1, 4),
};

/* ---- Writing --------------------------------------------------------------------------------- */

function plan() {
  const files = [];
  const kinds = Object.keys(KINDS);
  kinds.forEach((kind, k) => {
    for (let i = 0; i < 3; i++) {
      const r = rng(1000 + 10 * k + i);
      files.push({ split: 'kinds', cat: kind, name: `${kind}_${i + 1}.txt`,
        text: KINDS[kind](r, 4000 + r.int(8000)) });
    }
    const r = rng(90000 + k); /* the held-back slice: seeds used nowhere else */
    files.push({ split: 'heldout', cat: kind, name: `${kind}_h1.txt`,
      text: KINDS[kind](r, 6000 + r.int(6000)) });
  });
  /* One long listing, the size of the transcript outputs that were undercounted the most. */
  files.push({ split: 'kinds', cat: 'paths', name: 'paths_long.txt',
    text: KINDS.paths(rng(4242), 200000) });
  Object.keys(CLASSES).forEach((cls, k) => {
    const r = rng(5000 + k);
    files.push({ split: 'classes', cat: cls, name: `${cls}.txt`, text: CLASSES[cls](r, 3000) });
  });
  return files;
}

function main() {
  const check = process.argv.includes('--check');
  const files = plan();
  const rows = ['# split\tcategory\tfile\to200k_base\tcl100k_base (exact, js-tiktoken; written by ' +
    'tools/tokens_kinds.js)'];
  let stale = 0;
  for (const f of files) {
    const dir = f.split === 'classes' ? path.join(DATA, 'classes') : path.join(DATA, f.split, f.cat);
    const file = path.join(dir, f.name);
    const [o, c] = counts(f.text, f.name);
    rows.push([f.split, f.cat, f.name, o, c].join('\t'));
    if (check) {
      if (!fs.existsSync(file) || fs.readFileSync(file, 'utf8') !== f.text) {
        console.error(`tokens_kinds: ${path.relative(ROOT, file)} is out of date`);
        stale++;
      }
    } else {
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(file, f.text);
    }
  }
  const tsv = rows.join('\n') + '\n';
  if (check) {
    if (!fs.existsSync(TSV) || fs.readFileSync(TSV, 'utf8') !== tsv) {
      console.error('tokens_kinds: generated_counts.tsv is out of date');
      stale++;
    }
    if (!stale) console.log(`tokens_kinds: ${files.length} files and their counts are up to date`);
    process.exit(stale ? 1 : 0);
  }
  fs.writeFileSync(TSV, tsv);
  console.log(`wrote ${files.length} files and ${path.relative(ROOT, TSV)}`);
}

if (require.main === module) main();

module.exports = { counts };
