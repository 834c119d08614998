"""What the JSON Schema converter's modules share: the keywords it knows, grouped
by the kind of value they constrain, its limits, the value helpers (a JSON value's
type, equality as ``jsonschema`` compares), reference URIs and JSON pointers, rule
names, and the small EBNF writers (sequences, alternatives, repetitions, the
whitespace layout; the rule names a body mentions, read by the core).  Plain data
and functions, no converter state (the keyword checks report through the converter
they are given)."""
from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import Optional, Tuple
from urllib.parse import urldefrag, urljoin

from ._errors import GrammarError
from ._native import ffi as _ffi, lib as _lib
from .grammar import ebnf_string_literal
from . import json_schema_regex as R


_DEFAULT_BASE = "https://xg2.invalid/root.json"
_INDENT_DEPTH_CAP = 32
_MAX_ALTERNATIVES = 512
_MAX_SUBSET_PROPS = 8
_MAX_CASES = 64
_SHARED_VALUE_CHARS = 4096  # a value text repeated past this in one object is a rule

# The most states pattern_keys writes one rule each (its rules are the key machine
# spelled out with every JSON encoding of each label: 150 declared names beside a
# pattern added 800 rules, 2.5 MB of grammar and 1.3 s of the core's compile,
# where the separate cases cost 0.2 s).
_PATTERN_KEYS_MAX_STATES = 256
# A character set spelled by many transitions becomes a rule of its own past this
# length, when uses x length stays below the core's bound on copies of an expanded
# rule (XG2_REGION_COPIES_MAX_NFA: a set's text is longer than its states' estimate).
_SHARED_SET_MIN_CHARS = 64
_SHARED_SET_MAX_COPIES = 4 * 8192
_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")  # an expression that is one rule name
_NAMED_CHAIN_MIN = 32  # objects with more properties keep the rule names of their chain rules
# Nesting bounds.  Compiled with mypyc the converter has no recursion limit (too
# deep a recursion is a segfault), so no recursion may be unbounded: a document is
# at most MAX_SCHEMA_DEPTH arrays/objects deep (checked before converting; MaskBench's
# deepest is 63), a value nested more than _DEFER_DEPTH conversions deep (only
# $ref chains get there) becomes a rule converted later from a worklist, and
# validating an enum value follows at most _MAX_CHECK_DEPTH references.
MAX_SCHEMA_DEPTH = 128
_DEFER_DEPTH = 48
_MAX_CHECK_DEPTH = 256

ANNOTATIONS = {
    "title", "description", "$comment", "examples", "default", "deprecated", "readOnly",
    "writeOnly", "$schema", "$id", "id", "contentMediaType", "contentEncoding", "contentSchema",
    "$anchor", "$dynamicAnchor", "$vocabulary", "$defs", "definitions", "discriminator",
    "xml", "externalDocs", "example", "$recursiveAnchor", "nullable",
}
# Keywords the converter enforces (or rejects explicitly below).
_TYPE_KW = {"type", "enum", "const"}
_NUM_KW = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "$xg:notMultipleOf"}
_STR_KW = {"minLength", "maxLength", "pattern", "format"}
_OBJ_KW = {"properties", "patternProperties", "additionalProperties", "required", "propertyNames",
           "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
           "unevaluatedProperties"}
_ARR_KW = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
           "minContains", "maxContains", "uniqueItems", "unevaluatedItems"}
_APPLICATORS = {"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef",
                "$recursiveRef"}
