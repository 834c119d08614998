"""Harmony (gpt-oss): the assistant's messages after the prompt's ``<|start|>assistant``.

    analysis   <|channel|>analysis<|message|>TEXT<|end|>
    preamble   <|channel|>commentary<|message|>TEXT<|end|>
    call       <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|>
               ( to=functions.NAME<|channel|>commentary ...: the recipient in the role)
    builtin    <|channel|>analysis|commentary to=NAME code<|message|>ARGS<|call|>
    final      <|channel|>final<|message|>TEXT<|return|> (or <|end|>)

messages joined by ``<|start|>assistant``.  A turn ends at a call or at the
final answer: ``<|call|>`` and ``<|return|>`` are stop tokens and also the
grammar's last terminal, so the matcher accepts them and then terminates.  With a
vocabulary that has these markers as special tokens, ``compile_structural_tag``
matches them as those tokens only.
"""

from __future__ import annotations

from typing import Any, List

from .formats import (AnyTextFormat, ConstStringFormat, JSONSchemaFormat, OrFormat, SequenceFormat, StarFormat,
                      StructuralTag, TagFormat)
from .model_formats import register_model_structural_tag

START = "<|start|>assistant"
MARKERS = ["<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>", "<|return|>"]
_JSON_HEADS = [" <|constrain|>json<|message|>", "<|constrain|>json<|message|>", " json<|message|>", "<|message|>"]
_CODE_HEADS = [" code<|message|>", " <|constrain|>json<|message|>", "<|message|>"]


def _text() -> AnyTextFormat:
    return AnyTextFormat(excludes=list(MARKERS))


def _call_tags(tool, any_order, ws) -> List[TagFormat]:
    args = JSONSchemaFormat(json_schema=tool.parameters, any_order=any_order, max_whitespace_cnt=ws)
    if tool.builtin_type is None:
        recipient, channels, heads = f"to=functions.{tool.name}", ["commentary"], _JSON_HEADS
    else:
        recipient, channels, heads = f"to={tool.name}", ["analysis", "commentary"], _CODE_HEADS
    content = SequenceFormat(elements=[OrFormat(elements=[ConstStringFormat(value=h) for h in heads]), args])
    tags = []
    for ch in channels:
        tags.append(TagFormat(begin=f"<|channel|>{ch} {recipient}", content=content, end="<|call|>"))
        tags.append(TagFormat(begin=f" {recipient}<|channel|>{ch}", content=content, end="<|call|>"))
    return tags


@register_model_structural_tag("harmony")
def get_harmony_structural_tag(funcs, builtins, mode, reasoning, *, any_order=False, exclude_special_tokens=True,
                               max_whitespace_cnt=None, parallel_tool_calls=True, answer=None) -> StructuralTag:
    tools = list(funcs) + list(builtins)
    messages: List[Any] = []
    if reasoning != "disabled":
        messages.append(TagFormat(begin="<|channel|>analysis<|message|>", content=_text(), end="<|end|>"))
    if tools and mode == "auto":
        messages.append(TagFormat(begin="<|channel|>commentary<|message|>", content=_text(), end="<|end|>"))
    final_body = answer if answer is not None else _text()
    final = TagFormat(begin="<|channel|>final<|message|>", content=final_body, end=["<|return|>", "<|end|>"])
    calls = [t for tool in tools for t in _call_tags(tool, any_order, max_whitespace_cnt)]
    if mode == "auto":
        last = calls + [final]
    else:  # required / forced: the turn ends with a call (a call ends the turn either way)
        last = calls
    ending = last[0] if len(last) == 1 else OrFormat(elements=last)
    if not messages:
        return StructuralTag(format=ending)
    one = messages[0] if len(messages) == 1 else OrFormat(elements=messages)
    lead = StarFormat(content=SequenceFormat(elements=[one, ConstStringFormat(value=START)]))
    return StructuralTag(format=SequenceFormat(elements=[lead, ending]))
