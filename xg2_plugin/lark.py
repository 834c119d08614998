"""Lark grammars (the subset vLLM passes as a ``grammar`` request) to xg2 EBNF.

:func:`lark_to_ebnf` converts a grammar written in `Lark <https://lark-parser.readthedocs.io>`_
syntax into the EBNF dialect of :meth:`Grammar.from_ebnf`; :meth:`Grammar.from_lark` and
:meth:`GrammarCompiler.compile_lark` use it.  The start rule is ``start`` (vLLM's
convention); in the EBNF it becomes the root rule (``lark.root`` when ``%ignore`` is used,
else ``start`` itself).

Supported
---------
* Rules ``name: ...`` (lower case names) with the modifiers ``?name`` and ``!name`` and
  priorities ``name.2`` (all three only shape Lark's parse tree or rank ambiguities, so
  they are accepted and ignored).
* Terminals ``NAME: ...`` (upper case names) with priorities ``NAME.2`` (ignored).  A
  terminal may use strings, regular expressions, ranges and other terminals, never
  rules, and may not be recursive (as in Lark).
* Alternatives ``|`` (also continued on following lines that start with ``|``), grouping
  ``( )``, optional ``[ ]``, ``?``, ``*``, ``+``, ``item ~ n`` and ``item ~ n..m``,
  aliases ``-> name`` at the end of an alternative (ignored: they only name tree nodes).
* String literals ``"..."`` with Lark's escapes (``\\n \\t \\r \\f \\xHH \\uHHHH
  \\UHHHHHHHH``, ``\\"``, ``\\\\``; any other backslash is kept literally, as Lark does), and
  the ``i`` flag (case-insensitive: every letter becomes the class of the characters
  Python's ``re.IGNORECASE`` equates with it, e.g. ``"k"i`` is ``[Kk\\u212a]``).  As an
  extension, ``'...'`` literals are accepted too (Lark itself rejects them).
* Ranges ``"a".."z"``.
* Regular expressions ``/.../flags`` in Python ``re`` syntax, as Lark compiles them.  They
  are parsed with Python's own regex parser and rewritten into the core's
  ``Regex("...")`` dialect with Python's Unicode semantics kept: ``\\d \\w \\s`` (and
  their negations, also inside classes) become the explicit Unicode classes Python
  uses; flags ``i`` (also inline ``(?i)`` / ``(?i:...)``, expanded exactly as above),
  ``s`` (``.`` matches newlines), ``x`` (verbose), ``m`` and ``u`` (no effect once
  anchors are excluded) and ``(?a)`` are supported.  Anchors (``^ $ \\A \\Z \\b \\B``),
  lookaround, backreferences, conditionals, possessive quantifiers and atomic groups
  raise ``GrammarError``; so does the ``l`` flag.
* ``%import common.NAME``, ``%import common.NAME -> OTHER`` and
  ``%import common (A, B, ...)`` for the terminals of Lark's ``common.lark`` (DIGIT,
  HEXDIGIT, INT, SIGNED_INT, DECIMAL, FLOAT, SIGNED_FLOAT, NUMBER, SIGNED_NUMBER,
  ESCAPED_STRING, _STRING_INNER, _STRING_ESC_INNER, LETTER, UCASE_LETTER, LCASE_LETTER,
  WORD, CNAME, WS, WS_INLINE, CR, LF, NEWLINE, SH_COMMENT, CPP_COMMENT, C_COMMENT,
  SQL_COMMENT), with definitions written here to the same languages.  They are kept
  apart from the grammar's own names (``common.INT`` in the EBNF), as Lark namespaces
  imports.
* ``%ignore X`` (a terminal, a literal, or an alternation of them), any number of times.
* Comments ``// ...`` and ``# ...``; ``\\`` at the end of a line continues it.
* ``@name`` in a rule: the grammar ``named_grammars[name]`` of :meth:`Grammar.from_lark`
  (XGrammar's named grammars; a Grammar, or Lark text with its own ``start`` and
  ``%ignore``), see :func:`xg2_plugin.grammar_ops.lark_with_named`.

Not supported (``GrammarError`` naming the construct, with line and column): rule
templates ``name{x, y}`` and their use, ``%declare``, ``%override``, ``%extend``, imports
from anything but ``common`` (other grammar files), aliases inside groups, and the regex
features above.  Errors in the grammar itself (syntax errors, undefined or doubly defined
names, rules inside terminals, recursive terminals, bad ``~`` ranges, empty literals, a
missing ``start`` rule) are ``GrammarError`` too, with the line and column in the Lark
source, also available as the exception's ``line`` and ``column`` attributes.

How matching differs from Lark's own parsers
---------------------------------------------
The engine is scannerless: a terminal is not a token cut out by a lexer but just a
sub-language, and a string is accepted when *some* split of it into terminals parses.
That is exactly Lark's Earley parser with ``lexer="dynamic_complete"``.  Lark's default
lexers instead cut tokens greedily (longest match), so a grammar that relies on maximal
munch to rule strings out accepts more here: with ``start: WORD "s"``, ``"cats"`` is
accepted (``WORD`` = ``cat``) though Lark's LALR and default Earley parsers reject it;
with ``start: NAME NAME`` and ``%ignore " "``, ``"ab"`` is accepted as ``a`` + ``b``.
Such grammars are ambiguous here, which costs nothing in correctness but can make the
Earley parser of the core do more work.  Terminal priorities play no part.

Lazy quantifiers match as many characters as greedy ones (a regex denotes the set of
strings it fully matches), except in one idiom where Lark's first-match lexing is kept:
a regex that is a whole token and ends with ``X*?`` (or ``X+?``, ``X{n,}?``) of one
character class followed by one literal character ``q`` stops at the first ``q``
(``/".*?"/`` does not match ``"a"b"``), and likewise ``q _STRING_INNER q`` and
``q _STRING_ESC_INNER q`` (the latter honouring backslash escapes) in terminals.

``%ignore``: Lark's lexer skips ignored terminals between any two tokens and at both ends
of the input.  The conversion puts an optional run of ignored material (the EBNF rule
``lark.ignore``) in front of every terminal occurrence in rule bodies (string, regex and
range literals and terminal references; nothing is inserted inside terminal
definitions), and one after the start rule.  Between any two adjacent tokens there is
then exactly one place for ignored material, which is the same language as inserting it
between every pair of adjacent symbols, without stacking several optional runs (and
their ambiguity) in one gap.  Lark also matches an ignored terminal greedily: when its
pattern ends with an unbounded run of one class C (``WS``, ``WS_INLINE``, ``/\\s+/``,
``/#[^\\n]*/``, ``SH_COMMENT``, ``CPP_COMMENT``, ``SQL_COMMENT``, ...), the run must not be followed by a
character of C, which the EBNF states with a lookahead (``(= [^C])``), except in the
last run of the input.  So a line comment extends to its newline, and ignored
whitespace is never followed by a literal that itself starts with whitespace, exactly as
in Lark.  For other ignored patterns (an alternation inside one regex, say) the run may
end wherever the pattern allows, which accepts a superset of Lark's language: with
``%ignore /#[^\\n]*| +/`` a comment can stop before the end of its line and let rule
material follow it; write such patterns as separate ``%ignore`` lines.
"""

