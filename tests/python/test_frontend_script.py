"""examples/benchmark/frontend.py end to end on a tiny MaskBench-format folder made here
(tests do not read ../shared): every schema is converted, the ones our front-end refuses
are counted, and the report names the build it timed.  No timing is checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "benchmark", "frontend.py")

SCHEMAS = {
    "a.json": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "b.json": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 3},
    "c.json": {"type": "string", "format": "regex"},  # refused: no grammar expresses it
}


def run_script(folder, *args):
    for name, schema in SCHEMAS.items():
        (folder / name).write_text(json.dumps({"description": name, "schema": schema, "tests": []}))
    return subprocess.run([sys.executable, SCRIPT, "--data", str(folder), "--passes", "1", *args],
                          capture_output=True, text=True, timeout=300)


def test_frontend_script_converts_every_schema_and_counts_refusals(tmp_path):
    out = run_script(tmp_path)
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip()
    assert "over 3 schemas (1 refused)" in line, line
    assert line.startswith("front-end (compiled)") or line.startswith("front-end (source)"), line


def test_frontend_script_limit_takes_the_first_files_by_name(tmp_path):
    out = run_script(tmp_path, "--limit", "2")
    assert out.returncode == 0, out.stderr
    assert "over 2 schemas (0 refused)" in out.stdout, out.stdout
