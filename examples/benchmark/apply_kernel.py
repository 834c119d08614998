"""The bitmask apply kernel on a GPU: xg2_plugin's Triton and torch paths against XGrammar's,
on the same logits and bitmasks, engines alternating.

    python examples/benchmark/apply_kernel.py --out examples/benchmark/results/apply_kernel.md

For each (rows, vocab, dtype): random logits and a random bitmask on the device; each
engine's `apply_token_bitmask_inplace` is timed with CUDA events over --iters calls after a
warm-up (median of --repeat rounds, engines in turn each round); every engine's result must
equal xg2's (a mismatch is printed and the exit status is 1).  `--device cpu` runs the same on
CPU tensors (the engines' CPU paths), as a functional check.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable, Dict, List


def engines(device: str) -> Dict[str, Callable]:
    import xg2_plugin

    out: Dict[str, Callable] = {}
    if device == "cuda":
        out["xg2 triton"] = lambda lg, bm: xg2_plugin.apply_token_bitmask_inplace(lg, bm, backend="triton")
        out["xg2 torch"] = lambda lg, bm: xg2_plugin.apply_token_bitmask_inplace(lg, bm, backend="torch_native")
    else:
        out["xg2 cpu"] = lambda lg, bm: xg2_plugin.apply_token_bitmask_inplace(lg, bm)
    try:
        import xgrammar
    except ImportError:
        print("xgrammar is not installed: timing xg2 only", file=sys.stderr)
        return out
    if device == "cuda":
        for be in ("triton", "torch_native", "cuda"):
            out[f"xgrammar {be}"] = (lambda b: lambda lg, bm: xgrammar.apply_token_bitmask_inplace(lg, bm, backend=b))(be)
    else:
        out["xgrammar cpu"] = lambda lg, bm: xgrammar.apply_token_bitmask_inplace(lg, bm)
    return out


def time_call(fn, logits, bitmask, iters: int, device: str) -> float:
    import torch

    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn(logits, bitmask)
        end.record()
        torch.cuda.synchronize()
        return 1e3 * start.elapsed_time(end) / iters  # µs
    t = time.perf_counter()
    for _ in range(iters):
        fn(logits, bitmask)
    return 1e6 * (time.perf_counter() - t) / iters


def main(argv=None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rows", default="1,16,128,1024")
    ap.add_argument("--vocabs", default="128256,151936,201088")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out")
    opts = ap.parse_args(argv)
    dev = opts.device
    eng = engines(dev)
    names = list(eng)
    rows_out: List[List[str]] = []
    bad = 0
    gen = torch.Generator(device="cpu").manual_seed(0)
    for dtype_name in opts.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for vocab in [int(v) for v in opts.vocabs.split(",")]:
            for rows in [int(r) for r in opts.rows.split(",")]:
                words = (vocab + 31) // 32
                bitmask = torch.randint(-(2**31), 2**31 - 1, (rows, words), dtype=torch.int32, generator=gen).to(dev)
                base = torch.randn(rows, vocab, generator=gen).to(dtype).to(dev)
                ref = None
                results = {}
                for name in names:  # correctness: every engine equals xg2's first path
                    lg = base.clone()
                    try:
                        eng[name](lg, bitmask)
                    except Exception as e:  # an engine path that cannot run here
                        results[name] = f"error: {type(e).__name__}: {str(e)[:80]}"
                        continue
                    if ref is None:
                        ref = lg
                    elif not torch.equal(lg, ref):
                        results[name] = "MISMATCH"
                        bad += 1
                times: Dict[str, List[float]] = {n: [] for n in names if n not in results}
                lg = base.clone()
                for n in times:  # warm-up (compiles kernels)
                    eng[n](lg, bitmask)
                for r in range(opts.repeat):
                    order = list(times)[r % len(times):] + list(times)[:r % len(times)]
                    for n in order:
                        times[n].append(time_call(eng[n], lg, bitmask, opts.iters, dev))
                for n in names:
                    cell = results.get(n) or f"{statistics.median(times[n]):.1f}"
                    rows_out.append([dtype_name, str(vocab), str(rows), n, cell])
                    print(" | ".join(rows_out[-1]), flush=True)
    dev_name = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    text = "\n".join([
        "## Bitmask apply kernel\n",
        f"Run: `apply_kernel.py {' '.join(argv if argv is not None else sys.argv[1:])}` on {dev_name}, "
        f"torch {torch.__version__}; median of {opts.repeat} rounds of {opts.iters} calls (CUDA events), "
        "engines in turn.\n",
        "| dtype | vocab | rows | engine | µs per call |", "| :--- | ---: | ---: | :--- | ---: |",
        *[f"| {' | '.join(r)} |" for r in rows_out], ""])
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(text)
    print(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
