"""The frames between a device and the coordinator's service, besides the device protocol's own
(:mod:`pategail.sdk.messages`) and the secure aggregation's (:mod:`pategail.sdk.secagg.messages`), which they
carry unchanged.

Frame: the secure aggregation's framing (:func:`pategail.sdk.secagg.wire.frame`) with MAGIC "PGNT" and its
own version: MAGIC | version u8 | kind u8 | body length u32 | body | signature length u8 | Ed25519 signature
(64 bytes) over "pategail-net-v1/frame" and everything before the length byte.

- ``Enrolment`` (device → service): the device's public keys and the id it asks for, signed with the very
  signing key it enrols (proof of possession).
- ``Enrolled`` (service → device): the id given, the coordinator's signing key and the SHA-256 of the run's
  bundle, signed by the coordinator. A device pins the coordinator's key the first time (or is given it).
- ``Directory`` (service → device): the public-key directory of the run's devices, signed by the coordinator.
- ``Order`` (service → device): one piece of work — a device-protocol request (``PolicyUpdate``,
  ``RoundRequest``, ``InitialStatesRequest``) or one secure-aggregation step's frames — for one device, with a
  sequence number the device must see increase, signed by the coordinator. Every coordinator message that
  changes a device's state reaches it in an Order, so the SDK verifies its origin, not only its hash.
- ``Pong`` (device → service): the answer to a liveness order (``WORK_PING``, no parts) — the order's device
  id and sequence number, signed by the device: before enrolment closes, a device that enrolled but does not
  answer holds no seat.
"""
from __future__ import annotations

from dataclasses import dataclass

from pategail.sdk.secagg import crypto, wire
from pategail.sdk.secagg.config import DevicePublicKeys, KeyDirectory
from pategail.sdk.secagg.errors import MessageRejected
from pategail.sdk.secagg.wire import Reader, Signer, Writer
from pategail.sdk.secagg_endpoint import SECAGG_STEPS

MAGIC = b"PGNT"
VERSION = 1
KIND_ENROLMENT, KIND_ENROLLED, KIND_DIRECTORY, KIND_ORDER, KIND_PONG = 1, 2, 3, 4, 5
ANY_ID = 0xFFFFFFFF
"""Enrolment: "give me any free id"."""
WORK_REQUEST = "request"
"""Order work: a device-protocol request for :meth:`pategail.sdk.device.Device.handle`."""
WORK_PING = "ping"
"""Order work: a liveness check, answered with a :class:`Pong`."""
WORK_BUNDLE = "bundle"
"""Order work: install the bundle the service now serves (``parts``: its SHA-256, 64 hex characters), answered
with the device's :class:`Pong` once that very bundle is installed (an empty reply otherwise) — the bundle on a
privately released cell table, published after the release."""
WORKS = (WORK_REQUEST,) + SECAGG_STEPS + (WORK_PING, WORK_BUNDLE)
_DOMAIN = b"pategail-net-v1/frame"
MAX_PARTS = 4


def _frame(kind: int, body: bytes, sign: Signer) -> bytes:
    return wire.frame(kind, body, lambda head: sign(_DOMAIN + head), magic=MAGIC, version=VERSION)


def _body(data: bytes, kind: int) -> tuple[bytes, bytes, bytes]:
    """(body, signed bytes, signature) of a frame of ``kind``; MessageRejected when it is not one."""
    body, signed, sig = wire.unframe(bytes(data), kind, magic=MAGIC, version=VERSION)
    if len(sig) != crypto.SIGNATURE_BYTES:
        raise MessageRejected("unsigned frame")
    return body, _DOMAIN + signed, sig


def _verified(data: bytes, kind: int, public: bytes) -> Reader:
    body, signed, sig = _body(data, kind)
    if not crypto.verify(public, sig, signed):
        raise MessageRejected("bad signature")
    return Reader(body)


@dataclass(frozen=True)
class Enrolment:
    """A device's public keys and the id it asks for (``ANY_ID``: any)."""

    keys: DevicePublicKeys
    requested_id: int = ANY_ID

    def to_bytes(self, sign: Signer) -> bytes:
        body = Writer().raw(self.keys.signing).raw(self.keys.envelope).u32(self.requested_id).bytes()
        return _frame(KIND_ENROLMENT, body, sign)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Enrolment":
        """Parsed and checked: the signature must be by the signing key inside."""
        body, signed, sig = _body(data, KIND_ENROLMENT)
        r = Reader(body)
        keys = DevicePublicKeys(r.raw(32), r.raw(32))
        requested = r.u32()
        r.done()
        if not crypto.verify(keys.signing, sig, signed):
            raise MessageRejected("enrolment not signed by the key it enrols")
        crypto.check_x25519_public(keys.envelope)
        return cls(keys, requested)


