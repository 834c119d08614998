"""atheris differential target: the mask bit of a token equals whether a fork of the
matcher accepts it.

Input: if byte 0 is >= 0xC0 and the input has a NUL, the text between them is an EBNF
grammar (compiled under the budget; a refusal ends the run); else byte 0 picks a fixed
grammar.  The rest is the walk: per step, 8 sampled token ids are checked against
fork().accept_token, then the matcher advances by an allowed token or a fuzzed string.
At the end every token id is checked.
"""

import numpy as np

import fuzzlib
from fuzzlib import COMPILER, EXPECTED, VOCAB_SIZE, WORDS, Script, allowed, budget, fixed_grammar, xgr


def _check(m, mask, ids) -> None:
    for t in ids:
        bit = bool(mask[t >> 5] >> (t & 31) & 1)
        got = m.fork().accept_token(t)
        assert bit == got, f"token {t} ({fuzzlib.TOKENS[t] if t < len(fuzzlib.TOKENS) else 'padding'}!r): " \
                           f"mask bit {bit}, fork().accept_token {got} after {m.num_accepted_steps} steps"


def _grammar(data: bytes):
    """(compiled grammar or None, the script's bytes)."""
    if data[:1] and data[0] >= 0xC0 and b"\0" in data:
        text, script = data[1:].split(b"\0", 1)
        try:
            with budget():
                return COMPILER.compile_grammar(text.decode("utf-8", "replace")), script
        except EXPECTED:
            return None, b""
    return fixed_grammar(data[0] if data else 0), data[1:]

fuzzlib.warm_up()


def test_one_input(data: bytes) -> None:
    compiled, script = _grammar(data)
    if compiled is None:
        return
    s = Script(script)
    m = xgr.GrammarMatcher(compiled)
    row = np.zeros((1, WORDS), dtype=np.int32)
    for _ in range(24):
        if m.is_terminated() or not s.more():
            break
        m.fill_next_token_bitmask(row)
        mask = row[0].copy()
        _check(m, mask, [s.u16() % VOCAB_SIZE for _ in range(8)])
        ids = allowed(mask)
        op = s.byte()
        if op < 0xE0 and ids:
            assert m.accept_token(ids[op % len(ids)])
        else:
            m.accept_string(s.take(op % 6))
    if not m.is_terminated():
        m.fill_next_token_bitmask(row)
        _check(m, row[0].copy(), range(VOCAB_SIZE))


if __name__ == "__main__":
    fuzzlib.main(test_one_input)
