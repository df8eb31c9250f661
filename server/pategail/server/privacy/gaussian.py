"""The Gaussian mechanism's privacy plan — pure functions.

Each device releases one vector per round (its centred rewards averaged over blocks of the granularity,
L2-clipped to C on the device) and one environment vector before round 1 (clipped to ``ENV_L2_BOUND``,
which honest contributions never exceed); the secure aggregation adds distributed discrete Gaussian noise
(``pategail.sdk.secagg.noise``). Each release is a Gaussian mechanism of L2 sensitivity Δ = C + ½√d quanta
(``pategail.sdk.accounting.gaussian_sensitivity``; zero-out neighbours: one device's vector zeroed, the
device still taking part; replace-one doubles it, ``pategail.server.privacy.adjacency``), accounted in Rényi DP by dp-accounting (``GaussianRelease.noise_multiplier``).

The budget is calibrated jointly, so that the run spends what it promises: the split f =
``env_epsilon_fraction`` fixes the ratio of the two noise multipliers (each part calibrated on its own to
(f·ε, δ/2) and ((1 − f)·ε, δ/2), as basic composition would), and both are then scaled by one factor until the
joint RDP composition of every release — the environment vector, the planned reward rounds and the retry
reserve — is (ε, δ)-DP. Gaussian releases compose in RDP as one Gaussian of ρ = Σ count/(2z²), so the factor
is one calibration. Basic composition alone left the joint ε well under the target (5.73 for ε = 8 at 1,000
devices and f = 0.5: 24–26% more noise than needed; 10–12% at the default f = 0.1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pategail.sdk.accounting import GaussianRelease, composed_epsilon, gaussian_sensitivity
from pategail.sdk.action_rates import action_rate_l2_bound

ENV_L2_BOUND = math.sqrt(12)
"""L2 norm no honest environment vector exceeds (pategail.sdk.contribution): nine parts — home one-hot,
first cells with the at-home share, the weight, explore observed, explore expected, place visits, and the
coarse home, first-cell and visit parts over regions — each with entries ≥ 0 summing to at most w ≤ 1 (L2 ≤
L1 ≤ 1), and the return law's three entries in [0, 1]: √(9·1 + 3) = √12 ≈ 3.46. The device clips to it, so it
is the sensitivity whatever a modified device sends. (The coarse parts raise it from 3: +15% noise on every
entry, for region sums whose noise does not grow with the region's size.) A vector with the action-rate part
has the larger bound of :func:`env_l2_bound`."""


def env_l2_bound(action_rates: bool = False) -> float:
    """The L2 bound of an honest environment vector: ``ENV_L2_BOUND``, and with the action-rate part
    (``TrainConfig.action_prior``) √(12 + b²) where b = ``action_rate_l2_bound()`` ≈ 0.354 is that part's
    largest L2 norm (pategail.sdk.action_rates: each slot bucket holds a fixed share of a day's decisions):
    ≈ 3.482, +0.5% noise on the environment release — not √13 (+4%), which its L1 bound of 1 would give."""
    if not action_rates:
        return ENV_L2_BOUND
    return math.sqrt(ENV_L2_BOUND ** 2 + action_rate_l2_bound() ** 2)


RELATIVE_TOLERANCE = 1e-4
"""Brent's method stops within this share of the noise multiplier; the result always meets the target."""


def reward_clip_norm(values: int, clip_share: float) -> float:
    """C = ``clip_share`` × ½√values: the largest norm of ``values`` centred entries in [−½, ½] is ½√values."""
    return float(clip_share) * 0.5 * math.sqrt(values)


def gaussian_epsilon(noise_multiplier: float, count: int, delta: float) -> float:
    """ε at δ of ``count`` Gaussian releases of noise multiplier z = σ/Δ, composed in RDP."""
    return composed_epsilon([GaussianRelease(noise_multiplier, 1.0, count)], delta)


def calibrate_noise_multiplier(epsilon: float, delta: float, count: int) -> float:
    """The smallest z (within ``RELATIVE_TOLERANCE``) whose ``count`` releases compose to at most (ε, δ)."""
    from dp_accounting import dp_event
    from dp_accounting.mechanism_calibration import ExplicitBracketInterval, calibrate_dp_mechanism
    from dp_accounting.rdp import rdp_privacy_accountant

    if not (epsilon > 0 and 0 < delta < 1 and count >= 1):
        raise ValueError("need epsilon > 0, 0 < delta < 1 and at least one release")
    # z/√count of one release is the same RDP curve as count releases of z: the bracket scales with √count. At a
    # large ε the RDP bound needs far more noise than the classical guess (ε ≥ α/(2z²) at its smallest order α:
    # z ≈ 11 × the guess at ε = 5,000, ≈ 160 × at 10^6), so a bracket that misses is widened once
    guess = math.sqrt(count * 2 * math.log(1.25 / delta)) / epsilon
    for high in (10.0, 1000.0):
        try:
            z = calibrate_dp_mechanism(
                rdp_privacy_accountant.RdpAccountant,
                lambda z: dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(z), count), epsilon, delta,
                ExplicitBracketInterval(guess / 1000, guess * high), tol=RELATIVE_TOLERANCE * guess)
            break
        except ValueError:
            continue
    else:
        from pategail.server.errors import PategailError
        raise PategailError(f"--epsilon too large: the RDP accountant cannot calibrate Gaussian noise for ε = "
                            f"{epsilon:g} at δ = {delta:g} over {count} release(s) (a part of the run's budget); use "
                            "a smaller --epsilon or --no-privacy")
    return float(z)


@dataclass(frozen=True)
class GaussianPlan:
    """The Gaussian mechanism's part of a run's privacy plan (value units)."""

    noise_multiplier: float
    """z = σ/Δ of every reward release."""
    noise_std: float
    """σ: standard deviation of the noise on each released reward sum (over devices)."""
    clip_norm: float
    """C: the L2 norm each device clips its reward vector to."""
    env_noise_multiplier: float
    """z of the environment release."""
    env_noise_std: float
    """σ on each released environment sum."""
    env_clip_norm: float
    """The L2 norm each device clips its environment vector to: :func:`env_l2_bound` of its layout."""
    env_epsilon: float
    """ε of the environment release alone, at δ/2, under the plan's relation (the parts are not additive: the
    run's ε is their joint composition, calibrated to the target)."""
    rewards_epsilon: float
    """ε of every budgeted reward release together, alone, at δ/2, under the plan's relation."""


def plan_gaussian(target_epsilon: float, target_delta: float, reward_values: int, reward_releases: int,
                  env_values: int, clip_share: float, env_fraction: float,
                  env_clip_norm: float = ENV_L2_BOUND, adjacency: str = "zero-out") -> GaussianPlan:
    """Noise of a run of ``reward_releases`` reward vectors of ``reward_values`` entries (planned rounds and
    the retry reserve) and one environment vector of ``env_values`` entries clipped to ``env_clip_norm`` (its
    layout's :func:`env_l2_bound`), (target_epsilon, target_delta)-DP under ``adjacency`` with
    ``env_fraction`` of ε for the environment. The noise multipliers returned are σ over the zero-out
    sensitivity (what the journal, the accountant and the devices record); under replace-one σ is calibrated
    on that relation's larger sensitivities (pategail.server.privacy.adjacency)."""
    from pategail.server.privacy.mechanisms import GAUSSIAN_PLAN

    if not 0 < env_fraction < 1:
        raise ValueError(f"env_fraction must be in (0, 1), got {env_fraction}")
    factors = GAUSSIAN_PLAN.relation_factors(adjacency, env_bound=env_clip_norm, env_values=env_values)
    z_env = calibrate_noise_multiplier(env_fraction * target_epsilon, target_delta / 2, 1)
    z = calibrate_noise_multiplier((1 - env_fraction) * target_epsilon, target_delta / 2, reward_releases)
    scale = joint_scale(z_env, z, reward_releases, target_epsilon, target_delta)
    z_env, z = scale * z_env, scale * z            # multipliers of the relation's own sensitivities
    clip = reward_clip_norm(reward_values, clip_share)
    return GaussianPlan(z * factors.rewards, z * factors.rewards * gaussian_sensitivity(clip, reward_values), clip,
                        z_env * factors.environment,
                        z_env * factors.environment * gaussian_sensitivity(env_clip_norm, env_values),
                        float(env_clip_norm), gaussian_epsilon(z_env, 1, target_delta / 2),
                        gaussian_epsilon(z, reward_releases, target_delta / 2))


def joint_scale(env_multiplier: float, multiplier: float, releases: int, epsilon: float, delta: float) -> float:
    """The factor c for which one environment release of noise multiplier c·``env_multiplier`` and ``releases``
    reward releases of c·``multiplier`` compose (RDP) to at most (ε, δ): they are one Gaussian of multiplier
    c / √(2ρ) with ρ = 1/(2·z_env²) + releases/(2·z²), so c is √(2ρ) times that Gaussian's calibrated z."""
    rho = 0.5 / env_multiplier ** 2 + 0.5 * releases / multiplier ** 2
    return calibrate_noise_multiplier(epsilon, delta, 1) * math.sqrt(2 * rho)
