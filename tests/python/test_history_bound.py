"""The matcher's history bound (issue 23): ``max_rollback_tokens`` is honoured and
lets the core forget history, and ``max_history_bytes`` caps what it may hold.

The reference for a bounded matcher is an unbounded one replaying the same
actions: every mask and verdict must be identical, and the bounded one refuses
exactly the rollbacks that reach past its last k steps.
"""

import random
import re

import numpy as np
import pytest

import xg2_plugin as xgr
from vocabs import bits_of_row, fill

GRAMMARS = {
    "az": "root ::= [a-z]*",
    "json": "builtin_json",
    # a lookahead assertion before a nested rule: guarded items wait across bytes
    "lookahead": 'root ::= elem*\nelem ::= "(" elem* ")" | a elem ";" | "y" [a-z]*\na ::= "x" (= "(" | "y")',
    "counted": 'root ::= item{1,5000}\nitem ::= "a" | "b" | "[" root "]"',
}
# Tokens a walk prefers, so that it nests, closes and leaves strings.
# Tokens a walk prefers (openers and separators twice: it drifts deeper), so that
# it nests, closes and leaves strings.
PREFERRED = ['[', '[', '{', '{', '"a"', '"a"', ':', ',', ',', '1', ']', '}', '"', '(', ')', 'x', 'y', ';', 'a', 'b']


def _walk(vocab, grammar, k, steps, seed):
    rng = random.Random(seed)
    compiled = vocab.compile(GRAMMARS[grammar])
    ref = xgr.GrammarMatcher(compiled, max_history_bytes=None)
    m = xgr.GrammarMatcher(compiled, max_rollback_tokens=k)
    preferred = [t for s in PREFERRED for t in vocab.encode(s)[:1] if vocab.text([t]) == s.encode()]
    avail = total = 0
    sizes, compacted = [], []
    for step in range(steps):
        row = fill(ref, vocab.vocab_size)
        assert np.array_equal(fill(m, vocab.vocab_size), row), f"{grammar} k={k} step {step}: masks differ"
        assert m.is_completed() == ref.is_completed() and m.is_terminated() == ref.is_terminated()
        assert m.num_accepted_steps == ref.num_accepted_steps == total
        sizes.append(m.history_bytes)
        r = rng.random()
        if r < 0.1 and total:
            n = rng.randint(1, k + 2)
            if n <= avail:
                m.rollback(n)
                ref.rollback(n)
                avail, total = avail - n, total - n
            else:
                why = f"max_rollback_tokens is {k}" if n <= total else "were accepted"
                with pytest.raises(xgr.InvalidArgumentError, match=why):
                    m.rollback(n)
            continue
        bits = bits_of_row(row, vocab.vocab_size)
        allowed = np.flatnonzero(bits)
        allowed = allowed[allowed != vocab.stop_id] if rng.random() > 0.01 else allowed
        if not len(allowed):
            if avail:
                m.rollback(1)
                ref.rollback(1)
                avail, total = avail - 1, total - 1
            else:
                m.reset()
                ref.reset()
                avail = total = 0
            continue
        good = [t for t in preferred if bits[t]]
        t = int(rng.choice(good) if good and r < 0.75 else rng.choice(allowed))
        if r > 0.97:
            t = rng.randrange(vocab.n_real)  # maybe refused: both must agree
        ok = ref.accept_token(t)
        assert m.accept_token(t) == ok, f"{grammar} k={k} step {step}: token {t}"
        if m.history_bytes < sizes[-1]:
            compacted.append(step)
        if ok:
            total += 1
            avail = min(avail + 1, k)
    # the walk passed the compaction threshold: an accept shrank the history
    assert compacted, f"{grammar}: history never shrank on an accept, peak {max(sizes)}"
    assert max(sizes) < 1 << 20


@pytest.mark.parametrize("grammar", sorted(GRAMMARS))
def test_bounded_rollback_gives_the_unbounded_masks(deepseek, grammar):
    for seed, k in enumerate((0, 3)):
        _walk(deepseek, grammar, k, 1200, seed)


