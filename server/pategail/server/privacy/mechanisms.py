"""The coordinator's side of the two privacy mechanisms, behind one interface.

A run's privacy plan (``pategail.server.privacy.plan.PrivacyPlan``) records its mechanism by name; everything
the coordinator does that depends on it goes through the :class:`PlannedMechanism` of that name
(:func:`planned`):

- plan and calibrate a run's noise for its target (:meth:`PlannedMechanism.make_plan`);
- the noise of each release, as its signed round configuration carries it (:meth:`PlannedMechanism.release_noise`),
  and what one costs in the accountant (:meth:`PlannedMechanism.accounting`; each release type maps itself to
  dp-accounting events, ``pategail.sdk.accounting``);
- the releases an uninterrupted run makes and their sensitivities under each neighbouring relation
  (:meth:`PlannedMechanism.planned_releases`, :meth:`PlannedMechanism.factors`);
- what the run's bundles declare to devices, whose floors and ledgers then follow the same mechanism on the
  device side (:meth:`PlannedMechanism.declare`; ``pategail.sdk.secagg.mechanisms``);
- how the report and the log describe it (:meth:`PlannedMechanism.summary_fields`, :meth:`PlannedMechanism.plan_line`).

:data:`LAPLACE_PLAN` is the PateGail paper's (Theorem 3's split; one Laplace vector query for the environment);
:data:`GAUSSIAN_PLAN` the distributed discrete Gaussian over device-clipped vectors, whose second release kind
is either the rewards (PateGail) or model deltas (DP-FedAvg, ``pategail.server.fedavg``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from pategail.sdk.accounting import (GaussianRelease, QueryRelease, Release, gaussian_sensitivity,
                                     laplace_vector_release, laplace_vector_sensitivity)
from pategail.sdk.contribution import Granularity, env_l1_bound
from pategail.sdk.secagg.mechanisms import GAUSSIAN, LAPLACE, Mechanism
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.server.privacy.adjacency import (ZERO_OUT, SensitivityFactors, check_adjacency, gaussian_env_factor,
                                               laplace_env_factor)
from pategail.server.privacy.gaussian import ENV_L2_BOUND, env_l2_bound, reward_clip_norm

if TYPE_CHECKING:
    from pathlib import Path

    from pategail.server.config import TrainConfig
    from pategail.server.privacy.plan import PrivacyPlan, ReleaseNoise

DELTA_GRANULARITY = "model-delta"
"""A Gaussian plan's granularity when its second release kind is model deltas (DP-FedAvg), not rewards."""


