"""OpenAI requests the way SGLang prepares them: a real ChatCompletionRequest, its
`to_sampling_params`, the grammar key the scheduler derives from those, then the backend's
cache-or-compile path (a Future on SGLang's pool, then cache copies).  A bad spec comes
back as the message the user's request is aborted with."""
import json

import pytest
from sgl_helpers import encode

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def request(**kw):
    from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest

    return ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], **kw)


def grammar_key(sampling_params):
    """The scheduler's mapping (GrammarManager.process_req_with_grammar), for one request."""
    for field, key_type in (("json_schema", "json"), ("regex", "regex"), ("ebnf", "ebnf"),
                            ("structural_tag", "structural_tag")):
        if sampling_params.get(field) is not None:
            return key_type, sampling_params[field]
    raise AssertionError(f"no constraint in {sampling_params}")


def through_backend(backend, key):
    """Cache miss: a Future compiled on SGLang's pool; the manager caches a copy."""
    value, hit = backend.get_cached_or_future_value(key, False)
    if not hit:
        value = value.result(timeout=120)
        backend.set_cache(key, value.copy())
    return value


CASES = [
    (dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}),
     '{"a": 12}', '{"b": 1}'),
    (dict(response_format={"type": "json_object"}), '{"z": [true]}', "[1]"),
    (dict(regex="(cat|dog)s?"), "dogs", "cow"),
    (dict(ebnf='root ::= "x" [0-9]+'), "x42", "y42"),
    (dict(ebnf='start: "x" DIGITS\nDIGITS: /[0-9]+/'), "x7", "x"),
]


@pytest.mark.parametrize("kw, good, bad", CASES, ids=["json_schema", "json_object", "regex", "ebnf", "lark"])
def test_openai_request_to_grammar(backend, tokenizer, kw, good, bad):
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    key = grammar_key(request(**kw).to_sampling_params(stop=[], model_generation_config={}))
    first = through_backend(backend, key)
    assert not isinstance(first, InvalidGrammarObject), first.error_message
    second, hit = backend.get_cached_or_future_value(key, False)
    assert hit and second is not first
    for grammar, text, ok in ((first, good, True), (second, bad, False)):
        try:
            for t in encode(tokenizer, text) + [tokenizer.eos_token_id]:
                grammar.accept_token(t)
            accepted = grammar.is_terminated()
        except ValueError:
            accepted = False
        assert accepted is ok, text


def test_bad_schema_aborts_the_request_naming_the_keyword(backend):
    """What SGLang puts in the abort (an HTTP 400 body): "Failed to compile json grammar: ..."."""
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    bad = {"type": "object", "properties": {"a": {"type": "integr"}}}
    kw = dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": bad}})
    key = grammar_key(request(**kw).to_sampling_params(stop=[], model_generation_config={}))
    value = through_backend(backend, key)
    assert isinstance(value, InvalidGrammarObject)
    message = f"Failed to compile {key[0]} grammar: {value.error_message}"
    assert "integr" in message and "xg2: invalid JSON schema" in message
    again, hit = backend.get_cached_or_future_value(key, False)  # (SGLang caches the failure)
    assert hit and isinstance(again, InvalidGrammarObject)
    assert json.loads(key[1]) == bad
