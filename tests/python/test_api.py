"""Acceptance criterion 5: XGrammar-compatible API behaviour on small RAW vocabularies."""

import json
import random
import string
import threading

import numpy as np
import pytest
import torch

import xg2_plugin as xgr
from vocabs import CASES, bits_of_row, fill

# ---- a tiny vocabulary -----------------------------------------------------------------

TINY = ["a", "b", "c", "ab", "hello", " ", "hello ", "</s>", "<s>", "<|im_end|>",
        "x", "y", "é", "日", "本", "語", "<", "s", ">", "1", "{", "}", "\"", ":"]
T = {t: i for i, t in enumerate(TINY)}
STOP, SPECIAL, ALT_STOP = T["</s>"], T["<s>"], T["<|im_end|>"]
TINY_V = len(TINY) + 9  # padded


@pytest.fixture(scope="module")
def tiny():
    info = xgr.TokenizerInfo(TINY, xgr.VocabType.RAW, vocab_size=TINY_V,
                             stop_token_ids=[STOP], special_token_ids=[SPECIAL])
    return xgr.GrammarCompiler(info)


def allowed(m, V=TINY_V):
    return set(np.flatnonzero(bits_of_row(fill(m, V), V)).tolist())


def ids(*texts):
    return {T[t] for t in texts}


# ---- a medium random vocabulary (batch and thread tests) --------------------------------


def _medium_vocab(n=6000, seed=5):
    rng = np.random.default_rng(seed)
    alphabet = list(string.ascii_letters + string.digits + " {}[]\",:.-+eE\\/\n\t") + ["é", "日", "😀"]
    toks = sorted(set(string.printable) | {"é", "日", "😀", "true", "false", "null"})
    seen = set(toks)
    while len(toks) < n:
        t = "".join(rng.choice(alphabet, size=int(rng.integers(2, 7))))
        if t not in seen:
            seen.add(t)
            toks.append(t)
    toks += ["</s>", "<pad>"]
    return toks


@pytest.fixture(scope="module")
def medium():
    toks = _medium_vocab()
    info = xgr.TokenizerInfo(toks, xgr.VocabType.RAW, vocab_size=len(toks) + 40,
                             stop_token_ids=[len(toks) - 2], special_token_ids=[len(toks) - 1])
    return info, toks


# ---- accept_string, completion, termination ---------------------------------------------


def test_accept_string_all_or_nothing(tiny):
    m = xgr.GrammarMatcher(tiny.compile_grammar('root ::= "hello " [a-z]+ "!"'))
    before = fill(m, TINY_V)
    assert not m.accept_string("hello Wor")  # rejected at W: nothing is consumed
    assert m.num_accepted_steps == 0 and np.array_equal(fill(m, TINY_V), before)
    assert m.accept_string("hello wor")
    assert m.accept_string("ld") and not m.is_completed()
    assert m.accept_string("!") and m.is_completed() and not m.is_terminated()
    assert m.num_accepted_steps == 3
    assert not m.accept_string("!")
    assert m.accept_string("")  # the empty string is always acceptable
    assert m.accept_token(STOP) and m.is_terminated()


def test_is_completed_vs_is_terminated(tiny):
    m = xgr.GrammarMatcher(tiny.compile_grammar('root ::= "ab" "c"?'))
    assert not m.is_completed() and not m.is_terminated()
    assert STOP not in allowed(m)
    assert not m.accept_token(STOP)  # stop rejected before completion
    assert m.accept_token(T["ab"])
    assert m.is_completed() and not m.is_terminated()
    assert allowed(m) == ids("c", "</s>")
    f = m.fork()
    assert f.accept_token(T["c"]) and f.is_completed() and not f.is_terminated()
    assert allowed(f) == {STOP}
    assert m.accept_token(STOP) and m.is_terminated() and m.is_completed()


