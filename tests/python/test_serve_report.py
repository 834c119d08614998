"""examples/benchmark/serve.py's arithmetic over rounds (the real server runs in the engine
suite): the overhead ratios and the time the constraint adds, each the median over the
rounds of one cell, constrained against the same round's unconstrained phase."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "benchmark"))

import serve  # noqa: E402


def _phase(ttft_s, tok_s):
    return {"ttft_mean": ttft_s, "tok_s": tok_s}


def test_ratio_and_added_time_are_medians_over_rounds():
    cons = [_phase(0.020, 100.0), _phase(0.030, 50.0), _phase(0.025, 80.0)]
    nones = [_phase(0.010, 200.0), _phase(0.020, 100.0), _phase(0.015, 100.0)]
    ttft_x, cost_x = serve.round_ratios(cons, nones)
    ttft_plus, token_plus = serve.round_overheads(cons, nones)
    assert ttft_x == pytest.approx(25 / 15)            # rounds 2.0, 1.5, 1.67
    assert cost_x == pytest.approx(2.0)                # rounds 2.0, 2.0, 1.25
    assert ttft_plus == pytest.approx(10.0)            # ms: rounds 10, 10, 10
    assert token_plus == pytest.approx(5000.0)         # µs a token: rounds 5,000, 10,000, 2,500


def test_a_faster_server_with_the_same_added_time_shows_a_larger_ratio():
    # the reason for reporting both: 5 ms added to a 10 ms baseline is 1.5x, to 20 ms 1.25x
    fast = serve.round_ratios([_phase(0.015, 100.0)], [_phase(0.010, 100.0)])[0]
    slow = serve.round_ratios([_phase(0.025, 100.0)], [_phase(0.020, 100.0)])[0]
    assert fast == pytest.approx(1.5) and slow == pytest.approx(1.25)
    assert serve.round_overheads([_phase(0.015, 100.0)], [_phase(0.010, 100.0)])[0] == pytest.approx(5.0)
    assert serve.round_overheads([_phase(0.025, 100.0)], [_phase(0.020, 100.0)])[0] == pytest.approx(5.0)


def test_rounds_without_a_figure_are_left_out():
    assert serve.round_overheads([_phase(None, 0.0)], [_phase(0.01, 100.0)]) == (None, None)
    assert serve.round_ratios([_phase(None, 0.0)], [_phase(0.01, 100.0)]) == (None, None)