class PlannedMechanism(ABC):
    """One privacy mechanism as the coordinator plans, releases, accounts and reports it."""

    device: ClassVar[Mechanism]
    """The same mechanism on the device side (noise shares, clipping, floors, ledger entries)."""
    default_granularity: ClassVar[str]
    """Decisions per released reward when the settings name none."""
    region_sums: ClassVar[bool]
    """The environment release carries region sums beside the cells' (pategail.sdk.regions)."""
    releases_vectors: ClassVar[bool]
    """Each release is one L2-clipped vector, so model deltas (DP-FedAvg) can go through it too."""

    @property
    def name(self) -> str:
        return self.device.name

    # -- planning ---------------------------------------------------------------------------------------
    @abstractmethod
    def check_granularity(self, block: int, private: bool) -> str | None:
        """Why a private run of this mechanism cannot release rewards over blocks of ``block`` decisions."""

    @abstractmethod
    def environment_queries(self, env_values: int) -> int:
        """How the plan counts the environment release of ``env_values`` values among its queries."""

    @abstractmethod
    def environment_share(self, config: TrainConfig, devices: int) -> float:
        """The share of ε a private PateGail run of ``config`` over ``devices`` devices gives its environment
        release when the settings name none (pategail.server.privacy.defaults)."""

    @abstractmethod
    def make_plan(self, config: TrainConfig, env_values: int, planned: int, reserve: int,
                  directory: Path | None) -> PrivacyPlan:
        """The calibrated plan of a run of ``config`` (resolved for its devices) with ``planned`` and
        ``reserve`` queries; with ``directory``, the one kept there when made for the same settings."""

    @abstractmethod
    def description(self, plan: PrivacyPlan) -> str:
        """The mechanism in words, for the report."""

    # -- releases ---------------------------------------------------------------------------------------
    @abstractmethod
    def release_noise(self, plan: PrivacyPlan, kind: str) -> ReleaseNoise:
        """The noise of a release of ``kind`` ("initial_states" or "rewards") under ``plan``."""

    @abstractmethod
    def accounting(self, noise: ReleaseNoise, values: int, shares: int = 1) -> Release:
        """What one release of ``values`` values at ``noise`` (noisy) costs; ``shares``: its honest noise
        shares (n_min − t)."""

    @abstractmethod
    def is_environment(self, noise: ReleaseNoise) -> bool:
        """``noise`` is the environment release's (the accountant keeps it apart)."""

    @abstractmethod
    def journal_fields(self, noise: ReleaseNoise, shares: int) -> dict[str, Any]:
        """What a release's journalled intent records beyond its scales and count, so that the accountant
        can be rebuilt from the journal (``pategail.server.checkpoint``)."""

    @abstractmethod
    def planned_releases(self, plan: PrivacyPlan, reserve: bool) -> tuple[list[Release], list[Release]]:
        """(environment, rewards) of an uninterrupted private run, at zero-out sensitivities."""

    @abstractmethod
    def relation_factors(self, relation: str, *, env_bound: float, env_values: int,
                         env_one_query: bool = True) -> SensitivityFactors:
        """What multiplies each zero-out sensitivity under ``relation`` (pategail.server.privacy.adjacency
        derives them): ``env_bound`` is the environment's zero-out bound (Gaussian: its L2 clip norm; Laplace:
        its L1 bound); ``env_one_query`` False for a Laplace environment released per value."""

    @abstractmethod
    def factors(self, plan: PrivacyPlan, relation: str) -> SensitivityFactors:
        """What multiplies each recorded (zero-out) sensitivity of ``plan``'s releases under ``relation``."""

    @abstractmethod
    def declare(self, plan: PrivacyPlan, min_survivors: float, colluders: int) -> DeclaredPlan:
        """What a private run's bundles tell devices."""

    def per_query_epsilon(self, plan: PrivacyPlan) -> float | None:
        """The paper's ε of one query, where the mechanism has one."""
        return None

    @abstractmethod
    def noise_on_mean(self, plan: PrivacyPlan, devices: int) -> float:
        """Standard deviation of the noise on one released mean over ``devices`` devices."""

    @abstractmethod
    def env_noise_std(self, plan: PrivacyPlan) -> float:
        """Standard deviation of the noise on each released environment sum."""

    # -- reporting --------------------------------------------------------------------------------------
    @abstractmethod
    def summary_fields(self, plan: PrivacyPlan, devices: int) -> dict[str, Any]:
        """report.json's mechanism-specific privacy fields (parameters, the budget's parts)."""

    @abstractmethod
    def plan_line(self, plan: PrivacyPlan, devices: int, beta: float, target: str) -> str:
        """The log's line at the start of a run (``target``: the target and both relations' totals)."""


