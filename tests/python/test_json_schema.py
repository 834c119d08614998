"""Grammar.from_json_schema / GrammarCompiler.compile_json_schema, feature by feature.

Every check compiles the schema for a vocabulary of the 256 single bytes and asks a
GrammarMatcher whether ``json.dumps(instance)`` is accepted to completion; the oracle
is ``jsonschema.Draft202012Validator`` with its format checker, with two documented
differences of the converter's semantics patched in: ``multipleOf`` is exact decimal
arithmetic (jsonschema divides floats: it says 0.3 is not a multiple of 0.1), and
``pattern`` is ECMA-262 (the generated strings avoid the corners where Python's
``re`` differs: non-ASCII digits/letters under ``\\d``/``\\w`` and a final newline).

Objects are generated with their properties in the schema's order (the default
``any_order=False`` fixes the order; ``test_any_order`` shuffles).
"""

from __future__ import annotations

import json
import random
import re
import warnings
from fractions import Fraction

import jsonschema
import pytest
from jsonschema import Draft202012Validator

import xg2_plugin as xgr
from xg2_plugin import GrammarError
from xg2_plugin.json_schema import json_schema_to_ebnf

INFO = xgr.TokenizerInfo([bytes([i]) for i in range(256)])
COMPILER = xgr.GrammarCompiler(INFO, cache_enabled=False)


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def compile_schema(schema, **kw):
    return COMPILER.compile_json_schema(schema, **kw)


def accepts(compiled, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return m.accept_string(text) and m.is_completed()


def _decimal(v):
    return Fraction(repr(v)) if isinstance(v, float) else Fraction(v)


def _multiple_of(validator, dB, instance, schema):
    if not validator.is_type(instance, "number"):
        return
    if (_decimal(instance) / _decimal(dB)).denominator != 1:
        yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {dB}")


Oracle = jsonschema.validators.extend(Draft202012Validator, {"multipleOf": _multiple_of})


def oracle(schema):
    v = Oracle(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return v.is_valid


WS = [" ", "\n", "\t", "\r", "  ", "\n  "]


def respace(text: str, rng: random.Random) -> str:
    """json text with random JSON whitespace between tokens (never inside strings)."""
    out = []
    in_str = esc = False
    for ch in text:
        if in_str:
            out.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
            out.append(ch)
            continue
        if ch == " ":
            out.append(rng.choice(WS))
            continue
        if ch in ",:[]{}" and rng.random() < 0.4:
            out.append(ch + rng.choice(WS))
            continue
        out.append(ch)
    return "".join(out).rstrip(" \n\t\r")


def check_schema(schema, instances, *, whitespace=True, seed=0, oracle_schema=None, **kw):
    """Every instance: grammar acceptance == oracle validity (also respaced)."""
    compiled = compile_schema(schema, **kw)
    is_valid = oracle(schema if oracle_schema is None else oracle_schema)
    rng = random.Random(seed)
    bad = []
    n_valid = 0
    for inst in instances:
        text = json.dumps(inst)
        want = is_valid(inst)
        n_valid += want
        got = accepts(compiled, text)
        if got != want:
            bad.append((text, want, got))
        if whitespace and kw.get("any_whitespace", True):
            t2 = respace(text, rng)
            if accepts(compiled, t2) != want:
                bad.append((t2, want, not want))
    assert not bad, f"{len(bad)} disagreements with the oracle, e.g. {bad[:5]}\nschema: {json.dumps(schema)}"
    return n_valid


# --------------------------------------------------------------------------------------
# instance generators
# --------------------------------------------------------------------------------------

NASTY_STRINGS = ["", "a", "ab", "abc", "abcd", "hello world", "é", "ñandú", "日本語", "😀", "a😀b", "\n",
                 "tab\there", 'quo"te', "back\\slash", "sl/ash", "\x00", "\x1f", "\u2028", "x" * 20,
                 "-", "a-b", "A", "Z9", "_", "\u00a0", "abc\n", "0", "123", "12.5"]
NUMBERS = [0, 1, -1, 2, 3, 5, 7, 10, 15, 99, 100, 101, -100, 255, 256, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1,
           2**53 + 1, 10**20, 0.0, -0.0, 0.5, 1.0, 1.5, 2.5, -2.5, 0.1, 0.3, 0.25, 0.07, 1.13, 3.14159, 1e-05,
           2.5e-7, 1e16, 1.5e16, 1e22, 1e300, -1e-300, 100.0, 99.99, 1e-4]


def rand_string(rng: random.Random) -> str:
    alphabet = "abcxyzABC012 -_.@:/é😀\"\\\t"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))


