"""TokenizerInfo: a tokenizer's vocabulary decoded to bytes, as the native core sees it.

Mirrors ``xgrammar.TokenizerInfo``.  Tokens are decoded in the core (byte-level,
byte-fallback or raw); special tokens are never matched as text; stop tokens are
allowed exactly when the grammar can end; ids beyond the tokenizer's vocabulary
(a model's padded ``vocab_size``) are never allowed.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._errors import InvalidArgumentError, as_flag, as_index, as_index_list, check
from ._native import ffi, lib

__all__ = ["VocabType", "TokenizerInfo"]


class VocabType(Enum):
    """How the vocabulary's token strings encode bytes."""

    RAW = 0
    """Token strings are their own UTF-8 bytes (tiktoken-style vocabularies)."""

    BYTE_FALLBACK = 1
    """SentencePiece: ``<0x1B>`` is the byte 0x1B and ``▁`` stands for a space."""

    BYTE_LEVEL = 2
    """GPT-2 byte-level BPE: each character maps to one byte (``Ġ`` is a space)."""


# Texts of end-of-sequence tokens used by common model families, for stop-token
# detection when the caller gives none.
_STOP_TEXTS = (
    "</s>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<eos>",
    "<|eos|>",
    "<｜end▁of▁sentence｜>",
    "<|return|>",
    "<|call|>",
)

# The 256 characters of GPT-2's byte-to-unicode table.
_BYTE_LEVEL_CHARS = frozenset(
    [chr(b) for b in range(ord("!"), ord("~") + 1)]
    + [chr(b) for b in range(0xA1, 0xAC + 1)]
    + [chr(b) for b in range(0xAE, 0xFF + 1)]
    + [chr(256 + k) for k in range(68)]
)


# The core keeps a byte of flags per id and masks of vocab_size bits: bound it far
# above any model's vocabulary (the largest are ~1M) so that a bad number is an error,
# not gigabytes allocated.
MAX_VOCAB_SIZE = 1 << 24


def _vocab_bytes(encoded_vocab: Any) -> List[bytes]:
    """The token strings as bytes; InvalidArgumentError naming the first bad one."""
    if isinstance(encoded_vocab, (str, bytes, bytearray)):
        raise InvalidArgumentError("encoded_vocab must be a sequence of token strings, not one string")
    try:
        items = list(encoded_vocab)
    except Exception:
        raise InvalidArgumentError(
            f"encoded_vocab must be a sequence of str or bytes, got {type(encoded_vocab).__name__}"
        ) from None
    if all(type(t) is str for t in items):  # (the common case, in one comprehension)
        return [t.encode("utf-8", "surrogatepass") for t in items]
    out = []
    for i, token in enumerate(items):
        if isinstance(token, bytes):
            out.append(token)
        elif isinstance(token, str):
            out.append(token.encode("utf-8", "surrogatepass"))
        else:
            raise InvalidArgumentError(f"encoded_vocab[{i}] must be a str or bytes, got {type(token).__name__}")
    return out


def _int_list(ids: Optional[Union[int, Sequence[int]]], what: str) -> Optional[List[int]]:
    if ids is None:
        return None
    if isinstance(ids, (int, np.integer)):
        return [as_index(ids, what)]
    return as_index_list(ids, what)


def _check_ids(ids: List[int], vocab_size: int, what: str) -> None:
    for i in ids:
        if not 0 <= i < vocab_size:
            raise InvalidArgumentError(f"{what} holds {i}, out of range [0, {vocab_size})")


def text_ids(pairs: Iterable[Tuple[int, bytes]]) -> Dict[str, int]:
    """Text -> id of the (id, bytes) pairs whose bytes are non-empty UTF-8, the first id
    where two share a text."""
    out: Dict[str, int] = {}
    for i, raw in pairs:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text:
            out.setdefault(text, i)
    return out


