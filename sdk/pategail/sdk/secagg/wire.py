"""Binary framing of protocol messages: what crosses the network, and the first line of validation.

Frame: MAGIC "PGSA" | version u8 | kind u8 | body length u32 | body | signature length u8 | signature.
The signature (Ed25519, 64 bytes, or absent) covers everything before it, so a signed frame binds its kind
and protocol version. Bodies are written with ``Writer`` and read with ``Reader``; every read is bounds
checked and a frame must be consumed exactly — trailing or missing bytes are a rejected message.
"""
from __future__ import annotations

import struct
from typing import Callable, Iterable

import numpy as np

from .errors import MessageRejected

MAGIC = b"PGSA"
VERSION = 3
"""3: the round configuration commits to the checksum key; devices reveal shares only under a survivor set
certified by a majority of the participants (2: every message carries the round configuration's digest; the
aggregate carries the survivors' acks)."""
_HEAD = struct.Struct(">4sBBI")
Signer = Callable[[bytes], bytes]
"""Signs the bytes of a frame: an identity key's ``sign``."""


class Writer:
    """Appends big-endian fields to a body."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def u8(self, v: int) -> "Writer":
        self._parts.append(struct.pack(">B", v))
        return self

    def u32(self, v: int) -> "Writer":
        self._parts.append(struct.pack(">I", v))
        return self

    def u64(self, v: int) -> "Writer":
        self._parts.append(struct.pack(">Q", v))
        return self

    def f64(self, v: float) -> "Writer":
        self._parts.append(struct.pack(">d", v))
        return self

    def raw(self, data: bytes) -> "Writer":
        self._parts.append(bytes(data))
        return self

    def blob(self, data: bytes) -> "Writer":
        return self.u32(len(data)).raw(data)

    def u32s(self, values: Iterable[int]) -> "Writer":
        items = list(values)
        return self.u32(len(items)).raw(struct.pack(f">{len(items)}I", *items))

    def words(self, vec: np.ndarray) -> "Writer":
        """A uint64 vector, little-endian (the natural layout of the masked upload)."""
        arr = np.ascontiguousarray(vec, dtype="<u8")
        return self.u32(arr.size).raw(arr.tobytes())

    def bytes(self) -> bytes:
        return b"".join(self._parts)


class Reader:
    """Reads what ``Writer`` wrote; any shortfall raises MessageRejected."""

    def __init__(self, data: bytes):
        self._data, self._pos = memoryview(data), 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise MessageRejected("truncated message")
        out = bytes(self._data[self._pos:self._pos + n])
        self._pos += n
        return out

    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self._data) - self._pos

    def u8(self) -> int:
        return self._take(1)[0]

    def u32(self) -> int:
        value: int = struct.unpack(">I", self._take(4))[0]
        return value

    def u64(self) -> int:
        value: int = struct.unpack(">Q", self._take(8))[0]
        return value

    def f64(self) -> float:
        value: float = struct.unpack(">d", self._take(8))[0]
        return value

    def raw(self, n: int) -> bytes:
        return self._take(n)

    def blob(self, max_len: int = 1 << 26) -> bytes:
        n = self.u32()
        if n > max_len:
            raise MessageRejected("field too long")
        return self._take(n)

    def u32s(self, max_len: int = 1 << 22) -> tuple[int, ...]:
        n = self.u32()
        if n > max_len:
            raise MessageRejected("list too long")
        return struct.unpack(f">{n}I", self._take(4 * n))

    def words(self, max_len: int = 1 << 24) -> np.ndarray:
        n = self.u32()
        if n > max_len:
            raise MessageRejected("vector too long")
        return np.frombuffer(self._take(8 * n), dtype="<u8").astype(np.uint64)

    def done(self) -> None:
        if self._pos != len(self._data):
            raise MessageRejected("trailing bytes in message")


def frame(kind: int, body: bytes, sign: Signer | None = None, *, magic: bytes = MAGIC, version: int = VERSION) -> bytes:
    """A frame of ``kind`` around ``body``, signed by ``sign(data) -> signature`` when given. ``magic`` and
    ``version`` name the protocol (the network frames of :mod:`pategail.sdk.net.frames` use their own)."""
    head = _HEAD.pack(magic, version, kind, len(body)) + body
    sig = sign(head) if sign is not None else b""
    return head + struct.pack(">B", len(sig)) + sig


def unframe(data: bytes, kind: int, *, magic: bytes = MAGIC, version: int = VERSION) -> tuple[bytes, bytes, bytes]:
    """(body, signed_part, signature) of a frame that must be of ``kind`` (of the protocol ``magic``,
    ``version``); signature may be b''."""
    if len(data) < _HEAD.size + 1:
        raise MessageRejected("message too short")
    got_magic, got_version, got_kind, n = _HEAD.unpack_from(data)
    if got_magic != magic:
        raise MessageRejected("not a secure-aggregation message" if magic == MAGIC else "not a pategail frame")
    if got_version != version:
        raise MessageRejected(f"protocol version {got_version}, expected {version}")
    if got_kind != kind:
        raise MessageRejected(f"message kind {got_kind}, expected {kind}")
    end = _HEAD.size + n
    if end + 1 > len(data):
        raise MessageRejected("truncated message")
    sig_len = data[end]
    if end + 1 + sig_len != len(data):
        raise MessageRejected("bad message length")
    return bytes(data[_HEAD.size:end]), bytes(data[:end]), bytes(data[end + 1:])
