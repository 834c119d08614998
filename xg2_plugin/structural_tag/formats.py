"""The structural-tag format models: XGrammar 0.2.8's names, fields and defaults.

A structural tag is a JSON description of an output (free text, a reasoning
block, tool calls in a model's wire format); ``convert.py`` turns it into EBNF.
``parse_structural_tag`` accepts a model, a dict or JSON text and raises
``GrammarError`` naming the JSON path of what is wrong.
"""

from __future__ import annotations

import json
import numbers
from typing import Any, Dict, List, Literal, Optional, Tuple, Type, Union

from pydantic import AliasChoices, BaseModel, BeforeValidator, Field, StrictBool, ValidationError
from typing_extensions import Annotated

from .._errors import GrammarError, InvalidArgumentError

# Scalars are strict (StrictBool, Int): pydantic's lax mode would read "yes" or 1 as
# True, "3" or 3.0 as 3, True as token 1 -- a silently different tag. A JSON schema of 1 is not
# a boolean schema.


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"Input should be an integer, not {type(value).__name__}")
    return int(value)


Int = Annotated[int, BeforeValidator(_integer)]

# ---------- basic formats ----------


class ConstStringFormat(BaseModel):
    """Exactly ``value`` (the usage guide's ``text`` is read as ``value`` too)."""

    type: Literal["const_string"] = "const_string"
    value: str = Field(validation_alias=AliasChoices("value", "text"))


JSONStyle = Literal["json", "qwen_xml", "minimax_xml", "minimax_m3_xml", "deepseek_xml", "glm_xml",
                    "cohere_xml", "kimi_k3_xml", "deepseek_v4_1_xml"]


class JSONSchemaFormat(BaseModel):
    """A value valid under ``json_schema``, written in ``style`` (JSON or a model's XML)."""

    type: Literal["json_schema"] = "json_schema"
    json_schema: Union[StrictBool, Dict[str, Any]]
    style: JSONStyle = "json"
    any_order: StrictBool = False
    max_whitespace_cnt: Optional[Int] = None
    excludes: List[str] = Field(default_factory=list)


class AnyTextFormat(BaseModel):
    """Any text but the ``excludes`` (and, inside a tag, the tag's end)."""

    type: Literal["any_text"] = "any_text"
    excludes: List[str] = Field(default_factory=list)
    max_tokens: Optional[Int] = Field(default=None, ge=0, le=2_147_483_647)
    max_chars: Optional[Int] = Field(default=None, ge=0, le=2_147_483_647)


class TokenFormat(BaseModel):
    """One token, by id or by its text (resolved against the compiler's vocabulary)."""

    type: Literal["token"] = "token"
    token: Union[Int, str]


class ExcludeTokenFormat(BaseModel):
    """One token, any but these."""

    type: Literal["exclude_token"] = "exclude_token"
    exclude_tokens: List[Union[Int, str]] = Field(default_factory=list)


class AnyTokensFormat(BaseModel):
    """Zero or more tokens, none of these."""

    type: Literal["any_tokens"] = "any_tokens"
    exclude_tokens: List[Union[Int, str]] = Field(default_factory=list)
    max_tokens: Optional[Int] = Field(default=None, ge=0, le=2_147_483_647)


class GrammarFormat(BaseModel):
    """An EBNF grammar (its root rule ``root``)."""

    type: Literal["grammar"] = "grammar"
    grammar: str


class RegexFormat(BaseModel):
    """A regular expression (``re.fullmatch`` semantics)."""

    type: Literal["regex"] = "regex"
    pattern: str


# ---------- combinators ----------


class SequenceFormat(BaseModel):
    type: Literal["sequence"] = "sequence"
    elements: List["Format"]


class OrFormat(BaseModel):
    type: Literal["or"] = "or"
    elements: List["Format"]


class TagFormat(BaseModel):
    """``begin content end``; ``end`` may be a list of alternatives or a token."""

    type: Literal["tag"] = "tag"
    begin: Union[str, TokenFormat]
    content: "Format"
    end: Union[str, List[str], TokenFormat]


class TriggeredTagsFormat(BaseModel):
    """Free text until a trigger, then the tag it begins, then free text again.
    (``tag_and_text``: the usage guide's name in its DeepSeek example, read as this.)"""

    type: Literal["triggered_tags", "tag_and_text"] = "triggered_tags"
    triggers: List[str]
    tags: List[TagFormat]
    at_least_one: StrictBool = False
    stop_after_first: StrictBool = False
    excludes: List[str] = Field(default_factory=list)


