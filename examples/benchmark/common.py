"""Shared helpers of the benchmark scripts: paths, tokenizers, data sets, timing, reports.

Nothing here is part of the xg2_plugin package; the scripts in this folder import it
with ``sys.path`` pointing at this folder (they do that themselves).

* :func:`repo_root`, :func:`shared_path` -- where the repository and ``../shared`` are.
* :func:`load_hf_tokenizer` -- a Hugging Face tokenizer from a local directory.
* :func:`load_maskbench` -- MaskBench-format schema files (``{"schema", "tests"}``).
* :func:`json_schema_test_suite` -- the official JSON-Schema-Test-Suite, fetched once
  from the ``jsonschema`` source distribution with pip and cached.
* :class:`TaskPool` -- run tasks in worker subprocesses with a per-task time limit
  (a task that hangs inside native code cannot be interrupted any other way).
* :func:`percentile`, :func:`markdown_table` -- small reporting helpers.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import multiprocessing
import multiprocessing.connection
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

# --------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------


def repo_root() -> str:
    """The repository root (two levels above this file)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def shared_path(*parts: str) -> str:
    """A path under ``../shared`` next to the repository (the benchmark material)."""
    return os.path.join(os.path.dirname(repo_root()), "shared", *parts)


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "xg2_plugin")


# --------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------


def load_hf_tokenizer(path: str):
    """``AutoTokenizer.from_pretrained(path)`` for a local tokenizer directory."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"tokenizer directory not found: {path}")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


# --------------------------------------------------------------------------------------
# Data sets
# --------------------------------------------------------------------------------------


@dataclass
class SchemaCase:
    """One schema with its test instances (MaskBench format, or a JSON-Schema-Test-Suite group)."""

    id: str  # unique within its corpus
    file: str  # base name of the file it came from
    schema: Any
    tests: List[Tuple[Any, bool]]  # (instance, valid)
    descriptions: List[str] = field(default_factory=list)


def load_maskbench(directory: str, files: Optional[str] = None) -> List[SchemaCase]:
    """Every ``*.json`` file of a MaskBench-format directory, sorted by name.

    Each file is ``{"schema": ..., "tests": [{"data": ..., "valid": bool}, ...]}``;
    ``files`` is an optional glob on the base name."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"MaskBench directory not found: {directory}")
    cases = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        name = os.path.basename(path)
        if files and not fnmatch.fnmatch(name, files):
            continue
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        tests = [(t["data"], bool(t["valid"])) for t in doc.get("tests", [])]
        descs = [str(t.get("description", "")) for t in doc.get("tests", [])]
        cases.append(SchemaCase(name[: -len(".json")], name, doc["schema"], tests, descs))
    return cases


JSONSCHEMA_SDIST_VERSION = "4.26.0"  # the suite snapshot the README's numbers come from


def json_schema_test_suite(
    cache_dir: Optional[str] = None,
    version: str = JSONSCHEMA_SDIST_VERSION,
    draft: str = "draft2020-12",
    quiet: bool = True,
) -> str:
    """Directory holding the JSON-Schema-Test-Suite's ``tests/<draft>/*.json`` files.

    The suite ships inside the ``jsonschema`` source distribution (``json/tests``); it is
    fetched once with ``pip download --no-binary`` and cached under
    ``<cache_dir>/json-schema-test-suite/jsonschema-<version>/<draft>/``.  Only the
    top-level files of the draft are kept (not ``optional/``)."""
    cache_dir = cache_dir or default_cache_dir()
    target = os.path.join(cache_dir, "json-schema-test-suite", f"jsonschema-{version}", draft)
    if os.path.isdir(target) and glob.glob(os.path.join(target, "*.json")):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(target)) as tmp:
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps",
            "--no-binary", "jsonschema", f"jsonschema=={version}", "-d", tmp,
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True)
        sdists = glob.glob(os.path.join(tmp, "jsonschema-*.tar.gz"))
        if not sdists:
            raise RuntimeError(
                f"could not download the jsonschema {version} sdist with pip "
                f"(exit {proc.returncode}):\n{proc.stderr[-2000:]}"
            )
        prefix = f"json/tests/{draft}/"
        staged = os.path.join(tmp, "staged")
        os.makedirs(staged)
        with tarfile.open(sdists[0]) as tar:
            for member in tar.getmembers():
                # "jsonschema-4.26.0/json/tests/draft2020-12/x.json"
                rel = member.name.split("/", 1)[-1]
                if not (member.isfile() and rel.startswith(prefix) and rel.endswith(".json")):
                    continue
                if "/" in rel[len(prefix):]:  # optional/ and other subfolders
                    continue
                src = tar.extractfile(member)
                assert src is not None
                with open(os.path.join(staged, os.path.basename(rel)), "wb") as out:
                    out.write(src.read())
        if not os.listdir(staged):
            raise RuntimeError(f"no {prefix}*.json in {os.path.basename(sdists[0])}")
        try:
            os.rename(staged, target)
        except OSError:  # another process got there first
            if not os.path.isdir(target):
                raise
    if not quiet:
        print(f"cached the JSON-Schema-Test-Suite at {target}", file=sys.stderr)
    return target


