"""Tool calling under a structural tag: compile and per-token cost when every request brings
its own tools (issue 24's benchmark; the XGrammar-2 paper's §4.1-4.2 setting).

A pool of real functions from BFCL (`bfcl_pool.py`). For each cell -- a wire format, N tools,
static (every request the same N) or dynamic (each request samples its own N) -- R requests are
compiled as a `triggered_tags` structural tag: free text, then calls in the format, each call's
arguments under its function's schema. Each request's output (free text, one call of one of its
tools with BFCL's ground-truth arguments, free text) is tokenized and walked: before every token
the mask is filled and the token must be in it, then the token is accepted; at the end the stop
token must be allowed. Every engine runs in a fresh process per cell (so the first request is a
cold process), one thread, engines alternating between cells.

    python examples/benchmark/tools.py --engines xg2,xgrammar,llguidance --formats llama,qwen \
        --tools 5,20,50,128 --requests 20 --out examples/benchmark/results/tools.md

Compile = time to first mask from the tag's JSON text, as an engine hands a tag to its backend
(vLLM's API server writes it, in another process): compile the tag, make a matcher, fill the
first mask; per token = fill + accept. LLGuidance gets the same tags through its
`StructTag.to_grammar` (lazy lexemes), its timing including the text's `json.loads`.
Work an engine does in the background after the first mask (xg2: the masks of the tools it meets
for the first time, `GrammarCompiler(precompute_pieces=True)`, its default) overlaps the prefill
of the request's prompt in a server: it is waited for, untimed, before the first token, and its
wall time reported ("background"); `--no-prefill` starts the tokens at once instead, the
background work racing them (a prompt with no prefill time at all).  `--prefill-evict MB` makes
every engine's worker write MB of memory there, untimed: what a prefill does to the CPU's caches
in a serving loop, so that no engine's first token finds them as its compile left them.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import random
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bfcl_pool  # noqa: E402
import common  # noqa: E402

FORMATS = {
    # trigger, begin(name), end
    "llama": ("<function=", lambda n: f"<function={n}>", "</function>"),
    "qwen": ("<tool_call>", lambda n: f'<tool_call>\n{{"name": "{n}", "arguments": ', "}\n</tool_call>"),
    # gpt-oss: a call on the commentary channel; the markers are special tokens of o200k_harmony
    "harmony": ("<|channel|>",
                lambda n: f"<|channel|>commentary to=functions.{n}<|constrain|>json<|message|>", "<|call|>"),
}
# formats with a vocabulary of their own (others use --tokenizer)
HARMONY_VOCAB = "o200k_harmony"


def structural_tag(fmt: str, tools: List[Dict[str, Any]]) -> Dict[str, Any]:
    trigger, begin, end = FORMATS[fmt]
    tags = [{"type": "tag", "begin": begin(t["name"]),
             "content": {"type": "json_schema", "json_schema": t["parameters"]}, "end": end} for t in tools]
    return {"type": "structural_tag",
            "format": {"type": "triggered_tags", "triggers": [trigger], "tags": tags}}


def output_text(fmt: str, tool: Dict[str, Any]) -> str:
    _, begin, end = FORMATS[fmt]
    return f"Let me check that for you. {begin(tool['name'])}{json.dumps(tool['arguments'])}{end}"


def requests(pool, fmt: str, n: int, mode: str, count: int, seed: int) -> List[Dict[str, Any]]:
    """Mode static: one tool set for every request; dynamic: each request samples its
    own; warm: dynamic, after an untimed request over the whole pool (a server that has
    met its tools before; an engine that keeps what it built per tool reuses it); served:
    dynamic, after untimed requests over the whole pool that call each of its tools once
    (a server that has served calls of its tools: what an engine builds per tool state,
    masks included, is there; each timed request's own choice of tools is still new)."""
    rng = random.Random(seed)
    static = _sample(rng, pool, n)  # one set for every request in static mode (N > the pool too)
    out: List[Dict[str, Any]] = []
    if mode == "warm":
        out = [{"tag": structural_tag(fmt, pool), "warmup": True}]
    elif mode == "served":
        whole = structural_tag(fmt, pool)
        out = [{"tag": whole, "warmup": True, "text": output_text(fmt, t)} for t in pool]
    for _ in range(count):
        tools = static if mode == "static" else _sample(rng, pool, n)
        called = rng.choice(tools)
        out.append({"tag": structural_tag(fmt, tools), "text": output_text(fmt, called)})
    return out


def _sample(rng, pool, n):
    if n <= len(pool):
        return rng.sample(pool, n)
    # more tools than the pool: copies under new names (same schemas, as a server sees
    # tools that share parameter types)
    tools = [dict(t, name=f"{t['name']}_{k}") for k in range(n // len(pool) + 1) for t in pool]
    return rng.sample(tools, n)


# ------------------------------------------------------------------ engines (in the worker)


class XGrammarAPI:
    """xgrammar and xg2_plugin: the same Python API."""

    def __init__(self, module, tok, **compiler_options):
        import harmony_vocab

        self.m = module
        if module.__name__ == "xg2_plugin":
            # engine load includes the structural-tag and JSON Schema front-ends, as
            # `import xgrammar` includes xgrammar's (and as xg2's engine adapters load them)
            import xg2_plugin.json_schema  # noqa: F401
            import xg2_plugin.structural_tag  # noqa: F401
        if isinstance(tok, harmony_vocab.Vocab):
            make = harmony_vocab.xg2_info if module.__name__ == "xg2_plugin" else harmony_vocab.xgrammar_info
            self.info = make(module, tok)
        else:
            self.info = module.TokenizerInfo.from_huggingface(tok)
        self.compiler = module.GrammarCompiler(self.info, max_threads=1, **compiler_options)
        self.bitmask = module.allocate_token_bitmask(1, self.info.vocab_size)
        self.row = self.bitmask.numpy()[0]
        self.stop = list(self.info.stop_token_ids)

    def compile(self, tag_text: str):
        self.compiled = self.compiler.compile_structural_tag(tag_text)
        return self.m.GrammarMatcher(self.compiled)

    def settle(self) -> Optional[float]:
        """Wait for the background work of the last compile (xg2's precompute): its ms, or None."""
        future = getattr(self.compiled, "precompute_future", None)
        if future is None:
            return None
        t0 = time.perf_counter()
        future.result()
        return 1e3 * (time.perf_counter() - t0)

    def fill(self, matcher):
        matcher.fill_next_token_bitmask(self.bitmask)

    def accept(self, matcher, token):
        return matcher.accept_token(token)


class LLGuidance:
    def __init__(self, tok):
        import llguidance
        import llguidance.hf
        import numpy as np
        import harmony_vocab

        self.llg = llguidance
        self.special = isinstance(tok, harmony_vocab.Vocab)  # markers are special tokens
        self.tokenizer = harmony_vocab.llguidance_tokenizer(tok) if self.special else llguidance.hf.from_tokenizer(tok)
        self.mask = np.zeros((1, (self.tokenizer.vocab_size + 31) // 32), dtype=np.int32)
        self.row = self.mask[0]
        self.ptr, self.nbytes = self.mask.ctypes.data, self.mask.nbytes
        self.stop = [self.tokenizer.eos_token]

    def compile(self, tag_text: str):
        fmt = json.loads(tag_text)["format"]
        if self.special:
            import harmony_vocab

            lark = harmony_vocab.llguidance_lark(fmt["triggers"][0], fmt["tags"])
        else:
            tags = [self.llg.StructTag(trigger=fmt["triggers"][0], begin=t["begin"],
                                       grammar=t["content"]["json_schema"], end=t["end"]) for t in fmt["tags"]]
            lark = self.llg.StructTag.to_grammar(tags, assume_special=False)
        grammar = self.llg.grammar_from("lark", lark)
        m = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return m

    def fill(self, matcher):
        matcher.unsafe_compute_mask_ptr(self.ptr, self.nbytes)

    def settle(self) -> Optional[float]:
        return None

    def accept(self, matcher, token):
        return matcher.consume_token(token)


def make_engine(name: str, tok, xg2_precompute: bool = True):
    if name == "xg2":
        import xg2_plugin

        return XGrammarAPI(xg2_plugin, tok, precompute_pieces=xg2_precompute)
    if name == "xgrammar":
        import xgrammar

        return XGrammarAPI(xgrammar, tok)
    if name == "llguidance":
        return LLGuidance(tok)
    raise ValueError(name)


def _allowed(row, token: int) -> bool:
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


def run_cell(engine: str, tokenizer_path: str, reqs: List[Dict[str, Any]], conn, prefill: bool = True,
             evict_mb: int = 0, xg2_precompute: bool = True) -> None:
    """Worker: one engine, one cell, a fresh process."""
    import numpy as np

    junk = np.zeros(evict_mb << 17, dtype=np.int64)  # (evict_mb MB of int64)
    try:
        import torch

        torch.set_num_threads(1)
    except Exception:
        pass
    if tokenizer_path == HARMONY_VOCAB:
        import harmony_vocab

        tok = harmony_vocab.load()
    else:
        tok = common.load_hf_tokenizer(tokenizer_path)
    eng = make_engine(engine, tok, xg2_precompute)
    # The start-up heap (tokenizer, torch, the engine) out of the collector's way, as vLLM's
    # engine core does after start-up (`freeze_gc_heap`): else a full collection, ~100 ms over
    # it, lands in whichever request crosses the threshold (seen with 128 tools a request).
    gc.collect()
    gc.freeze()
    compile_ms, token_us, errors, background_ms = [], [], [], []
    clock = time.perf_counter
    for i, req in enumerate(reqs):
        if req.get("warmup"):  # untimed (with a text: walked, every mask filled)
            m = eng.compile(json.dumps(req["tag"]))
            eng.fill(m)
            eng.settle()
            for t in tok.encode(req["text"], add_special_tokens=False) if "text" in req else ():
                if not eng.accept(m, t):
                    errors.append(f"warm-up: token {tok.decode([t])!r} rejected")
                    break
                eng.fill(m)
            continue
        ids = tok.encode(req["text"], add_special_tokens=False)
        tag_text = json.dumps(req["tag"])  # (as an engine hands a tag over: JSON text its API server wrote)
        t0 = clock()
        try:
            m = eng.compile(tag_text)
            eng.fill(m)
        except Exception as e:  # a refusal: counted, not timed
            errors.append(f"request {i}: compile: {type(e).__name__}: {str(e)[:200]}")
            continue
        compile_ms.append(1e3 * (clock() - t0))
        if prefill:  # (the prompt's prefill: the engine's background work overlaps it)
            if evict_mb:
                junk += 1
            bg = eng.settle()
            if bg is not None:
                background_ms.append(bg)
        ok = True
        for k, t in enumerate(ids):
            if k and True:
                t0 = clock()
                eng.fill(m)
                fill_s = clock() - t0
            else:
                fill_s = 0.0  # the first mask is part of the compile
            if not _allowed(eng.row, t):
                errors.append(f"request {i}: token {k} ({tok.decode([t])!r}) masked out")
                ok = False
                break
            t0 = clock()
            accepted = eng.accept(m, t)
            acc_s = clock() - t0
            if not accepted:
                errors.append(f"request {i}: token {k} ({tok.decode([t])!r}) rejected")
                ok = False
                break
            if k:
                token_us.append(1e6 * (fill_s + acc_s))
        if ok:
            eng.fill(m)
            if not any(_allowed(eng.row, s) for s in eng.stop):
                errors.append(f"request {i}: the stop token is masked out at the end")
    conn.send({"compile_ms": compile_ms, "token_us": token_us, "errors": errors, "background_ms": background_ms})


def run_isolated(engine, tokenizer_path, reqs, timeout: float, prefill: bool = True,
                 evict_mb: int = 0, xg2_precompute: bool = True) -> Dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    p = ctx.Process(target=run_cell, args=(engine, tokenizer_path, reqs, child, prefill, evict_mb, xg2_precompute))
    p.start()
    child.close()
    if parent.poll(timeout):
        try:
            res = parent.recv()
        except EOFError:
            res = None
    else:
        res = None
    p.join(5)
    if p.is_alive():
        p.kill()
        return {"compile_ms": [], "token_us": [], "errors": [f"timed out after {timeout} s"]}
    if res is None:
        return {"compile_ms": [], "token_us": [], "errors": [f"worker died (exit {p.exitcode})"]}
    return res


def median_summary(runs: List[Dict[str, Optional[float]]]) -> Dict[str, Optional[float]]:
    """Each figure's median over runs of one cell (errors: their sum; compiled: the fewest)."""
    out: Dict[str, Optional[float]] = {}
    for k in runs[0]:
        vals = [r[k] for r in runs if r[k] is not None]
        if k == "errors":
            out[k] = sum(vals)
        elif k == "compiled":
            out[k] = min(vals) if vals else 0
        else:
            out[k] = statistics.median(vals) if vals else None
    return out


def summarize(res: Dict[str, Any]) -> Dict[str, Optional[float]]:
    c, t, b = res["compile_ms"], res["token_us"], res.get("background_ms", [])
    pc = common.percentile
    return {
        "compiled": len(c),
        "compile_first": c[0] if c else None,
        "compile_mean": sum(c) / len(c) if c else None,
        "compile_p99": pc(c, 99) if c else None,
        "compile_rest_mean": sum(c[1:]) / (len(c) - 1) if len(c) > 1 else None,
        "compile_rest_max": max(c[1:]) if len(c) > 1 else None,
        "background_first": b[0] if b else None,
        "background_mean": sum(b) / len(c) if b and c else None,  # (over every request: most have none)
        "token_mean": sum(t) / len(t) if t else None,
        "token_p50": pc(t, 50) if t else None,
        "token_p99": pc(t, 99) if t else None,
        "token_max": max(t) if t else None,
        "errors": len(res["errors"]),
    }


def fmt(x: Optional[float], digits: int = 1) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}f}" if x < 1000 else f"{x:,.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="xg2,xgrammar,llguidance")
    ap.add_argument("--formats", default="llama,qwen")
    ap.add_argument("--tools", default="5,20,50,128")
    ap.add_argument("--modes", default="dynamic,static")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default=common.shared_path("tokenizers", "llama3"))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each cell R times (each engine a fresh process each time, the engines' order "
                         "rotating); every figure is the median over the runs")
    ap.add_argument("--no-prefill", action="store_true",
                    help="start each request's tokens right after its first mask, not after the engine's "
                         "background work (a prefill long enough for it)")
    ap.add_argument("--prefill-evict", type=int, default=0, metavar="MB",
                    help="after each first mask, every engine writes MB of memory, untimed (a prefill's effect "
                         "on the CPU caches)")
    ap.add_argument("--no-xg2-precompute", action="store_true",
                    help="xg2 without its background work (GrammarCompiler(precompute_pieces=False))")
    ap.add_argument("--out")
    opts = ap.parse_args(argv)
    engines = opts.engines.split(",")
    pool = bfcl_pool.load_pool(100)
    rows, problems = [], []
    cell_no = 0
    for fmt_name in opts.formats.split(","):
        for mode in opts.modes.split(","):
            for n in [int(x) for x in opts.tools.split(",")]:
                reqs = requests(pool, fmt_name, n, mode, opts.requests, opts.seed + n)
                order = engines[cell_no % len(engines):] + engines[:cell_no % len(engines)]
                cell_no += 1
                vocab = HARMONY_VOCAB if fmt_name == "harmony" else opts.tokenizer
                runs: Dict[str, List[Dict[str, Optional[float]]]] = {eng: [] for eng in order}
                for run in range(max(1, opts.repeat)):
                    for eng in order[run % len(order):] + order[:run % len(order)]:
                        res = run_isolated(eng, vocab, reqs, opts.timeout, not opts.no_prefill, opts.prefill_evict,
                                           not opts.no_xg2_precompute)
                        runs[eng].append(summarize(res))
                        problems += [f"{eng} {fmt_name} {mode} N={n}: {e}" for e in res["errors"][:5]]
                for eng in order:
                    s = median_summary(runs[eng])
                    timed = sum(1 for r in reqs if not r.get("warmup"))
                    rows.append([fmt_name, mode, n, eng, f"{s['compiled']}/{timed}", fmt(s["compile_first"]),
                                 fmt(s["compile_mean"]), fmt(s["compile_p99"]), fmt(s["compile_rest_mean"]),
                                 fmt(s["compile_rest_max"]), fmt(s["background_first"]), fmt(s["background_mean"]),
                                 fmt(s["token_mean"]), fmt(s["token_p50"]), fmt(s["token_p99"]), fmt(s["token_max"]),
                                 s["errors"]])
                    print(" | ".join(str(x) for x in rows[-1]), flush=True)
    header = ["format", "tools", "N", "engine", "compiled", "compile first (ms)", "mean", "p99",
              "mean after first", "max after first", "background first (ms)", "mean", "token mean (µs)", "p50",
              "p99", "max", "errors"]
    env = common.environment_summary()
    report = [f"## Tool calling under structural tags\n",
              f"Run: `tools.py {' '.join(argv if argv is not None else sys.argv[1:])}`  ",
              "Environment: " + ", ".join(f"{k} {v}" for k, v in env.items()) + "\n",
              f"A pool of {len(pool)} BFCL functions; {opts.requests} requests a cell; every token of each walked "
              "output checked against the mask"
              + (f"; each figure the median over {opts.repeat} runs of the cell (fresh processes)" if opts.repeat > 1
                 else "") + ". Background: the engine's work after the first mask (its mean over all requests), "
              + ("not waited for: tokens start at once (--no-prefill)" if opts.no_prefill else
                 "waited for, untimed, before the first token (the prompt's prefill overlaps it in a server)")
              + (f"; every engine writes {opts.prefill_evict} MB there, untimed (the prefill's effect on the "
                 "caches)" if opts.prefill_evict and not opts.no_prefill else "")
              + ".\n",
              common.markdown_table(header, rows), ""]
    if problems:
        report += ["### Errors (first 5 per cell)\n"] + [f"- {p}" for p in problems]
    text = "\n".join(report) + "\n"
    if opts.out:
        with open(opts.out, "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
