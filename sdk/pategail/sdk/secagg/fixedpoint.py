"""Fixed-point encoding of device scores in the ring Z_2^64 (the secure sum's arithmetic).

A score v is clipped to [0, 1] on the device — the bound the DP sensitivity (Theorems 2-3: one device moves a
sum by at most 1) assumes — and encoded as the integer round(v * 2^FRAC_BITS) in [0, 2^FRAC_BITS]. Integers
(value + noise share, possibly negative) live in Z_2^64 as two's complement; the decoded aggregate is read
back as a signed 64-bit integer and divided by 2^FRAC_BITS.

Why 24 fractional bits: the resolution 2^-24 ~ 6e-8 is far below any discriminator's meaningful precision and
far below the DP noise, and it leaves headroom: 100,000 devices * 2^24 < 2^41, while the distributed noise is
limited to a scale of ``MAX_NOISE_SCALE_QUANTA`` = 2^50 quanta; a round configuration is refused unless
its sums stay inside (-2^60, 2^60) except with probability < 2^-64 per coordinate (see ``sum_bound``), so
no wrap-around happens up to ``MAX_DEVICES``. 2^60 < p/2 for the checksum prime p = 2^61 - 1: a change of
a sum by a multiple of p — the one change the checksum cannot see — always leaves that range.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

FRAC_BITS = 24
"""Fractional bits of the fixed-point encoding: a score v in [0, 1] becomes round(v * 2^24)."""
SCALE = 1 << FRAC_BITS
"""One unit of value (a score of 1.0) in quanta."""
MAX_DEVICES = 100_000
"""Largest number of devices the encoding is specified (and tested) for."""
MAX_NOISE_SCALE_QUANTA = float(2**50)
"""Largest discrete-Laplace scale (in quanta) a round may ask for: 2^26 ~ 6.7e7 in value units."""
SAFE_ABS_SUM = 2**60
"""A decoded sum must stay strictly inside (-2^60, 2^60); outside it, it is treated as wrapped/tampered."""


def clip_unit(values: np.ndarray) -> np.ndarray:
    """Scores clipped to [0, 1] as float64; raises ValueError on NaN or infinity (never silently zeroed)."""
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError("scores must be finite")
    return np.clip(v, 0.0, 1.0)


def clip_signed(values: np.ndarray) -> np.ndarray:
    """Values clipped to [−1, 1] as float64 (a signed vector: a device's scaled model delta); raises ValueError
    on NaN or infinity."""
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise ValueError("values must be finite")
    return np.clip(v, -1.0, 1.0)


def encode(values: np.ndarray) -> np.ndarray:
    """Clip to [0, 1] and encode as int64 quanta in [0, 2^FRAC_BITS] (round half to even)."""
    quanta: np.ndarray = np.rint(clip_unit(values) * SCALE).astype(np.int64)
    return quanta


def to_ring(x: np.ndarray) -> np.ndarray:
    """Signed int64 quanta -> elements of Z_2^64 (uint64, two's complement)."""
    return np.asarray(x, dtype=np.int64).view(np.uint64)


def from_ring(y: np.ndarray) -> np.ndarray:
    """Elements of Z_2^64 -> signed int64 (the representative in [-2^63, 2^63))."""
    return np.ascontiguousarray(y, dtype=np.uint64).view(np.int64)


def decode(sums: np.ndarray) -> np.ndarray:
    """Signed int64 quanta -> float64 value units."""
    return np.asarray(sums, dtype=np.int64).astype(np.float64) / SCALE


def noise_bound(n_devices: int, noise_scale_quanta: float, noise_divisor: int, tail_log2: float = 64.0) -> float:
    """A bound T on |Σ_u noise_u| over n devices' shares, exceeded with probability < 2^-tail_log2.

    Each device adds NB(1/d, p) - NB(1/d, p), p = 1 - e^(-a), a = 1/scale, d = ``noise_divisor`` (n_min, or
    n_min - t with t colluders), so the positive parts sum to G ~ NB(n/d, p). Chernoff at θ = a/2:
    P(G >= t) <= E[e^(θG)] e^(-θt) = (p / (1 - e^(-a/2)))^(n/d) e^(-a t/2); the same bound for the
    negative part gives the factor 2 (the extra bit in ``tail_log2 + 1``).
    """
    if noise_scale_quanta <= 0:
        return 0.0
    a = 1.0 / noise_scale_quanta
    log_mgf = n_devices / noise_divisor * (math.log(-math.expm1(-a)) - math.log(-math.expm1(-a / 2)))
    # P(G >= t) <= exp(log_mgf - a t / 2) <= 2^-(tail_log2 + 1)  =>  t = 2 (log_mgf + (tail+1) ln 2) / a
    return float(2.0 * (log_mgf + (tail_log2 + 1) * math.log(2)) / a)


def gaussian_noise_bound(n_devices: int, noise_std_quanta: float, noise_divisor: int,
                         tail_log2: float = 64.0) -> float:
    """A bound T on |Σ_u noise_u| over n devices' discrete-Gaussian shares N_Z(0, s²/d), d = ``noise_divisor``,
    exceeded with probability < 2^-tail_log2: N_Z(0, v) is v-subgaussian (Canonne, Kamath, Steinke 2020), so
    the sum is (n s²/d)-subgaussian and P(|Σ| >= T) <= 2 exp(−T² d/(2 n s²))."""
    if noise_std_quanta <= 0:
        return 0.0
    variance = n_devices / noise_divisor * float(noise_std_quanta) ** 2
    return float(math.sqrt(2.0 * variance * (tail_log2 + 1) * math.log(2)))


def encode_signed(values: np.ndarray) -> np.ndarray:
    """Values already bounded by the caller (centred, clipped) as int64 quanta, rounded to nearest."""
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)) or np.any(np.abs(v) > 1.0):
        raise ValueError("values must be finite and within [-1, 1]")
    return np.rint(v * SCALE).astype(np.int64)


def sum_bound(n_devices: int, noise_scale_quanta: float, noise_divisor: int, tail_log2: float = 64.0) -> float:
    """An upper bound B on |Σ_u (x_u + noise_u)| over n devices, failing with probability < 2^-tail_log2:
    the data, n * 2^FRAC_BITS, plus ``noise_bound``."""
    return float(n_devices * SCALE + noise_bound(n_devices, noise_scale_quanta, noise_divisor, tail_log2))


def plausible_range(n_survivors: int, noise_scale_quanta: float, noise_divisor: int, n_coordinates: int,
                    failure_log2: float = 40.0, bound: Callable[..., float] | None = None,
                    data_range: tuple[float, float] = (0.0, 1.0)) -> tuple[float, float]:
    """[lo, hi] in quanta that every honest released sum of clipped values in [0, 1] (Σ D, or Σ D²) lies in,
    except with probability < 2^-failure_log2 over the whole release of ``n_coordinates`` sums (union bound).

    Honest data lie in n * 2^FRAC_BITS * ``data_range``; the noise widens both ends by ``bound`` (the round's
    mechanism's, ``Mechanism.noise_bound``; default: the discrete Laplace's ``noise_bound``). A device that skips
    its clipping can still hide up to ~that bound per coordinate — no more than the noise already does.
    """
    t = (bound or noise_bound)(n_survivors, noise_scale_quanta, noise_divisor,
                               failure_log2 + math.log2(max(1, n_coordinates)))
    lo, hi = data_range          # one device's entry: [0, 1], or [-½, ½] for the Gaussian mechanism's centred
    return n_survivors * SCALE * lo - t, n_survivors * SCALE * hi + t
