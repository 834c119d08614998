"""XGrammar's ``xgrammar.kernels.apply_token_bitmask_inplace_cpu`` entry point: for
CPU tensors, vectorised torch.  The arguments are checked as by
:func:`xg2_plugin.apply_token_bitmask_inplace` (a bad one: ``InvalidArgumentError``)."""

from typing import List, Optional, Union

import torch

from ..bitmask import apply_token_bitmask_inplace


def apply_token_bitmask_inplace_cpu(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab_size: Optional[int] = None,
    indices: Optional[Union[List[int], torch.Tensor]] = None,
) -> None:
    """Set ``logits[r, t] = -inf`` where bit t of ``bitmask[r]`` is 0, in place."""
    apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab_size, indices=indices, backend="cpu")
