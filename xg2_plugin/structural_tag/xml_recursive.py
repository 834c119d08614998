"""The XML argument styles that nest: MiniMax-M3 and Cohere write an object's
properties, an array's items and nested objects all as elements, only scalars
as JSON.

    minimax_m3_xml   ]<]minimax[>[<key>value]<]minimax[>[</key>; an array's items
                     ]<]minimax[>[<item>...]<]minimax[>[</item>; strings raw
    cohere_xml       <cofl:value name="key" type="raw|json|dict|list">value</cofl:value>;
                     a list's items the same without a name

The schema must say each value's type (``type``, or a string ``enum``/``const``);
keywords these styles cannot enforce raise ``GrammarError`` rather than being
dropped.
"""

from __future__ import annotations

from typing import Dict

from .._errors import GrammarError
from ..grammar import ebnf_string_literal as lit
from .convert import json_schema_piece

WS = "[ \\n\\t\\r]*"
M3 = "]<]minimax[>["
_ALLOWED = {"type", "properties", "required", "items", "enum", "const", "title", "description", "default",
            "examples", "additionalProperties", "$comment", "minimum", "maximum", "exclusiveMinimum",
            "exclusiveMaximum", "multipleOf"}


class _Nested:
    def __init__(self, f, path: str, prefix: str) -> None:
        self.f, self.path, self.prefix = f, path, prefix
        self.rules: Dict[str, str] = {}
        self.count = 0
        close = f"{M3}" if f.style == "minimax_m3_xml" else "</cofl:value>"
        self.text = self.rule("text", f"TagDispatch(\n  loop_after_dispatch=false,\n  excludes=({lit(close)})\n)")

    def rule(self, hint: str, body: str) -> str:
        self.count += 1
        name = f"{self.prefix}{hint}{self.count}"
        self.rules[name] = body
        return name

    def kind(self, sub, where: str) -> str:
        if sub is True or sub == {}:
            raise GrammarError(f"{where}: the {self.f.style} style needs each value's type")
        if not isinstance(sub, dict):
            raise GrammarError(f"{where}: a schema must be an object")
        extra = set(sub) - _ALLOWED
        if extra:
            raise GrammarError(f"{where}: {sorted(extra)} in the {self.f.style} style is not supported yet")
        if isinstance(sub.get("const"), str) or (isinstance(sub.get("enum"), list) and sub["enum"]
                                                  and all(isinstance(v, str) for v in sub["enum"])):
            return "enum"
        t = sub.get("type")
        if t in ("string", "integer", "number", "boolean", "null", "object", "array"):
            if t == "string" and ({"enum", "const"} & set(sub)):
                raise GrammarError(f"{where}: a string enum must hold strings only")
            return t
        raise GrammarError(f"{where}: the {self.f.style} style needs one 'type' per value, got {t!r}")

    def raw(self, sub, kind: str) -> str:
        """A string value as raw text (an enum: its members)."""
        if kind == "enum":
            vals = [sub["const"]] if "const" in sub else sub["enum"]
            return "(" + " | ".join(lit(v) if v else '""' for v in vals) + ")"
        return self.text

    def scalar(self, sub, where: str) -> str:
        rules, root = json_schema_piece(sub, where)
        self.rules.update(rules)
        return root

    def obj(self, sub, where: str, element) -> str:
        props = sub.get("properties", {})
        required = sub.get("required", [])
        if not isinstance(props, dict) or not isinstance(required, list) or any(r not in props for r in required):
            raise GrammarError(f"{where}: properties and required must declare every written property")
        parts = []
        for key, ps in props.items():
            one = f"{WS} {element(key, ps, f'{where}.properties.{key}')}"
            parts.append(one if key in required else f"({one})?")
        return self.rule("obj", (" ".join(parts) if parts else '""') + f" {WS}")

    # -- MiniMax-M3 --

    def m3_value(self, sub, where: str) -> str:
        kind = self.kind(sub, where)
        if kind in ("string", "enum"):
            return self.raw(sub, kind)
        if kind == "object":
            return self.obj(sub, where, self.m3_element)
        if kind == "array":
            item = self.m3_item(sub.get("items", {}), where + ".items")
            return self.rule("list", f"({WS} {item} ({WS} {item})* {WS})?")
        return self.scalar(sub, where)

    def m3_item(self, sub, where: str) -> str:
        return f"{lit(M3 + '<item>')} {self.m3_value(sub, where)} {lit(M3 + '</item>')}"

    def m3_element(self, key: str, sub, where: str) -> str:
        return f"{lit(f'{M3}<{key}>')} {self.m3_value(sub, where)} {lit(f'{M3}</{key}>')}"

    # -- Cohere --

    def cohere_typed(self, sub, where: str) -> str:
        """From the type attribute to the close."""
        kind = self.kind(sub, where)
        close = lit("</cofl:value>")
        if kind in ("string", "enum"):
            return f'{lit(chr(32) + "type=" + chr(34) + "raw" + chr(34) + ">")} {self.raw(sub, kind)} {close}'
        if kind == "object":
            return f'{lit(" type=" + chr(34) + "dict" + chr(34) + ">")} {WS} {self.obj(sub, where, self.cohere_element)} {WS} {close}'
        if kind == "array":
            item = f'{lit("<cofl:value")} {self.cohere_typed(sub.get("items", {}), where + ".items")}'
            return f'{lit(" type=" + chr(34) + "list" + chr(34) + ">")} {WS} ({item})* {WS} {close}'
        return f'{lit(" type=" + chr(34) + "json" + chr(34) + ">")} {WS} {self.scalar(sub, where)} {WS} {close}'

    def cohere_element(self, key: str, sub, where: str) -> str:
        return f'{lit("<cofl:value name=" + chr(34) + key + chr(34))} {self.cohere_typed(sub, where)}'


def convert_recursive(f, path: str, prefix: str):
    if f.excludes:
        raise GrammarError(f"{path}.excludes: the {f.style} style takes no excluded strings")
    n = _Nested(f, path, prefix)
    schema = f.json_schema
    where = f"{path}.json_schema"
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise GrammarError(f"{where}: the {f.style} style writes an object's properties")
    schema = dict(schema, type="object")
    element = n.m3_element if f.style == "minimax_m3_xml" else n.cohere_element
    root = n.obj(schema, where, element)
    n.rules[prefix + "root"] = root
    return n.rules, prefix + "root"