def test_fill_after_termination_allows_only_stop_tokens(tiny):
    m = xgr.GrammarMatcher(tiny.compile_grammar('root ::= "a"'), override_stop_tokens=[STOP, ALT_STOP])
    assert m.accept_token(T["a"]) and m.accept_token(ALT_STOP) and m.is_terminated()
    assert allowed(m) == {STOP, ALT_STOP}
    assert m.fork().is_terminated()
    assert allowed(m.fork()) == {STOP, ALT_STOP}


def test_stop_and_special_and_padding_never_as_text(tiny):
    # A grammar whose language contains the special token's text: the text can be
    # spelled with ordinary tokens, the special token itself is never allowed.
    m = xgr.GrammarMatcher(tiny.compile_grammar('root ::= "<s>" | "</s>" | "<|im_end|>" | [^"]*'))
    a = allowed(m)
    assert SPECIAL not in a and not m.fork().accept_token(SPECIAL)
    assert all(t not in a for t in range(len(TINY), TINY_V))
    for t in range(len(TINY), TINY_V):
        assert not m.fork().accept_token(t)
    assert ids("<", "s", ">") <= a
    # The stop token is allowed (the grammar is complete) but as a stop, not as text.
    assert STOP in a
    assert m.accept_string("</s>") and m.is_completed() and not m.is_terminated()
    # <|im_end|> is an ordinary token here (not a stop, not special): allowed as text.
    assert ALT_STOP in allowed(m)


def test_terminate_without_stop_token(tiny):
    c = tiny.compile_grammar('root ::= "ab"')
    m = xgr.GrammarMatcher(c, terminate_without_stop_token=True)
    assert not m.is_terminated()
    assert m.accept_token(T["a"]) and not m.is_terminated()
    assert m.accept_token(T["b"])
    assert m.is_completed() and m.is_terminated()  # terminated without a stop token
    for t in range(TINY_V):
        assert not m.fork().accept_token(t) or t == STOP
    m.rollback(1)
    assert not m.is_terminated()
    # Without the flag the same input is completed but not terminated.
    m2 = xgr.GrammarMatcher(c)
    assert m2.accept_string("ab") and m2.is_completed() and not m2.is_terminated()
    # With an optional continuation: the mask still agrees with accept_token.
    m3 = xgr.GrammarMatcher(tiny.compile_grammar('root ::= "a" "b"?'), terminate_without_stop_token=True)
    assert m3.accept_token(T["a"]) and m3.is_terminated()
    a = allowed(m3)
    for t in range(TINY_V):
        assert m3.fork().accept_token(t) == (t in a), t


def test_override_stop_tokens(tiny):
    c = tiny.compile_grammar('root ::= "a"')
    assert xgr.GrammarMatcher(c).stop_token_ids == [STOP]
    for override in ([ALT_STOP], ALT_STOP):
        m = xgr.GrammarMatcher(c, override_stop_tokens=override)
        assert m.stop_token_ids == [ALT_STOP]
        assert not m.accept_token(ALT_STOP)  # not yet complete
        assert m.accept_token(T["a"])
        a = allowed(m)
        assert ALT_STOP in a and STOP not in a
        assert not m.fork().accept_token(STOP)
        assert m.accept_token(ALT_STOP) and m.is_terminated()
    # The compiled grammar's own matchers are unaffected.
    m = xgr.GrammarMatcher(c)
    m.accept_token(T["a"])
    assert STOP in allowed(m) and ALT_STOP not in allowed(m)


def test_reset(tiny):
    m = xgr.GrammarMatcher(tiny.compile_grammar('root ::= "hello " ("a" | "b")+'))
    initial = fill(m, TINY_V)
    assert m.accept_token(T["hello "]) and m.accept_token(T["ab"]) and m.accept_token(STOP)
    m.reset()
    assert m.num_accepted_steps == 0 and not m.is_terminated() and not m.is_completed()
    assert np.array_equal(fill(m, TINY_V), initial)
    with pytest.raises(ValueError):
        m.rollback(1)
    assert m.accept_token(T["hello"]) and m.accept_token(T[" "]) and m.accept_token(T["b"])
    assert m.is_completed()


