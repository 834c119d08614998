"""vLLM's own StructuredOutputManager, with a real VllmConfig on CPU, builds the xg2 backend
from the flag's value; for every request type the masks along a valid output equal a forked
matcher's verdicts and the masks of vLLM's xgrammar backend on the same request."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
from conftest import MODEL_VOCAB, TOKENIZER_VOCAB, make_request
from masks import bits, check_against_fork, step_mask

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string"}, "ok": {"type": "boolean"},
                         "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
          "required": ["name", "ok"]}

CASES = {
    "json": (dict(json=SCHEMA), '{"name": "B\\"o", "ok": true, "tags": ["a", "b"]}'),
    "json_object": (dict(json_object=True), '{"k": [1, 2.5, null], "s": "x y"}'),
    "regex": (dict(regex=r"[a-z]{2,5}-\d{3}"), "abc-123"),
    "choice": (dict(choice=["red", "green", "blue"]), "green"),
    "ebnf": (dict(grammar='root ::= "(" expr ")"\nexpr ::= [0-9]+ ("+" [0-9]+)*'), "(1+23)"),
    "lark": (dict(grammar='start: "x" NUMBER\nNUMBER: /[0-9]+/'), "x42"),
}


def _params(kw):
    from vllm.sampling_params import StructuredOutputsParams

    return StructuredOutputsParams(**kw)


def test_backend_built_from_flag(manager_for):
    from xg2_plugin.adapters.vllm_backend import Xg2Backend

    manager = manager_for()
    req = make_request(manager, _params(dict(regex="a+")))
    assert req.sampling_params.structured_outputs._backend == "xg2"
    assert isinstance(manager.backend, Xg2Backend) and manager.backend_name == "xg2"
    assert manager.backend.vocab_size == MODEL_VOCAB
    assert manager.backend.compiler.cache_limit_bytes == 512 * 1024 * 1024  # VLLM_XGRAMMAR_CACHE_MB


@pytest.mark.parametrize("case", sorted(CASES))
def test_masks_along_a_valid_output(manager_for, tokenizer, case):
    kw, text = CASES[case]
    ours, theirs = manager_for(), manager_for(backend="xgrammar")
    req, ref = make_request(ours, _params(kw)), make_request(theirs, _params(kw))
    assert ref.sampling_params.structured_outputs._backend == "xgrammar"
    eos = tokenizer.eos_token_id
    specials = sorted(set(tokenizer.all_special_ids) - {eos})
    rng = random.Random(case)
    tokens = tokenizer.encode(text, add_special_tokens=False) + [eos]
    checked = 0
    for i, token in enumerate(tokens):
        row = step_mask(ours, req)
        assert row.shape == ((MODEL_VOCAB + 31) // 32,)
        allowed = bits(row, MODEL_VOCAB)
        assert not allowed[TOKENIZER_VOCAB:].any(), "a padding id is allowed"
        assert not allowed[specials].any(), "a special token is allowed as text"
        assert allowed[eos] == (i == len(tokens) - 1), "EOS before the output is complete"
        assert np.array_equal(allowed, bits(step_mask(theirs, ref), MODEL_VOCAB)), \
            f"xg2 and xgrammar disagree at step {i}: {np.flatnonzero(allowed != bits(step_mask(theirs, ref), MODEL_VOCAB))[:10]}"
        checked += check_against_fork(req.structured_output_request.grammar, allowed, rng,
                                      extra=[eos, TOKENIZER_VOCAB, MODEL_VOCAB - 1] + specials[:5])
        assert allowed[token], f"step {i}: the valid output's token {token} is masked"
        assert ours.accept_tokens(req, [token]) and theirs.accept_tokens(ref, [token])
    assert req.structured_output_request.grammar.is_terminated()
    assert checked > 100


# Where xg2 and XGrammar 0.2.8 differ, xg2 agrees with JSON and JSON Schema (2020-12):
KNOWN_DIFFERENCES = [
    ({"type": "string", "maxLength": 8}, '"a\\nb"', True),  # an escape in a bounded string
    ({"type": "string", "maxLength": 8}, '"a\x01b"', False),  # a raw control character
    ({"type": "integer"}, "42.0", True),  # an integer written with a zero fraction
]


@pytest.mark.parametrize("schema, text, valid", KNOWN_DIFFERENCES)
def test_known_differences_from_xgrammar(manager_for, tokenizer, schema, text, valid):
    import jsonschema

    try:
        jsonschema.Draft202012Validator(schema).validate(json.loads(text))
        oracle = True
    except (ValueError, jsonschema.ValidationError):
        oracle = False
    assert oracle == valid
    verdicts = {}
    for backend in ("xg2", "xgrammar"):
        manager = manager_for(backend=backend)
        req = make_request(manager, _params(dict(json=schema)))
        verdicts[backend] = req.structured_output_request.grammar.matcher.accept_string(text)
    assert verdicts == {"xg2": valid, "xgrammar": not valid}


def test_rejected_token_fails_the_request(manager_for, tokenizer):
    manager = manager_for()
    req = make_request(manager, _params(dict(regex="[0-9]+")))
    letter = tokenizer.encode("abc", add_special_tokens=False)[0]
    assert not manager.accept_tokens(req, [letter])


def test_tokens_after_termination_are_ignored(manager_for, tokenizer):
    manager = manager_for()
    req = make_request(manager, _params(dict(choice=["yes", "no"])))
    grammar = req.structured_output_request.grammar
    eos = tokenizer.eos_token_id
    assert manager.accept_tokens(req, tokenizer.encode("yes", add_special_tokens=False) + [eos, 5, 6])
    assert grammar.is_terminated()
    assert grammar.validate_tokens([5]) == []


def test_request_stop_tokens(manager_for, tokenizer):
    """The request's own stop ids end the grammar (vLLM passes all_stop_token_ids)."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    manager = manager_for()
    stop = tokenizer.encode("!", add_special_tokens=False)[0]
    sp = SamplingParams(structured_outputs=_params(dict(regex="ab")), stop_token_ids=[stop], max_tokens=8)
    config = manager.vllm_config
    sp._validate_structured_outputs(config.model_config, config.structured_outputs_config, tokenizer)
    req = Request("stop-ids", [1], sp, None)
    manager.grammar_init(req)
    req.structured_output_request.grammar = req.structured_output_request._grammar.result()
    assert manager.accept_tokens(req, tokenizer.encode("ab", add_special_tokens=False))
    allowed = bits(step_mask(manager, req), MODEL_VOCAB)
    assert allowed[stop]
    assert manager.accept_tokens(req, [stop]) and req.structured_output_request.grammar.is_terminated()


