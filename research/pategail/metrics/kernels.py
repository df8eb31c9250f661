"""The pieces both metric modes compute alike: the visit counts of each day's most visited cells and the
Jensen–Shannon divergence of two histograms. Each mode keeps its own binning and smoothing (the paper's
quirks in :mod:`pategail.metrics.paper`, the corrected choices in :mod:`pategail.metrics.km`) and hands
its histograms to :func:`jensen_shannon`."""
from __future__ import annotations

import numpy as np


def day_top_counts(days, top: int) -> np.ndarray:
    """int (n, top): per day, the visit counts of its ``top`` most visited cells, descending, padded with 0."""
    days = np.asarray(days)
    s = np.sort(days, axis=1)
    first = np.ones(s.shape, dtype=bool)
    first[:, 1:] = s[:, 1:] != s[:, :-1]
    counts = (s[:, :, None] == s[:, None, :]).sum(axis=2)          # (n, T): count of the slot's cell
    counts = -np.sort(-np.where(first, counts, 0), axis=1)[:, :top]  # one entry per distinct cell, descending
    return np.pad(counts, ((0, 0), (0, top - counts.shape[1])))


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p ‖ q) in nats after normalising both to sum 1 (what ``scipy.stats.entropy(p, q)`` returns); every
    entry of q must be positive where p's is."""
    p = p / p.sum()
    q = q / q.sum()
    return float(np.sum(p * np.log(p / q)))


def jensen_shannon(p, q) -> float:
    """½ KL(p‖m) + ½ KL(q‖m), m = (p + q) / 2, in nats (0 ≤ JSD ≤ ln 2) of two positive histograms of the same
    shape; the caller smooths empty bins first (each mode in its own way)."""
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    if p.shape != q.shape:
        raise ValueError(f"jsd: distributions of different shapes {p.shape} and {q.shape}")
    m = (p + q) / 2
    return 0.5 * kl_divergence(p, m) + 0.5 * kl_divergence(q, m)