# --------------------------------------------------------------------------------------
# Worker subprocesses with per-task deadlines
# --------------------------------------------------------------------------------------


class TaskContext:
    """Handed to a task function in the worker: lets it move its own deadline.

    ``ctx.phase("compile", 60)`` tells the parent that the task is now in phase
    ``compile`` and must finish (or reach its next phase) within 60 s from now.  Tasks
    use it to exclude one-off set-up (loading a tokenizer) from their time limit."""

    def __init__(self, conn, task_id: int) -> None:
        self._conn = conn
        self._id = task_id

    def phase(self, name: str, seconds: float) -> None:
        self._conn.send(("phase", self._id, name, float(seconds)))


def _exit_with_parent() -> None:
    import threading

    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _worker_main(conn, quiet_stderr: bool, memory_limit_bytes: Optional[int]) -> None:
    _exit_with_parent()
    if quiet_stderr:  # native libraries' own logging (rejected tokens and the like)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
    if memory_limit_bytes:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if msg is None:
            return
        task_id, func, args = msg
        try:
            value = func(args, TaskContext(conn, task_id))
            conn.send(("done", task_id, value))
        except BaseException as e:  # reported to the parent, the worker lives on
            conn.send(("error", task_id, f"{type(e).__name__}: {e}", traceback.format_exc()))


@dataclass
class TaskOutcome:
    status: str  # "done", "error" (the task raised), "timeout", "died" (the worker exited)
    value: Any = None  # the task's return value when done
    error: str = ""  # exception text, or what the worker died of
    phase: str = ""  # the task's last phase (where it timed out)
    wall_s: float = 0.0


@dataclass
class _Worker:
    proc: Any
    conn: Any
    task: Any = None
    task_id: int = -1
    deadline: float = 0.0
    phase: str = ""
    started: float = 0.0


class TaskPool:
    """Runs ``func(args, ctx)`` calls in ``workers`` subprocesses, each under a deadline.

    A task that passes its deadline has its worker killed (and replaced) and comes back
    as ``TaskOutcome("timeout")``; a worker that dies (a segfault, the OOM killer) gives
    ``TaskOutcome("died")``.  ``func`` must be a module-level function (it is pickled by
    name); workers are started with the ``spawn`` method, so nothing is inherited but
    what a task loads itself -- keep loaded state in module globals to reuse it across
    tasks of one worker."""

    def __init__(
        self,
        workers: int = 1,
        *,
        quiet_stderr: bool = True,
        memory_limit_gb: Optional[float] = None,
    ) -> None:
        self._n = max(1, int(workers))
        self._ctx = multiprocessing.get_context("spawn")
        self._quiet = quiet_stderr
        self._mem = int(memory_limit_gb * 2**30) if memory_limit_gb else None
        self._workers: List[_Worker] = []
        self._next_id = 0
        self.restarts = 0

    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker_main, args=(child, self._quiet, self._mem), daemon=True)
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def _kill(self, w: _Worker) -> None:
        try:
            w.proc.kill()
        except Exception:
            pass
        w.proc.join(5)
        w.conn.close()

    def close(self) -> None:
        for w in self._workers:
            try:
                w.conn.send(None)
            except Exception:
                pass
        for w in self._workers:
            w.proc.join(2)
            if w.proc.is_alive():
                self._kill(w)
        self._workers = []

    def __enter__(self) -> "TaskPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def map(
        self, func: Callable, tasks: Iterable[Tuple[Any, Any, float]]
    ) -> Iterator[Tuple[Any, TaskOutcome]]:
        """For each ``(key, args, timeout_s)``, yield ``(key, outcome)`` as they finish
        (completion order, not submission order)."""
        queue = deque(tasks)
        while len(self._workers) < self._n:
            self._workers.append(self._spawn())
        try:
            while True:
                for w in self._workers:
                    if w.task is None and queue:
                        key, args, timeout = queue.popleft()
                        w.task, w.task_id = (key, timeout), self._next_id
                        self._next_id += 1
                        w.started = time.perf_counter()
                        w.deadline, w.phase = w.started + timeout, "start"
                        w.conn.send((w.task_id, func, args))
                busy = [w for w in self._workers if w.task is not None]
                if not busy:
                    return
                wait_s = max(0.0, min(w.deadline for w in busy) - time.perf_counter())
                ready = multiprocessing.connection.wait([w.conn for w in busy], timeout=wait_s)
                now = time.perf_counter()
                for w in busy:
                    if w.conn in ready:
                        try:
                            msg = w.conn.recv()
                        except (EOFError, OSError):
                            w.proc.join(5)
                            code = w.proc.exitcode
                            yield self._finish(w, TaskOutcome("died", error=f"worker exit code {code}"), now)
                            continue
                        kind, task_id = msg[0], msg[1]
                        if task_id != w.task_id:
                            continue
                        if kind == "phase":
                            w.phase, w.deadline = msg[2], time.perf_counter() + msg[3]
                        elif kind == "done":
                            yield self._finish(w, TaskOutcome("done", value=msg[2]), now, respawn=False)
                        else:
                            yield self._finish(w, TaskOutcome("error", error=msg[2], value=msg[3]), now, respawn=False)
                    elif now >= w.deadline:
                        yield self._finish(w, TaskOutcome("timeout", error=f"timed out in phase {w.phase}"), now)
        finally:
            if queue or any(w.task is not None for w in self._workers):  # interrupted
                for w in self._workers:
                    self._kill(w)
                self._workers = []

    def _finish(self, w: _Worker, outcome: TaskOutcome, now: float, respawn: bool = True):
        key = w.task[0]
        outcome.phase = outcome.phase or w.phase
        outcome.wall_s = now - w.started
        w.task, w.task_id = None, -1
        if respawn:
            self._kill(w)
            self._workers[self._workers.index(w)] = self._spawn()
            self.restarts += 1
        return key, outcome


