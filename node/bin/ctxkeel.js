#!/usr/bin/env node
// The ctxkeel command of the npm package: the core's own (ck_cli_main), the same code as the C
// program and the Python console script, so flags, output and exit codes are the same.
'use strict';

let addon;
try {
  addon = require('../loader.js').loadAddon();
} catch (err) {
  process.stderr.write(`${err.message}\n`);
  process.exit(2);
}
// The command writes through C stdio; nothing is written from JS before it, and the exit code
// is set rather than exiting at once, so that Node flushes what it holds.
process.exitCode = addon.cliMain(process.argv.slice(2));
