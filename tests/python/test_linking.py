"""Grammars linked from pieces compiled once (xg2_plugin.linking, native/src/grammar_link.c):
a structural tag's JSON schemas are compiled as pieces and copied into each tag's grammar.
The linked grammar must be the grammar of the tag's whole EBNF text: the same mask at every
step of every walk (compared row for row with the text compiled in one piece, on the real
DeepSeek vocabulary), each mask bit equal to a forked matcher's verdict, and its printed and
serialised forms parse back to it.
"""

import json

import numpy as np
import pytest

import xg2_plugin as xgr
from xg2_plugin import linking
from xg2_plugin.grammar import Grammar
from xg2_plugin.structural_tag import structural_tag_to_ebnf
from xg2_plugin.structural_tag.convert import _CACHE, _content_key
from vocabs import bits_of_row, fill


def _tool(i):
    props = {f"n_{i}": {"type": "integer", "minimum": i % 3}, "label": {"type": "string", "maxLength": 12},
             "mode": {"enum": ["fast", "slow", f"m{i}"]}, "ratio": {"type": "number"},
             "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
             "opt": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"x": {"type": "boolean"}}}]}}
    return {"name": f"tool_{i}", "parameters": {"type": "object", "properties": props,
                                                "required": [f"n_{i}", "label", "mode"]}}


def _llama_tag(tools):
    tags = [{"type": "tag", "begin": f"<function={t['name']}>",
             "content": {"type": "json_schema", "json_schema": t["parameters"]}, "end": "</function>"}
            for t in tools]
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": tags}}


def _walk_both(vocab, linked, whole, text, rng, samples=12):
    """Walk ``text`` on both matchers: rows equal at every step, sampled bits equal a
    fork's verdict; returns whether the whole text was accepted (and the stop token after)."""
    for tok in vocab.encode(text):
        row = fill(linked, vocab.vocab_size)
        assert np.array_equal(row, fill(whole, vocab.vocab_size))
        bits = bits_of_row(row, vocab.vocab_size)
        for t in {tok, *map(int, rng.integers(0, vocab.vocab_size, samples))}:
            assert bool(bits[t]) == linked.fork().accept_token(t), t
        ok = linked.accept_token(tok)
        assert ok == whole.accept_token(tok)
        if not ok:
            return False
    return True


@pytest.mark.parametrize("seed", [0, 1])
def test_a_linked_tag_has_the_masks_of_its_whole_text(deepseek, seed):
    compiler = xgr.GrammarCompiler(deepseek.info)
    rng = np.random.default_rng(seed)
    pool = [_tool(i) for i in range(12)]
    for _ in range(3):  # tool sets overlapping earlier ones: pieces found again, others new
        tools = [pool[int(i)] for i in rng.choice(len(pool), 5, replace=False)]
        tag = _llama_tag(tools)
        linked_compiled = compiler.compile_structural_tag(json.dumps(tag))
        whole_compiled = compiler.compile_grammar(Grammar.from_ebnf(structural_tag_to_ebnf(tag, deepseek.info)))
        name = tools[2]["name"]
        i = int(name.split("_")[1])
        good = {f"n_{i}": 7, "label": "north", "mode": f"m{i}", "tags": ["a", "b"], "opt": {"x": True}}
        texts = [f"Sure. <function={name}>{json.dumps(good)}</function> done.",
                 f"<function={name}>" + json.dumps({**good, "mode": "other"}) + "</function>",  # not in the enum
                 f"<function={name}>" + json.dumps({"label": "x", "mode": "fast"}) + "</function>",  # required n_i
                 "<function=tool_99>{}</function>"]  # no such tool
        verdicts = []
        for text in texts:
            linked, whole = xgr.GrammarMatcher(linked_compiled), xgr.GrammarMatcher(whole_compiled)
            verdicts.append(_walk_both(deepseek, linked, whole, text, rng))
        assert verdicts == [True, False, False, False]


