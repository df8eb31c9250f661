"""Spatial histograms from the environment release's noisy sums, coarse regions first — pure post-processing.

The Gaussian mechanism's environment release gives the coordinator, for each of the home, first-cell and
visit histograms, a noisy sum per cell and a noisy sum per region (``pategail.sdk.regions``; both parts of
the one vector query, counted in its L2 sensitivity). At realistic populations most single cells hold less
than the noise's standard deviation σ (1,000 devices put ~460 units of home weight on a table of 4,210
cells; σ ≈ 5–15 per entry), so clipping the per-cell sums to 0 (the earlier post-processing) turns the noise
into positive mass over the whole table (~0.4σ a cell) that drowns the signal. Summing per-cell sums over an
area does not help at the top of a hierarchy (the noise grows as σ·√cells: measured in BENCHMARKS.md), which
is why the devices release the region sums themselves.

:func:`two_level_histogram` keeps only what clears a noise threshold, coarse level first, and spreads the
rest of the mass — the classic private spatial decomposition's estimate (Cormode et al., ICDE 2012) with two
levels: by default evenly. With ``shrink`` the rest goes where the noisy sums below the threshold still point,
in proportion to each sum less ``shrink`` noise standard deviations (soft thresholding). Against the exact
home histograms of resampled populations, shrink ½ lowers the estimate's error at every noise level measured;
in training at 1,000 devices and ε = 8 it halved G-rank's error and improved Radius and Distance but made
DailyLoc worse on both seeds, so it is not the default (BENCHMARKS.md, "The environment estimator").
"""
from __future__ import annotations

import numpy as np

THRESHOLD = 3.0
"""A noisy sum is kept only when it exceeds this many noise standard deviations: an empty cell or region
passes with probability 0.13% (about 5 of pategail-geolife's 4,210 cells, each with ~3σ of spurious mass,
instead of ~0.4σ on every cell after clipping). Chosen on training days."""
SOFT_SHRINK = 0.5
"""The soft-thresholding shrink measured in training: on the estimator's error against the exact home
histograms of resampled populations (two cities, σ from 3 to 20) the largest value that lowered the
total-variation error, the mass on empty squares and the distance of misplaced mass in every case; 1 and above
raised the error on the sparser city at the largest noise."""


def _shares(weights: np.ndarray, fallback: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Each entry's share of its group's mass: ``weights`` normalised within each group, ``fallback``
    (normalised) in a group whose weights are all 0; 0 where both are 0."""
    total = np.bincount(groups, weights=weights, minlength=n_groups)
    backup = np.bincount(groups, weights=fallback, minlength=n_groups)
    use = total[groups] > 0
    denom = np.where(use, total[groups], backup[groups])
    return np.where(denom > 0, np.where(use, weights, fallback) / np.where(denom > 0, denom, 1.0), 0.0)


def two_level_histogram(fine: np.ndarray, coarse: np.ndarray, region_of: np.ndarray, fine_std: float,
                        coarse_std: float, total: float, threshold: float = THRESHOLD,
                        shrink: float | None = None) -> np.ndarray:
    """float64 (n_cells,) ≥ 0 summing to ``max(total, 0)`` from noisy per-cell sums ``fine`` (noise std
    ``fine_std``) and noisy per-region sums ``coarse`` (released on their own, noise std ``coarse_std``).

    A region whose noisy sum clears ``threshold`` × ``coarse_std`` gets that sum (all of them scaled down
    if they exceed ``total``); the rest of ``total`` goes to the regions that did not, by cell count — or, with
    ``shrink``, in proportion to their noisy sums less ``shrink`` × ``coarse_std`` (by cell count where none is
    positive). Inside a region, cells whose noisy sum clears ``threshold`` × ``fine_std`` keep it (scaled down
    if they exceed the region's mass) and the rest of the region's mass goes to its other cells the same way.
    Without noise (both stds 0) and with the true total, the exact histogram.
    """
    fine, coarse = np.asarray(fine, dtype=np.float64), np.asarray(coarse, dtype=np.float64)
    region_of = np.asarray(region_of)
    n_regions = int(region_of.max()) + 1
    if fine.shape != region_of.shape or coarse.shape != (n_regions,):
        raise ValueError("need one fine sum per cell and one coarse sum per region")
    total = max(float(total), 0.0)
    out = np.zeros(len(fine))
    if total == 0:
        return out
    clear = coarse > threshold * coarse_std
    if coarse_std <= 0:
        clear = coarse > 0
    found = float(coarse[clear].sum())
    mass = np.where(clear, coarse, 0.0) * (min(1.0, total / found) if found > 0 else 0.0)
    left = total - float(mass.sum())
    if left > 0:
        # the mass the coarse noise hides: in the regions that did not clear, evenly by cell (all regions
        # when every one cleared, so a total above the cleared sums is not lost)
        cells_in = np.bincount(region_of, minlength=n_regions).astype(np.float64)
        hidden = ~clear if (~clear).any() else np.ones(n_regions, dtype=bool)
        if shrink is None:
            mass += np.where(hidden, cells_in, 0.0) * (left / cells_in[hidden].sum())
        else:
            weights = np.where(hidden, np.clip(coarse - shrink * coarse_std, 0.0, None), 0.0)
            mass += left * _shares(weights, np.where(hidden, cells_in, 0.0), np.zeros(n_regions, dtype=np.int64), 1)
    keep = fine > (threshold * fine_std if fine_std > 0 else 0.0)
    kept = np.where(keep, fine, 0.0)
    kept_sum = np.bincount(region_of, weights=kept, minlength=n_regions)
    others = np.bincount(region_of, weights=(~keep).astype(np.float64), minlength=n_regions)
    safe = np.where(kept_sum > 0, kept_sum, 1.0)
    # kept cells get their sums, scaled down to the region's mass if above it — or scaled to exactly the
    # region's mass when no other cell is left to take the remainder
    scale = np.where((others == 0) | (kept_sum > mass), mass / safe, 1.0)
    out = kept * scale[region_of]
    rest = np.clip(mass - kept_sum * scale, 0.0, None)
    if shrink is None:
        spread = np.where(others > 0, rest / np.where(others > 0, others, 1.0), 0.0)
        return out + np.where(keep, 0.0, spread[region_of])
    weights = np.where(keep, 0.0, np.clip(fine - shrink * fine_std, 0.0, None))
    return out + rest[region_of] * _shares(weights, (~keep).astype(np.float64), region_of, n_regions)
