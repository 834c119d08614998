"""XGrammar's ``xgrammar.testing`` helpers that engines and users call: string
matching without a tokenizer, bitmask inspection and conversion.

As in XGrammar these are for tests and debugging.  Helpers that expose
XGrammar's internal passes (``GrammarFunctor``, ``_print_grammar_fsms``,
``_ebnf_to_grammar_no_normalization``, ...) have no counterpart: xg2's core has
other internals.  Imports torch (the bitmask helpers take tensors).
"""

from __future__ import annotations

import time
from typing import List, Optional, Tuple, Union

import torch

from ._errors import InvalidArgumentError, as_index
from .bitmask import bitmask_dtype
from .compiler import GrammarCompiler
from .grammar import Grammar, ebnf_string_literal
from .matcher import GrammarMatcher
from .tokenizer import TokenizerInfo

__all__ = [
    "bitmask_to_bool_mask",
    "bool_mask_to_bitmask",
]


def _json_schema_to_ebnf(schema, *, any_whitespace: bool = True, indent: Optional[int] = None,
                         separators: Optional[Tuple[str, str]] = None, max_whitespace_cnt: Optional[int] = None,
                         strict_mode: bool = True, any_order: bool = False) -> str:
    """The EBNF xg2 compiles a JSON Schema to (see :meth:`Grammar.from_json_schema`)."""
    from .json_schema import json_schema_to_ebnf

    return json_schema_to_ebnf(schema, any_whitespace=any_whitespace, indent=indent, separators=separators,
                               strict_mode=strict_mode, max_whitespace_cnt=max_whitespace_cnt, any_order=any_order)


def _regex_to_ebnf(regex: str, with_rule_name: bool = True) -> str:
    """The EBNF of a regex: xg2's core reads regexes itself, so this is the
    ``Regex("...")`` macro, checked by parsing it."""
    Grammar.from_regex(regex)
    body = f"Regex({ebnf_string_literal(regex)})"
    return f"root ::= {body}\n" if with_rule_name else body


def _string_tokenizer() -> TokenizerInfo:
    # (no token at all: one padding id, since a mask needs a width of at least one)
    return TokenizerInfo([], vocab_size=1, stop_token_ids=[])


def _get_matcher_from_grammar(grammar: Union[Grammar, str], **kwargs) -> GrammarMatcher:
    """A matcher for strings only (its tokenizer has no tokens); it terminates
    without a stop token."""
    compiled = GrammarCompiler(_string_tokenizer(), cache_enabled=False).compile_grammar(grammar)
    kwargs.setdefault("terminate_without_stop_token", True)
    return GrammarMatcher(compiled, **kwargs)


def _get_matcher_from_grammar_and_tokenizer_info(grammar: Union[Grammar, str],
                                                 tokenizer_info: Optional[TokenizerInfo] = None,
                                                 **kwargs) -> GrammarMatcher:
    info = _string_tokenizer() if tokenizer_info is None else tokenizer_info
    compiled = GrammarCompiler(info, cache_enabled=False).compile_grammar(grammar)
    return GrammarMatcher(compiled, **kwargs)


def _is_grammar_accept_string(grammar: Union[Grammar, str], input_str: Union[str, bytes], *,
                              debug_print: bool = False, print_time: bool = False,
                              require_termination: bool = True) -> bool:
    """Whether the grammar accepts ``input_str`` (as a whole string of the grammar,
    or with ``require_termination=False`` as a prefix of one)."""
    matcher = _get_matcher_from_grammar(grammar)
    start = time.monotonic_ns()
    accepted = matcher.accept_string(input_str, debug_print=debug_print)
    if print_time:
        print(f"Accepting {input_str!r}, result: {accepted}, time: {(time.monotonic_ns() - start) / 1e3} us")
    if not accepted:
        return False
    return matcher.is_terminated() if require_termination else True


def _check_cpu_bitmask(bitmask: torch.Tensor, name: str = "bitmask") -> torch.Tensor:
    if not isinstance(bitmask, torch.Tensor):
        raise InvalidArgumentError(f"{name} must be a torch.Tensor, got {type(bitmask).__name__}")
    if bitmask.device.type != "cpu":
        raise InvalidArgumentError(f"{name} must be on the CPU, got {bitmask.device}")
    if bitmask.dtype != bitmask_dtype:
        raise InvalidArgumentError(f"{name} must be of dtype {bitmask_dtype}, got {bitmask.dtype}")
    if bitmask.dim() not in (1, 2):
        raise InvalidArgumentError(f"{name} must be 1-D or 2-D, got {bitmask.dim()}-D")
    return bitmask if bitmask.dim() == 2 else bitmask.unsqueeze(0)


