"""Theorems 2-3 calibration and the reward aggregation, against hand-computed values."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.server.privacy.calibration import (aggregate_rewards, lambda_reward, lambdas_compensated,
                                                 sum_noise_scales)


def test_theorem_2_lambda():
    assert lambda_reward(0.5, 100) == pytest.approx(1 / 50)
    with pytest.raises(ValueError):
        lambda_reward(0.0, 10)


def test_theorem_3_lambdas():
    lam, lam_c = lambdas_compensated(epsilon=0.5, num_users=100, kappa=2.0)
    assert lam == pytest.approx(2 / 50)  # κ/(ε|U|)
    assert lam_c == pytest.approx(6 / 50)  # 3κ/(ε(κ-1)|U|)
    with pytest.raises(ValueError):
        lambdas_compensated(0.5, 100, 1.0)


def test_sum_scales_spend_exactly_epsilon_per_query():
    s = sum_noise_scales(epsilon=0.5, kappa=3.0)
    assert s.sum_scale == pytest.approx(6.0)  # λ|U| = κ/ε
    assert s.sq_sum_scale == pytest.approx(3.0)  # κ/(ε(κ-1))
    assert s.per_query_epsilon == pytest.approx(0.5)  # ε/κ + ε(κ-1)/κ
    lam, lam_c = lambdas_compensated(0.5, 1000, 3.0)
    assert s.sum_scale == pytest.approx(lam * 1000)
    assert s.sq_sum_scale == pytest.approx(lam_c * 1000 / 3)


def test_aggregate_rewards_by_hand():
    d = np.array([[0.2, 0.9], [0.4, 0.9], [0.6, 0.9]])  # 3 devices, 2 queries
    out = aggregate_rewards(d.sum(0), (d**2).sum(0), n=3, beta=2.0)
    np.testing.assert_allclose(out.mean, [0.4, 0.9])
    np.testing.assert_allclose(out.var, [0.08 / 3, 0.0], atol=1e-15)
    np.testing.assert_allclose(out.xi, np.sqrt([0.08 / 3, 0.0]), atol=1e-7)
    np.testing.assert_allclose(out.r_hat, [0.4 - 2.0 * 0.163299316, 0.9], atol=1e-7)  # sqrt(0.08/3) = 0.1633


def test_negative_and_impossible_noisy_variances_are_clamped():
    out = aggregate_rewards(np.array([3.0, 1.5, 6.0]), np.array([2.0, 5.0, -1.0]), n=4, beta=1.0)
    # means 0.75, 0.375, 1.5; raw variances 0.5 - 0.5625 < 0, 1.25 - 0.14 > 1/4, -0.25 - 2.25 < 0
    np.testing.assert_allclose(out.var, [0.0, 0.25, 0.0])
    np.testing.assert_allclose(out.xi, [0.0, 0.5, 0.0])
    assert np.all(np.isfinite(out.r_hat))