def test_a_tag_of_300_tools_has_the_masks_of_its_whole_text(deepseek):
    """300 pieces in one tag (past 255: any per-piece table a byte could index): calls to
    the first and the last tools walk with the rows of the whole text, and a wrong call
    is refused at the same token."""
    compiler = xgr.GrammarCompiler(deepseek.info)
    tools = [_tool(i) for i in range(300)]
    tag = _llama_tag(tools)
    linked_compiled = compiler.compile_structural_tag(json.dumps(tag))
    whole_compiled = compiler.compile_grammar(Grammar.from_ebnf(structural_tag_to_ebnf(tag, deepseek.info)))
    rng = np.random.default_rng(3)
    for i in (4, 254, 290, 299):
        good = {f"n_{i}": 7, "label": "north", "mode": f"m{i}", "ratio": -0.5, "tags": ["a"], "opt": None}
        for text, ok in [(f"Sure. <function=tool_{i}>{json.dumps(good)}</function> done.", True),
                         (f"<function=tool_{i}>" + json.dumps({**good, "mode": "m1000"}) + "</function>", False)]:
            linked, whole = xgr.GrammarMatcher(linked_compiled), xgr.GrammarMatcher(whole_compiled)
            assert _walk_both(deepseek, linked, whole, text, rng, samples=4) == ok, (i, text)


def test_a_linked_grammar_prints_and_serialises_whole(deepseek):
    compiler = xgr.GrammarCompiler(deepseek.info)
    tag = _llama_tag([_tool(1), _tool(2)])
    grammar = Grammar.from_structural_tag(tag)
    assert isinstance(grammar, linking._LinkedGrammar)
    again = Grammar.from_ebnf(str(grammar))
    restored = Grammar.deserialize_json(grammar.serialize_json())
    assert str(restored) == str(Grammar.from_ebnf(structural_tag_to_ebnf(tag)))
    call = '<function=tool_2>{"n_2": 3, "label": "a", "mode": "m2"}</function>'
    for g in (grammar, again, restored):
        m = xgr.GrammarMatcher(compiler.compile_grammar(g))
        assert m.accept_string(call) and m.accept_string(" ok")
        bad = xgr.GrammarMatcher(compiler.compile_grammar(g))
        assert not bad.accept_string('<function=tool_2>{"n_2": 3}</function>')


def test_a_piece_built_for_another_follow_set_is_built_again(deepseek):
    """The follow set guessed from the tag's end strings misses what really follows the
    schema (a constant after it inside the tag): the core asks for the right one, the
    piece is built again for it, and the grammar is still that of the whole text."""
    schema = {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}
    content = {"type": "sequence", "elements": [{"type": "json_schema", "json_schema": schema},
                                                {"type": "const_string", "value": "!"}]}
    tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<x>"],
                                                "tags": [{"begin": "<x>", "content": content, "end": "</x>"}]}}
    compiler = xgr.GrammarCompiler(deepseek.info)
    linked = xgr.GrammarMatcher(compiler.compile_structural_tag(tag))
    whole = xgr.GrammarMatcher(compiler.compile_grammar(Grammar.from_ebnf(structural_tag_to_ebnf(tag, deepseek.info))))
    assert _walk_both(deepseek, linked, whole, 'a <x>{"k": 12}!</x> b', np.random.default_rng(5))
    piece = next(v[0] for k, v in _CACHE.items() if k[0] == "json-linked" and k[1] == _content_key(schema, ""))
    want = bytearray(32)
    want[ord("!") >> 3] |= 1 << (ord("!") & 7)
    assert bytes(want) in piece._grammars
    assert not xgr.GrammarMatcher(compiler.compile_structural_tag(tag)).accept_string('<x>{"k": 1}</x>')


def test_a_new_tool_the_core_refuses_is_named_by_its_path_and_not_cached(deepseek):
    """A request's new tools are built after its conversion, together: one the core
    refuses (a key pattern whose automaton passes the state limit) still names its
    place in the tag, the tool before it is cached and usable, the refused one is not."""
    ok = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    bad = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^[ab]*a[ab]{22}$"}},
           "required": ["s"]}

    def tag(*schemas):
        return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<f="], "tags": [
            {"begin": f"<f=t{i}>", "content": {"type": "json_schema", "json_schema": sch}, "end": "</f>"}
            for i, sch in enumerate(schemas)]}}

    compiler = xgr.GrammarCompiler(deepseek.info)
    with pytest.raises(xgr.LimitExceededError, match=r"^format\.tags\[1\]\.content\.json_schema: .*automaton states"):
        compiler.compile_structural_tag(tag(ok, bad))
    keys = {k[1] for k in _CACHE if k[0] == "json-linked"}
    assert _content_key(ok, "") in keys and _content_key(bad, "") not in keys
    m = xgr.GrammarMatcher(compiler.compile_structural_tag(tag(ok)))
    assert m.accept_string('x <f=t0>{"n": 3}</f>') and m.is_completed()


