"""Per-request compile budgets: a time and memory limit for one compile, checked by
the Python front-ends and (through the C core's thread-local budget) by the core.

    with compile_budget(time_limit_ms=500, memory_limit_bytes=256 << 20):
        grammar = Grammar.from_json_schema(schema)   # front-end calls check()/charge()

The budget belongs to the calling thread: a compile runs on one thread (the core's
part with the GIL released, on the same thread), so nothing here is shared.  The core
keeps its own thread-local copy (``xg2_budget_begin`` / ``xg2_budget_end``, opened
and closed with this one): its parser, normaliser and automaton builders check the
same deadline, and it counts its own allocations against the memory limit (the
front-end's estimates and the core's bytes are each held to the limit).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional

from ._errors import InvalidArgumentError, LimitExceededError, check as _check_status
from ._native import lib as _lib

__all__ = ["compile_budget", "check", "charge", "DEFAULT_MAX_STEP_WORK"]

# Operator-facing defaults (GrammarCompiler's): generous enough for every MaskBench and
# JSON-Schema-Test-Suite schema, finite so that no request can hold a worker forever.
DEFAULT_COMPILE_TIME_LIMIT_MS = 10_000.0
DEFAULT_COMPILE_MEMORY_LIMIT_BYTES = 1 << 30

# Work units one mask fill (or accept) of a matcher may spend: one per byte the
# parser takes, per parser item it makes and per vocabulary-trie node stepped
# while computing a mask entry.  Measured (DeepSeek vocabulary, one core of the
# development machine): 20k-50k units/ms for ordinary fills (a full trie walk under
# the live parser: 49k units/ms, 103k units), down to ~5.6k units/ms for parser
# sets of 30k items (a cycle of 30k left-recursive rules: 510k units, 90 ms).  So
# the default stops a fill after ~20-50 ms of ordinary work and ~200 ms at worst;
# the slowest real fills (~1 ms) use a few percent of it.  Same value as the core's
# XG2_DEFAULT_STEP_WORK.
DEFAULT_MAX_STEP_WORK = 1_000_000

# How often check() reads the clock and lets other threads run (a mypyc-compiled
# front-end never gives up the GIL on its own).
_YIELD_EVERY_S = 0.005


class _Budget:
    __slots__ = ("deadline", "limit_ms", "memory_left", "memory_limit", "next_yield")

    def __init__(self, limit_ms: Optional[float], memory_limit: Optional[int]) -> None:
        now = time.monotonic()
        self.limit_ms = limit_ms
        self.deadline = None if limit_ms is None else now + limit_ms / 1000.0
        self.memory_limit = memory_limit
        self.memory_left = memory_limit
        self.next_yield = now + _YIELD_EVERY_S


class _Local(threading.local):
    # (a class default: getattr with a default on a thread that never set it raised
    # and formatted an AttributeError at every check)
    budget: Optional["_Budget"] = None


_local = _Local()


def _checked_limit(value, what: str, kind) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        raise InvalidArgumentError(f"{what} must be a positive number or None, got {value!r}")


@contextmanager
def compile_budget(time_limit_ms: Optional[float], memory_limit_bytes: Optional[int]) -> Iterator[None]:
    """Run the body under a budget (None: no limit of that kind).  Nested budgets keep
    the tighter of the two."""
    _checked_limit(time_limit_ms, "time_limit_ms", (int, float))
    _checked_limit(memory_limit_bytes, "memory_limit_bytes", int)
    outer: Optional[_Budget] = _local.budget
    budget = _Budget(time_limit_ms, memory_limit_bytes)
    if outer is not None:
        if outer.deadline is not None and (budget.deadline is None or outer.deadline < budget.deadline):
            budget.deadline, budget.limit_ms = outer.deadline, outer.limit_ms
        if outer.memory_left is not None and (budget.memory_left is None or outer.memory_left < budget.memory_left):
            budget.memory_left, budget.memory_limit = outer.memory_left, outer.memory_limit
    _local.budget = budget
    try:
        _check_status(_lib.xg2_budget_begin(_ns(time_limit_ms), -1 if memory_limit_bytes is None else min(memory_limit_bytes, 2**62)))
    except BaseException:
        _local.budget = outer
        raise
    try:
        yield
    finally:
        _lib.xg2_budget_end()
        _local.budget = outer


def _ns(ms: Optional[float]) -> int:
    if ms is None or ms * 1e6 >= 2**62:
        return -1
    return int(ms * 1e6)


def check(where: str) -> None:
    """Raise LimitExceededError once this thread's compile time is spent; now and
    then, let other Python threads run.  Cheap enough to call per rule or state."""
    budget: Optional[_Budget] = _local.budget
    if budget is None:
        return
    now = time.monotonic()
    if budget.deadline is not None and now > budget.deadline:
        raise LimitExceededError(f"compile time limit of {budget.limit_ms:g} ms exceeded ({where})")
    if now >= budget.next_yield:
        budget.next_yield = now + _YIELD_EVERY_S
        # A call into the core releases the GIL; a thread that has waited for it (the
        # switch interval) takes it then.  Not time.sleep(0): on a busy machine that
        # hands the CPU to other processes (~1.5 ms a call, 10% of a Kubernetes schema).
        _lib.xg2_abi_version()


def charge(nbytes: int, where: str) -> None:
    """Count nbytes (an estimate of what the front-end builds) against the memory budget."""
    budget: Optional[_Budget] = _local.budget
    if budget is None or budget.memory_left is None:
        return
    budget.memory_left -= nbytes
    if budget.memory_left < 0:
        raise LimitExceededError(
            f"compile memory limit of {budget.memory_limit} bytes exceeded ({where})"
        )