_INTERNAL = {"$xg:notEnum", "$xg:notPattern", "$xg:notFormat", "$xg:forbid", "$xg:types", "$xg:notMultipleOf"}
_LEGACY_ASSERTIONS = ("disallow", "extends", "divisibleBy")
_CONTAINER_KW = frozenset(_OBJ_KW | _ARR_KW)
# strict_mode applies to object (array) schemas that use one of these keywords; a bare
# {"type": "object"} allows any object, as XGrammar does.
_OBJ_STRICT_KW = frozenset(_OBJ_KW - {"propertyNames", "additionalProperties", "unevaluatedProperties"})
_ARR_STRICT_KW = frozenset(_ARR_KW - {"items", "additionalItems", "unevaluatedItems"})
KNOWN = ANNOTATIONS | _TYPE_KW | _NUM_KW | _STR_KW | _OBJ_KW | _ARR_KW | _APPLICATORS | _INTERNAL


def _strict_applies(parts: list, keywords: frozenset, kind: str, declaring: str) -> bool:
    """strict_mode limits an object (array) to its declared properties (items) when the schema
    uses its keywords AND says it is an object (array): "type" names it, or it declares
    "properties" ("prefixItems"). Keywords on a schema without a type constrain objects
    (arrays) among other values and leave extra properties (items) free, as in XGrammar."""
    def typed(s: dict) -> bool:
        t = s.get("type")
        return t == kind or (isinstance(t, list) and kind in t) or declaring in s
    return (any(not keywords.isdisjoint(s.keys()) for s, _, _ in parts)
            and any(typed(s) for s, _, _ in parts))


_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "string", "int", "frac"})
_TYPE_MAP = {
    "null": {"null"}, "boolean": {"boolean"}, "object": {"object"}, "array": {"array"},
    "string": {"string"}, "integer": {"int"}, "number": {"int", "frac"},
}


