"""Typed, versioned protocol messages (frozen dataclasses) and their validated byte forms.

Every message carries (round_id, config_digest) first — the digest is SHA-256 of the coordinator-signed
round configuration (``RoundConfig.digest``), so a message of one configuration is never taken for a message
of another that happens to share its round id (a coordinator restarted, an aborted attempt).
Device -> aggregator messages then carry the sender and are Ed25519-signed by the sender's identity
key; ``decode`` checks the frame, the signature against the directory, and field shapes, and raises
MessageRejected on anything wrong. Aggregator -> device messages are unsigned: their contents are either
signed by someone else (forwarded device messages), authenticated by AES-GCM (shares, envelopes), or checked
by the devices against each other (the survivor set, via the signed acknowledgements).

Flow: AdvertiseKeys -> RelayedFrames (key broadcast) -> ShareKeys -> ShareDelivery -> MaskedInput -> SurvivorSet ->
SurvivorAck -> RelayedFrames (ack set) -> UnmaskShares -> AggregateResult (to the coordinator).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

import numpy as np

from . import crypto
from .config import KeyDirectory
from .errors import MessageRejected
from .shamir import SHARE_BYTES
from .wire import Reader, Signer, Writer, frame, unframe

(KIND_ENVELOPE, KIND_ADVERTISE, KIND_KEY_BROADCAST, KIND_SHARE_KEYS, KIND_SHARE_DELIVERY, KIND_MASKED_INPUT,
 KIND_SURVIVORS, KIND_ACK, KIND_ACK_SET, KIND_UNMASK, KIND_AGGREGATE) = range(2, 13)


DIGEST_BYTES = 32


class RoundMessage(Protocol):
    """What every message of a round carries first (checked against the current round before anything else)."""

    @property
    def round_id(self) -> int: ...

    @property
    def config_digest(self) -> bytes: ...


def _open_signed(data: bytes, kind: int, directory: KeyDirectory) -> tuple[Reader, int, bytes, int]:
    body, signed, sig = unframe(data, kind)
    r = Reader(body)
    round_id, digest, sender = r.u64(), r.raw(DIGEST_BYTES), r.u32()
    if not sig:
        raise MessageRejected("unsigned message")
    if not crypto.verify(directory.signing_key(sender), sig, signed):
        raise MessageRejected(f"bad signature on a message from device {sender}")
    return r, round_id, digest, sender


def _head(round_id: int, config_digest: bytes) -> Writer:
    if len(config_digest) != DIGEST_BYTES:
        raise ValueError("config_digest is the 32-byte SHA-256 of the signed round configuration")
    return Writer().u64(round_id).raw(config_digest)


def _read_head(data: bytes, kind: int) -> tuple[Reader, int, bytes]:
    r = Reader(unframe(data, kind)[0])
    return r, r.u64(), r.raw(DIGEST_BYTES)


def _pairs(r: Reader, size: int | None) -> tuple[tuple[int, bytes], ...]:
    out = []
    for _ in range(r.u32()):
        who = r.u32()
        out.append((who, r.raw(size) if size else r.blob(1 << 12)))
    if len({w for w, _ in out}) != len(out):
        raise MessageRejected("duplicate entries")
    return tuple(out)


def _write_pairs(w: Writer, pairs: Sequence[tuple[int, bytes]], sized: bool) -> Writer:
    w.u32(len(pairs))
    for who, data in pairs:
        w.u32(who)
        w.raw(data) if sized else w.blob(data)
    return w


def to_bitmap(members: Iterable[int], participants: tuple[int, ...]) -> bytes:
    """A bit per participant, in participant order: set when the participant is in ``members``."""
    members = set(members)
    bits = np.array([p in members for p in participants], dtype=bool)
    return np.packbits(bits).tobytes()


def from_bitmap(bitmap: bytes, participants: tuple[int, ...]) -> tuple[int, ...]:
    """Inverse of ``to_bitmap``; a bitmap of the wrong size or with padding bits set is rejected."""
    n = len(participants)
    if len(bitmap) != (n + 7) // 8:
        raise MessageRejected("survivor bitmap of the wrong size")
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8))
    if bits[n:].any():
        raise MessageRejected("survivor bitmap padding set")
    return tuple(p for p, b in zip(participants, bits[:n]) if b)


@dataclass(frozen=True)
class ChecksumEnvelope:
    """Coordinator -> device, relayed by the aggregator: the round's checksum key, sealed to the device."""

    round_id: int
    device: int
    sealed: bytes

    def encode(self) -> bytes:
        return frame(KIND_ENVELOPE, Writer().u64(self.round_id).u32(self.device).blob(self.sealed).bytes())

    @classmethod
    def decode(cls, data: bytes) -> "ChecksumEnvelope":
        r = Reader(unframe(data, KIND_ENVELOPE)[0])
        out = cls(r.u64(), r.u32(), r.blob(256))
        r.done()
        return out


