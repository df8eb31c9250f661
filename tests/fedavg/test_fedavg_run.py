"""DP-FedAvg end to end: a private run over SDK devices (real secure aggregation, the devices' ledgers), the
released update's noise against the plan, the server step, and the population fleet against SDK devices."""
from __future__ import annotations

import glob

import numpy as np
import pytest
import torch

from pategail.emulator import EmulatedFleet, choose_users
from pategail.population.fleet import PopulationFleet
from pategail.population.resample import resample_population
from pategail.sdk.accounting import GaussianRelease, composed_epsilon, gaussian_sensitivity
from pategail.sdk.secagg.ledger import PrivacyLedger
from pategail.server.coordinator import environment_length, run_plan
from pategail.server.fedavg.config import FedAvgConfig
from pategail.server.fedavg.coordinator import FedAvgCoordinator, delta_length
from pategail.server.privacy.gaussian import ENV_L2_BOUND
from pategail.training import write_initial_bundle


def _run(config, dataset, fleet_of, root, seed=0, kind=FedAvgCoordinator):
    """A DP-FedAvg coordinator (of class ``kind``) over ``fleet_of(bundle)`` after its rounds (the initial bundle
    declares the plan)."""
    torch.set_num_threads(1)
    config = config.for_devices(fleet_of.devices)
    plan = run_plan(config, dataset.cells, root / "checkpoint")
    bundle = write_initial_bundle(config, dataset, seed, root / "bundle-initial",
                                  privacy=plan.declare(config.secagg.min_survivors, config.secagg.colluders))
    coordinator = kind(config, fleet_of(bundle), dataset.cells, root, seed=seed)
    coordinator.train()
    return coordinator


def test_a_private_run_over_sdk_devices(dataset, tiny, tmp_path):
    users = choose_users(dataset.users, 3, 0)
    fleet_of = lambda bundle: EmulatedFleet(dataset, users, tmp_path / "devices", bundle, seed=0)  # noqa: E731
    fleet_of.devices = 3
    before = []

    class Watch(FedAvgCoordinator):
        def apply_delta(self, mean_delta):
            before.append((self.global_parameters().astype(np.float64), mean_delta))
            super().apply_delta(mean_delta)

    fedavg = FedAvgConfig(server_optimizer="fedavg", server_lr=1.0)             # the plain average's step
    coordinator = _run(tiny(privacy={"epsilon": 8.0}, fedavg=fedavg), dataset, fleet_of, tmp_path, kind=Watch)
    plan, g = coordinator.plan, coordinator.plan.gaussian
    values = delta_length(coordinator.policy)
    assert plan.granularity == "model-delta" and plan.reward_values == values
    assert g["clip_norm"] == pytest.approx(1.0, rel=1e-12)                 # deltas travel over their clip norm
    # one Gaussian release per round of sensitivity the clip norm (plus the fixed-point term), and the
    # environment release before them; the accountant and every device's own ledger record exactly these
    env_values = environment_length(dataset.cells, coordinator.geometry, coordinator.config.privacy.region_cells)
    env = GaussianRelease(g["env_noise_std"], gaussian_sensitivity(ENV_L2_BOUND, env_values), 1, 3)
    deltas = GaussianRelease(g["noise_std"], gaussian_sensitivity(g["clip_norm"], values), 2, 3)
    assert coordinator.accountant.releases == (env, deltas)
    epsilon = coordinator.accountant.epsilon()
    assert epsilon == pytest.approx(composed_epsilon([env, deltas], 1e-5), rel=1e-12) and epsilon <= 8.0
    ledgers = sorted(glob.glob(str(tmp_path / "devices" / "*" / "privacy-ledger.json")))
    assert len(ledgers) == 3 and all(PrivacyLedger(p, 8.0).releases == (env, deltas) for p in ledgers)
    # the server step (FedAvg, server_lr 1) adds clip_norm × the released sum / the 3 devices to θ
    journal = coordinator.releases.journal()
    assert len(before) == 2
    for r, (theta, mean_delta) in enumerate(before, start=1):
        assert np.allclose(mean_delta, journal[r].sum * 0.5 / 3, rtol=0, atol=1e-12)
    assert np.abs(coordinator.global_parameters() - (before[1][0] + before[1][1])).max() < 1e-5
    history = coordinator.history
    assert [h["survivors"] for h in history] == [3, 3]
    assert history[0]["ppo"]["noise_std_on_mean_delta"] == pytest.approx(g["noise_std"] * 0.5 / 3)


