"""Numbers and string formats for the JSON Schema converter.

Numbers
-------
:func:`number_expr` builds the EBNF of the JSON number texts whose value meets a
range, integrality and ``multipleOf``.  Values are compared the way Python's
``json`` + ``jsonschema`` compare them:

* an integer text (``-12``) is a Python ``int``: compared exactly;
* a float text (``1.5``, ``1e-05``) is a Python ``float``: a text is accepted only if
  its exact decimal value lies within the bounds, where a float bound ``b`` is taken
  as the decimal ``repr(b)`` (so ``json.dumps(x)`` of every float ``x`` inside the
  bound is accepted: ``repr`` is monotone) and an int bound as the nearest float on
  the inside.  Texts that only fall inside after float rounding are rejected.

Constrained numbers accept integer texts, fixed-point texts and normalised
scientific texts (one non-zero digit before the point: every form ``json.dumps``
writes); other spellings such as ``12e3`` or ``0.5e1`` are rejected.  An
unconstrained ``number`` accepts every JSON number.

``multipleOf`` uses exact decimal arithmetic (``0.3`` is a multiple of ``0.1``;
``jsonschema`` divides floats and says it is not).  See :func:`number_expr` for the
cases that cannot be expressed.

Formats
-------
:data:`FORMAT_PATTERNS` holds ECMA-262 patterns (anchored) that match exactly the
strings Python's ``jsonschema`` format checker accepts (where it checks the format)
or the RFC syntax (where ``jsonschema`` needs an optional package).
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import List, Optional, Tuple

from .json_schema_presets import NUMBERS as PRESET_NUMBERS
from .json_schema_regex import digits_set

MAX_FLOAT = Fraction("1.7976931348623157e308")  # repr(sys.float_info.max), just below it
DEC_MIN = Fraction(1, 10**7)
DEC_MAX = Fraction(10**17)


class NumberError(Exception):
    """A numeric constraint that cannot be expressed exactly (message says why)."""


# ----------------------------------------------------------------------------------
# integer ranges
# ----------------------------------------------------------------------------------


# Integer bounds longer than this many digits (a double's exact value, up to 309
# digits) are spelled as a chain of rules, one per digit: nested groups, one per
# digit, go deeper than the core's grammar parser allows.
_CHAIN_DIGITS = 40


def _bound_chain(bound: str, above: bool, add_rule, name: str) -> str:
    """Rules for the digit strings of len(bound) that are >= bound (above) or <=
    bound, one rule per digit position (flat: no group nests another); returns
    the first rule's name."""
    L = len(bound)
    for i, ch in enumerate(bound):
        d = int(ch)
        rest = L - i - 1
        tail = "" if rest == 0 else (" [0-9]" if rest == 1 else " [0-9]{%d}" % rest)
        if bound[i:] == ("0" if above else "9") * (L - i):  # every suffix qualifies
            add_rule("%s-%d" % (name, i), "[0-9]" if rest == 0 else "[0-9]{%d}" % (rest + 1))
            break
        if bound[i:] == ("9" if above else "0") * (L - i):  # only the bound's own
            add_rule("%s-%d" % (name, i), '"%s"' % bound[i:])
            break
        alts = []
        lo_d, hi_d = (d + 1, 9) if above else (0, d - 1)
        if lo_d <= hi_d:
            alts.append((("[%d]" % lo_d) if lo_d == hi_d else "[%d-%d]" % (lo_d, hi_d)) + tail)
        alts.append('"%d"' % d + ("" if rest == 0 else " %s-%d" % (name, i + 1)))
        add_rule("%s-%d" % (name, i), " | ".join(alts))
    return name + "-0"


def _long_digits(lo: int, hi: int, L: int, add_rule, name: str) -> str:
    """The L-digit integers in [lo, hi] (both L digits long) through _bound_chain."""
    a, b = str(lo), str(hi)
    i = 0
    while i < L and a[i] == b[i]:
        i += 1
    if i == L:
        return '"%s"' % a
    prefix = '"%s" ' % a[:i] if i else ""
    rest = L - i - 1
    tail = "" if rest == 0 else (" [0-9]" if rest == 1 else " [0-9]{%d}" % rest)
    da, db = int(a[i]), int(b[i])
    alts = []
    if rest == 0:
        alts.append("[%d-%d]" % (da, db))
    else:
        alts.append('"%d" %s' % (da, _bound_chain(a[i + 1:], True, add_rule, name + "-ge")))
        if da + 1 <= db - 1:
            alts.append(("[%d]" % (da + 1) if da + 1 == db - 1 else "[%d-%d]" % (da + 1, db - 1)) + tail)
        alts.append('"%d" %s' % (db, _bound_chain(b[i + 1:], False, add_rule, name + "-le")))
    return prefix + "(" + " | ".join(alts) + ")"


def int_range(a: int, b: Optional[int], add_rule=None, prefix: str = "int") -> Optional[str]:
    """Canonical non-negative integers (no leading zeros) in [a, b]; b None: no bound.
    ``add_rule``: where bounds of more than _CHAIN_DIGITS digits put their rules."""
    if a < 0:
        a = 0
    if b is not None and b < a:
        return None
    alts: List[str] = []
    la = len(str(a))
    lb = len(str(b)) if b is not None else None
    L = la
    while lb is None or L <= lb:
        lo_l = max(a, 10 ** (L - 1) if L > 1 else 0)
        if lb is None and L > la:
            alts.append("[1-9] [0-9]{%d,}" % (L - 1) if L > 1 else "[0-9]")
            break
        hi_l = 10**L - 1 if b is None else min(b, 10**L - 1)
        if lo_l <= hi_l:
            full = lo_l == (10 ** (L - 1) if L > 1 else 0) and hi_l == 10**L - 1 and L > 1
            if full and lb is not None:
                # merge a run of full lengths
                L2 = L
                while L2 + 1 <= lb and (b is None or 10 ** (L2 + 1) - 1 <= b):
                    L2 += 1
                if L2 > L:
                    alts.append("[1-9] [0-9]{%d,%d}" % (L - 1, L2 - 1))
                    L = L2 + 1
                    continue
            if L > _CHAIN_DIGITS and add_rule is not None:
                alts.append(_long_digits(lo_l, hi_l, L, add_rule, "%s-d%d" % (prefix, L)))
            else:
                alts.append(digits_set(((lo_l, hi_l),), L, 10))
        L += 1
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


