"""The privacy plan of a run: made once, when the run is created, and never changed.

A user asks for a total (ε, δ) over the whole run; the paper's ε is per query. The plan fixes the run's
planned releases (every round's rewards and the environment release before round 1) and a reserve for
retried releases (``retry_rounds`` rounds' worth: a release that started but was not used — a crash after
its secure aggregation began, a detected tampering — is counted and asked for again), calibrates the noise
so that the composition of both meets the target, and records the result: the Laplace scales on each released
Σ D and Σ D² (Theorem 3's split, :func:`pategail.server.privacy.calibration.sum_noise_scales`), the
per-query ε they amount to, and the ε the planned releases are expected to compose to. The plan is stored
in the run's checkpoint and report; the accountant then counts what was actually released.

Calibration is dp-accounting's own ``calibrate_dp_mechanism`` (Brent's method on the PLD accountant's ε)
over the Laplace scale b of the sums, on a PLD grid (``PLAN_INTERVAL``) that the accountant's finer 1e-4
grid refines: the PLD estimate is pessimistic and rounding onto a coarser nested grid only raises it, so a
plan that meets the target on the planning grid meets it in the run's report too.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from dp_accounting.mechanism_calibration import LowerEndpointAndGuess, calibrate_dp_mechanism
from dp_accounting.pld import pld_privacy_accountant

from pategail.sdk.accounting import PLAN_INTERVAL
from pategail.sdk.files import write_atomic
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.server.privacy.accountant import QueryRelease, to_dp_event
from pategail.server.privacy.calibration import sum_noise_scales

# PLAN_INTERVAL (3e-4, defined in pategail.sdk.accounting because devices' ledgers compose on the same grid)
# is three steps of the accountant's 1e-4. The hand-written bisection this replaces searched on a 1e-3 grid,
# which overstates ε by ~2.4% at 279 k queries (the default run) and so planned that much more noise than
# needed; 3e-4 overstates it by ~0.2% at a quarter of the cost of 1e-4 (one evaluation: 0.6 s at 1e-3, 2.4 s
# at 3e-4, 11 s at 1e-4 on the loaded 2-core machine; BENCHMARKS.md).
RELATIVE_TOLERANCE = 1e-4
"""Brent's method stops within this share of the scale b (the old bisection ended within ~0.03%); the
result always meets the target."""
PLAN_FILE = "privacy-plan.json"
MECHANISM = "distributed discrete Laplace on securely aggregated sums (Theorem 3 split)"
NO_MECHANISM = "none (--no-privacy)"


@dataclass(frozen=True)
class PrivacyPlan:
    """The privacy of one run, fixed at its creation (all scales in value units, on the sums)."""

    target_epsilon: float | None
    """Total ε of the whole run; None trains without noise."""
    target_delta: float
    """δ of the total guarantee."""
    kappa: float
    """κ of Theorem 3: 1/κ of each query's budget goes to Σ D, the rest to Σ D²."""
    planned_queries: int
    """Every query the run will release: the environment vector, then 47 × days_per_round per round."""
    reserve_queries: int = 0
    """Queries kept in reserve for retried releases (``retry_rounds`` rounds' worth): the noise is calibrated
    for planned + reserve, and a release that would take the composed ε past the target is never started."""
    sum_noise_scale: float = 0.0
    """b: total Laplace scale on each released Σ_u D_u (0 without privacy)."""
    sq_sum_noise_scale: float = 0.0
    """b_sq: the same on each Σ_u D_u²."""
    expected_epsilon: float | None = None
    """The planned releases' and the reserve's composed ε at ``target_delta`` (PLD, ``PLAN_INTERVAL``);
    ≤ target_epsilon."""

    @property
    def private(self) -> bool:
        return self.target_epsilon is not None

    @property
    def mechanism(self) -> str:
        return MECHANISM if self.private else NO_MECHANISM

    @property
    def noise_scales(self) -> tuple[float, float]:
        """(b, b_sq): what every secure round of the run adds."""
        return self.sum_noise_scale, self.sq_sum_noise_scale

    @property
    def per_query_epsilon(self) -> float | None:
        """The paper's ε of one query (both sums), by basic composition: 1/b + 1/b_sq; None without privacy."""
        if not self.private:
            return None
        return QueryRelease(self.sum_noise_scale, self.sq_sum_noise_scale, 1).per_query_epsilon

    @property
    def budgeted_queries(self) -> int:
        """What the noise is calibrated for: the planned queries and the retry reserve."""
        return self.planned_queries + self.reserve_queries

    def declare(self, min_survivors: float, colluders: int) -> DeclaredPlan | None:
        """What a private run's bundles tell devices (their floors and their own budget): the target, the
        noise scales on Σ D and Σ D², n_min's share and t. None without privacy."""
        if not self.private:
            return None
        return DeclaredPlan(self.target_epsilon, self.target_delta, self.sum_noise_scale, self.sq_sum_noise_scale,
                            min_survivors, colluders)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PrivacyPlan":
        return cls(**d)


