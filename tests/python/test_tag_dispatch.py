"""``TagDispatch(...)`` in the core (XGrammar-2 §3.2, XGrammar 0.2.8's EBNF syntax):
free text read by one Aho-Corasick automaton over the triggers and excluded strings,
a trigger dispatching into its rule, then free text again (``loop_after_dispatch``) or
the end.

Oracles:

* a reference recognizer written here from the definition decides full strings, and
  the core accepts exactly those -- random grammars over a small alphabet, so triggers
  overlap each other (prefixes, suffixes, infixes), the free text and the rules' text;
  loop on and off; excluded strings.  The definition: free text never holds an excluded
  string; at the first point where a trigger ends the text either dispatches one of the
  triggers that end there, or grows along the trie into a longer string that contains
  it, and must dispatch at its end;
* XGrammar 0.2.8 (a test dependency) decides the same strings alike wherever no trigger
  or excluded string occurs inside another one (where a trigger does, XGrammar lets it
  pass in free text undispatched: see the README);
* on the DeepSeek vocabulary, along valid strings, the mask bit of sampled tokens
  equals whether a fork accepts the token, and completion agrees with the reference;
* printing and parsing back gives the same grammar;
* bad input is a GrammarError (or LimitExceededError) naming line and column;
* the cost: automaton states grow with the strings' bytes only, and the work of a mask
  does not grow with the number of triggers or excluded strings.
"""

from __future__ import annotations

import random
from functools import lru_cache

import numpy as np
import pytest

import xg2_plugin as xgr
from xg2_plugin import GrammarError, LimitExceededError
from xg2_plugin._native import lib
from vocabs import bits_of_row, fill

BYTES_INFO = xgr.TokenizerInfo([bytes([i]) for i in range(256)])
BYTES = xgr.GrammarCompiler(BYTES_INFO, cache_enabled=False)
ALPHABET = "ab<>"
RULE_TEXTS = ["", "x", "xy", ">", "a>", "b", "<a"]


# ---------------------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------------------


class Spec:
    """A TagDispatch: triggers (string, rule), each rule a finite set of strings."""

    def __init__(self, triggers, rules, excludes, loop):
        self.triggers = triggers  # [(bytes, rule name)]
        self.rules = rules  # {name: [bytes]}
        self.excludes = excludes  # [bytes]
        self.loop = loop
        strings = [t for t, _ in triggers] + list(excludes)
        self.nodes = {s[:k] for s in strings for k in range(len(s) + 1)}

    def ebnf(self) -> str:
        def lit(b: bytes) -> str:
            return '"' + b.decode().replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'

        pairs = "".join(f"({lit(t)}, {r}), " for t, r in self.triggers)
        excl = ", ".join(lit(x) for x in self.excludes)
        text = f"root ::= TagDispatch({pairs}loop_after_dispatch={'true' if self.loop else 'false'}, excludes=({excl}))\n"
        for name, alts in self.rules.items():
            text += f"{name} ::= " + " | ".join(lit(a) for a in alts) + "\n"
        return text

    def state(self, f: bytes):
        """The free text f read since the last dispatch: None (dead), "free", or the
        trie string the text is growing along."""
        if any(x in f for x in self.excludes):
            return None
        ends = [e for e in range(1, len(f) + 1) if any(f[:e].endswith(t) for t, _ in self.triggers)]
        if not ends:
            return "free"
        p = ends[0]
        g = max((f[k:p] for k in range(p + 1) if f[k:p] in self.nodes), key=len)
        h = g + f[p:]
        return h if h in self.nodes else None

    def full(self, s: bytes) -> bool:
        @lru_cache(maxsize=None)
        def from_(i: int) -> bool:
            for j in range(i, len(s) + 1):
                st = self.state(s[i:j])
                if st is None:
                    return False
                if st == "free":
                    if j == len(s):
                        return True
                    continue
                for t, r in self.triggers:
                    if not st.endswith(t):
                        continue
                    for alt in self.rules[r]:
                        k = j + len(alt)
                        if s[j:k] == alt and (from_(k) if self.loop else k == len(s)):
                            return True
            return False

        return from_(0)

    def sample(self, rng: random.Random) -> bytes:
        """A string built from the definition's pieces (not always valid)."""
        out = b""
        for _ in range(rng.randint(0, 3)):
            out += "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 3))).encode()
            t, r = rng.choice(self.triggers)
            out += t + rng.choice(self.rules[r])
            if not self.loop:
                break
        if self.loop or rng.random() < 0.3:
            out += "".join(rng.choice(ALPHABET + "xy") for _ in range(rng.randint(0, 3))).encode()
        return out


