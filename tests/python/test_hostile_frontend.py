"""Hostile input to the JSON Schema and Lark front-ends (issue 23): every bad
schema ends in the library's own exception, within bounded time and stack, in
both the pure-Python and the mypyc-compiled front-end; long reference chains,
big enums and big grammars compile in time about linear in their size."""

import json
import math
import os
import subprocess
import sys
import textwrap
import time

import pytest

import xg2_plugin as xgr
from xg2_plugin.json_schema import MAX_SCHEMA_DEPTH, json_schema_to_ebnf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---- nesting: run in a child, where a stack overflow is a failed test, not a dead pytest --


def _child(code: str, pure: bool, timeout: int = 120) -> dict:
    """Run code in a fresh interpreter on this checkout's package (the compiled
    front-end where the build made a current one, unless pure); it prints one
    JSON object last."""
    env = dict(os.environ)
    env.pop("XG2_PURE_PYTHON", None)
    if pure:
        env["XG2_PURE_PYTHON"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", "import json, xg2_plugin as xgr\n" + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    assert proc.returncode == 0, f"child crashed (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


_OUTCOME = """
from xg2_plugin import json_schema
try:
    out = {"ok": len(json_schema.json_schema_to_ebnf(schema))}
except xgr.XG2Error as e:
    out = {"error": type(e).__name__, "message": str(e)[:300]}
except BaseException as e:
    out = {"error": "foreign " + type(e).__name__, "message": str(e)[:300]}
out["module"] = json_schema.__file__
print(json.dumps(out))
"""

# (name, code that builds `schema`, expected: "ok" or the exception's name)
_DEEP = [
    ("dict nested 10,000 deep",
     's = {"type": "integer"}\nfor _ in range(10000):\n    s = {"type": "array", "items": s}\nschema = s',
     "GrammarError"),
    ("JSON text nested 10,000 deep",
     "schema = '{\"type\":\"array\",\"items\":' * 10000 + '{}' + '}' * 10000",
     "GrammarError"),
    ("a Python schema that contains itself",
     's = {"type": "array"}\ns["items"] = s\nschema = s',
     "GrammarError"),
    ("enum value nested 10,000 deep",
     'v = 1\nfor _ in range(10000):\n    v = [v]\nschema = {"enum": [v]}',
     "GrammarError"),
    # references nest no document deeply: these must compile
    ("chain of 7,000 object definitions as text",
     'n = 7000\ndefs = {f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}}}'
     ' for i in range(n)}\ndefs[f"d{n}"] = {"type": "integer"}\n'
     'schema = json.dumps({"$defs": defs, "$ref": "#/$defs/d0"})',
     "ok"),
    ("chain of 7,000 array definitions",
     'n = 7000\ndefs = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(n)}\n'
     'defs[f"d{n}"] = {"type": "integer"}\nschema = {"$defs": defs, "$ref": "#/$defs/d0"}',
     "ok"),
    ("chain of 250 anyOf definitions",  # (512 alternatives at most)
     'n = 250\ndefs = {f"d{i}": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}}]}'
     ' for i in range(n)}\ndefs[f"d{n}"] = {"type": "integer"}\nschema = {"$defs": defs, "$ref": "#/$defs/d0"}',
     "ok"),
    # an enum value checked against a schema that is its own reference
    ("enum under a self-reference", 'schema = {"$ref": "#", "enum": [1]}', "GrammarError"),
    ("enum under a 7,000-reference chain",
     'n = 7000\ndefs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}\n'
     'defs[f"d{n}"] = {"type": "integer"}\nschema = {"$defs": defs, "$ref": "#/$defs/d0", "enum": [1, 2]}',
     "GrammarError"),
]


@pytest.mark.parametrize("pure", [True, False], ids=["pure", "build"])
@pytest.mark.parametrize("name,make,expected", _DEEP, ids=[c[0] for c in _DEEP])
def test_deep_schemas_end_cleanly(name, make, expected, pure):
    out = _child(make + "\n" + _OUTCOME, pure)
    if expected == "ok":
        assert "ok" in out, out
    else:
        assert out.get("error") == expected, out
    if pure:
        assert out["module"].endswith(".py")


def test_depth_limit_names_the_pointer_and_keeps_shallower_schemas():
    s = {"type": "integer"}
    for _ in range(MAX_SCHEMA_DEPTH - 1):
        s = {"type": "array", "items": s}
    json_schema_to_ebnf(s)  # exactly at the limit: converted
    with pytest.raises(xgr.GrammarError, match=r"deeper than 128 levels \(at /items/items"):
        json_schema_to_ebnf({"type": "array", "items": s})


def test_a_deferred_reference_to_nothing_is_refused_not_dropped():
    # 60 references deep (past the worklist's depth), a target that matches no value
    n = 60
    defs = {f"d{i}": {"type": "array", "minItems": 1, "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(n)}
    defs[f"d{n}"] = False
    with pytest.raises(xgr.GrammarError):
        json_schema_to_ebnf({"$defs": defs, "$ref": "#/$defs/d0"})


def test_a_long_chain_compiles_to_a_grammar_that_works():
    n = 300
    defs = {f"d{i}": {"type": "array", "items": {"$ref": f"#/$defs/d{i + 1}"}} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    g = xgr.Grammar.from_json_schema({"$defs": defs, "$ref": "#/$defs/d0"}, any_whitespace=False)
    info = xgr.TokenizerInfo([chr(c) for c in range(32, 127)])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar(g))
    assert m.accept_string("[" * n + "7" + "]" * n) and m.is_completed()
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar(g))
    assert not m.accept_string("[" * (n - 1) + "7" + "]" * (n - 1))


# ---- reference chains: linear ---------------------------------------------------------


def test_a_10000_reference_chain_is_fast():
    # was quadratic: 2,000 -> 3.1 s / 362 MB, 10,000 -> 30 s / 2.4 GB
    n = 10000
    defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer", "minimum": 3}
    t0 = time.perf_counter()
    text = json_schema_to_ebnf(json.dumps({"$defs": defs, "$ref": "#/$defs/d0"}))
    assert time.perf_counter() - t0 < 5.0
    assert "root ::=" in text


# ---- keyword values of the wrong kind -----------------------------------------------------

_BAD_VALUES = ["x", -1, 1.5, 10**30, True, None, [], {}, math.inf, -math.inf, math.nan, 0, 1e-400]
_KEYWORDS = {
    "number": ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"],
    "string": ["minLength", "maxLength", "pattern", "format"],
    "array": ["minItems", "maxItems", "items", "prefixItems", "contains", "minContains", "maxContains",
              "uniqueItems", "additionalItems", "unevaluatedItems"],
    "object": ["properties", "required", "additionalProperties", "patternProperties", "minProperties",
               "maxProperties", "propertyNames", "dependentRequired", "dependentSchemas", "dependencies",
               "unevaluatedProperties"],
    None: ["enum", "const", "type", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
           "$dynamicRef", "$defs", "$id", "$anchor", "$schema", "nullable"],
}
_ODD = [
    {"type": "number", "maximum": 1e400}, {"type": "integer", "minimum": -1e400},
    {"type": "number", "minimum": math.nan, "maximum": 3}, {"enum": [1, 2], "maximum": math.inf},
    {"type": "number", "multipleOf": -1}, {"type": "number", "multipleOf": math.inf},
    {"$ref": "#/nope"}, {"$ref": "http://x"}, {"$ref": 5}, {"$ref": "#"},
    {"allOf": [{"$ref": "#"}]}, {"not": {"$ref": "#"}}, {"if": {"$ref": "#"}, "then": 5},
    {"type": ["integer", 5]}, {"type": "object", "properties": {"a": 5}},
    {"type": "object", "patternProperties": {"(": {}}}, {"type": "string", "pattern": "("},
    {"type": "string", "minLength": 10**30}, {"type": "array", "minItems": 10**9},
]


def _hostile():
    for ty, kws in _KEYWORDS.items():
        for kw in kws:
            for v in _BAD_VALUES:
                yield {kw: v} if ty is None else {"type": ty, kw: v}
    yield from _ODD


def test_hostile_keyword_values_end_in_library_errors():
    foreign = []
    for schema in _hostile():
        try:
            json_schema_to_ebnf(schema)
        except xgr.XG2Error:
            pass
        except Exception as e:  # noqa: BLE001 -- what this test looks for
            foreign.append((schema, f"{type(e).__name__}: {e}"))
    assert not foreign, foreign[:10]


def test_non_finite_bounds_name_keyword_and_pointer():
    with pytest.raises(xgr.GrammarError, match=r'"maximum" at /properties/a: must be a finite number'):
        json_schema_to_ebnf('{"type": "object", "properties": {"a": {"type": "number", "maximum": 1e400}}}')
    with pytest.raises(xgr.GrammarError, match=r'"minimum" at /'):
        json_schema_to_ebnf({"type": "number", "minimum": math.nan})


def test_bad_json_text_is_invalid_argument():
    for text in ("{", '{"type": }', b"\xff\xfe{"):
        with pytest.raises(xgr.InvalidArgumentError):
            json_schema_to_ebnf(text)


# ---- number ranges with long bounds ---------------------------------------------------------


def _char_compiler():
    info = xgr.TokenizerInfo([chr(c) for c in range(32, 127)])
    return xgr.GrammarCompiler(info)


def _complete(compiled, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


def _near(x: float, steps: int = 3):
    """x and its neighbouring doubles, and round decimals around it."""
    out = [x]
    lo = hi = x
    for _ in range(steps):
        lo, hi = math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf)
        out += [lo, hi]
    out += [float(f"{x:.3e}"), float(f"{x:.6e}") * (1 + 1e-9), float(f"{x:.6e}") * (1 - 1e-9)]
    return out


def test_wide_number_range_compiles_and_matches_jsonschema():
    jsonschema = pytest.importorskip("jsonschema")
    lo, hi = -1.2345e-7, 9.87e300
    schema = {"type": "number", "minimum": lo, "maximum": hi}
    compiled = _char_compiler().compile_json_schema(schema)  # was: groups nested deeper than 200
    floats = _near(lo) + _near(hi) + [0.0, -0.0, -1e-7, -2e-7, 1e-8, 12.5, 1e300, 1e301, 9.88e300]
    ints = [int(hi), int(hi) + 1, int(hi) - 1, 10**300, 10**301, 987 * 10**298, 0, -1, 12345]
    texts = {json.dumps(v) for v in floats} | {str(v) for v in ints}
    wrong = [(t, ok) for t in sorted(texts)
             if (ok := jsonschema.Draft202012Validator(schema).is_valid(json.loads(t))) != _complete(compiled, t)]
    assert not wrong, wrong
    assert _complete(compiled, str(int(hi))) and not _complete(compiled, str(int(hi) + 1))


def test_long_integer_bounds_both_sides():
    jsonschema = pytest.importorskip("jsonschema")
    lo, hi = 1.2345678901234567e200, 9.87e250
    schema = {"type": "integer", "minimum": lo, "maximum": hi}
    compiled = _char_compiler().compile_json_schema(schema)
    ints = [int(lo) - 1, int(lo), int(lo) + 1, int(hi) - 1, int(hi), int(hi) + 1, 10**201, 10**250, 10**251]
    for t in [str(v) for v in ints] + [json.dumps(v) for v in _near(lo) + _near(hi)]:
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(t)) == _complete(compiled, t), t


# ---- multipleOf 1 on a number is the integer grammar ------------------------------------------


@pytest.mark.parametrize("one", [1, 1.0])
def test_number_multiple_of_one_is_an_integer(one):
    jsonschema = pytest.importorskip("jsonschema")
    schema = {"type": "number", "multipleOf": one}
    # the small integer grammar, not the multiples machinery (was 2,381 chars and 50 ms)
    assert json_schema_to_ebnf(schema) == json_schema_to_ebnf({"type": "integer"})
    compiled = _char_compiler().compile_json_schema({"type": "object", "properties": {"n": schema}})
    # (exponent 308 is refused, as for every unconstrained integer: module docstring)
    for v in ["3", "-7.0", "1200", "1.0e+16", "2.5", "1e-05", "0.0", "-0", "1.5e+300", "1e+400"]:
        t = '{"n": %s}' % v
        x = json.loads(v)  # 1e+400 is inf, no number (jsonschema itself fails on it)
        valid = math.isfinite(x) and jsonschema.Draft202012Validator(schema).is_valid(x)
        assert _complete(compiled, t) == valid, v


# ---- Lark ------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    "(" * 10000 + '"a"' + ")" * 10000,
    "[" * 5000 + '"a"' + "]" * 5000,
    "/" + "(" * 5000 + "a" + ")" * 5000 + "/",
    "/" + "(" * 400 + "a" + ")" * 400 + "/",
], ids=["parentheses", "brackets", "regex", "regex-400"])
def test_deep_lark_grammars_end_in_grammar_error(body):
    from xg2_plugin.lark import lark_to_ebnf

    with pytest.raises(xgr.GrammarError):
        lark_to_ebnf("start: " + body)


