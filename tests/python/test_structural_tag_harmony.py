"""Harmony on the real o200k_harmony vocabulary (o200k_base's tokens from the
``bpe-openai`` package, the Harmony special tokens at their published ids
199998-201087).  The markers in the tag's strings become ``Token(id)``: matched as
those special tokens only.  XGrammar 0.2.8's engine runs our EBNF as the oracle
until our core has ``Token``."""

from __future__ import annotations

import functools
import json

import pytest

import xg2_plugin as ours
from xg2_plugin.structural_tag.convert import structural_tag_to_ebnf

import o200k_harmony
from st_helpers import ours_in_xgr_accepts, xgr

pytest.importorskip("bpe_openai", reason="the o200k vocabulary comes from bpe-openai (a test dependency)")

SPECIAL, N_VOCAB, EOT = o200k_harmony.SPECIAL, o200k_harmony.N_VOCAB, o200k_harmony.EOT
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}]


@functools.lru_cache(maxsize=1)
def _infos():
    _, vocab = o200k_harmony.load()
    info = ours.TokenizerInfo(vocab, special_token_ids=list(range(199998, N_VOCAB)), stop_token_ids=[EOT])
    return info, xgr.TokenizerInfo(vocab, stop_token_ids=[EOT])


def _tokens(text: str, spelled=False):
    """The transcript's tokens: markers as their special tokens (``spelled``: as
    ordinary text instead)."""
    if spelled:
        return o200k_harmony.load()[0].encode_ordinary(text)
    return o200k_harmony.tokens(text)


@functools.lru_cache(maxsize=8)
def _compiled(tool_choice: str):
    info, xinfo = _infos()
    st = ours.get_model_structural_tag("harmony", TOOLS, tool_choice=tool_choice)
    ebnf = structural_tag_to_ebnf(st, info)
    return ebnf, xgr.GrammarCompiler(xinfo).compile_grammar(ebnf)


def _xgr_run(tool_choice: str, tokens, text=None) -> bool:
    """All tokens accepted by the token-level grammar, and the grammar complete
    after them.  (XGrammar's engine leaves a call after an analysis message
    unterminated at the token level although every token is accepted, while the
    same grammar over text completes: completion is judged on the text.)"""
    m = xgr.GrammarMatcher(_compiled(tool_choice)[1], terminate_without_stop_token=True)
    if not all(m.accept_token(t) for t in tokens):
        return False
    if m.is_terminated() or text is None:
        return m.is_terminated()
    st = ours.get_model_structural_tag("harmony", TOOLS, tool_choice=tool_choice)
    return ours_in_xgr_accepts(st, text)


CALL = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>'
GOOD = [
    "<|channel|>analysis<|message|>The user wants weather.<|end|><|start|>assistant<|channel|>final<|message|>"
    "It is sunny.<|return|>",
    "<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant" + CALL,
    "<|channel|>final<|message|>Hello <|end|> spelled out is text here.<|return|>",
    '<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json'
    '<|message|>{"city": "Oslo", "days": 3}<|call|>',
]
BAD = [
    CALL.replace("get_weather", "get_wether"),
    CALL.replace('{"city": "Paris"}', '{"town": "Paris"}'),
    CALL.replace('{"city": "Paris"}', '{"city": "Paris", "days": "3"}'),
    "<|channel|>final It is sunny.<|return|>",
    "<|channel|>final<|message|>It is sunny.<|return|> more",
    CALL + "<|start|>assistant<|channel|>final<|message|>x<|return|>",
]


def test_markers_are_special_tokens():
    ebnf, _ = _compiled("auto")
    for text, i in SPECIAL.items():
        assert text not in ebnf
    assert f"Token({SPECIAL['<|channel|>']})" in ebnf and f"Token({SPECIAL['<|call|>']})" in ebnf
    assert "TagDispatch" not in ebnf  # free text excludes only markers, which are never text


@pytest.mark.parametrize("text", GOOD)
def test_documented_transcripts_accepted(text):
    assert _xgr_run("auto", _tokens(text), text), text


@pytest.mark.parametrize("text", BAD)
def test_malformed_transcripts_rejected(text):
    assert not _xgr_run("auto", _tokens(text), text), text


def test_spelled_out_markers_are_not_markers():
    assert not _xgr_run("auto", _tokens(GOOD[0], spelled=True))


def test_required_ends_with_a_call():
    assert _xgr_run("required", _tokens(GOOD[1]), GOOD[1])
    assert not _xgr_run("required", _tokens(GOOD[0]), GOOD[0])


def test_our_core_runs_harmony_with_stop_tokens_as_last_terminal():
    """<|call|> and <|return|> are stop tokens and the grammar's last terminal
    (XGrammar issue 701): accepted, and the matcher terminates."""
    enc, vocab = o200k_harmony.load()
    info = ours.TokenizerInfo(vocab, special_token_ids=list(range(199998, N_VOCAB)),
                              stop_token_ids=[SPECIAL["<|return|>"], SPECIAL["<|call|>"]])
    compiled = ours.GrammarCompiler(info).compile_structural_tag(
        ours.get_model_structural_tag("harmony", TOOLS))
    def run(tokens):
        m = ours.GrammarMatcher(compiled)
        return all(m.accept_token(t) for t in tokens) and m.is_terminated()

    for text in GOOD:
        if "spelled out" in text:  # our core never reads a special token as text: spell that marker
            head, tail = text.split("Hello ", 1)
            tokens = _tokens(head) + enc.encode_ordinary("Hello " + tail[:-len("<|return|>")]) + [SPECIAL["<|return|>"]]
            assert not run(_tokens(text)), "the special <|end|> ends the final message"
        else:
            tokens = _tokens(text)
        assert run(tokens), text
    for text in BAD:
        assert not run(_tokens(text)), text
    call = CALL  # (the prompt ends in <|start|>assistant)
    assert run(_tokens(call))
    at = call.index("<|channel|>")  # the same call with <|channel|> spelled out as text
    assert not run(_tokens(call[:at]) + enc.encode_ordinary("<|channel|>") + _tokens(call[at + len("<|channel|>"):]))
