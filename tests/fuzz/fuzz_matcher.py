"""atheris target: a byte script drives one matcher (and its forks) through
accept_token / accept_string / rollback / fill / fork / reset / jump-forward on a fixed
set of grammars, checking the matcher against a model of what it must do:

* the step count follows accepts, rollbacks and resets;
* after rolling back to step k the mask is the one filled at step k before;
* a token in the mask is accepted, a token not in it refused (once terminated: every
  token refused, the mask only the stop token);
* a fork fills the same mask as its parent, and stays independent of it;
* the jump-forward bytes are accepted;
* bad arguments (ids out of range, rolling back too far) raise InvalidArgumentError.

Input: byte 0 picks the grammar, then one op byte and its operands at a time.
"""

import numpy as np

import fuzzlib
from fuzzlib import EXPECTED, STOP_ID, VOCAB_SIZE, WORDS, InvalidArgumentError, Script, allowed, fixed_grammar, xgr


def _mask(m):
    row = np.zeros((3, WORDS), dtype=np.int32)
    m.fill_next_token_bitmask(row, 1)
    assert not row[0].any() and not row[2].any(), "the fill wrote outside its row"
    return row[1].copy()

fuzzlib.warm_up()


def test_one_input(data: bytes) -> None:
    s = Script(data)
    compiled = fixed_grammar(s.byte())
    m = xgr.GrammarMatcher(compiled)
    masks = {}  # step count -> the mask filled there (valid until something new is accepted there)

    def accepted(ok: bool) -> None:
        steps = m.num_accepted_steps
        if ok:
            # a new step: masks recorded at or past it belong to another history
            for k in [k for k in masks if k >= steps]:
                del masks[k]

    ops = 0
    while s.more() and ops < 64:
        ops += 1
        op = s.byte() % 9
        before = m.num_accepted_steps
        if op == 0:  # any id, padding and stop included
            tok = s.u16() % VOCAB_SIZE
            mask = _mask(m)
            # once terminated, the row keeps the stop tokens but every token is refused
            bit = bool(mask[tok >> 5] >> (tok & 31) & 1) and not m.is_terminated()
            ok = m.accept_token(tok)
            assert ok == bit, f"token {tok}: mask bit {bit}, accept_token {ok} at step {before}"
            assert m.num_accepted_steps == before + ok
            accepted(ok)
        elif op == 1:  # an allowed token
            ok_ids = allowed(_mask(m))
            if ok_ids and not m.is_terminated():
                tok = ok_ids[s.byte() % len(ok_ids)]
                assert m.accept_token(tok), f"allowed token {tok} refused at step {before}"
                accepted(True)
        elif op == 2:
            text = s.take(s.byte() % 8)
            ok = m.accept_string(text)
            assert m.num_accepted_steps == before + ok
            accepted(ok)
        elif op == 3:
            n = s.byte() % 6
            if n > before:
                try:
                    m.rollback(n)
                except InvalidArgumentError:
                    assert m.num_accepted_steps == before
                    continue
                raise AssertionError(f"rollback({n}) with {before} steps did not raise")
            m.rollback(n)
            assert m.num_accepted_steps == before - n
            if before - n in masks:
                assert (_mask(m) == masks[before - n]).all(), f"mask differs after rollback to step {before - n}"
        elif op == 4:
            masks[before] = _mask(m)
        elif op == 5:
            f = m.fork()
            assert f.num_accepted_steps == before and f.is_terminated() == m.is_terminated()
            assert (_mask(f) == _mask(m)).all(), "a fork fills another mask"
            ids = allowed(_mask(f))
            if ids and not f.is_terminated():  # advancing the fork leaves the parent alone
                mine = _mask(m)
                f.accept_token(ids[s.byte() % len(ids)])
                assert (_mask(m) == mine).all() and m.num_accepted_steps == before
            if s.byte() & 1:
                m = f
                masks.clear()
        elif op == 6:
            m.reset()
            assert m.num_accepted_steps == 0 and not m.is_terminated()
            masks = {k: v for k, v in masks.items() if k == 0}
        elif op == 7:
            jf = m.find_jump_forward_bytes()
            if jf and not m.is_terminated():
                f = m.fork()
                assert f.accept_string(jf), f"jump-forward bytes {jf!r} refused"
        else:  # bad arguments
            bad = [-1, VOCAB_SIZE, 2**31 - 1][s.byte() % 3]
            try:
                m.accept_token(bad)
            except InvalidArgumentError:
                pass
            else:
                raise AssertionError(f"accept_token({bad}) did not raise")
            assert m.num_accepted_steps == before
        if m.is_terminated():
            assert allowed(_mask(m)) == [STOP_ID], "a terminated matcher allows more than the stop token"


if __name__ == "__main__":
    def guarded(data: bytes) -> None:
        try:
            test_one_input(data)
        except EXPECTED as e:  # the script above only makes valid calls: a refusal is a find
            raise AssertionError(f"{type(e).__name__}: {e}") from e

    fuzzlib.main(guarded)