def rand_value(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 2 or r < 0.5:
        return rng.choice([None, True, False, rng.choice(NUMBERS), rng.choice(NASTY_STRINGS), rand_string(rng),
                           rng.randint(-1000, 1000), round(rng.uniform(-100, 100), rng.randint(0, 3))])
    if r < 0.75:
        return [rand_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rand_string(rng) or "k": rand_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def pool(rng: random.Random, n: int = 60):
    out = [None, True, False, [], {}, [1, 2], {"a": 1}]
    out += NUMBERS + NASTY_STRINGS
    out += [rand_value(rng) for _ in range(n)]
    return out


def objects(props, rng, n=80, extras=("zz", "extra", "a1"), values=None):
    """Objects with a random subset of ``props`` (declared order) then extra keys."""
    out = []
    for _ in range(n):
        obj = {}
        for p in props:
            if rng.random() < 0.7:
                obj[p] = rng.choice(values[p]) if values and p in values else rand_value(rng, 1)
        for e in extras:
            if rng.random() < 0.15:
                obj[e] = rand_value(rng, 2)
        out.append(obj)
    return out


# --------------------------------------------------------------------------------------
# scalars
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [
    {"type": "null"}, {"type": "boolean"}, {"type": "integer"}, {"type": "number"}, {"type": "string"},
    {"type": ["string", "null"]}, {"type": ["integer", "boolean"]}, {}, True,
    {"type": "string", "nullable": True},
])
def test_types(schema):
    rng = random.Random(1)
    insts = pool(rng)
    if isinstance(schema, dict) and schema.get("nullable"):
        compiled = compile_schema(schema)
        for inst in insts:
            want = isinstance(inst, str) or inst is None
            assert accepts(compiled, json.dumps(inst)) == want, inst
        return
    check_schema(schema, insts, strict_mode=False)


def test_integer_accepts_integral_floats():
    c = compile_schema({"type": "integer"})
    for text in ["1", "-0", "1.0", "-0.0", "100.000", "1e+16", "1.5e+16", "1.2345678901234567e+25", "1E16"]:
        assert accepts(c, text), text
    # scientific forms other than json.dumps's (exponent >= 16 or <= -5) are refused
    for text in ["1.5", "1e-05", "0.1", "1.5e0", "1e400", "01", "1.", ".5", "+1", "1e2"]:
        assert not accepts(c, text), text


@pytest.mark.parametrize("schema", [
    {"type": "integer", "minimum": 0},
    {"type": "integer", "minimum": -5, "maximum": 17},
    {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100},
    {"type": "integer", "minimum": 1.5, "maximum": 255.5},
    {"type": "number", "minimum": -2.5, "maximum": 1.5},
    {"type": "number", "exclusiveMinimum": 0},
    {"type": "number", "minimum": 0.1, "exclusiveMaximum": 0.3},
    {"type": "number", "maximum": 1e-3},
    {"type": "number", "minimum": 1e-5, "maximum": 1e17},
    {"type": "number", "minimum": 99.99, "maximum": 100},
    {"minimum": 5},
    {"type": "integer", "format": "int32"},
    {"type": "integer", "format": "uint8"},
])
def test_numeric_ranges(schema):
    rng = random.Random(2)
    insts = NUMBERS + [rng.randint(-300, 300) for _ in range(100)]
    insts += [round(rng.uniform(-300, 300), rng.randint(0, 4)) for _ in range(100)]
    insts += [rng.uniform(-1e-3, 1e-3) for _ in range(30)] + [rng.uniform(-1e20, 1e20) for _ in range(30)]
    insts += ["5", None, [5]]
    if schema.get("format") in ("int32", "uint8"):
        compiled = compile_schema(schema)
        lo, hi = {"int32": (-(2**31), 2**31 - 1), "uint8": (0, 255)}[schema["format"]]
        for i in insts:
            want = isinstance(i, (int, float)) and not isinstance(i, bool) and float(i).is_integer() and lo <= i <= hi
            assert accepts(compiled, json.dumps(i)) == want, i
        return
    check_schema(schema, insts)


def test_draft4_boolean_exclusive_bounds():
    schema = {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 10, "exclusiveMaximum": True}
    c = compile_schema(schema)
    for v, want in [(0, False), (0.0, False), (1e-05, True), (5, True), (9.999, True), (10, False), (10.0, False)]:
        assert accepts(c, json.dumps(v)) == want, v


@pytest.mark.parametrize("extra", [{}, {"minimum": -20, "maximum": 300}, {"multipleOf": 3},
                                   {"multipleOf": 4, "minimum": 0, "maximum": 100}])
def test_draft4_integers_are_integer_texts(extra):
    # draft-04: 1.0 is a number but not an integer; later drafts: it is an integer
    rng = random.Random(5)
    values = [0, 3, 12, -12, 99, 300, 12345, 12.0, 12345.0, 0.0, -3.0, 1.5, 1e20]
    values += [rng.randint(-50, 400) for _ in range(60)] + [float(rng.randint(-50, 400)) for _ in range(30)]
    for draft, float_ok in (("http://json-schema.org/draft-04/schema#", False),
                            ("https://json-schema.org/draft/2020-12/schema", True)):
        schema = {"$schema": draft, "type": "integer", **extra}
        c = compile_schema(schema)
        for v in values:
            integral = float(v).is_integer() and (float_ok or isinstance(v, int))
            want = integral and jsonschema.Draft202012Validator(dict(extra)).is_valid(v)
            assert accepts(c, json.dumps(v)) == want, (draft, extra, v)


@pytest.mark.parametrize("schema", [
    {"type": "integer", "multipleOf": 3},
    {"type": "integer", "multipleOf": 2, "minimum": 0},
    {"multipleOf": 2},
    {"type": "number", "multipleOf": 0.01},
    {"type": "number", "multipleOf": 1.5},
    {"type": "number", "multipleOf": 0.1},
    {"type": "integer", "multipleOf": 7, "minimum": -100, "maximum": 100},
    {"type": "number", "multipleOf": 0.25, "minimum": 0, "maximum": 10},
    {"type": "integer", "multipleOf": 5, "exclusiveMaximum": 0},
])
def test_multiple_of(schema):
    rng = random.Random(3)
    insts = NUMBERS + [rng.randint(-300, 300) for _ in range(150)]
    insts += [rng.randint(-3000, 3000) / 100 for _ in range(100)] + [rng.randint(-40, 40) * 0.25 for _ in range(40)]
    insts += [0.3, 0.7, 4.5, 7.5, 6.0, 21.0, 1e-05]
    check_schema(schema, insts)


def test_multiple_of_decimal_semantics():
    c = compile_schema({"type": "number", "multipleOf": 0.1})
    assert accepts(c, "0.3") and accepts(c, "12") and accepts(c, "1.20") and accepts(c, "12.0")
    assert not accepts(c, "0.35") and not accepts(c, "1e-05")
    c2 = compile_schema({"type": "number", "multipleOf": 1e-6})
    assert accepts(c2, "1e-05") and accepts(c2, "1.5e-05") and not accepts(c2, "1.5e-07")


@pytest.mark.parametrize("schema", [
    {"type": "string", "minLength": 2},
    {"type": "string", "maxLength": 3},
    {"type": "string", "minLength": 1, "maxLength": 1},
    {"type": "string", "pattern": "^[a-z0-9-]+$"},
    {"type": "string", "pattern": "b"},
    {"type": "string", "pattern": "^a|c$"},
    {"type": "string", "pattern": "^(ab|cd){1,2}x?$"},
    {"type": "string", "pattern": "[^a-z]"},
    {"type": "string", "pattern": "^\\d{2,3}$"},
    {"type": "string", "pattern": "^[a-z0-9-]+$", "minLength": 2, "maxLength": 4},
    {"type": "string", "pattern": "^(a|bc)+$", "maxLength": 3},
    {"type": "string", "pattern": "é|😀"},
    {"type": "string", "pattern": "^.$"},
    {"allOf": [{"pattern": "a"}, {"pattern": "b"}], "type": "string"},
    {"type": "string", "not": {"pattern": "^a"}},
    {"maxLength": 2},
])
def test_strings(schema):
    rng = random.Random(4)
    insts = list(NASTY_STRINGS) + [rand_string(rng) for _ in range(200)]
    insts += ["ab", "abab", "cd", "abx", "abcdx", "12", "123", "1234", "a-b-c", "xbx", "bab", "cab", "ac", "ba", "bc"]
    insts += [1, None]
    # keep to the corners where Python's re agrees with ECMA-262
    insts = [i for i in insts if not (isinstance(i, str) and (i.endswith("\n") or "\u2028" in i))]
    check_schema(schema, insts)


def test_string_length_counts_code_points():
    c = compile_schema({"type": "string", "minLength": 2, "maxLength": 2})
    assert accepts(c, json.dumps("😀é"))  # a surrogate pair counts once
    assert accepts(c, json.dumps("😀é", ensure_ascii=False))
    assert not accepts(c, json.dumps("😀"))
    assert accepts(c, '"\\u0061b"') and accepts(c, '"\\n\\/"')
    assert not accepts(c, '"\\ud83d\\ude00"')  # one character
    assert not accepts(c, '"\\ud800x"')  # lone surrogates are never counted


def test_pattern_ecma_semantics():
    dot = compile_schema({"type": "string", "pattern": "^a.c$"})
    assert accepts(dot, json.dumps("a😀c")) and not accepts(dot, json.dumps("a\nc"))
    assert not accepts(dot, json.dumps("a\u2028c"))
    end = compile_schema({"type": "string", "pattern": "^abc$"})
    assert not accepts(end, json.dumps("abc\n"))  # ECMA: $ is the end of input
    digit = compile_schema({"type": "string", "pattern": "^\\d$"})
    assert accepts(digit, '"7"') and not accepts(digit, json.dumps("\u0663"))
    space = compile_schema({"type": "string", "pattern": "^\\s$"})
    assert accepts(space, json.dumps("\u00a0")) and accepts(space, json.dumps("\ufeff"))
    esc = compile_schema({"type": "string", "pattern": "^a/b$"})
    assert accepts(esc, '"a/b"') and accepts(esc, '"a\\/b"') and accepts(esc, '"\\u0061/b"')


@pytest.mark.parametrize("fmt,good,bad", [
    ("date", ["2024-02-29", "2023-12-31", "0001-01-01", "2000-02-29"],
     ["2023-02-29", "1900-02-29", "0000-01-01", "2023-13-01", "2023-1-01", "2023-04-31", "20230101"]),
    ("date-time", ["2024-02-29T12:00:00Z", "1990-12-31T23:59:59.123+05:30", "2020-01-01t00:00:00z"],
     ["2024-02-30T12:00:00Z", "1990-12-31T24:00:00Z", "1990-12-31T23:59:60Z", "1990-12-31 23:59:59Z"]),
    ("time", ["12:00:00Z", "23:59:59.5-08:00"], ["24:00:00Z", "12:00:00", "12:00Z"]),
    ("ipv4", ["0.0.0.0", "255.255.255.255", "192.168.1.1"], ["256.0.0.1", "01.2.3.4", "1.2.3", "1.2.3.4.5"]),
    ("ipv6", ["::", "::1", "fe80::1", "1:2:3:4:5:6:7:8", "::ffff:192.168.1.1", "1::", "a:b::c:d"],
     ["1:2:3:4:5:6:7:8:9", ":::", "1::2::3", "12345::", "fe80::1%eth0", "1:2:3:4:5:6:7::8:9"]),
    ("uuid", ["2eb8aa08-aa98-11ea-b4aa-73b441d16380", "2EB8AA08-AA98-11EA-B4AA-73B441D16380"],
     ["2eb8aa08aa9811eab4aa73b441d16380", "2eb8aa08-aa98-11ea-b4aa-73b441d1638", "g" * 8 + "-aa98-11ea-b4aa-73b441d16380"]),
    ("email", ["a@b", "@", "joe.bloggs@example.com"], ["ab", ""]),
    ("json-pointer", ["", "/", "/a~0b/c~1d", "/0"], ["a", "/~2", "/a~"]),
    ("relative-json-pointer", ["0", "1/a", "2#", "10/x~0"], ["", "01", "-1", "#", "/a"]),
])
def test_formats_agree_with_jsonschema(fmt, good, bad):
    schema = {"type": "string", "format": fmt}
    is_valid = oracle(schema)
    c = compile_schema(schema)
    for s in good + bad:
        assert accepts(c, json.dumps(s)) == is_valid(s), (fmt, s)
    assert all(is_valid(s) for s in good) and not any(is_valid(s) for s in bad)


def test_formats_random_agreement():
    rng = random.Random(5)
    chars = "0123456789abcdefABCDEF:.-TZtz+/~#@ "
    for fmt in ("date", "date-time", "time", "ipv4", "ipv6", "json-pointer", "relative-json-pointer"):
        schema = {"type": "string", "format": fmt}
        is_valid = oracle(schema)
        c = compile_schema(schema)
        insts = ["".join(rng.choice(chars) for _ in range(rng.randint(0, 40))) for _ in range(300)]
        # mutations of valid strings
        seeds = {"date": "2024-02-29", "date-time": "2024-02-29T12:34:56.789+01:00", "time": "12:34:56Z",
                 "ipv4": "10.20.30.40", "ipv6": "2001:db8::8a2e:370:7334", "uuid": "2eb8aa08-aa98-11ea-b4aa-73b441d16380",
                 "json-pointer": "/a/b~0", "relative-json-pointer": "1/a"}
        for _ in range(300):
            s = list(seeds[fmt])
            i = rng.randrange(len(s))
            s[i] = rng.choice(chars)
            insts.append("".join(s))
        for s in insts:
            assert accepts(c, json.dumps(s)) == is_valid(s), (fmt, s)


def test_uuid_canonical_form():
    # Python's UUID() also takes "+", "_", braces and "urn:uuid:" variants when the
    # hyphens happen to line up; the grammar accepts the canonical form only
    rng = random.Random(12)
    schema = {"type": "string", "format": "uuid"}
    is_valid = oracle(schema)
    c = compile_schema(schema)
    seed = "2eb8aa08-aa98-11ea-b4aa-73b441d16380"
    for _ in range(300):
        s = list(seed)
        s[rng.randrange(len(s))] = rng.choice("0123456789abcdefABCDEF-g:z")
        s = "".join(s)
        if accepts(c, json.dumps(s)):
            assert is_valid(s), s
        elif re.fullmatch(r"[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}", s):
            raise AssertionError(s)


def test_rfc_formats_without_a_checker():
    # jsonschema checks these only with optional packages; the converter follows the RFCs
    cases = {
        "duration": (["P1D", "PT1H", "P1Y2M3DT4H5M6S", "P2W"], ["P", "PT", "1D", "P1H", "P1DT"]),
        "uri": (["http://example.com/a?b#c", "urn:isbn:0451450523", "mailto:a@b.c"], ["//example.com", "a b:c", ""]),
        "uri-reference": (["/a/b", "", "#frag", "http://x"], ["a b", "\\\\x"]),
        "uri-template": (["http://example.com/{id}", "{+path}/x{?q,r}"], ["{", "{a b}"]),
        "hostname": (["example.com", "a-b.c", "localhost"], ["-a.com", "a..b", "a" * 64 + ".com"]),
    }
    for fmt, (good, bad) in cases.items():
        c = compile_schema({"type": "string", "format": fmt})
        for s in good:
            assert accepts(c, json.dumps(s)), (fmt, s)
        for s in bad:
            assert not accepts(c, json.dumps(s)), (fmt, s)


def test_unknown_format_is_an_annotation():
    c = compile_schema({"type": "string", "format": "my-custom-format"})
    assert accepts(c, '"anything"')


# --------------------------------------------------------------------------------------
# enum / const
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [
    {"enum": [1, "a", None, True, 2.5, [1, 2], {"k": "v"}]},
    {"const": 1},
    {"const": 1.0},
    {"const": "é\"\n"},
    {"enum": ["a", "b"], "type": "string"},
    {"enum": [1, 2, 3, "x"], "type": "integer", "minimum": 2},
    {"const": {"a": [1, {"b": None}]}},
    {"enum": [0, False]},
])
def test_enum_const(schema):
    rng = random.Random(6)
    insts = pool(rng) + [1, 1.0, 2.5, [1, 2], [1, 2.0], {"k": "v"}, "é\"\n", {"a": [1, {"b": None}]}, 0, 0.0, False]
    check_schema(schema, insts)


