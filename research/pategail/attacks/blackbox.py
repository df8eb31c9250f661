"""Black-box membership features: how close the synthetic days come to a real day.

An attacker who sees only the released synthetic days can still ask whether one of them sits suspiciously
close to a target day. Per real day: the distance to the closest synthetic day and the mean distance to the
``k`` closest (the distance of two days: the mean great-circle km between their cells slot by slot), and
the highest overlap rate (share of equal slots, as in :mod:`uniqueness`). A generator that copies training
days puts its members at distance 0.
"""
from __future__ import annotations

import numpy as np

from pategail.attacks.uniqueness import max_overlap_rate
from pategail.sdk.geo import EARTH_RADIUS_KM

N_NEAREST = 5
"""The second feature averages the distances to this many closest synthetic days."""


def _unit_vectors(cells: np.ndarray) -> np.ndarray:
    lat, lon = np.radians(cells[:, 0]), np.radians(cells[:, 1])
    return np.column_stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])


def day_distances_km(real: np.ndarray, synthetic: np.ndarray, cells: np.ndarray, chunk: int = 64) -> np.ndarray:
    """float (n_real, n_synthetic): mean over slots of the great-circle km between the two days' cells."""
    xyz = _unit_vectors(np.asarray(cells, dtype=float)).astype(np.float32)
    r, s = xyz[np.asarray(real)], xyz[np.asarray(synthetic)]          # (n, T, 3), (m, T, 3)
    out = np.empty((len(r), len(s)), dtype=np.float64)
    for start in range(0, len(r), chunk):
        block = r[start:start + chunk, None]                           # (c, 1, T, 3)
        chord = np.linalg.norm(block - s[None], axis=-1)               # (c, m, T)
        angle = 2 * np.arcsin(np.clip(chord / 2, 0, 1))
        out[start:start + chunk] = angle.mean(axis=-1) * EARTH_RADIUS_KM
    return out


def blackbox_features(real: np.ndarray, synthetic: np.ndarray, cells: np.ndarray,
                      k: int = N_NEAREST) -> np.ndarray:
    """float (n_real, 3): [km to the closest synthetic day, mean km to the k closest, highest overlap rate]."""
    d = day_distances_km(real, synthetic, cells)
    k = min(k, d.shape[1])
    nearest = np.partition(d, k - 1, axis=1)[:, :k]
    return np.column_stack([nearest.min(axis=1), nearest.mean(axis=1),
                            max_overlap_rate(real, synthetic, len(cells))])
