"""Accounting, calibration and planning with UNEQUAL noise scales on Σ D and Σ D² (κ ≠ 2), against
dp-accounting called directly, an independent numerical integration and hand-worked values."""
from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from pategail.server.privacy.accountant import (PrivacyAccountant, QueryRelease, composed_delta, composed_epsilon,
                                                to_dp_event)
from pategail.server.privacy.calibration import (MAX_VARIANCE, aggregate_rewards, lambda_reward, lambdas_compensated,
                                                 sum_noise_scales)
from pategail.server.privacy.plan import PLAN_INTERVAL, plan_privacy


def direct(scales_and_counts, interval=1e-4):
    """dp-accounting's PLD accountant fed by hand: one Laplace event per (scale, count)."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    for scale, count in scales_and_counts:
        acc.compose(dp_event.LaplaceDpEvent(scale), count)
    return acc


def laplace_loss_pmf(b, k=4000):
    """Privacy-loss distribution of one Laplace(b) release of a sensitivity-1 sum, worked by hand:
    L(x) = (|x - 1| - |x|) / b is 1/b for x <= 0 (mass 1/2), -1/b for x >= 1 (mass e^(-1/b)/2) and
    (1 - 2x)/b in between, integrated there by the midpoint rule on k cells."""
    mid = (np.arange(k) + 0.5) / k
    vals = np.concatenate([[1 / b, -1 / b], (1 - 2 * mid) / b])
    mass = np.concatenate([[0.5, math.exp(-1 / b) / 2], np.exp(-mid / b) / (2 * b) / k])
    assert mass.sum() == pytest.approx(1.0, abs=1e-6)
    return vals, mass


def test_one_query_with_unequal_scales_matches_numerical_integration():
    """Σ D at b = 1.5 and Σ D² at b_sq = 0.5 (κ = 4/3): δ(ε) = E[(1 - e^(ε - L1 - L2))+]."""
    b, b_sq = 1.5, 0.5
    v1, m1 = laplace_loss_pmf(b)
    v2, m2 = laplace_loss_pmf(b_sq)
    total = v1[:, None] + v2[None, :]
    joint = m1[:, None] * m2[None, :]
    acc = PrivacyAccountant(value_discretization_interval=1e-4)
    acc.record(b, b_sq, count=1)
    for eps in (0.5, 1.5, 2.4):
        by_hand = float(np.sum(joint * np.clip(1 - np.exp(eps - total), 0, None)))
        assert acc.delta(eps) == pytest.approx(by_hand, abs=5e-4)
    # beyond the pure ε 1/b + 1/b_sq = 2.667 nothing is left
    assert acc.delta(1 / b + 1 / b_sq + 1e-3) == pytest.approx(0.0, abs=1e-9)
    assert acc.max_per_query_epsilon() == pytest.approx(1 / b + 1 / b_sq)


def test_unequal_scales_match_dp_accounting_directly():
    acc = PrivacyAccountant(target_delta=1e-6)
    acc.record(40.0, 10.0, count=300)
    acc.record(80.0, 20.0, count=100)
    expected = direct([(40.0, 300), (10.0, 300), (80.0, 100), (20.0, 100)])
    assert acc.epsilon() == pytest.approx(expected.get_epsilon(1e-6), rel=1e-9)
    assert acc.epsilon(1e-3) == pytest.approx(expected.get_epsilon(1e-3), rel=1e-9)
    assert acc.delta(1.0) == pytest.approx(expected.get_delta(1.0), rel=1e-9)
    # each sum at its own scale: accounting Σ D² at the Σ D scale (or dropping it) is far off
    wrong = direct([(40.0, 300), (40.0, 300), (80.0, 100), (80.0, 100)]).get_epsilon(1e-6)
    dropped = direct([(40.0, 300), (80.0, 100)]).get_epsilon(1e-6)
    assert acc.epsilon() > 1.5 * max(wrong, dropped)
    assert acc.num_queries == 400
    assert acc.basic_epsilon() == pytest.approx(300 * (1 / 40 + 1 / 10) + 100 * (1 / 80 + 1 / 20))
    assert acc.max_per_query_epsilon() == pytest.approx(1 / 40 + 1 / 10)


def test_pure_functions_agree_with_dp_accounting():
    releases = [QueryRelease(5.0, 2.0, 7), QueryRelease(3.0, None, 4)]
    expected = direct([(5.0, 7), (2.0, 7), (3.0, 4)])
    assert composed_epsilon(releases, 1e-5) == pytest.approx(expected.get_epsilon(1e-5), rel=1e-9)
    assert composed_delta(releases, 2.0) == pytest.approx(expected.get_delta(2.0), rel=1e-9)
    assert composed_epsilon([], 1e-5) == 0.0 and composed_delta([], 1.0) == 0.0
    # the finer grid gives a (slightly) smaller, never larger, pessimistic estimate
    coarse = composed_epsilon(releases, 1e-5, interval=1e-2)
    assert composed_epsilon(releases, 1e-5) <= coarse < 1.2 * composed_epsilon(releases, 1e-5)
    event = to_dp_event(releases)
    assert event == dp_event.ComposedDpEvent([
        dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(5.0), 7),
        dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(2.0), 7),
        dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(3.0), 4)])


def test_releases_without_a_square_sum_and_their_per_query_epsilon():
    r = QueryRelease(4.0, None, 3)
    assert r.per_query_epsilon == 0.25
    assert QueryRelease(4.0, 2.0, 1).per_query_epsilon == 0.75
    acc = PrivacyAccountant(value_discretization_interval=1e-4)
    acc.record(1.0, None, 1)
    # one Laplace(1): δ(ε) = 1 - exp((ε - 1)/2) (see test_privacy_accountant)
    assert acc.delta(0.5) == pytest.approx(1 - math.exp(-0.25), abs=1e-4)
    for bad in [(0.0, None, 1), (-1.0, 1.0, 1), (1.0, 0.0, 1), (1.0, -2.0, 1), (1.0, 1.0, 0)]:
        with pytest.raises(ValueError):
            QueryRelease(*bad)


def test_record_merges_only_identical_consecutive_scales():
    acc = PrivacyAccountant()
    acc.record(2.0, 1.0, 3)
    acc.record(2.0, 1.0, 4)
    acc.record(2.0, 0.5, 1)
    acc.record(2.0, None, 2)
    acc.record(2.0, 1.0, 5)
    assert acc.releases == (QueryRelease(2.0, 1.0, 7), QueryRelease(2.0, 0.5, 1), QueryRelease(2.0, None, 2),
                            QueryRelease(2.0, 1.0, 5))
    assert acc.num_queries == 15
    assert acc.max_per_query_epsilon() == pytest.approx(0.5 + 2.0)
    assert acc.basic_epsilon() == pytest.approx(7 * 1.5 + 1 * 2.5 + 2 * 0.5 + 5 * 1.5)
    assert PrivacyAccountant().epsilon() == 0.0 and PrivacyAccountant().max_per_query_epsilon() == 0.0


def test_accountant_keeps_unequal_scales():
    # (the accountant is not persisted: a run's accountant is rebuilt from the release journal)
    acc = PrivacyAccountant(target_delta=1e-7, value_discretization_interval=1e-3)
    acc.record(30.0, 7.5, 11)
    acc.record(15.0, None, 2)
    assert acc.releases == (QueryRelease(30.0, 7.5, 11), QueryRelease(15.0, None, 2))
    back = acc
    assert back.releases == acc.releases and back.value_discretization_interval == 1e-3
    assert back.epsilon() == pytest.approx(direct([(30.0, 11), (7.5, 11), (15.0, 2)], 1e-3).get_epsilon(1e-7),
                                           rel=1e-9)
    for bad in (0.0, 1.0, -1e-5):
        with pytest.raises(ValueError):
            PrivacyAccountant(target_delta=bad)


# -- calibration ----------------------------------------------------------------------------------------------
def test_sum_scales_for_kappa_4():
    s = sum_noise_scales(epsilon=0.2, kappa=4.0)
    assert s.sum_scale == pytest.approx(20.0)                  # κ/ε
    assert s.sq_sum_scale == pytest.approx(4 / (0.2 * 3))      # κ/(ε(κ-1))
    assert s.per_query_epsilon == pytest.approx(0.2)           # 0.05 + 0.15
    lam, lam_c = lambdas_compensated(0.2, 10, 4.0)
    assert (lam, lam_c) == (pytest.approx(2.0), pytest.approx(12 / 6))
    assert lambda_reward(2.0, 4) == pytest.approx(0.125)
    for bad in [(0.0, 3), (-1.0, 3), (math.inf, 3), (math.nan, 3), (1.0, 0)]:
        with pytest.raises(ValueError):
            lambda_reward(*bad)
    with pytest.raises(ValueError):
        lambdas_compensated(1.0, 3, 0.5)
    lambdas_compensated(1.0, 1, 1.0 + 1e-9)                    # any κ > 1, any |U| >= 1


def test_aggregate_rewards_by_hand_values():
    # sums over n = 4 survivors: mean = [0.5, 0.25], mean of squares = [0.35, 0.0625 + 0.04]
    out = aggregate_rewards(np.array([2.0, 1.0]), np.array([1.4, 0.41]), n=4, beta=0.5)
    np.testing.assert_allclose(out.mean, [0.5, 0.25])
    np.testing.assert_allclose(out.var, [0.1, 0.04])
    np.testing.assert_allclose(out.xi, [math.sqrt(0.1), 0.2])
    np.testing.assert_allclose(out.r_hat, [0.5 - 0.5 * math.sqrt(0.1), 0.25 - 0.1])
    # beta 0: R̂ = R; the clamp's upper end is Popoviciu's 1/4
    np.testing.assert_allclose(aggregate_rewards(np.array([2.0]), np.array([1.4]), 4, 0.0).r_hat, [0.5])
    assert MAX_VARIANCE == 0.25
    # one survivor is enough; the mean is over the n given (the survivors), not any other count
    one = aggregate_rewards(np.array([0.8]), np.array([0.64]), n=1, beta=1.0)
    np.testing.assert_allclose([one.mean[0], one.var[0], one.r_hat[0]], [0.8, 0.0, 0.8], atol=1e-12)
    np.testing.assert_allclose(aggregate_rewards(np.array([3.0]), np.array([3.0]), 3, 1.0).mean, [1.0])
    with pytest.raises(ValueError):
        aggregate_rewards(np.array([1.0]), np.array([1.0]), 0, 1.0)
    with pytest.raises(ValueError):
        aggregate_rewards(np.array([1.0]), np.array([1.0]), 1, -0.1)


# -- planning (the immutable PrivacyPlan, calibrated by dp-accounting) -----
def test_planned_epsilon_composes_both_sums_at_their_own_scales():
    kappa, q = 4.0, 500
    plan = plan_privacy(3.0, 1e-5, kappa, q)
    assert plan.sq_sum_noise_scale == pytest.approx(plan.sum_noise_scale / (kappa - 1))
    expected = direct([(plan.sum_noise_scale, q), (plan.sq_sum_noise_scale, q)],
                      interval=PLAN_INTERVAL).get_epsilon(1e-5)
    assert plan.expected_epsilon == pytest.approx(expected, rel=1e-9)


def _planned_epsilon(plan, factor, queries, delta):
    """The composed ε of the plan's releases with ``factor`` times less noise, on the planning grid."""
    return composed_epsilon([QueryRelease(plan.sum_noise_scale / factor, plan.sq_sum_noise_scale / factor,
                                          queries)], delta, PLAN_INTERVAL)


