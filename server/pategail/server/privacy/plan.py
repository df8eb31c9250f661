"""The privacy plan of a run: made once, when the run is created, and never changed.

A user asks for a total (ε, δ) over the whole run; the paper's ε is per query. The plan fixes the run's
planned releases (every round's rewards and the environment release before round 1) and a reserve for
retried releases (``retry_rounds`` rounds' worth: a release that started but was not used — a crash after
its secure aggregation began, a detected tampering — is counted and asked for again), calibrates the noise
so that the composition of both meets the target, and records the result: the Laplace scales on each released
Σ D and Σ D² (Theorem 3's split, :func:`pategail.server.privacy.calibration.sum_noise_scales`), the
per-query ε they amount to, and the ε the planned releases are expected to compose to. The plan is stored
in the run's checkpoint and report; the accountant then counts what was actually released. A run with
``mechanism = "gaussian"`` is planned by :func:`plan_gaussian_run` instead (``pategail.server.privacy.gaussian``:
noise multipliers, clip norms, the environment's budget share). Everything that depends on the mechanism — its
calibration, each release's noise and cost, the sensitivities under each relation, what devices are told, the
report's wording — is the plan's ``scheme`` (``pategail.server.privacy.mechanisms``).

Calibration is dp-accounting's own ``calibrate_dp_mechanism`` (Brent's method on the PLD accountant's ε)
over the Laplace scale b of the sums, on a PLD grid (``PLAN_INTERVAL``) that the accountant's finer 1e-4
grid refines: the PLD estimate is pessimistic and rounding onto a coarser nested grid only raises it, so a
plan that meets the target on the planning grid meets it in the run's report too.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from dp_accounting.mechanism_calibration import LowerEndpointAndGuess, calibrate_dp_mechanism
from dp_accounting.pld import pld_privacy_accountant

from pategail.sdk.accounting import (PLAN_INTERVAL, GaussianRelease, QueryRelease, Release, composed_epsilon,
                                     gaussian_sensitivity, laplace_vector_release, laplace_vector_sensitivity)
from pategail.sdk.contribution import ENV_L1_BOUND
from pategail.sdk.files import write_atomic
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.server.privacy.accountant import to_dp_event
from pategail.server.privacy.adjacency import CELLS, ENVIRONMENT, REWARDS, ZERO_OUT, SensitivityFactors
from pategail.server.privacy.mechanisms import GAUSSIAN_PLAN, LAPLACE_PLAN, LaplacePlanning, PlannedMechanism, planned
from pategail.server.privacy.calibration import sum_noise_scales
from pategail.server.privacy.gaussian import ENV_L2_BOUND, plan_gaussian

if TYPE_CHECKING:
    from pategail.server.privacy.cell_release import CellReleasePlan

# PLAN_INTERVAL (3e-4, defined in pategail.sdk.accounting because devices' ledgers compose on the same grid)
# is three steps of the accountant's 1e-4. The hand-written bisection this replaces searched on a 1e-3 grid,
# which overstates ε by ~2.4% at 279 k queries (the default run) and so planned that much more noise than
# needed; 3e-4 overstates it by ~0.2% at a quarter of the cost of 1e-4 (one evaluation: 0.6 s at 1e-3, 2.4 s
# at 3e-4, 11 s at 1e-4 on the loaded 2-core machine; BENCHMARKS.md).
RELATIVE_TOLERANCE = 1e-4
"""Brent's method stops within this share of the scale b (the old bisection ended within ~0.03%); the
result always meets the target."""
PLAN_FILE = "privacy-plan.json"


@dataclass(frozen=True)
class ReleaseNoise:
    """The noise of one secure release — what its signed round configuration carries (value units)."""

    mechanism: str = "laplace"
    sum_scale: float = 0.0
    """Laplace: the scale b on each Σ D; Gaussian: σ on each released sum."""
    sq_sum_scale: float = 0.0
    """Laplace: b_sq on each Σ D²; 0 for the Gaussian mechanism."""
    block: int = 0
    """Gaussian: 0 = the vector as it is (environment); K = centred K-decision block means."""
    clip_norm: float = 0.0
    """Gaussian: the device's L2 clip norm."""
    environment: bool = False
    """Laplace: the environment release, one vector query of its L1 sensitivity (the device L1-clips its
    vector to ``env_l1_bound``), not ``values`` sensitivity-1 queries."""
    env_l1_bound: float = ENV_L1_BOUND
    """Laplace environment release: the L1 bound of its layout (pategail.sdk.contribution.env_l1_bound)."""
    cells: bool = False
    """Gaussian: the cell-table release (a 0/1 vector over the public map, clip √m;
    pategail.server.privacy.cell_release)."""

    @property
    def noisy(self) -> bool:
        return self.sum_scale > 0

    @property
    def scheme(self) -> PlannedMechanism:
        """The coordinator's side of this release's mechanism."""
        return planned(self.mechanism)

    @property
    def is_environment(self) -> bool:
        """The environment release (a Laplace vector query, or a Gaussian release of the vector as it is)."""
        return self.scheme.is_environment(self)

    @property
    def kind(self) -> str:
        """What the accountant records it as (adjacency.RELEASE_KINDS)."""
        return CELLS if self.cells else ENVIRONMENT if self.is_environment else REWARDS

    def accounting(self, values: int, shares: int = 1) -> Release | None:
        """What a release of ``values`` values at this noise costs (None without noise); ``shares``: the honest
        noise shares (n_min − t), for the discrete Gaussian's τ."""
        return self.scheme.accounting(self, values, shares) if self.noisy else None


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
    """Every query the run will release: the environment vector (one vector query when
    ``env_sum_noise_scale`` is set, else one query per value), then 47 × days_per_round per round."""
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
    mechanism_name: str = "laplace"
    """``TrainConfig.mechanism``: "laplace" (the fields above) or "gaussian" (``gaussian`` below)."""
    granularity: str = "pair"
    """Decisions per released reward (``TrainConfig.granularity``)."""
    reward_values: int = 0
    """Gaussian: values of one round's reward vector."""
    env_values: int = 0
    """Values of the environment vector (Gaussian; Laplace when it is one vector query)."""
    gaussian: dict[str, Any] | None = None
    """Gaussian: the noise (``pategail.server.privacy.gaussian.GaussianPlan`` as a dict); None otherwise."""
    env_sum_noise_scale: float = 0.0
    """Laplace: the scale b_env on each entry of the environment release (both halves of the upload), its L1
    sensitivity over its pure ε share: ``laplace_vector_sensitivity(ENV_L1_BOUND, env_values)`` /
    (``env_fraction`` · target ε). 0: the environment is released per value at the rewards' scales (plans
    made before it was one query)."""
    env_fraction: float = 0.0
    """Laplace: ``TrainConfig.env_epsilon_fraction`` the environment release was planned with."""
    env_l1_bound: float = ENV_L1_BOUND
    """Laplace: the environment vector's L1 bound (``env_l1_bound(action_rates)``, pategail.sdk.contribution):
    ``ENV_L1_BOUND``, one more with the action-rate part (``TrainConfig.action_prior``)."""
    adjacency: str = ZERO_OUT
    """The neighbouring relation the target ε applies to (``TrainConfig.adjacency``): the noise is calibrated
    with its sensitivities; every scale and multiplier above is recorded against the zero-out sensitivity."""
    cells: dict[str, Any] | None = None
    """A run that releases its cell table privately (``privacy.cells`` released): the release's
    ``pategail.server.privacy.cell_release.CellReleasePlan`` as a dict — the run's first release; the
    environment and rewards above are planned for what it leaves of the target (``expected_epsilon`` and
    :meth:`epsilon_under` include it). None otherwise."""

    @property
    def private(self) -> bool:
        return self.target_epsilon is not None

    @property
    def scheme(self) -> PlannedMechanism:
        """The coordinator's side of the plan's mechanism (``pategail.server.privacy.mechanisms``)."""
        return planned(self.mechanism_name)

    @property
    def is_gaussian(self) -> bool:
        return self.scheme is GAUSSIAN_PLAN

    @property
    def mechanism(self) -> str:
        return self.scheme.description(self) if self.private else NO_MECHANISM

    def release_noise(self, kind: str) -> ReleaseNoise:
        """The noise of a release of ``kind`` ("initial_states" or "rewards") — what its signed round
        configuration carries (zero noise, in the same vector layout, without privacy)."""
        return self.scheme.release_noise(self, kind)

    @property
    def clip_share(self) -> float:
        share: float = (self.gaussian or {}).get("clip_share", 1.0)
        return share

    @property
    def noise_scales(self) -> tuple[float, float]:
        """(b, b_sq): what every secure round of the run adds."""
        return self.sum_noise_scale, self.sq_sum_noise_scale

    @property
    def per_query_epsilon(self) -> float | None:
        """The paper's ε of one query (both sums), by basic composition: 1/b + 1/b_sq; None without privacy
        (and for the Gaussian mechanism, which has no per-query ε)."""
        return self.scheme.per_query_epsilon(self) if self.private else None

    @property
    def budgeted_queries(self) -> int:
        """What the noise is calibrated for: the planned queries and the retry reserve."""
        return self.planned_queries + self.reserve_queries

    def declare(self, min_survivors: float, colluders: int) -> DeclaredPlan | None:
        """What a private run's bundles tell devices (their floors and their own budget): the target, the
        noise scales on Σ D and Σ D² (or the Gaussian noise multipliers), n_min's share and t. None without
        privacy."""
        return self.scheme.declare(self, min_survivors, colluders) if self.private else None

    @property
    def env_noise_multiplier(self) -> float:
        """Laplace: b_env / Δ₁ of the environment release (0 when it is released per value, and for the
        Gaussian mechanism)."""
        return LaplacePlanning.env_noise_multiplier(self) if self.scheme is LAPLACE_PLAN else 0.0

    @property
    def env_epsilon(self) -> float | None:
        """Laplace: the environment release's pure ε, Δ₁ / b_env (= env_fraction × target); None otherwise."""
        z = self.env_noise_multiplier
        return 1.0 / z if z else None

    def factors(self, relation: str) -> SensitivityFactors:
        """What multiplies each recorded (zero-out) sensitivity under ``relation``."""
        factors = self.scheme.factors(self, relation)
        cells = self.cell_release
        if cells is None or relation == ZERO_OUT:
            return factors
        from pategail.server.privacy.cell_release import replace_one_factor
        return replace(factors, cells=replace_one_factor(cells.max_cells, cells.universe))

    @property
    def cell_release(self) -> "CellReleasePlan | None":
        """The cell-table release, or None when the run's table is public."""
        if self.cells is None:
            return None
        from pategail.server.privacy.cell_release import CellReleasePlan
        return CellReleasePlan(**self.cells)

    def planned_releases(self, reserve: bool = False) -> tuple[list[Release], list[Release]]:
        """(environment, rewards): what an uninterrupted private run releases, recorded as the accountant
        records them (zero-out sensitivities); ``reserve``: with the retry reserve spent too."""
        return self.scheme.planned_releases(self, reserve) if self.private else ([], [])

    def epsilon_under(self, relation: str, copies: int = 1, reserve: bool = False) -> float:
        """The composed ε at ``target_delta`` of :meth:`planned_releases` under ``relation`` (``copies``: for a
        person behind that many devices)."""
        env, rewards = self.planned_releases(reserve)
        factors = self.factors(relation).times(copies)
        cells = self.cell_release
        return composed_epsilon(([] if cells is None else [cells.release().scaled(factors.cells)])
                                + [r.scaled(factors.environment) for r in env]
                                + [r.scaled(factors.rewards) for r in rewards], self.target_delta)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PrivacyPlan":
        return cls(**d)


