"""An instance checker for the converter (json_schema.py): whether one JSON value is
valid under a schema.  Used where the grammar is built from values, not from
keywords -- an ``enum`` or ``const`` filtered by the rest of its schema, a finite
set of values -- so it needs only what a constant can meet; references are
followed through the converter, at most ``_MAX_CHECK_DEPTH`` deep."""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from ._errors import GrammarError
from . import json_schema_formats as F
from .json_schema_common import (
    ANNOTATIONS, KNOWN, _ARR_KW, _MAX_CHECK_DEPTH, _NUM_KW, _OBJ_KW, _STR_KW, _TYPE_MAP,
    _finite_number, _json_equal, _json_type, _scalar_key,
)

if TYPE_CHECKING:
    from .json_schema import _Converter


def in_enum(conv: _Converter, v, members) -> bool:
    """v equals a member of the enum list (hashed: enums of thousands of values
    are checked member by member against themselves)."""
    if not isinstance(members, list) or len(members) < 16:
        return any(_json_equal(v, w) for w in members)
    entry = conv.enum_index.get(id(members))
    if entry is None or entry[0] is not members:
        scalars, others = set(), []
        for w in members:
            key = _scalar_key(w)
            if key is None:
                others.append(w)
            else:
                scalars.add(key)
        entry = (members, scalars, others)
        conv.enum_index[id(members)] = entry
    key = _scalar_key(v)
    if key is not None:
        return key in entry[1]
    return any(_json_equal(v, w) for w in entry[2])


def check(conv: _Converter, v, s, path, skip=frozenset()) -> bool:
    """Whether value v is valid under schema s (used for enum filtering)."""
    conv.check_depth += 1
    try:
        if conv.check_depth > _MAX_CHECK_DEPTH:
            raise GrammarError(f"the schema at {path or '/'} nests more than {_MAX_CHECK_DEPTH} "
                               "levels deep (through references) where an enum value is checked")
        return check_at(conv, v, s, path, skip)
    finally:
        conv.check_depth -= 1


def check_at(conv: _Converter, v, s, path, skip) -> bool:
    if s is True:
        return True
    if s is False:
        return False
    t = _json_type(v)
    for k, x in s.items():
        if k in skip or k in ANNOTATIONS or k not in KNOWN or k in ("then", "else"):
            continue
        if k == "type":
            ts = set()
            for y in (x if isinstance(x, list) else [x]):
                ts |= _TYPE_MAP.get(y, set())
            if s.get("nullable") is True:
                ts.add("null")
            if t not in ts:
                return False
        elif k == "enum":
            if not in_enum(conv, v, x):
                return False
        elif k == "const":
            if not _json_equal(v, x):
                return False
        elif k == "$xg:notEnum":
            if in_enum(conv, v, x):
                return False
        elif k == "$xg:forbid":
            return False
        elif k == "$xg:types":
            if t not in x:
                return False
        elif k in _NUM_KW:
            if t not in ("int", "frac") or isinstance(x, bool):
                continue
            _finite_number(conv, x, k, path)
            fv = Fraction(repr(v)) if isinstance(v, float) else Fraction(v)
            fx = Fraction(repr(x)) if isinstance(x, float) else Fraction(x)
            if k == "minimum" and (fv < fx or (fv == fx and s.get("exclusiveMinimum") is True)):
                return False
            if k == "maximum" and (fv > fx or (fv == fx and s.get("exclusiveMaximum") is True)):
                return False
            if k == "exclusiveMinimum" and fv <= fx:
                return False
            if k == "exclusiveMaximum" and fv >= fx:
                return False
            if k == "multipleOf" and (fv / fx).denominator != 1:
                return False
            if k == "$xg:notMultipleOf" and (fv / fx).denominator == 1:
                return False
        elif k in _STR_KW or k in ("$xg:notPattern", "$xg:notFormat"):
            if t != "string":
                continue
            if k == "minLength" and len(v) < x:
                return False
            if k == "maxLength" and len(v) > x:
                return False
            if k == "pattern" and not conv.dfa_for(("pat", x), path).accepts(v):
                return False
            if k == "$xg:notPattern" and conv.dfa_for(("pat", x), path).accepts(v):
                return False
            if k == "format" and x in F.FORMAT_PATTERNS and not conv.dfa_for(("fmt", x), path).accepts(v):
                return False
            if k == "$xg:notFormat" and conv.dfa_for(("fmt", x), path).accepts(v):
                return False
        elif k in ("allOf", "anyOf", "oneOf"):
            rs = [check(conv, v, sub, path) for sub in x]
            if k == "allOf" and not all(rs):
                return False
            if k == "anyOf" and not any(rs):
                return False
            if k == "oneOf" and sum(rs) != 1:
                return False
        elif k == "not":
            if check(conv, v, x, path):
                return False
        elif k == "if":
            branch = s.get("then", True) if check(conv, v, x, path) else s.get("else", True)
            if not check(conv, v, branch, path):
                return False
        elif k in ("$ref", "$dynamicRef", "$recursiveRef"):
            tgt, tp = conv.resolve_ref(x, s, path)
            if not check(conv, v, tgt, tp):
                return False
        elif k in _OBJ_KW:
            if t != "object":
                continue
            if not check_object(conv, v, s, k, x, path):
                return False
        elif k in _ARR_KW:
            if t != "array":
                continue
            if not check_array(conv, v, s, k, x, path):
                return False
    return True


