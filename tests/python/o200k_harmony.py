"""The o200k_harmony vocabulary for the Harmony tests: the benchmarks' own
(``examples/benchmark/harmony_vocab.py``: o200k_base's tokens from the bpe-openai package, a
test dependency, Harmony's markers as special tokens at their ids, the rest of the special
range reserved), and a transcript's tokens with the markers as those special tokens."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "benchmark"))
import harmony_vocab  # noqa: E402

SPECIAL, N_VOCAB, EOT = harmony_vocab.SPECIAL, harmony_vocab.N_VOCAB, harmony_vocab.EOT


def load():
    """(encoding, the vocabulary's token bytes)."""
    pytest.importorskip("bpe_openai", reason="the o200k vocabulary comes from bpe-openai (a test dependency)")
    v = harmony_vocab.load()
    return v.enc, v.tokens


def tokens(text: str):
    """The transcript's tokens, each marker as its special token."""
    load()
    return harmony_vocab.load().encode(text)
