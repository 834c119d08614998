"""The grammar object through SGLang's interfaces: copy isolation, rejection, rollback,
masks (allocate, fill, batched fill, move, apply), jump-forward, invalid specs, the
strict-thinking token filter and the byte-bounded cache."""
import json

import pytest
import torch
from sgl_helpers import compiled, encode, sglang_function

SCHEMA = json.dumps({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                       "age": {"type": "integer"}},
                     "required": ["name", "age"], "additionalProperties": False})


def allowed(mask_row: torch.Tensor, token: int) -> bool:
    return bool((int(mask_row[token >> 5]) >> (token & 31)) & 1)


def test_copy_is_a_fresh_matcher_over_the_same_compiled_grammar(backend, tokenizer):
    template = compiled(backend, "json", SCHEMA)
    a, b = template.copy(), template.copy()
    assert a.matcher is not b.matcher and a.compiled is b.compiled is template.compiled
    for t in encode(tokenizer, '{"name": "x'):
        a.accept_token(t)
    # b (and the cached template) did not move: '{' is still where they start
    first = encode(tokenizer, "{")[0]
    b.accept_token(first)
    assert template.num_accepted == 0 and b.num_accepted == 1
    assert a.grammar_stats.is_cache_hit and not template.grammar_stats.is_cache_hit


def test_sglang_cache_returns_copies(backend):
    key = ("regex", "[ab]{3}")
    backend.set_cache(key, compiled(backend, *key))
    one, hit1 = backend.get_cached_or_future_value(key, False)
    two, hit2 = backend.get_cached_or_future_value(key, False)
    assert hit1 and hit2 and one is not two and one.matcher is not two.matcher


def test_rejection_raises_value_error_and_keeps_state(backend, tokenizer):
    g = compiled(backend, "regex", "[0-9]+")
    g.accept_token(encode(tokenizer, "12")[0])
    with pytest.raises(ValueError, match="not allowed by the regex grammar after 1 accepted"):
        g.accept_token(encode(tokenizer, "a")[0])
    g.accept_token(encode(tokenizer, "3")[0])  # still usable where it was
    g.accept_token(tokenizer.eos_token_id)
    assert g.is_terminated()
    g.accept_token(encode(tokenizer, "a")[0])  # after the stop token: ignored, as upstream


def test_out_of_range_token_is_a_value_error(backend, vocab_size):
    g = compiled(backend, "regex", "[0-9]+")
    with pytest.raises(ValueError):
        g.accept_token(vocab_size + 5)


def test_rollback_including_termination(backend, tokenizer):
    g = compiled(backend, "regex", "ab")
    for t in encode(tokenizer, "ab") + [tokenizer.eos_token_id]:
        g.accept_token(t)
    assert g.is_terminated()
    g.rollback(1)
    assert not g.is_terminated()
    g.rollback(g.num_accepted)
    for t in encode(tokenizer, "ab"):
        g.accept_token(t)
    assert g.matcher.is_completed()


def test_rollback_limit(backend, tokenizer):
    from xg2_plugin.adapters.sglang_backend import MAX_ROLLBACK_TOKENS

    g = compiled(backend, "regex", "a*")
    a = encode(tokenizer, "a")[0]
    for _ in range(MAX_ROLLBACK_TOKENS + 10):
        g.accept_token(a)
    g.rollback(MAX_ROLLBACK_TOKENS)
    with pytest.raises(ValueError, match="roll"):
        g.rollback(11)


