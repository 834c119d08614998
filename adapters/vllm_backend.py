"""xg2 as a vLLM structured-output backend (vLLM 0.32 and 0.33 v1 engine).

`Xg2Backend` / `Xg2Grammar` implement vLLM's `StructuredOutputBackend` /
`StructuredOutputGrammar`; `validate_request` is the request-time check the plugin
(vllm_plugin.py) hooks into `SamplingParams`, so a bad spec is an HTTP 400 naming what is
wrong instead of a request failing inside the engine. Imported only under vLLM.
"""
from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, List, Optional, Tuple

import vllm.envs
from vllm.v1.structured_output.backend_types import (
    StructuredOutputBackend,
    StructuredOutputGrammar,
    StructuredOutputOptions,
)
from vllm.v1.structured_output.utils import grammar_is_likely_lark

import xg2_plugin as xg2
from xg2_plugin._errors import InvalidArgumentError
# the front-ends load with the backend, at server start, not in the first request's
# compile (their imports are most of a cold process's first structural tag)
import xg2_plugin.json_schema  # noqa: E402,F401
import xg2_plugin.structural_tag  # noqa: E402,F401

BACKEND_NAME = "xg2"
_JSON_OBJECT_SCHEMA = '{"type": "object"}'


# ---- the spec of one request -> a compiled grammar ----


def _cache_limit_bytes() -> int:
    # The operator's existing knob for the built-in backend's cache (default 512 MiB).
    return max(0, int(getattr(vllm.envs, "VLLM_XGRAMMAR_CACHE_MB", 512))) * 1024 * 1024


def _compact_json(node: Any) -> None:
    """Every JSON a structural tag constrains written without whitespace: each
    json_schema format gets max_whitespace_cnt 0 unless it sets a number (vLLM's own
    tags spell out `"max_whitespace_cnt": null`)."""
    if isinstance(node, list):
        for item in node:
            _compact_json(item)
    elif isinstance(node, dict):
        if node.get("type") == "json_schema" and node.get("max_whitespace_cnt") is None:
            node["max_whitespace_cnt"] = 0
        for key, value in node.items():
            if key != "json_schema":  # (a schema, not a format)
                _compact_json(value)


def _legacy_tag(tag: dict) -> dict:
    """vLLM's legacy `{structures, triggers}` shape as the `{format: ...}` shape."""
    structures, triggers = tag.get("structures"), tag.get("triggers")
    if not isinstance(structures, list):
        raise InvalidArgumentError("structural tag: 'structures' must be a list")
    if not isinstance(triggers, list) or not all(isinstance(t, str) for t in triggers):
        raise InvalidArgumentError("structural tag: 'triggers' must be a list of strings")
    tags = []
    for i, s in enumerate(structures):
        if not isinstance(s, dict) or not all(k in s for k in ("begin", "schema", "end")):
            raise InvalidArgumentError(f"structural tag: structures[{i}] must have begin, schema and end")
        schema = s["schema"]
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as e:
                raise InvalidArgumentError(f"structural tag: structures[{i}].schema is not JSON: {e}") from None
        tags.append({"type": "tag", "begin": s["begin"], "end": s["end"],
                     "content": {"type": "json_schema", "json_schema": schema}})
    return {"type": "structural_tag",
            "format": {"type": "triggered_tags", "triggers": triggers, "tags": tags}}


def structural_tag_value(spec: str, compact: bool) -> dict:
    """A request's structural tag (either shape) as one dict for compile_structural_tag."""
    try:
        tag = json.loads(spec)
    except ValueError as e:
        raise InvalidArgumentError(f"the structural tag is not valid JSON: {e}") from None
    if not isinstance(tag, dict):
        raise InvalidArgumentError("the structural tag must be a JSON object")
    if "structures" in tag:
        tag = _legacy_tag(tag)
    if compact:
        _compact_json(tag)
    return tag


