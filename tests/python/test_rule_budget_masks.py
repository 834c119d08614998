"""A rule's max_chars in masks when the rule begins inside a token.

A find of the structural-tag fuzz campaign (tests/fuzz/regressions/structural_tag/
max_chars_rule_entered_inside_token): the mask cache walks a called rule as a plain
automaton, which knows no budget, so a token that enters a ``[max_chars=N]`` rule after
its first bytes and then takes more than N code points was allowed by the mask and
refused by accept_token (DeepSeek: `<` + a 4-character word under
``t[max_chars=3]``).  Checked on the DeepSeek vocabulary: the mask bit of every token
that starts with the byte before the rule, and of a random sample, equals whether a
fork of the matcher accepts it -- at the start and after a step into the rule.
"""

import random

import pytest

import xg2_plugin as xgr
from vocabs import bits_of_row, fill

GRAMMARS = [
    ('root ::= "<" t ">"\nt[max_chars=3] ::= [^<>]*', b"<"),
    ('root ::= "x"* " " t\nt[max_chars=2] ::= [a-z ]*', b" "),
    ('root ::= " " t\nt[max_chars=1] ::= TagDispatch(loop_after_dispatch=false, excludes=("</b>"))', b" "),
    ('root ::= ("<" t ">")+\nt[max_chars=5] ::= [a-z]* | "(" [a-z]* ")"', b"<"),
    ('root ::= "<" t\nt[max_chars=200] ::= [^<>]*', b"<"),  # (a budget no token reaches: the cached walk)
]


def _check(m, v, lead: bytes, rng) -> list:
    bits = bits_of_row(fill(m, v.vocab_size), v.vocab_size)
    ids = [t for t, b in enumerate(v.token_bytes) if b and b.startswith(lead)]
    ids += rng.sample(range(v.vocab_size), 300)
    wrong = [(t, v.token_bytes[t], bool(bits[t])) for t in ids if m.fork().accept_token(t) != bool(bits[t])]
    assert not wrong, wrong[:10]
    return [t for t in ids if bits[t]]


@pytest.mark.parametrize("k", range(len(GRAMMARS)))
def test_max_chars_rule_entered_inside_a_token(deepseek, k):
    v = deepseek
    text, lead = GRAMMARS[k]
    m = xgr.GrammarMatcher(v.compiler.compile_grammar(text))
    rng = random.Random(k)
    allowed = _check(m, v, lead, rng)
    step = next(t for t in allowed if v.token_bytes[t] == lead)  # into the rule, then its budget is live
    assert m.accept_token(step)
    _check(m, v, lead, rng)
