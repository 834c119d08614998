"""Token edges in the core: ``Token(id, ...)``, ``ExcludeToken(id, ...)``,
``TokenTagDispatch(...)`` (XGrammar 0.2.8's EBNF syntax) and the rule attributes
``name[max_tokens=N, max_chars=M] ::= ...``.

Oracles:

* on the DeepSeek vocabulary (1,230 special tokens), along random walks of grammars
  that mix token edges with text: the mask bit of every special token, every member
  of the grammar's token sets and sampled others equals whether a fork accepts the
  token (every token id at some steps); completion equals the stop token's bit;
* the same on the real o200k vocabulary along Harmony transcripts (the markers are
  special tokens that only token edges take);
* XGrammar 0.2.8 (a test dependency) on a byte vocabulary with no special tokens:
  random grammars of token edges and text, whole masks compared step by step (where
  they differ, XGrammar's own accept of the token decides: its mask bans the tokens
  only one of two alternative ``ExcludeToken`` edges excludes, which it accepts);
* rollback, fork, reset, bounded history and a stop token that is the grammar's
  last terminal keep the mask = accept contract;
* printing and parsing back gives the same grammar; bad input is a GrammarError
  naming where.
"""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest

import xg2_plugin as ours
from xg2_plugin import GrammarError, LimitExceededError
import o200k_harmony
from vocabs import bits_of_row, fill

# ---------------------------------------------------------------------------------------
# DeepSeek: mask bit == fork accept along random walks
# ---------------------------------------------------------------------------------------


def _deepseek_grammars(v):
    s1, s2, s3 = 128000, 128001, 128002  # special (control) tokens: no text
    p1 = v.encode(" the")[0]
    p2 = v.encode("ab")[0]
    return [
        f'root ::= Token({s1}) "x" (ExcludeToken({s2}, {p1}))* Token({s2})',
        f'root ::= ("a" | Token({p2}, {s1})) ("bc" Token({s2}, {p1}))* ExcludeToken()?',
        f"root ::= TokenTagDispatch(({s1}, call), ({s3}, call), excludes=({p2}), loop_after_dispatch=true)\n"
        f'call ::= "{{" [a-z ]* "}}" Token({s2})',
        f'root ::= Token({s1}) body Token({s2})\nbody[max_tokens=3] ::= [^<>]*',
        f'root ::= (Token({s1}) t ">")+\nt[max_chars=7] ::= [a-z ]*',
    ], [s1, s2, s3, p1, p2]


def _walk_check(m, v, members, rng, np_rng, everything):
    """One step's checks; returns the allowed ids."""
    V = v.vocab_size
    bits = bits_of_row(fill(m, V), V)
    assert not bits[v.n_real:].any(), "a padding id is allowed"
    assert bool(bits[v.stop_id]) == m.is_completed()
    allowed, banned = np.flatnonzero(bits), np.flatnonzero(bits == 0)
    if everything:
        check = range(V)
    else:
        check = set(v.special_ids) | set(members)
        check |= set(np_rng.choice(allowed, size=min(100, len(allowed)), replace=False).tolist())
        check |= set(np_rng.choice(banned, size=min(200, len(banned)), replace=False).tolist())
    for t in check:
        assert m.fork().accept_token(int(t)) == bool(bits[t]), (t, v.token_bytes[t], bool(bits[t]))
    return allowed


@pytest.mark.parametrize("k", range(5))
def test_mask_bit_is_what_a_fork_accepts(deepseek, k):
    v = deepseek
    grammars, members = _deepseek_grammars(v)
    compiled = v.compiler.compile_grammar(grammars[k])
    rng, np_rng = random.Random(k), np.random.default_rng(k)
    specials = set(v.special_ids)
    for walk in range(3):
        m = ours.GrammarMatcher(compiled)
        for step in range(14):
            allowed = _walk_check(m, v, members, rng, np_rng, everything=walk == 0 and step == 1 and k < 2)
            if m.is_completed() and (step > 8 or rng.random() < 0.15):
                assert m.accept_token(v.stop_id) and m.is_terminated()
                break
            pick = [t for t in allowed.tolist() if t in specials or t in members or v.token_bytes[t] in (b"a", b"bc", b"x")]
            ok = [t for t in allowed.tolist() if t != v.stop_id]
            if not ok:
                break
            t = rng.choice(pick) if pick and rng.random() < 0.6 else rng.choice(ok)
            assert m.accept_token(t)


