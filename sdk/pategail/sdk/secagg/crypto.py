"""The cryptographic primitives of the protocol, all from ``cryptography``, with domain-separated key derivation.

- Ed25519 identity keys sign every device message and the coordinator's round configuration.
- X25519 per-round key pairs: (c) for encrypting Shamir shares, (s) for pairwise mask seeds; a long-term
  X25519 key per device receives the coordinator's sealed checksum key.
- HKDF-SHA256 turns each X25519 secret into exactly one key; the ``info`` string names the purpose, the round,
  and the ordered pair of devices, so every key is used once and a key per direction exists for encryption.
- AES-256-GCM (random 96-bit nonce, associated data binding round and endpoints) encrypts shares and envelopes.
"""
from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from .errors import MessageRejected

KEY_BYTES = 32
SIGNATURE_BYTES = 64
NONCE_BYTES = 12
_RAW: dict[str, Any] = dict(encoding=serialization.Encoding.Raw, format=serialization.PublicFormat.Raw)
_LABEL = b"pategail-secagg-v1/"


def public_bytes(key: X25519PrivateKey | Ed25519PrivateKey) -> bytes:
    """The raw 32-byte public key of a private key."""
    return key.public_key().public_bytes(**_RAW)


def private_bytes(key: X25519PrivateKey) -> bytes:
    """The raw 32 bytes of an X25519 private key (what gets Shamir-shared)."""
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                             serialization.NoEncryption())


def hkdf(secret: bytes, purpose: bytes, *context: int, salt: bytes | None = None) -> bytes:
    """A 32-byte key for ``purpose`` bound to integer ``context`` (device ids), from a DH secret; ``salt`` is
    the round configuration's digest where the key belongs to one round."""
    info = _LABEL + purpose + b"".join(struct.pack(">Q", c) for c in context)
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=salt, info=info).derive(secret)


_PROBE = X25519PrivateKey.from_private_bytes(hashlib.sha256(b"pategail-secagg/x25519-probe").digest())


def check_x25519_public(public: bytes) -> None:
    """Refuse an X25519 public key every exchange with fails: the all-zero key and the other low-order
    points give the all-zero shared secret for any private key. A device advertising one would make each
    honest neighbour stop (its exchange fails), so the aggregator and the coordinator refuse it at the door.
    Raises MessageRejected."""
    agree(_PROBE, public)


def agree(private: X25519PrivateKey, peer_public: bytes) -> bytes:
    """X25519 shared secret; rejects malformed or low-order peer keys as a rejected message."""
    try:
        return private.exchange(X25519PublicKey.from_public_bytes(peer_public))
    except ValueError as err:
        raise MessageRejected(f"bad X25519 public key: {err}") from None


def mask_seed(private: X25519PrivateKey, peer_public: bytes, config_digest: bytes, u: int, v: int) -> bytes:
    """The pairwise mask seed s_uv = s_vu of the round with configuration digest ``config_digest`` (both ends
    derive it; ids in increasing order)."""
    return hkdf(agree(private, peer_public), b"mask", min(u, v), max(u, v), salt=config_digest)


def share_key(shared_secret: bytes, config_digest: bytes, sender: int, recipient: int) -> bytes:
    """The AES-GCM key for shares sent from ``sender`` to ``recipient`` (one key per direction), from the
    X25519 secret of their c-keys (computed once, used for both directions)."""
    return hkdf(shared_secret, b"share", sender, recipient, salt=config_digest)


def seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """nonce || AES-256-GCM(plaintext) with associated data ``aad``."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def open_sealed(key: bytes, blob: bytes, aad: bytes) -> bytes:
    """Inverse of ``seal``; any tampering (or a wrong key / aad) raises MessageRejected."""
    try:
        return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
    except (InvalidTag, ValueError):
        raise MessageRejected("authenticated decryption failed") from None


def verify(public: bytes, signature: bytes, data: bytes) -> bool:
    """True when ``signature`` is a valid Ed25519 signature of ``data`` under the raw public key."""
    if len(signature) != SIGNATURE_BYTES or len(public) != KEY_BYTES:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, data)
        return True
    except (InvalidSignature, ValueError):
        return False


@dataclass(frozen=True)
class DeviceIdentity:
    """A device's long-term keys: Ed25519 to sign, X25519 to receive the coordinator's sealed envelopes."""

    signing_key: Ed25519PrivateKey
    envelope_key: X25519PrivateKey

    @classmethod
    def generate(cls) -> "DeviceIdentity":
        """Fresh keys from the operating system's CSPRNG."""
        return cls(Ed25519PrivateKey.generate(), X25519PrivateKey.generate())

    def sign(self, data: bytes) -> bytes:
        return self.signing_key.sign(data)

    @property
    def signing_public(self) -> bytes:
        return public_bytes(self.signing_key)

    @property
    def envelope_public(self) -> bytes:
        return public_bytes(self.envelope_key)
