"""The initial-state part's own days cap: a run without privacy weights each device's home and first cells by
min(1, days / INITIAL_STATES_DAYS_CAP), so generated days start from homes as the real days do; a private run
keeps the environment vector's cap. The cap travels in the bundle, and SDK devices and the population fleet
both use it."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.population.fleet import device_model
from pategail.sdk.bundle import Environment, load_bundle
from pategail.sdk.contribution import DAYS_CAP, initial_state_contribution
from pategail.sdk.errors import BundleError
from pategail.sdk.features import infer_home
from pategail.server.config import INITIAL_STATES_DAYS_CAP, TrainConfig
from pategail.server.errors import PategailError
from pategail.training import write_initial_bundle


def test_the_cap_resolves_by_privacy_and_a_private_run_refuses_another():
    assert TrainConfig().initial_states_days_cap == INITIAL_STATES_DAYS_CAP > DAYS_CAP
    assert TrainConfig(privacy={"epsilon": 8}).initial_states_days_cap == DAYS_CAP
    assert TrainConfig(environment={"initial_states_days_cap": 30}).initial_states_days_cap == 30
    assert TrainConfig(privacy={"epsilon": 8},
                       environment={"initial_states_days_cap": DAYS_CAP}).initial_states_days_cap == DAYS_CAP
    with pytest.raises(PategailError, match="a private run keeps the environment vector's cap"):
        TrainConfig(privacy={"epsilon": 8}, environment={"initial_states_days_cap": 1000})
    with pytest.raises(PategailError, match="initial_states_days_cap must be a whole number of days >= 1"):
        TrainConfig(environment={"initial_states_days_cap": 0})


def test_the_bundle_carries_the_cap_and_refuses_a_bad_one(tmp_path):
    cells = np.array([[39.9, 116.3], [39.91, 116.31], [39.92, 116.3]])
    plain = Environment(cells, 0.96, 2).write(tmp_path)
    assert "initial_states_days_cap" not in plain                     # the default is not written: old bundles
    assert Environment.read(tmp_path, plain).initial_states_days_cap == DAYS_CAP
    capped = Environment(cells, 0.96, 2, initial_states_days_cap=1000).write(tmp_path)
    assert capped["initial_states_days_cap"] == 1000
    assert Environment.read(tmp_path, capped).initial_states_days_cap == 1000
    for bad in (0, 2.5, True, "100"):
        with pytest.raises(BundleError, match="initial_states_days_cap must be a whole number of days"):
            Environment.read(tmp_path, {**capped, "initial_states_days_cap": bad})


def test_the_weight_is_the_days_over_the_cap_capped_at_one():
    days = np.zeros((40, 48), dtype=np.int64)
    days[:10, 0] = 1                                                  # 10 of 40 days start away from home
    for cap, w in ((100, 0.4), (1000, 0.04), (20, 1.0)):
        part = initial_state_contribution(days, 0, 3, cap)
        np.testing.assert_allclose(part, [w, 0, 0, 0, w / 4, 0, w * 3 / 4, w])


def test_sdk_devices_and_the_population_fleet_release_homes_with_the_bundles_cap(tmp_path, dataset, environment_sums):
    bundle = write_initial_bundle(TrainConfig(rounds=1, days_per_round=8), dataset, 0, tmp_path / "bundle")
    cap = INITIAL_STATES_DAYS_CAP
    assert load_bundle(bundle).environment.initial_states_days_cap == cap == device_model(bundle, 0).initial_states_days_cap
    population, theirs, ours = environment_sums(dataset, bundle, tmp_path)
    assert np.abs(theirs.sum - ours.sum).max() < 1e-6
    days = [dataset.user_days(u) for u in population.users]
    n = dataset.n_cells
    part = ours.sum[:2 * n + 2]                                         # homes, first cells, at home, weight
    expected = sum(initial_state_contribution(d, infer_home(d), n, cap) for d in days)
    assert np.abs(part - expected).max() < 1e-5
    assert np.abs(part - sum(initial_state_contribution(d, infer_home(d), n) for d in days)).max() > 1e-2


def test_a_private_runs_bundle_keeps_the_environment_vectors_cap(tmp_path, dataset):
    bundle = write_initial_bundle(TrainConfig(rounds=1, days_per_round=8, privacy={"epsilon": 8}), dataset, 0,
                                  tmp_path / "bundle")
    assert load_bundle(bundle).environment.initial_states_days_cap == DAYS_CAP
    assert "initial_states_days_cap" not in load_bundle(bundle).manifest["environment"]
