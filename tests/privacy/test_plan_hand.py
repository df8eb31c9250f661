"""The privacy plan's bookkeeping by hand: what each release costs (ReleaseNoise.accounting), what a plan tells
the secure rounds and the devices (release_noise, declare) for either mechanism, the Gaussian run's expected ε
against the zCDP closed form, the retry reserve in the calibration, and a kept Gaussian plan."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

from pategail.sdk.accounting import GaussianRelease, QueryRelease
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.server.privacy.gaussian import ENV_L2_BOUND, calibrate_noise_multiplier, plan_gaussian
from pategail.server.privacy.mechanisms import GAUSSIAN_PLAN, LAPLACE_PLAN
from pategail.server.privacy.plan import (NO_MECHANISM, PLAN_FILE, GaussianSpec,
                                          PrivacyPlan, ReleaseNoise, load_or_make_plan, plan_gaussian_run,
                                          plan_privacy)

QUANTUM = 2.0 ** -24


def test_release_noise_accounting_by_hand():
    assert ReleaseNoise("laplace", 3.0, 1.5).accounting(94) == QueryRelease(3.0, 1.5, 94)
    assert ReleaseNoise("laplace", 3.0, 1.5).accounting(94, shares=7) == QueryRelease(3.0, 1.5, 94)
    # Gaussian: one vector release of L2 sensitivity C + ½√values quanta, its shares for τ
    g = ReleaseNoise("gaussian", 2.0, 0.0, 8, 1.5)
    assert g.accounting(400, 5) == GaussianRelease(2.0, 1.5 + 0.5 * 20 * QUANTUM, 1, 5)
    assert g.accounting(400) == GaussianRelease(2.0, 1.5 + 0.5 * 20 * QUANTUM, 1, 1)
    assert ReleaseNoise("laplace", 0.0, 0.0).accounting(94) is None and not ReleaseNoise().noisy
    assert ReleaseNoise("gaussian", 0.0, 0.0, 8, 1.5).accounting(94) is None


def test_a_laplace_plan_s_releases_and_declaration():
    plan = PrivacyPlan(4.0, 1e-5, 3.0, 100, 20, 6.0, 3.0, 3.9)
    assert plan.private and not plan.is_gaussian and plan.scheme is LAPLACE_PLAN and "Laplace" in plan.mechanism
    assert plan.budgeted_queries == 120 and plan.noise_scales == (6.0, 3.0)
    assert plan.per_query_epsilon == pytest.approx(1 / 6 + 1 / 3)
    for kind in ("rewards", "initial_states"):
        assert plan.release_noise(kind) == ReleaseNoise("laplace", 6.0, 3.0)
    assert plan.declare(0.7, 2) == DeclaredPlan(4.0, 1e-5, 6.0, 3.0, 0.7, 2)
    assert PrivacyPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_a_gaussian_plan_s_releases_and_declaration():
    gaussian = {"noise_std": 2.5, "env_noise_std": 7.0, "clip_share": 0.5, "noise_multiplier": 1.1,
                "env_noise_multiplier": 3.3}
    plan = PrivacyPlan(4.0, 1e-5, 2.0, 100, 0, mechanism_name="gaussian", granularity="block:8", reward_values=96,
                       env_values=50, gaussian=gaussian)
    assert plan.is_gaussian and plan.scheme is GAUSSIAN_PLAN and "Gaussian" in plan.mechanism and plan.per_query_epsilon is None
    assert plan.clip_share == 0.5
    # rewards: σ, block 8, C = clip_share · ½√96; the environment: its own σ, the whole vector, ENV_L2_BOUND = √12
    # (its parts at the cells and again summed over the regions)
    assert plan.release_noise("rewards") == ReleaseNoise("gaussian", 2.5, 0.0, 8, 0.25 * math.sqrt(96))
    assert plan.release_noise("initial_states") == ReleaseNoise("gaussian", 7.0, 0.0, 0, math.sqrt(12))
    assert plan.declare(0.6, 1) == DeclaredPlan(4.0, 1e-5, 0.0, 0.0, 0.6, 1, "gaussian", 1.1, 3.3)
    day = PrivacyPlan(4.0, 1e-5, 2.0, 100, 0, mechanism_name="gaussian", granularity="day", reward_values=2,
                      gaussian={"noise_std": 1.0})
    assert day.clip_share == 1.0                                         # the default share
    assert day.release_noise("rewards") == ReleaseNoise("gaussian", 1.0, 0.0, 47, 0.5 * math.sqrt(2))
    assert day.release_noise("initial_states").sum_scale == 0.0         # no σ recorded: no noise


def test_without_privacy_nothing_is_declared_and_nothing_is_noisy():
    plan = PrivacyPlan(None, 1e-5, 2.0, 100)
    assert plan.mechanism == NO_MECHANISM and plan.declare(0.7, 0) is None and plan.per_query_epsilon is None
    kept = plan_privacy(None, 1e-6, 3.0, 100, reserve_queries=20)
    assert (kept.target_delta, kept.kappa, kept.planned_queries, kept.reserve_queries) == (1e-6, 3.0, 100, 20)
    assert kept.noise_scales == (0.0, 0.0) and kept.expected_epsilon is None and kept.budgeted_queries == 120
    spec = GaussianSpec("block:8", 12, 5, 40, 0.5, 0.2)
    g = plan_gaussian_run(None, 1e-5, 2.0, 100, 10, spec)
    assert not g.private and g.is_gaussian and g.mechanism == NO_MECHANISM and g.declare(0.7, 0) is None
    assert not g.release_noise("rewards").noisy and not g.release_noise("initial_states").noisy
    assert g.gaussian == {"clip_share": 0.5, "env_fraction": 0.2, "reward_releases": 5,
                          "env_clip_norm": ENV_L2_BOUND}           # the devices' clip, also without noise
    assert (g.granularity, g.reward_values, g.env_values, g.reserve_queries) == ("block:8", 12, 40, 10)


def rdp_epsilon(rho: float, delta: float) -> float:
    """ε at δ of zCDP ρ on dp-accounting's RDP orders (the conversion its RDP accountant uses)."""
    a = np.asarray([o for o in DEFAULT_RDP_ORDERS if o > 1], dtype=np.float64)
    return float(max(0.0, (a * rho + np.log((a - 1) / a) - (math.log(delta) + np.log(a)) / (a - 1)).min()))


