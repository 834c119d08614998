"""A tool met for the first time has its arguments' masks computed in the
background (``GrammarCompiler(precompute_pieces=True)``, the default): after
the first mask of a request, along sample calls of each new tool's schema, on
the tool's own grammar -- whose states keep their mask keys when linked into a
request's grammar -- and then the request grammar's own states (the tool names
by their literals).  Checked on the real DeepSeek vocabulary: the masks a call
meets afterwards are exact (equal to those of a compiler without the
precompute, on a vocabulary of its own, and to a forked matcher's verdicts),
the call's argument states are cache hits, each tool is done once per
vocabulary, and the sample walk stops where a grammar refuses its text."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

import xg2_plugin as xgr
from xg2_plugin._native import ffi, lib
from xg2_plugin.structural_tag.sample_arguments import sample_arguments

from vocabs import bits_of_row, fill, load_deepseek


def _tools(extra: str = "unit"):
    """Nine tools of three kinds (a name of its own for each test's: tools met before
    are computed ahead already)."""
    kinds = [
        {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                                          extra: {"enum": ["c", "f"]}}, "required": ["city"]},
        {"type": "object", "properties": {"values": {"type": "array", "items": {"type": "number"}},
                                          "strict": {"type": "boolean"}}, "required": ["values", "strict"]},
        {"type": "object", "properties": {"where": {"type": "object", "properties": {
            "lat": {"type": "number"}, "lon": {"type": "number"}}, "required": ["lat", "lon"]},
            "note": {"type": ["string", "null"]}, extra: {"type": "boolean"}}, "required": ["where"]},
    ]
    return [{"name": f"tool_{i}", "parameters": kinds[i % 3]} for i in range(9)]


CALLS = {"tool_0": {"city": "Paris", "days": 3, "unit": "c"},  # (of _tools())
         "tool_4": {"values": [1.5, 20.25, 0.5], "strict": False},
         "tool_8": {"where": {"lat": 48.85, "lon": 2.35}, "note": None}}


def _tag(tools):
    tags = [{"type": "tag", "begin": f"<function={t['name']}>",
             "content": {"type": "json_schema", "json_schema": t["parameters"]}, "end": "</function>"}
            for t in tools]
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": tags}}


@pytest.fixture(scope="module")
def two_vocabs(deepseek):
    """The DeepSeek vocabulary twice over: each TokenizerInfo has a mask cache of its own."""
    return deepseek, load_deepseek()


def _walk(vocab, compiler, tools, name, rng, check_forks):
    """A request's call of `name`: its masks, token by token, and the mask-cache
    misses inside the arguments (after their first token)."""
    compiled = compiler.compile_structural_tag(json.dumps(_tag(tools)))
    m = xgr.GrammarMatcher(compiled)
    masks = [bits_of_row(fill(m, vocab.vocab_size), vocab.vocab_size)]
    if compiled.precompute_future is not None:
        assert compiled.precompute_future.result(timeout=300) > 0
    ids = vocab.encode(f"Sure. <function={name}>")
    args = vocab.encode(json.dumps(CALLS[name]))
    misses = None
    for k, t in enumerate(ids + args + vocab.encode("</function> Done.")):
        if k == len(ids) + 1:
            misses = compiler.get_mask_cache_stats()["misses"]
        if k == len(ids) + len(args):
            misses = compiler.get_mask_cache_stats()["misses"] - misses
        if k:
            masks.append(bits_of_row(fill(m, vocab.vocab_size), vocab.vocab_size))
        bits = masks[-1]
        assert bits[t], (name, k)
        if check_forks:
            for other in rng.integers(0, vocab.vocab_size, 24):
                assert bool(bits[other]) == m.fork().accept_token(int(other)), (name, k, int(other))
        assert m.accept_token(t)
    return masks, misses


def test_precomputed_tool_masks_are_exact_and_hit(two_vocabs):
    ahead_vocab, plain_vocab = two_vocabs
    ahead = xgr.GrammarCompiler(ahead_vocab.info)
    plain = xgr.GrammarCompiler(plain_vocab.info, precompute_pieces=False)
    ahead.clear_cache()
    plain.clear_cache()
    tools = _tools()
    rng = np.random.default_rng(5)
    for n, name in enumerate(CALLS):
        subset = tools[n:] + tools[:n]  # (each request its own tool set)
        got, ahead_misses = _walk(ahead_vocab, ahead, subset, name, rng, check_forks=True)
        want, plain_misses = _walk(plain_vocab, plain, subset, name, rng, check_forks=False)
        assert len(got) == len(want)
        for k, (a, b) in enumerate(zip(got, want)):
            assert np.array_equal(a, b), (name, k, np.flatnonzero(a != b)[:10])
        # the first call of each kind of tool: every state new without the precompute
        assert plain_misses >= 8, (name, plain_misses)
        assert ahead_misses <= plain_misses // 4, (name, ahead_misses, plain_misses)


def test_each_tool_is_computed_ahead_once_per_vocabulary(two_vocabs):
    ahead_vocab, other_vocab = two_vocabs
    tools = _tools("scale")

    def background_misses(compiler, tag_tools):
        compiled = compiler.compile_structural_tag(json.dumps(_tag(tag_tools)))
        assert compiled.precompute_future is None  # (started by the first mask, not by the compile)
        before = compiler.get_mask_cache_stats()["misses"]  # (before the fill: the work may end before it returns)
        fill(xgr.GrammarMatcher(compiled), compiler.tokenizer_info.vocab_size)
        assert compiled.precompute_future.result(timeout=300) > 0
        return compiled, compiler.get_mask_cache_stats()["misses"] - before

    compiler = xgr.GrammarCompiler(ahead_vocab.info)
    first, new = background_misses(compiler, tools[:4])
    vocab_id = int(ffi.cast("uintptr_t", ahead_vocab.info._handle))
    follow = ffi.new("uint8_t[32]")
    for piece, handle in first.grammar.linked:
        lib.xg2_grammar_root_follow(handle, follow)
        assert not piece.claim_masks(bytes(follow), vocab_id), "a tool is left to be computed ahead again"
    # the same tools in another order: a new grammar, its pieces done already
    _, again = background_misses(compiler, tools[:4][::-1])
    assert again * 4 < new, (again, new)
    # another vocabulary has a mask cache of its own: the pieces are computed for it
    _, other = background_misses(xgr.GrammarCompiler(other_vocab.info), tools[:4])
    assert other * 2 > new, (other, new)
    # without it: no background work, and the flag is a bool
    off = xgr.GrammarCompiler(ahead_vocab.info, precompute_pieces=False).compile_structural_tag(
        json.dumps(_tag(tools[4:])))
    fill(xgr.GrammarMatcher(off), ahead_vocab.vocab_size)
    assert off.precompute_future is None
    for bad in ("yes", 1, None):
        with pytest.raises(xgr.InvalidArgumentError, match="precompute_pieces"):
            xgr.GrammarCompiler(ahead_vocab.info, precompute_pieces=bad)


def test_the_sample_walk_stops_where_the_grammar_refuses(deepseek):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    compiled = xgr.GrammarCompiler(deepseek.info).compile_json_schema(schema, any_whitespace=False)
    done = ffi.new("int32_t *")
    # a mask before each byte taken, and one after the last: the text's length + 1,
    # or up to the byte refused ({"n": 12} is the grammar's spelling without whitespace)
    for text, fills in ((b'{"n": 12}', 10), (b'{"n": 1x}', 8), (b'{"n":12}', 6), (b"", 1), (b"x", 1)):
        assert lib.xg2_compiled_precompute_text(compiled._handle, text, len(text), -1, done) == 0
        assert done[0] == fills, (text, done[0])
    assert lib.xg2_compiled_precompute_text(compiled._handle, b'{"n": 12}', 9, 0, done) == 0
    assert done[0] == 0  # (no time: nothing)


def _bfcl_schemas():
    """The parameter schemas of BFCL's simple Python functions (the bfcl-eval wheel)."""
    import test_json_schema_oracle as oracle

    z = oracle._load_bfcl_wheel()
    out = []
    for line in z.read("bfcl_eval/data/BFCL_v4_simple_python.json").decode().splitlines():
        schema = oracle._to_json_schema(json.loads(line)["function"][0]["parameters"])
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError:
            continue
        out.append(schema)
    return out


