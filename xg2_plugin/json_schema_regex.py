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
  ``\\s``, ``^`` and ``$``; search semantics) and :func:`emit`.

The symbolic DFA built over these sets and this IR (intersections, complements,
``string_except``) is in :mod:`json_schema_dfa`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple

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
BUDGET_WHERE = "json_schema: string pattern automaton"

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
# Printable ASCII but the quote and the backslash: what a JSON string may hold as itself.
PRINTABLE = cs_diff(cs_norm([(0x20, 0x7E)]), cs_of('"\\'))


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
                _budget.check(BUDGET_WHERE)  # (20,000 alternatives: let other threads run)
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
