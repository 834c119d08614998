"""Compile time of single schemas, engines side by side: CPU time of one thread to the
first mask (``compile_json_schema`` + matcher + first fill), each engine made cold
before every compile as ``speed.py`` makes it (a fresh compiler; our front-end memo
cleared) and, since each schema is compiled ``--repeat`` times, our process-wide rule
automata and token masks reset to what a generic schema builds (``WARM_SCHEMA``), so
that no round finds the schema's own rules; the engines alternating in one process; the median of
``--repeat`` rounds per engine and the ratio to the last engine named.

CPU time (``time.thread_time``) rather than wall time, so that other processes on a
shared machine weigh less; a schema is a MaskBench-format file (``{"schema": ...}``, as
``heldout.py`` writes them) or one of the named ordinary schemas of the hardening
issue (``--ordinary``).

    python examples/benchmark/heldout.py --out /tmp/heldout --kubernetes 40
    python examples/benchmark/compile_pair.py --ordinary /tmp/heldout/kubernetes---*.json \\
        --engines xg2,llguidance --repeat 7
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import heldout  # noqa: E402
import speed  # noqa: E402


def load(paths, ordinary: bool):
    out = [(name, json.dumps(schema)) for name, (schema, _) in heldout.ORDINARY.items()] if ordinary else []
    for p in paths:
        with open(p) as f:
            out.append((os.path.basename(p).rsplit(".", 1)[0], json.dumps(json.load(f)["schema"])))
    return out


# What the process-wide caches hold before each timed compile: what a server has from
# other schemas, not from this one.  Our rule automata and token masks are emptied and
# rebuilt from this generic schema (the value, string, number and container rules every
# schema shares); without it, every round after the first found the schema's own rules
# cached and timed a repeat, not a first sight (1.1-2.9x faster in the core on
# Kubernetes schemas).
WARM_SCHEMA = json.dumps({"type": "object", "properties": {
    "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
    "z": {"type": "null"}, "a": {"type": "array", "items": {}}, "o": {"type": "object"}}})


def time_compile(eng, text: str) -> float:
    if eng.name == "xg2":
        eng.compiler.clear_cache()  # (rule automata and token masks: process-wide)
        eng.fill_fn(eng.matcher(eng.compile(WARM_SCHEMA)))()
    eng.cold()
    t0 = time.thread_time()
    m = eng.matcher(eng.compile(text))
    eng.fill_fn(m)()
    return 1e3 * (time.thread_time() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--ordinary", action="store_true", help="the hardening issue's ordinary schemas too")
    ap.add_argument("--engines", default="xg2,llguidance")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--tokenizer", default=common.shared_path("tokenizers", "llama3"))
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    names = args.engines.split(",")
    engines = {e: speed.get_adapter(e, args.tokenizer) for e in names}
    rows, ratios = [], []
    for name, text in load(args.files, args.ordinary):
        times = {e: [] for e in names}
        failed = set()
        for _ in range(args.repeat):
            for e in names:
                if e in failed:
                    continue
                try:
                    times[e].append(time_compile(engines[e], text))
                except speed.CompileFailure:
                    failed.add(e)
        med = {e: statistics.median(v) if v and e not in failed else None for e, v in times.items()}
        ratio = med[names[0]] / med[names[-1]] if med[names[0]] and med[names[-1]] else None
        if ratio is not None:
            ratios.append(ratio)
        rows.append([name] + [f"{med[e]:.2f}" if med[e] is not None else "refused" for e in names]
                    + [f"{ratio:.2f}x" if ratio is not None else "-"])
        print(" | ".join(rows[-1]), flush=True)
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    text = "\n".join([
        "## Compile time per schema (CPU ms to the first mask, cold, median of "
        f"{args.repeat}, engines alternating)", "",
        f"Run: `compile_pair.py {' '.join(argv if argv is not None else sys.argv[1:])}`  ",
        "Environment: " + ", ".join(f"{k} {v}" for k, v in common.environment_summary().items()), "",
        common.markdown_table(["schema", *names, f"{names[0]} / {names[-1]}"], rows), "",
        f"Geometric mean of the ratio over the {len(ratios)} schemas both compiled: "
        + (f"{geo:.2f}x" if geo else "-") + (f"; max {max(ratios):.2f}x" if ratios else ""), ""])
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