def test_fork_independence(tiny):
    m = xgr.GrammarMatcher(tiny.compile_grammar('root ::= ("a" | "b" | "c")+ "x"'))
    assert m.accept_token(T["a"])
    snap = fill(m, TINY_V)
    f = m.fork()
    assert f.num_accepted_steps == 1
    assert f.accept_token(T["x"]) and f.is_completed()
    assert not m.is_completed() and np.array_equal(fill(m, TINY_V), snap)
    assert m.accept_token(T["b"]) and m.accept_token(T["c"])
    assert f.num_accepted_steps == 2 and m.num_accepted_steps == 3
    f.rollback(2)
    assert f.num_accepted_steps == 0 and m.num_accepted_steps == 3
    g = m.fork()
    del m  # a fork outlives its parent
    assert g.accept_token(T["x"]) and g.accept_token(STOP) and g.is_terminated()


def test_left_recursion_and_empty_string(tiny):
    m = xgr.GrammarMatcher(tiny.compile_grammar('root ::= root "a" | "b"'))
    assert m.accept_string("baaa") and m.is_completed()
    m = xgr.GrammarMatcher(tiny.compile_grammar('root ::= ""'))
    assert m.is_completed() and allowed(m) == {STOP}
    assert m.accept_token(STOP) and m.is_terminated()


def test_fill_return_value(tiny):
    info = xgr.TokenizerInfo(["a", "b"], stop_token_ids=[])
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar("root ::= [ab]*"))
    bm = xgr.allocate_token_bitmask(1, 2)
    assert m.fill_next_token_bitmask(bm) is False  # everything allowed: nothing to apply
    m2 = xgr.GrammarMatcher(tiny.compile_grammar('root ::= "a"'))
    assert m2.fill_next_token_bitmask(xgr.allocate_token_bitmask(1, TINY_V)) is True
    assert m2.num_accepted_steps == 0


def test_fill_return_value_reads_every_word():
    """Over 100 tokens (four words, the last one partial): nothing to apply only when every
    token is allowed -- a missing one in the first, a middle or the last word says so."""
    words = [f"{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(100)]  # aa, ab, ..., dv
    info = xgr.TokenizerInfo(words, stop_token_ids=[])
    compiler = xgr.GrammarCompiler(info)
    bm = xgr.allocate_token_bitmask(1, 100)
    m = xgr.GrammarMatcher(compiler.compile_grammar("root ::= [a-d] [a-z] root | [a-d] [a-z]"))
    assert m.fill_next_token_bitmask(bm) is False
    for missing in ("aa", "bq", "dv"):  # words 0, 1, 3
        others = " | ".join(f'"{w}"' for w in words if w != missing)
        m = xgr.GrammarMatcher(compiler.compile_grammar(f"root ::= ({others})+"))
        assert m.fill_next_token_bitmask(bm) is True, missing


def test_numpy_bitmask_and_1d_row(tiny):
    m = xgr.GrammarMatcher(tiny.compile_grammar('root ::= "a" | "b"'))
    expected = fill(m, TINY_V)
    arr = np.zeros((3, expected.shape[0]), dtype=np.int32)
    m.fill_next_token_bitmask(arr, 2)
    assert np.array_equal(arr[2], expected) and not arr[:2].any()
    row = torch.zeros(expected.shape[0], dtype=torch.int32)
    m.fill_next_token_bitmask(row)
    assert np.array_equal(row.numpy(), expected)


# ---- jump-forward -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "grammar, prefix, expected",
    [
        ('root ::= "hello " [a-z]+', "", "hello "),
        ('root ::= "hello " [a-z]+', "hel", "lo "),
        ('root ::= "hello " [a-z]+', "hello ", ""),
        ('root ::= "{\\"name\\":" [a-z]+ "}"', "", '{"name":'),
        ('root ::= "{\\"name\\":" [a-z]+ "}"', '{"name":x', ""),
        ('root ::= "日本語" ("x" | "y")', "", "日本語"),
        ('root ::= "日本語" ("x" | "y")', "日", "本語"),
        # The forced bytes are "ab\xc3" (both é and è start with 0xC3): cut at "ab".
        ('root ::= "ab" ("é" | "è")', "", "ab"),
        ('root ::= "ab" ("é" | "è")', "ab", ""),
        ('root ::= ("x" "y"){3}', "x", "yxyxy"),
        ('root ::= "a" | "ab"', "", "a"),
        ('root ::= "ab"', "ab", ""),
        ('root ::= "😀😀" [a-z]', "", "😀😀"),
    ],
)
def test_jump_forward(tiny, grammar, prefix, expected):
    m = xgr.GrammarMatcher(tiny.compile_grammar(grammar))
    assert m.accept_string(prefix)
    before = fill(m, TINY_V)
    jf = m.find_jump_forward_string()
    assert jf == expected
    assert np.array_equal(fill(m, TINY_V), before) and m.num_accepted_steps == 1  # "" is a step too
    assert m.fork().accept_string(jf)


