"""JSON schemas in the XML argument styles of tool-calling models.

An object's properties are written one element each (``<parameter=key>value
</parameter>`` for Qwen, ``<arg_key>key</arg_key><arg_value>value</arg_value>``
for GLM, ...); a string value is raw text up to the element's close, any other
value is JSON (our JSON Schema front-end, as for the ``json`` style).  The
properties come in declared order, the required ones mandatory, unless
``any_order``.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from .._errors import GrammarError
from ..grammar import ebnf_string_literal as lit
from .convert import _cached_piece, _digest, canonical_schema, json_schema_piece

WS = "[ \\n\\t\\r]*"
DSML = "\uff5cDSML\uff5c"

# style -> (element open before the key, after the key for a string value, after
# the key for another value, close)
_STYLES: Dict[str, Tuple[str, str, str, str]] = {
    "qwen_xml": ("<parameter=", ">", ">", "</parameter>"),
    "minimax_xml": ('<parameter name="', '">', '">', "</parameter>"),
    "deepseek_xml": (f'<{DSML}parameter name="', '" string="true">', '" string="false">', f"</{DSML}parameter>"),
    "deepseek_v4_1_xml": (f'<{DSML} parameter name="', '" string="true">', '" string="false">',
                          f"</{DSML} parameter>"),
    "glm_xml": ("<arg_key>", f"</arg_key>{{WS}}<arg_value>", f"</arg_key>{{WS}}<arg_value>", "</arg_value>"),
}
# Kimi-K3 labels each argument with its type (an integer is labelled "number", as XGrammar does)
_KIMI_K3 = ('<|open|>argument key="', '" type="{label}"<|sep|>', "<|close|>argument<|sep|>")
_KIMI_LABELS = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean",
                "object": "object", "array": "array", "null": "null"}
_RECURSIVE = ("minimax_m3_xml", "cohere_xml")
_NOT_YET: Tuple[str, ...] = ()
_STRING_KW_IGNORED = {"type", "title", "description", "default", "examples", "$comment"}


def _after_key(text: str) -> str:
    """A piece that may hold the whitespace marker {WS} as EBNF."""
    parts = text.split("{WS}")
    return f" {WS} ".join(lit(p) for p in parts if p) if len(parts) > 1 else lit(text)


def xml_schema_piece(conv, f, path: str):
    """(rules, root) of ``f`` (a JSONSchemaFormat with an XML style)."""
    if f.style in _NOT_YET:
        raise GrammarError(f"{path}.style: the {f.style!r} style is not supported yet")
    for i, w in enumerate(f.excludes):
        if not w or w != w.strip():
            raise GrammarError(f"{path}.excludes[{i}]: an excluded string in an XML style is non-empty and "
                               "neither starts nor ends with whitespace")
    canon = canonical_schema(f.json_schema, f"{path}.json_schema")
    opts = (f.style, bool(f.any_order), f.max_whitespace_cnt, tuple(f.excludes))
    return _cached_piece(("xml", canon, opts), lambda: _convert(f, path, _digest(canon, opts)))


def _convert(f, path: str, digest: str):
    if f.style in _RECURSIVE:
        from .xml_recursive import convert_recursive

        return convert_recursive(f, path, f"xml{digest}_")
    schema = f.json_schema
    if f.style == "kimi_k3_xml":
        opened, after_key, close = _KIMI_K3
        after_str, after_other = after_key.format(label="string"), None
    else:
        opened, after_str, after_other, close = _STYLES[f.style]
    prefix = f"xml{digest}_"
    rules: Dict[str, str] = {}
    text_rule = prefix + "text"
    words = [close] + [w for w in f.excludes if w != close]
    rules[text_rule] = f"TagDispatch(\n  loop_after_dispatch=false,\n  excludes=({', '.join(map(lit, words))})\n)"
    defs = {k: schema[k] for k in ("$defs", "definitions") if isinstance(schema, dict) and k in schema}

    def json_value(sub, where: str) -> str:
        if f.excludes and not (isinstance(sub, dict) and sub.get("type") in ("integer", "number", "boolean", "null")):
            raise GrammarError(f"{where}: excluded strings inside a JSON-written value are not supported yet "
                               "(only raw string values and scalars)")
        if isinstance(sub, dict) and defs:
            sub = {**defs, **sub}
        sub_rules, root = json_schema_piece(sub, where, any_order=f.any_order,
                                            max_whitespace_cnt=f.max_whitespace_cnt)
        rules.update(sub_rules)
        return root

    def element(key_expr: str, sub, where: str) -> str:
        kind = _string_kind(sub, where)
        if kind == "text":
            return f"{lit(opened)} {key_expr} {_after_key(after_str)} {text_rule} {lit(close)}"
        if kind is not None:  # a string enum: the raw values (models write them on a line of their own)
            return f"{lit(opened)} {key_expr} {_after_key(after_str)} {WS} ({kind}) {WS} {lit(close)}"
        return (f"{lit(opened)} {key_expr} {_after_other(sub)} {WS} {json_value(sub, where)} {WS} "
                f"{lit(close)}")

    def _after_other(sub) -> str:
        if after_other is not None:
            return _after_key(after_other)
        types = sub.get("type") if isinstance(sub, dict) else None
        labels = [types] if isinstance(types, str) else types if isinstance(types, list) else list(_KIMI_LABELS)
        alts = sorted({_KIMI_LABELS.get(t, t) for t in labels if isinstance(t, str)})
        return "(" + " | ".join(lit(_KIMI_K3[1].format(label=a)) for a in alts) + ")"

    if schema is True or (isinstance(schema, dict) and "properties" not in schema
                          and schema.get("type", "object") == "object"
                          and set(schema) <= {"type", "title", "description", "additionalProperties",
                                              "$defs", "definitions", "required"} and not schema.get("required")):
        # any object: any names, each value raw text or a JSON array or object
        any_json = json_value({"type": ["array", "object"]}, f"{path}.json_schema")
        name = prefix + "name"
        rules[name] = "[a-zA-Z_] [a-zA-Z0-9_]*"
        one = (f"{WS} {lit(opened)} {name} (({_after_key(after_str)} {text_rule} {lit(close)}) | "
               f"({_after_other(True)} {WS} {any_json} {WS} {lit(close)}))")
        rules[prefix + "root"] = f"({one})* {WS}"
        return rules, prefix + "root"
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise GrammarError(f"{path}.json_schema: the {f.style} style writes an object's properties; "
                           "the schema must be an object schema")
    props = schema.get("properties")
    if not isinstance(props, dict):
        raise GrammarError(f"{path}.json_schema.properties: must be an object")
    required = schema.get("required", [])
    if not isinstance(required, list) or any(r not in props for r in required):
        raise GrammarError(f"{path}.json_schema.required: must list declared properties "
                           "(extra properties are not written in XML styles)")
    parts: List[Tuple[str, bool]] = []
    for key, sub in props.items():
        parts.append((f"{WS} {element(lit(key), sub, f'{path}.json_schema.properties.{key}')}", key in required))
    if f.any_order:
        body = "(" + " | ".join(p for p, _ in parts) + ")*" if parts else '""'
    else:
        body = " ".join(p if req else f"({p})?" for p, req in parts) or '""'
    rules[prefix + "root"] = f"{body} {WS}"
    return rules, prefix + "root"


def _string_kind(sub, where: str):
    """'text' for a plain string, an EBNF alternation for a string enum or const,
    None for a value written as JSON."""
    if not isinstance(sub, dict):
        return None
    if "const" in sub and isinstance(sub["const"], str):
        return lit(sub["const"]) if sub["const"] else '""'
    enum = sub.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return " | ".join(lit(v) if v else '""' for v in enum)
    if sub.get("type") != "string":
        return None
    extra = set(sub) - _STRING_KW_IGNORED
    if extra:
        raise GrammarError(f"{where}: a string with {sorted(extra)} in an XML style is not supported yet "
                           "(its raw text would not be checked)")
    return "text"
