"""A regular EBNF expression over ASCII written as the rules of its minimal DFA.

The numeric formats' ranges (``int64`` in every Kubernetes object) are long
alternations whose branches share prefixes (``9.2...e18`` beside ``9...e17``,
``[0-9]{0,15} "0"*`` under each digit of the bound), so the core's subset
construction met them as ~1,300 states to minimise to ~160, at every first sight
of a schema.  Written as one rule per state of the minimal automaton (a state
reached from one place only is inlined as a group), the same language is built
with no subset left to merge: the ``int64`` rule from ~0.6 to ~0.3 ms.  Used
offline, by :func:`json_schema_presets.generate`; speed does not matter here.

The expressions read are the front-end's number texts: quoted literals, classes
``[...]`` of ASCII characters and ranges, groups, ``|`` and the postfix
operators ``? * +`` and ``{m}``, ``{m,}``, ``{m,n}``.
"""

from typing import Dict, List, Set, Tuple

_Edge = Tuple[int, int]  # (symbol or -1 for epsilon, target)


class _NFA:
    def __init__(self) -> None:
        self.edges: List[List[_Edge]] = []

    def state(self) -> int:
        self.edges.append([])
        return len(self.edges) - 1


class _Parser:
    """Thompson construction straight from the text."""

    def __init__(self, text: str, nfa: _NFA) -> None:
        self.s, self.i, self.nfa = text, 0, nfa

    def fail(self, what: str) -> ValueError:
        return ValueError(f"minimal_rules: {what} at {self.i} in {self.s[:80]!r}")

    def skip(self) -> None:
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def alternatives(self) -> Tuple[int, int]:
        a, b = self.nfa.state(), self.nfa.state()
        while True:
            x, y = self.sequence()
            self.nfa.edges[a].append((-1, x))
            self.nfa.edges[y].append((-1, b))
            self.skip()
            if self.i < len(self.s) and self.s[self.i] == "|":
                self.i += 1
                continue
            return a, b

    def sequence(self) -> Tuple[int, int]:
        start = cur = self.nfa.state()
        while True:
            self.skip()
            if self.i >= len(self.s) or self.s[self.i] in "|)":
                return start, cur
            x, y = self.quantified()
            self.nfa.edges[cur].append((-1, x))
            cur = y

    def atom(self):
        """A function building a fresh copy of the atom (repetitions copy it)."""
        c = self.s[self.i]
        if c == '"':
            j = self.i + 1
            chars = []
            while self.s[j] != '"':
                if self.s[j] == "\\":
                    raise self.fail("escape in a literal")
                chars.append(ord(self.s[j]))
                j += 1
            self.i = j + 1
            return lambda: self._chain([{ch} for ch in chars])
        if c == "[":
            j = self.s.index("]", self.i)
            body = self.s[self.i + 1:j]
            if "\\" in body or body.startswith("^"):
                raise self.fail("escape or negation in a class")
            syms: Set[int] = set()
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    syms.update(range(ord(body[k]), ord(body[k + 2]) + 1))
                    k += 3
                else:
                    syms.add(ord(body[k]))
                    k += 1
            self.i = j + 1
            return lambda: self._chain([syms])
        if c == "(":
            j, depth = self.i, 0
            while True:  # the matching parenthesis (literals and classes hold none here)
                if j >= len(self.s):
                    raise self.fail("expected ')'")
                if self.s[j] == '"':
                    j = self.s.index('"', j + 1)
                elif self.s[j] == "[":
                    j = self.s.index("]", j)
                elif self.s[j] == "(":
                    depth += 1
                elif self.s[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            inner = self.s[self.i + 1:j]
            self.i = j + 1
            return lambda: _Parser(inner, self.nfa).whole()
        raise self.fail(f"unexpected {c!r}")

    def whole(self) -> Tuple[int, int]:
        a, b = self.alternatives()
        if self.i != len(self.s):
            raise self.fail("trailing text")
        return a, b

    def _chain(self, sets: List[Set[int]]) -> Tuple[int, int]:
        start = cur = self.nfa.state()
        for syms in sets:
            nxt = self.nfa.state()
            self.nfa.edges[cur].extend((ch, nxt) for ch in sorted(syms))
            cur = nxt
        return start, cur

    def quantified(self) -> Tuple[int, int]:
        make = self.atom()
        lo, hi = 1, 1  # hi -1: unbounded
        if self.i < len(self.s) and self.s[self.i] in "?*+{":
            c = self.s[self.i]
            if c == "{":
                j = self.s.index("}", self.i)
                parts = self.s[self.i + 1:j].split(",")
                lo = int(parts[0])
                hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else -1)
                self.i = j + 1
            else:
                lo, hi = {"?": (0, 1), "*": (0, -1), "+": (1, -1)}[c]
                self.i += 1
        start = cur = self.nfa.state()
        for _ in range(lo):
            x, y = make()
            self.nfa.edges[cur].append((-1, x))
            cur = y
        end = self.nfa.state()
        self.nfa.edges[cur].append((-1, end))
        if hi < 0:
            x, y = make()
            self.nfa.edges[cur].append((-1, x))
            self.nfa.edges[y].append((-1, cur))
        else:
            for _ in range(hi - lo):
                x, y = make()
                self.nfa.edges[cur].append((-1, x))
                self.nfa.edges[y].append((-1, end))
                cur = y
        return start, end


