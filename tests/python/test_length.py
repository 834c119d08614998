"""``Length(body, unit, min, max)``: the strings of ``body`` made of min..max units
(a pattern under minLength/maxLength, the unit one JSON character), kept by the
core as a count in the parser item rather than the product written out as states.

Oracles: over every string of a small alphabet up to a length, the grammar accepts
exactly the strings Python's ``re`` matches with an allowed count, and accepts a
prefix exactly when some completion is allowed -- no dead ends, near either bound,
also inside a character's bytes -- where "some completion" is searched over the
front-end's own regex automaton (Python, not the core); the JSON Schema front-end's
use of it agrees with the ``jsonschema`` validator.  The mask oracle and random walks on real tokenizers run
on the "length" grammar of ``vocabs.CASES``."""

from __future__ import annotations

import functools
import itertools
import json
import re
import time
from pathlib import Path

import jsonschema
import pytest

import xg2_plugin as xgr
from xg2_plugin import GrammarError, LimitExceededError
from xg2_plugin import json_schema_dfa as D
from xg2_plugin import json_schema_regex as R
from xg2_plugin.json_schema import json_schema_to_ebnf

INFO = xgr.TokenizerInfo([bytes([i]) for i in range(256)])
COMPILER = xgr.GrammarCompiler(INFO, cache_enabled=False)
CHAR = r"[\u0000-\U0010ffff]"

WORDS = 's0 ::= [a-zé] s1\ns1 ::= [a-zé] s1 | "-" s2\ns2 ::= [0-9] s2 | ""\n'  # [a-zé]+-[0-9]*
PAIRS = 's0 ::= "a" s1\ns1 ::= "b" s2\ns2 ::= "a" s1 | ""\n'  # (ab)+: even counts only
FIXED = 's0 ::= [0-9] [0-9] [0-9] "-" [0-9] [0-9] s1 | "x" s1\ns1 ::= "é" s1 | ""\n'
# After the first byte of "é" (C3 A9) or "è" (C3 A8) the counts to the end are 1 or 6:
# every whole character's state is an interval, the state inside one is not.
INSIDE = 's0 ::= "é" | "è" "bbbb" | "a" ("b" | "bb" | "bbb")\n'

CASES = [  # (rules, regex, min, max, alphabet, longest string tried)
    (WORDS, r"[a-zé]+-[0-9]*", 3, 4, "ab-0é", 5),
    (WORDS, r"[a-zé]+-[0-9]*", 4, None, "a-0é", 6),
    (WORDS, r"[a-zé]+-[0-9]*", 0, 2, "a-0", 4),
    (PAIRS, r"(ab)+", 3, 7, "abc", 8),
    (PAIRS, r"(ab)+", 5, None, "ab", 9),
    (FIXED, r"([0-9]{3}-[0-9]{2}|x)é*", 2, 7, "0-xé", 7),
    (INSIDE, r"é|èbbbb|a(b|bb|bbb)", 3, 3, "éèab", 5),
]


def _viable(pattern: str, lo: int, hi):
    """Whether a string can be completed to one of the pattern with lo..hi
    characters: the counts reachable to acceptance from the automaton's state."""
    dfa = D.DFA.from_ir(R.parse_pattern("^(?:" + pattern + ")$")).minimized()

    @functools.lru_cache(maxsize=None)
    def counts(q: int, limit: int) -> frozenset:
        here = {0} if dfa.accept[q] else set()
        if limit:
            for _, t in dfa.trans[q]:
                here |= {k + 1 for k in counts(t, limit - 1)}
        return frozenset(here)

    def viable(s: str) -> bool:
        q = 0
        for ch in s:
            q = next((t for cs, t in dfa.trans[q] if R.cs_contains(cs, ord(ch))), None)
            if q is None:
                return False
        limit = hi - len(s) if hi is not None else max(lo - len(s), 0) + len(dfa.trans)
        return limit >= 0 and any(len(s) + k >= lo for k in counts(q, limit))

    return viable


def _grammar(rules: str, lo: int, hi) -> xgr.Grammar:
    count = f"{lo}" if hi is None else f"{lo}, {hi}"
    return xgr.Grammar.from_ebnf(f'root ::= "<" Length(s0, {CHAR}, {count}) ">"\n' + rules)


def _accepts(compiled, text: str, complete: bool) -> bool:
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return m.accept_string(text) and (m.is_completed() or not complete)


