"""Negation and disjointness of schemas, for the converter (json_schema.py).

``oneOf`` is exact only where its branches cannot overlap: pairwise-disjoint branches
(by type, constant values or required/forbidden keys) are taken as they are, others
as "this branch and not the others", which needs ``negate``: a schema's complement
as a list of parts whose union it is.  Keywords without an expressible complement
raise ``_Unsupported``, which the converter reports (or drops, lenient)."""
from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

from ._errors import GrammarError
from . import json_schema_check as CHK
from . import json_schema_formats as F
from .json_schema_common import (
    ANNOTATIONS, KNOWN, _ALL_TYPES, _MAX_CASES, _NOEVAL, _TYPE_MAP, _Unsupported, _json_type,
)

if TYPE_CHECKING:
    from .json_schema import _Converter


def one_of_branches(conv: _Converter, subs, kpath) -> List[list]:
    n = len(subs)
    if n == 1 or pairwise_disjoint(conv, [b[0] for b in subs]):
        return [[b] for b in subs]
    # exact: branch i and not every other branch
    out = []
    try:
        negs = [negate(conv, b[0], b[1]) for b in subs]
    except _Unsupported as e:
        conv.fail("oneOf", kpath, f"branches may overlap and cannot be negated ({e})")
        return [[b] for b in subs]
    for i in range(n):
        # product of the negations of the others
        combos = [[subs[i]]]
        for j in range(n):
            if j == i:
                continue
            new = []
            for c in combos:
                for a in negs[j]:
                    new.append(c + [(a, subs[j][1], _NOEVAL)])
            combos = new
            if len(combos) > _MAX_CASES:
                raise GrammarError(f'"oneOf" at {kpath}: too many cases to make the branches exclusive')
            if not combos:
                break
        out.extend(combos)
    return out


def type_sig(conv: _Converter, s, depth: int = 0) -> Optional[frozenset]:
    """Base types a schema can match (None: unknown/any, also past 32 references)."""
    if s is False:
        return frozenset()
    if not isinstance(s, dict) or depth > 32:
        return None
    types = set(_ALL_TYPES)
    known = False
    if "type" in s:
        known = True
        t = s["type"]
        ts = set()
        for x in (t if isinstance(t, list) else [t]):
            ts |= _TYPE_MAP.get(x, set())
        if s.get("nullable") is True:
            ts.add("null")
        types &= ts
    if "$xg:types" in s:
        known = True
        types &= set(s["$xg:types"])
    for k in ("const",):
        if k in s:
            known = True
            types &= {_json_type(s[k])}
    if "enum" in s and isinstance(s["enum"], list):
        known = True
        types &= {_json_type(v) for v in s["enum"]}
    if "$ref" in s:
        try:
            tgt, _ = conv.resolve_ref(s["$ref"], s, "")
            sub = type_sig(conv, tgt, depth + 1)
            if sub is not None:
                known = True
                types &= sub
        except GrammarError:
            pass
    for part in s.get("allOf", []) if isinstance(s.get("allOf"), list) else []:
        sig = type_sig(conv, part, depth + 1)
        if sig is not None:
            known = True
            types &= sig
    return frozenset(types) if known else None


def deref(conv: _Converter, s, depth: int = 0):
    """Follow a bare {"$ref": ...} (annotations aside) to its target."""
    while isinstance(s, dict) and "$ref" in s and depth < 20 and all(
            k == "$ref" or k in ANNOTATIONS for k in s):
        try:
            s, _ = conv.resolve_ref(s["$ref"], s, "")
        except GrammarError:
            return s
        depth += 1
    return s


def pairwise_disjoint(conv: _Converter, schemas) -> bool:
    schemas = [deref(conv, s) for s in schemas]
    sigs = [type_sig(conv, s) for s in schemas]
    for i in range(len(schemas)):
        for j in range(i + 1, len(schemas)):
            if sigs[i] is not None and sigs[j] is not None and not (sigs[i] & sigs[j]):  # type: ignore[operator]
                continue
            if values_disjoint(conv, schemas[i], schemas[j]):
                continue
            if objects_disjoint(conv, schemas[i], schemas[j]):
                continue
            return False
    return True


def values_disjoint(conv: _Converter, a, b) -> bool:
    def vals(s):
        if isinstance(s, dict):
            if "const" in s:
                return [s["const"]]
            if isinstance(s.get("enum"), list):
                return s["enum"]
        return None
    va, vb = vals(a), vals(b)
    if va is None or vb is None:
        return False
    return not any(CHK.in_enum(conv, x, vb) for x in va)


