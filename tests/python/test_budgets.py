"""Operator budgets: compile time / memory per request (GrammarCompiler and per call)
and the per-call work limit of matchers (max_step_work).

Times are bounded generously (a compile that takes seconds must stop within a
fraction of one); the work limit is checked on deterministic unit counts."""

import time

import numpy as np
import pytest

import xg2_plugin as xgr
from xg2_plugin import _budget

import vocabs


def chain_ebnf(n: int) -> str:
    """n rules, each with its own literal: the core's compile grows with n (~1.5 s at 100k)."""
    rules = [f'r{i} ::= "x{i}" r{i + 1} | "y"' for i in range(n)]
    return "root ::= r0\n" + "\n".join(rules) + f'\nr{n} ::= "z"\n'


def cycle_ebnf(n: int) -> str:
    """A cycle of n left-recursive rules (issue 23): r_i ::= r_{i+1} "a" | "b"."""
    rules = [f'r{i} ::= r{(i + 1) % n} "a" | "b"' for i in range(n)]
    return "root ::= r0\n" + "\n".join(rules) + "\n"


@pytest.fixture(scope="module")
def big_chain():
    return chain_ebnf(100_000)


# ---- compile budgets ----


def test_time_limit_stops_a_long_compile(deepseek, big_chain):
    compiler = xgr.GrammarCompiler(deepseek.info, cache_enabled=False)
    t = time.perf_counter()
    with pytest.raises(xgr.LimitExceededError, match=r"compile time limit of 50 ms exceeded \(while "):
        compiler.compile_grammar(big_chain, time_limit_ms=50)
    assert time.perf_counter() - t < 1.0  # the whole compile takes seconds


def test_compiler_time_limit_and_per_call_override(deepseek, big_chain):
    compiler = xgr.GrammarCompiler(deepseek.info, cache_enabled=False, compile_time_limit_ms=40)
    with pytest.raises(xgr.LimitExceededError, match="compile time limit of 40 ms"):
        compiler.compile_grammar(big_chain)
    # the per-call limit replaces the compiler's
    compiler.compile_grammar(chain_ebnf(200), time_limit_ms=60_000)


def test_memory_limit_stops_a_large_compile(deepseek, big_chain):
    compiler = xgr.GrammarCompiler(deepseek.info, cache_enabled=False)
    with pytest.raises(xgr.LimitExceededError, match=r"compile memory limit of 4194304 bytes exceeded"):
        compiler.compile_grammar(big_chain, memory_limit_bytes=4 << 20)
    compiler = xgr.GrammarCompiler(deepseek.info, cache_enabled=False, compile_memory_limit_bytes=4 << 20)
    with pytest.raises(xgr.LimitExceededError, match="compile memory limit"):
        compiler.compile_grammar(big_chain)


def test_nested_budgets_keep_the_tighter(deepseek, big_chain):
    compiler = xgr.GrammarCompiler(deepseek.info, cache_enabled=False)
    t = time.perf_counter()
    with _budget.compile_budget(30, None):
        with pytest.raises(xgr.LimitExceededError, match="compile time limit of 30 ms"):
            compiler.compile_grammar(big_chain, time_limit_ms=60_000)
    assert time.perf_counter() - t < 1.0
    # closed: the core's budget is gone with it
    compiler.compile_grammar(chain_ebnf(100))


def test_defaults_leave_normal_compiles_alone(deepseek):
    compiler = xgr.GrammarCompiler(deepseek.info, cache_enabled=False)
    plain = xgr.GrammarCompiler(
        deepseek.info, cache_enabled=False, compile_time_limit_ms=None, compile_memory_limit_bytes=None
    )
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"type": "integer"}}}}
    a = compiler.compile_json_schema(schema)
    b = plain.compile_json_schema(schema)
    assert str(a.grammar) == str(b.grammar)
    for compile_call in (
        lambda c: c.compile_builtin_json_grammar(),
        lambda c: c.compile_regex("[a-z]+@[a-z]+"),
        lambda c: c.compile_choices(["yes", "no"]),
        lambda c: c.compile_lark('start: "a" "b"+'),
    ):
        assert str(compile_call(compiler).grammar) == str(compile_call(plain).grammar)


@pytest.mark.parametrize("bad", [0, -1, True, "10", float("nan")])
def test_bad_limits_are_refused(deepseek, bad):
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.GrammarCompiler(deepseek.info, compile_time_limit_ms=bad)
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.GrammarCompiler(deepseek.info, max_step_work=bad)
    compiler = xgr.GrammarCompiler(deepseek.info)
    with pytest.raises(xgr.InvalidArgumentError):
        compiler.compile_grammar('root ::= "a"', time_limit_ms=bad)
    with pytest.raises(xgr.InvalidArgumentError):
        compiler.compile_grammar('root ::= "a"', memory_limit_bytes=bad)


# ---- the work limit of a fill / accept ----