@pytest.mark.parametrize(
    "grammar, prefix",
    [
        ('root ::= "日本語" ("x" | "y")', b"\xe6"),  # inside the first character
        ('root ::= "日本語" ("x" | "y")', b"\xe6\x97"),
        ('root ::= "😀" "a"', b"\xf0\x9f"),
    ],
)
def test_jump_forward_inside_a_character(tiny, grammar, prefix):
    """After a partial character the forced text is still whole characters: the
    result must be text the matcher accepts (no replacement characters)."""
    m = xgr.GrammarMatcher(tiny.compile_grammar(grammar))
    assert m.accept_string(prefix)
    jf = m.find_jump_forward_string()
    assert "\ufffd" not in jf, repr(jf)
    assert m.fork().accept_string(jf), repr(jf)


def test_jump_forward_on_real_json(tiny):
    m = xgr.GrammarMatcher(tiny.compile_builtin_json_grammar())
    assert m.find_jump_forward_string() == ""  # "{" or "["
    assert m.accept_string('{"a": tr')
    assert m.find_jump_forward_string() == "ue"


# ---- Grammar printing -----------------------------------------------------------------------

PRINT_GRAMMARS = [c.ebnf for c in CASES.values() if c.ebnf != "builtin_json"] + [
    r'root ::= "a\"b\\c\n\t\r" [\]\-\\^a-z] [^\x00-\x1f"] "\u00e9\U0001F600" ""',
    r'root ::= ( "x" | ( "y" "z" )+ )? [0-9]{3} [a]{2,} "q"{0,4} "r"* "s"+ "t"?',
    'root ::= a b\na ::= "a" (= "b")\nb ::= "b" | a  # comment\n',
    'root ::= [\\u4e00-\\u9fff\\U00010000-\\U0010FFFF]+',
    'root ::= "a"{2,5} [0-9]{40,60}',  # a counted repetition after another repetition
    'root ::= "x" ([0-9]{40,60})? "z"',
]


@pytest.mark.parametrize("text", PRINT_GRAMMARS + ["builtin_json"])
def test_grammar_str_round_trip(tiny, text):
    g = xgr.Grammar.builtin_json_grammar() if text == "builtin_json" else xgr.Grammar.from_ebnf(text)
    printed = str(g)
    g2 = xgr.Grammar.from_ebnf(printed)
    assert str(g2) == printed
    assert g2.num_rules == g.num_rules
    # Same language on sample strings.
    samples = ["", "a", "ab", "{}", '{"a": [1, 2]}', "abc->d.", "x", "日本語 é", "[1,[2]]", "1+2"]
    case_samples = [s for c in CASES.values() for s in c.valid]
    for s in samples + case_samples:
        m1 = xgr.GrammarMatcher(tiny.compile_grammar(g))
        m2 = xgr.GrammarMatcher(tiny.compile_grammar(g2))
        a1, a2 = m1.accept_string(s), m2.accept_string(s)
        assert a1 == a2, (s, printed)
        assert m1.is_completed() == m2.is_completed(), (s, printed)