from __future__ import annotations

import array
import bisect
import re
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Set, Tuple

from . import _budget
from ._errors import GrammarError, InvalidArgumentError
from .grammar import ebnf_string_literal

try:  # Python >= 3.11
    from re import _constants as _sre_c
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover  (Python 3.9 / 3.10)
    import sre_constants as _sre_c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

__all__ = ["lark_to_ebnf", "COMMON_TERMINALS"]

_MAX_CP = 0x10FFFF
_SURROGATES = [(0xD800, 0xDFFF)]
_ROOT = "lark.root"
_IGNORE = "lark.ignore"

Pos = Tuple[int, int]  # (line, column), both 1-based


def _error(pos: Pos, message: str) -> GrammarError:
    err = GrammarError(f"Lark grammar error at line {pos[0]}, column {pos[1]}: {message}")
    err.line, err.column = pos  # type: ignore[attr-defined]
    return err


# --------------------------------------------------------------------------------------
# Code point range sets: sorted lists of disjoint inclusive (lo, hi) pairs
# --------------------------------------------------------------------------------------

Ranges = List[Tuple[int, int]]


def _normalize(ranges) -> Ranges:
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _complement(ranges: Ranges) -> Ranges:
    out: Ranges = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAX_CP:
        out.append((nxt, _MAX_CP))
    return out


def _subtract(a: Ranges, b: Ranges) -> Ranges:
    return _complement(_normalize(_complement(a) + b))


def _points(cps) -> Ranges:
    return _normalize((c, c) for c in cps)


def _spans_to_ranges(spans) -> Ranges:
    return _normalize((a, b - 1) for a, b in spans)


def _all_chars() -> str:
    """Every code point, in order (surrogates included: index == code point)."""
    return array.array("I", range(_MAX_CP + 1)).tobytes().decode("utf-32-le", "surrogatepass")


_category_cache: Dict[str, Ranges] = {}


def _category_ranges(name: str, ascii_only: bool) -> Ranges:
    """The code points of \\d, \\w or \\s (``name`` = 'd', 'w' or 's') as Python's re sees them."""
    if ascii_only:
        return {"d": [(0x30, 0x39)], "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
                "s": [(0x09, 0x0D), (0x20, 0x20)]}[name]
    if not _category_cache:
        everything = _all_chars()
        for key in "dws":
            spans = (m.span() for m in re.finditer("\\" + key + "+", everything))
            _category_cache[key] = _spans_to_ranges(spans)
    return _category_cache[name]


_cased_cache: List[str] = []


def _cased_chars() -> str:
    """Every character with a case mapping, and every character one maps to: a superset
    of the characters ``re.IGNORECASE`` can equate with a different one."""
    if not _cased_cache:
        everything = _all_chars()
        found: Set[str] = set()
        for start in range(0, len(everything), 512):
            block = everything[start:start + 512]
            if block.lower() == block and block.upper() == block:
                continue
            for ch in block:
                low, up = ch.lower(), ch.upper()
                if low != ch or up != ch:
                    found.update((ch, low[0], up[0]))
        _cased_cache.append("".join(sorted(found)))
    return _cased_cache[0]


_ci_cache: Dict[Tuple[str, int], Ranges] = {}


def _ignorecase_set(py_pattern: str, base: Ranges, flags: int) -> Ranges:
    """The exact set of characters the one-character Python pattern matches under
    ``flags`` (which include IGNORECASE), given ``base``, its case-sensitive set."""
    key = (py_pattern, flags)
    hit = _ci_cache.get(key)
    if hit is None:
        cased = _cased_chars()
        matched = [ord(m.group()) for m in re.finditer(py_pattern, cased, flags)]
        cased_ranges = _points(map(ord, cased))
        hit = _normalize(_subtract(base, cased_ranges) + _points(matched))
        _ci_cache[key] = hit
    return hit


def _literal_char_set(ch: str, flags: int) -> Ranges:
    """What the literal character ``ch`` matches under regex ``flags``."""
    base = [(ord(ch), ord(ch))]
    if not flags & re.IGNORECASE:
        return base
    return _ignorecase_set(re.escape(ch), base, _verify_flags(flags))


def _verify_flags(flags: int) -> int:
    return re.IGNORECASE | (flags & re.ASCII)


def _is_single(ranges: Ranges) -> bool:
    return len(ranges) == 1 and ranges[0][0] == ranges[0][1]


# ---- writing classes and characters ----

def _regex_char(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    special = "\\]^-[" if in_class else ".^$*+?{}[]\\|()"
    if ch in special:
        return "\\" + ch
    if 0x20 <= cp < 0x7F:
        return ch
    if ch in "\n\t\r":
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch]
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _class_body(ranges: Ranges, char) -> str:
    out = []
    for lo, hi in ranges:
        if lo == hi:
            out.append(char(lo))
        elif hi == lo + 1:
            out.append(char(lo) + char(hi))
        else:
            out.append(char(lo) + "-" + char(hi))
    return "".join(out)


def _write_class(ranges: Ranges, char) -> str:
    """A class over ``ranges`` (surrogates dropped), negated when that is shorter."""
    ranges = _subtract(ranges, _SURROGATES)
    if not ranges:
        return "[^" + char(0) + "-" + char(_MAX_CP) + "]"
    comp = _subtract(_complement(ranges), _SURROGATES)
    if comp and len(comp) < len(ranges):
        return "[^" + _class_body(comp, char) + "]"
    return "[" + _class_body(ranges, char) + "]"


def _regex_class(ranges: Ranges) -> str:
    return _write_class(ranges, lambda cp: _regex_char(cp, True))


def _ebnf_char(cp: int) -> str:
    ch = chr(cp)
    if ch in "\\]^-[\"":
        return "\\" + ch
    if 0x20 <= cp < 0x7F:
        return ch
    if ch in "\n\t\r":
        return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch]
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _ebnf_class(ranges: Ranges) -> str:
    return _write_class(ranges, _ebnf_char)


# --------------------------------------------------------------------------------------
# Lark's regular expressions (Python syntax) to the core's Regex dialect
# --------------------------------------------------------------------------------------

_CATEGORIES = {
    "CATEGORY_DIGIT": ("d", False), "CATEGORY_NOT_DIGIT": ("d", True),
    "CATEGORY_WORD": ("w", False), "CATEGORY_NOT_WORD": ("w", True),
    "CATEGORY_SPACE": ("s", False), "CATEGORY_NOT_SPACE": ("s", True),
}

_FLAG_BITS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE, "u": re.UNICODE}