def random_spec(rng: random.Random) -> Spec:
    while True:
        triggers = sorted({"".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 4))).encode()
                           for _ in range(rng.randint(1, 4))})
        excludes = sorted({"".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3))).encode()
                           for _ in range(rng.choice([0, 0, 1, 2]))})
        if any(x in t for x in excludes for t in triggers):
            continue  # an error (tested below)
        names = [f"r{i}" for i in range(len(triggers))]
        rules = {n: sorted({rng.choice(RULE_TEXTS).encode() for _ in range(rng.randint(1, 3))}) for n in names}
        return Spec(list(zip(triggers, names)), rules, excludes, rng.random() < 0.6)


def _ours(compiled, s: bytes) -> bool:
    m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return m.accept_string(s) and m.is_completed()


# ---------------------------------------------------------------------------------------
# Languages
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_same_language_as_the_reference(seed):
    rng = random.Random(seed)
    verdicts = []
    for _ in range(25):
        spec = random_spec(rng)
        compiled = BYTES.compile_grammar(spec.ebnf())
        cands = {spec.sample(rng) for _ in range(40)}
        cands |= {"".join(rng.choice(ALPHABET + "xy") for _ in range(rng.randint(0, 7))).encode() for _ in range(40)}
        cands |= {t for t, _ in spec.triggers} | set(spec.excludes)
        for s in sorted(cands):
            want = spec.full(s)
            verdicts.append(want)
            assert _ours(compiled, s) == want, (spec.ebnf(), s, want)
    assert 0.2 < sum(verdicts) / len(verdicts) < 0.8  # both kinds were tried, often


def _simple(spec: Spec) -> bool:
    strings = [t for t, _ in spec.triggers] + list(spec.excludes)
    return not any(x != y and x in y for x in strings for y in strings)


def test_same_verdicts_as_xgrammar_where_its_language_is_the_same():
    xg = pytest.importorskip("xgrammar")
    info = xg.TokenizerInfo([chr(i) for i in range(128)])
    xc = xg.GrammarCompiler(info, cache_enabled=False)
    rng = random.Random(7)
    compared = 0
    while compared < 40:
        spec = random_spec(rng)
        if not _simple(spec):
            continue
        compared += 1
        ours = BYTES.compile_grammar(spec.ebnf())
        theirs = xc.compile_grammar(spec.ebnf())
        for s in sorted({spec.sample(rng) for _ in range(30)}):
            m = xg.GrammarMatcher(theirs, terminate_without_stop_token=True)
            want = m.accept_string(s.decode()) and m.is_terminated()
            assert _ours(ours, s) == want == spec.full(s), (spec.ebnf(), s)


def test_where_xgrammar_differs():
    """Overlaps XGrammar's automaton does not resolve (README: TagDispatch)."""
    xg = pytest.importorskip("xgrammar")
    xc = xg.GrammarCompiler(xg.TokenizerInfo([chr(i) for i in range(128)]), cache_enabled=False)
    cases = [
        # a trigger inside a longer one: "b" ends in "ab", so "abx" is not free text
        ('root ::= TagDispatch(("b", r), ("abcd", r))\nr ::= "!"', "abx", False, True),
        # a trigger that prefixes a longer one: after "<a" the text dispatches or goes on to "<ab"
        ('root ::= TagDispatch(("<a", r), ("<abc", r))\nr ::= "!"', "<abx", False, True),
        # a trigger inside an excluded string's path
        ('root ::= TagDispatch(("b", r), excludes=("abc",))\nr ::= "!"', "abx", False, True),
        # (where both agree: an excluded string inside a longer one's path is never produced)
        ('root ::= TagDispatch(("q", r), excludes=("bc", "abcd"))\nr ::= "!"', "abcx", False, False),
        ('root ::= TagDispatch(("b", r), ("abcd", r))\nr ::= "!"', "ab!", True, True),
    ]
    for ebnf, s, ours_want, theirs_want in cases:
        m = xg.GrammarMatcher(xc.compile_grammar(ebnf), terminate_without_stop_token=True)
        assert (m.accept_string(s) and m.is_terminated()) == theirs_want
        assert _ours(BYTES.compile_grammar(ebnf), s.encode()) == ours_want


