"""Mode "km": the project's corrected trajectory metrics (the headline numbers; docs/metrics.md).

Per-day statistics carry scikit-mobility's names and semantics (great-circle km, radius of gyration,
jump lengths) and are reusable on their own; the five metrics turn them into distributions and score the
Jensen–Shannon divergence (natural logs, so 0 ≤ JSD ≤ ln 2) between generated and real days.

Bins of Distance and Radius (:func:`km_bins`, 42 in all):

- bin 0: exactly 0 km (the day does not move / the user stays in the cell);
- bins 1..40: log-spaced between 0.1 and 100 km (``numpy.logspace(-1, 2, 41)`` edges, each bin closed on
  the left); values in (0, 0.1) go to bin 1, the first of them — with 0.01° cells (~1 km) they only come
  from rounding;
- bin 41: overflow, ≥ 100 km.

Days are int (n, T) cell ids; ``cells`` is float (n_cells, 2) = (lat, lon) in degrees.
"""
from __future__ import annotations

import numpy as np

from pategail.metrics.kernels import day_top_counts, jensen_shannon
from pategail.sdk.features import distinct_cells
from pategail.sdk.geo import haversine_km

LOG_EDGES_KM = np.logspace(-1, 2, 41)
"""The 41 edges of the 40 log-spaced bins, 0.1 km to 100 km."""

N_KM_BINS = 1 + 40 + 1
"""Zero bin, 40 log-spaced bins, overflow bin."""

SMOOTHING = 1e-12
"""Added to every bin of both distributions before normalising, so that empty bins keep KL finite."""

G_RANK_TOP = 100
I_RANK_TOP = 20


# --- per-day statistics ---------------------------------------------------------------------------------

def jump_lengths_km(days, cells) -> np.ndarray:
    """(n, T - 1): great-circle km between consecutive slots of each day, zeros included.

    Two slots in the same cell give exactly 0.
    """
    days = np.asarray(days)
    cells = np.asarray(cells, dtype=float)
    a, b = cells[days[:, :-1]], cells[days[:, 1:]]
    return haversine_km(a[..., 0], a[..., 1], b[..., 0], b[..., 1])


def radius_of_gyration_km(days, cells) -> np.ndarray:
    """(n,): radius of gyration of each day, sqrt(mean over slots of d(point, centre)²) in km.

    The centre of mass is the mean of the points' 3-D unit vectors, projected back onto the sphere
    (not the mean of latitudes and longitudes, which is wrong across the antimeridian and biased near the
    poles); d is the haversine distance. A day spent in a single cell has radius exactly 0 (set explicitly:
    the round trip through unit vectors would leave ~1e-10 km of rounding, which would land in the first
    log bin instead of the zero bin).
    """
    days = np.asarray(days)
    cells = np.asarray(cells, dtype=float)
    lat, lon = np.radians(cells[:, 0]), np.radians(cells[:, 1])
    unit = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=1)
    centre = unit[days].mean(axis=1)                                # (n, 3), inside the sphere
    norm = np.linalg.norm(centre, axis=1, keepdims=True)
    centre = centre / np.where(norm > 0, norm, 1.0)                 # antipodal days (norm 0): arbitrary
    c_lat = np.degrees(np.arcsin(np.clip(centre[:, 2], -1.0, 1.0)))
    c_lon = np.degrees(np.arctan2(centre[:, 1], centre[:, 0]))
    d = haversine_km(cells[days, 0], cells[days, 1], c_lat[:, None], c_lon[:, None])
    rg = np.sqrt(np.mean(d ** 2, axis=1))
    return np.where(distinct_cells(days) == 1, 0.0, rg)


def global_rank_shares(days, top: int = G_RANK_TOP) -> np.ndarray:
    """(top,): visit share (count / all visits of the set) of the set's r-th most visited cell, r = 1..top.

    Descending, padded with 0 when fewer than ``top`` cells are visited. Not renormalised: the shares of
    the top cells sum to at most 1.
    """
    _, counts = np.unique(np.asarray(days).ravel(), return_counts=True)
    shares = np.sort(counts / counts.sum())[::-1][:top]
    return np.pad(shares, (0, top - len(shares)))