class _RegexWriter:
    def __init__(self, pos: Pos, source: str) -> None:
        self.pos = pos
        self.source = source

    def fail(self, what: str) -> GrammarError:
        return _error(self.pos, f"{what} in the regular expression {self.source} cannot be expressed by a grammar")

    # Each item becomes (text, is_atom): atoms take a quantifier without a group.
    def sequence(self, items, flags: int) -> List[Tuple[str, bool]]:
        return [self.item(op, av, flags) for op, av in items]

    def group(self, items, flags: int) -> Tuple[str, bool]:
        parts = self.sequence(items, flags)
        if len(parts) == 1 and parts[0][1]:
            return parts[0]
        return "(?:" + "".join(t for t, _ in parts) + ")", True

    def class_set(self, items, flags: int) -> Ranges:
        ascii_only = bool(flags & re.ASCII)
        negate = False
        ranges: Ranges = []
        py = []
        for op, av in items:
            name = str(op)
            if name == "NEGATE":
                negate = True
                py.append("^")
            elif name == "LITERAL":
                ranges.append((av, av))
                py.append(_py_class_char(av))
            elif name == "RANGE":
                ranges.append((av[0], av[1]))
                py.append(_py_class_char(av[0]) + "-" + _py_class_char(av[1]))
            elif name == "CATEGORY":
                key, negated = _CATEGORIES[str(av)]
                cat = _category_ranges(key, ascii_only)
                ranges.extend(_complement(cat) if negated else cat)
                py.append("\\" + (key.upper() if negated else key))
            else:  # pragma: no cover  (the parser produces no other class items)
                raise self.fail(f"the class item {name}")
        base = _normalize(ranges)
        if negate:
            base = _complement(base)
        if flags & re.IGNORECASE:
            return _ignorecase_set("[" + "".join(py) + "]", base, _verify_flags(flags))
        return base

    def item(self, op, av, flags: int) -> Tuple[str, bool]:
        name = str(op)
        if name == "LITERAL":
            chars = _literal_char_set(chr(av), flags)
            if _is_single(chars) and not 0xD800 <= av <= 0xDFFF:
                return _regex_char(av, False), True
            return _regex_class(chars), True  # (a lone surrogate: the empty class)
        if name == "NOT_LITERAL":
            return _regex_class(_complement(_literal_char_set(chr(av), flags))), True
        if name == "ANY":
            return (_regex_class([(0, _MAX_CP)]) if flags & re.DOTALL else "."), True
        if name == "IN":
            return _regex_class(self.class_set(av, flags)), True
        if name == "CATEGORY":  # pragma: no cover  (categories come inside IN)
            return _regex_class(self.class_set([(op, av)], flags)), True
        if name == "BRANCH":
            alternatives = ["".join(t for t, _ in self.sequence(sub, flags)) for sub in av[1]]
            return "(?:" + "|".join(alternatives) + ")", True
        if name == "SUBPATTERN":
            _group, add_flags, del_flags, sub = av
            return self.group(sub, (flags | add_flags) & ~del_flags)
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            lo, hi, sub = av
            text, atom = self.group(sub, flags)
            if not atom:  # pragma: no cover  (group() always returns an atom)
                text = "(?:" + text + ")"
            return text + _quantifier(lo, hi), False
        if name == "POSSESSIVE_REPEAT":
            raise self.fail("a possessive quantifier")
        if name == "ATOMIC_GROUP":
            raise self.fail("an atomic group (?>...)")
        if name == "AT":
            raise self.fail("an anchor or word boundary (^, $, \\A, \\Z, \\b, \\B)")
        if name in ("GROUPREF", "GROUPREF_EXISTS"):
            raise self.fail("a backreference or conditional group")
        if name in ("ASSERT", "ASSERT_NOT"):
            raise self.fail("a lookahead or lookbehind assertion")
        raise self.fail(f"the construct {name}")  # pragma: no cover

    def char_item_set(self, items, flags: int) -> Optional[Ranges]:
        """The character set of a pattern that is exactly one character item, else None."""
        items = list(items)
        if len(items) != 1:
            return None
        op, av = items[0]
        name = str(op)
        if name == "LITERAL":
            return _literal_char_set(chr(av), flags)
        if name == "NOT_LITERAL":
            return _complement(_literal_char_set(chr(av), flags))
        if name == "ANY":
            return [(0, _MAX_CP)] if flags & re.DOTALL else _complement([(10, 10)])
        if name == "IN":
            return self.class_set(av, flags)
        return None

    def lazy_stop(self, items, flags: int):
        """``... X*? q`` at the end of a whole-token regex: X without q (first-match)."""
        if len(items) < 2:
            return None
        (rop, rav), (lop, lav) = items[-2], items[-1]
        if str(rop) != "MIN_REPEAT" or rav[1] != _sre_c.MAXREPEAT or str(lop) != "LITERAL":
            return None
        inner = self.char_item_set(rav[2], flags)
        if inner is None:
            return None
        stop = _literal_char_set(chr(lav), flags)
        head = self.sequence(items[:-2], flags)
        text = "".join(t for t, _ in head)
        text += _regex_class(_subtract(inner, stop)) + _quantifier(rav[0], rav[1])
        text += self.item(lop, lav, flags)[0]
        return text

    def greedy_tail(self, items, flags: int) -> Optional[Ranges]:
        """C when the pattern ends with a greedy unbounded run of one class C."""
        items = list(items)
        if not items:
            return None
        op, av = items[-1]
        if str(op) == "MAX_REPEAT" and av[1] == _sre_c.MAXREPEAT:
            return self.char_item_set(av[2], flags)
        if str(op) == "SUBPATTERN":
            return self.greedy_tail(av[3], (flags | av[1]) & ~av[2])
        return None


def _py_class_char(cp: int) -> str:
    ch = chr(cp)
    return "\\" + ch if ch in "\\]^-[" else ch


def _quantifier(lo: int, hi: int) -> str:
    if hi == _sre_c.MAXREPEAT:
        return "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
    if (lo, hi) == (0, 1):
        return "?"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def _parse_regex(pattern: str, flag_letters: str, pos: Pos, source: str):
    flags = 0
    for letter in flag_letters:
        if letter == "l":
            raise _error(pos, f"the regex flag 'l' (LOCALE) of {source} is not supported")
        flags |= _FLAG_BITS[letter]
    try:
        parsed = _sre_parse.parse(pattern, flags)
    except RecursionError:
        raise _error(pos, f"the regular expression {source} nests too deeply") from None
    except re.error as e:
        where = f" (at position {e.pos} of the pattern)" if e.pos is not None else ""
        raise _error(pos, f"invalid regular expression {source}: {e.msg}{where}") from None
    except ValueError as e:  # e.g. LOCALE with a str pattern
        raise _error(pos, f"invalid regular expression {source}: {e}") from None
    except OverflowError as e:  # a repetition count past sre's range: a{4294967296} (a fuzz find)
        raise _error(pos, f"invalid regular expression {source}: {e}") from None
    flags = parsed.state.flags
    if flags & re.LOCALE:
        raise _error(pos, f"the LOCALE flag of {source} is not supported")
    return list(parsed), flags


