"""A regular EBNF expression over ASCII written as the rules of its minimal DFA.

The numeric formats' ranges (``int64`` in every Kubernetes object) are long
alternations whose branches share prefixes (``9.2...e18`` beside ``9...e17``,
``[0-9]{0,15} "0"*`` under each digit of the bound), so the core's subset
construction met them as ~1,300 states to minimise to ~160, at every first sight
of a schema.  Written as one rule per state of the minimal automaton (a state
reached from one place only is inlined as a group), the same language is built
with no subset left to merge: the ``int64`` rule from ~0.6 to ~0.3 ms.  Used
offline, by :func:`json_schema_presets.generate`: the text is read into the regex
IR and json_schema_dfa builds and minimises the automaton.

The expressions read are the front-end's number texts: quoted literals, classes
``[...]`` of ASCII characters and ranges, groups, ``|`` and the postfix
operators ``? * +`` and ``{m}``, ``{m,}``, ``{m,n}``.
"""

from typing import List, Tuple

from . import json_schema_dfa as D
from .json_schema_regex import CS, cs_norm


class _Parser:
    """The text as the regex IR json_schema_dfa builds automata from."""

    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def fail(self, what: str) -> ValueError:
        return ValueError(f"minimal_rules: {what} at {self.i} in {self.s[:80]!r}")

    def skip(self) -> None:
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def whole(self):
        node = self.alternatives()
        if self.i != len(self.s):
            raise self.fail("unexpected text")
        return node

    def alternatives(self):
        alts = [self.sequence()]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            alts.append(self.sequence())
        return alts[0] if len(alts) == 1 else ("alt", alts)

    def sequence(self):
        items = []
        while True:
            self.skip()
            if self.i >= len(self.s) or self.s[self.i] in "|)":
                return ("seq", items)
            items.append(self.quantified())

    def quantified(self):
        node = self.atom()
        if self.i >= len(self.s) or self.s[self.i] not in "?*+{":
            return node
        c = self.s[self.i]
        if c == "{":
            j = self.s.index("}", self.i)
            parts = self.s[self.i + 1:j].split(",")
            lo = int(parts[0])
            hi = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
            self.i = j + 1
        else:
            lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[c]
            self.i += 1
        return ("rep", node, lo, hi)

    def atom(self):
        c = self.s[self.i]
        if c == '"':
            j = self.s.index('"', self.i + 1)
            if "\\" in self.s[self.i + 1:j]:
                raise self.fail("escape in a literal")
            chars = self.s[self.i + 1:j]
            self.i = j + 1
            return ("seq", [("c", ((ord(ch), ord(ch)),)) for ch in chars])
        if c == "[":
            j = self.s.index("]", self.i)
            body = self.s[self.i + 1:j]
            if "\\" in body or body.startswith("^"):
                raise self.fail("escape or negation in a class")
            ranges, k = [], 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    ranges.append((ord(body[k]), ord(body[k + 2])))
                    k += 3
                else:
                    ranges.append((ord(body[k]), ord(body[k])))
                    k += 1
            self.i = j + 1
            return ("c", cs_norm(ranges))
        if c == "(":
            self.i += 1
            node = self.alternatives()
            self.skip()
            if self.i >= len(self.s) or self.s[self.i] != ")":
                raise self.fail("expected ')'")
            self.i += 1
            return node
        raise self.fail(f"unexpected {c!r}")


def minimal_dfa(expr: str) -> D.DFA:
    """The minimal DFA of ``expr`` (json_schema_dfa's; state 0 the start)."""
    return D.DFA.from_ir(_Parser(expr).whole()).minimized()


def _symbols(cs: CS) -> str:
    if len(cs) == 1 and cs[0][0] == cs[0][1] and chr(cs[0][0]) not in '"\\':
        return '"%s"' % chr(cs[0][0])

    def one(s: int) -> str:
        return chr(s) if chr(s).isalnum() else "\\x%02x" % s
    return "[" + "".join(one(a) if a == b else one(a) + "-" + one(b) for a, b in cs) + "]"


def minimal_rules(expr: str, prefix: str) -> Tuple[str, List[Tuple[str, str]]]:
    """``expr``'s language as (a reference to the start rule, [(name, body)]):
    a rule per state of its minimal DFA that more than one edge enters, the
    others inlined as groups; names are ``prefix`` and the state's number."""
    dfa = minimal_dfa(expr)
    indegree = [0] * len(dfa.trans)
    for row in dfa.trans:
        for t in {t for _, t in row}:
            indegree[t] += 1
    named = {0} | {s for s, n in enumerate(indegree) if n > 1}

    def body(s: int) -> str:
        alts = ['""'] if dfa.accept[s] else []
        for cs, t in sorted(dfa.trans[s]):
            if t in named:
                alts.append(f"{_symbols(cs)} {prefix}{t}")
            elif dfa.trans[t]:
                alts.append(f"{_symbols(cs)} ({body(t)})")
            else:
                alts.append(_symbols(cs))
        return " | ".join(alts)

    return f"{prefix}0", [(f"{prefix}{s}", body(s)) for s in sorted(named)]
