#!/usr/bin/env bash
# make dist-test: installs what `make wheel` and `make prebuild` made as a user would, where
# nothing can be compiled, and checks it works.
#   1. the wheel into a fresh venv, PKG_CONFIG_LIBDIR=/nonexistent and no compiler on PATH;
#      auditwheel show must name a manylinux tag; tests/dist/smoke.py runs there;
#   2. the npm tarball into a fresh folder with --ignore-scripts (nothing built), then
#      require, import, a compaction, and npx ctxkeel --help.
# Usage: tests/dist/run.sh DIST_DIR TOOLS_VENV
set -euo pipefail
dist=$(cd "$1" && pwd)
tools=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/ctxkeel-dist-XXXXXX)
trap 'rm -rf "$work"' EXIT
export PKG_CONFIG_LIBDIR=/nonexistent CC=/nonexistent/cc CXX=/nonexistent/c++

wheel=$(ls "$dist"/wheels/ctxkeel-*-manylinux_*.whl)
"$tools/bin/auditwheel" show "$wheel" > "$work/show.txt"
grep -q 'consistent with the following platform tag: "manylinux_' <(tr -s '\n ' ' ' < "$work/show.txt") \
  || { cat "$work/show.txt"; echo "auditwheel show: not a manylinux wheel"; exit 1; }
echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-index --no-deps "$wheel"
(cd "$work" && "$work/venv/bin/python" "$here/smoke.py")

tarball=$(ls "$dist"/npm/ctxkeel-*.tgz)
echo "npm: $(basename "$tarball") ($(stat -c %s "$tarball") bytes)"
mkdir "$work/app"
cd "$work/app"
echo '{"name":"app","version":"1.0.0","private":true}' > package.json
npm install --ignore-scripts --no-audit --no-fund --offline --silent "$tarball"
# Copied into the app: run from the source tree, they would resolve the tree's own package.
cp "$here/smoke.cjs" "$here/smoke.mjs" .
node ./smoke.cjs
node ./smoke.mjs
npx --no-install ctxkeel --help > help.txt
grep -q '^  history ' help.txt || { cat help.txt; echo "npx ctxkeel --help: no column legend"; exit 1; }
echo "dist npm (npx ctxkeel --help): 1 passed, 0 failed"

# With install scripts run (npm's default), the script finds the prebuilt addon and compiles
# nothing (CC points nowhere, so a compile would fail).
mkdir "$work/app2"
cd "$work/app2"
echo '{"name":"app2","version":"1.0.0","private":true}' > package.json
npm install --foreground-scripts --no-audit --no-fund --offline "$tarball" > install.log 2>&1 \
  || { cat install.log; exit 1; }
grep -q 'ctxkeel: using the prebuilt addon for' install.log || { cat install.log; exit 1; }
test ! -e node_modules/ctxkeel/build || { echo "the install script compiled"; exit 1; }
echo "dist npm (install script skips the build): 1 passed, 0 failed"
