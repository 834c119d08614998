"""A choice among many tool names is masked as the union of one cache entry per
name (``native/src/literal_fans.c``).  The oracle: at every state of the names'
choice, on the real DeepSeek vocabulary, each token's mask bit equals whether a
forked matcher accepts it -- all tokens where four or more names remain (the
fan states), the allowed ones and a sample elsewhere.  The names share prefixes
(fans below the first byte), one name is a prefix of others (its literal's end,
``>``, is where many tokens run past it: uncertain tokens), and the tags' contents
differ (JSON, a regex, free text), so the literals end in states of every kind.
And the entries are shared: a tool set that adds a name to one seen before looks
the old names up instead of walking the vocabulary again."""

from __future__ import annotations

import json

import numpy as np
import pytest

import xg2_plugin as xgr

from vocabs import bits_of_row, fill

ARGS = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
NAMES = ["get_weather", "get_time", "get_stock_price", "get_news", "get_news_feed", "set_alarm", "set_timer",
         "calc", "calc_sum", "calc_mean", "calc_median", "a", "b", "c"]


def _content(name: str):
    if name == "set_timer":
        return {"type": "regex", "pattern": "[0-9]{1,3}s"}
    if name == "b":
        return {"type": "any_text"}
    return {"type": "json_schema", "json_schema": ARGS}


def _tag(names, trigger="<function=", begin=lambda n: f"<function={n}>", end="</function>"):
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": [trigger], "tags": [
        {"type": "tag", "begin": begin(n), "content": _content(n), "end": end} for n in names]}}


def _body(name: str) -> str:
    return {"set_timer": "15s", "b": "free text"}.get(name, json.dumps({"x": 7}))


def _check(vocab, m, rng, everything: bool) -> np.ndarray:
    bits = bits_of_row(fill(m, vocab.vocab_size), vocab.vocab_size)
    picks = range(vocab.vocab_size) if everything else \
        set(np.flatnonzero(bits).tolist()) | set(rng.sample(range(vocab.vocab_size), 64))
    for t in picks:
        assert bool(bits[t]) == m.fork().accept_token(t), (t, vocab.token_bytes[t])
    return bits


def _walk_names(vocab, compiled, names, prefix: str, begin, end: str):
    """Each name's call, its begin written a character a token from the trigger on,
    so that every state of the names' choice is met."""
    import random

    rng = random.Random(0)
    fans_checked = 0
    for name in names:
        m = xgr.GrammarMatcher(compiled)
        for t in vocab.encode("Sure. " + prefix):
            assert m.accept_token(t)
        rest = begin(name)[len(prefix):]
        for i, ch in enumerate(rest):
            written = rest[:i]
            remaining = [n for n in names if begin(n)[len(prefix):].startswith(written)]
            fan = len(remaining) >= 4
            bits = _check(vocab, m, rng, everything=fan)
            fans_checked += fan
            (t,) = vocab.encode(ch)
            assert bits[t] and m.accept_token(t), (name, written, ch)
        for t in vocab.encode(_body(name) + end + " Done."):
            assert m.accept_token(t), name
        assert m.accept_token(vocab.stop_id) and m.is_terminated()
    return fans_checked


def test_names_choice_masks_match_forks(deepseek):
    compiled = deepseek.compiler.compile_structural_tag(_tag(NAMES))
    # fan states: the choice's start, g/ge/get/get_, c/ca/cal/calc ... on every walk through them
    assert _walk_names(deepseek, compiled, NAMES, "<function=", lambda n: f"<function={n}>", "</function>") >= 40


def test_names_inside_json_begin_masks_match_forks(deepseek):
    """Hermes' begin: the name inside JSON text, the literal running on to the arguments' key."""
    begin = lambda n: f'<tool_call>\n{{"name": "{n}", "arguments": '  # noqa: E731
    tag = _tag(NAMES[:8], trigger="<tool_call>", begin=begin, end="}\n</tool_call>")
    compiled = deepseek.compiler.compile_structural_tag(tag)
    assert _walk_names(deepseek, compiled, NAMES[:8], '<tool_call>\n{"name": "', begin, "}\n</tool_call>") >= 20


def test_names_seen_before_are_looked_up(deepseek):
    """Two tool sets that differ by one name: the second's first mask after the
    trigger finds the names of the first in the cache (one entry each), so it
    counts a cache hit per old name."""
    compiler = xgr.GrammarCompiler(deepseek.info, precompute_pieces=False)  # (counts: no background work)
    ids = deepseek.encode("Sure. <function=")

    def first_mask_after_trigger(names):
        m = xgr.GrammarMatcher(compiler.compile_structural_tag(_tag(names)))
        for t in ids:
            assert m.accept_token(t)
        before = compiler.get_mask_cache_stats()
        fill(m, deepseek.vocab_size)
        after = compiler.get_mask_cache_stats()
        return after["hits"] - before["hits"], after["misses"] - before["misses"]

    first_mask_after_trigger(NAMES[:10])
    hits, misses = first_mask_after_trigger(NAMES[:10] + ["zz_new_tool"])
    assert hits >= 10 and misses <= 2, (hits, misses)


