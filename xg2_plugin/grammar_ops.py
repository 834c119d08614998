"""Grammars built from other grammars: Grammar.concat / Grammar.union, and the
``@name`` references of Lark's named grammars.

Each part's EBNF source is copied with every rule name given a prefix of its
own (``g0.root``, ``g1.value``, ...), so the parts' rules never collide, and a
new root sequences or alternates the parts' roots.  The result is parsed by the
core like any other EBNF (its limits apply to the whole)."""

from __future__ import annotations

from typing import List, Sequence

from ._errors import InvalidArgumentError


def _name_start(c: str) -> bool:
    return c.isascii() and (c.isalpha() or c == "_")


def _name_char(c: str) -> bool:
    return _name_start(c) or c.isascii() and c.isdigit() or c in "-."


def _skip_quoted(text: str, i: int, close: str) -> int:
    """The index after the literal or class that starts at ``i`` (backslash escapes)."""
    i += 1
    while i < len(text) and text[i] != close:
        i += 2 if text[i] == "\\" else 1
    return i + 1


def prefix_rules(ebnf: str, prefix: str, keep: str = "") -> str:
    """``ebnf`` with ``prefix`` before every rule name.  Names the dialect uses for
    something else stay: a macro's name (``Regex(``, ``Length(``, followed by ``(``),
    a keyword argument's name and value (``stop_eos=true``), and the contents of
    literals, classes and comments; with ``keep``, names that start with it."""
    out: List[str] = []
    i, n = 0, len(ebnf)
    after_kwarg = False
    while i < n:
        c = ebnf[i]
        if c in "\"'":
            j = _skip_quoted(ebnf, i, c)
        elif c == "[":
            j = _skip_quoted(ebnf, i, "]")
        elif c == "#":
            j = ebnf.find("\n", i)
            j = n if j < 0 else j
            c = ""  # (comments dropped: a name in one must not be renamed either)
            i = j
            continue
        elif _name_start(c) and not (i and _name_char(ebnf[i - 1])):
            j = i + 1
            while j < n and _name_char(ebnf[j]):
                j += 1
            k = j
            while k < n and ebnf[k] in " \t":
                k += 1
            nxt = ebnf[k] if k < n else ""
            is_kwarg = nxt == "=" and not ebnf.startswith("::=", k)
            same = nxt == "(" or is_kwarg or after_kwarg or (keep and ebnf.startswith(keep, i))
            out.append(ebnf[i:j] if same else prefix + ebnf[i:j])
            after_kwarg = is_kwarg
            i = j
            continue
        else:
            j = i + 1
            if not c.isspace() and c != "=":
                after_kwarg = False
        out.append(ebnf[i:j])
        i = j
    return "".join(out)


def _parts(grammars: Sequence, what: str):
    from .grammar import Grammar

    if len(grammars) == 1 and isinstance(grammars[0], (list, tuple)):
        grammars = tuple(grammars[0])  # (a list, as XGrammar's C++ takes it)
    if not grammars:
        raise InvalidArgumentError(f"Grammar.{what} needs at least one grammar")
    for i, g in enumerate(grammars):
        if not isinstance(g, Grammar):
            raise InvalidArgumentError(f"Grammar.{what}: argument {i} is a {type(g).__name__}, not a Grammar")
    rules, roots = [], []
    for i, g in enumerate(grammars):
        prefix = f"{what}{i}."
        rules.append(prefix_rules(g._source, prefix))
        roots.append(prefix + g._root)
    return rules, roots


def combine(grammars: Sequence, what: str):
    """``Grammar.concat`` (what="concat") or ``Grammar.union`` (what="union")."""
    from .grammar import Grammar

    rules, roots = _parts(grammars, what)
    body = (" " if what == "concat" else " | ").join(roots)
    return Grammar.from_ebnf("\n".join([f"root ::= {body}"] + rules))


# ---- named grammars of Grammar.from_lark ----


def _checked_named(named_grammars) -> dict:
    from .grammar import Grammar
    from .lark import _NAMED_REF

    if named_grammars is None:
        return {}
    if not isinstance(named_grammars, dict):
        raise InvalidArgumentError(f"named_grammars must be a dict, got {type(named_grammars).__name__}")
    for name, value in named_grammars.items():
        if not isinstance(name, str) or not _NAMED_REF.fullmatch(name):
            raise InvalidArgumentError(
                f"named grammar name {name!r:.60} must be letters, digits, '_' and '-' (without the '@')")
        if not isinstance(value, (Grammar, str)):
            raise InvalidArgumentError(
                f"named grammar {name!r} must be a Grammar or Lark text, got {type(value).__name__}")
    return dict(named_grammars)


def lark_with_named(lark_string: str, named_grammars) -> tuple:
    """(EBNF, root) of a Lark grammar whose rules use ``@name`` for the grammars of
    ``named_grammars`` (a Grammar, or Lark text with its own ``start``, its own
    ``%ignore``, and ``@name`` references of its own).  Each grammar referred to,
    directly or not, is converted once and added under ``named.<name>.`` with an
    alias rule ``named.<name>`` for its root; a reference cycle is a GrammarError
    naming the chain."""
    from ._errors import GrammarError
    from .lark import NAMED_PREFIX, lark_to_ebnf

    named = _checked_named(named_grammars)
    names = set(named)
    used: set = set()
    ebnf, root = lark_to_ebnf(lark_string, named=names, used=used)
    blocks = [ebnf]
    done: set = set()
    chains = [(n, (n,)) for n in sorted(used)]
    while chains:
        name, chain = chains.pop()
        if name in done:
            continue
        done.add(name)
        prefix = f"{NAMED_PREFIX}{name}."
        value = named[name]
        if isinstance(value, str):
            inner: set = set()
            try:
                text, inner_root = lark_to_ebnf(value, named=names, used=inner)
            except GrammarError as e:
                raise type(e)(f"in named grammar @{name}: {e}") from None
            for ref in sorted(inner):
                if ref in chain:
                    raise GrammarError("named grammars refer to each other in a cycle: @"
                                       + " -> @".join(chain[chain.index(ref):] + (ref,)))
                chains.append((ref, chain + (ref,)))
            # (its own rules get the prefix; its @references, named.<x>, stay shared)
            text = prefix_rules(text, prefix, keep=NAMED_PREFIX)
        else:
            text, inner_root = prefix_rules(value._source, prefix), value._root
        blocks += [f"{NAMED_PREFIX}{name} ::= {prefix}{inner_root}", text]
    return "\n".join(blocks), root
