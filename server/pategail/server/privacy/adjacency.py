"""Neighbouring relations, and how far one user's data can move each release under them — pure functions.

A differential-privacy guarantee is a statement about two neighbouring data sets. Two relations matter here:

- **zero-out** (Kairouz et al. 2021, DP-FTRL): one user's data replaced by nothing while the user's device
  still takes part. It is the relation this system's analysis is exact for: every enrolled device is asked
  every round and the coordinator divides by a fixed, public count, so who takes part is not secret and only
  what a device contributes is. A device whose user's data is zeroed sends the zero vector.
- **replace-one**: one user's data swapped for another user's — the stronger statement.

Every release is recorded (journal, accountant, devices' ledgers) with its zero-out sensitivity; the ε of
the other relation, or of a person behind ``c`` devices (group privacy), is the same composition with each
sensitivity multiplied by the factor its mechanism gives (``PlannedMechanism.relation_factors``,
pategail.server.privacy.mechanisms; ``Release.scaled``) (a Gaussian release's privacy loss
depends on σ/Δ only, a Laplace one's on b/Δ only).

The factors, derived from the vectors' layouts (``pategail.sdk.contribution``):

- **Gaussian rewards** (centred block means in [−½, ½], L2-clipped to C): zero-out moves the encoded sum by
  at most C + ½√d quanta; replace-one by ‖x − x′‖ + √d quanta ≤ 2C + √d quanta (x = −x′ reaches it): **2**.
- **Gaussian environment** (``pategail.server.privacy.gaussian.ENV_L2_BOUND``): with w, w′ ∈ [0, 1] the two
  devices' weights, each of the eight parts with entries ≥ 0 summing to at most w (home, first cells, explore
  observed and expected, place visits and their three region sums) moves by ‖a − a′‖² ≤ ‖a‖² + ‖a′‖² ≤
  w² + w′² (entries ≥ 0, so a·a′ ≥ 0); the weight entry by (w − w′)²; the return law's three entries in [0, w]
  by max(w, w′)² each. The sum 8(w² + w′²) + (w − w′)² + 3·max(w, w′)² is convex, so its largest value over
  [0, 1]² is at a corner: 19 at w = w′ = 1 (against 12 for zero-out). With the action-rate part (entries ≥ 0,
  L2 at most b·w) it is 19 + 2b² against 12 + b². In terms of the zero-out bound R: √(2R² − 5), plus √d
  quanta of rounding (against ½√d): ≈ **1.258** for R = √12 — not √2, because the weight and the return law do
  not double.
- **Laplace rewards** (Σ D and Σ D² per pair, D ∈ [0, 1]): |D − D′| ≤ 1 and |D² − D′²| ≤ 1, as for zero-out:
  **1** (the encoded values stay in [0, 2^24] quanta either way).
- **Laplace environment** (L1 bound L = ``pategail.sdk.contribution.ENV_L1_BOUND`` = 9 per half): per half,
  5(w + w′) for the five distribution parts, |w − w′| for the weight and 3·max(w, w′) for the return law —
  linear, largest at w = w′ = 1: 13 (15 with the action-rate part, against L = 10), i.e. 2L − 5; both halves
  (x and x², with |a² − a′²| summing to at most w² + w′²) and 2d quanta of rounding (against d):
  (2(2L − 5) + 2d q) / (2L + d q) ≈ **1.444**.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pategail.sdk.accounting import QUANTA_PER_UNIT

ZERO_OUT = "zero-out"
REPLACE_ONE = "replace-one"
ADJACENCIES = (ZERO_OUT, REPLACE_ONE)
"""The relations a target ε can apply to (``TrainConfig.adjacency``)."""

DESCRIPTION = {
    ZERO_OUT: "zero-out adjacency: one user's data replaced by nothing while the user's device still takes part "
              "(Kairouz et al. 2021)",
    REPLACE_ONE: "replace-one adjacency: one user's data swapped for another user's",
}


REWARDS, ENVIRONMENT, CELLS = "rewards", "environment", "cells"
RELEASE_KINDS = (REWARDS, ENVIRONMENT, CELLS)
"""What a recorded release is, for the factor its sensitivity takes under another relation."""


@dataclass(frozen=True)
class SensitivityFactors:
    """What multiplies each release's zero-out sensitivity under another relation or for a group."""

    rewards: float = 1.0
    environment: float = 1.0
    cells: float = 1.0
    """The privately released cell table's (pategail.server.privacy.cell_release.replace_one_factor)."""

    def times(self, copies: int) -> "SensitivityFactors":
        """The factors for a person behind ``copies`` devices: one person's data moves each of them, so each
        sum by at most ``copies`` times as much (group privacy, computed exactly on the composition)."""
        return SensitivityFactors(self.rewards * copies, self.environment * copies, self.cells * copies)

    def of(self, kind: str) -> float:
        """The factor of a release of ``kind`` (one of ``RELEASE_KINDS``)."""
        return {REWARDS: self.rewards, ENVIRONMENT: self.environment, CELLS: self.cells}[kind]


def check_adjacency(name: str) -> str:
    if name not in ADJACENCIES:
        raise ValueError(f"adjacency must be one of {', '.join(ADJACENCIES)}, got {name!r}")
    return name


def gaussian_env_factor(env_clip_norm: float, env_values: int) -> float:
    """Replace-one over zero-out sensitivity of the Gaussian environment release (module docstring)."""
    quanta = math.sqrt(env_values) / QUANTA_PER_UNIT
    replace_bound = math.sqrt(2.0 * env_clip_norm ** 2 - 5.0)
    return (replace_bound + quanta) / (env_clip_norm + 0.5 * quanta)


def laplace_env_factor(env_l1_bound: float, env_values: int) -> float:
    """Replace-one over zero-out L1 sensitivity of the Laplace environment release (module docstring)."""
    quanta = env_values / QUANTA_PER_UNIT
    return (2.0 * (2.0 * env_l1_bound - 5.0) + 2.0 * quanta) / (2.0 * env_l1_bound + quanta)