def test_dispatch_in_a_sequence_and_nested():
    g = BYTES.compile_grammar(
        'root ::= "<think>" TagDispatch(("<t>", tool), excludes=("</think>",)) "</think>" answer\n'
        'tool ::= "{" [0-9]+ "}" ("<t>" tool)?\n'
        'answer ::= TagDispatch(("@", inner), loop_after_dispatch=false)\n'
        'inner ::= TagDispatch(("(", close))\nclose ::= [a-z]* ")" "!"\n')
    ok = ["<think></think>", "<think>hm<t>{1}ok</think>", "<think><t>{1}<t>{22}</think>x@y(a)!z",
          "<think>a</think>b@", "<think>a</think>b@c(d)!e(f)!", "<think></think></think>"]
    bad = ["<think>a</think", "<think><t>x</think>", "<think>a</think>@(x", "<think>a</think>b@(",
           "<think></think>@(a)", "x<think></think>"]
    for s in ok:
        assert _ours(g, s.encode()), s
    for s in bad:
        assert not _ours(g, s.encode()), s


def test_prints_and_parses_back():
    rng = random.Random(3)
    for _ in range(30):
        spec = random_spec(rng)
        g = xgr.Grammar.from_ebnf(spec.ebnf())
        text = str(g)
        again = xgr.Grammar.from_ebnf(text)
        assert str(again) == text and again.num_states == g.num_states
    g = xgr.Grammar.from_ebnf('root ::= "a" TagDispatch(("<\\u00e9\\n\\"", r), ("x", s), excludes=("zz", "\\\\"))\n'
                              'r ::= "1"\ns ::= [^\\x00-\\U0010ffff]')
    text = str(g)
    assert 'TagDispatch(\n  ("<\\u00e9\\n\\"", r),\n  ("x", s),\n  loop_after_dispatch=true,\n  excludes=("zz", "\\\\")\n)' in text
    again = xgr.Grammar.from_ebnf(text)
    assert str(again) == text
    c = BYTES.compile_grammar(again)
    assert _ours(c, "a<é\n\"1".encode()) and not _ours(c, b"ax") and not _ours(c, b"azz")


def test_xgrammar_prints_what_we_parse():
    xg = pytest.importorskip("xgrammar")
    src = 'root ::= TagDispatch(("<a>", r1), ("<b", r2), loop_after_dispatch=false, excludes=("zz", "q"))\nr1 ::= "x"\nr2 ::= "y"'
    ours = xgr.Grammar.from_ebnf(str(xg.Grammar.from_ebnf(src)))
    assert str(ours) == str(xgr.Grammar.from_ebnf(src))


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------