def _urljoin(base: str, ref: str) -> str:
    """urljoin that also handles non-hierarchical bases (urn:...)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if ":" in ref.split("/", 1)[0]:
        return ref
    return urljoin(base, ref)


_URL_UNSAFE = re.compile(r"[\t\r\n]")  # urlsplit deletes these


@lru_cache(maxsize=4096)
def _split_ref(base: str, ref: str) -> Tuple[str, str, str]:
    """(absolute URI, document, fragment) of ``ref`` against ``base`` (schemas
    repeat their refs many times)."""
    if ref[:2] == "#/" and "#" not in base and not _URL_UNSAFE.search(ref):
        # a local pointer (most refs, and too many distinct ones in a long
        # $defs for the cache): what urljoin/urldefrag would say, without them
        return base + ref, base, ref[1:]
    full = _urljoin(base, ref)
    return (full, *urldefrag(full))


@lru_cache(maxsize=4096)
def _name_base(hint: str) -> str:
    """A rule name made of a hint (hints recur: property names, keywords)."""
    # (most hints are names already: the regex only for the others)
    plain = hint.isascii() and hint.replace("-", "a").replace(".", "a").replace("_", "a").isalnum()
    base = (hint if plain else _NAME_JUNK.sub("-", hint)).strip("-") or "r"
    if not ("A" <= base[0] <= "Z" or "a" <= base[0] <= "z" or base[0] == "_") or base.startswith("xg2-"):
        base = "r-" + base  # (names starting xg2- are the written-out numeric ranges')
    return base[:60]


_NAME_JUNK = re.compile(r"[^A-Za-z0-9_.-]+")


def _ptr_join(path: str, *tokens) -> str:
    for t in tokens:
        t = str(t)
        if "~" in t or "/" in t:
            t = t.replace("~", "~0").replace("/", "~1")
        path += "/" + t
    return path


def _json_type(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "int" if v.is_integer() else "frac"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise GrammarError(f"not a JSON value: {v!r}")


def _scalar_key(v):
    """A hashable key equal for equal JSON scalars (1 and 1.0 alike, True apart
    from 1); None for arrays and objects."""
    if v is None or isinstance(v, (bool, str)):
        return (type(v).__name__, v)
    if isinstance(v, (int, float)):
        return ("number", v)  # Python compares int and float exactly, and hashes them alike
    return None


def _json_equal(a, b) -> bool:
    ta, tb = _json_type(a), _json_type(b)
    if ta in ("int", "frac") and tb in ("int", "frac"):
        return Fraction(a) == Fraction(b) if not (isinstance(a, float) and isinstance(b, float)) else a == b
    if ta != tb:
        return False
    if ta == "array":
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if ta == "object":
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return a == b


class _Layout:
    def __init__(self, any_ws: bool, indent: Optional[int], separators, max_ws: Optional[int]):
        self.any_ws = any_ws
        self.indent = indent
        if max_ws is None:
            self.ws = r"[ \n\t\r]*"
        else:
            self.ws = r"[ \n\t\r]{0,%d}" % max_ws
        if separators is None:
            separators = (",", ": ") if indent is not None else (", ", ": ")
        self.item_sep, self.key_sep = separators

    def depth_key(self, d: int) -> int:
        return d if (not self.any_ws and self.indent is not None and d < _INDENT_DEPTH_CAP) else -1

    def _free(self, d: int) -> bool:
        return self.any_ws or (self.indent is not None and d >= _INDENT_DEPTH_CAP)

    def first(self, d: int) -> str:
        if self._free(d):
            return self.ws
        if self.indent is None:
            return ""
        return ebnf_string_literal("\n" + " " * (self.indent * (d + 1)))

    def sep(self, d: int) -> str:
        if self._free(d):
            return f'{self.ws} "," {self.ws}'
        if self.indent is None:
            return ebnf_string_literal(self.item_sep)
        return ebnf_string_literal(self.item_sep + "\n" + " " * (self.indent * (d + 1)))

    def last(self, d: int) -> str:
        if self._free(d):
            return self.ws
        if self.indent is None:
            return ""
        return ebnf_string_literal("\n" + " " * (self.indent * d))

    def colon(self, d: int) -> str:
        if self._free(d):
            return f'{self.ws} ":" {self.ws}'
        return ebnf_string_literal(self.key_sep)

    def empty(self, d: int, open_: str, close: str) -> str:
        if self._free(d):
            return f'"{open_}" {self.ws} "{close}"'
        return f'"{open_}{close}"'


def _seq(*items) -> str:
    return " ".join(i for i in items if i and i != '""') or '""'


def _alt(items) -> Optional[str]:
    out = [i for i in dict.fromkeys(items) if i is not None]  # first occurrences, in order
    if not out:
        return None
    if len(out) == 1:
        return out[0]
    return "(" + " | ".join(out) + ")"


class _Unsupported(Exception):
    pass


@lru_cache(maxsize=1024)
def _rule_refs(body: str) -> Tuple[str, ...]:
    """The rule names an EBNF body mentions, each once (helper rules repeat
    across schemas).  Read by the core: a regex here was a fifth of a large
    schema's front-end time."""
    data = body.encode("utf-8", "surrogatepass")
    cap = 2 * len(data)
    buf = _ffi.new("char[]", cap)
    n = _lib.xg2_ebnf_rule_names(data, len(data), buf, cap)
    return tuple(dict.fromkeys(_ffi.unpack(buf, n).decode("ascii").split()))


_NOEVAL = frozenset({("noeval",)})


def _child(s, skip) -> frozenset:
    """The skip set of an in-place child of part (s, skip): its ancestry.  Only
    ancestors with ``unevaluated*`` are ever asked about (uneval_for, value's cache
    key), so only they are recorded: a ``$ref`` chain then carries no growing set
    (which made a chain of N references cost N**2)."""
    if ("noeval",) in skip:
        return _NOEVAL
    anc = frozenset(a for a in skip if isinstance(a, tuple)) if len(skip) else skip
    if "unevaluatedProperties" in s or "unevaluatedItems" in s:
        return anc | {("anc", id(s))}
    return anc


def _under(q_skip, p_schema) -> bool:
    return ("anc", id(p_schema)) in q_skip