# ----------------------------------------------------------------------------------
# fraction digits
# ----------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _frac_digits(x: Fraction) -> str:
    """Digits of the fractional part of a terminating decimal (trailing zeros cut)."""
    x = x - math.floor(x)
    out = []
    while x:
        x *= 10
        d = math.floor(x)
        out.append(str(d))
        x -= d
        if len(out) > 1200:
            raise NumberError("a bound is not a terminating decimal")
    return "".join(out)


@lru_cache(maxsize=4096)
def frac_expr(lo: Optional[str], lo_incl: bool, hi: Optional[str], hi_incl: bool,
              sig: Optional[int], nonempty: bool, nz: Optional[int] = None) -> Optional[str]:
    """Digit strings F (``nonempty``: at least one digit) with 0.lo <= 0.F <= 0.hi
    (strict per flags; None: unbounded), no non-zero digit past position ``sig``, and
    (``nz`` = r) some non-zero digit past the next r positions."""
    if nz is not None and lo == "":
        lo, lo_incl = None, True
    if nz is not None and sig is not None and nz >= sig:
        return None
    if nz is not None and lo is None and hi is None:
        head = "[0-9]{%d} " % nz if nz > 1 else ("[0-9] " if nz == 1 else "")
        if sig is None:
            return "(" + head + '"0"* [1-9] [0-9]*)'
        alts = []
        room = sig - nz
        for i in range(room):
            tail = room - i - 1
            t = (" [0-9]{0,%d}" % tail if tail > 1 else (" [0-9]?" if tail == 1 else ""))
            alts.append(("\"0\"{%d} " % i if i else "") + "[1-9]" + t + ' "0"*')
        return "(" + head + "(" + " | ".join(alts) + "))"
    if lo == "" and lo_incl:
        lo = None
    if hi == "":
        if not hi_incl or (lo is not None) or nz is not None:
            return None  # nothing below 0, or a lower bound above 0 (or strictly 0)
        return '"0"+' if nonempty else '"0"*'
    if lo == "" and hi is None:
        # strictly above zero: some non-zero digit within the first `sig` positions
        if sig is None:
            return '"0"* [1-9] [0-9]*'
        alts = []
        for i in range(sig):
            rest = frac_expr(None, True, None, True, sig - i - 1, False)
            alts.append(('"0"{%d} ' % i if i else "") + "[1-9] " + rest)
        if not alts:
            return None
        return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
    if lo is None and hi is None:
        if sig is None:
            return "[0-9]+" if nonempty else "[0-9]*"
        if sig == 0:
            return '"0"+' if nonempty else '"0"*'
        if nonempty:
            return '([0-9]{1,%d} "0"*)' % sig if sig > 1 else '([0-9] "0"*)'
        return '([0-9]{0,%d} "0"*)' % sig if sig > 1 else '([0-9]? "0"*)'
    alts = []
    if not nonempty and nz is None:
        ok_lo = lo is None or (lo == "" and lo_incl)
        ok_hi = hi is None or hi != "" or hi_incl
        if ok_lo and ok_hi:
            alts.append('""')
    groups = {}
    order = []
    digits = [0] if sig == 0 else range(10)
    for d in digits:
        if lo is None:
            nlo, nlo_incl = None, lo_incl
        else:
            l1 = int(lo[0]) if lo else 0
            if d < l1:
                continue
            if d > l1:
                nlo, nlo_incl = None, lo_incl
            else:
                nlo, nlo_incl = lo[1:], lo_incl
        if hi is None:
            nhi, nhi_incl = None, hi_incl
        else:
            h1 = int(hi[0]) if hi else 0
            if d > h1:
                continue
            if d < h1:
                nhi, nhi_incl = None, hi_incl
            else:
                nhi, nhi_incl = hi[1:], hi_incl
        nsig = None if sig is None else max(sig - 1, 0)
        nnz = None if nz is None or (nz == 0 and d != 0) else max(nz - 1, 0)
        key = (nlo, nlo_incl if nlo is not None else True, nhi, nhi_incl if nhi is not None else True, nsig, nnz)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(d)
    for key in order:
        rest = frac_expr(key[0], key[1], key[2], key[3], key[4], False, key[5])
        if rest is None:
            continue
        ds = groups[key]
        head = '"%d"' % ds[0] if len(ds) == 1 else "[" + _digit_ranges(ds) + "]"
        alts.append(head if rest == '""' else head + " " + rest)
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def _digit_ranges(ds) -> str:
    out = []
    i = 0
    while i < len(ds):
        j = i
        while j + 1 < len(ds) and ds[j + 1] == ds[j] + 1:
            j += 1
        out.append(str(ds[i]) if i == j else "%d-%d" % (ds[i], ds[j]))
        i = j + 1
    return "".join(out)