def test_special_tokens_only_through_token_edges(deepseek):
    v = deepseek
    s1 = 128000
    g = v.compiler.compile_grammar(f'root ::= "<" [^>]* ">" Token({s1})')
    m = ours.GrammarMatcher(g)
    bits = bits_of_row(fill(m, v.vocab_size), v.vocab_size)
    assert not bits[v.special_ids].any()  # not text, not a token edge here
    assert m.accept_string("<x>") and not m.accept_string("<|x|>")
    bits = bits_of_row(fill(m, v.vocab_size), v.vocab_size)
    assert np.flatnonzero(bits).tolist() == [s1]  # only the edge, no bytes
    assert not m.accept_string(b"\x00") and m.accept_token(s1) and m.is_completed()


# ---------------------------------------------------------------------------------------
# Harmony on o200k: the markers are special tokens
# ---------------------------------------------------------------------------------------

SPECIAL, N_O200K = o200k_harmony.SPECIAL, o200k_harmony.N_VOCAB
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TRANSCRIPT = ("<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant<|channel|>commentary "
              'to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>')


@functools.lru_cache(maxsize=1)
def _o200k():
    enc, vocab = o200k_harmony.load()
    info = ours.TokenizerInfo(vocab, special_token_ids=list(range(199998, N_O200K)),
                              stop_token_ids=[SPECIAL["<|return|>"], SPECIAL["<|call|>"]])
    return enc, vocab, info


def test_harmony_mask_oracle_on_o200k():
    enc, vocab, info = _o200k()
    compiled = ours.GrammarCompiler(info).compile_structural_tag(ours.get_model_structural_tag("harmony", TOOLS))
    tokens = o200k_harmony.tokens(TRANSCRIPT)
    np_rng = np.random.default_rng(7)
    m = ours.GrammarMatcher(compiled)
    V = info.vocab_size
    markers = list(range(199998, 200013))
    for i, t in enumerate(tokens):
        bits = bits_of_row(fill(m, V), V)
        assert bits[t], (i, vocab[t])
        allowed, banned = np.flatnonzero(bits), np.flatnonzero(bits == 0)
        if i == 3:  # free text of the analysis channel: every token id
            check = range(V)
        else:
            check = set(markers) | set(np_rng.choice(allowed, size=min(60, len(allowed)), replace=False).tolist())
            check |= set(np_rng.choice(banned, size=min(60, len(banned)), replace=False).tolist())
        for c in check:
            assert m.fork().accept_token(int(c)) == bool(bits[c]), (i, c, vocab[c])
        assert m.accept_token(t)
    assert m.is_terminated()  # <|call|>: the last terminal and a stop token
    m.rollback(1)
    assert not m.is_terminated() and not m.is_completed()
    assert m.accept_token(SPECIAL["<|call|>"]) and m.is_terminated()


def test_harmony_spelled_marker_is_text_not_a_marker():
    enc, vocab, info = _o200k()
    compiled = ours.GrammarCompiler(info).compile_structural_tag(ours.get_model_structural_tag("harmony", TOOLS))
    good = o200k_harmony.tokens(TRANSCRIPT)
    at = TRANSCRIPT.index("<|channel|>commentary")
    spelled = (o200k_harmony.tokens(TRANSCRIPT[:at]) + enc.encode_ordinary("<|channel|>")
               + o200k_harmony.tokens(TRANSCRIPT[at + len("<|channel|>"):]))

    def run(ts):
        m = ours.GrammarMatcher(compiled)
        return all(m.accept_token(t) for t in ts) and m.is_terminated()

    assert run(good) and not run(spelled)


# ---------------------------------------------------------------------------------------
# Differential: XGrammar 0.2.8 on a byte vocabulary with no special tokens
# ---------------------------------------------------------------------------------------