class TokenizerInfo:
    """The vocabulary of a tokenizer, decoded to bytes and indexed for mask computation.

    Parameters
    ----------
    encoded_vocab
        Token strings (or bytes) indexed by token id, as the tokenizer stores them.
    vocab_type
        How the strings encode bytes (see :class:`VocabType`).
    vocab_size
        The model's vocabulary size (the mask width).  May exceed ``len(encoded_vocab)``
        (padded lm_head: the extra ids are never allowed) or be smaller (tokens beyond it
        are dropped).
    stop_token_ids
        Stop tokens; detected from common end-of-sequence texts when not given.
    add_prefix_space
        Whether the tokenizer prepends a space when encoding (kept as metadata).
    special_token_ids
        Control tokens that must never be produced as text.  Tokens that decode to no
        bytes are always treated as special.
    """

    def __init__(
        self,
        encoded_vocab: Union[Sequence[bytes], Sequence[str]],
        vocab_type: VocabType = VocabType.RAW,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[int, Sequence[int]]] = None,
        add_prefix_space: bool = False,
        special_token_ids: Optional[Sequence[int]] = None,
    ) -> None:
        if not isinstance(vocab_type, VocabType):
            raise InvalidArgumentError(f"vocab_type must be a VocabType, got {vocab_type!r}")
        tokens = _vocab_bytes(encoded_vocab)
        if vocab_size is None:
            vocab_size = len(tokens)
        vocab_size = as_index(vocab_size, "vocab_size")
        if not 0 < vocab_size <= MAX_VOCAB_SIZE:
            raise InvalidArgumentError(f"vocab_size must be in [1, {MAX_VOCAB_SIZE}], got {vocab_size}")
        tokens = tokens[:vocab_size]
        stops = _int_list(stop_token_ids, "stop_token_ids")
        if stops is None:
            wanted = {t.encode("utf-8") for t in _STOP_TEXTS}
            stops = [i for i, t in enumerate(tokens) if t in wanted]
        _check_ids(stops, vocab_size, "stop_token_ids")
        specials = sorted(set(_int_list(special_token_ids, "special_token_ids") or []))
        if specials and specials[0] < 0:
            raise InvalidArgumentError(f"special_token_ids holds {specials[0]}, a negative id")
        specials = [i for i in specials if i < vocab_size]  # (ids beyond a truncated vocab: dropped)
        offsets = np.zeros(len(tokens) + 1, dtype=np.uint32)
        if tokens:
            np.cumsum([len(t) for t in tokens], out=offsets[1:])
        data = b"".join(tokens)
        out = ffi.new("xg2_vocab **")
        check(
            lib.xg2_vocab_new(
                vocab_type.value,
                data,
                ffi.cast("const uint32_t *", offsets.ctypes.data),
                len(tokens),
                vocab_size,
                specials,
                len(specials),
                stops,
                len(stops),
                out,
            )
        )
        self._handle = ffi.gc(out[0], lib.xg2_vocab_free, size=len(data) * 3 + 16 * len(tokens))
        self._vocab_type = vocab_type
        self._add_prefix_space = as_flag(add_prefix_space, "add_prefix_space")
        self._decoded: Optional[List[bytes]] = None
        # made with the vocabulary, not on a process's first structural tag (o200k_harmony's
        # 1,090 special tokens: ~1 ms)
        self._special_by_text = self._special_text_map()

    # ---- construction from Hugging Face tokenizers ----

    @staticmethod
    def from_huggingface(
        tokenizer: Any,
        *,
        vocab_size: Optional[int] = None,
        stop_token_ids: Optional[Union[int, Sequence[int]]] = None,
    ) -> "TokenizerInfo":
        """Build from a Hugging Face tokenizer (fast, SentencePiece-backed or tiktoken).

        ``vocab_size`` is the model's vocabulary size (``config.vocab_size``) when it
        differs from the tokenizer's.  Stop tokens default to the tokenizer's
        ``eos_token_id``.  Added tokens marked special are never matched as text;
        non-special added tokens (``<tool_call>`` and the like) are matched as their text.
        """
        try:
            vocab: Dict[str, int] = tokenizer.get_vocab()
        except AttributeError as e:
            raise InvalidArgumentError(
                f"cannot read the vocabulary of {type(tokenizer).__name__}: it has no get_vocab()"
            ) from e
        if not vocab:
            raise InvalidArgumentError("the tokenizer's vocabulary is empty")
        n_tokens = max(len(vocab), max(vocab.values()) + 1)
        size = as_index(vocab_size, "vocab_size") if vocab_size is not None else n_tokens
        encoded: List[str] = [""] * min(n_tokens, size)
        for text, idx in vocab.items():
            if idx < len(encoded):
                encoded[idx] = text

        specials = set()
        added = getattr(tokenizer, "added_tokens_decoder", None) or {}
        for idx, tok in added.items():
            if getattr(tok, "special", False):
                specials.add(int(idx))
        for idx in getattr(tokenizer, "all_special_ids", None) or []:
            specials.add(int(idx))
        # Added tokens are stored as plain text, whatever the vocabulary's encoding.
        added_text = {int(i): str(t) for i, t in added.items()}

        stops = _int_list(stop_token_ids, "stop_token_ids")
        if stops is None:
            eos = getattr(tokenizer, "eos_token_id", None)
            if isinstance(eos, int):
                stops = [eos]
            elif isinstance(eos, (list, tuple)) and eos:
                stops = [int(e) for e in eos]
        if stops is not None and not stops:
            raise InvalidArgumentError("stop_token_ids cannot be empty")

        vocab_type, add_prefix_space = TokenizerInfo._detect_encoding(tokenizer, vocab)
        if vocab_type is not VocabType.RAW:
            # Encode added tokens' text into the vocabulary's encoding so the core
            # decodes them back to their text.
            for idx, text in added_text.items():
                if idx < len(encoded) and idx not in specials:
                    encoded[idx] = _encode_text(text, vocab_type)
        return TokenizerInfo(
            encoded,
            vocab_type,
            vocab_size=size,
            stop_token_ids=stops,
            add_prefix_space=add_prefix_space,
            special_token_ids=sorted(specials),
        )

    @staticmethod
    def _detect_encoding(tokenizer: Any, vocab: Dict[str, int]) -> "tuple[VocabType, bool]":
        """The vocabulary's encoding, from the backend tokenizer's decoder, confirmed by
        the vocabulary itself (which wins when they disagree)."""
        from_backend: Optional[VocabType] = None
        prefix_space = False
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is not None:
            spec = _backend_spec(backend)
            decoder = spec.get("decoder") or {}
            kinds = [decoder.get("type")] + [d.get("type") for d in decoder.get("decoders", []) or []]
            if "ByteLevel" in kinds:
                from_backend = VocabType.BYTE_LEVEL
            elif "ByteFallback" in kinds:
                from_backend = VocabType.BYTE_FALLBACK
            pre = spec.get("pre_tokenizer") or {}
            prefix_space = bool(pre.get("add_prefix_space", False)) or pre.get("prepend_scheme") in (
                "always",
                "first",
            )
            normalizer = spec.get("normalizer") or {}
            if any(n.get("type") == "Prepend" for n in normalizer.get("normalizers", []) or []):
                prefix_space = True
        from_vocab = _detect_from_vocab(vocab)
        if from_vocab is not None and from_vocab is not from_backend:
            return from_vocab, prefix_space
        return from_backend or VocabType.RAW, prefix_space

    # ---- properties ----

    @property
    def vocab_type(self) -> VocabType:
        return self._vocab_type

    @property
    def vocab_size(self) -> int:
        """The mask width: the model's vocabulary size."""
        return int(lib.xg2_vocab_size(self._handle))

    @property
    def add_prefix_space(self) -> bool:
        return self._add_prefix_space

    @property
    def prepend_space_in_tokenization(self) -> bool:
        return self._add_prefix_space

    @property
    def decoded_vocab(self) -> List[bytes]:
        """The bytes of every token id (empty for padding ids)."""
        if self._decoded is None:
            data = ffi.new("const char **")
            length = ffi.new("size_t *")
            flags = ffi.new("int *")
            out = []
            for i in range(self.vocab_size):
                check(lib.xg2_vocab_token(self._handle, i, data, length, flags))
                out.append(ffi.unpack(data[0], length[0]))
            self._decoded = out
        return self._decoded

    @property
    def stop_token_ids(self) -> List[int]:
        n = lib.xg2_vocab_stop_ids(self._handle, ffi.NULL, 0)
        buf = ffi.new("int32_t[]", max(n, 1))
        lib.xg2_vocab_stop_ids(self._handle, buf, n)
        return list(buf[0:n])

    @property
    def special_token_ids(self) -> List[int]:
        """Tokens never matched as text: given special tokens and tokens with no bytes."""
        data = ffi.new("const char **")
        length = ffi.new("size_t *")
        flags = ffi.new("int *")
        out = []
        for i in range(lib.xg2_vocab_num_tokens(self._handle)):
            check(lib.xg2_vocab_token(self._handle, i, data, length, flags))
            if flags[0] & lib.XG2_TOKEN_SPECIAL:
                out.append(i)
        return out

    def _given_special_tokens(self) -> List[Tuple[int, bytes]]:
        """(id, bytes) of the special tokens the tokenizer declared (a few hundred at most:
        cheaper than scanning every token's flags)."""
        n = lib.xg2_vocab_special_ids(self._handle, ffi.NULL, 0)
        buf = ffi.new("int32_t[]", max(n, 1))
        lib.xg2_vocab_special_ids(self._handle, buf, n)
        data = ffi.new("const char **")
        length = ffi.new("size_t *")
        flags = ffi.new("int *")
        out = []
        for i in buf[0:n]:
            check(lib.xg2_vocab_token(self._handle, i, data, length, flags))
            out.append((int(i), ffi.unpack(data[0], length[0])))
        return out

    def _special_text_map(self) -> Dict[str, int]:
        """Text -> id of the declared special tokens (see text_ids): a structural tag's
        string that is a special token's text means that token."""
        return text_ids(sorted(self._given_special_tokens()))

    def token_flags(self, token_id: int) -> int:
        """XG2_TOKEN_* flags of one token (special, stop, padding)."""
        data = ffi.new("const char **")
        length = ffi.new("size_t *")
        flags = ffi.new("int *")
        token = as_index(token_id, "token_id")
        if not 0 <= token < 2**31:
            raise InvalidArgumentError(f"token id {token} is out of range")
        check(lib.xg2_vocab_token(self._handle, token, data, length, flags))
        return int(flags[0])

    # ---- metadata ----

    def dump_metadata(self) -> str:
        """Everything but the token strings, as JSON (see from_vocab_and_metadata)."""
        return json.dumps(
            {
                "vocab_type": self._vocab_type.value,
                "vocab_size": self.vocab_size,
                "add_prefix_space": self._add_prefix_space,
                "stop_token_ids": self.stop_token_ids,
                "special_token_ids": self.special_token_ids,
            }
        )

    @staticmethod
    def from_vocab_and_metadata(
        encoded_vocab: Union[Sequence[bytes], Sequence[str]], metadata: str
    ) -> "TokenizerInfo":
        meta = json.loads(metadata)
        return TokenizerInfo(
            encoded_vocab,
            VocabType(meta["vocab_type"]),
            vocab_size=meta["vocab_size"],
            stop_token_ids=meta["stop_token_ids"],
            add_prefix_space=meta["add_prefix_space"],
            special_token_ids=meta.get("special_token_ids"),
        )

    # ---- serialization (see xg2_plugin.serialization) ----

    def _serial_body(self) -> dict:
        """The decoded bytes of the real tokens and every id list: decoding them
        again as RAW gives the core exactly this vocabulary back."""
        from .serialization import b64_text

        tokens = self.decoded_vocab[: int(lib.xg2_vocab_num_tokens(self._handle))]
        return {
            "vocab_type": self._vocab_type.value,
            "vocab_size": self.vocab_size,
            "add_prefix_space": self._add_prefix_space,
            "stop_token_ids": self.stop_token_ids,
            "special_token_ids": self.special_token_ids,
            "token_lengths": [len(t) for t in tokens],
            "token_bytes": b64_text(b"".join(tokens)),
        }

    def _fingerprint(self) -> str:
        """A digest of the vocabulary and its ids (what a compiled grammar is bound to)."""
        cached = self.__dict__.get("_fingerprint_hex")
        if cached is None:
            from .serialization import _digest

            cached = self._fingerprint_hex = _digest("TokenizerInfo", self._serial_body())
        return cached

    def serialize_json(self) -> str:
        """This tokenizer as JSON text (:mod:`xg2_plugin.serialization`)."""
        from .serialization import dump

        return dump("TokenizerInfo", self._serial_body())

    @staticmethod
    def deserialize_json(json_string: str) -> "TokenizerInfo":
        """The tokenizer :meth:`serialize_json` wrote; a malformed, altered or foreign
        payload raises ``DeserializeFormatError`` / ``DeserializeVersionError`` /
        ``InvalidJSONError`` (all ``ValueError`` and ``RuntimeError``)."""
        from .serialization import DeserializeFormatError, b64, check_keys, field, int_list, load

        kind = "TokenizerInfo"
        body = load(json_string, kind)
        check_keys(body, kind, ("vocab_type", "vocab_size", "add_prefix_space", "stop_token_ids",
                                "special_token_ids", "token_lengths", "token_bytes"))
        type_value = field(body, "vocab_type", kind, (int,), "an int")
        if type_value not in [t.value for t in VocabType]:
            raise DeserializeFormatError(f"TokenizerInfo field 'vocab_type' is {type_value}, no VocabType")
        vocab_size = field(body, "vocab_size", kind, (int,), "an int")
        prefix = field(body, "add_prefix_space", kind, (bool,), "a bool")
        lengths, data = int_list(body, "token_lengths", kind), b64(body, "token_bytes", kind)
        if not 0 < vocab_size <= MAX_VOCAB_SIZE or len(lengths) > vocab_size:
            raise DeserializeFormatError(f"TokenizerInfo has {len(lengths)} tokens for vocab_size {vocab_size}")
        if any(n < 0 for n in lengths) or sum(lengths) != len(data):
            raise DeserializeFormatError("TokenizerInfo token lengths do not add up to its token bytes")
        ends = np.cumsum(lengths, dtype=np.int64).tolist()
        tokens = [data[end - n:end] for n, end in zip(lengths, ends)]
        info = TokenizerInfo(
            tokens, VocabType.RAW, vocab_size=vocab_size,
            stop_token_ids=int_list(body, "stop_token_ids", kind),
            special_token_ids=int_list(body, "special_token_ids", kind),
        )
        info._vocab_type, info._add_prefix_space = VocabType(type_value), prefix
        return info

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(vocab_type={self._vocab_type.name}, vocab_size={self.vocab_size}, "
            f"stop_token_ids={self.stop_token_ids})"
        )


