"""Structural tags (XGrammar 0.2.8's format set): the models (``formats``), their
conversion to EBNF (``convert``), JSON schemas in the models' XML argument
styles (``xml_styles``) and the built-in model tool-call formats
(``model_formats``)."""

from __future__ import annotations

from typing import Any, Dict, Tuple

from .._errors import InvalidArgumentError
from .convert import structural_tag_to_ebnf, structural_tag_to_grammar
from .formats import *  # noqa: F401,F403
from .formats import StructuralTag, parse_structural_tag
from .formats import __all__ as _format_names


def structural_tag_from_args(args: tuple, kwargs: Dict[str, Any]) -> Any:
    """XGrammar's call forms: ``(structural_tag)``, ``(tags, triggers)`` (legacy),
    or the same as keywords.  Returns a StructuralTag, a dict or JSON text."""
    if len(args) == 1 and not kwargs:
        return args[0]
    if len(args) == 2 and not kwargs:
        tags, triggers = args
    elif not args and set(kwargs) == {"structural_tag"}:
        return kwargs["structural_tag"]
    elif not args and set(kwargs) == {"tags", "triggers"}:
        tags, triggers = kwargs["tags"], kwargs["triggers"]
    elif len(args) == 1 and set(kwargs) == {"triggers"}:
        tags, triggers = args[0], kwargs["triggers"]
    else:
        raise InvalidArgumentError(
            "a structural tag is given as (structural_tag) or, legacy, as (tags, triggers)")
    if not isinstance(tags, list) or not isinstance(triggers, list):
        raise InvalidArgumentError("the legacy form takes a list of StructuralTagItem and a list of triggers")
    return StructuralTag.from_legacy_structural_tag(tags, triggers)


def cache_key(value: Any) -> Tuple[str, str]:
    """The canonical text of a structural tag (for the compiled-grammar cache)."""
    import json

    if isinstance(value, str):
        return ("text", value)
    if isinstance(value, dict):
        try:
            return ("dict", json.dumps(value, separators=(",", ":")))  # (key order kept: properties are written in order)
        except (TypeError, ValueError, RecursionError):
            pass
    return ("model", parse_structural_tag(value).model_dump_json())


__all__ = [*_format_names, "structural_tag_to_ebnf", "structural_tag_to_grammar", "structural_tag_from_args"]
