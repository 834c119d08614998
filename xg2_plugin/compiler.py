"""GrammarCompiler and CompiledGrammar: grammars bound to a tokenizer, with a cache.

Compilation does no vocabulary work up front: token masks are computed when a
matcher first needs them, so compiling costs about as much as parsing.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable, Dict, Hashable, Optional, Tuple, Union

from . import _background, _budget
from ._errors import GrammarError, InvalidArgumentError, XG2Error, as_flag, as_index, check
from ._native import ffi, lib
from .grammar import Grammar
from .tokenizer import TokenizerInfo

__all__ = ["CompiledGrammar", "GrammarCompiler"]

DEFAULT_CACHE_LIMIT_BYTES = 512 * 1024 * 1024

# How a compiler's cache_limit_bytes (the TOTAL) is split between the caches it
# uses; the shares sum to at most the total.
RULE_CACHE_MAX_BYTES = 32 * 1024 * 1024


def cache_shares(total: int) -> Dict[str, int]:
    """The limit of each cache under a total of ``total`` bytes: token masks 1/2,
    compiled grammars 3/8, rule automata 1/8 but at most 32 MiB."""
    return {
        "token_masks": total // 2,
        "compiled_grammars": total * 3 // 8,
        "rule_automata": min(RULE_CACHE_MAX_BYTES, total // 8),
    }


class _SharedLimit:
    """The limit of a cache several compilers share (a tokenizer's mask pool, the
    process-wide rule cache): the smallest share of the compilers alive, so a new
    compiler can tighten it but never loosen it; it is recomputed when one is
    collected (and left as it is when none is left)."""

    _ids = itertools.count()
    _lock = threading.RLock()  # (re-entrant: a finalizer may run inside a locked section)

    def __init__(self, apply: Callable[[int], Any]) -> None:
        self._apply = apply
        self._shares: Dict[int, int] = {}

    def add(self, owner: object, share: int) -> None:
        with self._lock:
            token = next(self._ids)
            self._shares[token] = share
            self._apply(min(self._shares.values()))
        weakref.finalize(owner, self._remove, token)

    def _remove(self, token: int) -> None:
        with self._lock:
            self._shares.pop(token, None)
            if self._shares:
                self._apply(min(self._shares.values()))

    def current(self) -> Optional[int]:
        with self._lock:
            return min(self._shares.values()) if self._shares else None

    def clear(self) -> None:
        """Empty the cache now (a limit of 0 evicts everything), keeping the limit."""
        with self._lock:
            self._apply(0)
            if self._shares:
                self._apply(min(self._shares.values()))


_RULE_CACHE_LIMIT = _SharedLimit(lib.xg2_rule_cache_set_limit)


def _mask_limit_of(info: TokenizerInfo) -> _SharedLimit:
    with _SharedLimit._lock:
        shared = info.__dict__.get("_mask_limit")
        if shared is None:
            handle = info._handle  # (not info: no reference cycle through the closure)
            shared = info._mask_limit = _SharedLimit(lambda b: check(lib.xg2_vocab_set_cache_limit(handle, b)))
        return shared

def _check_count(value, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(f"{what} must be an int >= 0, got {value!r}")


def _check_ms(value, what: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
        raise InvalidArgumentError(f"{what} must be a number of milliseconds >= 0 or None, got {value!r}")


def _check_step_work(value) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidArgumentError(f"max_step_work must be an int >= 1 or None, got {value!r}")


_PIECES_MS = 250.0  # the background budget of a compile's new pieces when precompute_ms is None


def _new_pieces(compiled: "CompiledGrammar") -> list:
    """The pieces linked into ``compiled`` (a structural tag's JSON schemas) whose
    masks on its tokenizer nobody has computed ahead yet, with their native grammars
    (claimed: the caller computes them)."""
    vocab = int(ffi.cast("uintptr_t", compiled.tokenizer_info._handle))
    follow = ffi.new("uint8_t[32]")
    out = []
    for piece, handle in compiled.grammar.linked:
        lib.xg2_grammar_root_follow(handle, follow)
        if piece.claim_masks(bytes(follow), vocab):
            out.append((piece, handle))
    return out


def _precompute(compiled: "CompiledGrammar", pieces: bool, max_states: int, max_ms: Optional[float]) -> int:
    """The background precompute of a compile.  For a linked grammar (``pieces``):
    its new pieces' states along their sample calls (or, without samples, all
    states reached by plain text), each on its own grammar (a piece's states keep
    their mask keys when linked, so once serves every tool set it comes in), then
    the linked grammar's own states (the tag's: its tool names by their literals);
    ``max_ms`` (None: ``_PIECES_MS``) for all of it.  Then up to ``max_states``
    states of the whole grammar."""
    deadline = time.monotonic() + (max_ms if max_ms is not None else _PIECES_MS) / 1e3
    done = ffi.new("int32_t *")
    total = 0

    def left_ns() -> int:
        return max(0, int((deadline - time.monotonic()) * 1e9))

    if pieces:
        out = ffi.new("xg2_compiled **")
        for piece, handle in _new_pieces(compiled):
            if not left_ns():
                break
            try:  # (a piece whose walk fails -- a fill over its work limit -- is left to the fills)
                check(lib.xg2_compiled_new(handle, compiled.tokenizer_info._handle, out))
                one = ffi.gc(out[0], lib.xg2_compiled_free)
                samples = piece.sampler() if piece.sampler is not None else ()
                for text in samples:  # (the states a call meets, not all of them: see sample_arguments)
                    check(lib.xg2_compiled_precompute_text(one, text, len(text), left_ns(), done))
                    total += int(done[0])
                if not samples:
                    check(lib.xg2_compiled_precompute_states(one, -1, left_ns(), lib.XG2_PRECOMPUTE_PLAIN, done))
                    total += int(done[0])
            except XG2Error:
                continue
        if left_ns():
            check(lib.xg2_compiled_precompute_states(compiled._handle, -1, left_ns(), lib.XG2_PRECOMPUTE_OWN, done))
            total += int(done[0])
    if max_states:
        total += compiled.precompute(max_states, None if max_ms is None else left_ns() / 1e6)
    return total


class CompiledGrammar:
    """A grammar bound to a tokenizer; what every :class:`GrammarMatcher` of it shares."""

    def __init__(self, grammar: Grammar, tokenizer_info: TokenizerInfo,
                 max_step_work: Optional[int] = _budget.DEFAULT_MAX_STEP_WORK) -> None:
        _check_step_work(max_step_work)
        out = ffi.new("xg2_compiled **")
        check(lib.xg2_compiled_new(grammar._handle, tokenizer_info._handle, out))
        self._handle = ffi.gc(out[0], lib.xg2_compiled_free)
        self._grammar = grammar
        self._tokenizer_info = tokenizer_info
        self._max_step_work = max_step_work
        self._precompute_future: "Optional[Future[int]]" = None
        # the compiler's background work (_precompute's arguments after this grammar),
        # started by the first mask a matcher fills (GrammarMatcher._start_background):
        # not beside that fill, which is on the request's critical path, but beside the
        # prefill that follows it.  (Arguments, not a closure: that would be a cycle.)
        self._deferred: Optional[Tuple[bool, int, Optional[float]]] = None
        self._deferred_lock = threading.Lock()

    @property
    def max_step_work(self) -> Optional[int]:
        """Work units one fill or accept of this grammar's matchers may spend (None:
        unlimited); see ``GrammarCompiler(max_step_work=...)``."""
        return self._max_step_work

    @property
    def grammar(self) -> Grammar:
        return self._grammar

    @property
    def tokenizer_info(self) -> TokenizerInfo:
        return self._tokenizer_info

    @property
    def memory_size_bytes(self) -> int:
        return int(lib.xg2_compiled_memory_bytes(self._handle))

    def precompute(self, max_states: Optional[int] = None, max_ms: Optional[float] = None) -> int:
        """Compute ahead the token masks of up to ``max_states`` automaton states
        (all when None), nearest the grammar's start first, into the tokenizer's
        shared mask cache (within its limit), so that fills there later are cache
        hits; stop after the state in progress once ``max_ms`` milliseconds have
        passed (no limit when None).  Blocks without holding the GIL, so it can run
        in a background thread beside matchers of this grammar (as
        ``GrammarCompiler(..., precompute_states=N)`` does right after compile).
        Returns the number of states computed or found cached."""
        if max_states is not None:
            _check_count(max_states, "max_states (or None)")
        _check_ms(max_ms, "max_ms")
        n = -1 if max_states is None else min(max_states, 2**31 - 1)
        ns = -1 if max_ms is None or max_ms >= 2**63 / 1e6 else int(max_ms * 1e6)  # (inf: no limit)
        done = ffi.new("int32_t *")
        check(lib.xg2_compiled_precompute(self._handle, n, ns, done))
        return int(done[0])

    @property
    def precompute_future(self) -> "Optional[Future[int]]":
        """The background precompute the compiler asked for (see
        ``GrammarCompiler(precompute_states=..., precompute_pieces=...)``), once the
        first mask of a matcher of this grammar has been filled, which starts it;
        else None."""
        return self._precompute_future

    def _start_deferred(self) -> None:
        with self._deferred_lock:
            args, self._deferred = self._deferred, None
            if args is not None:
                self._precompute_future = _background.submit(_precompute, self, *args)


    # ---- serialization (see xg2_plugin.serialization) ----

    def serialize_json(self) -> str:
        """This compiled grammar as JSON text: its grammar, a digest of its tokenizer
        and its work limit.  Masks are not stored: they are computed again on use."""
        from .serialization import dump

        return dump("CompiledGrammar", {
            "grammar": self._grammar._serial_body(),
            "tokenizer_sha256": self._tokenizer_info._fingerprint(),
            "max_step_work": self._max_step_work,
        })

    @staticmethod
    def deserialize_json(json_str: str, tokenizer_info: TokenizerInfo) -> "CompiledGrammar":
        """The compiled grammar :meth:`serialize_json` wrote, for ``tokenizer_info``,
        which must be the tokenizer it was compiled for (``DeserializeFormatError``
        otherwise).  The grammar is parsed again under the default compile budget."""
        from .serialization import DeserializeFormatError, check_keys, field, load

        kind = "CompiledGrammar"
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise InvalidArgumentError("tokenizer_info must be a TokenizerInfo")
        body = load(json_str, kind)
        check_keys(body, kind, ("grammar", "tokenizer_sha256", "max_step_work"))
        grammar_body = field(body, "grammar", kind, (dict,), "an object")
        work = field(body, "max_step_work", kind, (int, type(None)), "an int or null")
        if field(body, "tokenizer_sha256", kind, (str,), "hex text") != tokenizer_info._fingerprint():
            raise DeserializeFormatError(
                "the compiled grammar was serialized for another tokenizer than the one given "
                f"(this one: vocab_size {tokenizer_info.vocab_size}, {tokenizer_info.vocab_type.name})")
        try:
            _check_step_work(work)
        except InvalidArgumentError as e:
            raise DeserializeFormatError(f"CompiledGrammar field 'max_step_work': {e}") from None
        with _budget.compile_budget(_budget.DEFAULT_COMPILE_TIME_LIMIT_MS, _budget.DEFAULT_COMPILE_MEMORY_LIMIT_BYTES):
            return CompiledGrammar(Grammar._from_serial_body(grammar_body, kind), tokenizer_info, work)


class GrammarCompiler:
    """Compiles grammars for one tokenizer and caches the results.

    Parameters
    ----------
    tokenizer_info
        The tokenizer the grammars are compiled for.
    max_threads
        Threads for batch work (kept for XGrammar compatibility).
    cache_enabled
        Whether compiled grammars are cached (keyed by their source and options).
    cache_limit_bytes
        Upper bound in bytes of everything the compiler's caches hold together,
        split in fixed shares (:func:`cache_shares`): the token masks (computed on
        first use, shared by every grammar compiled for this tokenizer) 1/2, the
        compiled grammars (kept per compiler) 3/8, the process-wide cache of rule
        automata 1/8 but at most 32 MiB.  Entries not used lately are evicted (least
        recently used ones; the token masks by a second-chance approximation of it).
        A shared cache's limit is the smallest share of the compilers alive that
        use it: a new compiler can tighten an operator's bound, never loosen it.
        ``-1`` selects the default (512 MiB): the caches are never unbounded.
    precompute_states
        After each new compile, compute the token masks of this many automaton
        states (nearest the start first) in the process's background thread,
        without the GIL, started by the first mask a matcher of the grammar fills
        (that fill is on the request's critical path; the prefill an engine runs
        next hides the work); 0 (default) computes masks only when a matcher first
        needs them.  The work is exposed as :attr:`CompiledGrammar.precompute_future`.
    precompute_ms
        A time budget for that work, in milliseconds from when it starts (the
        prefill it overlaps with); None (default): until ``precompute_states``.
    precompute_pieces
        Whether the tools a structural tag meets for the first time with this
        tokenizer (its JSON-schema pieces) get the token masks a call of them
        passes through computed in that background thread: along two sample calls
        of each tool's schema, once per tool and tokenizer (~0.2 MB of masks a
        BFCL tool), then the tag's own states (its tool names); within
        ``precompute_ms``, else 250 ms a compile.  A call of a tool is then a run
        of cache hits rather than first masks.  Default True.  The work is part of
        :attr:`CompiledGrammar.precompute_future`.
    compile_time_limit_ms
        Time limit of one compile (front-end and core), in milliseconds; past it the
        compile raises ``LimitExceededError`` naming the limit and where it was hit,
        within a small multiple of the limit.  Default 10 s; None: no limit.  Each
        ``compile_*`` call can override it (``time_limit_ms=``).
    compile_memory_limit_bytes
        Memory limit of one compile: the front-end's estimated structures and the
        core's allocations during the compile are each held to it.  Default 1 GiB;
        None: no limit.  Per call: ``memory_limit_bytes=``.
    max_step_work
        Work units one mask fill or token accept (``accept_string``: one byte) of a
        matcher may spend before it raises ``LimitExceededError`` ("fill work limit
        of N units exceeded"), the matcher unchanged and usable.  A unit is a byte the parser takes, a parser
        item or a vocabulary-trie node stepped: ordinary fills run 20k-50k units/ms
        (DeepSeek vocabulary, one core), large parser sets ~5.6k units/ms.  The
        default, 1,000,000, stops a fill after ~20-200 ms; real fills use a few
        percent of it.  None: no limit.  Carried by the compiled grammar to its
        matchers (``GrammarMatcher(max_step_work=...)`` overrides).
    """

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        *,
        max_threads: int = 8,
        cache_enabled: bool = True,
        cache_limit_bytes: int = -1,
        precompute_states: int = 0,
        precompute_ms: Optional[float] = None,
        precompute_pieces: bool = True,
        compile_time_limit_ms: Optional[float] = _budget.DEFAULT_COMPILE_TIME_LIMIT_MS,
        compile_memory_limit_bytes: Optional[int] = _budget.DEFAULT_COMPILE_MEMORY_LIMIT_BYTES,
        max_step_work: Optional[int] = _budget.DEFAULT_MAX_STEP_WORK,
    ) -> None:
        if not isinstance(tokenizer_info, TokenizerInfo):
            raise InvalidArgumentError("tokenizer_info must be a TokenizerInfo")
        max_threads = as_index(max_threads, "max_threads")
        if max_threads < 1:
            raise InvalidArgumentError(f"max_threads must be >= 1, got {max_threads}")
        cache_limit_bytes = as_index(cache_limit_bytes, "cache_limit_bytes")
        if cache_limit_bytes != -1 and not 0 <= cache_limit_bytes < 2**63:
            raise InvalidArgumentError(
                f"cache_limit_bytes must be -1 (default bound) or in [0, 2**63), got {cache_limit_bytes}"
            )
        _check_count(precompute_states, "precompute_states")
        _check_ms(precompute_ms, "precompute_ms")
        _budget._checked_limit(compile_time_limit_ms, "compile_time_limit_ms", (int, float))
        _budget._checked_limit(compile_memory_limit_bytes, "compile_memory_limit_bytes", int)
        _check_step_work(max_step_work)
        self._time_limit_ms = compile_time_limit_ms
        self._memory_limit_bytes = compile_memory_limit_bytes
        self._max_step_work = max_step_work
        self._precompute_states = precompute_states
        self._precompute_ms = precompute_ms
        self._precompute_pieces = as_flag(precompute_pieces, "precompute_pieces")
        self._tokenizer_info = tokenizer_info
        self._max_threads = max_threads
        self._cache_enabled = as_flag(cache_enabled, "cache_enabled")
        self._limit = DEFAULT_CACHE_LIMIT_BYTES if cache_limit_bytes == -1 else cache_limit_bytes
        shares = cache_shares(self._limit)
        self._grammar_limit = shares["compiled_grammars"]
        # Each entry with the size it was counted at, so eviction subtracts exactly that.
        self._cache: "OrderedDict[Hashable, Tuple[CompiledGrammar, int]]" = OrderedDict()
        self._cache_bytes = 0
        self._lock = threading.Lock()
        self._mask_limit = _mask_limit_of(tokenizer_info)
        self._mask_limit.add(self, shares["token_masks"])
        _RULE_CACHE_LIMIT.add(self, shares["rule_automata"])

    @property
    def tokenizer_info(self) -> TokenizerInfo:
        return self._tokenizer_info

    @property
    def max_threads(self) -> int:
        return self._max_threads

    # ---- compilation ----

    def compile_grammar(
        self, grammar: Union[Grammar, str], *, root_rule_name: str = "root",
        time_limit_ms: Optional[float] = None, memory_limit_bytes: Optional[int] = None,
    ) -> CompiledGrammar:
        """Compile an EBNF grammar (a :class:`Grammar` or EBNF text).  ``time_limit_ms`` /
        ``memory_limit_bytes``, here and on every ``compile_*``: this compile's budget
        (None: the compiler's ``compile_time_limit_ms`` / ``compile_memory_limit_bytes``)."""
        limits = (time_limit_ms, memory_limit_bytes)
        if isinstance(grammar, Grammar):
            key = ("ebnf", grammar._source, grammar._root)
            return self._cached(key, lambda: grammar, limits)
        if isinstance(grammar, str):
            key = ("ebnf", grammar, root_rule_name)
            return self._cached(key, lambda: Grammar.from_ebnf(grammar, root_rule_name=root_rule_name), limits)
        raise InvalidArgumentError(f"grammar must be a Grammar or EBNF text, got {type(grammar).__name__}")

    def compile_regex(self, regex: str, *, time_limit_ms: Optional[float] = None,
                      memory_limit_bytes: Optional[int] = None) -> CompiledGrammar:
        """Compile a regular expression (``re.fullmatch`` semantics, see Grammar.from_regex)."""
        return self._cached(("regex", regex), lambda: Grammar.from_regex(regex), (time_limit_ms, memory_limit_bytes))

    def compile_json_schema(
        self,
        schema,
        *,
        any_whitespace: bool = True,
        indent=None,
        separators=None,
        strict_mode: bool = True,
        max_whitespace_cnt=None,
        any_order: bool = False,
        lenient: bool = False,
        time_limit_ms: Optional[float] = None,
        memory_limit_bytes: Optional[int] = None,
    ) -> CompiledGrammar:
        """Compile a JSON Schema (JSON string, dict or pydantic model class); see
        :meth:`Grammar.from_json_schema`.  Cached by the options and, as XGrammar
        does, the text of a schema given as text (a dict or model: its canonical
        JSON, key order kept)."""
        import json

        from .json_schema import _check_depth, _load_schema, check_options

        loaded = _load_schema(schema)
        if isinstance(schema, (str, bytes)):
            # (re-serialising costs as much as parsing did: a third of a small
            # schema's front-end time, for hits on respaced copies only)
            canon = schema
        else:
            try:
                # (key order kept: properties are written in declared order, so two schemas
                # differing only in that order are different grammars)
                canon = json.dumps(loaded, separators=(",", ":"))
            except RecursionError:  # (json.dumps recurses along the nesting: name where it is too deep)
                _check_depth(loaded)
                raise GrammarError("the schema nests too deeply to serialise") from None
            except (TypeError, ValueError) as e:
                raise InvalidArgumentError(f"the schema is not JSON-serialisable: {e}") from None
        # (checked before the cache key: a bool() there would make "false" a hit on True)
        opts = check_options(any_whitespace, indent, separators, strict_mode, max_whitespace_cnt,
                             any_order, lenient)
        return self._cached(
            ("json_schema", canon, tuple(opts.values())),
            lambda: Grammar.from_json_schema(loaded, **opts),  # (checked: an iterable of separators read once)
            (time_limit_ms, memory_limit_bytes),
        )

    def compile_structural_tag(self, *args, time_limit_ms: Optional[float] = None,
                               memory_limit_bytes: Optional[int] = None, **kwargs) -> CompiledGrammar:
        """Compile a structural tag: ``compile_structural_tag(structural_tag)`` (a
        ``StructuralTag``, a dict or JSON text) or, legacy, ``(tags, triggers)``.
        Tokens given by their text are looked up in this compiler's vocabulary, and
        a special token's text in a tag's strings is that token.  Cached by the
        tag's canonical text; each JSON schema's grammar is also cached by content
        (see :mod:`xg2_plugin.structural_tag.convert`)."""
        from .grammar import Grammar
        from .structural_tag import cache_key, structural_tag_from_args, structural_tag_to_grammar

        value = structural_tag_from_args(args, kwargs)
        return self._cached(
            ("structural_tag", cache_key(value)),
            lambda: structural_tag_to_grammar(value, self._tokenizer_info),
            (time_limit_ms, memory_limit_bytes),
        )

    def compile_builtin_json_grammar(self, *, time_limit_ms: Optional[float] = None,
                                     memory_limit_bytes: Optional[int] = None) -> CompiledGrammar:
        """Any JSON object or array."""
        return self._cached(("builtin_json",), Grammar.builtin_json_grammar, (time_limit_ms, memory_limit_bytes))

    def compile_lark(self, lark_string: str, *, named_grammars=None, time_limit_ms: Optional[float] = None,
                     memory_limit_bytes: Optional[int] = None) -> CompiledGrammar:
        """Compile a Lark grammar (start rule ``start``; ``@name`` for the grammars of
        ``named_grammars``); see :meth:`Grammar.from_lark`."""
        from .grammar_ops import _checked_named

        named = _checked_named(named_grammars)
        key = tuple(sorted((k, v if isinstance(v, str) else (v._source, v._root)) for k, v in named.items()))
        return self._cached(("lark", lark_string, key),
                            lambda: Grammar.from_lark(lark_string, named_grammars=named or None),
                            (time_limit_ms, memory_limit_bytes))

    def compile_choices(self, choices, *, time_limit_ms: Optional[float] = None,
                        memory_limit_bytes: Optional[int] = None) -> CompiledGrammar:
        """Compile a choice among strings; see :meth:`Grammar.from_choices`."""
        from .choice import check_choices

        items = tuple(check_choices(choices))
        return self._cached(("choices", items), lambda: Grammar.from_choices(items),
                            (time_limit_ms, memory_limit_bytes))

    def _cached(self, key: Hashable, make_grammar, limits=(None, None)) -> CompiledGrammar:
        try:
            hash(key)
        except TypeError:  # (a list where a str or an option was expected)
            raise InvalidArgumentError(f"unhashable argument in {key[0]} compile: {key[1:]!r:.100}") from None
        _budget._checked_limit(limits[0], "time_limit_ms", (int, float))  # (a bad one is an error, hit or miss)
        _budget._checked_limit(limits[1], "memory_limit_bytes", int)
        time_limit_ms = self._time_limit_ms if limits[0] is None else limits[0]
        memory_limit_bytes = self._memory_limit_bytes if limits[1] is None else limits[1]
        if self._cache_enabled:
            with self._lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
                    return hit[0]
        with _budget.compile_budget(time_limit_ms, memory_limit_bytes):
            compiled = CompiledGrammar(make_grammar(), self._tokenizer_info, self._max_step_work)
        pieces = self._precompute_pieces and hasattr(compiled.grammar, "linked")
        if pieces or self._precompute_states:
            compiled._deferred = (pieces, self._precompute_states, self._precompute_ms)
        if self._cache_enabled:
            size = compiled.memory_size_bytes
            with self._lock:
                if key not in self._cache and size <= self._grammar_limit:
                    self._cache[key] = (compiled, size)
                    self._cache_bytes += size
                    while self._cache_bytes > self._grammar_limit and self._cache:
                        _, (_, old_size) = self._cache.popitem(last=False)
                        self._cache_bytes -= old_size
        return compiled

    # ---- cache ----

    def clear_cache(self) -> None:
        """Empty every cache counted in :meth:`get_cache_size_bytes`."""
        with self._lock:
            self._cache.clear()
            self._cache_bytes = 0
        lib.xg2_vocab_clear_cache(self._tokenizer_info._handle)
        _RULE_CACHE_LIMIT.clear()

    def get_cache_size_bytes(self) -> int:
        """Bytes held by the caches under ``cache_limit_bytes``: this compiler's
        compiled grammars, the tokenizer's token masks and the rule automata."""
        with self._lock:
            compiled = self._cache_bytes
        masks = int(lib.xg2_vocab_cache_bytes(self._tokenizer_info._handle))
        return compiled + masks + int(lib.xg2_rule_cache_bytes())

    def get_cache_limits(self) -> Dict[str, Optional[int]]:
        """The limit in force on each cache: this compiler's share of compiled
        grammars; the shared ones' smallest share among the compilers alive."""
        return {
            "compiled_grammars": self._grammar_limit,
            "token_masks": self._mask_limit.current(),
            "rule_automata": _RULE_CACHE_LIMIT.current(),
        }

    def get_mask_cache_stats(self) -> dict:
        """Entries, hits, misses and evictions of the shared token-mask cache."""
        out = [ffi.new("uint64_t *") for _ in range(4)]
        check(lib.xg2_vocab_cache_stats(self._tokenizer_info._handle, *out))
        return dict(zip(("entries", "hits", "misses", "evictions"), (int(x[0]) for x in out)))

    @property
    def cache_limit_bytes(self) -> int:
        return self._limit

    def _cache_entries(self) -> int:
        with self._lock:
            return len(self._cache)
