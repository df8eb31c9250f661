"""The coordinator's half of the keyed affine checksum: seal (K, k_u) to each device, check the aggregate.

See ``pategail.sdk.secagg.checksum`` for the construction, its forgery bound (~2^-61 per attempt) and what it
does not protect.
The envelope is AES-GCM under HKDF(X25519(coordinator's ephemeral key of the round, device's long-term
envelope key)); the ephemeral public key is inside the coordinator-signed round configuration, so an
aggregator can neither open an envelope nor substitute its own.
"""
from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.sdk.secagg import crypto
from pategail.sdk.secagg.checksum import checksum, envelope_aad, envelope_key, pack_secrets, weights
from pategail.sdk.secagg.errors import TamperDetected
from pategail.sdk.secagg.fixedpoint import SAFE_ABS_SUM, from_ring
from pategail.sdk.secagg.messages import ChecksumEnvelope


def seal_envelope(ephemeral: X25519PrivateKey, device_envelope_public: bytes, round_id: int,
                  config_digest: bytes, device: int, checksum_key: bytes, offset: int) -> bytes:
    """The ChecksumEnvelope bytes carrying ``checksum_key`` and the device's ``offset`` k_u to ``device``
    (only that device can open it)."""
    shared = crypto.agree(ephemeral, device_envelope_public)
    sealed = crypto.seal(envelope_key(shared, config_digest, device), pack_secrets(checksum_key, offset),
                         envelope_aad(config_digest, device))
    return ChecksumEnvelope(round_id, device, sealed).encode()


def verify_aggregate(sums_ring: np.ndarray, aggregate_checksum: int, checksum_key: bytes, offsets_sum: int,
                     round_id: int) -> np.ndarray:
    """Signed int64 sums after checking range and keyed checksum; raises TamperDetected on a mismatch.

    ``offsets_sum`` is Σ k_u over the survivor set the aggregate claims (mod p): the check holds only when
    that set is the one whose inputs are in the sum.

    Range first: an honest sum is inside (-2^60, 2^60) (see ``fixedpoint.sum_bound``); a change by a
    non-zero multiple of p = 2^61 - 1 > 2 * 2^60, invisible to the checksum, always leaves that range.
    """
    sums = from_ring(sums_ring)
    # integer comparisons: a float64 copy rounds 2^60 - 1 up to 2^60, and np.abs(-2^63) stays negative
    if np.any((sums >= SAFE_ABS_SUM) | (sums <= -SAFE_ABS_SUM)):
        raise TamperDetected(f"round {round_id}: aggregate outside the feasible range (wrap-around or tampering)")
    if checksum(sums, weights(checksum_key, sums.size), offsets_sum) != aggregate_checksum:
        # the coordinator sees only C: it cannot tell a tampering aggregator from a device that corrupted its
        # own checksum word, so it names neither
        raise TamperDetected(f"round {round_id}: keyed checksum mismatch — the aggregate, its survivor set or "
                             "a device's checksum word was altered; nothing released")
    return sums