def test_lark_groups_up_to_the_limit_compile():
    xgr.Grammar.from_lark("start: " + "(" * 99 + '"a"' + ")" * 99)


# ---- budgets: the front-ends check the calling thread's compile budget ---------------------


def _mixed_enum(n):
    return [[i, f"s{i}", i + 0.5, {"k": i}, [i], None, True][i % 7] if i % 7 else i for i in range(n)]


def test_enum_conversion_stops_at_the_time_budget():
    from xg2_plugin._budget import compile_budget

    # (converting it all takes seconds)
    t0 = time.perf_counter()
    with pytest.raises(xgr.LimitExceededError, match="compile time limit of 200 ms"):
        with compile_budget(time_limit_ms=200, memory_limit_bytes=None):
            json_schema_to_ebnf({"enum": _mixed_enum(100_000)})
    assert time.perf_counter() - t0 < 5.0


def test_enum_conversion_stops_at_the_memory_budget():
    from xg2_plugin._budget import compile_budget

    with pytest.raises(xgr.LimitExceededError, match=r"memory limit of 262144 bytes exceeded \(json_schema: enum"):
        with compile_budget(time_limit_ms=None, memory_limit_bytes=256 << 10):
            json_schema_to_ebnf({"enum": _mixed_enum(50_000)})


