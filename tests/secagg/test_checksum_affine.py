"""An aggregator that scales the sums and the checksum together is caught.

A purely linear keyed checksum ⟨r, S⟩ accepts c·S with checksum c·C for any c; the per-device secret offsets
k_u make C = ⟨r, S⟩ + Σ k_u affine, so only c = 1 passes (except with probability ~2^-61).
"""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.secagg import COORDINATOR, TamperDetected
from pategail.sdk.secagg.fixedpoint import from_ring, to_ring
from pategail.sdk.secagg.messages import AggregateResult
from pategail.sdk.secagg.prg import P61
from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

M, N = 16, 8


def _scaling(c: int):
    def adversary(phase, agg, replies):
        if phase != "aggregate":
            return None
        msg = AggregateResult.decode(replies[COORDINATOR])
        scaled = to_ring(from_ring(msg.sums) * np.int64(c))
        return AggregateResult(msg.round_id, msg.config_digest, msg.survivors_bitmap, scaled, (msg.checksum * c) % P61,
                               msg.acks).encode()
    return adversary


def _run(federation, rng, adversary):
    coordinator, clients, _ = federation(N)
    config = SecureRoundConfig(round_id=3, n_min=4, sum_noise_scale=0.01, sq_sum_noise_scale=0.01)
    return run_secure_round(clients, rng.random((N, M)), config, rng, coordinator=coordinator,
                            adversary=adversary)


@pytest.mark.parametrize("c", [0, -1, 2, 5])
def test_scaled_sums_and_checksum_are_detected(federation, rng, c):
    with pytest.raises(TamperDetected, match="round 3"):
        _run(federation, rng, _scaling(c))


def test_unscaled_round_passes(federation, rng):
    """The same adversary with c = 1 changes nothing: the check itself accepts honest aggregates."""
    result = _run(federation, rng, _scaling(1))
    assert result.n_survivors == N and np.all(result.sum > 0)
