"""Token bitmask helpers and the dispatcher that applies a bitmask to logits.

Layout (identical to XGrammar 0.2.x): the bitmask is an ``int32`` tensor of shape
``(batch, ceil(vocab_size / 32))``.  Token ``t`` is bit ``t & 31`` of word ``t >> 5``;
a set bit means the token is allowed, a cleared bit means its logit is set to ``-inf``.

Importing this module only imports ``torch``; Triton is imported lazily, the first time
the Triton backend is actually used.
"""

import os
import warnings
from typing import List, Optional, Sequence, Tuple, Union

import torch

from ._errors import InvalidArgumentError, LimitExceededError, as_index

__all__ = [
    "bitmask_dtype",
    "get_bitmask_shape",
    "allocate_token_bitmask",
    "reset_token_bitmask",
    "apply_token_bitmask_inplace",
]

bitmask_dtype = torch.int32
"""The dtype of the token bitmask: int32 (old PyTorch versions have no uint32)."""

_BITS_PER_WORD = 32
_BACKENDS = ("auto", "cpu", "triton", "torch_native")
_SUPPORTED_LOGITS_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)

IndicesLike = Union[Sequence[int], torch.Tensor]

# Far above any batch of real masks (1,024 rows of a 256k vocabulary take 32 MiB), so
# that a bad size is an error instead of a process-killing allocation.
MAX_BITMASK_BYTES = 1 << 30