def test_samples_are_valid_calls_of_real_tools():
    schemas = _bfcl_schemas()
    assert len(schemas) >= 300
    valid = total = 0
    for schema in schemas:
        samples = sample_arguments(schema)
        assert 1 <= len(samples) <= 2
        for text in samples:
            total += 1
            try:
                jsonschema.validate(json.loads(text), schema)
                valid += 1
            except jsonschema.ValidationError:
                pass
    assert valid == total, f"{total - valid} of {total} samples invalid"


def test_odd_schemas_give_samples_or_none_never_an_error():
    from xg2_plugin.structural_tag.convert import sample_arguments_of

    odd = [{"type": "integer", "minimum": 10**400}, {"type": "object", "required": 5, "properties": {"a": {}}},
           {"$ref": "#/items/0", "items": [1]}, {"type": "array", "minItems": 10**9, "items": {"type": "string"}},
           {"enum": []}, {"type": 5}, {"anyOf": []}, {"$ref": "#"}, {"properties": []}, [], "x", None,
           {"type": "number", "maximum": float("inf")}]
    for schema in odd:
        got = sample_arguments_of(json.dumps(schema))
        assert isinstance(got, tuple) and all(isinstance(t, bytes) and len(t) <= 4096 for t in got), schema
    # a self-referencing schema stops at the depth limit; a long array is cut to four items
    assert sample_arguments_of(json.dumps({"$ref": "#"})) == ()
    assert sample_arguments_of(json.dumps(odd[3]))[0] == b'["a b", "", "", ""]'  # (later items: the other spelling)