def fixed_point(a: Fraction, a_incl: bool, b: Optional[Fraction], b_incl: bool,
                sig: Optional[int], frac_optional: bool, nz: Optional[int] = None) -> Optional[str]:
    """Texts ``I.F`` (``I`` canonical; with ``frac_optional`` also ``I``) whose value v
    satisfies a <(=) v <(=) b (b None: unbounded), a >= 0."""
    A = math.floor(a)
    fa = _frac_digits(a)
    tail_opt = frac_optional

    def piece(int_text: str, lo, lo_incl, hi, hi_incl) -> Optional[str]:
        f = frac_expr(lo, lo_incl, hi, hi_incl, sig, True, nz)
        parts = []
        if f is not None:
            parts.append('"." ' + f)
        if tail_opt and nz is None:
            ok_lo = lo is None or (lo == "" and lo_incl)
            ok_hi = hi is None or hi != "" or hi_incl
            if ok_lo and ok_hi:
                parts.append('""')
        if not parts:
            return None
        body = parts[0] if len(parts) == 1 else "(" + " | ".join(parts) + ")"
        return int_text + " " + body

    alts = []
    if b is None:
        p = piece('"%d"' % A, fa, a_incl, None, True)
        if p:
            alts.append(p)
        mid = int_range(A + 1, None)
        if mid:
            p = piece(mid, None, True, None, True)
            if p:
                alts.append(p)
    else:
        B = math.floor(b)
        fb = _frac_digits(b)
        if A == B:
            p = piece('"%d"' % A, fa, a_incl, fb, b_incl)
            if p:
                alts.append(p)
        elif A < B:
            p = piece('"%d"' % A, fa, a_incl, None, True)
            if p:
                alts.append(p)
            mid = int_range(A + 1, B - 1)
            if mid:
                p = piece(mid, None, True, None, True)
                if p:
                    alts.append(p)
            p = piece('"%d"' % B, None, True, fb, b_incl)
            if p:
                alts.append(p)
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


# ----------------------------------------------------------------------------------
# exponents
# ----------------------------------------------------------------------------------


def exp_expr(x1: Optional[int], x2: Optional[int]) -> Optional[str]:
    """``[eE] [+-]? digits`` (leading zeros allowed) with value in [x1, x2]."""
    alts = []
    lo_nn = 0 if x1 is None else max(x1, 0)
    if x2 is None or x2 >= lo_nn:
        r = int_range(lo_nn, x2)
        if r:
            alts.append('"+"? "0"* ' + r)
    if x1 is None or x1 <= -1:
        hi_neg = -1 if x2 is None else min(x2, -1)
        if x1 is None or hi_neg >= x1:
            r = int_range(-hi_neg, None if x1 is None else -x1)
            if r:
                alts.append('"-" "0"* ' + r)
    if (x1 is None or x1 <= 0) and (x2 is None or x2 >= 0):
        alts.append('"-" "0"+')
    if not alts:
        return None
    body = alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
    return "[eE] " + body


def _floor_log10(x: Fraction) -> int:
    e = math.floor(math.log10(x.numerator) - math.log10(x.denominator))
    while Fraction(10) ** e > x:
        e -= 1
    while Fraction(10) ** (e + 1) <= x:
        e += 1
    return e


SCI_HI = 16  # json.dumps (repr) writes |v| >= 1e16 and |v| < 1e-4 in scientific form
SCI_LO = -5
SCI_FRAC = 16  # and at most 16 fraction digits in the mantissa


def _sci(a: Fraction, a_incl: bool, b: Optional[Fraction], b_incl: bool,
         sig_shift: Optional[int], nzs: Optional[int] = None) -> Optional[str]:
    """Normalised scientific texts ``d(.F)?e±X`` with value in the interval (a >= 0)
    and exponent X >= 16 or X <= -5 (the forms repr writes; others are refused).
    ``sig_shift`` s: the value has at most s fraction digits (len(F) <= X + s); for
    X >= 16 the mantissa is limited to 16 fraction digits (always integral then)."""
    ea = None if a == 0 else _floor_log10(a)
    eb = None if b is None else _floor_log10(b)
    if ea is not None and eb is not None and ea > eb:
        return None
    alts = []

    def mant(X: int, lo: Fraction, lo_incl: bool, hi: Optional[Fraction], hi_incl: bool) -> Optional[str]:
        nz = None
        if X >= SCI_HI:
            if nzs is not None:
                return None  # at most 16 fraction digits: an integer
            sig = None if sig_shift is None else SCI_FRAC
        else:
            sig = None if sig_shift is None else X + sig_shift
            if sig is not None and sig < 0:
                return None
            if nzs is not None and X + nzs >= 0:
                nz = X + nzs
        return fixed_point(lo, lo_incl, hi, hi_incl, sig, True, nz)

    def add(X1: Optional[int], X2: Optional[int], m: Optional[str]) -> None:
        if m is None:
            return
        e = exp_expr(X1, X2)
        if e is not None:
            alts.append(m + " " + e)

    def in_region(X):
        return X >= SCI_HI or X <= SCI_LO

    ten = Fraction(10)
    if ea is not None and in_region(ea):
        lo_m = a / ten**ea
        if eb == ea:
            add(ea, ea, mant(ea, lo_m, a_incl, b / ten**eb, b_incl))
        else:
            add(ea, ea, mant(ea, lo_m, a_incl, Fraction(10), False))
    if eb is not None and eb != ea and in_region(eb):
        add(eb, eb, mant(eb, Fraction(1), True, b / ten**eb, b_incl))
    X1 = None if ea is None else ea + 1
    X2 = None if eb is None else eb - 1
    full = fixed_point(Fraction(1), True, Fraction(10), False, None if sig_shift is None else SCI_FRAC, True)
    # high region
    h1 = SCI_HI if X1 is None else max(X1, SCI_HI)
    if X2 is None or h1 <= X2:
        if nzs is None:
            add(h1, X2, full)
    # low region
    l2 = SCI_LO if X2 is None else min(X2, SCI_LO)
    if X1 is None or X1 <= l2:
        if sig_shift is None and nzs is not None:
            # below 10**-nzs every value qualifies; above, a digit past position X + nzs
            top = min(l2, -nzs - 1)
            if X1 is None or X1 <= top:
                add(X1, top, fixed_point(Fraction(1), True, Fraction(10), False, None, True))
            for X in range(max(-nzs, SCI_LO - 400 if X1 is None else X1), l2 + 1):
                add(X, X, mant(X, Fraction(1), True, Fraction(10), False))
        elif sig_shift is None:
            add(X1, l2, fixed_point(Fraction(1), True, Fraction(10), False, None, True))
        else:
            start = -sig_shift if X1 is None else max(X1, -sig_shift)
            if l2 - start > 400:
                raise NumberError("multipleOf is too small")
            for X in range(start, l2 + 1):
                add(X, X, fixed_point(Fraction(1), True, Fraction(10), False, X + sig_shift, True))
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


