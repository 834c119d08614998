"""Acceptance criterion 4: bad input gets a Python exception, never a crash.

Cases that could take the process down (deep nesting, huge grammars) run in a child
process, so that a crash is reported as a failure of that case instead of killing the
whole test session.
"""

import json
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch

import xg2_plugin as xgr
from vocabs import bits_of_row, fill

# ---- a small RAW vocabulary for the matcher-level checks -------------------------------

SMALL_VOCAB = ["a", "b", "é", "éx", "x", "</s>", "<s>", "[", "]", "ab", "\u00e9\u00e9", "1", b"\xff"]
STOP, SPECIAL = 5, 6
V = 40  # padded: ids 13..39 are padding


@pytest.fixture(scope="module")
def small():
    info = xgr.TokenizerInfo(SMALL_VOCAB, xgr.VocabType.RAW, vocab_size=V,
                             stop_token_ids=[STOP], special_token_ids=[SPECIAL])
    return xgr.GrammarCompiler(info)


def _line_col(message: str):
    line = re.search(r"line\D{0,3}(\d+)", message)
    col = re.search(r"column\D{0,3}(\d+)", message)
    assert line and col, f"no line/column in {message!r}"
    return int(line.group(1)), int(col.group(1))


def _grammar_error(text, **kw):
    with pytest.raises(xgr.GrammarError) as e:
        xgr.Grammar.from_ebnf(text, **kw)
    assert isinstance(e.value, ValueError)
    return str(e.value)


# ---- malformed EBNF ---------------------------------------------------------------------


def test_syntax_error_names_line_and_column():
    text = 'root ::= "a" b\nb ::= "x" | "y"\n  # a comment\nc ::= "z" @ "q"\n'
    msg = _grammar_error(text)
    assert _line_col(msg) == (4, 11), msg


def test_syntax_error_after_multiline_rule():
    text = 'root ::= item\n    | "b"\nitem ::= ( "x"\n   "y" ]\n'
    msg = _grammar_error(text)
    assert _line_col(msg) == (4, 8), msg


def test_undefined_rule_is_named():
    msg = _grammar_error('root ::= "a" part\npart ::= "b" missing_rule_42 "c"\n')
    assert "missing_rule_42" in msg
    assert _line_col(msg) == (2, 14), msg


def test_undefined_root_rule():
    msg = _grammar_error('start ::= "a"\n')
    assert "root" in msg
    msg = _grammar_error('start ::= "a"\n', root_rule_name="nope")
    assert "nope" in msg
    assert str(xgr.Grammar.from_ebnf('start ::= "a"', root_rule_name="start")).strip()


@pytest.mark.parametrize(
    "text, line, col",
    [
        ('root ::= [z-a]', 1, None),  # reversed class range
        ('root ::= "ok"\nr ::= [a-cZ-A]', 2, None),
        ('root ::= "a\\q"', 1, None),  # bad escapes
        ('root ::= "\\xZZ"', 1, None),
        ('root ::= "\\u12"', 1, None),
        ('root ::= [\\U0011FFFF]', 1, None),  # beyond U+10FFFF
        ('root ::= "abc\n', 1, 10),  # unterminated string
        ('root ::= "abc', 1, 10),
        ('root ::= [abc\n', 1, 10),  # unterminated class
        ('root ::= [abc', 1, 10),
        ('root ::= "a" | | "b"', 1, 16),  # empty alternatives
        ('root ::= | "a"', 1, 10),
        ('root ::= ( "a" | ) "b"', 1, 18),
        ('root ::= "a"{5,2}', 1, None),  # repetition bounds reversed
        ('root ::= ("a"', None, None),  # unbalanced group
        ('root ::= "a" (= "b") "c"', 1, None),  # lookahead not at the end
        ('root ::= "a"\nroot ::= "b"', 2, None),  # defined twice
        ('root "a"', 1, None),  # missing ::=
    ],
)
def test_malformed_ebnf(text, line, col):
    msg = _grammar_error(text)
    got_line, got_col = _line_col(msg)
    if line is not None:
        assert got_line == line, msg
    if col is not None:
        assert got_col == col, msg


