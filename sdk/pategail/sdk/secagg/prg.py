"""Cryptographic pseudo-random generator for masks: AES-256 in counter mode.

A 32-byte seed (a device's self-mask seed b_u, or a pairwise seed from X25519 + HKDF) is expanded into the
mask of one upload: ``n_data`` words of Z_2^64 for the data slots and one element of Z_p, p = 2^61 - 1, for
the checksum slot (see ``checksum.py``). Every seed is used for exactly one expansion in one round, so the
fixed all-zero counter block is safe. AES-CTR runs at several GB/s with AES-NI: 64 KiB of mask costs ~20 µs.
"""
from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

P61 = (1 << 61) - 1
"""The Mersenne prime of the checksum field; the last slot of every upload is an element of Z_P61."""
_ZERO_BLOCK = bytes(16)


def keystream(seed: bytes, n_bytes: int) -> bytes:
    """``n_bytes`` of AES-256-CTR keystream under the 32-byte ``seed``."""
    if len(seed) != 32:
        raise ValueError("PRG seeds are 32 bytes")
    enc = Cipher(algorithms.AES(seed), modes.CTR(_ZERO_BLOCK)).encryptor()
    return enc.update(bytes(n_bytes)) + enc.finalize()


def expand_uint64(seed: bytes, n_words: int) -> np.ndarray:
    """``n_words`` uniform elements of Z_2^64 (little-endian words of the keystream)."""
    return np.frombuffer(keystream(seed, 8 * n_words), dtype="<u8").astype(np.uint64, copy=False)


def expand_mask(seed: bytes, n_data: int) -> np.ndarray:
    """The mask for one upload: uint64 array of ``n_data + 1`` words, the last reduced into Z_P61.

    Reducing a uniform 64-bit word mod P61 has statistical distance < 2^-58 from uniform on Z_P61.
    """
    m = expand_uint64(seed, n_data + 1).copy()
    m[-1] = np.uint64(int(m[-1]) % P61)
    return m


def add_mask(acc: np.ndarray, mask: np.ndarray, sign: int) -> None:
    """In place: acc += sign * mask, data slots in Z_2^64 and the last slot in Z_P61."""
    data, last = acc[:-1], int(acc[-1])
    if sign > 0:
        np.add(data, mask[:-1], out=data)
        last = (last + int(mask[-1])) % P61
    else:
        np.subtract(data, mask[:-1], out=data)
        last = (last - int(mask[-1])) % P61
    acc[-1] = np.uint64(last)