def _choices(spec: str) -> list:
    try:
        choices = json.loads(spec)
    except ValueError as e:
        raise InvalidArgumentError(f"choice must be a JSON list of strings: {e}") from None
    return choices


def compile_spec(compiler: "xg2.GrammarCompiler", request_type: StructuredOutputOptions,
                 spec: str, compact: bool) -> "xg2.CompiledGrammar":
    """Compile one request's spec. `compact` (disable_any_whitespace): JSON without
    whitespace, the separators "," and ":"."""
    ws = {"any_whitespace": False, "separators": (",", ":")} if compact else {}
    if request_type == StructuredOutputOptions.JSON:
        return compiler.compile_json_schema(spec, **ws)
    if request_type == StructuredOutputOptions.JSON_OBJECT:
        return compiler.compile_json_schema(_JSON_OBJECT_SCHEMA, **ws)
    if request_type == StructuredOutputOptions.REGEX:
        return compiler.compile_regex(spec)
    if request_type == StructuredOutputOptions.CHOICE:
        return compiler.compile_choices(_choices(spec))
    if request_type == StructuredOutputOptions.GRAMMAR:
        if grammar_is_likely_lark(spec):
            return compiler.compile_lark(spec)
        return compiler.compile_grammar(spec)
    if request_type == StructuredOutputOptions.STRUCTURAL_TAG:
        return compiler.compile_structural_tag(structural_tag_value(spec, compact))
    raise InvalidArgumentError(f"xg2 does not support the structured output type {request_type!s}")


def tokenizer_info(tokenizer: Any, vocab_size: int) -> "xg2.TokenizerInfo":
    """The tokenizer's vocabulary padded to the model's (vocab_size: the mask width).
    Special tokens are never matched as text, so JSON never contains one."""
    from vllm.utils.mistral import is_mistral_tokenizer

    if is_mistral_tokenizer(tokenizer):
        kind = xg2.VocabType.RAW if tokenizer.is_tekken else xg2.VocabType.BYTE_FALLBACK
        return xg2.TokenizerInfo(list(tokenizer.vocab), kind, vocab_size=vocab_size,
                                 stop_token_ids=[tokenizer.eos_token_id], add_prefix_space=True,
                                 special_token_ids=list(getattr(tokenizer, "all_special_ids", []) or []))
    return xg2.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)


def make_compiler(info: "xg2.TokenizerInfo") -> "xg2.GrammarCompiler":
    return xg2.GrammarCompiler(info, max_threads=8, cache_enabled=True,
                               cache_limit_bytes=_cache_limit_bytes())


