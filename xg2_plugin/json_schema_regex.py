"""Strings for the JSON Schema converter: code-point sets, their JSON encodings, and
ECMA-262 patterns translated into EBNF over the JSON-encoded text.

A JSON string's *value* is the decoded text, but the grammar sees the encoded text
(``\\n``, ``\\u00e9``, surrogate pairs for astral characters...).  Everything here
works on code points first and only encodes at the end, so the grammar accepts a
string's text exactly when the decoded value is in the language.

Pieces:

* code-point sets: sorted tuples of inclusive ``(lo, hi)`` ranges over the Unicode
  scalar values (surrogates excluded: lone surrogate escapes are never accepted by
  constrained strings, so a surrogate pair always counts as one character, as
  Python's ``len`` counts it);
* :func:`encode_set`: every JSON encoding of one code point of a set -- the raw
  character where JSON allows it, ``\\"`` ``\\\\`` ``\\/`` ``\\b\\f\\n\\r\\t``, and
  ``\\uXXXX`` in either hex case (pairs for astral code points);
* a small regular-expression IR (``("c", set)``, ``("seq", [...])``, ``("alt",
  [...])``, ``("rep", node, lo, hi)``) with :func:`parse_pattern` (ECMA-262 syntax
  read with Python's ``re`` parser, ECMA semantics for ``.``, ``\\d``, ``\\w``,
  ``\\s``, ``^`` and ``$``; search semantics) and :func:`emit`;
* a symbolic DFA (:class:`DFA`) for what expressions cannot do directly:
  intersection (two patterns, pattern and length), complement (keys other than the
  declared ones, ``not`` of a pattern) -- emitted as one EBNF rule per state.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import groupby
from operator import itemgetter
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.ma  # noqa: F401  (np.unique imports it on first use: here, not on a schema's compile)

try:  # Python >= 3.11
    import re._constants as _c
    import re._parser as _p
except ImportError:  # pragma: no cover - Python 3.9/3.10
    import sre_constants as _c  # type: ignore
    import sre_parse as _p  # type: ignore

from . import _budget
from ._errors import GrammarError
from .grammar import ebnf_string_literal

CS = Tuple[Tuple[int, int], ...]

# What a compile over its budget names: the automaton loops below know no schema path.
_WHERE = "json_schema: string pattern automaton"

MAX_CP = 0x10FFFF
ALL: CS = ((0, 0xD7FF), (0xE000, MAX_CP))
EMPTY: CS = ()


# ----------------------------------------------------------------------------------
# Code-point sets
# ----------------------------------------------------------------------------------


def cs_norm(ranges) -> CS:
    """Sort, merge, and drop surrogates."""
    return _cs_norm(ranges if isinstance(ranges, tuple) else tuple(ranges))


# Code-point set operations are pure and the same few sets (a JSON string's
# characters, a pattern's classes) meet again and again across a schema and
# across schemas: caching them halves the front-end's time on pattern-heavy
# schemas.  Bounded like every cache here.
@lru_cache(maxsize=1 << 16)
def _cs_norm(ranges: tuple) -> CS:
    rs = sorted((int(a), int(b)) for a, b in ranges if a <= b)
    out: List[List[int]] = []
    for a, b in rs:
        if out and a <= out[-1][1] + 1:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    res = []
    for a, b in out:  # cut the surrogate block out
        if b < 0xD800 or a > 0xDFFF:
            res.append((a, b))
        else:
            if a < 0xD800:
                res.append((a, 0xD7FF))
            if b > 0xDFFF:
                res.append((0xE000, b))
    return tuple(res)


def cs_union(a: CS, b: CS) -> CS:
    return cs_norm(a + b)


@lru_cache(maxsize=1 << 16)
def cs_diff(a: CS, b: CS) -> CS:
    if not a or not b:
        return a
    out = []
    j = 0
    for lo, hi in a:
        cur = lo
        while j < len(b) and b[j][1] < cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] <= hi:
            if b[k][0] > cur:
                out.append((cur, b[k][0] - 1))
            cur = max(cur, b[k][1] + 1)
            k += 1
        if cur <= hi:
            out.append((cur, hi))
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def cs_inter(a: CS, b: CS) -> CS:
    if not a or not b:
        return ()
    if a == b:
        return a
    return cs_diff(a, cs_diff(a, b))


def cs_complement(a: CS) -> CS:
    return cs_diff(ALL, a)


@lru_cache(maxsize=1 << 16)
def cs_of(text: str) -> CS:
    return cs_norm((ord(ch), ord(ch)) for ch in text)


def cs_contains(a: CS, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in a)


def cs_size(a: CS) -> int:
    return sum(hi - lo + 1 for lo, hi in a)


# ECMA-262 character classes.
DIGIT = ((0x30, 0x39),)
WORD = cs_norm([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
SPACE = cs_norm(
    [(9, 13), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
     (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
)
LINE_TERMINATORS = cs_norm([(10, 10), (13, 13), (0x2028, 0x2029)])
DOT = cs_diff(ALL, LINE_TERMINATORS)

# ----------------------------------------------------------------------------------
# EBNF text of sets
# ----------------------------------------------------------------------------------


def _class_char(cp: int) -> str:
    if (0x30 <= cp <= 0x39) or (0x41 <= cp <= 0x5A) or (0x61 <= cp <= 0x7A):
        return chr(cp)
    if cp <= 0xFF:
        return "\\x%02x" % cp
    if cp <= 0xFFFF:
        return "\\u%04x" % cp
    return "\\U%08x" % cp


@lru_cache(maxsize=1 << 16)
def class_text(cs: CS) -> str:
    """An EBNF character class (over code points) for a non-empty set."""
    parts = []
    for lo, hi in cs:
        if lo == hi:
            parts.append(_class_char(lo))
        elif hi == lo + 1:
            parts.append(_class_char(lo) + _class_char(hi))
        else:
            parts.append(_class_char(lo) + "-" + _class_char(hi))
    return "[" + "".join(parts) + "]"


_HEX_CHARS = "0123456789abcdef"


def _digit_class(digits: Sequence[int], base: int) -> str:
    """Class of digit values; hex letters in both cases."""
    ds = sorted(digits)
    if base == 10:
        if len(ds) == 10:
            return "[0-9]"
        if len(ds) == 1:
            return '"%d"' % ds[0]
        return class_text(cs_norm((0x30 + d, 0x30 + d) for d in ds))
    if len(ds) == 16:
        return "[0-9a-fA-F]"
    cps = []
    for d in ds:
        ch = _HEX_CHARS[d]
        cps.append((ord(ch), ord(ch)))
        if d >= 10:
            cps.append((ord(ch.upper()), ord(ch.upper())))
    if len(cps) == 1:
        return '"%s"' % chr(cps[0][0])
    return class_text(cs_norm(cps))


def _full_digits(width: int, base: int) -> str:
    unit = "[0-9]" if base == 10 else "[0-9a-fA-F]"
    if width == 0:
        return ""
    if width == 1:
        return unit
    return "%s{%d}" % (unit, width)


_LEAD_LIT = re.compile(r'^"([0-9A-Za-z]+)"(?=$| )')
_TAIL_LIT = re.compile(r'(?:^| )"((?:\\\\u)?[0-9A-Za-z]*)"$')


def _cat(a: str, b: str) -> str:
    """``a b`` with a literal ending a and a literal starting b merged."""
    if not b:
        return a
    m1 = _TAIL_LIT.search(a)
    m2 = _LEAD_LIT.match(b)
    if m1 and m2:
        return a[: m1.start(1) - 1] + '"' + m1.group(1) + m2.group(1) + '"' + b[m2.end():]
    return a + " " + b


@lru_cache(maxsize=4096)
def digits_set(ranges: Tuple[Tuple[int, int], ...], width: int, base: int) -> str:
    """EBNF for fixed-width digit strings (base 10 or 16, hex case-insensitive) whose
    value lies in ``ranges`` (sorted disjoint, within [0, base**width)).  Empty
    string for width 0 (ranges must then be ((0, 0),))."""
    if width == 0:
        return ""
    span = base ** (width - 1)
    if ranges == ((0, base**width - 1),):
        return _full_digits(width, base)
    # The ranges below each leading digit, in one walk over the ranges (a range
    # spanning several digits covers the ones between whole).
    subs: Dict[int, List[Tuple[int, int]]] = {}
    full = (0, span - 1)
    for a, b in ranges:
        da, db = a // span, b // span
        if da == db:
            subs.setdefault(da, []).append((a - da * span, b - da * span))
            continue
        subs.setdefault(da, []).append((a - da * span, span - 1))
        for d in range(da + 1, db):
            subs[d] = [full]
        subs[db] = [(0, b - db * span)]
    groups: Dict[Tuple, List[int]] = {}
    order = []
    for d in sorted(subs):
        sub = tuple(subs[d])
        if sub not in groups:
            groups[sub] = []
            order.append(sub)
        groups[sub].append(d)
    alts = []
    for sub in order:
        rest = digits_set(sub, width - 1, base)
        head = _digit_class(groups[sub], base)
        alts.append(_cat(head, rest))
    if len(alts) == 1:
        return alts[0]
    return "(" + " | ".join(alts) + ")"


_RAW_OK = cs_diff(cs_norm([(0x20, MAX_CP)]), cs_of('"\\'))
_SHORT = {0x22: '"', 0x5C: "\\\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_BMP = ((0, 0xD7FF), (0xE000, 0xFFFF))


def _hex4(cs: CS) -> str:
    return digits_set(cs, 4, 16)


def _u_escapes(bmp: CS) -> str:
    """The \\uXXXX escapes of the BMP code points ``bmp``."""
    if bmp[-1][1] <= 0xFF:  # (what _hex4 comes to there, two digits sooner)
        return _cat('"\\\\u00"', digits_set(bmp, 2, 16))
    return _cat('"\\\\u"', _hex4(bmp))


# What json.dumps writes as an escape: the short escapes, then u00XX escapes for
# other controls and DEL, and uXXXX escapes (pairs) for everything past ASCII.
_CANON_SHORT = {0x22: '"', 0x5C: "\\\\", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_CANON_U = cs_diff(cs_norm([(0, 0x1F), (0x7F, MAX_CP)]), cs_of("\b\f\n\r\t"))
_PRINTABLE = cs_diff(cs_norm([(0x20, 0x7E)]), cs_of('"\\'))


@lru_cache(maxsize=4096)
def encode_set_canonical(cs: CS) -> Optional[str]:
    r"""EBNF matching the encodings json.dumps may write for one code point of
    ``cs``: raw (printable ASCII; anything past ASCII with ensure_ascii=False), the
    short escapes, and \uXXXX (either hex case) for controls, DEL and past ASCII.
    Other spellings (``\u0061``, ``\/``) are refused."""
    if not cs:
        return None
    alts = []
    raw = cs_inter(cs, _RAW_OK)
    if raw:
        alts.append(class_text(raw) if raw != ((raw[0][0], raw[0][0]),) or raw[0][0] > 0x7E
                    else ebnf_string_literal(chr(raw[0][0])))
    short = sorted(cp for cp in _CANON_SHORT if cs_contains(cs, cp))
    if short:
        chars = [_CANON_SHORT[cp] for cp in short]
        if len(chars) == 1:
            alts.append('"\\\\' + ("\\\"" if chars[0] == '"' else chars[0]) + '"')
        else:
            inner = "".join("\\\"" if ch == '"' else ch for ch in chars)
            alts.append('"\\\\" [' + inner + "]")
    u = cs_inter(cs, _CANON_U)
    if u:
        alts.extend(_escape_alts(u))
    if len(alts) == 1:
        return alts[0]
    return "(" + " | ".join(alts) + ")"


@lru_cache(maxsize=4096)
def encode_set(cs: CS) -> Optional[str]:
    """EBNF matching every JSON encoding of one code point of ``cs`` (None if empty)."""
    if not cs:
        return None
    alts = []
    raw = cs_inter(cs, _RAW_OK)
    if raw:
        alts.append(class_text(raw) if raw != ((raw[0][0], raw[0][0]),) or raw[0][0] > 0x7E
                    else ebnf_string_literal(chr(raw[0][0])))
    short = sorted(cp for cp in _SHORT if cs_contains(cs, cp))
    if short:
        chars = [_SHORT[cp] for cp in short]
        if len(chars) == 1:
            alts.append('"\\\\' + ("\\\"" if chars[0] == '"' else chars[0]) + '"')
        else:
            inner = "".join("\\\"" if ch == '"' else ch for ch in chars)
            alts.append('"\\\\" [' + inner + "]")
    alts.extend(_escape_alts(cs))
    if len(alts) == 1:
        return alts[0]
    return "(" + " | ".join(alts) + ")"


def _escape_alts(u: CS) -> List[str]:
    """The \\uXXXX escapes (pairs past the BMP) of the code points ``u`` (not empty)."""
    top = u[-1][1]
    bmp = u if top < 0xD800 else cs_inter(u, _BMP)
    out = [_u_escapes(bmp)] if bmp else []
    if top >= 0x10000:
        astral = cs_inter(u, _ASTRAL)
        # (every set that ends at the top -- a complement, a negated class -- has the
        # same pairs: built per set, an eighth of a key pattern's front-end)
        out.extend(_ALL_PAIRS if astral == _ASTRAL else _encode_astral(astral))
    return out


def _encode_astral(cs: CS) -> List[str]:
    pieces: Dict[Tuple[int, int], List[Tuple[int, int]]] = {}
    for lo, hi in cs:
        h1, h2 = 0xD800 + ((lo - 0x10000) >> 10), 0xD800 + ((hi - 0x10000) >> 10)
        l1, l2 = 0xDC00 + ((lo - 0x10000) & 0x3FF), 0xDC00 + ((hi - 0x10000) & 0x3FF)
        if h1 == h2:
            pieces.setdefault((l1, l2), []).append((h1, h1))
        else:
            pieces.setdefault((l1, 0xDFFF), []).append((h1, h1))
            if h2 > h1 + 1:
                pieces.setdefault((0xDC00, 0xDFFF), []).append((h1 + 1, h2 - 1))
            pieces.setdefault((0xDC00, l2), []).append((h2, h2))
    out = []
    for (l1, l2), highs in pieces.items():
        out.append(_cat(_cat(_cat('"\\\\u"', digits_set(tuple(sorted(highs)), 4, 16)), '"\\\\u"'),
                        digits_set(((l1, l2),), 4, 16)))
    return out


_ASTRAL: CS = ((0x10000, MAX_CP),)
_ALL_PAIRS: List[str] = _encode_astral(_ASTRAL)


# One character of any JSON string (lone surrogate escapes included): the plain
# unconstrained form, used where nothing is counted or matched.
JSON_CHAR_LOOSE = '([^"\\\\\\x00-\\x1f] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4}))'
JSON_STRING_LOOSE = '"\\"" ' + JSON_CHAR_LOOSE + '* "\\""'


# What encode_set(ALL) and canonical_escapes() build (tests/python/test_json_schema_speed.py
# checks they still do), written out: every schema with a string or a free key
# uses one of them, and building them took 1 ms (of 1.3 ms for a small schema).
JSON_CHAR = ('([\\x20\\x21\\x23-\\x5b\\x5d-\\ud7ff\\ue000-\\U0010ffff] | "\\\\" [btnfr\\"/\\\\] | "\\\\u" ([0'
             '-9A-CEFa-cef] [0-9a-fA-F]{3} | [Dd] [0-7] [0-9a-fA-F]{2}) | "\\\\u" [Dd] ("8" ("0"'
             ' [0-9a-fA-F] | [1-9A-Fa-f] [0-9a-fA-F]) | [9Aa] [0-9a-fA-F]{2} | [Bb] ([0-9A-Ea-'
             'e] [0-9a-fA-F] | [Ff] [0-9a-fA-F])) "\\\\u" [Dd] [C-Fc-f] [0-9a-fA-F]{2})')
CANONICAL_ESCAPES = ('([\\x7f-\\ud7ff\\ue000-\\U0010ffff] | "\\\\" [btnfr\\"\\\\] | "\\\\u" ("0" ("0" ("0" [0-7BE'
                     'Fbef] | [189A-Fa-f] [0-9a-fA-F] | "7" [Ff]) | [1-9A-Fa-f] [0-9a-fA-F]{2}) | [1-9'
                     'A-CEFa-cef] [0-9a-fA-F]{3} | [Dd] [0-7] [0-9a-fA-F]{2}) | "\\\\u" [Dd] ("8" ("0" ['
                     '0-9a-fA-F] | [1-9A-Fa-f] [0-9a-fA-F]) | [9Aa] [0-9a-fA-F]{2} | [Bb] ([0-9A-Ea-e]'
                     ' [0-9a-fA-F] | [Ff] [0-9a-fA-F])) "\\\\u" [Dd] [C-Fc-f] [0-9a-fA-F]{2})')


def json_char() -> str:
    """One code point of a JSON string, counted as Python counts it (pairs as one)."""
    return JSON_CHAR


@lru_cache(maxsize=8192)
def encode_char(ch: str) -> str:
    """The encodings json.dumps may write for one character (see
    :func:`encode_set_canonical`); literals (names, constants) use these."""
    return encode_set_canonical(((ord(ch), ord(ch)),))  # type: ignore[return-value]


def encode_literal(text: str) -> str:
    """EBNF for the JSON string contents (no quotes) of exactly ``text``, as
    json.dumps writes it (with or without ensure_ascii, hex in either case).
    Empty text gives ``""``."""
    if not text:
        return '""'
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return '"' + text + '"'  # the common case: json.dumps and EBNF write it as is
    out = []
    run = []
    for ch in text:
        cp = ord(ch)
        if 0xD800 <= cp <= 0xDFFF:
            raise GrammarError("lone surrogate in a string constant cannot be matched")
        if 0x20 <= cp <= 0x7E and ch not in '"\\':
            run.append(ch)  # printable ASCII: json.dumps writes it as is
            continue
        if run:
            out.append(ebnf_string_literal("".join(run)))
            run = []
        out.append(encode_char(ch))
    if run:
        out.append(ebnf_string_literal("".join(run)))
    return " ".join(out)


def canonical_escapes() -> str:
    """The canonical escapes of every character outside printable ASCII (and of
    '"' and backslash) plus raw characters past ASCII."""
    return CANONICAL_ESCAPES


def string_literal_expr(text: str) -> str:
    """A whole JSON string (with quotes) whose value is ``text``."""
    return '"\\"" ' + encode_literal(text) + ' "\\""'


# ----------------------------------------------------------------------------------
# Regex IR
# ----------------------------------------------------------------------------------

EPS = ("seq", ())


def n_set(cs: CS):
    return ("c", cs)


def n_seq(items):
    flat = []
    for it in items:
        if it[0] == "seq":
            flat.extend(it[1])
        else:
            flat.append(it)
    if len(flat) == 1:
        return flat[0]
    return ("seq", tuple(flat))


def n_alt(items):
    # duplicates found by hashing (a list scan made an alternation of N words
    # quadratic); a nested alternation's members are taken as they are
    flat: list = []
    seen: set = set()
    for it in items:
        if it[0] == "alt":
            flat.extend(it[1])
            seen.update(it[1])
        elif it not in seen:
            seen.add(it)
            flat.append(it)
    if len(flat) == 1:
        return flat[0]
    return ("alt", tuple(flat))


def n_rep(node, lo, hi):
    return ("rep", node, lo, hi)


def n_literal(text: str):
    return n_seq([n_set(((ord(c), ord(c)),)) for c in text])


NOTHING = ("alt", ())


def is_nothing(node) -> bool:
    return node[0] == "alt" and not node[1]


def nullable(node) -> bool:
    t = node[0]
    if t == "c":
        return False
    if t == "seq":
        return all(nullable(x) for x in node[1])
    if t == "alt":
        return any(nullable(x) for x in node[1])
    if t == "rep":
        return node[2] == 0 or nullable(node[1])
    return True  # anchors


def length_bounds(node) -> Tuple[int, Optional[int]]:
    """(min, max) code points of the node's strings; max None when unbounded."""
    t = node[0]
    if t == "c":
        return (1, 1) if node[1] else (0, 0)
    if t == "seq":
        lo = 0
        hi: Optional[int] = 0
        for x in node[1]:
            a, b = length_bounds(x)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if t == "alt":
        if not node[1]:
            return 0, 0
        bs = [length_bounds(x) for x in node[1]]
        his = [b for _, b in bs]
        return min(a for a, _ in bs), None if None in his else max(his)  # type: ignore[type-var]
    if t == "rep":
        a, b = length_bounds(node[1])
        hi = None if node[3] is None or b is None else b * node[3]
        if b == 0:
            hi = 0
        return a * node[2], hi
    return 0, 0