def test_disable_any_whitespace(manager_for, tokenizer):
    """disable_any_whitespace: no token that holds whitespace after '{', and ',' ':' alone."""
    kw = dict(json={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"]})
    vocab = tokenizer.convert_ids_to_tokens(list(range(TOKENIZER_VOCAB)))
    space_ids = [i for i, t in enumerate(vocab) if t and (t[0] in "Ġ\u010a" or t in ("Ċ", "ĠĠ"))]
    open_brace = tokenizer.encode("{", add_special_tokens=False)
    for compact, expect_ws in ((True, False), (False, True)):
        manager = manager_for(disable_any_whitespace=compact)
        req = make_request(manager, _params(kw))
        assert manager.accept_tokens(req, open_brace)
        allowed = bits(step_mask(manager, req), MODEL_VOCAB)
        assert allowed[space_ids].any() == expect_ws
    manager = manager_for(disable_any_whitespace=True)
    req = make_request(manager, _params(kw))
    for token in tokenizer.encode('{"a":1,"b":2}', add_special_tokens=False):
        assert manager.accept_tokens(req, [token])
    req = make_request(manager, _params(kw))
    assert not all(manager.accept_tokens(req, [t]) for t in tokenizer.encode('{"a": 1', add_special_tokens=False))


@pytest.mark.parametrize("kw, needle", [
    (dict(json={"type": "object", "properties": {"a": {"type": "strin"}}}), "strin"),
    (dict(json={"type": "object", "minProperties": "x"}), "minProperties"),
    (dict(json='{"type": '), "JSON"),
    (dict(regex="(ab"), "missing ')'"),
    (dict(grammar="root ::= "), "EBNF"),
    (dict(grammar="rule: 'abc'"), "start"),
    (dict(choice=[]), "empty"),
])
def test_bad_spec_fails_at_validation(manager_for, kw, needle):
    """A bad spec is a VLLMValidationError (the API's 400) naming what is wrong."""
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import SamplingParams

    manager = manager_for()
    config = manager.vllm_config
    sp = SamplingParams(structured_outputs=_params(kw))
    with pytest.raises(VLLMValidationError) as info:
        sp._validate_structured_outputs(config.model_config, config.structured_outputs_config,
                                        manager.tokenizer)
    assert needle.lower() in str(info.value).lower() and "xg2" in str(info.value)


def test_compile_cache_is_bounded_in_bytes(manager_for):
    from xg2_plugin.adapters.vllm_backend import Xg2Backend

    manager = manager_for()
    make_request(manager, _params(dict(regex="a")))
    backend = manager.backend
    assert isinstance(backend, Xg2Backend)
    limits = backend.compiler.get_cache_limits()
    assert sum(v for v in limits.values() if v) <= backend.compiler.cache_limit_bytes
