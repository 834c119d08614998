"""serialize_json / deserialize_json of TokenizerInfo, Grammar and CompiledGrammar.

The format is xg2's own (XGrammar's payloads describe XGrammar's internal tables
and cannot be read here, nor ours there).  Every payload is one JSON object::

    {"format": "xg2_plugin", "version": 1, "kind": "Grammar",
     "sha256": "<hex digest of the kind and the canonical body>", "body": {...}}

Nothing native is ever stored: a body holds what the public constructors take
(a grammar's EBNF text and root rule; a vocabulary's decoded token bytes and its
ids), and deserialising calls those constructors, which check everything again.
So a wrong, truncated or altered payload is a library error -- ``InvalidJSONError``
(not JSON), ``DeserializeVersionError`` (no version or another one),
``DeserializeFormatError`` (another format or kind, a missing or ill-typed field,
a digest that does not match, a compiled grammar given another tokenizer), or the
constructor's own ``GrammarError`` / ``LimitExceededError`` -- never a crash.  The
digest catches corruption and accidental edits; it is not a signature (anyone can
recompute it), and it need not be one, since the rebuilt objects are checked as if
a user had built them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any, Dict, List

from ._errors import (
    DeserializeFormatError,
    DeserializeVersionError,
    InvalidArgumentError,
    InvalidJSONError,
)

__all__ = ["SERIALIZATION_VERSION", "get_serialization_version"]

FORMAT = "xg2_plugin"
SERIALIZATION_VERSION = 1


def get_serialization_version() -> str:
    """The version written into every payload (as XGrammar's function of that name)."""
    return f"xg2-v{SERIALIZATION_VERSION}"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _digest(kind: str, body: Dict[str, Any]) -> str:
    return hashlib.sha256(f"{kind}\n{_canonical(body)}".encode("ascii")).hexdigest()


def dump(kind: str, body: Dict[str, Any]) -> str:
    return _canonical({"format": FORMAT, "version": SERIALIZATION_VERSION, "kind": kind,
                       "sha256": _digest(kind, body), "body": body})


def load(text: Any, kind: str) -> Dict[str, Any]:
    """The checked body of a payload of ``kind``."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidJSONError(f"the serialized {kind} is not UTF-8 (byte {e.start})") from None
    if not isinstance(text, str):
        raise InvalidArgumentError(f"the serialized {kind} must be a str, got {type(text).__name__}")
    try:
        payload = json.loads(text)
    except RecursionError:
        raise InvalidJSONError(f"the serialized {kind} nests too deeply to be one of ours") from None
    except ValueError as e:
        raise InvalidJSONError(f"the serialized {kind} is not JSON: {e}") from None
    if not isinstance(payload, dict):
        raise DeserializeFormatError(f"the serialized {kind} must be a JSON object, got {type(payload).__name__}")
    if payload.get("format") != FORMAT:
        hint = " (it looks like XGrammar's format, which xg2 does not read)" if "__VERSION__" in payload else ""
        raise DeserializeFormatError(f"not an xg2_plugin serialization: no \"format\": \"{FORMAT}\"{hint}")
    version = payload.get("version")
    if version != SERIALIZATION_VERSION or isinstance(version, bool):
        got = "no version" if "version" not in payload else f"version {version!r:.40}"
        raise DeserializeVersionError(
            f"the serialized {kind} has {got}; this library reads version {SERIALIZATION_VERSION}")
    if payload.get("kind") != kind:
        raise DeserializeFormatError(f"the payload holds a {payload.get('kind')!r:.40}, not a {kind}")
    body = payload.get("body")
    if not isinstance(body, dict):
        raise DeserializeFormatError(f"the serialized {kind} has no body object")
    if set(payload) != {"format", "version", "kind", "sha256", "body"}:
        extra = sorted(set(payload) - {"format", "version", "kind", "sha256", "body"})
        raise DeserializeFormatError(f"the serialized {kind} has unknown fields {extra!r:.80}")
    if payload.get("sha256") != _digest(kind, body):
        raise DeserializeFormatError(f"the serialized {kind} was altered or corrupted: its sha256 does not match")
    return body


# ---- field checks (a body's fields, by name and type) ----


def field(body: Dict[str, Any], name: str, kind: str, types, what: str) -> Any:
    if name not in body:
        raise DeserializeFormatError(f"the serialized {kind} has no {name!r}")
    value = body[name]
    if isinstance(value, bool) and bool not in types:  # (True is an int to isinstance)
        raise DeserializeFormatError(f"{kind} field {name!r} must be {what}, got {value!r}")
    if not isinstance(value, types):
        raise DeserializeFormatError(f"{kind} field {name!r} must be {what}, got {type(value).__name__}")
    return value


def int_list(body: Dict[str, Any], name: str, kind: str) -> List[int]:
    values = field(body, name, kind, (list,), "a list of ints")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            raise DeserializeFormatError(f"{kind} field {name!r} must hold ints only, got {v!r:.40}")
    return values


def b64(body: Dict[str, Any], name: str, kind: str) -> bytes:
    text = field(body, name, kind, (str,), "base64 text")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise DeserializeFormatError(f"{kind} field {name!r} is not valid base64") from None


def b64_text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def check_keys(body: Dict[str, Any], kind: str, names) -> None:
    extra = sorted(set(body) - set(names))
    if extra:
        raise DeserializeFormatError(f"the serialized {kind} has unknown fields {extra!r:.80}")
