"""The `vllm.general_plugins` entry point: makes `xg2` a structured-outputs backend of vLLM.

vLLM (0.32, 0.33) has no registration for structured-output backends: the names are a
fixed `Literal`, the manager maps names to classes with an if/elif, and request
validation rewrites unknown names to `auto`. vLLM loads general plugins in the API
process, in EngineCore before the manager is built, and in the workers, so `register()`
patches, in each process:
1. the backend `Literal` of `StructuredOutputsConfig` (and its validator, which allows
   `disable_any_whitespace` for xgrammar and guidance only), then rebuilds the dataclass;
2. `SamplingParams._validate_structured_outputs`: an xg2 request is compiled at request
   time, so a bad spec is an HTTP 400 naming what is wrong;
3. `StructuredOutputManager.grammar_init`: builds `Xg2Backend` for an xg2 request;
4. `StructuredOutputManager.grammar_bitmask`: without speculative decoding, all of a
   step's rows are filled by one native call.
Each patch is idempotent (marked) and fails loudly, naming the vLLM version, when a name it
patches is missing.
"""
from __future__ import annotations

import functools
import typing

BACKEND_NAME = "xg2"
_MARK = "_xg2_patched"


def _vllm_version() -> str:
    try:
        import vllm

        return str(getattr(vllm, "__version__", "unknown"))
    except Exception:  # (reported inside an error message only)
        return "unknown"


def _need(owner: typing.Any, name: str) -> typing.Any:
    value = getattr(owner, name, None)
    if value is None:
        raise RuntimeError(
            f"xg2 vLLM plugin: {getattr(owner, '__name__', owner)!s}.{name} is missing in vLLM "
            f"{_vllm_version()}; this vLLM is not supported by the xg2 backend (0.32 and 0.33 are)")
    return value


def _wrap(owner: type, name: str, make: typing.Callable) -> None:
    """Replace owner.name by make(original) once."""
    original = _need(owner, name)
    if getattr(original, _MARK, False):
        return
    wrapped = functools.wraps(original)(make(original))
    setattr(wrapped, _MARK, True)
    setattr(owner, name, wrapped)


# ---- 1. the backend name in the config ----


def _patch_config() -> None:
    from pydantic.dataclasses import rebuild_dataclass
    from vllm.config import structured_outputs as mod

    cls = _need(mod, "StructuredOutputsConfig")
    fields = getattr(cls, "__dataclass_fields__", {})
    decorators = getattr(cls, "__pydantic_decorators__", None)
    names = typing.get_args(fields["backend"].type) if "backend" in fields else ()
    if not names or decorators is None:
        raise RuntimeError(f"xg2 vLLM plugin: StructuredOutputsConfig.backend is not a pydantic Literal "
                           f"field in vLLM {_vllm_version()}; this vLLM is not supported (0.32 and 0.33 are)")
    if BACKEND_NAME in names:
        return
    validator = decorators.model_validators.get("_validate_structured_output_config")
    if validator is None:
        raise RuntimeError(f"xg2 vLLM plugin: StructuredOutputsConfig._validate_structured_output_config "
                           f"is missing in vLLM {_vllm_version()}; this vLLM is not supported (0.32 and 0.33 are)")
    extended = typing.Literal[names + (BACKEND_NAME,)]  # type: ignore[valid-type]
    mod.StructuredOutputsBackend = extended
    cls.__annotations__["backend"] = extended
    fields["backend"].type = extended
    original = validator.func

    @functools.wraps(original)
    def validate(self):
        if self.backend != BACKEND_NAME:
            return original(self)
        # xg2 honours disable_any_whitespace; the rest as vLLM checks it
        if getattr(self, "disable_additional_properties", False):
            raise ValueError("disable_additional_properties is only supported for the guidance backend.")
        return self

    validator.func = validate
    cls._validate_structured_output_config = validate
    rebuild_dataclass(cls, force=True)
    # VllmConfig holds a copy of the old schema and re-validates the field with it
    from vllm.config import vllm as vllm_mod

    rebuild_dataclass(_need(vllm_mod, "VllmConfig"), force=True)


# ---- 2. request-time validation ----


def _make_validate(original):
    def _validate_structured_outputs(self, model_config, structured_outputs_config, tokenizer):
        so = self.structured_outputs
        if structured_outputs_config is None or so is None or structured_outputs_config.backend != BACKEND_NAME:
            return original(self, model_config, structured_outputs_config, tokenizer)
        from vllm.exceptions import VLLMValidationError

        from xg2_plugin import XG2Error

        from .vllm_backend import validate_request

        if getattr(model_config, "is_diffusion", False):
            raise VLLMValidationError("Structured outputs are not supported for diffusion language models.")
        if tokenizer is None:
            raise VLLMValidationError(
                "Structured outputs requires a tokenizer so it can't be used with 'skip_tokenizer_init'")
        if so._backend not in (None, BACKEND_NAME):
            raise VLLMValidationError(
                f"Request-level structured output backend selection is not supported: the request "
                f"specified '{so._backend}', but vLLM was initialised with '{BACKEND_NAME}'.")
        compact = bool(structured_outputs_config.disable_any_whitespace)
        try:
            validate_request(so, tokenizer, model_config.get_vocab_size(), compact)
        except (XG2Error, ValueError) as e:
            raise VLLMValidationError(f"xg2 structured outputs: {e}") from e
        so._backend = BACKEND_NAME

    return _validate_structured_outputs


# ---- 3, 4. the engine's manager ----


def _make_grammar_init(original):
    def grammar_init(self, request):
        so_request = request.structured_output_request
        params = request.sampling_params
        so = getattr(params, "structured_outputs", None) if params is not None else None
        if (self.backend is None and so_request is not None and so is not None
                and so._backend == BACKEND_NAME):
            from .vllm_backend import Xg2Backend

            model_config = self.vllm_config.model_config
            self.backend = Xg2Backend(self.vllm_config, tokenizer=self.tokenizer,
                                      vocab_size=model_config.get_vocab_size())
            self.backend_name = BACKEND_NAME
        return original(self, request)

    return grammar_init


def _make_grammar_bitmask(original):
    def grammar_bitmask(self, *args, **kwargs):
        from .vllm_backend import Xg2Backend

        backend = self.backend
        # One call per step needs every row's state fixed while the rows are filled:
        # not so with drafts (a row, a draft token accepted, the next row).
        if (isinstance(backend, Xg2Backend) and backend.num_speculative_tokens == 0
                and not getattr(self.vllm_config.model_config, "is_diffusion", False)):
            with backend.batched_fills():
                return original(self, *args, **kwargs)  # (a view of the bitmask filled on exit)
        return original(self, *args, **kwargs)

    return grammar_bitmask


def register() -> None:
    """Entry point (`vllm.general_plugins`): idempotent, called in every vLLM process."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.structured_output import StructuredOutputManager

    _patch_config()
    _wrap(SamplingParams, "_validate_structured_outputs", _make_validate)
    _wrap(StructuredOutputManager, "grammar_init", _make_grammar_init)
    _wrap(StructuredOutputManager, "grammar_bitmask", _make_grammar_bitmask)