class TokenTriggeredTagsFormat(BaseModel):
    type: Literal["token_triggered_tags"] = "token_triggered_tags"
    trigger_tokens: List[Union[Int, str]]
    tags: List[TagFormat]
    exclude_tokens: List[Union[Int, str]] = Field(default_factory=list)
    at_least_one: StrictBool = False
    stop_after_first: StrictBool = False


class TagsWithSeparatorFormat(BaseModel):
    """Tags joined by ``separator``, nothing else between them."""

    type: Literal["tags_with_separator"] = "tags_with_separator"
    tags: List[TagFormat]
    separator: str
    at_least_one: StrictBool = False
    stop_after_first: StrictBool = False


class OptionalFormat(BaseModel):
    type: Literal["optional"] = "optional"
    content: "Format"


class PlusFormat(BaseModel):
    type: Literal["plus"] = "plus"
    content: "Format"


class StarFormat(BaseModel):
    type: Literal["star"] = "star"
    content: "Format"


class RepeatFormat(BaseModel):
    """``content`` min..max times (max -1: unbounded)."""

    type: Literal["repeat"] = "repeat"
    min: Int
    max: Int
    content: "Format"


class DispatchFormat(BaseModel):
    """Free text; after a pattern, its format; ``loop`` goes back to free text."""

    type: Literal["dispatch"] = "dispatch"
    rules: List[Tuple[str, "Format"]]
    loop: StrictBool = True
    excludes: List[str] = Field(default_factory=list)


class TokenDispatchFormat(BaseModel):
    type: Literal["token_dispatch"] = "token_dispatch"
    rules: List[Tuple[Union[Int, str], "Format"]]
    loop: StrictBool = True
    exclude_tokens: List[Union[Int, str]] = Field(default_factory=list)


class QwenXMLParameterFormat(BaseModel):
    """Deprecated: ``JSONSchemaFormat(style="qwen_xml")``."""

    type: Literal["qwen_xml_parameter"] = "qwen_xml_parameter"
    json_schema: Union[StrictBool, Dict[str, Any]]


Format = Annotated[
    Union[
        AnyTextFormat, ConstStringFormat, JSONSchemaFormat, GrammarFormat, RegexFormat,
        QwenXMLParameterFormat, OrFormat, SequenceFormat, TagFormat, TriggeredTagsFormat,
        TokenTriggeredTagsFormat, TagsWithSeparatorFormat, OptionalFormat, PlusFormat, StarFormat,
        TokenFormat, ExcludeTokenFormat, AnyTokensFormat, RepeatFormat, DispatchFormat,
        TokenDispatchFormat,
    ],
    Field(discriminator="type"),
]

for _m in (SequenceFormat, OrFormat, TagFormat, TriggeredTagsFormat, TokenTriggeredTagsFormat,
           TagsWithSeparatorFormat, OptionalFormat, PlusFormat, StarFormat, RepeatFormat,
           DispatchFormat, TokenDispatchFormat):
    _m.model_rebuild()

FORMAT_TYPES = tuple(a.model_fields["type"].default for a in Format.__origin__.__args__)  # type: ignore[attr-defined]
FORMAT_TYPES += ("tag_and_text",)

# ---------- top level ----------


class StructuralTagItem(BaseModel):
    """Deprecated: one ``begin schema end`` tag of the legacy (tags, triggers) form."""

    begin: str
    schema_: Union[str, Type[BaseModel], Dict[str, Any]] = Field(alias="schema")
    end: str


class StructuralTag(BaseModel):
    """``{"type": "structural_tag", "format": {...}}``, as in an OpenAI ``response_format``."""

    type: Literal["structural_tag"] = "structural_tag"
    format: Format

    @staticmethod
    def from_legacy_structural_tag(tags: List[StructuralTagItem], triggers: List[str]) -> "StructuralTag":
        """The legacy form as a ``triggered_tags`` format."""
        out = []
        for i, tag in enumerate(tags):
            if isinstance(tag, dict):
                tag = _validate(StructuralTagItem, tag, f"tags[{i}]")
            schema = tag.schema_
            if isinstance(schema, str):
                try:
                    schema = json.loads(schema)
                except ValueError as e:
                    raise GrammarError(f"tags[{i}].schema: not valid JSON: {e}") from None
            elif isinstance(schema, type):
                schema = schema.model_json_schema()
            out.append(TagFormat(begin=tag.begin, content=JSONSchemaFormat(json_schema=schema), end=tag.end))
        return StructuralTag(format=TriggeredTagsFormat(triggers=list(triggers), tags=out))

    @staticmethod
    def from_json(json_str: Union[str, Dict[str, Any]]) -> "StructuralTag":
        return parse_structural_tag(json_str)