def test_empty_alternative_at_end():
    msg = _grammar_error('root ::= "a" |\nx ::= "b"\n')
    _line_col(msg)


@pytest.mark.parametrize("text", ["", "   \n# only a comment\n"])
def test_empty_grammar_text(text):
    _grammar_error(text)


@pytest.mark.parametrize("bounds", ["{99999999999}", "{1,99999999999}", "{99999999999,}",
                                    "{18446744073709551617}", "{2147483648}"])
def test_absurd_repetition_bounds(bounds):
    with pytest.raises(xgr.LimitExceededError):
        xgr.Grammar.from_ebnf(f'root ::= "a"{bounds}')


@pytest.mark.parametrize(
    "text",
    [
        'root ::= a\na ::= "x" a',  # infinite recursion only
        "root ::= []",
        "root ::= [^\\x00-\\U0010FFFF]",  # negated class of every code point
        'root ::= "a" nothing\nnothing ::= "b" nothing',
    ],
)
def test_grammar_matching_nothing(text):
    """A grammar whose root matches no string is a GrammarError (a ValueError), not an
    internal error."""
    with pytest.raises(xgr.GrammarError):
        xgr.Grammar.from_ebnf(text)


def test_non_string_grammar(small):
    with pytest.raises(ValueError):
        xgr.Grammar.from_ebnf(b'root ::= "a"')
    with pytest.raises((ValueError, TypeError)):
        small.compile_grammar(123)


def test_errors_do_not_poison_later_calls(small):
    for _ in range(3):
        with pytest.raises(xgr.GrammarError):
            small.compile_grammar('root ::= "a" undefined_x')
        m = xgr.GrammarMatcher(small.compile_grammar('root ::= "a" "b"'))
        assert m.accept_string("ab") and m.is_completed()


