"""The explore draw from a cell's cumulative weights with the visited cells taken out, without forming the
masked cumulative sum.

The environment draws an explore destination by inverse CDF: the candidates' weights with the cells visited
today set to 0, their cumulative sum (``np.cumsum``, one pass over all K candidates), one uniform r, the first
candidate whose cumulative weight exceeds r × total. The unmasked cumulative weights depend only on the cell
explored from, so they are computed once per cell; a day has visited at most a few dozen of the K candidates,
and the masked CDF is the unmasked one minus the visited weights before each point. :func:`masked_inverse_cdf`
finds the index with that (a binary search in the kept row), then checks that the float sums cannot have
decided differently from the sequential masked sum: both are within ~K·2⁻⁵³ × total of the exact sums, so an
index whose two bracketing CDF values lie farther than ``GUARD`` × total from the draw is the one the masked
cumulative sum picks, bit for bit. The rare draws closer than that are flagged for the caller to redo the
old way, so the days stay identical for a seed.
"""
from __future__ import annotations

import numpy as np

GUARD = 1e-9
"""Relative distance (to the cell's unmasked total weight) from the draw to either bracketing CDF value below
which an index is not trusted: ~10⁴ × the rounding of K = 1,000 sequential float64 sums."""


def masked_inverse_cdf(cum: np.ndarray, rows: np.ndarray, skip: np.ndarray, r: np.ndarray,
                       guard: float = GUARD) -> tuple[np.ndarray, np.ndarray]:
    """Inverse-CDF draws from rows of cumulative weights with some entries taken out.

    cum: float64 (R, K), each row the cumulative sum of positive weights; rows: int (m,), the row of each draw;
    skip: int (m, S), each draw's taken-out entries in increasing order, each at most once, padded with K;
    r: float64 (m,) uniforms in [0, 1). Returns ``(index, sure)``: int64 (m,), the first entry i whose masked
    cumulative weight exceeds r × the masked total; bool (m,), False where rounding could have made the
    sequential masked sum (``np.cumsum`` of the weights with the skipped ones zeroed) pick another entry.
    """
    m, k = len(rows), cum.shape[1]
    flat = cum.reshape(-1)
    base = np.asarray(rows, dtype=np.int64) * k
    skipped = skip < k
    # each skipped entry's weight, as the step of the cumulative row (error ~ 2^-53 × total: the guard's)
    at = base[:, None] + np.minimum(skip, k - 1)
    cum_at = flat.take(at)
    cum_before = np.where(skip > 0, flat.take(at - (skip > 0)), 0.0)
    weight = np.where(skipped, cum_at - cum_before, 0.0)
    incl = np.cumsum(weight, axis=1)
    total = flat[base + k - 1]
    u = r * (total - incl[:, -1]) if skip.shape[1] else r * total
    # a skipped entry lies below the draw when the masked CDF just before it (cum minus the skipped weight
    # before it) is <= u; those entries form a prefix of each row, and their weight shifts u into the
    # unmasked row
    passed = (skipped & (cum_before - (incl - weight) <= u[:, None])).sum(axis=1)
    shift = np.where(passed > 0, np.take_along_axis(incl, np.maximum(passed - 1, 0)[:, None], 1)[:, 0], 0.0) \
        if skip.shape[1] else np.zeros(m)
    v = u + shift
    lo, hi = np.zeros(m, dtype=np.int64), np.full(m, k, dtype=np.int64)
    for _ in range(k.bit_length()):                       # first i with cum[i] > v, 0..K, by halving
        mid = (lo + hi) >> 1
        right = flat.take(base + np.minimum(mid, k - 1)) <= v
        lo, hi = np.where(right, mid + 1, lo), np.where(right, hi, mid)
    index = lo
    # the masked CDF at index - 1 and at index, from the kept row and the skipped weights, checked against u
    last = np.minimum(index, k - 1)
    upper = flat.take(base + last) - (weight * (skip <= last[:, None])).sum(axis=1)
    lower = np.where(index > 0, flat.take(base + np.maximum(index - 1, 0)), 0.0) \
        - (weight * (skip <= (index - 1)[:, None])).sum(axis=1)
    margin = guard * total
    sure = (index < k) & (lower + margin < u) & (u < upper - margin)
    return index, sure
