"""A privately released cell table: which squares of a public universe a run may use, released through a
noisy sum of bounded per-device vectors and a threshold — pure functions.

The universe is public (every square of a public bounding box, ``data prepare --public-cells``). Each device
contributes a 0/1 vector over it with at most ``max_cells`` ones (its most-visited squares,
``pategail.sdk.cell_universe.visited_vector``); the secure aggregation adds Gaussian noise of std σ to each
square's count, and the squares whose noisy count clears τ form the run's table. Because the candidate
squares are public, this is a Gaussian mechanism on a vector of fixed length (L2 sensitivity √max_cells under
zero-out adjacency; √(2·max_cells) under replace-one, a device's ones moved to other squares) followed by a
threshold — post-processing, so the threshold costs no δ (unlike partition selection over unknown keys,
Korolova et al. 2009; Gopi et al. 2020, where keys nobody could have guessed must be hidden by δ).

τ is set so that a square nobody visits (noisy count = noise alone) is released with probability
``FALSE_CELLS`` / universe: about ``FALSE_CELLS`` such squares in the whole table in expectation.

Budget: Gaussian releases compose in Rényi DP as one Gaussian whose ρ is the sum of theirs (zCDP, Bun &
Steinke 2016), so the cell release takes ``RHO_SHARE`` of the ρ of the run's target (ε, δ) and the rest of the
run — environment and rewards — is planned for the ε that the remaining ρ gives (:func:`remaining_epsilon`);
their joint composition is the target (:func:`composed_epsilon_with_cells` recomputes it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pategail.sdk.accounting import QUANTA_PER_UNIT, GaussianRelease, composed_epsilon, gaussian_sensitivity
from pategail.server.privacy.adjacency import REPLACE_ONE, ZERO_OUT, check_adjacency
from pategail.server.privacy.gaussian import calibrate_noise_multiplier
from pategail.server.privacy.plan import PrivacyPlan

MAX_CELLS = 32
"""Squares a device counts (its most-visited ones): about the median user's whole footprint (GeoLife's users
visit a median of 36 squares of the Beijing map), so a typical device counts every square it uses. At 1,000
devices, ε = 8 and ``RHO_SHARE`` 0.2 the released table held 83–85% of the test days' slots with m from 8 to 64
(one noise draw each; ``benchmarks/released_cells.py sweep``): the table is not sensitive to m there."""
RHO_SHARE = 0.2
"""The cell release's share of the target's ρ: the environment and reward noise grow by 1/√(1 − 0.2) ≈ 1.12
(at 1,000 devices and ε = 8 the rewards stay ~8× under their tolerance), and the table's noise std is √5
times that of a release of the whole budget. 0.1 released 140 squares holding 66% of the test slots, 0.2 198
and 83%, 0.3 234 and 88% (m = 32, same sweep)."""
FALSE_CELLS = 0.1
"""Expected number of squares nobody visits that clear the threshold, over the whole universe."""


@dataclass(frozen=True)
class CellReleasePlan:
    """The noise and threshold of one cell-table release (value units: devices)."""

    universe: int
    """Squares of the public candidate universe (values of the release)."""
    max_cells: int
    """Ones a device's vector may hold (its most-visited squares)."""
    noise_std: float
    """σ on each square's noisy count."""
    threshold: float
    """τ for noise of std ``noise_std``: a square is released when its noisy count exceeds it."""
    rho_share: float
    """The share of the target's ρ the release spends."""
    adjacency: str = ZERO_OUT
    """The relation the target applies to (σ is calibrated on its sensitivity)."""

    @property
    def sensitivity(self) -> float:
        """Zero-out L2 sensitivity (the one journals and ledgers record): √max_cells plus the fixed-point
        rounding (``gaussian_sensitivity``)."""
        return gaussian_sensitivity(math.sqrt(self.max_cells), self.universe)

    def release(self) -> GaussianRelease:
        """The release as the accountant records it (zero-out sensitivity)."""
        return GaussianRelease(self.noise_std, self.sensitivity, 1)

    def threshold_for(self, contributors: int, shares: int) -> float:
        """τ for the noise a sum actually carries: the devices' shares are sized for ``shares`` = n_min − t
        devices, so ``contributors`` of them add σ·√(contributors / shares) (more than σ when more than n_min
        survive). A threshold on σ alone would let an empty square through √(c/s) times as many σ more often
        (0.56 instead of 0.1 expected empty squares at 1,000 devices with n_min = 800)."""
        if contributors < 1 or shares < 1:
            raise ValueError("contributors and shares must be at least 1")
        return self.threshold * math.sqrt(max(1.0, contributors / shares))

    def select(self, noisy_counts: np.ndarray, threshold: float | None = None) -> np.ndarray:
        """int64, sorted: universe ids of the squares whose noisy count exceeds ``threshold`` (default τ;
        :meth:`threshold_for` the noise the sum carries)."""
        counts = np.asarray(noisy_counts, dtype=np.float64)
        if counts.shape != (self.universe,):
            raise ValueError(f"need one noisy count per square of the universe ({self.universe}), got {counts.shape}")
        return np.flatnonzero(counts > (self.threshold if threshold is None else threshold))


