"""A character class past ASCII at the byte level: a byte string is one character of the
class exactly when it is well-formed UTF-8 (no overlong forms, no surrogates, nothing
past U+10FFFF) for one code point in the class.

The core writes a class as UTF-8 byte-range sequences whose trailing continuation
bytes share states; the oracle is Python's UTF-8 decoder and the class's ranges.
Byte strings: every 1- and 2-byte string with a lead byte past ASCII, and 3- and
4-byte strings over the bytes where the encoding's boundaries lie (each lead byte with
second bytes 7F, 80, 8F, 90, 9F, A0, BF, C0 and a few continuations), so every
boundary of every sequence is crossed.
"""

from __future__ import annotations

import itertools

import pytest

import xg2_plugin as xgr

INFO = xgr.TokenizerInfo([bytes([i]) for i in range(256)])
COMPILER = xgr.GrammarCompiler(INFO, cache_enabled=False)

# (EBNF class, its ranges of code points)
CLASSES = [
    (r"[^a]", [(0, 0x60), (0x62, 0x10FFFF)]),
    (r"[\u0080-\u07ff]", [(0x80, 0x7FF)]),
    (r"[\u0800-\uffff]", [(0x800, 0xFFFF)]),
    (r"[\U00010000-\U0010ffff]", [(0x10000, 0x10FFFF)]),
    (r"[\u00e9\u0100-\u017f\u65e5]", [(0xE9, 0xE9), (0x100, 0x17F), (0x65E5, 0x65E5)]),
    (r"[\x20\x21\x23-\x5b\x5d-\ud7ff\ue000-\U0010ffff]", [(0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF),
                                                          (0xE000, 0x10FFFF)]),
    (r"[\u07f0-\u0810\ud000-\ue0ff\U0010fff0-\U0010ffff]", [(0x7F0, 0x810), (0xD000, 0xE0FF),
                                                            (0x10FFF0, 0x10FFFF)]),
]

EDGES = [0x00, 0x7F, 0x80, 0x81, 0x8F, 0x90, 0x9F, 0xA0, 0xA5, 0xBF, 0xC0, 0xFF]


def _byte_strings():
    out = [bytes([a]) for a in range(256)]
    out += [bytes([a, b]) for a in range(0xC0, 0x100) for b in range(256)]
    for n in (3, 4):
        for lead in range(0xE0 if n == 3 else 0xF0, 0xF0 if n == 3 else 0xF8):
            for rest in itertools.product(EDGES, repeat=n - 1):
                out.append(bytes([lead, *rest]))
    return out


BYTE_STRINGS = _byte_strings()


def _one_char_of(data: bytes, ranges) -> bool:
    try:
        text = data.decode("utf-8")  # (strict: overlong forms, surrogates, > U+10FFFF refused)
    except UnicodeDecodeError:
        return False
    return len(text) == 1 and any(lo <= ord(text) <= hi for lo, hi in ranges)


@pytest.mark.parametrize("klass, ranges", CLASSES, ids=[c for c, _ in CLASSES])
def test_class_accepts_exactly_its_characters(klass, ranges):
    compiled = COMPILER.compile_grammar(f"root ::= {klass}")
    wrong = []
    for data in BYTE_STRINGS:
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        ours = m.accept_string(data) and m.is_completed()
        if ours != _one_char_of(data, ranges):
            wrong.append(data.hex())
    assert not wrong, (klass, len(wrong), wrong[:10])


def test_class_inside_a_loop_and_after_it():
    # the continuation states a class shares stay its own: two classes in a row, one looped
    compiled = COMPILER.compile_grammar(r'root ::= [\u0100-\u017f]* [\u0800-\u0fff] "x"')
    for text, ok in [("x", False), ("\u0800x", True), ("\u0101\u017f\u0800x", True),
                     ("\u0101\u0800\u0101x", False), ("\u0fffx", True), ("\u1000x", False),
                     ("\u0101x", False), ("\u00ffx", False)]:
        m = xgr.GrammarMatcher(compiled, terminate_without_stop_token=True)
        assert (m.accept_string(text) and m.is_completed()) == ok, text
