"""The o200k_harmony vocabulary for the Harmony tests: o200k_base's tokens from the
bpe-openai package (a test dependency), Harmony's markers as special tokens at their
ids, the rest of the special range reserved; and a transcript's tokens with the markers
as those special tokens."""

import functools
import re

import pytest

SPECIAL = {"<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002, "<|constrain|>": 200003,
           "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008, "<|call|>": 200012}
N_VOCAB = 201088
EOT = 199999
_MARKERS = re.compile("|".join(map(re.escape, SPECIAL)))


@functools.lru_cache(maxsize=1)
def load():
    """(encoding, the vocabulary's token bytes)."""
    bpe_openai = pytest.importorskip("bpe_openai", reason="the o200k vocabulary comes from bpe-openai (a test dependency)")
    enc = bpe_openai.get_encoding("o200k_base")
    vocab = [enc.decode_single_token_bytes(i) for i in range(199998)]
    vocab += [f"<|reserved_{i}|>".encode() for i in range(199998, N_VOCAB)]
    for text, i in SPECIAL.items():
        vocab[i] = text.encode()
    return enc, vocab


def tokens(text: str):
    """The transcript's tokens, each marker as its special token."""
    enc, _ = load()
    out, at = [], 0
    for m in _MARKERS.finditer(text):
        out += enc.encode_ordinary(text[at:m.start()])
        out.append(SPECIAL[m.group(0)])
        at = m.end()
    return out + enc.encode_ordinary(text[at:])
