"""atheris differential target: the JSON Schema front-end against ``jsonschema``.

The input is read as a script (fuzzlib.Script) that builds a small schema from a
structured grammar of keywords (type, properties, required, additionalProperties, items,
prefixItems, min/maxItems, enum, const, minimum/maximum (exclusive too), multipleOf on
integers, min/maxLength, pattern, anyOf/allOf/oneOf/not) and then a few instances.  Where
our compile succeeds, ``accept_string(json.dumps(instance))`` followed by completion must
equal ``Draft202012Validator(schema).is_valid(instance)``.

What keeps this honest (only real disagreements fail):
* the engine's text form is the one compiled for: compact separators, no whitespace,
  ``ensure_ascii`` either way (both spellings are documented as accepted);
* ``strict_mode=False`` (strict mode forbids undeclared properties, which JSON Schema
  allows) and ``any_order=True`` (JSON Schema ignores key order);
* numbers: small integers and floats with short fractions only, never integral floats
  (``1.0`` is an integer to JSON Schema but a different text), no exponents;
* no ``format``; patterns avoid ``$`` and ``.`` (Python's ``re``, which jsonschema uses,
  differs from ECMA-262 there) and instances use ASCII digits only (``\\d``).
"""

import json

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

import fuzzlib
from fuzzlib import COMPILER, EXPECTED, Script, budget, xgr

NAMES = ["a", "b", "c", "é", "a b"]
CHARS = ["a", "b", "c", "z", "1", "2", " ", "é", '"', "\\", "\n", "日", "😀", "/"]
FLOATS = [0.5, -1.5, 2.25, 0.125, -0.75, 10.5]
PATTERNS = ["^a", "b", "^[a-c]*", "^\\d{2}", "[^a]", "c|z", "^(ab)+", "é"]
TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]


def small_int(s: Script) -> int:
    return s.byte() % 24 - 4


def gen_value(s: Script, depth: int = 0):
    k = s.byte() % (9 if depth < 2 else 6)
    if k == 0:
        return None
    if k == 1:
        return bool(s.byte() & 1)
    if k == 2:
        return small_int(s)
    if k == 3:
        return FLOATS[s.byte() % len(FLOATS)]
    if k in (4, 5):
        return "".join(CHARS[s.byte() % len(CHARS)] for _ in range(s.byte() % 5))
    if k in (6, 7):
        return [gen_value(s, depth + 1) for _ in range(s.byte() % 4)]
    return {NAMES[s.byte() % len(NAMES)]: gen_value(s, depth + 1) for _ in range(s.byte() % 4)}


def _typed(s: Script, t: str, depth: int) -> dict:
    out = {"type": t}
    flags = s.byte()
    if t == "string":
        if flags & 1:
            out["minLength"] = s.byte() % 4
        if flags & 2:
            out["maxLength"] = s.byte() % 5
        if flags & 4:
            out["pattern"] = PATTERNS[s.byte() % len(PATTERNS)]
    elif t in ("integer", "number"):
        bound = small_int if t == "integer" else (lambda s: FLOATS[s.byte() % len(FLOATS)])
        for bit, kw in ((1, "minimum"), (2, "maximum"), (4, "exclusiveMinimum"), (8, "exclusiveMaximum")):
            if flags & bit:
                out[kw] = bound(s)
        if t == "integer" and flags & 16:
            out["multipleOf"] = [2, 3, 5][s.byte() % 3]
    elif t == "object":
        props = {NAMES[s.byte() % len(NAMES)]: gen_schema(s, depth + 1) for _ in range(s.byte() % 4)}
        if props:
            out["properties"] = props
        if flags & 1 and props:
            out["required"] = sorted(n for i, n in enumerate(props) if s.byte() & 1)
        if flags & 2:
            out["additionalProperties"] = bool(s.byte() & 1) if flags & 4 else gen_schema(s, depth + 1)
        if flags & 8:
            out["minProperties"] = s.byte() % 3
        if flags & 16:
            out["maxProperties"] = s.byte() % 4
    elif t == "array":
        if flags & 1:
            out["prefixItems"] = [gen_schema(s, depth + 1) for _ in range(1 + s.byte() % 2)]
        if flags & 2:
            out["items"] = bool(s.byte() & 1) if flags & 4 else gen_schema(s, depth + 1)
        if flags & 8:
            out["minItems"] = s.byte() % 3
        if flags & 16:
            out["maxItems"] = s.byte() % 4
    return out


def gen_schema(s: Script, depth: int = 0):
    k = s.byte() % (12 if depth < 3 else 8)
    if k < 5:
        return _typed(s, TYPES[s.byte() % len(TYPES)], depth)
    if k == 5:
        return {"enum": [gen_value(s, 2) for _ in range(1 + s.byte() % 3)]}
    if k == 6:
        return {"const": gen_value(s, 1)}
    if k == 7:
        return {"type": [TYPES[s.byte() % len(TYPES)], TYPES[s.byte() % len(TYPES)]]}
    if k == 8:
        return {"not": gen_schema(s, depth + 1)}
    comb = ["anyOf", "allOf", "oneOf", "anyOf"][k - 8]
    return {comb: [gen_schema(s, depth + 1) for _ in range(2)]}


def test_one_input(data: bytes) -> None:
    s = Script(data)
    schema = gen_schema(s)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return
    try:
        with budget():
            compiled = COMPILER.compile_json_schema(
                json.dumps(schema), any_whitespace=False, separators=(",", ":"),
                strict_mode=False, any_order=True)
    except EXPECTED:
        return
    validator = Draft202012Validator(schema)
    for _ in range(4):
        instance = gen_value(s)
        text = json.dumps(instance, separators=(",", ":"), ensure_ascii=bool(s.byte() & 1))
        m = xgr.GrammarMatcher(compiled)
        ours = m.accept_string(text) and m.is_completed()
        theirs = validator.is_valid(instance)
        assert ours == theirs, (f"schema {json.dumps(schema)} instance {text}: "
                                f"xg2 {'accepts' if ours else 'rejects'}, jsonschema "
                                f"{'accepts' if theirs else 'rejects'}")
        if not s.more():
            break


if __name__ == "__main__":
    fuzzlib.main(test_one_input)