@pytest.fixture(scope="module")
def population(dataset):
    return resample_population(dataset.users, 20, seed=0)


def _population_fleet(dataset, population, root):
    fleet_of = lambda bundle: PopulationFleet(dataset, population, bundle, seed=0)  # noqa: E731
    fleet_of.devices = len(population)
    return fleet_of


def test_the_released_update_carries_the_planned_noise(dataset, tiny, population, tmp_path):
    quiet = _run(tiny(rounds=1, privacy={"mechanism": "gaussian"}), dataset, _population_fleet(dataset, population, tmp_path),
                 tmp_path / "quiet")
    noisy = _run(tiny(rounds=1, privacy={"epsilon": 8.0}), dataset, _population_fleet(dataset, population, tmp_path),
                 tmp_path / "noisy")
    # same seed, same environment for the devices' days: the noiseless sum of the private run's uploads is the
    # quiet run's; what is left is the noise the secure aggregation added (20 devices' discrete-Gaussian shares)
    noise = noisy.releases.journal()[1].sum - quiet.releases.journal()[1].sum
    planned = noisy.plan.gaussian["noise_std"]
    assert len(noise) == delta_length(noisy.policy) > 10_000
    assert abs(noise.mean()) < 5 * planned / np.sqrt(len(noise))
    # each of the 20 contributors adds a share sized for n_min = ⌈0.8 · 20⌉ = 16 honest survivors (so that 16 alone
    # reach the plan's σ): with all 20 in the sum its std is σ·√(20/16)
    assert noise.std() == pytest.approx(planned * np.sqrt(20 / 16), rel=0.03)
    signal = quiet.releases.journal()[1].sum
    assert 1 < np.linalg.norm(signal) <= 20                      # 20 uploads of norm ≤ 1 (not nothing)


def test_the_population_fleet_computes_what_sdk_devices_compute(dataset, tiny, population, tmp_path):
    config = tiny()
    sdk_of = lambda bundle: EmulatedFleet(dataset, population.users, tmp_path / "devices", bundle,  # noqa: E731
                                          seed=0, population=population)
    sdk_of.devices = len(population)
    sdk = _run(config, dataset, sdk_of, tmp_path / "sdk")
    pop = _run(config, dataset, _population_fleet(dataset, population, tmp_path), tmp_path / "pop")
    a, b = sdk.releases.journal(), pop.releases.journal()
    assert sorted(a) == sorted(b) == [0, 1, 2]
    for r in (1, 2):
        assert a[r].n_survivors == b[r].n_survivors == 20
        assert np.abs(a[r].sum - b[r].sum).max() < 1e-4, r
    assert np.abs(a[2].sum - a[1].sum).max() > 1e-2                  # the rounds moved the policy
    assert np.abs(sdk.global_parameters() - pop.global_parameters()).max() < 1e-5


