"""Mask helpers for the vLLM suite: rows as booleans, the fork oracle, one step of vLLM's
manager for one request."""
from __future__ import annotations

import random

import numpy as np


def bits(row: np.ndarray, n: int) -> np.ndarray:
    """Token t allowed <=> bit (t & 31) of word (t >> 5): the first n as booleans."""
    words = np.ascontiguousarray(row).view(np.uint32)
    return ((words[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(bool).reshape(-1)[:n]


def step_mask(manager, request) -> np.ndarray:
    """The manager's mask row for this request, as the scheduler asks for it."""
    out = manager.grammar_bitmask({request.request_id: request}, [request.request_id], {})
    return out[0].copy()


def check_against_fork(grammar, allowed: np.ndarray, rng: random.Random, extra=(), sample: int = 300):
    """Mask bit == whether a fork of the request's matcher accepts the token, for every
    allowed token (up to `sample` of them), `sample` disallowed ones and `extra` ids."""
    on = np.flatnonzero(allowed).tolist()
    off = np.flatnonzero(~allowed).tolist()
    ids = rng.sample(on, min(sample, len(on))) + rng.sample(off, min(sample, len(off))) + list(extra)
    for t in ids:
        fork = grammar.matcher.fork()
        assert fork.accept_token(t) == bool(allowed[t]), f"token {t}: mask {bool(allowed[t])}"
    return len(ids)
