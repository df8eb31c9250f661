"""Great-circle geometry on cell centres (degrees in, kilometres out)."""
from __future__ import annotations

import numpy as np

EARTH_RADIUS_KM = 6371.0088
"""Mean Earth radius (IUGG), the value METRICS.md fixes for the km mode."""


def haversine_km(lat1, lon1, lat2, lon2) -> np.ndarray:
    """Great-circle distance in km between points given in degrees; broadcasts like numpy."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dphi = p2 - p1
    dlmb = np.radians(lon2) - np.radians(lon1)
    a = np.sin(dphi / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))


def pairwise_km(cells: np.ndarray) -> np.ndarray:
    """(n, n) matrix of haversine km between the rows of ``cells`` (n, 2) = (lat, lon) in degrees."""
    lat, lon = cells[:, 0], cells[:, 1]
    return haversine_km(lat[:, None], lon[:, None], lat[None, :], lon[None, :])
