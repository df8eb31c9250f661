"""Signed device requests: every HTTP request a device makes carries its id, a nonce and an Ed25519 signature
over (method, path, id, nonce, SHA-256 of the body) under the device's enrolled signing key.

The nonce is the device's clock in nanoseconds, made strictly increasing: the service accepts a nonce only
above the last one it saw from that device and within ``FRESHNESS_S`` of its own clock, so a recorded request
replayed later — also after a service restart, once the window has passed — is refused (401).
"""
from __future__ import annotations

import hashlib
import struct
import threading
import time
from typing import Callable

HEADER_DEVICE = "X-Pategail-Device"
HEADER_NONCE = "X-Pategail-Nonce"
HEADER_SIGNATURE = "X-Pategail-Signature"
FRESHNESS_S = 300.0
"""How far a request's nonce may be from the service's clock (seconds): bounds replays across restarts."""
_DOMAIN = b"pategail-net-v1/request\x00"


def signed_bytes(method: str, path: str, device_id: int, nonce: int, body: bytes) -> bytes:
    """What a device signs for one request."""
    return (_DOMAIN + method.upper().encode("ascii") + b" " + path.encode("utf-8") + b"\x00"
            + struct.pack(">IQ", device_id, nonce) + hashlib.sha256(body).digest())


class NonceClock:
    """Strictly increasing nanosecond nonces from the wall clock (thread-safe)."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            self._last = max(time.time_ns(), self._last + 1)
            return self._last


def request_headers(sign: Callable[[bytes], bytes], method: str, path: str, device_id: int, nonce: int,
                    body: bytes) -> dict[str, str]:
    """The three authentication headers of a request; ``sign(data) -> 64-byte Ed25519 signature``."""
    signature = sign(signed_bytes(method, path, device_id, nonce, body))
    return {HEADER_DEVICE: str(device_id), HEADER_NONCE: str(nonce), HEADER_SIGNATURE: signature.hex()}
