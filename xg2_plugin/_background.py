"""The process's one background thread: token masks computed ahead of need
(``GrammarCompiler(precompute_pieces=..., precompute_states=...)``).

A job is handed over by a request's first mask fill, which is on the request's
critical path, so handing it over must cost little: a queue put and a Future
(a submit measured 10-20 µs, a ``ThreadPoolExecutor``'s 15-50 µs on the 2-vCPU
development machine, most of either the wake-up of the idle thread).  The thread is a daemon:
a job in progress holds what it works on, and at exit it is abandoned (it only
fills a cache).  A forked child starts without it and makes its own on first use.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Optional, Tuple

_Job = Tuple[Callable[..., Any], Tuple[Any, ...], "Future[Any]"]


class _Worker:
    def __init__(self) -> None:
        self._jobs: "queue.SimpleQueue[_Job]" = queue.SimpleQueue()
        threading.Thread(target=self._run, name="xg2-precompute", daemon=True).start()

    def _run(self) -> None:
        while True:
            fn, args, future = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as e:  # (kept in the future, which the caller may read)
                future.set_exception(e)

    def submit(self, fn: Callable[..., Any], *args: Any) -> "Future[Any]":
        future: "Future[Any]" = Future()
        self._jobs.put((fn, args, future))
        return future


_WORKER: Optional[_Worker] = None
_LOCK = threading.Lock()


def submit(fn: Callable[..., Any], *args: Any) -> "Future[Any]":
    """Run ``fn(*args)`` in the background thread (jobs in order); its Future."""
    global _WORKER
    worker = _WORKER
    if worker is None:
        with _LOCK:
            if _WORKER is None:
                _WORKER = _Worker()
            worker = _WORKER
    return worker.submit(fn, *args)


def idle(timeout: Optional[float] = None) -> None:
    """Wait until the thread has done every job handed to it so far (tests that count
    the mask cache's misses do not want another test's work in their counts)."""
    if _WORKER is not None:
        _WORKER.submit(lambda: None).result(timeout)


def _forget_in_child() -> None:
    global _WORKER, _LOCK
    _WORKER = None
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
