"""Status codes of the native core, mapped to Python exceptions.

ORDER STATUS: the codes mirror the XG2_ERR_* block of native/include/xg2.h.
Every exception also inherits the builtin a caller would naturally catch, and
what XGrammar raises where engine code catches it: XGrammar raises RuntimeError
for a bad grammar, schema, regex or argument, and SGLang's backend catches
exactly that (``except RuntimeError``) to answer a bad request with an error
instead of failing the batch.
"""

import operator
from typing import Any, Optional

from ._native import ffi, lib


class XG2Error(Exception):
    """Base class of every error raised by xg2_plugin."""


class InvalidArgumentError(XG2Error, ValueError, TypeError, RuntimeError):
    """An argument is out of range, of the wrong type or shape, or otherwise invalid.

    Also a ``TypeError``: a caller of the XGrammar API catches that for a wrong type."""


class GrammarError(XG2Error, ValueError, RuntimeError):
    """The grammar (or the schema or regex it came from) is invalid."""


class InvalidStructuralTagError(GrammarError):
    """The structural tag is invalid (XGrammar's name; a ``GrammarError``)."""


class InvalidJSONError(InvalidArgumentError):
    """A text that must be JSON (a serialized object, a structural tag) is not."""


class DeserializeFormatError(InvalidArgumentError):
    """A serialized object is malformed, truncated, altered, of another kind, or
    made for another tokenizer: see :mod:`xg2_plugin.serialization`."""


class DeserializeVersionError(DeserializeFormatError):
    """A serialized object has no version, or a version this library does not read."""


class OutOfMemoryError(XG2Error, MemoryError):
    """The native core could not allocate memory."""


class LimitExceededError(XG2Error, RuntimeError):
    """A size or work limit of the native core was exceeded; the message names it."""


class MatcherStateError(XG2Error, RuntimeError):
    """The call is not valid in the object's current state."""


class InternalError(XG2Error, RuntimeError):
    """An internal invariant of the native core was violated (a bug)."""


_BY_STATUS = {
    lib.XG2_ERR_ARG: InvalidArgumentError,
    lib.XG2_ERR_GRAMMAR: GrammarError,
    lib.XG2_ERR_NOMEM: OutOfMemoryError,
    lib.XG2_ERR_LIMIT: LimitExceededError,
    lib.XG2_ERR_STATE: MatcherStateError,
    lib.XG2_ERR_INTERNAL: InternalError,
}


def check(status: int) -> None:
    """Raise the exception for a nonzero status, with the core's message."""
    if status:
        message = ffi.string(lib.xg2_last_error()).decode("utf-8", "replace")
        raise _BY_STATUS.get(status, XG2Error)(message or f"native status {status}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def as_index(value: Any, what: str) -> int:
    """``value`` as an int, by ``operator.index``: a Python or numpy integer, or a
    one-element integer tensor.  A bool, float, str or anything else is an
    ``InvalidArgumentError`` naming ``what``: a public index, id or count is never
    coerced (``int(1.5)`` would silently pick another row or token)."""
    if type(value) is int:
        return value
    dtype = getattr(value, "dtype", None)
    if isinstance(value, bool) or (dtype is not None and "bool" in str(dtype)):
        raise InvalidArgumentError(f"{what} must be an integer, got the bool {_shown(value)}")
    try:
        return operator.index(value)
    except Exception:
        raise InvalidArgumentError(
            f"{what} must be an integer, got {type(value).__name__} {_shown(value)}"
        ) from None


def as_flag(value: Any, what: str) -> bool:
    """``value`` as a bool: True, False or a numpy bool.  Anything else (``"false"``, 1,
    None) is an ``InvalidArgumentError`` naming ``what``: a truthy string is not True."""
    if value is True or value is False:
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)
    raise InvalidArgumentError(f"{what} must be a bool, got {type(value).__name__} {_shown(value)}")


def as_optional_count(value: Any, what: str) -> Optional[int]:
    """None, or a non-negative integer (see :func:`as_index`)."""
    if value is None:
        return None
    n = as_index(value, what)
    if n < 0:
        raise InvalidArgumentError(f"{what} must be a non-negative integer or None, got {n}")
    return n


def as_index_list(values: Any, what: str) -> list:
    """A sequence of integers (see :func:`as_index`) as a list of ints."""
    if isinstance(values, (str, bytes, bytearray)):
        raise InvalidArgumentError(f"{what} must be a sequence of integers, got {type(values).__name__}")
    try:
        items = list(values)
    except Exception:
        raise InvalidArgumentError(
            f"{what} must be a sequence of integers, got {type(values).__name__} {_shown(values)}"
        ) from None
    return [as_index(v, f"{what}[{i}]") for i, v in enumerate(items)]
