"""Engine adapters: xg2_plugin as a structured-output backend of vLLM and SGLang.

Installed as `xg2_plugin.adapters`. Each engine's module is imported only by that engine's
entry point (pyproject.toml: `vllm.general_plugins`, `sglang.srt.plugins`), so importing
xg2_plugin never imports an engine."""
