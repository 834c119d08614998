"""xg2 reaches SGLang the way a user's install does: the `sglang.srt.plugins` entry point
run by SGLang's plugin loader, then `--grammar-backend xg2` through SGLang's argparse."""
from importlib.metadata import entry_points

import pytest
from sgl_helpers import server_args


def test_entry_point_is_installed_and_loads_register():
    eps = [ep for ep in entry_points(group="sglang.srt.plugins") if ep.name == "xg2"]
    assert len(eps) == 1
    assert eps[0].value == "xg2_plugin.adapters.sglang_plugin:register"
    from xg2_plugin.adapters import sglang_plugin

    assert eps[0].load() is sglang_plugin.register


def test_plugin_loader_registers_the_backend_and_the_choice(factory):
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from xg2_plugin.adapters.sglang_plugin import create_backend

    assert GRAMMAR_BACKEND_REGISTRY["xg2"] is create_backend is factory
    assert GRAMMAR_BACKEND_CHOICES.count("xg2") == 1


def test_register_is_idempotent(factory):
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from xg2_plugin.adapters.sglang_plugin import register

    before = list(GRAMMAR_BACKEND_CHOICES)
    register()
    register()
    assert GRAMMAR_BACKEND_CHOICES == before
    assert GRAMMAR_BACKEND_REGISTRY["xg2"] is factory


def test_grammar_backend_flag_accepts_xg2(factory):
    from sglang.srt.server_args import ServerArgs

    args = server_args()
    assert type(args) is ServerArgs and args.grammar_backend == "xg2"
    # the choices are enforced: a name nobody registered is refused by the same parser
    with pytest.raises(SystemExit):
        server_args("--grammar-backend", "xg3")


def test_missing_hook_fails_loudly_with_the_version(monkeypatch, factory):
    """A future SGLang that moved a hook: register() names the version, not an ImportError."""
    import sglang.srt.arg_groups.choices as choices
    from xg2_plugin.adapters import sglang_plugin

    monkeypatch.delattr(choices, "add_grammar_backend_choices")
    with pytest.raises(RuntimeError, match=r"SGLang 0\.5\.23 lacks a grammar-backend registration hook"):
        sglang_plugin.register()


def test_factory_builds_our_backend_without_reasoning(backend):
    from xg2_plugin.adapters.sglang_backend import XG2GrammarBackend

    assert type(backend) is XG2GrammarBackend
    assert backend.is_support_token_filter


def test_factory_reads_the_whitespace_flag(factory, tokenizer, vocab_size):
    compact = factory(server_args("--constrained-json-disable-any-whitespace"), tokenizer, vocab_size,
                      {tokenizer.eos_token_id})
    assert compact.any_whitespace is False
    grammar = compact.dispatch_json('{"type": "object", "properties": {"a": {"type": "integer"}}}')
    assert not grammar.matcher.accept_string('{ "a"')  # no whitespace after '{'
    assert grammar.copy().matcher.accept_string('{"a": 1}')  # (XGrammar's compact separators)
