#!/usr/bin/env node
// Builds the addon with node-gyp against Node headers that are already on this machine.
//
// node-gyp would otherwise download a header tarball, which a machine that reaches only the
// package registry cannot do. So this script finds the headers itself and passes --nodedir:
//   1. npm_config_nodedir (npm's --nodedir option or the environment), if it holds them;
//   2. the prefix of the running node (process.execPath/../..), where distribution packages
//      put include/node/node_api.h (/usr/bin/node -> /usr/include/node).
// node-gyp itself is npm's bundled copy: npm names it in npm_config_node_gyp for install
// scripts; outside npm we look beside the running node, then on PATH.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const root = path.resolve(__dirname, '..');

function hasHeaders(dir) {
  return fs.existsSync(path.join(dir, 'include', 'node', 'node_api.h'));
}

function findNodeDir() {
  const tried = [];
  const fromNpm = process.env.npm_config_nodedir;
  if (fromNpm) {
    const dir = path.resolve(fromNpm);
    if (hasHeaders(dir)) return dir;
    tried.push(`${dir} (from npm_config_nodedir)`);
  }
  const prefix = path.resolve(process.execPath, '..', '..');
  if (hasHeaders(prefix)) return prefix;
  tried.push(`${prefix} (the prefix of ${process.execPath})`);
  fail(
    'cannot find the Node.js headers (include/node/node_api.h) in:\n' +
      tried.map((t) => `  ${t}\n`).join('') +
      `Install the headers that match node ${process.version} (Debian/Ubuntu: the nodejs ` +
      'package or libnode-dev), or point npm_config_nodedir at a directory that has ' +
      'include/node/node_api.h. Nothing is downloaded.',
  );
}

function findNodeGyp() {
  const candidates = [];
  if (process.env.npm_config_node_gyp) candidates.push(process.env.npm_config_node_gyp);
  const nodeDir = path.dirname(process.execPath);
  for (const lib of [path.join(nodeDir, '..', 'lib'), path.join(nodeDir, 'lib')]) {
    candidates.push(path.join(lib, 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin',
                              'node-gyp.js'));
  }
  for (const file of candidates) {
    if (fs.existsSync(file)) return [process.execPath, [file]];
  }
  // Last resort: a node-gyp on PATH (npm puts its own there for install scripts).
  return ['node-gyp', []];
}

function fail(message) {
  process.stderr.write(`ctxkeel: build failed: ${message}\n`);
  process.exit(1);
}

function main() {
  const nodedir = findNodeDir();
  const [command, prefixArgs] = findNodeGyp();
  const args = [...prefixArgs, 'rebuild', `--nodedir=${nodedir}`, ...process.argv.slice(2)];
  process.stdout.write(`ctxkeel: node-gyp ${args.slice(prefixArgs.length).join(' ')}\n`);
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (result.error) {
    fail(`could not run node-gyp (${result.error.message}); it ships with npm, so run ` +
         '"npm install" or put node-gyp on PATH');
  }
  if (result.status !== 0) fail(`node-gyp exited with status ${result.status}`);
}

main();
