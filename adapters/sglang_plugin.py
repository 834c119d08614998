"""SGLang's `sglang.srt.plugins` entry point: makes `--grammar-backend xg2` work.

SGLang starts its schedulers with spawn and loads general plugins in every process
(`sglang.srt.plugins.load_plugins`), so registering here reaches the process that
builds the grammar backend.  Nothing is imported from SGLang until `register()` runs.
"""
from __future__ import annotations

NAME = "xg2"


def _sglang_version() -> str:
    try:
        from importlib.metadata import version

        return version("sglang")
    except Exception:  # (a source checkout without metadata)
        return "unknown"


def _sglang_names():
    """SGLang's registration hooks; a clear error naming the version when one moved."""
    try:
        from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
        from sglang.srt.constrained.base_grammar_backend import (
            GRAMMAR_BACKEND_REGISTRY,
            register_grammar_backend,
        )
    except ImportError as e:
        raise RuntimeError(
            f"xg2: SGLang {_sglang_version()} lacks a grammar-backend registration hook the xg2 "
            f"plugin needs ({e}); xg2 supports SGLang 0.5.23"
        ) from e
    return GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices, GRAMMAR_BACKEND_REGISTRY, register_grammar_backend


def register() -> None:
    """Register the `xg2` grammar backend and CLI choice (idempotent)."""
    choices, add_choices, registry, register_backend = _sglang_names()
    if NAME not in choices:
        add_choices([NAME])
    if registry.get(NAME) is not create_backend:
        register_backend(NAME, create_backend)


def _setting(server_args, name: str, default=None):
    """A server setting: the resolved one in a running scheduler (where `--reasoning-parser
    auto` has become a parser's name), else the raw ServerArgs (a process that published
    no config, such as a test)."""
    try:
        from sglang.srt.runtime_context import get_serving

        return getattr(get_serving(), name)
    except (ImportError, ValueError, AttributeError):  # (ValueError: "namespace not published")
        return getattr(server_args, name, default)


def create_backend(server_args, tokenizer, vocab_size: int, eos_token_ids=None):
    """SGLang's factory signature.  SGLang returns a registered backend as it is, never
    wrapped for reasoning: with `--reasoning-parser` this wraps itself, so the thinking
    text stays unconstrained and the grammar applies after the think-end tokens."""
    from .sglang_backend import XG2GrammarBackend

    backend = XG2GrammarBackend(
        tokenizer,
        vocab_size,
        eos_token_ids,
        any_whitespace=not _setting(server_args, "constrained_json_disable_any_whitespace", False),
        max_whitespace_cnt=_setting(server_args, "constrained_json_max_whitespace_cnt"),
    )
    parser_name = _setting(server_args, "reasoning_parser")
    if not parser_name:
        return backend
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    if hasattr(ReasonerGrammarBackend, "_make_grammar_object"):  # (keeps our one-call batched fill)
        from .sglang_reasoning import XG2ReasonerBackend as ReasonerGrammarBackend

    parser = ReasoningParser(model_type=parser_name, stream_reasoning=False, tokenizer=tokenizer)
    if not parser.detector.get_think_end_token_ids(tokenizer):  # (as SGLang: no end, no wrap)
        return backend
    return ReasonerGrammarBackend(backend, parser, tokenizer,
                                  enable_strict_thinking=bool(_setting(server_args, "enable_strict_thinking", False)))
