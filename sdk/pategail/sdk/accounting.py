"""Differential-privacy accounting shared by the coordinator's accountant and each device's own ledger: the
releases of a run (or of one device) composed with Google's ``dp-accounting`` PLD accountant — pure functions.

A ``QueryRelease`` is ``count`` queried pairs, each answered with Σ D + noise (Laplace scale ``sum_scale``)
and, optionally, Σ D² + noise (``sq_sum_scale``); both sums have sensitivity 1. ``merge_release`` appends
one to a list the way both sides do (identical scales merged), so the coordinator and a device that took
part in every release compose exactly the same events and get the same ε on the same grid.
The server's stateful ``PrivacyAccountant`` (``pategail/server/privacy/accountant.py``) builds on these.

``dp_accounting`` (and scipy under it) is imported when something is composed, not with this module: a
device that keeps no budget never loads it, and the SDK's import stays light.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

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

    def __post_init__(self):
        if not self.sum_scale > 0 or (self.sq_sum_scale is not None and not self.sq_sum_scale > 0):
            raise ValueError("noise scales must be > 0 (a release without noise has ε = ∞)")
        if self.count < 1:
            raise ValueError("count must be >= 1")

    @property
    def per_query_epsilon(self) -> float:
        """Pure ε of one query: 1/b (+ 1/b_sq)."""
        return 1.0 / self.sum_scale + (1.0 / self.sq_sum_scale if self.sq_sum_scale else 0.0)


# -- pure functions ---------------------------------------------------------------------------------------
def to_dp_event(releases: list[QueryRelease]):
    """All releases as one dp-accounting ``DpEvent`` (Laplace noise multiplier = scale / sensitivity, here
    scale)."""
    from dp_accounting import dp_event

    events = []
    for r in releases:
        events.append(dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(r.sum_scale), r.count))
        if r.sq_sum_scale:
            events.append(dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(r.sq_sum_scale), r.count))
    return dp_event.ComposedDpEvent(events)


def _pld(releases: list[QueryRelease], interval: float):
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=interval)
    acc.compose(to_dp_event(releases))
    return acc


def composed_epsilon(releases: list[QueryRelease], delta: float, interval: float = 1e-4) -> float:
    """Smallest ε such that the composition of ``releases`` is (ε, δ)-DP (PLD, pessimistic estimate)."""
    if not releases:
        return 0.0
    return _cached_epsilon(tuple(releases), float(delta), float(interval))


@lru_cache(maxsize=64)
def _cached_epsilon(releases: tuple[QueryRelease, ...], delta: float, interval: float) -> float:
    # one composition of a run's releases takes ~1 s (more at a fine grid); the coordinator's budget check
    # and its report, and a device's request check and round check, ask for the same one: compose it once
    return float(_pld(list(releases), interval).get_epsilon(delta))


def composed_delta(releases: list[QueryRelease], epsilon: float, interval: float = 1e-4) -> float:
    """δ(ε) of the composition of ``releases`` (PLD)."""
    if not releases:
        return 0.0
    return float(_pld(releases, interval).get_delta(epsilon))


def merge_release(releases: list[QueryRelease], new: QueryRelease) -> list[QueryRelease]:
    """``releases`` + ``new``, merged into the last entry when its noise scales are identical."""
    last = releases[-1] if releases else None
    if last and (last.sum_scale, last.sq_sum_scale) == (new.sum_scale, new.sq_sum_scale):
        return [*releases[:-1], QueryRelease(new.sum_scale, new.sq_sum_scale, last.count + new.count)]
    return [*releases, new]