XVOCAB = [bytes([b]) for b in range(256)] + [b"<s1>", b"<s2>", b"ab", b"</s>"]
XSTOP = 259
IDS = [97, 98, 256, 257, 258]


def _rand_ast(rng, depth):
    r = rng.random()
    if depth >= 2 or r < 0.45:
        kind = rng.randrange(5)
        if kind < 2:
            return ("tok" if kind == 0 else "ex", tuple(sorted(rng.sample(IDS, rng.randint(1, 3)))))
        return ("lit", rng.choice([b"a", b"ab", b"<s1>", b"b", b"ba"]))
    if r < 0.65:
        return ("seq", [_rand_ast(rng, depth + 1) for _ in range(rng.randint(2, 3))])
    if r < 0.85:
        return ("alt", [_rand_ast(rng, depth + 1) for _ in range(rng.randint(2, 3))])
    return (rng.choice(["star", "opt", "plus"]), _rand_ast(rng, depth + 1))


def _ebnf(a):
    k = a[0]
    if k in ("tok", "ex"):
        return f"{'Token' if k == 'tok' else 'ExcludeToken'}({', '.join(map(str, a[1]))})"
    if k == "lit":
        return '"' + a[1].decode() + '"'
    if k in ("seq", "alt"):
        return "(" + (" " if k == "seq" else " | ").join(_ebnf(x) for x in a[1]) + ")"
    return "(" + _ebnf(a[1]) + ")" + {"star": "*", "opt": "?", "plus": "+"}[k]


class _Nfa:
    """The reference: a Thompson NFA over bytes and token edges, run on token ids
    (a token moves over a token edge that takes it, or over its bytes)."""

    def __init__(self, ast):
        self.eps, self.byte, self.tok = {}, {}, {}
        self.n = 0
        self.start, self.final = self._build(ast)

    def _new(self):
        self.n += 1
        return self.n - 1

    def _build(self, a):
        k, s, f = a[0], self._new(), self._new()
        if k in ("tok", "ex"):
            self.tok.setdefault(s, []).append((k, a[1], f))
        elif k == "lit":
            cur = s
            for i, b in enumerate(a[1]):
                nxt = f if i == len(a[1]) - 1 else self._new()
                self.byte.setdefault(cur, []).append((b, nxt))
                cur = nxt
        elif k in ("seq", "alt"):
            parts = [self._build(x) for x in a[1]]
            if k == "seq":
                self.eps.setdefault(s, []).append(parts[0][0])
                for (_, f1), (s2, _) in zip(parts, parts[1:]):
                    self.eps.setdefault(f1, []).append(s2)
                self.eps.setdefault(parts[-1][1], []).append(f)
            else:
                for s1, f1 in parts:
                    self.eps.setdefault(s, []).append(s1)
                    self.eps.setdefault(f1, []).append(f)
        else:
            s1, f1 = self._build(a[1])
            self.eps.setdefault(s, []).append(s1)
            self.eps.setdefault(f1, []).append(f)
            if k in ("star", "opt"):
                self.eps[s].append(f)
            if k in ("star", "plus"):
                self.eps[f1].append(s1)
        return s, f

    def close(self, states):
        out, stack = set(states), list(states)
        while stack:
            for t in self.eps.get(stack.pop(), ()):
                if t not in out:
                    out.add(t)
                    stack.append(t)
        return frozenset(out)

    def step(self, states, t):
        nxt = set()
        for q in states:
            for kind, ids, to in self.tok.get(q, ()):
                if (t in ids) == (kind == "tok") and t != XSTOP:
                    nxt.add(to)
        cur = states
        for b in XVOCAB[t] if t != XSTOP else b"":
            cur = self.close({to for q in cur for c, to in self.byte.get(q, ()) if c == b})
        if t != XSTOP:
            nxt |= cur
        return self.close(nxt)


@functools.lru_cache(maxsize=1)
def _x_compilers():
    xgr = pytest.importorskip("xgrammar", reason="xgrammar 0.2.8 is the differential oracle (a test dependency)")
    return (xgr, ours.GrammarCompiler(ours.TokenizerInfo(XVOCAB, stop_token_ids=[XSTOP]), cache_enabled=False),
            xgr.GrammarCompiler(xgr.TokenizerInfo(XVOCAB, stop_token_ids=[XSTOP]), cache_enabled=False))


