"""``StringExcept(any, one, escape, "word", ...)``: the core's trie automaton for
the keys a JSON object may add besides its declared names.

Oracles: a key spelled as json.dumps spells it is accepted exactly when it is not
a word; every spelling (canonical or not) is accepted exactly when the front-end's
own trie, written out as plain EBNF (what it emits for words the core's trie does
not take), accepts it -- and the core's automaton is no larger (its `any` loop and
`one` character share one expansion of the character, which the written-out trie
keeps apart, and the minimiser does not merge states across cycles)."""

from __future__ import annotations

import json
import random
import re

import pytest

import xg2_plugin as xgr
from xg2_plugin import GrammarError
from xg2_plugin import json_schema_dfa as D
from xg2_plugin import json_schema_regex as R

INFO = xgr.TokenizerInfo([bytes([i]) for i in range(256)])
COMPILER = xgr.GrammarCompiler(INFO, cache_enabled=False)
HELPERS = (f"json-char ::= {R.json_char()}\njson-char-nonprint ::= {R.canonical_escapes()}\n"
           "json-chars ::= json-char*\n")
ALPHABET = "abcAB _-0~!{"


def _key_grammars(words):
    """(the core's trie, the front-end's written-out trie) for keys but ``words``."""
    lits = ", ".join(f'"{w}"' for w in words)
    core = f'root ::= "\\"" StringExcept(json-chars, json-char, json-char-nonprint, {lits}) "\\""\n' + HELPERS
    text, _ = D._string_except(tuple(sorted(set(words))), "json-chars", "json-char", "json-char-nonprint")
    written = f'root ::= "\\"" {text} "\\""\n' + HELPERS
    return xgr.Grammar.from_ebnf(core), xgr.Grammar.from_ebnf(written)


def _accepts(compiled, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return m.accept_string(text) and m.is_completed()


def _candidates(words, rng):
    keys = list(words) + [w + c for w in words for c in "ab\u00e9\n"] + [w[:-1] for w in words if w]
    keys += ["".join(rng.choice(ALPHABET + "\u00e9\"\\") for _ in range(rng.randint(0, 6))) for _ in range(40)]
    texts = [json.dumps(k) for k in keys] + [json.dumps(k, ensure_ascii=False) for k in keys]
    # other spellings: escaped printable characters, \/, upper-case hex
    texts += ['"\\u0061"', '"a\\u0062"', '"\\/"', '"x\\/y"', '"\\u00E9"', '"ab\\u0063"', '"\\u0041B"']
    return keys, texts


@pytest.mark.parametrize("seed", range(4))
def test_same_language_as_the_written_out_trie(seed):
    rng = random.Random(seed)
    for _ in range(25):
        words = sorted({"".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 5)))
                        for _ in range(rng.randint(1, 8))})
        core, written = _key_grammars(words)
        assert core.num_states <= written.num_states, words
        c_core, c_written = COMPILER.compile_grammar(core), COMPILER.compile_grammar(written)
        keys, texts = _candidates(words, rng)
        for k in keys:  # canonical spellings: every key but the words
            assert _accepts(c_core, json.dumps(k)) == (k not in words), (words, k)
        for t in texts:
            assert _accepts(c_core, t) == _accepts(c_written, t), (words, t)


def test_prints_and_parses_back():
    g = xgr.Grammar.from_ebnf('root ::= "\\"" StringExcept(x*, x, [\\x80-\\xff], "b", "a", "ab", "a", "") "\\""\n'
                              'x ::= [a-z]')
    text = str(g)
    assert 'StringExcept(x*, x, [\\u0080-\\u00ff], "", "a", "ab", "b")' in text  # sorted, distinct
    assert xgr.Grammar.from_ebnf(text).num_states == g.num_states


@pytest.mark.parametrize("ebnf, message", [
    ('root ::= StringExcept("a", "b", "c")', "at least one word"),
    ('root ::= StringExcept("a", "b" "c", "q")', "three expressions"),
    ('root ::= StringExcept("a", "b", "c", "q\\\\")', "printable ASCII other than quote and backslash"),
    ('root ::= StringExcept("a", "b", "c", "\u00e9")', "printable ASCII other than quote and backslash"),
    ('root ::= StringExcept("a", "b", "c", x)', "expected a word"),
    ('root ::= StringExcept("a", "b", "c", "x"', "expected ',' or ')'"),
])
def test_bad_arguments_are_grammar_errors(ebnf, message):
    with pytest.raises(GrammarError, match=re.escape(message)):
        xgr.Grammar.from_ebnf(ebnf)


def test_word_count_is_bounded():
    words = ", ".join(f'"w{i}"' for i in range(70000))
    with pytest.raises(xgr.LimitExceededError, match="StringExcept"):
        xgr.Grammar.from_ebnf(f'root ::= StringExcept("a", "b", "c", {words})')


def test_front_end_uses_it_only_for_plain_names():
    from xg2_plugin.json_schema import json_schema_to_ebnf

    plain = json_schema_to_ebnf({"type": "object", "properties": {"name": {}, "a-b": {}}}, strict_mode=False)
    assert 'StringExcept(json-chars, json-char, json-char-nonprint, "a-b", "name")' in plain
    quoted = json_schema_to_ebnf({"type": "object", "properties": {'say "hi"': {}}}, strict_mode=False)
    assert "StringExcept" not in quoted  # a quote in a name: the front-end writes the trie out
    g = COMPILER.compile_json_schema({"type": "object", "properties": {"name": {"type": "integer"}}},
                                     strict_mode=False)
    assert _accepts(g, '{"name": 1, "other": "x"}') and not _accepts(g, '{"name": 1, "name": "x"}')