# ----------------------------------------------------------------------------------
# public entry
# ----------------------------------------------------------------------------------

JSON_NUMBER = '"-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [+-]? [0-9]+)?'
JSON_INT = '"-"? ("0" | [1-9] [0-9]*)'
# ``integer`` value meaning "integer texts only" (draft-04: 1.0 is not an integer)
INTEGER_TEXT = "text"


def _as_fraction(v) -> Fraction:
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise NumberError(f"bound {v!r} is not a finite number")
    return Fraction(v)


def _float_bound(v, lower: bool, excl: bool) -> Tuple[Optional[Fraction], bool]:
    """The float-text bound for a schema bound: (decimal, exclusive)."""
    if isinstance(v, float):
        return Fraction(repr(v)), excl
    try:
        f = float(v)
    except OverflowError:
        return (MAX_FLOAT * (1 if v > 0 else -1)), False
    if Fraction(f) == v:
        return Fraction(repr(f)), excl
    # not representable: the nearest float on the inside, inclusive
    if lower:
        if Fraction(f) < v:
            f = math.nextafter(f, math.inf)
    else:
        if Fraction(f) > v:
            f = math.nextafter(f, -math.inf)
    return Fraction(repr(f)), False


def _decimal_parts(k: Fraction) -> Tuple[int, int]:
    """k = p / 10**s with p integer (k a terminating decimal)."""
    s = 0
    while k.denominator != 1:
        k *= 10
        s += 1
        if s > 400:
            raise NumberError("multipleOf is not a terminating decimal")
    return int(k), s


def number_expr(lo=None, lo_excl=False, hi=None, hi_excl=False, integer=False,
                multiple=None, add_rule=None, prefix="num", nonint=False, exclude=(),
                notmult: Optional[int] = None) -> Optional[str]:
    """See :func:`_number_expr`; results that need no helper rules are cached.
    ``nonint``: non-integral values only; ``notmult`` s: values that are not
    multiples of 10**-s only."""
    if nonint and notmult is None:
        notmult = 0
    key = number_cache_key(lo, lo_excl, hi, hi_excl, integer, multiple, notmult, exclude)
    hit = _NUMBER_CACHE.get(key)
    if hit is not None:
        return hit[0]
    preset = PRESET_NUMBERS.get(key)  # (the numeric formats' ranges, written out)
    if preset is not None and add_rule is not None:
        for name, body, names in preset[1]:
            add_rule(name, body, names)
        return preset[0]
    rules = []
    out = _number_expr(lo, lo_excl, hi, hi_excl, integer, multiple,
                       lambda n, b, names=None: rules.append((n, b, names)), prefix, notmult, exclude)
    if not rules:
        if len(_NUMBER_CACHE) > 4096:
            _NUMBER_CACHE.clear()
        _NUMBER_CACHE[key] = (out,)
    elif add_rule is not None:
        for n, b, names in rules:
            add_rule(n, b, names)
    else:
        raise NumberError("this numeric constraint needs helper rules")
    return out


_NUMBER_CACHE: dict = {}


def number_cache_key(lo, lo_excl, hi, hi_excl, integer, multiple, notmult, exclude) -> tuple:
    return (_tag(lo), bool(lo_excl), _tag(hi), bool(hi_excl), integer or False, _tag(multiple), notmult,
            tuple(_tag(x) for x in exclude))


def _tag(v):
    return None if v is None else (type(v).__name__, v)


def _number_expr(lo=None, lo_excl=False, hi=None, hi_excl=False, integer=False,
                 multiple=None, add_rule=None, prefix="num", nz=None, exclude=()) -> Optional[str]:
    """EBNF for JSON number texts meeting the constraints; None when none does.

    ``lo``/``hi``: int or float or None; ``*_excl``: exclusive bounds; ``integer``:
    integral values only (``1.0`` and ``1e+16`` count); ``multiple``: multipleOf
    (int or float > 0).  Raises :class:`NumberError` for multipleOf combinations it
    cannot express (a range with more than a few thousand multiples together with a
    multipleOf whose decimal digits are not a power of ten, other than bounds at 0).
    """
    if exclude:
        return _excluding(lo, lo_excl, hi, hi_excl, integer, multiple, add_rule, prefix, nz, exclude)
    if integer and nz is not None:
        return None
    if integer and lo is None and hi is None and multiple is None:
        return JSON_INT if integer == INTEGER_TEXT else _any_integer()
    if lo is None and hi is None and multiple is None:
        if not integer and nz is None:
            return JSON_NUMBER
    # integer-text bounds (exact)
    ilo = ihi = None
    if lo is not None:
        f = _as_fraction(lo)
        ilo = math.floor(f) + 1 if lo_excl and f.denominator == 1 else math.ceil(f)
    if hi is not None:
        f = _as_fraction(hi)
        ihi = math.ceil(f) - 1 if hi_excl and f.denominator == 1 else math.floor(f)
    # float-text bounds
    flo, flo_excl = (None, False) if lo is None else _float_bound(lo, True, lo_excl)
    fhi, fhi_excl = (None, False) if hi is None else _float_bound(hi, False, hi_excl)
    p, s = 1, 0
    if multiple is not None:
        k = Fraction(repr(multiple)) if isinstance(multiple, float) else _as_fraction(multiple)
        if k <= 0:
            raise NumberError("multipleOf must be > 0")
        p, s = _decimal_parts(k)
        if integer and s > 0:
            # integral multiples of p/10^s are the multiples of p/gcd(p, 10^s)
            g = math.gcd(p, 10**s)
            p, s = p // g, 0
    if integer and p == 1:
        # float texts of integers must stay finite (1e400 is float infinity)
        if fhi is None or fhi > MAX_FLOAT:
            fhi, fhi_excl = MAX_FLOAT, False
        if flo is None or flo < -MAX_FLOAT:
            flo, flo_excl = -MAX_FLOAT, False
    int_text = integer == INTEGER_TEXT
    if int_text:  # an empty range of float texts: integer texts only
        flo, flo_excl, fhi, fhi_excl = Fraction(1), False, Fraction(-1), False
    sig = 0 if integer else None
    if multiple is not None:
        sig = s if sig is None else min(sig, s)
    if p != 1:
        if nz is not None:
            raise NumberError("multipleOf together with non-integral numbers only")
        return _multiple_expr(ilo, ihi, flo, flo_excl, fhi, fhi_excl, p, s, sig, add_rule, prefix,
                              307 if integer else None, int_text)
    if nz is not None and sig is not None and sig <= nz:
        return None  # multiples of 10**-sig are multiples of 10**-nz
    return _range_expr(ilo, ihi, flo, flo_excl, fhi, fhi_excl, sig, nz, add_rule, prefix)


