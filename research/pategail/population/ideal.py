"""The ideal functionality of the secure noisy aggregation: what the real protocol releases, computed
directly — the exact sum of the contributors' clipped, fixed-point-encoded vectors plus one draw of the noise
their shares add up to.

In the real protocol (pategail.sdk.secagg.client.masked_input) every device whose masked input reaches the
aggregator adds ``Mechanism.noise_share(scale, n_min − t, M)`` to each released slot; the release carries
the sum of those shares over the S contributors. :func:`distributed_noise` draws that sum with the SDK's own
share function. Discrete-Laplace shares (differences of negative binomials) are infinitely divisible: d shares
of divisor d add up to one share of divisor 1, and the remaining r = S mod d shares to one share of divisor
d / r, so ⌈S / d⌉ calls do. A sum of discrete-Gaussian shares is not itself a discrete Gaussian, but it is
within a divergence τ of the one of S times their variance (Kairouz, Liu and Steinke 2021: the τ the accountant
already adds to every release, ``pategail.sdk.accounting.discrete_gaussian_tau``), and τ vanishes as the shares'
standard deviation grows: below ``SUM_TAU`` one draw of that discrete Gaussian stands for the sum. That is every
release a run makes (a share's standard deviation is millions of quanta: 2^24 quanta to a value unit), and it
turns a 10,000-device release of a 189,000-value model delta from ~90 s of draws into milliseconds. Smaller
shares are drawn one per contributor, as the devices draw them (in chunks, to bound memory).
"""
from __future__ import annotations

import math

import numpy as np

from pategail.sdk.accounting import discrete_gaussian_tau
from pategail.sdk.secagg.mechanisms import mechanism as mechanism_named

CHUNK_VALUES = 1 << 23
"""Most noise values drawn at once for the discrete-Gaussian sum (64 MiB of int64)."""
SUM_TAU = 2.0 ** -64
"""The divergence below which one discrete Gaussian stands for a sum of discrete-Gaussian shares (τ is below it
for a share's standard deviation above ~2.3 quanta at 10,000 contributors)."""


def distributed_noise(scale_quanta: float, divisor: int, contributors: int, size: int,
                      mechanism: str = "laplace") -> np.ndarray:
    """int64 (size,): the sum over ``contributors`` devices of one noise share each (total scale, or standard
    deviation for ``mechanism`` "gaussian", in quanta; shares sized for ``divisor`` = n_min − colluders
    devices), drawn from the CSPRNG like the devices' shares."""
    if contributors < 1 or divisor < 1:
        raise ValueError("contributors and divisor must be at least 1")
    total = np.zeros(size, dtype=np.int64)
    noise = mechanism_named(mechanism)
    if noise.divisible:
        whole, rest = divmod(contributors, divisor)
        for _ in range(whole):
            total += noise.noise_share(scale_quanta, 1, size)
        if rest:
            total += noise.noise_share(scale_quanta, divisor / rest, size)
        return total
    if discrete_gaussian_tau(scale_quanta / math.sqrt(divisor), contributors) < SUM_TAU:
        return noise.noise_share(scale_quanta * math.sqrt(contributors), divisor, size)
    per_chunk = max(1, CHUNK_VALUES // max(1, size))
    for start in range(0, contributors, per_chunk):
        k = min(per_chunk, contributors - start)
        total += noise.noise_share(scale_quanta, divisor, k * size).reshape(k, size).sum(axis=0)
    return total
