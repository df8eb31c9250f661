"""The layout of the vectors a device contributes to a secure aggregation: encoded here on the device,
decoded here on the coordinator. Both sides import this one module, so the two can never disagree.

Two vectors exist, one per kind of release (every entry in [0, 1], the bound the secure aggregation's
clipping and the noise calibration assume):

- the **reward vector** of a round (``RoundRequest``): D_u(s, a) of every generated pair, query
  j = day j // 47, slot j % 47 — :func:`reward_vector` on the device, :func:`reward_matrix` on the
  coordinator (after summing over devices);
- the **environment vector** before round 1 (``InitialStatesRequest``): the initial-state contribution,
  the explore-law contribution, then the place contribution, ``EnvironmentLayout(n_cells, n_bins,
  place_law=True)``::

      [0, n)          w × one-hot of the device's home cell
      [n, 2n)         w × share of its days whose first cell is not home, by first cell
      [2n]            w × share of its days whose first cell is home
      [2n + 1]        w
      [2n + 2, +B)    w × observed share of its explore moves by rank bin (pategail.sdk.epr)
      [2n + 2 + B, +B) w × the pure power law's expected share by rank bin
      [2n + 2 + 2B, +n + 3) the place contribution (pategail.sdk.places: w × visit shares by cell, then the
                      return law's three entries)

      [.., +3R)       with ``n_regions`` = R > 0 (Gaussian mechanism only): the home, first-cell and visit
                      parts summed over the R regions of the cell table (pategail.sdk.regions), in that
                      order (:func:`coarse_contribution`)
      [.., +A)        with ``action_rates`` (declared by the bundle, ``environment.action_rates``): w × the
                      share of the device's decisions by (slot bucket, at home, distinct-cells bucket, action)
                      (pategail.sdk.action_rates; A = its length), the release the coordinator's rule-model
                      warm start (``TrainConfig.action_prior``) is fitted to

  with n = n_cells, B = the EPR environment's rank bins and w = :func:`contribution_weight` (days / 100,
  capped at 1). Without ``place_law`` the layout stops after the explore law (the vector as it was before
  the learned place law; every device of this SDK and the Android demo's Java core send the place part).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pategail.sdk.action_rates import action_rate_length
from pategail.sdk.features import SLOTS
from pategail.sdk.places import place_contribution_length

DAYS_CAP = 100
"""Days at which a device's environment contribution reaches full weight. Weighting by days makes the
released home and first-cell distribution follow days, as the days a generator must imitate do (a user
with 700 days is not one home among 83 in the test days); capping keeps every entry in [0, 1] and, under
privacy, keeps a device with few days from drowning in the noise. The initial-state part may have a cap of
its own (the bundle's ``environment.initial_states_days_cap``: :func:`initial_state_contribution`)."""


ENV_L1_BOUND = 9.0
"""L1 norm no honest environment vector of the Laplace mechanism's layout (``place_law``, no regions) exceeds:
six parts with entries ≥ 0 summing to at most w ≤ 1 — the home one-hot, the first cells with the at-home
share, the weight itself, explore observed, explore expected and the place visits — and the return law's three
entries, each at most w: 6 + 3 = 9. The device scales a longer vector down to it
(``pategail.sdk.secagg.mechanisms.laplace_environment_input``), so it bounds what any device's upload can move
whatever it holds; ``pategail.sdk.accounting.laplace_vector_sensitivity`` turns it into the release's L1
sensitivity (Σ x² rides in the same upload)."""

ACTION_RATES_L1 = 1.0
"""What the action-rate part (entries ≥ 0 summing to w ≤ 1) adds to the L1 norm of an honest environment
vector: a layout with it is bounded by ``ENV_L1_BOUND + ACTION_RATES_L1`` (:func:`env_l1_bound`)."""


def env_l1_bound(action_rates: bool = False) -> float:
    """The L1 bound of an honest Laplace-layout environment vector: ``ENV_L1_BOUND``, plus ``ACTION_RATES_L1``
    when the vector carries the action-rate part."""
    return ENV_L1_BOUND + (ACTION_RATES_L1 if action_rates else 0.0)


def contribution_weight(n_days: int, days_cap: int = DAYS_CAP) -> float:
    """w = min(1, n_days / days_cap): the weight of one device's environment contribution."""
    return min(1.0, n_days / days_cap)


# -- the reward vector -------------------------------------------------------------------------------------
def reward_count(n_days: int) -> int:
    """Queries of a round over ``n_days`` generated days: n × 47 (one per decision)."""
    return int(n_days) * (SLOTS - 1)


def reward_vector(scores: np.ndarray) -> np.ndarray:
    """float64 (n · 47,): the device's reward contribution, its discriminator's D_u(s, a) clipped to [0, 1]."""
    return np.clip(np.asarray(scores, dtype=np.float64).ravel(), 0.0, 1.0)


def reward_matrix(values: np.ndarray, n_days: int) -> np.ndarray:
    """(n_days, 47): a released reward vector (or any per-query array) back in day × decision order."""
    return np.asarray(values).reshape(int(n_days), SLOTS - 1)


@dataclass(frozen=True)
class Granularity:
    """How many of a day's decisions share one released reward: ``pair`` (1, the paper's), ``block:K``
    (K consecutive decisions of a day; the day's last block may be shorter) or ``day`` (all 47).

    A coarser granularity releases fewer values per round (47 / K per day), so each carries less noise at the
    same ε; every decision of a block then gets the block's mean reward."""

    block: int
    """Decisions per released value (1 = pair, 47 = day)."""

    def __post_init__(self) -> None:
        if not 1 <= self.block <= SLOTS - 1:
            raise ValueError(f"a block holds 1..{SLOTS - 1} decisions, got {self.block}")

    @classmethod
    def parse(cls, text: str) -> "Granularity":
        """``pair``, ``day`` or ``block:K``; ValueError naming the text otherwise."""
        if text == "pair":
            return cls(1)
        if text == "day":
            return cls(SLOTS - 1)
        head, _, k = str(text).partition(":")
        if head == "block" and k.isdigit():
            return cls(int(k))
        raise ValueError(f"granularity {text!r}: expected 'pair', 'day' or 'block:K' with K in 1..{SLOTS - 1}")

    @property
    def name(self) -> str:
        return "pair" if self.block == 1 else "day" if self.block == SLOTS - 1 else f"block:{self.block}"

    @property
    def blocks_per_day(self) -> int:
        return -(-(SLOTS - 1) // self.block)

    def count(self, n_days: int) -> int:
        """Released values of a round over ``n_days`` generated days."""
        return int(n_days) * self.blocks_per_day

    def _index(self) -> np.ndarray:
        return np.arange(SLOTS - 1) // self.block          # decision -> block of its day

    def block_means(self, values: np.ndarray, n_days: int) -> np.ndarray:
        """float64 (count(n_days),): the mean of per-decision ``values`` (n_days · 47, day-major) over each
        block."""
        per_day = reward_matrix(np.asarray(values, dtype=np.float64), n_days)
        idx = self._index()
        sums = np.zeros((int(n_days), self.blocks_per_day))
        np.add.at(sums, (slice(None), idx), per_day)  # type: ignore[arg-type]  # numpy's stubs take no tuple here
        return (sums / np.bincount(idx)).ravel()

    def expand(self, block_values: np.ndarray, n_days: int) -> np.ndarray:
        """float64 (n_days · 47,): every decision gets the value of its block."""
        per_block = np.asarray(block_values, dtype=np.float64).reshape(int(n_days), self.blocks_per_day)
        return per_block[:, self._index()].ravel()


# -- the environment vector ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class EnvironmentParts:
    """An environment vector (one device's, or the noisy sum over devices) cut into its named parts."""

    homes: np.ndarray
    """(n_cells,) home cells, weighted."""
    firsts: np.ndarray
    """(n_cells,) first cells of days that do not start at home, weighted."""
    first_at_home: float
    """Weighted share of days that start at home."""
    weight: float
    """Σ w."""
    explore_observed: np.ndarray
    """(B,) observed explore moves by rank bin, weighted."""
    explore_expected: np.ndarray
    """(B,) the power law's expectation of the same, weighted."""
    places: np.ndarray | None = None
    """(n_cells + 3,) the place contribution (pategail.sdk.places), None in a layout without it."""
    coarse: np.ndarray | None = None
    """(3, n_regions): homes, firsts and visits summed by region; None in a layout without regions."""
    action_rates: np.ndarray | None = None
    """(action_rate_length(),) the action-rate part (pategail.sdk.action_rates), None in a layout without it."""


@dataclass(frozen=True)
class EnvironmentLayout:
    """The environment vector of a cell table of ``n_cells`` and an EPR environment of ``n_bins`` rank bins,
    with the place contribution at its end when ``place_law`` (the SDK's device always sends it)."""

    n_cells: int
    n_bins: int
    place_law: bool = False
    n_regions: int = 0
    """Regions of the coarse parts (0: none; needs ``place_law``)."""
    action_rates: bool = False
    """The action-rate part at the very end (pategail.sdk.action_rates)."""

    @property
    def length(self) -> int:
        """Entries: initial states (2·n_cells + 2), explore law (2·n_bins), then place law (n_cells + 3)
        when ``place_law``, then 3·n_regions, then the action rates when ``action_rates``."""
        places = place_contribution_length(self.n_cells) if self.place_law else 0
        rates = action_rate_length() if self.action_rates else 0
        return 2 * self.n_cells + 2 + 2 * self.n_bins + places + 3 * self.n_regions + rates

    def pack(self, initial_states: np.ndarray, explore_law: np.ndarray,
             places: np.ndarray | None = None, coarse: np.ndarray | None = None,
             action_rates: np.ndarray | None = None) -> np.ndarray:
        """float64 (length,): the device's vector from :func:`initial_state_contribution` (2·n_cells + 2),
        ``pategail.sdk.epr.explore_law_contribution`` (2·n_bins) and, in a ``place_law`` layout,
        ``pategail.sdk.places.place_contribution`` (n_cells + 3)."""
        if len(initial_states) != 2 * self.n_cells + 2 or len(explore_law) != 2 * self.n_bins \
                or (places is not None) != self.place_law \
                or (places is not None and len(places) != place_contribution_length(self.n_cells)):
            raise ValueError("contributions do not have the environment layout")
        if (coarse is not None) != (self.n_regions > 0) or (
                coarse is not None and np.shape(coarse) != (3, self.n_regions)):
            raise ValueError("the coarse parts do not have the environment layout's regions")
        if (action_rates is not None) != self.action_rates or (
                action_rates is not None and len(action_rates) != action_rate_length()):
            raise ValueError("the action-rate part does not have the environment layout")
        parts = [initial_states, explore_law] + ([] if places is None else [places]) + (
            [] if coarse is None else [np.asarray(coarse).ravel()]) + (
            [] if action_rates is None else [action_rates])
        return np.concatenate(parts).astype(np.float64)

    def unpack(self, sums: np.ndarray) -> EnvironmentParts:
        """The parts of a vector of this layout (ValueError for another length)."""
        n, b = self.n_cells, self.n_bins
        if len(sums) != self.length or n < 1:
            raise ValueError("noisy sums do not have the initial-state layout")
        end = 2 * n + 2 + 2 * b
        places_end = end + (place_contribution_length(n) if self.place_law else 0)
        coarse_end = places_end + 3 * self.n_regions
        return EnvironmentParts(sums[:n], sums[n:2 * n], float(sums[2 * n]), float(sums[2 * n + 1]),
                                sums[2 * n + 2:2 * n + 2 + b], sums[2 * n + 2 + b:end],
                                sums[end:places_end] if self.place_law else None,
                                sums[places_end:coarse_end].reshape(3, self.n_regions) if self.n_regions else None,
                                sums[coarse_end:] if self.action_rates else None)


def contribution_length(n_cells: int, n_bins: int) -> int:
    """Entries of one SDK device's environment vector (``EnvironmentLayout(n_cells, n_bins, True).length``):
    the place contribution included."""
    return EnvironmentLayout(n_cells, n_bins, place_law=True).length


def coarse_contribution(initial_states: np.ndarray, places: np.ndarray, region_of: np.ndarray,
                        n_regions: int) -> np.ndarray:
    """float64 (3, n_regions): a device's home, first-cell and visit parts (from its
    :func:`initial_state_contribution` and ``place_contribution``) summed over the regions of ``region_of``
    (int (n_cells,), pategail.sdk.regions). Each row sums to the part's own sum (≤ w), so each row's L2 norm
    is at most 1, as each fine part's."""
    region_of = np.asarray(region_of)
    n = len(region_of)
    rows = (initial_states[:n], initial_states[n:2 * n], places[:n])
    return np.stack([np.bincount(region_of, weights=r, minlength=n_regions) for r in rows])


def initial_state_contribution(days: np.ndarray, home: int, n_cells: int, days_cap: int = DAYS_CAP) -> np.ndarray:
    """float64 (2·n_cells + 2,): one device's contribution to the released distribution of initial states
    (the first four parts of the environment vector; see the module docstring), with the weight
    w = min(1, days / ``days_cap``).

    Summed over devices (with noise) this gives a day-weighted count of users per home cell and per first
    cell, and P(first cell = home) as the ratio of the last two sums — from which the coordinator draws
    (home, first cell) pairs. The larger ``days_cap``, the more the generated days' homes follow the real
    days' rather than the users'.
    """
    days = np.asarray(days)
    if not 0 <= home < n_cells:
        raise ValueError(f"home {home} is not a cell id (0..{n_cells - 1})")
    out = np.zeros(2 * n_cells + 2, dtype=np.float64)
    w = contribution_weight(len(days), days_cap)
    out[home] = w
    out[2 * n_cells + 1] = w
    if len(days):
        first = days[:, 0]
        away = first[first != home]
        out[n_cells:2 * n_cells] = w * np.bincount(away, minlength=n_cells)[:n_cells] / len(days)
        out[2 * n_cells] = w * np.count_nonzero(first == home) / len(days)
    return out
