"""The device's long-term secure-aggregation identity, made at first start and kept in the app's storage."""
from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from pategail.sdk.errors import DeviceError
from pategail.sdk.files import write_atomic
from pategail.sdk.secagg.crypto import DeviceIdentity

IDENTITY_FILE = "identity.key"


def load_or_create_identity(path: Path) -> DeviceIdentity:
    """The device's long-term secure-aggregation keys, made at first start and kept (mode 0600) in ``path``:
    32 raw Ed25519 private bytes then 32 raw X25519 private bytes."""
    if path.is_file():
        raw = path.read_bytes()
        if len(raw) != 64:
            raise DeviceError(f"{path}: not an identity file (expected 64 bytes); delete it to enrol again")
        return DeviceIdentity(Ed25519PrivateKey.from_private_bytes(raw[:32]),
                              X25519PrivateKey.from_private_bytes(raw[32:]))
    identity = DeviceIdentity.generate()
    encoding = serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    write_atomic(path, identity.signing_key.private_bytes(*encoding) + identity.envelope_key.private_bytes(*encoding),
                 0o600)
    return identity
