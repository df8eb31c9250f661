"""Differential-privacy accounting shared by the coordinator's accountant and each device's own ledger: the
releases of a run (or of one device) composed with Google's ``dp-accounting`` PLD accountant — pure functions.

A ``QueryRelease`` is ``count`` queried pairs, each answered with Σ D + noise (Laplace scale ``sum_scale``)
and, optionally, Σ D² + noise (``sq_sum_scale``); both sums have sensitivity 1. A ``GaussianRelease`` is
``count`` vector releases of the Gaussian mechanism, composed with the RDP accountant.
``merge_release`` appends one to a list the way both sides do (identical noise merged), so the coordinator and a
device that took part in every release compose exactly the same events and get the same ε on the same grid.
The server's stateful ``PrivacyAccountant`` (``pategail/server/privacy/accountant.py``) builds on these.

``dp_accounting`` (and scipy under it) is imported when something is composed, not with this module: a
device that keeps no budget never loads it, and the SDK's import stays light.
"""
from __future__ import annotations

import math
import threading
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

if TYPE_CHECKING:
    from dp_accounting import dp_event as dp_events, privacy_accountant

PLAN_INTERVAL = 3e-4
"""PLD grid a run's privacy plan is calibrated on (``pategail.server.privacy.plan``) and a device's ledger
composes on (``pategail.sdk.secagg.ledger``): on the same grid, a device that took part in every release of
an honest run computes exactly the ε the plan promised, so it never refuses a round the plan allows. Three
steps of the accountant's 1e-4 (nested: the plan's figure only overstates the report's)."""


@dataclass(frozen=True)
class QueryRelease:
    """``count`` queries, each releasing Σ D with Laplace(sum_scale) and Σ D² with Laplace(sq_sum_scale)."""

    sum_scale: float
    sq_sum_scale: float | None
    count: int

    def __post_init__(self) -> None:
        if not self.sum_scale > 0 or (self.sq_sum_scale is not None and not self.sq_sum_scale > 0):
            raise ValueError("noise scales must be > 0 (a release without noise has ε = ∞)")
        if self.count < 1:
            raise ValueError("count must be >= 1")

    rdp_only: ClassVar[bool] = False
    """Its guarantee is exact under the PLD accountant (the Laplace mechanism's privacy-loss distribution)."""

    @property
    def per_query_epsilon(self) -> float:
        """Pure ε of one query: 1/b (+ 1/b_sq)."""
        return 1.0 / self.sum_scale + (1.0 / self.sq_sum_scale if self.sq_sum_scale else 0.0)

    def scaled(self, factor: float) -> "QueryRelease":
        """The same release with its sensitivity multiplied by ``factor``: recorded at sensitivity 1, so its
        scales are divided instead (the Laplace mechanism's privacy loss depends on b/Δ only)."""
        if factor == 1.0:
            return self
        return QueryRelease(self.sum_scale / factor, None if self.sq_sum_scale is None else self.sq_sum_scale / factor,
                            self.count)

    def dp_events(self) -> list[dp_events.DpEvent]:
        """As dp-accounting events: each sum a Laplace event of noise multiplier scale / sensitivity (= scale),
        ``count`` times."""
        from dp_accounting import dp_event
        return [dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(scale), self.count)
                for scale in (self.sum_scale, self.sq_sum_scale) if scale]


