"""Mask speed on MaskBench schemas: xg2_plugin against XGrammar and LLGuidance.

The MaskBench method (github.com/guidance-ai/jsonschemabench, ``maskbench/``), one
thread per engine:

* **compile** = time to first mask: ``compile_json_schema`` + matcher creation + the
  first ``fill_next_token_bitmask``, with the engine cold for that schema (below);
* **per token**: each test instance (valid and invalid) is serialised with
  ``json.dumps(data)`` and encoded with ``tok.encode(text, add_special_tokens=False)``
  (``--raw-unicode``: ``json.dumps(data, ensure_ascii=False)``, as MaskBench's own
  runner does; by default non-ASCII text is ``\\uXXXX``-escaped, which LLGuidance
  refuses by default, and XGrammar in places); a fresh matcher is made for it, then
  for each token ``fill_next_token_bitmask`` + ``accept_token`` are timed together
  (``perf_counter_ns`` around both): one sample.
  An instance stops at the first token the engine rejects; when every token was
  accepted, the final fill (the one that must allow the stop token) is one more sample.

What "cold" means, per engine (all reuse their tokenizer set-up, which is done once):

* ``xg2``: a fresh ``GrammarCompiler`` per schema (no compiled grammar is reused);
  token masks live in the tokenizer's process-wide pool, shared across grammars by
  structural hash as a server would share them, cold at the start of the run.  The
  front-end's process-wide memo tables (``functools.lru_cache`` of EBNF pieces for
  number ranges, formats and character sets; converted ``$ref`` targets) are cleared
  too, unless ``--keep-frontend-memo``.  ``--precompute-states N`` turns on the background
  precompute of N states' masks after compile and waits for it, untimed, before
  the instances (what an engine overlaps with prefill); ``--precompute-ms P``
  bounds that work to P ms from its start (the prefill it hides under), and the
  report says how long it ran and how many states it did.
* ``xgrammar``: a fresh ``GrammarCompiler(max_threads=1, cache_enabled=False)`` per
  schema (its compile precomputes the adaptive token mask cache, so that is in the
  compile time); mode ``strict_mode=False`` (MaskBench's "compliant" mode) and
  ``any_whitespace=True``.  ``--xgrammar-both`` adds ``xgrammar-strict``
  (``strict_mode=True``, same whitespace) as a further engine.
* ``llguidance``: ``LLMatcher.grammar_from_json_schema`` + ``LLMatcher(...)`` per
  schema; it has no cache across schemas.  Instance matchers are ``deep_copy()`` of
  the compiled matcher, as MaskBench does.

Every engine runs in its own worker subprocess (so a hang or a crash loses one
schema, and each engine's peak memory is its own); the schemas run one at a time,
the engines alternating in an order rotated by one per schema (and per repeat) so
that machine noise hits all alike.  The Python garbage collector is off while a
schema is being timed.  A schema an engine fails to compile (or times out on) is
counted, and left out of that engine's samples; the ratios ours/anchor are computed
on the schemas every engine compiled, and the figures are also shown per engine on
every schema it compiled.  ``--repeat R`` runs everything R times and reports the
median of each per-run figure (ratios: the median of the per-run ratios); each run
has fresh workers, so each starts with cold caches.

Examples::

    python examples/benchmark/speed.py --limit 200 --out speed.md   # also speed.json
    python examples/benchmark/speed.py --engines xg2,xgrammar --xgrammar-both --files 'Github_*'
    python examples/benchmark/speed.py --limit 100 --repeat 3 --shuffle --seed 2
"""

from __future__ import annotations

import os

# One thread per engine: set before numpy/torch/tokenizers are imported (in workers too).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "RAYON_NUM_THREADS"):  # fmt: skip
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import array  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import SchemaCase, markdown_table  # noqa: E402