BIG_A = [f"s{i}" for i in range(20)] + [1, True, None, 2.5, [1], {"k": 1}]
BIG_B = [f"s{i}" for i in range(19, 40)] + [1.0, False, 3, [1.0], {"k": 2}]  # shares "s19", 1 == 1.0, [1]


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"enum": BIG_A}, {"enum": BIG_B}]},  # overlapping branches: in both is invalid
    {"oneOf": [{"enum": BIG_A[:18]}, {"enum": BIG_B[1:]}]},  # disjoint branches
    {"allOf": [{"enum": BIG_A}, {"enum": BIG_B}]},  # the intersection
    {"enum": BIG_A, "not": {"enum": BIG_B}},
    {"type": "string", "not": {"enum": BIG_B}},
])
def test_enums_of_many_values(schema):
    # (past 16 members enums are compared by hash, not pairwise: the same answers)
    insts = BIG_A + BIG_B + [0, 1.5, "s40", "", [2], {"k": 3}, 3.0, True, False]
    assert check_schema(schema, insts) > 0


def test_enum_number_spellings():
    c = compile_schema({"enum": [1, 1e22, 0.1]})
    for t in ["1", "1.0", "1.000", "1e0", "1E+0", "1e+22", "0.1", "1e-1"]:
        assert accepts(c, t), t
    assert not accepts(c, "1.1") and not accepts(c, "0.10000000000000001")
    s = compile_schema({"const": "a/é"})
    assert accepts(s, '"a/\\u00e9"') and accepts(s, '"a/\\u00E9"') and accepts(s, '"a/é"')


