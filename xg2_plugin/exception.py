"""XGrammar's ``xgrammar.exception`` names, and xg2's own exceptions.

Each is also a ``RuntimeError`` (as XGrammar's are) and a ``ValueError`` (as xg2's
argument and grammar errors are); see :mod:`xg2_plugin._errors`."""

from ._errors import (
    DeserializeFormatError,
    DeserializeVersionError,
    GrammarError,
    InternalError,
    InvalidArgumentError,
    InvalidJSONError,
    InvalidStructuralTagError,
    LimitExceededError,
    MatcherStateError,
    OutOfMemoryError,
    XG2Error,
)

__all__ = [
    "DeserializeFormatError",
    "DeserializeVersionError",
    "InvalidJSONError",
    "InvalidStructuralTagError",
    "XG2Error",
    "GrammarError",
    "InvalidArgumentError",
    "LimitExceededError",
    "MatcherStateError",
    "OutOfMemoryError",
    "InternalError",
]