def every_part_matches(node) -> bool:
    """No empty class anywhere in the node (so every alternative and repetition
    can be taken, and length_bounds' min and, when finite, max are lengths of
    actual strings; an unbounded max means arbitrarily long ones)."""
    t = node[0]
    if t == "c":
        return bool(node[1])
    if t == "seq":  # (empty: the empty string)
        return all(every_part_matches(x) for x in node[1])
    if t == "alt":  # (empty: nothing)
        return bool(node[1]) and all(every_part_matches(x) for x in node[1])
    if t == "rep":
        return every_part_matches(node[1])
    return False


def small_repeats(node, limit: int = 8) -> bool:
    """Every repetition's bounds at most ``limit`` (an unbounded one's minimum):
    the core writes such repetitions out (XG2_UNROLL_LIMIT), where a larger one
    may become a counted loop, which a Length body cannot hold."""
    t = node[0]
    if t in ("seq", "alt"):
        return all(small_repeats(x, limit) for x in node[1])
    if t == "rep":
        return node[2] <= limit and (node[3] is None or node[3] <= limit) and small_repeats(node[1], limit)
    return True


def emit(node) -> str:
    """EBNF text of an IR node over the JSON-encoded text (no quotes)."""
    t = node[0]
    if t == "c":
        enc = encode_set(node[1])
        if enc is None:
            return "[^\\x00-\\U0010ffff]"  # matches nothing
        return enc
    if t == "seq":
        if not node[1]:
            return '""'
        return "(" + " ".join(emit(x) for x in node[1]) + ")" if len(node[1]) > 1 else emit(node[1][0])
    if t == "alt":
        if not node[1]:
            return "[^\\x00-\\U0010ffff]"
        return "(" + " | ".join(emit(x) for x in node[1]) + ")"
    if t == "rep":
        inner = emit(node[1])
        lo, hi = node[2], node[3]
        if not inner.startswith("(") and " " in inner:
            inner = "(" + inner + ")"
        if (lo, hi) == (0, None):
            return inner + "*"
        if (lo, hi) == (1, None):
            return inner + "+"
        if (lo, hi) == (0, 1):
            return inner + "?"
        if hi is None:
            return "%s{%d,}" % (inner, lo)
        if lo == hi:
            if lo == 0:
                return '""'
            return "%s{%d}" % (inner, lo)
        return "%s{%d,%d}" % (inner, lo, hi)
    raise AssertionError(t)


