"""Token-level formats (``token``, ``exclude_token``, ``any_tokens``, token begins
and ends, ``token_triggered_tags``, ``token_dispatch``) and triggers that are a
special token's text, on a byte vocabulary with special tokens: our EBNF and
XGrammar 0.2.8's own conversion, both run by XGrammar's engine on token
sequences, must agree; our core runs them once ``Token`` lands."""

from __future__ import annotations

import functools

import pytest

import xg2_plugin as ours
from xg2_plugin.structural_tag.convert import structural_tag_to_ebnf

from st_helpers import xgr

VOCAB = [bytes([b]) for b in range(256)] + [b"<s1>", b"<s2>", b"<|x|>", b"</s>"]
S1, S2, X, STOP = 256, 257, 258, 259
A, B, Q, BANG = ord("a"), ord("b"), ord("q"), ord("!")


@functools.lru_cache(maxsize=1)
def _infos():
    return (ours.TokenizerInfo(VOCAB, special_token_ids=[S1, S2, X], stop_token_ids=[STOP]),
            xgr.TokenizerInfo(VOCAB, stop_token_ids=[STOP]))


def _run(compiled, seq) -> bool:
    m = xgr.GrammarMatcher(compiled)
    return all(m.accept_token(t) for t in seq) and m.accept_token(STOP)


def _both(fmt):
    info, xinfo = _infos()
    st = {"type": "structural_tag", "format": fmt}
    ebnf = structural_tag_to_ebnf(st, info)
    compiler = xgr.GrammarCompiler(xinfo)
    return compiler.compile_grammar(ebnf), compiler.compile_structural_tag(st), ebnf


TAG = {"type": "tag", "begin": {"type": "token", "token": "<s1>"}, "content": {"type": "const_string", "value": "a"},
       "end": {"type": "token", "token": S2}}
CASES = [
    ("token", {"type": "token", "token": "<s1>"}, [[S1], [S2], [A], []]),
    ("token_id", {"type": "token", "token": X}, [[X], [S1]]),
    ("exclude_token", {"type": "exclude_token", "exclude_tokens": ["<s1>", A]}, [[S1], [A], [B], [B, B]]),
    ("any_tokens", {"type": "any_tokens", "exclude_tokens": [S2]}, [[], [S1, A, B], [A, S2]]),
    ("token_tag", TAG, [[S1, A, S2], [S1, A], [A, S2]]),
    ("token_triggered_tags", {"type": "token_triggered_tags", "trigger_tokens": ["<s1>"], "tags": [TAG],
                              "exclude_tokens": [X]},
     [[B, S1, A, S2, B], [S1, A, S2, S1, A, S2], [S1, B, S2], [X], []]),
    ("token_triggered_first", {"type": "token_triggered_tags", "trigger_tokens": [S1], "tags": [TAG],
                               "at_least_one": True, "stop_after_first": True},
     [[S1, A, S2], [S1, A, S2, B], [B]]),
    ("token_dispatch", {"type": "token_dispatch", "rules": [["<s1>", {"type": "const_string", "value": "a"}]],
                        "exclude_tokens": [X], "loop": False},
     [[B, S1, A], [B, S1, A, B], [X], [B]]),
]


@pytest.mark.parametrize("name,fmt,seqs", CASES, ids=[c[0] for c in CASES])
def test_token_formats_agree_with_xgrammar(name, fmt, seqs):
    ours_g, theirs_g, ebnf = _both(fmt)
    verdicts = [(s, _run(theirs_g, s), _run(ours_g, s)) for s in seqs]
    assert [v[1] for v in verdicts] == [v[2] for v in verdicts], (verdicts, ebnf)
    assert any(v[1] for v in verdicts) and not all(v[1] for v in verdicts), verdicts


def test_special_token_trigger_is_the_token():
    """A trigger that is a special token's text dispatches on that token; the
    same text spelled in ordinary tokens is plain free text (XGrammar matches it as
    text: it has no special tokens here)."""
    fmt = {"type": "triggered_tags", "triggers": ["<|x|>"],
           "tags": [{"begin": "<|x|>", "content": {"type": "const_string", "value": "q"}, "end": "!"}],
           "at_least_one": False, "stop_after_first": False}
    ours_g, theirs_g, ebnf = _both(fmt)
    assert "TokenTagDispatch(" in ebnf and f"({X}," in ebnf
    assert _run(ours_g, [A, X, Q, BANG, B]) and _run(theirs_g, [A, X, Q, BANG, B])
    assert not _run(ours_g, [A, X, B]) and not _run(theirs_g, [A, X, B])
    spelled = list(b"<|x|>")
    assert _run(ours_g, spelled + [B])  # (plain text: no dispatch)
    assert not _run(theirs_g, spelled + [B])


