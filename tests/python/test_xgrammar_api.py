"""XGrammar 0.2.8's public API beyond the core classes, called as XGrammar's docs call
it, and compared with xgrammar itself (a test dependency) wherever both can run the
same input: the testing helpers, exceptions, Grammar.concat / union, draft-tree
traversal, the kernels entry points, xgr.hf; and serialization round trips with
truncated, altered and foreign payloads."""

import json
import random

import pytest
import torch
import xgrammar

import xg2_plugin as xgr
from xg2_plugin import testing as xt
from xg2_plugin.exception import (
    DeserializeFormatError,
    DeserializeVersionError,
    InvalidJSONError,
    InvalidStructuralTagError,
)

# Names of xgrammar.__all__ that other parts provide (structural tags) or that xg2
# does not have (a process-wide recursion depth: the core's limits are fixed).
ELSEWHERE = {
    "structural_tag", "StructuralTag", "StructuralTagItem", "get_model_structural_tag",
    "normalize_tool_choice", "register_model_structural_tag", "get_builtin_structural_tag",
    "get_max_recursion_depth", "set_max_recursion_depth", "max_recursion_depth",
}


def test_every_other_public_name_of_xgrammar_exists():
    missing = [n for n in xgrammar.__all__ if n not in ELSEWHERE and not hasattr(xgr, n)]
    assert missing == []
    for cls in ("Grammar", "GrammarCompiler", "CompiledGrammar", "GrammarMatcher", "TokenizerInfo"):
        theirs = {n for n in vars(getattr(xgrammar, cls)) if not n.startswith("_")}
        ours = set(dir(getattr(xgr, cls)))
        lacking = sorted(theirs - ours - {"from_structural_tag", "compile_structural_tag", "get_captures",
                                           "temperature"})
        assert lacking == [], cls


# ---- exceptions ----


def test_exception_names_and_bases():
    for name in ("DeserializeFormatError", "DeserializeVersionError", "InvalidJSONError",
                 "InvalidStructuralTagError"):
        ours = getattr(xgr.exception, name)
        assert getattr(xgr, name) is ours
        assert issubclass(ours, RuntimeError)  # (xgrammar's base)
        assert issubclass(ours, ValueError) and issubclass(ours, xgr.XG2Error)
    assert issubclass(InvalidStructuralTagError, xgr.GrammarError)


@pytest.mark.parametrize("call", [
    lambda c: c.compile_grammar("root ::= undefined_rule"),
    lambda c: c.compile_grammar('root ::= ("a"'),
    lambda c: c.compile_regex("(a"),
    lambda c: c.compile_regex("a\udc80"),  # (a lone surrogate: an argument error)
    lambda c: c.compile_json_schema({"type": "no-such-type"}),
    lambda c: c.compile_lark("start: ("),
])
def test_bad_requests_are_what_xgrammar_callers_catch(call):
    """SGLang answers a bad grammar with an error object only for ``RuntimeError``
    (what xgrammar raises); our errors stay ``ValueError``s as well."""
    ours = xgr.GrammarCompiler(xgr.TokenizerInfo(["a", "b"]))
    with pytest.raises(RuntimeError) as info:
        call(ours)
    assert isinstance(info.value, ValueError) and isinstance(info.value, xgr.XG2Error)
    theirs = xgrammar.GrammarCompiler(xgrammar.TokenizerInfo(["a", "b"]))
    with pytest.raises(Exception):  # (xgrammar rejects the same input)
        call(theirs)


# ---- testing helpers ----

CASES = [
    ('root ::= "a"+ "b"?', ["a", "aab", "b", "", "aabb"]),
    ('root ::= [0-9]{2,3} | "x" root', ["12", "x123", "1234", "xx", "x1"]),
    ('root ::= obj\nobj ::= "{" (pair ("," pair)*)? "}"\npair ::= [a-z]+ ":" (obj | [0-9]+)',
     ["{}", "{a:1,b:{c:2}}", "{a:}", "{a:1,}", "{a:{b:{}}}"]),
]


@pytest.mark.parametrize("ebnf,strings", CASES)
def test_is_grammar_accept_string_as_xgrammar(ebnf, strings):
    from xgrammar import testing as theirs

    for s in strings:
        for full in (True, False):
            expected = theirs._is_grammar_accept_string(ebnf, s, require_termination=full)
            assert xt._is_grammar_accept_string(ebnf, s, require_termination=full) == expected, (s, full)
            g = xgr.Grammar.from_ebnf(ebnf)
            assert xt._is_grammar_accept_string(g, s, require_termination=full) == expected


