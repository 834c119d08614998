"""atheris target: structural tags -> compile_structural_tag -> a checked walk.

The vocabulary is fuzzlib's plus special tokens (model tool-call markers and three
neutral ones) so the token-level formats and special-token triggers compile.
Byte 0 picks how the input becomes a tag:

- below 0xF0 (a JSON text starts with ``{``): the input up to a NUL is
  the tag's JSON text (JSON parsing and validation are fuzzed too); after the NUL,
  the walk's script.
- 0xF0..0xF6: a format built by a small grammar of the format types from the bytes
  that follow (so most inputs are valid tags deep in the conversion), compiled as a
  dict or, if the next byte is odd, as its JSON text.
- 0xF7: the legacy call form ``(tags, triggers)`` of 1-3 ``{begin, schema, end}``.
- 0xF8..0xFF: ``get_model_structural_tag`` of a built-in family with 0-3 tools and
  fuzzed options.

Checks, when the compile does not end in a library exception: a walk of up to 16
steps where the mask is never empty before termination, the mask bit of 6 sampled
token ids equals ``fork().accept_token`` each step, the picked allowed token is
accepted, and at the end every token id is checked the same way.  A step that runs
past the matcher's work budget (``LimitExceededError``) ends the walk.
"""

import json

import atheris
import numpy as np

import fuzzlib
from fuzzlib import EXPECTED, LimitExceededError, Script, allowed, budget, xgr

with atheris.instrument_imports(include=["xg2_plugin"]):
    # model_formats first: it imports harmony (importing harmony first is a circular import)
    from xg2_plugin.structural_tag.model_formats import _REGISTRY, get_model_structural_tag
    from xg2_plugin.structural_tag import convert, formats, kimi_k3, xml_recursive, xml_styles  # noqa: F401

SPECIAL = ["<s1>", "<s2>", "<|x|>", "<|im_end|>", "<|python_tag|>", "[TOOL_CALLS]", "<|start|>", "<|channel|>",
           "<|message|>", "<|call|>", "<|end|>", "<|constrain|>", "<|return|>", "<|tool_calls_section_begin|>",
           "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>",
           "<|tool_call_argument_begin|>", "<\uff5ctool\u2581calls\u2581begin\uff5c>",
           "<\uff5ctool\u2581calls\u2581end\uff5c>", "<\uff5ctool\u2581call\u2581begin\uff5c>",
           "<\uff5ctool\u2581call\u2581end\uff5c>", "<\uff5ctool\u2581sep\uff5c>"]
V = fuzzlib.Vocab(SPECIAL)
FAMILIES = sorted(_REGISTRY)

STRINGS = ["", "a", "k", "x", "ab", ",", "\n", " ", "<a>", "</a>", "<b>", "</b>", "<think>", "</think>",
           "<tool_call>", "</tool_call>", "<function=f>", "</function>", "{", "}", '"', "\u00e9", "\u65e5\u672c",
           "<", ">", "</", "<s1>", "<s2>", "<|x|>", "<|im_end|>", "[TOOL_CALLS]", "<|call|>", "abc"]
SCHEMAS = [True, False, {}, {"type": "integer"}, {"type": "string", "maxLength": 3}, {"enum": ["a", 1, None]},
           {"type": "object", "properties": {"x": {"type": "integer"}, "s": {"type": "string"}}, "required": ["x"]},
           {"type": "object", "properties": {"q": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}}},
           {"type": "object", "additionalProperties": {"type": "number"}},
           {"type": "object", "properties": {"n": {"type": "object", "properties": {"m": {"const": "v"}}}},
            "required": ["n"]},
           {"anyOf": [{"type": "null"}, {"type": "string", "pattern": "^[a-c]+$"}]},
           {"type": "object", "properties": {"code": {"type": "string"}, "k": {"type": ["integer", "null"]}}}]
GRAMMARS = ['root ::= "a" b\nb ::= "b"+', 'root ::= [a-c]* "!"', 'root ::= "x" | root "y"',
            'root ::= ("<" [a-z]+ ">")?', 'root ::= [^<]{0,4}']
REGEXES = ["[a-c]{2}x?", "a|bc*", "[0-9]+(\\.[0-9]+)?", "<[a-z]>", ".{0,3}", "[^\"]*"]
STYLES = list(formats.JSONStyle.__args__)
TOKENS = ["<s1>", "<s2>", "<|x|>", "<|call|>", 97, 98, V.stop_id, 300, "a"]
LEAVES = ("const_string", "json_schema", "grammar", "regex", "any_text", "token", "exclude_token", "any_tokens",
          "qwen_xml_parameter")
COMBINATORS = ("sequence", "or", "optional", "plus", "star", "repeat", "tag", "triggered_tags",
               "token_triggered_tags", "tags_with_separator", "dispatch", "token_dispatch")