# ----------------------------------------------------------------------------------
# ECMA-262 patterns
# ----------------------------------------------------------------------------------


class PatternError(Exception):
    """A pattern feature that cannot be translated (the message says which)."""


_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")


def _category(cat) -> CS:
    name = str(cat)
    if "NOT_DIGIT" in name:
        return cs_complement(DIGIT)
    if "DIGIT" in name:
        return DIGIT
    if "NOT_WORD" in name:
        return cs_complement(WORD)
    if "WORD" in name:
        return WORD
    if "NOT_SPACE" in name:
        return cs_complement(SPACE)
    if "SPACE" in name:
        return SPACE
    raise PatternError(f"unsupported character category {name}")


def _in_set(items) -> CS:
    ranges = []
    negate = False
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            ranges.append((av, av))
        elif op is _c.RANGE:
            ranges.append(av)
        elif op is _c.CATEGORY:
            ranges.extend(_category(av))
        else:
            raise PatternError(f"unsupported class item {op}")
    cs = cs_norm(ranges)
    return cs_complement(cs) if negate else cs


@lru_cache(maxsize=4096)
def _literal_node(cp: int):
    return n_set(cs_norm(((cp, cp),)))


def _convert(sub) -> object:
    """sre AST (a SubPattern or list of (op, av)) to IR, anchors as ("bol",)/("eol",)."""
    items = []
    for op, av in sub:
        if op is _c.LITERAL:
            items.append(_literal_node(av))
        elif op is _c.NOT_LITERAL:
            items.append(n_set(cs_complement(cs_norm([(av, av)]))))
        elif op is _c.ANY:
            items.append(n_set(DOT))
        elif op is _c.IN:
            items.append(n_set(_in_set(av)))
        elif op is _c.BRANCH:
            alts = []
            for b in av[1]:
                _budget.check(_WHERE)  # (20,000 alternatives: let other threads run)
                alts.append(_convert(b))
            items.append(("alt", tuple(alts)))
        elif op is _c.SUBPATTERN:
            group, add_flags, del_flags, p = av
            if add_flags or del_flags:
                raise PatternError("inline flags are not supported")
            items.append(_convert(p))
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) or op is getattr(_c, "POSSESSIVE_REPEAT", None):
            lo, hi, p = av
            if op is getattr(_c, "POSSESSIVE_REPEAT", None):
                raise PatternError("possessive repetition is not ECMA-262")
            hi = None if hi == _c.MAXREPEAT else hi
            inner = _convert(p)
            if _has_anchor(inner):
                raise PatternError("an anchor inside a repetition is not supported")
            items.append(n_rep(inner, lo, hi))
        elif op is _c.AT:
            if av in (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING):
                items.append(("bol",))
            elif av in (_c.AT_END, _c.AT_END_STRING):
                items.append(("eol",))
            else:
                raise PatternError("word boundaries (\\b, \\B) are not supported")
        elif op in (_c.ASSERT, _c.ASSERT_NOT):
            raise PatternError("lookaround assertions are not supported")
        elif op in (_c.GROUPREF, _c.GROUPREF_EXISTS):
            raise PatternError("backreferences are not supported")
        else:
            raise PatternError(f"unsupported regex construct {op}")
    if len(items) == 1:
        return items[0]
    return ("seq", tuple(items))