def get_bitmask_shape(batch_size: int, vocab_size: int) -> Tuple[int, int]:
    """Return the bitmask shape ``(batch_size, ceil(vocab_size / 32))``."""
    batch_size = as_index(batch_size, "batch_size")
    vocab_size = as_index(vocab_size, "vocab_size")
    if batch_size < 0:
        raise InvalidArgumentError(f"batch_size must be non-negative, got {batch_size}")
    if vocab_size < 0:
        raise InvalidArgumentError(f"vocab_size must be non-negative, got {vocab_size}")
    return (batch_size, (vocab_size + _BITS_PER_WORD - 1) // _BITS_PER_WORD)


def allocate_token_bitmask(batch_size: int, vocab_size: int) -> torch.Tensor:
    """Allocate a CPU int32 bitmask of shape ``get_bitmask_shape(batch_size, vocab_size)``
    with every token allowed (all bits set, i.e. every word is ``-1``).  Larger than
    ``MAX_BITMASK_BYTES`` (1 GiB): ``LimitExceededError``."""
    shape = get_bitmask_shape(batch_size, vocab_size)
    if shape[0] * shape[1] * 4 > MAX_BITMASK_BYTES:
        raise LimitExceededError(
            f"a bitmask of {shape[0]} x {shape[1]} int32 words is over MAX_BITMASK_BYTES ({MAX_BITMASK_BYTES})"
        )
    return torch.full(shape, -1, dtype=bitmask_dtype)


def reset_token_bitmask(bitmask: torch.Tensor) -> None:
    """Reset ``bitmask`` in place so that every token is allowed."""
    if not isinstance(bitmask, torch.Tensor):
        raise InvalidArgumentError(f"bitmask must be a torch.Tensor, got {type(bitmask).__name__}")
    bitmask.fill_(-1)


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


def _batch_of(t: torch.Tensor) -> int:
    return 1 if t.dim() == 1 else t.shape[0]


def _normalize_indices(
    indices: Optional[IndicesLike], logits_batch: int, bitmask_batch: int
) -> Optional[torch.Tensor]:
    """Validate ``indices`` and return them as a 1-D CPU int64 tensor (or None)."""
    if indices is None:
        return None
    if isinstance(indices, torch.Tensor):
        if indices.dtype == torch.bool or indices.dtype.is_floating_point or indices.is_complex():
            raise InvalidArgumentError(f"indices must be an integer tensor, got dtype {indices.dtype}")
        if indices.dim() != 1:
            raise InvalidArgumentError(f"indices must be a 1-D tensor, got {indices.dim()}-D")
        idx = indices.detach().to(device="cpu", dtype=torch.int64)
    else:
        if isinstance(indices, (str, bytes)):
            raise InvalidArgumentError("indices must be a list of ints or an integer tensor")
        try:
            items = list(indices)
        except TypeError:
            raise InvalidArgumentError(
                "indices must be a list of ints or an integer tensor, "
                f"got {type(indices).__name__}"
            ) from None
        values = [as_index(item, f"indices[{i}]") for i, item in enumerate(items)]
        if any(not -(2**63) <= v < 2**63 for v in values):
            raise InvalidArgumentError("indices holds a value out of the int64 range")
        idx = torch.tensor(values, dtype=torch.int64)
    limit = min(logits_batch, bitmask_batch)
    if idx.numel() > 0:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= limit:
            bad = lo if lo < 0 else hi
            raise InvalidArgumentError(
                f"indices contains {bad}, which is out of range: every index must be in "
                f"[0, {limit}) (logits batch size {logits_batch}, bitmask batch size "
                f"{bitmask_batch})"
            )
    return idx


def _validate(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: Optional[int],
    indices: Optional[IndicesLike],
) -> Tuple[int, Optional[torch.Tensor]]:
    """Check every argument; return the effective vocab size and normalized indices."""
    if not isinstance(logits, torch.Tensor):
        raise InvalidArgumentError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if not isinstance(bitmask, torch.Tensor):
        raise InvalidArgumentError(f"bitmask must be a torch.Tensor, got {type(bitmask).__name__}")
    if logits.device != bitmask.device:
        raise InvalidArgumentError(
            "logits and bitmask must be on the same device, but got "
            f"logits.device={logits.device}, bitmask.device={bitmask.device}"
        )
    if bitmask.dtype != bitmask_dtype:
        raise InvalidArgumentError(f"bitmask must have dtype torch.int32, got {bitmask.dtype}")
    if logits.dtype not in _SUPPORTED_LOGITS_DTYPES:
        raise InvalidArgumentError(
            "logits must be a floating-point tensor (float32, float16, bfloat16 or float64), "
            f"got {logits.dtype}"
        )
    if logits.dim() not in (1, 2):
        raise InvalidArgumentError(f"logits must be 1-D or 2-D, got {logits.dim()}-D")
    if bitmask.dim() not in (1, 2):
        raise InvalidArgumentError(f"bitmask must be 1-D or 2-D, got {bitmask.dim()}-D")

    logits_width = logits.shape[-1]
    bitmask_width = bitmask.shape[-1]
    if vocab_size is None:
        covered = bitmask_width * _BITS_PER_WORD
        if covered < logits_width:
            warnings.warn(
                f"The bitmask covers only {covered} tokens but logits have {logits_width}, "
                f"so logits[..., {covered}:] are left unmasked. Allocate the bitmask with the "
                "full vocab size, or pass vocab_size explicitly.",
                stacklevel=3,
            )
        vocab_size = min(logits_width, covered)
    else:
        vocab_size = as_index(vocab_size, "vocab_size")
        if vocab_size < 0:
            raise InvalidArgumentError(f"vocab_size must be non-negative, got {vocab_size}")
        if vocab_size > logits_width:
            raise InvalidArgumentError(
                f"vocab_size {vocab_size} is larger than the logits width {logits_width}"
            )
        needed_words = (vocab_size + _BITS_PER_WORD - 1) // _BITS_PER_WORD
        if needed_words > bitmask_width:
            raise InvalidArgumentError(
                f"bitmask is too narrow for vocab_size {vocab_size}: it needs at least "
                f"{needed_words} int32 words per row but has {bitmask_width}"
            )

    logits_batch = _batch_of(logits)
    bitmask_batch = _batch_of(bitmask)
    idx = _normalize_indices(indices, logits_batch, bitmask_batch)
    if idx is None and logits_batch != bitmask_batch:
        raise InvalidArgumentError(
            "logits and bitmask must have the same batch size when indices is not given, "
            f"but got logits batch size {logits_batch} and bitmask batch size {bitmask_batch}"
        )
    return vocab_size, idx


# --------------------------------------------------------------------------------------
# Vectorized torch implementation (used by the "cpu" and "torch_native" backends)
# --------------------------------------------------------------------------------------


def _disallowed_mask(words: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Unpack ``words`` (rows, n_words) int32 into a bool tensor (rows, vocab_size) that is
    True where the token is masked out (bit cleared)."""
    shifts = torch.arange(_BITS_PER_WORD, dtype=torch.int32, device=words.device)
    # (rows, n_words, 32): bit j of word w, for token 32 * w + j.  ">>" is arithmetic on
    # int32, but "& 1" keeps only the lowest bit, so the sign bit is read correctly too.
    bits = (words.unsqueeze(-1) >> shifts) & 1
    return (bits == 0).reshape(words.shape[0], -1)[:, :vocab_size]


_NATIVE_DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3}  # XG2_DTYPE_*


def _apply_native(logits: torch.Tensor, bitmask: torch.Tensor, vocab_size: int,
                  indices: Optional[torch.Tensor]) -> bool:
    """The CPU apply in the core (one pass over the words, GIL released); False where
    it does not apply (rows not contiguous, or the core not importable), and the torch
    path runs instead."""
    if logits.stride(-1) != 1 or bitmask.stride(-1) != 1 or vocab_size == 0:
        return False
    try:
        from ._native import ffi, lib
    except ImportError:
        return False
    logits2d = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bitmask2d = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    rows = ffi.NULL
    n = logits2d.shape[0]
    if indices is not None:
        idx = indices.to(device="cpu", dtype=torch.int64).contiguous()
        n = idx.numel()
        if n == 0:
            return True
        rows = ffi.cast("const int64_t *", idx.data_ptr())
    rc = lib.xg2_apply_bitmask(ffi.cast("void *", logits2d.data_ptr()), _NATIVE_DTYPES[logits.dtype],
                               logits2d.stride(0), ffi.cast("const int32_t *", bitmask2d.data_ptr()),
                               bitmask2d.stride(0), rows, n, vocab_size)
    if rc != 0:
        raise InvalidArgumentError("apply_token_bitmask_inplace: the core refused its arguments")
    return True


def _apply_torch(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: int,
    indices: Optional[torch.Tensor],
) -> None:
    logits2d = logits.unsqueeze(0) if logits.dim() == 1 else logits  # a view: writes go through
    bitmask2d = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if vocab_size == 0:
        return
    n_words = (vocab_size + _BITS_PER_WORD - 1) // _BITS_PER_WORD
    neg_inf = float("-inf")
    if indices is None:
        masked = _disallowed_mask(bitmask2d[:, :n_words], vocab_size)
        # Basic slicing gives a (possibly strided) view, so masked_fill_ is in place.
        logits2d[:, :vocab_size].masked_fill_(masked, neg_inf)
        return
    if indices.numel() == 0:
        return
    idx = indices.to(device=logits2d.device)
    masked = _disallowed_mask(bitmask2d[idx, :n_words], vocab_size)
    # Advanced indexing copies, so gather the rows, mask them and scatter them back.
    # Duplicate indices are harmless: every copy of a row is written with the same values.
    rows = logits2d[idx, :vocab_size]
    rows.masked_fill_(masked, neg_inf)
    logits2d[idx, :vocab_size] = rows


# --------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------


def _triton_interpreter_enabled() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def apply_token_bitmask_inplace(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    *,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], torch.Tensor]] = None,
    backend: str = "auto",
) -> None:
    """Set ``logits[r, t] = -inf`` for every token ``t < vocab_size`` whose bit is 0 in
    ``bitmask[r]``, in place.

    Parameters
    ----------
    logits : torch.Tensor
        1-D ``(vocab,)`` or 2-D ``(batch, vocab)`` float32/float16/bfloat16 (or float64) tensor.
        Rows may be strided.
    bitmask : torch.Tensor
        1-D or 2-D int32 tensor on the same device as ``logits``.
    vocab_size : Optional[int]
        Number of leading tokens to mask; logits beyond it are left untouched. Defaults to
        ``min(logits.shape[-1], bitmask.shape[-1] * 32)``; a warning is emitted when the
        bitmask covers fewer tokens than the logits.
    indices : Optional[list of int or integer tensor]
        Batch rows to mask. Row ``i`` of ``logits`` is masked with row ``i`` of ``bitmask``,
        so the two batch sizes may differ as long as every index is valid for both. Without
        indices the batch sizes must be equal and every row is masked.
    backend : {"auto", "cpu", "triton", "torch_native"}
        "auto" picks "cpu" for CPU tensors, "triton" for CUDA tensors and "torch_native"
        otherwise. "triton" on CPU tensors is only allowed under the Triton interpreter
        (``TRITON_INTERPRET=1``).
    """
    if not isinstance(backend, str) or backend not in _BACKENDS:
        raise InvalidArgumentError(f"Unknown backend {backend!r}; backend must be one of {list(_BACKENDS)}")

    vocab_size, idx = _validate(logits, bitmask, vocab_size, indices)

    device_type = logits.device.type
    if backend == "auto":
        if device_type == "cpu":
            backend = "cpu"
        elif device_type == "cuda":
            backend = "triton"
        else:
            backend = "torch_native"

    if backend == "cpu":
        if device_type != "cpu":
            raise InvalidArgumentError(
                f'backend "cpu" requires CPU tensors, but logits are on {logits.device}'
            )
        if not _apply_native(logits, bitmask, vocab_size, idx):
            _apply_torch(logits, bitmask, vocab_size, idx)
    elif backend == "torch_native":
        _apply_torch(logits, bitmask, vocab_size, idx)
    else:  # triton
        if device_type == "cpu" and not _triton_interpreter_enabled():
            raise InvalidArgumentError(
                'backend "triton" needs GPU tensors; CPU tensors are only supported under the '
                "Triton interpreter (set TRITON_INTERPRET=1 before importing triton), "
                'otherwise use backend="cpu"'
            )
        if vocab_size == 0 or (idx is not None and idx.numel() == 0):
            return
        from .kernels.triton_apply import apply_token_bitmask_inplace_triton

        apply_token_bitmask_inplace_triton(logits, bitmask, vocab_size, idx)
