"""The coordinator's half of the keyed checksum: seal the per-round key to each device, check the aggregate.

See ``pategail.sdk.secagg.checksum`` for the construction and its forgery bound (~2^-61 per attempt).
The envelope is AES-GCM under HKDF(X25519(coordinator's ephemeral key of the round, device's long-term
envelope key)); the ephemeral public key is inside the coordinator-signed round configuration, so an
aggregator can neither open an envelope nor substitute its own.
"""
from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.sdk.secagg import crypto
from pategail.sdk.secagg.checksum import checksum, envelope_aad, envelope_key, weights
from pategail.sdk.secagg.errors import TamperDetected
from pategail.sdk.secagg.fixedpoint import SAFE_ABS_SUM, from_ring
from pategail.sdk.secagg.messages import ChecksumEnvelope


def seal_envelope(ephemeral: X25519PrivateKey, device_envelope_public: bytes, round_id: int, device: int,
                  checksum_key: bytes) -> bytes:
    """The ChecksumEnvelope bytes carrying ``checksum_key`` to ``device`` (only that device can open it)."""
    shared = crypto.agree(ephemeral, device_envelope_public)
    sealed = crypto.seal(envelope_key(shared, round_id, device), checksum_key, envelope_aad(round_id, device))
    return ChecksumEnvelope(round_id, device, sealed).encode()


def verify_aggregate(sums_ring: np.ndarray, aggregate_checksum: int, checksum_key: bytes) -> np.ndarray:
    """Signed int64 sums after checking range and keyed checksum; raises TamperDetected on a mismatch.

    Range first: an honest sum is inside (-2^60, 2^60) (see ``fixedpoint.sum_bound``); a change by a
    non-zero multiple of p = 2^61 - 1 > 2 * 2^60, invisible to the checksum, always leaves that range.
    """
    sums = from_ring(sums_ring)
    # integer comparisons: a float64 copy rounds 2^60 - 1 up to 2^60, and np.abs(-2^63) stays negative
    if np.any((sums >= SAFE_ABS_SUM) | (sums <= -SAFE_ABS_SUM)):
        raise TamperDetected("aggregate outside the feasible range (wrap-around or tampering)")
    if checksum(sums, weights(checksum_key, sums.size)) != aggregate_checksum:
        raise TamperDetected("keyed checksum mismatch: the aggregate was altered")
    return sums