def test_a_million_tokens_of_a_regular_grammar_keep_history_flat(deepseek):
    m = xgr.GrammarMatcher(deepseek.compile("root ::= [a-z]*"), max_rollback_tokens=4)
    (a,) = deepseek.encode("a")
    worst = 0
    for i in range(1_000_000):
        assert m.accept_token(a)
        if i % 997 == 0:
            worst = max(worst, m.history_bytes)
    # unbounded, this is ~29 MB (25 bytes a byte, 4 a step)
    assert worst < 256 << 10 and m.history_bytes < 256 << 10
    assert m.num_accepted_steps == 1_000_000
    before = fill(m, deepseek.vocab_size)
    with pytest.raises(xgr.InvalidArgumentError, match="max_rollback_tokens is 4"):
        m.rollback(5)
    m.rollback(4)
    assert m.num_accepted_steps == 999_996
    assert np.array_equal(fill(m, deepseek.vocab_size), before)


def test_accept_string_of_100_mb_stops_at_the_history_limit(deepseek):
    m = xgr.GrammarMatcher(deepseek.compile("root ::= [a-z]*"))  # every default on
    assert m.max_history_bytes == 256 << 20 and m.max_rollback_tokens == -1
    assert m.accept_string("abc")
    before, mask = m.history_bytes, fill(m, deepseek.vocab_size)
    with pytest.raises(xgr.LimitExceededError, match=r"max_history_bytes = 268435456") as e:
        m.accept_string("q" * (100 << 20))
    # it stopped at the limit (about 25 bytes of history a byte), not after 100 MB
    at = int(re.search(r"at byte (\d+)", str(e.value)).group(1))
    assert at < 12 << 20
    assert m.history_bytes == before and m.num_accepted_steps == 1
    assert np.array_equal(fill(m, deepseek.vocab_size), mask)
    assert m.accept_string("de")


def test_a_bounded_matcher_stays_under_a_small_history_limit(deepseek):
    compiled = deepseek.compile("root ::= [a-z]*")
    data = "abcd" * 50_000
    m = xgr.GrammarMatcher(compiled, max_history_bytes=100_000)
    with pytest.raises(xgr.LimitExceededError, match="max_history_bytes = 100000"):
        m.accept_string(data)
    # below the compaction's own slack (16 KiB): an accept at the limit compacts first
    m = xgr.GrammarMatcher(compiled, max_rollback_tokens=2, max_history_bytes=8_000)
    for i in range(0, len(data), 100):
        assert m.accept_string(data[i : i + 100])
    assert m.history_bytes <= 8_000


def test_fork_keeps_the_bounds(deepseek):
    compiled = deepseek.compile("builtin_json")
    m = xgr.GrammarMatcher(compiled, max_rollback_tokens=2, max_history_bytes=1 << 20)
    ids = deepseek.encode("[" * 3000 + "1" + ", 1" * 3000)
    for t in ids:
        assert m.accept_token(t)
    f = m.fork()
    assert (f.max_rollback_tokens, f.max_history_bytes) == (2, 1 << 20)
    with pytest.raises(xgr.InvalidArgumentError):
        f.rollback(3)
    closing = deepseek.encode("]" * 3000)
    for t in closing:
        assert f.accept_token(t)
    assert f.is_completed() and not m.is_completed()
    m.rollback(2)
    assert m.num_accepted_steps == len(ids) - 2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_rollback_tokens": True},
        {"max_rollback_tokens": 1.5},
        {"max_rollback_tokens": "3"},
        {"max_rollback_tokens": -2},
        {"max_rollback_tokens": 2**31},
        {"max_history_bytes": 0},
        {"max_history_bytes": -1},
        {"max_history_bytes": 1e9},
        {"max_history_bytes": False},
    ],
)
def test_history_bounds_are_checked(deepseek, kwargs):
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.GrammarMatcher(deepseek.compile("root ::= [a-z]*"), **kwargs)
