"""Pressure set: schemas built to stress an engine, timed as in speed.py, with memory
and batch-fill throughput.

The schemas are generated here (nothing is read from disk but the tokenizer):

========================  ==============================================================
``string_10k``            ``{"type": "string", "maxLength": 10000}``: a 9,000-character
                          string (words, escapes, newlines); 10,001 characters (invalid)
``strings_5x10k``         an object of 5 required such strings, 1,800 characters each
``int_array_10k``         ``maxItems: 10000`` integers: 5,000 of them; a float in the
                          middle (invalid)
``object_array_10k``      ``maxItems: 10000`` small objects: 2,000 of them; one missing a
                          required property (invalid)
``nested_50``             an object nested 50 levels through ``properties``: the whole
                          depth; a level without its ``child`` (invalid)
``recursive_tree``        a ``$ref`` tree (``value`` + ``children``): a bushy tree of 364
                          nodes, a chain 120 deep; a string value deep inside (invalid)
``properties_2000``       2,000 properties of five kinds, every 10th required: all of
                          them, only the required ones; one required missing (invalid)
``enum_5000``             an enum of 5,000 strings: five members, two near misses (invalid)
``enum_5000_array``       an array of those: 500 members
``anyof_200``             ``anyOf`` of 200 small closed object schemas: ten objects of
                          different branches; one mixing two branches (invalid)
``anyof_200_array``       an array of those: 200 objects
``anyof_bounded_strings`` ``anyOf`` of a 64-character code and a 10-2,000-character text:
                          two length counters that start on the same character
``pattern_10k``           ``pattern`` ``^[a-z]+( [a-z]+)*$`` with ``minLength`` 100 and
                          ``maxLength`` 10000: 9,000 characters of words; too short, and
                          10,001 characters (invalid)
========================  ==============================================================

``--scale F`` multiplies the instance sizes (not the schemas); the invalid instances
that are long by construction are left out below 0.5.

For each schema and engine (engines alternating, each in its own worker process):

* compile = time to first mask, per-token samples (fill + accept), as in speed.py;
* memory: the worker's resident and peak resident set size (``getrusage``) after each
  schema.  Ours runs with ONE ``GrammarCompiler(cache_limit_bytes=--cache-limit-bytes)``
  for the whole set (each schema is still a cache miss, so its compile is cold), so the
  cache holds compiled grammars -- with the token-mask caches they grow while matching
  -- and the report shows what the compiler accounts, what the cached grammars hold
  by then, and the process's peak.  XGrammar and LLGuidance keep nothing between
  schemas (XGrammar's cache is disabled);
* batch fill: ``--batch`` (64) matchers forked from one matcher at evenly spaced points
  of the schema's longest valid instance, filled together on 1 and 2 threads
  (``BatchGrammarMatcher(max_threads=n)``; XGrammar's own ``BatchGrammarMatcher``;
  LLGuidance's ``LLExecutor``), in matchers per second (median over repeated fills,
  the thread counts taking turns in 20 short rounds, ``--batch-seconds`` per count in
  all), and a "mixed" batch of 64 matchers drawn from all
  the schemas at random points.

Examples::

    python examples/benchmark/pressure.py --out pressure.md          # also pressure.json
    python examples/benchmark/pressure.py --engines xg2 --cache-limit-bytes 16777216
    python examples/benchmark/pressure.py --only 'enum_*' --scale 0.2
"""

from __future__ import annotations

import speed  # noqa: I001  (first: it sets the one-thread environment)

import argparse  # noqa: E402
import fnmatch  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any, Dict, List, Optional, Sequence  # noqa: E402

import common  # noqa: E402
from common import SchemaCase, markdown_table  # noqa: E402
from speed import TITLES, fmt  # noqa: E402

DEFAULT_CACHE_LIMIT = 64 * 2**20

# --------------------------------------------------------------------------------------
# The schemas and their instances
# --------------------------------------------------------------------------------------

WORDS = ("alpha beta gamma delta the of and to in is was for on with as by at from this that "
         "request response value error token model schema string number object array field name").split()  # fmt: skip


def text_of(rng: random.Random, n: int) -> str:
    """About ``n`` characters of words with punctuation, quotes, backslashes and newlines
    (ASCII only: every engine takes json.dumps' escapes of those)."""
    parts: List[str] = []
    size = 0
    while size < n:
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.03:
            w = '"' + w + '"'
        elif r < 0.04:
            w += "\\n"
        elif r < 0.06:
            w += "\n"
        elif r < 0.12:
            w += rng.choice(",.;:!?")
        parts.append(w)
        size += len(w) + 1
    return " ".join(parts)[:n]


