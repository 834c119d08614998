"""Rule automata across grammars and rule orders.

They are shared across grammars (a process-wide cache keyed by the rule's NFA, rule
references renumbered by first appearance): a rule body met again in another
grammar, where the rules it references have other ids and come in another order,
must keep referring to that grammar's rules (checked against a recursive recogniser
of the two languages).  And which rules are inlined must not depend on the order the
rules are written in."""

import random
import re

import pytest

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


# A right-linear group too big to inline: a DFA written one rule per state, as the
# JSON Schema front-end writes a format intersected with a pattern.
def _chain_group(n: int) -> str:
    """Words over [a-z] whose letters go round c0 .. c{n-1} in order, any length,
    ending anywhere; each state a rule that references the next only at its end."""
    lines = ['root ::= "<" c0 ">" ("," "<" c0 ">")*']
    for i in range(n):
        letter = "abcdefghijklmnopqrstuvwxyz"[i % 26]
        lines.append(f'c{i} ::= "{letter}" c{(i + 1) % n} | [0-9] c{i} | ""')
    return "\n".join(lines)


def _chain_ok(text: str, n: int) -> bool:
    letters = "abcdefghijklmnopqrstuvwxyz"
    for part in text.split(","):
        if len(part) < 2 or part[0] != "<" or part[-1] != ">":
            return False
        i = 0
        for ch in part[1:-1]:
            if ch.isdigit():
                continue
            if ch != letters[i % 26]:
                return False
            i = (i + 1) % n
    return True


@pytest.mark.parametrize("n", [30, 200])
def test_right_linear_group_runs_as_one_automaton(n):
    # The group's rules reference each other only at their ends: the core merges
    # them into one automaton -- inlined into root when small (n = 30), else the
    # automaton of c0 -- so after "<ab1c" the parser holds no item of c1, c2, c3.
    info = xgr.TokenizerInfo(list("<>,abcdefghijklmnopqrstuvwxyz0123456789"), xgr.VocabType.RAW)
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(_chain_group(n))
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string("<ab1c")
    items = [line.split()[0] for line in m._debug_print_internal_state().splitlines()[1:] if line.strip()]
    assert not {"c1", "c2", "c3"} & set(items) and ("c0" in items) == (n == 200), items
    rng = random.Random(3)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(300):
        words = []
        for _ in range(rng.randint(1, 3)):
            k = rng.randint(0, 70)
            w = "".join(letters[i % n % 26] + ("7" if rng.random() < 0.2 else "") for i in range(k))
            if rng.random() < 0.3 and w:  # break it
                j = rng.randrange(len(w))
                w = w[:j] + rng.choice("abz9") + w[j + 1:]
            words.append(f"<{w}>")
        text = ",".join(words)
        assert _accepts(compiled, text) == _chain_ok(text, n), text


def test_right_linear_group_too_big_to_determinise_runs_as_rules():
    # ((0|1)* 1 (0|1){k})* (0|1)* 1 (0|1){k-1} written as a cycle of right-linear
    # rules is a group whose automaton needs about 2^k states: it is refused as one
    # automaton, and the rules run one by one under the parser instead -- same
    # language, no error.
    k = 18
    lines = ["root ::= a", 'a ::= [01] a | "1" b1']
    lines += [f"b{i} ::= [01] b{i + 1}" for i in range(1, k)]
    lines.append(f'b{k} ::= [01] a | ""')
    info = xgr.TokenizerInfo(["0", "1"], xgr.VocabType.RAW)
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar("\n".join(lines))
    pattern = re.compile(r"(?:[01]*1[01]{%d})*[01]*1[01]{%d}" % (k, k - 1))
    rng = random.Random(5)
    for _ in range(200):
        text = "".join(rng.choice("01") for _ in range(rng.randint(1, 3 * k)))
        assert _accepts(compiled, text) == bool(pattern.fullmatch(text)), text


