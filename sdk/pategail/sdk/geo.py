"""Great-circle geometry on cell centres (degrees in, kilometres out)."""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

EARTH_RADIUS_KM = 6371.0088
"""Mean Earth radius (IUGG), the value METRICS.md fixes for the km mode."""


def haversine_km(lat1: ArrayLike, lon1: ArrayLike, lat2: ArrayLike, lon2: ArrayLike) -> np.ndarray:
    """Great-circle distance in km between points given in degrees; broadcasts like numpy."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dphi = p2 - p1
    dlmb = np.radians(lon2) - np.radians(lon1)
    a = np.sin(dphi / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dlmb / 2) ** 2
    return km_of_haversine(a)


def km_of_haversine(a: np.ndarray) -> np.ndarray:
    """Great-circle km from the haversine term a = sin²(Δφ/2) + cos φ1 cos φ2 sin²(Δλ/2)."""
    km: np.ndarray = 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))
    return km


class HalfAngleTable:
    """sin²(Δ/2) between every pair of the distinct values of one coordinate (degrees), so that a block of
    pairwise distances gathers its two sine terms instead of evaluating them: cell tables repeat latitudes and
    longitudes (pategail-geolife: 4,210 cells, ~1,000 of each), and the sines were most of the cost. Same
    operations on the same numbers as :func:`haversine_km`, so the same bits."""

    def __init__(self, degrees: np.ndarray):
        values, self.index = np.unique(np.asarray(degrees, dtype=np.float64), return_inverse=True)
        r = np.radians(values)
        self.table = np.sin((r[None, :] - r[:, None]) / 2) ** 2                # [i, j]: from value i to j

    @staticmethod
    def worth_it(degrees: np.ndarray, pairs: int) -> bool:
        """Whether the table (distinct values squared) is much smaller than ``pairs`` sine evaluations."""
        return 4 * len(np.unique(degrees)) ** 2 <= pairs

    def block(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), n): sin²(Δ/2) from the points ``rows`` to every point."""
        block: np.ndarray = self.table[self.index[rows]][:, self.index]
        return block


def pairwise_km(cells: np.ndarray) -> np.ndarray:
    """(n, n) matrix of haversine km between the rows of ``cells`` (n, 2) = (lat, lon) in degrees."""
    lat, lon = cells[:, 0], cells[:, 1]
    return haversine_km(lat[:, None], lon[:, None], lat[None, :], lon[None, :])