def _nested_schema(depth: int) -> Dict[str, Any]:
    node: Dict[str, Any] = {"type": "object", "properties": {"level": {"type": "integer"}}, "required": ["level"]}
    for _ in range(depth - 1):
        node = {"type": "object", "properties": {"level": {"type": "integer"}, "child": node},
                "required": ["level", "child"]}  # fmt: skip
    return node


def _nested_instance(depth: int, drop_child_at: int = -1) -> Dict[str, Any]:
    inner: Dict[str, Any] = {"level": depth}
    for level in range(depth - 1, 0, -1):
        inner = {"level": level} if level == drop_child_at else {"level": level, "child": inner}
    return inner


def _tree(rng: random.Random, depth: int, branching: int) -> Dict[str, Any]:
    node: Dict[str, Any] = {"value": rng.randint(-999, 999)}
    if depth > 1:
        node["children"] = [_tree(rng, depth - 1, branching) for _ in range(branching)]
    return node


def _chain(depth: int, bad_at: int = -1) -> Dict[str, Any]:
    node: Dict[str, Any] = {"value": "deep" if bad_at == depth else depth}
    for d in range(depth - 1, 0, -1):
        node = {"value": "deep" if d == bad_at else d, "children": [node]}
    return node


PROP_KINDS = (
    {"type": "integer"},
    {"type": "string", "maxLength": 30},
    {"type": "boolean"},
    {"type": "number"},
    {"enum": ["x", "y", "z"]},
)


def _prop_value(rng: random.Random, i: int) -> Any:
    kind = i % len(PROP_KINDS)
    return [rng.randint(0, 10**6), "v" + str(i), rng.random() < 0.5, round(rng.uniform(-1e3, 1e3), 3),
            rng.choice("xyz")][kind]  # fmt: skip


def _enum_values(rng: random.Random, n: int) -> List[str]:
    vals = set()
    while len(vals) < n:
        k = len(vals)
        vals.add(f"{rng.choice(WORDS[:30])}-{k:05d}-{rng.choice(WORDS[:30])}" if k % 3 else f"item {k}")
    return sorted(vals)


def _branch(i: int) -> Dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["kind", f"a{i}"],
            "properties": {"kind": {"const": f"k{i}"}, f"a{i}": {"type": "integer"}, f"b{i}": {"type": "string"}}}  # fmt: skip


def _branch_value(rng: random.Random, i: int) -> Dict[str, Any]:
    v: Dict[str, Any] = {"kind": f"k{i}", f"a{i}": rng.randint(0, 999)}
    if rng.random() < 0.5:
        v[f"b{i}"] = text_of(rng, 12)
    return v


