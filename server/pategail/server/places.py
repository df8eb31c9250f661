"""The place law (d-EPR relevance and return-to-the-place-just-left) from the noisy sums of the devices'
place contributions (:func:`pategail.sdk.places.place_contribution`), released with the initial states.

Privacy: the ``n_cells + 3`` entries ride in the same secure noisy release as the initial states; each is in
[0, 1] (sensitivity 1 per entry, the unit the noise is calibrated for) and counts as one query in the
accountant and in the run's :class:`~pategail.server.privacy.plan.PrivacyPlan` (``Coordinator.planned_queries``:
the environment vector's ``EnvironmentLayout(..., place_law=True)`` length, :mod:`pategail.sdk.contribution`),
so its budget share is (n_cells + 3) / (all queries of the run). Everything below is post-processing of the
noisy sums.
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.epr import NearestCellRows, explore_rank_weights, n_rank_bins, rank_bins
from pategail.sdk.places import PlaceLaw, place_contribution_length

RELEVANCE_PRIOR = 1.0
"""Pseudo-visits, as a share of the mean cell's released visits, added to every cell's relevance: a cell no
device visited keeps a little attraction (explore must be able to reach every candidate), and noise that
clipping left at 0 does not exclude a cell. Chosen on training days with the epr rule model
(the measurements are in the git history of BENCHMARKS.md)."""


def place_law_from_noisy_sums(sums: np.ndarray, n_cells: int, noise_std: float = 0.0,
                              prior: float = RELEVANCE_PRIOR, visits: np.ndarray | None = None) -> PlaceLaw:
    """The place law from the noisy sums S of the place contributions (``n_cells + 3`` values).

    relevance(c) = max(S[c], 0) + prior × max(mean_c S, noise_std); return_last, the weight of the place
    just left in the mixture "place just left, else ∝ visits", by the method of moments from the released
    share F that went to it and the share V the visits law alone gave it (both ×Σw, divided by W = Σw):
    F/W = q + (1 − q)·V/W, so q = (F − V) / (W − V), clipped to [0, 1]; 0 when W is not above the noise.

    ``visits``: the visit histogram already estimated from the noisy sums (non-negative, noise thresholded:
    pategail.server.spatial); the floor is then ``prior`` × its mean alone.
    """
    sums = np.asarray(sums, dtype=np.float64)
    if len(sums) != place_contribution_length(n_cells):
        raise ValueError("noisy sums do not have the place-law layout")
    if visits is None:
        visits = np.clip(sums[:n_cells], 0, None)
        floor = prior * max(float(visits.mean()), float(noise_std), 1e-12)
    else:
        visits = np.asarray(visits, dtype=np.float64)
        floor = prior * max(float(visits.mean()), 1e-12)
    went, expected, weight = sums[n_cells:]
    s = max(float(noise_std), 0.0)
    q = 0.0
    if weight > max(10 * s, 0.0) and weight - expected > 0:
        q = float(np.clip((went - expected) / (weight - expected), 0.0, 1.0))
    return PlaceLaw(relevance=visits + floor, return_last=q)


def tempered(law: PlaceLaw, exponent: float) -> PlaceLaw:
    """The place law with its explore attraction relevance^exponent (return law unchanged); ``exponent`` 1 is
    the law itself. Post-processing of released values: it costs no privacy."""
    if not 0.0 <= exponent <= 1.0:
        raise ValueError(f"the relevance exponent must be in [0, 1], got {exponent}")
    if exponent == 1.0:
        return law
    return PlaceLaw(law.relevance ** exponent, law.return_last)


def rank_calibrated_factors(neighbours: np.ndarray | NearestCellRows, alpha: float, explore_factors: np.ndarray,
                            relevance: np.ndarray, origins: np.ndarray, *, iterations: int = 200,
                            tol: float = 1e-10) -> np.ndarray:
    """Explore factors (B,) for the place law whose explore jumps fall into the rank bins as often as under
    the classic law with ``explore_factors``.

    The released factors calibrate r^-alpha × factor[bin(r)] to the rank bins the devices' explores landed
    in, for the classic law. Multiplying by relevance moves mass towards the ranks where relevant cells lie
    (near: the busiest cells surround the homes; on the sparse city rank 1 got 15% of jumps instead of 8% and
    its few trips got shorter), so the rank law is scaled per bin,
    g[b], until the place law's share of bin b, averaged over origin cells weighted by ``origins``, equals
    the classic law's: iterative proportional scaling on one margin, which converges because each bin's
    share rises monotonically with its own g. Pure post-processing of released values (the relevance, the
    factors and the origin weights), so it costs no privacy.

    ``neighbours``: (n_cells, K) candidate table (pategail.sdk.epr.CellGeometry; a lazy table is read row
    by row for the origins only); ``origins``: (n_cells,) non-negative weights of the cells explores start
    from. Returns ``explore_factors`` × g, g normalised to a geometric mean of 1.
    """
    factors = np.asarray(explore_factors, dtype=np.float64)
    relevance = np.asarray(relevance, dtype=np.float64)
    origins = np.asarray(origins, dtype=np.float64)
    k = neighbours.shape[1]
    bins = rank_bins(k)
    n_bins = n_rank_bins(k)
    weight = explore_rank_weights(k, alpha, factors)
    target = np.bincount(bins, weight, minlength=n_bins) / weight.sum()
    cells = np.flatnonzero(origins > 0)
    if not len(cells):
        return factors.copy()
    share = origins[cells] / origins[cells].sum()
    onehot = np.eye(n_bins)[bins]                                                   # (K, B)
    # S[o, b]: origin o's relevance-weighted rank weight in bin b; a place law with bin scales g gives
    # origin o the bin shares g[b]·S[o, b] / (S[o] · g)
    per_bin = np.empty((len(cells), n_bins))
    for start in range(0, len(cells), 512):                                         # bounded memory
        rows = np.asarray(neighbours[cells[start:start + 512]])
        per_bin[start:start + 512] = (relevance[rows] * weight[None, :]) @ onehot
    g = np.ones(n_bins)
    for _ in range(iterations):
        mix = g * ((share / (per_bin @ g)) @ per_bin)
        g *= target / mix
        g /= np.exp(np.log(g).mean())
        if np.max(np.abs(mix / target - 1.0)) < tol:
            break
    return factors * g
