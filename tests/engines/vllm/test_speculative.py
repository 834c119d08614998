"""The speculative path as vLLM drives it: drafts filtered with validate_tokens (state
unchanged), one mask row per draft position (accept, fill, ..., then rollback), and
rollback restoring the state, terminated state included."""
from __future__ import annotations

import numpy as np
import xg2_plugin as xg2
from conftest import MODEL_VOCAB, make_request
from masks import bits, step_mask

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def _params(**kw):
    from vllm.sampling_params import StructuredOutputsParams

    return StructuredOutputsParams(**kw)


def _fresh_row(grammar):
    """The grammar's own mask in a fresh bitmask (the state it is in now)."""
    mask = xg2.allocate_token_bitmask(1, MODEL_VOCAB)
    grammar.matcher.fill_next_token_bitmask(mask, 0)
    return bits(mask.numpy()[0], MODEL_VOCAB)


def test_validate_tokens_keeps_state(manager_for, tokenizer):
    manager = manager_for(speculative_tokens=3)
    assert manager.backend is None or manager.backend.num_speculative_tokens == 3
    req = make_request(manager, _params(json=SCHEMA))
    grammar = req.structured_output_request.grammar
    good = tokenizer.encode('{"x": 1}', add_special_tokens=False)
    before = _fresh_row(grammar)
    assert grammar.validate_tokens(good[:3]) == good[:3]
    bad = good[:2] + tokenizer.encode("zz", add_special_tokens=False)
    assert grammar.validate_tokens(bad) == good[:2]
    assert manager.validate_tokens(req, bad) == good[:2]
    assert np.array_equal(before, _fresh_row(grammar))


def test_one_row_per_draft_position(manager_for, tokenizer):
    manager = manager_for(speculative_tokens=3)
    req = make_request(manager, _params(json=SCHEMA))
    grammar = req.structured_output_request.grammar
    drafts = tokenizer.encode('{"x": 1}', add_special_tokens=False)[:3]
    rows = manager.grammar_bitmask({req.request_id: req}, [req.request_id], {req.request_id: drafts})
    assert rows.shape[0] >= 4
    expected = []
    for k in range(4):  # the row before each draft token and the bonus row
        expected.append(_fresh_row(grammar))
        if k < 3:
            assert grammar.accept_tokens(req.request_id, [drafts[k]])
    grammar.rollback(3)
    for k in range(4):
        assert np.array_equal(bits(rows[k], MODEL_VOCAB), expected[k]), f"row {k}"
    assert np.array_equal(_fresh_row(grammar), expected[0]), "the manager left the state advanced"


def test_rollback_of_the_terminated_state(manager_for, tokenizer):
    manager = manager_for(speculative_tokens=3)
    req = make_request(manager, _params(choice=["yes", "no"]))
    grammar = req.structured_output_request.grammar
    tokens = tokenizer.encode("no", add_special_tokens=False) + [tokenizer.eos_token_id]
    start = _fresh_row(grammar)
    assert grammar.accept_tokens(req.request_id, tokens) and grammar.is_terminated()
    grammar.rollback(len(tokens))
    assert not grammar.is_terminated()
    assert np.array_equal(_fresh_row(grammar), start)
    assert bits(step_mask(manager, req), MODEL_VOCAB)[tokens[0]]
