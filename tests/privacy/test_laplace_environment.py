"""The Laplace mechanism's environment release is ONE Laplace vector query of its L1
sensitivity with its own share of ε — its sensitivity, scale and accounting pinned against hand-computed
closed forms, the joint composition against the target, and what a device checks and records for it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pategail.sdk.accounting import (QueryRelease, composed_epsilon, laplace_vector_release,
                                     laplace_vector_sensitivity)
from pategail.sdk.contribution import ENV_L1_BOUND
from pategail.sdk.secagg.config import RoundConfig
from pategail.sdk.secagg.errors import RoundRefused
from pategail.sdk.secagg.ledger import round_release
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.server.privacy.plan import PLAN_INTERVAL, PrivacyPlan, plan_privacy

VALUES = 12_657                       # pategail-geolife's environment vector (4,210 cells, the Laplace layout)


def test_sensitivity_and_release_by_hand():
    # x (L1 ≤ 9) and x² (L1 ≤ 9 for entries in [0, 1]); each of the 2·values entries rounds by ≤ ½ quantum
    assert laplace_vector_sensitivity(9.0, 2 ** 24) == 19.0
    assert laplace_vector_sensitivity(ENV_L1_BOUND, VALUES) == 18.0 + VALUES / 2 ** 24
    # one query of noise multiplier b/Δ₁ at the smaller of the two halves' scales
    assert laplace_vector_release(6.0, 4.0, 2.0) == QueryRelease(2.0, None, 1)
    assert laplace_vector_release(3.0, 9.0, 2.0) == QueryRelease(1.5, None, 1)


def test_the_plan_gives_the_environment_its_share_and_the_rewards_the_rest():
    plan = plan_privacy(8.0, 1e-5, 2.0, 1 + 2_000, reserve_queries=200, env_values=VALUES, env_fraction=0.1)
    delta1 = 18.0 + VALUES / 2 ** 24
    assert plan.env_sum_noise_scale == pytest.approx(delta1 / 0.8, rel=1e-12)          # Δ₁ / (f·ε)
    assert plan.env_noise_multiplier == pytest.approx(1.25, rel=1e-12) and plan.env_epsilon == pytest.approx(0.8)
    assert plan.release_noise("initial_states").sum_scale == plan.env_sum_noise_scale
    assert plan.release_noise("initial_states").sq_sum_scale == plan.env_sum_noise_scale
    assert plan.release_noise("rewards").sum_scale == plan.sum_noise_scale
    env = plan.release_noise("initial_states").accounting(VALUES)
    assert env == QueryRelease(1.25, None, 1)
    b = plan.sum_noise_scale
    rewards = QueryRelease(b, b, 2_200)                                            # κ = 2: b_sq = b
    joint = composed_epsilon([env, rewards], 1e-5, PLAN_INTERVAL)
    assert joint == pytest.approx(plan.expected_epsilon, rel=1e-12) and 0.99 * 8.0 < joint <= 8.0
    # tight: 1% less reward noise breaks the target; and the environment's share is really spent on it
    assert composed_epsilon([env, QueryRelease(0.99 * b, 0.99 * b, 2_200)], 1e-5, PLAN_INTERVAL) > 8.0
    assert composed_epsilon([rewards], 1e-5, PLAN_INTERVAL) < joint - 0.3
    # the plan is kept with the run and read back whole
    assert PrivacyPlan.from_dict(plan.to_dict()) == plan


def test_a_one_dimensional_shift_dominates_a_spread_one():
    """The accounting records the vector query as the 1-d Laplace of b/Δ₁: a shift of the same L1 norm spread
    over two coordinates has no larger hockey-stick divergence δ(ε) (numerical integration on a grid)."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    x = np.linspace(-25.0, 25.0, 1501)
    dx = x[1] - x[0]

    def delta(shifts, eps):
        p = q = np.ones(1)
        for s in shifts:
            p = np.multiply.outer(p, np.exp(-np.abs(x)) / 2 * dx).ravel()
            q = np.multiply.outer(q, np.exp(-np.abs(x - s)) / 2 * dx).ravel()
        return float(np.maximum(p - math.exp(eps) * q, 0).sum())

    for eps in (0.2, 0.5):
        one = delta([1.0], eps)
        acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
        acc.compose(dp_event.LaplaceDpEvent(1.0))
        assert one == pytest.approx(acc.get_delta(eps), rel=2e-3)
        for spread in ([0.5, 0.5], [0.8, 0.2]):
            assert delta(spread, eps) < one


def config(b, b_sq, m=VALUES, **kw) -> RoundConfig:
    return RoundConfig(1, (1, 2, 3, 4), m, 4, 3, 0, b, b_sq, bytes(32), bytes(32), **kw)     # n_min 4, threshold 3


def test_a_device_checks_and_records_the_environment_round_as_one_query():
    delta1 = laplace_vector_sensitivity(ENV_L1_BOUND, VALUES)
    assert round_release(config(2.0 * delta1, 3.0 * delta1), environment=True) == QueryRelease(2.0, None, 1)
    assert round_release(config(2.0, 3.0)) == QueryRelease(2.0, 3.0, VALUES)    # a reward round: per value
    assert round_release(config(0.0, 3.0), environment=True) is None
    plan = DeclaredPlan(8.0, 1e-5, 500.0, 500.0, 0.8, env_noise_multiplier=1.25)
    # the manifest carries the environment's multiplier; a manifest without it still parses
    assert DeclaredPlan.from_manifest(plan.to_manifest()) == plan
    old = {k: v for k, v in plan.to_manifest().items() if k != "env_noise_multiplier"}
    assert DeclaredPlan.from_manifest(old).env_noise_multiplier == 0.0
    assert plan.request_release(VALUES, environment=True) == QueryRelease(1.25, None, 1)
    assert plan.request_release(10) == QueryRelease(500.0, 500.0, 10)
    policy = plan.policy()
    policy.check(config(1.25 * delta1, 1.25 * delta1), environment=True)         # the plan's own noise
    with pytest.raises(RoundRefused, match="environment noise multiplier"):
        policy.check(config(1.25 * delta1, 1.2 * delta1), environment=True)     # one half below it
    with pytest.raises(RoundRefused, match="below the declared"):
        policy.check(config(1.25 * delta1, 1.25 * delta1))                       # not as a reward round
    # a plan declared before (no environment multiplier) keeps its per-value floors for the environment round
    older = DeclaredPlan.from_manifest(old).policy()
    with pytest.raises(RoundRefused, match="on Σ D is below"):
        older.check(config(1.25 * delta1, 1.25 * delta1), environment=True)
    older.check(config(500.0, 500.0), environment=True)
