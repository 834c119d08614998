"""Rule automata across grammars and rule orders.

They are shared across grammars (a process-wide cache keyed by the rule's NFA, rule
references renumbered by first appearance): a rule body met again in another
grammar, where the rules it references have other ids and come in another order,
must keep referring to that grammar's rules (checked against a recursive recogniser
of the two languages).  And which rules are inlined must not depend on the order the
rules are written in."""

import random

import xg2_plugin as xgr

# x is recursive and not a choice, so it stays a rule and its automaton (with rule
# edges to p and q) is the cached part; G2's x references the same shapes the other
# way round, so its NFA is G1's with the two references swapped.
G1 = """
root ::= x
x ::= "(" p "," q ")"
p ::= "a" ("<" root ">")?
q ::= "b" ("[" root "]")?
"""
G2 = """
root ::= x
q ::= "b" ("[" root "]")?
x ::= "(" q "," p ")"
p ::= "a" ("<" root ">")?
"""
ALPHABET = "(),<>[]ab"


def _parse_x(s, i, order):
    """End of an x starting at i (or -1); order = "pq" for G1, "qp" for G2."""
    if i >= len(s) or s[i] != "(":
        return -1
    i = _parse_part(s, i + 1, order[0], order)
    if i < 0 or i >= len(s) or s[i] != ",":
        return -1
    i = _parse_part(s, i + 1, order[1], order)
    if i < 0 or i >= len(s) or s[i] != ")":
        return -1
    return i + 1


def _parse_part(s, i, which, order):
    head, open_, close = ("a", "<", ">") if which == "p" else ("b", "[", "]")
    if i >= len(s) or s[i] != head:
        return -1
    i += 1
    if i < len(s) and s[i] == open_:
        j = _parse_x(s, i + 1, order)
        if j < 0 or j >= len(s) or s[j] != close:
            return -1
        return j + 1
    return i


def in_language(s, order):
    return _parse_x(s, 0, order) == len(s)


def _sample(rng, order, depth):
    parts = []
    for which in order:
        head, open_, close = ("a", "<", ">") if which == "p" else ("b", "[", "]")
        inner = open_ + _sample(rng, order, depth - 1) + close if depth > 0 and rng.random() < 0.5 else ""
        parts.append(head + inner)
    return "(" + parts[0] + "," + parts[1] + ")"


def _accepts(compiled, text):
    m = xgr.GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


def test_shared_rule_automaton_keeps_each_grammars_references():
    info = xgr.TokenizerInfo(list(ALPHABET), xgr.VocabType.RAW)
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    c1 = compiler.compile_grammar(G1)
    c2 = compiler.compile_grammar(G2)  # x's automaton comes from the cache, references swapped
    c1_again = compiler.compile_grammar(G1)  # and back
    rng = random.Random(0)
    strings = set()
    for order in ("pq", "qp"):
        for _ in range(200):
            s = _sample(rng, order, 3)
            strings.add(s)
            for _ in range(3):  # mutations: mostly outside both languages
                k = rng.randrange(len(s))
                strings.add(s[:k] + rng.choice(ALPHABET) + s[k + 1:])
                strings.add(s[:k] + s[k + 1:])
    n_pq = n_qp = 0
    for s in sorted(strings):
        want1, want2 = in_language(s, "pq"), in_language(s, "qp")
        n_pq += want1
        n_qp += want2
        assert _accepts(c1, s) == want1, s
        assert _accepts(c2, s) == want2, s
        assert _accepts(c1_again, s) == want1, s
    assert n_pq > 50 and n_qp > 50  # both languages genuinely exercised
    assert len(strings) - n_pq - n_qp > 200  # and many strings outside both


def _mod_grammar(m: int, order) -> str:
    """Digit strings whose value is divisible by m: one rule per remainder, each a
    choice referencing the others (a cycle of m dispatcher rules, as multipleOf
    writes them), rules listed in the given order."""
    lines = ["root ::= [0-9] r0x"]  # at least one digit; r0x tracks the remainder after it
    rules = {}
    for i in range(m):
        alts = [f'"{d}" r{(10 * i + d) % m}' for d in range(10)]
        if i == 0:
            alts.append('""')
        rules[f"r{i}"] = " | ".join(alts)
    lines[0] = "root ::= r0"
    for name in order:
        lines.append(f"{name} ::= {rules[name]}")
    return "\n".join(lines)


def test_cycles_of_dispatcher_rules_compile_in_any_rule_order():
    # Inlining a whole cycle of choice rules into each other multiplies; which ones
    # get inlined must not depend on the order the rules are written in.
    info = xgr.TokenizerInfo(list("0123456789"), xgr.VocabType.RAW)
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    m = 30
    names = [f"r{i}" for i in range(m)]
    rng = random.Random(1)
    numbers = ["0", "30", "60", "90", "120", "7", "31", "45", "1230", "99990", "123456789", "900000000", "0030"]
    for _ in range(6):
        order = names[:]
        rng.shuffle(order)
        compiled = compiler.compile_grammar(_mod_grammar(m, order))
        for s in numbers:
            assert _accepts(compiled, s) == (int(s) % m == 0), (order[:5], s)
