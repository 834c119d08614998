"""Structural tags: every format type from a model, a dict and JSON text; the EBNF
we emit judged against XGrammar 0.2.8 (its own conversion of the same tag) on
accept/reject of strings; our core on the formats it runs today; bad tags."""

from __future__ import annotations

import json

import pytest

import xg2_plugin as ours
from xg2_plugin import GrammarError
from xg2_plugin.structural_tag import StructuralTag, StructuralTagItem, parse_structural_tag
from xg2_plugin.structural_tag.convert import piece_cache_info, structural_tag_to_ebnf

from st_helpers import ours_accepts, ours_in_xgr_accepts, xgr, xgr_accepts_tag

OBJ = {"type": "object", "properties": {"x": {"type": "integer"}, "s": {"type": "string"}}, "required": ["x"]}
JS = {"type": "json_schema", "json_schema": OBJ}
CONST = {"type": "const_string", "value": "k"}
TAG_A = {"begin": "<a>", "content": JS, "end": "</a>"}
TAG_B = {"begin": "<b>", "content": CONST, "end": "</b>"}

# (name, format, strings to judge, needs TagDispatch in the core)
CASES = [
    ("const_string", CONST, ["k", "", "kk"], False),
    ("json_schema", JS, ['{"x": 1}', '{"x": 1, "s": "a"}', '{"s": "a"}', '{"x": "1"}', "{}"], False),
    ("json_schema_any_order", {**JS, "any_order": True}, ['{"s": "a", "x": 1}', '{"x": 1}'], False),
    ("grammar", {"type": "grammar", "grammar": 'root ::= "a" b\nb ::= "b"+'}, ["ab", "abb", "a", "b"], False),
    ("regex", {"type": "regex", "pattern": "[a-c]{2}x?"}, ["ab", "abx", "a", "abxx"], False),
    ("sequence", {"type": "sequence", "elements": [CONST, JS]}, ['k{"x": 2}', '{"x": 2}', "k"], False),
    ("or", {"type": "or", "elements": [CONST, {"type": "const_string", "value": "z"}]}, ["k", "z", "kz"], False),
    ("optional", {"type": "optional", "content": CONST}, ["", "k", "kk"], False),
    ("plus", {"type": "plus", "content": CONST}, ["", "k", "kkk"], False),
    ("star", {"type": "star", "content": CONST}, ["", "k", "kkk", "kx"], False),
    ("repeat", {"type": "repeat", "min": 2, "max": 3, "content": CONST}, ["k", "kk", "kkk", "kkkk"], False),
    ("repeat_unbounded", {"type": "repeat", "min": 1, "max": -1, "content": CONST}, ["", "k", "kkkkk"], False),
    ("tag", {"type": "tag", **TAG_A}, ['<a>{"x": 1}</a>', '<a>{"x": 1}', '<a>{}</a>'], False),
    ("tag_end_list", {"type": "tag", "begin": "<a>", "content": CONST, "end": ["</a>", "</b>"]},
     ["<a>k</a>", "<a>k</b>", "<a>k</c>"], False),
    ("tags_with_separator", {"type": "tags_with_separator", "tags": [TAG_A, TAG_B], "separator": ","},
     ["", '<a>{"x": 1}</a>,<b>k</b>', "<b>k</b><b>k</b>", "<b>k</b>,"], False),
    ("tags_with_separator_one", {"type": "tags_with_separator", "tags": [TAG_A, TAG_B], "separator": ",",
                                 "at_least_one": True, "stop_after_first": True},
     ["", "<b>k</b>", "<b>k</b>,<b>k</b>"], False),
    ("triggered_forced", {"type": "triggered_tags", "triggers": ["<"], "tags": [TAG_A, TAG_B],
                          "at_least_one": True, "stop_after_first": True},
     ["<b>k</b>", "x<b>k</b>", "<b>k</b>x", ""], False),
    ("qwen_xml_parameter", {"type": "qwen_xml_parameter", "json_schema": {
        "type": "object", "properties": {"n": {"type": "integer"}, "m": {"type": "integer"}}, "required": ["n"]}},
     ["<parameter=n>1</parameter>", "<parameter=n>\t1\n</parameter>\n<parameter=m>2</parameter>",
      "<parameter=m>2</parameter>", "<parameter=n>x</parameter>"], False),
    # formats that need TagDispatch in the core
    ("any_text", {"type": "any_text"}, ["", "hello <a>"], False),
    ("any_text_max_chars", {"type": "any_text", "max_chars": 3}, ["", "abc", "abcd", "\u00e9\u00e9\u00e9"], False),
    ("tag_any_text_max_tokens", {"type": "tag", "begin": "<a>", "content": {"type": "any_text", "max_tokens": 3,
                                                                            "max_chars": 5}, "end": "</a>"},
     ["<a>ab</a>", "<a>abcdef</a>", "<a></a>"], True),
    ("any_text_excludes", {"type": "any_text", "excludes": ["bad"]}, ["good", "so bad", "ba d"], True),
    ("tag_any_text", {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
     ["<think>x</think>", "<think></think>", "<think>x</think>y", "<think>a</think>b</think>"], True),
    ("triggered_tags", {"type": "triggered_tags", "triggers": ["<a", "<b"], "tags": [TAG_A, TAG_B]},
     ["", "hi", 'hi<a>{"x": 1}</a> and <b>k</b>.', "<b>x</b>", "<a>"], True),
    ("triggered_overlap", {"type": "triggered_tags", "triggers": ["<"], "tags": [TAG_A, TAG_B],
                           "excludes": ["STOP"]},
     ["a<b>k</b>b", "a<c", "x STOP", "<b>k</b><b>k</b>"], True),
    ("triggered_stop_after_first", {"type": "triggered_tags", "triggers": ["<b"], "tags": [TAG_B],
                                    "stop_after_first": True},
     ["text<b>k</b>", "text<b>k</b>more", "plain"], True),
    ("triggered_at_least_one", {"type": "triggered_tags", "triggers": ["<b"], "tags": [TAG_B],
                                "at_least_one": True},
     ["<b>k</b>", "<b>k</b> then <b>k</b>", "plain", ""], True),
    ("dispatch", {"type": "dispatch", "rules": [["<<", CONST]], "loop": False, "excludes": ["zz"]},
     ["ab<<k", "ab<<kmore", "azz", "ab"], True),
    ("qwen_xml_string", {"type": "json_schema", "style": "qwen_xml", "json_schema": OBJ},
     ["<parameter=x>1</parameter><parameter=s>any text</parameter>", "<parameter=s>t</parameter>"], True),
    ("glm_xml", {"type": "json_schema", "style": "glm_xml", "json_schema": OBJ},
     ["<arg_key>x</arg_key><arg_value>1</arg_value>", "<arg_key>x</arg_key><arg_value>1</arg_value>"
      "<arg_key>s</arg_key><arg_value>hi</arg_value>", "<arg_key>s</arg_key><arg_value>hi</arg_value>"], True),
    ("deepseek_xml", {"type": "json_schema", "style": "deepseek_xml", "json_schema": OBJ},
     ['<\uff5cDSML\uff5cparameter name="x" string="false">1</\uff5cDSML\uff5cparameter>',
      '<\uff5cDSML\uff5cparameter name="x" string="true">1</\uff5cDSML\uff5cparameter>'], True),
    ("minimax_xml", {"type": "json_schema", "style": "minimax_xml", "json_schema": OBJ},
     ['<parameter name="x">1</parameter>', '<parameter name="x">1</parameter><parameter name="s">z</parameter>'],
     True),
]
IDS = [c[0] for c in CASES]


def _tag(fmt):
    return {"type": "structural_tag", "format": fmt}


@pytest.mark.parametrize("name,fmt,strings,dispatch", CASES, ids=IDS)
def test_parses_from_model_dict_and_json(name, fmt, strings, dispatch):
    from_dict = parse_structural_tag(_tag(fmt))
    from_json = parse_structural_tag(json.dumps(_tag(fmt)))
    from_model = parse_structural_tag(from_dict)
    assert from_dict == from_json == from_model
    again = parse_structural_tag(from_dict.model_dump_json())
    assert structural_tag_to_ebnf(again) == structural_tag_to_ebnf(from_dict)
    assert fmt["type"] == from_dict.format.type


@pytest.mark.parametrize("name,fmt,strings,dispatch", CASES, ids=IDS)
def test_same_language_as_xgrammar(name, fmt, strings, dispatch):
    st = _tag(fmt)
    verdicts = [(s, xgr_accepts_tag(st, s), ours_in_xgr_accepts(st, s)) for s in strings]
    assert [v[1] for v in verdicts] == [v[2] for v in verdicts], verdicts
    assert any(v[1] for v in verdicts) and (len(strings) < 2 or not all(v[1] for v in verdicts)) or name in (
        "any_text", "json_schema_any_order", "glm_xml", "minimax_xml"), verdicts


NATIVE = [c for c in CASES if not c[3] and c[0] != "any_text"]
DISPATCH = [c for c in CASES if c[3]]


@pytest.mark.parametrize("name,fmt,strings,dispatch", NATIVE, ids=[c[0] for c in NATIVE])
def test_our_core_agrees_with_xgrammar(name, fmt, strings, dispatch):
    st = _tag(fmt)
    for s in strings:
        assert ours_accepts(st, s) == xgr_accepts_tag(st, s), s


@pytest.mark.parametrize("name,fmt,strings,dispatch", DISPATCH, ids=[c[0] for c in DISPATCH])
def test_our_core_agrees_with_xgrammar_dispatch(name, fmt, strings, dispatch):
    st = _tag(fmt)
    for s in strings:
        assert ours_accepts(st, s) == xgr_accepts_tag(st, s), s


def test_any_text_alone_runs_in_our_core():
    st = _tag({"type": "any_text"})
    assert ours_accepts(st, "") and ours_accepts(st, "any <text> \u00e9")


def test_public_entry_points_and_legacy_forms():
    info = ours.TokenizerInfo([bytes([b]) for b in range(256)])
    compiler = ours.GrammarCompiler(info)
    tag = _tag({"type": "tag", **TAG_A})
    for value in (tag, json.dumps(tag), parse_structural_tag(tag)):
        assert compiler.compile_structural_tag(value) is compiler.compile_structural_tag(value)
        ours.Grammar.from_structural_tag(value)
        ours.Grammar.from_structural_tag(structural_tag=value)
    items = [StructuralTagItem(begin="<a>", schema=OBJ, end="</a>")]
    legacy = StructuralTag.from_legacy_structural_tag(items, ["<a"])
    assert legacy.format.type == "triggered_tags"
    for ebnf in (structural_tag_to_ebnf(legacy),
                 structural_tag_to_ebnf({"structures": [{"begin": "<a>", "schema": OBJ, "end": "</a>"}],
                                         "triggers": ["<a"]})):
        assert "TagDispatch(" in ebnf and '"<a"' in ebnf
    assert xgr  # (the oracle is importable)


def test_legacy_form_compiles_in_our_core():
    compiler = ours.GrammarCompiler(ours.TokenizerInfo([bytes([b]) for b in range(256)]))
    items = [StructuralTagItem(begin="<a>", schema=OBJ, end="</a>")]
    for compiled in (compiler.compile_structural_tag(items, ["<a"]),
                     compiler.compile_structural_tag(tags=items, triggers=["<a"])):
        m = ours.GrammarMatcher(compiled)
        assert m.accept_string('x <a>{"x": 1}</a> y') and m.is_completed()


def test_usage_guide_spellings():
    """The guide writes const_string's field as ``text`` (ours reads both)."""
    st = parse_structural_tag(_tag({"type": "const_string", "text": "<think></think>"}))
    assert st.format.value == "<think></think>"
    # Example 4 of the guide names triggered tags "tag_and_text"
    tag = {"type": "tag_and_text", "triggers": ["<b"], "tags": [TAG_B], "stop_after_first": True}
    for s in ("x<b>k</b>", "x<b>k</b>y", "x"):
        assert ours_in_xgr_accepts(_tag(tag), s) == xgr_accepts_tag(_tag(dict(tag, type="triggered_tags")), s)


def test_json_schema_rules_named_by_content_and_cached():
    """A tool's argument grammar is the same text whatever set it comes in."""
    a = {"type": "tag", "begin": "<a>", "content": JS, "end": "</a>"}
    other = {"type": "tag", "begin": "<o>", "content": {"type": "json_schema", "json_schema": {"type": "integer", "minimum": 12345}},
             "end": "</o>"}
    e1 = structural_tag_to_ebnf(_tag({"type": "sequence", "elements": [a]}))
    before = piece_cache_info()["entries"]
    e2 = structural_tag_to_ebnf(_tag({"type": "sequence", "elements": [other, a]}))
    assert piece_cache_info()["entries"] == before + 1  # only the new schema was converted
    rules1 = {line for line in e1.splitlines() if line.startswith("js")}
    assert rules1 and rules1 <= set(e2.splitlines())
    respaced = json.loads(json.dumps(OBJ, indent=3))
    e3 = structural_tag_to_ebnf(_tag({"type": "json_schema", "json_schema": respaced}))
    assert rules1 <= set(e3.splitlines())



def test_piece_cache_is_bounded_in_characters(monkeypatch):
    """The process-wide piece cache holds at most max_chars (characters of text, bytes
    of compiled pieces), and a piece over max_piece_chars is converted every time
    instead of kept (a fuzz campaign's schemas, megabytes of grammar each, once
    filled it to gigabytes)."""
    from xg2_plugin.structural_tag import convert

    monkeypatch.setattr(convert, "_CACHE_CHARS", 400_000)
    monkeypatch.setattr(convert, "_PIECE_MAX_CHARS", 150_000)

    def schema(i, n):
        return {"type": "object", "properties": {f"p{i}_{k}": {"type": "integer", "minimum": i} for k in range(n)}}

    for i in range(40):
        structural_tag_to_ebnf(_tag({"type": "json_schema", "json_schema": schema(i, 6)}))
        info = piece_cache_info()
        assert info["chars"] <= 400_000, info
    assert 1 < info["entries"] < 40  # kept some, dropped the oldest
    big = schema(999, 300)
    text = structural_tag_to_ebnf(_tag({"type": "json_schema", "json_schema": big}))
    before = piece_cache_info()
    assert structural_tag_to_ebnf(_tag({"type": "json_schema", "json_schema": big})) == text
    assert piece_cache_info()["chars"] == before["chars"] <= 400_000  # the big piece was not kept
    assert piece_cache_info()["entries"] == before["entries"]
    # a kept piece is still a hit: the same text, no new entry
    small = schema(1000, 2)
    structural_tag_to_ebnf(_tag({"type": "json_schema", "json_schema": small}))
    n = piece_cache_info()["entries"]
    structural_tag_to_ebnf(_tag({"type": "json_schema", "json_schema": small}))
    assert piece_cache_info()["entries"] == n

BAD = [
    ({"type": "nope"}, r"format: unknown type 'nope'"),
    ({"type": "sequence", "elements": [CONST, {"type": "tag", "begin": "a", "end": "b"}]},
     r"format\.elements\[1\]\.content: Field required"),
    ({"type": "triggered_tags", "triggers": ["<a"], "tags": [TAG_A, TAG_A, TAG_A,
                                                           {"begin": "<a>", "content": {"type": "json_schema",
                                                                                        "json_schema": 3},
                                                            "end": "x"}]},
     r"format\.tags\[3\]\.content\.json_schema"),
    ({"type": "triggered_tags", "triggers": [""], "tags": [TAG_A]}, r"format\.triggers\[0\]: .*non-empty"),
    ({"type": "triggered_tags", "triggers": ["<a", "<z"], "tags": [TAG_A]},
     r"format\.triggers\[1\]: the trigger '<z' begins none of the tags"),
    ({"type": "triggered_tags", "triggers": ["<a"], "tags": [TAG_A, TAG_B]},
     r"format\.tags\[1\]\.begin: '<b>' begins with none of the triggers"),
    ({"type": "triggered_tags", "triggers": ["<", "<a"], "tags": [TAG_A]},
     r"format\.tags\[0\]\.begin: .*more than one trigger"),
    ({"type": "triggered_tags", "triggers": [], "tags": [TAG_A]}, r"format\.triggers: at least one"),
    ({"type": "sequence", "elements": [{"type": "json_schema", "json_schema": {"type": "nonsense"}}]},
     r"format\.elements\[0\]\.json_schema: "),
    ({"type": "grammar", "grammar": "root ::= undefined_rule"}, r"format\.grammar: "),
    ({"type": "regex", "pattern": "(a"}, r"format\.pattern: "),
    ({"type": "repeat", "min": 3, "max": 1, "content": CONST}, r"format: repeat needs"),
    ({"type": "token", "token": "<|x|>"}, r"format\.token: .*needs a tokenizer"),
    ({"type": "dispatch", "rules": [["", CONST]]}, r"format\.rules\[0\]\[0\]"),
    ({"type": "tag", "begin": "a", "content": CONST, "end": []}, r"format\.end: a list of end strings"),
    ({"type": "json_schema", "json_schema": {"type": "object", "properties": {"x": {}}}, "style": "cohere_xml"},
     r"format\.json_schema\.properties\.x: the cohere_xml style needs each value's type"),
    ({"type": "json_schema", "json_schema": OBJ, "style": "qwen_xml", "excludes": [" x"]},
     r"format\.excludes\[0\]: .*whitespace"),
    ({"type": "json_schema", "json_schema": OBJ, "excludes": ["x", ""]}, r"format\.excludes\[1\]: .*non-empty"),
    # scalars are not coerced: pydantic's lax mode read each of these as another tag
    ({"type": "json_schema", "json_schema": OBJ, "any_order": "true"}, r"^invalid structural tag at format\.any_order: .*boolean"),
    ({"type": "json_schema", "json_schema": 1}, r"at format\.json_schema: .*boolean"),
    ({"type": "json_schema", "json_schema": OBJ, "max_whitespace_cnt": 2.0}, r"format\.max_whitespace_cnt: .*integer, not float"),
    ({"type": "any_text", "max_tokens": "5"}, r"format\.max_tokens: .*integer, not str"),
    ({"type": "repeat", "min": 1.0, "max": 3, "content": CONST}, r"format\.min: .*integer, not float"),
    ({"type": "token", "token": True}, r"format\.token: .*integer, not bool"),
    ({"type": "triggered_tags", "triggers": ["<a"], "tags": [TAG_A], "at_least_one": 1},
     r"format\.at_least_one: .*boolean"),
]


@pytest.mark.parametrize("fmt,pattern", BAD, ids=[p[:40] for _, p in BAD])
def test_bad_tags_name_their_json_path(fmt, pattern):
    with pytest.raises(GrammarError, match=pattern):
        structural_tag_to_ebnf(_tag(fmt))
    with pytest.raises(GrammarError, match=pattern):
        ours.Grammar.from_structural_tag(json.dumps(_tag(fmt)))


def test_bad_inputs_bounded():
    with pytest.raises(GrammarError, match="not valid JSON"):
        structural_tag_to_ebnf("{")
    deep = CONST
    for _ in range(5000):
        deep = {"type": "optional", "content": deep}
    with pytest.raises(GrammarError):
        structural_tag_to_ebnf(_tag(deep))
    with pytest.raises(ours.InvalidArgumentError):
        structural_tag_to_ebnf(42)


def test_special_token_text_in_a_tag_is_that_token():
    """With a vocabulary, a tag string holding a special token's text matches the token."""
    words = [b"<|end|>", b"<a>"] + [bytes([b]) for b in range(256)]
    info = ours.TokenizerInfo(words, special_token_ids=[0])
    ebnf = structural_tag_to_ebnf(_tag({"type": "tag", "begin": "<a>", "content": CONST, "end": "<|end|>"}), info)
    assert "Token(0)" in ebnf and "<|end|>" not in ebnf
    ebnf = structural_tag_to_ebnf(_tag({"type": "sequence", "elements": [
        {"type": "token", "token": "<a>"}, {"type": "exclude_token", "exclude_tokens": [0, "<|end|>"]},
        {"type": "any_tokens", "exclude_tokens": [5], "max_tokens": 3}]}), info)
    assert "Token(1)" in ebnf and "ExcludeToken(0)" in ebnf and "ExcludeToken(5)" in ebnf
    xgr.Grammar.from_ebnf(ebnf)  # XGrammar's syntax


def test_cache_keys_keep_property_order():
    """Schemas that differ only in property order are different grammars (the
    properties are written in declared order): neither cache may conflate them."""
    info = ours.TokenizerInfo([bytes([b]) for b in range(256)])
    compiler = ours.GrammarCompiler(info)
    ab = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
    ba = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}, "required": ["a", "b"]}
    text = '{"b": 1, "a": 2}'
    for compile_ in (compiler.compile_json_schema,
                     lambda s: compiler.compile_structural_tag(_tag({"type": "json_schema", "json_schema": s}))):
        verdicts = []
        for schema in (ab, ba):
            m = ours.GrammarMatcher(compile_(schema))
            verdicts.append(m.accept_string(text) and m.is_completed())
        assert verdicts == [False, True]


