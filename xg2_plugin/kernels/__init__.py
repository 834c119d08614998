"""Compute kernels for xg2_plugin (imported lazily; each module may require optional
dependencies such as Triton)."""