def _fill(matcher, vocab):
    bitmask = xgr.allocate_token_bitmask(1, vocab.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    return vocabs.mask_bits(bitmask, vocab.vocab_size)


# (accepting "b" makes ~2 items per rule; the fill after it steps ~17 per rule)
@pytest.mark.parametrize("n, limit", [(2_000, 20_000), (20_000, 150_000)])
def test_left_recursive_cycle_fill_is_bounded(deepseek, n, limit):
    compiler = xgr.GrammarCompiler(deepseek.info, max_step_work=limit)
    compiled = compiler.compile_grammar(cycle_ebnf(n))
    assert compiled.max_step_work == limit
    matcher = xgr.GrammarMatcher(compiled)
    b = deepseek.encode("b")
    assert len(b) == 1 and matcher.accept_token(b[0])
    t = time.perf_counter()
    with pytest.raises(xgr.LimitExceededError, match=f"fill work limit of {limit} units exceeded"):
        _fill(matcher, deepseek)
    assert time.perf_counter() - t < 1.0
    # still usable: the state is as it was, a larger limit fills, rollback works
    roomy = xgr.GrammarMatcher(compiled, max_step_work=None)
    assert roomy.accept_token(b[0])
    bits = _fill(roomy, deepseek)
    assert bits[deepseek.encode("a")[0]] and not bits[b[0]]
    matcher.rollback(1)
    assert matcher.accept_token(b[0])


def test_left_recursive_cycle_fill_is_fast(deepseek):
    """The cycle used to cost ~1 s per fill at n=10k (quadratic completion); under
    the default limit it now fills in milliseconds."""
    compiled = xgr.GrammarCompiler(deepseek.info).compile_grammar(cycle_ebnf(10_000))
    matcher = xgr.GrammarMatcher(compiled)
    a, b = deepseek.encode("a")[0], deepseek.encode("b")[0]
    assert matcher.accept_token(b)
    t = time.perf_counter()
    for _ in range(5):
        _fill(matcher, deepseek)
        assert matcher.accept_token(a)
    assert time.perf_counter() - t < 2.5  # 5 fills + accepts: 11.7 s on the old head, ~0.3 s now


def _accepts(compiled, prefix_ids, token):
    m = xgr.GrammarMatcher(compiled, max_step_work=None)
    for t in prefix_ids:
        assert m.accept_token(t)
    return m.accept_token(token)


def test_small_cycle_masks_equal_forked_accepts(deepseek):
    """With the work counted (and a dedup of equal kernel items), masks of the cycle
    still agree with accepting each candidate token."""
    compiled = xgr.GrammarCompiler(deepseek.info).compile_grammar(cycle_ebnf(7))
    m = xgr.GrammarMatcher(compiled)
    prefix = []
    candidates = [t for t, bs in enumerate(deepseek.token_bytes) if bs and set(bs) <= set(b"ab") and len(bs) <= 4]
    for step in ["b", "a", "aa"]:
        ids = deepseek.encode(step)
        for t in ids:
            assert m.accept_token(t)
        prefix += ids
        bits = _fill(m, deepseek)
        for t in candidates:
            assert bits[t] == _accepts(compiled, prefix, t), (step, deepseek.token_bytes[t])


def test_accept_work_limit_leaves_the_matcher_usable(deepseek):
    compiled = xgr.GrammarCompiler(deepseek.info).compile_grammar(cycle_ebnf(5_000))
    m = xgr.GrammarMatcher(compiled, max_step_work=2_000)
    b, a = deepseek.encode("b")[0], deepseek.encode("a")[0]
    with pytest.raises(xgr.LimitExceededError, match="accept work limit of 2000 units exceeded"):
        m.accept_token(b)
    assert not m.is_completed()
    with pytest.raises(xgr.LimitExceededError, match="accept work limit"):
        m.accept_string("b")
    # an unlimited fork of the same start accepts
    roomy = xgr.GrammarMatcher(compiled, max_step_work=None)
    assert roomy.accept_token(b) and roomy.accept_token(a)
    assert roomy.is_completed()


def test_batch_fill_reports_the_matcher_over_its_limit(deepseek):
    compiler = xgr.GrammarCompiler(deepseek.info)
    cycle = compiler.compile_grammar(cycle_ebnf(3_000))
    plain = compiler.compile_grammar('root ::= [a-z]+ "."')
    b = deepseek.encode("b")[0]
    tight = xgr.GrammarMatcher(cycle, max_step_work=10_000)  # accepts "b", not the fill after it
    ok = [xgr.GrammarMatcher(plain), xgr.GrammarMatcher(cycle, max_step_work=None)]
    for m in (tight, ok[1]):
        assert m.accept_token(b)
    want = [_fill(m, deepseek) for m in ok]
    bitmask = xgr.allocate_token_bitmask(3, deepseek.vocab_size)
    with pytest.raises(xgr.LimitExceededError, match="matcher 1: fill work limit of 10000 units"):
        xgr.BatchGrammarMatcher(2).batch_fill_next_token_bitmask([ok[0], tight, ok[1]], bitmask)
    np.testing.assert_array_equal(vocabs.mask_bits(bitmask, deepseek.vocab_size, 0), want[0])
    np.testing.assert_array_equal(vocabs.mask_bits(bitmask, deepseek.vocab_size, 2), want[1])