def plan_privacy(target_epsilon: float | None, target_delta: float, kappa: float, planned_queries: int,
                 interval: float = PLAN_INTERVAL, reserve_queries: int = 0) -> PrivacyPlan:
    """The plan of a run of ``planned_queries`` queries and ``reserve_queries`` in reserve for retries: no
    noise when ``target_epsilon`` is None, else the smallest Theorem-3 noise whose composition over every
    planned and reserved query is (target_epsilon, target_delta)-DP."""
    if target_epsilon is None:
        return PrivacyPlan(None, target_delta, kappa, planned_queries, reserve_queries)
    if not (target_epsilon > 0 and 0 < target_delta < 1 and planned_queries >= 1 and reserve_queries >= 0):
        raise ValueError("need target_epsilon > 0, 0 < target_delta < 1, at least one query and a reserve >= 0")
    budgeted = planned_queries + reserve_queries
    if not kappa > 1:
        raise ValueError(f"kappa must be > 1, got {kappa}")

    def releases(b: float) -> list[QueryRelease]:
        # Theorem 3's split at per-query ε: b = κ/ε and b_sq = κ/(ε(κ-1)) = b/(κ-1)
        return [QueryRelease(b, b / (kappa - 1.0), budgeted)]

    def accountant() -> pld_privacy_accountant.PLDAccountant:
        return pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)

    # advanced composition gives the scale's order of magnitude: ε_total ≈ ε_q sqrt(2 Q ln(1/δ))
    per_query = target_epsilon / math.sqrt(2 * budgeted * math.log(1 / target_delta))
    guess = sum_noise_scales(per_query, kappa).sum_scale
    def epsilon(b: float) -> float:
        return accountant().compose(to_dp_event(releases(b))).get_epsilon(target_delta)

    # the true scale lay within 0.57-1.1x of the guess from 9 k to 279 k queries; a wider bracket (whose
    # evaluations cost more: less noise, wider privacy-loss support) only where the guess is far off (few queries)
    lower = guess / 2
    if epsilon(lower) <= target_epsilon:
        lower = guess / 256
    b = calibrate_dp_mechanism(accountant, lambda b: to_dp_event(releases(b)), target_epsilon, target_delta,
                               LowerEndpointAndGuess(lower, guess), tol=RELATIVE_TOLERANCE * guess)
    expected = epsilon(b)
    return PrivacyPlan(target_epsilon, target_delta, kappa, planned_queries, reserve_queries, float(b),
                       float(b / (kappa - 1.0)), float(expected))


def load_or_make_plan(directory: Path, target_epsilon: float | None, target_delta: float, kappa: float,
                      planned_queries: int, reserve_queries: int = 0) -> PrivacyPlan:
    """The plan kept in ``directory`` when it was made for these settings; otherwise a new one, written there
    (atomically) before any release can use it."""
    path = Path(directory) / PLAN_FILE
    if path.is_file():
        plan = PrivacyPlan.from_dict(json.loads(path.read_text()))
        if (plan.target_epsilon, plan.target_delta, plan.kappa, plan.planned_queries, plan.reserve_queries) == \
                (target_epsilon, target_delta, kappa, planned_queries, reserve_queries):
            return plan
    plan = plan_privacy(target_epsilon, target_delta, kappa, planned_queries, reserve_queries=reserve_queries)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(plan.to_dict(), indent=1) + "\n").encode())
    return plan
