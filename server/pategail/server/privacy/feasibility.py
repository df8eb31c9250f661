"""Before training, say whether it can work: the noise std a run's plan puts on each
released mean reward, against the noise the generator was measured to tolerate — pure functions.

The tolerance was measured without privacy: Gaussian noise of std s added by the coordinator to each released
mean reward of otherwise noiseless runs, judged on training days against the epr baseline (BENCHMARKS.md, "Noise
tolerance"; the experiment's code is in the repository's history). A run whose noise is above it is not expected
to learn.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pategail.server.privacy.plan import PrivacyPlan

MEASURED_TOLERANCE: dict[str, float] = {"pair": 3.0, "block:8": 0.0, "day": 0.3}
"""Largest noise std s on a released mean reward at which the generator still beat epr on >= 4 of 5 km metrics
(training days), by granularity, from s in {0, 0.03, 0.1, 0.3, 1} (and 3 at pair; a control at s = 1000 lost all
five) on the embedded data (10 devices, 60 rounds, seed 0) — BENCHMARKS.md "Noise tolerance". Pair:
at least 3 (larger s not measured). 0 at block:8: no s met the bar there, not even s = 0 (one seed; the bar is
within run-to-run spread on this small data set)."""
TOLERANCE_SOURCE = "BENCHMARKS.md, 'Noise tolerance'"


@dataclass(frozen=True)
class Feasibility:
    """One mechanism at one granularity for a population of devices at a total (ε, δ)."""

    mechanism: str
    granularity: str
    devices: int
    noise_std: float
    """Standard deviation of the noise on each released mean reward (rewards in [0, 1])."""
    tolerance: float | None
    """The measured tolerance at this granularity (None: not measured)."""
    env_noise_std: float | None = None
    """The noise std on each released environment sum (cell, or region with the Gaussian mechanism's coarse
    parts); None when unknown."""
    env_share: float | None = None
    """The share of ε the environment release gets in this plan (None: not said)."""

    @property
    def env_units_to_be_seen(self) -> float | None:
        """Device weight a cell or region must hold for its noisy sum to clear the threshold
        (``pategail.server.spatial.THRESHOLD`` × the std); a device with 100 days or more weighs 1."""
        from pategail.server.spatial import THRESHOLD
        return None if self.env_noise_std is None else THRESHOLD * self.env_noise_std

    def env_line(self) -> str:
        """The environment release's noise against its signal, or '' without one."""
        need = self.env_units_to_be_seen
        if need is None:
            return ""
        from pategail.server.privacy.mechanisms import planned
        regions = planned(self.mechanism).region_sums                    # the Laplace release has no regions
        unit, sums = ("region", "cell and region sum") if regions else ("cell", "cell sum")
        return (f"; environment: noise std {self.env_noise_std:.3g} on each {sums}, a home {unit} is "
                f"seen from {need:.3g} device weights up (the {self.devices:,} devices weigh at most "
                f"{self.devices:,}: at most {int(self.devices // need):,} {unit}s can be seen)")

    @property
    def can_learn(self) -> bool | None:
        """True when the noise is at most the measured tolerance; None when there is none to compare with."""
        return None if self.tolerance is None else self.noise_std <= self.tolerance

    def line(self) -> str:
        head = f"{self.mechanism:8s} {self.granularity:8s} noise std {self.noise_std:9.4g} on each released mean"
        if self.env_share is not None:
            head += f" (environment share {self.env_share:g})"
        if self.tolerance is None:
            return head + " (no tolerance measured at this granularity)" + self.env_line()
        if self.tolerance == 0:
            return head + ": the generator did not beat epr on >= 4 of 5 metrics at this granularity even " \
                          "without noise (measured tolerance 0)" + self.env_line()
        verdict = "below" if self.can_learn else "ABOVE"
        return head + f", {verdict} the measured tolerance {self.tolerance:g}" + (
            "" if self.can_learn else ": the generator is not expected to learn") + self.env_line()


def tolerance_for(granularity: str) -> float | None:
    return MEASURED_TOLERANCE.get(granularity)


def plan_feasibility(plan: PrivacyPlan, devices: int) -> Feasibility:
    """The run's own line, from its privacy plan (no calibration): Laplace b on Σ D has std √2·b/N on the mean
    over N devices; the Gaussian mechanism's σ is divided by the fixed count N. The environment's: on each
    released sum (its signal is the device weight of a cell, not a mean)."""
    from pategail.server.privacy.mechanisms import planned
    scheme = planned(plan.mechanism_name)
    return Feasibility(plan.mechanism_name, plan.granularity, devices, scheme.noise_on_mean(plan, devices),
                       tolerance_for(plan.granularity), scheme.env_noise_std(plan))