def _backend_spec(backend: Any) -> Dict[str, Any]:
    """The decoder, pre-tokenizer and normalizer of a `tokenizers` backend, as its JSON
    has them: each component serialised alone (the whole tokenizer's JSON, merges and
    all, took most of a 128k vocabulary's TokenizerInfo to write and parse)."""
    try:
        spec = {}
        for part in ("decoder", "pre_tokenizer", "normalizer"):
            obj = getattr(backend, part)
            spec[part] = json.loads(obj.__getstate__()) if obj is not None else None
        return spec
    except Exception:  # an older or unusual backend: the whole JSON
        try:
            return json.loads(backend.to_str())
        except Exception:  # one that cannot serialise: the vocabulary decides
            return {}


def _detect_from_vocab(vocab: Dict[str, int]) -> Optional[VocabType]:
    """A byte-fallback vocabulary has the <0xNN> pieces; a byte-level one spells
    (almost) every token in GPT-2's byte alphabet."""
    if sum(f"<0x{b:02X}>" in vocab for b in range(256)) >= 128:
        return VocabType.BYTE_FALLBACK
    if sum(c in vocab for c in _BYTE_LEVEL_CHARS) < 128:
        return None
    # (one scan of the joined text in C; per token only when some token strays)
    if _NOT_BYTE_LEVEL.search("".join(vocab)) is None:
        return VocabType.BYTE_LEVEL
    in_alphabet = sum(_NOT_BYTE_LEVEL.search(t) is None for t in vocab)
    return VocabType.BYTE_LEVEL if in_alphabet >= 0.99 * len(vocab) else None


_NOT_BYTE_LEVEL = re.compile("[^" + re.escape("".join(sorted(_BYTE_LEVEL_CHARS))) + "]")


_BYTE_TO_CHAR: Dict[int, str] = {}


def _encode_text(text: str, vocab_type: VocabType) -> str:
    """Spell text in the vocabulary's encoding so that decoding gives text back."""
    if vocab_type is VocabType.BYTE_FALLBACK:
        return text.replace(" ", "\u2581")
    if not _BYTE_TO_CHAR:
        shifted = 0
        for b in range(256):
            if (ord("!") <= b <= ord("~")) or (0xA1 <= b <= 0xAC) or (0xAE <= b <= 0xFF):
                _BYTE_TO_CHAR[b] = chr(b)
            else:
                _BYTE_TO_CHAR[b] = chr(256 + shifted)
                shifted += 1
    return "".join(_BYTE_TO_CHAR[b] for b in text.encode("utf-8"))