def _translate_regex(pattern: str, flag_letters: str, pos: Pos, source: str, whole_token: bool) -> str:
    """A Lark regex (already unescaped as Lark does) as a core Regex pattern."""
    items, flags = _parse_regex(pattern, flag_letters, pos, source)
    writer = _RegexWriter(pos, source)
    if whole_token:
        text = writer.lazy_stop(items, flags)
        if text is not None:
            return text
    return "".join(t for t, _ in writer.sequence(items, flags))


# --------------------------------------------------------------------------------------
# Lark's common.lark, written out here (same languages, our own definitions)
# --------------------------------------------------------------------------------------

COMMON_TERMINALS: Dict[str, str] = {
    "DIGIT": r"[0-9]",
    "HEXDIGIT": r"[a-fA-F0-9]",
    "INT": r"[0-9]+",
    "SIGNED_INT": r"[+\-]? common.INT",
    "DECIMAL": r'common.INT "." common.INT? | "." common.INT',
    "_EXP": r"[eE] common.SIGNED_INT",
    "FLOAT": r"common.INT common._EXP | common.DECIMAL common._EXP?",
    "SIGNED_FLOAT": r"[+\-]? common.FLOAT",
    "NUMBER": r"common.FLOAT | common.INT",
    "SIGNED_NUMBER": r"[+\-]? common.NUMBER",
    # /.*?/ : any line content
    "_STRING_INNER": r"[^\n]*",
    # _STRING_INNER /(?<!\\)(\\\\)*?/ : line content not ending in an odd run of backslashes
    "_STRING_ESC_INNER": r'([^\n]* [^\n\\])? ("\\\\")*',
    # Lark's lexer stops at the first quote not escaped by a backslash
    "ESCAPED_STRING": r'"\"" ([^"\\\n] | "\\" [^\n])* "\""',
    "LCASE_LETTER": r"[a-z]",
    "UCASE_LETTER": r"[A-Z]",
    "LETTER": r"[A-Za-z]",
    "WORD": r"[A-Za-z]+",
    "CNAME": r"[_A-Za-z] [_A-Za-z0-9]*",
    "WS_INLINE": r"[ \t]+",
    "WS": r"[ \t\f\r\n]+",
    "CR": r'"\r"',
    "LF": r'"\n"',
    "NEWLINE": r'("\r"? "\n")+',
    "SH_COMMENT": r'"#" [^\n]*',
    "CPP_COMMENT": r'"//" [^\n]*',
    # "/*" /(.|\n)*?/ "*/" : ends at the first "*/"
    "C_COMMENT": r'"/*" [^*]* "*"+ ([^/*] [^*]* "*"+)* "/"',
    "SQL_COMMENT": r'"--" [^\n]*',
}

_COMMON_REF = re.compile(r"common\.([A-Z_]+)")

# The class C of common terminals that end with a greedy run C* or C+ (see _greedy_tail).
_NOT_NEWLINE = [(0, 9), (11, _MAX_CP)]
_COMMON_TAILS: Dict[str, Ranges] = {
    "WS": [(9, 10), (12, 13), (32, 32)],
    "WS_INLINE": [(9, 9), (32, 32)],
    "SH_COMMENT": _NOT_NEWLINE,
    "CPP_COMMENT": _NOT_NEWLINE,
    "SQL_COMMENT": _NOT_NEWLINE,
    "_STRING_INNER": _NOT_NEWLINE,
    "INT": [(0x30, 0x39)],
    "WORD": [(0x41, 0x5A), (0x61, 0x7A)],
    "CNAME": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
}


# --------------------------------------------------------------------------------------
# Lexing and parsing the Lark grammar
# --------------------------------------------------------------------------------------


class _Tok(NamedTuple):
    """(A tuple of strings and ints: the garbage collector stops tracking it, so a
    100k-rule grammar's tokens do not make every collection longer.)"""

    kind: str  # NL OR COLON LPAR RPAR LBRA RBRA LBRACE RBRACE COMMA DOT DOTDOT TILDE OP BANG
    #            TO STRING REGEXP NAME NUMBER DIRECTIVE NAMED EOF
    value: str
    pos: Pos
    flags: str = ""
    raw: str = ""