ENGINES = ("xg2", "xgrammar", "xgrammar-strict", "llguidance")
TITLES = {
    "xg2": "xg2_plugin (ours)",
    "xgrammar": "XGrammar (compliant)",
    "xgrammar-strict": "XGrammar (strict)",
    "llguidance": "LLGuidance",
}
COMPILE_Q = (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))
TOKEN_Q = (("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9), ("max", 100))

# --------------------------------------------------------------------------------------
# Engines (instantiated inside the worker processes)
# --------------------------------------------------------------------------------------


class CompileFailure(Exception):
    """The engine refused the schema (as opposed to crashing on it)."""


def _limit_torch_threads() -> None:
    try:
        import torch

        torch.set_num_threads(1)
    except Exception:
        pass


def clear_frontend_memo() -> int:
    """Clear the process-wide memo tables of our JSON Schema front-end (lru_caches and
    ``*_CACHE`` dicts); returns how many were cleared."""
    n = 0
    for name in ("xg2_plugin.json_schema", "xg2_plugin.json_schema_common", "xg2_plugin.json_schema_formats",
                 "xg2_plugin.json_schema_regex", "xg2_plugin.json_schema_dfa", "xg2_plugin.json_schema_fragments"):
        mod = sys.modules.get(name)
        for attr, value in vars(mod).items() if mod else ():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
                n += 1
            elif isinstance(value, dict) and attr.isupper() and attr.endswith("_CACHE"):
                value.clear()
                n += 1
    return n


class Adapter:
    """One engine behind one interface; every call the timing loop makes is a bound
    method or a ``functools.partial`` of one, so the harness costs each engine alike."""

    name = ""
    vocab_size = 0
    stop_ids: List[int] = []

    def cold(self) -> None:  # untimed: make the engine cold for the next schema
        ...

    def compile(self, schema_text: str) -> Any: ...
    def matcher(self, compiled: Any) -> Any: ...
    def fill_fn(self, m: Any) -> Callable[[], Any]: ...  # into self.mask (numpy, 1 row)
    def accept_fn(self, m: Any) -> Callable[[int], bool]: ...
    def completed(self, m: Any) -> bool: ...
    def fork(self, m: Any) -> Any: ...
    def batch_fill_fn(self, matchers: List[Any], threads: int) -> Callable[[], Any]: ...
    def memory(self, compiled: Any) -> Dict[str, int]:
        return {}

    mask: Any = None

    def settle(self, compiled: Any) -> Optional[Dict[str, float]]:  # untimed, after the first mask
        return None

    def stop_allowed(self) -> bool:
        row = self.mask[0]
        return any((int(row[s >> 5]) >> (s & 31)) & 1 for s in self.stop_ids if 0 <= s < self.vocab_size)


class XGrammarAPIAdapter(Adapter):
    """An engine with XGrammar's Python API (XGrammar itself, and ours, which mirrors
    it): matchers, bitmasks and batch fills are driven the same way."""

    module: Any = None

    def setup(self, module, tok) -> None:
        import functools

        self.module, self.partial = module, functools.partial
        self.info = module.TokenizerInfo.from_huggingface(tok)
        self.vocab_size = self.info.vocab_size
        self.stop_ids = list(self.info.stop_token_ids)
        self.bitmask = module.allocate_token_bitmask(1, self.vocab_size)
        self.mask = self.bitmask.numpy()

    def matcher(self, compiled):
        return self.module.GrammarMatcher(compiled)

    def fill_fn(self, m):
        return self.partial(m.fill_next_token_bitmask, self.bitmask)

    def accept_fn(self, m):
        return m.accept_token

    def completed(self, m):
        return m.is_completed()

    def fork(self, m):
        return m.fork()

    def batch_fill_fn(self, matchers, threads):
        bitmask = self.module.allocate_token_bitmask(len(matchers), self.vocab_size)
        batch = self.module.BatchGrammarMatcher(max_threads=threads)
        return self.partial(batch.batch_fill_next_token_bitmask, matchers, bitmask)


class Xg2Adapter(XGrammarAPIAdapter):
    name = "xg2"

    def __init__(self, tok, *, cache_limit_bytes: Optional[int] = None, keep_memo: bool = False,
                 precompute_states: int = 0, precompute_ms: Optional[float] = None) -> None:
        import xg2_plugin as xgr

        self.setup(xgr, tok)
        self.xgr = xgr
        self.keep_memo = keep_memo
        self.precompute_states = precompute_states
        self.precompute_ms = precompute_ms
        # With a cache limit, one compiler lives for the whole run (a cache bounded in
        # bytes, as a server would hold); each schema is still compiled once (a miss).
        self.persistent = cache_limit_bytes is not None
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_limit_bytes=cache_limit_bytes or -1,
                                            precompute_states=precompute_states, precompute_ms=precompute_ms)
        self.refusals = (xgr.GrammarError, xgr.LimitExceededError, xgr.InvalidArgumentError)

    def cold(self) -> None:
        if not self.keep_memo:
            clear_frontend_memo()
        if not self.persistent:
            self.compiler = self.xgr.GrammarCompiler(self.info, max_threads=1, precompute_states=self.precompute_states,
                                                     precompute_ms=self.precompute_ms)

    def settle(self, compiled) -> Optional[Dict[str, float]]:
        """Wait for the background precompute (work an engine overlaps with prefill):
        how long after the first mask it ran on, and the states it did."""
        if compiled.precompute_future is None:
            return None
        t0 = time.perf_counter()
        states = compiled.precompute_future.result()
        return {"wait_ms": 1e3 * (time.perf_counter() - t0), "states": states}

    def compile(self, schema_text):
        try:
            return self.compiler.compile_json_schema(schema_text, strict_mode=False, any_whitespace=True)
        except self.refusals as e:
            raise CompileFailure(f"{type(e).__name__}: {e}") from None

    def split_compile(self, schema_text: str) -> Dict[str, float]:
        """Diagnosis (untimed by the benchmark): compile again, cold, timing the steps:
        the Python front-end (schema to EBNF text), the native EBNF parse and automata,
        and binding to the tokenizer (CompiledGrammar)."""
        from xg2_plugin.compiler import CompiledGrammar
        from xg2_plugin.json_schema import json_schema_to_ebnf

        if not self.keep_memo:
            clear_frontend_memo()
        t0 = time.perf_counter()
        ebnf = json_schema_to_ebnf(schema_text, any_whitespace=True, strict_mode=False)
        t1 = time.perf_counter()
        grammar = self.xgr.Grammar.from_ebnf(ebnf)
        t2 = time.perf_counter()
        CompiledGrammar(grammar, self.info)
        t3 = time.perf_counter()
        return {"frontend_ms": 1e3 * (t1 - t0), "ebnf_ms": 1e3 * (t2 - t1), "bind_ms": 1e3 * (t3 - t2),
                "ebnf_chars": len(ebnf), "rules": grammar.num_rules, "states": grammar.num_states}  # fmt: skip

    def memory(self, compiled):
        """Sizes as our API reports them, plus (a diagnosis through a private field)
        what the grammars in the compiler's cache hold now, mask caches included."""
        cached = list(getattr(self.compiler, "_cache", {}).values())
        return {
            "compiled_bytes": compiled.memory_size_bytes if compiled is not None else 0,
            "compiler_cache_bytes": self.compiler.get_cache_size_bytes(),
            "compiler_cache_entries": len(cached),
            "cached_live_bytes": sum(c.memory_size_bytes for c, _size in cached),  # (entry: grammar, size)
            "cache_limit_bytes": self.compiler.cache_limit_bytes,
        }


class XGrammarAdapter(XGrammarAPIAdapter):
    name = "xgrammar"
    strict = False

    def __init__(self, tok, **_) -> None:
        import xgrammar

        self.setup(xgrammar, tok)
        self.compiler = None

    def cold(self) -> None:
        self.compiler = self.module.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)

    def compile(self, schema_text):
        try:
            return self.compiler.compile_json_schema(schema_text, any_whitespace=True, strict_mode=self.strict)
        except Exception as e:  # XGrammar raises RuntimeError/ValueError for what it refuses
            raise CompileFailure(f"{type(e).__name__}: {e}") from None

    def memory(self, compiled):
        return {"compiled_bytes": compiled.memory_size_bytes} if compiled is not None else {}