@pytest.mark.parametrize("n", [1, 3])
def test_few_names_are_not_fans_and_stay_exact(deepseek, n):
    """Below four names the choice keeps its walked entry; the masks are exact either way."""
    import random

    names = NAMES[:n]
    compiled = deepseek.compiler.compile_structural_tag(_tag(names))
    m = xgr.GrammarMatcher(compiled)
    for t in deepseek.encode("Sure. <function="):
        assert m.accept_token(t)
    _check(deepseek, m, random.Random(1), everything=True)


def test_a_shared_prefix_is_one_literal_for_every_tool_set(deepseek):
    """Further up a single path that several names share (Harmony's `commentary
    to=functions.`), a state is masked by the path down to the branch as one
    literal: exact at the prefix's states, and shared by tool sets that have no
    name in common (the state's own key, which holds every name below, is new in
    each)."""
    import random

    compiler = xgr.GrammarCompiler(deepseek.info, precompute_pieces=False)  # (counts: no background work)
    prefix = "route=functions."
    rng = random.Random(2)

    def tag(names):
        return _tag(names, trigger="<call>", begin=lambda n: f"<call>{prefix}{n}>", end="</call>")

    m = xgr.GrammarMatcher(compiler.compile_structural_tag(tag(NAMES[:7])))
    for t in deepseek.encode("Sure. <call>"):
        assert m.accept_token(t)
    for i, ch in enumerate(prefix):
        _check(deepseek, m, rng, everything=i in (0, 1, 7, len(prefix) - 3))
        (t,) = deepseek.encode(ch)
        assert m.accept_token(t)
    for t in deepseek.encode("get_time>" + _body("get_time") + "</call> Done."):
        assert m.accept_token(t)
    assert m.accept_token(deepseek.stop_id) and m.is_terminated()

    other = ["alpha_tool", "beta_tool", "gamma_tool", "delta_tool", "epsilon_tool"]
    m = xgr.GrammarMatcher(compiler.compile_structural_tag(tag(other)))
    for t in deepseek.encode("Sure. <call>") + deepseek.encode("ro"):
        assert m.accept_token(t)
    before = compiler.get_mask_cache_stats()
    bits = _check(deepseek, m, rng, everything=True)
    after = compiler.get_mask_cache_stats()
    assert after["misses"] == before["misses"] and after["hits"] > before["hits"], (before, after)
    assert bits[deepseek.encode("ute")[0]] and not bits[deepseek.encode("uter")[0]]


def test_a_special_token_trigger_calls_a_tag_rule(deepseek):
    """A trigger that is a special token (Harmony's `<|channel|>`) dispatches on the
    token (TokenTagDispatch), and the rule it calls is a tag rule as a TagDispatch's
    is: its shared prefix a chain and its choice of names a fan, their entries shared
    across tool sets -- exact (mask bit = forked accept) at each state checked."""
    import random

    compiler = xgr.GrammarCompiler(deepseek.info, precompute_pieces=False)  # (counts: no background work)
    channel = deepseek.tok.convert_ids_to_tokens(128003)  # a special token of the vocabulary
    prefix = "commentary to=functions."
    rng = random.Random(3)

    def first_fill(names, written):
        tag = _tag(names, trigger=channel, begin=lambda n: f"{channel}{prefix}{n}>", end="</call>")
        m = xgr.GrammarMatcher(compiler.compile_structural_tag(tag))
        for t in deepseek.encode("Sure. ") + [128003] + deepseek.encode(written):
            assert m.accept_token(t)
        before = compiler.get_mask_cache_stats()
        _check(deepseek, m, rng, everything=True)
        after = compiler.get_mask_cache_stats()
        return after["hits"] - before["hits"], after["misses"] - before["misses"], m

    first_fill(NAMES[:8], "comm")
    hits, misses, _ = first_fill(["alpha_tool", "beta_tool", "gamma_tool", "delta_tool"], "comm")
    assert (hits, misses) == (1, 0), (hits, misses)  # the chain "entary to=functions."
    first_fill(NAMES[:8], prefix)
    hits, misses, m = first_fill(NAMES[:7] + ["zz_new_tool"], prefix)
    assert hits >= 7 and misses <= 2, (hits, misses)  # the old names' entries
    for t in deepseek.encode("get_time>" + _body("get_time") + "</call> Done."):
        assert m.accept_token(t)
    assert m.accept_token(deepseek.stop_id) and m.is_terminated()