def _row_bits(bitmask: torch.Tensor, vocab_size: int, index: int) -> torch.Tensor:
    rows = _check_cpu_bitmask(bitmask)
    vocab_size, index = as_index(vocab_size, "vocab_size"), as_index(index, "index")
    if not 0 <= vocab_size <= rows.shape[1] * 32:
        raise InvalidArgumentError(f"vocab_size {vocab_size} does not fit a bitmask of {rows.shape[1]} words")
    if bitmask.dim() == 2 and not 0 <= index < rows.shape[0]:
        raise InvalidArgumentError(f"index {index} is out of range for a bitmask of {rows.shape[0]} rows")
    row = rows[index if bitmask.dim() == 2 else 0]
    shifts = torch.arange(32, dtype=torch.int32)
    return ((row.unsqueeze(-1) >> shifts) & 1).reshape(-1)[:vocab_size].bool()


def _get_masked_tokens_from_bitmask(bitmask: torch.Tensor, vocab_size: int, index: int = 0) -> List[int]:
    """The ids in ``[0, vocab_size)`` whose bit is cleared in row ``index`` (a 1-D
    bitmask is its own row): the tokens the mask rejects."""
    return torch.nonzero(~_row_bits(bitmask, vocab_size, index)).flatten().tolist()


def _is_single_token_bitmask(bitmask: torch.Tensor, vocab_size: int, index: int = 0) -> Tuple[bool, int]:
    """Whether row ``index`` allows exactly one token, and that token (else -1)."""
    allowed = torch.nonzero(_row_bits(bitmask, vocab_size, index)).flatten().tolist()
    return (True, allowed[0]) if len(allowed) == 1 else (False, -1)


def bool_mask_to_bitmask(bool_mask: torch.Tensor) -> torch.Tensor:
    """A 2-D bool mask (True: allowed) packed into an int32 bitmask; the bits past
    the last column are set (allowed), as XGrammar pads them."""
    if not isinstance(bool_mask, torch.Tensor) or bool_mask.dim() != 2:
        raise InvalidArgumentError("bool_mask must be a 2-D torch.Tensor")
    rows, width = bool_mask.shape
    words = (width + 31) // 32
    bits = torch.ones((rows, words * 32), dtype=torch.int64, device=bool_mask.device)
    bits[:, :width] = bool_mask.to(torch.int64)
    weights = torch.tensor([1 << i for i in range(32)], dtype=torch.int64, device=bool_mask.device)
    packed = (bits.view(rows, words, 32) * weights).sum(dim=2)
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def bitmask_to_bool_mask(bit_mask: torch.Tensor, vocab_size: Optional[int] = None) -> torch.Tensor:
    """A CPU int32 bitmask unpacked into a bool mask of ``vocab_size`` columns
    (default: all 32 bits of every word); True where the token is allowed."""
    rows = _check_cpu_bitmask(bit_mask, "bit_mask")
    width = rows.shape[1] * 32
    vocab_size = width if vocab_size is None else as_index(vocab_size, "vocab_size")
    if not 0 <= vocab_size <= width:
        raise InvalidArgumentError(f"vocab_size {vocab_size} is larger than the {width} tokens the bitmask holds")
    shifts = torch.arange(32, dtype=torch.int32)
    return ((rows.unsqueeze(-1) >> shifts) & 1).reshape(rows.shape[0], -1)[:, :vocab_size].bool()


def _traverse_draft_tree(retrieve_next_token, retrieve_next_sibling, draft_tokens, matcher: GrammarMatcher,
                         allocate_token_bitmask, time_threshold: float = -1.0) -> bool:
    """The older spelling of :meth:`GrammarMatcher.traverse_draft_tree`."""
    return matcher.traverse_draft_tree(retrieve_next_token, retrieve_next_sibling, draft_tokens,
                                       allocate_token_bitmask, time_threshold)

