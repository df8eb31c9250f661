"""Mode "paper": the five metrics exactly as the PateGail paper's evaluation code computes them (Table 1).

Every function here reproduces that code, quirks included, so that our numbers can sit next to the
paper's (see docs/metrics.md, mode "paper"). The quirks are deliberate; do not fix them here —
the corrected metrics are in :mod:`pategail.metrics.km`. The ones that matter:

- coordinates are raw degrees: X = latitude (column 0 of ``cells``), Y = longitude (column 1);
  Distance and Radius are *squared* degree distances (no square root, no km);
- :func:`hist` builds its edges with ``numpy.arange(lo, hi, (hi - lo) / n)``: about n edges, so about
  n - 1 bins, and values at or beyond the last edge are dropped (``numpy.histogram`` closes only the
  last bin on the right);
- with ``hist(·, 0, 2101.45, 1000)`` the first bin is 2.1 squared degrees (~230 km) wide, so nearly
  every GeoLife distance and radius falls into it;
- DailyLoc's bins are [k/48, (k+1)/48): bin 0 is always empty, 46 and 47 distinct cells share the last
  (closed) bin and a day with 48 distinct cells is dropped;
- G-rank histograms the *values* of the top 50 shares (it is not a rank-aligned comparison); shares of
  0.98 or more are dropped;
- :func:`jsd` renormalises with ``p / (sum + 1e-10) + 1e-10`` and then takes the KL divergences over the
  renormalised vectors, as ``scipy.stats.entropy`` would.

All functions are pure: ``(generated_days, real_days, cells) -> float``, days as int (n, T) cell ids and
``cells`` as float (n_cells, 2) = (lat, lon) in degrees.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from pategail.metrics.kernels import day_top_counts as _day_top_counts
from pategail.metrics.kernels import jensen_shannon

GEOLIFE_UPPER = 2101.45
"""Upper bound of the Distance and Radius histograms in the paper's code for GeoLife (squared degrees)."""

N_BINS = 1000
"""Number of (nominal) bins of the Distance and Radius histograms."""

G_RANK_TOP = 50
I_RANK_TOP = 20

PAPER_TABLE1 = {
    "pategail": {"radius": 0.0699, "dailyloc": 0.1046, "distance": 0.0130, "grank": 0.0256, "irank": 0.0176},
    "movesim": {"radius": 0.2845, "dailyloc": 0.2467, "distance": 0.0138, "grank": 0.0492, "irank": 0.0408},
}
"""The paper's Table 1 on GeoLife without noise: PateGail and its best baseline (MoveSim)."""


def hist(values, lo: float, hi: float, n: int) -> np.ndarray:
    """Counts of ``values`` over the edges ``numpy.arange(lo, hi, (hi - lo) / n)`` (about n - 1 bins).

    Values below ``lo`` or beyond the last edge are dropped, as in the paper's code.
    """
    edges = np.arange(lo, hi, (hi - lo) / n)
    counts, _ = np.histogram(np.asarray(values, dtype=float), edges)
    return counts.astype(float)


def jsd(p, q) -> float:
    """The paper's JSD: p ← p / (Σp + 1e-10) + 1e-10 (same for q), then ½ KL(p‖m) + ½ KL(q‖m), m = (p + q) / 2.

    The KL terms renormalise their arguments (as ``scipy.stats.entropy`` does); natural logs, so the
    result lies in [0, ln 2].
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    return jensen_shannon(p / (p.sum() + 1e-10) + 1e-10, q / (q.sum() + 1e-10) + 1e-10)


# --- per-day statistics of the paper's code -------------------------------------------------------------

def squared_jumps(days, cells) -> np.ndarray:
    """(n, T - 1): (X[lᵢ] − X[lᵢ₊₁])² + (Y[lᵢ] − Y[lᵢ₊₁])² in squared degrees, zeros included."""
    xy = np.asarray(cells, dtype=float)[np.asarray(days)]          # (n, T, 2)
    return np.sum(np.diff(xy, axis=1) ** 2, axis=2)


def squared_radii(days, cells) -> np.ndarray:
    """(n,): mean over the day's slots of the squared degree distance to its centroid (mean X, mean Y)."""
    xy = np.asarray(cells, dtype=float)[np.asarray(days)]          # (n, T, 2)
    centre = xy.mean(axis=1, keepdims=True)
    return np.mean(np.sum((xy - centre) ** 2, axis=2), axis=1)


