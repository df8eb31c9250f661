"""The Gaussian mechanism's accounting: the distributed discrete Gaussian's ρ (Kairouz et al. 2021) with its
discretisation, composed in RDP by dp-accounting, pinned against closed forms with unequal parameters; the
Gaussian plan's calibration; and the Laplace plan's calibration against a fine-grid reference."""
from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

from pategail.sdk.accounting import (GaussianRelease, QueryRelease, composed_epsilon, discrete_gaussian_tau,
                                     gaussian_sensitivity, merge_release, release_from_dict, release_to_dict)
from pategail.server.privacy.gaussian import (ENV_L2_BOUND, calibrate_noise_multiplier, gaussian_epsilon,
                                              plan_gaussian, reward_clip_norm)
from pategail.server.privacy.plan import GaussianSpec, plan_gaussian_run, plan_privacy


def rdp_epsilon_by_hand(rho: float, delta: float) -> float:
    """ε from RDP α·ρ (zCDP ρ) at δ on dp-accounting's orders, with the conversion it uses (Canonne, Kamath,
    Steinke 2020 Prop. 12; Asoodeh et al.): ε = min_α αρ + log((α−1)/α) − (log δ + log α)/(α − 1)."""
    a = np.asarray([o for o in DEFAULT_RDP_ORDERS if o > 1], dtype=np.float64)
    eps = a * rho + np.log((a - 1) / a) - (math.log(delta) + np.log(a)) / (a - 1)
    return float(max(0.0, eps.min()))


def test_rho_of_a_discrete_gaussian_release_is_the_closed_form():
    # σ = 2 value units over 5 shares: each share's std is 2·2^24/√5 quanta, τ is exactly 0 in float64
    r = GaussianRelease(2.0, 0.5, 1, shares=5)
    assert r.rho == pytest.approx(0.5 * (0.5 / 2.0) ** 2, rel=1e-15)
    assert r.noise_multiplier == pytest.approx(4.0, rel=1e-15)
    # τ by hand for tiny shares (1 quantum each, 3 shares): 10 (e^{-2π²·1/2} + e^{-2π²·2/3})
    tau = 10 * (math.exp(-2 * math.pi ** 2 / 2) + math.exp(-2 * math.pi ** 2 * 2 / 3))
    assert discrete_gaussian_tau(1.0, 3) == pytest.approx(tau, rel=1e-12)
    tiny = GaussianRelease(math.sqrt(3) / 2**24, 1 / 2**24, 1, shares=3)        # σ = √3 quanta, Δ = 1 quantum
    assert tiny.rho == pytest.approx(0.5 * (1 / 3 + tau / 2), rel=1e-12)


def test_sensitivity_includes_the_rounding_of_the_encoding():
    assert gaussian_sensitivity(1.5, 400) == pytest.approx(1.5 + 0.5 * 20 / 2**24, rel=1e-15)
    assert reward_clip_norm(96, 1.0) == pytest.approx(0.5 * math.sqrt(96))
    assert reward_clip_norm(96, 0.25) == pytest.approx(0.125 * math.sqrt(96))


def test_composition_of_unequal_gaussian_releases_matches_the_closed_form():
    releases = [GaussianRelease(30.0, 3.0, 1, 4), GaussianRelease(5.0, 1.2, 17, 4), GaussianRelease(9.0, 2.5, 3, 2)]
    rho = sum(r.count * r.rho for r in releases)
    assert rho == pytest.approx(0.5 * (0.01 + 17 * 0.0576 + 3 * (2.5 / 9) ** 2), rel=1e-12)
    for delta in (1e-5, 1e-7):
        assert composed_epsilon(releases, delta) == pytest.approx(rdp_epsilon_by_hand(rho, delta), rel=1e-9)
    # a Laplace release among them is composed in RDP too, and costs something
    with_laplace = composed_epsilon([*releases, QueryRelease(40.0, None, 5)], 1e-5)
    assert with_laplace > composed_epsilon(releases, 1e-5)


def test_gaussian_releases_merge_and_round_trip_in_a_ledger_record():
    a = GaussianRelease(5.0, 1.2, 2, 4)
    assert merge_release([a], GaussianRelease(5.0, 1.2, 3, 4)) == [GaussianRelease(5.0, 1.2, 5, 4)]
    assert len(merge_release([a], GaussianRelease(5.0, 1.3, 3, 4))) == 2
    assert len(merge_release([QueryRelease(5.0, 1.2, 2)], a)) == 2
    for r in (a, QueryRelease(5.0, None, 3), QueryRelease(5.0, 2.5, 3)):
        assert release_from_dict(release_to_dict(r)) == r
    with pytest.raises(ValueError):
        GaussianRelease(0.0, 1.0, 1)


