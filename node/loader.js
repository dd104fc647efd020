// Finds and loads the native addon: the prebuilt one shipped in the package for this platform
// first (prebuilds/<platform>-<arch>/ctxkeel.node, with the shared libraries it needs beside
// it), then the one built from source by node/build.js (build/Release, build/Debug). When
// neither loads, the error says what was tried and what to do.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const target = `${process.platform}-${process.arch}`;

/** The files to try, in order. */
function candidates() {
  return [
    path.join(root, 'prebuilds', target, 'ctxkeel.node'),
    path.join(root, 'build', 'Release', 'ctxkeel.node'),
    path.join(root, 'build', 'Debug', 'ctxkeel.node'),
  ];
}

/**
 * Loads the first candidate that loads, or returns {addon: null, tried} with why each one did
 * not. `skipPrebuild` leaves out the prebuilt addon (npm install --build-from-source).
 */
function tryLoad({ skipPrebuild = false } = {}) {
  const tried = [];
  for (const [i, file] of candidates().entries()) {
    if (i === 0 && skipPrebuild) continue;
    if (!fs.existsSync(file)) {
      tried.push(`${path.relative(root, file)}: not there`);
      continue;
    }
    try {
      return { addon: require(file), file, tried };
    } catch (err) {
      tried.push(`${path.relative(root, file)}: ${String(err.message).split('\n')[0]}`);
    }
  }
  return { addon: null, file: null, tried };
}

/** What to do when nothing loads, as one message. */
function explain(tried) {
  const lines = [
    `ctxkeel: cannot load the native addon for ${target} (Node ${process.version}, ` +
      `package at ${root}). Tried:`,
    ...tried.map((t) => `  ${t}`),
  ];
  let ours = false;
  try {
    ours = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).name === 'ctxkeel';
  } catch {
    ours = false;
  }
  if (!ours) {
    lines.push(
      'This file is not inside the ctxkeel package: a bundler copied it. Keep ctxkeel out of ' +
        'the bundle so that it is loaded from node_modules: serverExternalPackages: ' +
        "['ctxkeel'] in next.config.js, --external:ctxkeel for esbuild, externals for webpack.",
    );
  } else {
    lines.push(
      'The package ships a prebuilt addon for linux-x64 (glibc) only. Elsewhere it is built ' +
        'from source when it is installed; that did not happen (npm --ignore-scripts, or ' +
        'pnpm, which runs dependencies\' install scripts only for the packages listed in ' +
        'pnpm.onlyBuiltDependencies) or it failed. Build it with: npm rebuild ctxkeel (or ' +
        `node ${path.join(root, 'node', 'build.js')}). That needs a C compiler, pkg-config, ` +
        "libcurl's development files (Debian/Ubuntu: build-essential pkg-config " +
        'libcurl4-openssl-dev; Fedora: gcc pkgconf-pkg-config libcurl-devel; macOS: brew ' +
        'install curl pkg-config) and the Node headers (see README.md, Install).',
    );
  }
  return lines.join('\n');
}

let cached = null;

/** The addon, loaded once; throws the explained error when nothing loads. */
function loadAddon() {
  if (cached) return cached;
  const { addon, tried } = tryLoad();
  if (!addon) {
    const err = new Error(explain(tried));
    err.code = 'CTXKEEL_NO_ADDON';
    throw err;
  }
  cached = addon;
  return addon;
}

module.exports = { loadAddon, tryLoad, explain, target };
