"""The bitmask apply on a real GPU: the Triton kernel and the torch path on CUDA tensors,
the way vLLM and SGLang call it (bitmask filled on the host, moved to the device, applied
to the logits there).

The oracle is the bit definition on the host (token t of row r is allowed iff bit t % 32
of word t // 32 is set), computed with numpy from the same bitmask; a run on CUDA must
give exactly the logits the oracle gives.  Without a CUDA device these tests are skipped
(CI has none); they were run on an H100 (see CHANGELOG).
"""

import numpy as np
import pytest
import torch

import xg2_plugin as xgr
from xg2_plugin.bitmask import apply_token_bitmask_inplace

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
VOCABS = [1, 31, 32, 33, 1000, 128256, 151936]


def _random_bitmask(rows: int, vocab: int, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    words = rng.integers(-(2**31), 2**31, size=(rows, (vocab + 31) // 32), dtype=np.int64).astype(np.int32)
    return torch.from_numpy(words)


def _allowed(bitmask: torch.Tensor, vocab: int) -> np.ndarray:
    """bool (rows, vocab): the oracle, from the raw little-endian words."""
    raw = bitmask.cpu().numpy().astype("<i4").view(np.uint8)
    bits = np.unpackbits(raw, axis=1, bitorder="little")[:, :vocab]
    return bits.astype(bool)


def _expected(logits: torch.Tensor, bitmask: torch.Tensor, vocab: int, rows=None) -> torch.Tensor:
    out = logits.detach().cpu().float().clone()
    allowed = torch.from_numpy(_allowed(bitmask, vocab))
    for r in range(out.shape[0]) if rows is None else rows:
        out[r, :vocab][~allowed[r]] = float("-inf")
    return out


@pytest.mark.parametrize("backend", ["triton", "torch_native", "auto"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("vocab", VOCABS)
def test_apply_on_cuda_equals_the_bit_oracle(backend, dtype, vocab):
    rows = 4
    bitmask = _random_bitmask(rows, vocab, seed=vocab)
    logits = torch.randn(rows, vocab, dtype=dtype, device="cuda")
    want = _expected(logits, bitmask, vocab)
    apply_token_bitmask_inplace(logits, bitmask.cuda(), backend=backend)
    torch.cuda.synchronize()
    assert torch.equal(logits.cpu().float(), want)


@pytest.mark.parametrize("backend", ["triton", "torch_native"])
def test_indices_padding_and_strided_rows_on_cuda(backend):
    # a model vocabulary wider than the tokenizer's (padded lm_head): logits past vocab_size
    # are left alone; only the listed rows are masked; rows of a wider buffer (strided)
    vocab, width, rows = 1000, 1064, 6
    bitmask = _random_bitmask(rows, vocab, seed=7)
    base = torch.randn(rows, width + 40, device="cuda")
    logits = base[:, :width]
    before = logits.detach().cpu().clone()
    idx = [0, 3, 5]
    want = _expected(logits, bitmask, vocab, rows=idx)
    apply_token_bitmask_inplace(logits, bitmask.cuda(), vocab_size=vocab, indices=idx, backend=backend)
    torch.cuda.synchronize()
    got = logits.cpu()
    assert torch.equal(got, want)
    assert torch.equal(got[:, vocab:], before[:, vocab:])
    assert torch.equal(got[[1, 2, 4]], before[[1, 2, 4]])


def test_triton_and_torch_agree_on_a_large_batch():
    vocab, rows = 128256, 256
    bitmask = _random_bitmask(rows, vocab, seed=11).cuda()
    a = torch.randn(rows, vocab, dtype=torch.bfloat16, device="cuda")
    b = a.clone()
    apply_token_bitmask_inplace(a, bitmask, backend="triton")
    apply_token_bitmask_inplace(b, bitmask, backend="torch_native")
    torch.cuda.synchronize()
    assert torch.equal(a, b)
    assert torch.equal(torch.isneginf(a).cpu(), ~torch.from_numpy(_allowed(bitmask, vocab)))


def test_a_matcher_mask_applied_on_cuda_keeps_exactly_the_grammar_tokens(deepseek):
    # the serving path: fill on the host, move the mask, apply on the device, then every
    # token still finite is one the matcher accepts (checked on a forked matcher) and
    # every token the matcher accepts is still finite
    compiled = deepseek.compile('root ::= "{\\"a\\": " [0-9]+ "}"')
    matcher = xgr.GrammarMatcher(compiled)
    assert matcher.accept_string('{"a": 1')
    bitmask = xgr.allocate_token_bitmask(1, deepseek.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    logits = torch.zeros(1, deepseek.vocab_size, device="cuda")
    apply_token_bitmask_inplace(logits, bitmask.to("cuda"))
    finite = torch.isfinite(logits[0]).cpu().numpy()
    rng = np.random.default_rng(0)
    sample = np.concatenate([np.flatnonzero(finite), rng.integers(0, deepseek.vocab_size, 2000)])
    for t in np.unique(sample):
        fork = matcher.fork()
        assert bool(finite[t]) == fork.accept_token(int(t)), int(t)
    assert finite.sum() > 10  # digits and '}' tokens: a mask that blocked all would pass nothing
