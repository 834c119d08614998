"""Helpers of the SGLang suite (imported by its tests and conftest)."""
from __future__ import annotations

import argparse


def server_args(*extra: str):
    """A ServerArgs from SGLang's own command line parser and from_cli_args."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    ns = parser.parse_args(["--model-path", "unused-model", "--grammar-backend", "xg2", *extra])
    return ServerArgs.from_cli_args(ns)


def compiled(backend, key_type: str, key_string: str):
    """Compile as SGLang does (its dispatch), failing the test on an invalid object."""
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    grammar = backend._init_value_dispatch((key_type, key_string), False)
    assert not isinstance(grammar, InvalidGrammarObject), grammar.error_message
    return grammar


def encode(tokenizer, text: str):
    return tokenizer.encode(text, add_special_tokens=False)


def sglang_function(relative_path: str, name: str):
    """One function of SGLang's own source, by name, without importing its module (some
    modules import torchvision, which the CPU venv does not have).  Its body runs
    unchanged, with torch and typing in scope."""
    import ast
    import typing
    from pathlib import Path

    import sglang
    import torch

    path = Path(sglang.__file__).parent / relative_path
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    scope = {"torch": torch, **{k: getattr(typing, k) for k in typing.__all__}}
    exec(compile(ast.Module([node], []), str(path), "exec"), scope)
    return scope[name]