class XGrammarStrictAdapter(XGrammarAdapter):
    name = "xgrammar-strict"
    strict = True


class LLGuidanceAdapter(Adapter):
    name = "llguidance"

    def __init__(self, tok, **_) -> None:
        import functools

        import llguidance
        import llguidance.hf
        import llguidance.numpy
        import numpy as np

        self.llg, self.partial = llguidance, functools.partial
        self.tokenizer = llguidance.hf.from_tokenizer(tok)
        self.vocab_size = self.tokenizer.vocab_size
        self.stop_ids = [self.tokenizer.eos_token]
        self.mask = np.zeros((1, (self.vocab_size + 31) // 32), dtype=np.int32)
        self.ptr, self.nbytes = self.mask.ctypes.data, self.mask.nbytes
        self.options = {"whitespace_flexible": True}

    def compile(self, schema_text):
        m = common.llguidance_matcher(self.llg, self.tokenizer, schema_text, self.options)
        if isinstance(m, str):
            raise CompileFailure(m)
        return m

    def matcher(self, compiled):
        return compiled.deep_copy()

    def fill_fn(self, m):
        return self.partial(m.unsafe_compute_mask_ptr, self.ptr, self.nbytes)

    def accept_fn(self, m):
        return m.consume_token

    def completed(self, m):
        return m.is_accepting()

    def fork(self, m):
        return m.deep_copy()

    def batch_fill_fn(self, matchers, threads):
        import numpy as np

        import llguidance.numpy as lnp

        bitmask = np.zeros((len(matchers), (self.vocab_size + 31) // 32), dtype=np.int32)
        executor = self.llg.LLExecutor(num_threads=threads)
        pairs = [(m, i) for i, m in enumerate(matchers)]
        return self.partial(lnp.fill_next_token_bitmask_par, executor, pairs, bitmask)


ADAPTERS = {
    "xg2": Xg2Adapter,
    "xgrammar": XGrammarAdapter,
    "xgrammar-strict": XGrammarStrictAdapter,
    "llguidance": LLGuidanceAdapter,
}

_STATE: Dict[Any, Any] = {}


def get_tokenizer(path: str):
    key = ("tok", path)
    if key not in _STATE:
        _STATE[key] = common.load_hf_tokenizer(path)
    return _STATE[key]


def get_adapter(engine: str, tokenizer: str, **kwargs) -> Adapter:
    key = (engine, tokenizer, tuple(sorted(kwargs.items())))
    if key not in _STATE:
        _limit_torch_threads()
        _STATE[key] = ADAPTERS[engine](get_tokenizer(tokenizer), **kwargs)
    return _STATE[key]


def engine_available(name: str) -> Optional[str]:
    """None if the engine can run here, else why not."""
    modules = {"xg2": "xg2_plugin", "xgrammar": "xgrammar", "xgrammar-strict": "xgrammar", "llguidance": "llguidance.hf"}
    if name not in modules:
        return f"unknown engine {name!r} (choose from {', '.join(ENGINES)})"
    try:
        __import__(modules[name])
    except ImportError as e:
        return f"cannot import it: {e}"
    return None


def rss_bytes() -> int:
    """Current resident set size of this process."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (getrusage; KiB on Linux)."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


# --------------------------------------------------------------------------------------
# Timing one schema on one engine (runs in a worker)
# --------------------------------------------------------------------------------------


def time_instances(eng: Adapter, compiled: Any, token_lists: Sequence[Sequence[int]], valid: Sequence[bool],
                   samples: "array.array") -> List[Dict[str, Any]]:  # fmt: skip
    """Feed each instance to a fresh matcher, appending one sample (ns) per fill+accept;
    returns per-instance outcomes."""
    ns = time.perf_counter_ns
    out = []
    for tokens, ok_label in zip(token_lists, valid):
        m = eng.matcher(compiled)
        fill, accept = eng.fill_fn(m), eng.accept_fn(m)
        rejected_at = -1
        for i, t in enumerate(tokens):
            t0 = ns()
            fill()
            ok = accept(t)
            samples.append(ns() - t0)
            if not ok:
                rejected_at = i
                break
        if rejected_at >= 0:
            out.append({"valid": ok_label, "outcome": "rejected", "at": rejected_at, "tokens": len(tokens)})
            continue
        t0 = ns()
        fill()  # the final mask: must allow the stop token
        samples.append(ns() - t0)
        if not eng.completed(m):
            outcome = "incomplete"
        elif not eng.stop_allowed():
            outcome = "stop-masked"
        else:
            outcome = "accepted"
        out.append({"valid": ok_label, "outcome": outcome, "tokens": len(tokens)})
    return out


def time_schema(eng: Adapter, schema_text: str, token_lists, valid) -> Tuple[Dict[str, Any], Any, "array.array"]:
    """Compile (time to first mask) and time every instance.  Returns the result,
    the compiled grammar (None on failure) and the samples (ns)."""
    eng.cold()
    gc.collect()
    ns = time.perf_counter_ns
    res: Dict[str, Any] = {"status": "ok", "error": ""}
    samples = array.array("q")
    gc.disable()
    try:
        t0 = ns()
        try:
            compiled = eng.compile(schema_text)
        except CompileFailure as e:
            res.update(status="compile_error", error=str(e)[:300], compile_ns=ns() - t0)
            return res, None, samples
        except Exception as e:  # not a refusal: the compiler crashed
            res.update(status="crash", error=f"{type(e).__name__}: {e}"[:300], compile_ns=ns() - t0)
            return res, None, samples
        t1 = ns()
        m = eng.matcher(compiled)
        t2 = ns()
        eng.fill_fn(m)()
        t3 = ns()
        res.update(compile_ns=t3 - t0, parts_ns={"compile": t1 - t0, "matcher": t2 - t1, "first_fill": t3 - t2})
        pre = eng.settle(compiled)
        if pre is not None:
            res["precompute"] = pre
        try:
            res["instances"] = time_instances(eng, compiled, token_lists, valid, samples)
        except Exception as e:
            res.update(status="crash", error=f"while matching: {type(e).__name__}: {e}"[:300])
            samples = array.array("q")
        return res, compiled, samples
    finally:
        gc.enable()


def encode_instances(tok, tests: Sequence[Tuple[Any, bool]], raw_unicode: bool = False) -> List[List[int]]:
    """``json.dumps(data)`` (``ensure_ascii=False`` with ``raw_unicode``), encoded."""
    return [tok.encode(json.dumps(data, ensure_ascii=not raw_unicode), add_special_tokens=False) for data, _ in tests]


def ensure_engine(args: Dict[str, Any]) -> Adapter:
    """The worker's engine, loaded and warmed up on first use (also after a worker was
    replaced, which a time-out does)."""
    eng = get_adapter(args["engine"], args["tokenizer"], **args.get("engine_kwargs", {}))
    if args.get("warmup", True) and not getattr(eng, "warmed_up", False):
        warm_up(eng, get_tokenizer(args["tokenizer"]))
        eng.warmed_up = True
    return eng


def speed_task(args: Dict[str, Any], ctx) -> Dict[str, Any]:
    """One engine on one schema (in a worker); samples come back as bytes."""
    ctx.phase("init", 1800)
    eng = ensure_engine(args)
    tok = get_tokenizer(args["tokenizer"])
    token_lists = encode_instances(tok, args["tests"], args.get("raw_unicode", False))
    ctx.phase("run", args["timeout"])
    res, compiled, samples = time_schema(eng, args["schema_text"], token_lists, [v for _, v in args["tests"]])
    if args["engine"] == "xg2" and res["status"] == "ok" and res["compile_ns"] >= 1e6 * args.get("split_ms", 1e9):
        try:
            res["split"] = eng.split_compile(args["schema_text"])
        except Exception as e:
            res["split"] = {"error": f"{type(e).__name__}: {e}"[:200]}
    res["samples"] = samples.tobytes()
    res["peak_rss"] = peak_rss_bytes()
    res["rss"] = rss_bytes()
    del compiled
    return res


# Compiled and matched once per worker before any timing, so that lazy imports and
# one-off initialisation of each engine do not land on the first schema measured.
WARMUP_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20, "pattern": "^[a-z ]+$"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "score": {"type": "number"},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", 3, None]}, "maxItems": 3},
        "kind": {"anyOf": [{"const": "x"}, {"type": "boolean"}]},
        "ref": {"$ref": "#/$defs/n"},
    },
    "required": ["name", "age"],
    "$defs": {"n": {"type": ["object", "null"], "properties": {"n": {"$ref": "#/$defs/n"}}}},
}
WARMUP_INSTANCES = [
    ({"name": "ann", "age": 3, "score": -1.5e3, "email": "a@b.co", "tags": ["a", 3], "kind": True,
      "ref": {"n": None}}, True),  # fmt: skip
    ({"name": "ann", "age": 300}, False),
]


def warm_up(eng: Adapter, tok) -> None:
    text = json.dumps(WARMUP_SCHEMA)
    time_schema(eng, text, encode_instances(tok, WARMUP_INSTANCES), [v for _, v in WARMUP_INSTANCES])


def init_task(args: Dict[str, Any], ctx) -> Dict[str, Any]:
    """Load the tokenizer and the engine and warm it up (in a worker); report memory."""
    ensure_engine(args)
    gc.collect()
    return {"rss": rss_bytes(), "peak_rss": peak_rss_bytes(), "pid": os.getpid()}


def probe_task(args: Any, ctx) -> Dict[str, Any]:
    """Memory and pid of the process it runs in (checks the worker set-up)."""
    return {"pid": os.getpid(), "rss": rss_bytes(), "peak_rss": peak_rss_bytes(), "args": args,
            "omp": os.environ.get("OMP_NUM_THREADS")}  # fmt: skip


class _InlineCtx:
    def phase(self, name: str, seconds: float) -> None:
        pass


class Runner:
    """Runs tasks for each engine in that engine's own worker process (one at a time),
    or in this process with ``inline=True`` (no time limit; for tests and debugging)."""

    def __init__(self, engines: Sequence[str], inline: bool = False, memory_limit_gb: Optional[float] = None):
        self.inline = inline
        self.pools = {} if inline else {e: common.TaskPool(1, memory_limit_gb=memory_limit_gb) for e in engines}

    def run(self, engine: str, func: Callable, args: Dict[str, Any], timeout: float) -> common.TaskOutcome:
        if self.inline:
            t0 = time.perf_counter()
            try:
                value = func(args, _InlineCtx())
                return common.TaskOutcome("done", value=value, wall_s=time.perf_counter() - t0)
            except Exception as e:
                return common.TaskOutcome("error", error=f"{type(e).__name__}: {e}", wall_s=time.perf_counter() - t0)
        for attempt in range(2):
            try:
                return list(self.pools[engine].map(func, [(engine, args, timeout)]))[0][1]
            except (OSError, EOFError) as e:  # a replacement worker died before taking the task
                error = f"{type(e).__name__}: {e}"  # the pool has dropped its workers: start afresh
        return common.TaskOutcome("died", error=f"worker unusable twice ({error})")

    def run_all(self, func: Callable, args_by_engine: Dict[str, Dict[str, Any]], timeout: float):
        """The same set-up task on every engine's worker side by side (loading is slow)."""
        results: Dict[str, common.TaskOutcome] = {}
        if self.inline:
            return {e: self.run(e, func, a, timeout) for e, a in args_by_engine.items()}
        threads = []
        for e, a in args_by_engine.items():
            def go(e=e, a=a):
                results[e] = self.run(e, func, a, timeout)
            threads.append(threading.Thread(target=go, daemon=True))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results

    def close(self) -> None:
        for p in self.pools.values():
            p.close()


def outcome_result(outcome: common.TaskOutcome, timeout: float) -> Dict[str, Any]:
    if outcome.status == "done":
        return outcome.value
    if outcome.status == "timeout":
        return {"status": "timeout", "error": f"over {timeout:g} s ({outcome.error})"}
    if outcome.status == "died":
        return {"status": "crash", "error": f"worker died: {outcome.error}"}
    return {"status": "crash", "error": outcome.error[:300]}


# --------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------


def quantiles(values, qs) -> Dict[str, float]:
    """Linear-interpolation percentiles (as common.percentile), plus mean and n."""
    import numpy as np

    xs = np.asarray(values, dtype=np.float64)
    if xs.size == 0:
        return {**{k: float("nan") for k, _ in qs}, "mean": float("nan"), "n": 0}
    out = {k: float(v) for (k, _), v in zip(qs, np.percentile(xs, [q for _, q in qs]))}
    out["mean"] = float(xs.mean())
    out["n"] = int(xs.size)
    return out


def schema_summary(res: Dict[str, Any]) -> Dict[str, Any]:
    """What the JSON keeps per (schema, engine): no raw samples, their percentiles."""
    s = {k: v for k, v in res.items() if k not in ("samples", "instances")}
    if "compile_ns" in res:
        s["compile_ms"] = res["compile_ns"] / 1e6
    if res.get("status") == "ok":
        xs = array.array("q")
        xs.frombytes(res["samples"])
        s["token_us"] = {k: v / 1e3 if k != "n" else v for k, v in quantiles(xs, TOKEN_Q).items()}
        inst = res.get("instances", [])
        s["instances"] = len(inst)
        s["outcomes"] = {o: sum(1 for i in inst if i["outcome"] == o) for o in sorted({i["outcome"] for i in inst})}
        s["valid_rejected"] = sum(1 for i in inst if i["valid"] and i["outcome"] != "accepted")
        s["invalid_accepted"] = sum(1 for i in inst if not i["valid"] and i["outcome"] in ("accepted", "stop-masked"))
    return s


def figures(per_schema: Dict[str, Dict[str, Dict[str, Any]]], samples: Dict[Tuple[str, str], Any],
            engines: Sequence[str], schema_ids: Sequence[str]) -> Dict[str, Dict[str, Any]]:  # fmt: skip
    """Per engine: compile (ms) and per-token (µs) figures over ``schema_ids``, using
    only the schemas the engine compiled."""
    import numpy as np

    out = {}
    for e in engines:
        ok = [c for c in schema_ids if per_schema[c][e].get("status") == "ok"]
        comp = [per_schema[c][e]["compile_ns"] / 1e6 for c in ok]
        parts = [np.frombuffer(samples[(c, e)], dtype=np.int64) for c in ok if (c, e) in samples]
        toks = np.concatenate(parts) / 1e3 if parts else np.zeros(0)
        statuses = [per_schema[c][e].get("status", "missing") for c in schema_ids]
        out[e] = {
            "schemas": len(schema_ids),
            "compiled": len(ok),
            "compile_errors": statuses.count("compile_error"),
            "timeouts": statuses.count("timeout"),
            "crashes": statuses.count("crash"),
            "compile_ms": quantiles(comp, COMPILE_Q),
            "token_us": quantiles(toks, TOKEN_Q),
            "valid_rejected": sum(per_schema[c][e].get("valid_rejected", 0) for c in ok),
            "invalid_accepted": sum(per_schema[c][e].get("invalid_accepted", 0) for c in ok),
        }
    return out


FIGURE_KEYS = [("compile_ms", k) for k, _ in COMPILE_Q] + [("compile_ms", "mean")] + \
              [("token_us", k) for k, _ in TOKEN_Q] + [("token_us", "mean")]  # fmt: skip


def ratios(fig: Dict[str, Dict[str, Any]], ours: str, anchor: str) -> Dict[str, float]:
    out = {}
    for group, k in FIGURE_KEYS:
        a, b = fig[ours][group][k], fig[anchor][group][k]
        out[f"{group}.{k}"] = a / b if b and b == b and a == a else float("nan")
    return out


def median_figures(runs: List[Dict[str, Dict[str, Any]]]) -> Dict[str, Dict[str, Any]]:
    """Median over runs of every number in the per-engine figures."""
    if len(runs) == 1:
        return runs[0]

    def med(vals):
        if isinstance(vals[0], dict):
            return {k: med([v[k] for v in vals]) for k in vals[0]}
        vals = [v for v in vals if v == v]
        return statistics.median(vals) if vals else float("nan")

    return {e: med([r[e] for r in runs]) for e in runs[0]}


# --------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------


def select(cases: List[SchemaCase], opts) -> List[SchemaCase]:
    rng = random.Random(opts.seed)
    if opts.limit is not None and opts.limit < len(cases):
        keep = set(rng.sample(range(len(cases)), opts.limit))
        cases = [c for i, c in enumerate(cases) if i in keep]
    if opts.shuffle:
        cases = list(cases)
        rng.shuffle(cases)
    return cases


def rotated(engines: Sequence[str], k: int) -> List[str]:
    k %= len(engines)
    return list(engines[k:]) + list(engines[:k])


def loadavg() -> List[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def run_speed(opts, cases: List[SchemaCase], engines: List[str]) -> Dict[str, Any]:
    """Every run with fresh workers: each starts with cold process-wide caches (our
    mask pool and automaton cache), as the first did, so repeats measure the same
    thing instead of a pool the previous run filled.  (In-process, runs after the
    first find the caches warm.)"""
    kwargs = {"xg2": {"keep_memo": opts.keep_frontend_memo, "precompute_states": opts.precompute_states,
                      "precompute_ms": opts.precompute_ms}}
    init: Dict[str, Any] = {}
    runs: List[Dict[str, Any]] = []
    for r in range(opts.repeat):
        runner = Runner(engines, inline=opts.in_process, memory_limit_gb=opts.memory_limit_gb)
        try:
            loaded = runner.run_all(init_task, {e: {"engine": e, "tokenizer": opts.tokenizer, "warmup": opts.warmup,
                                                    "engine_kwargs": kwargs.get(e, {})} for e in engines}, 1800)  # fmt: skip
            for e, o in loaded.items():
                if o.status != "done":
                    raise SystemExit(f"engine {e} failed to load: {o.status} {o.error}")
            if not init:
                init = {e: o.value for e, o in loaded.items()}
            runs.append(run_once(opts, cases, engines, runner, kwargs, r))
            runs[-1]["worker_pids"] = {e: o.value["pid"] for e, o in loaded.items()}
        finally:
            runner.close()
    return {"init": init, "runs": runs}


def run_once(opts, cases: List[SchemaCase], engines: List[str], runner: "Runner", kwargs: Dict[str, Any],
             r: int) -> Dict[str, Any]:
    la0, t_run = loadavg(), time.perf_counter()
    per_schema: Dict[str, Dict[str, Dict[str, Any]]] = {}
    samples: Dict[Tuple[str, str], bytes] = {}
    for i, case in enumerate(cases):
        text = json.dumps(case.schema)
        per_schema[case.id] = {}
        for e in rotated(engines, i + r):
            args = {"engine": e, "tokenizer": opts.tokenizer, "schema_text": text, "tests": case.tests,
                    "timeout": opts.timeout, "engine_kwargs": kwargs.get(e, {}), "split_ms": opts.split_ms,
                    "warmup": opts.warmup,
                    "raw_unicode": opts.raw_unicode}  # fmt: skip
            res = outcome_result(runner.run(e, speed_task, args, opts.timeout), opts.timeout)
            if res.get("status") == "ok":
                samples[(case.id, e)] = res["samples"]
            elif opts.progress:
                print(f"  {e} on {case.file}: {res['status']} {res.get('error', '')[:150]}", file=sys.stderr)
            per_schema[case.id][e] = schema_summary(res)
        if opts.progress and ((i + 1) % max(1, len(cases) // 20) == 0 or i + 1 == len(cases)):
            el = time.perf_counter() - t_run
            print(f"[run {r + 1}/{opts.repeat}] {i + 1}/{len(cases)} schemas, {el:.0f} s, "
                  f"load {loadavg()}", file=sys.stderr, flush=True)  # fmt: skip
    ids = [c.id for c in cases]
    common_ids = [c for c in ids if all(per_schema[c][e].get("status") == "ok" for e in engines)]
    fig_all = figures(per_schema, samples, engines, ids)
    fig_common = figures(per_schema, samples, engines, common_ids)
    run_ratios = {a: ratios(fig_common, "xg2", a) for a in engines if a != "xg2"}
    return {
        "run": r, "loadavg_start": la0, "loadavg_end": loadavg(), "wall_s": time.perf_counter() - t_run,
        "common_schemas": len(common_ids), "figures_all": fig_all, "figures_common": fig_common,
        "ratios_common": run_ratios, "per_schema": per_schema,
    }  # fmt: skip


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def fmt(x: float, digits: int = 1) -> str:
    if x != x:
        return "n/a"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}f}"


def fmt_ratio(x: float) -> str:
    if x != x:
        return "n/a"
    return f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x"  # small ratios keep two significant digits


def figure_rows(fig: Dict[str, Dict[str, Any]], engines: Sequence[str], with_counts: bool) -> List[List[str]]:
    rows = []
    for e in engines:
        f = fig[e]
        row = [TITLES[e]]
        if with_counts:
            row.append(f"{f['compiled']:.0f}/{f['schemas']:.0f}")
        row += [fmt(f["compile_ms"][k]) for k, _ in COMPILE_Q] + [fmt(f["compile_ms"]["mean"])]
        row += [fmt(f["token_us"][k]) for k, _ in TOKEN_Q] + [fmt(f["token_us"]["mean"]), f"{f['token_us']['n']:.0f}"]
        rows.append(row)
    return rows


FIG_HEADER = (["compile p50", "p90", "p99", "max", "mean (ms)"]
              + ["token p50", "p90", "p99", "p99.9", "max", "mean (µs)", "samples"])  # fmt: skip


def report(opts, result: Dict[str, Any], cases: List[SchemaCase], engines: List[str]) -> str:
    runs = result["runs"]
    R = len(runs)
    fig_common = median_figures([r["figures_common"] for r in runs])
    fig_all = median_figures([r["figures_all"] for r in runs])
    ratio_med = {a: {k: statistics.median([r["ratios_common"][a][k] for r in runs]) for k in runs[0]["ratios_common"][a]}
                 for a in runs[0]["ratios_common"]}  # fmt: skip
    n_tests = sum(len(c.tests) for c in cases)
    lines = [
        f"### Speed on {len(cases)} MaskBench schemas ({n_tests} test instances)",
        "",
        f"{'Median of ' + str(R) + ' alternated runs' if R > 1 else 'One run'}; load average (1, 5, 15 min) "
        + "; ".join(f"run {r['run'] + 1}: {r['loadavg_start']} → {r['loadavg_end']}" for r in runs) + ".",
        "",
        f"**Schemas every engine compiled ({runs[0]['common_schemas']}"
        + (f", median over runs" if R > 1 else "") + ")**: compile = time to first mask, per token = fill + accept.",
        "",
        markdown_table(["engine"] + FIG_HEADER, figure_rows(fig_common, engines, False)),
    ]
    if ratio_med:
        lines += ["", "Ratios ours/anchor on those schemas (below 1 = ours faster):", ""]
        rrows = []
        for a, rs in ratio_med.items():
            rrows.append([f"xg2 / {TITLES[a]}"] + [fmt_ratio(rs[f"{g}.{k}"]) for g, k in FIGURE_KEYS])
        lines.append(markdown_table(["ratio"] + FIG_HEADER[:-1], rrows))
    lines += [
        "",
        "**Each engine on every schema it compiled** (compiled/total; failures and timeouts are counted, not timed):",
        "",
        markdown_table(["engine", "compiled"] + FIG_HEADER, figure_rows(fig_all, engines, True)),
        "",
    ]
    fail_rows = []
    for e in engines:
        f = fig_all[e]
        fail_rows.append([TITLES[e], f"{f['compile_errors']:.0f}", f"{f['timeouts']:.0f}", f"{f['crashes']:.0f}",
                          f"{f['valid_rejected']:.0f}", f"{f['invalid_accepted']:.0f}"])  # fmt: skip
    lines += [markdown_table(["engine", "compile errors", f"timeouts (> {opts.timeout:g} s)", "crashes",
                              "valid instances rejected", "invalid instances accepted"], fail_rows), ""]  # fmt: skip
    mem = []
    for e in engines:
        base = result["init"][e]["rss"]
        peak = max(r["per_schema"][c][e].get("peak_rss", 0) for r in runs for c in r["per_schema"])
        mem.append([TITLES[e], f"{base / 2**20:.0f}", f"{max(peak, base) / 2**20:.0f}"])
    if not opts.in_process:
        lines += ["Worker memory (MiB): resident after loading the tokenizer and engine, and peak (getrusage):", "",
                  markdown_table(["engine", "after load", "peak"], mem), ""]  # fmt: skip
    lines.append(precompute_report(runs[-1]["per_schema"], opts))
    lines.append(slowest_report(runs[-1]["per_schema"], engines, opts.top))
    return "\n".join(lines)


def precompute_report(per_schema: Dict[str, Dict[str, Dict[str, Any]]], opts) -> str:
    """How long our background precompute ran on after the first mask (last run)."""
    pre = [per_schema[c]["xg2"]["precompute"] for c in per_schema if "precompute" in per_schema[c].get("xg2", {})]
    if not pre:
        return ""
    import numpy as np

    wait = np.array([p["wait_ms"] for p in pre])
    states = np.array([p["states"] for p in pre])
    budget = f"at most {opts.precompute_states} states" + (
        f" or {opts.precompute_ms:g} ms" if opts.precompute_ms is not None else "")
    return (f"Background precompute ({budget}, started at compile; untimed wait after the first mask, "
            f"{len(pre)} schemas): it ran on for p50 {np.percentile(wait, 50):.1f} ms, p90 "
            f"{np.percentile(wait, 90):.1f} ms, max {wait.max():.1f} ms after the first mask, and did p50 "
            f"{np.percentile(states, 50):.0f} states (max {states.max():.0f}).\n")


def slowest_report(per_schema: Dict[str, Dict[str, Dict[str, Any]]], engines: Sequence[str], top: int) -> str:
    """Our slowest schemas (last run): by compile time and by max per-token time."""
    others = [e for e in engines if e != "xg2"]

    def cell(c, e, key):
        s = per_schema[c][e]
        if s.get("status") != "ok":
            return s.get("status", "?")
        return fmt(s["compile_ms"]) if key == "compile" else fmt(s["token_us"][key])

    lines = []
    ours_ok = [c for c in per_schema if per_schema[c]["xg2"].get("status") == "ok"]
    by_compile = sorted(ours_ok, key=lambda c: -per_schema[c]["xg2"]["compile_ms"])[:top]
    rows = []
    for c in by_compile:
        p = per_schema[c]["xg2"].get("parts_ns", {})
        sp = per_schema[c]["xg2"].get("split", {})
        steps = " / ".join(f"{p.get(k, 0) / 1e6:.1f}" for k in ("compile", "matcher", "first_fill"))
        if "frontend_ms" in sp:
            steps = f"{sp['frontend_ms']:.1f} + {sp['ebnf_ms']:.1f} + {sp['bind_ms']:.1f} / " + steps.split(" / ", 1)[1]
        rows.append([f"`{c}`", cell(c, "xg2", "compile"), steps]
                    + ([f"{sp['ebnf_chars']} / {sp['rules']} / {sp['states']}"] if "rules" in sp else [""])
                    + [cell(c, e, "compile") for e in others])  # fmt: skip
    lines += [f"Our {len(rows)} slowest schemas to first mask (ms).  Steps: compile / matcher / first fill; the "
              "compile is split (front-end + EBNF to automata + binding, timed again cold) where it took over "
              "`--split-ms`; size: EBNF characters / rules / automaton states:", "",
              markdown_table(["schema", "xg2", "steps", "size"] + [TITLES[e] for e in others], rows), ""]  # fmt: skip
    with_tokens = [c for c in ours_ok if per_schema[c]["xg2"]["token_us"]["n"]]
    by_max = sorted(with_tokens, key=lambda c: -per_schema[c]["xg2"]["token_us"]["max"])[:top]
    rows = [[f"`{c}`", cell(c, "xg2", "max"), cell(c, "xg2", "p99"), cell(c, "xg2", "p50"),
             f"{per_schema[c]['xg2']['token_us']['n']}"] + [cell(c, e, "max") for e in others]
            for c in by_max]  # fmt: skip
    lines += [f"Our {len(rows)} schemas with the slowest single token (µs):", "",
              markdown_table(["schema", "xg2 max", "xg2 p99", "xg2 p50", "samples"] + [f"{TITLES[e]} max" for e in others],
                             rows)]  # fmt: skip
    bad = [c for c in per_schema if per_schema[c]["xg2"].get("status") in ("timeout", "crash")]
    if bad:
        lines += ["", "Our timeouts and crashes: " + ", ".join(f"`{c}` ({per_schema[c]['xg2']['status']})" for c in bad)]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=common.shared_path("data", "maskbench-dev"), help="MaskBench-format directory")
    ap.add_argument("--tokenizer", default=common.shared_path("tokenizers", "llama3"), help="HF tokenizer directory")
    ap.add_argument("--engines", default="xg2,xgrammar,llguidance", help="comma-separated: xg2 (always), xgrammar, llguidance")
    ap.add_argument("--xgrammar-both", action="store_true", help="also run XGrammar with strict_mode=True (xgrammar-strict)")
    ap.add_argument("--limit", type=int, default=None, help="a seeded random sample of N schemas")
    ap.add_argument("--files", default=None, help="only files whose base name matches this glob")
    ap.add_argument("--seed", type=int, default=0, help="seed of --limit and --shuffle")
    ap.add_argument("--shuffle", action="store_true", help="run the schemas in a seeded random order")
    ap.add_argument("--repeat", type=int, default=1, help="run everything R times; report medians of per-run figures")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per (schema, engine) (default 120)")
    ap.add_argument("--memory-limit-gb", type=float, default=None, help="address-space limit per worker")
    ap.add_argument("--raw-unicode", action="store_true",
                    help="serialise instances with ensure_ascii=False (MaskBench's runner) instead of json.dumps' default")
    ap.add_argument("--keep-frontend-memo", action="store_true", help="do not clear our front-end's memo tables per schema")
    ap.add_argument("--precompute-states", type=int, default=0,
                    help="ours: precompute this many states' masks in the background after compile, "
                         "waited for (untimed) before the instances, as an engine overlaps it with prefill")
    ap.add_argument("--precompute-ms", type=float, default=None,
                    help="ours: stop that background work this many ms after it starts (the prefill it overlaps)")
    ap.add_argument("--split-ms", type=float, default=50.0,
                    help="for our schemas slower than this to first mask, compile again (untimed) to split the steps")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false",
                    help="skip each engine's warm-up schema (for tests; the first schema then pays lazy set-up)")
    ap.add_argument("--top", type=int, default=10, help="slowest schemas to list (default 10)")
    ap.add_argument("--in-process", action="store_true", help="no worker processes (no time limit; tests, debugging)")
    ap.add_argument("--out", default=None, help="write the Markdown report here (also printed)")
    ap.add_argument("--json", default=None, help="per-schema summaries (default: --out with .json)")
    ap.add_argument("--quiet", dest="progress", action="store_false", help="no progress lines on stderr")
    opts = ap.parse_args(argv)
    if opts.json is None and opts.out:
        opts.json = os.path.splitext(opts.out)[0] + ".json"
    if opts.repeat < 1:
        ap.error("--repeat must be at least 1")
    return opts


def pick_engines(spec: str, extra_strict: bool, header: List[str]) -> List[str]:
    engines = ["xg2"] + [e.strip() for e in spec.split(",") if e.strip() and e.strip() != "xg2"]
    if extra_strict and "xgrammar-strict" not in engines:
        engines.append("xgrammar-strict")
    engines = list(dict.fromkeys(engines))
    for e in list(engines):
        why = engine_available(e)
        if why:
            print(f"engine {e} skipped: {why}", file=sys.stderr)
            header.append(f"Engine `{e}` not run: {why}.  ")
            engines.remove(e)
    return engines


def environment(opts) -> Dict[str, str]:
    env = common.environment_summary()
    env["tokenizer"] = os.path.basename(os.path.abspath(opts.tokenizer).rstrip("/"))
    return env


def main(argv: Optional[Sequence[str]] = None) -> int:
    opts = parse_args(argv)
    header = ["## Speed (MaskBench method)", "",
              "Run: `speed.py " + " ".join(sys.argv[1:] if argv is None else argv) + "`  "]  # fmt: skip
    engines = pick_engines(opts.engines, opts.xgrammar_both, header)
    if "xg2" not in engines:
        print("xg2_plugin cannot run", file=sys.stderr)
        return 2
    cases = select(common.load_maskbench(opts.data, opts.files), opts)
    if not cases:
        print("no schemas selected", file=sys.stderr)
        return 2
    env = environment(opts)
    header += ["Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), ""]
    t0 = time.perf_counter()
    result = run_speed(opts, cases, engines)
    wall = time.perf_counter() - t0
    text = "\n".join(header) + "\n" + report(opts, result, cases, engines) + f"\n\nWall time {wall:.0f} s.\n"
    write_report(opts, text, {
        "mode": "speed",
        "environment": env,
        "options": vars(opts),
        "engines": engines,
        "schemas": [{"id": c.id, "file": c.file, "tests": len(c.tests)} for c in cases],
        "init": result["init"],
        "figures_common": median_figures([r["figures_common"] for r in result["runs"]]),
        "figures_all": median_figures([r["figures_all"] for r in result["runs"]]),
        "runs": result["runs"],
    })
    return 0


def write_report(opts, text: str, doc: Dict[str, Any]) -> None:
    """Print the Markdown report; write it to --out and the results to --json."""
    print(text)
    if opts.out:
        with open(opts.out, "w", encoding="utf-8") as f:
            f.write(text)
    if opts.json:
        with open(opts.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=True, default=str)


if __name__ == "__main__":
    sys.exit(main())
