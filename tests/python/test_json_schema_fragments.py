"""$ref targets converted once and shared across documents (json_schema_fragments):
a later document gets a memoized target's rules only where its target, and every
target that one reaches, has the same text at the same pointer; the grammar then
accepts exactly what the oracle does, memo or not."""

from __future__ import annotations

import copy
import json

import pytest

from xg2_plugin import GrammarError
from xg2_plugin import json_schema_fragments as FR
from xg2_plugin.json_schema import json_schema_to_ebnf

import random

from test_json_schema import check_schema, pool


def ebnf(schema):
    return json_schema_to_ebnf(schema, strict_mode=False)


def check(schema, instances):
    check_schema(schema, instances, strict_mode=False)


@pytest.fixture(autouse=True)
def empty_memo():
    FR._FRAGMENT_CACHE.clear()
    yield
    FR._FRAGMENT_CACHE.clear()


ADDRESS = {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"$ref": "#/$defs/zip"}},
           "required": ["street"], "additionalProperties": False}
ZIP = {"type": "string", "pattern": "^[0-9]{5}$"}


def _doc(root_props, defs):
    return {"type": "object", "properties": root_props, "$defs": defs}


def _instances(rng):
    addr = [{"street": "Main", "zip": "12345"}, {"street": "x", "zip": "1234"}, {"street": "y"},
            {"zip": "12345"}, {"street": "z", "zip": 12345}, {"street": "s", "zip": "12345", "extra": 1}]
    out = [{"home": a} for a in addr] + [{"work": a, "home": b} for a in addr for b in addr[:3]]
    return out + [{"home": v} for v in pool(rng, 20)] + [{}]


def test_a_shared_definition_is_converted_once():
    first = _doc({"home": {"$ref": "#/$defs/address"}}, {"address": ADDRESS, "zip": ZIP})
    second = _doc({"work": {"$ref": "#/$defs/address"}, "home": {"$ref": "#/$defs/address"}},
                  {"address": copy.deepcopy(ADDRESS), "zip": dict(ZIP)})
    ebnf(first)
    stored = len(FR._FRAGMENT_CACHE)
    assert stored >= 1  # the address (its zip code, a string, is no rule of its own)
    text = ebnf(second)
    assert len(FR._FRAGMENT_CACHE) == stored  # nothing new: it came back from the memo
    assert text.count("::=") == ebnf(second).count("::=")
    rng = random.Random(0)
    check(second, _instances(rng))
    FR._FRAGMENT_CACHE.clear()
    check(second, _instances(rng))  # the same answers converted cold


@pytest.mark.parametrize("changed", ["target", "reached"])
def test_a_different_text_at_the_same_pointer_is_not_reused(changed):
    # The address reads the same in both documents; only what "#/$defs/zip" says
    # differs (or the address itself): the second must not get the first's rules.
    ebnf(_doc({"home": {"$ref": "#/$defs/address"}}, {"address": ADDRESS, "zip": ZIP}))
    addr, zip_ = copy.deepcopy(ADDRESS), {"type": "integer", "minimum": 10000, "maximum": 99999}
    if changed == "target":
        addr, zip_ = dict(addr, required=["street", "zip"]), dict(ZIP)
    second = _doc({"work": {"$ref": "#/$defs/address"}, "home": {"$ref": "#/$defs/address"}},
                  {"address": addr, "zip": zip_})
    check(second, _instances(random.Random(1)) + [{"home": {"street": "a", "zip": 12345}}])


def test_the_same_properties_in_another_order_are_another_target():
    # Objects are generated in their schema's property order (any_order=False): a
    # target listing the same properties in another order is not the same target.
    period = {"type": "object", "properties": {"start": {"type": "string"}, "end": {"type": "string"}},
              "additionalProperties": False}
    ebnf(_doc({"p": {"$ref": "#/$defs/period"}}, {"period": period}))
    swapped = dict(period, properties={"end": {"type": "string"}, "start": {"type": "string"}})
    second = _doc({"p": {"$ref": "#/$defs/period"}}, {"period": swapped})
    check(second, [{"p": {"end": "b", "start": "a"}}, {"p": {"end": "b"}}, {"p": {}}, {"p": {"x": 1}}])


