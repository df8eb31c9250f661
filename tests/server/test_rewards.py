"""rewards_from_release: a released aggregate to PPO's rewards, by hand."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.server.checkpoint import Release
from pategail.server.config import TrainConfig
from pategail.server.rewards import ensemble_verdict, reward_signal_share, rewards_from_release


def test_rewards_from_release_by_hand():
    # 2 devices, 1 day of 47 decisions: D = 0.2 and 0.6 on every pair except the first (0.9 and 0.9)
    d = np.array([[0.2] * 47, [0.6] * 47])
    d[:, 0] = 0.9
    release = Release(1, "rewards", d.sum(0), (d ** 2).sum(0), 2, 0.0, 0.0)
    config = TrainConfig(days_per_round=1, privacy={"beta": 1.0})
    rewards = rewards_from_release(release, config)
    # R = 0.4, ξ = 0.2 → R̂ = 0.2 on 46 pairs; R = 0.9, ξ = 0 → R̂ = 0.9 on the first
    r_hat = np.full(47, 0.2)
    r_hat[0] = 0.9
    expected = (r_hat - r_hat.mean()) / (r_hat.std() + 1e-8)
    assert rewards.shape == (1, 47) and rewards.dtype == np.float32
    np.testing.assert_allclose(rewards[0], expected, rtol=1e-5, atol=1e-5)
    mean_reward, accuracy = ensemble_verdict(release)
    assert mean_reward == pytest.approx((0.9 + 46 * 0.4) / 47) and accuracy == pytest.approx(46 / 47)


def _gaussian_release(signal_std: float, noise_std: float, devices: int, days: int, seed: int = 0) -> Release:
    """A day-granularity Gaussian release: Σ over ``devices`` of centred day means whose population mean has
    spread ``signal_std`` over the days, plus N(0, noise_std²) on each sum."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(0.0, signal_std, days)
    total = devices * mean + rng.normal(0.0, noise_std, days)
    return Release(1, "rewards", total, np.zeros(days), devices, noise_std, 0.0)


def test_reward_signal_share_is_signal_over_observed_variance():
    config = TrainConfig(privacy={"mechanism": "gaussian", "granularity": "day"})
    # per released mean: signal std 0.03, noise std 30 / 1000 = 0.03 -> share 1/2; 0.01 noise -> 0.9
    half = [reward_signal_share(_gaussian_release(0.03, 30.0, 1000, 20000, s), config, 1000, 30.0)
            for s in range(3)]
    assert np.allclose(half, 0.5, atol=0.03)
    tenth = reward_signal_share(_gaussian_release(0.03, 10.0, 1000, 20000), config, 1000, 10.0)
    assert tenth == pytest.approx(0.9, abs=0.01)
    # pure noise: the estimate is clipped at 0, never negative; no noise: 1
    pure = [reward_signal_share(_gaussian_release(0.0, 30.0, 1000, 20000, s), config, 1000, 30.0) for s in range(4)]
    assert min(pure) == 0.0 and max(pure) < 0.03
    assert reward_signal_share(_gaussian_release(0.03, 0.0, 1000, 96), config, 1000, 0.0) == 1.0
    with pytest.raises(ValueError, match="public count"):
        reward_signal_share(_gaussian_release(0.03, 300.0, 1000, 96), config, None, 300.0)
