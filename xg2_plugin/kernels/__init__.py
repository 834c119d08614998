"""Compute kernels for xg2_plugin, under XGrammar's module names so that code which
imports them from ``xgrammar.kernels`` finds them here (imported lazily; each
module may need optional dependencies such as Triton):

- ``apply_token_bitmask_inplace_cpu``: CPU tensors;
- ``apply_token_bitmask_inplace_triton``: CUDA tensors (Triton);
- ``apply_token_bitmask_inplace_torch_compile``: any device, plain torch.

XGrammar's CUDA-extension and MLX kernels have no counterpart."""