@dataclass(frozen=True)
class Enrolled:
    """The service's answer to an enrolment."""

    device_id: int
    coordinator: bytes
    """The coordinator's Ed25519 public key: signs every Enrolled, Directory and Order frame."""
    bundle_sha256: str
    """SHA-256 (hex) of the run's model bundle manifest: the device installs exactly this bundle."""

    def to_bytes(self, sign: Signer) -> bytes:
        body = Writer().u32(self.device_id).raw(self.coordinator).raw(bytes.fromhex(self.bundle_sha256)).bytes()
        return _frame(KIND_ENROLLED, body, sign)

    @classmethod
    def from_bytes(cls, data: bytes, pinned: bytes | None) -> "Enrolled":
        """Parsed and checked against the ``pinned`` coordinator key (None: trust the key inside, on first
        use)."""
        body, _, _ = _body(data, KIND_ENROLLED)
        r = Reader(body)
        device_id, coordinator, sha = r.u32(), r.raw(32), r.raw(32).hex()
        r.done()
        if pinned is not None and coordinator != pinned:
            raise MessageRejected("the service's coordinator key is not the one this device is pinned to")
        _verified(data, KIND_ENROLLED, coordinator)
        return cls(device_id, coordinator, sha)


def directory_to_bytes(directory: KeyDirectory, sign: Signer) -> bytes:
    """The signed public-key directory."""
    w = Writer().raw(directory.coordinator).u32(len(directory.devices))
    for device_id, keys in sorted(directory.devices.items()):
        w.u32(device_id).raw(keys.signing).raw(keys.envelope)
    return _frame(KIND_DIRECTORY, w.bytes(), sign)


def directory_from_bytes(data: bytes, coordinator: bytes) -> KeyDirectory:
    """The directory, checked: signed by ``coordinator`` and naming it as the coordinator."""
    r = _verified(data, KIND_DIRECTORY, coordinator)
    if r.raw(32) != coordinator:
        raise MessageRejected("the directory names another coordinator")
    n = r.u32()
    if n > 1 << 20:
        raise MessageRejected("directory too long")
    devices = {}
    for _ in range(n):
        device_id = r.u32()
        devices[device_id] = DevicePublicKeys(r.raw(32), r.raw(32))
    r.done()
    return KeyDirectory(coordinator, devices)


@dataclass(frozen=True)
class Order:
    """One piece of work for one device: ``work`` is ``WORK_REQUEST`` (``parts``: one device-protocol frame),
    a secure-aggregation step (``parts``: its inbox frames), ``WORK_PING`` (none) or ``WORK_BUNDLE`` (the
    bundle's SHA-256); ``seq`` increases with every order."""

    device_id: int
    seq: int
    work: str
    parts: tuple[bytes, ...]

    def to_bytes(self, sign: Signer) -> bytes:
        w = Writer().u32(self.device_id).u64(self.seq).u8(WORKS.index(self.work)).u8(len(self.parts))
        for part in self.parts:
            w.blob(part)
        return _frame(KIND_ORDER, w.bytes(), sign)

    @classmethod
    def from_bytes(cls, data: bytes, coordinator: bytes, device_id: int, max_part: int = 1 << 26) -> "Order":
        """Parsed and checked: signed by ``coordinator``, addressed to ``device_id``."""
        r = _verified(data, KIND_ORDER, coordinator)
        to, seq, work, n = r.u32(), r.u64(), r.u8(), r.u8()
        if to != device_id:
            raise MessageRejected(f"an order for device {to}, not {device_id}")
        if work >= len(WORKS) or n > MAX_PARTS:
            raise MessageRejected("unknown work or too many parts")
        parts = tuple(r.blob(max_part) for _ in range(n))
        r.done()
        return cls(to, seq, WORKS[work], parts)


@dataclass(frozen=True)
class Pong:
    """A device's answer to its liveness order ``seq``."""

    device_id: int
    seq: int

    def to_bytes(self, sign: Signer) -> bytes:
        return _frame(KIND_PONG, Writer().u32(self.device_id).u64(self.seq).bytes(), sign)

    @classmethod
    def from_bytes(cls, data: bytes, device_signing: bytes) -> "Pong":
        """Parsed and checked: signed by the device's ``device_signing`` key."""
        r = _verified(data, KIND_PONG, device_signing)
        pong = cls(r.u32(), r.u64())
        r.done()
        return pong