@pytest.mark.parametrize("seed", range(12))
def test_masks_agree_with_the_reference_and_xgrammar(seed):
    """Every token's mask bit = the reference NFA's verdict; XGrammar's mask agrees
    except where it is wrong by the reference (counted: it takes two alternative
    ExcludeToken edges as the intersection of their sets, and a token taken both as
    a token edge and as text loses the token-edge path at the next token edge)."""
    xgr, oc, xc = _x_compilers()
    rng = random.Random(seed)
    for g in range(8):
        ast = ("seq", [_rand_ast(rng, 0) for _ in range(rng.randint(1, 3))])
        ebnf, nfa = "root ::= " + _ebnf(ast), _Nfa(ast)
        og, xg = oc.compile_grammar(ebnf), xc.compile_grammar(ebnf)
        for _ in range(3):
            om, xm = ours.GrammarMatcher(og), xgr.GrammarMatcher(xg)
            states, xgr_ok = nfa.close({nfa.start}), True
            for step in range(10):
                obits = bits_of_row(fill(om, 260), 260)
                ref = np.array([bool(nfa.step(states, t)) for t in range(259)] + [nfa.final in states], dtype=np.uint8)
                assert (obits == ref).all(), (ebnf, step, np.flatnonzero(obits != ref).tolist())
                if xgr_ok:
                    xbm = xgr.allocate_token_bitmask(1, 260)
                    xm.fill_next_token_bitmask(xbm)
                    xgr_ok = (bits_of_row(xbm[0].numpy().copy(), 260) == ref).all()
                    _XGR_WRONG[0] += 1
                    _XGR_WRONG[1] += not xgr_ok
                allowed = np.flatnonzero(obits).tolist()
                if not allowed:
                    break
                t = rng.choice(allowed)
                assert om.accept_token(t)
                if xgr_ok:
                    xgr_ok = xm.accept_token(t)
                if t == XSTOP:
                    assert om.is_terminated()
                    break
                states = nfa.step(states, t)
    assert _XGR_WRONG[1] < _XGR_WRONG[0] // 4  # XGrammar agrees on most steps (a check on the check)


_XGR_WRONG = [0, 0]  # steps compared with XGrammar, steps where its mask was wrong


# ---------------------------------------------------------------------------------------
# Matcher contract: rollback, fork, reset, history, stop token as last terminal
# ---------------------------------------------------------------------------------------

SVOCAB = [bytes([b]) for b in range(256)] + [b"<s1>", b"<s2>", b"<|x|>", b"</s>"]
S1, S2, X, STOP = 256, 257, 258, 259


@functools.lru_cache(maxsize=1)
def _scompiler():
    return ours.GrammarCompiler(ours.TokenizerInfo(SVOCAB, special_token_ids=[S1, S2, X], stop_token_ids=[STOP, S2]),
                                cache_enabled=False)


def _mask(m):
    return bits_of_row(fill(m, 260), 260)


def test_rollback_fork_reset_keep_masks():
    g = _scompiler().compile_grammar(f'root ::= (Token({S1}) [a-z]+ Token({X}) | ExcludeToken({S1}, {X}))* Token({S2})')
    rng = random.Random(3)
    m = ours.GrammarMatcher(g)
    masks, seq = [_mask(m)], []
    for _ in range(40):
        allowed = [t for t in np.flatnonzero(masks[-1]).tolist() if t != S2]
        t = rng.choice([t for t in allowed if t in (S1, X)] or allowed) if rng.random() < 0.5 else rng.choice(allowed)
        assert m.accept_token(t)
        seq.append(t)
        masks.append(_mask(m))
    f = m.fork()
    for n in (1, 5, 17):
        m.rollback(n)
        assert (_mask(m) == masks[-1 - n]).all()
        for t in seq[len(seq) - n:]:
            assert m.accept_token(t)
        assert (_mask(m) == masks[-1]).all()
    assert (_mask(f) == masks[-1]).all()
    assert f.accept_token(S2) and f.is_terminated()  # S2: a stop token and the last terminal
    f.rollback(1)
    assert not f.is_terminated() and (_mask(f) == masks[-1]).all()
    m.reset()
    assert (_mask(m) == masks[0]).all()


