"""The keyed linear checksum that lets the coordinator detect a tampered aggregate (device side).

The coordinator draws a 32-byte key K per round and seals it to each contributing device (an envelope the
aggregator relays but cannot open: AES-GCM under HKDF(X25519(coordinator's ephemeral key, device's
envelope key)), the ephemeral public key being part of the signed round configuration). From K both sides
expand weights r_1..r_2M in Z_p, p = 2^61 - 1. A device appends c_u = Σ_i r_i x_u,i mod p (x_u,i its
encoded value + noise share, as a signed integer) as the last, Z_p-valued, slot of its upload; the masks of
that slot cancel in Z_p like the others do in Z_2^64, so the aggregate carries C = Σ_u c_u mod p and the
coordinator learns nothing beyond the sums it is entitled to.

Check: Σ_i r_i S_i ≡ C (mod p) for the decoded sums S. An aggregator that does not know K and changes the
sums by Δ passes with probability <= 1/p ~ 2^-61 per attempt — unless every Δ_i is a multiple of p, which a
coordinator-side range check (|S_i| < 2^60 < p/2, see ``fixedpoint``) rejects. It does not detect a device left
out of the sum: that is a dropout, bounded below by n_min.
"""
from __future__ import annotations

import struct
from operator import mul

import numpy as np

from . import crypto
from .prg import P61, expand_uint64


def weights(key: bytes, n: int) -> list[int]:
    """The checksum weights r_1..r_n in Z_P61 expanded from the round's checksum key."""
    return [w % P61 for w in expand_uint64(crypto.hkdf(key, b"checksum-weights"), n).tolist()]


def checksum(values: np.ndarray, w: list[int]) -> int:
    """Σ_i w_i x_i mod P61 for signed int64 ``values`` (exact, in Python integers)."""
    return sum(map(mul, w, np.asarray(values, dtype=np.int64).tolist())) % P61


def envelope_aad(round_id: int, device: int) -> bytes:
    return b"checksum-envelope" + struct.pack(">QI", round_id, device)


def envelope_key(shared_secret: bytes, round_id: int, device: int) -> bytes:
    """AES-GCM key of the envelope of ``device`` in ``round_id``."""
    return crypto.hkdf(shared_secret, b"envelope", round_id, device)
