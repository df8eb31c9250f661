"""Baseline: the EPR model with fitted parameters and no learning (a TimeGeo-like rule model).

Fitted on the training days: the rank exponent alpha by maximum likelihood on the real explore moves
(:func:`fit_alpha`), the action probabilities P(action | slot, at home) from the labelled real days, and the
initial states (home, first cell) from the training days' users. Days are then drawn through the same
:class:`~pategail.sdk.epr.EPREnvironment` that the learned policy uses.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pategail.sdk.epr import CellGeometry, EPREnvironment
from pategail.sdk.epr import explore_ranks as sdk_explore_ranks
from pategail.sdk.features import N_ACTIONS, label_actions
from pategail.sdk.places import PlaceLaw


def user_homes(days: np.ndarray, users: np.ndarray, night_slots: int = 12) -> np.ndarray:
    """int32 (n,): each day's home = its user's home (:func:`~pategail.sdk.features.infer_home`)."""
    from pategail.sdk.features import infer_home
    homes = np.empty(len(days), dtype=np.int32)
    for u in np.unique(users):
        sel = users == u
        homes[sel] = infer_home(days[sel], night_slots)
    return homes


def explore_ranks(geometry: CellGeometry, days: np.ndarray, homes: np.ndarray, chunk: int = 4096):
    """:func:`pategail.sdk.epr.explore_ranks` with the whole geometry's neighbour table."""
    return sdk_explore_ranks(geometry.neighbours.__getitem__, days, homes, chunk)


def fit_alpha(dest_rank: np.ndarray, unvisited: np.ndarray, lo: float = 0.0, hi: float = 3.0) -> float:
    """Maximum-likelihood alpha of P(dest) = r^-a / sum over unvisited candidates j of r_j^-a (explore moves
    whose destination is beyond the candidate set are left out), to 0.01 on [lo, hi].

    One dimension, so a grid: 0.1 steps, then 0.01 steps around the best; each grid is one matrix product.
    """
    keep = dest_rank > 0
    sum_log_r = np.log(dest_rank[keep].astype(np.float64)).sum()
    un = unvisited[keep].astype(np.float32)
    log_ranks = np.log(np.arange(1, un.shape[1] + 1, dtype=np.float64))

    def best_of(grid):
        weights = np.exp(-np.outer(log_ranks, grid)).astype(np.float32)          # (K, g)
        ll = -grid * sum_log_r - np.log((un @ weights).astype(np.float64)).sum(0)
        return float(grid[np.argmax(ll)])

    coarse = best_of(np.arange(lo, hi + 1e-9, 0.1))
    return round(best_of(np.arange(max(lo, coarse - 0.1), min(hi, coarse + 0.1) + 1e-9, 0.01)), 2)


@dataclass(frozen=True)
class EPRBaseline:
    alpha: float
    action_probs: np.ndarray      # (T-1, 2, 4): P(action | slot, at home)
    init_homes: np.ndarray        # (n,) initial states to draw from: home cell...
    init_first: np.ndarray        # ... and first cell, pairwise


def fit_epr_baseline(geometry: CellGeometry, days: np.ndarray, users: np.ndarray) -> EPRBaseline:
    homes = user_homes(days, users)
    labels = label_actions(days, homes)
    at_home = (days[:, :-1] == homes[:, None]).astype(np.int64)
    counts = np.zeros((days.shape[1] - 1, 2, N_ACTIONS))
    t = np.broadcast_to(np.arange(days.shape[1] - 1), labels.shape)
    np.add.at(counts, (t.ravel(), at_home.ravel(), labels.ravel().astype(np.int64)), 1)
    probs = (counts + 1.0) / (counts + 1.0).sum(-1, keepdims=True)                  # Laplace smoothing
    alpha = fit_alpha(*explore_ranks(geometry, days, homes))
    return EPRBaseline(alpha=alpha, action_probs=probs, init_homes=homes, init_first=days[:, 0].copy())


def sample_epr(model: EPRBaseline, geometry: CellGeometry, n_days: int, rng: np.random.Generator,
               explore_factors: np.ndarray | None = None, places: PlaceLaw | None = None) -> np.ndarray:
    """``n_days`` days of the fitted model; ``explore_factors`` (pategail.sdk.epr) and ``places``
    (pategail.sdk.places) only for ablations — the baseline itself is the classic model, pure power law."""
    idx = rng.integers(0, len(model.init_homes), n_days)
    env = EPREnvironment(geometry, alpha=model.alpha, explore_factors=explore_factors,
                         slots=model.action_probs.shape[0] + 1, rng=rng, places=places)
    env.reset(model.init_homes[idx], model.init_first[idx])
    while not env.done:
        at_home = (env.history()[:, -1] == env.homes).astype(np.int64)
        p = model.action_probs[env.t, at_home] * env.mask()
        cdf = np.cumsum(p / p.sum(1, keepdims=True), axis=1)
        actions = np.minimum((cdf < rng.random((n_days, 1))).sum(1), N_ACTIONS - 1)
        env.step(actions)
    return env.days.copy()