BAD = [
    ('root ::= TagDispatch(("", r))\nr ::= "x"', "a trigger must not be empty"),
    ('root ::= TagDispatch((1, r))\nr ::= "x"', "expected a trigger (a string literal)"),
    ('root ::= TagDispatch((r, "a"))\nr ::= "x"', "expected a trigger (a string literal)"),
    ('root ::= TagDispatch(("a", r), ("a", r))\nr ::= "x"', 'the trigger "a" twice'),
    ('root ::= TagDispatch(("a", r), ("a", s))\nr ::= "x"\ns ::= "y"', 'the trigger "a" twice'),
    ('root ::= TagDispatch(("a", "r"))\nr ::= "x"', "expected a rule name"),
    ('root ::= TagDispatch(("a", r, r))\nr ::= "x"', 'pair ("trigger", rule)'),
    ('root ::= TagDispatch(("a"))\nr ::= "x"', 'pair ("trigger", rule)'),
    ('root ::= TagDispatch("a", r)\nr ::= "x"', 'expected a ("trigger", rule) pair'),
    ('root ::= TagDispatch(("a", nope))', 'rule "nope" is not defined'),
    ('root ::= TagDispatch(("a", r), stop_eos=true)\nr ::= "x"', "found 'stop_eos'"),
    ('root ::= TagDispatch(("a", r), loop_after_dispatch=1)\nr ::= "x"', "must be true or false"),
    ('root ::= TagDispatch(("a", r), loop_after_dispatch=yes)\nr ::= "x"', "must be true or false"),
    ('root ::= TagDispatch(("a", r), loop_after_dispatch=true, loop_after_dispatch=false)\nr ::= "x"', "given twice"),
    ('root ::= TagDispatch(("a", r), excludes="b")\nr ::= "x"', "excludes must be a tuple"),
    ('root ::= TagDispatch(("a", r), excludes=(""))\nr ::= "x"', "an excluded string must not be empty"),
    ('root ::= TagDispatch(("a", r), excludes=(b))\nr ::= "x"', "expected an excluded string"),
    ('root ::= TagDispatch(("ab", r), excludes=("a",))\nr ::= "x"', 'the excluded string "a" occurs in the trigger "ab"'),
    ('root ::= TagDispatch(("abc", r), excludes=("bc",))\nr ::= "x"', 'the excluded string "bc" occurs in the trigger "abc"'),
    ('root ::= TagDispatch(("a", r),)\nr ::= "x"', "expected an argument after ','"),
    ('root ::= TagDispatch(("a", r)\nr ::= "x"', "expected ',' or ')'"),
    ('root ::= TagDispatch(("a", r) ("b", r))\nr ::= "x"', "expected ',' or ')'"),
    ('root ::= "x" (= TagDispatch(("a", r)))\nr ::= "x"', "cannot be used inside a lookahead"),
    ('root ::= "x" (= d)\nd ::= TagDispatch(("a", r))\nr ::= "x"', "cannot be used inside a lookahead"),
]


@pytest.mark.parametrize("ebnf, message", BAD)
def test_bad_input_is_a_grammar_error_with_its_position(ebnf, message):
    with pytest.raises(GrammarError) as e:
        xgr.Grammar.from_ebnf(ebnf)
    assert message in str(e.value)
    if "lookahead" not in message:
        assert "line " in str(e.value) and "column " in str(e.value)


def test_absurd_counts_are_limits():
    many = ", ".join(f'("t{i}", r)' for i in range(70000))
    with pytest.raises(LimitExceededError, match="more than 65536 triggers"):
        xgr.Grammar.from_ebnf(f'root ::= TagDispatch({many})\nr ::= "x"')
    long = "a" * 300000
    with pytest.raises(LimitExceededError, match="bytes of triggers"):
        xgr.Grammar.from_ebnf(f'root ::= TagDispatch(("{long}", r))\nr ::= "x"')
    # a state per byte of a long trigger, each with a row of 127 entries: too many edges
    excl = ", ".join(f'"\\x{i:02x}"' for i in range(1, 128) if chr(i) not in 'a"\\')
    with pytest.raises(LimitExceededError, match="automaton edges"):
        xgr.Grammar.from_ebnf(f'root ::= TagDispatch(("{"a" * 40000}", r), excludes=({excl}))\nr ::= "x"')


def test_a_trigger_whose_rule_matches_nothing_is_never_dispatched():
    g = xgr.Grammar.from_ebnf('root ::= TagDispatch(("<a", r), ("<b", dead))\nr ::= "!"\ndead ::= "x" dead')
    assert str(xgr.Grammar.from_ebnf(str(g))) == str(g)
    c = BYTES.compile_grammar(g)
    assert _ours(c, b"q<a!") and not _ours(c, b"q<b") and not _ours(c, b"q<bx") and _ours(c, b"q<")