def _closure(nfa: _NFA, states) -> frozenset:
    out, stack = set(states), list(states)
    while stack:
        for sym, t in nfa.edges[stack.pop()]:
            if sym < 0 and t not in out:
                out.add(t)
                stack.append(t)
    return frozenset(out)


def minimal_dfa(expr: str) -> Tuple[List[bool], List[Dict[int, int]]]:
    """(final, moves) of the minimal DFA of ``expr``; state 0 is the start, the
    others numbered breadth-first, moves by symbol (dead state left out)."""
    nfa = _NFA()
    start, end = _Parser(expr, nfa).whole()
    first = _closure(nfa, [start])
    ids: Dict[frozenset, int] = {first: 0}
    sets, moves = [first], []
    for cur in sets:
        step: Dict[int, Set[int]] = {}
        for s in cur:
            for sym, t in nfa.edges[s]:
                if sym >= 0:
                    step.setdefault(sym, set()).add(t)
        row = {}
        for sym, targets in step.items():
            nxt = _closure(nfa, targets)
            if nxt not in ids:
                ids[nxt] = len(sets)
                sets.append(nxt)
            row[sym] = ids[nxt]
        moves.append(row)
    final = [end in s for s in sets]
    cls = [int(f) for f in final]  # Moore refinement
    while True:
        sig = [(cls[i], tuple(sorted((a, cls[t]) for a, t in moves[i].items()))) for i in range(len(sets))]
        num: Dict[tuple, int] = {}
        new = [num.setdefault(x, len(num)) for x in sig]
        if len(num) == len(set(cls)):
            break
        cls = new
    order, seen = [new[0]], {new[0]: 0}  # breadth-first renumbering from the start
    rep = {}
    for i, c in enumerate(new):
        rep.setdefault(c, i)
    for c in order:
        for _, t in sorted(moves[rep[c]].items()):
            if new[t] not in seen:
                seen[new[t]] = len(order)
                order.append(new[t])
    return ([final[rep[c]] for c in order],
            [{a: seen[new[t]] for a, t in moves[rep[c]].items()} for c in order])


def _symbols(syms: List[int]) -> str:
    runs: List[List[int]] = []
    for s in sorted(syms):
        if runs and runs[-1][1] == s - 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    if len(runs) == 1 and runs[0][0] == runs[0][1] and chr(runs[0][0]) not in '"\\':
        return '"%s"' % chr(runs[0][0])

    def one(s: int) -> str:
        return chr(s) if chr(s).isalnum() else "\\x%02x" % s
    return "[" + "".join(one(a) if a == b else one(a) + "-" + one(b) for a, b in runs) + "]"


def minimal_rules(expr: str, prefix: str) -> Tuple[str, List[Tuple[str, str]]]:
    """``expr``'s language as (a reference to the start rule, [(name, body)]):
    a rule per state of its minimal DFA that more than one edge enters, the
    others inlined as groups; names are ``prefix`` and the state's number."""
    final, moves = minimal_dfa(expr)
    indegree = [0] * len(final)
    for row in moves:
        for t in set(row.values()):
            indegree[t] += 1
    named = {0} | {s for s, n in enumerate(indegree) if n > 1}

    def body(s: int) -> str:
        by_target: Dict[int, List[int]] = {}
        for sym, t in moves[s].items():
            by_target.setdefault(t, []).append(sym)
        alts = ['""'] if final[s] else []
        for t, syms in sorted(by_target.items(), key=lambda x: min(x[1])):
            if t in named:
                alts.append(f"{_symbols(syms)} {prefix}{t}")
            elif moves[t]:
                alts.append(f"{_symbols(syms)} ({body(t)})")
            else:
                alts.append(_symbols(syms))
        return " | ".join(alts)

    return f"{prefix}0", [(f"{prefix}{s}", body(s)) for s in sorted(named)]