# ---- GrammarCompiler cache --------------------------------------------------------------------


def test_compiler_cache_returns_same_object(tiny):
    info = tiny.tokenizer_info
    comp = xgr.GrammarCompiler(info)
    text = 'root ::= "a" | "b"'
    c1 = comp.compile_grammar(text)
    assert comp.compile_grammar(text) is c1
    assert comp.compile_grammar('root ::= "a" | "c"') is not c1
    assert comp.compile_grammar(text, root_rule_name="root") is c1
    j = comp.compile_builtin_json_grammar()
    assert comp.compile_builtin_json_grammar() is j
    assert comp.get_cache_size_bytes() > 0
    comp.clear_cache()
    assert comp.get_cache_size_bytes() == 0
    assert comp.compile_grammar(text) is not c1
    off = xgr.GrammarCompiler(info, cache_enabled=False)
    assert off.compile_grammar(text) is not off.compile_grammar(text)


def test_compiler_cache_keys_json_schemas(tiny):
    comp = xgr.GrammarCompiler(tiny.tokenizer_info)
    text = '{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}'
    c = comp.compile_json_schema(text)
    assert comp.compile_json_schema(text) is c  # the same text
    assert comp.compile_json_schema(text, strict_mode=False) is not c  # other options
    d = comp.compile_json_schema(json.loads(text))
    assert comp.compile_json_schema(json.loads(text)) is d  # a dict by its compact JSON
    # properties in another order are another grammar (written in declared order): a miss
    assert comp.compile_json_schema({"type": "object", "properties": {"b": {"type": "string"},
                                                                      "a": {"type": "integer"}}}) is not d


def test_compiler_cache_limit_evicts(tiny):
    info = tiny.tokenizer_info
    texts = [f'root ::= "{w}" [a-z]{{1,{k}}}' for k, w in enumerate(["aa", "bb", "cc", "dd"], start=3)]
    sizes = [xgr.GrammarCompiler(info, cache_enabled=False).compile_grammar(t).memory_size_bytes for t in texts]
    assert min(sizes) > 0
    share = max(sizes) + min(sizes) // 2  # room for one entry, not two
    limit = share * 8 // 3 + 2  # compiled grammars get 3/8 of the total
    comp = xgr.GrammarCompiler(info, cache_limit_bytes=limit)
    assert comp.cache_limit_bytes == limit
    assert max(sizes) <= comp.get_cache_limits()["compiled_grammars"] < max(sizes) + min(sizes)
    first = comp.compile_grammar(texts[0])
    assert comp.compile_grammar(texts[0]) is first
    for t in texts[1:]:
        comp.compile_grammar(t)
        assert comp.get_cache_size_bytes() <= limit
    assert comp.compile_grammar(texts[-1]) is comp.compile_grammar(texts[-1])
    assert comp.compile_grammar(texts[0]) is not first  # evicted
    # A limit below any grammar's size caches nothing.
    tiny_limit = xgr.GrammarCompiler(info, cache_limit_bytes=1)
    assert tiny_limit.compile_grammar(texts[0]) is not tiny_limit.compile_grammar(texts[0])
    assert tiny_limit.get_cache_size_bytes() <= 1
    # The evicted grammar still works.
    m = xgr.GrammarMatcher(first)
    assert m.accept_string("aab") and m.is_completed()


# ---- batch fills and threads --------------------------------------------------------------------

BATCH_PREFIXES = [
    ("builtin_json", ""), ("builtin_json", '{"k'), ("builtin_json", '[1, {"a": "x'),
    ("builtin_json", '{"a": [true, 1.5e'), ("arith", "(1 + "), ("arith", "12"),
    ("nested_list", "[[1, "), ("unicode_class", "caf"), ("repetition", "ab-123"),
    ("multibyte", "日本語 "), ("builtin_json", '{"x": 1}'),
]


