"""A learned notion of place for the EPR environment (d-EPR, Pappalardo et al. 2015), and what each device
contributes to learn it.

Two changes to the classic EPR laws of :mod:`pategail.sdk.epr`, both optional (``PlaceLaw``; without one the
environment is the classic model, bit for bit):

- **explore** goes to an unvisited candidate c with probability ∝ relevance(c) × w(rank(c)), w the
  (corrected) power law r^-α × factor[bin(r)]: cells many people visit attract explorers, so generated visits
  concentrate on the city's places (campuses, work districts) instead of spreading around the homes;
- **return** goes, with probability ``return_last``, to the place just left (the cell of the run of slots
  before the current one, when it is a return destination: not home) and otherwise, as before, to a visited
  cell ∝ its visits so far. On pategail-geolife's training days 57% of returns go to the place just left.

Both come from one contribution per device (:func:`place_contribution`, ``n_cells + 3`` entries, each in
[0, 1]) appended to the initial-state release: the coordinator learns them only as noisy secure sums
(``pategail.server.places``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pategail.sdk.features import RETURN, label_actions


@dataclass(frozen=True)
class PlaceLaw:
    """relevance: float64 (n_cells,) > 0, the explore attraction of every cell (any scale: only ratios
    matter); return_last: probability in [0, 1] that a return goes to the place just left."""

    relevance: np.ndarray
    return_last: float = 0.0

    def __post_init__(self) -> None:
        r = np.asarray(self.relevance, dtype=np.float64)
        if r.ndim != 1 or not len(r) or not (np.isfinite(r) & (r > 0)).all():
            raise ValueError("relevance must be a non-empty vector of positive numbers")
        if not 0.0 <= float(self.return_last) <= 1.0:
            raise ValueError("return_last must be in [0, 1]")
        object.__setattr__(self, "relevance", r)
        object.__setattr__(self, "return_last", float(self.return_last))


def place_contribution_length(n_cells: int) -> int:
    """Entries of one device's place contribution: relevance (n_cells), then the return law (3)."""
    return int(n_cells) + 3


def place_just_left(days: np.ndarray) -> np.ndarray:
    """int64 (n, T): for every slot t, the cell of the run of equal cells before the run that holds slot t
    (the place just left); -1 while the day has not moved yet."""
    days = np.asarray(days)
    n, T = days.shape
    out = np.full((n, T), -1, dtype=np.int64)
    for t in range(1, T):
        moved = days[:, t] != days[:, t - 1]
        out[:, t] = np.where(moved, days[:, t - 1], out[:, t - 1])
    return out


def return_statistics(days: np.ndarray, homes: np.ndarray) -> tuple[int, float, float]:
    """Over the return moves of labelled days whose place just left is a return destination (not home):
    (how many, the share that went to the place just left, the mean probability the visits-proportional
    law gave the place just left at those moves)."""
    days = np.asarray(days)
    homes = np.asarray(homes).reshape(-1, 1)
    labels = label_actions(days, homes)
    left = place_just_left(days)[:, :-1]
    eligible = (labels == RETURN) & (left >= 0) & (left != homes)
    d, t = np.nonzero(eligible)
    if not len(d):
        return 0, 0.0, 0.0
    went = days[d, t + 1] == left[d, t]
    upto = np.arange(days.shape[1])[None, :] <= t[:, None]                       # slots 0..t of each move
    hist = days[d]
    cur = days[d, t][:, None]
    visits_left = ((hist == left[d, t][:, None]) & upto).sum(1)
    returnable = ((hist != homes[d]) & (hist != cur) & upto).sum(1)
    return len(d), float(went.mean()), float((visits_left / returnable).mean())


def place_contribution(days: np.ndarray, home: int, n_cells: int, days_cap: int) -> np.ndarray:
    """float64 (n_cells + 3,): one device's contribution to the place law, every entry in [0, 1].

    With w = min(1, days / ``days_cap``) (as the initial-state contribution):

    - ``[0, n_cells)``: w × the share of the device's slots spent in each cell (its visit distribution;
      sums to w) — summed over devices, the day-weighted visit density that gives the relevance;
    - ``[n_cells]``: w × the share of its eligible return moves (place just left not home) that went to the
      place just left; ``[n_cells + 1]``: w × the mean visits-proportional probability of the place just
      left at those moves; ``[n_cells + 2]``: w when it has such moves, else 0.
    """
    days = np.asarray(days)
    if not 0 <= home < n_cells:
        raise ValueError(f"home {home} is not a cell id (0..{n_cells - 1})")
    out = np.zeros(place_contribution_length(n_cells), dtype=np.float64)
    if not len(days):
        return out
    w = min(1.0, len(days) / days_cap)
    out[:n_cells] = w * np.bincount(days.ravel(), minlength=n_cells)[:n_cells] / days.size
    moves, went, expected = return_statistics(days, np.full(len(days), home))
    if moves:
        out[n_cells:] = w * went, w * expected, w
    return out
