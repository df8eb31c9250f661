"""A small private run with the Gaussian mechanism at day granularity, end to end — the devices check the
declared plan and keep their ledgers, the coordinator accounts exactly what was released, and PPO gets one
reward per generated day."""
from __future__ import annotations

import dataclasses
import glob
import math

import numpy as np
import pytest

from pategail.emulator import EmulatedFleet, choose_users
from pategail.server.errors import PategailError
from pategail.sdk.accounting import GaussianRelease, composed_epsilon, gaussian_sensitivity
from pategail.sdk.secagg.ledger import PrivacyLedger
from pategail.server import coordinator as coordinator_module
from pategail.server.checkpoint import read_journal
from pategail.server.config import TrainConfig, merge_settings
from pategail.server.coordinator import Coordinator, environment_length, run_plan
from pategail.server.ppo import PPOConfig
from pategail.server.privacy.summary import privacy_line
from pategail.server.privacy.gaussian import ENV_L2_BOUND
from pategail.training import write_initial_bundle

TINY = dict(rounds=2, days_per_round=6, discriminator={"steps": 2, "batch_size": 16}, environment={"candidates": 50}, policy={"d_model": 16, "n_layers": 1}, ppo=PPOConfig(n_epochs=2, batch_size=3))


def test_a_private_gaussian_run_at_day_granularity(dataset, tmp_path, monkeypatch):
    tiny = {**TINY, "ppo": PPOConfig(n_epochs=2, batch_size=3, signal_scaled_step=True)}
    config = TrainConfig(**tiny, privacy={"mechanism": "gaussian", "granularity": "day", "epsilon": 8.0}).for_devices(3)
    plan = run_plan(config, dataset.cells, tmp_path / "checkpoint")
    write_initial_bundle(config, dataset, 0, tmp_path / "bundle-initial",
                         privacy=plan.declare(config.secagg.min_survivors, config.secagg.colluders))
    fleet = EmulatedFleet(dataset, choose_users(dataset.users, 3, 0), tmp_path / "devices",
                          tmp_path / "bundle-initial", seed=0)
    coordinator = Coordinator(config, fleet, dataset.cells, tmp_path, seed=0)
    seen, scales = [], []
    real_ppo = coordinator_module.ppo_update
    monkeypatch.setattr(coordinator_module, "ppo_update",
                        lambda policy, opt, rollout, cfg, gen, *anchor, step_scale: seen.append(rollout.rewards)
                        or scales.append(step_scale) or real_ppo(policy, opt, rollout, cfg, gen, *anchor,
                                                                 step_scale=step_scale))
    coordinator.train()

    g = plan.gaussian
    shares = 3                                                     # n_min = ⌈0.8 · 3⌉, no colluders
    # the environment vector carries the region sums (3 per region) and the accountant counts them: its
    # discretisation term is that of the whole vector, its clip the bound with the region parts (√12)
    released = environment_length(dataset.cells, coordinator.geometry, config.privacy.region_cells)
    assert config.privacy.region_cells > 0 and released > environment_length(dataset.cells, coordinator.geometry)
    assert ENV_L2_BOUND == pytest.approx(math.sqrt(12))
    env = GaussianRelease(g["env_noise_std"], gaussian_sensitivity(ENV_L2_BOUND, released), 1, shares)
    rewards = GaussianRelease(g["noise_std"], gaussian_sensitivity(g["clip_norm"], 6), 2, shares)
    assert coordinator.accountant.releases == (env, rewards)
    epsilon = coordinator.accountant.epsilon()
    assert epsilon == pytest.approx(composed_epsilon([env, rewards], 1e-5), rel=1e-12) and epsilon <= 8.0
    # every device took part in every release and its own ledger says the same
    ledgers = sorted(glob.glob(str(tmp_path / "devices" / "*" / "privacy-ledger.json")))
    assert len(ledgers) == 3
    for path in ledgers:
        assert PrivacyLedger(path, 8.0).releases == (env, rewards)
    # one reward per generated day: all 47 decisions of a day share it
    assert len(seen) == 2 and all(np.ptp(r, axis=1).max() == 0 for r in seen)
    assert all(np.ptp(r[:, 0]) > 0 for r in seen)                  # but days differ
    # each round's step is scaled by the signal share of its released means: 1 − (σ / 3)² / their variance
    # (all 3 devices contributed, as many as the noise shares were sized for, so the noise is the plan's σ)
    journal = read_journal(tmp_path / "checkpoint")
    for round_, scale in zip((1, 2), scales):
        means = journal[round_].sum / 3
        expected = max(0.0, 1.0 - (g["noise_std"] / 3) ** 2 / np.var(means, ddof=1))
        assert scale == pytest.approx(expected, rel=1e-9, abs=1e-12) and 0.0 <= scale < 1.0
    # four times the contributors the shares were sized for carry twice the noise
    more = dataclasses.replace(journal[1], n_survivors=12)
    assert coordinator._reward_noise_std(more) == pytest.approx(2 * g["noise_std"], rel=1e-12)
    assert [h["ppo"]["signal_share"] for h in coordinator.history] == pytest.approx(scales)
    section = coordinator.summary().privacy
    assert section["mechanism"].startswith("distributed discrete Gaussian")
    assert section["reward_signal_share"] == pytest.approx(np.mean(scales))
    assert f"were {np.mean(scales):.0%} signal" in privacy_line(section)