def test_written_out_repetition_keeps_its_references_as_rules():
    # item is small enough to be expanded into its callers (a few hundred states),
    # and ("," item){0,200} counts one state per reference, so the repetition is
    # written out copy by copy: expanding item in each of the 200 copies would
    # make ~80k states.  The copies keep item as a rule edge instead.
    fields = " ".join(f'"k{i}=" [a-z]{{1,3}} ";"' for i in range(20))
    grammar = f'root ::= "[" item ("," item){{0,200}} "]"\nitem ::= "<" {fields} ">"'
    g = xgr.Grammar.from_ebnf(grammar)
    assert g.num_states < 5000, g.num_states
    info = xgr.TokenizerInfo(list("[],<>=;abck0123456789xyz"), xgr.VocabType.RAW)
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(g)
    pattern = re.compile(r"\[(?:<%s>)(?:,<%s>){0,200}\]" % ((";".join(f"k{i}=[a-z]{{1,3}}" for i in range(20)) + ";",) * 2))
    rng = random.Random(7)
    for _ in range(60):
        items = ["<" + "".join(f"k{i}=" + "".join(rng.choice("abcxyz") for _ in range(rng.randint(1, 3))) + ";"
                               for i in range(20)) + ">" for _ in range(rng.choice([1, 2, 5, 200, 201]))]
        text = "[" + ",".join(items) + "]"
        if rng.random() < 0.3:  # break it
            j = rng.randrange(len(text))
            text = text[:j] + rng.choice("a;<,9") + text[j + 1:]
        assert _accepts(compiled, text) == bool(pattern.fullmatch(text)), text


def _links_ok(text, n):
    """{} or {k<i>:<digits>,...} with strictly increasing i < n."""
    if text == "{}":
        return True
    if not (text.startswith("{") and text.endswith("}")):
        return False
    last = -1
    for member in text[1:-1].split(","):
        m = re.fullmatch(r"k([0-9]+):[0-9]+", member)
        if not m or not last < int(m.group(1)) < n or m.group(1) != str(int(m.group(1))):
            return False
        last = int(m.group(1))
    return True


def test_optional_links_share_their_next_link():
    # Each link is written twice towards the same end -- after its own member and
    # in place of it -- the shape of a chain of optional properties; the automaton
    # builder expands such a link once per caller and enters it from both places.
    n = 12
    lines = ['root ::= "{" l0 "}" | "{}"', f'l{n - 1} ::= "k{n - 1}:" [0-9]+']
    lines += [f'l{i} ::= "k{i}:" [0-9]+ ("," l{i + 1})? | l{i + 1}' for i in range(n - 1)]
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo(list("{}:,k0123456789"), xgr.VocabType.RAW),
                                   cache_enabled=False).compile_grammar("\n".join(lines))
    rng = random.Random(11)
    for _ in range(400):
        keys = sorted(rng.sample(range(n), rng.randint(0, 4)))
        if rng.random() < 0.3:
            rng.shuffle(keys)
        text = "{" + ",".join(f"k{i}:{rng.randint(0, 99)}" for i in keys) + "}"
        if rng.random() < 0.2:  # break it
            j = rng.randrange(len(text))
            text = text[:j] + rng.choice(",:k9}") + text[j + 1:]
        assert _accepts(compiled, text) == _links_ok(text, n), text


