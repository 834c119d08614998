"""Built-in tool-call formats: ``get_model_structural_tag(model, tools, ...)``.

XGrammar 0.2.8's names and OpenAI semantics: ``tool_choice`` "none" / "auto" /
"required" / a named function or builtin tool / ``allowed_tools``;
``parallel_tool_calls=False``: at most one call (free text before it, nothing
after); ``reasoning`` "enabled" (the prompt opened the reasoning block: it is
closed, then the answer), "disabled" (no block), "auto" (a whole block or
none).  Most families are one description (``Family``) read by one builder:
flat calls each found by a trigger (Qwen ``<tool_call>``), or calls inside one
section (DeepSeek's ``<｜tool▁calls▁begin｜>``).  Harmony has its own builder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Union

from .._errors import InvalidArgumentError
from .formats import (AnyTextFormat, ConstStringFormat, JSONSchemaFormat, OptionalFormat, OrFormat,
                      RegexFormat, SequenceFormat, StructuralTag, TagFormat, TagsWithSeparatorFormat,
                      TriggeredTagsFormat)

# ---------- tools and tool_choice ----------


@dataclass
class Tool:
    """A tool as the builders see it: its output name and argument schema."""

    name: str
    parameters: Union[bool, Dict[str, Any]]
    builtin_type: Optional[str] = None  # a builtin tool's type ("web_search_preview"); None: a function


def _tool_of(raw, i: int) -> Tool:
    where = f"tools[{i}]"
    if not isinstance(raw, dict):
        raw = raw.model_dump() if hasattr(raw, "model_dump") else raw
    if not isinstance(raw, dict):
        raise InvalidArgumentError(f"{where}: a tool is an object, got {type(raw).__name__}")
    kind = raw.get("type", "function")
    if not isinstance(kind, str) or not kind:
        raise InvalidArgumentError(f"{where}.type: must be a non-empty string")
    if kind == "function":
        fn = raw.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise InvalidArgumentError(f"{where}.function.name: a function tool needs a name")
        params = fn.get("parameters")
        if fn.get("strict") is False or params is None:
            params = True  # arguments unconstrained JSON (as XGrammar)
        if not isinstance(params, (bool, dict)):
            raise InvalidArgumentError(f"{where}.function.parameters: must be a JSON schema object")
        return Tool(fn["name"], params)
    name = raw.get("name") or kind
    params = raw.get("parameters")
    if params is None:
        params = True
    if not isinstance(name, str) or not isinstance(params, (bool, dict)):
        raise InvalidArgumentError(f"{where}: a builtin tool has a string name and a schema")
    return Tool(name, params, builtin_type=kind)


def normalize_tool_choice(tools, tool_choice="auto") -> Tuple[List[Tool], List[Tool], str]:
    """(function tools, builtin tools, "auto" | "required" | "forced") after
    applying ``tool_choice``; ``InvalidArgumentError`` for a choice that names
    no tool, "required" with no tools, and the like."""
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise InvalidArgumentError("tools must be a list")
    all_tools = [_tool_of(t, i) for i, t in enumerate(tools)]
    funcs = [t for t in all_tools if t.builtin_type is None]
    builtins = [t for t in all_tools if t.builtin_type is not None]
    seen = set()
    for t in funcs:
        if t.name in seen:
            raise InvalidArgumentError(f"two function tools are named {t.name!r}")
        seen.add(t.name)
    choice = "auto" if tool_choice is None else tool_choice
    if hasattr(choice, "model_dump"):
        choice = choice.model_dump()
    if isinstance(choice, str):
        if choice == "none":
            return [], [], "auto"
        if choice not in ("auto", "required"):
            raise InvalidArgumentError(f"tool_choice must be none, auto, required or an object, got {choice!r}")
        mode = choice
    elif isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "function":
            name = (choice.get("function") or {}).get("name") if isinstance(choice.get("function"), dict) else None
            funcs = [t for t in funcs if t.name == name]
            if not funcs:
                raise InvalidArgumentError(f"tool_choice names the function {name!r}, which is not in tools")
            builtins, mode = [], "forced"
        elif kind == "allowed_tools":
            allowed = choice.get("allowed_tools")
            if not isinstance(allowed, dict) or allowed.get("mode", "auto") not in ("auto", "required"):
                raise InvalidArgumentError("tool_choice.allowed_tools needs a mode auto or required and tools")
            refs = allowed.get("tools")
            if not isinstance(refs, list):
                raise InvalidArgumentError("tool_choice.allowed_tools.tools must be a list")
            names, types = set(), set()
            for r in refs:
                if not isinstance(r, dict):
                    raise InvalidArgumentError("tool_choice.allowed_tools.tools holds a non-object")
                if r.get("type") == "function":
                    fn = r.get("function")
                    n = fn.get("name") if isinstance(fn, dict) else r.get("name")
                    names.add(n)
                else:
                    types.add(r.get("type"))
            missing = names - {t.name for t in funcs}
            missing_b = types - {t.builtin_type for t in builtins}
            if missing or missing_b:
                raise InvalidArgumentError(f"tool_choice.allowed_tools names tools not in tools: "
                                           f"{sorted(map(str, missing | missing_b))}")
            funcs = [t for t in funcs if t.name in names]
            builtins = [t for t in builtins if t.builtin_type in types]
            mode = allowed.get("mode", "auto")
        elif isinstance(kind, str):
            builtins = [t for t in builtins if t.builtin_type == kind]
            if len(builtins) != 1:
                raise InvalidArgumentError(f"tool_choice of type {kind!r} must match exactly one builtin tool, "
                                           f"got {len(builtins)}")
            funcs, mode = [], "forced"
        else:
            raise InvalidArgumentError("tool_choice object needs a type")
    else:
        raise InvalidArgumentError(f"tool_choice must be a string or an object, got {type(choice).__name__}")
    if mode == "required" and not funcs and not builtins:
        raise InvalidArgumentError("tool_choice 'required' with no tools")
    if mode == "forced" and len(funcs) + len(builtins) != 1:
        raise InvalidArgumentError("a forced tool choice must resolve to exactly one tool")
    return funcs, builtins, mode


# ---------- the registry ----------

_REGISTRY: Dict[str, Callable[..., StructuralTag]] = {}


def register_model_structural_tag(name: str):
    """Decorator: ``fn(tools, builtin_tools, tool_choice, reasoning, *, any_order,
    exclude_special_tokens, max_whitespace_cnt, parallel_tool_calls)`` builds the
    structural tag of the format ``name`` (tools are ``Tool`` objects, tool_choice
    "auto" / "required" / "forced", reasoning "enabled" / "disabled" / "auto")."""
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError("a model format name is a non-empty string")

    def decorator(fn):
        _REGISTRY[name] = fn
        return fn

    return decorator


def get_model_structural_tag(
    model: str,
    tools: Optional[List[Any]] = None,
    tool_choice: Any = "auto",
    reasoning: Union[bool, Literal["enabled", "disabled", "auto"]] = "enabled",
    force_reasoning: bool = False,
    any_order: bool = False,
    exclude_special_tokens: bool = True,
    max_whitespace_cnt: Optional[int] = None,
    parallel_tool_calls: bool = True,
    response_format: Optional[Dict[str, Any]] = None,
) -> StructuralTag:
    """The structural tag of ``model``'s reasoning and tool-call format (see the
    module docstring).  ``response_format`` (``{"type": "json_schema", "json_schema":
    {"schema": ...}}`` or ``{"type": "json_object"}``): a direct answer (no tool call)
    must be that JSON instead of free text."""
    fn = _REGISTRY.get(model)
    if fn is None:
        raise InvalidArgumentError(f"unknown model format {model!r}; known: {', '.join(sorted(_REGISTRY))}")
    if isinstance(reasoning, bool):
        reasoning = "enabled" if reasoning else "disabled"
    if reasoning not in ("enabled", "disabled", "auto"):
        raise InvalidArgumentError(f"reasoning must be enabled, disabled, auto or a bool, got {reasoning!r}")
    flags = dict(force_reasoning=force_reasoning, any_order=any_order,
                 exclude_special_tokens=exclude_special_tokens, parallel_tool_calls=parallel_tool_calls)
    for flag, value in flags.items():
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"{flag} must be a bool, got {value!r}")
    if max_whitespace_cnt is not None and (isinstance(max_whitespace_cnt, bool) or not isinstance(
            max_whitespace_cnt, int) or max_whitespace_cnt < 0):
        raise InvalidArgumentError(f"max_whitespace_cnt must be None or a non-negative int, got {max_whitespace_cnt!r}")
    funcs, builtins, mode = normalize_tool_choice(tools, tool_choice)
    kwargs = dict(any_order=any_order, exclude_special_tokens=exclude_special_tokens,
                  max_whitespace_cnt=max_whitespace_cnt, parallel_tool_calls=parallel_tool_calls)
    if response_format is not None:
        kwargs["answer"] = _answer_format(response_format)
    return fn(funcs, builtins, mode, reasoning, **kwargs)


# XGrammar 0.2.8 exports the same function under both names.
get_builtin_structural_tag = get_model_structural_tag


def _answer_format(rf) -> JSONSchemaFormat:
    if not isinstance(rf, dict):
        raise InvalidArgumentError("response_format must be an object")
    if rf.get("type") == "json_object":
        return JSONSchemaFormat(json_schema={"type": ["object", "array"]})
    if rf.get("type") == "json_schema":
        js = rf.get("json_schema")
        schema = js.get("schema", True) if isinstance(js, dict) else None
        if not isinstance(schema, (bool, dict)):
            raise InvalidArgumentError("response_format.json_schema.schema must be a JSON schema")
        return JSONSchemaFormat(json_schema=schema)
    raise InvalidArgumentError("response_format.type must be json_schema or json_object (a structural_tag "
                               "response_format is the tag itself)")


# ---------- the family description and its builder ----------


@dataclass
class Family:
    call_begin: str  # with {name}
    call_end: str
    trigger: str  # the trigger of a flat call, or of the section
    style: str = "json"
    think: Optional[Tuple[str, str]] = ("<think>", "</think>")
    think_suffix: str = ""
    think_excludes: Tuple[str, ...] = ("<think>", "</think>")
    prompt_ends_with_think: bool = True
    text_excludes: Tuple[str, ...] = ("<think>", "</think>")
    section: Optional[Tuple[str, str, str]] = None  # (begin, end, separator between calls)
    call_id: Optional[Tuple[str, str]] = None  # (regex of a call index, the text after it)
    forced_prefix: str = ""  # before a required/forced section (MiniMax's newline)
    arg_excludes: Tuple[str, ...] = ()  # never inside a raw string argument


def _reasoning(fam: Family, mode: str, exclude_special: bool):
    if fam.think is None or mode == "disabled":
        return None
    begin = "" if mode == "enabled" and fam.prompt_ends_with_think else fam.think[0]
    excludes = list(fam.think_excludes) if exclude_special else []
    prefix: Any = TagFormat(begin=begin, content=AnyTextFormat(excludes=excludes), end=fam.think[1])
    if fam.think_suffix:
        prefix = SequenceFormat(elements=[prefix, ConstStringFormat(value=fam.think_suffix)])
    if mode == "auto":
        prefix = OptionalFormat(content=prefix)
    return prefix


def _args(tool: Tool, style: str, any_order: bool, ws, excludes=()) -> JSONSchemaFormat:
    # (model_construct: the values are checked here already; validation was a third of a 50-tool build)
    return JSONSchemaFormat.model_construct(json_schema=tool.parameters, style=style, any_order=bool(any_order),
                                            max_whitespace_cnt=ws, excludes=list(excludes))


def build_family(fam: Family, funcs, builtins, mode, reasoning, *, any_order=False, exclude_special_tokens=True,
                 max_whitespace_cnt=None, parallel_tool_calls=True, answer=None) -> StructuralTag:
    tools = list(funcs) + list(builtins)
    excludes = list(fam.text_excludes) if exclude_special_tokens else []
    prefix = _reasoning(fam, reasoning, exclude_special_tokens)

    def call(tool: Tool) -> TagFormat:
        content: Any = _args(tool, fam.style, any_order, max_whitespace_cnt, fam.arg_excludes)
        begin = fam.call_begin.format(name=tool.name)
        if fam.call_id is not None:
            pattern, after = fam.call_id
            content = SequenceFormat(elements=[RegexFormat(pattern=pattern),
                                               ConstStringFormat(value=after.format(name=tool.name)), content])
        return TagFormat.model_construct(begin=begin, content=content, end=fam.call_end)

    text: Any = answer if answer is not None else AnyTextFormat(excludes=excludes)
    if not tools:
        body: Any = text
    elif fam.section is None:
        calls = [call(t) for t in tools]
        if mode == "forced":
            body = calls[0]
        else:
            # (with a response_format, a direct answer is that JSON: calls start the output)
            body = TriggeredTagsFormat(triggers=[fam.trigger], tags=calls, excludes=excludes,
                                       at_least_one=mode == "required" or answer is not None,
                                       stop_after_first=not parallel_tool_calls)
            if answer is not None and mode == "auto":
                body = OrFormat(elements=[answer, body])
    else:
        begin, end, sep = fam.section
        calls = [call(t) for t in tools]
        inner = TagsWithSeparatorFormat(tags=calls, separator=sep, at_least_one=True,
                                        stop_after_first=not parallel_tool_calls or mode == "forced")
        if mode in ("forced", "required") or answer is not None:
            body = SequenceFormat(elements=[ConstStringFormat(value=fam.forced_prefix + begin), inner,
                                            ConstStringFormat(value=end)])
            if answer is not None and mode == "auto":
                body = OrFormat(elements=[answer, body])
        else:
            body = TriggeredTagsFormat(triggers=[fam.trigger], tags=[TagFormat(begin=begin, content=inner, end=end)],
                                       excludes=excludes, stop_after_first=not parallel_tool_calls)
    return StructuralTag(format=body if prefix is None else SequenceFormat(elements=[prefix, body]))


DS_CALLS = ("<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>")
DS_CALL = ("<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>", "<\uff5ctool\u2581sep\uff5c>")
DSML = "\uff5cDSML\uff5c"
_GLM_TAGS = ("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>")

M3 = "]<]minimax[>["
_M3_TAGS = ("<mm:think>", "</mm:think>", f"{M3}</tool_call>", f"{M3}<invoke", f"{M3}</invoke>")

FAMILIES: Dict[str, Family] = {
    # XGrammar 0.2.8's families
    "llama": Family('{{"name": "{name}", "parameters": ', "}", '{"name": ', think=None),
    "qwen_3": Family('<tool_call>\n{{"name": "{name}", "arguments": ', "}\n</tool_call>", "<tool_call>",
                     think_suffix="\n\n"),
    "qwen_3_coder": Family("<tool_call>\n<function={name}>\n", "\n</function>\n</tool_call>",
                           "<tool_call>\n<function=", style="qwen_xml", think_suffix="\n\n"),
    "mimo": Family("<tool_call><function={name}>", "</function></tool_call>", "<tool_call>", style="qwen_xml",
                   prompt_ends_with_think=False,
                   think_excludes=("<tool_call>", "<think>", "</think>", "</tool_call>", "<function="),
                   text_excludes=("<think>", "</think>", "</tool_call>", "<function=")),
    "glm_4_7": Family("<tool_call>{name}", "</tool_call>", "<tool_call>", style="glm_xml",
                      think_excludes=("<think>", "</think>") + _GLM_TAGS,
                      text_excludes=("<think>", "</think>") + _GLM_TAGS[1:]),
    "exaone": Family('<tool_call>{{"name": "{name}", "arguments": ', "}</tool_call>", "<tool_call>",
                     think_suffix="\n\n", think_excludes=()),
    "deepseek_r1": Family(f"{DS_CALL[0]}function{DS_CALL[2]}{{name}}\n```json\n", f"\n```{DS_CALL[1]}",
                          DS_CALLS[0], section=(DS_CALLS[0], DS_CALLS[1], "\n")),
    "deepseek_v3_1": Family(f"{DS_CALL[0]}{{name}}{DS_CALL[2]}", DS_CALL[1], DS_CALLS[0],
                            section=(DS_CALLS[0], DS_CALLS[1], "")),
    "deepseek_v3_2": Family(f'<{DSML}invoke name="{{name}}">\n', f"</{DSML}invoke>\n", f"<{DSML}function_calls>",
                            style="deepseek_xml", forced_prefix="\n\n",
                            section=(f"<{DSML}function_calls>\n", f"</{DSML}function_calls>", "")),
    "deepseek_v4": Family(f'<{DSML}invoke name="{{name}}">\n', f"</{DSML}invoke>\n", f"<{DSML}tool_calls>",
                          style="deepseek_xml", forced_prefix="\n\n",
                          section=(f"<{DSML}tool_calls>\n", f"</{DSML}tool_calls>", "")),
    "deepseek_v4_1": Family(f'<{DSML} invoke name="{{name}}">\n', f"</{DSML} invoke>\n", f"<{DSML} calls>",
                            style="deepseek_v4_1_xml", forced_prefix="\n\n",
                            section=(f"<{DSML} calls>\n", f"</{DSML} calls>", "")),
    "kimi": Family("<|tool_call_begin|>functions.{name}:", "<|tool_call_end|>", "<|tool_calls_section_begin|>",
                   think_excludes=(), text_excludes=("<think>", "</think>", "<|tool_call_begin|>"),
                   call_id=("\\d+", "<|tool_call_argument_begin|>"),
                   section=("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "")),
    "minimax": Family('<invoke name="{name}">\n', "</invoke>\n", "<minimax:tool_call>", style="minimax_xml",
                      think_suffix="\n\n", think_excludes=(), forced_prefix="\n",
                      section=("<minimax:tool_call>\n", "</minimax:tool_call>", "")),
    "cohere": Family('<cofl:tool_call id="', "</cofl:tool_call>", "<cofl:tool_calls>", style="cohere_xml",
                     think=("<|START_THINKING|>", "<|END_THINKING|>"), think_excludes=(),
                     text_excludes=("<|START_THINKING|>", "<|END_THINKING|>"),
                     call_id=("\\d+", '" name="{name}">'), section=("<cofl:tool_calls>", "</cofl:tool_calls>", "")),
    "minimax_m3": Family(f'{M3}<invoke name="{{name}}">', f"{M3}</invoke>\n", f"{M3}<tool_call>",
                         style="minimax_m3_xml", think=("<mm:think>", "</mm:think>"),
                         think_excludes=(f"{M3}<tool_call>",) + _M3_TAGS, text_excludes=_M3_TAGS,
                         section=(f"{M3}<tool_call>\n", f"{M3}</tool_call>", "")),
    # formats XGrammar lacks
    "hermes": Family('<tool_call>\n{{"name": "{name}", "arguments": ', "}\n</tool_call>", "<tool_call>", think=None),
    "llama_function": Family("<function={name}>", "</function>", "<function=", think=None),
    "mistral": Family('{{"name": "{name}", "arguments": ', "}", "[TOOL_CALLS]", think=None,
                      section=("[TOOL_CALLS][", "]", ", ")),
    "phi_4_mini": Family('{{"name": "{name}", "arguments": ', "}", "<|tool_call|>", think=None,
                         text_excludes=("<|/tool_call|>",),
                         section=("<|tool_call|>[", "]<|/tool_call|>", ", ")),
}
FAMILIES["qwen_3_5"] = FAMILIES["qwen_3_coder"]


def _register_family(name: str, fam: Family) -> None:
    def build(funcs, builtins, mode, reasoning, **kw):
        return build_family(fam, funcs, builtins, mode, reasoning, **kw)

    build.__name__ = f"get_{name}_structural_tag"
    register_model_structural_tag(name)(build)


for _name, _fam in FAMILIES.items():
    _register_family(_name, _fam)

from .harmony import get_harmony_structural_tag  # noqa: E402  (registers "harmony")
from .kimi_k3 import get_kimi_k3_structural_tag  # noqa: E402  (registers "kimi_k3")

__all__ = ["get_model_structural_tag", "register_model_structural_tag", "normalize_tool_choice", "Tool",
           "Family", "build_family", "FAMILIES", "get_harmony_structural_tag",
           "get_kimi_k3_structural_tag"]