@pytest.mark.parametrize("rules, pattern, lo, hi, alphabet, longest", CASES)
def test_language_and_prefixes(rules, pattern, lo, hi, alphabet, longest):
    compiled = COMPILER.compile_grammar(_grammar(rules, lo, hi))
    rx = re.compile(pattern)

    def ok(s):
        return rx.fullmatch(s) is not None and len(s) >= lo and (hi is None or len(s) <= hi)

    viable = _viable(pattern, lo, hi)
    for n in range(longest + 1):
        for chars in itertools.product(alphabet, repeat=n):
            s = "".join(chars)
            assert _accepts(compiled, "<" + s + ">", True) == ok(s), s
            assert _accepts(compiled, "<" + s, False) == viable(s), s
            for k in range(1, len(s[-1:].encode())):  # inside the last character's bytes
                assert _accepts(compiled, ("<" + s).encode()[:-k], False) == viable(s), (s, k)


def test_counts_are_kept_not_spelled_out():
    """A pattern whose counts are intervals keeps one automaton whatever the bound;
    one with gaps ((ab)+) has the count written out, growing with it."""
    small, large = _grammar(WORDS, 3, 6), _grammar(WORDS, 3, 6000)
    assert small.num_states == large.num_states
    assert _grammar(PAIRS, 2, 40).num_states > _grammar(PAIRS, 2, 10).num_states + 20


def test_prints_and_parses_back():
    g = _grammar(WORDS, 3, 6)
    text = str(g)
    assert str(xgr.Grammar.from_ebnf(text)) == text  # a rule that is one Length stays that rule
    assert "Length(s0, [\\x00-\\U0010ffff], 3, 6)" in text
    assert "Length(s0, [\\x00-\\U0010ffff], 4)" in str(_grammar(WORDS, 4, None))
    again = xgr.Grammar.from_ebnf(text)
    assert again.num_states == g.num_states
    compiled = COMPILER.compile_grammar(again)
    assert _accepts(compiled, "<ab-1>", True) and not _accepts(compiled, "<ab-1234>", True)


@pytest.mark.parametrize("ebnf, message", [
    ('root ::= Length("a" | "ab", "a", 1)', "needs a body, a unit"),
    ('root ::= Length(s0, ("a" | "ab"), 1)\ns0 ::= "a"', "finite byte pattern"),
    ('root ::= Length(s0, ("<" [a-z]* ">"), 1)\ns0 ::= "<a>"', "finite byte pattern"),
    ('root ::= Length(s0, [a-z], 1)\ns0 ::= "(" s0 ")" | "x"', "regular body"),
    ('root ::= Length(s0, [a-z], 4, 2)\ns0 ::= "abc"', "maximum count 2 below its minimum 4"),
    ('root ::= Length(s0, [a-z], 4, 5)\ns0 ::= "abc" | "ab"', "matches no string"),
    ('root ::= Length(s0, [a-z], 2, 2)\ns0 ::= "a" | "abc"', "matches no string"),  # (gaps: written out)
    ('root ::= Length(s0, [ab], 0, 30000)\ns0 ::= ("ab")+', "irregular"),
    ('root ::= Length(s0, [a-z], 1\ns0 ::= "a"', "expected ')'"),
    ('root ::= "x" (= Length(s0, [a-z], 1))\ns0 ::= "a"', "lookahead"),
    ('root ::= Length(s1, [a-z], 1)\ns1 ::= Length(s0, [a-z], 1)\ns0 ::= "a"', "cannot be another Length"),
    ('root ::= Length(s1, [a-z], 1)\ns1 ::= "a" s2\ns2 ::= Length(s0, [a-z], 1)\ns0 ::= "a"', "needs a regular body"),
])
def test_bad_length_is_a_clear_error(ebnf, message):
    with pytest.raises(GrammarError, match=re.escape(message)):
        xgr.Grammar.from_ebnf(ebnf)


@pytest.mark.parametrize("ebnf, error, message", [
    ('root ::= Length(s0, [a-z(], 1)\ns0 ::= "(" s0 | [a-z]{400}', GrammarError, "needs a regular body"),
    ('root ::= Length(s0, [a-z(], 1, 30)\ns0 ::= "(" s0 | [a-z]{400}', GrammarError, "needs a regular body"),
    ((Path(__file__).parents[1] / "fuzz/regressions/native/length_body_counted_loop_conflict")
     .read_bytes().split(b"\0")[0].decode("latin-1"), LimitExceededError, "more than 20000 automaton states"),
])
def test_counted_loop_in_the_body_ends_at_once(ebnf, error, message):
    """A find of the native campaign (a slow unit): a counted loop that the body's
    automaton could not keep apart was reported as expression 0, which the linker
    then "resolved" 4,096 times (4 s) before giving up."""
    t0 = time.monotonic()
    with pytest.raises(error, match=re.escape(message)):
        xgr.Grammar.from_ebnf(ebnf)
    assert time.monotonic() - t0 < 1.0


