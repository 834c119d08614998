"""Kimi-K3: token-delimited blocks, after the prompt opened the first one.

    <|open|>think<|sep|>...<|close|>think<|sep|>
    <|open|>response<|sep|>...<|close|>response<|sep|>
    <|open|>tools<|sep|><|open|>call tool="NAME" index="N"<|sep|>ARGS<|close|>call<|sep|>...<|close|>tools<|sep|>
    <|close|>message<|sep|>

The prompt ends with ``<|open|>think<|sep|>`` (reasoning enabled) or
``<|open|>response<|sep|>`` (disabled), so the output starts inside that block.
Arguments are ``kimi_k3_xml``; with ``exclude_special_tokens`` their raw string
values never hold the markers.
"""

from __future__ import annotations

from typing import Any, List

from .formats import (AnyTextFormat, ConstStringFormat, JSONSchemaFormat, OptionalFormat, RegexFormat,
                      SequenceFormat, StructuralTag, TagFormat, TagsWithSeparatorFormat)
from .model_formats import register_model_structural_tag

OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"


def _block(name: str, begin: bool, excludes) -> TagFormat:
    return TagFormat(begin=f"{OPEN}{name}{SEP}" if begin else "", content=AnyTextFormat(excludes=excludes),
                     end=f"{CLOSE}{name}{SEP}")


@register_model_structural_tag("kimi_k3")
def get_kimi_k3_structural_tag(funcs, builtins, mode, reasoning, *, any_order=False, exclude_special_tokens=True,
                               max_whitespace_cnt=None, parallel_tool_calls=True, answer=None) -> StructuralTag:
    excludes = [OPEN, CLOSE] if exclude_special_tokens else []
    arg_excludes = [OPEN, CLOSE, SEP] if exclude_special_tokens else []

    def call(tool) -> TagFormat:
        args = JSONSchemaFormat(json_schema=tool.parameters, style="kimi_k3_xml", any_order=any_order,
                                max_whitespace_cnt=max_whitespace_cnt, excludes=arg_excludes)
        return TagFormat(begin=f'{OPEN}call tool="{tool.name}" index="',
                         content=SequenceFormat(elements=[RegexFormat(pattern="\\d+"),
                                                          ConstStringFormat(value=f'"{SEP}'), args]),
                         end=f"{CLOSE}call{SEP}")

    tools = list(funcs)
    elements: List[Any] = []
    if reasoning != "disabled":
        think = _block("think", reasoning == "auto", excludes)
        elements.append(OptionalFormat(content=think) if reasoning == "auto" else think)
    response = _block("response", reasoning != "disabled", excludes)
    if answer is not None:
        response = TagFormat(begin=response.begin, content=answer, end=response.end)
    elements.append(response)
    if tools:
        calls = TagsWithSeparatorFormat(tags=[call(t) for t in tools], separator="", at_least_one=True,
                                        stop_after_first=not parallel_tool_calls or mode == "forced")
        section = SequenceFormat(elements=[ConstStringFormat(value=f"{OPEN}tools{SEP}"), calls,
                                           ConstStringFormat(value=f"{CLOSE}tools{SEP}")])
        elements.append(section if mode != "auto" else OptionalFormat(content=section))
    elements.append(ConstStringFormat(value=f"{CLOSE}message{SEP}"))
    return StructuralTag(format=SequenceFormat(elements=elements))
