"""Fixtures of the population-fleet tests: a bundle for a short run, and a runner of the coordinator over any
fleet (3 rounds of 8 generated days, the default discriminator training, no noise)."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def short_config():
    from pategail.server.config import TrainConfig
    # a short warm start: it is on without privacy, and at its defaults (2,048 days, 30 epochs) it took 24 of
    # a run's 25 s while these tests compare fleets, not warm starts
    return TrainConfig(rounds=3, days_per_round=8, average_rounds=1, environment={"action_prior_days": 64, "action_prior_epochs": 2})


@pytest.fixture(scope="session")
def run_bundle(tmp_path_factory, dataset, short_config) -> Path:
    """The initial bundle `pategail train` writes for ``short_config`` (seed 0)."""
    from pategail.training import write_initial_bundle
    return write_initial_bundle(short_config, dataset, 0, tmp_path_factory.mktemp("population") / "bundle")


@pytest.fixture(scope="session")
def train():
    """train(fleet, cells, run_dir, config, on_round=None) -> the Coordinator after its rounds."""
    def run(fleet, cells, run_dir, config, on_round=None, resume=False):
        import torch

        from pategail.server.coordinator import Coordinator

        torch.set_num_threads(1)
        coordinator = Coordinator(config, fleet, cells, run_dir, seed=0)
        if resume:
            assert coordinator.resume()
        coordinator.train(on_round)
        return coordinator
    return run


@pytest.fixture(scope="session")
def environment_sums(sdk_secure_sum):
    """environment_sums(dataset, bundle, state_dir, devices=6) -> (population, SDK sum, population fleet's sum): a
    population resampled from ``dataset``'s users held once by SDK devices and once by the population fleet, every
    device's environment vector released by a real secure round (SDK) and by the fleet's (no noise)."""
    def run(dataset, bundle, state_dir, devices=6):
        import numpy as np

        from pategail.emulator import EmulatedFleet
        from pategail.population.fleet import PopulationFleet
        from pategail.population.resample import resample_population
        from pategail.sdk.messages import InitialStatesRequest, to_bytes
        from pategail.server.secagg.config import SecureRoundConfig

        population = resample_population(dataset.users, devices, seed=0)
        sdk = EmulatedFleet(dataset, population.users, state_dir / "devices", bundle, seed=0)
        pop = PopulationFleet(dataset, population, bundle, seed=0, state_dir=state_dir / "state")
        for fleet in (sdk, pop):
            for i in fleet.device_ids:
                fleet.request(i, to_bytes(InitialStatesRequest(1)))
        config = SecureRoundConfig(round_id=10 << 16, n_min=devices)
        ours = pop.secure_sum(list(pop.device_ids), config, None, np.random.default_rng(3), pop._length)
        return population, sdk_secure_sum(sdk, config, np.random.default_rng(3), pop._length), ours
    return run


@pytest.fixture(scope="session")
def sdk_secure_sum():
    """sdk_secure_sum(fleet, config, rng, length, dropouts=None) -> the real secure round's result over an SDK
    fleet's devices (each uploading its pending vector)."""
    def run(fleet, config, rng, length, dropouts=None):
        from pategail.server.secagg.coordinator import SecAggCoordinator
        from pategail.server.secagg.round import run_secure_round

        coordinator = SecAggCoordinator()
        for i, keys in fleet.public_keys().items():
            coordinator.enroll(i, keys)
        endpoints = [fleet.devices[i].secagg_endpoint(coordinator.directory) for i in fleet.device_ids]
        return run_secure_round(endpoints, None, config, rng, coordinator=coordinator, num_queries=length,
                                **({} if dropouts is None else {"dropouts": dropouts}))
    return run
