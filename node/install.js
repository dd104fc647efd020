#!/usr/bin/env node
// The package's install script: nothing to do when the prebuilt addon for this platform loads;
// otherwise the addon is built from source (node/build.js). `npm install --build-from-source`
// (npm_config_build_from_source) builds from source whatever is shipped.
'use strict';

const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { tryLoad, target } = require('./loader.js');

const fromSource = /^(1|true|yes)$/i.test(process.env.npm_config_build_from_source || '') ||
  /^(1|true|yes)$/i.test(process.env.CTXKEEL_BUILD_FROM_SOURCE || '');

if (!fromSource) {
  const { addon, file, tried } = tryLoad();
  if (addon && file.includes(`${path.sep}prebuilds${path.sep}`)) {
    process.stdout.write(`ctxkeel: using the prebuilt addon for ${target}\n`);
    process.exit(0);
  }
  if (tried.length && tried[0].includes('prebuilds') && !tried[0].endsWith('not there')) {
    process.stdout.write(`ctxkeel: the prebuilt addon does not load (${tried[0]}); building\n`);
  }
}
const result = spawnSync(process.execPath, [path.join(__dirname, 'build.js')], {
  stdio: 'inherit',
});
process.exit(result.status === null ? 1 : result.status);