class LaplacePlanning(PlannedMechanism):
    """The PateGail paper's mechanism: Laplace noise on every Σ D and Σ D² at Theorem 3's split; the
    environment one Laplace vector query at a fixed share of the target (pure ε)."""

    device = LAPLACE
    default_granularity = "pair"
    region_sums = False
    releases_vectors = False

    def check_granularity(self, block: int, private: bool) -> str | None:
        if block != 1 and private:
            return "needs mechanism 'gaussian' (the Laplace mechanism of Theorems 2-3 releases one Σ D and Σ D² per pair)"
        return None

    def environment_queries(self, env_values: int) -> int:
        return 1

    def environment_share(self, config: TrainConfig, devices: int) -> float:
        from pategail.server.privacy.defaults import LAPLACE_SHARE
        return LAPLACE_SHARE

    def make_plan(self, config: TrainConfig, env_values: int, planned: int, reserve: int,
                  directory: Path | None) -> PrivacyPlan:
        from pategail.server.privacy.plan import load_or_make_plan, plan_privacy
        p = config.privacy
        assert p.delta is not None and p.env_epsilon_fraction is not None, "resolve with for_devices"
        settings: dict[str, Any] = dict(reserve_queries=reserve, env_values=env_values,
                                        env_fraction=p.env_epsilon_fraction,
                                        env_l1_bound=env_l1_bound(config.uses_action_prior), adjacency=p.adjacency)
        if directory is not None:
            return load_or_make_plan(directory, p.epsilon, p.delta, p.kappa, planned, **settings)
        return plan_privacy(p.epsilon, p.delta, p.kappa, planned, **settings)

    def description(self, plan: PrivacyPlan) -> str:
        return ("the PateGail paper's mechanism: distributed discrete Laplace on securely aggregated sums (Theorem 3 "
                "split)")

    def release_noise(self, plan: PrivacyPlan, kind: str) -> ReleaseNoise:
        from pategail.server.privacy.plan import ReleaseNoise
        if kind == "initial_states" and plan.env_sum_noise_scale > 0:
            return ReleaseNoise(self.name, plan.env_sum_noise_scale, plan.env_sum_noise_scale, environment=True,
                                env_l1_bound=plan.env_l1_bound)
        return ReleaseNoise(self.name, plan.sum_noise_scale, plan.sq_sum_noise_scale)

    def accounting(self, noise: ReleaseNoise, values: int, shares: int = 1) -> Release:
        if noise.environment:           # one vector query of its L1 sensitivity
            return laplace_vector_release(noise.sum_scale, noise.sq_sum_scale,
                                          laplace_vector_sensitivity(noise.env_l1_bound, values))
        return QueryRelease(noise.sum_scale, noise.sq_sum_scale, values)

    def is_environment(self, noise: ReleaseNoise) -> bool:
        return noise.environment

    def journal_fields(self, noise: ReleaseNoise, shares: int) -> dict[str, Any]:
        # the original intent format: Laplace is the default; the environment is one vector query
        return {"environment": True, "env_l1_bound": noise.env_l1_bound} if noise.environment else {}

    def planned_releases(self, plan: PrivacyPlan, reserve: bool) -> tuple[list[Release], list[Release]]:
        queries = plan.planned_queries + (plan.reserve_queries if reserve else 0)
        env: list[Release] = []
        if plan.env_sum_noise_scale > 0:
            env = [self.accounting(self.release_noise(plan, "initial_states"), plan.env_values)]
            queries -= 1
        return env, [QueryRelease(plan.sum_noise_scale, plan.sq_sum_noise_scale, queries)]

    def relation_factors(self, relation: str, *, env_bound: float, env_values: int,
                         env_one_query: bool = True) -> SensitivityFactors:
        # Σ D and Σ D² per pair: 1 under both relations; each entry of a per-value environment too
        if check_adjacency(relation) == ZERO_OUT:
            return SensitivityFactors()
        return SensitivityFactors(1.0, laplace_env_factor(env_bound, env_values) if env_one_query else 1.0)

    def factors(self, plan: PrivacyPlan, relation: str) -> SensitivityFactors:
        return self.relation_factors(relation, env_bound=plan.env_l1_bound, env_values=plan.env_values,
                                     env_one_query=plan.env_sum_noise_scale > 0)

    def declare(self, plan: PrivacyPlan, min_survivors: float, colluders: int) -> DeclaredPlan:
        assert plan.target_epsilon is not None
        return DeclaredPlan(plan.target_epsilon, plan.target_delta, plan.sum_noise_scale, plan.sq_sum_noise_scale,
                            min_survivors, colluders, env_noise_multiplier=self.env_noise_multiplier(plan))

    @staticmethod
    def env_noise_multiplier(plan: PrivacyPlan) -> float:
        """b_env / Δ₁ of the environment release (0 when it is released per value)."""
        if not plan.env_sum_noise_scale:
            return 0.0
        return plan.env_sum_noise_scale / laplace_vector_sensitivity(plan.env_l1_bound, plan.env_values)

    def per_query_epsilon(self, plan: PrivacyPlan) -> float | None:
        return QueryRelease(plan.sum_noise_scale, plan.sq_sum_noise_scale, 1).per_query_epsilon

    def noise_on_mean(self, plan: PrivacyPlan, devices: int) -> float:
        return self.device.noise_std(plan.sum_noise_scale) / devices

    def env_noise_std(self, plan: PrivacyPlan) -> float:
        return self.device.noise_std(plan.env_sum_noise_scale or plan.sum_noise_scale)

    def summary_fields(self, plan: PrivacyPlan, devices: int) -> dict[str, Any]:
        out: dict[str, Any] = dict(clip_norm=None, noise_multiplier=None,
                                   noise_std_on_mean=self.noise_on_mean(plan, devices))
        z = self.env_noise_multiplier(plan)
        if not z:                       # a plan made before the environment was one query
            out.update(epsilon_parts={"split": "none: every query (environment and rewards) at one per-query scale"})
            return out
        out.update(env_noise_multiplier=z, env_l1_sensitivity=plan.env_sum_noise_scale / z,
                   env_noise_std=self.device.noise_std(plan.env_sum_noise_scale),
                   epsilon_parts={"environment": 1.0 / z,
                                  "split": "the environment is one Laplace vector query of its L1 sensitivity at "
                                           "pure ε = env_epsilon_fraction × the total; the rewards' per-query "
                                           "noise is calibrated so that the joint PLD composition is the total"})
        return out

    def plan_line(self, plan: PrivacyPlan, devices: int, beta: float, target: str) -> str:
        b, z = plan.sum_noise_scale, self.env_noise_multiplier(plan)
        per_query = self.per_query_epsilon(plan)
        assert per_query is not None
        return (f"privacy: total {target} over {plan.budgeted_queries} "
                f"queries ({plan.planned_queries} planned + {plan.reserve_queries} in reserve for retries; together "
                f"they compose to ε={plan.expected_epsilon:.4g}); per-query ε {per_query:.3g}; Laplace scale on "
                f"each sum {b:.3g} (std {self.noise_on_mean(plan, devices):.3g} on a mean reward over {devices} "
                f"devices); κ={plan.kappa:g}, β={beta:g}" + (
                    "" if not z else
                    f"; the environment ({plan.env_values} values) is one of those queries: a Laplace vector query of "
                    f"L1 sensitivity {plan.env_sum_noise_scale / z:.4g} at ε {1.0 / z:.3g} (scale "
                    f"{plan.env_sum_noise_scale:.3g}, std {self.env_noise_std(plan):.3g} on each released sum)"))