_PUNCT = {":": "COLON", "|": "OR", "(": "LPAR", ")": "RPAR", "[": "LBRA", "]": "RBRA", "{": "LBRACE",
          "}": "RBRACE", ",": "COMMA", "~": "TILDE", "+": "OP", "*": "OP", "?": "OP", "!": "BANG"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RULE_NAME = re.compile(r"_?[a-z][_a-z0-9]*")
_NAMED_REF = re.compile(r"[A-Za-z0-9_-]+")  # @name: a grammar of named_grammars (Grammar.from_lark)
_TERM_NAME = re.compile(r"_?[A-Z][_A-Z0-9]*")
_CONTINUATION = re.compile(r"\\[ \t]*\r?\n")
_DIGITS = "0123456789"
_MAX_GROUP_DEPTH = 100  # nested ( ) and [ ] (the core's grammar parser stops at 200)


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def pos(self, offset: int) -> Pos:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def tokens(self) -> List[_Tok]:
        text, n, i = self.text, len(self.text), 0
        toks: List[_Tok] = []
        while i < n:
            c = text[i]
            if c in " \t\f\r\v":
                i += 1
            elif c == "\n":
                if not toks or toks[-1].kind != "NL":
                    toks.append(_Tok("NL", "\n", self.pos(i)))
                i += 1
            elif c == "#" or text.startswith("//", i):
                j = text.find("\n", i)
                i = n if j < 0 else j
            elif c == "\\" and _CONTINUATION.match(text, i):
                i = _CONTINUATION.match(text, i).end()
            elif c in "\"'":
                i = self.string(i, toks)
            elif c == "/":
                i = self.regexp(i, toks)
            elif c == "%":
                m = _NAME.match(text, i + 1)
                if not m:
                    raise _error(self.pos(i), "expected a directive name after '%'")
                toks.append(_Tok("DIRECTIVE", m.group(), self.pos(i)))
                i = m.end()
            elif c in _DIGITS or (c in "+-" and i + 1 < n and text[i + 1] in _DIGITS
                                 and toks and toks[-1].kind in ("TILDE", "DOT", "DOTDOT")):
                j = i + 1
                while j < n and text[j] in _DIGITS:
                    j += 1
                toks.append(_Tok("NUMBER", text[i:j], self.pos(i)))
                i = j
            elif c.isalpha() or c == "_":
                m = _NAME.match(text, i)
                if not m:
                    raise _error(self.pos(i), f"unexpected character {c!r}")
                toks.append(_Tok("NAME", m.group(), self.pos(i)))
                i = m.end()
            elif c == "@":
                m = _NAMED_REF.match(text, i + 1)
                if not m:
                    raise _error(self.pos(i), "expected a named grammar's name after '@'")
                toks.append(_Tok("NAMED", m.group(), self.pos(i)))
                i = m.end()
            elif text.startswith("->", i):
                toks.append(_Tok("TO", "->", self.pos(i)))
                i += 2
            elif text.startswith("..", i):
                toks.append(_Tok("DOTDOT", "..", self.pos(i)))
                i += 2
            elif c == ".":
                toks.append(_Tok("DOT", ".", self.pos(i)))
                i += 1
            elif c in _PUNCT:
                toks.append(_Tok(_PUNCT[c], c, self.pos(i)))
                i += 1
            else:
                raise _error(self.pos(i), f"unexpected character {c!r}")
        toks.append(_Tok("EOF", "", self.pos(n)))
        return toks

    def string(self, i: int, toks: List[_Tok]) -> int:
        text, n, quote = self.text, len(self.text), self.text[i]
        j = i + 1
        while True:
            if j >= n or text[j] == "\n":
                raise _error(self.pos(i), "unterminated string literal (strings cannot span lines)")
            if text[j] == "\\":
                if j + 1 >= n or text[j + 1] == "\n":
                    raise _error(self.pos(i), "unterminated string literal (strings cannot span lines)")
                j += 2
                continue
            if text[j] == quote:
                break
            j += 1
        body = text[i + 1:j]
        j += 1
        flags = ""
        if j < n and text[j] == "i":
            flags, j = "i", j + 1
        toks.append(_Tok("STRING", _unescape(body, quote, self.pos(i)), self.pos(i), flags, text[i:j]))
        return j

    def regexp(self, i: int, toks: List[_Tok]) -> int:
        text, n = self.text, len(self.text)
        j = i + 1
        while True:
            if j >= n:
                raise _error(self.pos(i), "unterminated regular expression (missing closing '/')")
            if text[j] == "\\" and j + 1 < n:
                j += 2
                continue
            if text[j] == "/":
                break
            j += 1
        body = text[i + 1:j]
        j += 1
        k = j
        while j < n and text[j] in "imslux":
            j += 1
        flags = text[k:j]
        raw = text[i:j]
        if "\n" in body and "x" not in flags:
            raise _error(self.pos(i), "newlines in a regular expression need the x (verbose) flag")
        pattern = _unescape(body, "/", self.pos(i))
        toks.append(_Tok("REGEXP", pattern, self.pos(i), flags, raw))
        return j


def _unescape(body: str, quote: str, pos: Pos) -> str:
    """Lark's escape processing of a literal's body.

    ``\\n \\f \\t \\r \\xHH \\uHHHH \\UHHHHHHHH`` become characters, ``\\"`` (and the closing
    quote of a single-quoted literal) the quote, and ``\\\\`` stays two backslashes (a
    string literal later folds them to one, a regex reads them as an escaped backslash);
    any other backslash is kept with the character after it."""
    out = []
    i, n = 0, len(body)
    simple = {"n": "\n", "f": "\f", "t": "\t", "r": "\r"}
    while i < n:
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            raise _error(pos, "literal ends with a backslash")
        d = body[i + 1]
        if d == "\\":
            out.append("\\\\")
            i += 2
        elif d == '"' or (d == quote and quote == "'"):
            out.append(d)
            i += 2
        elif d in simple:
            out.append(simple[d])
            i += 2
        elif d in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[d]
            digits = body[i + 2:i + 2 + width]
            if len(digits) != width or not all(h in "0123456789abcdefABCDEF" for h in digits):
                raise _error(pos, f"bad escape \\{d} in a literal: it needs {width} hex digits")
            value = int(digits, 16)
            if value > _MAX_CP:
                raise _error(pos, f"escape \\{d}{digits} is beyond U+10FFFF")
            out.append(chr(value))
            i += 2 + width
        else:
            out.append(c + d)
            i += 2
    return "".join(out)


# AST: ("alt", [e]), ("seq", [e]), ("lit", text, ci), ("re", pattern, flags, raw),
# ("range", lo, hi), ("name", name), ("rep", e, lo, hi|None); every node ends with its Pos.


@dataclass
class _Def:
    name: str
    kind: str  # "rule" or "term"
    expr: tuple
    pos: Pos


class _Parser:
    def __init__(self, toks: List[_Tok]) -> None:
        self.toks = toks
        self.i = 0
        self.defs: Dict[str, _Def] = {}
        self.order: List[str] = []
        self.ignores: List[tuple] = []
        self.imports: Dict[str, Tuple[str, Pos]] = {}  # local name -> (common name, pos)
        self.depth = 0

    def peek(self, k: int = 0) -> _Tok:
        j = self.i + k
        toks = self.toks
        return toks[j] if j < len(toks) else toks[-1]  # (past the end: EOF)

    def take(self) -> _Tok:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, kind: str, what: str) -> _Tok:
        tok = self.peek()
        if tok.kind != kind:
            raise _error(tok.pos, f"expected {what}, found {_describe(tok)}")
        return self.take()

    def end_of_statement(self) -> None:
        tok = self.peek()
        if tok.kind == "EOF":
            return
        if tok.kind != "NL":
            if tok.kind == "OP":
                raise _error(tok.pos, f"misplaced operator {tok.value!r} (one operator per item, after the item)")
            raise _error(tok.pos, f"expected the end of the line, found {_describe(tok)}")
        self.take()

    def parse(self) -> None:
        while self.peek().kind != "EOF":
            tok = self.peek()
            if tok.kind == "NL":
                self.take()
            elif tok.kind == "DIRECTIVE":
                self.directive()
            else:
                self.definition()

    # ---- statements ----

    def definition(self) -> None:
        modifiers = []
        while self.peek().kind in ("OP", "BANG") and self.peek().value in "?!":
            modifiers.append(self.take())
        tok = self.expect("NAME", "a rule or terminal definition")
        _budget.check(f"lark: parsing {tok.value} (line {tok.pos[0]})")
        kind = _name_kind(tok)
        if modifiers and kind == "term":
            raise _error(modifiers[0].pos, f"the modifiers '?' and '!' apply to rules, not to the terminal {tok.value}")
        if self.peek().kind == "LBRACE":
            raise _error(tok.pos, f"rule templates ({tok.value}{{...}}) are not supported")
        if self.peek().kind == "DOT":
            self.take()
            self.expect("NUMBER", "a priority number after '.'")
        self.expect("COLON", f"':' after {tok.value}")
        expr = self.expansions()
        self.end_of_statement()
        if tok.value in self.defs or tok.value in self.imports:
            what = "Rule" if kind == "rule" else "Terminal"
            raise _error(tok.pos, f"{what} '{tok.value}' is defined more than once")
        self.defs[tok.value] = _Def(tok.value, kind, expr, tok.pos)
        self.order.append(tok.value)

    def directive(self) -> None:
        tok = self.take()
        name = tok.value
        if name == "ignore":
            expr = self.expansions()
            self.end_of_statement()
            self.ignores.append(expr)
        elif name == "import":
            self.import_statement(tok)
        elif name == "declare":
            raise _error(tok.pos, "%declare is not supported (declared terminals are produced by a "
                                  "postlexer, which a grammar cannot express)")
        elif name in ("override", "extend"):
            raise _error(tok.pos, f"%{name} is not supported")
        else:
            raise _error(tok.pos, f"unknown directive %{name}")

    def import_statement(self, tok: _Tok) -> None:
        if self.peek().kind == "DOT":
            raise _error(self.peek().pos, "relative imports (%import .module...) are not supported; "
                                          "only %import common... is")
        path = [self.expect("NAME", "a module path after %import")]
        while self.peek().kind == "DOT":
            self.take()
            path.append(self.expect("NAME", "a name after '.'"))
        if self.peek().kind == "LPAR":
            module, names = path, []
            self.take()
            names.append(self.expect("NAME", "a name to import"))
            while self.peek().kind == "COMMA":
                self.take()
                names.append(self.expect("NAME", "a name to import"))
            self.expect("RPAR", "')' to close the import list")
            pairs = [(t, t) for t in names]
        else:
            if len(path) < 2:
                raise _error(path[0].pos, "%import needs a name (%import common.NAME or %import common (A, B))")
            module, last = path[:-1], path[-1]
            alias = last
            if self.peek().kind == "TO":
                self.take()
                alias = self.expect("NAME", "a name after '->'")
            pairs = [(last, alias)]
        self.end_of_statement()
        module_name = ".".join(t.value for t in module)
        if module_name != "common":
            raise _error(module[0].pos, f"only Lark's common.lark can be imported (%import common...), "
                                        f"not {module_name!r}")
        for src, alias in pairs:
            if src.value not in COMMON_TERMINALS:
                raise _error(src.pos, f"common.lark has no terminal {src.value!r}")
            if _name_kind(alias) != "term":
                raise _error(alias.pos, f"a terminal must be imported under an upper-case name, not {alias.value!r}")
            if alias.value in self.defs or alias.value in self.imports:
                raise _error(alias.pos, f"Terminal '{alias.value}' is defined more than once")
            self.imports[alias.value] = (src.value, alias.pos)

    # ---- expressions ----

    def expansions(self) -> tuple:
        start = self.peek().pos
        alternatives = [self.alias()]
        while True:
            if self.peek().kind == "OR":
                self.take()
            elif self.peek().kind == "NL" and self.peek(1).kind == "OR":
                self.take()
                self.take()
            else:
                break
            alternatives.append(self.alias())
        return alternatives[0] if len(alternatives) == 1 else ("alt", alternatives, start)

    def alias(self) -> tuple:
        expr = self.expansion()
        if self.peek().kind == "TO":
            tok = self.take()
            if self.depth:
                raise _error(tok.pos, "aliases (-> name) are only allowed at the end of a top-level alternative")
            self.expect("NAME", "an alias name after '->'")
        return expr

    def expansion(self) -> tuple:
        start = self.peek().pos
        items = []
        while self.peek().kind in ("STRING", "REGEXP", "NAME", "LPAR", "LBRA", "NAMED"):
            items.append(self.expr())
        if self.peek().kind in ("OP", "TILDE"):
            raise _error(self.peek().pos, f"misplaced operator {self.peek().value!r}")
        return items[0] if len(items) == 1 else ("seq", items, start)

    def expr(self) -> tuple:
        atom = self.atom()
        tok = self.peek()
        if tok.kind == "OP":
            self.take()
            lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[tok.value]
            return ("rep", atom, lo, hi, tok.pos)
        if tok.kind == "TILDE":
            self.take()
            lo = self.number()
            hi = lo
            if self.peek().kind == "DOTDOT":
                self.take()
                hi = self.number()
            if lo < 0 or hi < lo:
                raise _error(tok.pos, f"bad repetition range ~ {lo}..{hi}")
            return ("rep", atom, lo, hi, tok.pos)
        return atom

    def number(self) -> int:
        return int(self.expect("NUMBER", "a number").value)

    def atom(self) -> tuple:
        tok = self.take()
        if tok.kind in ("LPAR", "LBRA"):
            if self.depth >= _MAX_GROUP_DEPTH:
                raise _error(tok.pos, f"groups nested deeper than {_MAX_GROUP_DEPTH}")
            self.depth += 1
            inner = self.expansions()
            self.depth -= 1
            if tok.kind == "LPAR":
                self.expect("RPAR", "')'")
                return inner
            self.expect("RBRA", "']'")
            return ("rep", inner, 0, 1, tok.pos)
        if tok.kind == "STRING":
            if self.peek().kind == "DOTDOT":
                self.take()
                end = self.expect("STRING", "a string after '..'")
                return self.range(tok, end)
            value = tok.value.replace("\\\\", "\\")
            if not value:
                raise _error(tok.pos, "empty string literals are not allowed (as in Lark)")
            return ("lit", value, tok.flags == "i", tok.pos)
        if tok.kind == "REGEXP":
            return ("re", tok.value, tok.flags, tok.raw, tok.pos)
        if tok.kind == "NAMED":
            return ("named", tok.value, tok.pos)
        if tok.kind == "NAME":
            _name_kind(tok)
            if self.peek().kind == "LBRACE":
                raise _error(tok.pos, f"rule templates ({tok.value}{{...}}) are not supported")
            return ("name", tok.value, tok.pos)
        raise _error(tok.pos, f"expected a string, a regular expression, a name or a group, found {_describe(tok)}")

    def range(self, start: _Tok, end: _Tok) -> tuple:
        lo = start.value.replace("\\\\", "\\")
        hi = end.value.replace("\\\\", "\\")
        if start.flags or end.flags:
            raise _error(start.pos, "flags are not allowed on range bounds")
        if len(lo) != 1 or len(hi) != 1:
            raise _error(start.pos, "the bounds of a range \"a\"..\"z\" must be single characters")
        if ord(hi) < ord(lo):
            raise _error(start.pos, f"the range {start.raw}..{end.raw} is reversed")
        return ("range", ord(lo), ord(hi), start.pos)