def map_pools(
    func: Callable, tasks_by_group: Dict[Any, List[Tuple[Any, Any, float]]], workers: int = 1, **pool_kwargs
) -> Iterator[Tuple[Any, TaskOutcome]]:
    """Like :meth:`TaskPool.map`, with one pool of ``workers`` processes per group of
    tasks, all groups running side by side (one thread drives each pool).  Keeps what
    a worker loads per group (an engine, say) to that group's workers."""
    import queue
    import threading

    results: "queue.Queue" = queue.Queue()
    stop = threading.Event()
    done = object()

    def drive(tasks) -> None:
        try:
            with TaskPool(workers, **pool_kwargs) as pool:
                for item in pool.map(func, tasks):
                    results.put(item)
                    if stop.is_set():
                        break
        except BaseException as e:  # surface it in the caller's thread
            results.put(e)
        finally:
            results.put(done)

    threads = [threading.Thread(target=drive, args=(t,), daemon=True) for t in tasks_by_group.values() if t]
    for t in threads:
        t.start()
    running = len(threads)
    try:
        while running:
            item = results.get()
            if item is done:
                running -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item
    finally:
        stop.set()


# --------------------------------------------------------------------------------------
# Timing and reports
# --------------------------------------------------------------------------------------


class Timer:
    """``with Timer() as t: ...`` then ``t.s`` (seconds, perf_counter)."""

    def __enter__(self) -> "Timer":
        self._t0 = time.perf_counter()
        self.s = 0.0
        return self

    def __exit__(self, *exc) -> None:
        self.s = time.perf_counter() - self._t0


def llguidance_matcher(llg, tokenizer, schema_text: str, options: Dict[str, Any]):
    """An LLGuidance matcher for a JSON Schema, or why LLGuidance refused it (a str)."""
    try:
        grammar = llg.LLMatcher.grammar_from_json_schema(schema_text, defaults=options)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    m = llg.LLMatcher(tokenizer, grammar, log_level=0)
    return m.get_error() if m.is_error() else m


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation; NaN for no values."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def pct(part: float, whole: float) -> str:
    return "n/a" if not whole else f"{100.0 * part / whole:.1f}%"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: Optional[str] = None) -> str:
    """A GitHub Markdown table; ``align`` is one letter per column (l, r, c)."""
    header = [str(h) for h in header]
    align = align or ("l" + "r" * (len(header) - 1))
    marks = {"l": ":---", "r": "---:", "c": ":---:"}
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(marks[a] for a in align) + " |"]
    for row in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in row) + " |")
    return "\n".join(out)


def environment_summary() -> Dict[str, str]:
    """Versions and machine facts to put next to measured numbers."""
    import platform

    info = {"python": platform.python_version(), "cpus": str(os.cpu_count())}
    for mod in ("xg2_plugin", "xgrammar", "llguidance", "transformers"):
        try:
            from importlib.metadata import version

            info[mod] = version(mod)
        except Exception:
            pass
    try:
        info["loadavg"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        pass
    return info


def selftest_task(args: Tuple[str, Any], ctx: TaskContext) -> Any:
    """A task for checking :class:`TaskPool` itself: ``("sleep", s)``, ``("exit", code)``,
    ``("raise", message)``, or ``("phase", (seconds_allowed, seconds_slept))``."""
    kind, value = args
    if kind == "sleep":
        time.sleep(value)
        return value
    if kind == "exit":
        os._exit(value)
    if kind == "raise":
        raise ValueError(value)
    if kind == "phase":
        allowed, slept = value
        ctx.phase("extended", allowed)
        time.sleep(slept)
        return slept
    raise ValueError(f"unknown self-test {kind!r}")