def fill_threads() -> int:
    """Native threads for a step's fills: as many as vLLM gives its own fill pool (half
    the CPUs, 1 to 8); more only contend with the engine's other threads."""
    return max(1, min((os.cpu_count() or 1) // 2, 8))


# ---- request-time validation (API process) ----

_validators: "dict[Tuple[int, int], Tuple[Any, xg2.GrammarCompiler]]" = {}
_validators_lock = threading.Lock()


def _validator(tokenizer: Any, vocab_size: int) -> "xg2.GrammarCompiler":
    """One compiler per tokenizer in the API process: a request is compiled there as the
    engine will compile it (the masks themselves are computed only by a matcher), and
    the cache makes a repeated spec (the same tools each turn) cheap."""
    key = (id(tokenizer), vocab_size)
    with _validators_lock:
        hit = _validators.get(key)
        if hit is not None and hit[0] is tokenizer:
            return hit[1]
    compiler = make_compiler(tokenizer_info(tokenizer, vocab_size))
    with _validators_lock:
        if len(_validators) >= 4:  # (tokenizers come and go only in tests)
            _validators.clear()
        _validators[key] = (tokenizer, compiler)
    return compiler


def validate_request(so_params: Any, tokenizer: Any, vocab_size: int, compact: bool) -> None:
    """Compile the request's spec as the engine will; raises the library's own error
    (a ValueError naming the keyword or position) when it cannot."""
    from vllm.v1.structured_output.request import get_structured_output_key

    request_type, spec = get_structured_output_key(so_params)
    compile_spec(_validator(tokenizer, vocab_size), request_type, spec, compact)


# ---- the engine-side backend ----


@dataclass
class Xg2Backend(StructuredOutputBackend):
    """One per engine: a compiler over the model's vocabulary (cache bounded in bytes by
    VLLM_XGRAMMAR_CACHE_MB), and a batch filler for one native call per step."""

    def __post_init__(self) -> None:
        config = self.vllm_config.structured_outputs_config
        self.disable_any_whitespace = bool(config.disable_any_whitespace)
        self.compiler = make_compiler(tokenizer_info(self.tokenizer, self.vocab_size))
        spec = self.vllm_config.speculative_config
        self.num_speculative_tokens = spec.num_speculative_tokens if spec is not None else 0
        self._batch = xg2.BatchGrammarMatcher(max_threads=fill_threads())
        self._pending: Optional[List[Tuple["xg2.GrammarMatcher", int, Any]]] = None

    def compile_grammar(self, request_type: StructuredOutputOptions, grammar_spec: str,
                        stop_token_ids: Optional[set] = None) -> "Xg2Grammar":
        compiled = compile_spec(self.compiler, request_type, grammar_spec, self.disable_any_whitespace)
        matcher = xg2.GrammarMatcher(
            compiled,
            override_stop_tokens=sorted(stop_token_ids) if stop_token_ids else None,
            # drafts are validated (accept + rollback) and vLLM checks one reasoning-end token
            max_rollback_tokens=self.num_speculative_tokens + 1,
        )
        return Xg2Grammar(matcher=matcher, backend=self)

    def allocate_token_bitmask(self, max_num_seqs: int):
        return xg2.allocate_token_bitmask(max_num_seqs, self.vocab_size)

    def destroy(self) -> None:
        self.compiler.clear_cache()

    @contextmanager
    def batched_fills(self) -> Iterator[None]:
        """Within it, fill_bitmask only records its row; on exit every recorded row is
        filled by one native call (on native threads, without the GIL). Only where no
        token is accepted between fills (no speculative decoding)."""
        self._pending = pending = []
        try:
            yield
        finally:
            self._pending = None
        if pending:
            bitmask = pending[0][2]
            self._batch.batch_fill_next_token_bitmask(
                [m for m, _, _ in pending], bitmask, [i for _, i, _ in pending])


@dataclass
class Xg2Grammar(StructuredOutputGrammar):
    """One per request: a matcher over the cached compiled grammar."""

    matcher: "xg2.GrammarMatcher"
    backend: Xg2Backend = field(repr=False)
    num_processed_tokens: int = field(default=0, repr=False)

    def accept_tokens(self, request_id: str, tokens: list) -> bool:
        # Tokens after termination are ignored, as the built-in backend does.
        for token in tokens:
            if self.matcher.is_terminated():
                break
            if not self.matcher.accept_token(token):
                return False
            self.num_processed_tokens += 1
        return True

    def validate_tokens(self, tokens: list) -> list:
        accepted: List[int] = []
        for token in tokens:
            if self.matcher.is_terminated() or not self.matcher.accept_token(token):
                break
            accepted.append(token)
        if accepted:
            self.matcher.rollback(len(accepted))
        return accepted

    def rollback(self, num_tokens: int) -> None:
        self.matcher.rollback(num_tokens)
        self.num_processed_tokens -= num_tokens

    def fill_bitmask(self, bitmask, batch_index: int) -> None:
        pending = self.backend._pending
        if pending is not None and (not pending or pending[0][2] is bitmask):
            pending.append((self.matcher, batch_index, bitmask))  # (list.append: atomic)
        else:
            self.matcher.fill_next_token_bitmask(bitmask, batch_index)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.matcher.reset()
        self.num_processed_tokens = 0
