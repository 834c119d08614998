r"""``excludes`` on a ``json``-style ``json_schema`` format, as a schema transform.

The words are forbidden in every string value not constrained by ``pattern`` or a
checked ``format``, and in every property name, nested values included (XGrammar
0.2.8's ``JSONSchemaFormat.excludes``). The transform writes this with keywords the
JSON Schema front-end compiles exactly, so no new grammar machinery is needed:

- a subschema that may be a string gets ``{"not": {"type": "string", "pattern": P}}``
  (P: ``^[\s\S]*(?:w1|w2|...)``, the words escaped: "contains one of them", so the
  ``not`` means "contains none");
- a subschema that may be an object gets ``propertyNames: {"not": {"pattern": P}}``
  and, where it leaves them unconstrained, ``additionalProperties`` / ``items`` set
  to ``ANY``: any JSON value whose strings and keys avoid P (one recursive
  definition under ``$defs``); ``{}`` and ``true`` become ``ANY`` too;
- ``enum`` / ``const`` alternatives holding a word are removed.

A word that is a special token's text is kept: no special token is ever written
inside JSON, so its spelling in ordinary tokens is what the word can mean there.

``not``, ``if``, ``contains`` and ``propertyNames`` are left as they are: narrowing
a negated or tested schema would widen what the whole accepts, and the values they
look at are covered by the sibling keywords. The front-end matches ``pattern``
against the decoded string, so a word is refused however the emitter escapes it
(README, structural tags, says how this differs from XGrammar's raw-text match).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from .. import json_schema_formats as _formats
from .._errors import GrammarError, LimitExceededError
from ..json_schema_common import _ARR_STRICT_KW, _OBJ_STRICT_KW
from ..json_schema_dfa import MAX_DFA_STATES

ANY_NAME = "xg2_excludes_any"

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated",
                          "readOnly", "writeOnly"})
_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SINGLES = ("additionalProperties", "unevaluatedProperties", "items", "additionalItems",
            "unevaluatedItems", "then", "else")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SYNTAX = set("\\^$.|?*+()[]{}/")


def decoded_words(words: List[str]) -> List[str]:
    """The words as matched against decoded strings: each word, and also its JSON
    decoding where it is written with escapes (``<\\/tool>`` also forbids ``</tool>``)."""
    out: Dict[str, None] = {}  # ordered, and a set
    for w in words:
        forms = [w]
        if "\\" in w:
            try:
                d = json.loads('"' + w + '"')
            except ValueError:
                d = None
            if isinstance(d, str) and d:
                forms.append(d)
        out.update(dict.fromkeys(forms))
    return list(out)


def words_pattern(words: List[str]) -> str:
    """An ECMA-262 pattern matching any string that contains one of ``words``."""
    def esc(c: str) -> str:
        if c in _SYNTAX:
            return "\\" + c
        if ord(c) < 0x20 or 0xD800 <= ord(c) < 0xE000 or ord(c) == 0x7F:
            return "\\u%04x" % ord(c)
        return c

    # One leading `[\s\S]*` before the group (the front-end's parse_pattern now also
    # takes a shared `.*` out of a searched alternation; this spelling predates that and
    # gives the same automaton).
    return "^[\\s\\S]*(?:" + "|".join("".join(esc(c) for c in w) for w in words) + ")"


def _clean(value: Any, words: List[str]) -> bool:
    """Whether no string or key of the JSON value holds a word."""
    if isinstance(value, str):
        return not any(w in value for w in words)
    if isinstance(value, list):
        return all(_clean(v, words) for v in value)
    if isinstance(value, dict):
        return all(_clean(k, words) and _clean(v, words) for k, v in value.items())
    return True


def _checked(s: Any) -> bool:
    """A string the words do not filter: one with a pattern or a format we check."""
    return isinstance(s, dict) and ("pattern" in s or s.get("format") in _formats.FORMAT_PATTERNS)


def _strict(conjuncts: List[dict], keywords, kind: str, declaring: str) -> bool:
    """Whether the front-end's strict mode (XGrammar's) already allows no extra
    properties (items) here: the conjuncts use its keywords and say they are ``kind``.
    Then nothing is added, which would lift that limit."""
    return (any(not keywords.isdisjoint(c) for c in conjuncts)
            and any(_may_be(c, kind) and "type" in c or declaring in c for c in conjuncts))


def _may_be(s: dict, t: str) -> bool:
    ty = s.get("type")
    return ty is None or ty == t or (isinstance(ty, list) and t in ty)


class _Transform:
    def __init__(self, words: List[str], ref: str) -> None:
        self.words = words
        pat = words_pattern(words)
        self.str_not = {"not": {"type": "string", "pattern": pat}}
        self.key_not = {"not": {"pattern": pat}}
        self.any = {"$ref": ref}
        # a bare {"type": "string" | "object" | "array"} is one shared definition (each
        # copy would be its own automaton in the grammar)
        self.bare = {t: {"$ref": f"{ref}_{t}"} for t in ("string", "object", "array")}

    def defs(self) -> dict:
        """The definitions ``self.any`` and ``self.bare`` name, by their names."""
        name = self.any["$ref"].rsplit("/", 1)[1]
        return {name: {"anyOf": [{"type": ["null", "boolean", "number"]}, *self.bare.values()]},
                f"{name}_string": {"type": "string", **self.str_not},
                f"{name}_object": {"type": "object", "propertyNames": self.key_not, "additionalProperties": self.any},
                f"{name}_array": {"type": "array", "items": self.any}}

    def sub(self, s: Any, exempt: bool = False) -> Any:
        if s is True:
            return self.any
        if not isinstance(s, dict):
            return s  # false, or a malformed value the front-end reports with its path
        if not s.keys() - _ANNOTATIONS:
            return self.any
        ty = s.get("type")  # (any JSON value: a malformed one is the front-end's to report)
        if isinstance(ty, str) and ty in self.bare and not s.keys() - _ANNOTATIONS - {"type"} and not exempt:
            return self.bare[ty]
        out = dict(s)
        conjuncts = [s] + [b for b in s.get("allOf", []) if isinstance(b, dict)] \
            if isinstance(s.get("allOf"), list) else [s]
        exempt = exempt or any(_checked(c) for c in conjuncts)
        for k in _MAPS:
            if isinstance(s.get(k), dict):
                out[k] = {name: self.sub(v) for name, v in s[k].items()}
        for k in _SINGLES:
            if k in s:
                out[k] = [self.sub(v) for v in s[k]] if isinstance(s[k], list) else self.sub(s[k])
        for k in _LISTS:
            if isinstance(s.get(k), list):
                out[k] = [self.sub(v, exempt and k == "allOf") for v in s[k]]
        if isinstance(s.get("dependencies"), dict):  # draft 7: a schema or a list of names
            out["dependencies"] = {n: v if isinstance(v, list) else self.sub(v) for n, v in s["dependencies"].items()}
        if "const" in s and not _clean(s["const"], self.words):
            return False
        if isinstance(s.get("enum"), list):
            out["enum"] = [v for v in s["enum"] if _clean(v, self.words)]
        if any(k in s for k in ("enum", "const", "anyOf", "oneOf", "$ref", "$dynamicRef")):
            return out  # the alternatives or the referenced schema decide the rest
        self.add(s, out, exempt)
        return out

    def add(self, s: dict, out: dict, exempt: bool) -> None:
        if _may_be(s, "string") and not exempt:
            out["allOf"] = list(out.get("allOf", [])) + [self.str_not]
        conjuncts = [s] + [b for b in s.get("allOf", ()) if isinstance(b, dict)]
        if _may_be(s, "object"):
            out["propertyNames"] = {"allOf": [s["propertyNames"], self.key_not]} if "propertyNames" in s \
                else self.key_not
            if not any(k in c for c in conjuncts for k in ("additionalProperties", "unevaluatedProperties")) \
                    and not _strict(conjuncts, _OBJ_STRICT_KW, "object", "properties"):
                out["additionalProperties"] = self.any
        if _may_be(s, "array") and not any("unevaluatedItems" in c for c in conjuncts):
            if not any("items" in c for c in conjuncts):
                if not _strict(conjuncts, _ARR_STRICT_KW, "array", "prefixItems"):
                    out["items"] = self.any
            elif isinstance(s.get("items"), list) and "additionalItems" not in s \
                    and not _strict(conjuncts, _ARR_STRICT_KW, "array", "items"):
                out["additionalItems"] = self.any


_ROOT_ID = "urn:xg2:excludes-root"


def _base(schema) -> tuple:
    """(the URI our definitions are named under, a root ``$id`` to add or None). A
    ``#/$defs/...`` reference under a nested ``$id`` would resolve against that
    ``$id``; then the definitions are named by the root's absolute ``$id`` (one is
    added if the root has none)."""
    if not isinstance(schema, dict):
        return "", None
    rest = {k: v for k, v in schema.items() if k != "$id"}
    try:
        nested = '"$id"' in json.dumps(rest)
    except (TypeError, ValueError, RecursionError):
        return "", None  # the front-end reports what is wrong with the schema
    if not nested:
        return "", None
    rid = schema.get("$id")
    if isinstance(rid, str) and ":" in rid:
        return rid.split("#")[0], None
    return ("", None) if "$id" in schema else (_ROOT_ID, _ROOT_ID)


def exclude_words(schema: Any, words: List[str], path: str, words_path: str = "excludes") -> Any:
    """``schema`` (not modified) with ``words`` forbidden as the module says."""
    if not words or schema is False:
        return schema
    words = decoded_words(words)
    total = sum(len(w) for w in words)
    if total >= MAX_DFA_STATES:  # the "contains none" automaton has a state per character
        raise LimitExceededError(f"{words_path}: {total} characters of excluded words in all; inside JSON "
                                 f"strings at most {MAX_DFA_STATES - 1}")
    defs = schema.get("$defs") if isinstance(schema, dict) else None
    if defs is not None and not isinstance(defs, dict):
        return schema  # malformed: the front-end reports it
    name = ANY_NAME
    while defs and any(k.startswith(name) for k in defs):
        name += "_"
    base, root_id = _base(schema)
    t = _Transform(words, f"{base}#/$defs/{name}")
    try:
        out = t.sub(schema)
    except RecursionError:
        raise GrammarError(f"{path}: the schema nests too deeply") from None
    if out is t.any or not isinstance(out, dict):
        out = {"$ref": t.any["$ref"]} if out is t.any else out
    if isinstance(out, dict):
        out = dict(out)
        out["$defs"] = {**out.get("$defs", {}), **t.defs()}
        if root_id:
            out["$id"] = root_id
    return out


__all__ = ["exclude_words", "decoded_words", "words_pattern", "ANY_NAME"]
