#!/usr/bin/env node
'use strict';
/*
 * bench/tokens.js - token counting speed in one Node process: ctxkeel's exact o200k_base
 * counter beside gpt-tokenizer and js-tiktoken (both exact), and its default estimator beside
 * tokenx (an approximation).
 *
 *     node bench/tokens.js OUT.json [ROUNDS]
 *
 * The texts are those of tests/data/tokens (the TEST half, the generated kinds) and every
 * string of every message of ../shared/corpus, each counted on its own, as a host counts
 * message contents. Each tool counts all of them once (its first round: ctxkeel's cache of
 * pieces starts empty for 'ctxkeel o200k', which runs first, and 'ctxkeel default' shares it;
 * the peers' caches start empty), then ROUNDS more times (default 3); the
 * rate is MB of UTF-8 per CPU second of this process (user + system; all of it runs on the
 * main thread). ctxkeel's exact counts are checked against js-tiktoken's on every text, and
 * the mismatches written down. Writes OUT.json (read by bench/report.py) and prints a table.
 */

const fs = require('fs');
const os = require('os');
const path = require('path');
const url = require('url');

const ROOT = path.resolve(__dirname, '..');
const { versionOf } = require(path.join(ROOT, 'tools', 'tokens_util.js'));
const DATA = path.join(ROOT, 'tests', 'data', 'tokens');
const SHARED = path.resolve(ROOT, '..', 'shared', 'corpus');

function filesUnder(dir) {
  if (!fs.existsSync(dir)) return [];
  const out = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
    a.name < b.name ? -1 : 1)) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p));
    else if (e.name.endsWith('.txt')) out.push(p);
  }
  return out;
}

function corpusTexts() {
  const texts = [];
  for (const f of [...filesUnder(path.join(DATA, 'test')), ...filesUnder(path.join(DATA, 'kinds'))]) {
    texts.push(fs.readFileSync(f, 'utf8'));
  }
  if (fs.existsSync(SHARED)) {
    for (const f of fs.readdirSync(SHARED).filter((x) => x.endsWith('.json')).sort()) {
      for (const m of JSON.parse(fs.readFileSync(path.join(SHARED, f), 'utf8'))) {
        if (typeof m.content === 'string' && m.content) texts.push(m.content);
        else if (Array.isArray(m.content)) {
          for (const c of m.content) if (c && typeof c.text === 'string' && c.text) texts.push(c.text);
        }
        for (const tc of m.tool_calls || []) {
          const fn = tc.function || {};
          const args = typeof fn.arguments === 'string' ? fn.arguments : JSON.stringify(fn.arguments);
          for (const s of [tc.id, fn.name, args]) if (s) texts.push(s);
        }
      }
    }
  }
  return texts;
}

function cpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

/* MB/s of `count` over all texts: the first round, and the best of `rounds` more. */
function measure(count, texts, mb, rounds) {
  let t0 = cpuSeconds();
  let tokens = 0;
  for (const t of texts) tokens += count(t);
  const first = mb / (cpuSeconds() - t0);
  let best = 0;
  for (let r = 0; r < rounds; r++) {
    t0 = cpuSeconds();
    for (const t of texts) count(t);
    best = Math.max(best, mb / (cpuSeconds() - t0));
  }
  return { first, best, tokens };
}

async function main() {
  const out = process.argv[2];
  const rounds = Number(process.argv[3] || 3);
  if (!out) {
    console.error('usage: node bench/tokens.js OUT.json [ROUNDS]');
    process.exit(2);
  }
  const ctxkeel = require(ROOT);
  const texts = corpusTexts();
  const bytes = texts.reduce((a, t) => a + Buffer.byteLength(t, 'utf8'), 0);
  const mb = bytes / 1e6;
  const tools = [];
  const add = (tool, kind, count) => tools.push({ tool, kind, count });

  add('ctxkeel o200k', 'exact', (t) => ctxkeel.estimateTokens(t, { estimator: 'o200k' }));
  const versions = {};
  try {
    const gpt = require('gpt-tokenizer/encoding/o200k_base');
    versions['gpt-tokenizer'] = versionOf('gpt-tokenizer');
    const noSpecial = { disallowedSpecial: new Set() };
    add('gpt-tokenizer o200k', 'exact', (t) => gpt.encode(t, noSpecial).length);
  } catch (e) {
    console.error('gpt-tokenizer is not installed: left out');
  }
  let reference = null;
  try {
    const { getEncoding } = require('js-tiktoken');
    versions['js-tiktoken'] = versionOf('js-tiktoken');
    reference = getEncoding('o200k_base');
    add('js-tiktoken o200k', 'exact', (t) => reference.encode(t, [], []).length);
  } catch (e) {
    console.error('js-tiktoken is not installed: left out');
  }
  add('ctxkeel default', 'estimate', (t) => ctxkeel.estimateTokens(t));
  try {
    const tokenx = await import(url.pathToFileURL(require.resolve('tokenx')).href);
    versions.tokenx = versionOf('tokenx');
    add('tokenx', 'estimate', (t) => tokenx.estimateTokenCount(t));
  } catch (e) {
    console.error('tokenx is not installed: left out');
  }
  add('ctxkeel cl100k', 'exact', (t) => ctxkeel.estimateTokens(t, { estimator: 'cl100k' }));

  const results = [];
  for (const { tool, kind, count } of tools) {
    const r = measure(count, texts, mb, rounds);
    results.push({ tool, kind, first: r.first, best: r.best, tokens: r.tokens });
  }
  /* After the timing, so that no tool's first round finds its cache warmed by this. */
  let mismatches = null;
  if (reference) {
    mismatches = 0;
    for (const t of texts) {
      if (ctxkeel.estimateTokens(t, { estimator: 'o200k' }) !== reference.encode(t, [], []).length) {
        mismatches++;
      }
    }
  }
  const report = {
    texts: texts.length, bytes, rounds, node: process.version, cpus: os.cpus().length,
    cpu: os.cpus()[0].model, loadavg: os.loadavg()[0], versions, mismatches, results,
  };
  fs.writeFileSync(out, JSON.stringify(report, null, 2) + '\n');
  const ours = (name) => results.find((r) => r.tool === name);
  console.log(`${texts.length} texts, ${(bytes / 1e6).toFixed(2)} MB; ctxkeel o200k vs ` +
    `js-tiktoken: ${mismatches} texts differ`);
  console.log('| tool | kind | tokens | MB/s, first round | MB/s, best round | ctxkeel / it (best) |');
  console.log('|---|---|---:|---:|---:|---:|');
  for (const r of results) {
    const base = ours(r.kind === 'exact' ? 'ctxkeel o200k' : 'ctxkeel default');
    console.log(`| ${r.tool} | ${r.kind} | ${r.tokens} | ${r.first.toFixed(1)} | ` +
      `${r.best.toFixed(1)} | ${(base.best / r.best).toFixed(1)}x |`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
