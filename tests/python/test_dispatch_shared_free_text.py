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
    compiler = xgr.GrammarCompiler(deepseek.info)
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
    compiler = xgr.GrammarCompiler(deepseek.info)
    for names in (["div", "td"], ["tr"], ["div"]):
        m = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(_tag(names))))
        assert m.accept_string("Hello there ")
        bits = _check_every_token(deepseek, m)
        for n in ("div", "td", "tr"):
            assert bool(bits[deepseek.encode("<" + n)[0]]) == (n in names), n
    assert np.count_nonzero(bits) > 1000  # free text: most of the vocabulary
