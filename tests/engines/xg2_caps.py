"""What the installed xg2_plugin can do yet, for the engine suites' xfail marks: structural
tags (xg2_plugin.structural_tag) and TagDispatch in the core (triggered tags) land with
issue 24. A test marked with these runs as an ordinary test once its capability exists, and
fails (strict) if it passes while the capability is missing."""
from __future__ import annotations

import importlib.util

import pytest


def _has_structural_tags() -> bool:
    import xg2_plugin as xg2

    return hasattr(xg2.GrammarCompiler, "compile_structural_tag")


def _has_tag_dispatch() -> bool:
    import xg2_plugin as xg2

    if not _has_structural_tags():
        return False
    tag = {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<a"],
        "tags": [{"type": "tag", "begin": "<a>", "content": {"type": "const_string", "value": "x"},
                  "end": "</a>"}]}}
    try:
        xg2.Grammar.from_structural_tag(tag)
    except xg2.GrammarError as e:
        if "TagDispatch" in str(e):
            return False
        raise
    return True


STRUCTURAL_TAGS = _has_structural_tags()
TAG_DISPATCH = _has_tag_dispatch()

needs_structural_tags = pytest.mark.xfail(
    not STRUCTURAL_TAGS, strict=True, reason="structural tags land with issue 24")
needs_tag_dispatch = pytest.mark.xfail(
    not TAG_DISPATCH, strict=True, reason="structural tags and TagDispatch in the core land with issue 24")
# vLLM 0.33's qwen3_coder parser imports ijson, which the vllm venv's recipe does not install
needs_ijson = pytest.mark.xfail(
    importlib.util.find_spec("ijson") is None, strict=True,
    reason="vLLM's qwen3_coder tool parser needs ijson (not in the vllm venv recipe)")
