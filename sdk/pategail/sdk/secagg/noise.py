"""Distributed noise: each device's share, drawn from a cryptographically secure source — discrete Laplace
(the paper's mechanism) or discrete Gaussian; ``Mechanism.noise_share`` (``pategail.sdk.secagg.mechanisms``)
picks the round's.

Target: the survivors' shares sum to (at least) a discrete Laplace DLap(a), P(k) ∝ exp(-a|k|), on every
coordinate, with a = 1 / scale and ``scale`` in quanta (value scale * 2^FRAC_BITS). With sensitivity
Δ = 2^FRAC_BITS quanta (one device moves a sum of scores in [0, 1] by at most 1.0) that is ε = a Δ = 1/b for
the value scale b — the integer version of the Laplace mechanism of Theorems 2-3.

Divisibility: DLap(a) = G1 - G2 with G_i geometric (failures, success probability p = 1 - e^(-a)), i.e.
NB(1, p). NB is infinitely divisible: n_min devices each adding NB(1/n_min, p) - NB(1/n_min, p) give
exactly DLap(a); more survivors give more noise (independent extra noise: post-processing), so shares are
sized for n_min, the fewest survivors a round releases anything for.

Sampler: NB(r, p) is compound Poisson — the sum of N ~ Poisson(-r ln p) draws from the logarithmic
distribution Log(e^(-a)). Poisson(μ) (μ <= ~36 here) is drawn by inversion of its CDF table, the logarithmic
law by Kemp's LS algorithm (as in numpy's ``logseries``), vectorised. Floating point touches only the
inversion steps (53-bit uniforms); the output is an integer, so there are none of the gaps of a
floating-point Laplace (Mironov 2012), though probabilities are exact only to ~2^-50.

Discrete Gaussian (Kairouz, Liu, Steinke 2021): each of the d = n_min − t honest shares is N_Z(0, σ²/d),
drawn exactly (up to the 53-bit floats of its comparisons) by Canonne, Kamath, Steinke's rejection sampler
(2020, Algorithm 3): a discrete Laplace proposal of scale ⌊s⌋ + 1, accepted with probability
exp(−(|Y| − s²/scale)²/(2s²)). A sum of d such shares is not exactly N_Z(0, σ²); the accountant pays the
difference (``pategail.sdk.accounting.discrete_gaussian_tau``).

Randomness: NOT the injected reproducible ``rng``. Uniforms come from AES-256-CTR keyed by 32 fresh bytes
of ``os.urandom`` per call (a CTR-DRBG style CSPRNG): unpredictable even to someone who knows every seed of
the experiment. Tests check the distribution, not the values.
"""
from __future__ import annotations

import math
import os

import numpy as np

from .fixedpoint import MAX_NOISE_SCALE_QUANTA
from .prg import expand_uint64


def csprng_uniform(size: int) -> np.ndarray:
    """``size`` float64 uniforms in (0, 1), 53 random bits each, from AES-CTR under an ``os.urandom`` key."""
    words = expand_uint64(os.urandom(32), size)
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def _poisson(mu: float, size: int) -> np.ndarray:
    """Poisson(mu) by CDF inversion (mu is small: at most ~36 for the scales allowed)."""
    if mu <= 0:
        return np.zeros(size, dtype=np.int64)
    kmax = int(mu + 14 * math.sqrt(mu) + 40)
    k = np.arange(kmax + 1)
    log_pmf = -mu + k * math.log(mu) - np.array([math.lgamma(i + 1) for i in k])
    cdf = np.cumsum(np.exp(log_pmf))
    cdf /= cdf[-1]
    return np.searchsorted(cdf, csprng_uniform(size), side="right").astype(np.int64)


