"""Sample instances of a tool's argument schema, as a model would write them.

A tool's arguments are a JSON schema compiled once as a piece of every tag it
comes in (``xg2_plugin.linking``); the states of that grammar a call meets
first are new masks, a walk of the vocabulary each.  The compiler computes them
ahead, in the background, along these samples (``xg2_compiled_precompute_text``):
a walk of the grammar through the states a call is likely to pass, rather than
all of them (a number alone is ~40 states of fractions and exponents, whose
masks are 16 KB each).  A sample need not be valid: the walk stops where the
grammar refuses it, having computed what came before.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple

_MAX_DEPTH = 8
_MAX_BYTES = 4096

# Two writers of scalars: the first takes every property, the second only the
# required ones, with the other spelling of each kind (0 and 0.25 leave a
# number by other states than -12345 and -1.2345e-05; "" than "a b").  A
# digit's state is counted (a JSON number's digits are bounded in compliant
# mode): five digits cover the counts of most numbers a call writes; the sign
# and the exponent are states a call meets too (BFCL: 8.854e-12, "b": -3),
# each a vocabulary walk when first met.  An array's later items take the
# other writer's scalars ([-1.2345e-05, 0.25]: both of an item's spellings in
# an optional array, which the second writer leaves out).
_FULL = {"string": "a b", "integer": -12345, "number": -1.2345e-05, "boolean": True, "array_len": 2}
_TERSE = {"string": "", "integer": 0, "number": 0.25, "boolean": False, "array_len": 1}


def sample_arguments(schema: Any) -> Tuple[bytes, ...]:
    """Up to two JSON texts for ``schema`` (a dict), each at most 4 KB: every
    property with ordinary values, then the required ones with others."""
    out: List[bytes] = []
    for style, every in ((_FULL, True), (_TERSE, False)):
        value = _Sampler(schema, style, every).sample(schema, 0)
        if value is _NONE:
            continue
        text = json.dumps(value).encode("utf-8")
        if len(text) <= _MAX_BYTES and text not in out:
            out.append(text)
    return tuple(out)


class _NoSample:
    pass


_NONE = _NoSample()


class _Sampler:
    def __init__(self, root: Any, style: Dict[str, Any], every: bool) -> None:
        self.root = root
        self.style = style
        self.other = _TERSE if style is _FULL else _FULL  # (an array's later items)
        self.every = every

    def sample_other(self, s: Any, depth: int) -> Any:
        """``sample`` with the other writer's scalars (an array's later items)."""
        self.style, self.other = self.other, self.style
        try:
            return self.sample(s, depth)
        finally:
            self.style, self.other = self.other, self.style

    def sample(self, s: Any, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            return _NONE
        if s is True:
            return self.style["string"]
        if not isinstance(s, dict):
            return _NONE
        if isinstance(s.get("$ref"), str):
            return self.sample(self._resolve(s["$ref"]), depth + 1)
        if "const" in s:
            return s["const"]
        if isinstance(s.get("enum"), list) and s["enum"]:
            return s["enum"][0]
        for key in ("anyOf", "oneOf", "allOf"):
            if isinstance(s.get(key), list) and s[key]:
                return self.sample(s[key][0], depth + 1)
        kind = s.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
        if kind is None:
            kind = "object" if "properties" in s else "array" if "items" in s else None
        if kind == "object":
            return self._object(s, depth)
        if kind == "array":
            return self._array(s, depth)
        if kind in ("integer", "number"):
            return self._number(s, kind)
        if kind == "string":
            return self.style["string"]
        if kind == "boolean":
            return self.style["boolean"]
        if kind == "null":
            return None
        if kind is None:  # (no type: any value does)
            return self.style["string"]
        return _NONE

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        node = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node.get(part) if isinstance(node, dict) else None
        return node

    def _object(self, s: Dict[str, Any], depth: int) -> Any:
        props = s.get("properties")
        if not isinstance(props, dict):
            return {}
        required = set(s.get("required") or ())
        out: Dict[str, Any] = {}
        for name, sub in props.items():
            if not self.every and name not in required:
                continue
            value = self.sample(sub, depth + 1)
            if value is _NONE:
                return _NONE if name in required else out
            out[name] = value
        return out

    def _array(self, s: Dict[str, Any], depth: int) -> Any:
        n = self.style["array_len"]
        lo, hi = s.get("minItems"), s.get("maxItems")
        if isinstance(lo, int) and n < lo:
            n = min(lo, 4)
        if isinstance(hi, int) and n > hi:
            n = max(hi, 0)
        prefix = s.get("prefixItems")
        item = s.get("items", True)
        out = []
        for i in range(n):
            sub = prefix[i] if isinstance(prefix, list) and i < len(prefix) else item
            value = self.sample(sub, depth + 1) if i == 0 else self.sample_other(sub, depth + 1)
            if value is _NONE:
                return _NONE
            out.append(value)
        return out

    def _number(self, s: Dict[str, Any], kind: str) -> Any:
        value: Any = self.style[kind]
        lo: Optional[float] = s.get("minimum") if isinstance(s.get("minimum"), (int, float)) else None
        hi: Optional[float] = s.get("maximum") if isinstance(s.get("maximum"), (int, float)) else None
        xlo = s.get("exclusiveMinimum") if isinstance(s.get("exclusiveMinimum"), (int, float)) else None
        xhi = s.get("exclusiveMaximum") if isinstance(s.get("exclusiveMaximum"), (int, float)) else None
        if lo is not None and value < lo:
            value = lo
        if hi is not None and value > hi:
            value = hi
        if xlo is not None and value <= xlo:
            value = xlo + 1
        if xhi is not None and value >= xhi:
            value = xhi - 1
        return int(value) if kind == "integer" and float(value).is_integer() else value
