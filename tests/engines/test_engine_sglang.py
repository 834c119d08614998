"""SGLang 0.5.23: the suite in tests/engines/sglang/, run inside SGLang's own venv (made by
engine_venv.py with xg2_plugin really pip-installed, so its entry point is real)."""
from engine_venv import run_suite


def test_sglang_suite():
    run_suite("sglang", "sglang", timeout=1800)
