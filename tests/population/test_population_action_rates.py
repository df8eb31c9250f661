"""The population fleet sends the action-rate part (``action_prior``) exactly as the SDK's devices do: the
released environment sums of a bundle that declares it agree, and carry the part."""
from __future__ import annotations

import numpy as np

from pategail.population.fleet import device_model
from pategail.sdk.action_rates import action_rate_contribution, action_rate_length
from pategail.sdk.contribution import DAYS_CAP
from pategail.sdk.features import infer_home
from pategail.server.config import TrainConfig
from pategail.training import write_initial_bundle


def test_the_environment_sums_with_the_action_rates_agree(tmp_path, dataset, environment_sums):
    bundle = write_initial_bundle(TrainConfig(rounds=1, days_per_round=8, environment={"action_prior": True}), dataset, 0,
                                  tmp_path / "bundle")
    assert device_model(bundle, 0).action_rates
    population, theirs, ours = environment_sums(dataset, bundle, tmp_path)
    assert np.abs(theirs.sum - ours.sum).max() < 1e-6
    expected = sum(action_rate_contribution(d, infer_home(d), DAYS_CAP)
                   for d in (dataset.user_days(u) for u in population.users))
    assert np.abs(ours.sum[-action_rate_length():] - expected).max() < 1e-4
