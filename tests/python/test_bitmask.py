"""Tests for xg2_plugin.bitmask and the Triton apply kernel.

The expected results come from an independent oracle: ``numpy.unpackbits`` on the raw
little-endian bytes of each bitmask row (token t is bit t of that bit stream), which is
itself cross-checked against the literal formula ``(word[t // 32] >> (t % 32)) & 1``.

Triton tests run in a subprocess with ``TRITON_INTERPRET=1`` (it must be set before triton
is imported), executing this same file with ``--triton-worker``.
"""

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

if __name__ == "__main__" and "--force-fallback" in sys.argv:
    # Simulate a package whose __init__ cannot be imported (e.g. C extension not built).
    sys.modules["xg2_plugin"] = None


def _load_bitmask_module():
    """Import xg2_plugin.bitmask; if the package itself cannot be imported (its __init__
    may need the compiled C extension), load bitmask.py by path under a private alias
    package whose __path__ is xg2_plugin/, so its lazy ``.kernels`` import still works."""
    try:
        return importlib.import_module("xg2_plugin.bitmask")
    except Exception:
        pass
    alias = "_xg2_bitmask_under_test"
    pkg_dir = REPO_ROOT / "xg2_plugin"
    pkg = types.ModuleType(alias)
    pkg.__path__ = [str(pkg_dir)]
    sys.modules[alias] = pkg
    spec = importlib.util.spec_from_file_location(alias + ".bitmask", pkg_dir / "bitmask.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


bm = _load_bitmask_module()
apply_token_bitmask_inplace = bm.apply_token_bitmask_inplace

HAS_TRITON = importlib.util.find_spec("triton") is not None
NEG_INF = float("-inf")
DTYPES = ["float32", "float16", "bfloat16"]
VOCAB_SIZES = [1, 31, 32, 33, 1000, 128257]


# --------------------------------------------------------------------------------------
# Oracle
# --------------------------------------------------------------------------------------


def ref_disallowed(words: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Bool (vocab_size,) tensor, True where the token's bit is 0, for one bitmask row."""
    raw = np.ascontiguousarray(words.cpu().numpy().astype("<i4"))  # little-endian words
    bits = np.unpackbits(raw.view(np.uint8), bitorder="little")
    return torch.from_numpy(bits[:vocab_size] == 0)


def ref_apply_(logits, bitmask, vocab_size=None, indices=None):
    """Reference apply, in place, one row at a time."""
    l2 = logits.unsqueeze(0) if logits.dim() == 1 else logits
    b2 = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if vocab_size is None:
        vocab_size = min(l2.shape[-1], b2.shape[-1] * 32)
    rows = range(l2.shape[0]) if indices is None else [int(i) for i in indices]
    for r in rows:
        row = l2[r, :vocab_size]  # a view, so the assignment writes through
        row[ref_disallowed(b2[r], vocab_size)] = NEG_INF


def random_words(shape, gen):
    return torch.randint(-(2**31), 2**31, shape, dtype=torch.int32, generator=gen)


def make_inputs(spec, seed=0):
    """Build (logits storage, logits view, bitmask view, vocab_size arg, indices) from a
    case description. Deterministic in ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, spec["dtype"])
    batch = spec.get("batch", 2)
    bm_batch = spec.get("bm_batch", batch)
    vocab = spec["vocab"]
    width = vocab + spec.get("pad", 0)
    words = (vocab + 31) // 32 + spec.get("bm_extra", 0)

    layout = spec.get("logits_layout", "contig")
    if layout == "contig":
        buf = torch.randn(batch, width, generator=gen).to(dtype)
        logits = buf
    elif layout == "colstride2":
        buf = torch.randn(batch, 2 * width + 1, generator=gen).to(dtype)
        logits = buf[:, 1::2]
    elif layout == "transposed":
        buf = torch.randn(width, batch, generator=gen).to(dtype)
        logits = buf.t()
    elif layout == "rowpad":
        buf = torch.randn(batch, width + 7, generator=gen).to(dtype)
        logits = buf[:, 3 : 3 + width]
    else:
        raise AssertionError(layout)

    bm_layout = spec.get("bitmask_layout", "contig")
    if bm_layout == "contig":
        mask = random_words((bm_batch, words), gen)
    elif bm_layout == "colstride2":
        mask = random_words((bm_batch, 2 * words), gen)[:, ::2]
    elif bm_layout == "transposed":
        mask = random_words((words, bm_batch), gen).t()
    else:
        raise AssertionError(bm_layout)

    if spec.get("one_d"):
        assert batch == 1 and bm_batch == 1
        logits, mask = logits[0], mask[0]
    vocab_arg = vocab if spec.get("pass_vocab", True) else None
    indices = spec.get("indices")
    if indices is not None and spec.get("indices_tensor"):
        indices = torch.tensor(indices, dtype=getattr(torch, spec["indices_tensor"]))
    return buf, logits, mask, vocab_arg, indices


def assert_bit_equal(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    # Compare the raw bits: catches -0.0 vs 0.0 and NaN payload differences too.
    int_dtype = {2: torch.int16, 4: torch.int32, 8: torch.int64}[actual.element_size()]
    a = actual.contiguous().view(int_dtype)
    e = expected.contiguous().view(int_dtype)
    if not torch.equal(a, e):
        diff = (a != e).nonzero()
        raise AssertionError(f"{diff.shape[0]} elements differ, first at {diff[0].tolist()}")


# --------------------------------------------------------------------------------------
# Allocation helpers
# --------------------------------------------------------------------------------------


def test_bitmask_dtype_and_shape():
    assert bm.bitmask_dtype is torch.int32
    assert bm.get_bitmask_shape(2, 1) == (2, 1)
    assert bm.get_bitmask_shape(2, 32) == (2, 1)
    assert bm.get_bitmask_shape(2, 33) == (2, 2)
    assert bm.get_bitmask_shape(1, 128257) == (1, 4009)
    assert bm.get_bitmask_shape(3, 0) == (3, 0)
    with pytest.raises(ValueError, match="vocab_size"):
        bm.get_bitmask_shape(1, -1)


def test_allocate_and_reset():
    mask = bm.allocate_token_bitmask(3, 1000)
    assert mask.shape == (3, 32) and mask.dtype == torch.int32 and mask.device.type == "cpu"
    assert bool((mask == -1).all())
    mask.zero_()
    bm.reset_token_bitmask(mask)
    assert bool((mask == -1).all())
    # An all-allowed bitmask leaves logits untouched.
    logits = torch.randn(3, 1000)
    before = logits.clone()
    apply_token_bitmask_inplace(logits, bm.allocate_token_bitmask(3, 1000))
    assert_bit_equal(logits, before)


def test_oracle_matches_bit_formula():
    gen = torch.Generator().manual_seed(1)
    words = random_words((5,), gen)
    words[0] = 0
    words[1] = -1
    words[2] = -(2**31)  # only bit 31 set
    vocab = 5 * 32 - 3
    expected = [((int(words[t // 32]) >> (t % 32)) & 1) == 0 for t in range(vocab)]
    assert ref_disallowed(words, vocab).tolist() == expected
    assert expected[64:96] == [True] * 31 + [False]


# --------------------------------------------------------------------------------------
# CPU / torch_native against the oracle
# --------------------------------------------------------------------------------------


def _patterned_bitmask(batch, words, gen):
    mask = random_words((batch, words), gen)
    special = [0, -1, -(2**31), 0x55555555]  # none, all, sign bit only, alternating
    for r in range(1, batch):
        mask[r] = special[(r - 1) % len(special)]
    return mask


@pytest.mark.parametrize("backend", ["cpu", "torch_native", "auto"])
@pytest.mark.parametrize("ndim", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", VOCAB_SIZES)
def test_apply_matches_reference(vocab, dtype, ndim, backend):
    gen = torch.Generator().manual_seed(vocab)
    words = (vocab + 31) // 32
    batch = 5 if ndim == 2 else 1
    logits = torch.randn(batch, vocab, generator=gen).to(getattr(torch, dtype))
    mask = _patterned_bitmask(batch, words, gen)
    if ndim == 1:
        logits, mask = logits[0], mask[0]
    expected = logits.clone()
    ref_apply_(expected, mask)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        apply_token_bitmask_inplace(logits, mask, backend=backend)
    assert_bit_equal(logits, expected)
    if vocab >= 32:
        assert bool(torch.isinf(logits).any()) and not bool(torch.isinf(logits).all())


@pytest.mark.parametrize("backend", ["cpu", "torch_native"])
@pytest.mark.parametrize(
    "batch,bm_batch,indices",
    [
        (5, 5, [4, 0, 2]),
        (5, 7, [1, 4]),  # bitmask has more rows than logits
        (6, 3, [2, 0]),  # logits have more rows than bitmask
        (4, 4, [1, 1, 3]),  # duplicates are harmless
        (4, 4, []),
        (4, 4, [0, 1, 2, 3]),
    ],
)
@pytest.mark.parametrize("as_tensor", [None, "int32", "int64"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_apply_with_indices(batch, bm_batch, indices, as_tensor, dtype, backend):
    spec = dict(
        dtype=dtype,
        batch=batch,
        bm_batch=bm_batch,
        vocab=1000,
        indices=indices,
        indices_tensor=as_tensor,
    )
    buf, logits, mask, vocab, idx = make_inputs(spec, seed=7)
    expected = buf.clone()
    ref_apply_(expected, mask, vocab, indices)
    apply_token_bitmask_inplace(logits, mask, vocab_size=vocab, indices=idx, backend=backend)
    assert_bit_equal(buf, expected)
    untouched = sorted(set(range(batch)) - set(indices))
    assert_bit_equal(buf[untouched], make_inputs(spec, seed=7)[0][untouched])


@pytest.mark.parametrize("backend", ["cpu", "torch_native"])
@pytest.mark.parametrize("logits_layout", ["colstride2", "transposed", "rowpad"])
@pytest.mark.parametrize("bitmask_layout", ["contig", "colstride2", "transposed"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", [33, 1000])
def test_apply_strided(vocab, dtype, logits_layout, bitmask_layout, backend):
    spec = dict(
        dtype=dtype,
        batch=3,
        vocab=vocab,
        logits_layout=logits_layout,
        bitmask_layout=bitmask_layout,
    )
    buf, logits, mask, vocab_arg, _ = make_inputs(spec, seed=3)
    assert not logits.is_contiguous()
    storage_before = buf.clone()
    exp_view = make_inputs(spec, seed=3)[1]  # same layout, fresh storage
    ref_apply_(exp_view, mask, vocab_arg)
    apply_token_bitmask_inplace(logits, mask, vocab_size=vocab_arg, backend=backend)
    assert_bit_equal(logits, exp_view)
    # Elements of the storage outside the view are untouched.
    outside = torch.ones_like(buf, dtype=torch.bool)
    if logits_layout == "colstride2":
        outside[:, 1::2] = False
    elif logits_layout == "rowpad":
        outside[:, 3 : 3 + vocab] = False
    else:
        outside[:] = False
    assert_bit_equal(buf[outside], storage_before[outside])


@pytest.mark.parametrize("backend", ["cpu", "torch_native"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("vocab", [1, 31, 33, 1000, 128257])
def test_padded_logits_tail_untouched(vocab, dtype, backend):
    # Logits wider than vocab_size, bitmask wider than needed with garbage bits.
    spec = dict(dtype=dtype, batch=2, vocab=vocab, pad=45, bm_extra=2)
    buf, logits, mask, vocab_arg, _ = make_inputs(spec, seed=11)
    mask[:, -3:] = 0  # would mask everything past vocab if it were (wrongly) used
    before = buf.clone()
    expected = buf.clone()
    ref_apply_(expected, mask, vocab)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        apply_token_bitmask_inplace(logits, mask, vocab_size=vocab_arg, backend=backend)
    assert_bit_equal(buf, expected)
    assert_bit_equal(buf[:, vocab:], before[:, vocab:])


def test_default_vocab_size_warns_when_bitmask_too_short():
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 100, generator=gen)
    mask = random_words((2, 2), gen)  # covers 64 tokens
    before = logits.clone()
    expected = logits.clone()
    ref_apply_(expected, mask, 64)
    with pytest.warns(UserWarning, match="covers only 64 tokens") as record:
        apply_token_bitmask_inplace(logits, mask)
    assert record[0].filename == __file__  # points at the caller
    assert_bit_equal(logits, expected)
    assert_bit_equal(logits[:, 64:], before[:, 64:])


def test_default_vocab_size_when_bitmask_wider():
    gen = torch.Generator().manual_seed(6)
    logits = torch.randn(2, 40, generator=gen)
    mask = random_words((2, 3), gen)  # covers 96 tokens, only 40 are used
    expected = logits.clone()
    ref_apply_(expected, mask, 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        apply_token_bitmask_inplace(logits, mask)
    assert_bit_equal(logits, expected)


def test_vocab_size_zero_is_noop():
    logits = torch.randn(2, 10)
    before = logits.clone()
    apply_token_bitmask_inplace(logits, torch.zeros(2, 1, dtype=torch.int32), vocab_size=0)
    assert_bit_equal(logits, before)


def test_torch_native_runs_on_other_devices():
    # "meta" stands in for a non-CPU, non-CUDA device: auto picks torch_native.
    logits = torch.empty(3, 100, device="meta")
    mask = torch.empty(3, 4, dtype=torch.int32, device="meta")
    apply_token_bitmask_inplace(logits, mask)
    apply_token_bitmask_inplace(logits, mask, indices=[2, 0], backend="torch_native")


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


def _l(*shape, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype)


def _m(*shape, dtype=torch.int32):
    return torch.zeros(shape, dtype=dtype)


def _l2m2():
    return _l(2, 64), _m(2, 2)


def _l3m3():
    return _l(3, 64), _m(3, 2)


ERROR_CASES = {
    "logits_not_tensor": (lambda: ([0.0] * 32, _m(1)), {}, TypeError, "logits"),
    "bitmask_not_tensor": (lambda: (_l(32), np.zeros(1, np.int32)), {}, TypeError, "bitmask"),
    "devices_differ": (
        lambda: (_l(2, 64), _m(2, 2).to("meta")),
        {},
        ValueError,
        "same device",
    ),
    "bitmask_int64": (lambda: (_l(2, 64), _m(2, 2, dtype=torch.int64)), {}, TypeError, "bitmask"),
    "bitmask_uint8": (lambda: (_l(2, 64), _m(2, 8, dtype=torch.uint8)), {}, TypeError, "bitmask"),
    "logits_int32": (lambda: (_l(2, 64, dtype=torch.int32), _m(2, 2)), {}, TypeError, "logits"),
    "logits_bool": (lambda: (_l(2, 64, dtype=torch.bool), _m(2, 2)), {}, TypeError, "logits"),
    "logits_3d": (lambda: (_l(1, 2, 64), _m(2, 2)), {}, ValueError, "logits must be 1-D or 2-D"),
    "logits_0d": (lambda: (_l(), _m(1)), {}, ValueError, "logits must be 1-D or 2-D"),
    "bitmask_3d": (lambda: (_l(2, 64), _m(1, 2, 2)), {}, ValueError, "bitmask must be 1-D or 2-D"),
    "bitmask_too_narrow": (
        lambda: (_l(2, 64), _m(2, 1)),
        {"vocab_size": 64},
        ValueError,
        "bitmask is too narrow",
    ),
    "bitmask_too_narrow_by_one_token": (
        lambda: (_l(2, 64), _m(2, 1)),
        {"vocab_size": 33},
        ValueError,
        "bitmask is too narrow",
    ),
    "vocab_size_exceeds_logits": (
        lambda: (_l(2, 64), _m(2, 3)),
        {"vocab_size": 65},
        ValueError,
        "vocab_size",
    ),
    "vocab_size_negative": (_l2m2, {"vocab_size": -1}, ValueError, "vocab_size"),
    "vocab_size_float": (_l2m2, {"vocab_size": 64.0}, TypeError, "vocab_size"),
    "logits_batch_smaller": (lambda: (_l(2, 64), _m(3, 2)), {}, ValueError, "batch size"),
    "logits_batch_larger": (lambda: (_l(3, 64), _m(2, 2)), {}, ValueError, "batch size"),
    "bitmask_1d_logits_batch3": (lambda: (_l(3, 64), _m(2)), {}, ValueError, "batch size"),
    "index_out_of_range": (_l3m3, {"indices": [0, 3]}, ValueError, "indices"),
    "index_negative": (lambda: (_l(3, 64), _m(3, 2)), {"indices": [-1]}, ValueError, "indices"),
    "index_tensor_out_of_range": (
        lambda: (_l(3, 64), _m(3, 2)),
        {"indices": torch.tensor([5])},
        ValueError,
        "indices",
    ),
    "index_beyond_bitmask_batch": (
        lambda: (_l(5, 64), _m(2, 2)),
        {"indices": [3]},
        ValueError,
        "indices",
    ),
    "index_beyond_logits_batch": (
        lambda: (_l(2, 64), _m(5, 2)),
        {"indices": [3]},
        ValueError,
        "indices",
    ),
    "indices_float_tensor": (
        lambda: (_l(3, 64), _m(3, 2)),
        {"indices": torch.tensor([0.0])},
        TypeError,
        "indices",
    ),
    "indices_float_items": (_l3m3, {"indices": [0.5]}, TypeError, "indices"),
    "indices_not_iterable": (lambda: (_l(3, 64), _m(3, 2)), {"indices": 1}, TypeError, "indices"),
    "indices_2d_tensor": (
        lambda: (_l(3, 64), _m(3, 2)),
        {"indices": torch.tensor([[0]])},
        ValueError,
        "indices",
    ),
    "unknown_backend": (lambda: (_l(2, 64), _m(2, 2)), {"backend": "cuda"}, ValueError, "backend"),
    "unknown_backend_torch_compile": (
        lambda: (_l(2, 64), _m(2, 2)),
        {"backend": "torch_compile"},
        ValueError,
        "backend",
    ),
    "cpu_backend_on_other_device": (
        lambda: (_l(2, 64).to("meta"), _m(2, 2).to("meta")),
        {"backend": "cpu"},
        ValueError,
        "backend",
    ),
    "triton_backend_cpu_without_interpreter": (
        lambda: (_l(2, 64), _m(2, 2)),
        {"backend": "triton"},
        ValueError,
        "TRITON_INTERPRET",
    ),
}


@pytest.mark.parametrize("name", list(ERROR_CASES))
def test_errors(name, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    make, kwargs, exc, match = ERROR_CASES[name]
    logits, mask = make()
    before = None
    if isinstance(logits, torch.Tensor) and logits.device.type == "cpu":
        before = logits.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc, match=match):
            apply_token_bitmask_inplace(logits, mask, **kwargs)
    if before is not None:
        assert torch.equal(logits, before)  # nothing was written before the error


# --------------------------------------------------------------------------------------
# Triton (interpreter, in a subprocess)
# --------------------------------------------------------------------------------------

TRITON_CASES = {
    "f32_v1000": dict(dtype="float32", batch=3, vocab=1000),
    "f16_v33": dict(dtype="float16", batch=2, vocab=33),
    "bf16_v1000": dict(dtype="bfloat16", batch=2, vocab=1000),
    "f32_v1": dict(dtype="float32", batch=2, vocab=1),
    "f32_v32": dict(dtype="float32", batch=2, vocab=32),
    "f32_1d_v31": dict(dtype="float32", batch=1, vocab=31, one_d=True),
    "bf16_1d_v1000_default_vocab": dict(
        dtype="bfloat16", batch=1, vocab=1000, one_d=True, pass_vocab=False
    ),
    "f32_v5000_two_blocks": dict(dtype="float32", batch=2, vocab=5000),
    "f32_v1000_block64": dict(dtype="float32", batch=2, vocab=1000, block_size=64),
    "f16_v1000_block64_strided": dict(
        dtype="float16",
        batch=3,
        vocab=1000,
        block_size=64,
        logits_layout="colstride2",
        bitmask_layout="colstride2",
        indices=[2, 0],
    ),
    "f32_strided_indices": dict(
        dtype="float32",
        batch=3,
        vocab=1000,
        logits_layout="colstride2",
        bitmask_layout="colstride2",
        indices=[2, 0],
    ),
    "bf16_transposed_indices_tensor": dict(
        dtype="bfloat16",
        batch=4,
        vocab=300,
        logits_layout="transposed",
        bitmask_layout="transposed",
        indices=[1, 3],
        indices_tensor="int64",
    ),
    "f32_rowpad": dict(dtype="float32", batch=2, vocab=777, logits_layout="rowpad"),
    "f16_padded": dict(dtype="float16", batch=2, vocab=100, pad=30, bm_extra=1),
    "f32_logits_batch_larger_indices": dict(
        dtype="float32", batch=5, bm_batch=2, vocab=500, indices=[1, 0]
    ),
    "f32_bitmask_batch_larger_indices": dict(
        dtype="float32", batch=3, bm_batch=6, vocab=500, indices=[2], indices_tensor="int32"
    ),
    "f32_duplicate_indices": dict(dtype="float32", batch=3, vocab=200, indices=[1, 1]),
    "bf16_v128257": dict(dtype="bfloat16", batch=1, vocab=128257),
}


def _run_triton_cases(specs):
    """Worker side (runs under TRITON_INTERPRET=1): apply each case with the Triton backend
    and compare with the CPU backend and with the oracle, bit for bit."""
    kernel = importlib.import_module(bm.__package__ + ".kernels.triton_apply")
    results = {}
    for name, spec in specs.items():
        try:
            buf_cpu, view_cpu, mask, vocab, idx = make_inputs(spec, seed=42)
            buf_tri, view_tri, _, _, _ = make_inputs(spec, seed=42)
            buf_ref, view_ref, _, _, _ = make_inputs(spec, seed=42)
            apply_token_bitmask_inplace(
                view_cpu, mask, vocab_size=vocab, indices=idx, backend="cpu"
            )
            if spec.get("block_size"):
                kernel.apply_token_bitmask_inplace_triton(
                    view_tri, mask, vocab, idx, block_size=spec["block_size"]
                )
            else:
                apply_token_bitmask_inplace(
                    view_tri, mask, vocab_size=vocab, indices=idx, backend="triton"
                )
            ref_apply_(view_ref, mask, vocab, spec.get("indices"))
            assert_bit_equal(buf_tri, buf_cpu)
            assert_bit_equal(buf_tri, buf_ref)
            results[name] = ""
        except Exception as err:  # reported back to the parent test
            results[name] = f"{type(err).__name__}: {err}"
    return results


def _subprocess_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
    )
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def triton_results():
    if not HAS_TRITON:
        pytest.skip("triton is not installed")
    proc = subprocess.run(
        [sys.executable, __file__, "--triton-worker"],
        input=json.dumps(TRITON_CASES),
        capture_output=True,
        text=True,
        env=_subprocess_env(TRITON_INTERPRET="1"),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", list(TRITON_CASES))
def test_triton_interpreter_matches_cpu(name, triton_results):
    assert triton_results[name] == ""


def _run_fallback_check():
    """Worker side (no TRITON_INTERPRET, xg2_plugin import blocked): the by-path loader
    works, the CPU path works, and triton is never imported."""
    assert bm.__name__ == "_xg2_bitmask_under_test.bitmask", bm.__name__
    logits = torch.randn(2, 70)
    mask = random_words((2, 3), torch.Generator().manual_seed(0))
    expected = logits.clone()
    ref_apply_(expected, mask)
    apply_token_bitmask_inplace(logits, mask)
    assert_bit_equal(logits, expected)
    try:
        apply_token_bitmask_inplace(logits, mask, backend="triton")
    except ValueError as err:
        assert "TRITON_INTERPRET" in str(err)
    else:
        raise AssertionError("backend='triton' on CPU without the interpreter did not raise")
    assert "triton" not in sys.modules, "triton was imported eagerly"
    return "ok"


def test_fallback_loader_and_lazy_triton_import():
    env = _subprocess_env()
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, __file__, "--fallback-worker", "--force-fallback"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "ok"


if __name__ == "__main__":
    if "--triton-worker" in sys.argv:
        print(json.dumps(_run_triton_cases(json.loads(sys.stdin.read()))))
    elif "--fallback-worker" in sys.argv:
        print(_run_fallback_check())
