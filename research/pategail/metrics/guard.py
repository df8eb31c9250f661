"""The invented-mode guard: does the generator produce a kind of day the real data never has?

The adversarial game can settle in a mode real days lack — on sparse cities generated days that explore at
nearly every slot (25–40 distinct cells where real days visit 1–4) — while the five JSDs only say "worse".
The guard names it: the share of generated days with more distinct cells than the real days' 99.9th
percentile. Real days themselves exceed it 0.1% of the time, so a share well above that (the default limit
is 1%) is a mode the generator invented.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pategail.sdk.features import distinct_cells

GUARD_QUANTILE = 99.9
"""Percentile of the real days' distinct-cell counts above which a generated day counts as invented."""
GUARD_LIMIT = 0.01
"""Share of generated days above the threshold from which the guard flags the distribution (10× what the
real days themselves have above their own 99.9th percentile)."""


def distinct_cells_threshold(real_days: np.ndarray, quantile: float = GUARD_QUANTILE) -> float:
    """The ``quantile``-th percentile of the real days' distinct-cell counts (linear interpolation)."""
    return float(np.percentile(distinct_cells(real_days), quantile))


@dataclass(frozen=True)
class ModeGuard:
    """The guard's verdict on one set of generated days."""

    threshold: float
    """The real days' ``quantile``-th percentile of distinct cells a day."""
    share: float
    """Share of generated days with more distinct cells than ``threshold``."""
    limit: float = GUARD_LIMIT
    """Share from which the distribution is flagged."""
    quantile: float = GUARD_QUANTILE
    """Percentile of the real days that defines ``threshold``."""

    @property
    def flagged(self) -> bool:
        """True when the generator invented a mode: more than ``limit`` of its days above the threshold."""
        return self.share > self.limit

    def message(self) -> str:
        """One line for a report or a log."""
        return guard_line(self.to_dict())

    def to_dict(self) -> dict:
        return {"threshold": self.threshold, "share": self.share, "limit": self.limit, "quantile": self.quantile,
                "flagged": self.flagged}


def guard_line(guard: dict) -> str:
    """One line from :meth:`ModeGuard.to_dict`'s fields (as ``evaluate`` and report.json hold them)."""
    verdict = ("INVENTED MODE: generated days visit more places than real days ever do" if guard["flagged"]
               else "ok")
    return (f"{guard['share']:.1%} of generated days visit more than {guard['threshold']:g} distinct cells (the "
            f"real days' {guard['quantile']:g}th percentile; limit {guard['limit']:.0%}): {verdict}")


def share_above(generated: np.ndarray, threshold: float) -> float:
    """Share of ``generated`` days with more than ``threshold`` distinct cells."""
    return float(np.mean(distinct_cells(generated) > threshold))


def invented_mode(generated: np.ndarray, real: np.ndarray, quantile: float = GUARD_QUANTILE,
                  limit: float = GUARD_LIMIT) -> ModeGuard:
    """The guard for ``generated`` days against ``real`` days (both int (n, T) cell ids)."""
    threshold = distinct_cells_threshold(real, quantile)
    return ModeGuard(threshold, share_above(generated, threshold), limit, quantile)
