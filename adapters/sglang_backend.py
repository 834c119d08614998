"""xg2 as an SGLang (0.5.23) grammar backend: `--grammar-backend xg2`.

Imported only by SGLang's plugin loader (sglang_plugin.register) and the tests run in
SGLang's venv: importing xg2_plugin never imports SGLang.

One `XG2GrammarBackend` per scheduler compiles requests (on SGLang's thread pool) into
`XG2Grammar` objects.  SGLang caches the first object of a key and hands each later
request `copy()` of it: a fresh matcher over the same compiled grammar.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
from collections import OrderedDict
from typing import List, Optional, Tuple

import torch
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    GrammarRow,
    GrammarStats,
    InvalidGrammarObject,
)

import xg2_plugin as xgr
from xg2_plugin.bitmask import apply_token_bitmask_inplace, get_bitmask_shape
# the front-ends load with the backend, at server start, not in the first request's
# compile (their imports are most of a cold process's first structural tag)
import xg2_plugin.json_schema  # noqa: E402,F401
import xg2_plugin.structural_tag  # noqa: E402,F401

logger = logging.getLogger(__name__)

# How far back SGLang may roll a request (EAGLE drafts, jump-forward retokenizing);
# the matcher forgets older history, so its memory stays what the open rules need.
MAX_ROLLBACK_TOKENS = 200
# Bound of everything the backend caches: SGLang's own per-key cache of grammar
# objects (unbounded upstream) and the compiler's caches, in bytes.
def _cache_bytes_setting() -> int:
    text = os.environ.get("XG2_SGLANG_CACHE_BYTES", str(512 << 20))
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value <= 0:
        raise ValueError(f"XG2_SGLANG_CACHE_BYTES must be a positive number of bytes, got {text!r}")
    return value


DEFAULT_CACHE_BYTES = _cache_bytes_setting()
_ENTRY_OVERHEAD = 512  # bytes counted per cached entry beyond its key and compiled grammar
_ANY_JSON = "$$ANY$$"  # SGLang's key for "any JSON value" (json_object without a schema)


class _Collecting(threading.local):
    rows = None  # (mask, [(matcher, row)]) while fill_vocab_mask_batched gathers its rows


_collecting = _Collecting()


def _allocate(vocab_size: int, batch_size: int) -> torch.Tensor:
    # All allowed (-1) to start: rows SGLang does not fill stay unconstrained.  Pinned
    # where a GPU exists, so the host-to-device copy can really be non-blocking.
    return torch.full(get_bitmask_shape(batch_size, vocab_size), -1, dtype=torch.int32,
                      pin_memory=torch.cuda.is_available())


def _move(vocab_mask: torch.Tensor, device) -> torch.Tensor:
    return vocab_mask.to(device, non_blocking=True)


def _apply(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
    # Our kernels: Triton on CUDA, a torch path on the CPU.
    apply_token_bitmask_inplace(logits, vocab_mask)


def _set_token_filter(vocab_mask: torch.Tensor, token_ids: List[int], batch_idx: int,
                      is_allowed: bool = True, reset_vocab_mask: bool = True) -> None:
    """Strict thinking: allow (or forbid) `token_ids` in row `batch_idx`.  With
    `reset_vocab_mask` the row first forbids everything (allow) or allows everything
    (forbid); without it the listed bits are OR-ed in / cleared from what is there."""
    row = vocab_mask[batch_idx]
    if reset_vocab_mask:
        row.fill_(0 if is_allowed else -1)
    if not token_ids:
        return
    width = row.numel() * 32
    words: dict = {}
    for t in token_ids:
        t = int(t)
        if not 0 <= t < width:
            raise ValueError(f"xg2: token filter id {t} is out of range for a mask of {width} tokens")
        words[t >> 5] = words.get(t >> 5, 0) | (1 << (t & 31))
    index = torch.tensor(list(words), dtype=torch.long, device=row.device)
    bits = [w - (1 << 32) if w >= 1 << 31 else w for w in words.values()]  # (as int32)
    packed = torch.tensor(bits, dtype=torch.int32, device=row.device)
    if is_allowed:
        row[index] = row[index] | packed
    else:
        row[index] = row[index] & ~packed


class XG2Grammar(BaseGrammarObject):
    """One request's grammar state over a shared compiled grammar."""

    _batch = None  # the BatchGrammarMatcher of fill_vocab_mask_batched (made on first use)
    _batch_lock = threading.Lock()

    def __init__(self, compiled: "xgr.CompiledGrammar", stop_tokens: Optional[List[int]],
                 key: Tuple[str, str], stats: Optional[GrammarStats] = None) -> None:
        super().__init__()
        self.compiled = compiled
        self.stop_tokens = stop_tokens
        self.key = key
        self.matcher = xgr.GrammarMatcher(compiled, override_stop_tokens=stop_tokens,
                                          max_rollback_tokens=MAX_ROLLBACK_TOKENS)
        self.grammar_stats = stats
        self.num_accepted = 0

    def copy(self) -> "XG2Grammar":
        stats = self.grammar_stats
        if stats is not None:
            stats = dataclasses.replace(stats, is_cache_hit=True, tree_traversal_time=[])
        return XG2Grammar(self.compiled, self.stop_tokens, self.key, stats)

    @property
    def memory_size_bytes(self) -> int:
        return self.compiled.memory_size_bytes

    # ---- decoding ----

    def accept_token(self, token: int) -> None:
        if self.matcher.is_terminated():  # (tokens after the stop token are ignored, as upstream)
            return
        self.current_token = token
        if not self.matcher.accept_token(token):
            key_type, key_string = self.key
            raise ValueError(
                f"xg2: token {token} is not allowed by the {key_type} grammar after "
                f"{self.num_accepted} accepted tokens ({key_type}: {key_string[:200]!r})"
            )
        self.num_accepted += 1

    def rollback(self, k: int) -> None:
        self.matcher.rollback(k)
        self.num_accepted -= k

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    # ---- masks ----

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device) -> torch.Tensor:
        return _allocate(vocab_size, batch_size)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        pending = _collecting.rows
        if pending is not None and pending[0] is vocab_mask:  # (inside a batched fill: later, at once)
            pending[1].append((self.matcher, idx))
            return
        self.matcher.fill_next_token_bitmask(vocab_mask, idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: List[GrammarRow], vocab_mask: torch.Tensor) -> None:
        """All of a step's xg2 rows in ONE native call (threads in the core, the GIL
        released).  A wrapper (SGLang's reasoning object) fills its row through its own
        fill_vocab_mask; where that only calls ours, the row joins the batch."""
        pending: Tuple[torch.Tensor, list] = (vocab_mask, [])
        for e in entries:
            grammar = e.grammar
            if type(grammar) is XG2Grammar:
                pending[1].append((grammar.matcher, e.row))
                continue
            # (a wrapper that edits the row after our fill must see it filled: no deferral)
            _collecting.rows = pending if getattr(grammar, "defers_inner_fill", False) else None
            try:
                grammar.fill_vocab_mask(vocab_mask, e.row)
            finally:
                _collecting.rows = None
        if pending[1]:
            with XG2Grammar._batch_lock:
                if XG2Grammar._batch is None:
                    XG2Grammar._batch = xgr.BatchGrammarMatcher()
                XG2Grammar._batch.batch_fill_next_token_bitmask(
                    [m for m, _ in pending[1]], vocab_mask, indices=[r for _, r in pending[1]])

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device) -> torch.Tensor:
        return _move(vocab_mask, device)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        _apply(logits, vocab_mask)

    # ---- jump-forward (SGLang 0.5.23 never calls these; kept to its contract) ----

    def try_jump_forward(self, tokenizer) -> Optional[Tuple[List[int], str]]:
        forced = self.matcher.find_jump_forward_string()
        return ([], forced) if forced else None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int],
                            next_state: int) -> None:
        """The output was retokenized after a jump: undo back to the common prefix,
        then accept the new tokens."""
        common = 0
        for old, new in zip(old_output_ids, new_output_ids):
            if old != new:
                break
            common += 1
        if common < len(old_output_ids):
            self.rollback(len(old_output_ids) - common)
        for token in new_output_ids[common:]:
            self.accept_token(token)

    def __repr__(self) -> str:
        return f"XG2Grammar({self.key[0]}, accepted={self.num_accepted})"


