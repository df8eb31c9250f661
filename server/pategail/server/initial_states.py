"""What the coordinator learns about the environment before round 1, through one secure noisy aggregation:
the initial states (home cell, first cell) of generated days and the correction of the EPR explore law.

The original code started generated days from test-set days. Here each device contributes, with a weight w
that grows with its number of days (capped at 1), the vector ``[w·home one-hot (n_cells) | w·share of its
days whose first cell is not home, by first cell (n_cells) | w·share of its days that start at home | w]``
(every entry in [0, 1]; the layout is the SDK's :mod:`pategail.sdk.contribution`, imported by both sides);
the coordinator receives only the noisy sums and turns them into a distribution — clipping negative noisy
counts to 0 is post-processing, so it costs no privacy. After those 2·n_cells + 2 entries come the device's explore-law contribution (2·B
entries, see the SDK's ``explore_law_contribution``): observed and power-law-expected shares of its explore
moves by rank bin, whose noisy sums O and A give the explore factors (O + s) / (A + s), s = √2·b for the
release's Laplace scale b (0 without noise; a lower bound of the noise's standard deviation, which is larger
when more than n_min devices took part): the factors shrink towards 1, the power law, and are 1 when the
released total weight is below ``SIGNAL_GATE`` noise standard deviations. Last come the ``n_cells + 3``
entries of the place contribution (the SDK's ``place_contribution``: visit distribution and return law),
from which :mod:`pategail.server.places` makes the d-EPR place law.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pategail.sdk.contribution import EnvironmentLayout
from pategail.sdk.places import PlaceLaw
from pategail.server.action_prior import ActionRates, action_rates_from_noisy_sums
from pategail.server.places import place_law_from_noisy_sums
from pategail.server.spatial import two_level_histogram

SIGNAL_GATE = 10.0
"""The explore factors are used only when the released total device weight Σw is at least this many times
the noise's standard deviation; below that the ratio of two noisy sums is noise itself (83 devices at
ε = 8 gave factors of 0.8–3.2 from a noise std of 645 on Σw ≈ 39) and the pure power law is kept."""
FACTOR_RANGE = (0.05, 20.0)
"""Explore factors are clipped to this range (post-processing), so a rank bin no device explored into stays
reachable, and noise cannot make one bin dominate. On pategail-geolife the factors lie in 0.46–1.95."""


@dataclass(frozen=True)
class InitialStates:
    """home_weights (n_cells,) and first_weights (n_cells,) sum to 1; p_same = P(first cell == home);
    explore_factors (B,) correct the EPR explore law per rank bin (pategail.sdk.epr); places: the d-EPR
    place law (pategail.sdk.places), None in checkpoints written before it existed."""

    home_weights: np.ndarray
    first_weights: np.ndarray
    p_same: float
    explore_factors: np.ndarray
    places: PlaceLaw | None = None
    action_rates: ActionRates | None = None
    """The rule model's rates (pategail.server.action_prior), when the release carried the action-rate part."""

    @classmethod
    def from_noisy_sums(cls, sums: np.ndarray, n_cells: int, n_bins: int, noise_std: float = 0.0,
                        region_of: np.ndarray | None = None, action_rates: bool = False) -> "InitialStates":
        """From the released sums; ``region_of`` (the cell table's regions, pategail.sdk.regions) when the
        release has coarse parts: the home, first-cell and visit histograms are then estimated coarse level
        first (:func:`pategail.server.spatial.two_level_histogram`), else by clipping negative sums to 0."""
        n = n_cells
        n_regions = 0 if region_of is None else int(np.max(region_of)) + 1
        parts = EnvironmentLayout(n_cells, n_bins, place_law=True, n_regions=n_regions,
                                  action_rates=action_rates).unpack(sums)
        weight = parts.weight
        assert parts.places is not None                       # unpacked with place_law=True
        s = max(float(noise_std), 0.0)
        visits = None
        if n_regions:
            assert region_of is not None and parts.coarse is not None     # regions: coarse parts unpacked
            # totals known from single entries (noise s each): Σ homes = Σ visits = Σw, Σ firsts = Σw − at home
            homes = two_level_histogram(parts.homes, parts.coarse[0], region_of, s, s, weight)
            firsts = two_level_histogram(parts.firsts, parts.coarse[1], region_of, s, s, weight - parts.first_at_home)
            visits = two_level_histogram(parts.places[:n], parts.coarse[2], region_of, s, s, weight)
        else:
            homes = np.clip(parts.homes, 0, None)
            firsts = np.clip(parts.firsts, 0, None)
        # all-zero (only possible under overwhelming noise): fall back to uniform
        homes = homes / homes.sum() if homes.sum() > 0 else np.full(n, 1 / n)
        firsts = firsts / firsts.sum() if firsts.sum() > 0 else np.full(n, 1 / n)
        p_same = parts.first_at_home / weight if weight > 0 else 0.5
        observed = np.clip(parts.explore_observed, 0, None)
        expected = np.clip(parts.explore_expected, 0, None)
        places = place_law_from_noisy_sums(parts.places, n, noise_std, visits=visits)
        if s > 0 and weight < SIGNAL_GATE * s:
            factors = np.ones(n_bins)
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                factors = np.where(expected + s > 0, (observed + s) / (expected + s), 1.0)
            factors = np.clip(factors, *FACTOR_RANGE)
        rates = None if parts.action_rates is None else action_rates_from_noisy_sums(parts.action_rates, s)
        return cls(homes, firsts, float(np.clip(p_same, 0, 1)), factors, places, rates)

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
                "p_same": self.p_same, "explore_factors": self.explore_factors.tolist(),
                "places": None if self.places is None else {"relevance": self.places.relevance.tolist(),
                                                            "return_last": self.places.return_last},
                "action_rates": None if self.action_rates is None else self.action_rates.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> "InitialStates":
        places, rates = d.get("places"), d.get("action_rates")
        return cls(np.asarray(d["home_weights"]), np.asarray(d["first_weights"]), float(d["p_same"]),
                   np.asarray(d["explore_factors"], dtype=np.float64),
                   None if places is None else PlaceLaw(np.asarray(places["relevance"]), places["return_last"]),
                   None if rates is None else ActionRates.from_dict(rates))