def _rep(unit: str, lo: int, hi: Optional[int]) -> str:
    if hi is not None and hi <= 0:
        return '""'
    u = f"({unit})"
    if hi is None:
        if lo == 0:
            return u + "*"
        if lo == 1:
            return u + "+"
        return "%s{%d,}" % (u, lo)
    if lo == hi:
        return "%s{%d}" % (u, lo)
    if (lo, hi) == (0, 1):
        return u + "?"
    return "%s{%d,%d}" % (u, lo, hi)


def _type_list(ts) -> list:
    out = []
    for name in ("null", "boolean", "object", "array", "string"):
        if name in ts:
            out.append(name)
    if "int" in ts and "frac" in ts:
        out.append("number")
    elif "int" in ts:
        out.append("integer")
    elif "frac" in ts:
        raise _Unsupported("non-integral numbers alone cannot be expressed as a type")
    return out


_INERT_KW = ANNOTATIONS | {"$ref", "allOf", "$dynamicRef"}
_SCALAR_TYPES = ("string", "integer", "number", "boolean", "null")
_PLAIN_SCALAR_KW = frozenset({"type", "enum", "const"} | ANNOTATIONS | _NUM_KW | _STR_KW)


_MISSING = object()
_ENUM_ONLY_KW = frozenset({"enum", "const", "type"} | ANNOTATIONS)


def _plain_value(s) -> bool:
    """A schema of one scalar type, or an enum or const, with only those keywords
    (no applicator, nothing unknown)."""
    return type(s) is dict and _PLAIN_SCALAR_KW.issuperset(s) and (
        s.get("type") in _SCALAR_TYPES or ("type" not in s and ("enum" in s or "const" in s)))


def _inert(s: dict, skip=frozenset()) -> bool:
    """A part that constrains nothing by itself any more (its $ref/allOf are
    expanded, the keywords in skip handled)."""
    return all(k in _INERT_KW or k in skip or (k not in KNOWN) for k in s)


def _mentions(s: dict, t: str) -> bool:
    ty = s.get("type")
    return ty == t or (isinstance(ty, list) and t in ty)


def _length_string(rule: str, lo: int, hi: Optional[int]) -> str:
    """A JSON string of rule's strings counted to lo..hi characters (hi None:
    no maximum) by the core's Length."""
    count = f"{lo}" if hi is None else f"{lo}, {hi}"
    return f'"\\"" Length({rule}, {R.json_char()}, {count}) "\\""'


def _nonneg_int(conv, v, kw, path) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (isinstance(v, float) and not v.is_integer()):
        conv.bad(kw, path, "must be a non-negative integer")
    return int(v)


def _count_bounds(conv, s: dict, lo_kw: str, hi_kw: str, path: str, lo: int,
                  hi: Optional[int]) -> Tuple[int, Optional[int]]:
    """lo..hi (hi None: no maximum) narrowed by the schema's count keywords lo_kw and
    hi_kw (minLength/maxLength, minItems/maxItems, minProperties/maxProperties)."""
    if lo_kw in s:
        lo = max(lo, _nonneg_int(conv, s[lo_kw], lo_kw, path))
    if hi_kw in s:
        v = _nonneg_int(conv, s[hi_kw], hi_kw, path)
        hi = v if hi is None else min(hi, v)
    return lo, hi


def _finite_number(conv, v, kw, path) -> None:
    """A numeric keyword's value: a number, and finite (json.loads reads 1e400 as
    inf, which no bound or divisor can be)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        conv.bad(kw, path, "must be a number")
    if isinstance(v, float) and not math.isfinite(v):
        conv.bad(kw, path, f"must be a finite number, got {v!r} (beyond a double's range?)")


def _lcm_frac(a: Fraction, b: Fraction) -> Fraction:
    num = a.numerator * b.numerator // math.gcd(a.numerator, b.numerator)
    den = math.gcd(a.denominator, b.denominator)
    return Fraction(num, den)
