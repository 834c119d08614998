"""JSON Schema (draft 2020-12, with draft-4..2019-09 spellings) to EBNF.

``json_schema_to_ebnf(schema, ...)`` returns grammar text in the core's dialect;
``Grammar.from_json_schema`` parses it.  The grammar is *exact*: the JSON texts it
accepts are those whose value is valid under the schema (values compared the way
Python's ``json`` and ``jsonschema`` compare them; see ``json_schema_formats`` for
numbers).  Where exactness is out of reach the converter raises ``GrammarError``
naming the keyword and its JSON-pointer path, or with ``lenient=True`` drops the
constraint (accepting more) and warns.

Semantics worth knowing:

* ``strict_mode=True`` (XGrammar's meaning): an object schema that uses object
  keywords (``properties``, ``required``, ``minProperties``...) and says nothing
  about extra properties allows none, as if ``unevaluatedProperties: false`` (names
  listed in ``required`` count as declared, with any value); likewise arrays with
  array keywords but no ``items``/``unevaluatedItems`` allow no items past
  ``prefixItems``.  A bare ``{"type": "object"}`` or ``{"type": "array"}`` (and
  ``true``, ``{}``) still allows any object or array, as in XGrammar; so does a
  schema that uses such keywords without saying it is an object (array): no
  ``type`` naming it, no ``properties`` (``prefixItems``).
* Properties are generated in the schema's order (``any_order=False``); extra
  properties (``additionalProperties``/``patternProperties``) come after the
  declared ones, and can never be a declared name in disguise (escapes included).
* ``format``: the formats of :data:`json_schema_formats.FORMAT_PATTERNS` are
  enforced; ``regex``, ``idn-hostname``, ``iri`` and ``iri-reference`` cannot be
  and raise (lenient: ignored with a warning); unknown formats are annotations and
  are ignored, as the specification says.
* ``pattern`` uses ECMA-262 semantics (``\\d`` is ASCII, ``.`` excludes line
  terminators, ``$`` is the end of the string).
* Strings with lone surrogate escapes (``"\\ud800"``) are accepted only by
  unconstrained strings.
* Property names and string constants match the spellings ``json.dumps`` writes
  (with or without ``ensure_ascii``, hex digits in either case); other escapes of
  the same text (``"\\u0061"`` for ``"a"``, ``"\\/"``) are refused there, never
  mistaken for another name.  Strings under ``pattern``/``format``/length
  constraints accept every escape.
* With ``indent``, values nested deeper than 32 levels accept any whitespace (a
  recursive schema cannot be indented exactly by a context-free grammar).

Exact except where noted here (each point only ever *rejects* texts that
``json.dumps`` of a valid instance never produces, unless it says otherwise):

* constrained numbers accept integer texts, fixed-point texts within [1e-7, 1e17)
  and scientific texts with exponent >= 16 or <= -5 and at most 16 mantissa
  fraction digits -- the forms ``repr`` writes; ``1e2`` or ``12.5e3`` are refused;
  unconstrained integers (and numbers with ``multipleOf: 1``, which are integers)
  stop at exponent 307 (``1e+308`` is refused);
* ``multipleOf`` is decimal arithmetic on the text: for floats >= 2**53 the
  decimal ``repr`` (what the text says) is what is tested, not the binary value
  jsonschema divides (they can differ for divisors with factors other than 2, 5);
* ``uuid``: the canonical 8-4-4-4-12 form only (Python's ``UUID()`` also takes
  braces, ``urn:uuid:`` prefixes, ``+`` and ``_`` in odd places); ``email`` and
  ``idn-email`` are Python jsonschema's check (an ``@``); ``hostname``: label
  syntax and 63-character labels, but not the 253-character total (accepts more);
* ``date-time``/``time`` follow rfc3339-validator: no leap second 60, ``t``/``z``
  in either case, and one trailing newline (Python's ``$``);
* in strict mode, names listed in ``required`` count as declared properties;
* ``const``/``enum`` objects match in the constant's key order (any order with
  ``any_order=True``, up to 5 keys);
* ``unevaluatedProperties``/``unevaluatedItems`` see the annotations of the
  ``anyOf``/``oneOf`` branch an instance is matched by, not those of every
  branch it happens to match too (such instances are rejected).

Raised (``GrammarError``, or dropped with a warning under ``lenient``): remote
``$ref``; ``$dynamicRef`` with several dynamic anchors of one name and
``$recursiveRef``; ``uniqueItems`` over an infinite item space or with
``prefixItems``/``contains``; ``not`` of keywords without an expressible
complement (``multipleOf`` other than powers of ten, ``patternProperties``,
``additionalProperties`` with a schema, object/array constants); ``oneOf`` with
branches that may overlap and cannot be negated; ``multipleOf`` with a non-zero
bound and more than 1000 multiples in range; more than 4 ``patternProperties``;
string constraints whose automaton exceeds 4000 states; ``any_order`` with more
than 8 properties; formats ``regex``, ``idn-hostname``, ``iri``,
``iri-reference``; draft-3 ``disallow``/``extends``/``divisibleBy``; schemas that
accept no value at all; documents nesting arrays/objects more than
``MAX_SCHEMA_DEPTH`` (128) deep, enum values included (a deeper recursion would
overflow the stack of the compiled front-end), and enum values checked through
more than 256 nested references.  ``$ref`` chains have no depth limit: a value
reached more than 48 conversions deep is converted later from a worklist (where
such a deferred target turns out to match no value, that raises too).
"""

from __future__ import annotations

import json
import math
import re
import warnings
from collections import Counter
from fractions import Fraction
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urldefrag, urljoin

from ._errors import GrammarError, InvalidArgumentError, XG2Error
from .grammar import ebnf_string_literal
from . import _budget
from ._native import ffi as _ffi, lib as _lib
from . import json_schema_formats as F
from . import json_schema_fragments as FR
from . import json_schema_presets as P
from . import json_schema_dfa as D
from . import json_schema_regex as R

__all__ = ["json_schema_to_ebnf"]

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
    if not ("A" <= base[0] <= "Z" or "a" <= base[0] <= "z" or base[0] == "_"):
        base = "r-" + base
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


