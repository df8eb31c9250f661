"""The accountant against dp-accounting and against cases worked by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from pategail.server.privacy.accountant import PrivacyAccountant, QueryRelease, composed_epsilon
from pategail.server.privacy.calibration import sum_noise_scales


def test_single_laplace_release_matches_the_closed_form():
    """One Laplace(b) release of a sensitivity-1 sum: δ(ε) = 1 - exp((ε - 1/b)/2) for ε < 1/b (hand-derived:
    the privacy loss is 1/b with probability 1/2, and linear in x in between)."""
    acc = PrivacyAccountant(value_discretization_interval=1e-5)
    acc.record(sum_scale=1.0, sq_sum_scale=None, count=1)
    for eps in (0.0, 0.25, 0.5, 0.9):
        assert acc.delta(eps) == pytest.approx(1 - math.exp((eps - 1.0) / 2), abs=1e-4)
    assert acc.delta(1.0 + 1e-3) == pytest.approx(0.0, abs=1e-9)
    assert acc.max_per_query_epsilon() == 1.0


def test_two_releases_match_an_independent_numerical_integration():
    """Σ D at b = 2 and Σ D² at b_sq = 1: δ(ε) = E[(1 - e^(ε - L))+] for L the sum of the two independent
    privacy losses, L_i = (|x - 1| - |x|)/b_i with x ~ Laplace(0, b_i), integrated here on a fine grid."""
    eps = 0.9

    def loss_pmf(b):
        x = np.linspace(-30 * b, 30 * b, 300_001)
        pdf = np.exp(-np.abs(x) / b) / (2 * b) * (x[1] - x[0])
        vals, inv = np.unique(np.round((np.abs(x - 1) - np.abs(x)) / b, 3), return_inverse=True)
        return vals, np.bincount(inv, weights=pdf)

    (v1, m1), (v2, m2) = loss_pmf(2.0), loss_pmf(1.0)
    joint = m1[:, None] * m2[None, :]
    by_hand = float(np.sum(joint * np.clip(1 - np.exp(eps - (v1[:, None] + v2[None, :])), 0, None)))
    acc = PrivacyAccountant(value_discretization_interval=1e-4)
    acc.record(2.0, 1.0, count=1)  # one query = two releases at their own scales
    assert acc.delta(eps) == pytest.approx(by_hand, abs=1e-3)
    # accounting both at the Σ D scale would understate δ by far more than the tolerance
    same = PrivacyAccountant(value_discretization_interval=1e-4)
    same.record(2.0, 2.0, count=1)
    assert same.delta(eps) < by_hand - 0.05


def test_run_matches_dp_accounting_directly_and_beats_basic_composition():
    scales = sum_noise_scales(epsilon=1e-3, kappa=3.0)   # unequal scales: b = 3/ε, b_sq = 1.5/ε
    acc = PrivacyAccountant(target_delta=1e-5)
    for _ in range(3):
        acc.record(scales.sum_scale, scales.sq_sum_scale, count=4096)
    assert acc.num_queries == 3 * 4096 and len(acc.releases) == 1  # identical rounds merge
    direct = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    direct.compose(dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(scales.sum_scale), 3 * 4096))
    direct.compose(dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(scales.sq_sum_scale), 3 * 4096))
    assert acc.epsilon() == pytest.approx(direct.get_epsilon(1e-5), rel=1e-9)
    assert acc.max_per_query_epsilon() == pytest.approx(1e-3)
    assert acc.basic_epsilon() == pytest.approx(3 * 4096 * 1e-3)
    assert acc.epsilon() < acc.basic_epsilon() / 5


def test_figures_of_the_design_notes():
    """The paper's scale: M = 4096, T = 200, 2 values per query, δ = 1e-5, per-release ε 2.1e-4 -> total ε ≈ 1."""
    b = 1 / 2.1e-4
    eps = composed_epsilon([QueryRelease(b, b, 4096 * 200)], 1e-5)
    assert eps == pytest.approx(1.0, abs=0.05)
    direct = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    direct.compose(dp_event.LaplaceDpEvent(b), 2 * 4096 * 200)    # the notes' 2 values a query, same scale
    assert eps == pytest.approx(direct.get_epsilon(1e-5), rel=1e-6)


def test_rejects_noiseless_releases():
    with pytest.raises(ValueError):
        PrivacyAccountant().record(0.0, 1.0, count=1)