def test_empty_trigger_list_is_text_without_the_excluded_strings():
    """XGrammar's any_text with excludes emits this form."""
    c = BYTES.compile_grammar('root ::= TagDispatch(loop_after_dispatch=false, excludes=("</end>", "<|x|>"))')
    assert _ours(c, b"") and _ours(c, b"some </en text") and not _ours(c, b"a</end>") and not _ours(c, b"<|x|>")


# ---------------------------------------------------------------------------------------
# Masks on a real vocabulary
# ---------------------------------------------------------------------------------------

DEEPSEEK_SPECS = [
    Spec([(b"<tool_call>", "call"), (b"<function=", "fn"), (b"<think>", "think")],
         {"call": [b'{"name": "f"}</tool_call>', b"{}</tool_call>"], "fn": [b"get>{}</function>", b"set>{}</function>"],
          "think": [b"hmm</think>", b"</think>"]},
         [b"<|im_end|>", b"</tool_call>"], True),
    Spec([(b"<a", "r1"), (b"<ab", "r2"), (b"b>", "r3"), (b"x", "r4")],
         {"r1": [b"1", b""], "r2": [b"2>"], "r3": [b"3"], "r4": [b"yz", b"b>3"]}, [b">>", b"zz"], True),
    Spec([(b" call", "args")], {"args": [b"(1)", b"()"]}, [b"\n\n"], False),
]


def _valid_texts(spec: Spec, rng: random.Random, n: int):
    words = ["Sure", " I", " will", " call", " the", " tool", "<", "a", "b", ">", " x", "\n", "ok", "<to"]
    out = []
    while len(out) < n:
        s = b""
        for _ in range(rng.randint(1, 3)):
            s += "".join(rng.choice(words) for _ in range(rng.randint(0, 4))).encode()
            t, r = rng.choice(spec.triggers)
            s += t + rng.choice(spec.rules[r])
            if not spec.loop:
                break
        if spec.loop:
            s += "".join(rng.choice(words) for _ in range(rng.randint(0, 3))).encode()
        if spec.full(s):
            out.append(s)
    return out


@pytest.mark.parametrize("k", range(len(DEEPSEEK_SPECS)))
def test_mask_bit_is_what_a_fork_accepts(deepseek, k):
    spec = DEEPSEEK_SPECS[k]
    v = deepseek
    compiled = v.compile(spec.ebnf())
    rng = random.Random(k)
    np_rng = np.random.default_rng(k)
    V = v.vocab_size
    specials = [t for t in v.special_ids if t != v.stop_id]
    for text in _valid_texts(spec, rng, 3):
        ids = v.encode(text.decode())
        m = xgr.GrammarMatcher(compiled)
        so_far = b""
        for step, nxt in enumerate(ids + [v.stop_id]):
            bits = bits_of_row(fill(m, V), V)
            where = f"spec {k} after {so_far!r}"
            assert bits[nxt], f"{where}: the next token {nxt} is not allowed"
            assert not bits[specials].any() and not bits[v.n_real:].any(), where
            assert bool(bits[v.stop_id]) == m.is_completed() == spec.full(so_far), where
            allowed, banned = np.flatnonzero(bits), np.flatnonzero(bits == 0)
            for t in np_rng.choice(allowed, size=min(150, len(allowed)), replace=False).tolist():
                assert m.fork().accept_token(t), f"{where}: allowed {v.token_bytes[t]!r} rejected"
            for t in np_rng.choice(banned, size=min(300, len(banned)), replace=False).tolist():
                assert not m.fork().accept_token(t), f"{where}: banned {v.token_bytes[t]!r} accepted"
            assert m.accept_token(nxt), where
            if nxt != v.stop_id:
                so_far += v.token_bytes[nxt]
        assert m.is_terminated()