class GaussianPlanning(PlannedMechanism):
    """Distributed discrete Gaussian on one L2-clipped vector a release (Kairouz et al. 2021), accounted in
    RDP: the environment vector as it is, then each round's centred block means of the rewards — or, in
    DP-FedAvg, each round's model deltas (granularity ``DELTA_GRANULARITY``)."""

    device = GAUSSIAN
    default_granularity = "day"
    region_sums = True
    releases_vectors = True

    def check_granularity(self, block: int, private: bool) -> str | None:
        return None

    def environment_queries(self, env_values: int) -> int:
        return env_values               # counted by its values, for the record

    def environment_share(self, config: TrainConfig, devices: int) -> float:
        """The largest share in ``SHARE_RANGE`` (on a ``SHARE_STEP`` grid) at which the rewards' noise std on a
        mean reward stays within ``TOLERANCE_MARGIN`` × the measured tolerance of the run's granularity — the
        rewards get what learning needs, the environment the rest; the smallest share when none does or no
        tolerance was measured. The rewards' noise does not depend on the environment vector's length, so no
        cell table is needed."""
        from pategail.server.privacy.defaults import SHARE_RANGE, SHARE_STEP, TOLERANCE_MARGIN
        from pategail.server.privacy.feasibility import tolerance_for
        from pategail.server.privacy.gaussian import plan_gaussian

        low, high = SHARE_RANGE
        # set by then: a private config has its target ε, ``for_devices`` sets δ first, construction the granularity
        privacy = config.privacy
        assert privacy.epsilon is not None and privacy.delta is not None and privacy.granularity is not None
        tolerance = tolerance_for(privacy.granularity)
        if not tolerance:
            return low
        values = Granularity.parse(privacy.granularity).count(config.days_per_round)
        steps = round((high - low) / SHARE_STEP)
        for i in range(steps, -1, -1):
            share = round(low + i * SHARE_STEP, 10)
            g = plan_gaussian(privacy.epsilon, privacy.delta, values, config.rounds + privacy.retry_rounds,
                              1, privacy.clip_share, share, adjacency=privacy.adjacency)
            if g.noise_std / devices <= TOLERANCE_MARGIN * tolerance:
                return share
        return low

    def make_plan(self, config: TrainConfig, env_values: int, planned: int, reserve: int,
                  directory: Path | None) -> PrivacyPlan:
        from pategail.server.privacy.plan import GaussianSpec, load_or_make_plan, plan_gaussian_run
        p = config.privacy
        assert p.delta is not None and p.env_epsilon_fraction is not None, "resolve with for_devices"
        spec = GaussianSpec(str(p.granularity), p.reward_granularity.count(config.days_per_round),
                            config.rounds + p.retry_rounds, env_values, p.clip_share, p.env_epsilon_fraction,
                            env_l2_bound(config.uses_action_prior), p.adjacency)
        if directory is not None:
            return load_or_make_plan(directory, p.epsilon, p.delta, p.kappa, planned, reserve, spec)
        return plan_gaussian_run(p.epsilon, p.delta, p.kappa, planned, reserve, spec)

    @staticmethod
    def releases_deltas(plan: PrivacyPlan) -> bool:
        """The second release kind is model deltas (DP-FedAvg), not rewards."""
        return plan.granularity == DELTA_GRANULARITY

    def released(self, plan: PrivacyPlan) -> str:
        """The name of the second release kind in the report."""
        return "model_deltas" if self.releases_deltas(plan) else "rewards"

    def description(self, plan: PrivacyPlan) -> str:
        if self.releases_deltas(plan):
            return ("distributed discrete Gaussian on securely aggregated, device-clipped model deltas (user-level "
                    "DP-FedAvg, McMahan et al. 2018; RDP accounting)")
        return ("distributed discrete Gaussian on securely aggregated, device-clipped centred rewards "
                "(Kairouz et al. 2021; RDP accounting)")

    def release_noise(self, plan: PrivacyPlan, kind: str) -> ReleaseNoise:
        from pategail.server.privacy.plan import ReleaseNoise
        g = plan.gaussian or {}
        environment = kind == "initial_states"
        block = 0 if environment else Granularity.parse(plan.granularity).block
        # the environment's clip: the plan's (its layout's bound; plans made before it was recorded: √12)
        clip = g.get("env_clip_norm", ENV_L2_BOUND) if environment else reward_clip_norm(plan.reward_values,
                                                                                         plan.clip_share)
        std = g.get("env_noise_std" if environment else "noise_std", 0.0)
        return ReleaseNoise(self.name, std, 0.0, block, clip)

    def accounting(self, noise: ReleaseNoise, values: int, shares: int = 1) -> Release:
        return GaussianRelease(noise.sum_scale, gaussian_sensitivity(noise.clip_norm, values), 1, shares)

    def is_environment(self, noise: ReleaseNoise) -> bool:
        return noise.block == 0         # the vector as it is

    def journal_fields(self, noise: ReleaseNoise, shares: int) -> dict[str, Any]:
        return {"mechanism": self.name, "block": noise.block, "clip_norm": noise.clip_norm, "shares": shares,
                **({"cells": True} if noise.cells else {})}

    def planned_releases(self, plan: PrivacyPlan, reserve: bool) -> tuple[list[Release], list[Release]]:
        g = plan.gaussian
        assert g is not None
        # planned and reserved rounds release the same number of queries each (47 per generated day)
        rewards = plan.planned_queries - plan.env_values
        rounds = g["reward_releases"] if reserve else round(
            g["reward_releases"] * rewards / max(1, rewards + plan.reserve_queries))
        env: list[Release] = [GaussianRelease(g["env_noise_std"],
                                              gaussian_sensitivity(g["env_clip_norm"], plan.env_values), 1)]
        return env, [GaussianRelease(g["noise_std"], gaussian_sensitivity(g["clip_norm"], plan.reward_values),
                                     rounds)] if rounds else []

    def relation_factors(self, relation: str, *, env_bound: float, env_values: int,
                         env_one_query: bool = True) -> SensitivityFactors:
        # centred rewards (or signed deltas) double under replace-one; the environment grows by less
        if check_adjacency(relation) == ZERO_OUT:
            return SensitivityFactors()
        return SensitivityFactors(2.0, gaussian_env_factor(env_bound, env_values))

    def factors(self, plan: PrivacyPlan, relation: str) -> SensitivityFactors:
        g = plan.gaussian or {}
        return self.relation_factors(relation, env_bound=g.get("env_clip_norm", ENV_L2_BOUND),
                                     env_values=plan.env_values)

    def declare(self, plan: PrivacyPlan, min_survivors: float, colluders: int) -> DeclaredPlan:
        assert plan.target_epsilon is not None and plan.gaussian is not None
        cells = plan.cell_release
        return DeclaredPlan(plan.target_epsilon, plan.target_delta, 0.0, 0.0, min_survivors, colluders,
                            self.name, plan.gaussian["noise_multiplier"], plan.gaussian["env_noise_multiplier"],
                            0.0 if cells is None else cells.release().noise_multiplier)

    def noise_on_mean(self, plan: PrivacyPlan, devices: int) -> float:
        noise_std: float = (plan.gaussian or {})["noise_std"]   # σ on the sum, divided by the fixed count
        return self.device.noise_std(noise_std) / devices

    def env_noise_std(self, plan: PrivacyPlan) -> float:
        return self.device.noise_std((plan.gaussian or {})["env_noise_std"])

    def summary_fields(self, plan: PrivacyPlan, devices: int) -> dict[str, Any]:
        g = plan.gaussian
        assert g is not None
        released = self.released(plan)
        return dict(clip_norm=g["clip_norm"], env_clip_norm=g["env_clip_norm"],
                    noise_multiplier=g["noise_multiplier"], env_noise_multiplier=g["env_noise_multiplier"],
                    released=released, noise_std_on_mean=self.noise_on_mean(plan, devices),
                    epsilon_parts={"environment": g["env_epsilon"], released: g["rewards_epsilon"],
                                   "split": "env_epsilon_fraction sets the ratio of the two noise multipliers; both "
                                            "are scaled together until the joint RDP composition is the total; "
                                            "each part's ε is that part alone at δ/2 (not additive)"})

    def plan_line(self, plan: PrivacyPlan, devices: int, beta: float, target: str) -> str:
        g = plan.gaussian
        assert g is not None
        released = self.released(plan).replace("_", " ")
        unit = "model delta over its clip norm" if self.releases_deltas(plan) else "released mean"
        return (f"privacy: total {target}; {self.description(plan)}; granularity {plan.granularity} "
                f"({plan.reward_values} values a round); clip norm {g['clip_norm']:.3g}, noise multiplier "
                f"{g['noise_multiplier']:.3g} (std {self.noise_on_mean(plan, devices):.3g} on each {unit} over "
                f"{devices} devices); parts, each alone at δ/2 (not additive): environment ε {g['env_epsilon']:.3g}, "
                f"{released} ε {g['rewards_epsilon']:.3g} over {g['reward_releases']} releases (joint composition: "
                f"{plan.expected_epsilon:.4g})")


LAPLACE_PLAN = LaplacePlanning()
GAUSSIAN_PLAN = GaussianPlanning()
PLANNED: dict[str, PlannedMechanism] = {m.name: m for m in (LAPLACE_PLAN, GAUSSIAN_PLAN)}


def planned(name: str) -> PlannedMechanism:
    """The coordinator's side of the mechanism called ``name``; ValueError naming the known ones otherwise."""
    try:
        return PLANNED[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown mechanism {name!r} (known: {', '.join(PLANNED)})") from None