def _has_anchor(node) -> bool:
    t = node[0]
    if t in ("bol", "eol"):
        return True
    if t in ("seq", "alt"):
        return any(_has_anchor(x) for x in node[1])
    if t == "rep":
        return _has_anchor(node[1])
    return False


def _split(node) -> List[Tuple[bool, bool, object]]:
    """Alternatives (starts anchored, ends anchored, anchor-free node)."""
    t = node[0]
    if t == "bol":
        return [(True, False, EPS)]
    if t == "eol":
        return [(False, True, EPS)]
    if t == "alt":
        out = []
        for x in node[1]:
            out.extend(_split(x))
        return out
    if t == "seq":
        combos: list = [(False, False, [])]
        for child in node[1]:
            alts = _split(child) if _has_anchor(child) else [(False, False, child)]
            new = []
            for sa, ea, parts in combos:
                for csa, cea, cnode in alts:
                    nparts = list(parts)
                    nsa, nea = sa, ea
                    if csa:
                        if not all(nullable(p) for p in nparts):
                            continue
                        nparts = []
                        nsa = True
                    if nea:
                        if not nullable(cnode):
                            continue
                    else:
                        nparts.append(cnode)
                    if cea:
                        nea = True
                    new.append((nsa, nea, nparts))
            combos = new
            if len(combos) > 64:
                raise PatternError("too many anchored alternatives")
        return [(sa, ea, n_seq(parts)) for sa, ea, parts in combos]
    return [(False, False, node)]


@lru_cache(maxsize=1024)
def parse_pattern(pattern: str):
    """IR of the strings in which ``pattern`` finds a match (ECMA-262 search)."""
    try:
        sub = _p.parse(_NAMED_GROUP.sub("(?P<", pattern), 0)
    except re.error as e:
        raise PatternError(f"invalid or unsupported pattern: {e}") from None
    if sub.state.flags & ~(re.UNICODE | getattr(re, "NOFLAG", 0)):
        raise PatternError("inline flags are not supported")
    node = _convert(sub)
    anyseq = n_rep(n_set(ALL), 0, None)
    split = _split(node)
    # `.*` taken out of the alternation where every alternative has it (`a|b|c`
    # searched is `.*(a|b|c).*`): a `.*` per alternative made the subset
    # construction track every alternative's progress apart (five 8-letter words:
    # 1,313 states before minimization, 37 after; ten: over the state limit)
    head = all(not sa for sa, _, _ in split)
    tail = all(not ea for _, ea, _ in split)
    alts = []
    for sa, ea, body in split:
        parts = []
        if not sa and not head:
            parts.append(anyseq)
        parts.append(body)
        if not ea and not tail:
            parts.append(anyseq)
        alts.append(n_seq(parts))
    return _simplify(n_seq(([anyseq] if head else []) + [n_alt(alts)] + ([anyseq] if tail else [])))


def _simplify(node):
    # `.*` ... `.*` around a nullable middle collapses to `.*`
    if node[0] == "seq":
        items = [_simplify(x) for x in node[1]]
        out: list = []
        for it in items:
            if out and it == out[-1] and it[0] == "rep" and it[2] == 0 and it[3] is None:
                continue
            out.append(it)
        return n_seq(out)
    if node[0] == "alt":
        return n_alt([_simplify(x) for x in node[1]])
    return node


def single_class_repeat(node):
    """(set, lo, hi) when the node is one class repeated (``[a-z]+``), else None."""
    if node[0] == "rep" and node[1][0] == "c":
        return node[1][1], node[2], node[3]
    if node[0] == "c":
        return node[1], 1, 1
    return None


# ----------------------------------------------------------------------------------
# Symbolic DFAs (alphabet: code points, labels: sets)
# ----------------------------------------------------------------------------------


class DFAError(Exception):
    pass


MAX_DFA_STATES = 4000
# Refinement rounds minimized() runs (one per character of the longest suffix
# that tells two states apart) before it leaves a DFA unminimized.
MINIMIZE_ROUNDS = 64


