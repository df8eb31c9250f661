"""Noise calibration of the paper (Theorems 2-3) and the reward aggregation R, ξ, R̂ — pure functions.

Paper (PateGail, AAAI 2023, eq. "pate" and "rlowerbound"), per queried pair (s, a) over users U:
    R = mean_u D_u(s, a) + Laplace(0, λ)                       Theorem 2: λ = 1/(ε|U|)        -> ε-DP
    ξ = sqrt(var_u D_u(s, a) + Laplace(0, λ_c)),  R̂ = R - β ξ    Theorem 3: λ = κ/(ε|U|),
                                                                λ_c = 3κ/(ε(κ-1)|U|), κ > 1 -> ε-DP
The secure aggregation releases noisy SUMS, Σ D + Lap(b) and Σ D² + Lap(b_sq), and R, ξ, R̂ are computed
from them (post-processing, so no further privacy cost). With D in [0, 1] each sum has sensitivity 1 when
one user's data changes, so:
  * b = λ|U| (= κ/ε for Theorem 3) puts exactly the theorem's Laplace(λ) on the mean and costs ε/κ;
  * b_sq = κ/(ε(κ-1)) costs ε(κ-1)/κ — the budget Theorem 3 gives ξ² — so the pair is ε-DP per query
    by basic composition, as in the theorem's proof. This is 3x less noise than λ_c|U|: Theorem 3 bounds the
    sensitivity of var (mean of squares minus square of mean) by 3/|U|; releasing Σ D² (sensitivity 1)
    instead and subtracting the square of the already-private mean avoids paying for the mean twice.
The per-query ε is the paper's; the end-to-end ε of a run is the accountant's (see accountant.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_VARIANCE = 0.25
"""Largest variance of values in [0, 1] (Popoviciu): the noisy variance is clamped into [0, 1/4]."""


def lambda_reward(epsilon: float, num_users: int) -> float:
    """Theorem 2: λ = 1 / (ε |U|) makes R = mean + Laplace(0, λ) ε-DP per query (R alone, no ξ)."""
    _check(epsilon, num_users)
    return 1.0 / (epsilon * num_users)


def lambdas_compensated(epsilon: float, num_users: int, kappa: float) -> tuple[float, float]:
    """Theorem 3: (λ, λ_c) = (κ/(ε|U|), 3κ/(ε(κ-1)|U|)), κ > 1, make R̂ = R - βξ ε-DP per query."""
    _check(epsilon, num_users)
    if not kappa > 1:
        raise ValueError(f"kappa must be > 1, got {kappa}")
    return kappa / (epsilon * num_users), 3.0 * kappa / (epsilon * (kappa - 1.0) * num_users)


@dataclass(frozen=True)
class SumNoiseScales:
    """Laplace scales of the total noise on the two released sums, in value units (sensitivity 1 each)."""

    sum_scale: float
    """b on Σ_u D_u(s, a): costs 1/b."""
    sq_sum_scale: float
    """b_sq on Σ_u D_u(s, a)²: costs 1/b_sq."""

    @property
    def per_query_epsilon(self) -> float:
        """Pure ε of one query (both sums of one pair), by basic composition: 1/b + 1/b_sq."""
        return 1.0 / self.sum_scale + 1.0 / self.sq_sum_scale


def sum_noise_scales(epsilon: float, kappa: float) -> SumNoiseScales:
    """Scales on the sums for per-query ε under Theorem 3's split: b = λ|U| = κ/ε and b_sq = κ/(ε(κ-1)).

    Independent of |U|: the noise on the SUM is fixed by ε, the noise on the MEAN falls as 1/|U|.
    """
    lam, _ = lambdas_compensated(epsilon, 1, kappa)
    return SumNoiseScales(sum_scale=lam, sq_sum_scale=kappa / (epsilon * (kappa - 1.0)))


@dataclass(frozen=True, eq=False)
class RewardAggregate:
    """Per-query results, each of shape (M,)."""

    mean: np.ndarray
    """R = noisy Σ D / n."""
    var: np.ndarray
    """Noisy variance Σ D²/n - R², clamped into [0, 1/4]."""
    xi: np.ndarray
    """ξ = sqrt(var)."""
    r_hat: np.ndarray
    """R̂ = R - β ξ."""


def aggregate_rewards(noisy_sum: np.ndarray, noisy_sq_sum: np.ndarray, n: int, beta: float) -> RewardAggregate:
    """R, var, ξ and R̂ = R - βξ from the released noisy sums over the n surviving devices.

    A negative noisy variance (noise can push Σ D²/n - R² below zero) is clamped to 0 before the square
    root, and one above 1/4 — impossible for values in [0, 1] — to 1/4. Clamping is post-processing of
    the released sums, so the DP guarantee is unchanged; it biases ξ slightly upwards when the true
    variance is near 0, i.e. R̂ errs on the conservative (lower-bound) side, which is what Theorem 1 wants.
    """
    if n < 1:
        raise ValueError("n must be at least 1")
    if beta < 0:
        raise ValueError("beta must be >= 0")
    mean = np.asarray(noisy_sum, dtype=np.float64) / n
    var = np.clip(np.asarray(noisy_sq_sum, dtype=np.float64) / n - mean * mean, 0.0, MAX_VARIANCE)
    xi = np.sqrt(var)
    return RewardAggregate(mean, var, xi, mean - beta * xi)


def _check(epsilon: float, num_users: int) -> None:
    if not epsilon > 0 or not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be a positive number, got {epsilon}")
    if num_users < 1:
        raise ValueError("num_users must be at least 1")