def test_reference_chain_stops_at_the_time_budget():
    from xg2_plugin._budget import compile_budget

    n = 5000
    defs = {f"d{i}": {"type": "object", "properties": {"x": {"$ref": f"#/$defs/d{i + 1}"}}} for i in range(n)}
    defs[f"d{n}"] = {"type": "integer"}
    with pytest.raises(xgr.LimitExceededError, match="json_schema: "):
        with compile_budget(time_limit_ms=20, memory_limit_bytes=None):
            json_schema_to_ebnf({"$defs": defs, "$ref": "#/$defs/d0"})


def test_lark_conversion_stops_at_the_budget():
    from xg2_plugin._budget import compile_budget
    from xg2_plugin.lark import lark_to_ebnf

    n = 20_000
    text = "\n".join(["start: r0"] + [f'r{i}: r{i + 1} | "x{i}"' for i in range(n - 1)] + [f'r{n - 1}: "end"'])
    with pytest.raises(xgr.LimitExceededError, match="lark: "):
        with compile_budget(time_limit_ms=5, memory_limit_bytes=None):
            lark_to_ebnf(text)
    with pytest.raises(xgr.LimitExceededError, match="lark: rule"):
        with compile_budget(time_limit_ms=None, memory_limit_bytes=64 << 10):
            lark_to_ebnf(text)


def test_choices_check_the_budget():
    from xg2_plugin._budget import compile_budget
    from xg2_plugin.choice import choices_to_ebnf

    with pytest.raises(xgr.LimitExceededError, match="memory limit of 65536 bytes exceeded \\(choices\\)"):
        with compile_budget(time_limit_ms=None, memory_limit_bytes=64 << 10):
            choices_to_ebnf([f"choice-{i}" for i in range(20000)])
    with pytest.raises(xgr.InvalidArgumentError, match=r"choices\[1\] contains the lone surrogate U\+D800"):
        choices_to_ebnf(["a", "b\ud800c"])