@lru_cache(maxsize=1)
def _any_integer() -> str:
    sci = '[1-9] ("." [0-9]{1,16})? %s' % exp_expr(SCI_HI, 307)
    dec = '("0" | [1-9] [0-9]{0,16}) "." "0"+'
    return '"-"? ("0" | [1-9] [0-9]* | %s | %s)' % (dec, sci)


def _range_expr(ilo, ihi, flo, flo_excl, fhi, fhi_excl, sig, nz=None, add_rule=None, prefix="num") -> Optional[str]:
    alts = []
    # integer texts (always integral; sig >= 0 always allows them)
    if nz is None and (ilo is None or ihi is None or ilo <= ihi):
        pos = int_range(max(ilo, 0) if ilo is not None else 0, ihi, add_rule, prefix + "-p") if ihi is None or ihi >= 0 else None
        if pos:
            alts.append(pos)
        if ilo is None or ilo < 0:
            hi_neg = -1 if ihi is None else min(ihi, -1)
            neg = int_range(-hi_neg, None if ilo is None else -ilo, add_rule, prefix + "-n") if (ilo is None or hi_neg >= ilo) else None
            if neg:
                alts.append('"-" ' + neg)
            if (ihi is None or ihi >= 0):
                alts.append('"-0"')
    # float texts: zero
    zero_ok = (flo is None or flo < 0 or (flo == 0 and not flo_excl)) and (
        fhi is None or fhi > 0 or (fhi == 0 and not fhi_excl))
    if zero_ok and nz is None:
        alts.append('"-"? "0" "." "0"+')
    # positive
    if fhi is None or fhi > 0:
        a, a_incl = (Fraction(0), False) if flo is None or flo < 0 or (flo == 0) else (flo, not flo_excl)
        b, b_incl = (None, True) if fhi is None else (fhi, not fhi_excl)
        body = _pos_float(a, a_incl, b, b_incl, sig, nz)
        if body:
            alts.append(body)
    if flo is None or flo < 0:
        a, a_incl = (Fraction(0), False) if fhi is None or fhi > 0 or fhi == 0 else (-fhi, not fhi_excl)
        b, b_incl = (None, True) if flo is None else (-flo, not flo_excl)
        body = _pos_float(a, a_incl, b, b_incl, sig, nz)
        if body:
            alts.append('"-" ' + (body if not body.startswith("(") or True else body))
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def _pos_float(a, a_incl, b, b_incl, sig, nz=None) -> Optional[str]:
    """Fixed-point and scientific texts of values v > 0 in the interval."""
    if b is not None and (b < a or (b == a and not (a_incl and b_incl))):
        return None
    alts = []
    # fixed-point texts only in [1e-17, 1e17): json.dumps writes the rest in
    # scientific form (and the digit grammars stay small)
    da, da_incl = (a, a_incl) if a >= DEC_MIN else (DEC_MIN, True)
    db, db_incl = (b, b_incl) if b is not None and b < DEC_MAX else (DEC_MAX, False)
    dec = None
    if da < db or (da == db and da_incl and db_incl):
        dec = fixed_point(da, da_incl, db, db_incl, sig, False, nz)
    if dec:
        alts.append(dec)
    sci = _sci(a, a_incl, b, b_incl, sig, nz)
    if sci:
        alts.append(sci)
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


MAX_ENUMERATED_MULTIPLES = 1000


