"""`pategail train --population N`: a resampled population on the population fleet, recorded as such in
report.json and report.md; bad combinations and a missing Ray are one-line errors (exit status 2)."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from pategail.cli import main
from pategail.population.resample import resample_population
from pategail.data.dataset import save_dataset
from pategail.server.config import ALL_PAIRS_MAX, TrainConfig, secagg_degree_for
from pategail.server.errors import PategailError

TINY = {"rounds": 1, "days_per_round": 4, "discriminator": {"steps": 2, "batch_size": 16}, "environment": {"candidates": 50, "action_prior_days": 16, "action_prior_epochs": 1}, "policy": {"d_model": 16, "n_layers": 1}, "average_rounds": 1, "ppo": {"n_epochs": 1, "batch_size": 2}}


@pytest.fixture(scope="module")
def data(tmp_path_factory, dataset):
    out = tmp_path_factory.mktemp("cli") / "data"
    save_dataset(dataset, out)
    config = out.parent / "tiny.json"
    config.write_text(json.dumps(TINY))
    return out, config


def test_train_on_a_resampled_population(data, tmp_path, capsys):
    d, config = data
    run = tmp_path / "run"
    assert main(["-q", "train", "--data", str(d), "--out", str(run), "--no-privacy", "--config", str(config),
                 "--population", "24", "--population-days", "0.5", "--fleet", "population", "--no-downstream",
                 "--no-progress", "--population-processes", "2"]) == 0
    report = json.loads((run / "report.json").read_text())
    assert report["fleet"]["kind"] == "population" and report["fleet"]["devices"] == 24
    assert report["fleet"]["processes"] == report["fleet"]["shards"] == 1     # 24 devices: one chunk of 256
    assert report["population"] == {"devices": 24, "source_users": 10,
                                    "method": "whole users drawn with replacement, each device a random 0.5 of "
                                              "its days", "max_copies": report["population"]["max_copies"]}
    assert report["population"]["max_copies"] == resample_population(np.arange(10), 24, 0, 0.5).max_copies > 1
    assert report["training"]["devices"] == 24
    md = (run / "report.md").read_text()
    assert "resampled population of 24 devices from 10 users" in md
    assert "km mode (resampled population)" in md
    assert sorted(p.name for p in (run / "population").rglob("state-*.npz")) == ["state-1.npz"]
    capsys.readouterr()


def test_a_private_population_states_its_guarantee_per_device_and_per_person(data, tmp_path, capsys):
    """Copies of one user are one person: the report says the guarantee is per device and gives the group figure
    for the run's largest number of copies."""
    d, config = data
    run = tmp_path / "run"
    assert main(["-q", "train", "--data", str(d), "--out", str(run), "--epsilon", "8", "--config", str(config),
                 "--population", "24", "--fleet", "population", "--no-downstream", "--no-progress",
                 "--data-derived-cells"]) == 0
    report = json.loads((run / "report.json").read_text())
    copies = resample_population(np.arange(10), 24, 0).max_copies
    person = report["privacy"]["per_person"]
    assert report["population"]["max_copies"] == person["max_copies"] == copies > 1
    device = report["privacy"]["guarantees"]["against_the_coordinator"]
    assert person["epsilon_zero_out"] > copies * 0.5 * device["epsilon_zero_out"]
    assert person["epsilon_replace_one"] > person["epsilon_zero_out"]
    md = (run / "report.md").read_text()
    assert f"- Per person: the guarantees above are per device: this resampled population holds up to {copies} " \
           "copies of one person" in md
    capsys.readouterr()


def test_the_sdk_fleet_reports_itself(data, tmp_path):
    d, config = data
    run = tmp_path / "run"
    assert main(["-q", "train", "--data", str(d), "--out", str(run), "--no-privacy", "--config", str(config),
                 "--devices", "3", "--no-downstream", "--no-progress"]) == 0
    report = json.loads((run / "report.json").read_text())
    assert report["fleet"]["kind"] == "sdk" and "population" not in report


@pytest.mark.parametrize("extra, message", [
    (["--population", "5", "--devices", "3"], "leave out --devices"),
    (["--population-days", "0.5"], "goes with --population"),
    (["--population", "5", "--population-days", "1.5"], "--population-days must be in (0, 1]"),
    (["--devices", "3", "--ray-workers", "2"], "add --fleet population"),
    (["--devices", "3", "--population-threads", "2"], "add --fleet population"),
    (["--population", "5", "--population-threads", "0"], "--population-threads 0: must be at least 1"),
    (["--devices", "3", "--population-processes", "2"], "add --fleet population"),
    (["--population", "5", "--population-processes", "0"], "--population-processes 0: must be at least 1"),
    (["--population", "5", "--population-processes", "2", "--population-threads", "2"],
     "leave out --population-threads"),
])
def test_bad_combinations_are_one_line_errors(data, tmp_path, capsys, extra, message):
    d, _ = data
    assert main(["-q", "train", "--data", str(d), "--out", str(tmp_path / "x"), "--no-privacy", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_asking_for_ray_without_it_is_a_one_line_error(monkeypatch):
    from pategail.population.fleet import start_ray
    monkeypatch.setitem(sys.modules, "ray", None)             # as if not installed
    with pytest.raises(PategailError, match=r"pip install 'pategail\[ray\]'"):
        start_ray(None, 2)


def test_secure_aggregation_defaults_follow_the_cohort():
    assert secagg_degree_for(ALL_PAIRS_MAX) == 0                     # all pairs for small cohorts
    assert secagg_degree_for(ALL_PAIRS_MAX + 1) > 0
    assert secagg_degree_for(1_000) == 54          # sized for 20% dropouts (min_survivors 0.8) at failure 1e-3
    assert secagg_degree_for(1_000, dropout=0.1) < 54 < secagg_degree_for(1_000, dropout=0.3)
    assert secagg_degree_for(1_000, colluders=3) > 54                # the threshold k/2 + 2 + c must still fit
    degrees = [secagg_degree_for(n) for n in (1_000, 10_000, 100_000, 1_000_000)]
    assert degrees == sorted(degrees) and all(k % 2 == 0 for k in degrees) and degrees[-1] < 100   # O(log n)
    assert secagg_degree_for(100_000, configured=0) == 0             # overridable
    assert TrainConfig().secagg.degree is None
    with pytest.raises(PategailError):
        TrainConfig(secagg={"degree": 3})