def test_schemas_that_differ_only_in_descriptions_share_one_piece(deepseek):
    """Two tools whose schemas differ only where the grammar does not (descriptions)
    are one piece: one build, one root in the linked grammar, and still the grammar
    of the whole text (rows equal, fork verdicts) for a call to either."""
    def params(doc):
        return {"type": "object", "description": doc, "required": ["city"],
                "properties": {"city": {"type": "string", "description": f"the city, {doc}"},
                               "days": {"type": "integer", "minimum": 1}}}

    tools = [{"name": "weather_now", "parameters": params("now")}, {"name": "weather_week", "parameters": params("week")},
             _tool(3)]
    tag = _llama_tag(tools)
    compiler = xgr.GrammarCompiler(deepseek.info)
    compiled = compiler.compile_structural_tag(tag)
    pieces = {k[1]: v[0] for k, v in _CACHE.items() if k[0] == "json-linked"}
    a, b = pieces[_content_key(params("now"), "")], pieces[_content_key(params("week"), "")]
    assert a is b and len(a._grammars) == 1
    assert str(compiled.grammar).count(f"{a.root} ::=") == 1
    whole = compiler.compile_grammar(Grammar.from_ebnf(structural_tag_to_ebnf(tag, deepseek.info)))
    rng = np.random.default_rng(11)
    for name in ("weather_now", "weather_week"):
        text = f'ok <function={name}>{{"city": "Oslo", "days": 3}}</function>'
        assert _walk_both(deepseek, xgr.GrammarMatcher(compiled), xgr.GrammarMatcher(whole), text, rng)
    m = xgr.GrammarMatcher(compiled)
    assert not m.accept_string('<function=weather_week>{"days": 3}</function>')


def test_a_piece_root_defined_in_the_text_is_an_error():
    piece = linking.Piece('root ::= "a"\n', "p_")
    with pytest.raises(xgr.GrammarError, match="defined twice"):
        linking.link('root ::= p_root\np_root ::= "b"\n', [piece], [bytes(32)])


def _tool_named(name, i):
    t = _tool(i)
    return {"name": name, "parameters": t["parameters"]}


def _call_verdict(tools, text):
    """The oracle: free text, then calls `<function=NAME>ARGS</function>` with NAME one of
    the tools and ARGS valid under its schema (jsonschema), then free text."""
    import re as _re
    import jsonschema

    by_name = {t["name"]: t["parameters"] for t in tools}
    pos = 0
    for m in _re.finditer(r"<function=", text):
        if m.start() < pos:
            return False
        rest = text[m.end():]
        name, gt, after = rest.partition(">")
        if not gt or name not in by_name:
            return False
        body, sep, _ = after.partition("</function>")
        if not sep:
            return False
        try:
            jsonschema.validate(json.loads(body), by_name[name])
        except (ValueError, jsonschema.ValidationError):
            return False
        if body != json.dumps(json.loads(body)):  # (the oracle's calls are written as json.dumps writes them)
            return False
        pos = m.end() + len(name) + 1 + len(body) + len("</function>")
    return True


def test_a_tag_choice_built_as_a_trie_accepts_exactly_its_tools(deepseek):
    """The choice among a request's tool names is built straight as a trie
    (native/src/trie_dfa.c); names that are prefixes of others, two names with one
    schema, names sharing long suffixes: every verdict equals the oracle's."""
    names = ["get", "get_weather", "get_weather_now", "set_weather", "a.b", "a.bc", "x", "xy"]
    tools = [_tool_named(n, i % 4) for i, n in enumerate(names)]  # (i % 4: schemas shared by several names)
    compiler = xgr.GrammarCompiler(deepseek.info)
    compiled = compiler.compile_structural_tag(json.dumps(_llama_tag(tools)))
    texts = []
    for t in tools:
        i = names.index(t["name"]) % 4
        args = {f"n_{i}": 5, "label": "ok", "mode": "fast"}
        texts += [f"hi <function={t['name']}>{json.dumps(args)}</function>",
                  f"<function={t['name']}>{json.dumps({**args, f'n_{i}': 'five'})}</function>",
                  f"<function={t['name']}_>{json.dumps(args)}</function>",
                  f"<function={t['name'][:-1]}>{json.dumps(args)}</function> and more"]
    texts += ["plain text only", "<function=ge>{}</function>", "<function=>{}</function>"]
    verdicts = []
    for text in texts:
        m = xgr.GrammarMatcher(compiled)
        ours = m.accept_string(text) and m.is_completed()
        assert ours == _call_verdict(tools, text), text
        verdicts.append(ours)
    assert sum(verdicts) >= len(tools) + 1 and not all(verdicts)
