"""Hugging Face transformers integration: a ``LogitsProcessor`` for ``model.generate()``.

    import xg2_plugin as xgr
    from xg2_plugin.contrib.hf import LogitsProcessor

    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
    compiled = xgr.GrammarCompiler(info).compile_grammar(ebnf_text)
    out = model.generate(
        **inputs,
        logits_processor=[LogitsProcessor(compiled)],   # a new one for every generate() call
        eos_token_id=tokenizer.eos_token_id,             # a stop token of the TokenizerInfo
        pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
    )

This module imports torch and transformers; it is only imported by users who have them.
"""

from __future__ import annotations

import time
from typing import List, Optional, Sequence, Union

import torch
import transformers

import xg2_plugin as xgr
from xg2_plugin._errors import InvalidArgumentError, MatcherStateError
from xg2_plugin.compiler import CompiledGrammar
from xg2_plugin.matcher import GrammarMatcher

__all__ = ["LogitsProcessor"]


class LogitsProcessor(transformers.LogitsProcessor):
    """Constrains ``model.generate()`` to a grammar, one :class:`GrammarMatcher` per batch row.

    Parameters
    ----------
    compiled_grammar
        One compiled grammar shared by every row, or a list with one grammar per row (its
        length must equal the batch size seen on the first call).  All grammars must be
        compiled for the same :class:`TokenizerInfo` vocabulary size.

    How it works
    ------------
    - The first call (the prompt step) creates the matchers and a bitmask; it accepts
      nothing, since ``input_ids`` then holds only the prompt.
    - Every later call first accepts the last generated token of each row
      (``input_ids[:, -1]``).  If a row's matcher rejects it, a ``MatcherStateError`` (a
      ``RuntimeError``) naming the row and the token is raised (this happens when the
      processor is reused, combined with processors that run after it and change the choice, or used with a decoding
      mode it does not support, such as beam search).
    - Then each row's mask is filled and applied with
      :func:`xg2_plugin.apply_token_bitmask_inplace`, the bitmask moved to the logits'
      device first.

    Finished rows and padding
    -------------------------
    Once a row's matcher has accepted a stop token it is terminated: its later tokens
    (the ``pad_token_id`` that ``generate()`` writes into finished rows) are not accepted,
    and its logits are masked to allow only the grammar's stop tokens.  So every row
    always has at least one allowed token (no all ``-inf`` row, hence no NaN when
    sampling), padding of finished rows keeps working whatever ``pad_token_id`` is, and a
    row whose stop token differs from ``generate()``'s ``eos_token_id`` keeps emitting the
    stop token instead of free text.  Pass an ``eos_token_id`` that is one of the
    TokenizerInfo's stop tokens so that ``generate()`` stops the row.

    Padded model vocabularies
    -------------------------
    When the logits are wider than the TokenizerInfo's ``vocab_size`` (a model whose
    ``lm_head`` is padded but whose TokenizerInfo was built without
    ``vocab_size=config.vocab_size``), the mask is applied with ``vocab_size`` set to the
    TokenizerInfo's size and the extra logits are set to ``-inf`` (those ids are no token
    and can never match).  Logits narrower than the TokenizerInfo's vocabulary raise
    ``InvalidArgumentError`` (a ``ValueError``).

    Notes
    -----
    - Single use: ``generate()`` does not tell the processor when a generation starts or
      ends, so create a new ``LogitsProcessor`` for every ``generate()`` call.  A second
      call with a different batch size raises; one with the same batch size would feed a
      fresh prompt to matchers that are mid-generation and fail or mis-constrain.
    - Supported: greedy and sampling decoding.  Not supported: beam search and assisted
      (speculative) decoding, which reorder or roll back rows behind the processor's back.
    - ``mask_times`` holds the seconds spent filling the masks of all rows at each call.
    """

    def __init__(self, compiled_grammar: Union[CompiledGrammar, Sequence[CompiledGrammar]]):
        grammars = (
            list(compiled_grammar) if isinstance(compiled_grammar, (list, tuple)) else [compiled_grammar]
        )
        if not grammars:
            raise InvalidArgumentError("LogitsProcessor needs at least one compiled grammar")
        for g in grammars:
            if not isinstance(g, CompiledGrammar):
                raise InvalidArgumentError(
                    f"LogitsProcessor needs xg2_plugin CompiledGrammar objects, got {type(g).__name__}"
                )
        sizes = {g.tokenizer_info.vocab_size for g in grammars}
        if len(sizes) != 1:
            raise InvalidArgumentError(f"the compiled grammars have different vocabulary sizes: {sorted(sizes)}")
        self._grammars: List[CompiledGrammar] = grammars
        self._per_row = isinstance(compiled_grammar, (list, tuple))
        self.vocab_size: int = sizes.pop()
        self.matchers: List[GrammarMatcher] = []
        self.batch_size = 0
        self._bitmask: Optional[torch.Tensor] = None
        self._stop_masks: List[Optional[torch.Tensor]] = []
        self._prompt_seen = False
        self.mask_times: List[float] = []

    def _start(self, batch_size: int) -> None:
        if self._per_row and len(self._grammars) != batch_size:
            raise InvalidArgumentError(
                f"{len(self._grammars)} compiled grammars were given for a batch of {batch_size} rows"
            )
        grammars = self._grammars if self._per_row else self._grammars * batch_size
        self.batch_size = batch_size
        self.matchers = [GrammarMatcher(g) for g in grammars]
        self._bitmask = xgr.allocate_token_bitmask(batch_size, self.vocab_size)
        self._stop_masks = [None] * batch_size

    def _stop_only_mask(self, row: int) -> torch.Tensor:
        """A bitmask row allowing only the row's stop tokens (built once per row)."""
        mask = self._stop_masks[row]
        if mask is None:
            mask = torch.zeros(self._bitmask.shape[1], dtype=torch.int32)
            for t in self.matchers[row].stop_token_ids:
                if 0 <= t < self.vocab_size:
                    word, bit = t >> 5, t & 31
                    # Bit 31 is the int32 sign bit: build the word in int64 and wrap.
                    value = (int(mask[word]) & 0xFFFFFFFF) | (1 << bit)
                    mask[word] = value - (1 << 32) if value >= 1 << 31 else value
            self._stop_masks[row] = mask
        return mask

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        batch_size, width = scores.shape[0], scores.shape[-1]
        if not self.matchers:
            self._start(batch_size)
        if input_ids.shape[0] != self.batch_size or batch_size != self.batch_size:
            raise MatcherStateError(
                f"this LogitsProcessor was started for a batch of {self.batch_size} rows but got "
                f"input_ids with {input_ids.shape[0]} and scores with {batch_size}; create a new "
                "LogitsProcessor for every generate() call (beam search is not supported)"
            )
        if width < self.vocab_size:
            raise InvalidArgumentError(
                f"the logits have {width} columns but the grammar's TokenizerInfo has "
                f"vocab_size {self.vocab_size}; build it with "
                "TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)"
            )

        if self._prompt_seen:
            last = input_ids[:, -1].tolist()
            for row, (matcher, token) in enumerate(zip(self.matchers, last)):
                if matcher.is_terminated():
                    continue  # a finished row: its token is generate()'s padding
                if not matcher.accept_token(token):
                    raise MatcherStateError(
                        f"row {row}: the grammar rejected generated token {token}; the "
                        "LogitsProcessor's mask was not respected (reused processor, another "
                        "processor after it, or an unsupported decoding mode)"
                    )
        self._prompt_seen = True

        start = time.perf_counter()
        for row, matcher in enumerate(self.matchers):
            if matcher.is_terminated():
                self._bitmask[row] = self._stop_only_mask(row)
            else:
                matcher.fill_next_token_bitmask(self._bitmask, row)
        self.mask_times.append(time.perf_counter() - start)

        bitmask = self._bitmask.to(scores.device)
        xgr.apply_token_bitmask_inplace(scores, bitmask, vocab_size=self.vocab_size)
        if width > self.vocab_size:
            scores[:, self.vocab_size :] = float("-inf")
        return scores