class DFA:
    """A complete-or-partial DFA: ``trans[s]`` is a list of (set, target).  Never
    modified once built (results share them)."""

    def __init__(self, trans: List[List[Tuple[CS, int]]], accept: List[bool], trimmed: bool = False):
        self.trans = trans
        self.accept = accept
        self.trimmed = trimmed  # trim() would return it unchanged
        self.settled = False  # minimized() would return it unchanged

    # -- construction --
    @staticmethod
    def from_ir(node) -> "DFA":
        linear = _linear_dfa(node)
        if linear is not None:
            return linear
        nfa = _NFA()
        start = nfa.new()
        end = nfa.end = nfa.new()
        nfa.build(node, start, end)
        return nfa.determinize(start, end)

    def complete(self) -> "DFA":
        trans = [list(t) for t in self.trans]
        accept = list(self.accept)
        dead = len(trans)
        trans.append([(ALL, dead)])
        accept.append(False)
        for s in range(dead):
            covered = cs_norm(r for cs, _ in trans[s] for r in cs)
            rest = cs_diff(ALL, covered)
            if rest:
                trans[s].append((rest, dead))
        return DFA(trans, accept)

    def complement(self) -> "DFA":
        d = self.complete()
        return DFA(d.trans, [not a for a in d.accept])

    def intersect(self, other: "DFA") -> "DFA":
        index = {(0, 0): 0}
        todo = [(0, 0)]  # breadth first: state i is todo[i]
        trans: List[List[Tuple[CS, int]]] = []
        accept: List[bool] = []
        for a, b in todo:
            _budget.check(_WHERE)
            row = []
            for cs1, t1 in self.trans[a]:
                for cs2, t2 in other.trans[b]:
                    cs = cs_inter(cs1, cs2)
                    if not cs:
                        continue
                    key = (t1, t2)
                    if key not in index:
                        index[key] = len(index)
                        todo.append(key)
                        if len(index) > MAX_DFA_STATES:
                            raise DFAError("automaton too large")
                    row.append((cs, index[key]))
            trans.append(row)
            accept.append(self.accept[a] and other.accept[b])
        return DFA(trans, accept).trim()

    def trim(self) -> "DFA":
        """Drop states that cannot reach acceptance (and unreachable ones)."""
        if self.trimmed:
            return self
        n = len(self.trans)
        rev: List[List[int]] = [[] for _ in range(n)]
        for s, row in enumerate(self.trans):
            for _, t in row:
                rev[t].append(s)
        live = set(s for s in range(n) if self.accept[s])
        stack = list(live)
        while stack:
            s = stack.pop()
            for p in rev[s]:
                if p not in live:
                    live.add(p)
                    stack.append(p)
        if 0 not in live:
            return DFA([[]], [False], trimmed=True)
        order = {0: 0}
        stack = [0]
        while stack:
            s = stack.pop()
            for _, t in self.trans[s]:
                if t in live and t not in order:
                    order[t] = len(order)
                    stack.append(t)
        trans: List[List[Tuple[CS, int]]] = [[] for _ in order]
        accept = [False] * len(order)
        for s, i in order.items():
            accept[i] = self.accept[s]
            merged: Dict[int, List] = {}
            for cs, t in self.trans[s]:
                if t in order:
                    merged.setdefault(order[t], []).extend(cs)
            trans[i] = [(cs_norm(v), k) for k, v in merged.items()]
        return DFA(trans, accept, trimmed=True)

    def minimized(self) -> "DFA":
        """The equivalent DFA with the fewest states (trimmed).  Moore's refinement
        over the atoms of the labels' boundaries, a numpy round per step of the
        longest distinguishing suffix: products with length bounds (a pattern with
        ``minLength``) shrink several-fold, and so does every rule emitted from them."""
        if self.settled:  # (a cached pattern's DFA is minimized once, then emitted)
            return self
        d = self._minimized()
        d.settled = True
        return d

    def _minimized(self) -> "DFA":
        d = self.trim()
        n = len(d.trans)
        if n <= 1:
            return d
        bounds = sorted({x for row in d.trans for cs, _ in row for lo, hi in cs for x in (lo, hi + 1)})
        at = {b: i for i, b in enumerate(bounds)}
        _budget.charge(8 * (n + 1) * max(len(bounds) - 1, 1), _WHERE)
        table = np.full((n + 1, max(len(bounds) - 1, 1)), n, dtype=np.int64)  # row n: the dead state
        for s, row in enumerate(d.trans):
            for cs, t in row:
                for lo, hi in cs:
                    table[s, at[lo] : at[hi + 1]] = t
        start = [1 if a else 0 for a in d.accept] + [2]
        if table.size <= HOPCROFT_MAX_CELLS:
            # atoms every state treats alike are one (a search pattern's "other
            # characters" fall into several gaps between its classes' bounds)
            columns = list(dict.fromkeys(zip(*table.tolist())))
            cls, count = _hopcroft([list(r) for r in zip(*columns)], start)
        else:
            moore = _moore(table, np.array(start, dtype=np.int64))
            if moore is None:  # not stable yet (a long chain: a round per link): keep it as it is
                return d
            cls = moore[0].tolist()  # (a list, as _hopcroft's: the compiled module checks the type)
            count = int(moore[1])
        if count == n + 1:
            return d
        rep: Dict[int, int] = {}
        for s in range(n):
            rep.setdefault(int(cls[s]), s)
        order = {int(cls[0]): 0}  # the start's class first
        for c in rep:
            order.setdefault(c, len(order))
        trans: List[List[Tuple[CS, int]]] = [[] for _ in order]
        accept = [False] * len(order)
        for c, s in rep.items():
            i = order[c]
            accept[i] = d.accept[s]
            merged: Dict[int, List] = {}
            for cs, t in d.trans[s]:
                merged.setdefault(order[int(cls[t])], []).extend(cs)
            trans[i] = [(cs_norm(v), k2) for k2, v in merged.items()]
        return DFA(trans, accept).trim()

    def is_empty(self) -> bool:
        d = self.trim()
        return not d.accept[0] and not d.trans[0]

    def length_bounds(self) -> Tuple[int, Optional[int]]:
        d = self.trim()
        if d.is_empty():
            return 0, 0
        # min by BFS; max: None if a cycle is reachable
        dist = {0: 0}
        frontier = [0]
        best = None
        while frontier:
            nxt = []
            for s in frontier:
                if d.accept[s] and best is None:
                    best = dist[s]
                for _, t in d.trans[s]:
                    if t not in dist:
                        dist[t] = dist[s] + 1
                        nxt.append(t)
            frontier = nxt
        # longest path in a DAG, or None
        color: Dict[int, int] = {}
        longest: Dict[int, int] = {}

        def visit(s) -> Optional[int]:
            stack = [(s, iter(d.trans[s]))]
            color[s] = 1
            while stack:
                node, it = stack[-1]
                advanced = False
                for _, t in it:
                    c = color.get(t, 0)
                    if c == 1:
                        raise _Cycle()
                    if c == 0:
                        color[t] = 1
                        stack.append((t, iter(d.trans[t])))
                        advanced = True
                        break
                if not advanced:
                    stack.pop()
                    color[node] = 2
                    vals = [longest[t] + 1 for _, t in d.trans[node] if t in longest]
                    base = 0 if d.accept[node] else None
                    cand = [v for v in vals]
                    if base is not None:
                        cand.append(0)
                    longest[node] = max(cand) if cand else -10**9
            return longest[s]

        try:
            mx = visit(0)
        except _Cycle:
            mx = None
        return best or 0, mx

    def count_span(self) -> Optional[Tuple[int, Optional[int]]]:
        """The character counts of this (non-empty) language as an interval (lo, hi;
        hi None: unbounded) when from every state the counts to acceptance form an
        interval -- then the core's ``Length(...)`` keeps a length bound with a
        counter, checked state by state, instead of a product written out as states
        (a state's interval joins those of its targets, one further, and its own 0
        if accepting: by induction on the count, every count in between is met).
        None when some state's counts have a gap (``(ab)+``)."""
        d = self.minimized()
        n = len(d.trans)
        rev: List[List[int]] = [[] for _ in range(n)]
        targets = [sorted({t for _, t in row}) for row in d.trans]
        for s, ts in enumerate(targets):
            for t in ts:
                rev[t].append(s)
        lo: List[Optional[int]] = [0 if a else None for a in d.accept]
        frontier = [s for s in range(n) if d.accept[s]]
        while frontier:
            nxt = []
            for t in frontier:
                for s in rev[t]:
                    if lo[s] is None:
                        lo[s] = lo[t] + 1  # type: ignore[operator]
                        nxt.append(s)
            frontier = nxt
        # most: resolved once every target is (what never resolves reaches a cycle)
        hi: List[Optional[int]] = [None] * n
        left = [len(ts) for ts in targets]
        ready = [s for s in range(n) if not left[s]]
        while ready:
            s = ready.pop()
            hi[s] = max(([0] if d.accept[s] else []) + [hi[t] + 1 for t in targets[s]])  # type: ignore[operator]
            for p in rev[s]:
                left[p] -= 1
                if not left[p]:
                    ready.append(p)
        for s in range(n):
            spans: List[Tuple[int, Optional[int]]] = [(0, 0)] if d.accept[s] else []
            spans += [(lo[t] + 1, None if hi[t] is None else hi[t] + 1) for t in targets[s]]  # type: ignore[operator]
            spans.sort(key=lambda x: x[0])
            reach = spans[0][1]
            for a, b in spans[1:]:
                if reach is not None and a > reach + 1:
                    return None
                reach = None if reach is None or b is None else max(reach, b)
        return lo[0], hi[0]  # type: ignore[return-value]

    def accepts(self, text: str) -> bool:
        s = 0
        for ch in text:
            cp = ord(ch)
            for cs, t in self.trans[s]:
                if cs_contains(cs, cp):
                    s = t
                    break
            else:
                return False
        return self.accept[s]

    # -- output --
    def emit_rules(self, prefix: str, add_rule) -> Optional[str]:
        """Add one rule per state via ``add_rule(name, body, names)`` (``names``: the
        rule names the body uses -- labels are literals, so only the targets); return
        the start rule's name.  An empty language returns None."""
        d = self.minimized()
        if not d.accept[0] and not d.trans[0]:
            return None
        names = [f"{prefix}-s{i}" for i in range(len(d.trans))]
        for i, row in enumerate(d.trans):
            alts = [f"{encode_set(cs)} {names[t]}" for cs, t in row]
            if d.accept[i]:
                alts.append('""')
            add_rule(names[i], " | ".join(alts), tuple(dict.fromkeys(names[t] for _, t in row)))
        return names[0]


