"""Helpers of the structural-tag tests: accept/reject of strings by XGrammar 0.2.8
(the differential oracle; a test dependency) and by our core."""

from __future__ import annotations

import functools
import json

import pytest

import xg2_plugin as ours
from xg2_plugin.structural_tag.convert import structural_tag_to_ebnf

xgr = pytest.importorskip("xgrammar", reason="xgrammar 0.2.8 is the differential oracle (a test dependency)")
from xgrammar.testing import _is_grammar_accept_string  # noqa: E402


def xgr_accepts_tag(st, text: str) -> bool:
    """XGrammar's own verdict on ``text`` for structural tag ``st``."""
    return _xgr_accept(_xgr_tag_grammar(_as_json(st)), text)


def ours_in_xgr_accepts(st, text: str) -> bool:
    """Our conversion, run by XGrammar's engine: tests the EBNF we emit."""
    return _xgr_accept(_xgr_ebnf_grammar(structural_tag_to_ebnf(st)), text)


def _as_json(st) -> str:
    if isinstance(st, str):
        return st
    if hasattr(st, "model_dump_json"):
        return st.model_dump_json(by_alias=True)
    return json.dumps(st)


@functools.lru_cache(maxsize=256)
def _xgr_tag_grammar(text: str):
    return xgr.Grammar.from_structural_tag(text)


@functools.lru_cache(maxsize=256)
def _xgr_ebnf_grammar(ebnf: str):
    return xgr.Grammar.from_ebnf(ebnf)


def _xgr_accept(grammar, text: str) -> bool:
    return bool(_is_grammar_accept_string(grammar, text))


@functools.lru_cache(maxsize=1)
def _byte_vocab():
    return ours.TokenizerInfo([bytes([b]) for b in range(256)] + [b"</s>"], stop_token_ids=[256])


@functools.lru_cache(maxsize=256)
def _ours_compiled(ebnf: str):
    return ours.GrammarCompiler(_byte_vocab()).compile_grammar(ebnf)


def ours_accepts(st, text: str) -> bool:
    """Our core's verdict: the whole text accepted and the grammar complete there."""
    m = ours.GrammarMatcher(_ours_compiled(structural_tag_to_ebnf(st)))
    return m.accept_string(text.encode("utf-8")) and m.is_completed()
