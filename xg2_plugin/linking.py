"""Grammars linked from pieces compiled once (XGrammar-2 §3.3).

A structural tag over a request's tools is a few rules of its own around each
tool's argument grammar, and the tools recur across requests in other sets.  A
:class:`Piece` is such a grammar (EBNF rules and a root), compiled by the core
once per follow set -- the bytes that can come after its root, which fix its
FOLLOW sets -- and :func:`link` compiles the tag's own rules with the pieces'
roots left undefined and copies the pieces' tables in (``native/src/grammar_link.c``).
The result is the grammar of the whole text: the same language and masks,
without parsing or building any piece again.
"""

from __future__ import annotations

import re
import threading
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from ._errors import InternalError, check
from ._native import ffi, lib
from .grammar import Grammar

__all__ = ["Piece", "link", "follow_of_strings", "rename_rules"]


_LHS = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*::=", re.M)


# A string, a class, or a name that is not a macro's (the name taken whole, as an
# atomic group: its tail is no name before "(" either); what lies between is left
# as it is, so re.sub skips it in C.
_EBNF_NAME = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|(?=([A-Za-z_][A-Za-z0-9_.-]*))\1(?!\()', re.S)


def rename_rules(ebnf: str, prefix: str) -> Tuple[Dict[str, str], str]:
    """The rules of ``ebnf`` renamed ``prefix + name`` (macro names, strings and
    character classes untouched): (name -> body, the renamed root)."""
    defined = set(_LHS.findall(ebnf))

    def rename(m: "re.Match[str]") -> str:
        name = m.group(1)
        return prefix + name if name is not None and name in defined else m.group(0)

    text = _EBNF_NAME.sub(rename, ebnf)
    rules: Dict[str, str] = {}
    starts = [m for m in _LHS.finditer(text)]
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        rules[m.group(1)] = text[m.end():end].strip()
    return rules, prefix + "root"


_MAX_VARIANTS = 2  # follow sets kept per piece (a tool mostly ends the same way)


def follow_of_strings(strings: Sequence[str]) -> bytes:
    """A 256-bit byte set (bit b of byte b // 8) of the first bytes of ``strings``:
    a piece's likely follow set when a tag's end strings come after it."""
    bits = bytearray(32)
    for s in strings:
        if s:
            b = s.encode("utf-8")[0]
            bits[b >> 3] |= 1 << (b & 7)
    return bytes(bits)


class Piece:
    """A grammar other grammars link in: EBNF ``raw`` whose root rule is ``raw_root``,
    its rules named ``prefix + name`` in a linked grammar (``root`` there is
    ``prefix + raw_root``).  Each follow set's compiled grammar is made on first use
    (the last ``_MAX_VARIANTS`` kept); ``text``, the renamed rules, when asked for."""

    __slots__ = ("raw", "root", "prefix", "_raw_utf8", "_raw_root", "_root_utf8", "_prefix_utf8", "_text",
                 "_grammars", "_masked", "_lock", "sampler", "__weakref__")

    def __init__(self, raw: str, prefix: str, raw_root: str = "root") -> None:
        self.raw = raw
        self.prefix = prefix
        self.root = prefix + raw_root
        self._raw_utf8 = raw.encode("utf-8")
        self._raw_root = raw_root.encode("utf-8")
        self._root_utf8 = ffi.new("char[]", self.root.encode("utf-8"))
        self._prefix_utf8 = ffi.new("char[]", prefix.encode("utf-8"))
        self._text: Optional[str] = None
        self._grammars: Dict[bytes, object] = {}  # follow set -> native handle (insertion order: oldest first)
        self._masked: Set[Tuple[bytes, int]] = set()  # (follow set, vocabulary) whose masks are computed ahead
        self._lock = threading.Lock()
        # texts a call of the piece is likely to be (its masks are computed ahead
        # along them), made when asked: a callable, or None
        self.sampler: Optional[Callable[[], Tuple[bytes, ...]]] = None

    @property
    def text(self) -> str:
        """The piece's rules in its namespace, as EBNF text."""
        if self._text is None:
            rules, _ = rename_rules(self.raw, self.prefix)
            self._text = "".join(f"{k} ::= {v}\n" for k, v in rules.items())
        return self._text

    def handle(self, follow: bytes):
        with self._lock:
            hit = self._grammars.get(follow)
        if hit is not None:
            return hit
        out = ffi.new("xg2_grammar **")
        check(lib.xg2_grammar_from_ebnf_piece(self._raw_utf8, len(self._raw_utf8), self._raw_root, follow, out))
        handle = ffi.gc(out[0], lib.xg2_grammar_free, size=int(lib.xg2_grammar_memory_bytes(out[0])))
        with self._lock:
            handle = self._grammars.setdefault(follow, handle)
            while len(self._grammars) > _MAX_VARIANTS:
                del self._grammars[next(iter(self._grammars))]
        return handle

    def likeliest(self, guess: bytes):
        """The handle for the follow set ``guess`` if built, else the one built last (a
        tool mostly ends the same way), else one built for ``guess``."""
        with self._lock:
            hit = self._grammars.get(guess) or next(reversed(self._grammars.values()), None)
        return hit if hit is not None else self.handle(guess)

    def claim_masks(self, follow: bytes, vocab: int) -> bool:
        """Whether the masks of the grammar for ``follow`` on vocabulary ``vocab`` (its
        native address) are still to be computed ahead -- True once: the caller does it."""
        with self._lock:
            if (follow, vocab) in self._masked:
                return False
            self._masked.add((follow, vocab))
            return True

    def memory_bytes(self) -> int:
        with self._lock:
            handles = list(self._grammars.values())
        return len(self.raw) + sum(int(lib.xg2_grammar_memory_bytes(h)) for h in handles)


class _LinkedGrammar(Grammar):
    """A grammar :func:`link` made: its EBNF source is written out when asked for."""

    def __init__(self, handle, text: str, pieces: List[Piece], root: str, linked: List[Tuple[Piece, object]]) -> None:
        self._handle = handle
        self._root = root
        self.linked = linked  # each piece with the native grammar linked in (its follow set's)
        self._parts: Optional[Tuple[str, List[Piece]]] = (text, pieces)
        self._text: Optional[str] = None

    @property  # type: ignore[override]
    def _source(self) -> str:
        if self._text is None:
            assert self._parts is not None
            text, pieces = self._parts
            self._text = text + "".join(p.text for p in pieces)
            self._parts = None
        return self._text


def link(text: str, pieces: List[Piece], guesses: List[bytes], root: str = "root") -> Grammar:
    """The grammar of ``text`` (EBNF) in which each piece's root rule, not defined
    in ``text``, is that piece; ``guesses``: each piece's likely follow set."""
    n = len(pieces)
    text_utf8 = text.encode("utf-8")
    names = ffi.new("char *[]", [p._root_utf8 for p in pieces])
    prefixes = ffi.new("char *[]", [p._prefix_utf8 for p in pieces])
    handles = [p.likeliest(g) for p, g in zip(pieces, guesses)]
    need = ffi.new("uint8_t[]", 32 * max(n, 1))
    have = ffi.new("uint8_t[32]")
    out = ffi.new("xg2_grammar **")
    for _ in range(3):  # (a second call at most: the first asks for every follow set it needs)
        check(lib.xg2_grammar_link(text_utf8, len(text_utf8), root.encode("utf-8"), n, names,
                                   ffi.new("xg2_grammar *[]", handles), prefixes, need, out))
        if out[0] != ffi.NULL:
            break
        for i, p in enumerate(pieces):
            want = bytes(ffi.buffer(need + 32 * i, 32))
            lib.xg2_grammar_root_follow(handles[i], have)
            if bytes(have) != want:
                handles[i] = p.handle(want)
    else:  # (the second call has what the first asked for: the pieces' FIRST sets do not change)
        raise InternalError("linking did not settle on the pieces' follow sets")
    handle = ffi.gc(out[0], lib.xg2_grammar_free, size=int(lib.xg2_grammar_memory_bytes(out[0])))
    return _LinkedGrammar(handle, text, pieces, root, list(zip(pieces, handles)))
