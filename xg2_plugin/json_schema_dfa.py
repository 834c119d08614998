"""Symbolic DFAs for the JSON Schema converter: automata over code points whose
transitions are labelled with code-point sets (:mod:`json_schema_regex`), for what
expressions cannot do directly: intersection (two patterns, pattern and length),
complement (keys other than the declared ones, ``not`` of a pattern) -- emitted as
one EBNF rule per state.

Pieces:

* :class:`DFA`: built from the regex IR (:meth:`DFA.from_ir`: the subset
  construction, or the shift-and construction for a class sequence), intersected,
  complemented, minimized, and written out by :meth:`DFA.emit_rules`;
* :func:`length_dfa` (strings of a length range), :func:`words_dfa` (exactly the
  given strings) and :func:`cached_dfa` (``DFA.from_ir`` memoized, minimal);
* :func:`labelled_product`: the product of several DFAs, each state labelled with
  which of them accept there;
* :func:`string_except`: EBNF of every string except the given ones (a trie with
  "anything else" branches).
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import groupby
from operator import itemgetter
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.ma  # noqa: F401  (np.unique imports it on first use: here, not on a schema's compile)

from . import _budget
from .json_schema_regex import (
    ALL,
    BUDGET_WHERE,
    CS,
    MAX_CP,
    PRINTABLE,
    class_text,
    cs_contains,
    cs_diff,
    cs_inter,
    cs_norm,
    cs_of,
    encode_char,
    encode_set,
    encode_set_canonical,
    json_char,
    n_rep,
    n_set,
)


# ----------------------------------------------------------------------------------
# Symbolic DFAs (alphabet: code points, labels: sets)
# ----------------------------------------------------------------------------------


class DFAError(Exception):
    pass


MAX_DFA_STATES = 4000
# The subset construction's work: NFA states summed over the subsets it visits.  An
# unanchored counted pattern (``[0-9a-f]{4096}`` as a key pattern) has subsets as
# large as the count, so MAX_DFA_STATES alone let it run ~2 s and ~370 MB; the
# largest need among MaskBench, the JSON-Schema-Test-Suite and the held-out schemas
# is 8,594.
MAX_SUBSET_WORK = 1_000_000
# Refinement rounds minimized() runs (one per character of the longest suffix
# that tells two states apart) before it leaves a DFA unminimized.
MINIMIZE_ROUNDS = 64


def _state_id(index: Dict[Any, int], todo: List[Any], key: Any) -> int:
    """The id of state ``key`` in a construction's ``index``; a new one, queued on
    ``todo``, if unseen (DFAError past MAX_DFA_STATES)."""
    got = index.get(key)
    if got is None:
        got = index[key] = len(index)
        todo.append(key)
        if got >= MAX_DFA_STATES:
            raise DFAError("automaton too large")
    return got


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
            _budget.check(BUDGET_WHERE)
            row = []
            for cs1, t1 in self.trans[a]:
                for cs2, t2 in other.trans[b]:
                    cs = cs_inter(cs1, cs2)
                    if not cs:
                        continue
                    row.append((cs, _state_id(index, todo, (t1, t2))))
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
        _budget.charge(8 * (n + 1) * max(len(bounds) - 1, 1), BUDGET_WHERE)
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
        _budget.check(BUDGET_WHERE)
        # (the first DFA's row as it is: intersecting it with every character was a
        # third of a one-pattern key automaton's front-end)
        pieces: List[Tuple[CS, Tuple[int, ...]]] = [(cs, (t,)) for cs, t in comps[0].trans[st[0]] if cs]
        for k in range(1, len(st)):
            pieces = [(cs, tg + (t,)) for cs1, tg in pieces for cs2, t in comps[k].trans[st[k]]
                      for cs in (cs_inter(cs1, cs2),) if cs]
        merged: Dict[int, List[CS]] = {}
        for cs, tg in pieces:
            merged.setdefault(_state_id(index, todo, tg), []).append(cs)
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
        _budget.check(BUDGET_WHERE)
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
            merged.setdefault(_state_id(index, todo, nxt), []).append(cs)
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
        _budget.check(BUDGET_WHERE)
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
            _budget.check(BUDGET_WHERE)
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
            _budget.check(BUDGET_WHERE)
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
        work = 0
        for cur in todo:
            _budget.check(BUDGET_WHERE)
            work += len(cur)
            if work > MAX_SUBSET_WORK:
                raise DFAError("automaton too large")
            labels = [(cs, t) for s in cur for cs, t in self.edges[s]]
            row = []
            for cs, targets in _partition(labels):
                tgt = self.closure(targets)
                if univ is not None and not tgt.isdisjoint(self.universal):
                    tgt = univ
                row.append((cs, _state_id(index, todo, tgt)))
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
        raw = cs_diff(PRINTABLE, cs_of(chars))
        return (class_text(raw) if raw else None), True
    return encode_set_canonical(other), False


def _alts(alts) -> Optional[str]:
    """One EBNF alternation of the expressions, None when there are none."""
    if not alts:
        return None
    return alts[0] if len(alts) == 1 else "(" + " | ".join(alts) + ")"
