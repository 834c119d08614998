"""SGLang's reasoning wrap, made to keep xg2's one-call batched fill.

SGLang fills a step's masks through the FIRST grammar object's `fill_vocab_mask_batched`;
under `--reasoning-parser` that object is SGLang's `ReasonerGrammarObject`, whose batched
fill is a loop of per-row fills.  These subclasses change only that: the batch goes
through xg2's fill, and a wrapper whose row is just our grammar's row joins the one
native call.  Everything else (thinking, the think-end match, strict thinking) is SGLang's.
"""
from __future__ import annotations

from sglang.srt.constrained.reasoner_grammar_backend import (
    ReasonerGrammarBackend,
    ReasonerGrammarObject,
)

from .sglang_backend import XG2Grammar

# The versions whose ReasonerGrammarObject.fill_vocab_mask was read: it edits a row after
# the inner fill only with reasoning_in_grammar and a token filter.  Elsewhere: no deferral.
REVIEWED_SGLANG = ("0.5.23",)


def _sglang_version() -> str:
    from importlib.metadata import version

    return version("sglang")


_DEFER_OK = _sglang_version() in REVIEWED_SGLANG


class XG2ReasonerGrammar(ReasonerGrammarObject):
    fill_vocab_mask_batched = staticmethod(XG2Grammar.fill_vocab_mask_batched)

    @property
    def defers_inner_fill(self) -> bool:
        return _DEFER_OK and not (self.reasoning_in_grammar and self.enable_token_filter)

    def copy(self) -> "XG2ReasonerGrammar":
        obj = super().copy()
        obj.__class__ = XG2ReasonerGrammar  # (SGLang's copy builds its own class)
        return obj


class XG2ReasonerBackend(ReasonerGrammarBackend):
    def _make_grammar_object(self, grammar, reasoning):
        obj = super()._make_grammar_object(grammar, reasoning)
        obj.__class__ = XG2ReasonerGrammar
        return obj
