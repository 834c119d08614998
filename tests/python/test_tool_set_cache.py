"""Dynamic tool sets (XGrammar-2 §3.3): each request brings its own tools, so the choice
among them is new in every grammar, but each tool's argument grammar is not.  The tool's
automaton must then be the same in every grammar that uses it -- not inlined into the
request's choice -- so its token masks come from the shared mask cache: walking the same
call through a second grammar with another tool set computes no new mask inside the
arguments.  Checked on the real DeepSeek vocabulary; every mask along the walk is also
checked against a forked matcher on the walked token and a sample of others.
"""

import json

import numpy as np

import xg2_plugin as xgr
from vocabs import bits_of_row, fill


def _tool(i):
    props = {f"count_{i}": {"type": "integer", "minimum": 0}, "label": {"type": "string", "maxLength": 20},
             "mode": {"enum": ["fast", "slow", f"m{i}"]}, "ratio": {"type": "number"}}
    return {"name": f"tool_{i}", "parameters": {"type": "object", "properties": props,
                                                "required": [f"count_{i}", "label", "mode"]}}


def _tag(tools):
    tags = [{"type": "tag", "begin": f"<function={t['name']}>",
             "content": {"type": "json_schema", "json_schema": t["parameters"]}, "end": "</function>"}
            for t in tools]
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": tags}}


def _walk_arguments(compiler, vocab, tools, call_name, args, rng):
    """Compile, accept the text up to the arguments, then walk the arguments token by
    token; returns the mask-cache misses while inside the arguments (after their first
    token: the mask before it still holds the request's own choice)."""
    m = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(_tag(tools))))
    assert m.accept_string(f"Sure. <function={call_name}>")
    ids = vocab.encode(json.dumps(args))
    assert bits_of_row(fill(m, vocab.vocab_size), vocab.vocab_size)[ids[0]] and m.accept_token(ids[0])
    before = compiler.get_mask_cache_stats()["misses"]
    for t in ids[1:]:
        bits = bits_of_row(fill(m, vocab.vocab_size), vocab.vocab_size)
        assert bits[t], t
        for other in rng.integers(0, vocab.vocab_size, 16):
            assert bool(bits[other]) == m.fork().accept_token(int(other)), int(other)
        assert m.accept_token(t)
    misses = compiler.get_mask_cache_stats()["misses"] - before
    assert m.accept_string("</function>")
    return misses


def test_a_tool_s_masks_are_shared_across_tool_sets(deepseek):
    # (the keys' sharing itself: no masks computed ahead in the background, which
    # would make the counts a race; test_precompute_pieces.py checks those)
    compiler = xgr.GrammarCompiler(deepseek.info, precompute_pieces=False)
    rng = np.random.default_rng(3)
    pool = [_tool(i) for i in range(60)]
    args = {"count_7": 12, "label": "north wing", "mode": "slow", "ratio": 0.25}
    first = _walk_arguments(compiler, deepseek, pool[:50], "tool_7", args, rng)
    assert first > 0  # the first grammar computed the argument masks
    again = _walk_arguments(compiler, deepseek, pool[5:55], "tool_7", args, rng)
    assert again == 0, f"{again} masks inside the arguments were computed again for another tool set"
