"""`--reasoning-parser`: SGLang does not wrap a registered backend in its
ReasonerGrammarBackend, so our factory does.  The thinking text is unconstrained, the
grammar applies after the think-end token; with `--enable-strict-thinking` our token
filter keeps the parser's excluded tokens out of the thinking."""
import json

import pytest
import torch
from sgl_helpers import encode, server_args

SCHEMA = json.dumps({"type": "object", "properties": {"answer": {"type": "integer"}},
                     "required": ["answer"], "additionalProperties": False})
THINKING = "Let me think: {{{ not json ]] <b>"


def bit(row, token):
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


def fill(grammar, vocab_size):
    """The mask the way SGLang's sampling_batch_info fills it (batched entry point)."""
    from sglang.srt.constrained.base_grammar_backend import GrammarRow

    mask = grammar.allocate_vocab_mask(vocab_size, 2, "cpu")
    type(grammar).fill_vocab_mask_batched([GrammarRow(1, grammar)], mask)
    return mask


@pytest.fixture(scope="module")
def reasoner(factory, tokenizer, vocab_size):
    return factory(server_args("--reasoning-parser", "deepseek-r1"), tokenizer, vocab_size,
                   {tokenizer.eos_token_id})


def test_factory_wraps_itself_under_a_reasoning_parser(reasoner):
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
    from xg2_plugin.adapters.sglang_backend import XG2GrammarBackend

    assert isinstance(reasoner, ReasonerGrammarBackend)  # SGLang's wrap (our subclass: batched fill)
    assert type(reasoner.grammar_backend) is XG2GrammarBackend


def test_thinking_is_free_then_the_grammar_applies(reasoner, tokenizer, vocab_size):
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarObject

    key = ("json", SCHEMA)
    first = reasoner._init_value_dispatch(key, True)
    assert isinstance(first, ReasonerGrammarObject)
    reasoner.set_cache(key, first.copy())
    g, hit = reasoner.get_cached_or_future_value(key, True)  # as GrammarManager takes it
    assert hit and g is not first
    think_end = reasoner.think_end_ids
    assert think_end == encode(tokenizer, "</think>")
    for t in encode(tokenizer, THINKING):
        assert bool((fill(g, vocab_size)[1] == -1).all())  # unconstrained while thinking
        g.accept_token(t)
    for t in think_end:
        g.accept_token(t)
    mask = fill(g, vocab_size)[1]
    brace, hello = encode(tokenizer, "{")[0], encode(tokenizer, "hello")[0]
    assert bit(mask, brace) and not bit(mask, hello)
    with pytest.raises(ValueError):
        g.accept_token(hello)
    for t in encode(tokenizer, '{"answer": 42}') + [tokenizer.eos_token_id]:
        g.accept_token(t)
    assert g.is_terminated()
    # rolling back across the think-end token makes the text free again
    g.rollback(len(encode(tokenizer, '{"answer": 42}')) + 2)
    assert bool((fill(g, vocab_size)[1] == -1).all())


def test_without_the_wrap_the_grammar_would_constrain_the_thinking(backend, tokenizer):
    g = backend._init_value_dispatch(("json", SCHEMA), True)
    with pytest.raises(ValueError):
        for t in encode(tokenizer, THINKING):
            g.accept_token(t)


def test_strict_thinking_filters_with_our_token_filter(factory, tokenizer, vocab_size):
    strict = factory(server_args("--reasoning-parser", "qwen3", "--enable-strict-thinking"),
                     tokenizer, vocab_size, {tokenizer.eos_token_id})
    assert strict.enable_token_filter
    excluded = set(strict.think_excluded_token_ids)
    assert excluded
    g = strict._init_value_dispatch(("json", SCHEMA), True)
    mask = fill(g, vocab_size)[1]
    for t in sorted(excluded)[:50]:
        assert not bit(mask, t)
    allowed = [t for t in range(0, vocab_size, 997) if t not in excluded]
    assert all(bit(mask, t) for t in allowed)


def test_batched_fill_under_the_wrap_is_one_native_call(reasoner, tokenizer, vocab_size, monkeypatch):
    """Rows in their answer join one native call; a thinking row stays free; the result is
    what SGLang's per-row fills give."""
    from sglang.srt.constrained.base_grammar_backend import BaseGrammarObject, GrammarRow
    from xg2_plugin import BatchGrammarMatcher

    grammars = []
    for spec, answer in ((SCHEMA, '{"ans'), ("[0-9]+", "12"), ('{"type": "object"}', None)):
        g = reasoner._init_value_dispatch(("regex" if spec == "[0-9]+" else "json", spec), True).copy()
        g.maybe_init_reasoning(True)
        for t in encode(tokenizer, "hmm"):
            g.accept_token(t)
        if answer is not None:  # (the third keeps thinking)
            for t in reasoner.think_end_ids + encode(tokenizer, answer):
                g.accept_token(t)
        grammars.append(g)
    entries = [GrammarRow(r, g) for r, g in zip((2, 0, 3), grammars)]
    calls = []
    real = BatchGrammarMatcher.batch_fill_next_token_bitmask
    monkeypatch.setattr(BatchGrammarMatcher, "batch_fill_next_token_bitmask",
                        lambda self, m, *a, **k: calls.append(len(m)) or real(self, m, *a, **k))
    batched = grammars[0].allocate_vocab_mask(vocab_size, 4, "cpu")
    grammars[0].fill_vocab_mask_batched(entries, batched)
    assert calls == [2]
    looped = grammars[0].allocate_vocab_mask(vocab_size, 4, "cpu")
    BaseGrammarObject.fill_vocab_mask_batched(entries, looped)  # SGLang's own loop
    assert torch.equal(batched, looped)
    assert bool((batched[3] == -1).all()) and not bool((batched[2] == -1).all())