@dataclass(frozen=True)
class GaussianRelease:
    """``count`` releases of one vector each through the distributed discrete Gaussian mechanism (Kairouz,
    Liu, Steinke 2021): ``shares`` devices each add N_Z(0, σ²/shares) per coordinate (in quanta of 2^-24),
    so every released sum carries total noise of standard deviation ``noise_std`` (value units); one device's
    vector moves the sum by at most ``sensitivity`` in L2 (value units, its clip norm plus the rounding of
    the fixed-point encoding, :func:`gaussian_sensitivity`)."""

    noise_std: float
    sensitivity: float
    count: int
    shares: int = 1

    def __post_init__(self) -> None:
        if not (self.noise_std > 0 and self.sensitivity > 0):
            raise ValueError("noise_std and sensitivity must be > 0 (a release without noise has ε = ∞)")
        if self.count < 1 or self.shares < 1:
            raise ValueError("count and shares must be >= 1")

    rdp_only: ClassVar[bool] = True
    """The discrete Gaussian's guarantee is an RDP/zCDP bound: the PLD of a continuous Gaussian would not be a
    proven bound for it, so a composition containing one is made with the RDP accountant."""

    def scaled(self, factor: float) -> "GaussianRelease":
        """The same release with its sensitivity multiplied by ``factor``."""
        return self if factor == 1.0 else replace(self, sensitivity=self.sensitivity * factor)

    def dp_events(self) -> list[dp_events.DpEvent]:
        """As a dp-accounting event: the Gaussian event of the same ρ, ``count`` times."""
        from dp_accounting import dp_event
        return [dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(self.noise_multiplier), self.count)]

    @property
    def rho(self) -> float:
        """zCDP ρ = ε²/2 of one release, ε = sqrt(Δ²/σ² + τ/2) (Kairouz et al. 2021, Theorem 2's L2 branch;
        τ (:func:`discrete_gaussian_tau`) is the gap between a sum of discrete Gaussians and one discrete
        Gaussian, negligible unless a share has a scale of a few quanta)."""
        tau = discrete_gaussian_tau(self.noise_std * QUANTA_PER_UNIT / math.sqrt(self.shares), self.shares)
        return 0.5 * ((self.sensitivity / self.noise_std) ** 2 + 0.5 * tau)

    @property
    def noise_multiplier(self) -> float:
        """The continuous Gaussian's noise multiplier of the same ρ: z = 1/sqrt(2ρ) (= σ/Δ when τ = 0). Its
        RDP curve, α/(2z²) = αρ, is the discrete mechanism's bound, which is all the RDP accountant uses."""
        return 1.0 / math.sqrt(2.0 * self.rho)


QUANTA_PER_UNIT = float(1 << 24)
"""Quanta of one value unit in the secure aggregation's fixed point (``pategail.sdk.secagg.fixedpoint``)."""


def discrete_gaussian_tau(share_std_quanta: float, shares: int) -> float:
    """τ = 10 Σ_{k=1}^{n-1} exp(−2π² s² k/(k+1)) for n = ``shares`` shares of N_Z(0, s²), s in quanta."""
    s2 = float(share_std_quanta) ** 2
    return 10.0 * math.fsum(math.exp(-2 * math.pi ** 2 * s2 * k / (k + 1)) for k in range(1, int(shares)))


def gaussian_sensitivity(clip_norm: float, values: int) -> float:
    """L2 sensitivity (value units) of one device's vector of ``values`` entries clipped to ``clip_norm``:
    encoding rounds each entry to the nearest quantum, moving it by at most half a quantum, so the encoded
    vector's norm is at most C + ½·√values quanta (neighbouring runs: one device's vector present or not).
    The sum mod 2^64 is a function of the noisy integer sum (post-processing), so wrapping costs no privacy;
    the round configuration's check keeps its probability below 2^-64 per coordinate for accuracy."""
    return float(clip_norm) + 0.5 * math.sqrt(values) / QUANTA_PER_UNIT


def laplace_vector_sensitivity(l1_bound: float, values: int) -> float:
    """L1 sensitivity (value units) of one Laplace-mechanism upload of a vector x of ``values`` entries in
    [0, 1] with ‖x‖₁ ≤ ``l1_bound``: the upload carries x and x² (wire v2's two halves), and ‖x²‖₁ ≤ ‖x‖₁ for
    entries in [0, 1], so the pair moves by at most 2·``l1_bound``; encoding rounds each of the 2·values
    entries by at most half a quantum, adding ``values`` quanta (neighbouring runs: one device's vector present
    or not)."""
    return 2.0 * float(l1_bound) + int(values) / QUANTA_PER_UNIT


def laplace_vector_release(sum_scale: float, sq_sum_scale: float, sensitivity: float) -> "QueryRelease":
    """One Laplace vector query (the environment release): both halves of the upload (x with Laplace scale
    ``sum_scale`` per entry, x² with ``sq_sum_scale``) as ONE Laplace mechanism of L1 ``sensitivity`` at the
    smaller scale (adding more noise to a half is post-processing of a release at the smaller one — a
    smaller scale on either half could not be hidden this way). Recorded as one sensitivity-1 query of
    noise multiplier b / Δ₁: the Laplace mechanism's privacy-loss distribution depends on b / Δ₁ alone, and a
    shift of L1 norm Δ₁ spread over several coordinates is dominated by the same shift on one coordinate
    (Zhu, Dong, Wang 2022, the Laplace mechanism's dominating pair), which is what dp-accounting's
    ``LaplaceDpEvent`` composes."""
    return QueryRelease(min(float(sum_scale), float(sq_sum_scale)) / float(sensitivity), None, 1)