def _pick(s: Script, seq):
    return seq[s.byte() % len(seq)]


def _string(s: Script) -> str:
    b = s.byte()
    if b >= 0xF0:  # fuzzed text
        return s.take(b & 7).decode("utf-8", "replace")
    return STRINGS[b % len(STRINGS)]


def _strings(s: Script, most: int = 3) -> list:
    return [_string(s) for _ in range(s.byte() % (most + 1))]


def _tokens(s: Script, most: int = 3) -> list:
    return [_pick(s, TOKENS) for _ in range(s.byte() % (most + 1))]


def _limit(s: Script):
    b = s.byte()
    return None if b < 0x80 else b % 9


def _leaf(kind: str, s: Script) -> dict:
    if kind == "const_string":
        return {"type": kind, "value": _string(s)}
    if kind == "json_schema":
        f = {"type": kind, "json_schema": _pick(s, SCHEMAS), "style": _pick(s, STYLES)}
        flags = s.byte()
        if flags & 1:
            f["any_order"] = True
        if flags & 2:
            f["max_whitespace_cnt"] = flags >> 4
        if flags & 4:
            f["excludes"] = _strings(s, 2)
        return f
    if kind == "grammar":
        return {"type": kind, "grammar": _pick(s, GRAMMARS)}
    if kind == "regex":
        return {"type": kind, "pattern": _pick(s, REGEXES)}
    if kind == "any_text":
        return {"type": kind, "excludes": _strings(s), "max_tokens": _limit(s), "max_chars": _limit(s)}
    if kind == "token":
        return {"type": kind, "token": _pick(s, TOKENS)}
    if kind == "exclude_token":
        return {"type": kind, "exclude_tokens": _tokens(s)}
    if kind == "any_tokens":
        return {"type": kind, "exclude_tokens": _tokens(s), "max_tokens": _limit(s)}
    return {"type": kind, "json_schema": _pick(s, SCHEMAS)}  # qwen_xml_parameter


def _tag(s: Script, depth: int) -> dict:
    b = s.byte()
    begin = {"type": "token", "token": _pick(s, TOKENS[:4])} if b & 1 else _string(s) or "<a>"
    end = {"type": "token", "token": _pick(s, TOKENS[:4])} if b & 2 else (
        _strings(s, 2) if b & 4 else _string(s))
    return {"type": "tag", "begin": begin, "content": _format(s, depth + 1), "end": end}


def _tags(s: Script, depth: int) -> list:
    return [_tag(s, depth) for _ in range(1 + s.byte() % 3)]


def _triggers(s: Script, tags: list) -> list:
    """Prefixes of the tags' text begins (what a valid trigger is), or fuzzed strings."""
    out = []
    for t in tags:
        b = s.byte()
        if isinstance(t["begin"], str) and t["begin"] and b < 0xE0:
            out.append(t["begin"][:1 + b % len(t["begin"])])
        else:
            out.append(_string(s))
    return list(dict.fromkeys(out))


def _format(s: Script, depth: int = 0) -> dict:
    kinds = LEAVES if depth >= 4 else LEAVES + COMBINATORS
    kind = _pick(s, kinds)
    if kind in LEAVES:
        return _leaf(kind, s)
    flags = s.byte()
    if kind in ("sequence", "or"):
        return {"type": kind, "elements": [_format(s, depth + 1) for _ in range(flags % 4)]}
    if kind in ("optional", "plus", "star"):
        return {"type": kind, "content": _format(s, depth + 1)}
    if kind == "repeat":
        lo = flags % 4
        return {"type": kind, "min": lo, "max": -1 if flags & 0x80 else lo + (flags >> 2) % 4,
                "content": _format(s, depth + 1)}
    if kind == "tag":
        return _tag(s, depth)
    if kind in ("triggered_tags", "tags_with_separator"):
        tags = [dict(t, type="tag") for t in _tags(s, depth)]
        f = {"type": kind, "tags": tags, "at_least_one": bool(flags & 1), "stop_after_first": bool(flags & 2)}
        if kind == "triggered_tags":
            f.update(triggers=_triggers(s, tags), excludes=_strings(s, 2))
        else:
            f["separator"] = _string(s)
        return f
    if kind == "token_triggered_tags":
        tags = _tags(s, depth)
        return {"type": kind, "trigger_tokens": _tokens(s, 2) or ["<s1>"], "tags": tags,
                "exclude_tokens": _tokens(s, 2), "at_least_one": bool(flags & 1),
                "stop_after_first": bool(flags & 2)}
    n = 1 + flags % 3
    if kind == "dispatch":
        return {"type": kind, "rules": [[_string(s) or "<a>", _format(s, depth + 1)] for _ in range(n)],
                "loop": bool(flags & 4), "excludes": _strings(s, 2)}
    return {"type": kind, "rules": [[_pick(s, TOKENS), _format(s, depth + 1)] for _ in range(n)],
            "loop": bool(flags & 4), "exclude_tokens": _tokens(s, 2)}


