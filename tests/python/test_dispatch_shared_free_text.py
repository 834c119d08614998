"""A TagDispatch's free text is the same in every request that has the same triggers
(XGrammar-2 §3.3): its token masks must come from the shared mask cache whatever tags
the request brings, and stay exact where a token runs from the free text into a tag
that differs between requests.  Checked on the real DeepSeek vocabulary, every token's
mask bit against a forked matcher.
"""

import json

import numpy as np

import xg2_plugin as xgr
from vocabs import bits_of_row, fill, walk_checking_forks


def _tag(names):
    tags = [{"type": "tag", "begin": f"<{n}>", "content": {"type": "const_string", "value": n.upper()},
             "end": f"</{n}>"} for n in names]
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<"], "tags": tags}}


def _check_every_token(vocab, matcher):
    bits = bits_of_row(fill(matcher, vocab.vocab_size), vocab.vocab_size)
    wrong = [t for t in range(vocab.vocab_size) if bool(bits[t]) != matcher.fork().accept_token(t)]
    assert not wrong, [vocab.token_bytes[t] for t in wrong[:10]]
    return bits


def test_free_text_masks_are_shared_and_exact_across_tag_sets(deepseek):
    compiler = xgr.GrammarCompiler(deepseek.info, precompute_pieces=False)  # (counts: no background work)
    first = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(_tag(["div", "span"]))))
    bits = _check_every_token(deepseek, first)
    div = deepseek.encode("<div")
    assert len(div) == 1 and bits[div[0]]

    second = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(_tag(["p", "table"]))))
    before = compiler.get_mask_cache_stats()["misses"]
    bits = bits_of_row(fill(second, deepseek.vocab_size), deepseek.vocab_size)
    assert compiler.get_mask_cache_stats()["misses"] == before, "the free text's mask was computed again"
    # the shared entry leaves the tokens that enter a tag to the live parser
    assert not bits[div[0]]
    assert bits[deepseek.encode("<table")[0]]
    _check_every_token(deepseek, second)

    # free text, into a tag, back out: every mask on the way against forks
    assert walk_checking_forks(deepseek, second, "See <table>TABLE</table> and <p>P</p> too.", 24, seed=5)
    assert second.is_terminated() or second.accept_token(deepseek.stop_id)


def test_a_token_that_crosses_the_trigger_is_checked_against_the_tags(deepseek):
    """Tokens that hold the trigger and the start of a tag name ("<div" after "x")
    are the uncertain ones: a grammar without that tag must refuse them even after
    another grammar with it filled the shared entry."""
    compiler = xgr.GrammarCompiler(deepseek.info, precompute_pieces=False)  # (counts: no background work)
    for names in (["div", "td"], ["tr"], ["div"]):
        m = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(_tag(names))))
        assert m.accept_string("Hello there ")
        bits = _check_every_token(deepseek, m)
        for n in ("div", "td", "tr"):
            assert bool(bits[deepseek.encode("<" + n)[0]]) == (n in names), n
    assert np.count_nonzero(bits) > 1000  # free text: most of the vocabulary


def _tools_tag(names):
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    tags = [{"type": "tag", "begin": f"<function={n}>", "content": {"type": "json_schema", "json_schema": schema},
             "end": "</function>"} for n in names]
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": tags}}


def test_a_tags_suffix_is_shared_by_requests_with_other_tag_sets(deepseek):
    """A tag's states are keyed by what can follow them (grammar.c, residual keys):
    the end of a call (`</function>`) and a name's last bytes once no other name
    shares them have one mask across requests whose tool sets differ -- and it
    stays exact in each."""
    compiler = xgr.GrammarCompiler(deepseek.info, precompute_pieces=False)  # (counts: no background work)
    compiler.clear_cache()  # (the first request must meet them first: earlier tests' work may hold them)
    points = ("Calling <function=alp", 'Calling <function=alpha>{"x": 12}</func')
    misses = []
    for names in (["alpha", "beta"], ["gamma", "alpha", "delta"]):
        m = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(_tools_tag(names))))
        done, got = "", []
        for point in points:
            assert m.accept_string(point[len(done):])
            done = point
            before = compiler.get_mask_cache_stats()["misses"]
            _check_every_token(deepseek, m)
            got.append(compiler.get_mask_cache_stats()["misses"] - before)
        assert m.accept_string("tion>") and m.accept_token(deepseek.stop_id) and m.is_terminated()
        misses.append(got)
    assert all(misses[0]), misses  # the first request computes them ...
    assert misses[1] == [0, 0], misses  # ... the second finds them


def test_tag_suffixes_keep_the_tags_apart(deepseek):
    """Equal suffixes only: a name left with other names ahead ("al" before both
    "alpha" and "algol") or another end string is not taken for the first request's."""
    compiler = xgr.GrammarCompiler(deepseek.info, precompute_pieces=False)  # (counts: no background work)
    m1 = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(_tools_tag(["alpha"]))))
    assert m1.accept_string("<function=al")
    _check_every_token(deepseek, m1)
    tag = _tools_tag(["alpha", "algol"])
    tag["format"]["tags"][1]["end"] = "</fn>"
    m2 = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(tag)))
    assert m2.accept_string("<function=al")
    bits = _check_every_token(deepseek, m2)
    assert bits[deepseek.encode("g")[0]] and bits[deepseek.encode("p")[0]]
    assert m2.accept_string('gol>{"x": 1}</')
    _check_every_token(deepseek, m2)
    assert m2.fork().accept_string("fn>")
    assert not m2.fork().accept_string("function>")


def test_tokens_that_run_out_of_a_tag_into_free_text(deepseek):
    """At a tag's last byte, the tokens that go on into the free text (">\\n",
    ">.") are decided by stepping the free text's automaton once the tag has
    ended (mask.c, lone_verdict): each bit against a fork, and some of them
    accepted."""
    compiler = xgr.GrammarCompiler(deepseek.info, precompute_pieces=False)  # (counts: no background work)
    m = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(_tools_tag(["alpha", "beta"]))))
    assert m.accept_string('Sure. <function=beta>{"x": 3}</function')
    bits = _check_every_token(deepseek, m)
    onward = [t for t, b in enumerate(deepseek.token_bytes) if b and b.startswith(b">") and len(b) > 1 and bits[t]]
    assert len(onward) > 10, len(onward)
    # and a trigger inside such a token is the tag's start again
    assert m.accept_string(">\n<function=al")
    _check_every_token(deepseek, m)