def _calibrated_plan(target_epsilon: float | None, target_delta: float, kappa: float, planned_queries: int,
                 interval: float = PLAN_INTERVAL, reserve_queries: int = 0, env_values: int = 0,
                 env_fraction: float = 0.0, env_l1_bound: float = ENV_L1_BOUND,
                 adjacency: str = ZERO_OUT) -> PrivacyPlan:
    """The plan of a run of ``planned_queries`` queries and ``reserve_queries`` in reserve for retries: no
    noise when ``target_epsilon`` is None, else the smallest Theorem-3 noise whose composition over every
    planned and reserved query is (target_epsilon, target_delta)-DP under ``adjacency`` (the rewards' sums
    have sensitivity 1 under both relations; the environment's L1 sensitivity is the relation's).

    With ``env_values`` > 0 the first planned query is the environment release, ONE Laplace vector query of
    ``env_values`` entries: its scale is its L1 sensitivity over its share ``env_fraction`` of the target ε
    (pure DP), and the rewards' per-query noise is calibrated so that the joint PLD composition of the
    environment release, the planned reward queries and the reserve meets the target (it gets the rest).

    Calibrating takes seconds (PLD compositions) and a plan is a frozen value of these arguments, so the latest
    few plans are kept in memory: a process that asks for the same plan twice (the privacy-plan command's rows,
    a run's feasibility line) calibrates it once. Keyed by type too, so 8 and 8.0 give plans that are written
    as they would be without the cache."""
    base: dict[str, Any] = dict(env_values=int(env_values), env_fraction=float(env_fraction) if env_values else 0.0,
                env_l1_bound=float(env_l1_bound), adjacency=adjacency)
    if target_epsilon is None:
        return PrivacyPlan(None, target_delta, kappa, planned_queries, reserve_queries, **base)
    if not (target_epsilon > 0 and 0 < target_delta < 1 and planned_queries >= 1 and reserve_queries >= 0):
        raise ValueError("need target_epsilon > 0, 0 < target_delta < 1, at least one query and a reserve >= 0")
    if env_values and not (0 < env_fraction < 1 and planned_queries >= 2):
        raise ValueError(f"env_fraction must be in (0, 1) and a reward query planned, got {env_fraction}")
    if not kappa > 1:
        raise ValueError(f"kappa must be > 1, got {kappa}")
    env: list[QueryRelease] = []
    b_env = 0.0
    if env_values:
        sensitivity = laplace_vector_sensitivity(env_l1_bound, env_values) * LAPLACE_PLAN.relation_factors(
            adjacency, env_bound=env_l1_bound, env_values=env_values).environment
        b_env = sensitivity / (env_fraction * target_epsilon)
        env = [laplace_vector_release(b_env, b_env, sensitivity)]
    budgeted = planned_queries + reserve_queries - len(env)      # reward queries
    # the rewards' share of ε, for the guess only: the calibration below composes the environment with them
    reward_epsilon = target_epsilon * (1.0 - (env_fraction if env_values else 0.0))

    def releases(b: float) -> list[QueryRelease]:
        # Theorem 3's split at per-query ε: b = κ/ε and b_sq = κ/(ε(κ-1)) = b/(κ-1)
        return [*env, QueryRelease(b, b / (kappa - 1.0), budgeted)]

    def accountant() -> pld_privacy_accountant.PLDAccountant:
        return pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)

    # advanced composition gives the scale's order of magnitude: ε_total ≈ ε_q sqrt(2 Q ln(1/δ))
    per_query = reward_epsilon / math.sqrt(2 * budgeted * math.log(1 / target_delta))
    guess = sum_noise_scales(per_query, kappa).sum_scale
    def epsilon(b: float) -> float:
        eps: float = accountant().compose(to_dp_event(releases(b))).get_epsilon(target_delta)
        return eps

    # the true scale lay within 0.57-1.1x of the guess from 9 k to 279 k queries; a wider bracket (whose
    # evaluations cost more: less noise, wider privacy-loss support) only where the guess is far off (few queries)
    lower = guess / 2
    if epsilon(lower) <= target_epsilon:
        lower = guess / 256
    b = calibrate_dp_mechanism(accountant, lambda b: to_dp_event(releases(b)), target_epsilon, target_delta,
                               LowerEndpointAndGuess(lower, guess), tol=RELATIVE_TOLERANCE * guess)
    expected = epsilon(b)
    return PrivacyPlan(target_epsilon, target_delta, kappa, planned_queries, reserve_queries, float(b),
                       float(b / (kappa - 1.0)), float(expected), env_sum_noise_scale=float(b_env), **base)



