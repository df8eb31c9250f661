"""The device's own floors on a coordinator-signed round configuration, checked before it sends anything.

A valid signature says who chose a configuration, not that it is safe. A coordinator that signs a low
Shamir threshold can show two disjoint groups of a device's neighbours different survivor sets and recover
both of its secrets (with a threshold of h/2 a split view recovered one device's input); one that signs
n_min = 1 or zero noise removes the differential-privacy guarantee altogether. A device therefore refuses,
before its first message of the round:

- a Shamir threshold below :func:`~pategail.sdk.secagg.graph.secure_threshold` for the round's graph and
  colluders (the bound that keeps every sum the aggregator can open the one over all honest survivors);
- fewer than ``min_n_min`` survivors, or fewer than ``min_survivor_share`` of the participants;
- noise scales below the ones the bundle's privacy plan declares (``min_sum_noise_scale``,
  ``min_sq_sum_noise_scale``), and no noise at all when the plan declares any;
- fewer colluders than the plan sizes the noise shares for (``min_colluders``);
- each release kind below its own floor: a reward round's noise multiplier below the plan's reward
  multiplier, an environment round's below the plan's environment multiplier (``min_env_noise_multiplier``:
  σ / Δ₂ for the Gaussian mechanism, the scale over the release's L1 sensitivity for Laplace's one vector
  query), a cell-table round's below the plan's cell-release multiplier — never the smaller of them for all;
- under a Gaussian plan, a release of a kind the plan does not plan at all (a cell-table round under a plan
  without a cell release; a reward or environment round under the plan of a bundle on the public map, which
  plans the cell-table release only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NoReturn

from pategail.sdk.accounting import GaussianRelease, Release
from pategail.sdk.contribution import ENV_L1_BOUND

from .config import RoundConfig
from .errors import RoundRefused
from .graph import secure_threshold
from .mechanisms import mechanism as mechanism_named

POLICY = "policy"
"""``RoundRefused.code`` of a configuration below the device's floors."""


@dataclass(frozen=True)
class DevicePolicy:
    """Floors a device applies to every signed round configuration (defaults: only the threshold floor of
    :func:`~pategail.sdk.secagg.graph.secure_threshold`, which a product never lowers)."""

    min_n_min: int = 1
    """Fewest survivors a round may release for, whatever the participants (the noise is sized for n_min, so
    a low n_min weakens what secure aggregation hides, not the DP guarantee)."""
    min_survivor_share: float = 0.0
    """n_min must be at least this share of the participants (the plan's ``min_survivors``)."""
    min_sum_noise_scale: float = 0.0
    """Smallest total noise scale on each Σ D (value units), from the bundle's declared privacy plan."""
    min_sq_sum_noise_scale: float = 0.0
    """The same for each Σ D²."""
    min_colluders: int = 0
    """Noise shares must be sized for at least this many colluding devices (the plan's t)."""
    mechanism: str | None = None
    """The mechanism the plan declares ("laplace" or "gaussian"): a round of another is refused (a Gaussian
    σ is no Laplace scale). None: any."""
    min_noise_multiplier: float = 0.0
    """Gaussian reward rounds: the smallest σ / Δ₂ (noise std over the L2 sensitivity of the signed clip
    norm) the plan declares for a reward release — a coordinator that signs a larger clip norm at the same σ
    is refused."""
    min_env_noise_multiplier: float = 0.0
    """Environment rounds: the smallest noise multiplier the plan declares for the environment release —
    σ / Δ₂ (Gaussian), or b / Δ₁ (Laplace: the smaller of the two halves' scales over the release's L1
    sensitivity, ``laplace_vector_sensitivity(ENV_L1_BOUND, M)``); 0 for Laplace (a plan that declares
    none): the per-value floors above apply to the environment round too."""
    min_cells_noise_multiplier: float = 0.0
    """Cell-table rounds (Gaussian): the smallest σ / Δ₂ the plan declares for the release of the visited
    squares (pategail.sdk.cell_universe); 0: the plan releases no cell table."""
    min_threshold_share: float | None = None
    """None (every product setting): the threshold floor is
    :func:`~pategail.sdk.secagg.graph.secure_threshold`. A share s instead makes it floor(s · h) + 1 of the h
    share holders — weaker, for tests that study the protocol under heavy dropouts only."""

    def __post_init__(self) -> None:
        if self.min_n_min < 1 or not 0 <= self.min_survivor_share <= 1 or self.min_colluders < 0:
            raise ValueError("min_n_min >= 1, min_survivor_share in [0, 1], min_colluders >= 0")
        if self.min_threshold_share is not None and not 0 < self.min_threshold_share < 1:
            raise ValueError("min_threshold_share must be None or in (0, 1)")
        if min(self.min_sum_noise_scale, self.min_sq_sum_noise_scale, self.min_env_noise_multiplier,
               self.min_cells_noise_multiplier) < 0:
            raise ValueError("noise-scale floors must be >= 0")

    def check(self, cfg: RoundConfig, environment: bool = False, env_l1_bound: float = ENV_L1_BOUND,
              cells: bool = False) -> None:
        """Raise RoundRefused (code ``POLICY``) naming the first floor ``cfg`` is below; ``environment``: the
        round would upload the device's environment vector, ``cells``: its visited vector."""
        def refuse(reason: str) -> NoReturn:
            raise RoundRefused(POLICY, f"round {cfg.round_id}: {reason}; refusing to take part")

        floor: float
        if self.min_threshold_share is None:
            floor, why = secure_threshold(len(cfg.participants), cfg.degree, cfg.colluders), "the secure threshold"
        else:
            floor, why = math.floor(self.min_threshold_share * cfg.holders) + 1, "its policy"
        if cfg.threshold < floor:
            refuse(f"Shamir threshold {cfg.threshold} is below this device's floor {floor} for {cfg.holders} "
                   f"share holders and {cfg.colluders} colluders ({why})")
        n_floor = max(self.min_n_min, math.ceil(self.min_survivor_share * len(cfg.participants) - 1e-9))
        if cfg.n_min < n_floor:
            refuse(f"n_min={cfg.n_min} is below this device's floor {n_floor}")
        if cfg.colluders < self.min_colluders:
            refuse(f"noise sized for {cfg.colluders} colluders, the plan declares {self.min_colluders}")
        if self.mechanism is not None and cfg.mechanism != self.mechanism:
            refuse(f"a {cfg.mechanism} round, the declared privacy plan's mechanism is {self.mechanism}")
        reason = cfg.noise.refusal(self, cfg, environment, env_l1_bound, cells)
        if reason is not None:
            refuse(reason)