# --------------------------------------------------------------------------------------
# objects
# --------------------------------------------------------------------------------------

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name"],
}
VALUES = {"name": ["", "Ann", 5], "age": [-1, 0, 30, 1.5, "x"], "email": ["a@b", "nope", 3],
          "tags": [[], ["a"], ["a", "b", "c", "d"], [1]]}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("extra", [None, False, True, {"type": "integer"}])
def test_object_properties(strict, extra):
    schema = dict(PERSON)
    if extra is not None:
        schema["additionalProperties"] = extra
    rng = random.Random(7)
    insts = objects(list(PERSON["properties"]), rng, 150, values=VALUES) + [None, [], "x", {}]
    compiled = compile_schema(schema, strict_mode=strict)
    effective = dict(schema)
    if strict and extra is None:
        effective["additionalProperties"] = False
    is_valid = oracle(effective)
    for inst in insts:
        assert accepts(compiled, json.dumps(inst)) == is_valid(inst), (inst, strict, extra)


def test_extra_key_cannot_be_a_declared_name_in_disguise():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    c = compile_schema(schema)
    assert accepts(c, '{"a": 1, "b": "x"}')
    assert not accepts(c, '{"b": "x", "a": "y"}')
    assert not accepts(c, '{"\\u0061": "y"}')  # "a" escaped: still "a", must be an integer
    # Declared names match only json.dumps's spelling, so an escaped spelling of a
    # declared name is refused rather than risk an extra key equal to it.
    assert not accepts(c, '{"\\u0061": 1}')
    assert not accepts(c, '{"a": 1, "a": "y"}')


@pytest.mark.parametrize("schema", [
    {"dependentRequired": {"bar": ["foo"]}},
    {"dependentRequired": {"quux": ["foo", "bar"]}},
    {"type": "object", "required": ["b", "a", "c"]},
])
def test_names_only_required_come_in_any_order(schema):
    # without "properties" the schema gives no order: every order of the keys is valid
    import itertools
    c = compile_schema(schema, strict_mode=False)
    names = sorted({n for v in schema.get("dependentRequired", {}).items() for n in [v[0], *v[1]]}
                   | set(schema.get("required", [])))
    validator = Draft202012Validator(schema)
    for r in range(len(names) + 1):
        for keys in itertools.permutations(names, r):
            inst = {k: i for i, k in enumerate(keys)}
            assert accepts(c, json.dumps(inst)) == validator.is_valid(inst), inst


