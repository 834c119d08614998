"""Objects, for the converter (json_schema.py): declared properties in the schema's
order (or any order), extra properties under ``additionalProperties``,
``patternProperties`` and ``propertyNames`` (their key automata kept apart from the
declared names, escapes included), ``unevaluatedProperties``, counts of
properties, and the dependency keywords (as a case analysis)."""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from . import json_schema_check as CHK
from . import json_schema_dfa as D
from . import json_schema_formats as F
from . import json_schema_regex as R
from .json_schema_common import (
    ANNOTATIONS, KNOWN, _ARR_KW, _BARE_NAME, _MAX_SUBSET_PROPS, _NAMED_CHAIN_MIN, _NUM_KW, _OBJ_KW,
    _OBJ_STRICT_KW, _PATTERN_KEYS_MAX_STATES, _SHARED_SET_MAX_COPIES, _SHARED_SET_MIN_CHARS,
    _SHARED_VALUE_CHARS, _TYPE_MAP, _alt, _child, _count_bounds, _ptr_join, _rep, _rule_refs, _seq,
    _strict_applies, _under,
)

if TYPE_CHECKING:
    from .json_schema import _Converter


def obj(conv: _Converter, parts, d: int, hint: str) -> Optional[str]:
    # case analysis for dependencies
    for idx, (s, path, skip) in enumerate(parts):
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            if kw in s and kw not in skip and s[kw]:
                return obj_dependencies(conv, parts, idx, kw, d, hint)
    lay = conv.layout
    constrained = _strict_applies(parts, _OBJ_STRICT_KW, "object", "properties")
    props: Dict[str, list] = {}
    order: List[str] = []
    required = set()
    min_p, max_p = 0, None
    name_parts: list = []
    explicit_extra = False
    for s, path, skip in parts:
        pr = s.get("properties") or {}
        if not isinstance(pr, dict):
            conv.bad("properties", path, "must be an object")
        for k in pr:
            if k not in props:
                props[k] = []
                order.append(k)
        req = s.get("required") or []
        if not isinstance(req, list):
            conv.bad("required", path, "must be an array")
        required |= set(req)
        min_p, max_p = _count_bounds(conv, s, "minProperties", "maxProperties", path, min_p, max_p)
        if "propertyNames" in s:
            name_parts.append((s["propertyNames"], _ptr_join(path, "propertyNames"), frozenset()))
        if any(k in s for k in ("additionalProperties", "unevaluatedProperties", "patternProperties")):
            explicit_extra = True
    if max_p is not None and min_p > max_p:
        return None  # no object has that many members and that few (the counts below assume lo <= hi)
    for s, path, skip in parts:
        for k in s.get("required") or []:
            if k not in props:
                props[k] = []
                order.append(k)
    # per-key constraints from every part
    for k in order:
        evaluated = set()
        for i, (s, path, skip) in enumerate(parts):
            cons, ev = key_constraint(conv, s, path, k)
            props[k].extend(cons)
            if ev:
                evaluated.add(i)
        props[k].extend(uneval_for(conv, parts, evaluated, "unevaluatedProperties"))
        # strict mode: a name listed in "required" counts as declared
    # extra keys (not declared): per part patterns / additional
    cases = extra_cases(conv, parts, order, name_parts, constrained, explicit_extra, d, hint)
    # property names must satisfy propertyNames
    for k in list(order):
        for sub, p, _ in name_parts:
            if not CHK.check(conv, k, sub, p):
                props[k] = [(False, p, frozenset())]
    # values
    values = []
    for k in order:
        expr = conv.value(props[k], d + 1, hint=f"{hint}-{k}")
        if expr is None:
            if k in required:
                return None
            continue
        values.append((k, expr))
    # a long value is a rule of its own: one per distinct text, so that
    # properties of the same schema share one automaton; so is a value text
    # that the properties repeat past _SHARED_VALUE_CHARS in all (hundreds of
    # integers: the core then decides whether to copy it into each)
    # (a text over 300 characters is a rule anyway: fewer values than this
    # cannot repeat one past the limit)
    volume = Counter(expr for _, expr in values) if len(values) * 300 >= _SHARED_VALUE_CHARS else None
    items = []  # (name, member expr, required)
    for k, expr in values:
        shared = volume is not None and len(expr) * volume[expr] >= _SHARED_VALUE_CHARS
        limit = 0 if shared and not _BARE_NAME.fullmatch(expr) else 300
        expr = conv.hoist(expr, f"{hint}-{k}-v", limit)
        member = conv.hoist(f"{R.string_literal_expr(k)} {lay.colon(d)} {expr}", f"{hint}-{k}-m", 300)
        if len(values) > _NAMED_CHAIN_MIN:
            # its rule names, from texts that repeat (cached), for the rules
            # its chain is cut into (a key literal names no rule)
            bare = _BARE_NAME.fullmatch(member)  # type: ignore[arg-type]
            refs: Any = (member,) if bare else _rule_refs(lay.colon(d)) + _rule_refs(expr)
            conv.member_names[member] = refs  # type: ignore[index]
        items.append((k, member, k in required))
    extras = []
    names: Dict[str, None] = {}  # the rule names the extras use, known without reading them
    trie = False  # some extra key is a trie of the declared names (an automaton however short its text)
    for key_expr, vconj, key_names, key_trie in cases:
        if vconj is None:  # a key machine (pattern_keys): the values are inside it
            trie = True
            extras.append(key_expr)
            names.update(dict.fromkeys(key_names))
            continue
        vexpr = conv.value(vconj, d + 1, hint=f"{hint}-extra")
        if vexpr is not None:
            trie = trie or key_trie
            extras.append(f"{key_expr} {lay.colon(d)} {vexpr}")
            for part in (key_names if key_names is not None else _rule_refs(key_expr),
                         _rule_refs(lay.colon(d)), _rule_refs(vexpr)):
                names.update(dict.fromkeys(part))
    extra = _alt(extras)
    if extra is not None and (len(extra) > 120 or trie):
        rn = conv.new_name(f"{hint}-extra")
        conv.add_rule(rn, extra, tuple(names))
        extra = rn
    # names known only from "required" (no "properties" anywhere) have no order to keep
    unordered = len(items) > 1 and not any(s.get("properties") for s, _, _ in parts)
    if unordered and len(items) <= _MAX_SUBSET_PROPS:
        return obj_any_order(conv, items, extra, min_p, max_p, d, hint)
    if conv.any_order and (len(items) > 1 or (items and extra is not None)):
        if len(items) <= _MAX_SUBSET_PROPS:
            return obj_any_order(conv, items, extra, min_p, max_p, d, hint)
        conv.fail("any_order", parts[0][1], f"more than {_MAX_SUBSET_PROPS} properties cannot be ordered freely")
    return obj_ordered(conv, items, extra, min_p, max_p, d, hint, parts[0][1])