def labelled_product(dfas: Sequence[DFA]) -> Tuple[List[List[Tuple[CS, int]]], List[Tuple[bool, ...]]]:
    """The product of the DFAs, completed, over every string: (rows, per state which
    DFAs accept there).  Every string has a path, so one automaton tells every
    class of keys (which patterns a key matches) apart -- where the intersections
    and complements of each class, alternatives beside each other, each leave a
    parser item whose mask walks the whole vocabulary."""
    comps = [d.complete() for d in dfas]
    start = tuple(0 for _ in comps)
    index = {start: 0}
    todo = [start]  # breadth first: state i is todo[i]
    trans: List[List[Tuple[CS, int]]] = []
    labels: List[Tuple[bool, ...]] = []
    for st in todo:
        _budget.check(_WHERE)
        # (the first DFA's row as it is: intersecting it with every character was a
        # third of a one-pattern key automaton's front-end)
        pieces: List[Tuple[CS, Tuple[int, ...]]] = [(cs, (t,)) for cs, t in comps[0].trans[st[0]] if cs]
        for k in range(1, len(st)):
            pieces = [(cs, tg + (t,)) for cs1, tg in pieces for cs2, t in comps[k].trans[st[k]]
                      for cs in (cs_inter(cs1, cs2),) if cs]
        merged: Dict[int, List[CS]] = {}
        for cs, tg in pieces:
            if tg not in index:
                index[tg] = len(index)
                todo.append(tg)
                if len(index) > MAX_DFA_STATES:
                    raise DFAError("automaton too large")
            merged.setdefault(index[tg], []).append(cs)
        trans.append([(_merge_sets(v), t) for t, v in merged.items()])
        labels.append(tuple(comps[k].accept[q] for k, q in enumerate(st)))
    return trans, labels


def _merge_sets(sets: List[CS]) -> CS:
    """The union of a row's normalised sets that go to one state (most rows have
    one set a state: itself, with no sort)."""
    if len(sets) == 1:
        return sets[0]
    return cs_norm(tuple(r for cs in sets for r in cs))


@lru_cache(maxsize=128)
def length_dfa(lo: int, hi: Optional[int]) -> DFA:
    """Strings of ``lo`` to ``hi`` (None: any number of) characters: the chain
    DFA.from_ir(n_rep(n_set(ALL), lo, hi)).minimized() comes to, built directly
    (a 1,025-state chain for maxLength 1024 took 25 ms through the subset
    construction, and minimizing it again and again gave up each time)."""
    if not (type(lo) is int and lo >= 0 and (hi is None or (type(hi) is int and hi >= lo))):
        return DFA.from_ir(n_rep(n_set(ALL), lo, hi))  # (what an invalid bound always came to)
    n = lo + 1 if hi is None else hi + 1
    if n > MAX_DFA_STATES:
        raise DFAError("automaton too large")
    trans: List[List[Tuple[CS, int]]] = [[(ALL, i + 1)] for i in range(n - 1)]
    trans.append([(ALL, n - 1)] if hi is None else [])
    d = DFA(trans, [i >= lo for i in range(n)], trimmed=True)
    d.settled = True  # minimal: states differ by how many characters may follow
    return d


# A class sequence longer than this goes through the subset construction.
LINEAR_MAX_CLASSES = 256


def _linear_parts(node) -> Optional[Tuple[bool, List[CS], bool]]:
    """(searched from anywhere, the classes, ends anywhere) when ``node`` is
    ``.*``? then one character class per position (``[0-9a-f]{32}``, ``^x-``)
    then ``.*``?; else None."""
    items = list(node[1]) if node[0] == "seq" else [node]
    anyseq = n_rep(n_set(ALL), 0, None)
    head = bool(items) and items[0] == anyseq
    tail = len(items) > 1 and items[-1] == anyseq
    classes: List[CS] = []
    for it in items[int(head) : len(items) - int(tail)]:
        if it[0] == "c":
            cs, k = it[1], 1
        elif it[0] == "rep" and it[1][0] == "c" and it[2] == it[3] and type(it[2]) is int:
            cs, k = it[1][1], it[2]
        else:
            return None
        if not cs or k < 1 or len(classes) + k > LINEAR_MAX_CLASSES:
            return None
        classes.extend([cs] * k)
    return (head, classes, tail) if classes else None


def _linear_dfa(node) -> Optional[DFA]:
    """The DFA of a class sequence by the shift-and construction: a state is the
    set of sequence positions the text read so far ends at (bit k: the last k
    characters matched classes 1..k; bit 0: a match may start), one step is a
    shift and a mask per atom of the alphabet.  A search (``.*X.*``) that has
    matched goes to one accepting sink.  What the subset construction and the
    minimization cost (2.7 ms for ``[0-9a-f]{32}``) becomes a few hundred set
    operations."""
    parts = _linear_parts(node)
    if parts is None:
        return None
    head, classes, tail = parts
    n = len(classes)
    bounds = sorted({x for cs in classes for lo, hi in cs for x in (lo, hi + 1)} | {0, 0xD800, 0xE000, MAX_CP + 1})
    atoms: Dict[int, List[Tuple[int, int]]] = {}  # mask of the positions a character fits -> its ranges
    for lo, nxt in zip(bounds, bounds[1:]):
        if lo == 0xD800:
            continue  # (surrogates are not characters)
        mask = sum(1 << (k + 1) for k, cs in enumerate(classes) if cs_contains(cs, lo))
        atoms.setdefault(mask, []).append((lo, nxt - 1))
    atom_sets = [(mask, cs_norm(r)) for mask, r in atoms.items()]
    top = 1 << n
    sink = -1
    index: Dict[int, int] = {1: 0}
    todo = [1]  # breadth first: state i is todo[i]
    trans: List[List[Tuple[CS, int]]] = []
    accept: List[bool] = []
    for cur in todo:
        _budget.check(_WHERE)
        if cur == sink:
            trans.append([(ALL, index[sink])])
            accept.append(True)
            continue
        merged: Dict[int, List[CS]] = {}
        for mask, cs in atom_sets:
            nxt = (cur << 1) & mask | int(head)
            if tail and nxt & top:
                nxt = sink
            elif not nxt:
                continue
            if nxt not in index:
                index[nxt] = len(index)
                todo.append(nxt)
                if len(index) > MAX_DFA_STATES:
                    raise DFAError("automaton too large")
            merged.setdefault(index[nxt], []).append(cs)
        trans.append([(_merge_sets(v), t) for t, v in merged.items()])
        accept.append(not tail and bool(cur & top))
    d = DFA(trans, accept, trimmed=True)
    # Minimal already where states differ by the shortest text they still need:
    # anchored at the start (one position at a time), or one class throughout (a
    # state is how many of it end the text).
    d.settled = not head or all(cs == classes[0] for cs in classes)
    return d