@pytest.mark.parametrize("schema", [
    {"type": "object", "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False},
    {"type": "object", "properties": {"xa": {"type": "string"}}, "patternProperties": {"^x": {"minLength": 2}},
     "additionalProperties": {"type": "boolean"}},
    {"type": "object", "patternProperties": {"a": {"type": "integer"}, "b": {"minimum": 5}}},
    {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}, "additionalProperties": True},
    {"type": "object", "minProperties": 1, "maxProperties": 2, "properties": {"a": {}, "b": {}, "c": {}},
     "additionalProperties": True},
    {"type": "object", "properties": {"a": {}, "b": {}}, "dependentRequired": {"a": ["b"]}},
    {"type": "object", "properties": {"a": {}, "b": {"type": "integer"}},
     "dependentSchemas": {"a": {"properties": {"b": {"minimum": 10}}, "required": ["b"]}}},
    {"type": "object", "properties": {"a": {}, "b": {}}, "dependencies": {"a": ["b"]}},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
     "unevaluatedProperties": False},
])
def test_object_keywords(schema):
    rng = random.Random(8)
    oracle_schema = schema
    if "dependencies" in schema:  # draft 7 spelling: check against its 2020-12 form
        oracle_schema = {k: v for k, v in schema.items() if k != "dependencies"}
        oracle_schema["dependentRequired"] = schema["dependencies"]
    keys = ["a", "b", "c", "xa", "x-1", "x-", "ab", "ba", "abcd", "B", "zz"]
    vals = [0, 5, 12, "s", "xy", True, None, [], 1.5]
    insts = [{}]
    for _ in range(250):
        ks = [k for k in keys if rng.random() < 0.3]
        # declared properties first, in order, then the rest
        declared = list((schema.get("properties") or {}).keys())
        ks = [k for k in declared if k in ks] + [k for k in ks if k not in declared]
        insts.append({k: rng.choice(vals) for k in ks})
    check_schema(schema, insts + [None, "a", 3], strict_mode=False, oracle_schema=oracle_schema)


def test_any_order():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                                               "c": {"type": "boolean"}}, "required": ["a", "c"]}
    c = compile_schema(schema, any_order=True)
    is_valid = oracle({**schema, "additionalProperties": False})
    import itertools
    for perm in itertools.permutations(["a", "b", "c"]):
        for vals in [(1, "x", True), ("1", "x", True), (1, 2, False)]:
            for drop in [None, "a", "b", "c"]:
                inst = {k: dict(zip("abc", vals))[k] for k in perm if k != drop}
                assert accepts(c, json.dumps(inst)) == is_valid(inst), inst
    ordered = compile_schema(schema)
    assert accepts(ordered, '{"a": 1, "c": true}') and not accepts(ordered, '{"c": true, "a": 1}')


def test_strict_mode_defaults():
    obj = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert not accepts(compile_schema(obj), '{"a": 1, "b": 2}')
    assert accepts(compile_schema(obj, strict_mode=False), '{"a": 1, "b": [2, {"c": null}]}')
    arr = {"type": "array", "prefixItems": [{"type": "integer"}]}
    assert accepts(compile_schema(arr), "[1]") and not accepts(compile_schema(arr), "[1, 2]")
    assert accepts(compile_schema(arr, strict_mode=False), '[1, "x", {"y": []}]')
    # a schema that uses no object/array keyword allows any object/array (as XGrammar)
    assert accepts(compile_schema({"type": ["object", "null"]}), '{"k": 1}')
    assert accepts(compile_schema({"type": "array"}), '[1, {"k": []}]')
    assert accepts(compile_schema(True), '{"k": [1, "x"]}')
    # names in "required" count as declared
    assert accepts(compile_schema({"type": "object", "required": ["q"]}), '{"q": [1]}')
    assert not accepts(compile_schema({"type": "object", "required": ["q"]}), '{"q": 1, "r": 2}')
    # array keywords without items: no items past the prefix
    assert accepts(compile_schema({"type": "array", "maxItems": 3}), "[]")
    assert not accepts(compile_schema({"type": "array", "maxItems": 3}), "[1]")


@pytest.mark.parametrize("schema, valid, invalid", [
    ({"maxItems": 2}, ["[1, 2]", '"x"', "[]"], ["[1, 2, 3]"]),
    ({"minItems": 1}, ["[1, 2]", "[1]", "3"], ["[]"]),
    ({"maxProperties": 1}, ['{"foo": [1]}', "{}", "[1, 2]"], ['{"a": 1, "b": 2}']),
    ({"required": ["a"]}, ['{"a": 1, "b": 2}', "1"], ['{"b": 2}']),
    ({"allOf": [{"minProperties": 1}, {"maxProperties": 2}]}, ['{"a": 1}'], ["{}"]),
])
def test_strict_mode_needs_the_type(schema, valid, invalid):
    """strict_mode restricts objects (arrays) only where the schema says it is one: keywords on
    a schema without a type constrain the objects (arrays) among other values, exactly (the
    verdicts of vLLM's xgrammar backend agree on valid instances; XGrammar ignores the keywords
    there, and accepts the invalid ones too)."""
    c = compile_schema(schema)
    for text in valid:
        assert accepts(c, text), text
    for text in invalid:
        assert not accepts(c, text), text
    # declaring properties (prefixItems) or naming the type still makes it strict
    assert not accepts(compile_schema({"properties": {"a": {}}, "maxProperties": 3}), '{"a": 1, "b": 2}')
    assert not accepts(compile_schema({"prefixItems": [{}], "maxItems": 3}), "[1, 2]")
    assert not accepts(compile_schema({"type": ["array", "null"], "maxItems": 3}), "[1]")


# --------------------------------------------------------------------------------------
# arrays
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": {"type": "integer"}},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": {"type": "boolean"}},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False, "minItems": 1},
    {"type": "array", "items": [{"type": "string"}], "additionalItems": {"type": "integer"}},
    {"type": "array", "contains": {"type": "string"}},
    {"type": "array", "contains": {"type": "integer", "minimum": 5}, "minContains": 2, "maxContains": 3},
    {"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}, "maxContains": 1},
    {"type": "array", "contains": {"type": "string"}, "minContains": 0, "maxItems": 3},
    {"type": "array", "items": {"enum": [1, 2, "a"]}, "uniqueItems": True},
    {"type": "array", "items": {"type": "boolean"}, "uniqueItems": True, "minItems": 2},
    {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": {"type": "string"}},
])
def test_arrays(schema):
    rng = random.Random(10)
    atoms = [0, 1, 2, 5, 7, "a", "b", True, False, None, 1.5, 1.0, [1], {"x": 1}]
    insts = [[]] + [[rng.choice(atoms) for _ in range(rng.randint(0, 6))] for _ in range(300)]
    oracle_schema = schema
    if isinstance(schema.get("items"), list):  # draft 4-2019 spelling
        oracle_schema = {"type": "array", "prefixItems": schema["items"], "items": schema["additionalItems"]}
    check_schema(schema, insts + [None, "x", {}], strict_mode=False, oracle_schema=oracle_schema)