def uneval_for(conv: _Converter, parts, evaluated: set, kw: str) -> list:
    """The ``kw`` (unevaluatedProperties/Items) schemas that apply to a key or
    position that the parts with indexes in ``evaluated`` evaluate: those of parts
    P none of whose in-place descendants (P included) evaluates it."""
    out: list = []
    for i, (s, path, skip) in enumerate(parts):
        if kw not in s or ("noeval",) in skip:
            continue
        seen = False
        for j, (q, qpath, qskip) in enumerate(parts):
            if ("noeval",) in qskip:
                continue
            if j == i or _under(qskip, s):
                if j in evaluated or (j != i and kw in q):
                    seen = True
                    break
        if not seen:
            out.append((s[kw], _ptr_join(path, kw), frozenset()))
    return out


def key_constraint(conv: _Converter, s, path, k) -> Tuple[list, bool]:
    """(constraints of part s on property k, whether s evaluates k)."""
    pr = s.get("properties") or {}
    out: list = []
    matched = False
    if k in pr:
        out.append((pr[k], _ptr_join(path, "properties", k), frozenset()))
        matched = True
    for pat, sub in (s.get("patternProperties") or {}).items():
        if conv.dfa_for(("pat", pat), _ptr_join(path, "patternProperties", pat)).accepts(k):
            out.append((sub, _ptr_join(path, "patternProperties", pat), frozenset()))
            matched = True
    if not matched and "additionalProperties" in s:
        out.append((s["additionalProperties"], _ptr_join(path, "additionalProperties"), frozenset()))
        matched = True
    return out, matched


