"""The plugin itself: the entry point under vLLM only, idempotent patches, the CLI flag,
and one native call filling a whole step's rows (the same rows as filled one by one),
from several threads too."""
from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
import xg2_plugin as xg2
from conftest import MODEL_VOCAB, make_request
from masks import bits


def _params(**kw):
    from vllm.sampling_params import StructuredOutputsParams

    return StructuredOutputsParams(**kw)


def test_entry_point_is_installed_and_loads_under_vllm():
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="vllm.general_plugins") if e.name == "xg2"]
    assert ep.value == "xg2_plugin.adapters.vllm_plugin:register"
    assert callable(ep.load())


def test_importing_xg2_plugin_imports_no_engine():
    code = ("import sys, xg2_plugin, xg2_plugin.adapters; "
            "bad = [m for m in ('vllm', 'sglang') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-P", "-c", code], check=True, timeout=300)


def test_register_is_idempotent(plugins_loaded):
    from vllm.config.structured_outputs import StructuredOutputsConfig
    from vllm.sampling_params import SamplingParams
    from vllm.v1.structured_output import StructuredOutputManager

    from xg2_plugin.adapters.vllm_plugin import register

    before = (SamplingParams._validate_structured_outputs, StructuredOutputManager.grammar_init,
              StructuredOutputManager.grammar_bitmask)
    register()
    register()
    after = (SamplingParams._validate_structured_outputs, StructuredOutputManager.grammar_init,
             StructuredOutputManager.grammar_bitmask)
    assert before == after
    import typing

    names = typing.get_args(StructuredOutputsConfig.__dataclass_fields__["backend"].type)
    assert names.count("xg2") == 1 and "xgrammar" in names


def test_missing_name_fails_loudly_with_the_version(plugins_loaded):
    import vllm

    from xg2_plugin.adapters import vllm_plugin

    class Empty:
        pass

    with pytest.raises(RuntimeError, match=f"vLLM {vllm.__version__}.*not supported"):
        vllm_plugin._wrap(Empty, "grammar_init", lambda f: f)


def _parser():
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    try:
        from vllm.entrypoints.common.cli_args import make_arg_parser  # 0.33
    except ImportError:
        from vllm.entrypoints.openai.cli_args import make_arg_parser  # 0.32
    return make_arg_parser(FlexibleArgumentParser())


def test_cli_accepts_the_backend(plugins_loaded, model_dir):
    from vllm.engine.arg_utils import EngineArgs

    parser = _parser()
    args = parser.parse_args(["--model", model_dir, "--structured-outputs-config.backend", "xg2"])
    assert EngineArgs.from_cli_args(args).structured_outputs_config.backend == "xg2"
    args = parser.parse_args(["--model", model_dir, "--structured-outputs-config",
                              '{"backend": "xg2", "disable_any_whitespace": true}'])
    config = EngineArgs.from_cli_args(args).structured_outputs_config
    assert config.backend == "xg2" and config.disable_any_whitespace
    with pytest.raises((SystemExit, ValueError, Exception)) as info:
        args = parser.parse_args(["--model", model_dir, "--structured-outputs-config.backend", "xg3"])
        EngineArgs.from_cli_args(args)
    assert "xg3" in str(info.value) or info.type is SystemExit


def _mixed_requests(manager, tokenizer, n):
    kinds = [dict(regex=r"[a-z]+\d*"), dict(json={"type": "array", "items": {"type": "integer"}}),
             dict(choice=["alpha", "beta"]), dict(json_object=True)]
    prefixes = ["ab", "[1, ", "al", '{"k":']
    reqs = []
    for i in range(n):
        req = make_request(manager, _params(**kinds[i % 4]))
        for t in tokenizer.encode(prefixes[i % 4][: i % 3 + 1], add_special_tokens=False):
            assert manager.accept_tokens(req, [t])
        reqs.append(req)
    return reqs


def _one_by_one(reqs):
    out = xg2.allocate_token_bitmask(len(reqs), MODEL_VOCAB)
    for i, req in enumerate(reqs):
        req.structured_output_request.grammar.matcher.fill_next_token_bitmask(out, i)
    return out.numpy()


@pytest.mark.parametrize("n, max_num_seqs", [(9, None), (130, 256)])
def test_one_native_call_fills_the_step(manager_for, tokenizer, n, max_num_seqs):
    """(130 > 128 requests: vLLM's own threaded path, which our batch replaces.)"""
    manager = manager_for(max_num_seqs=max_num_seqs) if max_num_seqs else manager_for()
    reqs = _mixed_requests(manager, tokenizer, n)
    ids = [r.request_id for r in reqs]
    batch = manager.grammar_bitmask({r.request_id: r for r in reqs}, ids, {})
    assert batch.shape[0] == n
    assert np.array_equal(batch, _one_by_one(reqs))
    # the rows really came from one batch call: a second step reuses the cached batch
    assert manager.backend._batch._last[0] == tuple(r.structured_output_request.grammar.matcher for r in reqs)
    assert not bits(batch[0], MODEL_VOCAB)[MODEL_VOCAB - 64:].any()


def test_fills_from_several_threads(manager_for, tokenizer):
    manager = manager_for()
    reqs = _mixed_requests(manager, tokenizer, 16)
    expected = _one_by_one(reqs)
    out = xg2.allocate_token_bitmask(len(reqs), MODEL_VOCAB)
    errors = []

    def work(part):
        try:
            for _ in range(20):
                for i in part:
                    reqs[i].structured_output_request.grammar.fill_bitmask(out, i)
        except Exception as e:  # (reported below, in the main thread)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(range(k, 16, 4),)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert np.array_equal(out.numpy(), expected)
