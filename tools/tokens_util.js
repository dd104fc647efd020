'use strict';
/* tokens_util.js - what the token tools share: package versions and a seeded generator. */

const fs = require('fs');
const path = require('path');

/* The version of an installed package. Several (js-tiktoken, tokenx, gpt-tokenizer's cjs/)
 * export no package.json, or have a nameless one nearer: walk up from the entry point to the
 * one that names the package. '?' when there is none. */
function versionOf(mod) {
  for (let dir = path.dirname(require.resolve(mod)); ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    const pkg = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : {};
    if (pkg.name === mod && pkg.version) return pkg.version;
    if (path.dirname(dir) === dir) return '?';
  }
}

/* A xorshift32 generator: rng() in [0, 1), rng.int(n), rng.pick(array), rng.hex(digits). */
function rng(seed) {
  let s = seed >>> 0 || 1;
  const next = () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4294967296;
  };
  next.int = (n) => Math.floor(next() * n);
  next.pick = (a) => a[next.int(a.length)];
  next.hex = (n) => {
    let out = '';
    for (let i = 0; i < n; i++) out += '0123456789abcdef'[next.int(16)];
    return out;
  };
  return next;
}

module.exports = { versionOf, rng };
