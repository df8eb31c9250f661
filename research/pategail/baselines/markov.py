"""Baseline: a first-order Markov chain over cells whose transitions depend on the time of day.

P(l_{t+1} | l_t, t) is the empirical distribution of the training days' moves out of cell l_t at slot t.
Where (l_t, t) never occurs in training, the chain falls back to the moves out of l_t at any slot, and where
l_t has no moves at all, it stays. The first cell is drawn from the training days' slot-0 cells.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MarkovChain:
    """Transitions stored as sorted (key, next cell) arrays; key = slot * n_cells + cell (or cell alone)."""

    n_cells: int
    slots: int
    first_cells: np.ndarray        # (n_train,) slot-0 cells to draw from
    keys: np.ndarray               # (m,) sorted slot-aware keys
    nexts: np.ndarray              # (m,) next cell of each move, aligned with keys
    any_keys: np.ndarray           # (m,) sorted cell-only keys
    any_nexts: np.ndarray


def fit_markov(days: np.ndarray, n_cells: int) -> MarkovChain:
    days = np.asarray(days, dtype=np.int64)
    n, T = days.shape
    cur, nxt = days[:, :-1], days[:, 1:]
    keys = (np.arange(T - 1)[None, :] * n_cells + cur).ravel()
    order = np.argsort(keys, kind="stable")
    any_keys = cur.ravel()
    any_order = np.argsort(any_keys, kind="stable")
    return MarkovChain(n_cells=n_cells, slots=T, first_cells=days[:, 0].copy(), keys=keys[order],
                       nexts=nxt.ravel()[order], any_keys=any_keys[any_order], any_nexts=nxt.ravel()[any_order])


def _draw(sorted_keys, nexts, query, rng):
    """For each query key, a uniformly chosen recorded move (-1 where there is none)."""
    lo = np.searchsorted(sorted_keys, query, side="left")
    hi = np.searchsorted(sorted_keys, query, side="right")
    has = hi > lo
    pick = lo + np.floor(rng.random(len(query)) * (hi - lo)).astype(np.int64)
    return np.where(has, nexts[np.minimum(pick, len(nexts) - 1)], -1)


def sample_markov(chain: MarkovChain, n_days: int, rng: np.random.Generator) -> np.ndarray:
    """int32 (n_days, T) days drawn from the chain."""
    days = np.empty((n_days, chain.slots), dtype=np.int64)
    days[:, 0] = chain.first_cells[rng.integers(0, len(chain.first_cells), n_days)]
    for t in range(chain.slots - 1):
        cur = days[:, t]
        nxt = _draw(chain.keys, chain.nexts, t * chain.n_cells + cur, rng)
        missing = nxt < 0
        if missing.any():
            nxt[missing] = _draw(chain.any_keys, chain.any_nexts, cur[missing], rng)
        days[:, t + 1] = np.where(nxt < 0, cur, nxt)
    return days.astype(np.int32)