def test_bitmask_helpers_as_xgrammar():
    from xgrammar import testing as theirs

    rng = random.Random(5)
    for vocab_size in (1, 2):
        # (xgrammar's helper lists ids past vocab_size here: [1] for vocab_size 1 and
        # the word 1; so these are checked against the bits themselves)
        for word in (1, 5, -3, 0, -1):
            bitmask = torch.tensor([[word]], dtype=torch.int32)
            expected = [t for t in range(vocab_size) if not word >> t & 1]
            assert xt._get_masked_tokens_from_bitmask(bitmask, vocab_size) == expected
    for vocab_size in (3, 31, 32, 33, 100, 1000):
        words = (vocab_size + 31) // 32
        bitmask = torch.tensor([[rng.randrange(-(2**31), 2**31) for _ in range(words)] for _ in range(3)],
                               dtype=torch.int32)
        assert torch.equal(xt.bitmask_to_bool_mask(bitmask, vocab_size), theirs.bitmask_to_bool_mask(bitmask, vocab_size))
        assert torch.equal(xt.bitmask_to_bool_mask(bitmask), theirs.bitmask_to_bool_mask(bitmask))
        for row in range(3):
            assert xt._get_masked_tokens_from_bitmask(bitmask, vocab_size, row) == \
                theirs._get_masked_tokens_from_bitmask(bitmask, vocab_size, row)
        bool_mask = torch.rand(2, vocab_size, generator=torch.Generator().manual_seed(vocab_size)) < 0.5
        assert torch.equal(xt.bool_mask_to_bitmask(bool_mask), theirs.bool_mask_to_bitmask(bool_mask))
        single = torch.zeros(1, words, dtype=torch.int32)
        single[0, (vocab_size - 1) // 32] = 1 << ((vocab_size - 1) % 32) if (vocab_size - 1) % 32 != 31 else -(2**31)
        assert xt._is_single_token_bitmask(single, vocab_size) == theirs._is_single_token_bitmask(single, vocab_size)
        # (xgrammar also counts the bits past vocab_size in the last word; xg2's fills
        # leave those clear, so compare on such masks)
        clear = xt.bool_mask_to_bitmask(torch.nn.functional.pad(xt.bitmask_to_bool_mask(bitmask, vocab_size),
                                                                (0, words * 32 - vocab_size)))
        for row in range(3):
            assert xt._is_single_token_bitmask(clear, vocab_size, row) == \
                theirs._is_single_token_bitmask(clear, vocab_size, row)
        one = torch.zeros_like(clear)
        one[1] = clear[1] & (clear[1] & -clear[1])  # (a row's lowest set bit only)
        assert xt._is_single_token_bitmask(one, vocab_size, 1) == theirs._is_single_token_bitmask(one, vocab_size, 1)


def test_bitmask_helpers_reject_bad_input():
    with pytest.raises(xgr.InvalidArgumentError):
        xt.bitmask_to_bool_mask(torch.zeros(1, 2, dtype=torch.int64))
    with pytest.raises(xgr.InvalidArgumentError):
        xt.bitmask_to_bool_mask(torch.zeros(1, 2, dtype=torch.int32), 65)
    with pytest.raises(xgr.InvalidArgumentError):
        xt._get_masked_tokens_from_bitmask(torch.zeros(2, 2, dtype=torch.int32), 64, 2)


def test_masked_tokens_of_a_real_fill(deepseek):
    matcher = xgr.GrammarMatcher(deepseek.compile('root ::= "yes" | "no"'))
    bitmask = xgr.allocate_token_bitmask(1, deepseek.info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    rejected = set(xt._get_masked_tokens_from_bitmask(bitmask, deepseek.info.vocab_size))
    allowed = [t for t in range(deepseek.info.vocab_size) if t not in rejected]
    assert allowed and all(matcher.fork().accept_token(t) for t in allowed)
    sample = random.Random(1).sample(sorted(rejected), 300)
    assert not any(matcher.fork().accept_token(t) for t in sample)


# ---- Grammar.concat / union ----

PARTS = ['root ::= "a" [0-9]+', 'root ::= "-" | "+"', 'root ::= x x\nx ::= "b" | "cd"']
PROBES = ["a1", "a12-", "+", "bb", "a1+bcd", "a1-bb", "a1bcd", "-", "cdb", "a", ""]


@pytest.mark.parametrize("op", ["concat", "union"])
def test_concat_union_as_xgrammar(op):
    from xgrammar import testing as theirs

    for n in (1, 2, 3):
        ours = getattr(xgr.Grammar, op)(*[xgr.Grammar.from_ebnf(p) for p in PARTS[:n]])
        ref = getattr(xgrammar.Grammar, op)(*[xgrammar.Grammar.from_ebnf(p) for p in PARTS[:n]])
        for s in PROBES + ["".join(x) for x in (("a1", "+", "bb"), ("a9", "-", "cdcd"))]:
            assert xt._is_grammar_accept_string(ours, s) == theirs._is_grammar_accept_string(ref, s), (n, s)


def test_concat_keeps_macros_and_lookaheads():
    schema = xgr.Grammar.from_json_schema({"type": "object", "properties": {"k": {"type": "string"}}})
    regex = xgr.Grammar.from_regex(r"[a-z]{2}")
    lookahead = xgr.Grammar.from_ebnf('root ::= n ";"\nn ::= [0-9]+ (= ";")')
    both = xgr.Grammar.concat(regex, schema, lookahead)
    assert xt._is_grammar_accept_string(both, 'ab{"k": "v"}12;')
    assert not xt._is_grammar_accept_string(both, 'ab{"k": 1}12;')
    assert xt._is_grammar_accept_string(xgr.Grammar.union(regex, lookahead), "42;")


def test_concat_union_reject_bad_arguments():
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.Grammar.concat()
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.Grammar.union(xgr.Grammar.from_ebnf('root ::= "a"'), 'root ::= "b"')


# ---- serialization ----


def _mask_walk(compiled, vocab, text):
    """The masks along the tokens of ``text`` (and the final one)."""
    matcher = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(1, vocab.info.vocab_size)
    out = []
    for t in vocab.encode(text) + [None]:
        matcher.fill_next_token_bitmask(bitmask)
        out.append(bitmask.clone())
        if t is not None:
            assert matcher.accept_token(t)
    return torch.stack(out)


def test_round_trips_on_a_real_vocabulary(vocab):
    info = xgr.TokenizerInfo.deserialize_json(vocab.info.serialize_json())
    assert info.vocab_size == vocab.info.vocab_size and info.vocab_type == vocab.info.vocab_type
    assert info.decoded_vocab == vocab.info.decoded_vocab
    assert info.stop_token_ids == vocab.info.stop_token_ids
    assert info.special_token_ids == vocab.info.special_token_ids
    assert info.dump_metadata() == vocab.info.dump_metadata()
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
              "required": ["name", "n"]}
    compiled = vocab.compiler.compile_json_schema(schema)
    grammar = xgr.Grammar.deserialize_json(compiled.grammar.serialize_json())
    assert str(grammar) == str(compiled.grammar)
    again = xgr.CompiledGrammar.deserialize_json(compiled.serialize_json(), info)
    text = '{"name": "caf\u00e9 \u2603", "n": -12}'
    assert torch.equal(_mask_walk(again, vocab, text), _mask_walk(compiled, vocab, text))
    assert xgr.CompiledGrammar.deserialize_json(again.serialize_json(), vocab.info).serialize_json() == \
        compiled.serialize_json()


SMALL = xgr.TokenizerInfo(["a", "b", "ab", "</s>", "<0x41>"], xgr.VocabType.BYTE_FALLBACK,
                          vocab_size=40, special_token_ids=[1])


def _payloads():
    grammar = xgr.Grammar.from_ebnf('root ::= "a" b\nb ::= [0-9]+ | "x"')
    compiled = xgr.GrammarCompiler(SMALL).compile_grammar(grammar)
    return {
        "TokenizerInfo": (SMALL.serialize_json(), xgr.TokenizerInfo.deserialize_json),
        "Grammar": (grammar.serialize_json(), xgr.Grammar.deserialize_json),
        "CompiledGrammar": (compiled.serialize_json(), lambda s: xgr.CompiledGrammar.deserialize_json(s, SMALL)),
    }


@pytest.mark.parametrize("kind", ["TokenizerInfo", "Grammar", "CompiledGrammar"])
def test_every_truncation_and_byte_change_is_a_clean_error(kind):
    text, load = _payloads()[kind]
    assert load(text).serialize_json() == text
    for cut in range(len(text)):
        with pytest.raises((InvalidJSONError, DeserializeFormatError)):
            load(text[:cut])
    rng = random.Random(kind)
    for pos in rng.sample(range(len(text)), min(len(text), 150)):
        for ch in rng.sample(' 0"x{}[]:,-9e\\A', 3):
            changed = text[:pos] + ch + text[pos + 1:]
            if changed == text:
                continue
            with pytest.raises((InvalidJSONError, DeserializeFormatError)):
                load(changed)


def _redigest(payload: dict) -> str:
    """A payload altered and given a matching digest (what a careful tamperer makes)."""
    from xg2_plugin.serialization import _digest

    payload["sha256"] = _digest(payload["kind"], payload["body"])
    return json.dumps(payload)


@pytest.mark.parametrize("edit,error", [
    (lambda b: b.update(token_lengths=b["token_lengths"][:-1]), DeserializeFormatError),
    (lambda b: b.update(token_lengths=[-1] + b["token_lengths"][1:]), DeserializeFormatError),
    (lambda b: b.update(vocab_size=2**40), DeserializeFormatError),
    (lambda b: b.update(vocab_size=True), DeserializeFormatError),
    (lambda b: b.update(vocab_size=2), DeserializeFormatError),
    (lambda b: b.update(vocab_type=7), DeserializeFormatError),
    (lambda b: b.update(token_bytes="!!"), DeserializeFormatError),
    (lambda b: b.update(stop_token_ids=[10**6]), xgr.InvalidArgumentError),
    (lambda b: b.update(special_token_ids=["1"]), DeserializeFormatError),
    (lambda b: b.pop("stop_token_ids"), DeserializeFormatError),
    (lambda b: b.update(extra=1), DeserializeFormatError),
])
def test_tokenizer_payloads_with_valid_digests_are_still_checked(edit, error):
    payload = json.loads(SMALL.serialize_json())
    edit(payload["body"])
    with pytest.raises(error):
        xgr.TokenizerInfo.deserialize_json(_redigest(payload))


def test_grammar_payloads_with_valid_digests_are_parsed_again():
    payload = json.loads(xgr.Grammar.from_ebnf('root ::= "a"').serialize_json())
    payload["body"]["ebnf"] = "root ::= missing"
    with pytest.raises(xgr.GrammarError):
        xgr.Grammar.deserialize_json(_redigest(payload))
    payload["body"]["ebnf"] = 'root ::= "a"{99999999999}'
    with pytest.raises((xgr.GrammarError, xgr.LimitExceededError)):
        xgr.Grammar.deserialize_json(_redigest(payload))
    payload["body"]["ebnf"] = ['root ::= "a"']
    with pytest.raises(DeserializeFormatError):
        xgr.Grammar.deserialize_json(_redigest(payload))
    compiled = json.loads(xgr.GrammarCompiler(SMALL).compile_grammar('root ::= "a"').serialize_json())
    compiled["body"]["max_step_work"] = 0
    with pytest.raises(DeserializeFormatError):
        xgr.CompiledGrammar.deserialize_json(_redigest(compiled), SMALL)


def test_foreign_and_versioned_payloads():
    text = xgr.Grammar.from_ebnf('root ::= "a"').serialize_json()
    payload = json.loads(text)
    with pytest.raises(DeserializeFormatError, match="not a TokenizerInfo"):
        xgr.TokenizerInfo.deserialize_json(text)
    for version in (2, "1", None):
        with pytest.raises(DeserializeVersionError):
            xgr.Grammar.deserialize_json(json.dumps(dict(payload, version=version)))
    with pytest.raises(DeserializeVersionError, match="no version"):
        xgr.Grammar.deserialize_json(json.dumps({k: v for k, v in payload.items() if k != "version"}))
    theirs = xgrammar.Grammar.from_ebnf('root ::= "a"').serialize_json()
    with pytest.raises(DeserializeFormatError, match="XGrammar's format"):
        xgr.Grammar.deserialize_json(theirs)
    for bad in ("", "[" * 100_000 + "]" * 100_000, "\ud800", b"\xff", "nul\x00"):
        with pytest.raises((InvalidJSONError, DeserializeFormatError)):
            xgr.Grammar.deserialize_json(bad)
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.Grammar.deserialize_json(None)
    assert xgr.get_serialization_version() == "xg2-v1"


def test_compiled_grammar_needs_its_own_tokenizer():
    compiled = xgr.GrammarCompiler(SMALL).compile_grammar('root ::= "ab"')
    other = xgr.TokenizerInfo(["a", "b", "ab", "</s>", "<0x41>"], xgr.VocabType.BYTE_FALLBACK,
                              vocab_size=40, special_token_ids=[])
    with pytest.raises(DeserializeFormatError, match="another tokenizer"):
        xgr.CompiledGrammar.deserialize_json(compiled.serialize_json(), other)
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.CompiledGrammar.deserialize_json(compiled.serialize_json(), None)


# ---- traverse_draft_tree ----


def _random_tree(rng, n, tokens):
    parent = [-1] + [rng.randrange(i) for i in range(1, n)]
    first, sibling, last = [-1] * n, [-1] * n, {}
    for i in range(1, n):
        p = parent[i]
        if first[p] == -1:
            first[p] = i
        else:
            sibling[last[p]] = i
        last[p] = i
    return first, sibling, [rng.choice(tokens) for _ in range(n)]


def test_traverse_draft_tree_as_xgrammar(deepseek):
    """Random draft trees over tokens a JSON grammar allows and rejects: the masks,
    the verdict and the matcher's state afterwards equal xgrammar's."""
    ebnf = 'root ::= "{" ws ("\\"" [a-z]* "\\"" ws ":" ws [0-9]+ ws)? "}"\nws ::= [ ]*'
    theirs_info = xgrammar.TokenizerInfo.from_huggingface(deepseek.tok, vocab_size=deepseek.info.vocab_size)
    theirs = xgrammar.GrammarCompiler(theirs_info).compile_grammar(ebnf)
    ours = deepseek.compile(ebnf)
    pieces = ['{', '"', 'ab', '":', ' ', '1', '23', '}', 'x', '"a', ' "', '{"']
    tokens = sorted({t for p in pieces for t in deepseek.tok.encode(p, add_special_tokens=False)}) + [deepseek.stop_id]
    n_vocab = deepseek.info.vocab_size
    rng = random.Random(11)
    for trial in range(60):
        prefix = deepseek.encode(rng.choice(["", "{", '{"a', '{"ab": 1']))
        first, sibling, draft = _random_tree(rng, rng.randint(1, 12), tokens)
        results = []
        for lib, compiled in ((xgrammar, theirs), (xgr, ours)):
            matcher = lib.GrammarMatcher(compiled)
            for t in prefix:
                assert matcher.accept_token(t)
            bitmask = torch.full((len(first), (n_vocab + 31) // 32), 7, dtype=torch.int32)
            done = matcher.traverse_draft_tree(torch.tensor(first), torch.tensor(sibling), torch.tensor(draft), bitmask)
            bools = xt.bitmask_to_bool_mask(bitmask, n_vocab)
            results.append((done, bools, matcher.accept_string("}"), matcher.is_terminated()))
        assert results[0][0] == results[1][0]
        assert torch.equal(results[0][1], results[1][1]), trial
        assert results[0][2:] == results[1][2:]


def test_traverse_draft_tree_rejects_malformed_trees():
    compiled = xgr.GrammarCompiler(SMALL).compile_grammar('root ::= "a"*')
    matcher = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(3, SMALL.vocab_size)

    def run(first, sibling, draft, mask=bitmask, **kw):
        as_t = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
        return matcher.traverse_draft_tree(as_t(first), as_t(sibling), as_t(draft), mask, **kw)

    with pytest.raises(xgr.InvalidArgumentError, match="reached twice"):
        run([1, 2, 1], [-1, -1, -1], [0, 0, 0])  # a cycle 1 -> 2 -> 1
    with pytest.raises(xgr.InvalidArgumentError, match="reached twice"):
        run([1, -1, -1], [-1, 2, 1], [0, 0, 0])  # siblings in a ring
    with pytest.raises(xgr.InvalidArgumentError):
        run([3, -1, -1], [-1, -1, -1], [0, 0, 0])
    with pytest.raises(xgr.InvalidArgumentError, match="no sibling"):
        run([-1, -1, -1], [1, -1, -1], [0, 0, 0])
    with pytest.raises(xgr.InvalidArgumentError):
        run([1, -1], [-1, -1], [0, 0])  # 2 nodes, 3 rows
    with pytest.raises(xgr.InvalidArgumentError):
        matcher.traverse_draft_tree(torch.tensor([1.0, -1, -1]), torch.tensor([-1, -1, -1]),
                                    torch.tensor([0, 0, 0]), bitmask)
    assert matcher.num_accepted_steps == 0
    # a deep chain: no recursion limit, and the matcher ends as it began
    n = 5000
    chain = xgr.allocate_token_bitmask(n, SMALL.vocab_size)
    assert run(list(range(1, n)) + [-1], [-1] * n, [0] * n, mask=chain)
    assert bool(xt.bitmask_to_bool_mask(chain, SMALL.vocab_size)[:, 0].all())
    assert matcher.num_accepted_steps == 0
    # out of time after the root: False, and nothing left accepted
    assert not run([1, 2, -1], [-1, -1, -1], [0, 0, 0], time_threshold=1e-12)
    assert matcher.num_accepted_steps == 0
    temperatures = torch.zeros(3)
    assert run([1, -1, -1], [-1, 2, -1], [0, 0, 2], temperatures=temperatures)
    assert temperatures.tolist() == [-1.0, -1.0, -1.0]


# ---- kernels, contrib ----


@pytest.mark.parametrize("name", ["cpu", "torch_compile"])
def test_kernel_entry_points_as_xgrammar(name):
    import importlib

    ours = getattr(importlib.import_module(f"xg2_plugin.kernels.apply_token_bitmask_inplace_{name}"),
                   f"apply_token_bitmask_inplace_{name}")
    theirs = getattr(importlib.import_module(f"xgrammar.kernels.apply_token_bitmask_inplace_{name}"),
                     f"apply_token_bitmask_inplace_{name}")
    gen = torch.Generator().manual_seed(3)
    for vocab_size, indices in ((100, None), (70, [2, 0]), (None, None)):
        logits = torch.randn(3, 100, generator=gen)
        bitmask = torch.randint(-(2**31), 2**31, (3, 4), generator=gen, dtype=torch.int64).to(torch.int32)
        a, b = logits.clone(), logits.clone()
        ours(a, bitmask, vocab_size, indices)
        theirs(b, bitmask, vocab_size, indices)
        assert torch.equal(a, b)
    with pytest.raises(xgr.InvalidArgumentError):
        ours(torch.zeros(2, 10), torch.zeros(2, 1, dtype=torch.int64))


TRITON_CHECK = """
import torch
from xg2_plugin.kernels.apply_token_bitmask_inplace_cpu import apply_token_bitmask_inplace_cpu
from xg2_plugin.kernels.apply_token_bitmask_inplace_triton import apply_token_bitmask_inplace_triton
gen = torch.Generator().manual_seed(4)
for vocab_size, indices in ((100, None), (70, [2, 0])):
    logits = torch.randn(3, 100, generator=gen)
    bitmask = torch.randint(-(2**31), 2**31, (3, 4), generator=gen, dtype=torch.int64).to(torch.int32)
    a, b = logits.clone(), logits.clone()
    apply_token_bitmask_inplace_cpu(a, bitmask, vocab_size, indices)
    apply_token_bitmask_inplace_triton(b, bitmask, vocab_size, indices)
    assert torch.equal(a, b) and bool(torch.isinf(a).any())
print("same")
"""


def test_triton_entry_point_under_the_interpreter():
    """(TRITON_INTERPRET must be set before triton is imported: a subprocess.)"""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
    proc = subprocess.run([sys.executable, "-c", TRITON_CHECK], capture_output=True, text=True, env=env,
                          timeout=600, cwd=root)
    assert proc.returncode == 0 and proc.stdout.strip() == "same", proc.stderr[-3000:]


def test_hf_is_reachable_without_its_own_import():
    from transformers import LogitsProcessor

    assert issubclass(xgr.contrib.hf.LogitsProcessor, LogitsProcessor)
    assert xgr.hf is xgr.contrib.hf


# ---- Lark named grammars ----

ARGS_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
               "additionalProperties": False}
TOOL_CALL = 'start: "<tool_call>" @arguments "</tool_call>" ":" @status'


def _named(lib):
    return {"arguments": lib.Grammar.from_json_schema(ARGS_SCHEMA), "status": 'start: "ok" | "cancelled"'}


def test_named_grammars_as_xgrammar():
    from xgrammar import testing as theirs

    ours = xgr.Grammar.from_lark(TOOL_CALL, named_grammars=_named(xgr))
    ref = xgrammar.Grammar.from_lark(TOOL_CALL, named_grammars=_named(xgrammar))
    nested = {"a": 'start: "x" @b+', "b": 'start: B\nB: /[0-9]/', "c": xgr.Grammar.from_regex("z+")}
    nested_ref = dict(nested, c=xgrammar.Grammar.from_regex("z+"))
    cases = [
        (ours, ref, ['<tool_call>{"city": "Paris"}</tool_call>:ok', '<tool_call>{"city":"x"}</tool_call>:cancelled',
                     '<tool_call>{"city": 1}</tool_call>:ok', '<tool_call>{}</tool_call>:ok',
                     '<tool_call>{"city": "x"}</tool_call>:maybe']),
        (xgr.Grammar.from_lark('start: @a ("," @a)* @c?', named_grammars=nested),
         xgrammar.Grammar.from_lark('start: @a ("," @a)* @c?', named_grammars=nested_ref),
         ["x1", "x12,x3", "x1zz", "x", "x1,", "zz", "x1,x2z"]),
    ]
    for g, r, strings in cases:
        for s in strings:
            assert xt._is_grammar_accept_string(g, s) == theirs._is_grammar_accept_string(r, s), s


@pytest.mark.parametrize("source,named,match", [
    ("start: @a", {"a": 'start: "x" @b', "b": 'start: "y" @a'}, "cycle: @a -> @b -> @a"),
    ("start: @a", {"a": 'start: "x" @a'}, "cycle: @a -> @a"),
    ("start: @zz", {"a": 'start: "q"'}, "@zz is not a named grammar"),
    ('start: A\nA: @a', {"a": 'start: "q"'}, "may only be used in rules"),
    ('start: "a"\n%ignore @a', {"a": 'start: "q"'}, "%ignore takes terminals"),
    ("start: @a", {"a": "start: ("}, "in named grammar @a"),
])
def test_named_grammar_errors(source, named, match):
    with pytest.raises(xgr.GrammarError, match=match):
        xgr.Grammar.from_lark(source, named_grammars=named)
    with pytest.raises(RuntimeError):  # (xgrammar refuses each too)
        xgrammar.Grammar.from_lark(source, named_grammars=named)


def test_named_grammar_arguments_and_cache():
    for bad in ([("a", "start: \"q\"")], {"a b": 'start: "q"'}, {"@a": 'start: "q"'}, {"a": 3}):
        with pytest.raises(xgr.InvalidArgumentError):
            xgr.Grammar.from_lark("start: @a", named_grammars=bad)
    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo(["x", "y", "q"]))
    first = compiler.compile_lark("start: @a", named_grammars={"a": 'start: "x"'})
    second = compiler.compile_lark("start: @a", named_grammars={"a": 'start: "y"'})
    assert first is not second  # (the named grammars are part of the cache key)
    assert compiler.compile_lark("start: @a", named_grammars={"a": 'start: "x"'}) is first
    matcher = xgr.GrammarMatcher(second, terminate_without_stop_token=True)
    assert not matcher.fork().accept_string("x") and matcher.accept_string("y") and matcher.is_terminated()


def test_batch_calls_with_xgrammar_defaults():
    compiled = xgr.GrammarCompiler(SMALL).compile_grammar('root ::= "a"*')
    matchers = [xgr.GrammarMatcher(compiled) for _ in range(3)]
    assert xgr.BatchGrammarMatcher.batch_accept_token(matchers, [0, 0, 0], debug_print=False) == [True] * 3
    assert xgr.BatchGrammarMatcher.batch_accept_string(matchers, ["aa", "a", "b"], debug_print=False) == \
        [True, True, False]
    xgr.BatchGrammarMatcher.batch_rollback(matchers)  # (one step each, XGrammar's default)
    assert [m.num_accepted_steps for m in matchers] == [1, 1, 0]
    xgr.BatchGrammarMatcher.batch_rollback(matchers[:2], 1)
    assert [m.num_accepted_steps for m in matchers] == [0, 0, 0]
    with pytest.raises(xgr.InvalidArgumentError):
        xgr.BatchGrammarMatcher.batch_rollback(matchers, True)
