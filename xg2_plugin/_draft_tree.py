"""GrammarMatcher.traverse_draft_tree: masks for every node of a speculative draft tree.

The walk is XGrammar's (and SGLang's ``traverse_tree``): depth first, children
before siblings, accept / fill / recurse / roll back.  It runs on an explicit
stack, so a deep chain cannot exhaust Python's recursion, and it marks the nodes
it reaches, so a malformed tree (a cycle, a node shared by two parents) is an
error after at most one visit per node instead of an endless walk.
"""

from __future__ import annotations

import time
from typing import Any, List

import numpy as np

from ._errors import InvalidArgumentError


def _int_vector(value: Any, what: str) -> List[int]:
    """A 1-D integer tensor or array (on the CPU) as a list of ints."""
    try:
        import torch
    except ImportError:  # numpy-only environments
        torch = None
    if torch is not None and isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise InvalidArgumentError(f"{what} must be on the CPU, got {value.device}")
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            raise InvalidArgumentError(f"{what} must be an integer tensor, got {value.dtype}")
        if value.dim() != 1:
            raise InvalidArgumentError(f"{what} must be 1-D, got {value.dim()}-D")
        return value.tolist()
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu":
            raise InvalidArgumentError(f"{what} must be an integer array, got {value.dtype}")
        if value.ndim != 1:
            raise InvalidArgumentError(f"{what} must be 1-D, got {value.ndim}-D")
        return value.tolist()
    raise InvalidArgumentError(f"{what} must be a 1-D integer torch.Tensor or numpy array, got {type(value).__name__}")


def _check_tree(nxt: List[int], sib: List[int], tokens: List[int], rows: int) -> int:
    n = len(nxt)
    if not n:
        raise InvalidArgumentError("the draft tree is empty")
    if len(sib) != n or len(tokens) != n:
        raise InvalidArgumentError(
            f"retrieve_next_token, retrieve_next_sibling and draft_tokens must have one length, "
            f"got {n}, {len(sib)} and {len(tokens)}")
    if rows != n:
        raise InvalidArgumentError(f"token_bitmask has {rows} rows for a tree of {n} nodes")
    for what, links in (("retrieve_next_token", nxt), ("retrieve_next_sibling", sib)):
        for i, j in enumerate(links):
            if j != -1 and not 0 < j < n:  # (node 0 is the root: no one's child or sibling)
                raise InvalidArgumentError(f"{what}[{i}] is {j}: a node index in [1, {n}) or -1 expected")
    if sib[0] != -1:
        raise InvalidArgumentError("the root of the draft tree (node 0) must have no sibling")
    return n


def traverse(matcher, retrieve_next_token, retrieve_next_sibling, draft_tokens, token_bitmask,
             time_threshold=-1.0, temperatures=None) -> bool:
    nxt = _int_vector(retrieve_next_token, "retrieve_next_token")
    sib = _int_vector(retrieve_next_sibling, "retrieve_next_sibling")
    tokens = _int_vector(draft_tokens, "draft_tokens")
    if isinstance(time_threshold, bool) or not isinstance(time_threshold, (int, float)) or time_threshold != time_threshold:
        raise InvalidArgumentError(f"time_threshold must be a number of seconds, got {time_threshold!r}")
    shape = tuple(getattr(token_bitmask, "shape", ()))
    if len(shape) != 2:
        raise InvalidArgumentError(f"token_bitmask must be 2-D (one row per node), got shape {shape}")
    n = _check_tree(nxt, sib, tokens, shape[0])
    matcher.fill_next_token_bitmask(token_bitmask, 0)  # (checks the bitmask's dtype, device and width)
    if temperatures is not None:
        if tuple(getattr(temperatures, "shape", ())) != (n,) or "float" not in str(getattr(temperatures, "dtype", "")):
            raise InvalidArgumentError(f"temperatures must be a 1-D float tensor of {n} elements")
        temperatures[:] = -1.0
    vocab_size = matcher.compiled_grammar.tokenizer_info.vocab_size
    start = time.monotonic()
    seen = bytearray(n)
    # Actions: (node, parent) visits a node; (-1, 0) rolls one accepted token back.
    stack = [(0, -1)]
    pending = 0  # tokens accepted and not yet rolled back
    try:
        while stack:
            node, parent = stack.pop()
            if node == -1:
                matcher.rollback(1)
                pending -= 1
                continue
            if seen[node]:
                raise InvalidArgumentError(f"draft tree node {node} is reached twice: the links form no tree")
            seen[node] = 1
            if sib[node] != -1:
                stack.append((sib[node], parent))
            if node:
                token = tokens[node]
                allowed = 0 <= token < vocab_size and int(token_bitmask[parent, token >> 5]) >> (token & 31) & 1
                if allowed and time_threshold > 0 and time.monotonic() - start > time_threshold:
                    return False
                if not allowed or not matcher.accept_token(token):
                    token_bitmask[node] = 0
                    continue
                pending += 1
                stack.append((-1, 0))
            if matcher.is_terminated():
                token_bitmask[node] = 0
                continue
            if node:
                matcher.fill_next_token_bitmask(token_bitmask, node)
            if nxt[node] != -1:
                stack.append((nxt[node], node))
        return True
    finally:
        if pending:  # (a timeout or an error mid-walk: the matcher ends as it began)
            matcher.rollback(pending)
