"""The JSON Schema front-end's symbolic string automata (``json_schema_dfa.DFA``):
minimization keeps the language, against Python's ``re`` and the unminimized
automaton, on random strings over each case's alphabet."""

from __future__ import annotations

import random
import re

import pytest

from xg2_plugin import json_schema_dfa as D
from xg2_plugin import json_schema_regex as R

# (pattern, minLength, maxLength, alphabet): searched patterns and length bounds,
# whose products are what the front-end writes one rule per state.
CASES = [
    (r"\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{6}", 10, None, "0123456789abcdefgX-"),
    (r"^[a-z]+(-[a-z]+)*$", 3, 12, "abz-_"),
    (r"ab|ba", 0, 5, "abc"),
    (r"^(a|b)*a(a|b){3}$", 0, None, "ab"),  # the subset construction's classic blow-up
    (r"x{70}", 0, None, "xy"),  # a chain longer than the refinement rounds: kept as it is
]


def _dfa(pattern, lo, hi):
    d = D.DFA.from_ir(R.parse_pattern(pattern))
    if lo or hi is not None:
        d = d.intersect(D.DFA.from_ir(R.n_rep(R.n_set(R.ALL), lo, hi)))
    return d


def _strings(alphabet, rng, n=600):
    out = [""]
    for _ in range(n):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))))
    return out


@pytest.mark.parametrize("case", range(len(CASES)))
def test_minimized_keeps_the_language(case):
    pattern, lo, hi, alphabet = CASES[case]
    d = _dfa(pattern, lo, hi)
    m = d.minimized()
    assert len(m.trans) <= len(d.trim().trans)
    assert len(m.minimized().trans) == len(m.trans)  # nothing left to merge
    rng = random.Random(case)
    py = re.compile(pattern)
    for s in _strings(alphabet, rng) + ["x" * 70, "1-" + "a" * 10 + "-abcdef"]:
        want = py.search(s) is not None and len(s) >= lo and (hi is None or len(s) <= hi)
        assert d.accepts(s) == want, s
        assert m.accepts(s) == want, s


def test_minimized_shrinks_searched_pattern_products():
    # The unanchored pattern's subset automaton repeats states (303 for 99 before
    # one state stood for every subset past the trailing `.*`, 147 now); its product
    # with a length bound repeats them per length.
    search = D.DFA.from_ir(R.parse_pattern(r"\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{24}"))
    assert len(search.minimized().trans) * 1.4 < len(search.trans) <= 150
    product = _dfa(r"\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{24}", 35, None)
    assert len(product.minimized().trans) * 2 < len(product.trans)
    # the classic blow-up is minimal already: 2^4 states
    assert len(_dfa(r"^(a|b)*a(a|b){3}$", 0, None).minimized().trans) == 16


@pytest.mark.parametrize("lo,hi", [(0, None), (1, None), (35, None), (0, 0), (1, 1), (3, 10), (0, 64), (1, 100),
                                   (64, 200), (1, 1024)])
def test_length_dfa_is_the_chain_the_subset_construction_builds(lo, hi):
    # Built directly, the automaton of "lo to hi characters" must be the one the
    # generic construction gives (same states in the same order), only faster.
    built = D.DFA.from_ir(R.n_rep(R.n_set(R.ALL), lo, hi)).minimized()
    direct = D.length_dfa(lo, hi)
    assert (direct.trans, direct.accept) == (built.trans, built.accept)
    assert direct.minimized() is direct
    for n in (0, lo, lo + 1, 2 * lo + 3) + (() if hi is None else (hi, hi + 1)):
        assert direct.accepts("é" * n) == (n >= lo and (hi is None or n <= hi))


def _subset_dfa(ir):
    """The generic path (Thompson NFA, subset construction), bypassing the
    shift-and construction DFA.from_ir takes for class sequences."""
    nfa = D._NFA()
    start = nfa.new()
    end = nfa.end = nfa.new()
    nfa.build(ir, start, end)
    return nfa.determinize(start, end)


def _same_language(a, b):
    return a.intersect(b.complement()).is_empty() and b.intersect(a.complement()).is_empty()


def _random_linear_pattern(rng):
    classes = ["a", "b", "[ab]", "[a-c]", "[^a]", ".", "[0-9a-f]", "c"]
    body = "".join(rng.choice(classes) + rng.choice(["", "", "{2}", "{3}"]) for _ in range(rng.randint(1, 5)))
    return rng.choice(["", "^"]) + body + rng.choice(["", "$"])


def test_linear_patterns_take_the_shift_and_construction_with_the_same_language():
    # Oracle: the subset construction of the same IR (exact language equality
    # through products with complements) and Python's re on random strings; and
    # where the shift-and automaton says it is minimal, minimizing the subset
    # automaton gives no fewer states.
    rng = random.Random(23)
    seen_linear = seen_settled = 0
    patterns = ["[0-9a-f]{32}", "^x-", "abc$", "^a[bc]d$", "aab", "a.b", "[ab]a{3}$"]
    patterns += [_random_linear_pattern(rng) for _ in range(150)]
    for pattern in patterns:
        ir = R.parse_pattern(pattern)
        linear = D._linear_dfa(ir)
        assert linear is not None, pattern
        seen_linear += 1
        subset = _subset_dfa(ir)
        assert _same_language(linear, subset), pattern
        if linear.settled:
            seen_settled += 1
            assert len(linear.trans) == len(subset.minimized().trans), pattern
        assert D.DFA.from_ir(ir).trans == linear.trans
        py = re.compile(pattern)
        for s in _strings("abcdx0f", rng, 60):
            assert linear.accepts(s) == (py.search(s) is not None), (pattern, s)
    assert seen_settled > 20 and seen_linear == len(patterns)


@pytest.mark.parametrize("pattern", ["a|bc", "a+", "^a*$", "a?b", "", "^$", "a{2,3}"])
def test_other_patterns_keep_the_subset_construction(pattern):
    try:
        ir = R.parse_pattern(pattern)
    except R.PatternError:
        return
    assert D._linear_dfa(ir) is None


def test_searched_alternation_shares_one_leading_and_trailing_any():
    # `w1|w2|...` searched is `.*(w1|w2|...).*`: one `.*` around the alternation, not
    # one per word (ten 8-letter words went over the state limit; now 73 states)
    import re as _re

    words = ["alphabet", "bravo123", "charlie9", "deltaxyz", "echoecho", "foxtrot1", "golfgolf", "hotelabc",
             "indiaaaa", "julietxx"]
    pattern = "|".join(words)
    d = D.DFA.from_ir(R.parse_pattern(pattern))
    assert len(d.trans) <= 80
    rng = random.Random(11)
    samples = [rng.choice(words)[:k] + rng.choice(words) + "zz" for k in range(8)] + ["", "alphabe", "xbravo12"]
    samples += ["".join(rng.choice("abcdehilopt123") for _ in range(rng.randint(0, 30))) for _ in range(300)]
    for text in samples:
        assert d.accepts(text) == bool(_re.search(pattern, text)), text
    # mixed anchors keep their own `.*`: `^a|b` and `a$|b`
    for pattern in ("^ab|cd", "ab$|cd", "^ab$|cd", "^(ab|cd)"):
        d = D.DFA.from_ir(R.parse_pattern(pattern))
        for text in ["ab", "xab", "abx", "cd", "xcdx", "x", "", "abcd", "cdab"]:
            assert d.accepts(text) == bool(_re.search(pattern, text)), (pattern, text)
