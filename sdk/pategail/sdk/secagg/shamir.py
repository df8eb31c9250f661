"""Shamir t-of-n secret sharing of 32-byte secrets over the prime field Z_q, q = 2^256 + 297.

q is the smallest prime above 2^256, so every 32-byte string is a field element and a share's y is 33
bytes. Share x-coordinates are public small integers (a holder's position in the round's participant list
plus one). Coefficients come from ``secrets`` (the operating system's CSPRNG). Reconstruction is Lagrange
interpolation at 0 from any t shares; coefficients for a set of x's are cached because the aggregator
reconstructs many secrets from the same holders.
"""
from __future__ import annotations

import secrets
from functools import lru_cache

PRIME = (1 << 256) + 297
"""The field modulus: the smallest prime greater than 2^256."""
SHARE_BYTES = 33
"""Bytes of one share's y-coordinate."""


def split(secret: bytes, xs: list[int], threshold: int) -> list[int]:
    """Shares y_i = f(x_i) of ``secret`` for a random polynomial f of degree ``threshold - 1``, f(0) = secret."""
    if len(secret) != 32:
        raise ValueError("Shamir secrets are 32 bytes")
    if not 1 <= threshold <= len(xs):
        raise ValueError(f"threshold {threshold} must be in [1, {len(xs)}]")
    if len(set(xs)) != len(xs) or any(not 0 < x < PRIME for x in xs):
        raise ValueError("share x-coordinates must be distinct and non-zero")
    coeffs = [int.from_bytes(secret, "big")] + [secrets.randbelow(PRIME) for _ in range(threshold - 1)]
    out = []
    for x in xs:
        y = 0
        for c in reversed(coeffs):  # Horner
            y = (y * x + c) % PRIME
        out.append(y)
    return out


@lru_cache(maxsize=256)
def _lagrange_at_zero(xs: tuple[int, ...]) -> tuple[int, ...]:
    coeffs = []
    for i, xi in enumerate(xs):
        num, den = 1, 1
        for j, xj in enumerate(xs):
            if j != i:
                num = num * xj % PRIME
                den = den * (xj - xi) % PRIME
        coeffs.append(num * pow(den, -1, PRIME) % PRIME)
    return tuple(coeffs)


def reconstruct(shares: list[tuple[int, int]], threshold: int) -> bytes:
    """The secret from at least ``threshold`` (x, y) shares (the first ``threshold`` by x are used)."""
    chosen = sorted(dict(shares).items())[:threshold]
    if len(chosen) < threshold:
        raise ValueError(f"need {threshold} distinct shares, got {len(chosen)}")
    xs = tuple(x for x, _ in chosen)
    value = sum(c * y for c, (_, y) in zip(_lagrange_at_zero(xs), chosen)) % PRIME
    if value >= 1 << 256:
        raise ValueError("shares do not interpolate to a 32-byte secret")
    return value.to_bytes(32, "big")


def y_to_bytes(y: int) -> bytes:
    """A share's y as SHARE_BYTES big-endian bytes."""
    return y.to_bytes(SHARE_BYTES, "big")


def y_from_bytes(data: bytes) -> int:
    """Inverse of ``y_to_bytes``; rejects values outside the field."""
    if len(data) != SHARE_BYTES:
        raise ValueError("a share is 33 bytes")
    y = int.from_bytes(data, "big")
    if y >= PRIME:
        raise ValueError("share outside the field")
    return y
