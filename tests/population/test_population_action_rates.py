"""The population fleet sends the action-rate part (``action_prior``) exactly as the SDK's devices do: the
released environment sums of a bundle that declares it agree, and carry the part."""
from __future__ import annotations

import numpy as np

from pategail.emulator import EmulatedFleet
from pategail.population.fleet import PopulationFleet, device_model
from pategail.population.resample import resample_population
from pategail.sdk.action_rates import action_rate_contribution, action_rate_length
from pategail.sdk.contribution import DAYS_CAP
from pategail.sdk.features import infer_home
from pategail.sdk.messages import InitialStatesRequest, to_bytes
from pategail.server.config import TrainConfig
from pategail.server.secagg.config import SecureRoundConfig
from pategail.training import write_initial_bundle


def test_the_environment_sums_with_the_action_rates_agree(tmp_path, dataset, sdk_secure_sum):
    bundle = write_initial_bundle(TrainConfig(rounds=1, days_per_round=8, environment={"action_prior": True}), dataset, 0,
                                  tmp_path / "bundle")
    assert device_model(bundle, 0).action_rates
    population = resample_population(dataset.users, 6, seed=0)
    sdk = EmulatedFleet(dataset, population.users, tmp_path / "devices", bundle, seed=0)
    pop = PopulationFleet(dataset, population, bundle, seed=0, state_dir=tmp_path / "state")
    for fleet in (sdk, pop):
        for i in fleet.device_ids:
            fleet.request(i, to_bytes(InitialStatesRequest(1)))
    length = pop._length
    config = SecureRoundConfig(round_id=10 << 16, n_min=6)
    ours = pop.secure_sum(list(pop.device_ids), config, None, np.random.default_rng(3), length)
    theirs = sdk_secure_sum(sdk, config, np.random.default_rng(3), length)
    assert np.abs(theirs.sum - ours.sum).max() < 1e-6
    expected = sum(action_rate_contribution(d, infer_home(d), DAYS_CAP)
                   for d in (dataset.user_days(u) for u in population.users))
    assert np.abs(ours.sum[-action_rate_length():] - expected).max() < 1e-4