def _matchers(info, prefixes):
    comp = xgr.GrammarCompiler(info)
    out = []
    for name, prefix in prefixes:
        c = comp.compile_builtin_json_grammar() if name == "builtin_json" else comp.compile_grammar(CASES[name].ebnf)
        m = xgr.GrammarMatcher(c)
        assert m.accept_string(prefix), (name, prefix)
        out.append(m)
    return out


def test_batch_fill_matches_single_fills(medium):
    info, toks = medium
    V = info.vocab_size
    matchers = _matchers(info, BATCH_PREFIXES)
    singles = [fill(m, V) for m in matchers]
    assert len({r.tobytes() for r in singles}) > 5  # genuinely different rows
    batch = xgr.BatchGrammarMatcher(max_threads=2)
    bm = xgr.allocate_token_bitmask(len(matchers), V)
    bm.zero_()
    batch.batch_fill_next_token_bitmask(matchers, bm)
    for i, row in enumerate(singles):
        assert np.array_equal(bm[i].numpy(), row), i
    # With indices into a larger bitmask: other rows untouched.
    n = len(matchers)
    perm = list(np.random.default_rng(3).permutation(n + 4)[:n])
    big = torch.full((n + 4, bm.shape[1]), 0x5A5A5A5A, dtype=torch.int32)
    batch.batch_fill_next_token_bitmask(matchers, big, perm)
    for i, r in enumerate(perm):
        assert np.array_equal(big[int(r)].numpy(), singles[i]), i
    for r in set(range(n + 4)) - {int(p) for p in perm}:
        assert bool((big[r] == 0x5A5A5A5A).all())
    # Matchers are unchanged by batch fills; batch accept / rollback work per matcher.
    assert [fill(m, V).tobytes() for m in matchers] == [r.tobytes() for r in singles]
    first_allowed = [int(np.flatnonzero(bits_of_row(r, V))[0]) for r in singles]
    res = xgr.BatchGrammarMatcher.batch_accept_token(matchers, first_allowed)
    assert all(res)
    xgr.BatchGrammarMatcher.batch_rollback(matchers, [1] * n)
    assert [fill(m, V).tobytes() for m in matchers] == [r.tobytes() for r in singles]
    with pytest.raises(ValueError):
        batch.batch_fill_next_token_bitmask([matchers[0], matchers[0]], bm)
    with pytest.raises(ValueError):
        batch.batch_fill_next_token_bitmask(matchers, bm, [0] * (n - 1))
    with pytest.raises(ValueError):
        batch.batch_fill_next_token_bitmask(matchers[:2], bm, [0, n])


def test_repeated_batch_fills_follow_the_matchers(medium):
    """An engine fills the same running batch step after step (the handle array is
    reused then): every step's rows equal single fills, after accepts, after a fork
    joins, in another order, and after a matcher of the batch was replaced."""
    info, toks = medium
    V = info.vocab_size
    matchers = _matchers(info, BATCH_PREFIXES)
    batch = xgr.BatchGrammarMatcher(max_threads=2)
    bm = xgr.allocate_token_bitmask(len(matchers) + 1, V)
    rng = np.random.default_rng(5)
    for step in range(6):
        if step == 3:
            matchers = matchers[::-1]
        if step == 4:
            matchers = matchers[:-1] + [matchers[0].fork()]
        if step == 5:
            matchers = matchers + [xgr.GrammarMatcher(matchers[1]._compiled)]
        bm.fill_(0x5A5A5A5A)
        batch.batch_fill_next_token_bitmask(matchers, bm)
        for i, m in enumerate(matchers):
            row = bm[i].numpy().copy()
            assert np.array_equal(row, fill(m, V)), (step, i)
            allowed = [t for t in np.flatnonzero(bits_of_row(row, V)) if t not in info.stop_token_ids]
            if allowed:  # a complete matcher stays where it is
                assert m.accept_token(int(rng.choice(allowed))), (step, i)
    with pytest.raises(ValueError):  # the duplicate check also applies to a cached batch's matchers
        batch.batch_fill_next_token_bitmask(matchers + [matchers[0]], bm)


