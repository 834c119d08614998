"""A choice among strings (vLLM's ``choice`` request) as xg2 EBNF.

The output must be exactly one of the strings: ``root ::= "a" | "b" | ...``.  Any
Unicode text is allowed in a choice (quotes, backslashes, newlines, control characters,
characters beyond the BMP, the empty string); it is quoted with
:func:`xg2_plugin.grammar.ebnf_string_literal`, which escapes what the EBNF needs and
stores every code point as UTF-8.  Repeated choices are kept once.  Lone surrogates
cannot be encoded as UTF-8 and are rejected.
"""

from __future__ import annotations

from typing import Iterable, List

from . import _budget
from ._errors import InvalidArgumentError
from .grammar import ebnf_string_literal

__all__ = ["check_choices", "choices_to_ebnf"]


def check_choices(choices: Iterable[str]) -> List[str]:
    """The choices as a list of distinct strings, in their first order.

    Raises ``InvalidArgumentError`` (a ``ValueError``) for a bare string or bytes (a
    list of strings is expected), an empty collection, an item that is not a ``str``,
    or an item holding a lone surrogate."""
    if isinstance(choices, (str, bytes, bytearray)):
        raise InvalidArgumentError("choices must be a list of strings, not a single string")
    try:
        items = list(choices)
    except TypeError:
        raise InvalidArgumentError(f"choices must be a list of strings, got {type(choices).__name__}") from None
    if not items:
        raise InvalidArgumentError("choices must not be empty")
    seen = set()
    out: List[str] = []
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidArgumentError(f"choices[{index}] must be a str, got {type(item).__name__}")
        if index & 1023 == 1023:
            _budget.check(f"choices: item {index}")
        try:
            item.encode("utf-8")  # (fails exactly on lone surrogates; at C speed)
        except UnicodeEncodeError as e:
            raise InvalidArgumentError(
                f"choices[{index}] contains the lone surrogate U+{ord(item[e.start]):04X}, which UTF-8 cannot encode"
            ) from None
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def choices_to_ebnf(choices: Iterable[str]) -> str:
    """``root ::= "a" | "b" | ...`` for the given strings (see :func:`check_choices`)."""
    items = check_choices(choices)
    text = "root ::= " + " | ".join(ebnf_string_literal(item) for item in items) + "\n"
    _budget.charge(len(text), "choices")
    return text
