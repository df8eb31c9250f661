"""Smoke tests of the privacy-planning and secure-aggregation benchmarks: each runs on a tiny case."""
from __future__ import annotations

import re

import pytest

from .conftest import run_benchmark


def test_privacy_plan_meets_its_target_on_a_small_case():
    out = run_benchmark("privacy_plan.py", "--case", "8:100")
    reported = float(re.search(r"reported ε ([0-9.]+)", out).group(1))
    assert "target ε 8, Q 100" in out and 7.9 < reported <= 8.0


def test_privacy_defaults_table_has_a_row_per_device_count_and_epsilon():
    out = run_benchmark("privacy_defaults.py")
    rows = [line.split("|")[1:-1] for line in out.splitlines() if re.match(r"\| [0-9,]+ \| [0-9]", line)]
    assert {(r[0].strip(), r[1].strip()) for r in rows} >= {("83", "8"), ("1,000", "8")}
    by = {(r[0].strip(), r[1].strip()): r for r in rows}
    assert by[("1,000", "8")][3].strip() == "0.5" and by[("83", "8")][3].strip() == "0.1"   # the environment share


def test_secagg_round_costs_one_all_pairs_and_one_secagg_plus_round(tmp_path):
    out_md = tmp_path / "secagg.md"
    # no dropouts in the SecAgg+ case: with k = 4 its threshold (k/2 + 2) needs every neighbour's share, and
    # which devices neighbour a dropout depends on the round's random graph
    run_benchmark("secagg_round.py", "--out", out_md, "--cases", "10:0:0,20:4:0")
    rows = [line.split("|")[1:-1] for line in out_md.read_text().splitlines() if re.match(r"\| (10|20) \|", line)]
    assert [(r[0].strip(), r[1].strip(), r[3].strip()) for r in rows] == [("10", "all pairs", "10"),
                                                                          ("20", "SecAgg+ k=4", "20")]
    assert all(float(r[4]) > 0 and float(r[6]) > 0 for r in rows)      # device CPU and bytes up measured


def test_secagg_liveness_counts_completed_rounds(tmp_path):
    out_md = tmp_path / "live.md"
    run_benchmark("secagg_liveness.py", "--devices", "50", "--rounds", "5", "--out", out_md)
    shares = re.findall(r"\| ([0-9.]+)% of 5 \|", out_md.read_text())
    assert len(shares) >= 8 and all(0 <= float(s) <= 100 for s in shares)
    assert "100.0" in shares                                          # 10% dropouts: every round completes


@pytest.mark.slow
def test_ort_sequence_order_names_the_first_parameter_of_each_process():
    out = run_benchmark("ort_sequence_order.py", "--processes", "2")
    counts = dict(re.findall(r"^  (w[123]|b[123]): (\d+)$", out, flags=re.M))
    assert counts and sum(int(n) for n in counts.values()) == 2