# Below this many table cells (states x atoms) minimized() refines with Hopcroft's
# algorithm in plain Python: no round per character of the longest distinguishing
# suffix (a search pattern `X{32}` took 33 numpy rounds, ~3 ms, for 34 states).
HOPCROFT_MAX_CELLS = 4096


def _hopcroft(rows: List[List[int]], start: List[int]) -> Tuple[List[int], int]:
    """The coarsest partition refining ``start`` (a class per state) that the
    transitions ``rows[s][atom]`` respect: (class of each state, number of classes)."""
    width = len(rows[0])
    inv: List[Dict[int, List[int]]] = [{} for _ in range(width)]
    for s, row in enumerate(rows):
        for a, t in enumerate(row):
            inv[a].setdefault(t, []).append(s)
    blocks: List[set] = []
    first: Dict[int, int] = {}
    block_of = []
    for s, c in enumerate(start):
        if c not in first:
            first[c] = len(blocks)
            blocks.append(set())
        blocks[first[c]].add(s)
        block_of.append(first[c])
    todo = set(range(len(blocks)))
    while todo:
        _budget.check(_WHERE)
        splitter = list(blocks[todo.pop()])
        for a in range(width):
            pre = inv[a]
            touched: Dict[int, List[int]] = {}
            for t in splitter:
                for s in pre.get(t, ()):
                    touched.setdefault(block_of[s], []).append(s)
            for b, members in touched.items():
                whole = blocks[b]
                if len(members) == len(whole):
                    continue
                part = set(members)
                whole -= part
                nb = len(blocks)
                blocks.append(part)
                for s in members:
                    block_of[s] = nb
                todo.add(nb if b in todo or len(part) <= len(whole) else b)
    return block_of, len(blocks)


def _moore(table, start):
    """Moore's refinement over the atom table, a numpy round per step of the longest
    distinguishing suffix: (class of each state, number of classes), or None when
    MINIMIZE_ROUNDS were not enough."""
    n = table.shape[0] - 1
    cls = start
    # A round hashes each state's (class, successors' classes) to 64 bits (a
    # collision could only merge too much: the congruence check below catches
    # it, and the exact rounds then run).
    mult = _round_multipliers(table.shape[1] + 1)
    for exact in (False, True):
        count = len(np.unique(cls))
        for _ in range(MINIMIZE_ROUNDS):
            _budget.check(_WHERE)
            if exact:
                sig = np.concatenate([cls[:, None], cls[table]], axis=1)
                new = np.unique(sig, axis=0, return_inverse=True)[1].reshape(-1)
            else:
                h = cls.astype(np.uint64) * mult[0] + (cls[table].astype(np.uint64) * mult[1:]).sum(axis=1, dtype=np.uint64)
                new = np.unique(h, return_inverse=True)[1].reshape(-1)
            k = int(new.max()) + 1
            cls = new
            if k == count:
                break
            count = k
        else:  # not stable yet (a long chain: a round per link)
            return None
        first = np.full(count, -1, dtype=np.int64)
        first[cls[::-1]] = np.arange(n, -1, -1)  # a representative per class
        rep_rows = cls[table[first[cls]]]
        if np.array_equal(rep_rows, cls[table]) and np.array_equal(start[first[cls]], start):
            break
        cls = start
    return cls, count


