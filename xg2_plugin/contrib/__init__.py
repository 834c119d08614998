"""Integrations with other libraries (Hugging Face transformers).

``xg2_plugin.contrib.hf`` is reachable as an attribute without importing it first
(as ``xgrammar.contrib.hf`` is); it imports torch and transformers when touched."""


def __getattr__(name):
    if name == "hf":
        import importlib

        return importlib.import_module(".hf", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
