"""The keyed affine checksum that lets the coordinator detect a tampered aggregate (device side).

Construction. Per round the coordinator draws a 32-byte key K and, for every participant u, a secret offset
k_u uniform in Z_p, p = 2^61 - 1. It seals (K, k_u) to u in an envelope the aggregator relays but cannot open
(AES-GCM under HKDF(X25519(coordinator's ephemeral key, device's envelope key)), bound to the hash of the
signed round configuration). From K both sides expand weights r_1..r_2M in Z_p. A device appends

    c_u = Σ_i r_i x_u,i + k_u  (mod p)

(x_u,i its encoded value + noise share, as a signed integer) as the last, Z_p-valued, slot of its upload; the
masks of that slot cancel in Z_p like the others do in Z_2^64, so the aggregate carries C = Σ_{u ∈ U3} c_u.
The coordinator checks C ≡ Σ_i r_i S_i + Σ_{u ∈ U} k_u (mod p), with U the survivor set the aggregate
claims — which must also be the set the devices signed (``server.secagg.coordinator``).

What it protects (an aggregator, or the network, that knows neither K nor any k_u):
- any change of the sums S by Δ ≠ 0: passes with probability <= 1/p ~ 2^-61, unless every Δ_i is a multiple
  of p, which the coordinator's range check (|S_i| < 2^60 < p/2, see ``fixedpoint``) rejects;
- scaling the sums and the checksum together by c ≠ 1 (0 zeroes every reward, -1 flips them): passes only
  if (c - 1) Σ k_u ≡ 0, probability 1/p — the offsets are what a purely linear ⟨r, x⟩ lacked;
- adding a device to, or removing one from, the claimed survivor set while the sums stay the same: the
  check then needs an offset k_w the aggregator never learns, probability 1/p.

What it does NOT protect:
- a device's own input: a device knows K and its k_u, so it can send any x_u with a matching c_u. That is
  bounded by the coordinator's plausibility check on the released sums and by the device's clipping only
  when the device is honest (see docs/threat-model.md);
- an aggregator colluding with a contributing device: that device knows K, hence r, and the pair can alter
  the sums by any Δ with ⟨r, Δ⟩ ≡ 0 (the offsets still pin the survivor set);
- a dishonest coordinator: it draws K and the offsets; the checksum is for the coordinator's own benefit;
- a device that corrupts its checksum word: the check fails, but the coordinator cannot tell that device from
  a tampering aggregator (it learns only C). Honest devices are never blamed wrongly; the round is void.
"""
from __future__ import annotations

import hashlib
import struct
from operator import mul

import numpy as np

from . import crypto
from .errors import MessageRejected
from .prg import P61, expand_uint64

_SECRETS = struct.Struct(">32sQ")


def weights(key: bytes, n: int) -> list[int]:
    """The checksum weights r_1..r_n in Z_P61 expanded from the round's checksum key."""
    return [w % P61 for w in expand_uint64(crypto.hkdf(key, b"checksum-weights"), n).tolist()]


def checksum(values: np.ndarray, w: list[int], offset: int) -> int:
    """Σ_i w_i x_i + offset mod P61 for signed int64 ``values`` (exact, in Python integers)."""
    total: int = (sum(map(mul, w, np.asarray(values, dtype=np.int64).tolist())) + offset) % P61
    return total


def key_commitment(key: bytes) -> bytes:
    """SHA-256 commitment to the round's checksum key K, signed in the round configuration: one key for all
    devices of a round."""
    return hashlib.sha256(b"pategail-secagg/checksum-key" + key).digest()


def pack_secrets(key: bytes, offset: int) -> bytes:
    """The envelope's plaintext: the round's checksum key K and the device's offset k_u (in Z_P61)."""
    return _SECRETS.pack(key, offset)


def unpack_secrets(plain: bytes) -> tuple[bytes, int]:
    """Inverse of ``pack_secrets``; anything malformed is a rejected envelope."""
    if len(plain) != _SECRETS.size:
        raise MessageRejected("checksum envelope of the wrong size")
    key, offset = _SECRETS.unpack(plain)
    if offset >= P61:
        raise MessageRejected("checksum offset outside Z_p")
    return key, offset


def envelope_aad(config_digest: bytes, device: int) -> bytes:
    return b"checksum-envelope" + config_digest + struct.pack(">I", device)


def envelope_key(shared_secret: bytes, config_digest: bytes, device: int) -> bytes:
    """AES-GCM key of the envelope of ``device`` in the round with configuration digest ``config_digest``."""
    return crypto.hkdf(shared_secret, b"envelope", device, salt=config_digest)
