"""A fingerprint of every mask ours computes on a MaskBench sample: sha256 over the
bitmask before each token of each instance (and after the last), so that a change
meant only for speed can be checked to leave every mask as it was.

    python examples/benchmark/mask_digest.py                       # the 600 of speed.py's run
    python examples/benchmark/mask_digest.py --limit 100 --seed 1
    python examples/benchmark/mask_digest.py --tools llama      # tool calls (tools.py), or harmony

Each schema gets a fresh compiler, as in speed.py; the process-wide caches stay warm,
as they do in a server.  Prints the digest, the number of masks hashed, and the number
of schemas that compiled.  With --tools: the masks along tools.py's requests (BFCL
functions, 15 requests each of 5 and 50 tools dynamic and 20 static) and their ground-truth
calls, through one compiler.
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
            fills += walk(xgr.GrammarMatcher(cg), tokens, mask, h)[0]
    return h.hexdigest(), fills, compiled


def walk(m, tokens, mask, h):
    """Hash the mask before each token and, if every token is accepted, after the
    last: (masks hashed, whether every token was accepted)."""
    fills = 0
    for t in tokens:
        m.fill_next_token_bitmask(mask)
        h.update(mask.numpy().tobytes())
        fills += 1
        if not m.accept_token(t):
            return fills, False
    m.fill_next_token_bitmask(mask)
    h.update(mask.numpy().tobytes())
    return fills + 1, True


def tool_digest(fmt: str, tokenizer: str, xgr):
    import bfcl_pool
    import tools

    if fmt == "harmony":
        import harmony_vocab

        tok = harmony_vocab.load()
        info = harmony_vocab.xg2_info(xgr, tok)
    else:
        tok = common.load_hf_tokenizer(tokenizer)
        info = xgr.TokenizerInfo.from_huggingface(tok)
    comp = xgr.GrammarCompiler(info, max_threads=1)
    mask = xgr.allocate_token_bitmask(1, info.vocab_size)
    pool = bfcl_pool.load_pool()
    h = hashlib.sha256()
    fills = calls = 0
    for n, mode in ((5, "dynamic"), (50, "dynamic"), (20, "static")):
        for req in tools.requests(pool, fmt, n, mode, 15, 3):
            m = xgr.GrammarMatcher(comp.compile_structural_tag(json.dumps(req["tag"])))
            n, whole = walk(m, tok.encode(req["text"], add_special_tokens=False), mask, h)
            fills += n
            calls += whole
    return h.hexdigest(), fills, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=common.shared_path("data", "maskbench-dev"))
    ap.add_argument("--tokenizer", default=common.shared_path("tokenizers", "llama3"))
    ap.add_argument("--limit", type=int, default=600, help="seeded sample, as speed.py --limit")
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--tools", choices=("llama", "harmony"), help="tool calls in this format instead")
    a = ap.parse_args()
    import xg2_plugin as xgr

    if a.tools:
        hexdigest, fills, calls = tool_digest(a.tools, a.tokenizer, xgr)
        print(f"sha256 {hexdigest[:24]} over {fills} masks; {calls}/45 calls accepted")
        return

    cases = speed.select(common.load_maskbench(a.data), SimpleNamespace(limit=a.limit, seed=a.seed, shuffle=True))
    tok = speed.get_tokenizer(a.tokenizer)
    info = xgr.TokenizerInfo.from_huggingface(tok)
    hexdigest, fills, compiled = digest(cases, tok, info, xgr)
    print(f"sha256 {hexdigest[:24]} over {fills} masks; {compiled}/{len(cases)} schemas compiled")


if __name__ == "__main__":
    main()