def extra_cases(conv: _Converter, parts, declared, name_parts, constrained, explicit_extra, d, hint) -> list:
    """[(key_expr, value_conj, the key_expr's rule names or None: unknown,
    whether key_expr is the trie of the declared names)] for keys that are
    not declared; or one (member_expr, None, its rule names, True) where a
    key machine (pattern_keys) holds every case."""
    q = '"\\""'
    pats = []  # (pattern, schema, path, part index)
    for i, (s, path, skip) in enumerate(parts):
        for pat, sub in (s.get("patternProperties") or {}).items():
            pats.append((pat, sub, _ptr_join(path, "patternProperties", pat), i))
            if not isinstance(sub, (dict, bool)):  # (before any key automaton is built)
                conv.bad("schema", pats[-1][2], "a schema must be an object or a boolean")
    # key language restrictions: propertyNames
    names_dfa = None
    for sub, p, _ in name_parts:
        dd = name_dfa(conv, sub, p)
        if dd is not None:
            names_dfa = dd if names_dfa is None else names_dfa.intersect(dd)
    cases: list = []
    n = len(pats)
    if n > 4:
        conv.fail("patternProperties", pats[0][2], "more than 4 patterns cannot be partitioned exactly")
        n = 0
        pats = []
    by_mask: Dict[int, list] = {}  # the cases that remain, for pattern_keys
    for mask in range(1 << n):
        inside = [pats[i] for i in range(n) if mask >> i & 1]
        outside = [pats[i] for i in range(n) if not mask >> i & 1]
        vconj: list = [(sub, p, frozenset()) for _, sub, p, _ in inside]
        parts_with_match = {i for *_, i in inside}
        evaluated = set(parts_with_match)
        for i, (s, path, skip) in enumerate(parts):
            if i not in parts_with_match and "additionalProperties" in s:
                vconj.append((s["additionalProperties"], _ptr_join(path, "additionalProperties"), frozenset()))
                evaluated.add(i)
        unev = uneval_for(conv, parts, evaluated, "unevaluatedProperties")
        vconj.extend(unev)
        if not evaluated and not unev and conv.strict and constrained:
            continue
        if any(x is False for x, _, _ in vconj):
            continue
        by_mask[mask] = vconj
    if len(by_mask) > 1 and names_dfa is None:
        machine = pattern_keys(conv, pats, declared, by_mask, d, hint)
        if machine is not None:
            return machine
    for mask, vconj in by_mask.items():
        inside = [pats[i] for i in range(n) if mask >> i & 1]
        outside = [pats[i] for i in range(n) if not mask >> i & 1]
        # key language: matches inside patterns, none of outside, not declared
        simple = not inside and not outside and names_dfa is None
        if simple:
            key, names = conv.string_except(declared) if declared else (R.JSON_CHAR_LOOSE + "*", ())
            cases.append((f"{q} {key} {q}", vconj, names, bool(declared)))
            continue
        if len(inside) == 1 and not outside and names_dfa is None and not any(
                conv.dfa_for(("pat", inside[0][0]), inside[0][2]).accepts(k) for k in declared):
            ir = conv.pattern_ir(inside[0][0], inside[0][2])
            cases.append((f"{q} {R.emit(ir)} {q}", vconj, None, False))
            continue
        try:
            dfa = names_dfa
            for pat, _, p, _ in inside:
                dd = conv.dfa_for(("pat", pat), p)
                dfa = dd if dfa is None else dfa.intersect(dd)
            for pat, _, p, _ in outside:
                dd = conv.dfa_for(("pat", pat), p).complement()
                dfa = dd if dfa is None else dfa.intersect(dd)
            if declared:
                dd = D.words_dfa(declared).complement()
                dfa = dd if dfa is None else dfa.intersect(dd)
            if dfa is None:
                dfa = D.length_dfa(0, None)
        except D.DFAError as e:
            conv.fail("patternProperties", pats[0][2] if pats else parts[0][1], str(e))
            cases.append((R.JSON_STRING_LOOSE, vconj, None, False))
            continue
        name = dfa.emit_rules(conv.new_name("key"), conv.add_rule)
        if name is not None:
            cases.append((f"{q} {name} {q}", vconj, None, False))
    return cases


