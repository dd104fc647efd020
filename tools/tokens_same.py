#!/usr/bin/env python3
"""Checks that the token estimator counts exactly as it did at another commit.

    python3 tools/tokens_same.py [--base REF] [--random N] [--seed S] [--asan]

Builds tools/tokens_bench.c twice, once from the files of commit REF (default: main) and once
from the working tree, feeds both the same texts and compares, record by record, what they
print: the estimates of every estimator (`tokens_bench estimate`) and where each
pre-tokenizer cuts (`tokens_bench pieces o200k|cl100k`). A change meant only to make the
estimator faster must leave every line alone. The texts:

  - every document of tests/data/tokens (both halves), whole;
  - every string of the transcripts in ../shared/corpus that an estimate counts (skipped when
    the folder is absent);
  - slices of those texts at random offsets and lengths, which cut characters in the middle
    and end pieces at every distance from the end of the buffer;
  - random strings from a palette of characters and byte sequences the pre-tokenizers treat
    specially, invalid UTF-8 included (lone continuation bytes, overlong forms, surrogates,
    code points past U+10FFFF, truncated sequences), and plain random bytes.

--asan builds the working-tree side with AddressSanitizer and UBSan (each record sits in a
buffer of exactly its length plus one byte, so a read past it is caught). Exits 1 on any
difference, printing the first few.
"""

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "tokens")
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "corpus")
CFLAGS = ["-std=c11", "-O2", "-D_POSIX_C_SOURCE=200112L", "-DCK_STATIC"]
SANITIZE = ["-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]


def build(tree, out, extra):
    subprocess.run(["cc", *CFLAGS, *extra, "-I" + os.path.join(tree, "csrc", "include"),
                    os.path.join(tree, "tools", "tokens_bench.c"), "-o", out], check=True)


def checkout(ref, dest):
    """The files tokens_bench.c builds from, as commit `ref` has them, under dest."""
    tar = subprocess.run(["git", "-C", ROOT, "archive", ref, "csrc", "tools/tokens_bench.c"],
                         check=True, stdout=subprocess.PIPE).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(dest)


def corpus_texts():
    texts = []
    for half in ("train", "test"):
        base = os.path.join(DATA, half)
        for cat in sorted(os.listdir(base)):
            d = os.path.join(base, cat)
            for name in sorted(os.listdir(d)):
                if name.endswith(".txt"):
                    with open(os.path.join(d, name), "rb") as f:
                        texts.append(f.read())
    return texts


def transcript_texts():
    """The strings of each message that tools/tokens_measure.js estimates."""
    if not os.path.isdir(SHARED):
        return []
    texts = []
    for name in sorted(os.listdir(SHARED)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(SHARED, name), encoding="utf-8") as f:
            msgs = json.load(f)
        for m in msgs:
            content = m.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [c["text"] for c in content if isinstance(c, dict) and
                          isinstance(c.get("text"), str)]
            if isinstance(m.get("tool_call_id"), str):
                texts.append(m["tool_call_id"])
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                args = fn.get("arguments")
                texts += [tc.get("id") or "", fn.get("name") or "",
                          args if isinstance(args, str) else json.dumps(args)]
    return [t.encode("utf-8") for t in texts if t]


# Characters and byte sequences that decide pieces: letters of each case rule (Lt, Lm, Lo),
# marks, numbers outside ASCII, every kind of space and line break, contractions, CJK, and
# invalid UTF-8 (lone continuation, overlong, surrogate, past U+10FFFF, truncated, F5-FF).
PALETTE = [s.encode("utf-8") for s in [
    "a", "z", "A", "Z", "e", "the", " the", "The", "HTTP", "Server", "x", "q", "_", "-", ".",
    ",", ":", "/", "\\", "(", ")", "{", "}", "\"", "'", "'s", "'S", "'ll", "'LL", "'ve", "'Re",
    "'d", "'m", "'t", "'x", "'", "0", "1", "9", "12", "123", "4567", " ", "  ", "    ", "\t",
    "\n", "\r\n", "\r", "\n\n", "\u000b", "\u000c", "\u0085", "\u00a0", "\u2028", "\u3000",
    "é", "É", "ß", "ǅ", "ǈ", "ʰ", "ª", "\u0301", "\u0300", "\u20dd", "٣", "Ⅻ", "½", "中",
    "文", "の", "ー", "カ", "한", "글", "ﾟ", "😀", "👍🏽", "\u200d", "\ufeff", "’", "€", "Ω",
    "ж", "Ж", "ع", "א", "ก", "\U0001d400", "\U00010400"]] + [
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xc2", b"\xdf", b"\xe0\x80\x80", b"\xe0\xa0",
    b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xef\xbf", b"\xf0\x80\x80\x80", b"\xf0\x90\x80",
    b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8", b"\xfe", b"\xff", b"\x00", b"\x01",
    b"\x7f", b"\x1b"]


def random_texts(rng, sources, count):
    out = []
    for k in range(count):
        kind = k % 4
        if kind == 0 and sources:  # a slice of real text, often cutting a character
            src = sources[rng.randrange(len(sources))]
            at = rng.randrange(len(src))
            out.append(src[at:at + rng.choice((1, 2, 3, 5, 8, 9, 16, 17, 40, 64, 300))])
        elif kind == 1:  # the palette, short
            out.append(b"".join(rng.choice(PALETTE) for _ in range(rng.randint(1, 12))))
        elif kind == 2:  # the palette with long runs, to cross the 8-byte words and the
            parts = []  # table's longest piece
            for _ in range(rng.randint(1, 8)):
                p = rng.choice(PALETTE)
                parts.append(p * (rng.choice((1, 1, 2, 7, 8, 9, 20, 60)) if len(p) < 4 else 1))
            out.append(b"".join(parts))
        else:  # random bytes, ASCII-heavy or not
            n = rng.randint(1, 40)
            hi = 256 if rng.random() < 0.5 else 128
            out.append(bytes(rng.randrange(hi) for _ in range(n)))
    return [t for t in out if t]


def records(texts):
    return b"".join(b"%d\n%s" % (len(t), t) for t in texts)


def run(exe, argv, data):
    return subprocess.run([exe, *argv], input=data, check=True, timeout=600,
                          stdout=subprocess.PIPE).stdout.split(b"\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="main", help="the commit to compare with")
    ap.add_argument("--random", type=int, default=200000, help="how many random texts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--asan", action="store_true", help="sanitize the working-tree build")
    opt = ap.parse_args()

    real = corpus_texts() + transcript_texts()
    texts = real + random_texts(random.Random(opt.seed), real, opt.random)
    tmp = tempfile.mkdtemp(prefix="ck-tokens-same-")
    try:
        old_tree = os.path.join(tmp, "base")
        checkout(opt.base, old_tree)
        old, new = os.path.join(tmp, "old"), os.path.join(tmp, "new")
        build(old_tree, old, [])
        build(ROOT, new, SANITIZE if opt.asan else [])
        data = records(texts)
        bad = 0
        for argv in (["estimate"], ["pieces", "o200k"], ["pieces", "cl100k"]):
            a, b = run(old, argv, data), run(new, argv, data)
            if len(a) != len(b):
                print(f"{' '.join(argv)}: {len(a)} lines before, {len(b)} after")
                bad += 1
                continue
            for i, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    if bad < 5:
                        print(f"{' '.join(argv)} differs for {texts[i][:80]!r}: "
                              f"{x.decode()} before, {y.decode()} after")
                    bad += 1
        print(f"tokens_same: {len(texts)} texts ({len(real)} real, "
              f"{len(texts) - len(real)} random; {len(data)} bytes) against {opt.base}: "
              f"{bad} differences")
        return 1 if bad else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