def distinct_share(days) -> np.ndarray:
    """(n,): number of distinct cells of each day divided by its number of slots."""
    days = np.asarray(days)
    s = np.sort(days, axis=1)
    distinct = 1 + np.count_nonzero(np.diff(s, axis=1), axis=1)
    return distinct / days.shape[1]


def top_shares(days, top: int = G_RANK_TOP) -> np.ndarray:
    """(top,): the largest visit shares (count / total over all days) of the cells, descending, 0-padded.

    Unvisited cells have share 0, so padding with 0 is the same as ranking every cell of the table.
    """
    counts = np.bincount(np.asarray(days).ravel()).astype(float)
    shares = np.sort(counts / counts.sum())[::-1][:top]
    return np.pad(shares, (0, top - len(shares)))


def day_top_counts(days, top: int = I_RANK_TOP) -> np.ndarray:
    """(n, top): the counts of each day's ``top`` most visited cells, descending, padded with 0."""
    return _day_top_counts(days, top).astype(float)


# --- the five metrics ----------------------------------------------------------------------------------

def distance(generated_days, real_days, cells, *, upper: float = GEOLIFE_UPPER) -> float:
    """Distance: JSD of ``hist(squared degree jumps, 0, upper, 1000)``; zeros included."""
    return jsd(hist(squared_jumps(generated_days, cells).ravel(), 0, upper, N_BINS),
               hist(squared_jumps(real_days, cells).ravel(), 0, upper, N_BINS))


def radius(generated_days, real_days, cells, *, upper: float = GEOLIFE_UPPER) -> float:
    """Radius: JSD of ``hist(mean squared degree distance to the day's centroid, 0, upper, 1000)``."""
    return jsd(hist(squared_radii(generated_days, cells), 0, upper, N_BINS),
               hist(squared_radii(real_days, cells), 0, upper, N_BINS))


def dailyloc(generated_days, real_days, cells=None) -> float:
    """DailyLoc: JSD of ``hist(distinct cells / T, 0, 1, 48)``. ``cells`` is unused (uniform signature)."""
    return jsd(hist(distinct_share(generated_days), 0, 1, 48), hist(distinct_share(real_days), 0, 1, 48))


def grank(generated_days, real_days, cells=None) -> float:
    """G-rank: JSD of ``hist(top 50 visit shares over all days, 0, 1, 50)`` — a histogram of share values.
    ``cells`` is unused."""
    return jsd(hist(top_shares(generated_days, G_RANK_TOP), 0, 1, G_RANK_TOP),
               hist(top_shares(real_days, G_RANK_TOP), 0, 1, G_RANK_TOP))


def irank(generated_days, real_days, cells=None) -> float:
    """I-rank: per day the counts of its 20 most visited cells / T, averaged over days, normalised; JSD of the
    two 20-vectors directly (no histogram). ``cells`` is unused."""
    def profile(days):
        days = np.asarray(days)
        f = np.mean(day_top_counts(days, I_RANK_TOP) / days.shape[1], axis=0)
        return f / f.sum()
    return jsd(profile(generated_days), profile(real_days))


METRICS: dict[str, Callable[..., float]] = {"radius": radius, "dailyloc": dailyloc, "distance": distance,
                                            "grank": grank, "irank": irank}
"""The five paper-mode metrics by name, in the order of ``METRIC_NAMES``."""
