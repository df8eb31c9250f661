"""The devices' minibatch draws, many devices at once, index for index what each device's own loop draws.

A device draws, for each of its k training steps, ``n_pos`` indices below the number of its real pairs, then
``n_neg`` below the number of the round's generated pairs, with ``Generator.integers`` on
``default_rng([seed, device, round])`` (pategail.sdk.discriminator_round.train_and_score; the shard's
devices use the SDK emulator's seeds). For a bound b ≤ 2³² − 1, numpy's ``integers(0, b, size)`` maps each
32-bit output u of the bit generator to (u · b) >> 32 and rejects u when (u · b) mod 2³² < (2³² − b) mod b
(Lemire's method, ``random_bounded_uint64_fill``), a bound of 1 draws nothing, and PCG64 hands out the low,
then the high half of each 64-bit output, carrying a half over from one call to the next. So one call for a
device's 64-bit outputs and a few array operations over all devices give the same indices as 2k calls a
device; a device whose stream meets a rejection (probability ≈ b / 2³² a draw: one device in a thousand at
b = 4,512 and 1,280 draws) or a bound this shortcut does not cover is drawn again by the loop itself.

Why: the loop costs ≈ 0.25 ms a device (2k calls of a few µs each), a tenth of a device's whole round after
the stacked training and scoring were sped up, and it holds the GIL that the shard's worker threads share.
"""
from __future__ import annotations

import numpy as np

U32 = np.uint64(0xFFFFFFFF)
LARGEST = 0xFFFFFFFF
"""Bounds from here on take other paths in numpy (no rejection, or 64-bit outputs): drawn by the loop."""


def loop_draws(seed: int, device: int, round_: int, k: int, n_pos: int, n_neg: int, pos_bound: int,
               neg_bound: int) -> tuple[np.ndarray, np.ndarray]:
    """int64 (k, n_pos), (k, n_neg): one device's draws, call by call as the device makes them."""
    rng = np.random.default_rng([seed, device, round_])
    pos = np.empty((k, n_pos), dtype=np.int64)
    neg = np.empty((k, n_neg), dtype=np.int64)
    for s in range(k):
        pos[s] = rng.integers(0, pos_bound, n_pos)
        neg[s] = rng.integers(0, neg_bound, n_neg)
    return pos, neg


def minibatch_draws(seed: int, devices: np.ndarray, round_: int, k: int, n_pos: int, n_neg: int,
                    pos_bounds: np.ndarray, neg_bound: int) -> tuple[np.ndarray, np.ndarray]:
    """int64 (c, k, n_pos) and (c, k, n_neg): the draws of ``devices`` (c,) in round ``round_``, device j's
    real-pair indices below ``pos_bounds[j]`` and generated-pair indices below ``neg_bound`` — exactly
    :func:`loop_draws` of each device."""
    devices = np.asarray(devices, dtype=np.int64)
    pos_bounds = np.asarray(pos_bounds, dtype=np.int64)
    c, width = len(devices), n_pos + n_neg
    per_device = k * width
    raw = np.empty((c, (per_device + 1) // 2), dtype="<u8")      # little-endian: the low half first
    for j, device in enumerate(devices):
        raw[j] = np.random.PCG64(np.random.SeedSequence([seed, int(device), round_])).random_raw(raw.shape[1])
    halves = raw.view("<u4")[:, :per_device].astype(np.uint64).reshape(c, k, width)
    bounds = np.empty((c, 1, width), dtype=np.uint64)
    bounds[..., :n_pos] = pos_bounds[:, None, None].astype(np.uint64)
    bounds[..., n_pos:] = np.uint64(neg_bound)
    product = halves * bounds                                  # < 2⁶⁴: both factors below 2³²
    index = (product >> np.uint64(32)).view(np.int64)          # < 2³²: the same value as int64
    safe = np.maximum(bounds, np.uint64(1))                  # a bound of 0 is left to the loop (it raises)
    np.bitwise_and(product, U32, out=product)
    rejected = (product < (np.uint64(1 << 32) - safe) % safe).any(axis=(1, 2))
    uncovered = (pos_bounds < 2) | (pos_bounds >= LARGEST) | (neg_bound < 2) | (neg_bound >= LARGEST)
    for row in np.flatnonzero(rejected | uncovered):
        index[row, :, :n_pos], index[row, :, n_pos:] = loop_draws(seed, int(devices[row]), round_, k, n_pos, n_neg,
                                                                  int(pos_bounds[row]), neg_bound)
    return index[..., :n_pos], index[..., n_pos:]