def pattern_keys(conv: _Converter, pats, declared, by_mask, d, hint) -> Optional[list]:
    """Keys told apart by the patterns they match in one automaton (the product
    of the patterns' DFAs and the declared names'), each member's value at the
    end of its class's states: every key has a path, so inside a key every
    string over the JSON characters stays alive and the mask takes the
    vocabulary's string slice at once (as alternatives -- a pattern beside the
    complement of it -- every state of the complement walked the whole
    vocabulary: 5 ms a token).  None when the product is too large."""
    q = '"\\""'
    lay = conv.layout
    try:
        dfas = [conv.dfa_for(("pat", pat), p) for pat, _, p, _ in pats]
        if declared:
            dfas.append(D.words_dfa(declared))
        trans, labels = D.labelled_product(dfas)
    except D.DFAError:
        return None
    if len(trans) > _PATTERN_KEYS_MAX_STATES:
        return None
    n = len(pats)
    values: Dict[int, Optional[str]] = {}
    tails: List[Optional[str]] = []
    for lab in labels:
        mask = sum(1 << i for i in range(n) if lab[i])
        if (declared and lab[n]) or mask not in by_mask:
            tails.append(None)
            continue
        if mask not in values:
            values[mask] = conv.value(by_mask[mask], d + 1, hint=f"{hint}-extra")
        vexpr = values[mask]
        tails.append(None if vexpr is None else f"{q} {lay.colon(d)} {vexpr}")
    # the states from which some class with a value is reached
    live = {i for i, t in enumerate(tails) if t is not None}
    rev: Dict[int, List[int]] = {}
    for i, row in enumerate(trans):
        for _, t in row:
            rev.setdefault(t, []).append(i)
    stack = list(live)
    while stack:
        for pre in rev.get(stack.pop(), ()):
            if pre not in live:
                live.add(pre)
                stack.append(pre)
    if 0 not in live:
        return []
    prefix = conv.new_name("key")
    rule = {i: f"{prefix}-s{k}" for k, i in enumerate(sorted(live))}
    used: Dict[str, None] = {}
    sets = shared_sets(conv, prefix, [cs for i in live for cs, t in trans[i] if t in live])
    # a value's tail that several states end in (a pattern's run of states, each
    # of which a key may end at) is a rule of its own, parsed once
    tail_uses: Counter = Counter(t for t in (tails[i] for i in live) if t is not None)
    tail_rules: Dict[str, str] = {}
    for text, n in tail_uses.items():
        if n > 1 and isinstance(text, str):
            tail_rules[text] = name = f"{prefix}-t{len(tail_rules)}"
            conv.add_rule(name, text, tuple(dict.fromkeys(_rule_refs(text))))
    for i in sorted(live):
        alts = [f"{sets.get(cs) or R.encode_set(cs)} {rule[t]}" for cs, t in trans[i] if t in live]
        refs = [x for cs, t in trans[i] if t in live for x in (sets.get(cs), rule[t]) if x]
        tail = tails[i]
        if tail is not None and tail in tail_rules:
            tail = tail_rules[tail]
        if tail is not None:
            alts.append(tail)
            refs.extend(_rule_refs(tail))
        conv.add_rule(rule[i], " | ".join(alts), tuple(dict.fromkeys(refs)))
        used[rule[i]] = None
    return [(f"{q} {rule[0]}", None, tuple(used), True)]