class _Converter:
    def __init__(self, schema, *, any_whitespace=True, indent=None, separators=None,
                 strict_mode=True, max_whitespace_cnt=None, any_order=False, lenient=False):
        self.root = schema
        self.layout = _Layout(any_whitespace, indent, separators, max_whitespace_cnt)
        self.strict = strict_mode
        self.any_order = any_order
        self.lenient = lenient
        # draft-04 (and -03) integers are integer texts: 1.0 is a number, not an integer
        dialect = schema.get("$schema") if isinstance(schema, dict) else None
        self.integer_kind = F.INTEGER_TEXT if isinstance(dialect, str) and re.search(
            r"draft-0[34]/", dialect) else True
        self.rules: Dict[str, str] = {}
        self.rule_names: Dict[str, Tuple[str, ...]] = {}  # see add_rule
        self.enum_index: Dict[int, Any] = {}
        self.used_names = set()
        self.hoisted: Dict[str, str] = {}
        self.member_names: Dict[str, Tuple[str, ...]] = {}  # object member text -> its rule names
        self.name_counts: Dict[str, int] = {}
        self.rule_cache: Dict[Any, Optional[str]] = {}
        self.plain_values: Dict[Any, Optional[str]] = {}
        self.in_progress = set()
        self.negations: Dict[int, list] = {}
        self.resources: Dict[str, Any] = {}
        self.anchors: Dict[str, Tuple[Any, str]] = {}
        self.base_of: Dict[int, str] = {}
        self.dfa_cache: Dict[Any, Any] = {}
        self.alt_count = 0
        self.keep = []  # internal dicts kept alive (their ids are cache keys)
        self.dynamic_count: Dict[str, int] = {}
        self.indexed = False  # resources, anchors and bases: walked on the first reference
        self.any_rule_names: Dict[int, str] = {}
        # local $ref targets shared with other documents (json_schema_fragments)
        self.ref_of: Dict[int, str] = {}  # id(target) -> the $ref that reached it first
        self.target_keys = None  # FR.TargetKeys, or False where pointers alone do not say
        self.fragment_names: Dict[Any, str] = {}  # memo key -> its rule here
        self.fragment_of_name: Dict[str, Tuple[Any, str]] = {}  # that rule -> (key, $ref)
        self.alt_frames: List[list] = []
        self.pointers: Dict[Tuple[str, str], Tuple[Any, str]] = {}  # (document, fragment) -> (node, path)
        self.depth = 0  # value() calls in progress (see _DEFER_DEPTH)
        self.pending: List[Any] = []  # deferred values: (cache key, parts, d, rule name)
        self.check_depth = 0

    # ------------------------------------------------------------------ errors
    def fail(self, keyword: str, path: str, why: str = "") -> None:
        """Raise, or warn when lenient (the caller then over-approximates)."""
        msg = f'unsupported keyword "{keyword}" at {path or "/"}'
        if why:
            msg += f": {why}"
        if not self.lenient:
            raise GrammarError(msg)
        warnings.warn(msg + " (ignored: lenient)", stacklevel=4)

    def bad(self, keyword: str, path: str, why: str) -> None:
        raise GrammarError(f'invalid schema: keyword "{keyword}" at {path or "/"}: {why}')

    # ------------------------------------------------------------------ rules
    def new_name(self, hint: str) -> str:
        base = _name_base(hint)
        i = self.name_counts.get(base, 0)
        while True:
            i += 1
            name = base if i == 1 else f"{base}-{i}"
            if name not in self.used_names and name != "root":
                break
        self.name_counts[base] = i
        self.used_names.add(name)
        return name

    def string_except(self, words) -> Tuple[str, Tuple[str, ...]]:
        """Every string content but ``words`` (D.string_except), and its rule names."""
        one = self.shared("json-char", R.json_char())
        esc = self.shared("json-char-nonprint", R.canonical_escapes())
        return D.string_except(words, self.shared("json-chars", one + "*"), one, esc)

    def machine(self, hint: str, start, succ, final) -> Optional[str]:
        """A right-linear family of rules: ``start`` a list of (expr, state),
        ``succ(state)`` a list of (expr, state), ``final(state)`` whether it may end.
        Only states that can still finish get a rule; returns the start expression
        (None when nothing can finish)."""
        graph: Dict[Any, list] = {}
        todo = [st for _, st in start]
        while todo:
            st = todo.pop()
            if st in graph:
                continue
            if len(graph) & 255 == 0:
                _budget.check(f"json_schema: automaton ({hint})")
            edges = succ(st)
            graph[st] = edges
            if len(graph) > 20000:
                raise GrammarError(f"schema too large: more than 20000 automaton states ({hint})")
            todo.extend(t for _, t in edges if t not in graph)
        live = {st for st in graph if final(st)}
        rev: Dict[Any, list] = {}
        for st, edges in graph.items():
            for _, t in edges:
                rev.setdefault(t, []).append(st)
        stack = list(live)
        while stack:
            t = stack.pop()
            for p in rev.get(t, ()):
                if p not in live:
                    live.add(p)
                    stack.append(p)
        names = {}

        def name(st):
            if st not in names:
                names[st] = self.new_name(hint)
            return names[st]

        for st in graph:
            if st not in live:
                continue
            alts = [_seq(e, name(t)) for e, t in graph[st] if t in live]
            if final(st):
                alts.append('""')
            self.add_rule(name(st), " | ".join(alts))
        return _alt([_seq(e, name(t)) for e, t in start if t in live])

    def hoist(self, expr: Optional[str], hint: str, limit: int = 400) -> Optional[str]:
        """A long expression as a rule (one per distinct text), else the expression."""
        if expr is None or len(expr) <= limit:
            return expr
        name = self.hoisted.get(expr)
        if name is None:
            name = self.new_name(hint)
            self.add_rule(name, expr)
            self.hoisted[expr] = name
        return name

    def shared(self, name: str, body: str) -> str:
        """A helper rule defined once per grammar."""
        if name not in self.rules:
            self.add_rule(name, body)
        return name

    def add_rule(self, name: str, body: str, names: Optional[Tuple[str, ...]] = None) -> None:
        """Define a rule; ``names``: the rule names the body uses, when known (so
        convert() need not read a long body back)."""
        self.used_names.add(name)
        self.rules[name] = body
        _budget.charge(len(name) + len(body), "json_schema: rule " + name)
        if names is not None:
            self.rule_names[name] = names
        elif name in self.rule_names:
            del self.rule_names[name]

    # ------------------------------------------------------------------ refs
    def index(self, node, base: str, ptr: str) -> None:
        if isinstance(node, dict):
            nid = node.get("$id") if isinstance(node.get("$id"), str) else None
            if nid is None and isinstance(node.get("id"), str) and "$schema" in node and "draft-04" in str(node["$schema"]):
                nid = node["id"]
            if nid is not None:
                base = _urljoin(base, nid)
                base, frag = urldefrag(base)
                self.resources.setdefault(base, (node, ptr))
            if not ptr:
                self.resources.setdefault(base, (node, ptr))
            for akw in ("$anchor", "$dynamicAnchor"):
                if isinstance(node.get(akw), str):
                    self.anchors.setdefault(base + "#" + node[akw], (node, ptr))
            if isinstance(node.get("$dynamicAnchor"), str):
                self.dynamic_count[node["$dynamicAnchor"]] = self.dynamic_count.get(node["$dynamicAnchor"], 0) + 1
            self.base_of[id(node)] = base
            for k, v in node.items():
                if k in ("enum", "const", "default", "examples", "example"):
                    continue
                if isinstance(v, (dict, list)):
                    self.index(v, base, _ptr_join(ptr, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if isinstance(v, (dict, list)):
                    self.index(v, base, _ptr_join(ptr, i))

    def ensure_index(self) -> None:
        if not self.indexed:
            self.indexed = True
            self.index(self.root, _DEFAULT_BASE, "")

    def resolve_ref(self, ref: str, holder: dict, path: str) -> Tuple[Any, str]:
        self.ensure_index()
        # (a ref that is no string fails uncached: its error stays the same)
        split = _split_ref if isinstance(ref, str) else _split_ref.__wrapped__
        full, doc, frag = split(self.base_of.get(id(holder), _DEFAULT_BASE), ref)
        if full in self.anchors:
            return self.anchors[full]
        if doc not in self.resources:
            self.fail("$ref", path, f"cannot resolve {ref!r} (remote references are not fetched)")
            return True, path
        node, ptr = self.resources[doc]
        if frag == "":
            return node, ptr
        if not frag.startswith("/"):
            self.fail("$ref", path, f"unknown anchor in {ref!r}")
            return True, path
        hit = self.pointers.get((doc, frag))
        if hit is not None:  # (a document repeats its refs: walk each pointer once)
            node, ptr = hit
        else:
            node, ptr = self.walk_pointer(node, ptr, frag, ref, path)
            if node is True:
                return node, ptr
            self.pointers[(doc, frag)] = (node, ptr)
        if isinstance(node, dict):
            self.base_of.setdefault(id(node), self.base_of.get(id(holder), _DEFAULT_BASE))
            if isinstance(ref, str) and ref.startswith("#/"):
                self.ref_of.setdefault(id(node), ref)
        return node, ptr

    def walk_pointer(self, node, ptr: str, frag: str, ref: str, path: str) -> Tuple[Any, str]:
        for raw in frag.split("/")[1:]:
            node, tok = FR.pointer_child(node, raw)
            if node is FR.MISSING:
                self.fail("$ref", path, f"cannot resolve {ref!r}")
                return True, path
            ptr = _ptr_join(ptr, tok)
        return node, ptr

    # ------------------------------------------------------------------ parts
    def flatten(self, conj):
        """Expand $ref and allOf; None when a part is `false`.  Parts: (schema, path,
        skip) with skip the keywords already handled for that schema."""
        out: List[list] = []
        pos: Dict[int, int] = {}
        stack = list(conj)
        i = 0
        while i < len(stack):
            s, path, skip = stack[i]
            i += 1
            if s is True:
                continue
            if s is False:
                return None
            if not isinstance(s, dict):
                self.bad("schema", path, "a schema must be an object or a boolean")
            if id(s) in pos:
                k = pos[id(s)]
                out[k][2] = out[k][2] | skip
                continue
            pos[id(s)] = len(out)
            out.append([s, path, skip])
            if "type" in s:
                t = s["type"]
                if not (isinstance(t, str) or (isinstance(t, list) and all(isinstance(x, str) for x in t))):
                    self.bad("type", path, "must be a type name or an array of type names")
                for x in (t if isinstance(t, list) else [t]):
                    if x not in _TYPE_MAP and x != "any":
                        self.bad("type", path, f"unknown type {x!r}")
            for kw in _LEGACY_ASSERTIONS:
                if kw in s and kw not in skip:
                    self.fail(kw, _ptr_join(path, kw), "a draft-3 keyword (not supported)")
            # other unknown keywords are annotations (specification)
            if "$ref" in s and "$ref" not in skip:
                ref = s["$ref"]
                if not isinstance(ref, str):
                    self.bad("$ref", path, "must be a string")
                target, tpath = self.resolve_ref(ref, s, _ptr_join(path, "$ref"))
                stack.append((target, tpath, _child(s, skip)))
            for kw in ("$dynamicRef", "$recursiveRef"):
                if kw in s and kw not in skip:
                    ref = s[kw]
                    if kw == "$dynamicRef" and isinstance(ref, str) and "#" in ref and not ref.split("#", 1)[1].startswith("/"):
                        # static resolution is exact when the anchor is not dynamic
                        # anywhere else (one $dynamicAnchor of that name at most)
                        self.ensure_index()
                        if self.dynamic_count.get(ref.split("#", 1)[1], 0) > 1:
                            self.fail(kw, _ptr_join(path, kw), "dynamic scopes are not supported")
                            continue
                    if kw == "$recursiveRef":
                        self.fail(kw, _ptr_join(path, kw), "dynamic scopes are not supported")
                        continue
                    target, tpath = self.resolve_ref(ref, s, _ptr_join(path, kw))
                    stack.append((target, tpath, _child(s, skip)))
            if "allOf" in s and "allOf" not in skip:
                subs = s["allOf"]
                if not isinstance(subs, list):
                    self.bad("allOf", path, "must be an array")
                for j, sub in enumerate(subs):
                    stack.append((sub, _ptr_join(path, "allOf", j), _child(s, skip)))
        return [tuple(p) for p in out]

    # ------------------------------------------------------------------ values
    def any_value(self, d: int) -> str:
        """The builtin any-JSON-value grammar (layout-aware)."""
        key = ("any", self.layout.depth_key(d))
        if key in self.rule_cache:
            return self.rule_cache[key]  # type: ignore[return-value]
        name = self.new_name("any-value" + ("" if key[1] < 0 else f"-{d}"))
        self.rule_cache[key] = name
        lay = self.layout
        if key[1] < 0:
            obj_name = self.new_name("any-object")
            arr_name = self.new_name("any-array")
            inner = name
            self.add_rule(name, _alt([obj_name, arr_name, R.JSON_STRING_LOOSE, F.JSON_NUMBER, '"true"', '"false"', '"null"']))  # type: ignore[arg-type]
            member = f"{R.JSON_STRING_LOOSE} {lay.colon(d)} {inner}"
            self.add_rule(obj_name, f'"{{" {lay.ws} ({member} ({lay.sep(d)} {member})* {lay.ws})? "}}"')
            self.add_rule(arr_name, f'"[" {lay.ws} ({inner} ({lay.sep(d)} {inner})* {lay.ws})? "]"')
            return name
        inner = self.any_value(d + 1)
        member = f"{R.JSON_STRING_LOOSE} {lay.colon(d)} {inner}"
        obj = f'("{{" {lay.first(d)} {member} ({lay.sep(d)} {member})* {lay.last(d)} "}}" | {lay.empty(d, "{", "}")})'
        arr = f'("[" {lay.first(d)} {inner} ({lay.sep(d)} {inner})* {lay.last(d)} "]" | {lay.empty(d, "[", "]")})'
        self.add_rule(name, _alt([obj, arr, R.JSON_STRING_LOOSE, F.JSON_NUMBER, '"true"', '"false"', '"null"']))  # type: ignore[arg-type]
        return name

    def value(self, conj, d: int, hint: str = "v") -> Optional[str]:
        _budget.check("json_schema: " + ((conj[0][1] if conj else "") or "/"))
        self.depth += 1
        try:
            return self.value_at(conj, d, hint)
        finally:
            self.depth -= 1

    def value_at(self, conj, d: int, hint: str) -> Optional[str]:
        if len(conj) == 1 and _plain_value(conj[0][0]):
            # most properties: nothing to expand, no rule of its own (what the
            # general path below comes to for them); objects repeat the same few
            # property schemas, so each distinct one is converted once
            s = conj[0][0]
            try:  # (types in the key: const true is not const 1)
                key: Any = (tuple((k, v.__class__, v) for k, v in sorted(s.items())), self.layout.depth_key(d))
                hit = self.plain_values.get(key, _MISSING)
            except TypeError:  # an enum (a list): by its text
                try:
                    key = (json.dumps(s, sort_keys=True), self.layout.depth_key(d))
                except (TypeError, ValueError):
                    return self.typed(conj, d, hint)
                hit = self.plain_values.get(key, _MISSING)
            if hit is _MISSING:
                hit = self.plain_values[key] = self.typed(conj, d, hint)
            return hit  # type: ignore[return-value]
        parts = self.flatten(conj)
        if parts is None:
            return None
        if not parts:
            return self.any_value(d)
        # cache whole values that need rules (objects/arrays) by their parts
        # ancestry (in skip) matters only to unevaluated* of parts in this conj
        uneval = {id(s) for s, _, _ in parts if "unevaluatedProperties" in s or "unevaluatedItems" in s}
        key = (tuple(sorted((id(s), frozenset(k for k in skip if isinstance(k, str) or (
            uneval and (k[0] == "noeval" or k[1] in uneval)))) for s, _, skip in parts
            if not _inert(s, skip))), self.layout.depth_key(d))
        if key in self.rule_cache:
            return self.rule_cache[key]
        if self.needs_rule(parts):
            if self.depth > _DEFER_DEPTH:
                return self.defer(key, parts, d, hint)
            target = self.fragment_target(parts, d)
            if target is not None:
                return self.fragment_value(target, key, parts, d, hint)
            return self.value_rule(key, parts, d, hint)
        return self.value_body(parts, d, hint)

    def value_rule(self, key, parts, d: int, hint: str) -> Optional[str]:
        """The rule of a value that needs one (cached by ``key``), or None."""
        name = self.new_name(hint)
        self.rule_cache[key] = name
        self.in_progress.add(key)
        body = self.value_body(parts, d, hint=name)
        self.in_progress.discard(key)
        if body is None:
            # matches nothing: rules that referenced it recursively are dropped
            # as unreachable in convert()
            self.rule_cache[key] = None
            self.empty_rules.add(name)
            return None
        self.add_rule(name, body)
        return name

    def defer(self, key, parts, d: int, hint: str) -> str:
        """The rule of a value too deep to convert here: named now (so cycles and
        repeats find it), converted by convert() from its worklist."""
        name = self.new_name(hint)
        self.rule_cache[key] = name
        self.pending.append((key, parts, d, name))
        return name

    def convert_pending(self) -> None:
        while self.pending:
            key, parts, d, name = self.pending.pop()
            self.in_progress.add(key)
            body = self.value_body(parts, d, hint=name)
            self.in_progress.discard(key)
            if body is None:
                # (its users are converted already: dropping them now is not exact)
                raise GrammarError(
                    f"the schema at {parts[0][1] or '/'} accepts no value and is used more than "
                    f"{_DEFER_DEPTH} references deep (not supported)")
            self.add_rule(name, body)

    # ------------------------------------------------------------------ shared targets
    def fragment_target(self, parts, d: int) -> Optional[Tuple[Any, str]]:
        """(memo key, $ref) when these parts are one local $ref target as itself
        (see json_schema_fragments), else None."""
        if self.lenient or self.layout.depth_key(d) >= 0:
            return None  # (lenient warnings name paths; indented layouts depend on depth)
        live = [p for p in parts if not _inert(p[0], p[2])]
        if len(live) != 1 or any(isinstance(k, str) for k in live[0][2]):
            return None
        ref = self.ref_of.get(id(live[0][0]))
        if ref is None:
            return None
        if self.target_keys is None:
            self.ensure_index()
            if len(self.resources) != 1 or self.anchors or self.dynamic_count:
                self.target_keys = False  # base URIs or anchors: pointers alone do not say
            else:
                lay = self.layout
                self.target_keys = FR.TargetKeys(self.root, (
                    lay.any_ws, lay.indent, lay.item_sep, lay.key_sep, lay.ws, self.strict,
                    self.any_order, self.integer_kind))
        if self.target_keys is False:
            return None
        key = self.target_keys.key(ref)
        return None if key is None else (key, ref)

    def fragment_value(self, target, key, parts, d: int, hint: str) -> Optional[str]:
        """A $ref target's rule: this document's, the memo's, or converted (then
        kept in the memo when what it reaches is complete)."""
        fkey, ref = target
        name = self.fragment_names.get(fkey)
        if name is not None:
            self.rule_cache[key] = name
            return name
        frame = [self.alt_count, 0]  # alternatives counted here / by targets inside
        self.alt_frames.append(frame)
        try:
            name = self.replay(fkey, ref, d)
            if name is not None:
                self.rule_cache[key] = name
            else:
                name = self.value_rule(key, parts, d, hint)
                if name is not None:
                    self.remember(fkey, ref, name, self.alt_count - frame[0] - frame[1])
        finally:
            self.alt_frames.pop()
            if self.alt_frames:
                self.alt_frames[-1][1] += self.alt_count - frame[0]
        return name

    def replay(self, fkey, ref: str, d: int) -> Optional[str]:
        """Add a memoized target's rules (after the targets it uses); None, adding
        none of its own, where a name here already means something else."""
        frag = FR.lookup(fkey)
        if frag is None:
            return None
        for dkey, dname, dref in frag.deps:
            have = self.fragment_names.get(dkey)
            if have is None:
                node = self.target_keys.node(dref)
                if not isinstance(node, dict):
                    return None
                self.ref_of.setdefault(id(node), dref)
                have = self.value([(node, dref[1:], frozenset())], d, dname)
            if have != dname:
                return None
        for n, body, _ in frag.rules:
            have = self.rules.get(n)
            if (have is None and n in self.used_names) or (have is not None and have != body):
                return None
        for n, body, names in frag.rules:
            if n not in self.rules:
                self.add_rule(n, body, names)
        self.alt_count += frag.alts
        if self.alt_count > _MAX_ALTERNATIVES:
            raise GrammarError(f'schema too large: more than {_MAX_ALTERNATIVES} alternatives (at "$ref" {ref})')
        self.fragment_names[fkey] = frag.name
        self.fragment_of_name[frag.name] = (fkey, ref)
        return frag.name

    def remember(self, fkey, ref: str, name: str, alts: int) -> None:
        """Memoize a converted target: the rules it reaches up to other targets,
        unless one is unfinished (a cycle back to a rule in progress) or empty."""
        rules, deps = [], {}
        seen, todo, chars = {name}, [name], 0
        while todo:
            n = todo.pop()
            if n != name and n in self.fragment_of_name:
                dkey, dref = self.fragment_of_name[n]
                deps[dkey] = (dkey, n, dref)
                continue
            body = self.rules.get(n)
            if body is None:
                if n in self.used_names or n in self.empty_rules:
                    return  # in progress or empty: not complete
                continue  # a builtin (StringExcept)
            names = self.rule_names.get(n)
            if names is None:  # (read once: convert() and later replays reuse them)
                names = self.rule_names[n] = _rule_refs(body)
            rules.append((n, body, names))
            chars += len(n) + len(body)
            for m in names:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        FR.store(fkey, FR.Fragment(name, tuple(rules), tuple(deps.values()), alts, chars))
        self.fragment_names[fkey] = name
        self.fragment_of_name[name] = (fkey, ref)

    empty_rules: set

    def needs_rule(self, parts) -> bool:
        for s, _, skip in parts:
            if not _CONTAINER_KW.isdisjoint(s.keys()):
                return True
            t = s.get("type")
            if t in ("object", "array") or (isinstance(t, list) and ("object" in t or "array" in t)):
                return True
            if any(k in s and k not in skip for k in ("anyOf", "oneOf", "if", "not")):
                return True
        return False

    def value_body(self, parts, d: int, hint: str) -> Optional[str]:
        # 1. combinators: distribute the first one found
        for idx, (s, path, skip) in enumerate(parts):
            for kw in ("not", "if", "anyOf", "oneOf"):
                if kw in s and kw not in skip:
                    return self.distribute(parts, idx, kw, d, hint)
        return self.typed(parts, d, hint)

    def with_skip(self, parts, idx, kw):
        s, path, skip = parts[idx]
        out = list(parts)
        out[idx] = (s, path, skip | {kw})
        return out

    def distribute(self, parts, idx, kw, d, hint) -> Optional[str]:
        s, path, skip = parts[idx]
        base = self.with_skip(parts, idx, kw)
        kpath = _ptr_join(path, kw)
        branches: List[list] = []
        if kw == "anyOf" or kw == "oneOf":
            subs = s[kw]
            if not isinstance(subs, list) or not subs:
                self.bad(kw, path, "must be a non-empty array")
            subs = [(sub, _ptr_join(kpath, j), _child(s, skip)) for j, sub in enumerate(subs)]
            if kw == "anyOf":
                branches = [[b] for b in subs]
            else:
                branches = self.one_of_branches(subs, kpath)
        elif kw == "not":
            alts = self.negate(s["not"], kpath)
            branches = [[(a, kpath, _NOEVAL)] for a in alts]
        elif kw == "if":
            cond = s["if"]
            then = s.get("then", True)
            els = s.get("else", True)
            base = self.with_skip(self.with_skip(self.with_skip(parts, idx, "if"), idx, "then"), idx, "else")
            ch = _child(s, skip)
            branches = [[(cond, kpath, ch), (then, _ptr_join(path, "then"), ch)]]
            for a in self.negate(cond, kpath):
                branches.append([(a, kpath, _NOEVAL), (els, _ptr_join(path, "else"), ch)])
        self.alt_count += len(branches)
        if self.alt_count > _MAX_ALTERNATIVES:
            raise GrammarError(f'schema too large: more than {_MAX_ALTERNATIVES} alternatives (at "{kw}" {path or "/"})')
        out = []
        for br in branches:
            out.append(self.value(base + br, d, hint))
        return _alt(out)

    def one_of_branches(self, subs, kpath) -> List[list]:
        n = len(subs)
        if n == 1 or self.pairwise_disjoint([b[0] for b in subs]):
            return [[b] for b in subs]
        # exact: branch i and not every other branch
        out = []
        try:
            negs = [self.negate(b[0], b[1]) for b in subs]
        except _Unsupported as e:
            self.fail("oneOf", kpath, f"branches may overlap and cannot be negated ({e})")
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

    def type_sig(self, s, depth: int = 0) -> Optional[frozenset]:
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
                tgt, _ = self.resolve_ref(s["$ref"], s, "")
                sub = self.type_sig(tgt, depth + 1)
                if sub is not None:
                    known = True
                    types &= sub
            except GrammarError:
                pass
        for part in s.get("allOf", []) if isinstance(s.get("allOf"), list) else []:
            sig = self.type_sig(part, depth + 1)
            if sig is not None:
                known = True
                types &= sig
        return frozenset(types) if known else None

    def deref(self, s, depth: int = 0):
        """Follow a bare {"$ref": ...} (annotations aside) to its target."""
        while isinstance(s, dict) and "$ref" in s and depth < 20 and all(
                k == "$ref" or k in ANNOTATIONS for k in s):
            try:
                s, _ = self.resolve_ref(s["$ref"], s, "")
            except GrammarError:
                return s
            depth += 1
        return s

    def pairwise_disjoint(self, schemas) -> bool:
        schemas = [self.deref(s) for s in schemas]
        sigs = [self.type_sig(s) for s in schemas]
        for i in range(len(schemas)):
            for j in range(i + 1, len(schemas)):
                if sigs[i] is not None and sigs[j] is not None and not (sigs[i] & sigs[j]):  # type: ignore[operator]
                    continue
                if self.values_disjoint(schemas[i], schemas[j]):
                    continue
                if self.objects_disjoint(schemas[i], schemas[j]):
                    continue
                return False
        return True

    def values_disjoint(self, a, b) -> bool:
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
        return not any(self.in_enum(x, vb) for x in va)

    def objects_disjoint(self, a, b) -> bool:
        """Both objects-only and a required property with disjoint values."""
        if not (isinstance(a, dict) and isinstance(b, dict)):
            return False
        sa, sb = self.type_sig(a), self.type_sig(b)
        if sa != frozenset({"object"}) or sb != frozenset({"object"}):
            return False
        pa, pb = a.get("properties") or {}, b.get("properties") or {}
        ra, rb = set(a.get("required") or []), set(b.get("required") or [])
        for k in set(pa) & set(pb):
            if k in ra and k in rb and self.values_disjoint(self.deref(pa[k]), self.deref(pb[k])):
                return True
            if k in ra and k in rb:
                ta, tb = self.type_sig(pa[k]), self.type_sig(pb[k])
                if ta is not None and tb is not None and not (ta & tb):
                    return True
        for k in ra:
            if pb.get(k) is False:
                return True
        for k in rb:
            if pa.get(k) is False:
                return True
        return False

    # ------------------------------------------------------------------ negation
    def negate(self, s, path) -> list:
        """Schemas whose union is the complement of ``s`` (raises/lenient when not
        expressible)."""
        try:
            return self._negate(s, path)
        except _Unsupported as e:
            self.fail("not", path, str(e))
            return [True]

    def _negate(self, s, path) -> list:
        if s is True:
            return []
        if s is False:
            return [True]
        if not isinstance(s, dict):
            self.bad("not", path, "a schema must be an object or a boolean")
        if id(s) in self.negations:
            return self.negations[id(s)]
        out: list = []
        self.negations[id(s)] = out  # recursion guard (filled below)
        T = _TYPE_MAP
        alts = []
        keys = set(s)
        handled = set(ANNOTATIONS) | {k for k in keys if k.startswith("x-")}

        def keep(d):
            self.keep.append(d)
            alts.append(d)

        typeset = None
        if "type" in s:
            ts = set()
            for x in (s["type"] if isinstance(s["type"], list) else [s["type"]]):
                ts |= T.get(x, set())
            if s.get("nullable") is True:
                ts.add("null")
            typeset = ts
            rest = _ALL_TYPES - ts
            if rest:
                keep({"$xg:types": sorted(rest)})
            handled.add("type")
        else:
            ts = set(_ALL_TYPES)

        def scoped(kind, d):
            """d applies to instances of `kind` that also pass `type`."""
            base = set(T[kind]) & ts
            if not base:
                return
            d = dict(d)
            d["$xg:types"] = sorted(base)
            keep(d)

        for k in ("enum", "const"):
            if k in s:
                vals = [s["const"]] if k == "const" else s["enum"]
                keep({"$xg:notEnum": vals})
                handled.add(k)
        for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            if k in s:
                v = s[k]
                if isinstance(v, bool):
                    handled.add(k)
                    continue
                if k == "minimum":
                    excl = s.get("exclusiveMinimum") is True
                    scoped("number", {"maximum" if excl else "exclusiveMaximum": v})
                elif k == "maximum":
                    excl = s.get("exclusiveMaximum") is True
                    scoped("number", {"minimum" if excl else "exclusiveMinimum": v})
                elif k == "exclusiveMinimum":
                    scoped("number", {"maximum": v})
                else:
                    scoped("number", {"minimum": v})
                handled.add(k)
        if "multipleOf" in s:
            scoped("number", {"$xg:notMultipleOf": s["multipleOf"]})
            handled.add("multipleOf")
        if "oneOf" in s and isinstance(s["oneOf"], list):
            subs = s["oneOf"]
            keep({"allOf": [{"not": sub} for sub in subs]})
            for i in range(len(subs)):
                for j in range(i + 1, len(subs)):
                    keep({"allOf": [subs[i], subs[j]]})
            handled.add("oneOf")
        if "minLength" in s:
            if s["minLength"] > 0:
                scoped("string", {"maxLength": s["minLength"] - 1})
            handled.add("minLength")
        if "maxLength" in s:
            scoped("string", {"minLength": s["maxLength"] + 1})
            handled.add("maxLength")
        if "pattern" in s:
            scoped("string", {"$xg:notPattern": s["pattern"]})
            handled.add("pattern")
        if "format" in s:
            if s["format"] in F.FORMAT_PATTERNS:
                scoped("string", {"$xg:notFormat": s["format"]})
            handled.add("format")
        if "minItems" in s:
            if s["minItems"] > 0:
                scoped("array", {"maxItems": s["minItems"] - 1})
            handled.add("minItems")
        if "maxItems" in s:
            scoped("array", {"minItems": s["maxItems"] + 1})
            handled.add("maxItems")
        if "minProperties" in s:
            if s["minProperties"] > 0:
                scoped("object", {"maxProperties": s["minProperties"] - 1})
            handled.add("minProperties")
        if "maxProperties" in s:
            scoped("object", {"minProperties": s["maxProperties"] + 1})
            handled.add("maxProperties")
        if "required" in s:
            for r in s["required"]:
                scoped("object", {"properties": {r: False}})
            handled.add("required")
        if "properties" in s and not any(k in s for k in ("additionalProperties", "patternProperties", "unevaluatedProperties")):
            for name, sub in s["properties"].items():
                scoped("object", {"required": [name], "properties": {name: {"not": sub}}})
            handled.add("properties")
        if "items" in s and "prefixItems" not in s and isinstance(s["items"], (dict, bool)) and "unevaluatedItems" not in s:
            if s["items"] is not True:
                scoped("array", {"contains": {"not": s["items"]}, "items": True})
            handled.add("items")
        if "prefixItems" in s and "items" not in s and "unevaluatedItems" not in s and isinstance(s["prefixItems"], list):
            for j, sub in enumerate(s["prefixItems"]):
                if sub is not True:
                    scoped("array", {"prefixItems": [True] * j + [{"not": sub}], "minItems": j + 1, "items": True})
            handled.add("prefixItems")
        if "contains" in s and not any(k in s for k in ("minContains", "maxContains")):
            scoped("array", {"items": {"not": s["contains"]}})
            handled.add("contains")
        for k in ("additionalProperties", "unevaluatedProperties"):
            if s.get(k) is False and not any(x in s for x in (
                    "properties", "patternProperties", "allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas",
                    "$dynamicRef", "additionalProperties" if k == "unevaluatedProperties" else "-")):
                scoped("object", {"minProperties": 1})
                handled.add(k)
            elif s.get(k) is True:
                handled.add(k)
        for k in ("items", "unevaluatedItems"):
            if s.get(k) is False and not any(x in s for x in (
                    "prefixItems", "allOf", "anyOf", "oneOf", "$ref", "if", "contains", "$dynamicRef",
                    "items" if k == "unevaluatedItems" else "-")):
                scoped("array", {"minItems": 1})
                handled.add(k)
            elif s.get(k) is True:
                handled.add(k)
        if "not" in s:
            alts.append(s["not"])
            handled.add("not")
        if "anyOf" in s:
            d = {"allOf": [{"not": sub} for sub in s["anyOf"]]}
            keep(d)
            handled.add("anyOf")
        if "allOf" in s:
            for sub in s["allOf"]:
                keep({"not": sub})
            handled.add("allOf")
        if "$ref" in s:
            tgt, _ = self.resolve_ref(s["$ref"], s, path)
            keep({"not": tgt})
            handled.add("$ref")
        if "if" in s:
            then, els = s.get("then", True), s.get("else", True)
            keep({"allOf": [s["if"], {"not": then}]})
            keep({"allOf": [{"not": s["if"]}, {"not": els}]})
            handled |= {"if", "then", "else"}
        elif "then" in s or "else" in s:
            handled |= {"then", "else"}
        if "uniqueItems" in s:
            if s["uniqueItems"] is True:
                raise _Unsupported("the complement of uniqueItems is not supported")
            handled.add("uniqueItems")
        unknown = sorted(k for k in keys - handled if k in KNOWN)
        if unknown:
            raise _Unsupported(f'cannot negate "{unknown[0]}"')
        out.extend(alts)
        return out

    # ------------------------------------------------------------------ model
    def typed(self, parts, d: int, hint: str) -> Optional[str]:
        types = set(_ALL_TYPES)
        enum_vals = None
        not_vals: list = []
        for s, path, skip in parts:
            if "type" in s:
                t = s["type"]
                ts = set()
                for x in (t if isinstance(t, list) else [t]):
                    if x not in _TYPE_MAP:
                        self.bad("type", path, f"unknown type {x!r}")
                    ts |= _TYPE_MAP[x]
                if s.get("nullable") is True:
                    ts.add("null")
                types &= ts
            for k in ("enum", "const"):
                if k in s:
                    vals = [s["const"]] if k == "const" else s["enum"]
                    if not isinstance(vals, list):
                        self.bad("enum", path, "must be an array")
                    if enum_vals is None:
                        enum_vals = list(vals)
                    else:
                        enum_vals = [v for v in enum_vals if self.in_enum(v, vals)]
            if "$xg:types" in s:
                types &= set(s["$xg:types"])
            if "$xg:notEnum" in s:
                not_vals.extend(s["$xg:notEnum"])
            if "$xg:forbid" in s:
                return None
        if enum_vals is not None:
            return self.enum_values(enum_vals, types, not_vals, parts, d)
        alts: list = []
        if "null" in types and not any(_json_type(v) == "null" for v in not_vals):
            alts.append('"null"')
        if "boolean" in types:
            for b in (True, False):
                if not any(v is b for v in not_vals):
                    alts.append('"true"' if b else '"false"')
        nv = [v for v in not_vals if _json_type(v) in ("int", "frac")]
        if "int" in types or "frac" in types:
            alts.append(self.number(parts, "frac" not in types, nv, hint, nonint="int" not in types))
        if "string" in types:
            alts.append(self.string(parts, [v for v in not_vals if isinstance(v, str)], hint))
        ov = [v for v in not_vals if isinstance(v, (dict, list))]
        if ov and ("object" in types or "array" in types):
            self.fail("not", parts[0][1], "excluding object or array values is not supported")
        if "object" in types:
            alts.append(self.obj(parts, d, hint))
        if "array" in types:
            alts.append(self.array(parts, d, hint))
        return _alt(alts)

    # ------------------------------------------------------------------ enum
    def enum_values(self, vals, types, not_vals, parts, d) -> Optional[str]:
        out = []
        # (vals are in every part's enum/const and of the allowed types already:
        # parts with nothing else need no check per value)
        parts = [p for p in parts if not _ENUM_ONLY_KW.issuperset(k for k in p[0] if k not in p[2])]
        where = "json_schema: enum at " + (parts[0][1] or "/") if parts else "json_schema: enum"
        size = 0
        for i, v in enumerate(vals):
            if i & 1023 == 1023:  # per chunk of values: the time, and the text so far
                _budget.check(where)
                _budget.charge(size, where)
                size = 0
            if _json_type(v) not in types:
                continue
            if self.in_enum(v, not_vals):
                continue
            ok = True
            for s, path, skip in parts:
                r = self.check(v, s, path, skip)
                if r is False:
                    ok = False
                    break
            if ok:
                out.append(self.literal(v, d))
                size += len(out[-1])
        _budget.charge(size, where)
        return _alt(out)

    def literal(self, v, d: int) -> str:
        """All texts (as json.dumps writes, with the layout's whitespace) equal to v."""
        lay = self.layout
        if v is None:
            return '"null"'
        if v is True:
            return '"true"'
        if v is False:
            return '"false"'
        if isinstance(v, (int, float)):
            sp = F.value_spellings_of(v)
            if sp is None:
                raise GrammarError(f"cannot match the number {v!r}")
            return sp
        if isinstance(v, str):
            return R.string_literal_expr(v)
        if isinstance(v, list):
            if not v:
                return lay.empty(d, "[", "]")
            inner = f" {lay.sep(d)} ".join(self.literal(x, d + 1) for x in v)
            return f'"[" {lay.first(d)} {inner} {lay.last(d)} "]"'
        if isinstance(v, dict):
            if not v:
                return lay.empty(d, "{", "}")
            if len(v) > 5 and self.any_order:
                raise GrammarError("an object constant with more than 5 keys cannot be matched in any order")
            import itertools

            orders = [list(v.items())] if not self.any_order else [list(p) for p in itertools.permutations(v.items())]
            alts = []
            for items in orders:
                members = f" {lay.sep(d)} ".join(
                    f"{R.string_literal_expr(k)} {lay.colon(d)} {self.literal(x, d + 1)}" for k, x in items)
                alts.append(f'"{{" {lay.first(d)} {members} {lay.last(d)} "}}"')
            return _alt(alts)  # type: ignore[return-value]
        raise GrammarError(f"not a JSON value: {v!r}")

    # ------------------------------------------------------------------ mini validator
    def in_enum(self, v, members) -> bool:
        """v equals a member of the enum list (hashed: enums of thousands of values
        are checked member by member against themselves)."""
        if not isinstance(members, list) or len(members) < 16:
            return any(_json_equal(v, w) for w in members)
        entry = self.enum_index.get(id(members))
        if entry is None or entry[0] is not members:
            scalars, others = set(), []
            for w in members:
                key = _scalar_key(w)
                if key is None:
                    others.append(w)
                else:
                    scalars.add(key)
            entry = (members, scalars, others)
            self.enum_index[id(members)] = entry
        key = _scalar_key(v)
        if key is not None:
            return key in entry[1]
        return any(_json_equal(v, w) for w in entry[2])

    def check(self, v, s, path, skip=frozenset()) -> bool:
        """Whether value v is valid under schema s (used for enum filtering)."""
        self.check_depth += 1
        try:
            if self.check_depth > _MAX_CHECK_DEPTH:
                raise GrammarError(f"the schema at {path or '/'} nests more than {_MAX_CHECK_DEPTH} "
                                   "levels deep (through references) where an enum value is checked")
            return self.check_at(v, s, path, skip)
        finally:
            self.check_depth -= 1

    def check_at(self, v, s, path, skip) -> bool:
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
                if not self.in_enum(v, x):
                    return False
            elif k == "const":
                if not _json_equal(v, x):
                    return False
            elif k == "$xg:notEnum":
                if self.in_enum(v, x):
                    return False
            elif k == "$xg:forbid":
                return False
            elif k == "$xg:types":
                if t not in x:
                    return False
            elif k in _NUM_KW:
                if t not in ("int", "frac") or isinstance(x, bool):
                    continue
                _finite_number(self, x, k, path)
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
                if k == "pattern" and not self.dfa_for(("pat", x), path).accepts(v):
                    return False
                if k == "$xg:notPattern" and self.dfa_for(("pat", x), path).accepts(v):
                    return False
                if k == "format" and x in F.FORMAT_PATTERNS and not self.dfa_for(("fmt", x), path).accepts(v):
                    return False
                if k == "$xg:notFormat" and self.dfa_for(("fmt", x), path).accepts(v):
                    return False
            elif k in ("allOf", "anyOf", "oneOf"):
                rs = [self.check(v, sub, path) for sub in x]
                if k == "allOf" and not all(rs):
                    return False
                if k == "anyOf" and not any(rs):
                    return False
                if k == "oneOf" and sum(rs) != 1:
                    return False
            elif k == "not":
                if self.check(v, x, path):
                    return False
            elif k == "if":
                branch = s.get("then", True) if self.check(v, x, path) else s.get("else", True)
                if not self.check(v, branch, path):
                    return False
            elif k in ("$ref", "$dynamicRef", "$recursiveRef"):
                tgt, tp = self.resolve_ref(x, s, path)
                if not self.check(v, tgt, tp):
                    return False
            elif k in _OBJ_KW:
                if t != "object":
                    continue
                if not self.check_object(v, s, k, x, path):
                    return False
            elif k in _ARR_KW:
                if t != "array":
                    continue
                if not self.check_array(v, s, k, x, path):
                    return False
        return True

    def check_object(self, v, s, k, x, path) -> bool:
        if k == "required":
            return all(r in v for r in x)
        if k == "properties":
            return all(self.check(v[p], sub, path) for p, sub in x.items() if p in v)
        if k == "minProperties":
            return len(v) >= x
        if k == "maxProperties":
            return len(v) <= x
        if k == "propertyNames":
            return all(self.check(key, x, path) for key in v)
        if k == "patternProperties":
            return all(self.check(v[key], sub, path) for pat, sub in x.items() for key in v
                       if self.dfa_for(("pat", pat), path).accepts(key))
        if k in ("additionalProperties", "unevaluatedProperties"):
            props = s.get("properties") or {}
            pats = list((s.get("patternProperties") or {}).keys())
            for key in v:
                if key in props or any(self.dfa_for(("pat", p), path).accepts(key) for p in pats):
                    continue
                if k == "unevaluatedProperties" and "additionalProperties" in s:
                    continue
                if k == "unevaluatedProperties" and any(a in s for a in ("allOf", "anyOf", "oneOf", "$ref", "if")):
                    raise GrammarError(f'"unevaluatedProperties" at {path}: cannot check a constant')
                if not self.check(v[key], x, path):
                    return False
            return True
        if k == "dependentRequired":
            return all(all(r in v for r in reqs) for p, reqs in x.items() if p in v)
        if k == "dependentSchemas":
            return all(self.check(v, sub, path) for p, sub in x.items() if p in v)
        if k == "dependencies":
            for p, dep in x.items():
                if p in v:
                    if isinstance(dep, list):
                        if not all(r in v for r in dep):
                            return False
                    elif not self.check(v, dep, path):
                        return False
            return True
        return True

    def check_array(self, v, s, k, x, path) -> bool:
        if k == "minItems":
            return len(v) >= x
        if k == "maxItems":
            return len(v) <= x
        if k == "prefixItems":
            return all(self.check(a, sub, path) for a, sub in zip(v, x))
        if k == "items":
            if isinstance(x, list):
                return all(self.check(a, sub, path) for a, sub in zip(v, x))
            start = len(s.get("prefixItems") or [])
            return all(self.check(a, x, path) for a in v[start:])
        if k == "additionalItems":
            if isinstance(s.get("items"), list):
                return all(self.check(a, x, path) for a in v[len(s["items"]):])
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
            n = sum(1 for a in v if self.check(a, s["contains"], path))
            lo = s.get("minContains", 1)
            hi = s.get("maxContains")
            return n >= lo and (hi is None or n <= hi)
        if k == "unevaluatedItems":
            if any(a in s for a in ("allOf", "anyOf", "oneOf", "$ref", "if", "contains")):
                raise GrammarError(f'"unevaluatedItems" at {path}: cannot check a constant')
            if "items" in s:
                return True
            start = len(s.get("prefixItems") or [])
            return all(self.check(a, x, path) for a in v[start:])
        return True

    # ------------------------------------------------------------------ numbers
    def number(self, parts, integer: Any, not_vals, hint, nonint: bool = False) -> Optional[str]:
        lo: Any = None
        hi: Any = None
        lo_excl = hi_excl = False
        mults = []
        notmult = None
        path0 = parts[0][1]

        def tighten_lo(v, excl):
            nonlocal lo, lo_excl
            fv = Fraction(v)
            if lo is None or fv > Fraction(lo) or (fv == Fraction(lo) and excl and not lo_excl):
                lo, lo_excl = v, excl

        def tighten_hi(v, excl):
            nonlocal hi, hi_excl
            fv = Fraction(v)
            if hi is None or fv < Fraction(hi) or (fv == Fraction(hi) and excl and not hi_excl):
                hi, hi_excl = v, excl

        for s, path, skip in parts:
            for k in _NUM_KW:
                if k in s and not isinstance(s[k], bool):
                    _finite_number(self, s[k], k, path)
            if "minimum" in s:
                tighten_lo(s["minimum"], s.get("exclusiveMinimum") is True)
            if "maximum" in s:
                tighten_hi(s["maximum"], s.get("exclusiveMaximum") is True)
            if "exclusiveMinimum" in s and not isinstance(s["exclusiveMinimum"], bool):
                tighten_lo(s["exclusiveMinimum"], True)
            if "exclusiveMaximum" in s and not isinstance(s["exclusiveMaximum"], bool):
                tighten_hi(s["exclusiveMaximum"], True)
            if "$xg:notMultipleOf" in s:
                nk = s["$xg:notMultipleOf"]
                fk = Fraction(repr(nk)) if isinstance(nk, float) else Fraction(nk)
                sh = 0
                while fk.denominator != 1 and sh < 400:
                    fk *= 10
                    sh += 1
                if fk != 1:
                    self.fail("not", path, f"the complement of multipleOf {nk} is only supported for powers of ten")
                else:
                    notmult = sh if notmult is None else max(notmult, sh)
            if "multipleOf" in s:
                m = s["multipleOf"]
                if isinstance(m, bool) or m <= 0:
                    self.bad("multipleOf", path, "must be a number > 0")
                mults.append((m, path))
            fmt = s.get("format")
            if fmt in F.NUMERIC_FORMATS:
                a, b = F.NUMERIC_FORMATS[fmt]
                tighten_lo(a, False)
                tighten_hi(b, False)
                integer = True
        multiple: Any = None
        if mults:
            lcm: Any = None
            for m, _ in mults:
                fm = Fraction(repr(m)) if isinstance(m, float) else Fraction(m)
                lcm = fm if lcm is None else _lcm_frac(lcm, fm)
            multiple = int(lcm) if lcm.denominator == 1 else float(lcm) if Fraction(repr(float(lcm))) == lcm else None
            if multiple is None:
                self.fail("multipleOf", mults[0][1], "the multiples' least common multiple is not a short decimal")
        if integer:
            integer = self.integer_kind
        if multiple == 1:
            # the multiples of 1 are the integral values: a number with multipleOf 1
            # (1.0, 1e0) is an integer in every draft (1.0 and 1e2 included, so not
            # draft-4's integer texts), and the integer grammar is the small one
            integer, multiple = integer or True, None
        if integer and nonint:
            return None
        try:
            return F.number_expr(lo, lo_excl, hi, hi_excl, integer, multiple,
                                 add_rule=self.add_rule, prefix=self.new_name(hint + "-num"),
                                 nonint=nonint, exclude=tuple(not_vals), notmult=notmult)
        except F.NumberError as e:
            mpath = mults[0][1] if mults else path0
            self.fail("not" if not_vals else "multipleOf", mpath, str(e))
            return F.number_expr(lo, lo_excl, hi, hi_excl, integer, None, nonint=nonint)

    # ------------------------------------------------------------------ strings
    def dfa_for(self, key, path):
        if key in self.dfa_cache:
            return self.dfa_cache[key]
        kind, x = key
        if kind == "pat":
            ir = self.pattern_ir(x, path)
        else:
            ir = R.parse_pattern(F.FORMAT_PATTERNS[x])
        try:
            dfa = D.cached_dfa(ir)
        except D.DFAError as e:
            raise GrammarError(f'"pattern" at {path}: {e}') from None
        self.dfa_cache[key] = dfa
        return dfa

    def pattern_ir(self, pattern, path):
        if not isinstance(pattern, str):
            self.bad("pattern", path, "must be a string")
        try:
            return R.parse_pattern(pattern)
        except R.PatternError as e:
            raise GrammarError(f'unsupported keyword "pattern" at {path}: {e}') from None

    def string(self, parts, not_vals, hint) -> Optional[str]:
        min_len, max_len = 0, None
        irs = []  # (ir, keyword, path)
        negs = []  # (ir, keyword, path)
        for s, path, skip in parts:
            if "minLength" in s:
                min_len = max(min_len, _nonneg_int(self, s["minLength"], "minLength", path))
            if "maxLength" in s:
                v = _nonneg_int(self, s["maxLength"], "maxLength", path)
                max_len = v if max_len is None else min(max_len, v)
            if "pattern" in s:
                p = _ptr_join(path, "pattern")
                try:
                    irs.append((self.pattern_ir(s["pattern"], p), "pattern", p))
                except GrammarError:
                    if not self.lenient:
                        raise
                    self.fail("pattern", p, "not translatable")
            if "format" in s:
                fmt = s["format"]
                p = _ptr_join(path, "format")
                if fmt in F.FORMAT_PATTERNS:
                    irs.append((fmt, "format", p))  # (its name: parsed below unless the preset does)
                    if fmt in F.FORMAT_MAX_LENGTH:
                        max_len = F.FORMAT_MAX_LENGTH[fmt] if max_len is None else min(max_len, F.FORMAT_MAX_LENGTH[fmt])
                elif fmt in F.UNSUPPORTED_FORMATS:
                    self.fail("format", p, f"format {fmt!r} cannot be expressed as a grammar")
            if "$xg:notPattern" in s:
                negs.append((self.pattern_ir(s["$xg:notPattern"], path), "not", path))
            if "$xg:notFormat" in s:
                negs.append((R.parse_pattern(F.FORMAT_PATTERNS[s["$xg:notFormat"]]), "not", path))
        if max_len is not None and max_len < min_len:
            return None
        q = '"\\""'
        if len(irs) == 1 and isinstance(irs[0][0], str) and not negs and not not_vals:
            text, lo, hi = P.FORMATS[irs[0][0]]  # (as the general case below would emit it)
            if lo >= min_len and (max_len is None or (hi is not None and hi <= max_len)):
                return self.hoist(f"{q} {text} {q}", f"{hint}-str")
        irs = [(R.parse_pattern(F.FORMAT_PATTERNS[ir]) if isinstance(ir, str) else ir, kw, p) for ir, kw, p in irs]
        if not irs and not negs and not not_vals:
            if min_len == 0 and max_len is None:
                return R.JSON_STRING_LOOSE
            ch = R.json_char()
            if max_len is None:
                rep = "%s{%d,}" % (ch, min_len)
            elif min_len == max_len:
                rep = "%s{%d}" % (ch, min_len) if min_len else '""'
            else:
                rep = "%s{%d,%d}" % (ch, min_len, max_len)
            return f"{q} {rep} {q}"
        if len(irs) == 1 and not negs:
            ir = irs[0][0]
            lo, hi = R.length_bounds(ir)
            implied = lo >= min_len and (max_len is None or (hi is not None and hi <= max_len))
            if implied and not not_vals:
                return self.hoist(f"{q} {R.emit(ir)} {q}", f"{hint}-str")
            one = R.single_class_repeat(ir)
            if one and not not_vals:
                cs, a, b = one
                a2 = max(a, min_len)
                b2 = b if max_len is None else (max_len if b is None else min(b, max_len))
                if b2 is not None and b2 < a2:
                    return None
                return f"{q} {R.emit(R.n_rep(R.n_set(cs), a2, b2))} {q}"
            # A length bound the pattern does not imply, where a length the pattern
            # surely has fits it (its shortest, its longest, or any long one): the
            # core's Length(...) counts the pattern's JSON characters and decides
            # how (a counter, or the count written out where counts have gaps),
            # with no automaton built here (for a body of plain repetitions: a
            # Length body cannot hold a counted loop).
            if not not_vals and R.every_part_matches(ir) and R.small_repeats(ir):
                fits = (min_len <= lo and (max_len is None or lo <= max_len)) or \
                       (hi is not None and min_len <= hi and (max_len is None or hi <= max_len)) or \
                       (hi is None and max_len is None)
                if fits:
                    name = self.new_name(hint + "-str")
                    self.add_rule(name, R.emit(ir))
                    return _length_string(name, min_len, max_len)
        if not irs and not negs and not_vals and min_len == 0 and max_len is None:
            return f"{q} {self.string_except(not_vals)[0]} {q}"
        # general case: intersect automata; a length bound the language does not
        # imply is kept by the core's Length(...) (a counter, not the product
        # spelled out as states) when every state's counts are an interval
        length = None
        try:
            dfa: Any = None
            for ir, kw, p in irs:
                dd = D.cached_dfa(ir)
                dfa = dd if dfa is None else dfa.intersect(dd)
            for ir, kw, p in negs:
                comp = D.cached_dfa(ir).complement()
                dfa = comp if dfa is None else dfa.intersect(comp)
            if not_vals:
                comp = D.words_dfa(not_vals).complement()
                dfa = comp if dfa is None else dfa.intersect(comp)
            if min_len > 0 or max_len is not None:  # (dfa is set: an unconstrained string returned above)
                span = None if dfa.is_empty() else dfa.count_span()
                if span is not None:
                    lo, hi = span
                    if (max_len is not None and lo > max_len) or (hi is not None and hi < min_len):
                        return None  # no string of the pattern has such a length
                    if lo < min_len or (max_len is not None and (hi is None or hi > max_len)):
                        length = (min_len, max_len)
                else:
                    dfa = dfa.intersect(D.length_dfa(min_len, max_len))
        except D.DFAError as e:
            kw, p = (irs[0][1], irs[0][2]) if irs else ("not", parts[0][1])
            self.fail(kw, p, f"the combined string constraints are too complex ({e})")
            if irs:
                return f"{q} {R.emit(irs[0][0])} {q}"
            return R.JSON_STRING_LOOSE
        rule = dfa.emit_rules(self.new_name(hint + "-str"), self.add_rule)
        if rule is None:
            return None
        if length is not None:
            return _length_string(rule, *length)
        return f"{q} {rule} {q}"

    # ------------------------------------------------------------------ objects
    def obj(self, parts, d: int, hint: str) -> Optional[str]:
        # case analysis for dependencies
        for idx, (s, path, skip) in enumerate(parts):
            for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
                if kw in s and kw not in skip and s[kw]:
                    return self.obj_dependencies(parts, idx, kw, d, hint)
        lay = self.layout
        constrained = _strict_applies(parts, _OBJ_STRICT_KW, "object", "properties")
        props: Dict[str, list] = {}
        order: List[str] = []
        required = set()
        min_p, max_p = 0, None
        name_parts: list = []
        explicit_extra = False
        for s, path, skip in parts:
            pr = s.get("properties") or {}
            if not isinstance(pr, dict):
                self.bad("properties", path, "must be an object")
            for k in pr:
                if k not in props:
                    props[k] = []
                    order.append(k)
            req = s.get("required") or []
            if not isinstance(req, list):
                self.bad("required", path, "must be an array")
            required |= set(req)
            if "minProperties" in s:
                min_p = max(min_p, _nonneg_int(self, s["minProperties"], "minProperties", path))
            if "maxProperties" in s:
                v = _nonneg_int(self, s["maxProperties"], "maxProperties", path)
                max_p = v if max_p is None else min(max_p, v)
            if "propertyNames" in s:
                name_parts.append((s["propertyNames"], _ptr_join(path, "propertyNames"), frozenset()))
            if any(k in s for k in ("additionalProperties", "unevaluatedProperties", "patternProperties")):
                explicit_extra = True
        if max_p is not None and min_p > max_p:
            return None  # no object has that many members and that few (the counts below assume lo <= hi)
        for s, path, skip in parts:
            for k in s.get("required") or []:
                if k not in props:
                    props[k] = []
                    order.append(k)
        # per-key constraints from every part
        has_patterns = any(s.get("patternProperties") for s, _, _ in parts)
        for k in order:
            evaluated = set()
            for i, (s, path, skip) in enumerate(parts):
                cons, ev = self.key_constraint(s, path, k)
                props[k].extend(cons)
                if ev:
                    evaluated.add(i)
            props[k].extend(self.uneval_for(parts, evaluated, "unevaluatedProperties"))
            # strict mode: a name listed in "required" counts as declared
        # extra keys (not declared): per part patterns / additional
        extra_cases = self.extra_cases(parts, order, name_parts, constrained, explicit_extra, d, hint)
        # property names must satisfy propertyNames
        for k in list(order):
            for sub, p, _ in name_parts:
                if not self.check(k, sub, p):
                    props[k] = [(False, p, frozenset())]
        # values
        values = []
        for k in order:
            expr = self.value(props[k], d + 1, hint=f"{hint}-{k}")
            if expr is None:
                if k in required:
                    return None
                continue
            values.append((k, expr))
        # a long value is a rule of its own: one per distinct text, so that
        # properties of the same schema share one automaton; so is a value text
        # that the properties repeat past _SHARED_VALUE_CHARS in all (hundreds of
        # integers: the core then decides whether to copy it into each)
        # (a text over 300 characters is a rule anyway: fewer values than this
        # cannot repeat one past the limit)
        volume = Counter(expr for _, expr in values) if len(values) * 300 >= _SHARED_VALUE_CHARS else None
        items = []  # (name, member expr, required)
        for k, expr in values:
            shared = volume is not None and len(expr) * volume[expr] >= _SHARED_VALUE_CHARS
            limit = 0 if shared and not _BARE_NAME.fullmatch(expr) else 300
            expr = self.hoist(expr, f"{hint}-{k}-v", limit)
            member = self.hoist(f"{R.string_literal_expr(k)} {lay.colon(d)} {expr}", f"{hint}-{k}-m", 300)
            if len(values) > _NAMED_CHAIN_MIN:
                # its rule names, from texts that repeat (cached), for the rules
                # its chain is cut into (a key literal names no rule)
                bare = _BARE_NAME.fullmatch(member)  # type: ignore[arg-type]
                refs: Any = (member,) if bare else _rule_refs(lay.colon(d)) + _rule_refs(expr)
                self.member_names[member] = refs  # type: ignore[index]
            items.append((k, member, k in required))
        extras = []
        names: Dict[str, None] = {}  # the rule names the extras use, known without reading them
        trie = False  # some extra key is a trie of the declared names (an automaton however short its text)
        for key_expr, vconj, key_names, key_trie in extra_cases:
            if vconj is None:  # a key machine (pattern_keys): the values are inside it
                trie = True
                extras.append(key_expr)
                names.update(dict.fromkeys(key_names))
                continue
            vexpr = self.value(vconj, d + 1, hint=f"{hint}-extra")
            if vexpr is not None:
                trie = trie or key_trie
                extras.append(f"{key_expr} {lay.colon(d)} {vexpr}")
                for part in (key_names if key_names is not None else _rule_refs(key_expr),
                             _rule_refs(lay.colon(d)), _rule_refs(vexpr)):
                    names.update(dict.fromkeys(part))
        extra = _alt(extras)
        if extra is not None and (len(extra) > 120 or trie):
            rn = self.new_name(f"{hint}-extra")
            self.add_rule(rn, extra, tuple(names))
            extra = rn
        # names known only from "required" (no "properties" anywhere) have no order to keep
        unordered = len(items) > 1 and not any(s.get("properties") for s, _, _ in parts)
        if unordered and len(items) <= _MAX_SUBSET_PROPS:
            return self.obj_any_order(items, extra, min_p, max_p, d, hint)
        if self.any_order and (len(items) > 1 or (items and extra is not None)):
            if len(items) <= _MAX_SUBSET_PROPS:
                return self.obj_any_order(items, extra, min_p, max_p, d, hint)
            self.fail("any_order", parts[0][1], f"more than {_MAX_SUBSET_PROPS} properties cannot be ordered freely")
        return self.obj_ordered(items, extra, min_p, max_p, d, hint, parts[0][1])

    def uneval_for(self, parts, evaluated: set, kw: str) -> list:
        """The ``kw`` (unevaluatedProperties/Items) schemas that apply to a key or
        position that the parts with indexes in ``evaluated`` evaluate: those of parts
        P none of whose in-place descendants (P included) evaluates it."""
        out: list = []
        for i, (s, path, skip) in enumerate(parts):
            if kw not in s or ("noeval",) in skip:
                continue
            seen = False
            for j, (q, qpath, qskip) in enumerate(parts):
                if ("noeval",) in qskip:
                    continue
                if j == i or _under(qskip, s):
                    if j in evaluated or (j != i and kw in q):
                        seen = True
                        break
            if not seen:
                out.append((s[kw], _ptr_join(path, kw), frozenset()))
        return out

    def key_constraint(self, s, path, k) -> Tuple[list, bool]:
        """(constraints of part s on property k, whether s evaluates k)."""
        pr = s.get("properties") or {}
        out: list = []
        matched = False
        if k in pr:
            out.append((pr[k], _ptr_join(path, "properties", k), frozenset()))
            matched = True
        for pat, sub in (s.get("patternProperties") or {}).items():
            if self.dfa_for(("pat", pat), _ptr_join(path, "patternProperties", pat)).accepts(k):
                out.append((sub, _ptr_join(path, "patternProperties", pat), frozenset()))
                matched = True
        if not matched and "additionalProperties" in s:
            out.append((s["additionalProperties"], _ptr_join(path, "additionalProperties"), frozenset()))
            matched = True
        return out, matched

    def extra_cases(self, parts, declared, name_parts, constrained, explicit_extra, d, hint) -> list:
        """[(key_expr, value_conj, the key_expr's rule names or None: unknown,
        whether key_expr is the trie of the declared names)] for keys that are
        not declared; or one (member_expr, None, its rule names, True) where a
        key machine (pattern_keys) holds every case."""
        q = '"\\""'
        pats = []  # (pattern, schema, path, part index)
        addl: list = []  # per part: value conj for keys matching none of its patterns
        for i, (s, path, skip) in enumerate(parts):
            for pat, sub in (s.get("patternProperties") or {}).items():
                pats.append((pat, sub, _ptr_join(path, "patternProperties", pat), i))
                if not isinstance(sub, (dict, bool)):  # (before any key automaton is built)
                    self.bad("schema", pats[-1][2], "a schema must be an object or a boolean")
        # key language restrictions: propertyNames
        names_dfa = None
        for sub, p, _ in name_parts:
            dd = self.name_dfa(sub, p)
            if dd is not None:
                names_dfa = dd if names_dfa is None else names_dfa.intersect(dd)
        cases: list = []
        n = len(pats)
        if n > 4:
            self.fail("patternProperties", pats[0][2], "more than 4 patterns cannot be partitioned exactly")
            n = 0
            pats = []
        by_mask: Dict[int, list] = {}  # the cases that remain, for pattern_keys
        for mask in range(1 << n):
            inside = [pats[i] for i in range(n) if mask >> i & 1]
            outside = [pats[i] for i in range(n) if not mask >> i & 1]
            vconj: list = [(sub, p, frozenset()) for _, sub, p, _ in inside]
            parts_with_match = {i for *_, i in inside}
            evaluated = set(parts_with_match)
            for i, (s, path, skip) in enumerate(parts):
                if i not in parts_with_match and "additionalProperties" in s:
                    vconj.append((s["additionalProperties"], _ptr_join(path, "additionalProperties"), frozenset()))
                    evaluated.add(i)
            unev = self.uneval_for(parts, evaluated, "unevaluatedProperties")
            vconj.extend(unev)
            if not evaluated and not unev and self.strict and constrained:
                continue
            if any(x is False for x, _, _ in vconj):
                continue
            by_mask[mask] = vconj
        if len(by_mask) > 1 and names_dfa is None:
            machine = self.pattern_keys(pats, declared, by_mask, d, hint)
            if machine is not None:
                return machine
        for mask, vconj in by_mask.items():
            inside = [pats[i] for i in range(n) if mask >> i & 1]
            outside = [pats[i] for i in range(n) if not mask >> i & 1]
            # key language: matches inside patterns, none of outside, not declared
            simple = not inside and not outside and names_dfa is None
            if simple:
                key, names = self.string_except(declared) if declared else (R.JSON_CHAR_LOOSE + "*", ())
                cases.append((f"{q} {key} {q}", vconj, names, bool(declared)))
                continue
            if len(inside) == 1 and not outside and names_dfa is None and not any(
                    self.dfa_for(("pat", inside[0][0]), inside[0][2]).accepts(k) for k in declared):
                ir = self.pattern_ir(inside[0][0], inside[0][2])
                cases.append((f"{q} {R.emit(ir)} {q}", vconj, None, False))
                continue
            try:
                dfa = names_dfa
                for pat, _, p, _ in inside:
                    dd = self.dfa_for(("pat", pat), p)
                    dfa = dd if dfa is None else dfa.intersect(dd)
                for pat, _, p, _ in outside:
                    dd = self.dfa_for(("pat", pat), p).complement()
                    dfa = dd if dfa is None else dfa.intersect(dd)
                if declared:
                    dd = D.words_dfa(declared).complement()
                    dfa = dd if dfa is None else dfa.intersect(dd)
                if dfa is None:
                    dfa = D.length_dfa(0, None)
            except D.DFAError as e:
                self.fail("patternProperties", pats[0][2] if pats else parts[0][1], str(e))
                cases.append((R.JSON_STRING_LOOSE, vconj, None, False))
                continue
            name = dfa.emit_rules(self.new_name("key"), self.add_rule)
            if name is not None:
                cases.append((f"{q} {name} {q}", vconj, None, False))
        return cases

    def pattern_keys(self, pats, declared, by_mask, d, hint) -> Optional[list]:
        """Keys told apart by the patterns they match in one automaton (the product
        of the patterns' DFAs and the declared names'), each member's value at the
        end of its class's states: every key has a path, so inside a key every
        string over the JSON characters stays alive and the mask takes the
        vocabulary's string slice at once (as alternatives -- a pattern beside the
        complement of it -- every state of the complement walked the whole
        vocabulary: 5 ms a token).  None when the product is too large."""
        q = '"\\""'
        lay = self.layout
        try:
            dfas = [self.dfa_for(("pat", pat), p) for pat, _, p, _ in pats]
            if declared:
                dfas.append(D.words_dfa(declared))
            trans, labels = D.labelled_product(dfas)
        except D.DFAError:
            return None
        if len(trans) > _PATTERN_KEYS_MAX_STATES:
            return None
        n = len(pats)
        values: Dict[int, Optional[str]] = {}
        tails: List[Optional[str]] = []
        for lab in labels:
            mask = sum(1 << i for i in range(n) if lab[i])
            if (declared and lab[n]) or mask not in by_mask:
                tails.append(None)
                continue
            if mask not in values:
                values[mask] = self.value(by_mask[mask], d + 1, hint=f"{hint}-extra")
            vexpr = values[mask]
            tails.append(None if vexpr is None else f"{q} {lay.colon(d)} {vexpr}")
        # the states from which some class with a value is reached
        live = {i for i, t in enumerate(tails) if t is not None}
        rev: Dict[int, List[int]] = {}
        for i, row in enumerate(trans):
            for _, t in row:
                rev.setdefault(t, []).append(i)
        stack = list(live)
        while stack:
            for pre in rev.get(stack.pop(), ()):
                if pre not in live:
                    live.add(pre)
                    stack.append(pre)
        if 0 not in live:
            return []
        prefix = self.new_name("key")
        rule = {i: f"{prefix}-s{k}" for k, i in enumerate(sorted(live))}
        used: Dict[str, None] = {}
        sets = self.shared_sets(prefix, [cs for i in live for cs, t in trans[i] if t in live])
        # a value's tail that several states end in (a pattern's run of states, each
        # of which a key may end at) is a rule of its own, parsed once
        tail_uses: Counter = Counter(t for t in (tails[i] for i in live) if t is not None)
        tail_rules: Dict[str, str] = {}
        for text, n in tail_uses.items():
            if n > 1 and isinstance(text, str):
                tail_rules[text] = name = f"{prefix}-t{len(tail_rules)}"
                self.add_rule(name, text, tuple(dict.fromkeys(_rule_refs(text))))
        for i in sorted(live):
            alts = [f"{sets.get(cs) or R.encode_set(cs)} {rule[t]}" for cs, t in trans[i] if t in live]
            refs = [x for cs, t in trans[i] if t in live for x in (sets.get(cs), rule[t]) if x]
            tail = tails[i]
            if tail is not None and tail in tail_rules:
                tail = tail_rules[tail]
            if tail is not None:
                alts.append(tail)
                refs.extend(_rule_refs(tail))
            self.add_rule(rule[i], " | ".join(alts), tuple(dict.fromkeys(refs)))
            used[rule[i]] = None
        return [(f"{q} {rule[0]}", None, tuple(used), True)]

    def shared_sets(self, prefix: str, sets: list) -> Dict[Any, str]:
        """Rules for the character sets that many of an automaton's transitions
        spell (a key pattern's 'any other character' in each of its states): the
        core parses each once instead of once per state, and expands it into each
        caller as it would the text, when the copies stay few (the product of uses
        and text bounds the states they add); set -> rule name."""
        uses = Counter(sets)
        out: Dict[Any, str] = {}
        for cs, n in uses.items():
            text = R.encode_set(cs)
            if text is not None and n > 1 and len(text) > _SHARED_SET_MIN_CHARS and n * len(text) <= _SHARED_SET_MAX_COPIES:
                out[cs] = name = f"{prefix}-c{len(out)}"
                self.add_rule(name, text, ())
        return out

    def name_dfa(self, sub, path):
        """A DFA of the strings valid under a propertyNames schema (None: all)."""
        parts = self.flatten([(sub, path, frozenset())])
        if parts is None:
            return D.DFA([[]], [False])
        dfa = None
        for s, p, skip in parts:
            for k in s:
                if k in ANNOTATIONS or k not in KNOWN:
                    continue
                if k in ("$ref", "allOf"):
                    continue
                if k == "type":
                    ts = set()
                    for y in (s[k] if isinstance(s[k], list) else [s[k]]):
                        ts |= _TYPE_MAP.get(y, set())
                    if "string" not in ts:
                        return D.DFA([[]], [False])
                    continue
                if k in _NUM_KW or k in _OBJ_KW or k in _ARR_KW:
                    continue  # do not apply to strings
                dd = None
                if k == "pattern":
                    dd = self.dfa_for(("pat", s[k]), p)
                elif k == "format" and s[k] in F.FORMAT_PATTERNS:
                    dd = self.dfa_for(("fmt", s[k]), p)
                elif k == "format":
                    continue
                elif k == "minLength":
                    dd = D.length_dfa(s[k], None)
                elif k == "maxLength":
                    dd = D.length_dfa(0, s[k])
                elif k in ("enum", "const"):
                    vals = [s["const"]] if k == "const" else s["enum"]
                    dd = D.words_dfa([v for v in vals if isinstance(v, str)])
                elif k == "$xg:notEnum":
                    dd = D.words_dfa([v for v in s[k] if isinstance(v, str)]).complement()
                elif k == "$xg:notPattern":
                    dd = self.dfa_for(("pat", s[k]), p).complement()
                elif k == "$xg:notFormat":
                    dd = self.dfa_for(("fmt", s[k]), p).complement()
                elif k == "$xg:types":
                    if "string" not in s[k]:
                        return D.DFA([[]], [False])
                    continue
                elif k == "not":
                    inner = self.name_dfa(s[k], _ptr_join(p, k))
                    dd = D.DFA([[]], [False]) if inner is None else inner.complement()
                elif k == "anyOf":
                    comp = None
                    for j, sub in enumerate(s[k]):
                        inner = self.name_dfa(sub, _ptr_join(p, k, j))
                        if inner is None:
                            comp = None
                            break
                        c = inner.complement()
                        comp = c if comp is None else comp.intersect(c)
                    else:
                        dd = comp.complement() if comp is not None else None
                    if dd is None:
                        continue
                else:
                    self.fail(k, _ptr_join(p, k), "not supported inside propertyNames")
                    continue
                try:
                    dfa = dd if dfa is None else dfa.intersect(dd)
                except D.DFAError as e:
                    self.fail("propertyNames", p, str(e))
        return dfa

    def obj_ordered(self, items, extra, min_p, max_p, d, hint, path="") -> Optional[str]:
        lay = self.layout
        n = len(items)
        counting = min_p > 0 or max_p is not None
        nreq = sum(1 for _, _, r in items if r)
        if max_p is not None and nreq > max_p:
            return None
        open_, close = '"{"', '"}"'
        empty_ok = nreq == 0 and min_p == 0
        memo: Dict[Tuple[int, int, bool], Optional[str]] = {}
        cap = min(max(min_p, max_p or 0) + 1, n + 1)  # c (declared present) <= n
        if counting and n * cap > 20000:
            self.fail("maxProperties" if max_p is not None else "minProperties", path,
                      "too many properties to count")
            counting, min_p, max_p = False, 0, None

        def extras(c: int, first: bool) -> Optional[str]:
            """Extra members once the declared ones are done; c members so far."""
            lo = max(0, min_p - c)
            hi = None if max_p is None else max_p - c
            if hi is not None and hi < 0:
                return None
            if extra is None:
                return '""' if lo == 0 else None
            unit_rest = f"{lay.sep(d)} {extra}"
            if first:
                if lo == 0:
                    if hi == 0:
                        return '""'
                    more = _rep(unit_rest, 0, None if hi is None else hi - 1)
                    return f"({extra} {more})?"
                more = _rep(unit_rest, lo - 1, None if hi is None else hi - 1)
                return f"{extra} {more}"
            return _rep(unit_rest, lo, hi)

        def T(i: int, c: int, first: bool) -> Optional[str]:
            if not counting:
                c = 0
            c = min(c, cap)
            key = (i, c, first)
            if key in memo:
                return memo[key]
            if i == n:
                res = extras(c, first)
                memo[key] = res
                return res
            name, member, req = items[i]
            sep = "" if first else lay.sep(d)
            take_rest = T(i + 1, c + 1, False)
            take = None if take_rest is None or (max_p is not None and c + 1 > max_p) else _seq(sep, member, take_rest)
            if req:
                res = take
            elif take is not None and take_rest == T(i + 1, c, first):
                # same rest either way: write it once (the alternation would
                # copy the whole rest, doubling the automaton per property)
                res = _seq(f"({_seq(sep, member)})?", take_rest)
            else:
                res = _alt([take, T(i + 1, c, first)])
            if res is not None and len(res) > 200 and (i, c, first) != (0, 0, True):
                rn = self.new_name(f"{hint}-t{i}")
                self.add_rule(rn, res)
                res = rn
            memo[key] = res
            return res

        def uncounted() -> Optional[str]:
            """Without counts: after(i) -- something is written, members from i
            may follow -- is ``(sep next(i))?`` (no ``?`` while a required one
            remains), and next(i) -- the next member written is one of i.. -- is
            ``member_i after(i+1) | next(i+1)``: the separator is written once per
            position, not once per candidate member, and the body is next(0)."""
            sep = lay.sep(d)
            more = "" if extra is None else _rep(f"{sep} {extra}", 0, None)
            nxt: Optional[str] = None if extra is None else _seq(extra, more)
            # the rule names in nxt, kept beside it in a long chain (so that
            # convert() need not read back the many rules it is cut into)
            track = n > _NAMED_CHAIN_MIN
            if track:
                sep_names = dict.fromkeys(_rule_refs(sep))
                more_names = {} if extra is None else {**dict.fromkeys(_rule_refs(extra)), **sep_names}
                nxt_names = dict(more_names)
            required_ahead = False  # among the members after i
            for i in range(n - 1, -1, -1):
                _, member, req = items[i]
                if nxt is not None and (len(nxt) > 200 or (not req and len(nxt) > 60)):
                    # next(i+1) is written twice (in after(i+1) and beside it): once,
                    # as a rule; and a long chain is cut into rules (regions of one
                    # automaton natively), not written as one growing text
                    rn = self.new_name(f"{hint}-n{i + 1}")
                    self.add_rule(rn, nxt, tuple(nxt_names) if track else None)
                    nxt = rn
                    if track:
                        nxt_names = {rn: None}
                if i == n - 1:
                    after = more or '""'
                else:
                    after = _seq(sep, nxt) if required_ahead else f"({sep} {nxt})?"
                take = _seq(member, after)
                if track:
                    after_names = more_names if i == n - 1 else {**sep_names, **nxt_names}
                    names = self.member_names.get(member)
                    take_names = {**dict.fromkeys(_rule_refs(member) if names is None else names), **after_names}
                    nxt_names = take_names if req else {**take_names, **nxt_names}
                nxt = take if req else _alt([take, nxt])
                required_ahead = required_ahead or req
            # (with every member optional the empty object is the caller's own
            # alternative: the body is at least one member)
            return '""' if nxt is None else nxt

        if not counting:
            body = uncounted()
        else:
            body = None
        if n > 256 and counting:  # fill the table from the end so T's recursion stays shallow
            # (nothing-yet-written entries only up to the first required member:
            # the start reaches no further ones)
            first_req = next((i for i, (_, _, r) in enumerate(items) if r), n)
            for i in range(n - 1, 0, -1):
                for c in range(cap + 1) if counting else (0,):
                    T(i, c, False)
                    if i <= first_req:
                        T(i, c, True)
        if counting:
            body = T(0, 0, True)
        alts = []
        if body is not None and body != '""':
            # the empty body is the empty object
            alts.append(f"{open_} {lay.first(d)} {body} {lay.last(d)} {close}")
        if empty_ok and not (max_p is not None and max_p < 0):
            alts.append(lay.empty(d, "{", "}"))
        if body == '""' and not empty_ok:
            return None
        return _alt(alts)

    def obj_any_order(self, items, extra, min_p, max_p, d, hint) -> Optional[str]:
        """Members in any order, each declared one at most once, extras anywhere:
        states (members present, extras count) after the first member."""
        lay = self.layout
        req_mask = 0
        for i, (_, _, r) in enumerate(items):
            if r:
                req_mask |= 1 << i
        counting = min_p > 0 or max_p is not None
        cap = (max_p if max_p is not None else min_p) + 1

        def st(mask, c):
            return (mask, min(c, cap) if counting else 0)

        def total(state):
            return bin(state[0]).count("1") + state[1]

        def moves(state, sep):
            mask, c = state
            out = []
            if max_p is not None and total(state) + 1 > max_p:
                return out
            for i, (_, member, _) in enumerate(items):
                if not mask >> i & 1:
                    out.append((_seq(sep, member), st(mask | 1 << i, c)))
            if extra is not None:
                out.append((_seq(sep, extra), st(mask, c + 1)))
            return out

        def final(state):
            return (state[0] & req_mask) == req_mask and total(state) >= min_p

        body = self.machine(f"{hint}-m", moves((0, 0), ""), lambda q: moves(q, lay.sep(d)), final)
        out = []
        if body is not None:
            out.append(f'"{{" {lay.first(d)} {body} {lay.last(d)} "}}"')
        if req_mask == 0 and min_p == 0:
            out.append(lay.empty(d, "{", "}"))
        return _alt(out)

    def obj_dependencies(self, parts, idx, kw, d, hint) -> Optional[str]:
        s, path, skip = parts[idx]
        deps = s[kw]
        if not isinstance(deps, dict):
            self.bad(kw, path, "must be an object")
        triggers = list(deps.keys())
        if len(triggers) > 6:
            self.fail(kw, path, "more than 6 trigger properties")
            return self.obj(self.with_skip(parts, idx, kw), d, hint)
        base = self.with_skip(parts, idx, kw)
        out = []
        for mask in range(1 << len(triggers)):
            extra_parts: list = []
            for i, t in enumerate(triggers):
                dep = deps[t]
                if mask >> i & 1:
                    d1: dict = {"required": [t]}
                    self.keep.append(d1)
                    extra_parts.append((d1, path, frozenset()))
                    if isinstance(dep, list):
                        d2 = {"required": list(dep)}
                        self.keep.append(d2)
                        extra_parts.append((d2, _ptr_join(path, kw, t), frozenset()))
                    else:
                        extra_parts.append((dep, _ptr_join(path, kw, t), _child(s, skip)))
                else:
                    d1 = {"properties": {t: False}}
                    self.keep.append(d1)
                    extra_parts.append((d1, path, frozenset()))
            sub = base + extra_parts
            flat = self.flatten(sub)
            if flat is None:
                continue
            # the dependent schemas apply to the object itself: restrict to objects
            obj_only = {"type": "object"}
            self.keep.append(obj_only)
            flat = self.flatten(sub + [(obj_only, path, frozenset())])
            if flat is None:
                continue
            out.append(self.value(flat, d, hint))
        return _alt(out)

    # ------------------------------------------------------------------ arrays
    def array(self, parts, d: int, hint: str) -> Optional[str]:
        lay = self.layout
        constrained = _strict_applies(parts, _ARR_STRICT_KW, "array", "prefixItems")
        min_i, max_i = 0, None
        contains: list = []
        unique = False
        per = []  # (prefix list of (schema, path), rest (schema, path) or None)
        unevals: list = []
        for pi_index, (s, path, skip) in enumerate(parts):
            it = s.get("items")
            if isinstance(it, list):  # draft 4-2019: items array + additionalItems
                pi, ipath = it, _ptr_join(path, "items")
                rest_s = (s["additionalItems"], _ptr_join(path, "additionalItems")) if "additionalItems" in s else None
            else:
                pi, ipath = s.get("prefixItems") or [], _ptr_join(path, "prefixItems")
                rest_s = (it, _ptr_join(path, "items")) if "items" in s else None
            if not isinstance(pi, list):
                self.bad("prefixItems", path, "must be an array")
            per.append(([(sub, _ptr_join(ipath, j)) for j, sub in enumerate(pi)], rest_s))
            if "unevaluatedItems" in s:
                unevals.append((s["unevaluatedItems"], _ptr_join(path, "unevaluatedItems"), frozenset()))
            if "minItems" in s:
                min_i = max(min_i, _nonneg_int(self, s["minItems"], "minItems", path))
            if "maxItems" in s:
                v = _nonneg_int(self, s["maxItems"], "maxItems", path)
                max_i = v if max_i is None else min(max_i, v)
            if "contains" in s:
                lo = s.get("minContains", 1)
                hi = s.get("maxContains")
                contains.append(((s["contains"], _ptr_join(path, "contains"), frozenset()), lo, hi, path, pi_index))
            if s.get("uniqueItems") is True:
                unique = True
        M = max((len(pre) for pre, _ in per), default=0)

        def position(j: Optional[int], extra=()):
            """The conj for item j (None: past every prefix), or None: no item.
            ``extra``: indexes of parts that evaluate it too (a matched contains)."""
            conj: list = []
            evaluated = {i for i in extra if ("noeval",) not in parts[i][2]}
            for i, (pre, rest_s) in enumerate(per):
                if ("noeval",) in parts[i][2]:
                    evaluated_ok = False
                else:
                    evaluated_ok = True
                if j is not None and j < len(pre):
                    conj.append((pre[j][0], pre[j][1], frozenset()))
                    if evaluated_ok:
                        evaluated.add(i)
                elif rest_s is not None:
                    conj.append((rest_s[0], rest_s[1], frozenset()))
                    if evaluated_ok:
                        evaluated.add(i)
            unev = self.uneval_for(parts, evaluated, "unevaluatedItems")
            conj.extend(unev)
            if not evaluated and not unev and not unevals and self.strict and constrained:
                return None
            return conj

        prefix = []
        for j in range(M):
            c = position(j)
            prefix.append(c if c is not None else [(False, parts[0][1], frozenset())])
        rest = position(None)
        if max_i is not None and max_i < min_i:
            return None
        if len(contains) > 1:
            self.fail("contains", contains[1][3], "several contains keywords cannot be combined")
            contains = contains[:1]
        if unique and (max_i is None or max_i > 1):
            return self.array_unique(prefix, rest, min_i, max_i, contains, parts, d, hint)
        if contains:
            return self.array_contains(prefix, rest, min_i, max_i, contains[0], d, hint, position, M)
        pexprs = []
        for j, conj in enumerate(prefix):
            pexprs.append(self.value(conj, d + 1, f"{hint}-{j}"))
        rexpr = None if rest is None else self.value(rest, d + 1, f"{hint}-item")
        # (written twice, first item and the rest: a long one once, as a rule)
        return self.array_seq(pexprs, self.hoist(rexpr, f"{hint}-item"), min_i, max_i, d)

    def array_seq(self, pexprs, rexpr, min_i, max_i, d) -> Optional[str]:
        lay = self.layout
        m = len(pexprs)
        # positions 0..m-1 from the prefix; then rexpr repeated
        for j, e in enumerate(pexprs):
            if e is None:
                # no array has an item at j: length <= j
                max_i = j if max_i is None else min(max_i, j)
                pexprs = pexprs[:j]
                m = j
                rexpr = None
                break
        if max_i is not None and max_i < min_i:
            return None
        maxlen = max_i
        if rexpr is None:
            maxlen = m if maxlen is None else min(maxlen, m)
        if maxlen is not None and maxlen < min_i:
            return None

        def tail(j: int) -> Optional[str]:
            """Items from position j (j >= 1 items already written)."""
            if maxlen is not None and j >= maxlen:
                return '""'
            if j < m:
                nxt = tail(j + 1)
                item = _seq(lay.sep(d), pexprs[j], nxt)
                return item if j < min_i else f"({item})?"
            lo = max(0, min_i - j)
            hi = None if maxlen is None else maxlen - j
            return _rep(f"{lay.sep(d)} {rexpr}", lo, hi)

        alts = []
        if min_i == 0:
            alts.append(lay.empty(d, "[", "]"))
        if maxlen is None or maxlen >= 1:
            first = pexprs[0] if m > 0 else rexpr
            if first is not None:
                alts.append(f'"[" {lay.first(d)} {_seq(first, tail(1))} {lay.last(d)} "]"')
        return _alt(alts)

    def array_contains(self, prefix, rest, min_i, max_i, contains, d, hint, position=None, M=0) -> Optional[str]:
        """Items split into those matching ``contains`` and those not; states
        (position, matches so far), both capped.  Matching items count as
        evaluated for unevaluatedItems (``position(j, extra)`` rebuilds them)."""
        (cs, cpath, _), lo_c, hi_c, path, ci = contains
        lo_c = _nonneg_int(self, lo_c, "minContains", path)
        hi_c = None if hi_c is None else _nonneg_int(self, hi_c, "maxContains", path)
        lay = self.layout
        neg = self.negate(cs, cpath)
        m = len(prefix)

        def split(conj, label, j):
            yconj = conj
            if position is not None:
                yconj = position(j if j < M else None, (ci,))
                if yconj is None:
                    yconj = [(False, cpath, frozenset())]
            yes = self.value(yconj + [(cs, cpath, frozenset())], d + 1, f"{hint}-{label}-c")
            no = None
            if conj is not None:
                no = _alt([self.value(conj + [(a, cpath, _NOEVAL)], d + 1, f"{hint}-{label}-n") for a in neg])
            return yes, no

        pre = [split(c, str(j), j) for j, c in enumerate(prefix)]
        rs = split(rest, "item", m)
        if rest is None and position is None:
            rs = (None, None)
        cap_c = (hi_c if hi_c is not None else lo_c) + 1
        maxlen = max_i
        if rs == (None, None):
            maxlen = m if maxlen is None else min(maxlen, m)
        len_cap = max(m, min_i) if maxlen is None else maxlen
        if cap_c * (len_cap + 1) > 20000:
            self.fail("contains", path, "the array bounds are too large to count contained items")
            return self.array_seq([self.value(c, d + 1, hint) for c in prefix],
                                  None if rest is None else self.value(rest, d + 1, hint), min_i, max_i, d)

        def st(j, c):
            return (j if maxlen is not None else min(j, len_cap), min(c, cap_c))

        def moves(state, sep):
            j, c = state
            if maxlen is not None and j >= maxlen:
                return []
            y, n = pre[j] if j < m else rs
            out = []
            if y is not None:
                out.append((_seq(sep, y), st(j + 1, c + 1)))
            if n is not None:
                out.append((_seq(sep, n), st(j + 1, c)))
            return out

        def final(state):
            j, c = state
            return j >= min_i and c >= lo_c and (hi_c is None or c <= hi_c)

        body = self.machine(f"{hint}-c", moves((0, 0), ""), lambda q: moves(q, lay.sep(d)), final)
        out = []
        if body is not None:
            out.append(f'"[" {lay.first(d)} {body} {lay.last(d)} "]"')
        if final((0, 0)):
            out.append(lay.empty(d, "[", "]"))
        return _alt(out)

    def array_unique(self, prefix, rest, min_i, max_i, contains, parts, d, hint) -> Optional[str]:
        """uniqueItems over a finite item space: a subset automaton over the values."""
        path = next((p for s, p, _ in parts if s.get("uniqueItems") is True), "")
        if prefix:
            self.fail("uniqueItems", path, "uniqueItems with prefixItems is not supported")
            return self.array_seq([self.value(c, d + 1, hint) for c in prefix],
                                  None if rest is None else self.value(rest, d + 1, hint), min_i, max_i, d)
        if contains:
            self.fail("uniqueItems", path, "uniqueItems with contains is not supported")
        if rest is None:
            return self.array_seq([], None, min_i, max_i, d)
        vals = self.finite_values(rest)
        if vals is None or len(vals) > 10:
            self.fail("uniqueItems", path, "the items are not a small finite set of values")
            return self.array_seq([], self.value(rest, d + 1, hint), min_i, max_i, d)
        lay = self.layout
        lits = [self.literal(v, d + 1) for v in vals]
        k = len(vals)
        cap = k if max_i is None else min(k, max_i)
        if min_i > cap:
            return None

        def moves(mask, sep):
            if bin(mask).count("1") >= cap:
                return []
            return [(_seq(sep, lits[i]), mask | 1 << i) for i in range(k) if not mask >> i & 1]

        body = self.machine(f"{hint}-u", moves(0, ""), lambda q: moves(q, lay.sep(d)),
                            lambda q: bin(q).count("1") >= min_i)
        out = []
        if body is not None:
            out.append(f'"[" {lay.first(d)} {body} {lay.last(d)} "]"')
        if min_i == 0:
            out.append(lay.empty(d, "[", "]"))
        return _alt(out)

    def finite_values(self, conj) -> Optional[list]:
        """The distinct values a schema allows when it is a small finite set."""
        parts = self.flatten(conj)
        if parts is None:
            return []
        cand = None
        types = set(_ALL_TYPES)
        for s, path, skip in parts:
            if any(k in s and k not in skip for k in ("anyOf", "oneOf", "not", "if")):
                return None
            if "const" in s:
                cand = [s["const"]] if cand is None else [v for v in cand if _json_equal(v, s["const"])]
            if "enum" in s:
                cand = list(s["enum"]) if cand is None else [v for v in cand if any(_json_equal(v, w) for w in s["enum"])]
            if "type" in s:
                ts = set()
                for y in (s["type"] if isinstance(s["type"], list) else [s["type"]]):
                    ts |= _TYPE_MAP.get(y, set())
                types &= ts
        if cand is None:
            if types <= {"null", "boolean"}:
                cand = ([None] if "null" in types else []) + ([True, False] if "boolean" in types else [])
            else:
                return None
        out: list = []
        for v in cand:
            if _json_type(v) not in types:
                continue
            if not all(self.check(v, s, p, skip) for s, p, skip in parts):
                continue
            if not any(_json_equal(v, w) for w in out):
                out.append(v)
        return out

    # ------------------------------------------------------------------ entry
    def convert(self) -> str:
        self.empty_rules = set()
        root = self.value([(self.root, "", frozenset())], 0, "root-value")
        if root is None:
            raise GrammarError("the schema accepts no value")
        self.convert_pending()
        # keep the rules reachable from root (helpers of abandoned branches go)
        reach = set()
        todo = [_rule_refs(root)]
        while todo:
            for nm in todo.pop():
                if nm in self.rules and nm not in reach:
                    reach.add(nm)
                    known = self.rule_names.get(nm)
                    todo.append(_rule_refs(self.rules[nm]) if known is None else known)
                elif nm in self.empty_rules:
                    raise GrammarError(f"internal: rule {nm} matches nothing but is used")
        lines = [f"root ::= {root}"]
        for name, body in self.rules.items():
            if name in reach:
                lines.append(f"{name} ::= {body}")
        text = "\n".join(lines) + "\n"
        return text


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


def _load_schema(schema) -> Any:
    if isinstance(schema, (str, bytes)):
        try:
            return json.loads(schema)
        except RecursionError:  # (the json module's own nesting guard)
            raise GrammarError(f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels") from None
        except ValueError as e:  # JSONDecodeError, and UnicodeDecodeError for bytes
            raise InvalidArgumentError(f"the schema is not valid JSON: {e}") from None
    if isinstance(schema, (dict, bool)):
        return schema
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    raise InvalidArgumentError(
        f"schema must be a JSON string, a dict or a pydantic model class, got {type(schema).__name__}")


def _check_depth(schema) -> bool:
    """GrammarError, naming the JSON pointer, where a document nests arrays and
    objects (enum and const values too) deeper than MAX_SCHEMA_DEPTH.  Iterative:
    this is what keeps every recursion along the nesting bounded.  (A Python
    schema can share subschemas or even contain itself: each node is visited
    again only at a greater depth, so this ends.)  Returns whether some object
    has a key that can set a base URI or an anchor (else the converter's index
    of them is known without walking the document again)."""
    depth_of: Dict[int, int] = {}
    stack: List[Any] = [(schema, 1, None, None)]  # (node, depth, parent entry, key)
    scoped = False
    while stack:
        entry = stack.pop()
        node, d = entry[0], entry[1]
        if not scoped and isinstance(node, dict) and not _SCOPE_KW.isdisjoint(node):
            scoped = "id" not in node or "$schema" in node or len(_SCOPE_KW.intersection(node)) > 1
        if len(depth_of) & 4095 == 4095:
            _budget.check("json_schema: measuring nesting")
        if d > MAX_SCHEMA_DEPTH:
            keys = []
            while entry[2] is not None:
                keys.append(entry[3])
                entry = entry[2]
            raise GrammarError(f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels "
                               f"(at {_ptr_join('', *reversed(keys))})")
        for k, v in (node.items() if isinstance(node, dict) else enumerate(node)):
            if isinstance(v, (dict, list, tuple)) and depth_of.get(id(v), 0) < d + 1:
                depth_of[id(v)] = d + 1
                stack.append((v, d + 1, entry, k))
    return scoped


# The keywords index() reads (an object with none of them adds nothing there
# but its base, which is the document's own when no object has them; "id" only
# beside "$schema", so a property named id is no scope).
_SCOPE_KW = frozenset({"$id", "id", "$anchor", "$dynamicAnchor"})


def json_schema_to_ebnf(schema, *, any_whitespace: bool = True, indent: Optional[int] = None,
                        separators: Optional[Tuple[str, str]] = None, strict_mode: bool = True,
                        max_whitespace_cnt: Optional[int] = None, any_order: bool = False,
                        lenient: bool = False) -> str:
    """The EBNF text of a JSON Schema (see the module docstring)."""
    schema = _load_schema(schema)
    if indent is not None and (isinstance(indent, bool) or not isinstance(indent, int) or indent < 0):
        raise InvalidArgumentError(f"indent must be a non-negative int or None, got {indent!r}")
    if separators is not None:
        if len(separators) != 2 or not all(isinstance(x, str) for x in separators):
            raise InvalidArgumentError("separators must be a pair of strings")
        for x, ch in zip(separators, ",:"):
            if x.strip(" \n\t\r") != ch:
                raise InvalidArgumentError(f"separator {x!r} must be {ch!r} with JSON whitespace around it")
    if max_whitespace_cnt is not None and (not isinstance(max_whitespace_cnt, int) or max_whitespace_cnt < 0):
        raise InvalidArgumentError("max_whitespace_cnt must be a non-negative int or None")
    scoped = _check_depth(schema) if isinstance(schema, dict) else True
    conv = _Converter(schema, any_whitespace=any_whitespace, indent=indent, separators=separators,
                      strict_mode=strict_mode, max_whitespace_cnt=max_whitespace_cnt,
                      any_order=any_order, lenient=lenient)
    if not scoped:  # no base URI or anchor anywhere: the index is the root alone
        conv.indexed = True
        conv.resources[_DEFAULT_BASE] = (schema, "")
    try:
        return conv.convert()
    except RecursionError:
        raise GrammarError("the schema nests too deeply to convert") from None
    except XG2Error:
        raise
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, OverflowError, ZeroDivisionError) as e:
        # a keyword with a value of the wrong shape that no check caught
        raise GrammarError(f"invalid schema: {type(e).__name__}: {e}") from e