def test_equal_token_edges_share_one_rule():
    # (a Harmony tag writes <|constrain|> and <|message|> once per tool: one rule each)
    text = (f'root ::= Token({S1}) "a" | Token({S1}, {S1}) "b" | Token({X}) Token({S1}) "c" | '
            f'ExcludeToken({S1}) "d" | ExcludeToken({S1}) "e"')
    printed = str(ours.Grammar.from_ebnf(text))
    assert printed.count(f"::= Token({S1})") == 1 and printed.count(f"::= Token({X})") == 1
    assert printed.count(f"::= ExcludeToken({S1})") == 1
    g = _scompiler().compile_grammar(text)
    for seq in ([S1, ord("a")], [S1, ord("b")], [X, S1, ord("c")], [ord("q"), ord("d")], [ord("q"), ord("e")]):
        m = ours.GrammarMatcher(g)
        for t in seq:
            mask = _mask(m)
            assert mask[t] and m.accept_token(t)
        assert m.is_completed()
    m = ours.GrammarMatcher(g)
    assert m.accept_token(S1)
    mask = _mask(m)
    assert mask[ord("a")] and mask[ord("b")] and not mask[ord("c")] and not mask[ord("d")]
    assert not ours.GrammarMatcher(g).accept_token(S2)


def test_bounded_history_with_token_steps():
    g = _scompiler().compile_grammar(f'root ::= (ExcludeToken({S1}) | Token({S1}) "a")*')
    m = ours.GrammarMatcher(g, max_rollback_tokens=3)
    rng = random.Random(5)
    peak = 0
    for i in range(6000):
        t = S1 if i % 7 == 0 else rng.choice([97, 98, 120])
        if t == S1:
            assert m.accept_token(S1) and m.accept_token(97)
        else:
            assert m.accept_token(t)
        if i > 1000:
            peak = max(peak, m.history_bytes)
    assert peak < 64 << 10, peak  # bounded: does not grow with the 6,000 steps
    m.rollback(3)
    assert m.accept_token(S1)


def test_special_token_never_text_nor_any_token():
    c = _scompiler()
    g = c.compile_grammar("root ::= ExcludeToken(97)*")
    m = ours.GrammarMatcher(g)
    bits = _mask(m)
    assert not bits[[S1, X, 97]].any() and bits[98] and bits[STOP] and bits[S2]  # (S2: a stop token, and it may end)
    assert not m.accept_token(X) and m.accept_token(98)
    g = c.compile_grammar('root ::= [^\\x00]* "!"')
    m = ours.GrammarMatcher(g)
    assert not m.accept_token(S1) and m.accept_string("<s1>!")


# ---------------------------------------------------------------------------------------
# Budgets: max_tokens / max_chars
# ---------------------------------------------------------------------------------------


def test_max_tokens_and_chars_bound_each_occurrence():
    c = _scompiler()
    g = c.compile_grammar(f'root ::= (Token({S1}) t Token({X}))+\nt[max_tokens=2, max_chars=3] ::= [a-z]*')

    def run(seq):
        m = ours.GrammarMatcher(g)
        for t in seq:
            bit = bool(_mask(m)[t])
            ok = m.accept_token(t)
            assert bit == ok
            if not ok:
                return False
        return m.is_completed()

    assert run([S1, 97, 98, X]) and run([S1, X]) and run([S1, 97, X, S1, 97, 98, X])
    assert not run([S1, 97, 98, 99, X])  # a third token
    m = ours.GrammarMatcher(g)
    assert m.accept_token(S1) and m.accept_string("abc") and not m.accept_string("d")  # (a string is one step)
    m = ours.GrammarMatcher(g)
    assert m.accept_token(S1) and not m.accept_string("abcd")  # the fourth code point


