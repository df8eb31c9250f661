"""Fixtures of the onnxruntime conformance suite: one exported bundle per session, the torch models it was
exported from, and random and real inputs."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

N_CELLS = 4210          # pategail-geolife's cell table, so real days index the same embedding


def perturbed(module: torch.nn.Module, seed: int, std: float = 0.1) -> torch.nn.Module:
    """``module`` with every parameter moved by N(0, std): zero-initialised heads would make value and
    logit comparisons vacuous."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g) * std)
    return module


@pytest.fixture(scope="session")
def torch_models():
    """(policy, discriminator): the torch models the session's bundle holds (treat as read-only)."""
    from pategail.export.discriminator import Discriminator
    from pategail.server.policy import Policy, PolicyConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234)
        policy = perturbed(Policy(PolicyConfig(n_cells=N_CELLS)), seed=1).eval()
        discriminator = Discriminator()
    return policy, discriminator


@pytest.fixture(scope="session")
def bundle_dir(tmp_path_factory, torch_models):
    from pategail.export.bundle import export_bundle

    policy, discriminator = torch_models
    return export_bundle(policy, discriminator, tmp_path_factory.mktemp("conformance") / "bundle")


@pytest.fixture(scope="session")
def bundle(bundle_dir):
    from pategail.sdk.bundle import load_bundle

    return load_bundle(bundle_dir)


@pytest.fixture
def fresh_discriminator(torch_models):
    """A private copy of the bundle's discriminator (same initial weights)."""
    return copy.deepcopy(torch_models[1])


@pytest.fixture(scope="session")
def random_policy_inputs():
    """(cells int64, features float32, mask bool) of shape (5, 48[, ...]): random but valid (stay allowed)."""
    rng = np.random.default_rng(7)
    cells = rng.integers(0, N_CELLS, (5, 48)).astype(np.int64)
    features = rng.normal(size=(5, 48, 11)).astype(np.float32)
    mask = rng.random((5, 48, 4)) < 0.6
    mask[..., 0] = True
    return cells, features, mask


@pytest.fixture(scope="session")
def real_sample(geolife):
    """64 real days with homes, state features, masks, action labels and (state, action) pairs."""
    from pategail.sdk.features import action_mask, infer_home, label_actions, pair_features, state_features

    cells, days = geolife
    rng = np.random.default_rng(11)
    sample = days[rng.choice(len(days), 64, replace=False)]
    homes = np.array([infer_home(d[None]) for d in sample], dtype=np.int32)
    actions = label_actions(sample, homes)
    return {
        "cells": cells, "days": sample, "homes": homes,
        "features": state_features(sample, homes, cells), "mask": action_mask(sample, homes),
        "actions": actions, "pairs": pair_features(sample, homes, actions, cells).reshape(-1, 15),
    }