plan_privacy = functools.lru_cache(maxsize=8, typed=True)(_calibrated_plan)
"""The calibration above, with the latest few plans kept (mutation testing sees the undecorated function)."""

@dataclass(frozen=True)
class GaussianSpec:
    """What a Gaussian-mechanism plan is made for (from the run's TrainConfig)."""

    granularity: str
    reward_values: int
    """Values of one round's reward vector (Granularity.count(days_per_round))."""
    reward_releases: int
    """Reward releases budgeted: rounds + retry_rounds."""
    env_values: int
    clip_share: float
    env_fraction: float
    env_clip_norm: float = ENV_L2_BOUND
    """The L2 norm devices clip the environment vector to: ``env_l2_bound(action_rates)`` of its layout
    (pategail.server.privacy.gaussian)."""
    adjacency: str = ZERO_OUT
    """The relation the target applies to."""


def plan_gaussian_run(target_epsilon: float | None, target_delta: float, kappa: float, planned_queries: int,
                      reserve_queries: int, spec: GaussianSpec) -> PrivacyPlan:
    """The plan of a Gaussian-mechanism run (zero noise without privacy)."""
    base: dict[str, Any] = dict(mechanism_name="gaussian", granularity=spec.granularity,
                                reward_values=spec.reward_values, env_values=spec.env_values,
                                adjacency=spec.adjacency)
    settings = {"clip_share": spec.clip_share, "env_fraction": spec.env_fraction,
                "reward_releases": spec.reward_releases, "env_clip_norm": float(spec.env_clip_norm)}
    if target_epsilon is None:
        return PrivacyPlan(None, target_delta, kappa, planned_queries, reserve_queries, **base, gaussian=settings)
    g = plan_gaussian(target_epsilon, target_delta, spec.reward_values, spec.reward_releases, spec.env_values,
                      spec.clip_share, spec.env_fraction, spec.env_clip_norm, spec.adjacency)
    factors = GAUSSIAN_PLAN.relation_factors(spec.adjacency, env_bound=spec.env_clip_norm,
                                             env_values=spec.env_values)
    releases = [GaussianRelease(g.env_noise_std, factors.environment
                                * gaussian_sensitivity(g.env_clip_norm, spec.env_values), 1),
                GaussianRelease(g.noise_std, factors.rewards * gaussian_sensitivity(g.clip_norm, spec.reward_values),
                                spec.reward_releases)]
    expected = composed_epsilon(releases, target_delta)
    return PrivacyPlan(target_epsilon, target_delta, kappa, planned_queries, reserve_queries,
                       expected_epsilon=float(expected), **base,
                       gaussian={**asdict(g), **settings})


