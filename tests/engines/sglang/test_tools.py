"""The tool path: SGLang's `FunctionCallParser.get_structure_constraint` turns `tools` +
`tool_choice` into a constraint (a JSON schema for some detectors, a structural tag for
most); it must compile on xg2, accept the model-format call, and SGLang's parser must read
the same function and arguments back."""
import json

import pytest
from sgl_helpers import encode

ARGS = {"city": "Paris", "unit": "c"}


def tools(strict=True):
    from sglang.srt.entrypoints.openai.protocol import Tool

    params = {"type": "object", "properties": {"city": {"type": "string"},
                                                "unit": {"type": "string", "enum": ["c", "f"]}},
              "required": ["city", "unit"]}
    return [Tool(type="function", function={"name": "get_weather", "description": "weather",
                                            "parameters": params, "strict": strict}),
            Tool(type="function", function={"name": "get_time", "description": "time",
                                            "parameters": {"type": "object", "properties": {}},
                                            "strict": strict})]


def constraint(parser_name, tool_choice, tokenizer):
    """SGLang's constraint as the request carries it: the parser's constraint, put into a
    real ChatCompletionRequest's sampling params, then the scheduler's grammar key."""
    from sglang.srt.entrypoints.openai.protocol import ToolChoice
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from test_requests import grammar_key, request

    choice = ToolChoice(function={"name": "get_weather"}) if tool_choice == "named" else tool_choice
    parser = FunctionCallParser(tools(), parser_name, tokenizer=tokenizer)
    tool_call_constraint = parser.get_structure_constraint(choice, parallel_tool_calls=True)
    openai_choice = {"type": "function", "function": {"name": "get_weather"}} if tool_choice == "named" \
        else tool_choice
    params = request(tools=[t.model_dump() for t in tools()], tool_choice=openai_choice).to_sampling_params(
        stop=[], model_generation_config={}, tool_call_constraint=tool_call_constraint)
    key_type, key_string = grammar_key(params)
    return key_type, key_string, json.loads(key_string)


def generate(backend, tokenizer, key, text):
    """Take `text` token by token through the request's grammar, as the scheduler does."""
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    grammar = backend._init_value_dispatch(key, False)
    assert not isinstance(grammar, InvalidGrammarObject), grammar.error_message
    grammar = grammar.copy()
    for t in encode(tokenizer, text) + [tokenizer.eos_token_id]:
        grammar.accept_token(t)
    assert grammar.is_terminated()


# --- the JSON-schema constraint (pythonic, glm45, minimax-m2 for required / named) ---

@pytest.mark.parametrize("parser_name", ["pythonic", "glm45", "minimax-m2"])
@pytest.mark.parametrize("tool_choice", ["required", "named"])
def test_json_schema_tool_constraint(backend, tokenizer, parser_name, tool_choice):
    key_type, key_string, schema = constraint(parser_name, tool_choice, tokenizer)
    assert key_type == "json" and schema["type"] == "array"
    call = [{"name": "get_weather", "parameters": ARGS}]
    generate(backend, tokenizer, (key_type, key_string), json.dumps(call))
    # SGLang's streaming reader of forced calls (JsonArrayParser) reads back the call
    from sglang.srt.function_call.json_array_parser import JsonArrayParser

    reader = JsonArrayParser()
    calls = list(reader.parse_streaming_increment(json.dumps(call), tools()).calls)
    calls += reader.finish(tools()).calls
    names = [c.name for c in calls if c.name]
    arguments = "".join(c.parameters or "" for c in calls)
    assert names == ["get_weather"] and json.loads(arguments) == ARGS
    # a call to an unknown function, or bad arguments, is refused
    for bad in ([{"name": "get_wether", "parameters": ARGS}],
                [{"name": "get_weather", "parameters": {"city": "Paris", "unit": "k"}}]):
        with pytest.raises(ValueError):
            generate(backend, tokenizer, (key_type, key_string), json.dumps(bad))


# --- structural tags (the other detectors) ---

def _legacy_call_text(tag):
    s = next(s for s in tag["structures"] if "get_weather" in s["begin"])
    return s["begin"] + json.dumps(ARGS) + s["end"]


HANDWRITTEN = {
    "qwen3_coder": ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                    "<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>"),
    "gpt-oss": ('<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>'
                '{"city": "Paris", "unit": "c"}<|call|>'),
}
LEGACY = ["hermes", "qwen", "llama3", "mistral", "deepseekv3"]


def call_text(parser_name, tag):
    return HANDWRITTEN[parser_name] if parser_name in HANDWRITTEN else _legacy_call_text(tag)


@pytest.mark.parametrize("parser_name", LEGACY + ["qwen3_coder"])
def test_call_texts_are_the_model_format(tokenizer, parser_name):
    """(No xg2 here: proves the texts below are what SGLang's own parser reads as the call.)"""
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    _, _, tag = constraint(parser_name, "required", tokenizer)
    _, calls = FunctionCallParser(tools(), parser_name, tokenizer=tokenizer).parse_non_stream(
        call_text(parser_name, tag))
    assert [(c.name, json.loads(c.parameters)) for c in calls] == [("get_weather", ARGS)]


@pytest.mark.parametrize("parser_name", LEGACY + ["qwen3_coder", "gpt-oss"])
@pytest.mark.parametrize("tool_choice", ["required", "named"])
def test_structural_tag_tool_constraint(backend, tokenizer, parser_name, tool_choice):
    key_type, key_string, tag = constraint(parser_name, tool_choice, tokenizer)
    assert key_type == "structural_tag"
    generate(backend, tokenizer, (key_type, key_string), call_text(parser_name, tag))
