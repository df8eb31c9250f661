"""The action-rate part of the environment vector: what a device contributes so that the coordinator can fit
a rule model of *when* people stay, go home, return and explore — P(action | time of day, at home, distinct
cells so far) — and warm-start its policy from it.

The epr baseline is such a rule model (P(action | slot, at home), fitted on the data) and is hard to beat on
sparse cities, whose real days visit few cells: a rate table that also sees the number of distinct cells so
far carries the day-level shape (e.g. "never a fifth cell") that a per-pair reward hardly conveys.

A decision is the move from slot t to t + 1 (t = 0..46), labelled by :func:`pategail.sdk.features.label_actions`.
Its cell of the table is (slot bucket t // SLOT_BUCKET, at home at t, distinct-cells bucket of l_0..l_t, action);
the device contributes w × the share of its decisions in each cell (``w = min(1, days / days_cap)``, as the
other environment parts), so the part's entries are ≥ 0 and sum to w ≤ 1 (L1 ≤ 1; L2 ≤ 0.354 w, because every
day puts the same number of decisions in each slot bucket: :func:`action_rate_l2_bound`).
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.features import N_ACTIONS, SLOTS, label_actions

SLOT_BUCKET = 6
"""Slots (half hours) per time-of-day bucket: 3 hours, 8 buckets over the 47 decisions of a day — fine enough
for the daily rhythm (real explore rates change ~20× from night to evening) with few enough cells that each
holds many decisions in a city of a few hundred devices."""

COUNT_BUCKETS = 5
"""Distinct-cells-so-far buckets: 1, 2, 3, 4 and 5 or more."""

N_SLOT_BUCKETS = -(-(SLOTS - 1) // SLOT_BUCKET)
RATE_SHAPE = (N_SLOT_BUCKETS, 2, COUNT_BUCKETS, N_ACTIONS)
"""(slot bucket, at home, distinct bucket, action): the table's shape, flattened C-order in the vector."""


def action_rate_length() -> int:
    """Entries of one device's action-rate contribution."""
    return int(np.prod(RATE_SHAPE))


def action_rate_l2_bound() -> float:
    """The largest L2 norm of an honest action-rate part at w = 1 (a device's part is w times it at most).

    Every generated or real day has one decision per slot t = 0..46, so slot bucket b holds the same n_b of
    every day's 47 decisions (6 in each of the first 7 buckets, 5 in the last): the part's entries in bucket b
    sum to w · n_b / 47 whatever the days are, and their L2 norm is at most that sum (all of the bucket's
    decisions in one cell, as for a device that never leaves home). Hence ‖part‖₂ ≤ w · √(Σ_b n_b²) / 47 =
    w · √277 / 47 ≈ 0.354 w — tighter than the L1 bound w, which the Gaussian environment release's L2
    sensitivity (``pategail.server.privacy.gaussian.env_l2_bound``) would otherwise have to add."""
    per_bucket = np.bincount(slot_bucket(np.arange(SLOTS - 1)), minlength=N_SLOT_BUCKETS)
    return float(np.sqrt(np.sum(per_bucket.astype(np.float64) ** 2)) / (SLOTS - 1))


def slot_bucket(t: int | np.ndarray) -> np.ndarray:
    """Time-of-day bucket of decision slot(s) t (0..46)."""
    return np.asarray(t) // SLOT_BUCKET


def count_bucket(distinct: np.ndarray) -> np.ndarray:
    """Bucket 0..4 of a distinct-cells-so-far count ≥ 1 (1, 2, 3, 4, 5+)."""
    bucket: np.ndarray = np.clip(np.asarray(distinct) - 1, 0, COUNT_BUCKETS - 1)
    return bucket


def distinct_so_far(days: np.ndarray) -> np.ndarray:
    """int64 (n, T): distinct cells among l_0..l_t of every slot t."""
    days = np.asarray(days)
    out = np.empty(days.shape, dtype=np.int64)
    for i, day in enumerate(days):
        _, first = np.unique(day, return_index=True)
        new = np.zeros(days.shape[1], dtype=np.int64)
        new[first] = 1
        out[i] = np.cumsum(new)
    return out


def decision_counts(days: np.ndarray, homes: np.ndarray) -> np.ndarray:
    """float64 ``RATE_SHAPE``: how many of the labelled decisions of ``days`` (homes: (n,)) fall in each
    (slot bucket, at home, distinct bucket, action) cell."""
    days = np.asarray(days)
    homes = np.asarray(homes).reshape(-1, 1)
    counts = np.zeros(RATE_SHAPE)
    if not len(days):
        return counts
    labels = label_actions(days, homes).astype(np.int64)
    state = days[:, :-1]
    t = np.broadcast_to(np.arange(state.shape[1]), state.shape)
    at_home = (state == homes).astype(np.int64)
    k = count_bucket(distinct_so_far(days)[:, :-1])
    np.add.at(counts, (slot_bucket(t).ravel(), at_home.ravel(), k.ravel(), labels.ravel()), 1.0)
    return counts


def action_rate_contribution(days: np.ndarray, home: int, days_cap: int) -> np.ndarray:
    """float64 (action_rate_length(),): w × the share of the device's decisions in each cell of the rate table
    (w = min(1, days / ``days_cap``)); all zeros for a device without days. Entries ≥ 0, summing to w."""
    days = np.asarray(days)
    out = np.zeros(action_rate_length())
    if not len(days):
        return out
    counts = decision_counts(days, np.full(len(days), home)).ravel()
    w = min(1.0, len(days) / days_cap)
    rates: np.ndarray = w * counts / counts.sum()
    return rates
