"""estimate_tokens on every input kind, with every estimator.

chars4 is exact by contract: ceil(UTF-8 bytes / 4) over the text, ids, names, arguments and
tool_call_id of the messages (the whole list divided once), plus a fixed cost per image.
"o200k" and "cl100k" count exactly as tiktoken does (special tokens as text), and the default is
o200k (it estimates only a single unbroken run over 64 KB): the tests pin exact counts (from
js-tiktoken), check every corpus text against the counts recorded in tests/data/tokens, check
100,000 random strings against the tiktoken wheel itself when it is installed (built offline
from the rank tables in csrc/src, since it cannot download), and what the header fixes:
CK_MESSAGE_OVERHEAD per message, CK_REQUEST_OVERHEAD per list.
"""

import json
import math
import os
import random
import re

import pytest

import ctxkeel

MESSAGE_OVERHEAD = 4
REQUEST_OVERHEAD = 3
IMAGE_TOKENS = 765


def chars4(*texts):
    return math.ceil(sum(len(t.encode("utf-8")) for t in texts) / 4)


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    "text",
    ["", "a", "abcd", "abcde", "h\u00e9llo", "\u65e5\u672c\u8a9e", "\U0001f600" * 3, "x" * 1001],
)
def test_str_chars4_is_bytes_over_four_rounded_up(text):
    assert ctxkeel.estimate_tokens(text, estimator="chars4") == chars4(text)


def test_str_default():
    assert ctxkeel.estimate_tokens("") == 0
    n = ctxkeel.estimate_tokens("The quick brown fox jumps over the lazy dog.")
    assert isinstance(n, int) and n > 0
    assert ctxkeel.estimate_tokens("abc", estimator="default") == ctxkeel.estimate_tokens("abc")


# Exact o200k_base counts (js-tiktoken's), by default and with "o200k".
@pytest.mark.parametrize(
    "text, exact",
    [
        ("hello world", 2),
        ("Hello, world!", 4),
        ("1234567890", 4),  # digits go in groups of three: 123|456|789|0
        ("2024-01-15T10:30:00Z", 13),
        ("    return x;\n", 4),
        ('def main():\n    print("hi")\n', 8),
        ("Traceback (most recent call last):", 8),
        ("\u4f60\u597d\uff0c\u4e16\u754c\uff01", 4),  # 你好，世界！
        ("\u65e5\u672c\u8a9e", 2),  # 日本語
        ("\U0001f600", 1),
    ],
)
def test_str_default_exact(text, exact):
    assert ctxkeel.estimate_tokens(text) == exact
    assert ctxkeel.estimate_tokens(text, estimator="o200k") == exact


# Longer text, exactly too.
@pytest.mark.parametrize(
    "text, exact",
    [
        (
            "Compaction keeps the agent's working set small: old tool outputs move to an evidence "
            "store, and the oldest turns are folded into a checkpoint that records what the user "
            "asked for, what was done, what was decided, what failed, and what comes next. Each "
            "tier is chosen from the estimated size of the request, so the estimate has to be "
            "close to what the provider will count.",
            78,
        ),
        (
            "def parse(line):\n    key, _, value = line.partition('=')\n    if not key:\n"
            "        raise ValueError(f'bad line: {line!r}')\n"
            "    return key.strip(), value.strip()\n",
            41,
        ),
        ("FAILED tests/test_upload.py::test_resume - AssertionError: expected 200, got 409\n", 20),
        ("\u4e0a\u4e0b\u6587\u538b\u7f29\u4e0d\u662f\u5220\u5386\u53f2\uff0c\u800c\u662f"
         "\u6309\u9884\u7b97\u6e10\u8fdb\u5730\u6536\u7f29\u3002", 17),
    ],
)
def test_str_default_long_exact(text, exact):
    assert ctxkeel.estimate_tokens(text) == exact
    assert ctxkeel.estimate_tokens(text, estimator="o200k") == exact


@pytest.mark.parametrize(
    "text, exact",
    [
        ("getUserName", 2),  # cl100k does not cut a word at a capital; o200k does (3)
        ("\u4f60\u597d\uff0c\u4e16\u754c\uff01", 7),
        ("\U0001f600", 2),
        ("=" * 1000, 17),
        ("ab" * 500, 500),
        ("<|endoftext|>", 7),
    ],
)
def test_str_cl100k_exact(text, exact):
    assert ctxkeel.estimate_tokens(text, estimator="cl100k") == exact