def test_concurrent_matchers_match_sequential(medium):
    """Several Python threads drive their own matchers (sharing compiled grammars whose
    caches start cold); every mask equals the one computed sequentially."""
    info, toks = medium
    V = info.vocab_size
    rng = np.random.default_rng(11)
    plans = []
    for k in range(6):
        name, _ = BATCH_PREFIXES[k % len(BATCH_PREFIXES)]
        plans.append((name, int(rng.integers(0, 2**31))))

    def run(compiled_by_name, name, seed, out):
        r = np.random.default_rng(seed)
        m = xgr.GrammarMatcher(compiled_by_name[name])
        rows = []
        for _ in range(25):
            row = fill(m, V)
            rows.append(row.tobytes())
            a = np.flatnonzero(bits_of_row(row, V))
            a = a[a != info.stop_token_ids[0]]
            if not len(a):
                break
            if m.num_accepted_steps and r.random() < 0.2:
                m.rollback(1)
            else:
                assert m.accept_token(int(r.choice(a)))
        out.append(rows)

    def compiled_set():
        comp = xgr.GrammarCompiler(info, cache_enabled=False)
        return {name: (comp.compile_builtin_json_grammar() if name == "builtin_json"
                       else comp.compile_grammar(CASES[name].ebnf)) for name, _ in plans}

    sequential = []
    cs = compiled_set()
    for name, seed in plans:
        out = []
        run(cs, name, seed, out)
        sequential.append(out[0])

    cs = compiled_set()
    results = [[] for _ in plans]
    errors = []

    def worker(i):
        try:
            run(cs, plans[i][0], plans[i][1], results[i])
        except BaseException as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(plans))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(len(plans)):
        assert results[i][0] == sequential[i], plans[i]


def test_same_matcher_from_two_threads_is_refused_or_serialised(medium):
    """A matcher must not be used by two threads at once: the core either refuses the
    second caller with an exception or the calls do not overlap; it never corrupts."""
    info, _ = medium
    V = info.vocab_size
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_builtin_json_grammar())
    assert m.accept_string('{"key": "')
    expected = fill(m, V)
    errors, wrong = [], []

    def worker():
        for _ in range(200):
            try:
                row = fill(m, V)
            except xgr.MatcherStateError:
                continue
            except BaseException as e:
                errors.append(repr(e))
                return
            if not np.array_equal(row, expected):
                wrong.append(1)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and not wrong
    assert np.array_equal(fill(m, V), expected) and m.num_accepted_steps == 1


# ---- TokenizerInfo -------------------------------------------------------------------------------


def test_tokenizer_info_metadata_round_trip(tiny):
    info = tiny.tokenizer_info
    assert info.vocab_size == TINY_V and info.vocab_type == xgr.VocabType.RAW
    assert info.stop_token_ids == [STOP]
    assert SPECIAL in info.special_token_ids
    again = xgr.TokenizerInfo.from_vocab_and_metadata(TINY, info.dump_metadata())
    assert again.vocab_size == TINY_V and again.stop_token_ids == [STOP]
    assert again.special_token_ids == info.special_token_ids
    assert again.decoded_vocab == info.decoded_vocab
    assert info.decoded_vocab[T["日"]] == "日".encode()
    assert all(b == b"" for b in info.decoded_vocab[len(TINY):])


def test_default_stop_token_detection():
    info = xgr.TokenizerInfo(["a", "<|im_end|>", "b", "</s>"])
    assert sorted(info.stop_token_ids) == [1, 3]


def test_byte_level_and_byte_fallback_decoding():
    bl = xgr.TokenizerInfo(["Ġhello", "Ċ", "Ã©", "a"], xgr.VocabType.BYTE_LEVEL)
    assert bl.decoded_vocab == [b" hello", b"\n", "é".encode(), b"a"]
    bf = xgr.TokenizerInfo(["▁hello", "<0x0A>", "<0xC3>", "<0xA9>", "a▁b"], xgr.VocabType.BYTE_FALLBACK)
    assert bf.decoded_vocab == [b" hello", b"\n", b"\xc3", b"\xa9", b"a b"]
    m = xgr.GrammarMatcher(xgr.GrammarCompiler(bf).compile_grammar('root ::= " hello" "é"'))
    assert m.accept_token(0) and m.accept_token(2) and not m.is_completed()
    assert not m.fork().accept_token(1)  # "\n" cannot finish the character
    assert m.accept_token(3) and m.is_completed()