def test_legacy_item_with_a_pydantic_model_schema():
    from pydantic import BaseModel

    class Args(BaseModel):
        x: int

    items = [StructuralTagItem(begin="<a>", schema=Args, end="</a>"),
             StructuralTagItem(begin="<b>", schema='{"type": "integer"}', end="</b>")]
    st = StructuralTag.from_legacy_structural_tag(items, ["<a", "<b"])
    assert ours_in_xgr_accepts(st, 'hi <a>{"x": 1}</a> <b>7</b>')
    assert not ours_in_xgr_accepts(st, '<a>{"x": "1"}</a>')
    with pytest.raises(GrammarError, match=r"tags\[0\]\.schema: not valid JSON"):
        StructuralTag.from_legacy_structural_tag([StructuralTagItem(begin="<a>", schema="{", end="</a>")], ["<a"])


def _rename_by_tokens(ebnf, prefix):
    """The token-by-token renaming rename_rules replaced (its oracle here)."""
    import re

    token = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|([A-Za-z_][A-Za-z0-9_.-]*)|\s+|.', re.S)
    defined = set(re.findall(r"(?m)^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*::=", ebnf))
    out = []
    for m in token.finditer(ebnf):
        name = m.group(1)
        out.append(prefix + name if name is not None and name in defined and not ebnf.startswith("(", m.end())
                   else m.group(0))
    return "".join(out)