@dataclass(frozen=True)
class AdvertiseKeys:
    """Device -> aggregator (signed): the device's two X25519 public keys of this round."""

    round_id: int
    config_digest: bytes
    sender: int
    c_public: bytes
    """Key agreement for encrypting shares."""
    s_public: bytes
    """Key agreement for pairwise mask seeds."""

    def encode(self, sign: Signer) -> bytes:
        body = _head(self.round_id, self.config_digest).u32(self.sender).raw(self.c_public).raw(self.s_public)
        return frame(KIND_ADVERTISE, body.bytes(), sign)

    @classmethod
    def decode(cls, data: bytes, directory: KeyDirectory) -> "AdvertiseKeys":
        r, round_id, digest, sender = _open_signed(data, KIND_ADVERTISE, directory)
        out = cls(round_id, digest, sender, r.raw(32), r.raw(32))
        r.done()
        if out.c_public == out.s_public:
            raise MessageRejected("the two advertised keys must differ")
        return out


@dataclass(frozen=True)
class RelayedFrames:
    """Aggregator -> device: signed device frames relayed unchanged to one device — with ``kind``
    ``KIND_KEY_BROADCAST`` the AdvertiseKeys of its neighbours (U1 ∩ N(u)), with ``KIND_ACK_SET`` the
    SurvivorAcks of its neighbours in U4. The device checks every frame's own signature."""

    kind: int
    round_id: int
    config_digest: bytes
    frames: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if self.kind not in (KIND_KEY_BROADCAST, KIND_ACK_SET):
            raise ValueError(f"not a relayed-frames kind: {self.kind}")

    def encode(self) -> bytes:
        w = _head(self.round_id, self.config_digest).u32(len(self.frames))
        for f in self.frames:
            w.blob(f)
        return frame(self.kind, w.bytes())

    @classmethod
    def decode(cls, data: bytes, kind: int) -> "RelayedFrames":
        r, round_id, digest = _read_head(data, kind)
        out = cls(kind, round_id, digest, tuple(r.blob(1024) for _ in range(r.u32())))
        r.done()
        return out


@dataclass(frozen=True)
class ShareKeys:
    """Device -> aggregator (signed): one AES-GCM ciphertext of (b_u share, s_u share) per neighbour."""

    round_id: int
    config_digest: bytes
    sender: int
    shares: tuple[tuple[int, bytes], ...]
    """(recipient, nonce || ciphertext) pairs."""

    def encode(self, sign: Signer) -> bytes:
        w = _head(self.round_id, self.config_digest).u32(self.sender)
        return frame(KIND_SHARE_KEYS, _write_pairs(w, self.shares, sized=False).bytes(), sign)

    @classmethod
    def decode(cls, data: bytes, directory: KeyDirectory) -> "ShareKeys":
        r, round_id, digest, sender = _open_signed(data, KIND_SHARE_KEYS, directory)
        out = cls(round_id, digest, sender, _pairs(r, None))
        r.done()
        return out


@dataclass(frozen=True)
class ShareDelivery:
    """Aggregator -> device: the ciphertexts addressed to ``recipient``, by sender (defines U2 ∩ N(u))."""

    round_id: int
    config_digest: bytes
    recipient: int
    shares: tuple[tuple[int, bytes], ...]

    def encode(self) -> bytes:
        w = _head(self.round_id, self.config_digest).u32(self.recipient)
        return frame(KIND_SHARE_DELIVERY, _write_pairs(w, self.shares, sized=False).bytes())

    @classmethod
    def decode(cls, data: bytes) -> "ShareDelivery":
        r, round_id, digest = _read_head(data, KIND_SHARE_DELIVERY)
        out = cls(round_id, digest, r.u32(), _pairs(r, None))
        r.done()
        return out