def _tokenizer_info(tokenizer, vocab_size: int, eos_token_ids) -> Tuple["xgr.TokenizerInfo", Optional[List[int]]]:
    """Our TokenizerInfo for SGLang's tokenizer, and the stop tokens to override with."""
    eos = sorted(int(t) for t in eos_token_ids) if eos_token_ids else None
    if hasattr(tokenizer, "init_xgrammar"):  # SGLang's tiktoken / Mistral (Tekken) wrappers
        info, override = tokenizer.init_xgrammar()  # (an XGrammar TokenizerInfo: read its bytes)
        if info is None:
            raise ValueError(f"xg2: tokenizer {type(tokenizer).__name__} is not supported")
        # the model's vocab size: the mask width SGLang allocates (ids past the tokenizer: padding)
        keep = lambda ids: [int(t) for t in ids if 0 <= int(t) < vocab_size]  # noqa: E731
        ours = xgr.TokenizerInfo(list(info.decoded_vocab)[:vocab_size], xgr.VocabType.RAW,
                                 vocab_size=vocab_size, stop_token_ids=keep(info.stop_token_ids),
                                 special_token_ids=keep(info.special_token_ids))
        if isinstance(override, int):
            override = [override]
        return ours, (keep(override) if override else None)
    return xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=eos), None


