"""The coordinator's choices for one secure-aggregation round — the one configuration type of the server
side. :meth:`SecAggCoordinator.new_round <pategail.server.secagg.coordinator.SecAggCoordinator.new_round>`
turns it, with the round's participants, length and aggregator, into the signed
:class:`~pategail.sdk.secagg.config.RoundConfig` every device checks (its wire form)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SecureRoundConfig:
    """The coordinator's choices for one round (noise scales in value units, on the sums)."""

    round_id: int
    """Strictly increasing round number."""
    n_min: int
    """Fewest contributors for which the round releases anything; noise shares are sized for it."""
    sum_noise_scale: float = 0.0
    """Discrete-Laplace scale of the total noise on each Σ D (see privacy.calibration.sum_noise_scales)."""
    sq_sum_noise_scale: float = 0.0
    """The same for each Σ D²."""
    degree: int = 0
    """SecAgg+ neighbours per device (even); 0 = all pairs."""
    threshold: int | None = None
    """Shamir threshold; None = the one the security argument needs (pategail.sdk.secagg.graph.secure_threshold),
    the lowest devices accept."""
    aggregator: str = "coordinator"
    """"coordinator" or "device" (a device drawn at random each round)."""
    colluders: int = 0
    """t: devices that may collude with the coordinator; noise shares are sized for n_min - t."""
    mechanism: str = "laplace"
    """"laplace" or "gaussian" (then sum_noise_scale is the discrete Gaussian's σ; see RoundConfig)."""
    block: int = 0
    """Gaussian: 0 = the vector as it is; K = centred K-decision block means (RoundConfig.block)."""
    clip_norm: float = 0.0
    """Gaussian: the L2 norm each device clips its vector to."""

    def __post_init__(self) -> None:
        if self.aggregator not in ("coordinator", "device"):
            raise ValueError("aggregator must be 'coordinator' or 'device'")