def test_error_messages_are_per_thread():
    """xg2_last_error is per thread: concurrent failures keep their own messages."""
    errors = []

    def work(i):
        for _ in range(100):
            try:
                xgr.Grammar.from_ebnf(f'root ::= "a" undefined_rule_{i}')
            except xgr.GrammarError as e:
                if f"undefined_rule_{i}" not in str(e):
                    errors.append((i, str(e)))
            else:
                errors.append((i, "no error"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


# ---- things that could crash: run in a child process --------------------------------------


def _isolated(code: str, timeout: int = 120) -> dict:
    """Run code in a fresh interpreter; it must print one JSON object last."""
    proc = subprocess.run(
        [sys.executable, "-c", "import json, xg2_plugin as xgr\n" + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=timeout,
    )
    assert proc.returncode == 0, f"child crashed (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_deeply_nested_parentheses_raise():
    r = _isolated("""
        text = "root ::= " + "(" * 10000 + '"a"' + ")" * 10000
        try:
            xgr.Grammar.from_ebnf(text)
            print(json.dumps({"error": None}))
        except xgr.XG2Error as e:
            print(json.dumps({"error": type(e).__name__, "msg": str(e)}))
    """)
    assert r["error"] in ("LimitExceededError", "GrammarError"), r


def test_deeply_nested_classes_and_strings_in_groups():
    r = _isolated("""
        out = {}
        for name, text in [
            ("unclosed", "root ::= " + "(" * 100000),
            ("alternations", "root ::= " + '("a" | ' * 5000 + '"b"' + ")" * 5000),
            ("quantifiers", 'root ::= "a"' + "?" * 10000),
        ]:
            try:
                g = xgr.Grammar.from_ebnf(text)
                out[name] = "ok"
            except xgr.XG2Error as e:
                out[name] = type(e).__name__
        print(json.dumps(out))
    """)
    assert r["unclosed"] in ("LimitExceededError", "GrammarError"), r
    for k in ("alternations", "quantifiers"):
        assert r[k] in ("ok", "LimitExceededError", "GrammarError"), r


def test_long_rule_chain_and_deep_input():
    """3,000 rules each referencing the next, and a 20,000-deep recursive input: either
    they work (and work correctly) or raise, never crash."""
    r = _isolated("""
        out = {}
        rules = [f'r{i} ::= "(" r{i + 1} ")"' for i in range(3000)] + ['r3000 ::= "a"']
        try:
            g = xgr.Grammar.from_ebnf("\\n".join(rules), root_rule_name="r0")
            info = xgr.TokenizerInfo(["(", ")", "a", "</s>"], stop_token_ids=[3])
            m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar(g))
            ok = m.accept_string("(" * 3000 + "a") and not m.is_completed()
            ok = ok and not m.fork().accept_string(")" * 3001)
            ok = ok and m.accept_string(")" * 3000) and m.is_completed()
            out["chain"] = "ok" if ok else "wrong"
        except xgr.XG2Error as e:
            out["chain"] = type(e).__name__
        info = xgr.TokenizerInfo(["[", "]", "1", "</s>"], stop_token_ids=[3])
        m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_grammar('root ::= "[" root "]" | "1"'))
        n = 20000
        ok = m.accept_string("[" * n)
        bm = xgr.allocate_token_bitmask(1, 4)
        m.fill_next_token_bitmask(bm)
        ok = ok and int(bm[0, 0]) == 0b0101  # "[" or "1"
        ok = ok and m.accept_string("1" + "]" * (n - 1)) and not m.is_completed()
        m.fill_next_token_bitmask(bm)
        ok = ok and int(bm[0, 0]) == 0b0010  # only "]"
        ok = ok and m.accept_token(1) and m.is_completed() and m.accept_token(3)
        m.rollback(4)  # two strings, one token, the stop token
        m.fill_next_token_bitmask(bm)
        ok = ok and int(bm[0, 0]) == 0b0101
        out["deep_input"] = "ok" if ok else "wrong"
        print(json.dumps(out))
    """, timeout=300)
    assert r["chain"] in ("ok", "LimitExceededError"), r
    assert r["deep_input"] == "ok", r


def test_large_grammars_do_not_crash():
    r = _isolated("""
        out = {}
        for name, text in [
            ("alternatives", "root ::= " + " | ".join(f'"w{i}"' for i in range(20000))),
            ("big_counted", 'root ::= [0-9]{0,1000000} "."'),
            ("nested_counted", 'root ::= ([a-z]{2,3000}){2,3000}'),
        ]:
            try:
                g = xgr.Grammar.from_ebnf(text)
                out[name] = "ok"
            except xgr.XG2Error as e:
                out[name] = type(e).__name__
        print(json.dumps(out))
    """, timeout=300)
    assert set(r) == {"alternatives", "big_counted", "nested_counted"}
    for k, v in r.items():
        assert v in ("ok", "LimitExceededError"), r


def test_long_literal_compiles_in_reasonable_time():
    """A 12,000-character string literal (a long constant in a schema) must compile in
    seconds, not minutes; XGrammar takes milliseconds."""
    try:
        r = _isolated("""
            import time
            t = time.time()
            g = xgr.Grammar.from_ebnf('root ::= "' + "abcdefghijkl" * 1000 + '"')
            print(json.dumps({"seconds": time.time() - t, "states": g.num_states}))
        """, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("compiling root ::= \"<12,000 characters>\" took more than 15 s")
    assert r["seconds"] < 15, r


# ---- matcher-level bad input ---------------------------------------------------------------


def test_token_id_out_of_range(small):
    m = xgr.GrammarMatcher(small.compile_grammar('root ::= "a" "b"'))
    for bad in (-1, V, V + 1, -(2**31), 2**31, 2**40, -(2**40)):
        with pytest.raises(ValueError):
            m.accept_token(bad)
    assert m.num_accepted_steps == 0
    # In range but padding / special: rejected, not an error.
    assert not m.accept_token(V - 1)
    assert not m.accept_token(SPECIAL)
    assert m.accept_token(0) and m.accept_token(1) and m.is_completed()


def test_bitmask_wrong_dtype(small):
    m = xgr.GrammarMatcher(small.compile_grammar('root ::= "a"'))
    good = xgr.allocate_token_bitmask(1, V)
    for dtype in (torch.int64, torch.float32, torch.float64, torch.uint8, torch.int16, torch.bool):
        with pytest.raises((ValueError, TypeError)):
            m.fill_next_token_bitmask(good.to(dtype))
    for dtype in (np.int64, np.float32, np.uint32):
        with pytest.raises((ValueError, TypeError)):
            m.fill_next_token_bitmask(np.zeros((1, 2), dtype=dtype))
    with pytest.raises((ValueError, TypeError)):
        m.fill_next_token_bitmask([[0, 0]])


def test_bitmask_wrong_shape(small):
    m = xgr.GrammarMatcher(small.compile_grammar('root ::= "a"'))
    for shape in ((1, 1), (1, 3), (2, 0), (1, 1, 2), (2, 1, 2), (1, 2, 1)):
        with pytest.raises((ValueError, TypeError)):
            m.fill_next_token_bitmask(torch.zeros(shape, dtype=torch.int32))
    with pytest.raises((ValueError, TypeError)):
        m.fill_next_token_bitmask(torch.zeros((), dtype=torch.int32))


def test_bitmask_non_contiguous_rows(small):
    m = xgr.GrammarMatcher(small.compile_grammar('root ::= "a"'))
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(torch.zeros(2, 4, dtype=torch.int32)[:, ::2])
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(torch.zeros(2, 2, dtype=torch.int32).t())
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(np.zeros((2, 4), dtype=np.int32)[:, ::2])
    # Rows that are contiguous inside a wider buffer are fine, and nothing else is touched.
    big = torch.full((3, 7), 12345, dtype=torch.int32)
    view = big[:, 2:4]
    m.fill_next_token_bitmask(view, 1)
    expected = torch.full((3, 7), 12345, dtype=torch.int32)
    expected[1, 2] = 1 << 0  # only "a"
    expected[1, 3] = 0
    assert torch.equal(big, expected), big
    ro = np.zeros((1, 2), dtype=np.int32)
    ro.setflags(write=False)
    with pytest.raises(ValueError):
        m.fill_next_token_bitmask(ro)


def test_bitmask_index_out_of_range(small):
    m = xgr.GrammarMatcher(small.compile_grammar('root ::= "a"'))
    bm = xgr.allocate_token_bitmask(2, V)
    for idx in (2, 3, 100, -3, 2**40):
        with pytest.raises(ValueError):
            m.fill_next_token_bitmask(bm, idx)
    assert bool((bm == -1).all())  # untouched
    m.fill_next_token_bitmask(bm, 1)
    assert int(bm[1, 0]) == 1 and int(bm[1, 1]) == 0 and bool((bm[0] == -1).all())


@pytest.mark.parametrize(
    "grammar, data, expected",
    [
        ('root ::= "é" | "x"', b"\xc3", True),  # first byte of é: a prefix
        ('root ::= "é" | "x"', b"\xc3\xa9", True),
        ('root ::= "é" | "x"', b"\xff", False),
        ('root ::= "é" | "x"', b"\xc3\x28", False),
        ('root ::= "é" | "x"', b"\xa9", False),
        ('root ::= [^"]*', b"\xed\xa0\x80", False),  # UTF-8 of a surrogate
        ('root ::= [^"]*', b"\xc0\xaf", False),  # overlong
        ('root ::= [^"]*', b"\xe0\x80\xaf", False),  # overlong
        ('root ::= [^"]*', b"\xf4\x90\x80\x80", False),  # beyond U+10FFFF
        ('root ::= [^"]*', b"\xf8\x88\x80\x80\x80", False),
        ('root ::= [^"]*', b"\x80", False),
        ('root ::= [^"]*', b"\xf4\x8f\xbf\xbf", True),  # U+10FFFF
        ('root ::= [^"]*', b"\xed\x9f\xbf\xee\x80\x80", True),  # U+D7FF U+E000
        ('root ::= [^"]*', b"ok\xf0\x9f\x98", True),  # unfinished emoji: a prefix
        ('root ::= [^"]*', b"\xf0\x9f\x98\x80\"", False),
        ('root ::= "a" [\\x80-\\xff]', b"a\xc2\x80", True),  # class over code points
        ('root ::= "a" [\\x80-\\xff]', b"a\x80", False),
    ],
)
def test_accept_string_with_raw_bytes(small, grammar, data, expected):
    m = xgr.GrammarMatcher(small.compile_grammar(grammar))
    assert m.accept_string(data) is expected
    assert m.num_accepted_steps == (1 if expected else 0)


def test_invalid_utf8_token_is_never_allowed(small):
    """Token 12 is the single byte 0xFF in a RAW vocabulary: no grammar over code points
    can allow it; '[^"]*' allows every other text token."""
    m = xgr.GrammarMatcher(small.compile_grammar('root ::= [^"]*'))
    bits = bits_of_row(fill(m, V), V)
    assert not bits[12]
    assert not m.fork().accept_token(12)
    text_tokens = [i for i, t in enumerate(SMALL_VOCAB) if i not in (STOP, SPECIAL, 12)]
    assert bits[text_tokens].all() and bits[STOP]
    assert not bits[SPECIAL] and not bits[len(SMALL_VOCAB):].any()


def test_terminated_matcher_fork_rollback_reset(small):
    compiled = small.compile_grammar('root ::= "a" "b"?')
    m = xgr.GrammarMatcher(compiled)
    initial = fill(m, V)
    assert m.accept_token(0) and m.is_completed()
    before_stop = fill(m, V)
    assert m.accept_token(STOP) and m.is_terminated()
    # Terminated: the mask allows only the stop token; accepting is checked at the end.
    bits = bits_of_row(fill(m, V), V)
    assert list(np.flatnonzero(bits)) == [STOP]
    terminated = m.fork()
    # Fork of a terminated matcher is terminated and independent.
    f = m.fork()
    assert f.is_terminated() and f.is_completed() and not f.accept_token(1)
    f.rollback(1)
    assert not f.is_terminated() and m.is_terminated()
    assert np.array_equal(fill(f, V), before_stop)
    assert f.accept_token(1) and f.is_completed()
    # Rolling back more than accepted still raises.
    with pytest.raises(ValueError):
        m.rollback(3)
    assert m.is_terminated()
    # Reset brings the terminated matcher back to the start.
    m.reset()
    assert not m.is_terminated() and not m.is_completed() and m.num_accepted_steps == 0
    assert np.array_equal(fill(m, V), initial)
    assert m.accept_string("ab") and m.is_completed()
    with pytest.raises(ValueError):
        m.rollback(2)
    m.rollback(1)
    assert np.array_equal(fill(m, V), initial)
    # Terminated: everything is rejected, including another stop token, and nothing
    # changes (XGrammar; xg2.h: "After termination every token is rejected").
    steps = terminated.num_accepted_steps
    accepted = [t for t in (0, 1, STOP, SPECIAL, V - 1) if terminated.accept_token(t)]
    assert not accepted, f"accepted after termination: {accepted}"
    assert not terminated.accept_string("b")
    assert terminated.num_accepted_steps == steps and terminated.is_terminated()


def test_override_stop_tokens_out_of_range(small):
    compiled = small.compile_grammar('root ::= "a"')
    for bad in ([V], [-1], V + 5, [0, V]):
        with pytest.raises(ValueError):
            xgr.GrammarMatcher(compiled, override_stop_tokens=bad)
    with pytest.raises((ValueError, OverflowError)):  # does not fit in 32 bits
        xgr.GrammarMatcher(compiled, override_stop_tokens=[0, 2**31])


def test_tokenizer_info_bad_arguments():
    with pytest.raises(ValueError):
        xgr.TokenizerInfo(["a", "b"], stop_token_ids=[5])
    with pytest.raises(ValueError):
        xgr.TokenizerInfo(["a", "b"], vocab_size=0)
    with pytest.raises(ValueError):
        xgr.TokenizerInfo(["a"], vocab_type="raw")
    with pytest.raises(ValueError):
        xgr.GrammarCompiler("not a tokenizer info")