def legacy_structural_tag(tag: dict) -> dict:
    """SGLang's legacy `{structures, triggers}` tag in the `{"format": ...}` shape."""
    tags = [{"begin": s["begin"], "end": s["end"],
             "content": {"type": "json_schema", "json_schema": s.get("schema") or {}}}
            for s in tag["structures"]]
    return {"type": "structural_tag",
            "format": {"type": "triggered_tags", "triggers": list(tag["triggers"]), "tags": tags,
                       "at_least_one": bool(tag.get("at_least_one", False)),
                       "stop_after_first": bool(tag.get("stop_after_first", False))}}


class XG2GrammarBackend(BaseGrammarBackend):
    """Compiles SGLang's requests on xg2 and keeps the results in a cache bounded in bytes."""

    def __init__(self, tokenizer, vocab_size: int, eos_token_ids=None, *, any_whitespace: bool = True,
                 max_whitespace_cnt: Optional[int] = None, cache_limit_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        super().__init__()
        self.tokenizer_info, self.stop_tokens = _tokenizer_info(tokenizer, vocab_size, eos_token_ids)
        self.vocab_size = vocab_size
        self.any_whitespace = any_whitespace
        self.max_whitespace_cnt = max_whitespace_cnt
        # The compiler's caches take half the bound, SGLang's cache of grammar objects
        # the other half (an object holds its compiled grammar alive).
        self.cache_limit_bytes = cache_limit_bytes
        self.compiler = xgr.GrammarCompiler(self.tokenizer_info, cache_limit_bytes=cache_limit_bytes // 2)
        self.cache: "OrderedDict[Tuple[str, str], BaseGrammarObject]" = OrderedDict()
        self._cache_sizes: dict = {}
        self._cache_bytes = 0
        self._cache_lock = threading.Lock()

    # ---- SGLang's cache of compiled objects, bounded in bytes (LRU) ----

    def get_cached_or_future_value(self, key, require_reasoning):
        with self._cache_lock:
            if key in self.cache:
                self.cache.move_to_end(key)
        return super().get_cached_or_future_value(key, require_reasoning)

    def set_cache(self, key, value) -> None:
        # (SGLang also caches failures: their keys count, so many bad specs stay bounded too)
        size = _ENTRY_OVERHEAD + len(key[0]) + len(key[1]) + getattr(value, "memory_size_bytes", 0)
        limit = self.cache_limit_bytes // 2
        with self._cache_lock:
            if key in self.cache:
                self._cache_bytes -= self._cache_sizes.pop(key)
                del self.cache[key]
            if size > limit:
                return
            self.cache[key] = value
            self._cache_sizes[key] = size
            self._cache_bytes += size
            while self._cache_bytes > limit:
                old, _ = self.cache.popitem(last=False)
                self._cache_bytes -= self._cache_sizes.pop(old)

    @property
    def cache_bytes(self) -> int:
        return self._cache_bytes

    def reset(self) -> None:
        with self._cache_lock:
            self.cache.clear()
            self._cache_sizes.clear()
            self._cache_bytes = 0
        self.compiler.clear_cache()

    # ---- compiling ----

    def _compile(self, key_type: str, key_string: str, what: str, compile_fn) -> BaseGrammarObject:
        try:
            compiled = compile_fn()
        except (xgr.XG2Error, ValueError, RecursionError) as e:
            # (a bad spec fails this request only, with the reason, as an HTTP 400)
            logger.info("xg2: invalid %s: %s", what, e)
            return InvalidGrammarObject(f"xg2: invalid {what}: {e}")
        except Exception as e:  # (a malformed spec the front-end did not foresee: same, logged)
            logger.exception("xg2: unexpected error compiling a %s", what)
            return InvalidGrammarObject(f"xg2: invalid {what}: {type(e).__name__}: {e}")
        return XG2Grammar(compiled, self.stop_tokens, (key_type, key_string),
                          GrammarStats(dispatch_type=key_type))

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        if key_string == _ANY_JSON:
            return self._compile("json", key_string, "JSON", self.compiler.compile_builtin_json_grammar)
        # (OpenAI json_object arrives as the schema '{"type": "object"}')
        return self._compile("json", key_string, "JSON schema", lambda: self.compiler.compile_json_schema(
            key_string, any_whitespace=self.any_whitespace, max_whitespace_cnt=self.max_whitespace_cnt))

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile("regex", key_string, "regex", lambda: self.compiler.compile_regex(key_string))

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        # EBNF always has "::="; a grammar without one is taken as Lark (`start: ...`).
        if "::=" not in key_string:
            return self._compile("ebnf", key_string, "Lark grammar", lambda: self.compiler.compile_lark(key_string))
        return self._compile("ebnf", key_string, "EBNF grammar", lambda: self.compiler.compile_grammar(key_string))

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        def compile_tag():
            try:
                tag = json.loads(key_string)
            except ValueError as e:
                raise ValueError(f"not JSON: {e}") from None
            if isinstance(tag, dict) and "structures" in tag and "triggers" in tag:
                tag = legacy_structural_tag(tag)
            return self.compiler.compile_structural_tag(json.dumps(tag))

        return self._compile("structural_tag", key_string, "structural tag", compile_tag)

    # ---- masks and the strict-thinking filter (the reasoning wrapper calls these) ----

    @property
    def is_support_token_filter(self) -> bool:
        return True

    @staticmethod
    def set_token_filter(vocab_mask, token_ids, batch_idx, is_allowed=True, reset_vocab_mask=True) -> None:
        _set_token_filter(vocab_mask, token_ids, batch_idx, is_allowed, reset_vocab_mask)

    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device) -> torch.Tensor:
        return _allocate(vocab_size, batch_size)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device) -> torch.Tensor:
        return _move(vocab_mask, device)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        _apply(logits, vocab_mask)