def test_a_private_gaussian_run_with_the_action_prior(dataset, tmp_path):
    """``action_prior`` with the Gaussian mechanism: the bundle asks for the action-rate part, the devices clip
    their environment vectors at the larger L2 bound the plan made the release for, the coordinator decodes the
    rates, and the coordinator's accountant and every device's ledger count the same releases."""
    from pategail.sdk.bundle import load_bundle
    from pategail.server.privacy.gaussian import env_l2_bound

    config = TrainConfig(**merge_settings(TINY, {"rounds": 1, "privacy": {"mechanism": "gaussian", "granularity": "day",
                                                                           "epsilon": 8.0},
                                                "environment": {"action_prior": True, "action_prior_days": 24,
                                                                "action_prior_epochs": 2}})).for_devices(3)
    plan = run_plan(config, dataset.cells, tmp_path / "checkpoint")
    write_initial_bundle(config, dataset, 0, tmp_path / "bundle-initial",
                         privacy=plan.declare(config.secagg.min_survivors, config.secagg.colluders))
    assert load_bundle(tmp_path / "bundle-initial").environment.action_rates
    fleet = EmulatedFleet(dataset, choose_users(dataset.users, 3, 0), tmp_path / "devices",
                          tmp_path / "bundle-initial", seed=0)
    coordinator = Coordinator(config, fleet, dataset.cells, tmp_path, seed=0)
    coordinator.train()
    g, bound = plan.gaussian, env_l2_bound(True)
    released = environment_length(dataset.cells, coordinator.geometry, config.privacy.region_cells, True)
    assert released == environment_length(dataset.cells, coordinator.geometry, config.privacy.region_cells) + 320
    assert g["env_clip_norm"] == bound > ENV_L2_BOUND
    env = GaussianRelease(g["env_noise_std"], gaussian_sensitivity(bound, released), 1, 3)
    rewards = GaussianRelease(g["noise_std"], gaussian_sensitivity(g["clip_norm"], 6), 1, 3)
    assert coordinator.accountant.releases == (env, rewards)
    assert env.noise_std / env.sensitivity == pytest.approx(g["env_noise_multiplier"], rel=1e-12)
    assert coordinator.accountant.epsilon() <= 8.0
    for path in sorted(glob.glob(str(tmp_path / "devices" / "*" / "privacy-ledger.json"))):
        assert PrivacyLedger(path, 8.0).releases == (env, rewards)
    assert coordinator.initial_states.action_rates is not None


def test_a_coarse_granularity_needs_the_gaussian_mechanism_under_privacy():
    with pytest.raises(PategailError, match="gaussian"):
        TrainConfig(privacy={"mechanism": "laplace", "granularity": "day", "epsilon": 4.0})
    with pytest.raises(PategailError, match="granularity"):
        TrainConfig(privacy={"granularity": "block:0"})
