"""rewards_from_release and ensemble_verdict on every branch, against values computed by hand: the Gaussian
mechanism's block means over the public count, the non-private per-pair sums averaged into blocks, the
tolerance experiment's added noise, β in R̂ = R − βξ, and the standardisation."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.server.checkpoint import Release
from pategail.server.config import TrainConfig
from pategail.server.rewards import ensemble_verdict, rewards_from_release


def standardised(x):
    x = np.asarray(x, dtype=np.float64)
    return (x - x.mean()) / (x.std() + 1e-8)


def per_decision(block_values, block, days):
    """Every decision of a day gets its block's value (blocks of ``block`` decisions, the last one shorter)."""
    per_day = np.asarray(block_values, dtype=np.float64).reshape(days, -1)
    return np.concatenate([[row[j // block] for j in range(47)] for row in per_day])


def test_gaussian_release_is_divided_by_the_public_count_not_the_survivors():
    # block:8 over 2 days: 6 blocks a day (the last of 7 decisions), 12 released centred sums over N = 4 devices
    sums = np.array([0.4, -0.8, 1.2, 0.0, -1.6, 2.0, 0.8, 0.4, -0.4, 1.6, -2.0, 0.2])
    release = Release(1, "rewards", sums, np.zeros(12), 3, 1.0, 0.0)   # 3 survivors: not the divisor
    config = TrainConfig(days_per_round=2, privacy={"mechanism": "gaussian", "granularity": "block:8"})
    rewards = rewards_from_release(release, config, public_count=4)
    means = sums / 4 + 0.5
    assert rewards.shape == (2, 47) and rewards.dtype == np.float32
    np.testing.assert_allclose(rewards.ravel(), standardised(per_decision(means, 8, 2)), rtol=1e-5, atol=1e-5)
    # the first block of day 1 covers decisions 0..7, the last one decisions 40..46
    assert rewards[0, 0] == rewards[0, 7] != rewards[0, 8] and rewards[1, 40] == rewards[1, 46]
    mean_reward, accuracy = ensemble_verdict(release, config, public_count=4)
    assert mean_reward == pytest.approx(np.mean(means))
    assert accuracy == pytest.approx(np.mean(means < 0.5)) == pytest.approx(4 / 12)
    for bad in (None, 0, -2):
        with pytest.raises(ValueError, match="^the Gaussian mechanism's release is divided by a fixed public "
                                             "count of devices$"):
            rewards_from_release(release, config, public_count=bad)
    # one public device is a count like any other: its centred sum plus ½
    alone = rewards_from_release(release, config, public_count=1)
    np.testing.assert_allclose(alone.ravel(), standardised(per_decision(sums + 0.5, 8, 2)), rtol=1e-5, atol=1e-5)


def test_gaussian_day_granularity_gives_every_decision_of_a_day_one_reward():
    sums = np.array([1.0, -1.0, 0.5])
    release = Release(2, "rewards", sums, np.zeros(3), 5, 1.0, 0.0)
    config = TrainConfig(days_per_round=3, privacy={"mechanism": "gaussian", "granularity": "day"})
    rewards = rewards_from_release(release, config, public_count=5)
    means = sums / 5 + 0.5                                      # 0.7, 0.3, 0.6
    np.testing.assert_allclose(rewards, standardised(np.repeat(means, 47)).reshape(3, 47), rtol=1e-5, atol=1e-5)
    assert np.all(rewards[0] > rewards[2]) and np.all(rewards[2] > rewards[1])


def test_non_private_coarse_granularity_averages_the_per_pair_means_into_blocks():
    days, n = 1, 4
    d_sum = np.arange(47, dtype=np.float64) / 47 * n          # per-pair mean D = j / 47
    release = Release(1, "rewards", d_sum, np.zeros(47), n, 0.0, 0.0)
    rewards = rewards_from_release(release, TrainConfig(days_per_round=days, privacy={"granularity": "block:10"}))
    block_means = [np.mean(np.arange(s, min(s + 10, 47)) / 47) for s in range(0, 47, 10)]
    assert len(block_means) == 5 and block_means[-1] == pytest.approx(43 / 47)
    np.testing.assert_allclose(rewards[0], standardised(per_decision(block_means, 10, 1)), rtol=1e-5, atol=1e-5)
    assert ensemble_verdict(release) == pytest.approx((np.mean(np.arange(47) / 47), 24 / 47))


def test_r_hat_uses_the_configured_beta():
    # 2 devices: pair j has D = (a_j, b_j); R = (a+b)/2, ξ = |a−b|/2, R̂ = R − β ξ with β = 0.3
    a = np.linspace(0.0, 1.0, 47)
    b = np.linspace(1.0, 0.2, 47)
    release = Release(1, "rewards", a + b, a ** 2 + b ** 2, 2, 0.0, 0.0)
    rewards = rewards_from_release(release, TrainConfig(days_per_round=1, privacy={"beta": 0.3}))
    r_hat = (a + b) / 2 - 0.3 * np.abs(a - b) / 2
    np.testing.assert_allclose(rewards[0], standardised(r_hat), rtol=1e-5, atol=1e-5)


def test_equal_rewards_standardise_to_zeros_not_nan():
    release = Release(1, "rewards", np.full(47, 1.2), np.full(47, 0.72), 2, 0.0, 0.0)
    rewards = rewards_from_release(release, TrainConfig(days_per_round=1, privacy={"beta": 0.5}))
    assert np.all(np.isfinite(rewards))
    np.testing.assert_allclose(rewards, np.zeros((1, 47)), atol=1e-6)


def test_a_release_of_the_wrong_length_is_refused():
    release = Release(1, "rewards", np.zeros(50), np.zeros(50), 2, 0.0, 0.0)
    with pytest.raises(ValueError, match="50 values"):
        rewards_from_release(release, TrainConfig(days_per_round=1, privacy={"granularity": "block:8"}))
    gaussian = TrainConfig(days_per_round=1, privacy={"mechanism": "gaussian", "granularity": "block:8"})
    with pytest.raises(ValueError, match="does not fit"):
        rewards_from_release(release, gaussian, public_count=3)