def check_object(conv: _Converter, v, s, k, x, path) -> bool:
    if k == "required":
        return all(r in v for r in x)
    if k == "properties":
        return all(check(conv, v[p], sub, path) for p, sub in x.items() if p in v)
    if k == "minProperties":
        return len(v) >= x
    if k == "maxProperties":
        return len(v) <= x
    if k == "propertyNames":
        return all(check(conv, key, x, path) for key in v)
    if k == "patternProperties":
        return all(check(conv, v[key], sub, path) for pat, sub in x.items() for key in v
                   if conv.dfa_for(("pat", pat), path).accepts(key))
    if k in ("additionalProperties", "unevaluatedProperties"):
        props = s.get("properties") or {}
        pats = list((s.get("patternProperties") or {}).keys())
        for key in v:
            if key in props or any(conv.dfa_for(("pat", p), path).accepts(key) for p in pats):
                continue
            if k == "unevaluatedProperties" and "additionalProperties" in s:
                continue
            if k == "unevaluatedProperties" and any(a in s for a in ("allOf", "anyOf", "oneOf", "$ref", "if")):
                raise GrammarError(f'"unevaluatedProperties" at {path}: cannot check a constant')
            if not check(conv, v[key], x, path):
                return False
        return True
    if k == "dependentRequired":
        return all(all(r in v for r in reqs) for p, reqs in x.items() if p in v)
    if k == "dependentSchemas":
        return all(check(conv, v, sub, path) for p, sub in x.items() if p in v)
    if k == "dependencies":
        for p, dep in x.items():
            if p in v:
                if isinstance(dep, list):
                    if not all(r in v for r in dep):
                        return False
                elif not check(conv, v, dep, path):
                    return False
        return True
    return True


def check_array(conv: _Converter, v, s, k, x, path) -> bool:
    if k == "minItems":
        return len(v) >= x
    if k == "maxItems":
        return len(v) <= x
    if k == "prefixItems":
        return all(check(conv, a, sub, path) for a, sub in zip(v, x))
    if k == "items":
        if isinstance(x, list):
            return all(check(conv, a, sub, path) for a, sub in zip(v, x))
        start = len(s.get("prefixItems") or [])
        return all(check(conv, a, x, path) for a in v[start:])
    if k == "additionalItems":
        if isinstance(s.get("items"), list):
            return all(check(conv, a, x, path) for a in v[len(s["items"]):])
        return True
    if k == "uniqueItems":
        if x is True:
            for i in range(len(v)):
                for j in range(i + 1, len(v)):
                    if _json_equal(v[i], v[j]):
                        return False
        return True
    if k in ("contains", "minContains", "maxContains"):
        if "contains" not in s:
            return True
        n = sum(1 for a in v if check(conv, a, s["contains"], path))
        lo = s.get("minContains", 1)
        hi = s.get("maxContains")
        return n >= lo and (hi is None or n <= hi)
    if k == "unevaluatedItems":
        if any(a in s for a in ("allOf", "anyOf", "oneOf", "$ref", "if", "contains")):
            raise GrammarError(f'"unevaluatedItems" at {path}: cannot check a constant')
        if "items" in s:
            return True
        start = len(s.get("prefixItems") or [])
        return all(check(conv, a, x, path) for a in v[start:])
    return True