def shared_sets(conv: _Converter, prefix: str, sets: list) -> Dict[Any, str]:
    """Rules for the character sets that many of an automaton's transitions
    spell (a key pattern's 'any other character' in each of its states): the
    core parses each once instead of once per state, and expands it into each
    caller as it would the text, when the copies stay few (the product of uses
    and text bounds the states they add); set -> rule name."""
    uses = Counter(sets)
    out: Dict[Any, str] = {}
    for cs, n in uses.items():
        text = R.encode_set(cs)
        if text is not None and n > 1 and len(text) > _SHARED_SET_MIN_CHARS and n * len(text) <= _SHARED_SET_MAX_COPIES:
            out[cs] = name = f"{prefix}-c{len(out)}"
            conv.add_rule(name, text, ())
    return out


def name_dfa(conv: _Converter, sub, path):
    """A DFA of the strings valid under a propertyNames schema (None: all)."""
    parts = conv.flatten([(sub, path, frozenset())])
    if parts is None:
        return D.DFA([[]], [False])
    dfa = None
    for s, p, skip in parts:
        for k in s:
            if k in ANNOTATIONS or k not in KNOWN:
                continue
            if k in ("$ref", "allOf"):
                continue
            if k == "type":
                ts = set()
                for y in (s[k] if isinstance(s[k], list) else [s[k]]):
                    ts |= _TYPE_MAP.get(y, set())
                if "string" not in ts:
                    return D.DFA([[]], [False])
                continue
            if k in _NUM_KW or k in _OBJ_KW or k in _ARR_KW:
                continue  # do not apply to strings
            dd = None
            if k == "pattern":
                dd = conv.dfa_for(("pat", s[k]), p)
            elif k == "format" and s[k] in F.FORMAT_PATTERNS:
                dd = conv.dfa_for(("fmt", s[k]), p)
            elif k == "format":
                continue
            elif k == "minLength":
                dd = D.length_dfa(s[k], None)
            elif k == "maxLength":
                dd = D.length_dfa(0, s[k])
            elif k in ("enum", "const"):
                vals = [s["const"]] if k == "const" else s["enum"]
                dd = D.words_dfa([v for v in vals if isinstance(v, str)])
            elif k == "$xg:notEnum":
                dd = D.words_dfa([v for v in s[k] if isinstance(v, str)]).complement()
            elif k == "$xg:notPattern":
                dd = conv.dfa_for(("pat", s[k]), p).complement()
            elif k == "$xg:notFormat":
                dd = conv.dfa_for(("fmt", s[k]), p).complement()
            elif k == "$xg:types":
                if "string" not in s[k]:
                    return D.DFA([[]], [False])
                continue
            elif k == "not":
                inner = name_dfa(conv, s[k], _ptr_join(p, k))
                dd = D.DFA([[]], [False]) if inner is None else inner.complement()
            elif k == "anyOf":
                comp = None
                for j, sub in enumerate(s[k]):
                    inner = name_dfa(conv, sub, _ptr_join(p, k, j))
                    if inner is None:
                        comp = None
                        break
                    c = inner.complement()
                    comp = c if comp is None else comp.intersect(c)
                else:
                    dd = comp.complement() if comp is not None else None
                if dd is None:
                    continue
            else:
                conv.fail(k, _ptr_join(p, k), "not supported inside propertyNames")
                continue
            try:
                dfa = dd if dfa is None else dfa.intersect(dd)
            except D.DFAError as e:
                conv.fail("propertyNames", p, str(e))
    return dfa


