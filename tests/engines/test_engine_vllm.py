"""Runs the vLLM 0.33 class-level suite (tests/engines/vllm/) inside its own venv."""
from engine_venv import run_suite


def test_vllm_suite():
    run_suite("vllm", "vllm", timeout=1800)