Release = QueryRelease | GaussianRelease
"""Anything a run or a device's ledger records."""


# -- pure functions ---------------------------------------------------------------------------------------
def to_dp_event(releases: Sequence[Release]) -> dp_events.ComposedDpEvent:
    """All releases as one dp-accounting ``DpEvent`` (Laplace noise multiplier = scale / sensitivity, here
    scale; a Gaussian release as the Gaussian event of its ρ)."""
    from dp_accounting import dp_event
    return dp_event.ComposedDpEvent([e for r in releases for e in r.dp_events()])


def _pld(releases: Sequence[Release], interval: float) -> privacy_accountant.PrivacyAccountant:
    """The accountant of ``releases``: PLD for Laplace releases alone; RDP as soon as a Gaussian release is
    among them (the discrete Gaussian's guarantee is an RDP/zCDP bound — the PLD of a continuous Gaussian
    would not be a proven bound for it)."""
    if any(r.rdp_only for r in releases):
        from dp_accounting.rdp import rdp_privacy_accountant
        acc = rdp_privacy_accountant.RdpAccountant()
    else:
        from dp_accounting.pld import pld_privacy_accountant
        acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    acc.compose(to_dp_event(releases))
    return acc


def composed_epsilon(releases: Sequence[Release], delta: float, interval: float = 1e-4) -> float:
    """Smallest ε such that the composition of ``releases`` is (ε, δ)-DP (PLD, pessimistic estimate)."""
    if not releases:
        return 0.0
    with _COMPOSING:
        return _cached_epsilon(tuple(releases), float(delta), float(interval))


_COMPOSING = threading.Lock()
"""One composition at a time in a process: devices emulated as threads of one process (``pategail emulate``,
the SDK fleet) hold identical ledgers, and without it each would compose the same releases at once instead of
the first doing it and the others finding it cached."""


@lru_cache(maxsize=64)
def _cached_epsilon(releases: tuple[Release, ...], delta: float, interval: float) -> float:
    # one composition of a run's releases takes ~1 s (more at a fine grid); the coordinator's budget check
    # and its report, and a device's request check and round check, ask for the same one: compose it once
    return float(_cached_accountant(releases, interval).get_epsilon(delta))


@lru_cache(maxsize=2)
def _cached_accountant(releases: tuple[Release, ...], interval: float) -> privacy_accountant.PrivacyAccountant:
    # the composition itself, for ε at another δ or δ at some ε of the same releases; only the latest two
    # are kept (a run's composed distribution reaches ~10^6 points, 7 MB)
    return _pld(list(releases), interval)


def composed_delta(releases: Sequence[Release], epsilon: float, interval: float = 1e-4) -> float:
    """δ(ε) of the composition of ``releases`` (PLD)."""
    if not releases:
        return 0.0
    with _COMPOSING:
        return float(_cached_accountant(tuple(releases), float(interval)).get_delta(epsilon))


def merge_release(releases: Sequence[Release], new: Release) -> list[Release]:
    """``releases`` + ``new``, merged into the last entry when it is of the same kind with the same noise."""
    last = releases[-1] if releases else None
    if last is not None and type(last) is type(new) and replace(last, count=new.count) == new:
        return [*releases[:-1], replace(new, count=last.count + new.count)]
    return [*releases, new]


def release_to_dict(release: Release) -> dict[str, Any]:
    """A JSON-able record (ledgers, journals): Laplace releases as before, Gaussian ones tagged."""
    d = asdict(release)
    return {"kind": "gaussian", **d} if isinstance(release, GaussianRelease) else d


def release_from_dict(d: dict[str, Any]) -> Release:
    d = dict(d)
    return GaussianRelease(**{k: v for k, v in d.items() if k != "kind"}) if d.get("kind") == "gaussian" \
        else QueryRelease(**d)