def obj_ordered(conv: _Converter, items, extra, min_p, max_p, d, hint, path="") -> Optional[str]:
    lay = conv.layout
    n = len(items)
    counting = min_p > 0 or max_p is not None
    nreq = sum(1 for _, _, r in items if r)
    if max_p is not None and nreq > max_p:
        return None
    open_, close = '"{"', '"}"'
    empty_ok = nreq == 0 and min_p == 0
    memo: Dict[Tuple[int, int, bool], Optional[str]] = {}
    cap = min(max(min_p, max_p or 0) + 1, n + 1)  # c (declared present) <= n
    if counting and n * cap > 20000:
        conv.fail("maxProperties" if max_p is not None else "minProperties", path,
                  "too many properties to count")
        counting, min_p, max_p = False, 0, None

    def extras(c: int, first: bool) -> Optional[str]:
        """Extra members once the declared ones are done; c members so far."""
        lo = max(0, min_p - c)
        hi = None if max_p is None else max_p - c
        if hi is not None and hi < 0:
            return None
        if extra is None:
            return '""' if lo == 0 else None
        unit_rest = f"{lay.sep(d)} {extra}"
        if first:
            if lo == 0:
                if hi == 0:
                    return '""'
                more = _rep(unit_rest, 0, None if hi is None else hi - 1)
                return f"({extra} {more})?"
            more = _rep(unit_rest, lo - 1, None if hi is None else hi - 1)
            return f"{extra} {more}"
        return _rep(unit_rest, lo, hi)

    def T(i: int, c: int, first: bool) -> Optional[str]:
        if not counting:
            c = 0
        c = min(c, cap)
        key = (i, c, first)
        if key in memo:
            return memo[key]
        if i == n:
            res = extras(c, first)
            memo[key] = res
            return res
        name, member, req = items[i]
        sep = "" if first else lay.sep(d)
        take_rest = T(i + 1, c + 1, False)
        take = None if take_rest is None or (max_p is not None and c + 1 > max_p) else _seq(sep, member, take_rest)
        if req:
            res = take
        elif take is not None and take_rest == T(i + 1, c, first):
            # same rest either way: write it once (the alternation would
            # copy the whole rest, doubling the automaton per property)
            res = _seq(f"({_seq(sep, member)})?", take_rest)
        else:
            res = _alt([take, T(i + 1, c, first)])
        if res is not None and len(res) > 200 and (i, c, first) != (0, 0, True):
            rn = conv.new_name(f"{hint}-t{i}")
            conv.add_rule(rn, res)
            res = rn
        memo[key] = res
        return res

    def uncounted() -> Optional[str]:
        """Without counts: after(i) -- something is written, members from i
        may follow -- is ``(sep next(i))?`` (no ``?`` while a required one
        remains), and next(i) -- the next member written is one of i.. -- is
        ``member_i after(i+1) | next(i+1)``: the separator is written once per
        position, not once per candidate member, and the body is next(0)."""
        sep = lay.sep(d)
        more = "" if extra is None else _rep(f"{sep} {extra}", 0, None)
        nxt: Optional[str] = None if extra is None else _seq(extra, more)
        # the rule names in nxt, kept beside it in a long chain (so that
        # convert() need not read back the many rules it is cut into)
        track = n > _NAMED_CHAIN_MIN
        if track:
            sep_names = dict.fromkeys(_rule_refs(sep))
            more_names = {} if extra is None else {**dict.fromkeys(_rule_refs(extra)), **sep_names}
            nxt_names = dict(more_names)
        required_ahead = False  # among the members after i
        for i in range(n - 1, -1, -1):
            _, member, req = items[i]
            if nxt is not None and (len(nxt) > 200 or (not req and len(nxt) > 60)):
                # next(i+1) is written twice (in after(i+1) and beside it): once,
                # as a rule; and a long chain is cut into rules (regions of one
                # automaton natively), not written as one growing text
                rn = conv.new_name(f"{hint}-n{i + 1}")
                conv.add_rule(rn, nxt, tuple(nxt_names) if track else None)
                nxt = rn
                if track:
                    nxt_names = {rn: None}
            if i == n - 1:
                after = more or '""'
            else:
                after = _seq(sep, nxt) if required_ahead else f"({sep} {nxt})?"
            take = _seq(member, after)
            if track:
                after_names = more_names if i == n - 1 else {**sep_names, **nxt_names}
                names = conv.member_names.get(member)
                take_names = {**dict.fromkeys(_rule_refs(member) if names is None else names), **after_names}
                nxt_names = take_names if req else {**take_names, **nxt_names}
            nxt = take if req else _alt([take, nxt])
            required_ahead = required_ahead or req
        # (with every member optional the empty object is the caller's own
        # alternative: the body is at least one member)
        return '""' if nxt is None else nxt

    if not counting:
        body = uncounted()
    else:
        body = None
    if n > 256 and counting:  # fill the table from the end so T's recursion stays shallow
        # (nothing-yet-written entries only up to the first required member:
        # the start reaches no further ones)
        first_req = next((i for i, (_, _, r) in enumerate(items) if r), n)
        for i in range(n - 1, 0, -1):
            for c in range(cap + 1) if counting else (0,):
                T(i, c, False)
                if i <= first_req:
                    T(i, c, True)
    if counting:
        body = T(0, 0, True)
    alts = []
    if body is not None and body != '""':
        # the empty body is the empty object
        alts.append(f"{open_} {lay.first(d)} {body} {lay.last(d)} {close}")
    if empty_ok and not (max_p is not None and max_p < 0):
        alts.append(lay.empty(d, "{", "}"))
    if body == '""' and not empty_ok:
        return None
    return _alt(alts)


