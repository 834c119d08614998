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

The converter (``_Converter``, here: references, parts and values, shared targets,
enums, numbers, strings) hands objects, arrays, negation and instance checks to
modules of functions over it: ``json_schema_objects``, ``json_schema_arrays``,
``json_schema_negation``, ``json_schema_check``; ``json_schema_common`` holds the
keyword sets, limits and EBNF writers they share.
"""

from __future__ import annotations

import json
import re
import warnings
from fractions import Fraction
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urldefrag

from ._errors import GrammarError, InvalidArgumentError, XG2Error, as_flag, as_optional_count
from . import _budget
from . import json_schema_arrays as ARR
from . import json_schema_check as CHK
from . import json_schema_dfa as D
from . import json_schema_formats as F
from . import json_schema_fragments as FR
from . import json_schema_negation as NEG
from . import json_schema_objects as OBJ
from . import json_schema_presets as P
from . import json_schema_regex as R
from .json_schema_common import (
    MAX_SCHEMA_DEPTH, _ALL_TYPES, _CONTAINER_KW, _DEFAULT_BASE, _DEFER_DEPTH, _ENUM_ONLY_KW,
    _LEGACY_ASSERTIONS, _Layout, _MAX_ALTERNATIVES, _MISSING, _NOEVAL, _NUM_KW, _TYPE_MAP, _alt,
    _child, _count_bounds, _finite_number, _inert, _json_equal, _json_type, _lcm_frac, _length_string,
    _name_base, _plain_value, _ptr_join, _rule_refs, _seq, _split_ref, _urljoin,
)

__all__ = ["json_schema_to_ebnf"]


class _Converter:
    """One conversion: the schema, the rules written so far and the caches of one
    document (the process-wide ones are json_schema_fragments' and the lru_caches)."""

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

    def shared(self, name: str, body: str, names: Optional[Tuple[str, ...]] = None) -> str:
        """A helper rule defined once per grammar (``names``: see add_rule)."""
        if name not in self.rules:
            self.add_rule(name, body, names)
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
                branches = NEG.one_of_branches(self, subs, kpath)
        elif kw == "not":
            alts = NEG.negate(self, s["not"], kpath)
            branches = [[(a, kpath, _NOEVAL)] for a in alts]
        elif kw == "if":
            cond = s["if"]
            then = s.get("then", True)
            els = s.get("else", True)
            base = self.with_skip(self.with_skip(self.with_skip(parts, idx, "if"), idx, "then"), idx, "else")
            ch = _child(s, skip)
            branches = [[(cond, kpath, ch), (then, _ptr_join(path, "then"), ch)]]
            for a in NEG.negate(self, cond, kpath):
                branches.append([(a, kpath, _NOEVAL), (els, _ptr_join(path, "else"), ch)])
        self.alt_count += len(branches)
        if self.alt_count > _MAX_ALTERNATIVES:
            raise GrammarError(f'schema too large: more than {_MAX_ALTERNATIVES} alternatives (at "{kw}" {path or "/"})')
        out = []
        for br in branches:
            out.append(self.value(base + br, d, hint))
        return _alt(out)

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
                        enum_vals = [v for v in enum_vals if CHK.in_enum(self, v, vals)]
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
            alts.append(OBJ.obj(self, parts, d, hint))
        if "array" in types:
            alts.append(ARR.array(self, parts, d, hint))
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
            if CHK.in_enum(self, v, not_vals):
                continue
            ok = True
            for s, path, skip in parts:
                r = CHK.check(self, v, s, path, skip)
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
            # (shared: a numeric format's written-out rules come once, however many
            # values take the format -- 56 in a Pod)
            return F.number_expr(lo, lo_excl, hi, hi_excl, integer, multiple,
                                 add_rule=self.shared, prefix=self.new_name(hint + "-num"),
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
            min_len, max_len = _count_bounds(self, s, "minLength", "maxLength", path, min_len, max_len)
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

    # ------------------------------------------------------------------ finite value sets
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
            if not all(CHK.check(self, v, s, p, skip) for s, p, skip in parts):
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


def check_options(any_whitespace: Any, indent: Any, separators: Any, strict_mode: Any,
                  max_whitespace_cnt: Any, any_order: Any, lenient: Any) -> Dict[str, Any]:
    """The conversion options, checked (never coerced: ``strict_mode="false"`` is not
    True), by name, or ``InvalidArgumentError`` naming the option."""
    if separators is not None:
        if isinstance(separators, (str, bytes)) or not hasattr(separators, "__iter__"):
            raise InvalidArgumentError(f"separators must be a pair of strings or None, got {separators!r:.80}")
        separators = tuple(separators)
        if len(separators) != 2 or not all(isinstance(x, str) for x in separators):
            raise InvalidArgumentError(f"separators must be a pair of strings, got {separators!r:.80}")
        for x, ch in zip(separators, ",:"):
            if x.strip(" \n\t\r") != ch:
                raise InvalidArgumentError(f"separator {x!r} must be {ch!r} with JSON whitespace around it")
    return {"any_whitespace": as_flag(any_whitespace, "any_whitespace"),
            "indent": as_optional_count(indent, "indent"), "separators": separators,
            "strict_mode": as_flag(strict_mode, "strict_mode"),
            "max_whitespace_cnt": as_optional_count(max_whitespace_cnt, "max_whitespace_cnt"),
            "any_order": as_flag(any_order, "any_order"), "lenient": as_flag(lenient, "lenient")}


def json_schema_to_ebnf(schema, *, any_whitespace: Any = True, indent: Any = None,
                        separators: Any = None, strict_mode: Any = True,
                        max_whitespace_cnt: Any = None, any_order: Any = False,
                        lenient: Any = False) -> str:
    """The EBNF text of a JSON Schema (see the module docstring)."""
    schema = _load_schema(schema)
    opts = check_options(any_whitespace, indent, separators, strict_mode, max_whitespace_cnt, any_order, lenient)
    scoped = _check_depth(schema) if isinstance(schema, dict) else True
    conv = _Converter(schema, **opts)
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
