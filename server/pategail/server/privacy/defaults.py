"""The privacy settings a run gets when the user names only ε: δ and the environment's share of the budget,
both chosen from the run's device count — pure functions.

``TrainConfig.for_devices`` applies them once the devices are known; the privacy plan records the result.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pategail.server.config import TrainConfig

DELTA_CAP = 1e-5
"""The largest default δ."""
DELTA_EXPONENT = 1.1
"""The default δ is at most N^-1.1 for N devices: well below 1/N — a mechanism that publishes one random
user's data outright is (0, 1/N)-DP, so δ near 1/N promises nothing (user-level DP deployments report far
smaller δ, e.g. 1e-10 over millions of devices)."""

SHARE_RANGE = (0.1, 0.5)
"""The environment's share of ε is chosen in this range. 0.1: the rewards keep 90% wherever they need it (at 83
devices and ε = 8 the day granularity's reward noise is then just under its tolerance). 0.5: the environment
never gets more than the rewards; at 1,000 devices and ε = 8 it cut the environment's noise ~5× against 0.1
while the rewards stayed ~4× below their tolerance (BENCHMARKS.md, "Privacy–utility at 83, 1,000 and 10,000
devices")."""
SHARE_STEP = 0.05
"""The shares tried, from the largest down (a grid, so that a plan does not move with float rounding)."""
DELTA_NOISE_LIMIT = 2.0
"""A DP-FedAvg run's environment gets the largest share at which the noise on the released mean model delta has
an L2 norm of at most this many clip norms (the clip norm bounds each device's delta, so the mean's signal).
On the public map of Beijing at ε = 8, 20 rounds (training days, BENCHMARKS.md "DP-FedAvg against PateGail"):
with 1,000 devices share 0.5 (noise 1.8 clip norms) beat 0.1 (1.28) on all five km metrics, G-rank 0.017
against 0.068; with 82 devices, where the noise is 16–22 clip norms at any share, 0.1 beat 0.3 and 0.5."""
LAPLACE_SHARE = 0.1
"""The Laplace mechanism's default share (no measured tolerance compares its reward noise with the
environment's: the share it was measured with)."""
TOLERANCE_MARGIN = 1.0
"""The rewards keep their noise std on a mean at most this share of the measured tolerance
(pategail.server.privacy.feasibility.MEASURED_TOLERANCE). 1, the tolerance itself: at 1,000 devices and ε = 1 a
margin of ½ left the environment share 0.1 (reward std 0.156, environment σ 109 per sum), share 0.5 (reward std
0.219, under the tolerance 0.3; σ 19.8) was better on all five km metrics and made 8.2% invented days against
27.5% (one seed each on a public Beijing map; the benchmarks' history, ``git show 65b3a3e:BENCHMARKS.md``,
"Private defaults, both neighbouring relations, δ from N and a public map")."""


def default_delta(devices: int) -> float:
    """min(1e-5, N^-1.1) for a run of N devices."""
    if devices < 1:
        raise ValueError(f"devices must be at least 1, got {devices}")
    delta: float = min(DELTA_CAP, float(devices) ** -DELTA_EXPONENT)
    return delta


def environment_share(config: TrainConfig, devices: int, n_cells: int | None = None) -> float:
    """The share of ε a run of ``config`` (target ε and δ set) over ``devices`` devices gives its environment
    release: with the Gaussian mechanism the largest share in ``SHARE_RANGE`` (on a ``SHARE_STEP`` grid) at
    which the rewards' noise std on a mean reward stays within ``TOLERANCE_MARGIN`` × the measured tolerance
    of the run's granularity — the rewards get what learning needs, the environment the rest — and the
    smallest share when none does or no tolerance was measured; ``LAPLACE_SHARE`` with Laplace. The noise of
    the rewards does not depend on the environment vector's length, so no cell table is needed. DP-FedAvg: the
    largest share at which the noise on the mean model delta stays within ``DELTA_NOISE_LIMIT`` clip norms
    (the model's size, so ``n_cells``, sets it; the smallest share without it)."""
    low, _ = SHARE_RANGE
    if not config.private:
        return low
    if config.method == "dp-fedavg":
        if n_cells is None:
            return low
        from pategail.server.fedavg.coordinator import delta_environment_share
        return delta_environment_share(config, devices, n_cells)
    return config.privacy.scheme.environment_share(config, devices)