@dataclass(frozen=True, eq=False)
class MaskedInput:
    """Device -> aggregator (signed): y_u, uint64 of length 2M + 1 (last word in Z_P61)."""

    round_id: int
    config_digest: bytes
    sender: int
    vector: np.ndarray

    def encode(self, sign: Signer) -> bytes:
        body = _head(self.round_id, self.config_digest).u32(self.sender).words(self.vector)
        return frame(KIND_MASKED_INPUT, body.bytes(), sign)

    @classmethod
    def decode(cls, data: bytes, directory: KeyDirectory) -> "MaskedInput":
        r, round_id, digest, sender = _open_signed(data, KIND_MASKED_INPUT, directory)
        out = cls(round_id, digest, sender, r.words())
        r.done()
        return out


@dataclass(frozen=True)
class SurvivorSet:
    """Aggregator -> device: U3, the devices whose masked input is in the sum, as a bitmap."""

    round_id: int
    config_digest: bytes
    bitmap: bytes

    def encode(self) -> bytes:
        return frame(KIND_SURVIVORS, _head(self.round_id, self.config_digest).blob(self.bitmap).bytes())

    @classmethod
    def decode(cls, data: bytes) -> "SurvivorSet":
        r, round_id, digest = _read_head(data, KIND_SURVIVORS)
        out = cls(round_id, digest, r.blob(1 << 14))
        r.done()
        return out


@dataclass(frozen=True)
class SurvivorAck:
    """Device -> aggregator (signed), forwarded to neighbours: "I saw this survivor set" (SHA-256 of U3)."""

    round_id: int
    config_digest: bytes
    sender: int
    digest: bytes
    """``survivor_digest`` of the survivor bitmap the device saw."""

    def encode(self, sign: Signer) -> bytes:
        body = _head(self.round_id, self.config_digest).u32(self.sender).raw(self.digest)
        return frame(KIND_ACK, body.bytes(), sign)

    @classmethod
    def decode(cls, data: bytes, directory: KeyDirectory) -> "SurvivorAck":
        r, round_id, digest, sender = _open_signed(data, KIND_ACK, directory)
        out = cls(round_id, digest, sender, r.raw(32))
        r.done()
        return out


@dataclass(frozen=True)
class UnmaskShares:
    """Device -> aggregator (signed): shares of b_v for surviving neighbours, of s_v for dropped ones."""

    round_id: int
    config_digest: bytes
    sender: int
    b_shares: tuple[tuple[int, bytes], ...]
    s_shares: tuple[tuple[int, bytes], ...]

    def encode(self, sign: Signer) -> bytes:
        w = _write_pairs(_head(self.round_id, self.config_digest).u32(self.sender), self.b_shares, sized=True)
        return frame(KIND_UNMASK, _write_pairs(w, self.s_shares, sized=True).bytes(), sign)

    @classmethod
    def decode(cls, data: bytes, directory: KeyDirectory) -> "UnmaskShares":
        r, round_id, digest, sender = _open_signed(data, KIND_UNMASK, directory)
        out = cls(round_id, digest, sender, _pairs(r, SHARE_BYTES), _pairs(r, SHARE_BYTES))
        r.done()
        if {v for v, _ in out.b_shares} & {v for v, _ in out.s_shares}:
            raise MessageRejected("both secrets of one device revealed")
        return out


@dataclass(frozen=True, eq=False)
class AggregateResult:
    """Aggregator -> coordinator: Σ x_u over U3 in Z_2^64 (2M words), the checksum sum in Z_P61, and the
    signed SurvivorAck frames (U4) that bind the survivor bitmap to what the devices saw."""

    round_id: int
    config_digest: bytes
    survivors_bitmap: bytes
    sums: np.ndarray
    checksum: int
    acks: tuple[bytes, ...] = ()

    def encode(self) -> bytes:
        w = _head(self.round_id, self.config_digest).blob(self.survivors_bitmap).words(self.sums)
        w.u64(self.checksum)
        w.u32(len(self.acks))
        for a in self.acks:
            w.blob(a)
        return frame(KIND_AGGREGATE, w.bytes())

    @classmethod
    def decode(cls, data: bytes) -> "AggregateResult":
        r, round_id, digest = _read_head(data, KIND_AGGREGATE)
        bitmap, sums, checksum = r.blob(1 << 14), r.words(), r.u64()
        n_acks = r.u32()
        if n_acks > 8 * len(bitmap):
            raise MessageRejected("more acknowledgements than participants")
        out = cls(round_id, digest, bitmap, sums, checksum, tuple(r.blob(1024) for _ in range(n_acks)))
        r.done()
        return out