def test_message_default_counts_ids_names_arguments():
    # Exact o200k_base counts: "call_1" 3, "bash" 1, '{"a":1}' 5, "done" 1.
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "bash", "arguments": '{"a":1}'}}]}
    assert ctxkeel.estimate_tokens(call) == 3 + 1 + 5 + MESSAGE_OVERHEAD
    result = {"role": "tool", "tool_call_id": "call_1", "content": "done"}
    assert ctxkeel.estimate_tokens(result) == 3 + 1 + MESSAGE_OVERHEAD
    both = 9 + 4 + 2 * MESSAGE_OVERHEAD + REQUEST_OVERHEAD
    assert ctxkeel.estimate_tokens([call, result]) == both


def test_message_chars4_counts_content_ids_names_arguments():
    message = {
        "role": "assistant",
        "content": "abcd",
        "tool_calls": [{"id": "id01", "type": "function",
                        "function": {"name": "name", "arguments": '{"a":1}'}}],
        "x_unknown": "not counted",
    }
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == chars4("abcd", "id01", "name",
                                                                          '{"a":1}')


def test_tool_message_counts_tool_call_id():
    message = {"role": "tool", "tool_call_id": "call_123", "content": "result text"}
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == chars4("call_123",
                                                                          "result text")


def test_message_default_adds_message_overhead():
    empty = {"role": "user", "content": ""}
    assert ctxkeel.estimate_tokens(empty) == MESSAGE_OVERHEAD
    assert ctxkeel.estimate_tokens(empty, estimator="chars4") == 0
    assert ctxkeel.estimate_tokens({"role": "assistant", "content": None}) == MESSAGE_OVERHEAD
    text = "some words to count"
    with_text = ctxkeel.estimate_tokens({"role": "user", "content": text})
    assert with_text == ctxkeel.estimate_tokens(text) + MESSAGE_OVERHEAD
    assert with_text == 4 + MESSAGE_OVERHEAD  # "some words to count" is 4 tokens in o200k_base


def test_list_default_adds_request_overhead():
    empties = [{"role": "user", "content": ""} for _ in range(3)]
    assert ctxkeel.estimate_tokens(empties) == 3 * MESSAGE_OVERHEAD + REQUEST_OVERHEAD
    assert ctxkeel.estimate_tokens(empties, estimator="chars4") == 0
    message = {"role": "user", "content": "hello there, how are you"}
    assert ctxkeel.estimate_tokens([message]) == ctxkeel.estimate_tokens(message) + REQUEST_OVERHEAD
    assert ctxkeel.estimate_tokens([message], estimator="chars4") == ctxkeel.estimate_tokens(
        message, estimator="chars4"
    )


def test_list_chars4_divides_the_whole_once():
    messages = [{"role": "user", "content": "abcde"}, {"role": "assistant", "content": "fghij"}]
    assert ctxkeel.estimate_tokens(messages, estimator="chars4") == 3  # ceil(10 / 4), not 2 + 2


def test_empty_list_is_zero():
    assert ctxkeel.estimate_tokens([]) == 0
    assert ctxkeel.estimate_tokens([], estimator="chars4") == 0


def test_dict_arguments_count_as_compact_json():
    args = {"path": "/tmp/\u00e9t\u00e9", "lines": [1, 2]}
    as_dict = {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c", "function": {"name": "read", "arguments": args}}]}
    as_text = {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c", "function": {"name": "read",
                                                       "arguments": compact(args)}}]}
    for est in ("default", "chars4"):
        assert ctxkeel.estimate_tokens(as_dict, estimator=est) == ctxkeel.estimate_tokens(
            as_text, estimator=est
        )
    # ensure_ascii=False: "é" costs its two UTF-8 bytes, not a six-byte escape.
    assert ctxkeel.estimate_tokens(as_dict, estimator="chars4") == chars4("c", "read",
                                                                          compact(args))


def test_anthropic_blocks():
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "tu_1", "name": "read", "input": {"path": "a.txt"}},
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        ],
    }
    expected = chars4("Reading.", "tu_1", "read", compact({"path": "a.txt"}), "hmm")
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == expected


def test_tool_result_list_content_is_joined_with_newlines():
    message = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu_1",
         "content": [{"type": "text", "text": "ab"}, {"type": "image", "source": {}},
                     {"type": "text", "text": "cd"}]},
    ]}
    # The image travels with the result (the core's attached part) and costs what an image does.
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == chars4("tu_1", "ab\ncd") + \
        IMAGE_TOKENS
    tool = {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "abc"},
                                                             "def"]}
    assert ctxkeel.estimate_tokens(tool, estimator="chars4") == chars4("c", "abc\ndef")