def objects_disjoint(conv: _Converter, a, b) -> bool:
    """Both objects-only and a required property with disjoint values."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return False
    sa, sb = type_sig(conv, a), type_sig(conv, b)
    if sa != frozenset({"object"}) or sb != frozenset({"object"}):
        return False
    pa, pb = a.get("properties") or {}, b.get("properties") or {}
    ra, rb = set(a.get("required") or []), set(b.get("required") or [])
    for k in set(pa) & set(pb):
        if k in ra and k in rb and values_disjoint(conv, deref(conv, pa[k]), deref(conv, pb[k])):
            return True
        if k in ra and k in rb:
            ta, tb = type_sig(conv, pa[k]), type_sig(conv, pb[k])
            if ta is not None and tb is not None and not (ta & tb):
                return True
    for k in ra:
        if pb.get(k) is False:
            return True
    for k in rb:
        if pa.get(k) is False:
            return True
    return False


def negate(conv: _Converter, s, path) -> list:
    """Schemas whose union is the complement of ``s`` (raises/lenient when not
    expressible)."""
    try:
        return _negate(conv, s, path)
    except _Unsupported as e:
        conv.fail("not", path, str(e))
        return [True]


class _Complement:
    """The parts of one schema's complement (their union is everything the schema
    refuses), gathered keyword by keyword, and the keywords handled so far."""

    def __init__(self, conv: _Converter, s: dict) -> None:
        self.conv = conv
        self.s = s
        self.alts: list = []
        self.handled = set(ANNOTATIONS) | {k for k in s if k.startswith("x-")}
        self.ts = set(_ALL_TYPES)  # the types the schema's "type" allows

    def keep(self, d) -> None:
        self.conv.keep.append(d)
        self.alts.append(d)

    def scoped(self, kind: str, d: dict) -> None:
        """d applies to instances of `kind` that also pass `type`."""
        base = set(_TYPE_MAP[kind]) & self.ts
        if not base:
            return
        d = dict(d)
        d["$xg:types"] = sorted(base)
        self.keep(d)


def _negate(conv: _Converter, s, path) -> list:
    if s is True:
        return []
    if s is False:
        return [True]
    if not isinstance(s, dict):
        conv.bad("not", path, "a schema must be an object or a boolean")
    if id(s) in conv.negations:
        return conv.negations[id(s)]
    out: list = []
    conv.negations[id(s)] = out  # recursion guard (filled below)
    n = _Complement(conv, s)
    _negate_types_and_values(n)
    _negate_counts_and_strings(n)
    _negate_members(n)
    _negate_applicators(n, path)
    unknown = sorted(k for k in set(s) - n.handled if k in KNOWN)
    if unknown:
        raise _Unsupported(f'cannot negate "{unknown[0]}"')
    out.extend(n.alts)
    return out


def _negate_types_and_values(n: _Complement) -> None:
    """type, enum/const, numeric bounds and multipleOf; oneOf (none of its
    branches, or two at once)."""
    s, handled = n.s, n.handled
    if "type" in s:
        ts = set()
        for x in (s["type"] if isinstance(s["type"], list) else [s["type"]]):
            ts |= _TYPE_MAP.get(x, set())
        if s.get("nullable") is True:
            ts.add("null")
        rest = _ALL_TYPES - ts
        if rest:
            n.keep({"$xg:types": sorted(rest)})
        handled.add("type")
        n.ts = ts
    for k in ("enum", "const"):
        if k in s:
            vals = [s["const"]] if k == "const" else s["enum"]
            n.keep({"$xg:notEnum": vals})
            handled.add(k)
    for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        if k in s:
            v = s[k]
            if isinstance(v, bool):
                handled.add(k)
                continue
            if k == "minimum":
                excl = s.get("exclusiveMinimum") is True
                n.scoped("number", {"maximum" if excl else "exclusiveMaximum": v})
            elif k == "maximum":
                excl = s.get("exclusiveMaximum") is True
                n.scoped("number", {"minimum" if excl else "exclusiveMinimum": v})
            elif k == "exclusiveMinimum":
                n.scoped("number", {"maximum": v})
            else:
                n.scoped("number", {"minimum": v})
            handled.add(k)
    if "multipleOf" in s:
        n.scoped("number", {"$xg:notMultipleOf": s["multipleOf"]})
        handled.add("multipleOf")
    if "oneOf" in s and isinstance(s["oneOf"], list):
        subs = s["oneOf"]
        n.keep({"allOf": [{"not": sub} for sub in subs]})
        for i in range(len(subs)):
            for j in range(i + 1, len(subs)):
                n.keep({"allOf": [subs[i], subs[j]]})
        handled.add("oneOf")


def _negate_counts_and_strings(n: _Complement) -> None:
    """String lengths, pattern and format; item and property counts; required."""
    s, handled = n.s, n.handled
    _negate_count(n, "string", "minLength", "maxLength")
    if "pattern" in s:
        n.scoped("string", {"$xg:notPattern": s["pattern"]})
        handled.add("pattern")
    if "format" in s:
        if s["format"] in F.FORMAT_PATTERNS:
            n.scoped("string", {"$xg:notFormat": s["format"]})
        handled.add("format")
    _negate_count(n, "array", "minItems", "maxItems")
    _negate_count(n, "object", "minProperties", "maxProperties")
    if "required" in s:
        for r in s["required"]:
            n.scoped("object", {"properties": {r: False}})
        handled.add("required")


def _negate_count(n: _Complement, kind: str, lo_kw: str, hi_kw: str) -> None:
    """A count's bounds (lo_kw at least, hi_kw at most, of `kind` values): one
    below the least, one above the most."""
    s = n.s
    if lo_kw in s:
        if s[lo_kw] > 0:
            n.scoped(kind, {hi_kw: s[lo_kw] - 1})
        n.handled.add(lo_kw)
    if hi_kw in s:
        n.scoped(kind, {lo_kw: s[hi_kw] + 1})
        n.handled.add(hi_kw)


def _negate_members(n: _Complement) -> None:
    """properties, items, prefixItems and contains (one member that breaks its
    schema), and additional / unevaluated members refused (one member)."""
    s, handled = n.s, n.handled
    if "properties" in s and not any(k in s for k in ("additionalProperties", "patternProperties", "unevaluatedProperties")):
        for name, sub in s["properties"].items():
            n.scoped("object", {"required": [name], "properties": {name: {"not": sub}}})
        handled.add("properties")
    if "items" in s and "prefixItems" not in s and isinstance(s["items"], (dict, bool)) and "unevaluatedItems" not in s:
        if s["items"] is not True:
            n.scoped("array", {"contains": {"not": s["items"]}, "items": True})
        handled.add("items")
    if "prefixItems" in s and "items" not in s and "unevaluatedItems" not in s and isinstance(s["prefixItems"], list):
        for j, sub in enumerate(s["prefixItems"]):
            if sub is not True:
                n.scoped("array", {"prefixItems": [True] * j + [{"not": sub}], "minItems": j + 1, "items": True})
        handled.add("prefixItems")
    if "contains" in s and not any(k in s for k in ("minContains", "maxContains")):
        n.scoped("array", {"items": {"not": s["contains"]}})
        handled.add("contains")
    for k in ("additionalProperties", "unevaluatedProperties"):
        if s.get(k) is False and not any(x in s for x in (
                "properties", "patternProperties", "allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas",
                "$dynamicRef", "additionalProperties" if k == "unevaluatedProperties" else "-")):
            n.scoped("object", {"minProperties": 1})
            handled.add(k)
        elif s.get(k) is True:
            handled.add(k)
    for k in ("items", "unevaluatedItems"):
        if s.get(k) is False and not any(x in s for x in (
                "prefixItems", "allOf", "anyOf", "oneOf", "$ref", "if", "contains", "$dynamicRef",
                "items" if k == "unevaluatedItems" else "-")):
            n.scoped("array", {"minItems": 1})
            handled.add(k)
        elif s.get(k) is True:
            handled.add(k)


def _negate_applicators(n: _Complement, path) -> None:
    """not, anyOf, allOf, $ref, if/then/else; uniqueItems has no complement here."""
    s, handled = n.s, n.handled
    if "not" in s:
        n.alts.append(s["not"])
        handled.add("not")
    if "anyOf" in s:
        n.keep({"allOf": [{"not": sub} for sub in s["anyOf"]]})
        handled.add("anyOf")
    if "allOf" in s:
        for sub in s["allOf"]:
            n.keep({"not": sub})
        handled.add("allOf")
    if "$ref" in s:
        tgt, _ = n.conv.resolve_ref(s["$ref"], s, path)
        n.keep({"not": tgt})
        handled.add("$ref")
    if "if" in s:
        then, els = s.get("then", True), s.get("else", True)
        n.keep({"allOf": [s["if"], {"not": then}]})
        n.keep({"allOf": [{"not": s["if"]}, {"not": els}]})
        handled |= {"if", "then", "else"}
    elif "then" in s or "else" in s:
        handled |= {"then", "else"}
    if "uniqueItems" in s:
        if s["uniqueItems"] is True:
            raise _Unsupported("the complement of uniqueItems is not supported")
        handled.add("uniqueItems")
