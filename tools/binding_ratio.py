#!/usr/bin/env python3
"""The size of each binding's own code as a share of the core's (issue: thin bindings).

Core: csrc/src/*.c and *.h, the generated token tables excluded. Python: python/ctxkeel/_ext/
*.c and *.h and python/ctxkeel/*.py. Node: node/src/* and node/*.js. Type stubs, generated files
and the framework adapters (in their own folders) are not the binding. Lines are counted as
`wc -l` counts them. Exits 1 when a binding is above the limit (default 35%).
"""
import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATED = {"token_table.h", "bpe_o200k.h", "bpe_cl100k.h"}


def lines(patterns):
    total = 0
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            if os.path.basename(path) in GENERATED or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                total += f.read().count(b"\n")
    return total


def main(argv):
    limit = float(argv[1]) if len(argv) > 1 else 0.35
    core = lines(["csrc/src/*.c", "csrc/src/*.h"])
    bindings = {
        "python": lines(["python/ctxkeel/_ext/*.c", "python/ctxkeel/_ext/*.h",
                         "python/ctxkeel/*.py"]),
        "node": lines(["node/src/*", "node/*.js"]),
    }
    failed = False
    print("core: %d lines (csrc/src, generated tables excluded)" % core)
    for name, n in bindings.items():
        share = n / core if core else float("inf")
        verdict = "ok" if share <= limit else "OVER %.0f%%" % (limit * 100)
        failed |= share > limit
        print("%-7s %5d lines, %5.1f%% of the core: %s" % (name, n, share * 100, verdict))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