@pytest.mark.parametrize("n", [12, 200])
def test_optional_links_run_as_one_automaton(n):
    # A link's next link inside `(...)?` at its end is still a tail reference: the
    # chain is one right-linear group, merged into one automaton (inlined into root
    # when small, else l0's), so in the middle of it the parser holds no item of
    # the other links -- none waiting either, which is what made resolving a mask
    # in a long chain of optional properties walk dozens of waiting rules.
    lines = ['root ::= "{" l0 "}" | "{}"', f'l{n - 1} ::= "k{n - 1}:" [0-9]+']
    lines += [f'l{i} ::= "k{i}:" [0-9]+ ("," l{i + 1})? | l{i + 1}' for i in range(n - 1)]
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo(list("{}:,k0123456789"), xgr.VocabType.RAW),
                                   cache_enabled=False).compile_grammar("\n".join(lines))
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string("{k0:1,k5:2")
    items = [line.split()[0] for line in m._debug_print_internal_state().splitlines()[1:] if line.strip()]
    assert not {f"l{i}" for i in range(1, n)} & set(items), items
    rng = random.Random(5)
    for _ in range(200):
        keys = sorted(rng.sample(range(n), rng.randint(0, 4)))
        text = "{" + ",".join(f"k{i}:{rng.randint(0, 99)}" for i in keys) + "}"
        if rng.random() < 0.3:  # break it
            j = rng.randrange(len(text))
            text = text[:j] + rng.choice(",:k9}") + text[j + 1:]
        assert _accepts(compiled, text) == _links_ok(text, n), text


def test_rule_written_twice_in_a_body_keeps_each_continuation():
    # r is expanded at each place it is written; only expansions that end in the
    # same place may share one copy (here they end before "x", before "y", and at
    # the end of one alternative or the other).
    grammar = 'root ::= r "x" r "y" | "(" r ")" | "[" (r "," )? r "]"\nr ::= "a" [0-9]* | "b"'
    compiled = xgr.GrammarCompiler(xgr.TokenizerInfo(list("abxy()[],0123"), xgr.VocabType.RAW),
                                   cache_enabled=False).compile_grammar(grammar)
    r = "(?:a[0-9]*|b)"
    pattern = re.compile(f"{r}x{r}y|\\({r}\\)|\\[(?:{r},)?{r}\\]")
    rng = random.Random(13)
    pieces = ["a", "b", "a12", "x", "y", "(", ")", "[", "]", ","]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7)))
        assert _accepts(compiled, text) == bool(pattern.fullmatch(text)), text


def test_rule_cache_drops_least_recently_used_within_its_limit():
    """A rule-automata cache too small for the grammars compiled drops the least
    recently used automata: it stays within its limit, still holds some, and every
    grammar keeps its language whether its automata come from the cache or are
    built again."""
    from xg2_plugin._native import lib

    info = xgr.TokenizerInfo(list("0123456789"), xgr.VocabType.RAW)
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    numbers = ["0", "30", "60", "7", "31", "45", "1230", "99990", "123456789", "0030"]
    limit = 48 << 10
    lib.xg2_rule_cache_set_limit(limit)
    try:
        assert lib.xg2_rule_cache_bytes() <= limit  # setting the limit evicts at once
        held = []
        for rnd in range(2):  # the second round meets evicted and cached automata alike
            for m in range(3, 40):
                order = [f"r{i}" for i in range(m)]
                random.Random(m).shuffle(order)
                compiled = compiler.compile_grammar(_mod_grammar(m, order))
                for s in numbers:
                    assert _accepts(compiled, s) == (int(s) % m == 0), (rnd, m, s)
                held.append(lib.xg2_rule_cache_bytes())
                assert held[-1] <= limit
        assert max(held) > limit // 2  # it did fill up, so the grammars forced evictions
    finally:
        lib.xg2_rule_cache_set_limit(32 << 20)


# Two counted loops that start on the same character (an anyOf of two bounded
# strings: a code of at most 64 characters or a text of 10 to 300) cannot share one
# automaton state's counter.  A short one is written out and a long one peeled (its
# first iterations written out ahead of the loop), rather than turned into a counted
# rule whose every token the parser resolves one by one; the language must not
# change either way -- also where, both being long, a counted rule remains.
CODE = r'([A-Z0-9_] | "\\u00" ("3" [0-9] | "4" [1-9A-F] | "5" [0-9AF]))'
TEXT = r'([ !#-\[\]-~] | "\\" ["\\/bfnrt] | "\\u" [0-9a-f]{4})'
SIDE_BY_SIDE = [
    ("{1,64}", "{10,300}", 1, 64, 10, 300, True),
    ("{1,64}", "{3,1000}", 1, 64, 3, 1000, True),
    ("{0,300}", "{10,400}", 0, 300, 10, 400, False),
]