# ---------- parsing with JSON paths ----------


def _json_path(loc, data) -> str:
    """pydantic's error location as a JSON path of the input: the union
    discriminators it inserts (``sequence``, ``tag``...) are not keys of the input
    and are dropped."""
    out, node, tagged = "", data, None
    for item in loc:
        if isinstance(node, dict) and node.get("type") == item and tagged is not node:
            tagged = node  # a discriminator, once a node (json_schema is both a type and a field)
            continue
        if isinstance(item, int) and isinstance(node, (list, tuple)) and 0 <= item < len(node):
            out += f"[{item}]"
            node = node[item]
        elif isinstance(item, str) and isinstance(node, dict) and item in node:
            out += ("." if out else "") + item
            node = node[item]
        elif isinstance(item, str) and isinstance(node, dict) and item in ("value",) and "text" in node:
            out += ("." if out else "") + "text"
            node = node["text"]
        elif isinstance(node, dict):  # a missing field
            out += ("." if out else "") + str(item)
            break
        else:
            break  # a leaf: the rest names the union member pydantic tried
    return out or "$"


def _message(err) -> str:
    if err["type"] == "union_tag_invalid":
        ctx = err.get("ctx", {})
        return f"unknown type {ctx.get('tag')!r} (expected one of {', '.join(FORMAT_TYPES)})"
    if err["type"] == "union_tag_not_found":
        return "a format needs a 'type' field"
    return err["msg"].removeprefix("Value error, ")


def _validate(model, data, prefix: str = ""):
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        path = _json_path(errors[0]["loc"], data)
        # a union's members fail at the same place: one message naming each expectation
        same = [err for err in errors if _json_path(err["loc"], data) == path]
        messages = list(dict.fromkeys(_message(err) for err in same))
        if prefix:
            path = prefix if path == "$" else f"{prefix}.{path}"
        more = len(errors) - len(same)
        tail = f" (and {more} more)" if more else ""
        raise GrammarError(f"invalid structural tag at {path}: {'; or '.join(messages)}{tail}") from None


def parse_structural_tag(value: Any) -> StructuralTag:
    """A ``StructuralTag`` from a model, a dict or JSON text: the ``structural_tag``
    wrapper, a bare format (``{"type": "triggered_tags", ...}``), or the legacy
    ``{"structures": [{"begin", "schema", "end"}...], "triggers": [...]}``."""
    if isinstance(value, StructuralTag):
        return value
    if isinstance(value, BaseModel) and getattr(value, "type", None) in FORMAT_TYPES:
        return StructuralTag(format=value)
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except RecursionError:
            raise GrammarError("the structural tag nests too deeply") from None
        except ValueError as e:
            raise GrammarError(f"the structural tag is not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError(
            f"a structural tag must be a StructuralTag, a dict or JSON text, got {type(value).__name__}")
    if "structures" in value and "format" not in value:
        structures, triggers = value.get("structures"), value.get("triggers")
        if not isinstance(structures, list) or not isinstance(triggers, list):
            raise GrammarError("invalid structural tag at $: 'structures' and 'triggers' must be lists")
        items = [_validate(StructuralTagItem, s, f"structures[{i}]") for i, s in enumerate(structures)]
        return StructuralTag.from_legacy_structural_tag(items, triggers)
    if value.get("type", "structural_tag") != "structural_tag" and "format" not in value:
        value = {"type": "structural_tag", "format": value}  # a bare format
        st = _validate(StructuralTag, value)
        return st
    return _validate(StructuralTag, value)


__all__ = [
    "ConstStringFormat", "JSONSchemaFormat", "QwenXMLParameterFormat", "AnyTextFormat", "GrammarFormat",
    "RegexFormat", "TokenFormat", "ExcludeTokenFormat", "AnyTokensFormat", "SequenceFormat", "OrFormat",
    "TagFormat", "TriggeredTagsFormat", "TokenTriggeredTagsFormat", "TagsWithSeparatorFormat",
    "OptionalFormat", "PlusFormat", "StarFormat", "RepeatFormat", "DispatchFormat", "TokenDispatchFormat",
    "Format", "StructuralTagItem", "StructuralTag", "parse_structural_tag",
]
