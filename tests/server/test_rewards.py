"""rewards_from_release: a released aggregate to PPO's rewards, by hand."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.server.checkpoint import Release
from pategail.server.config import TrainConfig
from pategail.server.rewards import ensemble_verdict, rewards_from_release


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
