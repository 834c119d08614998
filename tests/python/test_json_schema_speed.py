"""Compile-speed fixes of the JSON Schema front-end (issue 23's ordinary schemas),
each checked by a deterministic measure (states built, rounds saved) or against an
oracle, never by a timing: the constant string grammars, the digit-range grammars,
the search pattern's subset construction and the small-DFA minimization."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

import xg2_plugin as xgr
from xg2_plugin import json_schema_formats as F
from xg2_plugin import json_schema_presets as P
from xg2_plugin import json_schema_dfa as D
from xg2_plugin import json_schema_regex as R
from xg2_plugin.json_schema import json_schema_to_ebnf
from xg2_plugin.compiler import CompiledGrammar
from xg2_plugin.testing import _is_grammar_accept_string

_BYTES = []


def _byte_info():
    """256 one-byte tokens: enough to drive accept_string."""
    if not _BYTES:
        _BYTES.append(xgr.TokenizerInfo([bytes([b]) for b in range(256)]))
    return _BYTES[0]


def test_written_out_string_grammars_are_what_the_encoder_builds():
    assert R.json_char() == R.encode_set(R.ALL)
    assert R.canonical_escapes() == R.encode_set_canonical(R.cs_diff(R.ALL, R.PRINTABLE))


def _random_ranges(rng, top):
    cuts = sorted(rng.sample(range(top), min(top, 2 * rng.randint(1, 4))))
    if len(cuts) % 2:
        cuts.pop()
    return tuple((cuts[i], cuts[i + 1]) for i in range(0, len(cuts), 2))


@pytest.mark.parametrize("base,width", [(10, 3), (16, 2), (10, 1), (16, 1)])
def test_digits_set_matches_exactly_the_values_in_its_ranges(base, width):
    # oracle: every fixed-width digit string, in every case, against the ranges
    rng = random.Random(base * 10 + width)
    top = base**width
    digits = "0123456789abcdef"[:base]
    for _ in range(4):
        ranges = _random_ranges(rng, top)
        if not ranges:
            continue
        grammar = xgr.Grammar.from_ebnf("root ::= " + R.digits_set(ranges, width, base))
        compiled = CompiledGrammar(grammar, _byte_info())
        for v in range(top):
            text = ""
            for _ in range(width):
                text = digits[v % base] + text
                v //= base
            for spelled in {text, text.upper()}:
                m = xgr.GrammarMatcher(compiled)
                got = m.accept_string(spelled) and m.is_completed()
                assert got == any(lo <= int(text, base) <= hi for lo, hi in ranges), (ranges, spelled)


def test_search_pattern_keeps_one_state_past_a_match():
    # `.*[0-9a-f]{32}.*`: the run of hex digits so far (32 states) and one state
    # for "matched"; the subset construction used to track the run on after a
    # match too (67 states, minimized back to 33).  Built by the shift-and
    # construction, minimal as built.
    ir = R.parse_pattern("[0-9a-f]{32}")
    d = D.DFA.from_ir(ir)
    assert len(d.trans) == 33 and d.settled
    m = d.minimized()
    assert m is d and sum(m.accept) == 1
    s = len(m.trans) - 1  # breadth first: the accepting state is reached last
    assert m.accept[s] and m.trans[s] == [(R.ALL, s)]


def _accepts(dfa, text):
    s = 0
    for ch in text:
        for cs, t in dfa.trans[s]:
            if R.cs_contains(cs, ord(ch)):
                s = t
                break
        else:
            return False
    return dfa.accept[s]


@pytest.mark.parametrize("pattern", ["[0-9a-f]{32}", "ab|^c", "x(y|.*)z", "^a.*b$|q"])
def test_search_pattern_dfa_decides_as_re_search(pattern):
    import re

    d = D.DFA.from_ir(R.parse_pattern(pattern)).minimized()
    rng = random.Random(7)
    alphabet = "abcqxyz0123456789f"
    samples = ["", "0123456789abcdef0123456789abcdef", "-0123456789abcdef0123456789abcdef-", "axyz"]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(400)]
    for text in samples:
        assert _accepts(d, text) == bool(re.search(pattern, text)), text


def test_minimization_finishes_a_long_chain_that_moore_rounds_gave_up_on():
    # a path pattern whose distinguishing suffixes are longer than the rounds
    # Moore's refinement is allowed: left at 151 states before, 72 now
    pattern = r"/api/v1/user_identities/\d+/programs/\d+/applicants_by_cas_id/\d+/designation"
    m = D.DFA.from_ir(R.parse_pattern(pattern)).minimized()
    assert len(m.trans) == 72
    for text in ["/api/v1/user_identities/1/programs/22/applicants_by_cas_id/3/designation",
                 "x/api/v1/user_identities/1/programs/22/applicants_by_cas_id/3/designationy",
                 "/api/v1/user_identities//programs/22/applicants_by_cas_id/3/designation"]:
        import re

        assert _accepts(m, text) == bool(re.search(pattern, text))


def test_hopcroft_gives_the_partition_of_moore_rounds():
    rng = random.Random(5)

    def canon(cls):
        seen: dict = {}
        return [seen.setdefault(int(c), len(seen)) for c in cls]

    compared = 0
    for _ in range(500):
        n, width = rng.randint(1, 30), rng.randint(1, 4)
        rows = [[rng.randrange(n + 1) if rng.random() < 0.8 else n for _ in range(width)] for _ in range(n)]
        for s in range(n):  # repeated rows: states that merge
            if rng.random() < 0.5:
                rows[s] = list(rows[rng.randrange(n)])
        rows.append([n] * width)  # the dead state
        start = [rng.randint(0, 1) for _ in range(n)] + [2]
        cls, count = D._hopcroft([list(r) for r in rows], list(start))
        moore = D._moore(np.array(rows, dtype=np.int64), np.array(start, dtype=np.int64))
        if moore is None:
            continue
        compared += 1
        assert canon(cls) == canon(moore[0]) and count == moore[1]
    assert compared > 400


def test_unanchored_key_pattern_schema_is_small():
    # issue 23's ordinary schema: its key automaton stays the minimal one (33 states,
    # a rule each), and the value tail its 32 unmatched states share is one rule
    # (613 automaton states when each state spelled it out)
    schema = {"type": "object", "patternProperties": {"[0-9a-f]{32}": {"type": "null"}}}
    g = xgr.Grammar.from_json_schema(json.dumps(schema), strict_mode=False)
    assert g.num_rules <= 41 and g.num_states <= 500


def test_budget_without_memory_limit_survives_frees_of_older_blocks():
    # A Grammar collected inside a budget frees blocks allocated before it: the
    # net count goes negative, and the unlimited cap's headroom (INT64_MAX - used)
    # overflowed: "compile memory limit of -1 bytes exceeded" on the next compile.
    from xg2_plugin import _budget

    grammars = [xgr.Grammar.from_ebnf('root ::= "a" [b-z]* "c" (x | "d")\nx ::= "x"') for _ in range(20)]
    with _budget.compile_budget(time_limit_ms=None, memory_limit_bytes=None):
        del grammars[:]
        g = xgr.Grammar.from_ebnf('root ::= "q"')
    assert g.num_rules == 1
    with _budget.compile_budget(time_limit_ms=None, memory_limit_bytes=1 << 30):
        grammars = [xgr.Grammar.from_ebnf('root ::= "a"') for _ in range(5)]
        assert len(grammars) == 5


def test_written_out_formats_and_numeric_ranges_are_current():
    """json_schema_presets is generate()'s output for today's format patterns and
    number grammars (a change to either must regenerate it)."""

    with open(P.__file__, encoding="utf-8") as f:
        assert f.read() == P.generate()
    assert set(P.FORMATS) == set(F.FORMAT_PATTERNS)
    assert len(P.NUMBERS) == 2 * len(F.NUMERIC_FORMATS)


def _cold_ebnf(schema):
    R.parse_pattern.cache_clear()
    F._NUMBER_CACHE.clear()
    return json_schema_to_ebnf(json.dumps(schema), any_whitespace=True, strict_mode=False)


@pytest.mark.parametrize("fmt", sorted(F.FORMAT_PATTERNS))
def test_a_string_format_is_not_parsed_again(fmt):
    """A plain format string takes the written-out grammar: no pattern is parsed
    (a cold date-time was 2 ms of front-end), and the EBNF is the general case's,
    which a length bound the format does not imply still takes."""
    lo, hi = R.length_bounds(R.parse_pattern(F.FORMAT_PATTERNS[fmt]))
    fast = _cold_ebnf({"type": ["string", "null"], "format": fmt})
    assert R.parse_pattern.cache_info().currsize == 0
    if hi is not None:  # a bound the format implies: the same grammar
        assert _cold_ebnf({"type": ["string", "null"], "format": fmt, "maxLength": hi}) == fast
        assert R.parse_pattern.cache_info().currsize == 0
    _cold_ebnf({"type": ["string", "null"], "format": fmt, "minLength": lo + 1})  # one it does not
    assert R.parse_pattern.cache_info().currsize == 1


@pytest.mark.parametrize("fmt", sorted(F.NUMERIC_FORMATS))
def test_a_numeric_format_is_not_built_again(fmt):
    """A numeric format takes its written-out rules (its minimal automaton,
    minimal_rules.py), which accept exactly what the range built afresh does:
    the two grammars agree on every text of a sample of the format's edges,
    number spellings and random strings over the number characters."""
    fast = _cold_ebnf({"type": "integer", "format": fmt})
    assert not F._NUMBER_CACHE  # (a preset hit stores nothing: nothing was built)
    lo, hi = F.NUMERIC_FORMATS[fmt]
    top, rules = P.NUMBERS[F.number_cache_key(lo, False, hi, False, True, None, None, ())]
    assert all(f"{name} ::= {body}" in fast.splitlines() for name, body, _ in rules)
    built = F._number_expr(lo, False, hi, False, True, None, lambda n, b: None, "num", None, ())
    g_built = xgr.Grammar.from_ebnf(f"root ::= {built}\n")
    g_rules = xgr.Grammar.from_ebnf(f"root ::= {top}\n" + "".join(f"{n} ::= {b}\n" for n, b, _ in rules))
    rng = random.Random(fmt)
    values = [lo, hi, lo - 1, hi + 1, 0, -1, 1, 10**16, 2**53, 2**53 + 1, hi // 10, lo // 7]
    values += [rng.randint(lo - 10, hi + 10) for _ in range(300)]
    texts = [t for v in values for t in (str(v), repr(float(v)), f"{v}.0", f"{v}.00", f"{float(v):e}")]
    texts += ["".join(rng.choice("0123456789.eE+-") for _ in range(rng.randint(1, 24))) for _ in range(2000)]
    texts += ["-0", "-0.0", "0.0", "1e16", "1E+16", "1e016", "9.2e18", "1.5", "-", ""]
    accepted = 0
    for t in texts:
        verdict = _is_grammar_accept_string(g_built, t)
        assert _is_grammar_accept_string(g_rules, t) == verdict, t
        accepted += verdict
    assert accepted > len(values)  # (both accept the format's numbers: not two empty languages)


def test_front_end_rule_names_avoid_the_written_out_ranges_prefix():
    """The numeric formats' rules are named xg2-...: a hint of that form (a
    future hint taken from a tool or definition name) gets another name, so
    that neither rule could replace the other."""
    from xg2_plugin.json_schema_common import _name_base

    for hint in ("xg2-int64-0", "xg2-uint8-text-3", P.RESERVED_PREFIX):
        assert not _name_base(hint).startswith(P.RESERVED_PREFIX)
    assert _name_base("root-value-xg2-int64-0") == "root-value-xg2-int64-0"


def test_a_key_automatons_other_characters_are_one_rule():
    """An unanchored key pattern's states each read 'any other character' (~430
    characters of EBNF): one shared rule, not a copy per state (18.7 KB of EBNF
    for 33 states, half the core's parse), which the core still expands into each
    state: the same automaton as the text written out in every state."""
    schema = {"type": "object", "patternProperties": {"[0-9a-f]{32}": {"type": "null"}}}
    ebnf = json_schema_to_ebnf(json.dumps(schema), any_whitespace=True, strict_mode=False)
    rules = dict(line.split(" ::= ", 1) for line in ebnf.splitlines())
    shared = [n for n in rules if re.fullmatch(r"key\d*-c\d+", n)]
    assert len(shared) == 1 and len(rules[shared[0]]) > 400
    assert len(ebnf) < 6000
    written_out = "\n".join(f"{n} ::= {b}".replace(f"{shared[0]} ", f"({rules[shared[0]]}) ")
                            for n, b in rules.items() if n != shared[0])
    assert shared[0] not in written_out
    g, g_text = xgr.Grammar.from_ebnf(ebnf), xgr.Grammar.from_ebnf(written_out)
    assert g.num_states == g_text.num_states


# The rule-name pattern the front-end used before the core read names for it:
# literals and classes skipped whole, a lone quote or bracket one character.
_NAME_ORACLE = re.compile(
    r'[^A-Za-z_"\[]*(?:(?:"[^"\\]*(?:\\.[^"\\]*)*"|\[[^\]\\]*(?:\\.[^\]\\]*)*\]|["\[])[^A-Za-z_"\[]*)*'
    r'(?:([A-Za-z_][A-Za-z0-9_.-]*)|\Z)')


def _oracle_names(body):
    names = {}
    m = _NAME_ORACLE.match(body)
    while m.group(1):
        names[m.group(1)] = None
        m = _NAME_ORACLE.match(body, m.end())
    return tuple(names)


def test_rule_names_read_by_the_core_match_the_pattern():
    from xg2_plugin.json_schema_common import _rule_refs

    schema = {"type": "object", "properties": {
        "a": {"type": "string", "format": "date-time"}, "b": {"enum": ["x\"y", "[z]", "\\", "é"]},
        "c": {"type": "array", "items": {"$ref": "#/$defs/n"}}, "d": {"type": "integer", "minimum": -7}},
        "$defs": {"n": {"type": ["object", "null"], "additionalProperties": {"$ref": "#/$defs/n"}}}}
    bodies = [line.split(" ::= ", 1)[1] for line in json_schema_to_ebnf(schema).splitlines()]
    rng = random.Random(5)
    alphabet = 'ab_-.1 "[]\\\n(|)*é\ud800x'
    bodies += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16))) for _ in range(5000)]
    seen = set()
    for body in bodies:
        names = _rule_refs.__wrapped__(body)
        assert names == _oracle_names(body), repr(body)
        seen.update(names)
    assert {"a", "b_", "x"} & seen and len(seen) > 20  # names were found, not only empties


def test_rule_name_bases_match_the_pattern_alone():
    from xg2_plugin.json_schema_common import _name_base

    junk = re.compile(r"[^A-Za-z0-9_.-]+")

    def oracle(hint):
        base = junk.sub("-", hint).strip("-") or "r"
        return base if ("A" <= base[0] <= "Z" or "a" <= base[0] <= "z" or base[0] == "_") else "r-" + base

    rng = random.Random(3)
    alphabet = "aZ09_.-/ é~\u00b2\u0663\n"
    hints = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(5000)]
    for hint in hints + ["root-value", "-x-", "", "\u00b2", "a" * 70]:
        assert _name_base.__wrapped__(hint) == oracle(hint)[:60], repr(hint)


def test_a_document_without_scopes_converts_as_with_its_index_walked():
    from xg2_plugin import json_schema_fragments as FR
    from xg2_plugin.json_schema import _check_depth, _Converter

    node = {"type": "object", "properties": {"id": {"type": "string"}, "next": {"$ref": "#/$defs/n"}},
            "required": ["id"]}
    cases = [
        ({"$defs": {"n": node}, "$ref": "#/$defs/n"}, False),
        ({"definitions": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"$ref": "#/definitions/a"}}},
          "anyOf": [{"$ref": "#/definitions/b"}, {"enum": [{"$id": "x"}]}]}, True),  # (an enum value: conservative)
        ({"$defs": {"n": node, "m": {"$id": "http://x.test/m", "type": "null"}}, "$ref": "#/$defs/n"}, True),
        ({"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://x.test/r",
          "$defs": {"n": node}, "properties": {"a": {"$ref": "#/$defs/n"}}}, True),
        ({"$defs": {"s": {"$anchor": "s", "type": "string"}}, "items": {"$ref": "#s"}, "type": "array"}, True),
    ]
    for schema, scoped in cases:
        schema = json.loads(json.dumps(schema))
        assert _check_depth(schema) is scoped
        FR._FRAGMENT_CACHE.clear()  # (each conversion from an empty memo: names depend on it)
        walked = _Converter(schema, strict_mode=False).convert()  # the index walked on the first $ref
        FR._FRAGMENT_CACHE.clear()
        assert json_schema_to_ebnf(schema, strict_mode=False) == walked