def test_allocate_token_bitmask_shape():
    bm = xgr.allocate_token_bitmask(3, 65)
    assert bm.shape == (3, 3) and bm.dtype == torch.int32 and bool((bm == -1).all())
    assert xgr.get_bitmask_shape(2, 64) == (2, 2)


def test_mask_pool_grows_and_evicts_while_masks_stay_exact():
    # Thousands of distinct states fill one vocabulary's mask pool past several
    # doublings of its table, which moves buckets a few at a time while lookups,
    # inserts and (second pool, a small limit) evictions go on: every mask must
    # equal the one a fresh pool computes, and revisits must hit.
    rng = random.Random(4)
    words = sorted({"".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(6, 12))) for _ in range(1500)})
    toks = list("abcdefghijklmnop") + ["ab", "cd", "efg", "gh", "abc", "op", "mnop"]
    grammar = "root ::= " + " | ".join(f'"{w}"' for w in words)

    def masks(info, order):
        comp = xgr.GrammarCompiler(info, cache_limit_bytes=info_limit.get(id(info), 512 << 20))
        compiled = comp.compile_grammar(grammar)
        out = {}
        for w in order:
            m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
            for i in range(len(w)):
                out[w[:i]] = sorted(allowed(m, len(toks)))
                assert m.accept_string(w[i])
        return out, comp.get_mask_cache_stats()

    info_limit = {}
    big = xgr.TokenizerInfo(toks, xgr.VocabType.RAW)
    small = xgr.TokenizerInfo(toks, xgr.VocabType.RAW)
    info_limit[id(small)] = 210_000  # ~2,100 entries: evicting while the table moves to 4,096 buckets
    first, stats = masks(big, words)
    assert stats["entries"] > 4096, stats  # past 1024 -> 2048 -> 4096 -> 8192 buckets
    again, stats2 = masks(big, list(reversed(words)))
    assert again == first and stats2["hits"] >= stats["entries"], (stats, stats2)
    evicting, stats3 = masks(small, words)
    assert evicting == first and stats3["evictions"] > 1000, stats3
    fresh, _ = masks(xgr.TokenizerInfo(toks, xgr.VocabType.RAW), words[::-1])
    assert fresh == first


def test_mask_pool_spares_an_entry_in_use_while_it_evicts():
    # A small pool filled with new states one after another while one state is
    # filled again between each two: that state's entry, looked up all along, is
    # never the one evicted (a pool that evicted by insertion order alone would
    # drop it after ~2,000 inserts), while the others go.
    rng = random.Random(5)
    words = sorted({"".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(6, 12))) for _ in range(1500)})
    toks = list("abcdefghijklmnop") + ["ab", "cd", "efg", "gh", "abc", "op", "mnop"]
    info = xgr.TokenizerInfo(toks, xgr.VocabType.RAW)
    comp = xgr.GrammarCompiler(info, cache_limit_bytes=210_000)
    compiled = comp.compile_grammar("root ::= " + " | ".join(f'"{w}"' for w in words))
    hot = words[0][:3]

    def fill_at(prefix):
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)  # (no masks at hand)
        assert m.accept_string(prefix)
        allowed(m, len(toks))

    fill_at(hot)
    hot_misses = 0
    for w in words[1:]:
        for i in range(1, len(w)):
            fill_at(w[:i])
        before = comp.get_mask_cache_stats()
        fill_at(hot)
        hot_misses += comp.get_mask_cache_stats()["misses"] - before["misses"]
    stats = comp.get_mask_cache_stats()
    assert stats["evictions"] > 5000 and hot_misses == 0, (stats, hot_misses)
