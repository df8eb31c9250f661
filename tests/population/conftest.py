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