def _multiple_expr(ilo, ihi, flo, flo_excl, fhi, fhi_excl, p, s, sig, add_rule, prefix, max_exp,
                   int_text=False):
    k = Fraction(p, 10**s)
    # effective bounds over values (the wider of the two text kinds)
    lo_b = flo if flo is not None and not int_text else (None if ilo is None else Fraction(ilo))
    hi_b = fhi if fhi is not None and not int_text else (None if ihi is None else Fraction(ihi))
    if ilo is not None and lo_b is not None and ilo < lo_b:
        lo_b = Fraction(ilo)
    if ihi is not None and hi_b is not None and ihi > hi_b:
        hi_b = Fraction(ihi)

    def in_int(v):
        return v.denominator == 1 and (ilo is None or v >= ilo) and (ihi is None or v <= ihi)

    def in_flt(v):
        return (flo is None or v > flo or (v == flo and not flo_excl)) and (
            fhi is None or v < fhi or (v == fhi and not fhi_excl))

    if lo_b is not None and hi_b is not None:
        n1, n2 = math.ceil(lo_b / k), math.floor(hi_b / k)
        if n2 - n1 + 1 <= MAX_ENUMERATED_MULTIPLES:
            alts = []
            for n in range(n1, n2 + 1):
                v = n * k
                sp = value_spellings(v, int_text=in_int(v), float_text=in_flt(v))
                if sp:
                    alts.append(sp)
            if not alts:
                return None
            return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
    # otherwise every positive (negative) multiple must be in or out of range
    def all_or_none(vals_sign):
        first = k * vals_sign
        okf = in_int(first) or in_flt(first)
        unbounded = (hi_b is None) if vals_sign > 0 else (lo_b is None)
        if okf and unbounded:
            return True
        if not okf and not (in_int(first * 2) or in_flt(first * 2)) and (
                (vals_sign > 0 and hi_b is not None and hi_b < k) or (vals_sign < 0 and lo_b is not None and lo_b > -k)):
            return False
        raise NumberError("multipleOf %s with a bound that is not at 0 needs a range of at most %d multiples"
                          % (k, MAX_ENUMERATED_MULTIPLES))

    pos_ok, neg_ok = all_or_none(1), all_or_none(-1)
    zero_ok = in_int(Fraction(0)) or in_flt(Fraction(0))
    if p * (s + 2) > 4000:
        raise NumberError(f"multipleOf {k} needs too large an automaton")
    alts = []
    if pos_ok or neg_ok:
        start = mod_rules(p, s, prefix, add_rule, int_text)
        if not int_text:
            if p > 128:
                raise NumberError(f"multipleOf {k} needs too large an automaton for exponent forms")
            sci = mod_sci_rules(p, s, prefix + "-e", add_rule, max_exp)
            start = "(" + start + " | " + sci + ")"
        if pos_ok:
            alts.append(start)
        if neg_ok:
            alts.append('"-" ' + start)
    if zero_ok:
        alts.append('"-"? "0"' if int_text else '"-"? "0" ("." "0"+)?')
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def mod_rules(p: int, s: int, prefix: str, add_rule, int_text: bool = False) -> str:
    """A rule for integer and fixed-point texts of positive multiples of p/10**s
    (p > 1); scientific texts are not accepted (see the module notes).  ``int_text``:
    integer texts only (draft-04 integers)."""
    pw = [pow(10, j, p) for j in range(s + 1)]
    # states: ("i", r) integer digits (I mod p); ("f", r, j) j fraction digits read
    # (N mod p); ("z", j) "0." then j zeros.  Each: list of (digits, target), final?
    graph = {}

    def step(r, digits=range(10)):
        by_target = {}
        for d in digits:
            by_target.setdefault((10 * r + d) % p, []).append(d)
        return by_target.items()

    for r in range(p):
        edges = [(ds, ("i", t)) for t, ds in step(r)]
        if not int_text:
            edges.append((".", ("f", r, 0)))
        graph[("i", r)] = (edges, (r * pw[s]) % p == 0)
    for j in range(s + 1):
        for r in range(p):
            if j < s:
                edges = [(ds, ("f", t, j + 1)) for t, ds in step(r)]
                graph[("f", r, j)] = (edges, j > 0 and (r * pw[s - j]) % p == 0)
            else:
                graph[("f", r, j)] = ([([0], ("g", r))], r == 0 and j > 0)
                graph[("g", r)] = ([([0], ("g", r))], r == 0)
        if j < s:
            edges = [([0], ("z", j + 1))] + [([d for d in ds if d], ("f", t, j + 1)) for t, ds in step(0)]
            graph[("z", j)] = ([(ds, t) for ds, t in edges if ds], False)
        else:
            graph[("z", j)] = ([], False)
    # live states: can reach a final one
    live = {k for k, (_, fin) in graph.items() if fin}
    changed = True
    while changed:
        changed = False
        for k, (edges, _) in graph.items():
            if k not in live and any(t in live for _, t in edges):
                live.add(k)
                changed = True

    def name(k):
        return prefix + "-" + "".join(str(x) for x in k)

    for k in graph:  # the graph's order, not the set's: the same EBNF in every process
        if k not in live:
            continue
        edges, fin = graph[k]
        alts = []
        for ds, t in edges:
            if t not in live:
                continue
            head = '"."' if ds == "." else ('"%d"' % ds[0] if len(ds) == 1 else "[%s]" % _digit_ranges(ds))
            alts.append(head + " " + name(t))
        if fin:
            alts.append('""')
        add_rule(name(k), " | ".join(alts))
    start = []
    if ("z", 0) in live:
        start.append('"0." ' + name(("z", 0)))
    first = {}
    for d in range(1, 10):
        first.setdefault(d % p, []).append(d)
    for t, ds in first.items():
        if ("i", t) in live:
            start.append("[%s] %s" % (_digit_ranges(ds), name(("i", t))))
    add_rule(f"{prefix}-n", " | ".join(start))
    return f"{prefix}-n"


