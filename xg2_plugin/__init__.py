"""xg2_plugin: structured generation for LLM serving, with XGrammar's Python API.

    import xg2_plugin as xgr
    info = xgr.TokenizerInfo.from_huggingface(tokenizer)
    compiled = xgr.GrammarCompiler(info).compile_grammar(ebnf_text)
    matcher = xgr.GrammarMatcher(compiled)
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    matcher.fill_next_token_bitmask(bitmask)     # per step, then apply and sample
    matcher.accept_token(token_id)

The bitmask helpers need torch and are imported on first use.
"""

from . import _frontend_build


def _stamp() -> dict:
    try:
        from ._frontend_stamp import SOURCES
    except ImportError:
        return {}
    return SOURCES


_frontend_build.use_current_sources(__name__, __path__[0], _stamp())

from ._errors import (  # noqa: E402
    DeserializeFormatError,
    DeserializeVersionError,
    GrammarError,
    InternalError,
    InvalidArgumentError,
    InvalidJSONError,
    InvalidStructuralTagError,
    LimitExceededError,
    MatcherStateError,
    OutOfMemoryError,
    XG2Error,
)
from . import exception  # noqa: E402  (as xgrammar.exception)
from ._native import lib as _lib
from .compiler import CompiledGrammar, GrammarCompiler
from .grammar import Grammar
from .matcher import BatchGrammarMatcher, GrammarMatcher
from .serialization import get_serialization_version
from .tokenizer import TokenizerInfo, VocabType

__version__ = "0.1.0"

if _lib.xg2_abi_version() != _lib.XG2_ABI_VERSION:  # a stale build next to new sources
    raise ImportError(
        f"xg2_plugin native core ABI {_lib.xg2_abi_version()} does not match the header "
        f"({_lib.XG2_ABI_VERSION}); rebuild with pip install -e ."
    )

_BITMASK_NAMES = (
    "bitmask_dtype",
    "get_bitmask_shape",
    "allocate_token_bitmask",
    "reset_token_bitmask",
    "apply_token_bitmask_inplace",
)


# Structural tags need pydantic (half the package's import time): loaded on first use.
_STRUCTURAL_TAG_NAMES = {
    "StructuralTag": "structural_tag",
    "StructuralTagItem": "structural_tag",
    "get_model_structural_tag": "structural_tag.model_formats",
    "get_builtin_structural_tag": "structural_tag.model_formats",
    "register_model_structural_tag": "structural_tag.model_formats",
}


def __getattr__(name):
    if name in _STRUCTURAL_TAG_NAMES:
        import importlib

        return getattr(importlib.import_module(f".{_STRUCTURAL_TAG_NAMES[name]}", __name__), name)
    if name == "structural_tag":  # the format classes, as xgrammar.structural_tag
        import importlib

        return importlib.import_module(".structural_tag", __name__)
    if name in _BITMASK_NAMES:
        from . import bitmask

        return getattr(bitmask, name)
    if name in ("testing", "contrib", "kernels"):  # (lazy: testing imports torch)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    if name == "hf":  # (xgr.hf, as XGrammar exports it; imports transformers)
        from .contrib import hf

        return hf
    raise AttributeError(f"module 'xg2_plugin' has no attribute {name!r}")


__all__ = [
    "TokenizerInfo",
    "VocabType",
    "Grammar",
    "GrammarCompiler",
    "CompiledGrammar",
    "GrammarMatcher",
    "BatchGrammarMatcher",
    "StructuralTag",
    "StructuralTagItem",
    "structural_tag",
    "get_model_structural_tag",
    "get_builtin_structural_tag",
    "register_model_structural_tag",
    "exception",
    "testing",
    "hf",
    "get_serialization_version",
    "DeserializeFormatError",
    "DeserializeVersionError",
    "InvalidJSONError",
    "InvalidStructuralTagError",
    "XG2Error",
    "GrammarError",
    "InvalidArgumentError",
    "LimitExceededError",
    "MatcherStateError",
    "OutOfMemoryError",
    "InternalError",
    *_BITMASK_NAMES,
]