def test_contains_evaluates_items():
    schema = {"type": "array", "prefixItems": [{"type": "string"}], "contains": {"type": "integer"},
              "unevaluatedItems": False}
    c = compile_schema(schema, strict_mode=False)
    is_valid = oracle(schema)
    for inst in [["a", 1], ["a", 1, 2], ["a", 1, True], ["a"], [1], ["a", "b", 1]]:
        assert accepts(c, json.dumps(inst)) == is_valid(inst), inst
    # strict mode: items matching contains are evaluated, others are extra
    strict = compile_schema({"type": "array", "contains": {"type": "integer"}})
    assert accepts(strict, "[1, 2]") and not accepts(strict, '[1, "x"]') and not accepts(strict, "[]")


# --------------------------------------------------------------------------------------
# combinators and references
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [
    {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 3}]},
    {"oneOf": [{"type": "integer"}, {"minimum": 2}]},
    {"oneOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]},
    {"oneOf": [{"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
               {"properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]}],
     "type": "object"},
    {"allOf": [{"type": "integer"}, {"minimum": 3}, {"maximum": 10}, {"multipleOf": 2}]},
    {"allOf": [{"properties": {"a": {"type": "integer"}}}, {"properties": {"a": {"minimum": 2}}}]},
    {"not": {"type": "string"}},
    {"not": {"enum": [1, "a", None]}},
    {"type": "string", "not": {"enum": ["a", "b"]}},
    {"type": "integer", "not": {"const": 3}},
    {"not": {"type": "object", "required": ["a"]}},
    {"if": {"type": "integer"}, "then": {"minimum": 5}, "else": {"type": "string"}},
    {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "v": {}},
     "if": {"properties": {"kind": {"const": "a"}}}, "then": {"properties": {"v": {"type": "integer"}}},
     "else": {"properties": {"v": {"type": "string"}}}},
])
def test_combinators(schema):
    rng = random.Random(11)
    insts = pool(rng)
    if schema.get("type") == "object":
        insts += objects(["kind", "x", "y", "v"], rng, 150,
                         values={"kind": ["a", "b", "c"], "x": [1, "1"], "y": ["s", 2], "v": [1, "s", None]})
    insts += [{"a": 1}, {"a": 3}, {"b": 1}, 3, 4, 6, 12, 2.5, "a", "b", "abc"]
    # objects: properties in any order (branches declare different properties)
    check_schema(schema, insts, strict_mode=False, any_order=schema.get("type") == "object")


@pytest.mark.parametrize("words", [
    ["a", "ab", "abc", "b", "p0", "p1", "p10", "p11", "é", "x\ny"],
    ["", "k"],
    [f"p{i:03d}" for i in range(120)],
])
def test_strings_except_words(words):
    # "any string but these" (a trie whose words with nothing below share one
    # "any character" tail): against set membership, on the words, their
    # prefixes, one-character extensions (escaped or not) and random strings
    rng = random.Random(5)
    c = compile_schema({"type": "string", "not": {"enum": words}})
    cands = set(words) | {w[:i] for w in words for i in range(len(w))}
    cands |= {w + x for w in words[:40] for x in ("0", "z", "é", '"', "\\", "\n", "\U0001f600")}
    cands |= {rand_string(rng) for _ in range(150)}
    for s in sorted(cands):
        assert accepts(c, json.dumps(s)) == (s not in words), s
        assert accepts(c, json.dumps(s, ensure_ascii=False)) == (s not in words), s
    # a non-word spelled with an escape past the trie
    assert accepts(c, '"' + json.dumps(words[-1])[1:-1] + '\\u0041"')
    assert accepts(c, '"' + json.dumps(words[-1])[1:-1] + '\\n"')


def test_refs_and_recursion():
    schema = {
        "$defs": {
            "node": {"type": "object", "properties": {"value": {"type": "integer"},
                                                      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                     "required": ["value"]},
            "a~b/c": {"type": "string"},
            "anch": {"$anchor": "named", "type": "boolean"},
        },
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/node"}, "s": {"$ref": "#/$defs/a~0b~1c"},
                       "b": {"$ref": "#named"}, "pct": {"$ref": "#/$defs/a~0b%7E1c"}},
    }
    insts = [{}, {"tree": {"value": 1}}, {"tree": {"value": 1, "children": [{"value": 2, "children": []}]}},
             {"tree": {"value": 1, "children": [{"value": "x"}]}}, {"tree": {"children": []}},
             {"s": "x"}, {"s": 1}, {"b": True}, {"b": "x"}, {"pct": "y"}, {"pct": 2},
             {"tree": {"value": 1, "children": [{"value": 2, "children": [{"value": 3, "children": [{"value": 4}]}]}]}}]
    check_schema(schema, insts, strict_mode=False)
    root_rec = {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}}
    check_schema(root_rec, [[], [1, [2, [3, []]]], [1, ["x"]], [[[[]]]]], strict_mode=False)


def test_boolean_subschemas():
    schema = {"type": "object", "properties": {"a": True, "b": False}, "additionalProperties": False}
    c = compile_schema(schema)
    assert accepts(c, '{"a": [1]}') and not accepts(c, '{"b": 1}') and accepts(c, "{}")
    with pytest.raises(GrammarError, match="accepts no value"):
        compile_schema(False)


def test_unevaluated_properties_see_in_place_applicators():
    schema = {"allOf": [{"properties": {"a": {"type": "integer"}}}], "properties": {"b": {}},
              "unevaluatedProperties": False, "type": "object"}
    c = compile_schema(schema, strict_mode=False)
    # Declared order puts this schema's own properties before those of its allOf.
    assert accepts(c, '{"b": 1, "a": 2}') and not accepts(c, '{"a": 2, "b": 1}')
    assert accepts(c, '{"a": 2}') and accepts(c, '{"b": 2}') and not accepts(c, '{"c": 2}')
    cousins = {"allOf": [{"properties": {"foo": True}}, {"unevaluatedProperties": False}]}
    c2 = compile_schema(cousins, strict_mode=False)
    assert not accepts(c2, '{"foo": 1}') and accepts(c2, "{}")


