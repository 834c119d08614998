"""Hostile and slow `pattern` / `patternProperties` inputs (issue 23): compile time
roughly linear in the pattern's size, a budget that ends a long front-end automaton
build, other threads running beside one, and exact masks for an unanchored key
pattern beside free keys."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

import xg2_plugin as xgr
from xg2_plugin import _budget
from xg2_plugin.compiler import CompiledGrammar

_BYTES = []


def _byte_info():
    """256 one-byte tokens: enough to drive accept_string."""
    if not _BYTES:
        _BYTES.append(xgr.TokenizerInfo([bytes([b]) for b in range(256)]))
    return _BYTES[0]


def _accepts(grammar, value) -> bool:
    m = xgr.GrammarMatcher(CompiledGrammar(grammar, _byte_info()))
    return m.accept_string(json.dumps(value)) and m.is_completed()


def _words(n: int, seed: int = 1) -> list:
    rng = random.Random(seed)
    words: set = set()
    while len(words) < n:
        words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))))
    return sorted(words)


def test_pattern_of_20000_alternatives_compiles_fast():
    # 47 s at 2781598 (the IR's alternation deduplicated by a list scan: quadratic);
    # about a second now, front-end and core together
    words = _words(20_000)
    schema = {"type": "string", "pattern": "^(" + "|".join(words) + ")$"}
    t0 = time.monotonic()
    grammar = xgr.Grammar.from_json_schema(json.dumps(schema), strict_mode=False)
    assert time.monotonic() - t0 < 10.0
    assert _accepts(grammar, words[0]) and _accepts(grammar, words[-1]) and _accepts(grammar, words[9999])
    assert not _accepts(grammar, words[7] + "q") and not _accepts(grammar, "zz")


# A subset construction of 2^11 states in the front-end's automaton engine (the
# intersection of two patterns): about a second of work without a budget.
_EXPONENTIAL = {"allOf": [{"type": "string", "pattern": "^(a|b)*a(a|b){10}$"}, {"pattern": "b"}]}


def test_front_end_automaton_ends_at_the_time_budget():
    t0 = time.monotonic()
    with pytest.raises(xgr.LimitExceededError, match="compile time limit of 20 ms exceeded"):
        with _budget.compile_budget(time_limit_ms=20, memory_limit_bytes=None):
            xgr.Grammar.from_json_schema(json.dumps(_EXPONENTIAL), strict_mode=False)
    assert time.monotonic() - t0 < 5.0


def test_front_end_automaton_lets_other_threads_run():
    # the compiled (mypyc) front-end never gives up the GIL by itself: a 1.6 s
    # compile stalled another thread for 1.3 s
    gaps = []
    done = threading.Event()

    def tick():
        last = time.monotonic()
        while not done.is_set():
            time.sleep(0.001)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    t = threading.Thread(target=tick)
    t.start()
    try:
        with _budget.compile_budget(time_limit_ms=120_000, memory_limit_bytes=None):
            grammar = xgr.Grammar.from_json_schema(json.dumps(_EXPONENTIAL), strict_mode=False)
    finally:
        done.set()
        t.join()
    assert max(gaps) < 0.5
    assert _accepts(grammar, "b" * 11 + "a" + "b" * 10)
    assert not _accepts(grammar, "a" * 12)


# ---------------------------------------------------------------------------------
# patternProperties with an unanchored key pattern beside free keys (issue 23's
# ordinary-schema row): the keys that do not match are the complement automaton of
# a searched pattern.  Exact masks and jsonschema's verdicts, on a real vocabulary.
# ---------------------------------------------------------------------------------

_HEX_KEYS = {"type": "object", "patternProperties": {"[0-9a-f]{32}": {"type": "null"}}}
_HEX = "0123456789abcdef0123456789abcdef"

_HEX_KEY_INSTANCES = [
    {_HEX: None},  # a matching key: null
    {"x" + _HEX: None, "id": [1]},  # matching inside a longer key; a free key
    {_HEX[:31] + "g": "t"},  # a run of 31: not matching, any value
    {},
]


@pytest.mark.parametrize("index", range(len(_HEX_KEY_INSTANCES)))
def test_unanchored_key_pattern_masks_are_exact(deepseek, index):
    from test_json_schema_oracle import check_instance

    check_instance(deepseek, _HEX_KEYS, _HEX_KEY_INSTANCES[index], index, f"hex keys {index}")


@pytest.mark.parametrize("inst", [{_HEX: 1}, {"k" + _HEX: "x"}, {_HEX.upper() + _HEX[:1]: None, _HEX + "Z": []}])
def test_unanchored_key_pattern_refuses_what_jsonschema_refuses(inst):
    import jsonschema

    grammar = xgr.Grammar.from_json_schema(json.dumps(_HEX_KEYS), strict_mode=False)
    assert _accepts(grammar, inst) == jsonschema.Draft202012Validator(_HEX_KEYS).is_valid(inst)


def test_unanchored_key_pattern_masks_are_cheap(deepseek):
    # Each state of the complement automaton (keys without a run of 64) walked
    # the whole vocabulary: ~6 ms of CPU a token at 2781598, 180 ms over this
    # key; one automaton for both classes takes the string slice at once (2 ms
    # over the key).  CPU time of this thread, so a loaded machine does not count.
    # (A class no other test uses: the shared mask cache holds none of its states.)
    schema = {"type": "object", "patternProperties": {"[0-9a-e]{64}": {"type": "null"}}}
    compiled = deepseek.compiler.compile_json_schema(json.dumps(schema), strict_mode=False)
    m = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(1, deepseek.vocab_size)
    run = "0123456789abcde" * 4
    spent = 0.0
    for t in deepseek.encode('{"' + run[:63] + 'x' + run[:63] + '": 1}'):
        t0 = time.thread_time()
        m.fill_next_token_bitmask(bitmask)
        spent += time.thread_time() - t0
        assert m.accept_token(t)
    assert spent < 0.05, f"{spent * 1e3:.0f} ms of CPU in the fills"


def test_pattern_property_whose_value_is_no_schema_fails_before_its_key_automaton():
    # A find of the json_schema fuzz campaign: two key patterns, one of 208 characters
    # with runs of ".", whose values are not schemas.  The key automaton (1.3 s) was
    # built before the values were looked at; now the error comes first, well inside
    # a budget the automaton alone would overrun.
    long_pat = "rep" + "\ufffd" * 32 + "=\ufffdclt" + "\ufffd" * 78 + "." * 24 + "#/" + "." * 40 + "\ufffd" * 12 + "0m9]af\ufffd{4ype"
    schema = {"type": "object", "patternProperties": {long_pat: "integer", "multiplbOf": 1.0}}
    compiler = xgr.GrammarCompiler(_byte_info(), cache_enabled=False)
    with pytest.raises(xgr.GrammarError, match="a schema must be an object or a boolean") as e:
        compiler.compile_json_schema(json.dumps(schema), strict_mode=False, time_limit_ms=150)
    assert "patternProperties" in str(e.value)


@pytest.mark.parametrize("schema", [
    {"type": "object", "patternProperties": {"[0-9a-f]{4096}": {"type": "null"}}},
    {"type": "object", "propertyNames": {"pattern": "[0-9a-f]{4096}"}},
    {"type": "string", "not": {"pattern": "[0-9a-f]{4096}"}},
], ids=["patternProperties", "propertyNames", "not"])
def test_unanchored_long_count_is_refused_before_the_budget(schema):
    # An unanchored counted pattern's subsets hold up to the count's NFA states: the
    # front-end's subset construction ran 2.2 s and 370 MB before its state limit
    # said "automaton too large"; its work (NFA states over all subsets) is bounded
    # now, so the same error comes within a budget that work would overrun.
    compiler = xgr.GrammarCompiler(_byte_info(), cache_enabled=False)
    with pytest.raises(xgr.GrammarError, match="automaton too large"):
        compiler.compile_json_schema(json.dumps(schema), strict_mode=False, time_limit_ms=1000)


def test_unanchored_count_under_the_work_bound_compiles():
    key = "k" + "0123456789abcdef" * 40  # 641 characters, 640 of them a run of the pattern
    schema = {"type": "object", "patternProperties": {"[0-9a-f]{600}": {"type": "null"}}}
    grammar = xgr.Grammar.from_json_schema(json.dumps(schema), strict_mode=False)
    assert _accepts(grammar, {key: None, "x" * 700: [1]})
    assert not _accepts(grammar, {key: 1})