def _model_tag(s: Script):
    family = _pick(s, FAMILIES)
    names = ["get_weather", "f", "search", "run_code"]
    tools = [{"type": "function", "function": {"name": names[i], "parameters": _pick(s, SCHEMAS)}}
             for i in range(s.byte() % 4)]
    if s.byte() % 5 == 0:
        tools.append({"type": _pick(s, ["web_search_preview", "code_interpreter", "python"])})
    b = s.byte()
    allowed = {"type": "allowed_tools", "allowed_tools": {
        "mode": ["auto", "required"][b >> 7], "tools": [{"type": "function", "function": {"name": n}}
                                                         for n in names[:(b >> 4) % 4]]}}
    choice = ["auto", "required", "none", {"type": "function", "function": {"name": names[0]}}, allowed,
              {"type": "web_search_preview"}, None, "auto"][b % 8]
    rf = [None, None, {"type": "json_object"}, {"type": "json_schema", "json_schema": {"schema": SCHEMAS[6]}}][
        (b >> 3) % 4]
    flags = s.byte()
    return get_model_structural_tag(
        family, tools, tool_choice=choice, reasoning=["enabled", "disabled", "auto", True][flags % 4],
        any_order=bool(flags & 4), exclude_special_tokens=not flags & 8,
        max_whitespace_cnt=None if flags & 0x10 else (flags >> 5), parallel_tool_calls=not flags & 0x20,
        response_format=rf)


def _legacy(s: Script):
    """The legacy ``(tags, triggers)`` arguments (a schema sometimes as JSON text)."""
    tags = []
    for _ in range(1 + s.byte() % 3):
        schema = _pick(s, SCHEMAS)
        tags.append({"begin": _string(s) or "<a>", "schema": json.dumps(schema) if s.byte() & 1 else schema,
                     "end": _string(s)})
    return tags, _triggers(s, tags)


def _compile(data: bytes):
    """(compiled grammar or None on a clean refusal, the walk's script)."""
    mode = data[0] if data else 0
    if mode < 0xF0:
        text, _, rest = data.partition(b"\0")
        tag, script = text.decode("utf-8", "replace"), Script(rest or data[-16:])
    else:
        script = Script(data[1:])
        tag = _format(script) if mode < 0xF7 else None
    try:
        if mode == 0xF7:
            with budget():
                return V.compiler.compile_structural_tag(*_legacy(script)), script
        if tag is None:
            tag = _model_tag(script)
            if script.byte() & 1:
                tag = tag.model_dump_json()
        elif isinstance(tag, dict) and script.byte() & 1:
            tag = json.dumps(tag)
        with budget():
            return V.compiler.compile_structural_tag(tag), script
    except EXPECTED:
        return None, script


def _check(m, mask, ids) -> None:
    for t in ids:
        bit = bool(mask[t >> 5] >> (t & 31) & 1)
        got = m.fork().accept_token(t)
        assert bit == got, f"token {t} ({V.tokens[t] if t < len(V.tokens) else 'padding'}!r): " \
                           f"mask bit {bit}, fork().accept_token {got} after {m.num_accepted_steps} steps"


def test_one_input(data: bytes) -> None:
    compiled, s = _compile(data)
    if compiled is None:
        return
    try:
        _walk(compiled, s)
    except LimitExceededError as e:
        # the per-step work budget (documented: the matcher is left unchanged); a
        # repeat of a nullable format, nested, makes fills quadratic in the copies
        assert "work limit" in str(e), e


def _walk(compiled, s: Script) -> None:
    m = xgr.GrammarMatcher(compiled)
    row = np.zeros((1, V.words), dtype=np.int32)
    for step in range(16):
        if m.is_terminated():
            return
        m.fill_next_token_bitmask(row)
        mask = row[0].copy()
        ids = allowed(mask, V.size)
        assert ids, f"empty mask after {m.num_accepted_steps} steps, not terminated"
        _check(m, mask, [(s.u16() + 101 * step + 37 * j) % V.size for j in range(6)])
        pick = ids[s.byte() % len(ids)]
        assert m.accept_token(pick), f"token {pick} {V.tokens[pick]!r} was in the mask but refused"
    if not m.is_terminated():
        m.fill_next_token_bitmask(row)
        _check(m, row[0].copy(), range(V.size))
    m.find_jump_forward_bytes()


if __name__ == "__main__":
    fuzzlib.main(test_one_input)
