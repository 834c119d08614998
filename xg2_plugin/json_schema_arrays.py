"""Arrays, for the converter (json_schema.py): ``prefixItems``/``items`` and the
item counts, ``contains`` with ``minContains``/``maxContains`` (counted positions),
``uniqueItems`` over a finite item space, and ``unevaluatedItems``."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from . import json_schema_negation as NEG
from . import json_schema_objects as OBJ
from .json_schema_common import (
    _ARR_STRICT_KW, _NOEVAL, _alt, _count_bounds, _nonneg_int, _ptr_join, _rep, _seq, _strict_applies,
)

if TYPE_CHECKING:
    from .json_schema import _Converter


def array(conv: _Converter, parts, d: int, hint: str) -> Optional[str]:
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
            conv.bad("prefixItems", path, "must be an array")
        per.append(([(sub, _ptr_join(ipath, j)) for j, sub in enumerate(pi)], rest_s))
        if "unevaluatedItems" in s:
            unevals.append((s["unevaluatedItems"], _ptr_join(path, "unevaluatedItems"), frozenset()))
        min_i, max_i = _count_bounds(conv, s, "minItems", "maxItems", path, min_i, max_i)
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
        unev = OBJ.uneval_for(conv, parts, evaluated, "unevaluatedItems")
        conj.extend(unev)
        if not evaluated and not unev and not unevals and conv.strict and constrained:
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
        conv.fail("contains", contains[1][3], "several contains keywords cannot be combined")
        contains = contains[:1]
    if unique and (max_i is None or max_i > 1):
        return array_unique(conv, prefix, rest, min_i, max_i, contains, parts, d, hint)
    if contains:
        return array_contains(conv, prefix, rest, min_i, max_i, contains[0], d, hint, position, M)
    pexprs = []
    for j, conj in enumerate(prefix):
        pexprs.append(conv.value(conj, d + 1, f"{hint}-{j}"))
    rexpr = None if rest is None else conv.value(rest, d + 1, f"{hint}-item")
    # (written twice, first item and the rest: a long one once, as a rule)
    return array_seq(conv, pexprs, conv.hoist(rexpr, f"{hint}-item"), min_i, max_i, d)


def array_seq(conv: _Converter, pexprs, rexpr, min_i, max_i, d) -> Optional[str]:
    lay = conv.layout
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


def array_contains(conv: _Converter, prefix, rest, min_i, max_i, contains, d, hint, position=None, M=0) -> Optional[str]:
    """Items split into those matching ``contains`` and those not; states
    (position, matches so far), both capped.  Matching items count as
    evaluated for unevaluatedItems (``position(j, extra)`` rebuilds them)."""
    (cs, cpath, _), lo_c, hi_c, path, ci = contains
    lo_c = _nonneg_int(conv, lo_c, "minContains", path)
    hi_c = None if hi_c is None else _nonneg_int(conv, hi_c, "maxContains", path)
    lay = conv.layout
    neg = NEG.negate(conv, cs, cpath)
    m = len(prefix)

    def split(conj, label, j):
        yconj = conj
        if position is not None:
            yconj = position(j if j < M else None, (ci,))
            if yconj is None:
                yconj = [(False, cpath, frozenset())]
        yes = conv.value(yconj + [(cs, cpath, frozenset())], d + 1, f"{hint}-{label}-c")
        no = None
        if conj is not None:
            no = _alt([conv.value(conj + [(a, cpath, _NOEVAL)], d + 1, f"{hint}-{label}-n") for a in neg])
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
        conv.fail("contains", path, "the array bounds are too large to count contained items")
        return array_seq(conv, [conv.value(c, d + 1, hint) for c in prefix],
                              None if rest is None else conv.value(rest, d + 1, hint), min_i, max_i, d)

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

    body = conv.machine(f"{hint}-c", moves((0, 0), ""), lambda q: moves(q, lay.sep(d)), final)
    out = []
    if body is not None:
        out.append(f'"[" {lay.first(d)} {body} {lay.last(d)} "]"')
    if final((0, 0)):
        out.append(lay.empty(d, "[", "]"))
    return _alt(out)


def array_unique(conv: _Converter, prefix, rest, min_i, max_i, contains, parts, d, hint) -> Optional[str]:
    """uniqueItems over a finite item space: a subset automaton over the values."""
    path = next((p for s, p, _ in parts if s.get("uniqueItems") is True), "")
    if prefix:
        conv.fail("uniqueItems", path, "uniqueItems with prefixItems is not supported")
        return array_seq(conv, [conv.value(c, d + 1, hint) for c in prefix],
                              None if rest is None else conv.value(rest, d + 1, hint), min_i, max_i, d)
    if contains:
        conv.fail("uniqueItems", path, "uniqueItems with contains is not supported")
    if rest is None:
        return array_seq(conv, [], None, min_i, max_i, d)
    vals = conv.finite_values(rest)
    if vals is None or len(vals) > 10:
        conv.fail("uniqueItems", path, "the items are not a small finite set of values")
        return array_seq(conv, [], conv.value(rest, d + 1, hint), min_i, max_i, d)
    lay = conv.layout
    lits = [conv.literal(v, d + 1) for v in vals]
    k = len(vals)
    cap = k if max_i is None else min(k, max_i)
    if min_i > cap:
        return None

    def moves(mask, sep):
        if bin(mask).count("1") >= cap:
            return []
        return [(_seq(sep, lits[i]), mask | 1 << i) for i in range(k) if not mask >> i & 1]

    body = conv.machine(f"{hint}-u", moves(0, ""), lambda q: moves(q, lay.sep(d)),
                        lambda q: bin(q).count("1") >= min_i)
    out = []
    if body is not None:
        out.append(f'"[" {lay.first(d)} {body} {lay.last(d)} "]"')
    if min_i == 0:
        out.append(lay.empty(d, "[", "]"))
    return _alt(out)
