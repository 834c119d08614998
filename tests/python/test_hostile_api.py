"""Issue 23, the Python API under hostile input: arguments are checked, never coerced
(``int(1.5)`` once addressed half a bitmask row past the checked range); every bad
argument ends in one of the library's exceptions; a matcher misused by two threads
never returns another call's answer; ``cache_limit_bytes`` bounds all caches together.
"""

import gc
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch

import xg2_plugin as xgr
from xg2_plugin._errors import XG2Error

VOCAB = ["a", "b", "c", "1", "2", "</s>", "ab"]
STOP = 5
V = 40  # padded: ids 7..39 are no token
WORDS = (V + 31) // 32


@pytest.fixture(scope="module")
def env():
    info = xgr.TokenizerInfo(VOCAB, xgr.VocabType.RAW, vocab_size=V, stop_token_ids=[STOP])
    compiler = xgr.GrammarCompiler(info)
    compiled = compiler.compile_regex("[abc]*")
    return info, compiler, compiled


# ---- the float index: a heap overflow on the old head (run in a child process) -------------


def test_float_bitmask_index_is_refused_not_a_heap_write():
    code = textwrap.dedent(
        f"""
        import numpy as np, torch, xg2_plugin as xgr
        info = xgr.TokenizerInfo({VOCAB!r}, xgr.VocabType.RAW, vocab_size=128000, stop_token_ids=[{STOP}])
        m = xgr.GrammarMatcher(xgr.GrammarCompiler(info).compile_regex("[abc]*"))
        bitmask = xgr.allocate_token_bitmask(4, 128000)
        for index in (1.5, np.float64(1.0), np.float32(3.9), 1.999, True):
            before = bitmask.clone()
            try:
                m.fill_next_token_bitmask(bitmask[0:2], index)
            except xgr.InvalidArgumentError as e:
                assert "index" in str(e), e
            else:
                raise SystemExit(f"index {{index!r}} was accepted")
            assert torch.equal(bitmask, before), index
        print("OK")
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "OK", (run.returncode, run.stdout, run.stderr[-2000:])


# ---- every bad argument: the library's exception, naming the argument ----------------------

IAE, LIM = xgr.InvalidArgumentError, xgr.LimitExceededError


def _bitmask():
    return xgr.allocate_token_bitmask(2, V)


def _cases():
    """(id, callable of (info, compiler, compiled), expected exception, text the message names)."""
    M = xgr.GrammarMatcher
    TI = xgr.TokenizerInfo
    GC = xgr.GrammarCompiler
    B = xgr.BatchGrammarMatcher
    logits = lambda *shape: torch.zeros(*shape)  # noqa: E731
    c = [
        # token ids, counts, strings of a matcher: no coercion
        ("accept_token float", lambda i, k, g: M(g).accept_token(1.5), IAE, "token_id"),
        ("accept_token np.float64", lambda i, k, g: M(g).accept_token(np.float64(0)), IAE, "token_id"),
        ("accept_token str", lambda i, k, g: M(g).accept_token("5"), IAE, "token_id"),
        ("accept_token bool", lambda i, k, g: M(g).accept_token(True), IAE, "token_id"),
        ("accept_token bool tensor", lambda i, k, g: M(g).accept_token(torch.tensor(True)), IAE, "token_id"),
        ("accept_token None", lambda i, k, g: M(g).accept_token(None), IAE, "token_id"),
        ("accept_token 2**40", lambda i, k, g: M(g).accept_token(2**40), IAE, "out of range"),
        ("accept_token V", lambda i, k, g: M(g).accept_token(V), IAE, ""),
        ("rollback float", lambda i, k, g: M(g).rollback(1.7), IAE, "num_tokens"),
        ("rollback bool", lambda i, k, g: M(g).rollback(True), IAE, "num_tokens"),
        ("rollback str", lambda i, k, g: M(g).rollback("1"), IAE, "num_tokens"),
        ("rollback negative", lambda i, k, g: M(g).rollback(-1), IAE, ""),
        ("accept_string int", lambda i, k, g: M(g).accept_string(10**9), IAE, "input_str"),
        ("accept_string None", lambda i, k, g: M(g).accept_string(None), IAE, "input_str"),
        ("accept_string list", lambda i, k, g: M(g).accept_string(["a"]), IAE, "input_str"),
        ("accept_string surrogate", lambda i, k, g: M(g).accept_string("a\ud800"), IAE, "surrogate"),
        ("fill index str", lambda i, k, g: M(g).fill_next_token_bitmask(_bitmask(), "0"), IAE, "index"),
        ("fill index None", lambda i, k, g: M(g).fill_next_token_bitmask(_bitmask(), None), IAE, "index"),
        ("fill index past", lambda i, k, g: M(g).fill_next_token_bitmask(_bitmask(), 2), IAE, "index"),
        ("fill index negative", lambda i, k, g: M(g).fill_next_token_bitmask(_bitmask(), -1), IAE, "index"),
        ("fill int64 bitmask", lambda i, k, g: M(g).fill_next_token_bitmask(torch.zeros(1, WORDS, dtype=torch.int64)),
         IAE, "int32"),
        ("fill list bitmask", lambda i, k, g: M(g).fill_next_token_bitmask([[0, 0]]), IAE, "bitmask"),
        ("stop tokens float", lambda i, k, g: M(g, override_stop_tokens=1.5), IAE, "override_stop_tokens"),
        ("stop tokens [float]", lambda i, k, g: M(g, override_stop_tokens=[5, 1.5]), IAE, "override_stop_tokens[1]"),
        ("stop tokens [str]", lambda i, k, g: M(g, override_stop_tokens=["5"]), IAE, "override_stop_tokens[0]"),
        ("stop tokens bool", lambda i, k, g: M(g, override_stop_tokens=True), IAE, "override_stop_tokens"),
        ("stop tokens out of range", lambda i, k, g: M(g, override_stop_tokens=[V]), IAE, "out of range"),
        ("stop tokens not a list", lambda i, k, g: M(g, override_stop_tokens=object()), IAE, "override_stop_tokens"),
        # batch matcher
        ("batch threads str", lambda i, k, g: B(max_threads="x"), IAE, "max_threads"),
        ("batch threads float", lambda i, k, g: B(max_threads=2.0), IAE, "max_threads"),
        ("batch threads bool", lambda i, k, g: B(max_threads=True), IAE, "max_threads"),
        ("batch indices float", lambda i, k, g: B(1).batch_fill_next_token_bitmask([M(g)], _bitmask(), [0.5]),
         IAE, "indices[0]"),
        ("batch indices bool", lambda i, k, g: B(1).batch_fill_next_token_bitmask([M(g)], _bitmask(), [True]),
         IAE, "indices[0]"),
        ("batch indices past", lambda i, k, g: B(1).batch_fill_next_token_bitmask([M(g)], _bitmask(), [2]),
         IAE, "out of range"),
        ("batch indices str", lambda i, k, g: B(1).batch_fill_next_token_bitmask([M(g)], _bitmask(), "0"),
         IAE, "indices"),
        ("batch tokens float", lambda i, k, g: B.batch_accept_token([M(g)], [0.0]), IAE, "tokens[0]"),
        ("batch tokens str", lambda i, k, g: B.batch_accept_token([M(g), M(g)], [0, "1"]), IAE, "tokens[1]"),
        ("batch rollback float", lambda i, k, g: B.batch_rollback([M(g)], [0.5]), IAE, "num_tokens"),
        ("batch string int", lambda i, k, g: B.batch_accept_string([M(g)], [10**6]), IAE, "input_str"),
        # TokenizerInfo
        ("vocab None", lambda i, k, g: TI(None), IAE, "encoded_vocab"),
        ("vocab one string", lambda i, k, g: TI("abc"), IAE, "encoded_vocab"),
        ("vocab of ints", lambda i, k, g: TI([1, 2]), IAE, "encoded_vocab[0]"),
        ("vocab_size negative", lambda i, k, g: TI(VOCAB, vocab_size=-1), IAE, "vocab_size"),
        ("vocab_size zero", lambda i, k, g: TI(VOCAB, vocab_size=0), IAE, "vocab_size"),
        ("vocab_size bool", lambda i, k, g: TI(VOCAB, vocab_size=True), IAE, "vocab_size"),
        ("vocab_size float", lambda i, k, g: TI(VOCAB, vocab_size=8.0), IAE, "vocab_size"),
        ("vocab_size str", lambda i, k, g: TI(VOCAB, vocab_size="8"), IAE, "vocab_size"),
        ("vocab_size absurd", lambda i, k, g: TI(VOCAB, vocab_size=10**12), IAE, "vocab_size"),
        ("vocab_size 2**31", lambda i, k, g: TI(VOCAB, vocab_size=2**31 - 1), IAE, "vocab_size"),
        ("vocab_type str", lambda i, k, g: TI(VOCAB, "RAW"), IAE, "vocab_type"),
        ("stop ids out of range", lambda i, k, g: TI(VOCAB, vocab_size=8, stop_token_ids=[8]), IAE, "stop_token_ids"),
        ("stop ids negative", lambda i, k, g: TI(VOCAB, stop_token_ids=[-1]), IAE, "stop_token_ids"),
        ("stop ids float", lambda i, k, g: TI(VOCAB, stop_token_ids=5.0), IAE, "stop_token_ids"),
        ("stop ids [str]", lambda i, k, g: TI(VOCAB, stop_token_ids=["5"]), IAE, "stop_token_ids[0]"),
        ("special ids negative", lambda i, k, g: TI(VOCAB, special_token_ids=[-3]), IAE, "special_token_ids"),
        ("special ids float", lambda i, k, g: TI(VOCAB, special_token_ids=[1.5]), IAE, "special_token_ids[0]"),
        ("token_flags float", lambda i, k, g: i.token_flags(1.5), IAE, "token_id"),
        ("token_flags huge", lambda i, k, g: i.token_flags(2**40), IAE, "token"),
        ("token_flags past", lambda i, k, g: i.token_flags(V), IAE, ""),
        # bitmask helpers
        ("allocate negative", lambda i, k, g: xgr.allocate_token_bitmask(-1, 10), IAE, "batch_size"),
        ("allocate absurd", lambda i, k, g: xgr.allocate_token_bitmask(10**12, 100), LIM, "MAX_BITMASK_BYTES"),
        ("allocate absurd vocab", lambda i, k, g: xgr.allocate_token_bitmask(1, 10**12), LIM, "MAX_BITMASK_BYTES"),
        ("allocate float", lambda i, k, g: xgr.allocate_token_bitmask(1.5, 10), IAE, "batch_size"),
        ("allocate bool", lambda i, k, g: xgr.allocate_token_bitmask(2, True), IAE, "vocab_size"),
        ("allocate str", lambda i, k, g: xgr.allocate_token_bitmask("2", 10), IAE, "batch_size"),
        ("reset numpy", lambda i, k, g: xgr.reset_token_bitmask(np.zeros((1, 2), np.int32)), IAE, "bitmask"),
        ("apply logits list", lambda i, k, g: xgr.apply_token_bitmask_inplace([0.0], _bitmask()), IAE, "logits"),
        ("apply 3-D logits", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(1, 2, V), _bitmask()), IAE, "3-D"),
        ("apply int logits", lambda i, k, g: xgr.apply_token_bitmask_inplace(torch.zeros(2, V, dtype=torch.int64),
                                                                             _bitmask()), IAE, "logits"),
        ("apply float bitmask", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(2, V), torch.zeros(2, WORDS)),
         IAE, "bitmask"),
        ("apply batch mismatch", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(3, V), _bitmask()), IAE, "batch"),
        ("apply index past", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(2, V), _bitmask(), indices=[2]),
         IAE, "indices"),
        ("apply index float", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(2, V), _bitmask(), indices=[0.5]),
         IAE, "indices[0]"),
        ("apply index huge", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(2, V), _bitmask(),
                                                                            indices=[2**70]), IAE, "indices"),
        ("apply index float tensor", lambda i, k, g: xgr.apply_token_bitmask_inplace(
            logits(2, V), _bitmask(), indices=torch.tensor([0.0])), IAE, "indices"),
        ("apply index str", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(2, V), _bitmask(), indices="0"),
         IAE, "indices"),
        ("apply vocab absurd", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(2, V), _bitmask(),
                                                                              vocab_size=10**12), IAE, "vocab_size"),
        ("apply vocab negative", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(2, V), _bitmask(),
                                                                                vocab_size=-1), IAE, "vocab_size"),
        ("apply vocab float", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(2, V), _bitmask(),
                                                                             vocab_size=3.0), IAE, "vocab_size"),
        ("apply backend", lambda i, k, g: xgr.apply_token_bitmask_inplace(logits(2, V), _bitmask(), backend="gpu"),
         IAE, "backend"),
        # compiler
        ("compiler info", lambda i, k, g: GC("info"), IAE, "tokenizer_info"),
        ("compiler threads str", lambda i, k, g: GC(i, max_threads="x"), IAE, "max_threads"),
        ("compiler threads float", lambda i, k, g: GC(i, max_threads=1.5), IAE, "max_threads"),
        ("compiler threads zero", lambda i, k, g: GC(i, max_threads=0), IAE, "max_threads"),
        ("compiler cache str", lambda i, k, g: GC(i, cache_limit_bytes="1"), IAE, "cache_limit_bytes"),
        ("compiler cache float", lambda i, k, g: GC(i, cache_limit_bytes=1e6), IAE, "cache_limit_bytes"),
        ("compiler cache -2", lambda i, k, g: GC(i, cache_limit_bytes=-2), IAE, "cache_limit_bytes"),
        ("compiler cache 2**64", lambda i, k, g: GC(i, cache_limit_bytes=2**64), IAE, "cache_limit_bytes"),
        ("choices of ints", lambda i, k, g: k.compile_choices([1, 2]), IAE, "choices[0]"),
        ("choices one string", lambda i, k, g: k.compile_choices("ab"), IAE, "choices"),
        ("choices None", lambda i, k, g: k.compile_choices(None), IAE, "choices"),
        ("choices empty", lambda i, k, g: k.compile_choices([]), IAE, "choices"),
        ("regex None", lambda i, k, g: k.compile_regex(None), IAE, "regex"),
        ("regex bytes", lambda i, k, g: k.compile_regex(b"a"), IAE, "regex"),
        ("regex list", lambda i, k, g: k.compile_regex(["a"]), IAE, "regex"),
        ("grammar bytes", lambda i, k, g: k.compile_grammar(b'root ::= "a"'), IAE, "grammar"),
        ("grammar None", lambda i, k, g: k.compile_grammar(None), IAE, "grammar"),
        ("grammar surrogate", lambda i, k, g: k.compile_grammar('root ::= "\ud800"'), IAE, "surrogate"),
        ("grammar root None", lambda i, k, g: k.compile_grammar('root ::= "a"', root_rule_name=None),
         IAE, "root_rule_name"),
        ("grammar root list", lambda i, k, g: k.compile_grammar('root ::= "a"', root_rule_name=["root"]),
         IAE, ""),
        ("lark None", lambda i, k, g: k.compile_lark(None), IAE, "lark"),
        ("lark list", lambda i, k, g: k.compile_lark(["start: x"]), IAE, "lark"),
        ("schema separators int", lambda i, k, g: k.compile_json_schema({"type": "integer"}, separators=5),
         IAE, "separators"),
        ("schema indent list", lambda i, k, g: k.compile_json_schema({"type": "integer"}, indent=[2]), IAE, ""),
        ("precompute float", lambda i, k, g: g.precompute(max_states=1.5), IAE, "max_states"),
        # flags are bools, not truthy values ("false" would have been True, and after a compile with
        # the default a hit on it); counts are integers (mypyc's bare TypeError before)
        ("schema strict str", lambda i, k, g: k.compile_json_schema({"type": "integer"}, strict_mode="false"),
         IAE, "strict_mode must be a bool, got str 'false'"),
        ("schema whitespace int", lambda i, k, g: k.compile_json_schema({"type": "integer"}, any_whitespace=0),
         IAE, "any_whitespace must be a bool"),
        ("schema any_order None", lambda i, k, g: k.compile_json_schema({"type": "integer"}, any_order=None),
         IAE, "any_order must be a bool"),
        ("schema lenient str", lambda i, k, g: xgr.Grammar.from_json_schema({"type": "integer"}, lenient="no"),
         IAE, "lenient must be a bool"),
        ("schema indent float", lambda i, k, g: k.compile_json_schema({"type": "integer"}, indent=2.5),
         IAE, "indent must be an integer, got float"),
        ("schema indent bool", lambda i, k, g: k.compile_json_schema({"type": "integer"}, indent=True),
         IAE, "indent must be an integer, got the bool"),
        ("schema max_ws float", lambda i, k, g: k.compile_json_schema({"type": "integer"}, max_whitespace_cnt=1.5),
         IAE, "max_whitespace_cnt must be an integer, got float"),
        ("schema max_ws negative", lambda i, k, g: xgr.Grammar.from_json_schema({"type": "integer"},
                                                                               max_whitespace_cnt=-1),
         IAE, "max_whitespace_cnt must be a non-negative"),
        ("schema separators ints", lambda i, k, g: k.compile_json_schema({"type": "integer"}, separators=(1, 2)),
         IAE, "separators must be a pair of strings"),
        ("compiler cache_enabled str", lambda i, k, g: GC(i, cache_enabled="no"), IAE, "cache_enabled must be a bool"),
        ("info prefix str", lambda i, k, g: xgr.TokenizerInfo(VOCAB, add_prefix_space="no"), IAE,
         "add_prefix_space must be a bool"),
        ("matcher terminate str", lambda i, k, g: xgr.GrammarMatcher(g, terminate_without_stop_token="no"), IAE,
         "terminate_without_stop_token must be a bool"),
    ]
    return c


CASES = _cases()


@pytest.mark.parametrize("call,expected,names", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_argument_is_a_library_error(env, call, expected, names):
    info, compiler, compiled = env
    with pytest.raises(XG2Error) as caught:
        call(info, compiler, compiled)
    assert isinstance(caught.value, expected), repr(caught.value)
    assert names in str(caught.value), str(caught.value)


def test_integer_like_arguments_still_work(env):
    """operator.index semantics: numpy integers and one-element integer tensors are ids."""
    info, compiler, compiled = env
    m = xgr.GrammarMatcher(compiled, override_stop_tokens=np.int64(STOP))
    assert m.stop_token_ids == [STOP]
    assert m.accept_token(np.int32(0)) and m.accept_token(torch.tensor(1)) and m.accept_token(np.array(2))
    m.rollback(np.int64(2))
    assert m.num_accepted_steps == 1
    assert m.accept_string(b"b") and m.accept_string(bytearray(b"c")) and m.accept_string(memoryview(b"a"))
    bitmask = xgr.allocate_token_bitmask(np.int64(3), V)
    m.fill_next_token_bitmask(bitmask, np.int16(2))
    assert bitmask[2, 0] & 0b111 == 0b111 and (bitmask[:2] == -1).all()
    xgr.BatchGrammarMatcher(np.int64(1)).batch_fill_next_token_bitmask([m], bitmask, [np.int64(1)])
    assert torch.equal(bitmask[1], bitmask[2])
    assert xgr.TokenizerInfo(VOCAB, vocab_size=np.int64(V), stop_token_ids=[np.int8(STOP)]).vocab_size == V
    assert xgr.BatchGrammarMatcher.batch_accept_token([m], np.array([0])) == [True]
    # numpy counts and bools are options
    schema = {"type": "array", "items": {"type": "integer"}}
    a = compiler.compile_json_schema(schema, indent=np.int64(2), strict_mode=np.bool_(False))
    b = compiler.compile_json_schema(schema, indent=2, strict_mode=False)
    assert str(a.grammar) == str(b.grammar)
    c = compiler.compile_json_schema(schema, indent=2, strict_mode=False, separators=iter([",", ": "]))
    assert str(c.grammar) == str(b.grammar)  # an iterable of separators, read once


def test_errors_are_also_type_errors_for_xgrammar_callers(env):
    """A wrong type is InvalidArgumentError, which is a TypeError as well as a ValueError."""
    with pytest.raises(TypeError):
        xgr.GrammarMatcher(env[2]).accept_token("5")
    with pytest.raises(ValueError):
        xgr.GrammarMatcher(env[2]).accept_token(1.5)


# ---- one matcher, two threads: every answer right or the library's error ------------------


def test_one_matcher_two_threads_never_answers_for_the_other(env):
    """Thread A accepts a valid token and rolls it back, thread B accepts a token the
    grammar never allows, on ONE matcher: the core refuses overlapping calls
    (MatcherStateError), but every call that returns must return its own answer
    (the old shared result cell gave each thread the other's)."""
    info, compiler, compiled = env
    m = xgr.GrammarMatcher(compiled)
    wrong, errors, refused = [], [], [0, 0]
    rounds = 200_000  # (~2 s; the old head answered wrongly ~10 times in as many)

    def valid():
        for _ in range(rounds):
            try:
                ok = m.accept_token(0)  # "a": valid in every state of [abc]*
            except xgr.MatcherStateError:
                refused[0] += 1
                continue
            if ok is not True:
                wrong.append(("valid", ok))
                continue
            while True:
                try:
                    m.rollback(1)
                    break
                except xgr.MatcherStateError:
                    refused[0] += 1
                except Exception as e:
                    errors.append(e)
                    return

    def invalid():
        for _ in range(rounds):
            try:
                ok = m.accept_token(3)  # "1": never valid
            except xgr.MatcherStateError:
                refused[1] += 1
                continue
            except Exception as e:
                errors.append(e)
                return
            if ok is not False:
                wrong.append(("invalid", ok))

    threads = [threading.Thread(target=valid), threading.Thread(target=invalid)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over often: the calls interleave
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[:3]
    assert not wrong, (len(wrong), wrong[:5], refused)
    assert m.num_accepted_steps == 0


def test_threads_filling_their_own_bitmasks_never_write_each_others(env):
    """The checked-bitmask cache and the batch's handle cache are per thread / atomic:
    each thread fills only its own bitmask, with its own matcher's mask."""
    info, compiler, compiled = env
    other = compiler.compile_regex("[12]*")
    batch = xgr.BatchGrammarMatcher(1)  # shared by both threads
    expected = {}
    for g in (compiled, other):
        bm = xgr.allocate_token_bitmask(1, V)
        xgr.GrammarMatcher(g).fill_next_token_bitmask(bm)
        expected[id(g)] = bm[0].clone()
    bad = []

    def work(g, rows, row):
        try:
            fill_many(g, rows, row)
        except Exception as e:  # (the old head's batch cache could pair one thread's batch
            bad.append(e)  # with the other's handles: a matcher used by two threads)

    def fill_many(g, rows, row):
        ms = [xgr.GrammarMatcher(g) for _ in range(2)]
        bitmask = torch.zeros(rows, WORDS, dtype=torch.int32)
        for k in range(2000):
            bitmask.zero_()
            if k % 2:
                ms[0].fill_next_token_bitmask(bitmask, row)
            else:
                batch.batch_fill_next_token_bitmask(ms, bitmask, [row, row - 1])
            if not torch.equal(bitmask[row], expected[id(g)]):
                bad.append((k, row))
            untouched = [r for r in range(rows) if r not in (row, row - 1)]
            if bitmask[untouched].any():
                bad.append((k, "wrote another row"))

    threads = [threading.Thread(target=work, args=(compiled, 3, 1)), threading.Thread(target=work, args=(other, 5, 3))]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not bad, bad[:5]


# ---- cache_limit_bytes is the total of every cache ------------------------------------------


def _schema(k):
    return {"type": "object", "properties": {f"k{k}": {"type": "integer", "minimum": k}, f"s{k % 7}": {"type": "string"}},
            "required": [f"k{k}"]}


def _own_copy(info):
    """A TokenizerInfo of the same tokens with its own mask cache (the session's stays as it is)."""
    return xgr.TokenizerInfo(info.decoded_vocab, xgr.VocabType.RAW, vocab_size=info.vocab_size,
                             stop_token_ids=info.stop_token_ids, special_token_ids=info.special_token_ids)


def _fill_a_few(compiled, info, steps):
    m = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    for text in steps:
        m.fill_next_token_bitmask(bitmask)
        if not m.accept_string(text):
            break


def test_cache_limit_is_the_total_of_all_caches(deepseek):
    """Distinct schemas compiled and used through one compiler: compiled grammars,
    token masks and rule automata together stay within cache_limit_bytes (the old
    head let each of the three grow to the limit)."""
    info = _own_copy(deepseek.info)
    limit = 4 << 20
    comp = xgr.GrammarCompiler(info, cache_limit_bytes=limit)
    peak = 0
    for k in range(400):
        compiled = comp.compile_json_schema(_schema(k))
        _fill_a_few(compiled, info, ['{"', f"k{k}", '":', str(k + 3)])
        size = comp.get_cache_size_bytes()
        assert size <= limit, (k, size, limit)
        peak = max(peak, size)
    stats = comp.get_mask_cache_stats()
    assert stats["evictions"] > 0 and comp._cache_entries() < 400, stats  # it did overflow
    assert peak > limit // 2
    limits = comp.get_cache_limits()
    assert sum(limits.values()) <= limit and all(v > 0 for v in limits.values())


def test_a_new_compiler_never_loosens_a_shared_limit(deepseek):
    """Constructing another (default) compiler on the same tokenizer leaves the first
    one's bound in force: the old head reset the shared mask cache's limit to the new
    compiler's, so the first compiler's caches grew past its limit."""
    info = _own_copy(deepseek.info)
    limit = 2 << 20
    first = xgr.GrammarCompiler(info, cache_limit_bytes=limit)
    second = xgr.GrammarCompiler(info)
    for k in range(150):
        compiled = first.compile_json_schema(_schema(1000 + k))
        _fill_a_few(compiled, info, ['{"', f"k{1000 + k}", '":', "-", str(k)])
        assert first.get_cache_size_bytes() <= limit, k
    mask_limit = first.get_cache_limits()["token_masks"]
    assert mask_limit == limit // 2
    assert second.get_cache_limits()["token_masks"] == mask_limit  # the pool is shared
    # Once the tight compiler is gone the others' bound applies again.
    del first, compiled
    gc.collect()
    assert second.get_cache_limits()["token_masks"] > mask_limit


def test_compiler_refuses_a_deep_schema_dict_before_keying_its_cache(env):
    # the cache key is the schema's canonical JSON, and json.dumps recurses along the
    # nesting: the depth check runs first (a bare RecursionError before)
    info = env[0]
    schema = {"type": "integer"}
    for _ in range(10_000):
        schema = {"type": "array", "items": schema}
    with pytest.raises(xgr.GrammarError, match="nests deeper than 128 levels"):
        xgr.GrammarCompiler(info).compile_json_schema(schema)
