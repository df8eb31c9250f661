"""The two privacy mechanisms a device takes part in, behind one interface.

A secure round's signed configuration names its mechanism (``RoundConfig.mechanism``); everything a device
does that depends on it goes through the :class:`Mechanism` of that name (:func:`mechanism`):

- what the configuration may say (:meth:`Mechanism.check_round`) and its wire trailer;
- what the device uploads: its vector bounded on the device, encoded, plus its share of the distributed
  noise (:meth:`Mechanism.upload`, :meth:`Mechanism.noise_share`) — and how large a sum can grow
  (:meth:`Mechanism.noise_bound`);
- what the release costs, for the device's own ledger (:meth:`Mechanism.round_release`) and for its budget
  check before it prepares anything (:meth:`Mechanism.request_release`); the release types themselves map to
  dp-accounting events (``pategail.sdk.accounting``);
- the floors a declared privacy plan sets on a round's noise (:meth:`Mechanism.refusal`).

:data:`LAPLACE` is the PateGail paper's: every released Σ D and Σ D² carries distributed discrete Laplace
noise, one sensitivity-1 query per value (the environment vector: one L1-clipped vector query). :data:`GAUSSIAN`
releases one L2-clipped vector a round with distributed discrete Gaussian noise (Kairouz, Liu, Steinke 2021):
centred block means of the rewards, the environment vector as it is, or a signed model delta
(``DELTA_BLOCK``). The coordinator's planning side of the same two mechanisms is
``pategail.server.privacy.mechanisms``.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Callable, ClassVar

import numpy as np

from pategail.sdk.accounting import (GaussianRelease, QueryRelease, Release, gaussian_sensitivity,
                                     laplace_vector_release, laplace_vector_sensitivity)
from pategail.sdk.contribution import ENV_L1_BOUND, Granularity
from pategail.sdk.features import SLOTS

from .fixedpoint import clip_signed, clip_unit, encode, encode_signed, gaussian_noise_bound, noise_bound
from .noise import discrete_gaussian_share, discrete_laplace_share

if TYPE_CHECKING:
    from .config import RoundConfig
    from .policy import DeclaredPlan, DevicePolicy

DELTA_BLOCK = 255
"""``RoundConfig.block`` of a Gaussian round over a signed vector (a device's scaled model delta, DP-FedAvg):
entries in [−1, 1], L2-clipped to ``clip_norm`` (pategail.sdk.fedavg_round)."""

Draw = Callable[[float, int], np.ndarray]
"""A device's noise sampler for one round: (total scale in value units, coordinates) → int64 quanta."""


def gaussian_input(scores: np.ndarray, cfg: RoundConfig) -> np.ndarray:
    """What a device releases in a Gaussian round: its clipped values (entries in [0, 1]) when ``cfg.block``
    is 0, else its centred scores D − ½ averaged over each block of ``cfg.block`` decisions of a day; then
    scaled down to L2 norm ``cfg.clip_norm`` when longer — on the device, so the sensitivity holds whatever
    the coordinator does with the sum. ``cfg.block`` = ``DELTA_BLOCK``: a signed vector, entries clipped to
    [−1, 1] (a model delta, pategail.sdk.fedavg_round)."""
    if cfg.block == DELTA_BLOCK:
        v = clip_signed(scores)
    else:
        v = clip_unit(scores)
        if cfg.block:
            v = Granularity(cfg.block).block_means(v - 0.5, len(v) // (SLOTS - 1))
    norm = float(np.linalg.norm(v))
    return v * (cfg.clip_norm / norm) if norm > cfg.clip_norm else v


def laplace_environment_input(values: np.ndarray, l1_bound: float = ENV_L1_BOUND) -> np.ndarray:
    """What a device releases in a Laplace-mechanism environment round: its vector clipped to [0, 1], scaled
    down to L1 norm ``l1_bound`` (``ENV_L1_BOUND``, or ``env_l1_bound(True)`` for a vector with the action-rate
    part) when longer — on the device, so the release's L1 sensitivity
    (``pategail.sdk.accounting.laplace_vector_sensitivity``) holds whatever the device holds. Honest vectors
    never exceed it (pategail.sdk.contribution); the x² half is computed from the result, so it is bounded
    too."""
    v = clip_unit(values)
    norm = float(v.sum())
    return v * (l1_bound / norm) if norm > l1_bound else v


class Mechanism(ABC):
    """One privacy mechanism, as a device takes part in it."""

    name: ClassVar[str]
    """The name a round configuration, a declared plan and a run's settings carry."""
    wire_tag: ClassVar[int | None]
    """Tag of the round configuration's trailer; None: the configuration has none (the original format)."""
    uploads_squares: ClassVar[bool]
    """The upload carries Σ D² beside Σ D (slots M..2M−1), each with its own noise."""
    clips_whole_vector: ClassVar[bool]
    """The upload is the device's vector bounded as a whole (L2 clip, block means), not entry by entry: a sum
    of uploads is not the upload of a sum."""
    divisible: ClassVar[bool]
    """Shares add up to a share of the same law: d shares sized for d devices are one share sized for one
    device (a simulated fleet draws a sum of shares at once)."""

    @abstractmethod
    def check_round(self, cfg: RoundConfig) -> None:
        """Raise ValueError when ``cfg``'s mechanism-specific fields are inconsistent."""

    @abstractmethod
    def noise_share(self, scale_quanta: float, n_min: float, size: int) -> np.ndarray:
        """A device's noise share (int64 quanta, ``size`` coordinates) of the round's total noise
        ``scale_quanta``, split among ``n_min`` honest shares; zeros when the scale is 0. CSPRNG."""

    @abstractmethod
    def noise_bound(self, n_devices: int, scale_quanta: float, noise_divisor: int,
                    tail_log2: float = 64.0) -> float:
        """A bound on |Σ noise| over ``n_devices`` shares, exceeded with probability < 2^-tail_log2."""

    @abstractmethod
    def noise_std(self, scale: float) -> float:
        """The standard deviation of the noise on one released sum whose configuration says ``scale``."""

    def input_length(self, cfg: RoundConfig, pending: int) -> int:
        """The length a device's pending vector must have for round ``cfg`` (``pending``: what it holds)."""
        return cfg.num_queries

    @abstractmethod
    def entry_ranges(self, cfg: RoundConfig) -> tuple[tuple[float, float], tuple[float, float]]:
        """The range of one honest device's entry in each half of the upload (slots 0..M−1, M..2M−1): what
        the aggregator's plausibility check widens by the noise bound."""

    @abstractmethod
    def upload(self, scores: np.ndarray, cfg: RoundConfig, environment: bool, env_l1_bound: float,
               draw: Draw) -> np.ndarray:
        """The 2M int64 quanta a device masks and sends: its vector bounded on the device, encoded, plus its
        noise shares (``draw``)."""

    @abstractmethod
    def round_release(self, cfg: RoundConfig, environment: bool = False,
                      env_l1_bound: float = ENV_L1_BOUND) -> Release | None:
        """What taking part in round ``cfg`` costs the device (its ledger entry); None without noise."""

    @abstractmethod
    def request_release(self, plan: DeclaredPlan, values: int, environment: bool = False) -> Release:
        """What a release of ``values`` values costs at ``plan``'s declared noise (a budget check before the
        device prepares anything)."""

    @abstractmethod
    def refusal(self, policy: DevicePolicy, cfg: RoundConfig, environment: bool, env_l1_bound: float,
                cells: bool = False) -> str | None:
        """Why ``cfg``'s noise is below ``policy``'s floors, or None; ``cells``: the round would upload the
        device's visited vector (a cell-table release)."""

    @abstractmethod
    def plan_is_valid(self, plan: DeclaredPlan) -> bool:
        """A declared plan of this mechanism has the noise it needs (> 0)."""

    @abstractmethod
    def manifest_fields(self, plan: DeclaredPlan) -> dict[str, float | str]:
        """What a bundle's manifest adds to the common fields of a declared plan of this mechanism."""


class Laplace(Mechanism):
    """Distributed discrete Laplace on every Σ D and Σ D² (the PateGail paper's Theorem 3)."""

    name = "laplace"
    wire_tag = None
    uploads_squares = True
    clips_whole_vector = False  # entry by entry (the environment's L1 clip never binds an honest vector)
    divisible = True            # differences of negative binomials

    def check_round(self, cfg: RoundConfig) -> None:
        if cfg.block or cfg.clip_norm:
            raise ValueError("block and clip_norm belong to the Gaussian mechanism")

    def noise_share(self, scale_quanta: float, n_min: float, size: int) -> np.ndarray:
        return discrete_laplace_share(scale_quanta, n_min, size)

    def noise_bound(self, n_devices: int, scale_quanta: float, noise_divisor: int,
                    tail_log2: float = 64.0) -> float:
        return noise_bound(n_devices, scale_quanta, noise_divisor, tail_log2)

    def noise_std(self, scale: float) -> float:
        return math.sqrt(2.0) * scale           # Laplace(b): variance 2b²

    def entry_ranges(self, cfg: RoundConfig) -> tuple[tuple[float, float], tuple[float, float]]:
        return (0.0, 1.0), (0.0, 1.0)           # D and D², both in [0, 1]

    def upload(self, scores: np.ndarray, cfg: RoundConfig, environment: bool, env_l1_bound: float,
               draw: Draw) -> np.ndarray:
        m = cfg.num_queries
        v = clip_unit(scores)
        if environment:
            v = laplace_environment_input(v, env_l1_bound)
        x = np.concatenate([encode(v), encode(v * v)])
        x[:m] += draw(cfg.sum_noise_scale, m)
        x[m:] += draw(cfg.sq_sum_noise_scale, m)
        return x

    def round_release(self, cfg: RoundConfig, environment: bool = False,
                      env_l1_bound: float = ENV_L1_BOUND) -> Release | None:
        if cfg.sum_noise_scale <= 0 or cfg.sq_sum_noise_scale <= 0:
            return None
        if environment:     # one vector query of its L1 sensitivity (the device L1-clips the vector)
            return laplace_vector_release(cfg.sum_noise_scale, cfg.sq_sum_noise_scale,
                                          laplace_vector_sensitivity(env_l1_bound, cfg.num_queries))
        return QueryRelease(cfg.sum_noise_scale, cfg.sq_sum_noise_scale, cfg.num_queries)

    def request_release(self, plan: DeclaredPlan, values: int, environment: bool = False) -> Release:
        if environment and plan.env_noise_multiplier > 0:      # one Laplace vector query (b / Δ₁)
            return QueryRelease(plan.env_noise_multiplier, None, 1)
        return QueryRelease(plan.sum_noise_scale, plan.sq_sum_noise_scale, values)

    def refusal(self, policy: DevicePolicy, cfg: RoundConfig, environment: bool, env_l1_bound: float,
                cells: bool = False) -> str | None:
        if cells:
            return "a cell table is released with the Gaussian mechanism only"
        if environment and policy.min_env_noise_multiplier > 0:   # else (a plan without it): per-value floors
            b = min(cfg.sum_noise_scale, cfg.sq_sum_noise_scale)
            z = b / laplace_vector_sensitivity(env_l1_bound, cfg.num_queries)
            if z < policy.min_env_noise_multiplier * (1 - 1e-12) or (policy.mechanism and b <= 0):
                return (f"environment noise multiplier {z:.6g} (scales {cfg.sum_noise_scale:.6g} / "
                        f"{cfg.sq_sum_noise_scale:.6g}) is below the declared privacy plan's "
                        f"{policy.min_env_noise_multiplier:.6g}")
            return None
        for name, got, floor in (("Σ D", cfg.sum_noise_scale, policy.min_sum_noise_scale),
                                 ("Σ D²", cfg.sq_sum_noise_scale, policy.min_sq_sum_noise_scale)):
            if got < floor * (1 - 1e-12):
                return f"noise scale {got:.6g} on {name} is below the declared privacy plan's {floor:.6g}"
        return None

    def plan_is_valid(self, plan: DeclaredPlan) -> bool:
        return plan.sum_noise_scale > 0 and plan.sq_sum_noise_scale > 0

    def manifest_fields(self, plan: DeclaredPlan) -> dict[str, float | str]:
        # Laplace manifests keep their original fields (and the Java core's parser); the environment's
        # multiplier is one more key (a JSON object: readers skip keys they do not know)
        return {"env_noise_multiplier": plan.env_noise_multiplier} if plan.env_noise_multiplier > 0 else {}


class Gaussian(Mechanism):
    """Distributed discrete Gaussian on one L2-clipped vector a round (Kairouz, Liu, Steinke 2021)."""

    name = "gaussian"
    wire_tag = 1
    uploads_squares = False
    clips_whole_vector = True
    divisible = False           # a sum of discrete Gaussians is not one

    def check_round(self, cfg: RoundConfig) -> None:
        if cfg.sq_sum_noise_scale != 0 or not (0 <= cfg.block <= SLOTS - 1 or cfg.block == DELTA_BLOCK):
            raise ValueError(f"the Gaussian mechanism releases no Σ D² and blocks of 0..{SLOTS - 1} decisions "
                             f"(or {DELTA_BLOCK}: a signed vector)")
        if not 0 < cfg.clip_norm <= math.sqrt(cfg.num_queries):
            raise ValueError(f"clip_norm {cfg.clip_norm} must be in (0, √M]")

    def noise_share(self, scale_quanta: float, n_min: float, size: int) -> np.ndarray:
        return discrete_gaussian_share(scale_quanta, n_min, size)

    def noise_bound(self, n_devices: int, scale_quanta: float, noise_divisor: int,
                    tail_log2: float = 64.0) -> float:
        return gaussian_noise_bound(n_devices, scale_quanta, noise_divisor, tail_log2)

    def input_length(self, cfg: RoundConfig, pending: int) -> int:
        """Over blocks of K decisions: 47 scores per generated day (``pending`` tells how many days)."""
        if not cfg.block or cfg.block == DELTA_BLOCK:
            return cfg.num_queries
        granularity = Granularity(cfg.block)
        days = pending // (SLOTS - 1)
        if pending % (SLOTS - 1) == 0 and granularity.count(days) == cfg.num_queries:
            return pending
        return cfg.num_queries // granularity.blocks_per_day * (SLOTS - 1)

    def noise_std(self, scale: float) -> float:
        return scale                            # the configuration carries σ itself

    def entry_ranges(self, cfg: RoundConfig) -> tuple[tuple[float, float], tuple[float, float]]:
        # a signed vector in [-1, 1]; centred block means in [-½, ½]; the environment in [0, 1]; no Σ D²
        first = (-1.0, 1.0) if cfg.block == DELTA_BLOCK else (-0.5, 0.5) if cfg.block else (0.0, 1.0)
        return first, (0.0, 0.0)

    def upload(self, scores: np.ndarray, cfg: RoundConfig, environment: bool, env_l1_bound: float,
               draw: Draw) -> np.ndarray:
        m = cfg.num_queries
        x = np.zeros(2 * m, dtype=np.int64)          # slots m..2m-1: no Σ D² in this mechanism
        x[:m] = encode_signed(gaussian_input(scores, cfg)) + draw(cfg.sum_noise_scale, m)
        return x

    def round_release(self, cfg: RoundConfig, environment: bool = False,
                      env_l1_bound: float = ENV_L1_BOUND) -> Release | None:
        if cfg.sum_noise_scale <= 0:
            return None
        return GaussianRelease(cfg.sum_noise_scale, gaussian_sensitivity(cfg.clip_norm, cfg.num_queries), 1,
                               cfg.noise_divisor)

    def request_release(self, plan: DeclaredPlan, values: int, environment: bool = False) -> Release:
        return GaussianRelease(plan.env_noise_multiplier if environment else plan.noise_multiplier, 1.0, 1)

    def refusal(self, policy: DevicePolicy, cfg: RoundConfig, environment: bool, env_l1_bound: float,
                cells: bool = False) -> str | None:
        kind, floor = (("cell-table", policy.min_cells_noise_multiplier) if cells
                       else ("environment", policy.min_env_noise_multiplier) if environment
                       else ("reward", policy.min_noise_multiplier))
        if policy.mechanism and floor <= 0:       # a plan in force that plans no release of this kind
            return f"the declared privacy plan plans no {kind} release"
        z = cfg.sum_noise_scale / gaussian_sensitivity(cfg.clip_norm, cfg.num_queries)
        if z < floor * (1 - 1e-12) or (policy.mechanism and cfg.sum_noise_scale <= 0):
            return (f"{kind} noise multiplier {z:.6g} (σ {cfg.sum_noise_scale:.6g}, clip norm "
                    f"{cfg.clip_norm:.6g}) is below the declared privacy plan's {floor:.6g}")
        return None

    def plan_is_valid(self, plan: DeclaredPlan) -> bool:
        # a run's plan, or the plan of a bundle on the public map that plans the cell-table release only
        multipliers = (plan.noise_multiplier, plan.env_noise_multiplier)
        return plan.cells_noise_multiplier >= 0 and (min(multipliers) > 0 or (
            max(multipliers) == 0 and plan.cells_noise_multiplier > 0))

    def manifest_fields(self, plan: DeclaredPlan) -> dict[str, float | str]:
        out: dict[str, float | str] = {"mechanism": self.name, "noise_multiplier": plan.noise_multiplier,
                                       "env_noise_multiplier": plan.env_noise_multiplier}
        if plan.cells_noise_multiplier > 0:
            out["cells_noise_multiplier"] = plan.cells_noise_multiplier
        return out


LAPLACE = Laplace()
GAUSSIAN = Gaussian()
MECHANISMS: dict[str, Mechanism] = {m.name: m for m in (LAPLACE, GAUSSIAN)}


def mechanism(name: str) -> Mechanism:
    """The mechanism called ``name``; ValueError naming the known ones otherwise."""
    try:
        return MECHANISMS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown mechanism {name!r} (known: {', '.join(MECHANISMS)})") from None


def mechanism_by_tag(tag: int | None) -> Mechanism:
    """The mechanism of a round configuration's trailer tag (None: no trailer)."""
    for m in MECHANISMS.values():
        if m.wire_tag == tag:
            return m
    raise ValueError(f"unknown mechanism tag {tag}")
