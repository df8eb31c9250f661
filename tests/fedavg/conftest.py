"""Fixtures of the DP-FedAvg tests: the embedded data, a tiny policy shape, and the initial bundle of a DP-FedAvg
run (with the policy's maximum-likelihood training artifacts)."""
from __future__ import annotations

from pathlib import Path

import pytest

from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset
from pategail.server.config import TrainConfig, merge_settings
from pategail.server.fedavg.config import FedAvgConfig

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(rounds=2, days_per_round=6, environment={"candidates": 50, "action_prior": False}, policy={"d_model": 16, "n_layers": 1}, method="dp-fedavg", average_rounds=1, fedavg=FedAvgConfig(local_epochs=1, batch_size=16, client_lr=0.1,
                                                                       clip_norm=0.5))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "default"
    prepare_dataset("pategail", ROOT / "data" / "default", out, allow_pickle=True)
    return load_dataset(out)


@pytest.fixture(scope="module")
def tiny():
    """TrainConfig(**overrides) of the tiny DP-FedAvg shape."""
    return lambda **overrides: TrainConfig(**merge_settings(TINY, overrides))


@pytest.fixture(scope="module")
def fedavg_bundle(tmp_path_factory, dataset, tiny) -> Path:
    """The initial bundle `pategail train --method dp-fedavg` writes (no privacy, seed 0)."""
    from pategail.training import write_initial_bundle
    return write_initial_bundle(tiny(), dataset, 0, tmp_path_factory.mktemp("fedavg") / "bundle")
