"""CPU time of our JSON Schema front-end alone (``json_schema_to_ebnf``, no core compile)
over MaskBench schemas, for A/B comparisons of front-end changes:

    python examples/benchmark/frontend.py --limit 1500 --passes 3

Each schema is converted with the front-end's process-wide memo cleared first (as
``speed.py`` makes an engine cold), in file order; a pass is the sum over the schemas;
the figure is the best pass (schemas that raise are timed too: refusing is work).
To compare two checkouts, run each one's copy of this script alternately."""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import speed  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=common.shared_path("data", "maskbench-dev"), help="MaskBench-format directory")
    ap.add_argument("--limit", type=int, default=1500, help="the first N files in name order")
    ap.add_argument("--passes", type=int, default=3)
    args = ap.parse_args()
    from xg2_plugin import json_schema

    texts = [json.dumps(json.load(open(f))["schema"]) for f in sorted(glob.glob(os.path.join(args.data, "*.json")))]
    texts = texts[: args.limit]
    best, refused = float("inf"), 0
    for p in range(args.passes + 1):  # (pass 0 warms the imports and the allocator, untimed)
        total, refused = 0.0, 0
        for text in texts:
            speed.clear_frontend_memo()
            t0 = time.thread_time()
            try:
                json_schema.json_schema_to_ebnf(text, any_whitespace=True, strict_mode=False)
            except Exception:
                refused += 1
            total += time.thread_time() - t0
        if p:
            best = min(best, total)
    where = "compiled" if not json_schema.__file__.endswith(".py") else "source"
    print(f"front-end ({where}): {1e3 * best:.1f} ms over {len(texts)} schemas "
          f"({refused} refused), best of {args.passes} passes")


if __name__ == "__main__":
    main()