@pytest.mark.parametrize("epsilon, delta, count", [(1.0, 1e-5, 61), (8.0, 5e-6, 3), (0.5, 1e-6, 1),
                                                   (5000.0, 1e-5, 1), (1e6, 1e-5, 3)])
def test_calibrated_noise_multiplier_is_tight(epsilon, delta, count):
    # a large ε needs ~10-160 times the classical guess under the RDP bound: beyond the first bracket
    z = calibrate_noise_multiplier(epsilon, delta, count)
    assert gaussian_epsilon(z, count, delta) <= epsilon
    assert gaussian_epsilon(z * (1 - 1e-3), count, delta) > epsilon
    # the same RDP curve: count releases of z are one release of z/√count
    assert gaussian_epsilon(z, count, delta) == pytest.approx(gaussian_epsilon(z / math.sqrt(count), 1, delta),
                                                              rel=1e-9)


def test_gaussian_plan_splits_the_budget_and_spends_all_of_it_jointly():
    p = plan_gaussian(4.0, 1e-5, reward_values=96, reward_releases=61, env_values=8444, clip_share=0.5,
                      env_fraction=0.2)
    # the split fixes the ratio of the multipliers: each part calibrated on its own to its share at δ/2
    z_env, z = calibrate_noise_multiplier(0.8, 5e-6, 1), calibrate_noise_multiplier(3.2, 5e-6, 61)
    assert p.env_noise_multiplier / p.noise_multiplier == pytest.approx(z_env / z, rel=1e-12)
    # ... and one factor scales both until the joint composition spends the whole target, not less
    joint = composed_epsilon([GaussianRelease(p.env_noise_multiplier, 1.0, 1),
                              GaussianRelease(p.noise_multiplier, 1.0, 61)], 1e-5)
    assert 4.0 * (1 - 1e-3) < joint <= 4.0
    assert p.noise_multiplier < z and p.env_noise_multiplier < z_env          # less noise than basic composition
    # each part alone (at δ/2) now costs more than its share; the parts are not additive
    assert p.env_epsilon == pytest.approx(gaussian_epsilon(p.env_noise_multiplier, 1, 5e-6)) and p.env_epsilon > 0.8
    assert p.rewards_epsilon == pytest.approx(gaussian_epsilon(p.noise_multiplier, 61, 5e-6))
    assert p.rewards_epsilon > 3.2
    assert p.clip_norm == pytest.approx(0.25 * math.sqrt(96)) and p.env_clip_norm == ENV_L2_BOUND
    assert p.noise_std == pytest.approx(p.noise_multiplier * gaussian_sensitivity(p.clip_norm, 96))
    run = plan_gaussian_run(4.0, 1e-5, 2.0, 10, 1, GaussianSpec("day", 96, 61, 8444, 0.5, 0.2))
    assert run.expected_epsilon <= 4.0 and run.declare(0.8, 0).noise_multiplier == pytest.approx(p.noise_multiplier)
    noise = run.release_noise("rewards")
    assert (noise.mechanism, noise.block, noise.sq_sum_scale) == ("gaussian", 47, 0.0)
    assert run.release_noise("initial_states").clip_norm == ENV_L2_BOUND


def test_laplace_plan_is_pinned_against_a_fine_grid_reference():
    """At total ε = 1 with many small releases the plan (3e-4 grid) adds at most 3% more
    noise than a 1e-5-grid calibration would, where a plan on the old 1e-3 grid would have had to add more."""
    queries = 20_000
    plan = plan_privacy(1.0, 1e-5, 2.0, queries)
    b = plan.sum_noise_scale

    def eps(scale, interval):
        return composed_epsilon([QueryRelease(scale, scale, queries)], 1e-5, interval)

    assert eps(b, 1e-5) <= 1.0 < eps(0.97 * b, 1e-5)
    assert eps(b, 1e-3) > 1.0          # the 1e-3 grid overstates ε at this b: its calibration needs more noise


def test_an_epsilon_beyond_the_accountant_is_one_clear_error():
    from pategail.server.errors import PategailError
    with pytest.raises(PategailError, match="--epsilon too large: .* ε = 1e\\+12 at δ = 1e-05"):
        calibrate_noise_multiplier(1e12, 1e-5, 1)