def obj_any_order(conv: _Converter, items, extra, min_p, max_p, d, hint) -> Optional[str]:
    """Members in any order, each declared one at most once, extras anywhere:
    states (members present, extras count) after the first member."""
    lay = conv.layout
    req_mask = 0
    for i, (_, _, r) in enumerate(items):
        if r:
            req_mask |= 1 << i
    counting = min_p > 0 or max_p is not None
    cap = (max_p if max_p is not None else min_p) + 1

    def st(mask, c):
        return (mask, min(c, cap) if counting else 0)

    def total(state):
        return bin(state[0]).count("1") + state[1]

    def moves(state, sep):
        mask, c = state
        out = []
        if max_p is not None and total(state) + 1 > max_p:
            return out
        for i, (_, member, _) in enumerate(items):
            if not mask >> i & 1:
                out.append((_seq(sep, member), st(mask | 1 << i, c)))
        if extra is not None:
            out.append((_seq(sep, extra), st(mask, c + 1)))
        return out

    def final(state):
        return (state[0] & req_mask) == req_mask and total(state) >= min_p

    body = conv.machine(f"{hint}-m", moves((0, 0), ""), lambda q: moves(q, lay.sep(d)), final)
    out = []
    if body is not None:
        out.append(f'"{{" {lay.first(d)} {body} {lay.last(d)} "}}"')
    if req_mask == 0 and min_p == 0:
        out.append(lay.empty(d, "{", "}"))
    return _alt(out)


def obj_dependencies(conv: _Converter, parts, idx, kw, d, hint) -> Optional[str]:
    s, path, skip = parts[idx]
    deps = s[kw]
    if not isinstance(deps, dict):
        conv.bad(kw, path, "must be an object")
    triggers = list(deps.keys())
    if len(triggers) > 6:
        conv.fail(kw, path, "more than 6 trigger properties")
        return obj(conv, conv.with_skip(parts, idx, kw), d, hint)
    base = conv.with_skip(parts, idx, kw)
    out = []
    for mask in range(1 << len(triggers)):
        extra_parts: list = []
        for i, t in enumerate(triggers):
            dep = deps[t]
            if mask >> i & 1:
                d1: dict = {"required": [t]}
                conv.keep.append(d1)
                extra_parts.append((d1, path, frozenset()))
                if isinstance(dep, list):
                    d2 = {"required": list(dep)}
                    conv.keep.append(d2)
                    extra_parts.append((d2, _ptr_join(path, kw, t), frozenset()))
                else:
                    extra_parts.append((dep, _ptr_join(path, kw, t), _child(s, skip)))
            else:
                d1 = {"properties": {t: False}}
                conv.keep.append(d1)
                extra_parts.append((d1, path, frozenset()))
        sub = base + extra_parts
        flat = conv.flatten(sub)
        if flat is None:
            continue
        # the dependent schemas apply to the object itself: restrict to objects
        obj_only = {"type": "object"}
        conv.keep.append(obj_only)
        flat = conv.flatten(sub + [(obj_only, path, frozenset())])
        if flat is None:
            continue
        out.append(conv.value(flat, d, hint))
    return _alt(out)
