"""GrammarMatcher: one generation's parser state; fills token masks, accepts tokens.

Every call goes into the native core with the GIL released.  A matcher must not be
used by two threads at once: the core refuses the overlapping call with
``MatcherStateError``, and every result cell is per call, so no call ever returns
another call's answer.  Different matchers may be used from different threads
concurrently.
"""

from __future__ import annotations

import os
import threading
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._errors import InvalidArgumentError, as_flag, as_index, as_index_list, check
from ._native import ffi, lib
from .compiler import CompiledGrammar, _check_step_work

__all__ = ["GrammarMatcher", "BatchGrammarMatcher"]

DEFAULT_MAX_HISTORY_BYTES = 256 << 20


class _BitmaskView:
    """The checked geometry of one bitmask object: base pointer, rows, row stride.

    Checking dtype, device and shape costs more than filling a sparse mask, so the
    last bitmask seen is remembered and re-validated by identity, data pointer and
    shape only."""

    __slots__ = ("obj", "ptr", "rows", "stride", "shape")

    def __init__(self, bitmask: Any, words: int) -> None:
        try:
            import torch
        except ImportError:  # numpy-only environments
            torch = None
        if torch is not None and isinstance(bitmask, torch.Tensor):
            if bitmask.device.type != "cpu":
                raise InvalidArgumentError(f"the bitmask must be on the CPU, got {bitmask.device}")
            if bitmask.dtype != torch.int32:
                raise InvalidArgumentError(f"the bitmask must be int32, got {bitmask.dtype}")
            if bitmask.dim() not in (1, 2):
                raise InvalidArgumentError(f"the bitmask must be 1-D or 2-D, got {bitmask.dim()}-D")
            shape, strides, ptr = tuple(bitmask.shape), tuple(bitmask.stride()), bitmask.data_ptr()
        elif isinstance(bitmask, np.ndarray):
            if bitmask.dtype != np.int32:
                raise InvalidArgumentError(f"the bitmask must be int32, got {bitmask.dtype}")
            if bitmask.ndim not in (1, 2):
                raise InvalidArgumentError(f"the bitmask must be 1-D or 2-D, got {bitmask.ndim}-D")
            if not bitmask.flags.writeable:
                raise InvalidArgumentError("the bitmask array is read-only")
            shape, strides, ptr = bitmask.shape, tuple(s // 4 for s in bitmask.strides), bitmask.ctypes.data
        else:
            raise InvalidArgumentError(
                f"the bitmask must be a torch.Tensor or numpy.ndarray, got {type(bitmask).__name__}"
            )
        self.shape = tuple(shape)
        if len(shape) == 1:
            shape, strides = (1,) + tuple(shape), (0,) + tuple(strides)
        rows, width = shape
        if width != words:
            raise InvalidArgumentError(
                f"the bitmask has {width} int32 words per row; this vocabulary needs {words} "
                f"(use allocate_token_bitmask(batch, tokenizer_info.vocab_size))"
            )
        if strides[1] != 1 and width > 1:
            raise InvalidArgumentError("the bitmask rows must be contiguous")
        self.obj, self.ptr, self.rows, self.stride = bitmask, ptr, rows, strides[0] * 4

    def still_valid(self, bitmask: Any) -> bool:
        if bitmask is not self.obj:
            return False
        if hasattr(bitmask, "data_ptr"):
            return bitmask.data_ptr() == self.ptr and tuple(bitmask.shape) == self.shape
        return bitmask.ctypes.data == self.ptr and bitmask.shape == self.shape

    def row(self, index: Any) -> Any:
        if type(index) is not int:  # (1.5 would address half a row past the checked range)
            index = as_index(index, "index")
        if not 0 <= index < self.rows:
            raise InvalidArgumentError(f"index {index} is out of range for a bitmask of {self.rows} rows")
        return ffi.cast("int32_t *", self.ptr + index * self.stride)


class _State:
    """What a call keeps between calls, per thread: the last bitmask view (a view is
    immutable and only used for the object it was built from; threads filling their
    own bitmasks do not evict each other's) and the cell the core writes a call's
    result into (one cell per matcher would hand one thread another's answer; a new
    cell per call costs a third of a cheap accept_token)."""

    __slots__ = ("view", "cell")

    def __init__(self) -> None:
        self.view: Optional[_BitmaskView] = None
        self.cell = ffi.new("int *")


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.state = _State()  # (one thread-local lookup per call, then slots)


_tls = _PerThread()


def _view(bitmask: Any, words: int, state: Optional[_State] = None) -> _BitmaskView:
    state = state or _tls.state
    view = state.view
    if view is None or not view.still_valid(bitmask) or view.shape[-1] != words:
        view = _BitmaskView(bitmask, words)
        state.view = view
    return view


class GrammarMatcher:
    """Matches a generation against a compiled grammar and computes next-token masks.

    Parameters
    ----------
    compiled_grammar
        From :class:`GrammarCompiler`.
    override_stop_tokens
        Stop tokens to use instead of the tokenizer's.
    terminate_without_stop_token
        Count as terminated as soon as the grammar is complete, without a stop token.
    max_rollback_tokens
        How many of the last steps :meth:`rollback` may undo; -1 (the default) for
        all of them.  An engine passes its number of speculative tokens.  With a
        bound the matcher forgets the history no rollback and no open rule can
        reach any more, so memory stays what the open rules need: flat for a
        regular grammar (``[a-z]*``: 15-33 KB however long the output; 29 MB
        after 1,000,000 one-byte tokens without the bound), what the nesting depth
        needs for JSON.  Compaction runs when the history has grown by half
        (amortised O(1) per byte).  Rolling back further raises
        ``InvalidArgumentError`` naming the bound.
    max_history_bytes
        The most memory the matcher's history may use (default 256 MiB; ``None``:
        no limit).  An ``accept_token`` / ``accept_string`` that would pass it raises
        ``LimitExceededError`` naming the limit and changes nothing (with
        ``max_rollback_tokens`` set it first drops what it can).  Without a
        rollback bound the history keeps every step: 25 bytes per accepted byte
        under ``[a-z]*`` (one 16-byte parser item, 8 bytes of set bounds, the
        byte) plus 4 per step; measured on DeepSeek tokens, 26.5 bytes per byte
        of output for an object schema, 34 for the builtin JSON grammar, 55-67
        for arrays nested 1,000-2,000 deep.  So the default allows roughly 8-10
        MB of ordinary JSON output; an ``accept_string`` of 100 MB fails after
        ~10 MB of it.  Allocations may hold up to twice :attr:`history_bytes`.
    max_step_work
        Work units one fill or accept may spend (see ``GrammarCompiler(max_step_work=)``);
        the default (-1) takes the compiled grammar's, None: no limit.
    """

    def __init__(
        self,
        compiled_grammar: CompiledGrammar,
        *,
        override_stop_tokens: Optional[Union[int, Sequence[int]]] = None,
        terminate_without_stop_token: bool = False,
        max_rollback_tokens: int = -1,
        max_history_bytes: Optional[int] = DEFAULT_MAX_HISTORY_BYTES,
        max_step_work: Optional[int] = -1,
    ) -> None:
        if not isinstance(compiled_grammar, CompiledGrammar):
            raise InvalidArgumentError("GrammarMatcher needs a CompiledGrammar (use GrammarCompiler)")
        rollback, history = _history_limits(max_rollback_tokens, max_history_bytes)
        if override_stop_tokens is None:
            stops, n_stop = ffi.NULL, -1
        else:
            if isinstance(override_stop_tokens, (int, np.integer)):
                ids = [as_index(override_stop_tokens, "override_stop_tokens")]
            else:
                ids = as_index_list(override_stop_tokens, "override_stop_tokens")
            bad = [t for t in ids if not 0 <= t < compiled_grammar.tokenizer_info.vocab_size]
            if bad:
                raise InvalidArgumentError(
                    f"stop token id {bad[0]} is out of range [0, {compiled_grammar.tokenizer_info.vocab_size})"
                )
            stops, n_stop = ids, len(ids)
        if max_step_work == -1 and not isinstance(max_step_work, bool):
            max_step_work = compiled_grammar.max_step_work
        _check_step_work(max_step_work)
        terminate = as_flag(terminate_without_stop_token, "terminate_without_stop_token")
        out = ffi.new("xg2_matcher **")
        check(lib.xg2_matcher_new(compiled_grammar._handle, stops, n_stop, terminate, out))
        handle = ffi.gc(out[0], lib.xg2_matcher_free)
        check(lib.xg2_matcher_set_work_limit(handle, 0 if max_step_work is None else max_step_work))
        check(lib.xg2_matcher_set_history_limits(handle, rollback, -1 if history is None else history))
        self._init(handle, compiled_grammar, rollback, history)

    def _init(self, handle, compiled_grammar: CompiledGrammar, rollback: int, history: Optional[int]) -> None:
        self._handle = handle
        self._max_rollback = rollback
        self._max_history = history
        self._compiled = compiled_grammar
        self._words = (compiled_grammar.tokenizer_info.vocab_size + 31) // 32
        # the compiled grammar, while its background work waits for a first mask
        self._pending: Optional[CompiledGrammar] = compiled_grammar if compiled_grammar._deferred else None

    def _start_background(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending._start_deferred()

    @property
    def compiled_grammar(self) -> CompiledGrammar:
        return self._compiled

    def accept_token(self, token_id: int, *, debug_print: bool = False) -> bool:
        """Advance by one token.  Returns False (state unchanged) if the grammar rejects
        it, if it is a special or padding token that no ``Token(...)`` edge of the grammar
        takes, or after termination.  A stop token that a ``Token(...)`` edge takes is
        consumed as grammar (terminating the matcher if the grammar can end there).  A
        token id outside ``[0, vocab_size)`` raises ``InvalidArgumentError`` (a ``ValueError``)."""
        token = token_id if type(token_id) is int else as_index(token_id, "token_id")
        if not -(2**31) <= token < 2**31:
            raise InvalidArgumentError(f"token id {token} is out of range")
        accepted = _tls.state.cell
        check(lib.xg2_matcher_accept_token(self._handle, token, accepted))
        return bool(accepted[0])

    def accept_string(self, input_str: Union[str, bytes], *, debug_print: bool = False) -> bool:
        """Advance by a string (all or nothing), as one rollback step.  ``input_str`` is a
        str (encoded as UTF-8), bytes, bytearray or memoryview."""
        if isinstance(input_str, str):
            try:
                data = input_str.encode("utf-8")
            except UnicodeEncodeError as e:
                raise InvalidArgumentError(f"input_str holds a lone surrogate at offset {e.start}") from None
        elif isinstance(input_str, (bytes, bytearray, memoryview)):
            data = bytes(input_str)
        else:  # (bytes(10**9) would be a gigabyte of zeros)
            raise InvalidArgumentError(
                f"input_str must be a str, bytes, bytearray or memoryview, got {type(input_str).__name__}"
            )
        accepted = _tls.state.cell
        check(lib.xg2_matcher_accept_bytes(self._handle, data, len(data), accepted))
        return bool(accepted[0])

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0, *, debug_print: bool = False) -> bool:
        """Write the mask of allowed next tokens into row ``index`` of ``bitmask``.

        ``bitmask`` is a CPU int32 torch tensor or numpy array of shape
        ``(batch, ceil(vocab_size/32))`` (see :func:`allocate_token_bitmask`).  Returns
        whether the mask needs applying (False only if every token is allowed).  The
        matcher state is unchanged."""
        state = _tls.state
        view = _view(bitmask, self._words, state)
        need = state.cell
        check(lib.xg2_matcher_fill_mask(self._handle, view.row(index), self._words, need))
        if self._pending is not None:
            self._start_background()
        return bool(need[0])

    def traverse_draft_tree(
        self,
        retrieve_next_token: Any,
        retrieve_next_sibling: Any,
        draft_tokens: Any,
        token_bitmask: Any,
        time_threshold: float = -1.0,
        temperatures: Any = None,
    ) -> bool:
        """Fill the mask of every node of a speculative draft tree (XGrammar's
        ``traverse_draft_tree``; SGLang's EAGLE tree verification).

        Node 0 is the token the target model just produced (already accepted);
        ``retrieve_next_token[i]`` is node i's first child and
        ``retrieve_next_sibling[i]`` its next sibling (-1: none); ``draft_tokens[i]``
        is node i's token.  Depth first from node 0, a node whose token its parent's
        mask allows is accepted, its row of ``token_bitmask`` (one row per node)
        filled with the mask after it, its children visited, and it is rolled back;
        the row of a node not allowed, not accepted or after which the grammar is
        terminated is all zeros; rows of nodes never reached are left as they were.
        The matcher ends as it began.  Returns False if ``time_threshold`` seconds
        (> 0) passed before the tree was done (the matcher is then rolled back too).
        ``temperatures``, if given, gets -1 for every node: xg2 grammars set no
        temperature.  A malformed tree (an index out of range, a node reached
        twice, a root with siblings) is an ``InvalidArgumentError``."""
        from ._draft_tree import traverse

        return traverse(self, retrieve_next_token, retrieve_next_sibling, draft_tokens,
                        token_bitmask, time_threshold, temperatures)

    def find_jump_forward_string(self) -> str:
        """The longest string every valid continuation starts with, in whole characters.

        While the accepted input ends inside a UTF-8 character the forced text would
        begin with the rest of that character, which no ``str`` can hold: then the
        result is "" (see ``find_jump_forward_bytes``)."""
        data = self.find_jump_forward_bytes()
        if data[:1] and (data[0] & 0xC0) == 0x80:
            return ""
        return data.decode("utf-8", "replace")

    def find_jump_forward_bytes(self) -> bytes:
        """The forced continuation as bytes (it may complete a partial character)."""
        cap = 4096
        buf = ffi.new("char[]", cap)
        length = ffi.new("size_t *")
        check(lib.xg2_matcher_jump_forward(self._handle, buf, cap, length))
        return ffi.unpack(buf, min(length[0], cap))

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted steps (tokens, strings or the stop token).

        Raises ``InvalidArgumentError`` (a ``ValueError``) for a negative count or more
        steps than were accepted."""
        n = num_tokens if type(num_tokens) is int else as_index(num_tokens, "num_tokens")
        if not 0 <= n < 2**31:
            raise InvalidArgumentError(
                f"cannot roll back {n} steps: only {self.num_accepted_steps} were accepted"
            )
        check(lib.xg2_matcher_rollback(self._handle, n))

    def is_terminated(self) -> bool:
        return bool(lib.xg2_matcher_is_terminated(self._handle))

    def is_completed(self) -> bool:
        """Whether the input so far is a complete string of the grammar."""
        return bool(lib.xg2_matcher_is_completed(self._handle))

    def reset(self) -> None:
        check(lib.xg2_matcher_reset(self._handle))

    def fork(self) -> "GrammarMatcher":
        """An independent matcher with a copy of this one's whole state."""
        out = ffi.new("xg2_matcher **")
        check(lib.xg2_matcher_fork(self._handle, out))
        forked = GrammarMatcher.__new__(GrammarMatcher)
        forked._init(ffi.gc(out[0], lib.xg2_matcher_free), self._compiled, self._max_rollback, self._max_history)
        return forked

    def _debug_print_internal_state(self) -> str:
        """The parser's current items, for debugging (the format may change)."""
        length = ffi.new("size_t *")
        check(lib.xg2_matcher_debug_state(self._handle, ffi.NULL, 0, length))
        buf = ffi.new("char[]", max(length[0], 1))
        check(lib.xg2_matcher_debug_state(self._handle, buf, length[0], length))
        return ffi.unpack(buf, length[0]).decode("utf-8", "replace")

    @property
    def num_accepted_steps(self) -> int:
        return int(lib.xg2_matcher_num_steps(self._handle))

    @property
    def max_rollback_tokens(self) -> int:
        """How many of the last steps rollback may undo (-1: all)."""
        return self._max_rollback

    @property
    def max_history_bytes(self) -> Optional[int]:
        """The history memory limit (None: no limit)."""
        return self._max_history

    @property
    def history_bytes(self) -> int:
        """Memory the history uses now (parser sets and items, the input, the step
        list; allocations may hold up to about twice this)."""
        return int(lib.xg2_matcher_history_bytes(self._handle))

    @property
    def stop_token_ids(self) -> List[int]:
        n = lib.xg2_matcher_stop_ids(self._handle, ffi.NULL, 0)
        buf = ffi.new("int32_t[]", max(n, 1))
        lib.xg2_matcher_stop_ids(self._handle, buf, n)
        return list(buf[0:n])


def _history_limits(max_rollback_tokens: Any, max_history_bytes: Any) -> Tuple[int, Optional[int]]:
    """The checked history bounds (ints, not coerced: True or 2.0 is an error)."""
    if not isinstance(max_rollback_tokens, (int, np.integer)) or isinstance(max_rollback_tokens, bool):
        raise InvalidArgumentError(f"max_rollback_tokens must be an int, got {max_rollback_tokens!r}")
    if not -1 <= max_rollback_tokens < 2**31:
        raise InvalidArgumentError(f"max_rollback_tokens must be -1 (unlimited) or >= 0, got {max_rollback_tokens}")
    if max_history_bytes is None:
        return int(max_rollback_tokens), None
    if not isinstance(max_history_bytes, (int, np.integer)) or isinstance(max_history_bytes, bool):
        raise InvalidArgumentError(f"max_history_bytes must be an int or None, got {max_history_bytes!r}")
    if not 0 < max_history_bytes < 2**63:
        raise InvalidArgumentError(f"max_history_bytes must be positive (None: no limit), got {max_history_bytes}")
    return int(max_rollback_tokens), int(max_history_bytes)


class BatchGrammarMatcher:
    """Fills the masks of many matchers at once on a pool of native threads.

    Parameters
    ----------
    max_threads
        Threads to use, or ``"auto"`` for the number of CPUs (at most 16).
    """

    def __init__(self, max_threads: Union[int, str] = "auto") -> None:
        if isinstance(max_threads, str) and max_threads == "auto":
            max_threads = min(os.cpu_count() or 1, 16)
        max_threads = as_index(max_threads, "max_threads (a positive int or 'auto')")
        if not 1 <= max_threads < 2**31:
            raise InvalidArgumentError(f"max_threads must be a positive int or 'auto', got {max_threads!r}")
        self._threads = max_threads
        # The last batch's matchers and their handle array: an engine fills the same
        # running batch step after step, and checking it again would cost as much as
        # filling 16 cached masks.  Holding the tuple keeps the handles alive.
        # One attribute, so a thread never pairs one batch with another's handles.
        self._last: Tuple[Tuple[GrammarMatcher, ...], Any] = ((), None)

    def batch_fill_next_token_bitmask(
        self,
        matchers: Sequence[GrammarMatcher],
        bitmask: Any,
        indices: Optional[Sequence[int]] = None,
        debug_print: bool = False,
    ) -> None:
        """Fill row ``indices[i]`` (default ``i``) of ``bitmask`` for ``matchers[i]``."""
        matchers = tuple(matchers)
        if not matchers:
            return
        if indices is not None and len(indices) != len(matchers):
            raise InvalidArgumentError(f"{len(indices)} indices for {len(matchers)} matchers")
        last_batch, handles = self._last
        starting: Tuple[GrammarMatcher, ...] = ()  # (a matcher's first fill is in a batch new to this one)
        if matchers != last_batch:  # identity per element: GrammarMatcher has no __eq__
            if any(not isinstance(m, GrammarMatcher) for m in matchers):
                raise InvalidArgumentError("every element of matchers must be a GrammarMatcher")
            if len({id(m) for m in matchers}) != len(matchers):
                raise InvalidArgumentError("the same matcher appears twice in the batch")
            handles = ffi.new("xg2_matcher *[]", [m._handle for m in matchers])
            self._last = (matchers, handles)
            starting = tuple(m for m in matchers if m._pending is not None)
        words = matchers[0]._words
        view = _view(bitmask, words)
        if view.rows > 1 and view.stride != 4 * words:
            raise InvalidArgumentError("a batch fill needs a contiguous bitmask")
        first, rows = view.row(0), view.rows
        if indices is None:
            idx = ffi.NULL
        else:
            ids = as_index_list(indices, "indices")
            if any(not 0 <= i < rows for i in ids):
                bad = next(i for i in ids if not 0 <= i < rows)
                raise InvalidArgumentError(f"indices holds {bad}, out of range for a bitmask of {rows} rows")
            idx = ffi.new("int32_t[]", ids)
        check(lib.xg2_batch_fill_masks(handles, len(matchers), first, rows, words, idx, self._threads))
        for m in starting:
            m._start_background()

    @staticmethod
    def batch_accept_token(matchers: Sequence[GrammarMatcher], tokens: Sequence[int],
                           debug_print: bool = False) -> List[bool]:
        """Accept tokens[i] in matchers[i] (on native threads); whether each was accepted."""
        matchers = list(matchers)
        if len(matchers) != len(tokens):
            raise InvalidArgumentError(f"{len(tokens)} tokens for {len(matchers)} matchers")
        if len({id(m) for m in matchers}) != len(matchers):
            raise InvalidArgumentError("the same matcher appears twice in the batch")
        if not matchers:
            return []
        handles = ffi.new("xg2_matcher *[]", [m._handle for m in matchers])
        ids = as_index_list(tokens, "tokens")
        if any(not -(2**31) <= t < 2**31 for t in ids):
            raise InvalidArgumentError("token id out of range")
        out = ffi.new("int8_t[]", len(matchers))
        threads = min(os.cpu_count() or 1, 16) if len(matchers) >= 32 else 1
        check(lib.xg2_batch_accept_tokens(handles, len(matchers), ids, out, threads))
        return [bool(x) for x in out]

    @staticmethod
    def batch_accept_string(
        matchers: Sequence[GrammarMatcher], strings: Sequence[Union[str, bytes]], debug_print: bool = False
    ) -> List[bool]:
        if len(matchers) != len(strings):
            raise InvalidArgumentError(f"{len(strings)} strings for {len(matchers)} matchers")
        return [m.accept_string(s) for m, s in zip(matchers, strings)]

    @staticmethod
    def batch_rollback(matchers: Sequence[GrammarMatcher], num_tokens: Union[int, Sequence[int]] = 1) -> None:
        """Roll each matcher back by ``num_tokens[i]`` steps (one int: the same for all)."""
        if isinstance(num_tokens, (int, np.integer)) and not isinstance(num_tokens, bool):
            num_tokens = [num_tokens] * len(matchers)
        num_tokens = as_index_list(num_tokens, "num_tokens")
        if len(matchers) != len(num_tokens):
            raise InvalidArgumentError(f"{len(num_tokens)} counts for {len(matchers)} matchers")
        for m, n in zip(matchers, num_tokens):
            m.rollback(n)