def test_recursive_definitions_round_trip():
    tree = {"type": "object", "properties": {"value": {"type": "integer"},
                                             "children": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
            "required": ["value"], "additionalProperties": False}
    first = _doc({"t": {"$ref": "#/$defs/tree"}}, {"tree": tree})
    second = _doc({"u": {"$ref": "#/$defs/tree"}, "t": {"$ref": "#/$defs/tree"}}, {"tree": copy.deepcopy(tree)})
    leaf, bad = {"value": 1}, {"value": "x"}
    inst = [{"t": leaf}, {"t": {"value": 2, "children": [leaf, {"value": 3, "children": []}]}},
            {"t": {"value": 2, "children": [bad]}}, {"u": leaf, "t": {"children": []}}, {"u": {"value": 1.5}}]
    check(first, inst)
    check(second, inst)
    check(first, inst)


def test_a_name_already_taken_falls_back_to_converting():
    # The memo's rule names come from the first document's paths ("root-value-home"
    # for the address); here the second document gives that name to another object
    # before it meets the address, which must then be converted, not replayed.
    ebnf(_doc({"home": {"$ref": "#/$defs/address"}}, {"address": ADDRESS, "zip": ZIP}))
    second = _doc({"home": {"type": "object", "properties": {"q": {"type": "boolean"}}, "required": ["q"]},
                   "w": {"$ref": "#/$defs/address"}}, {"address": copy.deepcopy(ADDRESS), "zip": dict(ZIP)})
    assert "root-value-home ::=" in ebnf(second)
    q, addr = {"q": True}, {"street": "a", "zip": "12345"}
    inst = [{"home": q, "w": addr}, {"home": q, "w": q}, {"home": addr, "w": addr}, {"w": {"street": "b"}},
            {"home": q, "w": {"street": "c", "zip": "1"}}]
    check(second, inst)


def test_the_alternatives_limit_counts_memoized_targets():
    # 8 definitions of 100 alternatives each: one document with four of them
    # converts; one that reaches all eight is too large, memoized or not.
    defs = {f"d{i}": {"anyOf": [{"const": f"{i}-{j}"} for j in range(100)] + [{"type": "object"}]}
            for i in range(8)}
    small = {"type": "object", "properties": {f"p{i}": {"$ref": f"#/$defs/d{i}"} for i in range(4)}, "$defs": defs}
    big = {"type": "object", "properties": {f"p{i}": {"$ref": f"#/$defs/d{i}"} for i in range(8)},
           "$defs": copy.deepcopy(defs)}
    with pytest.raises(GrammarError, match="alternatives"):
        ebnf(big)
    ebnf(small)
    assert len(FR._FRAGMENT_CACHE) >= 4
    with pytest.raises(GrammarError, match="alternatives"):
        ebnf(big)


def test_contextual_targets_are_not_memoized():
    # anchors (and $id) change what references mean; unevaluated* depends on where the
    # target is applied: such targets are converted every time.
    with_id = _doc({"home": {"$ref": "#/$defs/address"}}, {"address": dict(ADDRESS, **{"$anchor": "addr"}), "zip": ZIP})
    ebnf(with_id)
    uneval = _doc({"home": {"$ref": "#/$defs/o"}},
                  {"o": {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False}})
    ebnf(uneval)
    assert len(FR._FRAGMENT_CACHE) == 0


def test_the_memo_stays_within_its_limit(monkeypatch):
    monkeypatch.setattr(FR, "LIMIT_CHARS", 20000)
    for i in range(40):
        defs = {"o": {"type": "object", "properties": {f"k{i}_{j}": {"type": "string"} for j in range(4)},
                      "required": [f"k{i}_0"]}}
        ebnf(_doc({"x": {"$ref": "#/$defs/o"}}, defs))
        assert 0 < FR.memo_chars() <= 20000
    assert len(FR._FRAGMENT_CACHE) < 40  # the oldest were dropped
