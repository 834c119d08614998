"""Converted ``$ref`` targets, shared across schemas.

Requests often repeat definitions (the same Kubernetes objects, the same tool
parameter types) inside documents that differ elsewhere.  The front-end keeps,
process-wide, what converting a local ``$ref`` target produced -- its rule, every
rule it reaches, and the other targets it uses -- keyed by the target's content,
the content of every target it reaches (by pointer), and the conversion options.
A later document whose target has the same key gets those rules back instead of
converting them again (JsonSchemaConverter.fragment_value).

A key is exact only where a target's meaning is its text: local ``#/...``
pointers, no ``$id``/anchors (base URIs) and no dynamic references or
``unevaluated*`` (which depend on where a schema is used); anything else is
converted every time.  The memo is bounded (LRU, by characters of rule text).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from typing import Any, Dict, FrozenSet, List, NamedTuple, Optional, Tuple
from urllib.parse import unquote

# Characters of rule text the memo holds before it drops the least recently used.
LIMIT_CHARS = 16 << 20

# Whose meaning depends on more than the target's text (scopes, base URIs, where
# it is applied): a target whose text mentions one is never memoized.
_CONTEXTUAL = ('"$id"', '"$anchor"', '"$dynamicAnchor"', '"$dynamicRef"', '"$recursiveRef"',
               '"$recursiveAnchor"', '"unevaluatedProperties"', '"unevaluatedItems"')
# (one scan of a target's text for any of them: eight `in` scans were a quarter of keying it)
_CONTEXTUAL_RE = re.compile("|".join(re.escape(c) for c in _CONTEXTUAL))
_REF = re.compile(r'"\$ref": "([^"\\]*)"')
# (one encoder for every target: json.dumps with an option builds a new one each call)
_ENCODER = json.JSONEncoder(ensure_ascii=False)


MISSING = object()


def pointer_child(node: Any, raw: str) -> Tuple[Any, str]:
    """(the child of ``node`` a JSON-pointer token names, or MISSING; the token
    with its escapes undone)."""
    tok = unquote(raw).replace("~1", "/").replace("~0", "~")
    if isinstance(node, dict) and tok in node:
        return node[tok], tok
    if isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
        return node[int(tok)], tok
    return MISSING, tok


class Fragment(NamedTuple):
    name: str  # the target's rule
    rules: Tuple[Tuple[str, str, Optional[Tuple[str, ...]]], ...]  # (name, body, names it uses)
    deps: Tuple[Tuple[Any, str, str], ...]  # other targets used: (key, rule name, $ref)
    alts: int  # alternatives its own conversion counted (the converter's size limit)
    chars: int


_FRAGMENT_CACHE: "OrderedDict[Any, Fragment]" = OrderedDict()
_lock = threading.Lock()
_chars = 0


def lookup(key) -> Optional[Fragment]:
    with _lock:
        frag = _FRAGMENT_CACHE.get(key)
        if frag is not None:
            _FRAGMENT_CACHE.move_to_end(key)
        return frag


def store(key, frag: Fragment) -> None:
    global _chars
    if frag.chars > LIMIT_CHARS // 4:
        return
    with _lock:
        old = _FRAGMENT_CACHE.pop(key, None)
        if old is not None:
            _chars -= old.chars
        if len(_FRAGMENT_CACHE) == 0:
            _chars = 0  # (cleared from outside: the benchmark's cold runs)
        _FRAGMENT_CACHE[key] = frag
        _chars += frag.chars
        while _chars > LIMIT_CHARS and _FRAGMENT_CACHE:
            _, dropped = _FRAGMENT_CACHE.popitem(last=False)
            _chars -= dropped.chars


def memo_chars() -> int:
    with _lock:
        return _chars if _FRAGMENT_CACHE else 0


class TargetKeys:
    """Content keys of one document's ``#/...`` targets."""

    def __init__(self, root: Any, options: Tuple) -> None:
        self.root = root
        self.options = options
        self._digest: Dict[str, Optional[Tuple[str, Tuple[str, ...]]]] = {}
        self._keys: Dict[str, Any] = {}

    def node(self, ref: str) -> Any:
        """The node a ``#/...`` pointer names, or None."""
        if not ref.startswith("#/"):
            return None
        node = self.root
        for raw in ref[2:].split("/"):
            node, _ = pointer_child(node, raw)
            if node is MISSING:
                return None
        return node

    def _text(self, ref: str) -> Optional[Tuple[str, Tuple[str, ...]]]:
        """(digest of the target's text, the pointers it uses), or None where it
        cannot be keyed."""
        if ref in self._digest:
            return self._digest[ref]
        out = None
        node = self.node(ref)
        if isinstance(node, dict):
            try:
                # key order kept: it is the order properties are generated in
                text = _ENCODER.encode(node)
            except (TypeError, ValueError):  # a non-JSON value (a Python schema)
                text = None
            if text is not None and _CONTEXTUAL_RE.search(text) is None:
                refs = _REF.findall(text)
                # every "$ref" a local pointer the pattern read whole
                if text.count('"$ref"') == len(refs) and all(r.startswith("#/") for r in refs):
                    out = (hashlib.blake2b(text.encode(), digest_size=16).hexdigest(), tuple(set(refs)))
        self._digest[ref] = out
        return out

    def key(self, ref: str) -> Any:
        """The memo key of target ``ref``: the options, its digest and a digest of
        every target it reaches (pointer and text), or None where one cannot be
        keyed.  Targets reach each other in cycles, so the digest is taken per
        strongly connected component, successors first (Tarjan, iteratively):
        linear in the references, where a closure per target is quadratic for a
        chain."""
        if ref not in self._keys:
            self._key_components(ref)
        return self._keys[ref]

    def _key_components(self, start: str) -> None:
        index: Dict[str, int] = {}
        low: Dict[str, int] = {}
        comp_key: Dict[str, Optional[str]] = {}  # member -> its component's digest
        on_stack: List[str] = []
        work: List[Tuple[str, int]] = [(start, 0)]
        while work:
            r, i = work.pop()
            if i == 0:
                if r in self._keys:  # keyed by an earlier call: a finished component
                    done = self._keys[r]
                    comp_key[r] = None if done is None else done[2]
                    continue
                index[r] = low[r] = len(index)
                on_stack.append(r)
            t = self._text(r)
            succ = t[1] if t is not None else ()
            if i < len(succ):
                work.append((r, i + 1))
                nxt = succ[i]
                if nxt not in index and nxt not in comp_key:
                    work.append((nxt, 0))
                elif nxt in index and nxt not in comp_key:
                    low[r] = min(low[r], index[nxt])
                continue
            # all successors done: fold their lowlinks, close a component at its root
            for nxt in succ:
                if nxt in low and nxt not in comp_key:
                    low[r] = min(low[r], low[nxt])
            if low[r] != index[r]:
                continue
            members = []
            while True:
                m = on_stack.pop()
                members.append(m)
                if m == r:
                    break
            texts = [self._text(m) for m in members]
            digest: Optional[str] = None
            if all(x is not None for x in texts):
                inside = set(members)
                outs = sorted({comp_key.get(n) or "" for x in texts for n in x[1] if n not in inside})  # type: ignore[index]
                if all(outs):  # (every successor keyed)
                    h = hashlib.blake2b(digest_size=16)
                    for m, x in sorted(zip(members, texts)):
                        h.update(f"{m}\0{x[0]}\0".encode())  # type: ignore[index]
                    h.update("\1".join(outs).encode())
                    digest = h.hexdigest()
            for m, x in zip(members, texts):
                comp_key[m] = digest
                self._keys[m] = None if digest is None else (self.options, x[0], digest)  # type: ignore[index]