@lru_cache(maxsize=256)
def _round_multipliers(width: int):
    """Odd 64-bit multipliers for the hashing rounds of DFA.minimized: a fixed
    splitmix64 sequence (numpy arithmetic wraps; numpy.random would cost its
    import, 5-15 ms, on the first schema that minimizes)."""
    x = np.arange(1, width + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x | np.uint64(1)


@lru_cache(maxsize=128)
def cached_dfa(node) -> DFA:
    """``DFA.from_ir`` memoized, for IRs whose numbers are ints (patterns, formats,
    checked lengths): they recur across schemas.  Minimal, so that products of
    them start small."""
    return DFA.from_ir(node).minimized()


class _Cycle(Exception):
    pass


class _NFA:
    def __init__(self):
        self.eps: List[List[int]] = []
        self.edges: List[List[Tuple[CS, int]]] = []
        self._own: Dict[int, frozenset] = {}  # closure() of one state, once built
        self.end = -1
        # Loop states of a `.*` that ends the automaton (a search pattern's tail):
        # every string is accepted from them, so every subset holding one is the
        # same DFA state (without this, `.*X.*` tracks X's progress on after a match:
        # twice the states, built and then minimized away).
        self.universal: set = set()

    def new(self) -> int:
        self.eps.append([])
        self.edges.append([])
        if len(self.eps) > 50000:
            raise DFAError("automaton too large")
        if not len(self.eps) & 1023:
            _budget.check(_WHERE)
        return len(self.eps) - 1

    def build(self, node, a: int, b: int) -> None:
        t = node[0]
        if t == "c":
            if node[1]:
                self.edges[a].append((node[1], b))
        elif t == "seq":
            cur = a
            items = node[1]
            if not items:
                self.eps[a].append(b)
                return
            for i, x in enumerate(items):
                nxt = b if i == len(items) - 1 else self.new()
                self.build(x, cur, nxt)
                cur = nxt
        elif t == "alt":
            for x in node[1]:
                s, e = self.new(), self.new()
                self.eps[a].append(s)
                self.build(x, s, e)
                self.eps[e].append(b)
        elif t == "rep":
            inner, lo, hi = node[1], node[2], node[3]
            cur = a
            for _ in range(lo):
                nxt = self.new()
                self.build(inner, cur, nxt)
                cur = nxt
            if hi is None:
                s, e = self.new(), self.new()
                if b == self.end and inner == ("c", ALL):
                    self.universal.add(s)
                self.eps[cur].append(s)
                self.build(inner, s, e)
                self.eps[e].append(s)
                self.eps[s].append(b)
            else:
                for _ in range(hi - lo):
                    nxt = self.new()
                    self.eps[cur].append(b)
                    self.build(inner, cur, nxt)
                    cur = nxt
                self.eps[cur].append(b)
        else:
            raise DFAError(f"unexpected node {t}")

    def closure(self, states) -> frozenset:
        """The epsilon closure of ``states``: the union of each state's own, each
        walked once (the subset construction asks for the same states many times)."""
        own = self._own
        out: set = set()
        for s in states:
            c = own.get(s)
            if c is None:
                c = own[s] = self._walk(s)
            out |= c
        return frozenset(out)

    def _walk(self, start: int) -> frozenset:
        seen = {start}
        stack = [start]
        while stack:
            s = stack.pop()
            for t in self.eps[s]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return frozenset(seen)

    def determinize(self, start: int, end: int) -> DFA:
        univ = self.closure([min(self.universal)]) if self.universal else None
        s0 = self.closure([start])
        if univ is not None and not s0.isdisjoint(self.universal):
            s0 = univ
        index = {s0: 0}
        todo = [s0]  # breadth first: state i is todo[i]
        trans: List[List[Tuple[CS, int]]] = []
        accept: List[bool] = []
        for cur in todo:
            _budget.check(_WHERE)
            labels = [(cs, t) for s in cur for cs, t in self.edges[s]]
            row = []
            for cs, targets in _partition(labels):
                tgt = self.closure(targets)
                if univ is not None and not tgt.isdisjoint(self.universal):
                    tgt = univ
                if tgt not in index:
                    index[tgt] = len(index)
                    todo.append(tgt)
                    if len(index) > MAX_DFA_STATES:
                        raise DFAError("automaton too large")
                row.append((cs, index[tgt]))
            trans.append(row)
            accept.append(end in cur)
        return DFA(trans, accept).trim()


def _partition(labels: List[Tuple[CS, int]]):
    """Split overlapping labelled sets into disjoint pieces with their target sets."""
    if not labels:
        return []
    by_set: Dict[CS, set] = {}  # (a subset's states mostly share a few labels)
    for cs, t in labels:
        ts = by_set.get(cs)
        if ts is None:
            by_set[cs] = {t}
        else:
            ts.add(t)
    bounds = sorted({x for cs in by_set for lo, hi in cs for x in (lo, hi + 1)})
    pos = {x: i for i, x in enumerate(bounds)}
    # the pieces are the gaps between bounds: each range covers a run of them
    targets: List[set] = [set() for _ in range(len(bounds) - 1)]
    for cs, ts in by_set.items():
        for lo, hi in cs:
            for i in range(pos[lo], pos[hi + 1]):
                targets[i] |= ts
    groups: Dict[frozenset, List[Tuple[int, int]]] = {}
    for i, tg in enumerate(targets):
        if tg:
            groups.setdefault(frozenset(tg), []).append((bounds[i], bounds[i + 1] - 1))
    return [(cs_norm(v), k) for k, v in groups.items()]


def words_dfa(words) -> DFA:
    """A DFA accepting exactly the given strings."""
    trans: List[List[Tuple[CS, int]]] = [[]]
    accept = [False]
    children: List[Dict[int, int]] = [{}]
    for w in words:
        s = 0
        for ch in w:
            cp = ord(ch)
            if cp not in children[s]:
                trans.append([])
                accept.append(False)
                children.append({})
                children[s][cp] = len(trans) - 1
                trans[s].append((((cp, cp),), len(trans) - 1))
            s = children[s][cp]
        accept[s] = True
    return DFA(trans, accept)


def string_except(words, anystar: Optional[str] = None, anyone: Optional[str] = None,
                  escapes: Optional[str] = None) -> Tuple[str, Tuple[str, ...]]:
    """EBNF (contents, no quotes) of every string except the given ones, as one
    expression (a trie with "anything else" branches), and the rule names it
    uses.  Characters are read in json.dumps's spellings
    (:func:`encode_set_canonical`) until the string leaves the trie, then in any
    spelling.  ``anystar``/``anyone``/``escapes``: rule names for
    ``json_char()*``, ``json_char()`` and the canonical escapes of everything
    outside printable ASCII (inlined when None)."""
    words = tuple(sorted(set(words)))
    for w in words:
        iter(w)  # a word that is no string: TypeError "... is not iterable", as ever
    if anystar and anyone and escapes and words and all(_TRIE_PLAIN.fullmatch(w) for w in words):
        # the core builds this trie itself (StringExcept, same language)
        lits = ", ".join(f'"{w}"' for w in words)
        return f"StringExcept({anystar}, {anyone}, {escapes}, {lits})", (anystar, anyone, escapes)
    return _string_except(words, anystar, anyone, escapes)


# Words the core's StringExcept takes: printable ASCII but quote and backslash
# (each character's only canonical spelling is itself).
_TRIE_PLAIN = re.compile(r'[\x20\x21\x23-\x5b\x5d-\x7e]*')


# Objects of one schema often share their names (one definition reached from
# several places), so whole results are memoized.
@lru_cache(maxsize=256)
def _string_except(words: Tuple[str, ...], anystar: Optional[str], anyone: Optional[str],
                   escapes: Optional[str]) -> Tuple[str, Tuple[str, ...]]:
    star = json_char() + "*" if anystar is None else anystar
    one = json_char() if anyone is None else anyone
    # Every string outside the set is a trie path w (a prefix of some word) then
    # either the end (w itself not a word) or a character no word continues w
    # with, then anything.  The "anything" tail, the escape spellings and the
    # "any character" after a whole word with nothing below it are shared by all
    # paths (factored out): one copy each, not one per trie node or leaf.
    d, e, u, w = _trie(words, escapes)
    heads = [x for x in (d, None if e is None else (e + " " + escapes if e != '""' else escapes),  # type: ignore[operator]
                         None if w is None else (one if w == '""' else w + " " + one)) if x]
    out = []
    if heads:
        out.append(_alts(heads) + " " + star)  # type: ignore[operator]
    if u:
        out.append(u)
    # (the rule names used, known without reading the text back: every word set
    # has a leaf, so anyone is in heads whenever it is given)
    names = (anyone if w is not None else None, escapes if e is not None else None, anystar if heads else None)
    return _alts(out) or '""', tuple(x for x in names if x)


_Paths = Tuple[Optional[str], Optional[str], Optional[str], Optional[str]]


def _trie(suffixes: Sequence[str], escapes: Optional[str]) -> _Paths:
    """(paths ending in a diverging character, paths allowing an escape, paths
    that are not words, paths to words with nothing below them) of the trie node
    whose words continue with the sorted, distinct ``suffixes``, for
    :func:`string_except`."""
    if len(suffixes) == 1 and len(suffixes[0]) <= _CHAIN_MEMO_LEN:
        return _chain(suffixes[0], escapes)
    ended = bool(suffixes) and suffixes[0] == ""  # sorts first
    children = [(ch, _trie([w[1:] for w in group], escapes))
                for ch, group in groupby(suffixes[ended:], key=itemgetter(0))]
    return _node(children, ended, escapes)


# A node with one word below it is a chain; its name's tails recur across objects
# and schemas ("...name", "...description"), so short chains are memoized.
_CHAIN_MEMO_LEN = 32


@lru_cache(maxsize=4096)
def _chain(suffix: str, escapes: Optional[str]) -> _Paths:
    if not suffix:
        return _node([], True, escapes)
    return _node([(suffix[0], _chain(suffix[1:], escapes))], False, escapes)


def _node(children, ended: bool, escapes: Optional[str]) -> _Paths:
    """A trie node's paths from its children's: [(character, paths)]; ``ended``:
    a word ends here."""
    if not children:
        # a word with nothing below: any character leaves the trie (the caller
        # writes that character once for all such words)
        return None, None, None, '""'
    alts: list = []
    esc_alts: list = []
    unfinished: list = []
    leaves: list = []
    for ch, (d, e, u, w) in children:
        c = encode_char(ch)
        for paths, x in ((alts, d), (esc_alts, e), (unfinished, u), (leaves, w)):
            if x:
                paths.append(c if x == '""' else c + " " + x)
    other, esc = _diverge_other("".join(ch for ch, _ in children), escapes)
    if other:
        alts.append(other)
    if esc:
        esc_alts.append('""')
    if not ended:
        unfinished.append('""')
    return _alts(alts), _alts(esc_alts), _alts(unfinished), _alts(leaves)


@lru_cache(maxsize=4096)
def _diverge_other(chars: str, escapes: Optional[str]) -> Tuple[Optional[str], bool]:
    """(the characters after a trie node with children ``chars`` (at least one)
    that leave the trie, whether an escape leaves it) for :func:`string_except`."""
    other = cs_diff(ALL, cs_of(chars))
    if not other:
        return None, False
    # (the canonical reading is exact: a character of another spelling is
    # refused here, and the excluded names are only ever spelled canonically)
    if escapes and all(0x20 <= ord(c) <= 0x7E and c not in '"\\' for c in chars):
        # (printable ASCII only: the escapes rule holds every other character,
        # raw and escaped, once for all nodes -- a raw non-ASCII class here
        # would be a UTF-8 automaton per trie node)
        raw = cs_diff(_PRINTABLE, cs_of(chars))
        return (class_text(raw) if raw else None), True
    return encode_set_canonical(other), False


def _alts(alts) -> Optional[str]:
    """One EBNF alternation of the expressions, None when there are none."""
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
