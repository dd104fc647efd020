"""Shared pytest setup for the ctxkeel Python tests.

The tests import the *installed* ctxkeel (``pip install .``): python/ctxkeel in the source
tree has no compiled ``_ext``, so nothing here puts python/ on sys.path.

``--leak-loops N`` re-runs every test function N more times, twice over, under tracemalloc
and fails a test when traced memory keeps growing between the two rounds by more than
``--leak-slack`` bytes. The core allocates through PyMem_RawMalloc, so its memory is traced
too. A first, untraced run warms caches (interned strings, UTF-8 caches, free lists).
"""

import gc
import inspect
import json
import os
import tracemalloc

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_DIR = os.path.join(REPO_ROOT, "..", "shared", "corpus")


def pytest_addoption(parser):
    group = parser.getgroup("ctxkeel")
    group.addoption(
        "--leak-loops",
        type=int,
        default=0,
        metavar="N",
        help="re-run each test N times under tracemalloc and fail on memory growth",
    )
    group.addoption(
        "--leak-slack",
        type=int,
        default=4096,
        metavar="BYTES",
        help="growth tolerated by --leak-loops between two rounds of N runs (default 4096)",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "no_leak_check: do not re-run this test under --leak-loops"
    )


def _traced_growth(run, loops):
    """Bytes still allocated after a second round of `loops` runs, relative to the first."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        for _ in range(loops):
            run()
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(loops):
            run()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    loops = pyfuncitem.config.getoption("leak_loops")
    if loops <= 0 or pyfuncitem.get_closest_marker("no_leak_check"):
        return None
    func = pyfuncitem.obj
    if inspect.iscoroutinefunction(func):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}

    def run():
        func(**kwargs)

    run()
    gc.collect()
    growth = _traced_growth(run, loops)
    slack = pyfuncitem.config.getoption("leak_slack")
    if growth > slack:
        pytest.fail(
            "leak check: traced memory grew by %d bytes over %d more runs (slack %d)"
            % (growth, loops, slack),
            pytrace=False,
        )
    return True


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


def _corpus_files():
    if not os.path.isdir(CORPUS_DIR):
        return []
    return sorted(name for name in os.listdir(CORPUS_DIR) if name.endswith(".json"))


def pytest_generate_tests(metafunc):
    # One test per corpus transcript; an absent corpus still yields one test, which skips.
    if "corpus_name" in metafunc.fixturenames:
        names = _corpus_files() or ["<absent>"]
        metafunc.parametrize("corpus_name", names)


@pytest.fixture
def corpus_messages(corpus_name):
    """The OpenAI message list of one real transcript from ../shared/corpus."""
    if corpus_name == "<absent>":
        pytest.skip("corpus not found at %s" % CORPUS_DIR)
    with open(os.path.join(CORPUS_DIR, corpus_name), encoding="utf-8") as f:
        data = json.load(f)
    return data["messages"] if isinstance(data, dict) else data