def test_max_tokens_holds_for_accepted_tokens():
    """``max_tokens`` bounds the tokens whichever way they arrive (XGrammar 0.2.8
    enforces it in masks only: its ``accept_token`` lets a third token through)."""
    ours_g, theirs_g, ebnf = _both({"type": "any_tokens", "exclude_tokens": [X], "max_tokens": 2})
    assert [_run(ours_g, s) for s in ([A], [A, B], [A, B, A], [X])] == [True, True, False, False]
    assert _run(theirs_g, [A, B, A])


def test_no_exclusions_is_any_token():
    """XGrammar prints ``ExcludeToken()`` for "any one token" but its parser
    refuses it (0.2.8); we emit the same text, for our core to accept."""
    ebnf = structural_tag_to_ebnf({"type": "structural_tag", "format": {"type": "any_tokens"}}, _infos()[0])
    assert "(ExcludeToken())*" in ebnf


def test_mixed_special_and_text_triggers_refused():
    with pytest.raises(ours.GrammarError, match=r"format\.triggers: some triggers are special tokens"):
        structural_tag_to_ebnf({"type": "structural_tag", "format": {
            "type": "triggered_tags", "triggers": ["<|x|>", "<t"],
            "tags": [{"begin": "<|x|>", "content": {"type": "const_string", "value": "q"}, "end": "!"},
                     {"begin": "<t>", "content": {"type": "const_string", "value": "q"}, "end": "!"}]}},
            _infos()[0])


def test_text_trigger_holding_a_special_token_refused():
    with pytest.raises(ours.GrammarError, match=r"format\.triggers\[0\]: .*holds the special token '<s1>'"):
        structural_tag_to_ebnf({"type": "structural_tag", "format": {
            "type": "triggered_tags", "triggers": ["<s1>call"],
            "tags": [{"begin": "<s1>call(", "content": {"type": "const_string", "value": "q"}, "end": ")"}]}},
            _infos()[0])


def test_token_errors_name_their_path():
    info = _infos()[0]
    for fmt, pattern in [({"type": "token", "token": "<nope>"}, r"format\.token: no token"),
                         ({"type": "token", "token": 10**6}, r"format\.token: token id 1000000 is beyond"),
                         ({"type": "exclude_token", "exclude_tokens": [-1]}, r"format\.exclude_tokens\[0\]"),
                         ({"type": "token_triggered_tags", "trigger_tokens": [S1], "tags": [
                             dict(TAG, begin={"type": "token", "token": S2})]}, r"format\.tags\[0\]\.begin")]:
        with pytest.raises(ours.GrammarError, match=pattern):
            structural_tag_to_ebnf({"type": "structural_tag", "format": fmt}, info)


def test_our_core_runs_token_formats():
    info = _infos()[0]
    compiled = ours.GrammarCompiler(info).compile_structural_tag({"type": "structural_tag", "format": TAG})
    m = ours.GrammarMatcher(compiled)
    assert m.accept_token(S1) and m.accept_token(A) and m.accept_token(S2) and m.is_completed()


@pytest.mark.parametrize("name,fmt,seqs", CASES, ids=[c[0] for c in CASES])
def test_token_formats_parse_from_model_dict_and_json(name, fmt, seqs):
    import json

    from xg2_plugin.structural_tag import parse_structural_tag

    tag = {"type": "structural_tag", "format": fmt}
    a, b = parse_structural_tag(tag), parse_structural_tag(json.dumps(tag))
    assert a == b == parse_structural_tag(a) == parse_structural_tag(a.model_dump_json())
    info = _infos()[0]
    assert structural_tag_to_ebnf(a, info) == structural_tag_to_ebnf(b, info)


def test_special_texts_are_found_leftmost_longest_like_a_regex_alternation():
    # Special tokens' texts in tag strings are found without compiling a regex of
    # them all (slow for Llama-3's 256); oracle: that regex, longest first.
    import random
    import re

    from xg2_plugin.structural_tag.convert import _SpecialTexts

    rng = random.Random(24)
    alpha = "<|>ab"
    for _ in range(300):
        words = list({"".join(rng.choice(alpha) for _ in range(rng.randint(2, 5))) for _ in range(rng.randint(1, 8))})
        ref = re.compile("|".join(map(re.escape, sorted(words, key=len, reverse=True))))
        finder = _SpecialTexts(words)
        for _ in range(30):
            text = "".join(rng.choice(alpha + "xy]\\-^") for _ in range(rng.randint(0, 20)))
            assert list(finder.finditer(text)) == [(m.start(), m.end(), m.group(0)) for m in ref.finditer(text)]
            assert finder.search(text) == next(((m.start(), m.end(), m.group(0)) for m in ref.finditer(text)), None)
