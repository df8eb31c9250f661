"""Smoke tests of the fleet and training benchmarks: the population fleet, the SDK fleet's memory, the game on
training days, a served run under load and a hostile one, and the table of finished runs."""
from __future__ import annotations

import json
import re

import pytest

from .conftest import json_lines, run_benchmark


def test_population_round_times_the_fleet_alone(embedded_data):
    out = run_benchmark("population_round.py", "--data", embedded_data, "--devices", "20", "--rounds", "2", "--days", "6",
                        "--quiet")
    (line,) = json_lines(out)
    assert line["devices"] == 20 and line["source_users"] == 10 and len(line["seconds_per_round"]) == 2
    assert line["ms_per_device_round"] > 0 and line["peak_rss_gb"] > 0


@pytest.mark.slow
def test_population_runs_a_resampled_population_through_the_coordinator(embedded_data, tiny_config):
    out = run_benchmark("population.py", "--data", embedded_data, "--devices", "20", "--rounds", "1", "--config", tiny_config)
    (line,) = json_lines(out)
    assert line["devices"] == 20 and line["rounds"] == 1 and len(line["seconds_per_round"]) == 1
    assert line["days_per_round"] == 6                          # the configuration file was read


def test_fleet_memory_reports_rss_after_every_round(tmp_path, embedded_data, tiny_config):
    out_json = tmp_path / "memory.json"
    out = run_benchmark("fleet_memory.py", "--data", embedded_data, "--devices", "4", "--rounds", "2", "--config", tiny_config,
                        "--json", out_json)
    points = [p["at"] for p in json_lines(out) if "at" in p]
    assert points[:2] == ["imports", "set-up"] and "round 1" in points and "round 2" in points
    assert all(p["rss_mib"] > 0 for p in json_lines(out) if "rss_mib" in p)
    assert out_json.exists()


@pytest.mark.slow
def test_game_scores_the_published_policy_on_training_and_test_days(tmp_path, embedded_data, tiny_config):
    out = run_benchmark("game.py", "--data", embedded_data, "--out", tmp_path / "game", "--config", tiny_config,
                        "--rounds", "1", "--eval-days", "50", "--plain-sums", "--test")
    summary = json.loads((tmp_path / "game" / "game.json").read_text())
    assert {"ours", "epr", "markov", "floor"} <= set(summary["results"])
    assert set(summary["results"]["ours"]) == {"radius", "dailyloc", "distance", "grank", "irank"}
    assert {"ours", "epr", "markov", "floor"} <= set(summary["test"])
    assert re.search(r"^\| test: ours \| [0-9.]+ \|", out, flags=re.M)


@pytest.mark.slow
def test_network_load_serves_a_private_run_and_report_table_reads_it(tmp_path, public_data, tiny_config):
    out = tmp_path / "net"
    run_benchmark("network_load.py", "--data", public_data, "--out", out, "--devices", "3", "--processes", "1",
                  "--rounds", "1", "--epsilon", "10", "--config", tiny_config, timeout=600)
    result = json.loads((out / "result.json").read_text())
    phases = [m["phase"] for m in result["network"]["marks"]]
    assert phases[0] == "enrolling" and "training" in phases or "finished" in phases
    assert result["in_process"]["devices"] == 3 and len(result["in_process"]["rounds"]) == 1
    table = run_benchmark("report_table.py", out / "served")
    row = next(line for line in table.splitlines() if line.startswith("| 3 |"))
    assert "| 10 (" in row and "gaussian day" in row and re.search(r"\| [0-5] of 5 \|", row)


@pytest.mark.slow
def test_hostile_service_keeps_serving_and_refuses_the_load(tmp_path, embedded_data):
    out = run_benchmark("hostile_service.py", "--data", embedded_data, "--out", tmp_path / "host", "--seconds", "3",
                        "--threads", "2", "--requests", "20", "--squatters", "5", "--slow", "2", "--hold", "2")
    result = json.loads(out)
    assert result["device_with_token_enrols"] is True
    assert result["codes"]["squatter"] == {"403": 5}               # no seat without a token
    assert set(result["codes"]["50 MB body"]) == {"413"}
    assert result["status_during"]["failed"] == 0