def test_budget_refused_where_not_supported():
    c = _scompiler()
    with pytest.raises(GrammarError, match="calls other rules"):
        c.compile_grammar('root ::= t\nt[max_tokens=2] ::= "(" t ")" | ""')
    with pytest.raises(GrammarError, match="line 1, column 7: the rule attribute 'lazy' is not supported"):
        c.compile_grammar('root [lazy] ::= "a"')
    with pytest.raises(GrammarError, match="max_tokens is given twice"):
        c.compile_grammar('root[max_tokens=1, max_tokens=2] ::= "a"')


# ---------------------------------------------------------------------------------------
# Printing, bad input
# ---------------------------------------------------------------------------------------

PRINTS = [
    f'root ::= Token({S1}, 97) "a" ExcludeToken()* Token({S2})',
    f"root ::= TokenTagDispatch(({S1}, r), excludes=({X}))\nr ::= \"x\"",
    f"root ::= TokenTagDispatch(({S1}, r), ({S2}, r), loop_after_dispatch=false)\nr ::= [a-z]+",
    'root ::= "<" t ">"\nt[max_chars=4, max_tokens=9] ::= [a-z]*',
]


@pytest.mark.parametrize("ebnf", PRINTS)
def test_print_parses_back_the_same(ebnf):
    once = str(ours.Grammar.from_ebnf(ebnf))
    assert str(ours.Grammar.from_ebnf(once)) == once
    assert "Token(" in once or "max_" in once


BAD = [
    ("root ::= Token()", r"line 1, column 16: Token\(\) needs at least one token id"),
    ("root ::= Token(-1)", r"line 1, column 16: Token\(...\) takes non-negative integer token ids"),
    ("root ::= Token(1.5)", r"line 1, column 17: expected ',' or '\)' in Token\(...\)"),
    ('root ::= Token("a")', r"line 1, column 16: Token\(...\) takes non-negative integer"),
    ("root ::= ExcludeToken(1, x)", r"line 1, column 26: ExcludeToken\(...\) takes non-negative integer"),
    ("root ::= Token(99999999999)", r"line 1, column \d+: a token id in Token\(...\) exceeds 2147483647"),
    ("root ::= TokenTagDispatch((1, r), (1, r))\nr ::= \"a\"", r"the trigger token 1 twice"),
    ("root ::= TokenTagDispatch((1, r), excludes=(1))\nr ::= \"a\"", r"trigger token 1 is also excluded"),
    ("root ::= TokenTagDispatch((1, r), stop=(1))\nr ::= \"a\"", r"line 1, column 35: TokenTagDispatch\(...\) takes"),
    ('root ::= TokenTagDispatch(("a", r))\nr ::= "a"', r"line 1, column 28: TokenTagDispatch\(...\) takes non-negative"),
    ("root ::= TokenTagDispatch((1, nope))", r"rule \"nope\" is not defined"),
    ('root ::= "a" (= Token(1))', r"cannot be used inside a lookahead assertion"),
]


@pytest.mark.parametrize("ebnf,pattern", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_is_a_grammar_error(ebnf, pattern):
    with pytest.raises(GrammarError, match=pattern):
        _scompiler().compile_grammar(ebnf)


def test_token_id_beyond_the_vocabulary():
    with pytest.raises(GrammarError, match=r'line 1, column 14 \(rule "root_token1_1"\): Token\(...\) names token id 260, '
                                           r"beyond this vocabulary's 260 tokens"):
        _scompiler().compile_grammar('root ::= "a" Token(5, 260)')
    with pytest.raises(GrammarError, match=r"line 2, column 3 .*ExcludeToken\(...\) names token id 999"):
        _scompiler().compile_grammar('root ::= "a"\n  ExcludeToken(999)')
    with pytest.raises(GrammarError, match=r"line 1, column 10 .*Token\(...\) names token id 300"):
        _scompiler().compile_grammar('root ::= TokenTagDispatch((300, r))\nr ::= "a"')


def test_too_many_ids_is_a_limit():
    ids = ", ".join(["7"] * ((1 << 20) + 1))
    with pytest.raises(LimitExceededError, match="more than 1048576 token ids"):
        _scompiler().compile_grammar(f"root ::= Token({ids})")
