"""Acceptance criterion 2: random walks over allowed tokens only produce valid text.

Each walk samples, for up to 200 steps, a token uniformly among those the mask allows;
as the walk gets longer it prefers the stop token (when allowed) and short "closing"
tokens, so that most walks terminate.  The text is decoded independently of the
engine and judged by independent checkers:

* after every step the text must be a viable prefix (regex partial matching for the
  regular grammars, small recursive-descent parsers for JSON, arithmetic and nested
  lists) and must be valid UTF-8 up to a possibly unfinished last character;
* ``is_completed()`` must agree with the full-string checker at every step;
* every terminated output must pass the full check (``json.loads`` for JSON).
"""

import numpy as np
import pytest

import xg2_plugin as xgr
from vocabs import CASES, GRAMMAR_NAMES, bits_of_row, fill, viable

MAX_STEPS = 200
WALKS = {"deepseek": 4, "mistral": 5}


def _closer_ids(vocab, case):
    wanted = {c.encode("utf-8") for c in case.closers}
    return np.array([t for t in range(vocab.n_real) if vocab.token_bytes[t] in wanted], dtype=np.int64)


def _first_bytes(vocab):
    fb = getattr(vocab, "_first_bytes", None)
    if fb is None:
        fb = np.array([b[0] if b else -1 for b in vocab.token_bytes], dtype=np.int64)
        vocab._first_bytes = fb
    return fb


def walk(vocab, case, compiled, rng, closers, eagerness: float):
    """One walk; returns (text bytes, terminated).

    Half of the ordinary picks are uniform over the allowed tokens; the other half pick
    a first byte uniformly among the allowed tokens' first bytes, then a token with that
    first byte, so that structure ("[", "(", "-", spaces) is not drowned by the many
    word tokens."""
    first = _first_bytes(vocab)
    m = xgr.GrammarMatcher(compiled)
    V = vocab.vocab_size
    text = b""
    for step in range(MAX_STEPS):
        bits = bits_of_row(fill(m, V), V)
        allowed = np.flatnonzero(bits)
        where = f"{vocab.name}/{case.name} step {step} after {text!r}"
        assert len(allowed), f"{where}: dead end, no token allowed"
        finish = min(0.95, eagerness * step / MAX_STEPS)
        if bits[vocab.stop_id] and rng.random() < finish:
            t = vocab.stop_id
        else:
            cands = closers[bits[closers] == 1] if len(closers) else closers
            if len(cands) and rng.random() < finish:
                t = int(rng.choice(cands))
            else:
                fb = first[allowed]
                groups = np.unique(fb[fb >= 0])
                if len(groups) and rng.random() < 0.5:
                    t = int(rng.choice(allowed[fb == rng.choice(groups)]))
                else:
                    t = int(rng.choice(allowed))
        assert m.accept_token(t), f"{where}: allowed token {t} {vocab.token_bytes[t]!r} rejected"
        if t == vocab.stop_id:
            assert m.is_terminated(), f"{where}: stop accepted but not terminated"
            return text, True
        assert not m.is_terminated()
        tb = vocab.token_bytes[t]
        assert tb is not None, f"{where}: a special token {t} was allowed"
        text += tb
        verdict = viable(case, text)
        assert verdict is not False, f"{where}: token {t} {tb!r} gives a text the checker rejects"
        try:
            full = case.full(text.decode("utf-8"))
        except UnicodeDecodeError:
            full = False
        assert m.is_completed() == full, f"{where}: is_completed {m.is_completed()} but checker full={full} for {text!r}"
    return text, False


@pytest.mark.parametrize("grammar", GRAMMAR_NAMES)
def test_random_walks(vocab, grammar):
    case = CASES[grammar]
    compiled = vocab.compile(case.ebnf)
    closers = _closer_ids(vocab, case)
    rng = np.random.default_rng([777, GRAMMAR_NAMES.index(grammar), len(vocab.name)])
    outputs = []
    for w in range(WALKS[vocab.name]):
        text, terminated = walk(vocab, case, compiled, rng, closers, eagerness=1.0 + w)
        if terminated:
            s = text.decode("utf-8")  # strict: a terminated output is whole UTF-8
            assert case.full(s), f"{vocab.name}/{case.name}: terminated output rejected: {s!r}"
            outputs.append(s)
    # The walk policy makes termination likely; if no walk ever terminates, the stop
    # token is never becoming available, which is itself a failure.
    assert outputs, f"{vocab.name}/{case.name}: no walk terminated"
