"""Status codes of the native core, mapped to Python exceptions.

ORDER STATUS: the codes mirror the XG2_ERR_* block of native/include/xg2.h.
Every exception also inherits the builtin a caller would naturally catch.
"""

from ._native import ffi, lib


class XG2Error(Exception):
    """Base class of every error raised by xg2_plugin."""


class InvalidArgumentError(XG2Error, ValueError):
    """An argument is out of range, of the wrong shape, or otherwise invalid."""


class GrammarError(XG2Error, ValueError):
    """The grammar (or the schema or regex it came from) is invalid."""


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
