"""The mask oracle on structural tags: walking a valid model output on the real
DeepSeek vocabulary (free text, triggers and calls included), each sampled token's
mask bit equals whether a forked matcher accepts it; the output is accepted to
completion."""

from __future__ import annotations

import json

import pytest

import xg2_plugin as xgr
from xg2_plugin.structural_tag.model_formats import get_model_structural_tag

from vocabs import walk_checking_forks

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
           "required": ["city"]}
CLOCK = {"type": "object", "properties": {"tz": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["tz"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "parameters": CLOCK}}]
ARGS = {"city": "Paris \u00e9t\u00e9", "days": 3}
DS = "\uff5c"


def _walk(vocab, structural_tag, text: str, samples: int = 48, seed: int = 0) -> None:
    m = xgr.GrammarMatcher(vocab.compiler.compile_structural_tag(structural_tag))
    assert walk_checking_forks(vocab, m, text, samples, seed), text
    assert m.is_completed()
    assert m.accept_token(vocab.stop_id) and m.is_terminated()


CASES = [
    ("llama_function", '<function=get_weather>' + json.dumps(ARGS) + "</function>"),
    ("hermes", '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>'),
    ("deepseek_v3_1", f"<{DS}tool\u2581calls\u2581begin{DS}><{DS}tool\u2581call\u2581begin{DS}>get_weather"
                      f"<{DS}tool\u2581sep{DS}>" + json.dumps(ARGS) +
                      f"<{DS}tool\u2581call\u2581end{DS}><{DS}tool\u2581calls\u2581end{DS}>"),
]


@pytest.mark.parametrize("model,text", CASES, ids=[c[0] for c in CASES])
def test_required_single_call_masks_match_forks(deepseek, model, text):
    st = get_model_structural_tag(model, TOOLS, tool_choice="required", reasoning="disabled",
                                  parallel_tool_calls=False)
    _walk(deepseek, st, text)


def test_tags_with_separator_masks_match_forks(deepseek):
    st = {"type": "structural_tag", "format": {
        "type": "tags_with_separator", "separator": ", ", "at_least_one": True,
        "tags": [{"begin": '{"name": "get_weather", "arguments": ', "content": {"type": "json_schema",
                                                                              "json_schema": WEATHER}, "end": "}"},
                 {"begin": '{"name": "get_time", "arguments": ', "content": {"type": "json_schema",
                                                                           "json_schema": CLOCK}, "end": "}"}]}}
    text = '{"name": "get_time", "arguments": {"tz": "UTC"}}, {"name": "get_weather", "arguments": ' + \
        json.dumps(ARGS) + "}"
    _walk(deepseek, st, text, seed=1)


def test_auto_calls_between_free_text_masks_match_forks(deepseek):
    st = get_model_structural_tag("llama_function", TOOLS)
    _walk(deepseek, st, "Let me check. <function=get_time>{\"tz\": \"UTC\"}</function> Done.")
