"""The real OpenAI-compatible vLLM server with xg2, end to end through the `openai` client:
every output satisfies its constraint (bounded constraints, so a random model ends), a
broken schema is a 4xx naming the keyword and the server serves on."""
from __future__ import annotations

import json
import re

import pytest

MESSAGES = [{"role": "user", "content": "Answer."}]
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 6}, "ok": {"type": "boolean"},
                         "color": {"enum": ["red", "green", "blue"]}},
          "required": ["name", "ok", "color"], "additionalProperties": False}


def _chat(client, **kw):
    out = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=120,
                                         temperature=1.0, seed=7, **kw)
    choice = out.choices[0]
    return choice.message.content, choice.finish_reason


@pytest.mark.parametrize("seed", [1, 2])
def test_json_schema(client, seed):
    import jsonschema

    text, finish = _chat(client, response_format={
        "type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}},
        extra_body={"seed": seed})
    assert finish == "stop", text
    jsonschema.validate(json.loads(text), SCHEMA)
    assert " " not in text.replace(json.loads(text)["name"], "")  # disable_any_whitespace


def test_regex(client):
    text, finish = _chat(client, extra_body={"structured_outputs": {"regex": r"[a-z]{3}-[0-9]{2}"}})
    assert finish == "stop" and re.fullmatch(r"[a-z]{3}-[0-9]{2}", text), text


def test_choice(client):
    text, finish = _chat(client, extra_body={"structured_outputs": {"choice": ["yes", "no", "maybe"]}})
    assert finish == "stop" and text in ("yes", "no", "maybe"), text


@pytest.mark.parametrize("grammar", [
    'root ::= "(" [0-9] ("+" [0-9])? ")"',  # EBNF
    'start: "(" DIGIT ("+" DIGIT)? ")"\nDIGIT: /[0-9]/',  # Lark
])
def test_grammar(client, grammar):
    text, finish = _chat(client, extra_body={"structured_outputs": {"grammar": grammar}})
    assert finish == "stop" and re.fullmatch(r"\([0-9](\+[0-9])?\)", text), text


def test_broken_schema_is_a_4xx_and_the_server_serves_on(client):
    import openai

    bad = {"type": "object", "properties": {"a": {"type": "strin"}}}
    with pytest.raises(openai.BadRequestError) as info:
        _chat(client, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": bad}})
    assert info.value.status_code == 400 and "strin" in str(info.value)
    with pytest.raises(openai.BadRequestError):
        _chat(client, extra_body={"structured_outputs": {"regex": "(ab"}})
    text, finish = _chat(client, extra_body={"structured_outputs": {"choice": ["still", "here"]}})
    assert text in ("still", "here")


TOOL = {"type": "function", "function": {
    "name": "get_weather", "strict": True,
    "parameters": {"type": "object",
                   "properties": {"city": {"enum": ["Paris", "Oslo"]}, "days": {"enum": [1, 2, 3]}},
                   "required": ["city", "days"], "additionalProperties": False}}}


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_tool_call(client, tool_choice):
    out = client.chat.completions.create(model="tiny", messages=MESSAGES, tools=[TOOL],
                                         tool_choice=tool_choice, max_tokens=120, seed=3)
    calls = out.choices[0].message.tool_calls
    assert calls and calls[0].function.name == "get_weather"
    args = json.loads(calls[0].function.arguments)
    assert args["city"] in ("Paris", "Oslo") and args["days"] in (1, 2, 3)