# --------------------------------------------------------------------------------------
# layout
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("indent,separators", [(None, None), (2, None), (4, (",", ": ")), (None, (",", ":")),
                                               (0, None), (2, (", ", ": "))])
def test_layout_matches_json_dumps(indent, separators):
    schema = {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "b": {"type": "object", "properties": {"c": {"enum": [[1, 2], {"k": [True]}]}}},
        "d": {"type": "object", "additionalProperties": True},
        "e": {"type": "array"}}, "additionalProperties": False}
    c = compile_schema(schema, any_whitespace=False, indent=indent, separators=separators, strict_mode=False)
    insts = [{}, {"a": []}, {"a": [{"x": 1}, {}]}, {"b": {"c": [1, 2]}}, {"b": {"c": {"k": [True]}}},
             {"a": [{"x": 1}], "b": {}, "d": {"q": [1, {"r": None}], "s": {}}, "e": [1, [2, [3]], {}]}]
    kw = {"indent": indent}
    if separators is not None:
        kw["separators"] = separators
    for inst in insts:
        text = json.dumps(inst, **kw)
        assert accepts(c, text), text
        other = json.dumps(inst, indent=None if indent is not None else 3)
        if other != text:
            assert not accepts(c, other), other


def test_max_whitespace_cnt():
    c = compile_schema({"type": "array", "items": {"type": "integer"}}, max_whitespace_cnt=2)
    assert accepts(c, "[  1,  2  ]") and not accepts(c, "[   1]")


# --------------------------------------------------------------------------------------
# errors, lenient, inputs, cache
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema,keyword,path", [
    ({"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}, "format", "/properties/a/format"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=a)b"}}}, "pattern", "/properties/a/pattern"),
    ({"properties": {"a": {"$ref": "https://example.com/s.json"}}}, "$ref", "/properties/a/$ref"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "uniqueItems", "/"),
    ({"properties": {"a": {"not": {"multipleOf": 3}}}}, "not", "/properties/a/not"),
])
def test_errors_name_keyword_and_path(schema, keyword, path):
    with pytest.raises(GrammarError) as e:
        compile_schema(schema)
    msg = str(e.value)
    assert f'"{keyword}"' in msg and path in msg, msg
    assert isinstance(e.value, ValueError)


def test_lenient_warns_and_over_approximates():
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    with pytest.warns(UserWarning, match='uniqueItems'):
        c = compile_schema(schema, lenient=True)
    assert accepts(c, '["a", "a"]') and accepts(c, '["a", "b"]') and not accepts(c, "[1]")
    with pytest.warns(UserWarning, match='format'):
        c = compile_schema({"type": "string", "format": "regex"}, lenient=True)
    assert accepts(c, '"[a-z"')


def test_schema_inputs_and_cache():
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):
        name: str
        price: float
        tags: list[str] = []

    g = xgr.Grammar.from_json_schema(Item)
    assert g.num_rules >= 1
    c = compile_schema(Item)
    assert accepts(c, json.dumps({"name": "x", "price": 1.5, "tags": ["a"]}))
    assert accepts(c, Item(name="y", price=2).model_dump_json())
    assert not accepts(c, json.dumps({"name": "x"}))
    text = json.dumps(Item.model_json_schema())
    assert accepts(compile_schema(text), '{"name": "x", "price": 2}')
    cached = xgr.GrammarCompiler(INFO)
    a = cached.compile_json_schema({"type": "integer", "minimum": 1})
    assert cached.compile_json_schema({"type": "integer", "minimum": 1}) is a  # a dict: by its JSON, in order
    # (not sorted: properties are written in their declared order, so two orders are two grammars)
    ab = cached.compile_json_schema({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                                     "required": ["a", "b"], "additionalProperties": False})
    ba = cached.compile_json_schema({"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
                                     "required": ["a", "b"], "additionalProperties": False})
    assert ab is not ba and accepts(ab, '{"a":1,"b":2}') and accepts(ba, '{"b":2,"a":1}')
    b = cached.compile_json_schema('{"minimum": 1, "type": "integer"}')
    assert cached.compile_json_schema('{"minimum": 1, "type": "integer"}') is b  # a text: by its text
    assert cached.compile_json_schema({"type": "integer", "minimum": 1}, any_whitespace=False) is not a
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.Grammar.from_json_schema(3)


def test_print_converted_ebnf(capsys):
    xgr.Grammar.from_json_schema({"type": "integer"}, print_converted_ebnf=True)
    assert "root ::=" in capsys.readouterr().out


def test_conversion_speed():
    import time
    schema = {"type": "object", "properties": {
        f"field_{i}": {"type": ["string", "integer", "boolean"][i % 3], "description": "x"} for i in range(20)},
        "required": [f"field_{i}" for i in range(0, 20, 2)]}
    json_schema_to_ebnf(schema)
    t0 = time.perf_counter()
    for _ in range(20):
        json_schema_to_ebnf(schema)
    per = (time.perf_counter() - t0) / 20
    assert per < 0.02, f"{per * 1000:.1f} ms per conversion"


# --------------------------------------------------------------------------------------
# random schemas against the oracle
# --------------------------------------------------------------------------------------