def _name_kind(tok: _Tok) -> str:
    if _RULE_NAME.fullmatch(tok.value):
        return "rule"
    if _TERM_NAME.fullmatch(tok.value):
        return "term"
    raise _error(tok.pos, f"invalid name {tok.value!r}: rule names are lower case (_?[a-z][_a-z0-9]*), "
                          f"terminal names upper case (_?[A-Z][_A-Z0-9]*)")


def _describe(tok: _Tok) -> str:
    if tok.kind == "EOF":
        return "the end of the grammar"
    if tok.kind == "NL":
        return "the end of the line"
    return repr(tok.raw or tok.value)


# --------------------------------------------------------------------------------------
# Checking and writing the EBNF
# --------------------------------------------------------------------------------------


def _walk(expr):
    yield expr
    tag = expr[0]
    if tag in ("alt", "seq"):
        for e in expr[1]:
            yield from _walk(e)
    elif tag == "rep":
        yield from _walk(expr[1])


class _Converter:
    def __init__(self, parser: _Parser, start: str, named: Optional[Set[str]] = None) -> None:
        self.p = parser
        self.start = start
        self.common_used: Set[str] = set()
        self.named = named or set()  # the names @name may use
        self.named_used: Set[str] = set()

    def ebnf_name(self, name: str) -> str:
        if name in self.p.imports:
            return "common." + self.p.imports[name][0]
        return name

    def is_terminal(self, name: str) -> bool:
        return name in self.p.imports or (name in self.p.defs and self.p.defs[name].kind == "term")

    def check(self) -> None:
        p = self.p
        for name in p.order:
            d = p.defs[name]
            for node in _walk(d.expr):
                if node[0] == "named":
                    self.check_named(node, d)
                if node[0] != "name":
                    continue
                ref = node[1]
                if ref not in p.defs and ref not in p.imports:
                    what = "Rule" if _RULE_NAME.fullmatch(ref) else "Terminal"
                    raise _error(node[2], f"{what} '{ref}' is used but not defined (in {name})")
                if d.kind == "term" and not self.is_terminal(ref):
                    raise _error(node[2], f"rules are not allowed inside terminals (rule '{ref}' in terminal {name})")
        for expr in p.ignores:
            for node in _walk(expr):
                if node[0] == "named":
                    raise _error(node[2], f"%ignore takes terminals, not the named grammar @{node[1]}")
                if node[0] == "name":
                    if node[1] not in p.defs and node[1] not in p.imports:
                        raise _error(node[2], f"Terminal '{node[1]}' is used but not defined (in %ignore)")
                    if not self.is_terminal(node[1]):
                        raise _error(node[2], f"%ignore takes terminals, not the rule '{node[1]}'")
        self.check_terminal_recursion()
        if self.start not in p.defs or p.defs[self.start].kind != "rule":
            raise _error((1, 1), f"the grammar has no start rule '{self.start}'")
        self.check_productive()

    def check_named(self, node, d: _Def) -> None:
        if d.kind == "term":
            raise _error(node[2], f"@{node[1]} in terminal {d.name}: named grammars may only be used in rules")
        if node[1] not in self.named:
            given = ", ".join(sorted(self.named)) or "none"
            raise _error(node[2], f"@{node[1]} is not a named grammar (named_grammars gives: {given:.200})")
        self.named_used.add(node[1])

    def check_terminal_recursion(self) -> None:
        p = self.p
        state: Dict[str, int] = {}

        def visit(name: str) -> None:
            state[name] = 1
            for node in _walk(p.defs[name].expr):
                if node[0] == "name" and node[1] in p.defs:
                    ref = node[1]
                    if state.get(ref) == 1:
                        raise _error(p.defs[ref].pos, f"recursion in terminal '{ref}' (recursion is only "
                                                      f"allowed in rules, not terminals)")
                    if ref not in state:
                        visit(ref)
            state[name] = 2

        for name in p.order:
            if p.defs[name].kind == "term" and name not in state:
                visit(name)

    def check_productive(self) -> None:
        p = self.p
        productive: Set[str] = set(p.imports) | {n for n, d in p.defs.items() if d.kind == "term"}

        def prod(e) -> bool:
            tag = e[0]
            if tag == "name":
                return e[1] in productive
            if tag == "seq":
                return all(prod(x) for x in e[1])
            if tag == "alt":
                return any(prod(x) for x in e[1])
            if tag == "rep":
                return e[2] == 0 or prod(e[1])
            return True

        changed = True
        while changed:
            changed = False
            for name, d in p.defs.items():
                if name not in productive and prod(d.expr):
                    productive.add(name)
                    changed = True
        if self.start not in productive:
            raise _error(p.defs[self.start].pos, f"rule '{self.start}' matches no string (every derivation "
                                                 f"recurses forever)")

    # ---- emission ----

    def reachable(self) -> List[str]:
        p = self.p
        seen: Set[str] = set()
        stack = [self.start]
        for expr in p.ignores:
            stack += [n[1] for n in _walk(expr) if n[0] == "name"]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in p.defs:
                stack += [n[1] for n in _walk(p.defs[name].expr) if n[0] == "name"]
        return [n for n in p.order if n in seen] + sorted(n for n in seen if n in p.imports)

    def convert(self) -> Tuple[str, str]:
        self.check()
        p = self.p
        names = self.reachable()
        # Terminals used inside other terminals are not whole tokens there.
        self.inner_terminals: Set[str] = set()
        for name in names:
            if name in p.defs and p.defs[name].kind == "term":
                self.inner_terminals.update(n[1] for n in _walk(p.defs[name].expr) if n[0] == "name")
        self.ignoring = bool(p.ignores)
        lines = []
        for name in names:
            if name in p.imports:
                self.use_common(p.imports[name][0])
                continue
            d = p.defs[name]
            _budget.check(f"lark: rule {name}")
            whole = d.kind == "term" and name not in self.inner_terminals
            body = self.emit(d.expr, d.kind, whole_token=whole)[0]
            lines.append(f"{name} ::= {body}")
            _budget.charge(len(name) + len(body) + 5, f"lark: rule {name}")
        if self.ignoring:
            lines += self.ignore_rules()
            root = _ROOT
        else:
            root = self.start
        for cname in sorted(self.common_used):
            lines.append(f"common.{cname} ::= {COMMON_TERMINALS[cname]}")
        return "\n".join(lines) + "\n", root

    def ignore_rules(self) -> List[str]:
        """lark.ignore (runs of ignored material between tokens) and lark.root.

        Lark matches an ignored terminal greedily.  When its pattern ends with an
        unbounded run of a class C (whitespace, a line comment), that is the same as
        requiring the next character not to be in C, which a lookahead states exactly;
        at the end of the input there is no next character, so the last run of the
        input (lark.ignore.end) may end anywhere."""
        alternatives = []
        for expr in self.p.ignores:
            alternatives += expr[1] if expr[0] == "alt" else [expr]
        lines, middle, last = [], [], []
        for k, alt in enumerate(alternatives):
            text, kind = self.emit(alt, "term", whole_token=True)
            group = text if kind == "atom" else f"({text})"
            tail = self.greedy_tail(alt)
            if tail is None:
                middle.append(group)
                continue
            follow = _subtract(_complement(tail), _SURROGATES)
            if follow:
                name = f"{_IGNORE}.{k}"
                lines.append(f"{name} ::= {group} (= {_ebnf_class(follow)})")
                middle.append(name)
            last.append(group)
        lines.append(f"{_IGNORE} ::= ({' | '.join(middle)})*" if middle else f'{_IGNORE} ::= ""')
        if last:
            lines.append(f"{_IGNORE}.end ::= {_IGNORE} ({' | '.join(last)})?")
            lines.append(f"{_ROOT} ::= {self.start} {_IGNORE}.end")
        else:
            lines.append(f"{_ROOT} ::= {self.start} {_IGNORE}")
        return lines

    def greedy_tail(self, e) -> Optional[Ranges]:
        """C when every string of the terminal expression ends with a greedy run C*/C+."""
        tag = e[0]
        if tag == "name":
            if e[1] in self.p.imports:
                return _COMMON_TAILS.get(self.p.imports[e[1]][0])
            return self.greedy_tail(self.p.defs[e[1]].expr)
        if tag == "seq":
            return self.greedy_tail(e[1][-1]) if e[1] else None
        if tag == "rep" and e[3] is None:
            return self.char_set(e[1])
        if tag == "re":
            items, flags = _parse_regex(e[1], e[2], e[4], e[3])
            return _RegexWriter(e[4], e[3]).greedy_tail(items, flags)
        return None

    def char_set(self, e) -> Optional[Ranges]:
        """The characters of a terminal expression that matches exactly one character."""
        tag = e[0]
        if tag == "lit" and len(e[1]) == 1:
            return _literal_char_set(e[1], re.IGNORECASE if e[2] else 0)
        if tag == "range":
            return [(e[1], e[2])]
        if tag == "re":
            items, flags = _parse_regex(e[1], e[2], e[4], e[3])
            return _RegexWriter(e[4], e[3]).char_item_set(items, flags)
        if tag == "name" and e[1] in self.p.defs:
            return self.char_set(self.p.defs[e[1]].expr)
        if tag == "alt":
            sets = [self.char_set(x) for x in e[1]]
            if all(x is not None for x in sets):
                return _normalize([r for x in sets for r in x])
        return None

    def use_common(self, name: str) -> None:
        if name in self.common_used:
            return
        self.common_used.add(name)
        for dep in _COMMON_REF.findall(COMMON_TERMINALS[name]):
            self.use_common(dep)

    def emit(self, e, ctx: str, whole_token: bool = False) -> Tuple[str, str]:
        """(text, kind): kind 'atom' takes a quantifier as is, 'seq'/'alt' need a group."""
        tag = e[0]
        if tag == "alt":
            parts = [self.emit(x, ctx, whole_token)[0] for x in e[1]]
            return " | ".join(parts), "alt"
        if tag == "seq":
            if not e[1]:
                return '""', "atom"
            if ctx == "term":
                special = self.string_idiom(e[1])
                if special is not None:
                    return special, "seq"
            parts = []
            for x in e[1]:
                text, kind = self.emit(x, ctx)
                parts.append(f"({text})" if kind == "alt" else text)
            return " ".join(parts), "seq"
        if tag == "rep":
            text, kind = self.emit(e[1], ctx)
            if kind != "atom":
                text = f"({text})"
            lo, hi = e[2], e[3]
            if (lo, hi) == (0, 1):
                q = "?"
            elif hi is None:
                q = "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
            else:
                q = f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"
            return text + q, "atom"
        if tag == "name" and not self.is_terminal(e[1]):
            return e[1], "atom"
        # a terminal-level atom
        kind = "atom"
        if tag == "named":
            text = NAMED_PREFIX + e[1]  # (an alias rule, written by the caller: grammar_ops)
        elif tag == "name":
            if e[1] in self.p.imports:
                self.use_common(self.p.imports[e[1]][0])
            text = self.ebnf_name(e[1])
        elif tag == "lit":
            text = self.literal(e[1], e[2], e[3])
            if e[2] and len(e[1]) > 1:
                kind = "seq"
        elif tag == "range":
            text = _ebnf_class([(e[1], e[2])])
        else:  # "re"
            pattern = _translate_regex(e[1], e[2], e[4], e[3], whole_token or ctx == "rule")
            text = "Regex(" + ebnf_string_literal(pattern) + ")"
        if ctx == "rule" and self.ignoring:
            return f"({_IGNORE} {text})", "atom"
        return text, kind

    def literal(self, value: str, ci: bool, pos: Pos) -> str:
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise _error(pos, "a string literal contains a lone surrogate, which no UTF-8 text can contain")
        if not ci:
            return ebnf_string_literal(value)
        parts: List[str] = []
        run: List[str] = []
        for ch in value:
            chars = _literal_char_set(ch, re.IGNORECASE)
            if _is_single(chars):
                run.append(ch)
                continue
            if run:
                parts.append(ebnf_string_literal("".join(run)))
                run = []
            parts.append(_ebnf_class(chars))
        if run:
            parts.append(ebnf_string_literal("".join(run)))
        return " ".join(parts)

    def string_idiom(self, items) -> Optional[str]:
        """q _STRING_INNER q / q _STRING_ESC_INNER q: content stops at the first bare q."""
        if len(items) != 3:
            return None
        a, mid, b = items
        if not (a[0] == b[0] == "lit" and mid[0] == "name" and mid[1] in self.p.imports):
            return None
        inner = self.p.imports[mid[1]][0]
        if inner not in ("_STRING_INNER", "_STRING_ESC_INNER") or a[2] or b[2] or len(b[1]) != 1:
            return None
        q = _ebnf_char(ord(b[1]))
        head, tail = self.literal(a[1], False, a[3]), self.literal(b[1], False, b[3])
        if inner == "_STRING_INNER":
            return f"{head} [^{q}\\n]* {tail}"
        if b[1] == "\\":
            return None
        return f'{head} ([^{q}\\\\\\n] | "\\\\" [^\\n])* {tail}'