def test_mask_allocate_fill_apply(backend, tokenizer, vocab_size):
    g = compiled(backend, "regex", "(yes|no)")
    mask = g.allocate_vocab_mask(vocab_size, 3, "cpu")
    assert mask.dtype == torch.int32 and mask.shape == (3, (vocab_size + 31) // 32)
    assert bool((mask == -1).all())  # all allowed to start
    g.fill_vocab_mask(mask, 1)
    assert bool((mask[0] == -1).all()) and bool((mask[2] == -1).all())  # other rows untouched
    yes, no, maybe = encode(tokenizer, "yes")[0], encode(tokenizer, "no")[0], encode(tokenizer, "maybe")[0]
    assert allowed(mask[1], yes) and allowed(mask[1], no) and not allowed(mask[1], maybe)
    assert not any(allowed(mask[1], t) for t in range(len(tokenizer), vocab_size))  # padding
    mask = g.move_vocab_mask(mask, torch.device("cpu"))
    logits = torch.zeros(3, vocab_size)
    g.apply_vocab_mask(logits=logits, vocab_mask=mask)
    assert logits[1, maybe] == float("-inf") and logits[1, yes] == 0 and logits[0, maybe] == 0
    ok = torch.tensor([allowed(mask[1], t) for t in range(vocab_size)])
    assert bool(torch.isinf(logits[1]).eq(~ok).all())
    g.reset_vocab_mask(mask)
    assert bool((mask == -1).all())


def test_batched_fill_is_one_native_call_equal_to_row_fills(backend, tokenizer, vocab_size, monkeypatch):
    from sglang.srt.constrained.base_grammar_backend import GrammarRow
    from xg2_plugin import BatchGrammarMatcher
    from xg2_plugin.adapters.sglang_backend import XG2Grammar

    grammars = [compiled(backend, "regex", r) for r in ("[0-9]+", "(yes|no)", "[a-z]{2}")]
    grammars.append(compiled(backend, "json", SCHEMA))
    for t in encode(tokenizer, '{"name"'):
        grammars[3].accept_token(t)
    calls = []
    real = BatchGrammarMatcher.batch_fill_next_token_bitmask
    monkeypatch.setattr(BatchGrammarMatcher, "batch_fill_next_token_bitmask",
                        lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    rows = [4, 0, 2, 1]
    batched = grammars[0].allocate_vocab_mask(vocab_size, 6, "cpu")
    XG2Grammar.fill_vocab_mask_batched([GrammarRow(r, g) for r, g in zip(rows, grammars)], batched)
    assert calls == [1]
    single = grammars[0].allocate_vocab_mask(vocab_size, 6, "cpu")
    for r, g in zip(rows, grammars):
        g.fill_vocab_mask(single, r)
    assert torch.equal(batched, single)
    assert bool((batched[3] == -1).all()) and bool((batched[5] == -1).all())


@pytest.mark.parametrize("key_type, spec, where", [
    ("json", '{"type": "object", "properties": {"a": {"type": "strin"}}}', "strin"),
    ("json", "{not json", "JSON"),
    ("regex", "[a-", "regex"),
    ("ebnf", 'root ::= "a" undefined_rule', "undefined_rule"),
    ("ebnf", "start: \"a\" missing_rule", "missing_rule"),
    ("structural_tag", "{not json", "structural tag"),
    ("structural_tag", '{"structures": [{"schema": {}}], "triggers": ["<a"]}', "KeyError"),
])
def test_invalid_specs_are_invalid_grammar_objects_with_the_reason(backend, key_type, spec, where):
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    g = backend._init_value_dispatch((key_type, spec), False)
    assert isinstance(g, InvalidGrammarObject)
    assert g.error_message.startswith("xg2: invalid") and where in g.error_message


def test_json_object_any_json_and_lark(backend, tokenizer):
    obj = compiled(backend, "json", '{"type": "object"}')  # OpenAI json_object
    assert obj.matcher.accept_string('{"k": [1, {"z": null}]}')
    assert not compiled(backend, "json", '{"type": "object"}').matcher.accept_string("[")
    anyj = compiled(backend, "json", "$$ANY$$")
    assert anyj.matcher.accept_string("[1, 2]")
    lark = compiled(backend, "ebnf", 'start: "a" B\nB: /[0-9]+/')
    for t in encode(tokenizer, "a42"):
        lark.accept_token(t)
    lark.accept_token(tokenizer.eos_token_id)
    assert lark.is_terminated()


def test_jump_forward(backend, tokenizer):
    schema = json.dumps({"type": "object", "properties": {"temperature": {"type": "number"}},
                         "required": ["temperature"], "additionalProperties": False})
    g = compiled(backend, "json", schema)
    g.accept_token(encode(tokenizer, "{")[0])
    assert g.try_jump_forward(tokenizer) is None  # (whitespace may come next: nothing forced)
    g.accept_token(encode(tokenizer, '"')[0])
    helper = g.try_jump_forward(tokenizer)
    forced, state = g.jump_forward_str_state(helper)
    assert forced == 'temperature"'
    # SGLang retokenizes the output with the forced text appended, then the grammar follows
    old = encode(tokenizer, "{") + encode(tokenizer, '"')
    new = encode(tokenizer, '{"' + forced)
    g.jump_and_retokenize(old, new, state)
    assert g.num_accepted == len(new)
    for t in encode(tokenizer, ":21.5}"):
        g.accept_token(t)
    g.accept_token(tokenizer.eos_token_id)
    assert g.is_terminated()
    assert compiled(backend, "regex", "[0-9]+").try_jump_forward(tokenizer) is None


def test_token_filter_allow_and_forbid(backend, vocab_size):
    from sglang.srt.constrained.torch_ops.token_filter_torch_ops import set_token_filter_torch

    ids = [0, 5, 31, 32, 33, 1000, 1000, vocab_size - 1]
    for is_allowed in (True, False):
        for reset in (True, False):
            ours = torch.randint(-2**31, 2**31 - 1, (2, (vocab_size + 31) // 32), dtype=torch.int32)
            theirs = ours.clone()
            backend.set_token_filter(ours, ids, 1, is_allowed=is_allowed, reset_vocab_mask=reset)
            set_token_filter_torch(theirs, ids, 1, is_allowed=is_allowed, reset_vocab_mask=reset)
            assert torch.equal(ours, theirs)
            assert all(allowed(ours[1], t) == is_allowed for t in ids)
    with pytest.raises(ValueError, match="out of range"):
        backend.set_token_filter(ours, [vocab_size + 40], 0)


def test_sglang_cache_is_bounded_in_bytes(tokenizer, vocab_size):
    from xg2_plugin.adapters.sglang_backend import XG2GrammarBackend

    small = XG2GrammarBackend(tokenizer, vocab_size, {tokenizer.eos_token_id}, cache_limit_bytes=1 << 16)
    sizes = []
    for n in range(40):
        key = ("regex", f"(a|b){{{n + 1}}}c[0-9]{{2,{n + 3}}}")
        g = compiled(small, *key)
        sizes.append(g.memory_size_bytes)
        small.set_cache(key, g)
        assert small.cache_bytes <= (1 << 16) // 2
    assert sum(sizes) > (1 << 16) // 2, "the test must overflow the bound to prove eviction"
    assert len(small.cache) < 40
    assert ("regex", "(a|b){40}c[0-9]{2,42}") in small.cache  # the newest stays
    # SGLang caches failures too (InvalidGrammarObject): their keys count against the bound
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    for n in range(200):
        small.set_cache(("json", "x" * 1000 + str(n)), InvalidGrammarObject("bad"))
        assert small.cache_bytes <= (1 << 16) // 2
    assert len(small.cache) < 100
    small.reset()
    assert small.cache_bytes == 0 and not small.cache



def test_speculative_draft_tree_through_sglang_traverse_tree(backend, tokenizer, vocab_size):
    """EAGLE's mask over a draft tree: SGLang's own traverse_tree walks it with accept /
    fill / rollback(1) on our object.  Each accepted node's row is the mask after its path;
    a refused node's row stays all-allowed; the request's state is unchanged after."""
    traverse_tree = sglang_function("srt/speculative/spec_utils.py", "traverse_tree")
    g = compiled(backend, "json", SCHEMA).copy()
    first = encode(tokenizer, '{"')[0]
    g.accept_token(first)  # node 0: the token the target model committed last step
    name, bracket, colon, age = (encode(tokenizer, s)[0] for s in ("name", "[", '":', "age"))
    # node 0 -> 1 'name' (-> 3 '":', 4 'age' refused: "nameage" is no property), 2 '[' refused
    draft = torch.tensor([first, name, bracket, colon, age])
    next_token = torch.tensor([1, 3, -1, -1, -1])
    next_sibling = torch.tensor([-1, 2, -1, 4, -1])
    mask = g.allocate_vocab_mask(vocab_size, 5, "cpu")
    traverse_tree(next_token, next_sibling, draft, g, mask, vocab_size=vocab_size)
    assert g.num_accepted == 1

    def expected(path):
        ref = compiled(backend, "json", SCHEMA).copy()
        for t in [first, *path]:
            ref.accept_token(t)
        row = ref.allocate_vocab_mask(vocab_size, 1, "cpu")
        ref.fill_vocab_mask(row, 0)
        return row[0]

    assert torch.equal(mask[0], expected([]))
    assert torch.equal(mask[1], expected([name]))
    assert torch.equal(mask[3], expected([name, colon]))
    assert bool((mask[2] == -1).all()) and bool((mask[4] == -1).all())
