"""Acceptance criterion 3: rollback restores the exact earlier state.

After accepting k steps, rolling back j gives a mask byte-identical to the one
recorded at step k - j, and restores is_completed / is_terminated; rolling back more
steps than were accepted raises ValueError and changes nothing.
"""

import numpy as np
import pytest

import xg2_plugin as xgr
from vocabs import CASES, bits_of_row, fill

ROLLBACK_GRAMMARS = ["json", "arith", "nested_list", "repetition", "lookahead_prune", "multibyte"]


def _record(vocab, compiled, ids):
    """Masks and flags after 0..len(ids) steps (ids may end with the stop token)."""
    m = xgr.GrammarMatcher(compiled)
    V = vocab.vocab_size
    rec = [(fill(m, V), m.is_completed(), m.is_terminated())]
    for t in ids:
        assert m.accept_token(t)
        rec.append((fill(m, V), m.is_completed(), m.is_terminated()))
    return m, rec


def _assert_state(m, vocab, expected, where):
    row, completed, terminated = expected
    got = fill(m, vocab.vocab_size)
    assert np.array_equal(got, row), (
        f"{where}: mask differs in {int((got != row).sum())} words"
    )
    assert m.is_completed() == completed, f"{where}: is_completed"
    assert m.is_terminated() == terminated, f"{where}: is_terminated"


@pytest.mark.parametrize("grammar", ROLLBACK_GRAMMARS)
def test_rollback_restores_masks(vocab, grammar):
    case = CASES[grammar]
    compiled = vocab.compile(case.ebnf)
    ids = vocab.encode(case.valid[0]) + [vocab.stop_id]
    n = len(ids)
    full, rec = _record(vocab, compiled, ids)
    assert rec[-1][2] and not rec[-2][2]  # terminated only after the stop token
    assert full.num_accepted_steps == n

    ks = sorted({1, 2, n // 2, n - 1, n})
    for k in ks:
        at_k = xgr.GrammarMatcher(compiled)
        for t in ids[:k]:
            assert at_k.accept_token(t)
        for j in sorted({1, 2, k // 3, k - 1, k}):
            if not 0 < j <= k:
                continue
            m = at_k.fork()
            m.rollback(j)
            where = f"{vocab.name}/{grammar}: k={k} rollback {j}"
            assert m.num_accepted_steps == k - j
            _assert_state(m, vocab, rec[k - j], where)
            # Replaying the same tokens walks through the same states again.
            for i in range(k - j, k):
                assert m.accept_token(ids[i]), f"{where}: replay of step {i} rejected"
                _assert_state(m, vocab, rec[i + 1], f"{where}, replay step {i}")
        # Too far: ValueError, nothing changes.
        for bad in (k + 1, k + 100):
            with pytest.raises(ValueError):
                at_k.rollback(bad)
        _assert_state(at_k, vocab, rec[k], f"{vocab.name}/{grammar}: k={k} after failed rollback")
        at_k.rollback(0)
        _assert_state(at_k, vocab, rec[k], f"{vocab.name}/{grammar}: k={k} after rollback(0)")

    # From the terminated matcher: undo just the stop token, then everything.
    m = full.fork()
    m.rollback(1)
    _assert_state(m, vocab, rec[n - 1], "undo stop")
    assert m.accept_token(vocab.stop_id) and m.is_terminated()
    m.rollback(n)
    _assert_state(m, vocab, rec[0], "undo all after stop")
    assert m.num_accepted_steps == 0
    with pytest.raises(ValueError):
        m.rollback(1)
    with pytest.raises(ValueError):
        m.rollback(-1)


def test_rollback_random_interleaving(vocab):
    """Random accept / rollback sequences: the mask always equals that of a fresh
    matcher fed the tokens still accepted."""
    case = CASES["json"]
    compiled = vocab.compile(case.ebnf)
    V = vocab.vocab_size
    rng = np.random.default_rng([99, len(vocab.name)])
    base = vocab.encode(case.valid[1])
    m = xgr.GrammarMatcher(compiled)
    accepted = []
    for step in range(60):
        if accepted and rng.random() < 0.35:
            j = int(rng.integers(1, len(accepted) + 1))
            m.rollback(j)
            del accepted[len(accepted) - j:]
        else:
            bits = bits_of_row(fill(m, V), V)
            allowed = np.flatnonzero(bits)
            # Mostly follow the valid string (deep states), sometimes go astray.
            nxt = base[len(accepted)] if len(accepted) < len(base) else None
            if nxt is not None and bits[nxt] and rng.random() < 0.7:
                t = nxt
            else:
                t = int(rng.choice(allowed))
            assert m.accept_token(t)
            accepted.append(t)
        ref = xgr.GrammarMatcher(compiled)
        for t in accepted:
            assert ref.accept_token(t)
        where = f"{vocab.name} step {step} tokens {accepted}"
        assert m.num_accepted_steps == len(accepted), where
        _assert_state(m, vocab, (fill(ref, V), ref.is_completed(), ref.is_terminated()), where)


def test_rollback_of_strings_and_tokens(vocab):
    """accept_string counts as one step; mixed histories roll back step by step."""
    compiled = vocab.compile(CASES["nested_list"].ebnf)
    V = vocab.vocab_size
    m = xgr.GrammarMatcher(compiled)
    rec = [(fill(m, V), False, False)]
    assert m.accept_string("[[1")
    rec.append((fill(m, V), False, False))
    for t in vocab.encode("2],"):
        assert m.accept_token(t)
        rec.append((fill(m, V), False, False))
    assert m.accept_string(b"[]]")
    rec.append((fill(m, V), True, False))
    assert m.accept_token(vocab.stop_id)
    rec.append((fill(m, V), True, True))
    assert m.num_accepted_steps == len(rec) - 1
    # A rejected string is not a step.
    assert not m.accept_string("]")
    assert m.num_accepted_steps == len(rec) - 1
    for k in range(len(rec) - 1, 0, -1):
        m.rollback(1)
        _assert_state(m, vocab, rec[k - 1], f"{vocab.name}: back to step {k - 1}")


def test_rollback_huge_or_negative_count_raises_value_error(vocab):
    """Counts that do not fit in 32 bits are still 'more than accepted'."""
    compiled = vocab.compile(CASES["arith"].ebnf)
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string("1+2")
    before = fill(m, vocab.vocab_size)
    for bad in (-1, -(2**31), 2**31 - 1, 2**31 + 5, 2**40, -(2**40)):
        with pytest.raises(ValueError):
            m.rollback(bad)
    assert m.num_accepted_steps == 1
    assert np.array_equal(fill(m, vocab.vocab_size), before)