def random_schema(rng, depth=0):
    r = rng.random()
    if depth > 2 or r < 0.35:
        return rng.choice([
            {"type": rng.choice(["integer", "number", "string", "boolean", "null"])},
            {"type": "integer", "minimum": rng.randint(-5, 5), "maximum": rng.randint(0, 20)},
            {"type": "number", "exclusiveMinimum": rng.choice([0, 0.5, -1.5])},
            {"multipleOf": rng.choice([2, 3, 0.5, 0.25])},
            {"type": "string", "minLength": rng.randint(0, 3), "maxLength": rng.randint(1, 5)},
            {"type": "string", "pattern": rng.choice(["^a", "b$", "^[a-c]+$", "x|y", "^.{2}$", "^\\d+$"])},
            {"enum": rng.sample([1, 2, "a", "b", None, True, 1.5, [1], {"a": 1}], rng.randint(1, 4))},
            {"const": rng.choice([1, "a", None, [1, "a"], {"a": 1}])},
            {"format": rng.choice(["date", "ipv4", "email", "uuid"])},
            {"minimum": rng.randint(0, 5)},
            {"maxLength": rng.randint(0, 3)},
            True, False, {},
        ])
    kind = rng.choice(["object", "array", "anyOf", "oneOf", "allOf", "not", "if", "typeunion"])
    if kind == "object":
        props = {k: random_schema(rng, depth + 1) for k in rng.sample(["a", "b", "c"], rng.randint(0, 3))}
        s = {"type": "object", "properties": props}
        if props and rng.random() < 0.6:
            s["required"] = rng.sample(list(props), rng.randint(1, len(props)))
        if rng.random() < 0.5:
            s["additionalProperties"] = rng.choice([True, False, random_schema(rng, depth + 1)])
        if rng.random() < 0.2:
            s["patternProperties"] = {rng.choice(["^x", "a", "^[bc]$"]): random_schema(rng, depth + 1)}
        if rng.random() < 0.2:
            s["minProperties"] = rng.randint(0, 2)
        if rng.random() < 0.2:
            s["maxProperties"] = rng.randint(0, 3)
        if rng.random() < 0.15:
            s["propertyNames"] = {"maxLength": 1}
        if rng.random() < 0.15 and props:
            s["dependentRequired"] = {rng.choice(list(props)): [rng.choice(["a", "b", "c"])]}
        return s
    if kind == "array":
        s = {"type": "array"}
        if rng.random() < 0.7:
            s["items"] = random_schema(rng, depth + 1)
        if rng.random() < 0.3:
            s["prefixItems"] = [random_schema(rng, depth + 1) for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.3:
            s["minItems"] = rng.randint(0, 2)
        if rng.random() < 0.3:
            s["maxItems"] = rng.randint(1, 4)
        if rng.random() < 0.2:
            s["contains"] = random_schema(rng, depth + 1)
            if rng.random() < 0.5:
                s["maxContains"] = rng.randint(1, 2)
        return s
    if kind in ("anyOf", "oneOf", "allOf"):
        return {kind: [random_schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]}
    if kind == "not":
        return {"not": random_schema(rng, depth + 1)}
    if kind == "if":
        return {"if": random_schema(rng, depth + 1), "then": random_schema(rng, depth + 1), "else": random_schema(rng, depth + 1)}
    return {"type": rng.sample(["integer", "string", "null", "array", "object", "boolean", "number"], 2)}


@pytest.mark.parametrize("block", range(4))
def test_random_schemas_agree_with_jsonschema(block):
    """Random nested schemas (combinators, objects, arrays, scalars); every schema
    that compiles must agree with the oracle on random instances (any_order=True,
    strict_mode=False: the JSON semantics).  Schemas may raise GrammarError."""
    compiled_count = 0
    for seed in range(block * 60, block * 60 + 60):
        rng = random.Random(1000 + seed)
        schema = random_schema(rng)
        try:
            c = compile_schema(schema, strict_mode=False, any_order=True)
        except GrammarError:
            continue
        compiled_count += 1
        is_valid = oracle(schema)
        insts = pool(rng, 30)
        for _ in range(40):
            insts.append({k: rand_value(rng, 2) for k in rng.sample(["a", "b", "c", "x1", "bb"], rng.randint(0, 4))})
            insts.append([rand_value(rng, 2) for _ in range(rng.randint(0, 4))])
        for inst in insts:
            text = json.dumps(inst)
            if "\\n\"" in text or "\\u2028" in text:  # Python re and ECMA differ there
                continue
            assert accepts(c, text) == is_valid(inst), (json.dumps(schema), text)
    assert compiled_count >= 30


@pytest.mark.parametrize("first_req, extra, counts", [
    (0, False, {}), (150, False, {}), (None, False, {}), (150, True, {}), (None, True, {"minProperties": 2}),
], ids=["req_from_0", "req_from_150", "none_req", "req_from_150_extra", "none_req_min2_extra"])
def test_many_optional_properties(first_req, extra, counts):
    # 300 optional properties (every 7th from first_req required) in order: the
    # chain of "rest" rules is built bottom-up, not by 300 nested calls
    rng = random.Random(11)
    names = [f"p{i:03d}" for i in range(300)]
    required = [] if first_req is None else names[first_req::7]
    schema = {"type": "object", "properties": {n: {"type": "integer"} for n in names},
              "required": required, "additionalProperties": extra, **counts}
    c = compile_schema(schema)
    validator = Draft202012Validator(schema)
    for k in range(40):
        p_opt = 0.3 if k % 4 else 0.004  # some with none or one optional member
        inst = {n: rng.randint(0, 9) for n in names if n in required or rng.random() < p_opt}
        if rng.random() < 0.3:  # drop a required one, or add an unknown one
            if required and rng.random() < 0.5:
                inst.pop(rng.choice(required), None)
            else:
                inst["zzz"] = 1
        assert accepts(c, json.dumps(inst)) == validator.is_valid(inst), sorted(inst)


_ONE_BYTE = []


def _one_byte_compiler():
    if not _ONE_BYTE:
        _ONE_BYTE.append(xgr.GrammarCompiler(xgr.TokenizerInfo([bytes([b]) for b in range(256)])))
    return _ONE_BYTE[0]


@pytest.mark.parametrize("strict", [True, False])
def test_min_properties_above_max_properties_admits_no_object(strict):
    # A find of the schema_oracle fuzz campaign: minProperties 2 with maxProperties 1
    # compiled to "one member", so the oneOf below took {"a b": [...]} by its second
    # branch; no object satisfies both counts (non-objects still do without "type").
    schema = {"oneOf": [{"oneOf": [{"type": "null"}, {"type": ["integer", "string"]}]},
                        {"type": "object", "properties": {"c": {"type": "string", "minLength": 3, "maxLength": 2,
                                                                "pattern": "\u00e9"}},
                         "required": [], "minProperties": 2, "maxProperties": 1}]}
    untyped = {"minProperties": 2, "maxProperties": 1}
    compiler = _one_byte_compiler()
    for sch, texts in ((schema, ['{"a b":[null,12,"\u00e9"]}', '{"a":1}', "null", "12", '"x"', "[1]"]),
                       (untyped, ["{}", '{"a":1}', '{"a":1,"b":2}', "1", '"x"', "[]"])):
        compiled = compiler.compile_json_schema(json.dumps(sch), strict_mode=strict)
        for text in texts:
            m = xgr.GrammarMatcher(compiled)
            ours = m.accept_string(text) and m.is_completed()
            assert ours == Draft202012Validator(sch).is_valid(json.loads(text)), (sch, text)
    with pytest.raises(GrammarError, match="accepts no value"):
        compiler.compile_json_schema(json.dumps({"type": "object", **untyped}), strict_mode=strict)
