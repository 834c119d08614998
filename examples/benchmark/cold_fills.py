"""Fills of a tool call's states with the processor's caches warm and evicted.

In a serving loop a request's data is evicted between its tokens (other requests, the model,
other tenants of the machine), so what a fill costs there is closer to its cost after the
caches were flushed than to its cost in a tight loop.  For one Llama-3-format request of
`--tools` BFCL tools, at the states that set the per-token tail (after `<function`, the name
choice after `<function=`, a JSON key, after `</function`), this times:

* cached: the state's masks in the mask cache (a fill has been made there before);
* fresh: the mask cache emptied first (the masks are computed),

each with the caches warm (the same fill just before) and with `--evict` MB written between
(the medians of `--repeat`).  A last row, the name choice of a new tool set, is what each request
of a dynamic workload meets: a tag over another sample of the pool, compiled just before its
first fill there (cached: every name of the pool met before, in a fill over the whole pool;
fresh: the mask cache emptied).  xg2 only; DESIGN.md, "A first mask in a serving loop is a cold
one" and "A choice of tool names as the union of its names' entries".

    python examples/benchmark/cold_fills.py
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bfcl_pool  # noqa: E402
import common  # noqa: E402
import tools  # noqa: E402

POINTS = (("after <function", "<function"), ("name choice", "<function="), ("JSON key", '>{"'),
          ("after </function", "</function"))


def measure(eng, compiled, prefix: str, fresh: bool, evict: "np.ndarray | None", repeat: int) -> float:
    """Median time of the first fill of a new matcher after ``prefix`` (a matcher keeps its
    last fill's masks at hand; a new one finds them in the shared cache, as a request that
    reaches the state does)."""

    def at_state():
        m = eng.m.GrammarMatcher(compiled)
        if not m.accept_string(prefix):
            raise SystemExit(f"the request's own text was refused: {prefix!r}")
        return m

    times = []
    for _ in range(repeat):
        eng.fill(at_state())  # the state's masks cached, the caches warm
        times.append(first_fill_us(eng, at_state(), fresh, evict))
    return statistics.median(times)


def first_fill_us(eng, m, fresh: bool, evict: "np.ndarray | None") -> float:
    """The time of matcher m's next fill, the mask cache emptied first (fresh) and `evict`
    written over first (not None)."""
    from xg2_plugin._native import lib

    if fresh:
        lib.xg2_vocab_clear_cache(eng.info._handle)
    if evict is not None:
        evict += 1.0
    t0 = time.perf_counter()
    eng.fill(m)
    return 1e6 * (time.perf_counter() - t0)


NEW_SET = "name choice, a new tool set"


def measure_new_set(eng, pool, n: int, fresh: bool, evict: "np.ndarray | None", repeat: int, seed: int) -> float:
    """Median time of the first fill after `<function=` of a tag over a new sample of n tools."""
    import random

    rng = random.Random(seed)
    times = []
    for _ in range(repeat):
        tag = tools.structural_tag("llama", rng.sample(pool, n))
        m = eng.m.GrammarMatcher(eng.compiler.compile_structural_tag(json.dumps(tag)))
        if not m.accept_string("Sure. <function="):
            raise SystemExit("the trigger was refused")
        times.append(first_fill_us(eng, m, fresh, evict))
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default=common.shared_path("tokenizers", "llama3"))
    ap.add_argument("--tools", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--evict", type=int, default=48, help="MB written between two fills for 'evicted'")
    args = ap.parse_args(argv)
    tok = common.load_hf_tokenizer(args.tokenizer)
    eng = tools.make_engine("xg2", tok)
    pool = bfcl_pool.load_pool()
    req = tools.requests(pool, "llama", args.tools, "dynamic", 1, 0)[0]
    text = req["text"]
    compiled = eng.compiler.compile_structural_tag(json.dumps(req["tag"]))
    evict = np.ones(args.evict << 17)  # (8-byte floats)
    print("| state | cached, warm (µs) | cached, evicted | fresh, warm | fresh, evicted |")
    print("| :--- | ---: | ---: | ---: | ---: |")
    for name, ending in POINTS:
        if ending not in text:  # (a call without arguments has no key)
            print(f"| {name} | - | - | - | - |")
            continue
        prefix = text[: text.index(ending) + len(ending)]
        cells = [measure(eng, compiled, prefix, fresh, ev, args.repeat)
                 for fresh in (False, True) for ev in (None, evict)]
        print(f"| {name} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    whole = eng.m.GrammarMatcher(eng.compiler.compile_structural_tag(json.dumps(tools.structural_tag("llama", pool))))
    if not whole.accept_string("Sure. <function="):
        raise SystemExit("the trigger was refused")
    eng.fill(whole)  # (every name of the pool met)
    cells = [measure_new_set(eng, pool, min(args.tools, len(pool)), fresh, ev, args.repeat, seed)
             for seed, (fresh, ev) in enumerate((f, e) for f in (False, True) for e in (None, evict))]
    print(f"| {NEW_SET} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