def mod_sci_rules(p: int, s: int, prefix: str, add_rule, max_exp: Optional[int] = None) -> str:
    """A rule for normalised scientific texts ``d.F e X`` of positive multiples of
    p/10**s: value*10**s = D*10**z with D the digits ``dF`` and z = X - len(F) + s."""
    m = p
    t = 0
    for f in (2, 5):
        c = 0
        while m % f == 0:
            m //= f
            c += 1
        t = max(t, c)

    def name(j, r):
        return f"{prefix}{j}-{r}"

    maxj = 17
    # reachable states
    states = set()
    todo = [(0, d % p) for d in range(1, 10)]
    while todo:
        st = todo.pop()
        if st in states:
            continue
        states.add(st)
        j, r = st
        if j < maxj:
            for c in range(10):
                todo.append((j + 1, (10 * r + c) % p))
    live = set()
    for j, r in sorted(states, reverse=True):
        alts = []
        if j < maxj:
            by_target = {}
            for c in range(10):
                if (j + 1, (10 * r + c) % p) in live:
                    by_target.setdefault((10 * r + c) % p, []).append(c)
            dot = '"." ' if j == 0 else ""
            for tr, ds in by_target.items():
                head = '"%d"' % ds[0] if len(ds) == 1 else "[%s]" % _digit_ranges(ds)
                alts.append(dot + head + " " + name(j + 1, tr))
        for z in range(t):
            if r % (p // math.gcd(p, 10**z)) == 0 and (max_exp is None or j + z - s <= max_exp):
                alts.append(exp_expr(j + z - s, j + z - s))
        if r % m == 0 and (max_exp is None or j + t - s <= max_exp):
            alts.append(exp_expr(j + t - s, max_exp))
        if alts:
            live.add((j, r))
            add_rule(name(j, r), " | ".join(alts))
    first = {}
    for d in range(1, 10):
        first.setdefault(d % p, []).append(d)
    start = ["[%s] %s" % (_digit_ranges(ds), name(0, r)) for r, ds in first.items() if (0, r) in live]
    add_rule(prefix, " | ".join(start))
    return prefix


def _excluding(lo, lo_excl, hi, hi_excl, integer, multiple, add_rule, prefix, nz, exclude):
    """The range minus some values: split into open sub-ranges around them."""
    def key(v):
        return Fraction(repr(v)) if isinstance(v, float) else Fraction(v)

    flo = None if lo is None else key(lo)
    fhi = None if hi is None else key(hi)
    pts = sorted({key(v) for v in exclude if (flo is None or key(v) >= flo) and (fhi is None or key(v) <= fhi)})
    if any(isinstance(v, float) and Fraction(v) != Fraction(repr(v)) for v in exclude):
        raise NumberError("excluding a float that is not exactly its decimal")
    if any(abs(p) >= 2**53 and p.denominator == 1 for p in pts):
        raise NumberError("excluding a number beyond 2**53")
    bounds = [(lo, lo_excl)] + [(_num(p), True) for p in pts]
    uppers = [(_num(p), True) for p in pts] + [(hi, hi_excl)]
    alts = []
    for i, ((a, ae), (b, be)) in enumerate(zip(bounds, uppers)):
        e = number_expr(a, ae, b, be, integer, multiple, add_rule, f"{prefix}-x{i}", notmult=nz)
        if e:
            alts.append(e)
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def _num(p: Fraction):
    if p.denominator == 1:
        return int(p)
    f = float(p)
    if Fraction(repr(f)) != p:
        raise NumberError("excluded value is not a short decimal")
    return f


def value_spellings(v: Fraction, int_text: bool = True, float_text: bool = True) -> Optional[str]:
    """EBNF of the number texts whose value is exactly v (integer text if integral and
    ``int_text``; fixed-point and normalised scientific texts if ``float_text``)."""
    alts = []
    neg = v < 0
    m = -v if neg else v
    sign = '"-" ' if neg else ""
    if int_text and m.denominator == 1:
        alts.append(sign + '"%d"' % m)
        if m == 0:
            alts.append('"-0"')
    if float_text:
        if m == 0:
            alts.append('"-"? "0." "0"+')
        else:
            ip = math.floor(m)
            fd = _frac_digits(m)
            alts.append(sign + '"%d.%s" "0"*' % (ip, fd) if fd else sign + '"%d." "0"+' % ip)
            e = _floor_log10(m)
            mant = m / Fraction(10) ** e
            md = _frac_digits(mant)
            mtxt = '"%d' % math.floor(mant) + ('.%s" "0"*' % md if md else '" ("." "0"+)?')
            alts.append(sign + mtxt + " " + exp_expr(e, e))
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


@lru_cache(maxsize=1024)
def _exp_exact(e: int) -> str:
    return exp_expr(e, e)  # type: ignore[return-value]


def _digits(text: str) -> Tuple[bool, str, int]:
    """(negative, D, E) of a decimal text whose value is int(D) * 10**E, D without
    leading or trailing zeros ("0" for zero)."""
    sign, ds, exp = Decimal(text).as_tuple()
    D = "".join(map(str, ds)).lstrip("0")
    if not D:
        return False, "0", 0
    t = len(D) - len(D.rstrip("0"))
    return bool(sign), D[:len(D) - t], int(exp) + t


def _spell(neg: bool, D: str, E: int, int_text: bool, float_text: bool) -> Optional[str]:
    """value_spellings of int(D) * 10**E (negated), from its digits: enums of many
    numbers spell each (Fraction arithmetic made that 0.5 ms a number)."""
    alts = []
    sign = '"-" ' if neg else ""
    zero = D == "0"
    if int_text and E >= 0:
        alts.append(sign + '"%s"' % (D + "0" * E))
        if zero:
            alts.append('"-0"')
    if float_text:
        if zero:
            alts.append('"-"? "0." "0"+')
        else:
            n = len(D)
            if E >= 0:
                ip, fd = D + "0" * E, ""
            elif n + E > 0:
                ip, fd = D[:n + E], D[n + E:]
            else:
                ip, fd = "0", "0" * (-(n + E)) + D
            alts.append(sign + ('"%s.%s" "0"*' % (ip, fd) if fd else '"%s." "0"+' % ip))
            md = D[1:]
            mtxt = '"%s' % D[0] + ('.%s" "0"*' % md if md else '" ("." "0"+)?')
            alts.append(sign + mtxt + " " + _exp_exact(n - 1 + E))
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


def value_spellings_of(x) -> Optional[str]:
    """Texts equal (as jsonschema compares) to the schema number ``x``."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return _spellings_fast(x)
    return _spellings_slow(x)


def _spellings_fast(x) -> Optional[str]:
    """value_spellings_of for Python numbers, from their decimal digits."""
    alts = []
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return None
        if x.is_integer():
            alts.append(_spell(*_digits(str(int(x))), True, False))
        alts.append(_spell(*_digits(repr(x)), False, True))
    else:
        alts.append(_spell(*_digits(str(x)), True, False))
        try:
            f = float(x)
            if f == x:  # (exact: Python compares int and float exactly)
                alts.append(_spell(*_digits(repr(f)), False, True))
        except OverflowError:
            pass
    out = [a for a in alts if a]
    return out[0] if len(out) == 1 else "(" + " | ".join(out) + ")"


def _spellings_slow(x) -> Optional[str]:
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return None
        exact = Fraction(x)
        dec = Fraction(repr(x))
        alts = []
        if exact.denominator == 1:
            alts.append(value_spellings(exact, True, False))
        alts.append(value_spellings(dec, False, True))
        alts = [a for a in alts if a]
        return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
    v = Fraction(x)
    alts = [value_spellings(v, True, False)]
    try:
        f = float(x)
        if Fraction(f) == v:
            alts.append(value_spellings(Fraction(repr(f)), False, True))
    except OverflowError:
        pass
    alts = [a for a in alts if a]
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"


# ----------------------------------------------------------------------------------
# remainder automata (multipleOf with p > 1)
# ----------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------
# formats
# ----------------------------------------------------------------------------------

_YEAR = r"(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
_LEAP = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|([2468][048]|[13579][26]|0[48])00)"
_MD = r"((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
DATE = rf"({_YEAR}-{_MD}|{_LEAP}-02-29)"
# rfc3339_validator on instance.upper(): 'T', 'Z' in either case; '$' allows one
# trailing newline (Python's re).
_TIME_BODY = r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
DATE_TIME = rf"^{DATE}[Tt]{_TIME_BODY}\n?$"
TIME = rf"^{_TIME_BODY}\n?$"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9][0-9]|[0-9])"
IPV4 = rf"{_OCTET}(\.{_OCTET}){{3}}"
_H = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"({_H}:{_H}|{IPV4})"
IPV6 = (
    rf"(({_H}:){{6}}{_LS32}"
    rf"|::({_H}:){{5}}{_LS32}"
    rf"|({_H})?::({_H}:){{4}}{_LS32}"
    rf"|(({_H}:){{0,1}}{_H})?::({_H}:){{3}}{_LS32}"
    rf"|(({_H}:){{0,2}}{_H})?::({_H}:){{2}}{_LS32}"
    rf"|(({_H}:){{0,3}}{_H})?::{_H}:{_LS32}"
    rf"|(({_H}:){{0,4}}{_H})?::{_LS32}"
    rf"|(({_H}:){{0,5}}{_H})?::{_H}"
    rf"|(({_H}:){{0,6}}{_H})?::)"
)
_HEX = "[0-9a-fA-F]"
UUID = rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
JSON_POINTER = r"(/([^~]|~[01])*)*"
RELATIVE_JSON_POINTER = r"(0|[1-9][0-9]*)(#|(/([^~]|~[01])*)*)"
# RFC 3339 appendix A (ISO 8601 durations), as the 2020-12 spec defines "duration".
_DUR_TIME = r"T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S)"
_DUR_DATE = rf"([0-9]+D|[0-9]+M([0-9]+D)?|[0-9]+Y([0-9]+M([0-9]+D)?)?)({_DUR_TIME})?"
DURATION = rf"P({_DUR_DATE}|{_DUR_TIME}|[0-9]+W)"
# RFC 3986
_UNRES = r"[A-Za-z0-9\-._~]"
_PCT = r"%[0-9A-Fa-f]{2}"
_SUBD = r"[!$&'()*+,;=]"
_PCHAR = rf"({_UNRES}|{_PCT}|{_SUBD}|[:@])"
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_IPVFUT = rf"[vV][0-9A-Fa-f]+\.({_UNRES}|{_SUBD}|:)+"
_HOST = rf"(\[({IPV6}|{_IPVFUT})\]|{IPV4}|({_UNRES}|{_PCT}|{_SUBD})*)"
_AUTH = rf"(({_UNRES}|{_PCT}|{_SUBD}|:)*@)?{_HOST}(:[0-9]*)?"
_PATH_ABEMPTY = rf"(/{_PCHAR}*)*"
_PATH_ABS = rf"/({_PCHAR}+(/{_PCHAR}*)*)?"
_PATH_ROOTLESS = rf"{_PCHAR}+(/{_PCHAR}*)*"
_PATH_NOSCHEME = rf"({_UNRES}|{_PCT}|{_SUBD}|@)+(/{_PCHAR}*)*"
_QF = rf"({_PCHAR}|[/?])*"
_HIER = rf"(//{_AUTH}{_PATH_ABEMPTY}|{_PATH_ABS}|{_PATH_ROOTLESS}|)"
URI = rf"{_SCHEME}:{_HIER}(\?{_QF})?(#{_QF})?"
_REL = rf"(//{_AUTH}{_PATH_ABEMPTY}|{_PATH_ABS}|{_PATH_NOSCHEME}|)"
URI_REFERENCE = rf"({URI}|{_REL}(\?{_QF})?(#{_QF})?)"
# RFC 6570 (level 4)
_VARCHAR = r"([A-Za-z0-9_]|%[0-9A-Fa-f]{2})"
_VARNAME = rf"{_VARCHAR}(\.?{_VARCHAR})*"
_VARSPEC = rf"{_VARNAME}(:[1-9][0-9]{{0,3}}|\*)?"
_EXPR = rf"\{{[+#./;?&=,!@|]?{_VARSPEC}(,{_VARSPEC})*\}}"
_LITCH = r"([\x21\x23-\x24\x26\x28-\x3B\x3D\x3F-\x5B\x5D\x5F\x61-\x7A\x7E\u00a0-\ud7ff\ue000-\ufffd]|%[0-9A-Fa-f]{2})"
URI_TEMPLATE = rf"({_LITCH}|{_EXPR})*"
# RFC 1123 host names (labels of letters, digits and inner hyphens, 1-63 each; an
# optional final dot).
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
HOSTNAME = rf"{_LABEL}(\.{_LABEL})*\.?"

FORMAT_PATTERNS = {
    "date": f"^{DATE}$",
    "date-time": DATE_TIME,
    "time": TIME,
    "email": "@",
    "idn-email": "@",
    "ipv4": f"^{IPV4}$",
    "ipv6": f"^{IPV6}$",
    "uuid": f"^{UUID}$",
    "json-pointer": f"^{JSON_POINTER}$",
    "relative-json-pointer": f"^{RELATIVE_JSON_POINTER}$",
    "duration": f"^{DURATION}$",
    "uri": f"^{URI}$",
    "uri-reference": f"^{URI_REFERENCE}$",
    "uri-template": f"^{URI_TEMPLATE}$",
    "hostname": f"^{HOSTNAME}$",
}
# (hostname's 253-character total is not enforced: with the label structure it needs
# an automaton of tens of thousands of states; labels are limited to 63.)
FORMAT_MAX_LENGTH: dict = {}

# Formats that cannot be expressed: rejected, or dropped with a warning (lenient).
UNSUPPORTED_FORMATS = {"regex", "idn-hostname", "iri", "iri-reference"}

# Non-standard numeric formats: (min, max).
NUMERIC_FORMATS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
