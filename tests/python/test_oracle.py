"""Acceptance criterion 1: the token mask agrees with the matcher, token by token.

At every step of valid strings tokenized by the real tokenizers (DeepSeek byte-level,
Mistral SentencePiece byte-fallback) the mask bit of a token must equal whether the
matcher accepts it:

* every allowed token is accepted (one fork, accept + rollback per token), and a random
  sample of 200 allowed tokens is accepted by a literally fresh ``m.fork()``;
* a random sample of at least 2,000 disallowed tokens is rejected by a fresh fork;
* independently of the engine, a sample of allowed and disallowed tokens is checked
  against the grammar's own checker: the text so far plus the token is a viable prefix
  exactly when the token is allowed (where the text is whole UTF-8);
* the next token of the string is allowed; stop tokens are allowed exactly when the
  matcher is completed, and completion agrees with the independent full-string check;
* special tokens and padding ids are never allowed.
"""

import numpy as np
import pytest

import xg2_plugin as xgr
from vocabs import CASES, GRAMMAR_NAMES, bits_of_row, fill, viable

N_DISALLOWED = 2000
N_ALLOWED_FRESH = 200
N_INDEPENDENT = 400  # tokens per step checked against the Python checkers


def check_step(m, vocab, case, rng, text: bytes, next_token: int, where: str):
    """All per-step checks; returns the mask bits."""
    V = vocab.vocab_size
    steps_before = m.num_accepted_steps
    row = fill(m, V)
    bits = bits_of_row(row, V)
    allowed = np.flatnonzero(bits)
    disallowed = np.flatnonzero(bits == 0)

    # Special tokens and padding ids are never allowed.
    specials = [t for t in vocab.special_ids if t != vocab.stop_id]
    assert not bits[specials].any(), f"{where}: a special token is allowed"
    assert not bits[vocab.n_real:].any(), f"{where}: a padding id is allowed"
    # Stop tokens exactly when completed; completion agrees with the checker.
    completed = m.is_completed()
    assert bool(bits[vocab.stop_id]) == completed, f"{where}: stop bit {bits[vocab.stop_id]} vs is_completed {completed}"
    try:
        full = case.full(text.decode("utf-8"))
    except UnicodeDecodeError:
        full = False
    assert completed == full, f"{where}: is_completed {completed}, checker says {full} for {text!r}"
    # The string's own next token is allowed.
    assert bits[next_token], f"{where}: the next token {next_token} {vocab.token_bytes[next_token]!r} is not allowed"

    # Every allowed token is accepted (one fork: accept, then roll back).
    f = m.fork()
    accept, rollback = f.accept_token, f.rollback
    rejected = []
    for t in allowed.tolist():
        if accept(t):
            rollback(1)
        else:
            rejected.append(t)
    assert not rejected, (
        f"{where}: {len(rejected)} allowed tokens rejected by accept_token, e.g. "
        f"{[(t, vocab.token_bytes[t]) for t in rejected[:5]]}"
    )
    assert f.num_accepted_steps == steps_before and not f.is_terminated()

    # Fresh forks: a sample of allowed tokens, and >= 2000 disallowed ones.
    fresh_allowed = rng.choice(allowed, size=min(N_ALLOWED_FRESH, len(allowed)), replace=False)
    for t in fresh_allowed.tolist():
        assert m.fork().accept_token(t), f"{where}: allowed token {t} {vocab.token_bytes[t]!r} rejected by a fresh fork"
    sample = rng.choice(disallowed, size=min(N_DISALLOWED, len(disallowed)), replace=False)
    wrongly = [t for t in sample.tolist() if m.fork().accept_token(t)]
    assert not wrongly, (
        f"{where}: disallowed tokens accepted by a fresh fork: "
        f"{[(t, vocab.token_bytes[t]) for t in wrongly[:5]]}"
    )

    # Independent check of a sample against the grammar's checker.
    for t in list(fresh_allowed[: N_INDEPENDENT // 4]) + list(sample[: N_INDEPENDENT]):
        t = int(t)
        tb = vocab.token_bytes[t]
        if tb is None:
            continue  # special / padding, checked above
        verdict = viable(case, text + tb)
        if verdict is None:
            continue
        assert verdict == bool(bits[t]), (
            f"{where}: token {t} {tb!r} after {text!r}: mask bit {bits[t]}, "
            f"but the independent checker says viable={verdict}"
        )

    # The stop token itself, through a fresh fork.
    assert m.fork().accept_token(vocab.stop_id) == completed, f"{where}: stop token acceptance"

    assert m.num_accepted_steps == steps_before, f"{where}: checking changed the matcher"
    assert np.array_equal(fill(m, V), row), f"{where}: the mask changed while checking forks"
    return bits


def run_string(vocab, case, s: str, rng):
    compiled = vocab.compile(case.ebnf)
    ids = vocab.encode(s)
    m = xgr.GrammarMatcher(compiled)
    text = b""
    for k, t in enumerate(ids):
        where = f"{vocab.name}/{case.name} {s!r} step {k}"
        check_step(m, vocab, case, rng, text, t, where)
        assert m.accept_token(t), f"{where}: token {t} {vocab.token_bytes[t]!r} rejected"
        text += vocab.token_bytes[t]
    assert text == s.encode("utf-8")
    where = f"{vocab.name}/{case.name} {s!r} end"
    assert m.is_completed(), f"{where}: not completed"
    assert not m.is_terminated()
    check_step(m, vocab, case, rng, text, vocab.stop_id, where)
    assert m.accept_token(vocab.stop_id), f"{where}: stop token rejected"
    assert m.is_terminated()
    assert m.num_accepted_steps == len(ids) + 1
    return m


@pytest.mark.parametrize("grammar", GRAMMAR_NAMES)
def test_mask_matches_matcher(vocab, grammar):
    case = CASES[grammar]
    rng = np.random.default_rng([1234, GRAMMAR_NAMES.index(grammar), len(vocab.name)])
    for s in case.valid:
        run_string(vocab, case, s, rng)


def test_nothing_accepted_after_termination(vocab):
    """After the stop token the mask allows only stop tokens, and no token is accepted
    any more, the stop token included (XGrammar; xg2.h: "After termination every token
    is rejected"); nothing changes."""
    case = CASES["json"]
    rng = np.random.default_rng(5)
    m = run_string(vocab, case, case.valid[2], rng)
    V = vocab.vocab_size
    bits = bits_of_row(fill(m, V), V)
    assert list(np.flatnonzero(bits)) == vocab.info.stop_token_ids
    steps = m.num_accepted_steps
    some = [vocab.stop_id] + vocab.encode("{}") + rng.choice(vocab.n_real, size=50).tolist()
    accepted = [t for t in some if m.accept_token(int(t))]
    assert not accepted, f"accepted after termination: {accepted[:5]}"
    assert not m.accept_string("{}")
    assert m.num_accepted_steps == steps and m.is_terminated()


def test_decoded_vocab_matches_tokenizer(vocab):
    """The core's decoding of every token equals an independent decoding (GPT-2's byte
    table inverted by hand / SentencePiece <0xNN> and U+2581)."""
    decoded = vocab.info.decoded_vocab
    assert len(decoded) == vocab.vocab_size
    bad = [i for i in range(vocab.n_real)
           if vocab.token_bytes[i] is not None and decoded[i] != vocab.token_bytes[i]]
    assert not bad, [(i, decoded[i], vocab.token_bytes[i]) for i in bad[:5]]
    assert all(decoded[i] == b"" for i in vocab.padding_ids)


def test_tokenizer_info_metadata(vocab):
    info = vocab.info
    assert info.vocab_size == len(vocab.tok) + 64
    assert info.stop_token_ids == [vocab.tok.eos_token_id]
    assert set(vocab.special_ids) <= set(info.special_token_ids)
    expected = {"deepseek": xgr.VocabType.BYTE_LEVEL, "mistral": xgr.VocabType.BYTE_FALLBACK}
    assert info.vocab_type == expected[vocab.name]
    for t in vocab.padding_ids[:3] + vocab.padding_ids[-3:]:
        assert info.token_flags(t) & 4  # XG2_TOKEN_PADDING


def test_lookahead_prunes(vocab):
    """The assertion of ``head ::= [a-z]+ (= "->")`` rejects what the root rule alone
    would allow: "?" and "-=" after the head (the same grammar without the assertion
    allows them)."""
    ebnf = CASES["lookahead_prune"].ebnf
    without = ebnf.replace('(= "->")', "")
    assert without != ebnf
    V = vocab.vocab_size
    checked = 0
    for text, pruned in (("abc", ("?", "-=")), ("abc-", ("=",))):
        m = xgr.GrammarMatcher(vocab.compile(ebnf))
        free = xgr.GrammarMatcher(vocab.compile(without))
        assert m.accept_string(text) and free.accept_string(text)
        bits = bits_of_row(fill(m, V), V)
        free_bits = bits_of_row(fill(free, V), V)
        for p in pruned:
            assert not m.fork().accept_string(p), (text, p)
            assert free.fork().accept_string(p), (text, p)
            starting = [t for t in range(vocab.n_real)
                        if vocab.token_bytes[t] and vocab.token_bytes[t].startswith(p.encode())]
            if starting:  # Mistral has no token starting with "-="
                assert not bits[starting].any(), (text, p)
                assert free_bits[starting].any(), (text, p)
                checked += 1
        # The assertion does not remove what it allows.
        ok = "->" if text == "abc" else ">"
        assert m.fork().accept_string(ok + "x.")
    assert checked >= 2
    # Completion needs the whole string.
    m = xgr.GrammarMatcher(vocab.compile(ebnf))
    assert m.accept_string("ab->cd.") and m.is_completed()


# ---- language oracle: small regular grammars against Python regular expressions -----------

_UTF8_EDGES = ["\x00", "\x7f", "\x80", "\u07ff", "\u0800", "\uffff", "\U00010000", "\U0010ffff",
               "é", "a", "\ud7ff", "\ue000"]

REGULAR_PAIRS = [
    # (grammar body, equivalent regex, pieces to build random strings from, must-check strings)
    ('"x" ([0-9]{40,60})?', r"x(?:[0-9]{40,60})?", ["x", "0", "12", "345"], ["x", "x" + "7" * 40]),
    ('"x" ([0-9]{40,60})? "z"', r"x(?:[0-9]{40,60})?z", ["x", "z", "0", "12", "345"], ["xz"]),
    ('"x" d? "z"\nd ::= [0-9]{40,60}', r"x(?:[0-9]{40,60})?z", ["x", "z", "0", "12", "345"], ["xz"]),
    ('"x" ([0-9]{33} | "") "z"', r"x(?:[0-9]{33})?z", ["x", "z", "0", "12", "345"], ["xz"]),
    ('"x" ([0-9]{32})? "z"', r"x(?:[0-9]{32})?z", ["x", "z", "0", "12", "345"], ["xz"]),
    ('"x" ([0-9]{2,5})?', r"x(?:[0-9]{2,5})?", ["x", "0", "12"], ["x", "x12"]),
    ('"x" "y"{0,100}', r"xy{0,100}", ["x", "y", "yyyyyyyyyy"], ["x", "x" + "y" * 100]),
    ('("ab"{2,3})+', r"(?:(?:ab){2,3})+", ["a", "b", "ab", "abab"], ["abab", "ababab" * 3]),
    ('("a" | "bc"){2,45}', r"(?:a|bc){2,45}", ["a", "b", "c", "bc", "aaaa"], ["abc", "a" * 45]),
    ('([0-9]{40,60} "-")*', r"(?:[0-9]{40,60}-)*", ["-", "0", "1234567890"], ["", "1" * 40 + "-"]),
    ('([a-z]{2,30}){2,4}', r"(?:[a-z]{2,30}){2,4}", ["a", "bc", "defgh", "x" * 10], ["abcd", "a" * 120]),
    ('("é"{3,50} "日"?)+', r"(?:é{3,50}日?)+", ["é", "日", "éé"], ["ééé", "éééé日ééé"]),
    ('("x"{0,100})? "y"', r"x{0,100}y", ["x", "y", "x" * 10], ["y", "x" * 100 + "y"]),
    ('"a" ("b"{40,} | "c")? "d"', r"a(?:b{40,}|c)?d", ["a", "b", "c", "d", "b" * 10], ["ad", "acd", "a" + "b" * 40 + "d"]),
    ('[^a-c]{2} [a-c]*', r"[^a-c]{2}[a-c]*", ["a", "b", "d", "é", "😀"], ["dd", "é😀abc"]),
    ('([0-9] [a-z]?){3,40} "!"', r"(?:[0-9][a-z]?){3,40}!", ["1", "a", "!", "2b"], ["123!", "1a2b3c!"]),
    # UTF-8 length boundaries in classes
    (r"[\u0080-\u07ff]+ [\U00010000-\U0010ffff]*", r"[\u0080-\u07ff]+[\U00010000-\U0010ffff]*", _UTF8_EDGES, ["\u07ff\U00010000"]),
    (r'([^\u0800-\uffff] | "\uffff\U00010000")+', r"(?:[^\u0800-\uffff]|\uffff\U00010000)+", _UTF8_EDGES, ["\uffff\U00010000"]),
    (r"[\x7f-\u0800]{2,40}", r"[\x7f-\u0800]{2,40}", _UTF8_EDGES, ["\x7f\u0800"]),
    # lookahead assertions (each regex is the language the assertion leaves)
    ('k (":" | "=" | "!") [0-9]\nk ::= [a-z]+ (= (":" | "="))', r"[a-z]+[:=][0-9]", ["a", "b", ":", "=", "!", "1"], ["ab:1"]),
    ('(k ",")* k "."\nk ::= [a-z]+ (= [,.])', r"(?:[a-z]+,)*[a-z]+\.", ["a", "b", ",", "."], ["a,b."]),
    ('k [a-z0-9]* "."\nk ::= [a-z]+ (= [0-9] [0-9])', r"[a-z]+[0-9]{2}[a-z0-9]*\.", ["a", "1", "2", "."], ["a12."]),
]


@pytest.mark.parametrize("body, pattern, pieces, must", REGULAR_PAIRS, ids=[p[0] for p in REGULAR_PAIRS])
def test_regular_grammar_language_matches_regex(body, pattern, pieces, must):
    """Character-level differential check: for random strings, accept_string succeeds
    exactly on viable prefixes and is_completed() exactly on members of the language."""
    import regex

    rx = regex.compile(pattern)
    info = xgr.TokenizerInfo(["a", "</s>"], stop_token_ids=[1])
    compiled = xgr.GrammarCompiler(info).compile_grammar("root ::= " + body)
    rng = np.random.default_rng(len(pattern) * 7919 + len(body))
    strings = list(must) + ["".join(rng.choice(pieces, size=int(rng.integers(0, 40)))) for _ in range(250)]
    for s in strings:
        m = xgr.GrammarMatcher(compiled)
        accepted = m.accept_string(s)
        complete = accepted and m.is_completed()
        assert accepted == (rx.fullmatch(s, partial=True) is not None), (body, s, "accepted", accepted)
        assert complete == (rx.fullmatch(s) is not None), (body, s, "completed", complete)
