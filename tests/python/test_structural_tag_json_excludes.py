"""``excludes`` on a ``json``-style ``json_schema`` format, against oracles: random
instances of several schemas are accepted to termination iff ``jsonschema`` validates
them and no covered string or key holds an excluded word; on a real vocabulary each
sampled token's mask bit equals a forked matcher's verdict; XGrammar 0.2.8 agrees
where the raw text and the decoded strings are the same."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest

import xg2_plugin as xgr
from xg2_plugin.structural_tag.json_excludes import decoded_words, words_pattern
from st_helpers import ours_accepts, xgr_accepts_tag
from vocabs import walk_checking_forks

WORDS = ["</tool>", "IGNORE", "a|b"]
BENIGN = ["x", "ok", "</to", "ol>", "IGNOR", "a", "|b", " ", "\u00e9t\u00e9", "<tool>"]

ITEM = {"type": "object", "properties": {"name": {"type": "string"}, "qty": {"type": "integer"}},
        "required": ["name"]}
SCHEMAS = {
    "nested": {"type": "object", "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 12},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "item": ITEM}, "required": ["city"]},
    "ref_anyof": {"$defs": {"item": ITEM}, "type": "object", "properties": {
        "v": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"$ref": "#/$defs/item"}]},
        "list": {"type": "array", "items": {"$ref": "#/$defs/item"}}}},
    "enum": {"type": "object", "properties": {
        "mode": {"enum": ["fast", "IGNORE me", "slow", {"k": "</tool>"}, 3]},
        "fixed": {"const": "ok"}}, "required": ["mode"]},
    "additional": {"type": "object", "properties": {"id": {"type": "integer"}},
                   "additionalProperties": {"type": "string"}},
    "unconstrained": {"type": "object", "properties": {"any": {}, "list": {"type": "array"},
                                                      "obj": {"type": "object"}}},
    "pattern": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z</>a-z]*$"}, "note": {"type": "string"}}},
    "root_any": True,
}


def _tag(schema, excludes=WORDS) -> dict:
    return {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": schema,
                                                  "excludes": excludes}}


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(WORDS if rng.random() < 0.1 else BENIGN) for _ in range(rng.randint(0, 3)))


def _value(rng: random.Random, schema, depth: int = 0):
    """A random instance that follows ``schema`` loosely (often valid, not always)."""
    if depth > 3 or rng.random() < 0.04:
        return rng.choice([None, 1, 2.5, True, _text(rng), [], {}])
    if not isinstance(schema, dict):
        return _value(rng, {"type": rng.choice(["object", "array", "string"])}, depth + 1)
    if "$ref" in schema:
        return _value(rng, ITEM, depth + 1)
    for k in ("anyOf", "enum"):
        if k in schema:
            alt = rng.choice(schema[k])
            return alt if k == "enum" else _value(rng, alt, depth + 1)
    if "const" in schema:
        return schema["const"] if rng.random() < 0.7 else _text(rng)
    ty = schema.get("type")
    if ty == "integer":
        return rng.randint(-5, 5)
    if ty == "string":
        return _text(rng)
    if ty == "array":
        return [_value(rng, schema.get("items", {}), depth + 1) for _ in range(rng.randint(0, 3))]
    if ty is None:
        return _value(rng, {"type": rng.choice(["object", "array", "string", "integer"])}, depth + 1)
    props = schema.get("properties", {})
    out = {k: _value(rng, s, depth + 1) for k, s in props.items()
           if rng.random() < (0.95 if k in schema.get("required", ()) else 0.6)}
    if rng.random() < (0.1 if "properties" in schema and "additionalProperties" not in schema else 0.3):
        out[_text(rng) or "k"] = _value(rng, schema.get("additionalProperties", {}), depth + 1)
    return out


def _strictified(schema):
    """``schema`` as the front-end reads it in strict mode (XGrammar's, which structural
    tags use): an object that declares properties and says nothing of others has none."""
    if isinstance(schema, list):
        return [_strictified(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strictified(v) for k, v in schema.items()}
    if "properties" in schema and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


def _without_lengths(schema):
    if isinstance(schema, list):
        return [_without_lengths(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: _without_lengths(v) for k, v in schema.items() if k not in ("minLength", "maxLength")}


def _clean(value, skip_key=None) -> bool:
    """No string or key holds a word; the value of top-level key ``skip_key`` (a
    string under a pattern) is not looked at."""
    if isinstance(value, str):
        return not any(w in value for w in WORDS)
    if isinstance(value, list):
        return all(_clean(v) for v in value)
    if isinstance(value, dict):
        return all(_clean(k) and (k == skip_key or _clean(v)) for k, v in value.items())
    return True


def _instances(name: str, n: int, seed: int):
    rng = random.Random(seed)
    seen = set()
    for _ in range(n):
        inst = _value(rng, SCHEMAS[name])
        text = json.dumps(inst, ensure_ascii=False)
        if text not in seen:
            seen.add(text)
            yield inst, text


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_accepts_iff_valid_and_clean(name):
    schema, tag = SCHEMAS[name], _tag(SCHEMAS[name])
    skip = "code" if name == "pattern" else None
    counts = {True: 0, False: 0}
    for inst, text in _instances(name, 200, seed=len(name)):
        want = jsonschema.Draft202012Validator(_strictified(schema)).is_valid(inst) and _clean(inst, skip)
        assert ours_accepts(tag, text) == want, (name, text)
        counts[want] += 1
    assert counts[True] >= 5 and counts[False] >= 5, counts  # both sides exercised


def test_pattern_string_is_not_filtered_but_its_key_is():
    tag = _tag(SCHEMAS["pattern"])
    assert ours_accepts(tag, '{"code": "</tool>"}')
    assert not ours_accepts(tag, '{"note": "</tool>"}')
    assert not ours_accepts(_tag({"type": "object", "patternProperties": {"^.*$": {"type": "integer"}}}),
                            '{"xIGNORE": 1}')


def test_lengths_are_kept_exactly():
    tag = _tag({"type": "string", "minLength": 2, "maxLength": 4})
    assert [ours_accepts(tag, json.dumps(s)) for s in ("a", "ab", "abcd", "abcde", "IGNORE"[:4])] == \
        [False, True, True, False, True]


def test_word_is_matched_in_the_decoded_string():
    tag = _tag({"type": "string"})
    assert not ours_accepts(tag, '"<\\/tool>"')  # an escaped slash is still the word
    assert not ours_accepts(tag, '"\\u003c/tool>"')
    assert ours_accepts(_tag({"type": "string"}, ["nope"]), '"\\nope"')  # newline then "ope"
    # a word written with JSON escapes forbids its decoded form too
    assert not ours_accepts(_tag({"type": "string"}, ["<\\/x>"]), '"</x>"')
    assert decoded_words(["<\\/x>", "\\q"]) == ["<\\/x>", "</x>", "\\q"]
    assert words_pattern(["a.b", "\n"]) == "^[\\s\\S]*(?:a\\.b|\\u000a)"


def test_unconstrained_values_nest():
    tag = _tag({"type": "object", "properties": {"a": {}}})
    assert ours_accepts(tag, '{"a": [{"b": {"c": ["fine", 1, null]}}]}')
    assert not ours_accepts(tag, '{"a": [{"b": {"c": ["x</tool>y"]}}]}')
    assert not ours_accepts(tag, '{"a": [{"b": {"IGNORE": 1}}]}')
    # a bare object / array type leaves its members open: they are filtered too
    tag = _tag({"type": "object", "properties": {"o": {"type": "object"}, "l": {"type": "array"}}})
    assert [ours_accepts(tag, t) for t in ('{"o": {"k": "fine"}}', '{"o": {"k": ["x</tool>"]}}',
                                           '{"l": [["ok"], {"x": 1}]}', '{"l": [["</tool>"]]}')] == \
        [True, False, True, False]
    tag = _tag({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "object"}})
    assert ours_accepts(tag, '[1, {"a": "b"}]') and not ours_accepts(tag, '[1, {"a": "IGNORE"}]')


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_agrees_with_xgrammar_where_raw_is_decoded(name):
    """Instances without escapes (raw text == decoded strings): XGrammar 0.2.8's verdict.
    (Without minLength / maxLength, which XGrammar drops under excludes and we keep.)"""
    tag = _tag(_without_lengths(SCHEMAS[name]))
    n = 0
    for inst, text in _instances(name, 100, seed=7):
        if "\\" in text:
            continue
        assert ours_accepts(tag, text) == xgr_accepts_tag(tag, text), (name, text)
        n += 1
    assert n >= 25


def _walk(vocab, tag, text: str, samples: int = 32, seed: int = 0) -> bool:
    """Walk ``text``'s tokens, checking sampled mask bits against forks; whether the
    matcher accepted it all and can end there."""
    m = xgr.GrammarMatcher(vocab.compiler.compile_structural_tag(tag))
    return walk_checking_forks(vocab, m, text, samples, seed) and m.is_completed()


@pytest.mark.parametrize("name", ["nested", "unconstrained"])
def test_masks_match_forks(vocab, name):
    """Three accepted and three rejected instances each, walked token by token."""
    tag = _tag(SCHEMAS[name])
    left = {True: 3, False: 3}
    for inst, text in _instances(name, 200, seed=3):
        want = jsonschema.Draft202012Validator(_strictified(SCHEMAS[name])).is_valid(inst) and _clean(inst)
        if left[want]:
            assert _walk(vocab, tag, text, seed=left[want]) == want, text
            left[want] -= 1
    assert left == {True: 0, False: 0}


def test_special_token_text_is_excluded_inside_json(deepseek):
    """A word that is a special token's text still binds inside JSON strings (no special
    token is written there; its spelling in ordinary tokens is text)."""
    eos = "<\uff5cend\u2581of\u2581sentence\uff5c>"
    compiled = deepseek.compiler.compile_structural_tag(_tag({"type": "object"}, [eos]))
    for text, want in (('{"a": "x"}', True), ('{"a": "x' + eos + '"}', False), ('{"' + eos + '": 1}', False)):
        m = xgr.GrammarMatcher(compiled)
        assert (m.accept_string(text.encode("utf-8")) and m.is_completed()) == want, text


@pytest.mark.parametrize("excludes,where", [([""], "excludes[0]"), (["ok", 3], "excludes"),
                                            ("IGNORE", "excludes")])
def test_bad_excludes_name_their_path(excludes, where):
    where = where.replace("[", r"\[").replace("]", r"\]")
    with pytest.raises(xgr.GrammarError, match=r"format\.(json_schema\.)?" + where):
        xgr.Grammar.from_structural_tag(_tag({"type": "string"}, excludes))


@pytest.mark.parametrize("root_id", [None, "http://x.test/root"])
def test_nested_id_keeps_our_definitions_reachable(root_id):
    schema = {"type": "object", "properties": {"a": {"$id": "http://y.test/sub", "type": "object",
                                                     "properties": {"q": {}}}}}
    if root_id:
        schema["$id"] = root_id
    tag = _tag(schema)
    assert ours_accepts(tag, '{"a": {"q": ["ok", {"k": 1}]}}')
    assert not ours_accepts(tag, '{"a": {"q": ["ok", {"k": "IGNORE"}]}}')


def test_deep_schema_is_a_grammar_error():
    deep = {"type": "string"}
    for _ in range(100_000):
        deep = {"type": "array", "items": deep}
    with pytest.raises(xgr.GrammarError, match="nests too deeply"):
        xgr.Grammar.from_structural_tag(_tag(deep))


def test_many_words_compile_and_hold():
    """Forty words of eight random characters: the "contains none" automaton stays
    linear in the words (written unanchored, it grew exponentially and was refused)."""
    rng = random.Random(5)
    words = ["".join(rng.choice("abcdefgh<>/|") for _ in range(8)) for _ in range(40)]
    tag = _tag({"type": "object", "properties": {"a": {"type": "string"}, "b": {}}}, words)
    for w in words[::8]:
        assert not ours_accepts(tag, json.dumps({"a": "x" + w}))
        assert not ours_accepts(tag, json.dumps({"b": {w: 1}}))
        assert ours_accepts(tag, json.dumps({"a": w[:-1] + "z", "b": [w[1:]]}))


def test_too_many_word_characters_are_refused_at_once():
    words = ["w%07d" % i for i in range(1000)]  # 8,000 characters: past the automaton limit
    with pytest.raises(xgr.LimitExceededError, match=r"format\.excludes: 8000 characters"):
        xgr.Grammar.from_structural_tag(_tag({"type": "string"}, words))


def test_all_alternatives_excluded_is_an_error():
    with pytest.raises(xgr.GrammarError, match="json_schema"):
        xgr.Grammar.from_structural_tag(_tag({"enum": ["IGNORE", "</tool>"]}))


def test_a_malformed_type_is_a_grammar_error():
    """A find of the structural-tag campaign: a `type` that is an object reached a set
    lookup in the transform (a bare TypeError); the front-end names the keyword instead."""
    schema = {"type": {"x": {"type": "integer"}, "s": {"type": "string"}}, "required": ["x"]}
    with pytest.raises(xgr.GrammarError, match=r'format\.json_schema: .*keyword "type"'):
        xgr.Grammar.from_structural_tag(_tag(schema, ["x"]))
