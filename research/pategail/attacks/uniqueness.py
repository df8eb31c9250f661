"""Uniqueness (the paper's second attack): how closely does some synthetic day reproduce a real day?

The overlap rate of two days is the share of slots where they hold the same cell (the paper: "the ratio
between their identical locations at the same time slots and the total trajectory length"). A real day's
uniqueness score is its highest overlap rate with any synthetic day; a generator that copies its training
days scores 1 on them. Counting equal slots for every (real, synthetic) pair is one sparse product: a day
is a 0/1 row over (slot, cell) pairs, and two rows' dot product is their number of equal slots.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

REPRODUCED = 0.9
"""Overlap rate from which a real day counts as reproduced (the same day on >= 90% of slots)."""


def slot_cell_matrix(days: np.ndarray, n_cells: int) -> sparse.csr_matrix:
    """csr (n, T·n_cells) of 0/1: row i has a 1 at column t·n_cells + days[i, t] for every slot t."""
    days = np.asarray(days, dtype=np.int64)
    n, T = days.shape
    cols = (np.arange(T)[None, :] * n_cells + days).ravel()
    rows = np.repeat(np.arange(n), T)
    return sparse.csr_matrix((np.ones(n * T, dtype=np.int32), (rows, cols)), shape=(n, T * n_cells))


def max_equal_slots(real: np.ndarray, synthetic: np.ndarray, n_cells: int, chunk: int = 512) -> np.ndarray:
    """int (n_real,): for each real day, the most slots it shares (same slot, same cell) with one synthetic
    day. ``chunk`` real days at a time bound the memory of the product."""
    real = np.asarray(real)
    synthetic = np.asarray(synthetic)
    if real.shape[1] != synthetic.shape[1]:
        raise ValueError(f"real days have {real.shape[1]} slots, synthetic days {synthetic.shape[1]}")
    s = slot_cell_matrix(synthetic, n_cells).T.tocsc()
    out = np.zeros(len(real), dtype=np.int64)
    for start in range(0, len(real), chunk):
        product = slot_cell_matrix(real[start:start + chunk], n_cells) @ s
        out[start:start + chunk] = product.max(axis=1).toarray().ravel()
    return out


def max_overlap_rate(real: np.ndarray, synthetic: np.ndarray, n_cells: int) -> np.ndarray:
    """float (n_real,): each real day's highest overlap rate with any synthetic day, in [0, 1]."""
    return max_equal_slots(real, synthetic, n_cells) / np.asarray(real).shape[1]


def summarise(equal_slots: np.ndarray, n_slots: int, threshold: float = REPRODUCED) -> dict:
    """The distribution of one group's highest overlaps: days, mean, median and 90th percentile of the rate,
    the share of days reproduced on >= ``threshold`` of slots, and the histogram of equal slots 0..n_slots
    (what the figure draws)."""
    equal_slots = np.asarray(equal_slots, dtype=np.int64)
    if len(equal_slots) == 0:
        return {"days": 0}
    rate = equal_slots / n_slots
    return {"days": int(len(rate)), "mean": float(rate.mean()), "median": float(np.median(rate)),
            "p90": float(np.quantile(rate, 0.9)),
            "share_reproduced": float(np.mean(rate >= threshold - 1e-12)),
            "histogram": np.bincount(equal_slots, minlength=n_slots + 1).tolist()}


def uniqueness(groups: dict[str, np.ndarray], synthetic: np.ndarray, n_cells: int,
               threshold: float = REPRODUCED) -> dict:
    """Uniqueness of every named group of real days (e.g. members, non-members, test) against the synthetic
    days: ``{"threshold": t, group: summarise(...)}``; empty groups give ``{"days": 0}``."""
    n_slots = np.asarray(synthetic).shape[1]
    out: dict = {"threshold": threshold}
    for name, days in groups.items():
        days = np.asarray(days)
        equal = max_equal_slots(days, synthetic, n_cells) if len(days) else np.zeros(0, np.int64)
        out[name] = summarise(equal, n_slots, threshold)
    return out
