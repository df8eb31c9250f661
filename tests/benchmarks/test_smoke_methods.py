"""Smoke tests of the benchmarks behind BENCHMARKS.md's "DP-FedAvg against PateGail", "Cell tables", "Where generated
days go", the three cities' Hot-20 intervals and "A Java device in a served run": each script on a tiny case, its
output checked."""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from .conftest import TINY, run_benchmark, run_python


def _train(data, out, *args):
    run_python(["-m", "pategail", "-q", "train", "--data", data, "--out", out, "--no-downstream", "--no-progress",
                *args], timeout=600)


@pytest.mark.slow
def test_fedavg_table_and_training_day_scores_read_finished_runs(tmp_path, embedded_data):
    config = tmp_path / "fedavg.json"
    config.write_text(json.dumps({**TINY, "method": "dp-fedavg", "fedavg": {"batch_size": 16}}))
    _train(embedded_data, tmp_path / "fa", "--no-privacy", "--config", config)
    table = run_benchmark("fedavg_table.py", tmp_path / "fa")
    row = next(line for line in table.splitlines() if line.startswith("| fa |"))
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[1] == "DP-FedAvg" and cells[2] == "fedavg 1.0" and cells[3] == "10" and cells[5] == "∞"
    assert all(0 <= float(v) <= 1 for v in cells[7:12]) and re.fullmatch(r"[0-5] of 5", cells[12])
    scores = run_benchmark("fedavg_train_days.py", embedded_data, tmp_path / "fa")
    row = next(line for line in scores.splitlines() if line.startswith("| fa |"))
    assert "client_lr=0.2" in row and "clip_norm=0.5" in row
    assert all(0 <= float(v) <= 1 for v in row.split("|")[4:-1])


def test_fedavg_device_round_times_both_rounds_of_one_device(embedded_data):
    out = run_benchmark("fedavg_device_round.py", "--data", embedded_data, "--users", "2")
    parameters = int(re.search(r"P = ([0-9,]+) trainable parameters", out).group(1).replace(",", ""))
    rows = [line.split("|")[1:-1] for line in out.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) == 2
    for days, fed, pg, pending in rows:
        assert int(days) >= 1 and float(fed) >= 0 and float(pg) >= 0
        assert pending.strip().startswith(f"{parameters:,} / ")      # DP-FedAvg's pending vector: every parameter


@pytest.mark.slow
def test_released_cells_release_and_compose(tmp_path, public_data):
    out = tmp_path / "released"
    # a large ε: 40 devices from 10 users clear the threshold only with little noise
    summary = json.loads(run_benchmark("released_cells.py", "release", "--data", public_data, "--out", out,
                                       "--population", "40", "--epsilon", "100"))
    assert 0 < summary["released"] <= summary["universe"] and summary["false_squares"] <= summary["released"]
    assert 0 < summary["remaining_epsilon"] < 100
    _train(out, tmp_path / "run", "--epsilon", summary["remaining_epsilon"], "--data-derived-cells",
           "--population", "40", "--fleet", "population", "--config", _tiny(tmp_path))
    composed = json.loads(run_benchmark("released_cells.py", "compose", "--released", out, "--run", tmp_path / "run"))
    zero = composed["zero-out"]
    assert zero["planned"] <= zero["with_reserve"] <= 100.0 + 1e-6 and composed["target"] == 100.0
    assert composed["replace-one"]["planned"] > zero["planned"]


def _tiny(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("java") and shutil.which("javac")), reason="no JDK (java, javac)")
def test_java_device_measures_both_kinds_of_device(tmp_path):
    from pategail.jvm_device import java_missing

    if java_missing():
        pytest.skip(java_missing())
    run_benchmark("java_device.py", "--devices", "1", "--rounds", "1", "--out", tmp_path / "java", timeout=600)
    result = json.loads((tmp_path / "java" / "result.json").read_text())
    assert result["releases"] == 2 and len(result["rows"]) == 2                 # the environment and one round
    for row in result["rows"]:
        assert row["cpu_s_to_env_release"] > 0 and row["peak_rss_mib"] > 0 and row["kib_up_per_release"] > 0


def test_environment_estimator_scores_each_spread(public_data):
    out = run_benchmark("environment_estimator.py", "--data", public_data, "--devices", "40", "--sigmas", "0.5",
                        "--shrinks", "0.5", "--populations", "1")
    rows = {r[2].strip(): r for r in (line.split("|") for line in out.splitlines() if line.startswith("| 0.5 |"))}
    assert set(rows) == {"even (default)", "shrink 0.5 (measured in training)"}
    for r in rows.values():
        tv, empty, km = float(r[3]), float(r[4].strip().rstrip("%")), float(r[5])
        assert 0 <= tv <= 1 and 0 <= empty <= 100 and km >= 0