NAMED_PREFIX = "named."


def lark_to_ebnf(lark_string: str, *, start: str = "start", named: Optional[Set[str]] = None,
                 used: Optional[Set[str]] = None) -> Tuple[str, str]:
    """Convert a Lark grammar to xg2 EBNF.

    Returns ``(ebnf_text, root_rule_name)``, ready for
    ``Grammar.from_ebnf(ebnf_text, root_rule_name=root_rule_name)``.  Raises
    ``GrammarError`` (with ``line`` and ``column`` attributes, 1-based, in the Lark
    source) for invalid grammars and unsupported constructs; see the module docstring
    for the supported subset."""
    if not isinstance(lark_string, str):
        raise InvalidArgumentError(f"lark_string must be a str, got {type(lark_string).__name__}")
    if not isinstance(start, str) or not _RULE_NAME.fullmatch(start):
        raise InvalidArgumentError(f"start must be a Lark rule name, got {start!r}")
    try:
        parser = _Parser(_Lexer(lark_string).tokens())
        parser.parse()
        converter = _Converter(parser, start, named)
        out = converter.convert()
        if used is not None:  # (the named grammars @name referred to, for the caller to add)
            used.update(converter.named_used)
        return out
    except RecursionError:  # (a safety net: nesting is bounded where it is parsed)
        raise GrammarError("the grammar nests too deeply to convert") from None