def pressure_cases(scale: float = 1.0, seed: int = 0) -> List[SchemaCase]:
    """The pressure schemas with their test instances (sizes times ``scale``)."""
    rng = random.Random(seed)

    def n(x: int) -> int:
        return max(1, int(round(x * scale)))

    long_invalid = scale >= 0.5
    cases = []

    def add(cid: str, schema: Any, tests: List) -> None:
        cases.append(SchemaCase(cid, cid, schema, [(d, bool(v)) for d, v in tests]))

    s10k = {"type": "string", "maxLength": 10000}
    add("string_10k", s10k, [(text_of(rng, n(9000)), True)] + ([("x" * 10001, False)] if long_invalid else []))

    add("strings_5x10k",
        {"type": "object", "properties": {f"f{i}": s10k for i in range(5)}, "required": [f"f{i}" for i in range(5)]},
        [({f"f{i}": text_of(rng, n(1800)) for i in range(5)}, True)])  # fmt: skip

    ints = [rng.randint(-10**6, 10**6) for _ in range(n(5000))]
    bad_ints = list(ints)
    bad_ints[len(bad_ints) // 2] = 0.5
    add("int_array_10k", {"type": "array", "items": {"type": "integer"}, "maxItems": 10000},
        [(ints, True), (bad_ints, False)])  # fmt: skip

    item = {"type": "object", "required": ["id", "name"],
            "properties": {"id": {"type": "integer"}, "name": {"type": "string", "maxLength": 20}, "ok": {"type": "boolean"}}}  # fmt: skip
    objs = [{"id": i, "name": text_of(rng, rng.randint(1, 20)), "ok": rng.random() < 0.5} for i in range(n(2000))]
    bad_objs = [dict(o) for o in objs]
    del bad_objs[len(bad_objs) // 2]["id"]
    add("object_array_10k", {"type": "array", "items": item, "maxItems": 10000}, [(objs, True), (bad_objs, False)])

    add("nested_50", _nested_schema(50), [(_nested_instance(50), True), (_nested_instance(50, 25), False)])

    node = {"type": "object", "required": ["value"],
            "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}  # fmt: skip
    depth = max(2, min(6, int(round(6 * scale ** 0.25))))
    add("recursive_tree", {"$defs": {"node": node}, "$ref": "#/$defs/node"},
        [(_tree(rng, depth, 3), True), (_chain(n(120)), True), (_chain(n(120), n(120) // 2 + 1), False)])  # fmt: skip

    props = {f"p{i:04d}": PROP_KINDS[i % len(PROP_KINDS)] for i in range(2000)}
    required = [f"p{i:04d}" for i in range(0, 2000, 10)]
    full = {f"p{i:04d}": _prop_value(rng, i) for i in range(n(2000))}
    only_req = {k: full.get(k, _prop_value(rng, int(k[1:]))) for k in required}
    missing = {k: v for k, v in only_req.items() if k != "p0010"}
    add("properties_2000", {"type": "object", "properties": props, "required": required},
        [(full, scale >= 1), (only_req, True), (missing, False)])  # fmt: skip

    vals = _enum_values(rng, 5000)
    picks = rng.sample(vals, 5)
    add("enum_5000", {"enum": vals},
        [(v, True) for v in picks] + [(picks[0] + "x", False), (picks[1][:-1], False)])  # fmt: skip
    add("enum_5000_array", {"type": "array", "items": {"enum": vals}, "maxItems": 1000},
        [([rng.choice(vals) for _ in range(n(500))], True)])  # fmt: skip

    branches = [_branch(i) for i in range(200)]
    sample = [_branch_value(rng, rng.randrange(200)) for _ in range(10)]
    mixed = {"kind": "k3", "a7": 1}
    add("anyof_200", {"anyOf": branches}, [(v, True) for v in sample] + [(mixed, False)])
    add("anyof_200_array", {"type": "array", "items": {"anyOf": branches}, "maxItems": 1000},
        [([_branch_value(rng, rng.randrange(200)) for _ in range(n(200))], True)])  # fmt: skip

    # two bounded strings side by side (a code or a description): two length counters
    # that start on the same character
    code_or_text = {"anyOf": [{"type": "string", "maxLength": 64, "pattern": "^[A-Z0-9_]+$"},
                              {"type": "string", "minLength": 10, "maxLength": 2000}]}
    add("anyof_bounded_strings", code_or_text,
        [("HELLO_1", True), (text_of(rng, n(1500)), True), ("short", False), ("x" * 2001, False)])  # fmt: skip

    # a pattern under a long length bound: the count kept beside the pattern's automaton
    words = {"type": "string", "pattern": "^[a-z]+( [a-z]+)*$", "minLength": 100, "maxLength": 10000}
    text = " ".join(w for w in text_of(rng, n(11000) + 100).split() if w.isalpha() and w.islower())[: max(n(9000), 100)]
    add("pattern_10k", words, [(text.rstrip(" ") + "z", True), ("ab cd", False)]
        + ([(" ".join(["abcd"] * 2001)[:10001], False)] if long_invalid else []))  # fmt: skip
    return cases


# --------------------------------------------------------------------------------------
# Batch fill throughput (in a worker)
# --------------------------------------------------------------------------------------


def fork_points(eng: speed.Adapter, compiled: Any, tokens: Sequence[int], count: int) -> List[Any]:
    """``count`` distinct matchers: forks of one matcher at evenly spaced points of
    ``tokens`` (as far as the engine accepts them)."""
    m = eng.matcher(compiled)
    accept = eng.accept_fn(m)
    n = len(tokens) + 1
    wanted = sorted(int(k * n / count) for k in range(count))
    forks: List[Any] = []
    j = 0
    for idx in range(n):
        while j < len(wanted) and wanted[j] == idx:
            forks.append(eng.fork(m))
            j += 1
        if idx == len(tokens) or j == len(wanted) or not accept(tokens[idx]):
            break
    while len(forks) < count:  # the engine stopped early: more forks of where it got to
        forks.append(eng.fork(forks[len(forks) % max(1, len(forks))] if forks else m))
    return forks


def time_batch(eng: speed.Adapter, matchers: List[Any], threads: Sequence[int], seconds: float) -> Dict[str, Any]:
    """Median time of one batch fill per thread count.  The thread counts take turns in
    short rounds (20 of them in ``seconds`` per count), so a slow phase of the machine
    hits every count alike instead of whichever was measured then."""
    out: Dict[str, Any] = {"matchers": len(matchers)}
    fills = {th: eng.batch_fill_fn(matchers, th) for th in threads}
    for fill in fills.values():
        fill()  # warm (and a check that it works)
    times: Dict[int, List[float]] = {th: [] for th in threads}
    rounds = 20
    for _ in range(rounds):
        for th in threads:
            fill, ts = fills[th], times[th]
            t_end = time.perf_counter() + seconds / rounds
            n0 = len(ts)
            while len(ts) - n0 < 3 or time.perf_counter() < t_end:
                t0 = time.perf_counter_ns()
                fill()
                ts.append(time.perf_counter_ns() - t0)
                if len(ts) - n0 >= 1000:
                    break
    for th in threads:
        med = statistics.median(times[th])
        out[f"t{th}"] = {"fills": len(times[th]), "median_ms": med / 1e6, "matchers_per_s": len(matchers) / (med / 1e9)}
    return out


# --------------------------------------------------------------------------------------
# Tasks (in the workers)
# --------------------------------------------------------------------------------------


def _adapter(args: Dict[str, Any]) -> speed.Adapter:
    kwargs = {"cache_limit_bytes": args["cache_limit_bytes"]} if args["engine"] == "xg2" else {}
    return speed.ensure_engine(dict(args, engine_kwargs=kwargs))


def pressure_init_task(args: Dict[str, Any], ctx) -> Dict[str, Any]:
    eng = _adapter(args)
    gc.collect()
    return {"rss": speed.rss_bytes(), "peak_rss": speed.peak_rss_bytes(), **eng.memory(None)}


def pressure_task(args: Dict[str, Any], ctx) -> Dict[str, Any]:
    """One pressure schema on one engine: timing, memory, batch fill."""
    ctx.phase("init", 1800)
    eng = _adapter(args)
    tok = speed.get_tokenizer(args["tokenizer"])
    case: SchemaCase = args["case"]
    token_lists = speed.encode_instances(tok, case.tests)
    ctx.phase("run", args["timeout"])
    rss0 = speed.rss_bytes()
    res, compiled, samples = speed.time_schema(eng, json.dumps(case.schema), token_lists, [v for _, v in case.tests])
    if args["engine"] == "xg2" and res["status"] == "ok" and res["compile_ns"] >= 1e6 * args["split_ms"]:
        res["split"] = eng.split_compile(json.dumps(case.schema))
    res["samples"] = samples.tobytes()
    res["tokens_per_instance"] = [len(t) for t in token_lists]
    if compiled is not None and args["batch"] and res["status"] == "ok":
        valid = [t for t, (_, v) in zip(token_lists, case.tests) if v]
        longest = max(valid or token_lists, key=len)
        try:
            forks = fork_points(eng, compiled, longest, args["batch"])
            res["batch"] = time_batch(eng, forks, args["threads"], args["batch_seconds"])
            del forks
        except Exception as e:
            res["batch"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    res["memory"] = eng.memory(compiled)
    del compiled
    gc.collect()
    res.update(rss_before=rss0, rss=speed.rss_bytes(), peak_rss=speed.peak_rss_bytes())
    if args["engine"] == "xg2":
        res["memory_after_release"] = eng.memory(None)
    return res


def mixed_batch_task(args: Dict[str, Any], ctx) -> Dict[str, Any]:
    """``batch`` matchers drawn from all the schemas at random points, filled together."""
    ctx.phase("init", 1800)
    eng = _adapter(args)
    tok = speed.get_tokenizer(args["tokenizer"])
    ctx.phase("run", args["timeout"])
    rng = random.Random(args["seed"])
    pools = []
    for case in args["cases"]:
        try:
            compiled = eng.compile(json.dumps(case.schema))
        except Exception:
            continue
        valid = [tok.encode(json.dumps(d), add_special_tokens=False) for d, v in case.tests if v]
        if valid:
            pools.append((case.id, compiled, max(valid, key=len)))
    if not pools:
        return {"error": "no schema compiled"}
    matchers, used = [], []
    for k in range(args["batch"]):
        cid, compiled, tokens = pools[k % len(pools)]
        m = eng.matcher(compiled)
        accept = eng.accept_fn(m)
        for t in tokens[: rng.randrange(len(tokens) + 1)]:
            if not accept(t):
                break
        matchers.append(m)
        used.append(cid)
    out = time_batch(eng, matchers, args["threads"], args["batch_seconds"])
    out["schemas"] = len(pools)
    return out


# --------------------------------------------------------------------------------------
# The run and its report
# --------------------------------------------------------------------------------------


def run_pressure(opts, cases: List[SchemaCase], engines: List[str]) -> Dict[str, Any]:
    runner = speed.Runner(engines, inline=opts.in_process, memory_limit_gb=opts.memory_limit_gb)
    base = {"tokenizer": opts.tokenizer, "cache_limit_bytes": opts.cache_limit_bytes, "timeout": opts.timeout,
            "batch": opts.batch, "threads": opts.threads, "batch_seconds": opts.batch_seconds, "seed": opts.seed,
            "warmup": opts.warmup, "split_ms": opts.split_ms}  # fmt: skip
    out: Dict[str, Any] = {"per_schema": {}, "mixed": {}}
    try:
        init = runner.run_all(pressure_init_task, {e: dict(base, engine=e) for e in engines}, 1800)
        for e, o in init.items():
            if o.status != "done":
                raise SystemExit(f"engine {e} failed to load: {o.status} {o.error}")
        out["init"] = {e: o.value for e, o in init.items()}
        out["loadavg_start"] = speed.loadavg()
        for i, case in enumerate(cases):
            out["per_schema"][case.id] = {}
            for e in speed.rotated(engines, i):
                t0 = time.perf_counter()
                res = speed.outcome_result(runner.run(e, pressure_task, dict(base, engine=e, case=case), opts.timeout),
                                           opts.timeout)  # fmt: skip
                summary = speed.schema_summary(res)
                out["per_schema"][case.id][e] = summary
                if opts.progress:
                    what = (f"compile {summary['compile_ms']:.1f} ms, max token {summary['token_us']['max']:.0f} µs"
                            if summary.get("status") == "ok" else f"{summary['status']} {summary.get('error', '')[:120]}")  # fmt: skip
                    print(f"{case.id} / {e}: {what} ({time.perf_counter() - t0:.1f} s; load {speed.loadavg()})",
                          file=sys.stderr, flush=True)  # fmt: skip
        if opts.batch and not opts.no_mixed:
            for e in engines:
                o = runner.run(e, mixed_batch_task, dict(base, engine=e, cases=cases), opts.timeout)
                out["mixed"][e] = o.value if o.status == "done" else {"error": f"{o.status}: {o.error}"[:300]}
        out["loadavg_end"] = speed.loadavg()
    finally:
        runner.close()
    return out


def _mib(b: float) -> str:
    return f"{b / 2**20:.0f}" if b else "n/a"


def report(opts, result: Dict[str, Any], cases: List[SchemaCase], engines: List[str]) -> str:
    per = result["per_schema"]
    lines = [
        f"### Pressure set: {len(cases)} generated schemas (instance scale {opts.scale:g})",
        "",
        f"Load average (1, 5, 15 min): {result['loadavg_start']} at the start, {result['loadavg_end']} at the end.",
        "",
        "Compile = time to first mask (ms); per token = fill + accept (µs), p99 / max; tokens = samples.",
        "",
    ]

    def cell(c: str, e: str) -> str:
        s = per[c][e]
        if s.get("status") != "ok":
            return s.get("status", "?")
        t = s["token_us"]
        return f"{fmt(s['compile_ms'])} · {fmt(t['p99'])} / {fmt(t['max'])}"

    rows = []
    for c in per:
        n = max((per[c][e].get("token_us", {}).get("n", 0) for e in engines), default=0)
        rows.append([f"`{c}`", str(n)] + [cell(c, e) for e in engines])
    lines += [markdown_table(["schema", "tokens"] + [f"{TITLES[e]}: compile · p99 / max" for e in engines], rows), ""]

    agree = []
    for e in engines:
        ok = [per[c][e] for c in per if per[c][e].get("status") == "ok"]
        agree.append([TITLES[e], f"{len(ok)}/{len(per)}", sum(s["valid_rejected"] for s in ok),
                      sum(s["invalid_accepted"] for s in ok),
                      ", ".join(f"`{c}` {per[c][e]['status']}" for c in per if per[c][e].get("status") != "ok") or "-"])  # fmt: skip
    lines += [markdown_table(["engine", "compiled", "valid rejected", "invalid accepted", "failures"], agree), ""]
    if "xg2" in engines:
        split_rows = []
        for c in per:
            s = per[c]["xg2"]
            sp, p = s.get("split", {}), s.get("parts_ns", {})
            if "frontend_ms" in sp:
                split_rows.append([f"`{c}`", fmt(s["compile_ms"]), fmt(sp["frontend_ms"]), fmt(sp["ebnf_ms"]),
                                   fmt(sp["bind_ms"]), fmt(p.get("first_fill", 0) / 1e6),
                                   f"{sp['ebnf_chars']} / {sp['rules']} / {sp['states']}"])  # fmt: skip
            elif s.get("status") == "compile_error":
                split_rows.append([f"`{c}`", "error", s.get("error", "")[:100], "", "", "", ""])
        if split_rows:
            lines += [f"Where our time to first mask passed {opts.split_ms:g} ms (or compile failed), its steps, "
                      "timed again cold (ms): the Python front-end (schema to EBNF), EBNF to automata (native), "
                      "binding to the tokenizer, and the first fill; size = EBNF characters / rules / states:", "",
                      markdown_table(["schema", "to first mask", "front-end", "EBNF→automata", "bind", "first fill",
                                      "size"], split_rows), ""]  # fmt: skip

    # memory
    mem_rows = []
    for e in engines:
        base = result["init"][e]["rss"]
        peak = max([per[c][e].get("peak_rss", 0) for c in per] + [result["init"][e]["peak_rss"]])
        last = [per[c][e] for c in per if "rss" in per[c][e]]
        end = last[-1]["rss"] if last else 0
        biggest = max((per[c][e].get("memory", {}).get("compiled_bytes", 0) for c in per), default=0)
        mem_rows.append([TITLES[e], _mib(base), _mib(peak), _mib(end), _mib(peak - base), _mib(biggest)])
    lines += [
        "Memory of each engine's worker (MiB): resident after load, peak (getrusage) and resident at the end of "
        "the set, peak growth over the load, and the largest compiled grammar as the engine reports it "
        "(ours: after its instances ran, token-mask caches included):",
        "",
        markdown_table(["engine", "after load", "peak", "at end", "peak − load", "largest grammar"], mem_rows),
        "",
    ]
    if "xg2" in engines:
        limit = opts.cache_limit_bytes
        rows = []
        for c in per:
            s = per[c]["xg2"]
            m = s.get("memory_after_release") or {}
            rows.append([f"`{c}`", _mib(s.get("memory", {}).get("compiled_bytes", 0)),
                         f"{m.get('compiler_cache_entries', 0)}", _mib(m.get("compiler_cache_bytes", 0)),
                         _mib(m.get("cached_live_bytes", 0)), _mib(s.get("rss", 0)), _mib(s.get("peak_rss", 0))])  # fmt: skip
        over = [c for c in per if (per[c]["xg2"].get("memory_after_release") or {}).get("cached_live_bytes", 0) > limit]
        lines += [
            f"Ours, one compiler with `cache_limit_bytes={limit}` ({_mib(limit)} MiB) for the whole set: after each "
            "schema, its grammar's size (after its instances), the cache's entries, the bytes the compiler accounts "
            "(sizes taken when each grammar was inserted), the bytes its cached grammars hold now, and the worker's "
            "resident / peak memory (MiB):",
            "",
            markdown_table(["after schema", "grammar", "entries", "accounted", "held now", "resident", "peak"], rows),
            "",
            (f"The cached grammars held more than the limit after: {', '.join(f'`{c}`' for c in over)}."
             if over else "The cached grammars stayed within the limit throughout."),
            "",
        ]  # fmt: skip
    # batch
    if opts.batch:
        th = opts.threads

        def bcell(b: Dict[str, Any]) -> List[str]:
            if not b or "error" in b:
                return ["n/a"] * (len(th) + (1 if len(th) > 1 else 0))
            vals = [b[f"t{t}"]["matchers_per_s"] for t in th]
            cells = [f"{v:,.0f}" for v in vals]
            if len(th) > 1:
                cells.append(f"{vals[-1] / vals[0]:.2f}x")
            return cells

        head = ["schema"]
        for e in engines:
            head += [f"{TITLES[e]} {t}t" for t in th] + ([f"{t_last}t/{th[0]}t" for t_last in th[-1:]] if len(th) > 1 else [])
        rows = [[f"`{c}`"] + sum((bcell(per[c][e].get("batch", {})) for e in engines), []) for c in per]
        if result["mixed"]:
            rows.append(["mixed (all schemas)"] + sum((bcell(result["mixed"].get(e, {})) for e in engines), []))
        lines += [
            f"Batch fill: {opts.batch} matchers at evenly spaced points of each schema's longest valid instance "
            f"(mixed: drawn from all schemas), matchers filled per second on {', '.join(map(str, th))} thread(s) "
            f"(median of repeated fills, the thread counts taking turns in 20 rounds, {opts.batch_seconds:g} s per count in all; {os.cpu_count()} CPUs here):",
            "",
            markdown_table(head, rows),
        ]
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=common.shared_path("tokenizers", "llama3"), help="HF tokenizer directory")
    ap.add_argument("--engines", default="xg2,xgrammar,llguidance", help="comma-separated: xg2 (always), xgrammar, llguidance")
    ap.add_argument("--cache-limit-bytes", type=int, default=DEFAULT_CACHE_LIMIT,
                    help=f"our GrammarCompiler's cache_limit_bytes (default {DEFAULT_CACHE_LIMIT})")
    ap.add_argument("--scale", type=float, default=1.0, help="instance size factor (default 1)")
    ap.add_argument("--only", default=None, help="only schemas whose name matches one of these comma-separated globs")
    ap.add_argument("--seed", type=int, default=0, help="seed of the generated instances")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per (schema, engine) (default 600)")
    ap.add_argument("--batch", type=int, default=64, help="matchers per batch fill (0: no batch test)")
    ap.add_argument("--threads", default="1,2", help="thread counts of the batch fill (default 1,2)")
    ap.add_argument("--batch-seconds", type=float, default=0.5, help="time spent per batch measurement")
    ap.add_argument("--no-mixed", action="store_true", help="no mixed-schema batch")
    ap.add_argument("--split-ms", type=float, default=100.0,
                    help="for our schemas slower than this to first mask, compile again (untimed) to split the steps")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false", help="skip the engines' warm-up schema")
    ap.add_argument("--memory-limit-gb", type=float, default=None, help="address-space limit per worker")
    ap.add_argument("--in-process", action="store_true", help="no worker processes (memory is then the whole process)")
    ap.add_argument("--out", default=None, help="write the Markdown report here (also printed)")
    ap.add_argument("--json", default=None, help="per-schema results (default: --out with .json)")
    ap.add_argument("--quiet", dest="progress", action="store_false", help="no progress lines on stderr")
    opts = ap.parse_args(argv)
    opts.threads = [int(t) for t in str(opts.threads).split(",") if t.strip()]
    if opts.json is None and opts.out:
        opts.json = os.path.splitext(opts.out)[0] + ".json"
    return opts


def main(argv: Optional[Sequence[str]] = None) -> int:
    opts = parse_args(argv)
    header = ["## Pressure set", "", "Run: `pressure.py " + " ".join(sys.argv[1:] if argv is None else argv) + "`  "]
    engines = [e for e in speed.pick_engines(opts.engines, False, header) if e != "xgrammar-strict"]
    if "xg2" not in engines:
        print("xg2_plugin cannot run", file=sys.stderr)
        return 2
    globs = [g.strip() for g in (opts.only or "").split(",") if g.strip()]
    cases = [c for c in pressure_cases(opts.scale, opts.seed) if not globs or any(fnmatch.fnmatch(c.id, g) for g in globs)]
    if not cases:
        print("no schemas selected", file=sys.stderr)
        return 2
    env = speed.environment(opts)
    header += ["Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), ""]
    t0 = time.perf_counter()
    result = run_pressure(opts, cases, engines)
    wall = time.perf_counter() - t0
    text = "\n".join(header) + "\n" + report(opts, result, cases, engines) + f"\n\nWall time {wall:.0f} s.\n"
    speed.write_report(opts, text, {"mode": "pressure", "environment": env, "options": vars(opts), "engines": engines,
                                    "schemas": [{"id": c.id, "tests": len(c.tests)} for c in cases], **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