def test_rename_rules_renames_names_only_as_the_tokenizer_did():
    import random
    import re

    from xg2_plugin.json_schema import json_schema_to_ebnf
    from xg2_plugin.structural_tag.convert import rename_rules

    texts = [json_schema_to_ebnf(s) for s in (
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x[a-z]+$"}, "b": {"enum": ["r", "s"]}}},
        {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 3}, {"type": "null"}]}},
        {"type": "object", "additionalProperties": {"type": "number"}, "required": ["k"]})]
    rng = random.Random(5)
    atoms = ['a', 'b', 'ab.c', 'a(', 'ab.c(', 'root', '"a b"', '"\\"a"', '[a-z]', '[\\]a]', 'F(', ' ', '(', ')', '|', '*', '\n', 'a_1', '-', 'x']
    for _ in range(200):
        body = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 30)))
        texts.append(f"root ::= {body}\na ::= \"q\"\nab.c ::= F(a, b)\n")
    for text in texts:
        rules, root = rename_rules(text, "p_")
        want = _rename_by_tokens(text, "p_")
        starts = list(re.finditer(r"(?m)^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*::=", want))
        want_rules = {m.group(1): want[m.end():(starts[i + 1].start() if i + 1 < len(starts) else len(want))].strip()
                      for i, m in enumerate(starts)}
        assert root == "p_root" and rules == want_rules, text