def load_or_make_plan(directory: Path, target_epsilon: float | None, target_delta: float, kappa: float,
                      planned_queries: int, reserve_queries: int = 0,
                      gaussian: GaussianSpec | None = None, env_values: int = 0,
                      env_fraction: float = 0.0, env_l1_bound: float = ENV_L1_BOUND,
                      adjacency: str = ZERO_OUT) -> PrivacyPlan:
    """The plan kept in ``directory`` when it was made for these settings; otherwise a new one, written there
    (atomically) before any release can use it. ``gaussian``: the Gaussian mechanism's settings (its
    ``adjacency`` included); ``env_values`` / ``env_fraction``: the Laplace mechanism's environment release
    (:func:`plan_privacy`); ``adjacency``: the Laplace plan's relation."""
    path = Path(directory) / PLAN_FILE
    fresh: Callable[[], PrivacyPlan]
    if gaussian is not None:
        fresh = lambda: plan_gaussian_run(target_epsilon, target_delta, kappa, planned_queries,  # noqa: E731
                                          reserve_queries, gaussian)
    else:
        fresh = lambda: plan_privacy(target_epsilon, target_delta, kappa, planned_queries,  # noqa: E731
                                     reserve_queries=reserve_queries, env_values=env_values,
                                     env_fraction=env_fraction, env_l1_bound=env_l1_bound,
                                     adjacency=adjacency)
    if path.is_file():
        plan = PrivacyPlan.from_dict(json.loads(path.read_text()))
        spec = None if not plan.is_gaussian else GaussianSpec(
            plan.granularity, plan.reward_values, (plan.gaussian or {}).get("reward_releases", 0), plan.env_values,
            plan.clip_share, (plan.gaussian or {}).get("env_fraction", 0.0),
            (plan.gaussian or {}).get("env_clip_norm", ENV_L2_BOUND), plan.adjacency)
        laplace_env = None if plan.is_gaussian else (plan.env_values, plan.env_fraction, plan.env_l1_bound)
        wanted_env = None if gaussian is not None else (env_values, env_fraction if env_values else 0.0,
                                                        float(env_l1_bound))
        relation = gaussian.adjacency if gaussian is not None else adjacency
        if (plan.target_epsilon, plan.target_delta, plan.kappa, plan.planned_queries, plan.reserve_queries,
                spec, laplace_env, plan.adjacency) == (target_epsilon, target_delta, kappa, planned_queries,
                                                       reserve_queries, gaussian, wanted_env, relation):
            return plan
    plan = fresh()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(plan.to_dict(), indent=1) + "\n").encode())
    return plan