def test_images_cost_a_fixed_amount():
    message = {"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 4000}},
    ]}
    assert ctxkeel.estimate_tokens(message, estimator="chars4") == chars4("look") + IMAGE_TOKENS
    assert ctxkeel.estimate_tokens(message) >= IMAGE_TOKENS + MESSAGE_OVERHEAD


def test_tool_schemas_count_as_compact_json():
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}
    tools = [
        {"type": "function", "function": {"name": "read_file", "description": "Read a file \u00e9",
                                          "parameters": parameters}},
        {"name": "bash", "input_schema": {"type": "object"}},
    ]
    assert ctxkeel.estimate_tokens(tools, estimator="chars4") == chars4(compact(tools))
    assert ctxkeel.estimate_tokens(tools) > 0


@pytest.mark.parametrize("fmt, messages", [
    ("langchain", [{"type": "human", "content": "Fix the parser."},
                   {"type": "ai", "content": "", "tool_calls": [
                       {"id": "c1", "name": "bash", "args": {"cmd": "ls"}, "type": "tool_call"}]},
                   {"type": "tool", "tool_call_id": "c1", "name": "bash", "content": "src"}]),
    ("responses", [{"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": "c1", "output": "src tests"}]),
])
def test_dialect_lists_without_roles_are_message_lists(fmt, messages, tmp_path):
    # Once counted as tool schemas (their JSON text): no item of these has a "role".
    result = ctxkeel.Compactor(100_000, format=fmt, store_dir=str(tmp_path),
                               session_id="est").compact(messages)
    assert ctxkeel.estimate_tokens(messages) == result.tokens_before
    assert ctxkeel.estimate_tokens(messages, estimator="chars4") != chars4(compact(messages))
    # A Responses tool schema ({"type": "function", "name": ...}) stays a tool schema.
    tools = [{"type": "function", "name": "bash", "parameters": {"type": "object"}}]
    assert ctxkeel.estimate_tokens(tools, estimator="chars4") == chars4(compact(tools))


def test_list_with_a_role_is_a_message_list():
    # One dict with "role" makes the list a message list; the other item then lacks a role.
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens([{"role": "user", "content": "x"}, {"name": "tool"}])
    assert info.value.where == "messages[1].role"


def test_list_of_non_dicts_is_read_as_messages():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens(["hello"])
    assert info.value.where == "messages[0]"


def test_unserializable_tool_schema():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens([{"name": "f", "default": object()}])
    assert info.value.code == "CK_ETYPE" and info.value.where == "tools"


@pytest.mark.parametrize("bad", [None, 3, 2.5, b"bytes", {"a"}, object()])
def test_other_types_are_type_errors(bad):
    with pytest.raises(TypeError) as info:
        ctxkeel.estimate_tokens(bad)
    assert "argument 'x'" in str(info.value)
    assert str(info.value).startswith("ctxkeel: ")


def test_a_tuple_is_read_as_a_list():
    # Its items are messages (or tool schemas), so a string among them is named by index.
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens(("a",))
    assert info.value.where.startswith("messages[0]")


def test_estimator_argument_checked():
    with pytest.raises(
        ValueError, match="estimator must be 'default', 'chars4', 'cl100k' or 'o200k', not 'tik"
    ):
        ctxkeel.estimate_tokens("x", estimator="tiktoken")
    with pytest.raises(ValueError):
        ctxkeel.estimate_tokens("x", estimator="o200k\0")
    with pytest.raises(TypeError, match="estimator must be a str"):
        ctxkeel.estimate_tokens("x", estimator=4)
    with pytest.raises(TypeError):
        ctxkeel.estimate_tokens("x", "chars4")  # estimator is keyword-only
    assert ctxkeel.estimate_tokens(x="abcdefgh", estimator="chars4") == 2


def test_str_with_lone_surrogate():
    with pytest.raises(ctxkeel.InputError) as info:
        ctxkeel.estimate_tokens("ab\udc00")
    assert info.value.code == "CK_EUTF8" and info.value.where == "x" and info.value.offset == 2