def test_gaussian_run_expected_epsilon_is_the_zcdp_composition():
    spec = GaussianSpec("day", 6, 9, 30, 0.5, 0.25)
    plan = plan_gaussian_run(3.0, 1e-6, 2.0, 500, 40, spec)
    g = plan.gaussian
    env_sens = math.sqrt(12) + 0.5 * math.sqrt(30) * QUANTUM
    sens = 0.5 * 0.5 * math.sqrt(6) + 0.5 * math.sqrt(6) * QUANTUM
    assert g["clip_norm"] == pytest.approx(0.5 * 0.5 * math.sqrt(6))
    rho = 0.5 * (env_sens / g["env_noise_std"]) ** 2 + 9 * 0.5 * (sens / g["noise_std"]) ** 2
    assert plan.expected_epsilon == pytest.approx(rdp_epsilon(rho, 1e-6), rel=1e-6)
    # calibrated jointly: the run spends its whole ε = 3 (within the calibration's tolerance), not less
    assert 3.0 * (1 - 1e-3) < plan.expected_epsilon <= 3.0
    # each part alone, at δ/2, costs more than its 1/4 : 3/4 share of a basic-composition split would
    assert g["env_epsilon"] > 0.75 and g["rewards_epsilon"] > 2.25
    assert g["noise_std"] == pytest.approx(g["noise_multiplier"] * sens, rel=1e-12)
    assert g["env_noise_std"] == pytest.approx(g["env_noise_multiplier"] * env_sens, rel=1e-12)


def test_the_retry_reserve_is_calibrated_for_like_planned_queries():
    with_reserve = plan_privacy(2.0, 1e-5, 3.0, 500, reserve_queries=300)
    all_planned = plan_privacy(2.0, 1e-5, 3.0, 800)
    assert with_reserve.sum_noise_scale == pytest.approx(all_planned.sum_noise_scale, rel=1e-12)
    assert with_reserve.sq_sum_noise_scale == pytest.approx(all_planned.sum_noise_scale / 2, rel=1e-12)
    assert with_reserve.sum_noise_scale > plan_privacy(2.0, 1e-5, 3.0, 500).sum_noise_scale
    assert (with_reserve.planned_queries, with_reserve.reserve_queries) == (500, 300)


@pytest.mark.parametrize("args", [(2.0, 1e-5, 1.0, 10), (2.0, 1e-5, 0.5, 10), (0.0, 1e-5, 2.0, 10),
                                  (2.0, 0.0, 2.0, 10), (2.0, 1.0, 2.0, 10), (2.0, 1e-5, 2.0, 0)])
def test_plan_privacy_refuses_bad_settings(args):
    with pytest.raises(ValueError):
        plan_privacy(*args)
    with pytest.raises(ValueError):
        plan_privacy(2.0, 1e-5, 2.0, 10, reserve_queries=-1)


def test_a_gaussian_plan_is_kept_for_its_own_settings_only(tmp_path):
    spec = GaussianSpec("day", 6, 9, 30, 0.5, 0.25)
    first = load_or_make_plan(tmp_path, 3.0, 1e-6, 2.0, 500, 40, gaussian=spec)
    stored = json.loads((tmp_path / PLAN_FILE).read_text())
    assert PrivacyPlan.from_dict(stored) == first and first.is_gaussian
    stored["gaussian"]["noise_std"] = 123.0            # a kept plan is read back, not made again
    (tmp_path / PLAN_FILE).write_text(json.dumps(stored))
    assert load_or_make_plan(tmp_path, 3.0, 1e-6, 2.0, 500, 40, gaussian=spec).gaussian["noise_std"] == 123.0
    other = GaussianSpec("day", 6, 9, 30, 0.25, 0.25)  # another clip share: a new plan
    again = load_or_make_plan(tmp_path, 3.0, 1e-6, 2.0, 500, 40, gaussian=other)
    assert again.clip_share == 0.25 and again.gaussian["noise_std"] != 123.0
    assert json.loads((tmp_path / PLAN_FILE).read_text())["gaussian"]["clip_share"] == 0.25
    laplace = load_or_make_plan(tmp_path, 3.0, 1e-6, 2.0, 500, 40)      # no Gaussian spec: a Laplace plan
    assert not laplace.is_gaussian and laplace.sum_noise_scale > 0


@pytest.mark.parametrize("fraction", [0.0, 1.0, 1.5, -0.1])
def test_the_environment_share_of_a_gaussian_plan_is_inside_0_1(fraction):
    with pytest.raises(ValueError, match=r"env_fraction must be in \(0, 1\)"):
        plan_gaussian(4.0, 1e-5, 96, 10, 50, 0.5, fraction)


@pytest.mark.parametrize("epsilon, delta, count", [(0.0, 1e-5, 3), (-1.0, 1e-5, 3), (1.0, 0.0, 3), (1.0, 1.0, 3),
                                                   (1.0, 1e-5, 0)])
def test_gaussian_calibration_refuses_bad_targets(epsilon, delta, count):
    with pytest.raises(ValueError, match="need epsilon > 0"):
        calibrate_noise_multiplier(epsilon, delta, count)
