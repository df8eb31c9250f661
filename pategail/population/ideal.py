"""The ideal functionality of the secure noisy aggregation: what the real protocol releases, computed
directly — the exact sum of the contributors' clipped, fixed-point-encoded vectors plus one draw of the noise
their shares add up to.

In the real protocol (pategail.sdk.secagg.client.masked_input) every device whose masked input reaches the
aggregator adds ``discrete_laplace_share(scale, n_min − t, M)`` to each of its Σ D and Σ D² slots; the
release carries the sum of those shares over the S contributors. :func:`distributed_noise` draws that sum
with the SDK's own share function (so a change of mechanism there changes it here) in ⌈S / d⌉ calls rather
than S: the shares are infinitely divisible, d shares of divisor d add up to one share of divisor 1, and the
remaining r = S mod d shares to one share of divisor d / r.
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.secagg.noise import discrete_laplace_share


def distributed_noise(scale_quanta: float, divisor: int, contributors: int, size: int) -> np.ndarray:
    """int64 (size,): the sum over ``contributors`` devices of one noise share each (scale in quanta, shares
    sized for ``divisor`` = n_min − colluders devices), drawn from the CSPRNG like the devices' shares."""
    if contributors < 1 or divisor < 1:
        raise ValueError("contributors and divisor must be at least 1")
    whole, rest = divmod(contributors, divisor)
    total = np.zeros(size, dtype=np.int64)
    for _ in range(whole):
        total += discrete_laplace_share(scale_quanta, 1, size)
    if rest:
        total += discrete_laplace_share(scale_quanta, divisor / rest, size)
    return total
