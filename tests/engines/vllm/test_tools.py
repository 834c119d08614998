"""The tool path: a real ChatCompletionRequest with tools and each tool_choice, through
vLLM's own request preparation (its Parser's adjust_request turns tools into a structural
tag) and tool parsers; the request compiles on xg2, accepts the model-format call, and the
parser reads back the same function and arguments. Needs structural tags (issue 24)."""
from __future__ import annotations

import json

import pytest
from conftest import make_request

TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city", "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city", "days"], "additionalProperties": False}}}
ARGS = {"city": "Paris", "days": 2}

# the model-format text of one call, per tool parser
CALLS = {
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>',
    "llama3_json": '{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}',
    "qwen3_coder": ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                    "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>"),
}
# required and named: tags with a separator; auto: triggered tags (TagDispatch)
CASES = [(name, choice) for name in sorted(CALLS) for choice in ("required", "named", "auto")]


def _request(choice):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    tool_choice = ({"type": "function", "function": {"name": "get_weather"}}
                   if choice == "named" else choice)
    return ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "Weather in Paris?"}],
                                 tools=[TOOL], tool_choice=tool_choice, max_tokens=64)


@pytest.mark.parametrize("name, choice", CASES)
def test_tool_call_compiles_and_reads_back(manager_for, name, choice):
    from vllm.parser import ParserManager
    from vllm.sampling_params import StructuredOutputsParams

    manager = manager_for(tools=True)
    tokenizer = manager.tokenizer
    parser_cls = ParserManager.get_parser(tool_parser_name=name, enable_auto_tools=True)
    request = _request(choice)
    parser = parser_cls(tokenizer, request.tools)
    request = parser.adjust_request(request)
    tag = request.structured_outputs.structural_tag
    assert tag and json.loads(tag)
    req = make_request(manager, StructuredOutputsParams(structural_tag=tag))
    matcher = req.structured_output_request.grammar.matcher
    assert matcher.accept_string(CALLS[name]), f"{name}: the call is rejected"
    calls, _ = parser._extract_tool_calls(CALLS[name], request, enable_auto_tools=True)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", ARGS)]


def test_legacy_structural_tag_shape(manager_for, tokenizer):
    from vllm.sampling_params import StructuredOutputsParams

    tag = json.dumps({"structures": [{"begin": "<f>", "schema": TOOL["function"]["parameters"],
                                      "end": "</f>"}], "triggers": ["<f>"]})
    manager = manager_for(disable_any_whitespace=True)
    req = make_request(manager, StructuredOutputsParams(structural_tag=tag))
    matcher = req.structured_output_request.grammar.matcher
    assert matcher.accept_string('hi <f>{"city":"Paris","days":2}</f>')
    again = make_request(manager, StructuredOutputsParams(structural_tag=tag)).structured_output_request.grammar
    assert not again.matcher.accept_string('<f>{"city": "Paris"')  # compact: no whitespace


def test_whitespace_off_reaches_tool_arguments(manager_for):
    """disable_any_whitespace applies to the JSON inside a structural tag (tool arguments)."""
    from vllm.parser import ParserManager
    from vllm.sampling_params import StructuredOutputsParams

    manager = manager_for(disable_any_whitespace=True, tools=True)
    parser_cls = ParserManager.get_parser(tool_parser_name="hermes", enable_auto_tools=True)
    request = _request("required")
    request = parser_cls(manager.tokenizer, request.tools).adjust_request(request)
    req = make_request(manager, StructuredOutputsParams(structural_tag=request.structured_outputs.structural_tag))
    grammar = req.structured_output_request.grammar
    begin = '<tool_call>{"name": "get_weather", "arguments": '  # (vLLM's literal text)
    assert grammar.matcher.fork().accept_string(begin + '{"city":"Paris","days":2}}</tool_call>')
    assert not grammar.matcher.fork().accept_string(begin + '{ "city"')
    assert not grammar.matcher.fork().accept_string(begin + '{"city": "Paris"')