@pytest.mark.parametrize("case", range(len(SIDE_BY_SIDE)))
def test_counted_loops_side_by_side(case):
    import json

    code_rep, text_rep, c_lo, c_hi, t_lo, t_hi, peeled = SIDE_BY_SIDE[case]
    grammar = xgr.Grammar.from_ebnf(f'root ::= "\\"" ({CODE}{code_rep} | {TEXT}{text_rep}) "\\""')
    if peeled:  # no counted rule left: every automaton state keeps at most one counter
        assert "counted" not in str(grammar), str(grammar)[:600]
    info = xgr.TokenizerInfo([bytes([i]) for i in range(256)])
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(grammar)
    rng = random.Random(case)
    lengths = [0, 1, 2, 3, 9, 10, 11, 63, 64, 65, 127, 128, 129, 299, 300, 301, 399, 400, 401, 999, 1000, 1001]
    strings = ["".join(rng.choice("AZ_09az \n\u00e9\"") for _ in range(n)) for n in lengths]
    strings += ["".join(rng.choice("AZ_09") for _ in range(n)) for n in lengths]
    for s in strings:
        code = c_lo <= len(s) <= c_hi and re.fullmatch(r"[A-Z0-9_]*", s) is not None
        text = t_lo <= len(s) <= t_hi
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        got = m.accept_string(json.dumps(s)) and m.is_completed()
        assert got == (code or text), (len(s), s[:40])


def test_a_loop_of_larger_items_is_not_written_out():
    # An array's item loop conflicts with itself (its exit and its next item both
    # start with whitespace); writing out its first iterations cannot help and made
    # one MaskBench grammar 12x larger: it stays a counted rule.
    hexid = r'"\"" [0-9a-f]{24} "\""'
    grammar = xgr.Grammar.from_ebnf(
        f'root ::= "[" [ \\n]* ({hexid} ([ \\n]* "," [ \\n]* {hexid}){{0,999}})? [ \\n]* "]"')
    assert "counted" in str(grammar)
    assert grammar.num_states < 500, grammar.num_states


# The same language spelled with a loop and with one item before a loop: the
# minimiser refines each cycle apart, and a state before a loop that behaves like
# one inside it (the characters' bytes) must join it, so both come out the same size.
@pytest.mark.parametrize("looped, unrolled", [
    (r'root ::= [\u0100-\u017f]+', r'root ::= [\u0100-\u017f] [\u0100-\u017f]*'),
    (r'root ::= "a" [^"]* "b"', r'root ::= "a" ([^"] [^"]*)? "b"'),
    (r'root ::= ("ab" | "cd")+ "x"', r'root ::= ("ab" | "cd") ("ab" | "cd")* "x"'),
    (r'root ::= [\u0800-\uffff]+ "."', r'root ::= [\u0800-\uffff] [\u0800-\uffff]* "."'),
])
def test_state_before_a_loop_joins_the_loop(looped, unrolled):
    a, b = xgr.Grammar.from_ebnf(looped), xgr.Grammar.from_ebnf(unrolled)
    assert a.num_states == b.num_states, (a.num_states, b.num_states)
    ca = xgr.GrammarCompiler(xgr.TokenizerInfo([bytes([i]) for i in range(256)]), cache_enabled=False)
    for text in ["", "a", "ab", "\u0100", "\u0100\u017f", "abcdx", "x", "a\u00e9b", "\u0800.", "\u0800\uffff."]:
        results = []
        for g in (a, b):
            m = xgr.GrammarMatcher(ca.compile_grammar(g), terminate_without_stop_token=True)
            results.append(m.accept_string(text) and m.is_completed())
        assert results[0] == results[1], text