def test_place_ranks_scores_a_run_and_its_references(tmp_path, embedded_data):
    from pategail.data.dataset import load_dataset
    from pategail.metrics.evaluate import floor_days
    from pategail.sdk.synthetic import write_synthetic_csv

    ds = load_dataset(embedded_data)
    copy = tmp_path / "copy"                 # a "run" whose days are the floor's own sample of training days
    copy.mkdir()
    write_synthetic_csv(copy / "synthetic.csv", floor_days(ds, 0), ds.cells)
    out = run_benchmark("place_ranks.py", "--data", embedded_data, "--run", copy, "--plot", tmp_path / "ranks.png")
    rows = {r[1].strip(): [c.strip() for c in r[2:-1]] for r in (line.split("|") for line in out.splitlines())
            if len(r) > 3 and not r[1].strip().startswith(("days", "---"))}
    assert set(rows) == {"test days", "training days (floor)", "epr", str(copy)}
    assert float(rows["test days"][0]) == 0.0
    assert rows[str(copy)] == rows["training days (floor)"]
    for r in rows.values():
        shares = [float(x) for x in r[1:5]]
        assert 0 < sum(shares) <= 1.0005 and shares[0] >= shares[1] / 9           # rank 1 holds at least the mean of 2–10
    assert (tmp_path / "ranks.png").stat().st_size > 0


def test_hotspot_interval_pairs_each_run_with_its_own_epr_days_on_every_resampled_test_set(tmp_path, embedded_data):
    from pategail.baselines import generate_baseline
    from pategail.data.dataset import load_dataset
    from pategail.metrics.evaluate import floor_days
    from pategail.sdk.synthetic import write_synthetic_csv

    ds = load_dataset(embedded_data)
    runs = {"floor": floor_days(ds, 1),       # "runs" whose days are seed 1's floor sample and epr days
            "epr": generate_baseline("epr", ds, len(ds.test_days), np.random.default_rng([1, 1]))}
    for name, days in runs.items():
        (tmp_path / name).mkdir()
        write_synthetic_csv(tmp_path / name / "synthetic.csv", days, ds.cells)
        (tmp_path / name / "report.json").write_text(json.dumps({"training": {"seed": 1}}))
    out = run_benchmark("hotspot_interval.py", "--data", embedded_data, "--run", tmp_path / "floor",
                        "--run", tmp_path / "epr", "--draws", "200")
    unit = "user" if (ds.test_users >= 0).all() and len(np.unique(ds.test_users)) > 1 else "day"
    assert f"{len(ds.test_days)} test days in " in out and f"units ({unit}s), 200 draws" in out, out
    rows = {r[1].strip(): [c.strip() for c in r[2:-1]] for r in (line.split("|") for line in out.splitlines())
            if len(r) > 3 and not r[1].strip().startswith(("run", "---"))}
    assert set(rows) == {str(tmp_path / "floor"), str(tmp_path / "epr"), "mean of 2"}
    ours, epr, floor, diff, interval, share, train = rows[str(tmp_path / "floor")]
    assert ours == floor and float(diff) == pytest.approx(float(ours) - float(epr))
    # the epr "run" draws the very days its report's seed gives epr: level on every resampled test set
    ours, epr, floor, diff, interval, share, train = rows[str(tmp_path / "epr")]
    assert ours == epr and interval == "[+0.000, +0.000]" and share == "100%"
    assert train.split(", ")[0] == train.split(", ")[1]


def test_fedavg_population_shard_times_one_shard(embedded_data):
    out = run_benchmark("fedavg_population_shard.py", "--data", embedded_data, "--devices", "3")
    found = re.search(r"3 devices \((\d+) days each on average\), ([0-9.]+) s CPU = ([0-9.]+) ms a device; "
                      r"peak RSS (\d+) MB; Σ\|upload\| (\d+)", out)
    assert found is not None, out
    days, cpu, per_device, rss, upload = found.groups()
    assert int(days) >= 1 and float(per_device) > 0 and abs(3 * float(per_device) / 1000 - float(cpu)) <= 0.05
    assert int(rss) > 0 and int(upload) > 0          # the devices' deltas moved the policy