@dataclass(frozen=True)
class DeclaredPlan:
    """The privacy plan a model bundle declares (manifest section "privacy"): what every device of the run
    may expect, so it can refuse less (``policy``) and keep its own budget (``target_epsilon``)."""

    target_epsilon: float
    """Total ε of the run at ``target_delta``: each device's own ledger budget."""
    target_delta: float
    sum_noise_scale: float
    """Total noise scale on each Σ D (value units) the plan calibrated; rounds may add more, never less."""
    sq_sum_noise_scale: float
    """The same for each Σ D²."""
    min_survivors: float
    """n_min as a share of the devices asked."""
    colluders: int = 0
    """t of the threat model: noise shares sized for n_min − t."""
    mechanism: str = "laplace"
    """"laplace" (the scales above) or "gaussian" (the noise multipliers below; the scales are unused, 0)."""
    noise_multiplier: float = 0.0
    """Gaussian: σ / Δ₂ of every reward release."""
    env_noise_multiplier: float = 0.0
    """σ / Δ₂ of the environment release (Gaussian); b / Δ₁, its Laplace scale over its L1 sensitivity
    (Laplace: one vector query with its own budget share)."""
    cells_noise_multiplier: float = 0.0
    """σ / Δ₂ of the release of the visited squares a run that releases its cell table makes first (Gaussian;
    0: none). The bundle on the public map that precedes that release declares it alone (its reward and
    environment multipliers 0: no other release is planned under it); the run's bundles declare it with the
    rest."""

    def __post_init__(self) -> None:
        try:
            noise_ok = mechanism_named(self.mechanism).plan_is_valid(self)
        except ValueError:
            noise_ok = False
        if not (self.target_epsilon > 0 and 0 < self.target_delta < 1 and noise_ok
                and 0 < self.min_survivors <= 1 and self.colluders >= 0):
            raise ValueError("need target_epsilon > 0, 0 < target_delta < 1, noise scales (Laplace) or noise "
                             "multipliers (Gaussian) > 0, min_survivors in (0, 1], colluders >= 0")

    def policy(self) -> DevicePolicy:
        """The floors this plan implies for every signed round configuration."""
        return DevicePolicy(min_survivor_share=self.min_survivors, min_sum_noise_scale=self.sum_noise_scale,
                            min_sq_sum_noise_scale=self.sq_sum_noise_scale, min_colluders=self.colluders,
                            mechanism=self.mechanism, min_noise_multiplier=self.noise_multiplier,
                            min_env_noise_multiplier=self.env_noise_multiplier,
                            min_cells_noise_multiplier=self.cells_noise_multiplier)

    def request_release(self, values: int, environment: bool = False, cells: bool = False) -> Release:
        """The release answering a request of ``values`` values costs at this plan's noise (a device's
        budget check before it prepares anything); ``cells``: the cell-table release (Gaussian, one vector)."""
        if cells:
            if self.cells_noise_multiplier <= 0:
                raise ValueError("the plan releases no cell table")
            return GaussianRelease(self.cells_noise_multiplier, 1.0, 1)
        return mechanism_named(self.mechanism).request_release(self, values, environment)

    def to_manifest(self) -> dict[str, Any]:
        out: dict[str, Any] = {"target_epsilon": self.target_epsilon, "target_delta": self.target_delta,
               "sum_noise_scale": self.sum_noise_scale, "sq_sum_noise_scale": self.sq_sum_noise_scale,
               "min_survivors": self.min_survivors, "colluders": self.colluders}
        out.update(mechanism_named(self.mechanism).manifest_fields(self))
        return out

    @classmethod
    def from_manifest(cls, section: dict[str, Any]) -> "DeclaredPlan":
        """Parse the manifest's section; raises ValueError (or KeyError / TypeError) when malformed."""
        return cls(float(section["target_epsilon"]), float(section["target_delta"]),
                   float(section["sum_noise_scale"]), float(section["sq_sum_noise_scale"]),
                   float(section["min_survivors"]), int(section.get("colluders", 0)),
                   str(section.get("mechanism", "laplace")), float(section.get("noise_multiplier", 0.0)),
                   float(section.get("env_noise_multiplier", 0.0)), float(section.get("cells_noise_multiplier", 0.0)))