@pytest.mark.parametrize("target, delta, queries, kappa", [(1.0, 1e-5, 2000, 2.0), (3.0, 1e-6, 300, 4.0)])
def test_calibration_finds_the_largest_per_query_epsilon(target, delta, queries, kappa):
    plan = plan_privacy(target, delta, kappa, queries)
    assert _planned_epsilon(plan, 1.0, queries, delta) <= target
    assert _planned_epsilon(plan, 1.02, queries, delta) > target      # to ~1%: not wastefully small
    # and the run's accountant (finer grid) agrees that the whole run stays within the target
    assert composed_epsilon([QueryRelease(plan.sum_noise_scale, plan.sq_sum_noise_scale, queries)], delta) <= target


def test_calibration_brackets_from_far_away_and_rejects_bad_targets():
    # a huge target for one query: the bracket must grow many times (calibrated on a 1e-3 grid, 4x faster than
    # the planning grid's: the bracketing is the same, and a coarser grid's plan only carries more noise)
    plan = plan_privacy(20.0, 1e-5, 2.0, 1, interval=1e-3)
    assert _planned_epsilon(plan, 1.0, 1, 1e-5) <= 20.0 < _planned_epsilon(plan, 1.02, 1, 1e-5)
    for eps, delta, queries in [(0.0, 1e-5, 10), (1.0, 0.0, 10), (1.0, 1.0, 10), (1.0, 1e-5, 0)]:
        with pytest.raises(ValueError):
            plan_privacy(eps, delta, 2.0, queries)