def test_a_private_hybrid_run_spends_one_plan_on_both_kinds_of_release(dataset, tiny, tmp_path):
    from pategail.server.fedavg.hybrid import HybridCoordinator
    from pategail.server.ppo import PPOConfig

    users = choose_users(dataset.users, 3, 0)
    fleet_of = lambda bundle: EmulatedFleet(dataset, users, tmp_path / "devices", bundle, seed=0)  # noqa: E731
    fleet_of.devices = 3
    from pategail.server.fedavg.config import FedAvgConfig
    config = tiny(method="hybrid", rounds=3, privacy={"epsilon": 8.0}, discriminator={"steps": 2, "batch_size": 16}, ppo=PPOConfig(n_epochs=2, batch_size=3), fedavg=FedAvgConfig(batch_size=16, client_lr=0.1, clip_norm=0.5, hybrid_rounds=1))
    coordinator = _run(config, dataset, fleet_of, tmp_path, kind=HybridCoordinator)
    journal = coordinator.releases.journal()
    assert [journal[r].kind for r in (1, 2, 3)] == ["delta", "rewards", "rewards"]
    g = coordinator.plan.gaussian
    values = delta_length(coordinator.policy)
    env_values = environment_length(dataset.cells, coordinator.geometry, coordinator.config.privacy.region_cells)
    env = GaussianRelease(g["env_noise_std"], gaussian_sensitivity(ENV_L2_BOUND, env_values), 1, 3)
    delta = GaussianRelease(g["noise_multiplier"] * gaussian_sensitivity(1.0, values),
                            gaussian_sensitivity(1.0, values), 1, 3)
    rewards = GaussianRelease(g["noise_std"], gaussian_sensitivity(g["clip_norm"], 6), 2, 3)
    assert coordinator.accountant.releases == (env, delta, rewards)
    # a delta release costs what a reward release costs: with the retry reserve (one more release of either
    # kind) the run composes to the plan's ε, within the target
    assert delta.noise_multiplier == pytest.approx(rewards.noise_multiplier, rel=1e-12)
    epsilon = coordinator.accountant.epsilon()
    assert epsilon == pytest.approx(composed_epsilon([env, delta, rewards], 1e-5), rel=1e-12)
    reserve = GaussianRelease(rewards.noise_std, rewards.sensitivity, 3, 3)
    assert composed_epsilon([env, delta, reserve], 1e-5) == pytest.approx(coordinator.plan.expected_epsilon,
                                                                          rel=1e-3)
    assert epsilon < coordinator.plan.expected_epsilon <= 8.0
    ledgers = sorted(glob.glob(str(tmp_path / "devices" / "*" / "privacy-ledger.json")))
    assert len(ledgers) == 3 and all(PrivacyLedger(p, 8.0).releases == (env, delta, rewards) for p in ledgers)
    assert "mean_delta_norm" in coordinator.history[0]["ppo"]
    assert "approx_kl" in coordinator.history[2]["ppo"]
    # the log's line and the report say which of the planned releases are model deltas
    from pategail.server.privacy.summary import plan_line, privacy_section
    assert "the hybrid's first 1 of these releases are DP-FedAvg's model deltas" in plan_line(
        coordinator.plan, 3, config.privacy.beta, coordinator.config)
    section = privacy_section(coordinator.plan, coordinator.accountant, 3, config.privacy.beta, 3, coordinator.config)
    assert section["model_delta_releases"]["planned"] == 1
    assert "model_delta_releases" not in privacy_section(coordinator.plan, coordinator.accountant, 3,
                                                         config.privacy.beta, 3, tiny(privacy={"epsilon": 8.0}))


@pytest.mark.parametrize("method", ["dp-fedavg", "hybrid"])
def test_a_killed_and_resumed_run_ends_like_an_uninterrupted_one(dataset, tiny, tmp_path, method):
    from pategail.server.fedavg.config import FedAvgConfig
    from pategail.server.fedavg.coordinator import coordinator_class
    from pategail.server.ppo import PPOConfig

    # FedAdam: the server optimiser's moments must survive the checkpoint too (the hybrid: and PPO's Adam)
    config = tiny(method=method, rounds=3, discriminator={"steps": 2, "batch_size": 16}, ppo=PPOConfig(n_epochs=2, batch_size=3), fedavg=FedAvgConfig(batch_size=16, client_lr=0.1, clip_norm=0.5, server_optimizer="fedadam",
                                      server_lr=0.01, hybrid_rounds=2)).for_devices(3)
    users = choose_users(dataset.users, 3, 0)
    bundle = write_initial_bundle(config, dataset, 0, tmp_path / "bundle")

    def coordinator(root):
        fleet = EmulatedFleet(dataset, users, root / "devices", bundle, seed=0)
        return coordinator_class(config)(config, fleet, dataset.cells, root, seed=0)

    whole = coordinator(tmp_path / "whole")
    whole.train()

    def crash(stats):
        if stats.round == 2:                       # the hybrid: after its last DP-FedAvg round
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        coordinator(tmp_path / "killed").train(on_round=crash)
    resumed = coordinator(tmp_path / "killed")
    assert resumed.resume() and resumed.round == 2
    resumed.train()
    assert resumed.round == 3
    assert np.array_equal(resumed.global_parameters(), whole.global_parameters())
    assert np.abs(whole.global_parameters() - coordinator(tmp_path / "fresh").global_parameters()).max() > 1e-3