def replace_one_factor(max_cells: int, universe: int) -> float:
    """Replace-one over zero-out sensitivity: two 0/1 vectors of at most m ones differ by at most √(2m) in L2
    (disjoint supports), against √m for one vector zeroed; the encoding's rounding adds √d quanta against ½√d."""
    quanta = math.sqrt(universe) / QUANTA_PER_UNIT
    return (math.sqrt(2.0 * max_cells) + quanta) / (math.sqrt(max_cells) + 0.5 * quanta)


def target_rho(target_epsilon: float, target_delta: float) -> float:
    """ρ of the one Gaussian whose RDP curve converts to exactly (ε, δ) (dp-accounting's RDP conversion)."""
    return 0.5 / calibrate_noise_multiplier(target_epsilon, target_delta, 1) ** 2


def plan_cell_release(target_epsilon: float, target_delta: float, universe: int, max_cells: int = MAX_CELLS,
                      rho_share: float = RHO_SHARE, false_cells: float = FALSE_CELLS,
                      adjacency: str = ZERO_OUT) -> CellReleasePlan:
    """σ for ``rho_share`` of the ρ of (ε, δ) under ``adjacency``, and τ for ``false_cells`` expected empty
    squares released."""
    check_adjacency(adjacency)
    if not (0 < rho_share < 1 and universe >= 1 and max_cells >= 1 and 0 < false_cells < universe):
        raise ValueError("need 0 < rho_share < 1, universe >= 1, max_cells >= 1, 0 < false_cells < universe")
    z = 1.0 / math.sqrt(2.0 * rho_share * target_rho(target_epsilon, target_delta))
    factor = replace_one_factor(max_cells, universe) if adjacency == REPLACE_ONE else 1.0
    sigma = z * factor * gaussian_sensitivity(math.sqrt(max_cells), universe)
    tau = sigma * NormalDist().inv_cdf(1.0 - false_cells / universe)
    return CellReleasePlan(universe, max_cells, float(sigma), float(tau), float(rho_share), adjacency)


def rest_epsilon(target_epsilon: float, target_delta: float, rho_share: float = RHO_SHARE) -> float:
    """The ε at ``target_delta`` left to the rest of the run when the cell release takes ``rho_share`` of the
    target's ρ: that of one Gaussian of ρ = (1 − share)·ρ_target. A Gaussian-mechanism run planned for it (its
    releases calibrated jointly in RDP to one Gaussian of that ρ) composes with the cell release to the target."""
    rho = (1.0 - rho_share) * target_rho(target_epsilon, target_delta)
    return composed_epsilon([GaussianRelease(1.0 / math.sqrt(2.0 * rho), 1.0, 1)], target_delta)


def remaining_epsilon(target_epsilon: float, target_delta: float, plan: CellReleasePlan) -> float:
    """:func:`rest_epsilon` for ``plan``'s share."""
    return rest_epsilon(target_epsilon, target_delta, plan.rho_share)


def composed_epsilon_with_cells(cells: CellReleasePlan, plan: PrivacyPlan, relation: str, copies: int = 1,
                                reserve: bool = False) -> float:
    """ε at the plan's δ of the cell release and a run's planned releases (``plan``: its
    :class:`~pategail.server.privacy.plan.PrivacyPlan`; ``reserve``: with the retry reserve spent too) together,
    under ``relation``; ``copies``: for a person behind that many devices (group privacy, exact)."""
    check_adjacency(relation)
    env, rewards = plan.planned_releases(reserve)
    factors = plan.factors(relation).times(copies)
    cell_factor = (replace_one_factor(cells.max_cells, cells.universe) if relation == REPLACE_ONE else 1.0) * copies
    return composed_epsilon([cells.release().scaled(cell_factor)]
                            + [r.scaled(factors.environment) for r in env]
                            + [r.scaled(factors.rewards) for r in rewards], plan.target_delta)