def test_short_counted_loop_in_the_body_is_written_out():
    g = xgr.Grammar.from_ebnf('root ::= Length(s0, [a-z(], 2, 6)\ns0 ::= "(" s0 | [a-z]{3}')
    compiled = COMPILER.compile_grammar(g)
    for text, ok in [("abc", True), ("((abc", True), ("(((abc", True), ("((((abc", False), ("ab", False), ("(abcd", False)]:
        assert _accepts(compiled, text, True) == ok, text


def test_absurd_count_is_a_limit_error():
    with pytest.raises(LimitExceededError, match="exceeds the limit of 16777216"):
        xgr.Grammar.from_ebnf('root ::= Length(s0, [a-z], 1, 99999999999)\ns0 ::= "a"')


SCHEMAS = [  # (schema, values) -- a pattern with a length it does not imply
    ({"type": "string", "pattern": "^[a-z]+(-[0-9]+)*$", "minLength": 3, "maxLength": 9},
     ["ab", "abc", "a-1", "abcdefghi", "abcdefghij", "ab-12-345", "ab-12-3456", "", "a-", "ABC"]),
    ({"type": "string", "pattern": "[0-9a-f]{4}", "minLength": 10},  # searched: anything around it
     ["beef", "xxbeefxxxx", "xxbeefxxx", "é\u00e9beefé\n\"zz", "\U0001F600beef\U0001F600\U0001F600\U0001F600\U0001F600"]),
    ({"anyOf": [{"type": "string", "pattern": "^\\d{3}-\\d{4}$", "maxLength": 7},  # 8 characters: none fits
                {"type": "integer"}]},
     ["123-4567", "123-456", 5]),
    ({"type": "string", "pattern": "^(ab)+$", "maxLength": 5},  # counts with gaps: written out
     ["ab", "abab", "ababab", "a", ""]),
    ({"type": "string", "pattern": "^(https?://)?[a-z]+(\\.[a-z]+)*$", "minLength": 5, "maxLength": 12},  # as written: the core counts
     ["ab.cd", "http://ab.c", "https://abcdef", "abcd", "a.b.c", "https://a.bc", "http://a.bcde"]),
    ({"type": "string", "format": "ipv4", "minLength": 9},
     ["1.2.3.4", "10.20.3.4", "255.255.255.255", "1.2.3.400", "10.0.0.10"]),
]


@pytest.mark.parametrize("schema, values", SCHEMAS)
def test_schema_lengths_agree_with_validator(schema, values):
    ebnf = json_schema_to_ebnf(json.dumps(schema), any_whitespace=False)
    compiled = COMPILER.compile_grammar(ebnf)
    for v in values:
        for text in (json.dumps(v), json.dumps(v, ensure_ascii=False)):
            expected = jsonschema.Draft202012Validator(
                schema, format_checker=jsonschema.FormatChecker()).is_valid(v)
            assert _accepts(compiled, text, True) == expected, (schema, text)


def test_front_end_counts_with_length_only_where_it_keeps():
    def ebnf(**kw):
        return json_schema_to_ebnf(json.dumps({"type": "string", **kw}))
    assert "Length(" in ebnf(pattern="^[a-z]+(-[0-9]+)*$", maxLength=1024)
    assert "Length(" in ebnf(pattern="[0-9a-f]{24}", minLength=35)
    assert "Length(" not in ebnf(pattern="^[a-z]{2,5}$", maxLength=9)  # implied
    # gaps: the core writes the count out (a pattern of plain repetitions goes to the
    # core as it is; one with a counted repetition is intersected here, as a product)
    assert "Length(" in ebnf(pattern="^(ab)+$", maxLength=9)
    assert "Length(" not in ebnf(pattern="^(ab){10,20}$", maxLength=30)
    big = ebnf(pattern="^[\\w /-]+\\.[0-9a-zA-Z]+$", minLength=1, maxLength=1024)
    assert len(big) < 20000  # the product written as states was 1,024 times the pattern
