"""Initial states (home cell, first cell) of generated days, learned through the secure noisy aggregation.

The original code started generated days from test-set days. Here each device contributes, with a weight w
that grows with its number of days (capped at 1), the vector ``[w·home one-hot (n_cells) | w·share of its
days whose first cell is not home, by first cell (n_cells) | w·share of its days that start at home | w]``
(every entry in [0, 1]; see the SDK's ``initial_state_contribution``); the coordinator receives only the
noisy sums and turns them into a distribution — clipping negative noisy counts to 0 is post-processing, so
it costs no privacy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def contribution_length(n_cells: int) -> int:
    return 2 * n_cells + 2


@dataclass(frozen=True)
class InitialStates:
    """home_weights (n_cells,) and first_weights (n_cells,) sum to 1; p_same = P(first cell == home)."""

    home_weights: np.ndarray
    first_weights: np.ndarray
    p_same: float

    @classmethod
    def from_noisy_sums(cls, sums: np.ndarray) -> "InitialStates":
        n = (len(sums) - 2) // 2
        if len(sums) != contribution_length(n) or n < 1:
            raise ValueError("noisy sums do not have the initial-state layout")
        homes = np.clip(sums[:n], 0, None)
        firsts = np.clip(sums[n:2 * n], 0, None)
        # all-zero after clipping (only possible under overwhelming noise): fall back to uniform
        homes = homes / homes.sum() if homes.sum() > 0 else np.full(n, 1 / n)
        firsts = firsts / firsts.sum() if firsts.sum() > 0 else np.full(n, 1 / n)
        weight = sums[2 * n + 1]
        p_same = sums[2 * n] / weight if weight > 0 else 0.5
        return cls(homes, firsts, float(np.clip(p_same, 0, 1)))

    def sample(self, n_days: int, rng: np.random.Generator, redraws: int = 8) -> tuple[np.ndarray, np.ndarray]:
        """(homes, first cells), int32 (n_days,) each: home ~ home_weights; first = home with probability
        p_same, else ~ first_weights, redrawn (up to ``redraws`` times) while it equals the home."""
        n = len(self.home_weights)
        homes = rng.choice(n, size=n_days, p=self.home_weights).astype(np.int32)
        firsts = homes.copy()
        away = np.flatnonzero(rng.random(n_days) >= self.p_same)
        for _ in range(redraws):
            if len(away) == 0:
                break
            firsts[away] = rng.choice(n, size=len(away), p=self.first_weights)
            away = away[firsts[away] == homes[away]]
        return homes, firsts

    def to_dict(self) -> dict:
        return {"home_weights": self.home_weights.tolist(), "first_weights": self.first_weights.tolist(),
                "p_same": self.p_same}

    @classmethod
    def from_dict(cls, d: dict) -> "InitialStates":
        return cls(np.asarray(d["home_weights"]), np.asarray(d["first_weights"]), float(d["p_same"]))