def _logarithmic(a: float, size: int) -> np.ndarray:
    """Log(q) with q = e^(-a): P(k) = -q^k / (k ln(1 - q)), k >= 1 (Kemp's LS algorithm)."""
    log_1mq = math.log(-math.expm1(-a))  # ln(1 - q), precise for tiny a
    v, u = csprng_uniform(size), csprng_uniform(size)
    out = np.ones(size, dtype=np.int64)
    below_q = v < math.exp(-a)
    log_h = np.log(-np.expm1(log_1mq * u))  # ln h, h = 1 - (1 - q)^u
    h = np.exp(log_h)
    deep = below_q & (v <= h * h)
    out[deep] = np.floor(1.0 + np.log(v[deep]) / log_h[deep]).astype(np.int64)
    out[below_q & ~deep & (v < h)] = 2
    return out


def negative_binomial(r: float, a: float, size: int) -> np.ndarray:
    """NB(r, 1 - e^(-a)): failures before r successes, as a compound Poisson of logarithmic draws."""
    counts = _poisson(-r * math.log(-math.expm1(-a)), size)
    out = np.zeros(size, dtype=np.int64)
    total = int(counts.sum())
    if total:
        np.add.at(out, np.repeat(np.arange(size), counts), _logarithmic(a, total))
    return out


def discrete_laplace_share(scale_quanta: float, n_min: float, size: int) -> np.ndarray:
    """One device's share (int64, ``size`` coordinates) of DLap(1/scale_quanta) split among ``n_min``.

    ``scale_quanta == 0`` means no noise (zeros), for tests of exactness and for non-private runs.
    """
    if scale_quanta == 0:
        return np.zeros(size, dtype=np.int64)
    if not 1.0 <= scale_quanta <= MAX_NOISE_SCALE_QUANTA:
        raise ValueError(f"noise scale {scale_quanta} quanta outside [1, {MAX_NOISE_SCALE_QUANTA:g}]")
    if n_min < 1:
        raise ValueError("n_min must be at least 1")
    a = 1.0 / scale_quanta
    both = negative_binomial(1.0 / n_min, a, 2 * size)
    share: np.ndarray = both[:size] - both[size:]
    return share


def _geometric(scale: float, size: int) -> np.ndarray:
    """Failures before a success of probability 1 − e^(−1/scale): ⌊−scale · ln U⌋ (inversion)."""
    failures: np.ndarray = np.floor(-scale * np.log(csprng_uniform(size))).astype(np.int64)
    return failures


def discrete_gaussian(std_quanta: float, size: int) -> np.ndarray:
    """``size`` draws of N_Z(0, s²), P(k) ∝ exp(−k²/(2s²)), s = ``std_quanta`` (Canonne-Kamath-Steinke)."""
    s = float(std_quanta)
    scale = math.floor(s) + 1.0
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        want = size - filled
        batch = int(want * 1.6) + 16                      # the acceptance rate is above 0.6 for s >= 1
        y = _geometric(scale, batch) - _geometric(scale, batch)
        excess = (np.abs(y) - s * s / scale) ** 2 / (2 * s * s)
        accepted = y[csprng_uniform(batch) < np.exp(-excess)][:want]
        out[filled:filled + len(accepted)] = accepted
        filled += len(accepted)
    return out


def discrete_gaussian_share(std_quanta: float, n_min: float, size: int) -> np.ndarray:
    """One device's share (int64, ``size`` coordinates) of distributed discrete Gaussian noise of total
    standard deviation ``std_quanta`` split among ``n_min`` honest devices: N_Z(0, std²/n_min) each.

    ``std_quanta == 0`` means no noise (zeros), for non-private runs."""
    if std_quanta == 0:
        return np.zeros(size, dtype=np.int64)
    if n_min < 1:
        raise ValueError("n_min must be at least 1")
    if not 1.0 <= std_quanta <= MAX_NOISE_SCALE_QUANTA:
        raise ValueError(f"noise std {std_quanta} quanta outside [1, {MAX_NOISE_SCALE_QUANTA:g}]")
    return discrete_gaussian(std_quanta / math.sqrt(n_min), size)