def individual_rank_shares(days, top: int = I_RANK_TOP) -> np.ndarray:
    """(n, top): per day, the visit share (count / T) of its r-th most visited cell, r = 1..top, padded with 0."""
    days = np.asarray(days)
    counts = day_top_counts(days, top)
    return counts / days.shape[1]


# --- binning and divergence ---------------------------------------------------------------------------

def km_bin_index(values_km) -> np.ndarray:
    """Bin of each value (see the module docstring): 0 for exactly 0, 1..40 log-spaced, 41 for ≥ 100 km."""
    v = np.asarray(values_km, dtype=float)
    log_bin = np.clip(np.searchsorted(LOG_EDGES_KM, v, side="right"), 1, 41)   # (0, 0.1) → 1, ≥ 100 → 41
    return np.where(v == 0, 0, log_bin)


def km_bins(values_km) -> np.ndarray:
    """(42,) counts of ``values_km`` over the zero / log / overflow bins."""
    return np.bincount(km_bin_index(values_km).ravel(), minlength=N_KM_BINS).astype(float)


def count_bins(distinct, n_slots: int) -> np.ndarray:
    """(n_slots,) counts of the integers 1..n_slots (one bin each; DailyLoc)."""
    return np.bincount(np.asarray(distinct).ravel() - 1, minlength=n_slots)[:n_slots].astype(float)


def jsd(p, q) -> float:
    """JSD in nats of two non-negative vectors: add 1e-12 to every bin of both, normalise, then
    ½ KL(p‖m) + ½ KL(q‖m) with m = (p + q) / 2."""
    p = np.asarray(p, dtype=float) + SMOOTHING
    q = np.asarray(q, dtype=float) + SMOOTHING
    return jensen_shannon(p / p.sum(), q / q.sum())


# --- the five metrics ----------------------------------------------------------------------------------

def distance(generated_days, real_days, cells) -> float:
    """Distance: JSD of the binned haversine jumps between consecutive slots (zeros included)."""
    return jsd(km_bins(jump_lengths_km(generated_days, cells)), km_bins(jump_lengths_km(real_days, cells)))


def radius(generated_days, real_days, cells) -> float:
    """Radius: JSD of the binned radii of gyration of the days (km)."""
    return jsd(km_bins(radius_of_gyration_km(generated_days, cells)),
               km_bins(radius_of_gyration_km(real_days, cells)))


def dailyloc(generated_days, real_days, cells=None) -> float:
    """DailyLoc: JSD of the number of distinct cells a day, one bin per integer 1..T. ``cells`` is unused."""
    t = np.asarray(real_days).shape[1]
    return jsd(count_bins(distinct_cells(generated_days), t), count_bins(distinct_cells(real_days), t))


def grank(generated_days, real_days, cells=None) -> float:
    """G-rank: JSD of the two sets' rank-aligned top-100 visit shares, each renormalised to sum 1.
    ``cells`` is unused."""
    p, q = global_rank_shares(generated_days), global_rank_shares(real_days)
    return jsd(p / p.sum(), q / q.sum())


def irank(generated_days, real_days, cells=None) -> float:
    """I-rank: JSD of the mean over days of the per-day top-20 visit shares, each renormalised to sum 1.
    ``cells`` is unused."""
    p = individual_rank_shares(generated_days).mean(axis=0)
    q = individual_rank_shares(real_days).mean(axis=0)
    return jsd(p / p.sum(), q / q.sum())


METRICS = {"radius": radius, "dailyloc": dailyloc, "distance": distance, "grank": grank, "irank": irank}
"""The five km-mode metrics by name, in the order of ``METRIC_NAMES``."""

__all__ = ["jump_lengths_km", "radius_of_gyration_km", "distinct_cells", "global_rank_shares",
           "individual_rank_shares", "km_bins", "km_bin_index", "count_bins", "jsd", "distance", "radius",
           "dailyloc", "grank", "irank", "METRICS"]