def test_estimate_does_not_change_input():
    message = {"role": "assistant", "content": None,
               "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}
    before = json.dumps(message)
    ctxkeel.estimate_tokens([message])
    assert json.dumps(message) == before


# ---- The corpus and random strings against exact counts ------------------------------------

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOKENS = os.path.join(REPO, "tests", "data", "tokens")


def counted_texts():
    """(path, text, exact o200k, exact cl100k) for every row of the recorded counts."""
    for tsv in ("exact_counts.tsv", "generated_counts.tsv"):
        with open(os.path.join(TOKENS, tsv), encoding="utf-8") as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                split, cat, name, o200k, cl100k = line.rstrip("\n").split("\t")
                parts = ["classes", name] if split == "classes" else [split, cat, name]
                path = os.path.join(TOKENS, *parts)
                with open(path, "rb") as t:
                    yield path, t.read().decode("utf-8"), int(o200k), int(cl100k)


def test_corpus_counts_are_exact():
    rows = 0
    for path, text, o200k, cl100k in counted_texts():
        assert ctxkeel.estimate_tokens(text, estimator="o200k") == o200k, path
        assert ctxkeel.estimate_tokens(text, estimator="cl100k") == cl100k, path
        assert ctxkeel.estimate_tokens(text) == o200k, path
        rows += 1
    assert rows > 300


def rank_table(name):
    """The ranks of bpe_<name>.h as tiktoken wants them: {token bytes: rank}."""
    with open(os.path.join(REPO, "csrc", "src", "bpe_%s.h" % name), encoding="ascii") as f:
        src = f.read()

    def array(which):
        body = src[src.index("ck_bpe_%s_%s[" % (name, which)):]
        # The array ends at the first `"};`: a quote inside a literal is always escaped.
        body = body[body.index("{") + 1:body.index('"};') + 1]
        out = bytearray()
        for lit in re.findall(r'"((?:[^"\\]|\\[0-7]{3})*)"', body):
            out += re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]),
                          lit.encode("ascii"))
        return bytes(out)

    n = int(re.search(r"CK_BPE_%s_TOKENS (\d+)u" % name.upper(), src).group(1))
    lens, data = array("lens"), array("bytes")
    ranks, at = {}, 0
    for r in range(n):
        size = lens[r] - 64  # CK_BPE_LEN_BIAS
        ranks[data[at:at + size]] = r
        at += size
    return ranks


def tiktoken_encoding(name, monkeypatch):
    """The tiktoken wheel's encoding, with its own pattern and the repository's ranks (it would
    download them otherwise)."""
    tiktoken = pytest.importorskip("tiktoken")
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    ranks = rank_table(name)
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: ranks)
    params = getattr(openai_public, name + "_base")()
    return tiktoken.Encoding(name=name + "_offline", pat_str=params["pat_str"],
                             mergeable_ranks=ranks, special_tokens={})


def random_strings(count, seed):
    rng = random.Random(seed)
    pools = [" \t\n\r\x0b\x0c", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
             "0123456789", "'sdmtlvreSDMTLVRE", ".,;:!?-_=+*/\\()[]{}<>\"#$%&@^`|~",
             "\u00e9\u00e8\u00df\u00c9\u01c5", "\u00a0\u2003\u3000\u2028\u0085\u200b\ufeff",
             "\u0430\u0431\u0432\u0410\u0411", "\u4e2d\u6587\u5b57\u7b26\u6d4b\u8bd5",
             "\u3072\u3089\u30ab\u30bf\u30fc", "\ud55c\uad6d\uc5b4", "\u0627\u0644\u05e9",
             "\u0939\u093f\u0928\u094d", "\u0301\u0308\u0327\u064b", "\ue000\uf8ff",
             "\U0001f600\U0001f44d\U0001f3fd\u200d\u2764", "\U0001d400\U00020000"]
    specials = ["<|endoftext|>", "<|fim_prefix|>", "'s", "'LL", "\r\n", "    "]
    out = []
    for k in range(count):
        s = ""
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.08:
                s += rng.choice(specials)
                continue
            pool = rng.choice(pools)
            s += "".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))
        if k % 500 == 0:
            s *= rng.randint(20, 80)  # a long stretch now and then, for the long-piece methods
        out.append(s)
    return out


@pytest.mark.parametrize("name", ["o200k", "cl100k"])
def test_random_strings_match_tiktoken(name, monkeypatch):
    enc = tiktoken_encoding(name, monkeypatch)
    estimator = name
    wrong = []
    for s in random_strings(100000, 1202):
        want = len(enc.encode_ordinary(s))
        got = ctxkeel.estimate_tokens(s, estimator=estimator)
        if got != want:
            wrong.append((s[:60], got, want))
    assert not wrong, "%d of 100000 differ, e.g. %r" % (len(wrong), wrong[:3])