def test_random_walks_end_in_valid_text(deepseek):
    """Walks over allowed tokens, preferring pieces of the triggers and rules: whenever
    the matcher says completed, the reference agrees, and the reverse."""
    spec = DEEPSEEK_SPECS[1]
    v = deepseek
    compiled = v.compile(spec.ebnf())
    V = v.vocab_size
    rng = np.random.default_rng(5)
    pieces = {b"<", b"a", b"b", b">", b"<a", b"<ab", b"x", b"y", b"z", b"1", b"2", b"3", b" "}
    favored = np.array([t for t in range(v.n_real) if v.token_bytes[t] in pieces])
    for _ in range(6):
        m = xgr.GrammarMatcher(compiled)
        text = b""
        for _ in range(40):
            bits = bits_of_row(fill(m, V), V)
            assert m.is_completed() == spec.full(text), text
            cand = favored[bits[favored] == 1]
            t = int(rng.choice(cand)) if len(cand) and rng.random() < 0.9 else int(rng.choice(np.flatnonzero(bits)))
            if t == v.stop_id:
                break
            assert m.accept_token(t)
            text += v.token_bytes[t]


# ---------------------------------------------------------------------------------------
# Cost
# ---------------------------------------------------------------------------------------


def _names(n: int, rng: random.Random):
    out = set()
    while len(out) < n:
        out.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(4, 14))))
    return sorted(out)


def _fill_work(compiled, vocab_size, text_ids=()):
    m = xgr.GrammarMatcher(compiled)
    for t in text_ids:
        assert m.accept_token(t)
    bm = xgr.allocate_token_bitmask(1, vocab_size)
    m.fill_next_token_bitmask(bm)
    cold = lib.xg2_matcher_last_fill_work(m._handle)
    m.fill_next_token_bitmask(bm)
    return cold, lib.xg2_matcher_last_fill_work(m._handle)


def test_cost_does_not_grow_with_the_number_of_strings(deepseek):
    """Deterministic measures: automaton states at most one per byte of the strings
    (plus the end state); the work of the first (cold) and of a repeated (warm) mask of
    the free-text state, and of the state inside a partial match, the same for 1 and
    1,000 triggers or excluded strings (XGrammar issue 873: linear there)."""
    v = deepseek
    rng = random.Random(11)
    prefix = v.encode("Sure, let me think. <")
    for kind in ("triggers", "excludes", "words"):
        works = []
        for n in (1, 10, 100, 1000):
            ns = _names(n, rng)
            if kind == "triggers":
                pairs = ", ".join(f'("<function={x}>", t)' for x in ns)
                ebnf = f'root ::= TagDispatch({pairs})\nt ::= "{{\\"k\\": " [0-9]+ "}}</function>"\n'
                strings = sum(len(x) + 11 for x in ns)
            elif kind == "words":  # any text but these words: no state is a free-text loop
                excl = ", ".join(f'"{x}"' for x in ns)
                ebnf = f'root ::= TagDispatch(("<tool>", t), excludes=({excl}))\nt ::= "x</tool>"\n'
                strings = sum(len(x) for x in ns) + 6
            else:
                excl = ", ".join(f'"<{x}>"' for x in ns)
                ebnf = f'root ::= TagDispatch(("<tool>", t), excludes=({excl}))\nt ::= "x</tool>"\n'
                strings = sum(len(x) + 2 for x in ns) + 6
            g = xgr.Grammar.from_ebnf(ebnf)
            assert g.num_states <= strings + 2 + 20, (kind, n, g.num_states)  # (20: the rule t)
            compiled = v.compiler.compile_grammar(g)
            works.append((_fill_work(compiled, v.vocab_size), _fill_work(compiled, v.vocab_size, prefix)))
            if kind == "words" and n == 1000:  # inside a word: the start's split, and a walk under a few bytes
                inside = _fill_work(compiled, v.vocab_size, v.encode("Sure " + ns[0][:3]))[0]
                assert inside < works[-1][0][0] / 2, (inside, works[-1])
        if kind == "words":
            assert works[0][0][0] > 50000  # (a real walk of the vocabulary: the measure measures)
        (cold1, warm1), (pcold1, pwarm1) = works[0]
        for (cold, warm), (pcold, pwarm) in works[1:]:
            assert cold <= 2 * cold1 + 5000 and pcold <= 2 * pcold1 + 5000, (kind, works)
            assert warm <= 2 * warm1 + 100 and pwarm <= 2 * pwarm1 + 100, (kind, works)
