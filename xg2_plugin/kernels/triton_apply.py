"""Triton kernel that applies a token bitmask to logits in place.

Importing this module imports Triton; ``xg2_plugin.bitmask`` only imports it when the
Triton backend is used. With ``TRITON_INTERPRET=1`` set before Triton is imported, the
kernel runs under the Triton interpreter on CPU tensors (used for testing without a GPU).
"""

from typing import List, Optional, Union

import torch

try:
    import triton
    import triton.language as tl
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "triton is not installed; it is required for the Triton bitmask backend"
    ) from err

_DEFAULT_BLOCK_SIZE = 4096


@triton.jit
def _apply_token_bitmask_kernel(
    logits_ptr,
    bitmask_ptr,
    indices_ptr,
    vocab_size,
    logits_row_stride,
    logits_col_stride,
    bitmask_row_stride,
    bitmask_col_stride,
    HAS_INDICES: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
):
    # Grid: (number of rows to mask, cdiv(vocab_size, BLOCK_SIZE)).
    row = tl.program_id(0)
    block = tl.program_id(1)
    if HAS_INDICES:
        batch = tl.load(indices_ptr + row).to(tl.int64)
    else:
        batch = row.to(tl.int64)

    tokens = block.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_vocab = tokens < vocab_size
    # Every token reads the word holding its bit; neighbouring tokens share a word, so the
    # loads coalesce. Out-of-vocab lanes read nothing and count as "allowed" (-1).
    words = tl.load(
        bitmask_ptr + batch * bitmask_row_stride + (tokens >> 5) * bitmask_col_stride,
        mask=in_vocab,
        other=-1,
    )
    bit = (words >> (tokens & 31).to(tl.int32)) & 1
    disallowed = in_vocab & (bit == 0)
    neg_inf = tl.full([BLOCK_SIZE], float("-inf"), logits_ptr.dtype.element_ty)
    tl.store(
        logits_ptr + batch * logits_row_stride + tokens * logits_col_stride,
        neg_inf,
        mask=disallowed,
    )


def apply_token_bitmask_inplace_triton(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], torch.Tensor]] = None,
    block_size: int = _DEFAULT_BLOCK_SIZE,
) -> None:
    """Set masked logits to -inf with a Triton kernel.

    ``logits`` is 1-D or 2-D (rows and columns may be strided), ``bitmask`` is a 1-D or 2-D
    int32 tensor on the same device. ``indices`` (ints or an integer tensor) selects the
    batch rows to mask; row ``i`` of ``logits`` uses row ``i`` of ``bitmask``. Arguments are
    assumed to be validated already (``xg2_plugin.bitmask.apply_token_bitmask_inplace`` does
    that); only shapes are normalized here.
    """
    if bitmask.dtype != torch.int32:
        raise TypeError(f"bitmask must have dtype torch.int32, got {bitmask.dtype}")
    if block_size < 32 or block_size & (block_size - 1):
        raise ValueError(f"block_size must be a power of two >= 32, got {block_size}")
    logits2d = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bitmask2d = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    if vocab_size is None:
        vocab_size = min(logits2d.shape[-1], bitmask2d.shape[-1] * 32)

    if indices is None:
        num_rows = logits2d.shape[0]
        indices_t = None
    else:
        if isinstance(indices, torch.Tensor):
            indices_t = indices.to(device=logits.device, dtype=torch.int32).contiguous()
        else:
            indices_t = torch.tensor(list(indices), dtype=torch.int32, device=logits.device)
        num_rows = indices_t.numel()
    if num_rows == 0 or vocab_size == 0:
        return

    grid = (num_rows, triton.cdiv(vocab_size, block_size))
    _apply_token_bitmask_kernel[grid](
        logits2d,
        bitmask2d,
        indices_t,
        vocab_size,
        logits2d.stride(0),
        logits2d.stride(1),
        bitmask2d.stride(0),
        bitmask2d.stride(1),
        HAS_INDICES=indices_t is not None,
        BLOCK_SIZE=block_size,
        num_warps=8 if block_size >= 2048 else 4,
    )
