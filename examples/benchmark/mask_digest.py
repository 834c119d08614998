"""A fingerprint of every mask ours computes on a MaskBench sample: sha256 over the
bitmask before each token of each instance (and after the last), so that a change
meant only for speed can be checked to leave every mask as it was.

    python examples/benchmark/mask_digest.py                       # the 600 of speed.py's run
    python examples/benchmark/mask_digest.py --limit 100 --seed 1

Each schema gets a fresh compiler, as in speed.py; the process-wide caches stay warm,
as they do in a server.  Prints the digest, the number of masks hashed, and the number
of schemas that compiled.
"""

import argparse
import hashlib
import json
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import speed  # noqa: E402


def digest(cases, tok, info, xgr):
    h = hashlib.sha256()
    fills = compiled = 0
    mask = xgr.allocate_token_bitmask(1, info.vocab_size)
    for c in cases:
        comp = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        try:
            cg = comp.compile_json_schema(json.dumps(c.schema), strict_mode=False, any_whitespace=True)
        except Exception:  # refused schemas are part of the fingerprint only by their absence
            continue
        compiled += 1
        for tokens in speed.encode_instances(tok, c.tests):
            m = xgr.GrammarMatcher(cg)
            for t in tokens:
                m.fill_next_token_bitmask(mask)
                h.update(mask.numpy().tobytes())
                fills += 1
                if not m.accept_token(t):
                    break
            else:
                m.fill_next_token_bitmask(mask)
                h.update(mask.numpy().tobytes())
                fills += 1
    return h.hexdigest(), fills, compiled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=common.shared_path("data", "maskbench-dev"))
    ap.add_argument("--tokenizer", default=common.shared_path("tokenizers", "llama3"))
    ap.add_argument("--limit", type=int, default=600, help="seeded sample, as speed.py --limit")
    ap.add_argument("--seed", type=int, default=2)
    a = ap.parse_args()
    import xg2_plugin as xgr

    cases = speed.select(common.load_maskbench(a.data), SimpleNamespace(limit=a.limit, seed=a.seed, shuffle=True))
    tok = speed.get_tokenizer(a.tokenizer)
    info = xgr.TokenizerInfo.from_huggingface(tok)
    hexdigest, fills, compiled = digest(cases, tok, info, xgr)
    print(f"sha256 {hexdigest[:24]} over {fills} masks; {compiled}/{len(cases)} schemas compiled")


if __name__ == "__main__":
    main()
