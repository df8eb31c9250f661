"""The settings of a DP-FedAvg run (``TrainConfig.fedavg``; a config file's "fedavg" object overrides some)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from pategail.server.errors import PategailError

SERVER_OPTIMIZERS = ("fedavg", "fedadam")
"""``FedAvgConfig.server_optimizer`` values."""
SERVER_LR = {"fedavg": 1.0, "fedadam": 0.1}
"""Each server optimiser's default step size."""


@dataclass(frozen=True)
class FedAvgConfig:
    """DP-FedAvg (McMahan et al. 2018; FedAdam: Reddi et al. 2021). Each round every device runs
    ``local_epochs`` passes of SGD (``client_lr``, minibatches of ``batch_size`` of its days) on the negative
    log-likelihood of its real days' labelled actions, clips its model delta to L2 norm ``clip_norm`` and
    uploads it through the secure aggregation with the Gaussian mechanism; the coordinator divides the noisy
    sum by the fixed number of devices and applies it with the server optimiser. The rounds are
    ``TrainConfig.rounds``. Defaults chosen on the TRAINING days of the public-map GeoLife, its 82 devices,
    ε = 8, 20 rounds (BENCHMARKS.md, "DP-FedAvg against PateGail"): of (client_lr, clip_norm) = (0.05, 0.5),
    (0.2, 0.5), (0.2, 0.1) and (0.5, 0.5), (0.2, 0.5) beat every other on 4 of the 5 km JSDs (the mean of the
    five: 0.0358, 0.0357 for (0.2, 0.1), 0.069 and 0.123 for the others)."""

    local_epochs: int = 1
    """Passes over the device's own days per round. Chosen on training days at 82 devices and ε = 8 (four seeds,
    FedAvg's step): 2 and 3 epochs had higher mean km JSDs on most seeds and broke down more often (3 and 2 runs
    of 4, against 1 of 4 for one epoch)."""
    batch_size: int = 8
    """Days per local SGD step."""
    client_lr: float = 0.2
    """The devices' SGD learning rate (0.05 left the policy near its start after 20 rounds; 0.5 overshot)."""
    clip_norm: float = 0.5
    """C: the L2 norm each device's model delta is clipped to (the sensitivity of a release, in parameter
    units). The noise on the mean delta is proportional to C / devices. 0.1 had the better G-rank, 0.5 the
    better Radius, DailyLoc, Distance and I-rank."""
    server_optimizer: str = "fedavg"
    """"fedavg": θ ← θ + ``server_lr`` · mean Δ; "fedadam": Adam on −mean Δ as the gradient (``server_lr``,
    ``server_betas``, ``server_eps``). FedAvg's step stays proportional to the delta, where Adam's
    per-coordinate normalisation takes full-size steps in directions that are mostly noise. Measured on the
    TRAINING days of the public map of Beijing, ε = 8, 20 rounds (BENCHMARKS.md, "DP-FedAvg against
    PateGail"), by the noise on the released mean delta: with 82 devices (15.6 clip norms) FedAvg had the lower
    mean of the five km JSDs on three seeds of four; on a second city (154 devices, ~8 clip norms) each won two
    of four; with 1,000 devices (1.8) FedAdam at 0.1 beat FedAvg on all five (one seed: mean 0.0145 against
    0.0211); with 10,000 devices (0.13) FedAvg won on both seeds (0.0145 and 0.0136 against 0.040 and 0.027:
    FedAdam's first rounds swing and its days explore half as often as real ones). FedAdam stays an option."""
    server_lr: float | None = None
    """The server step size; None: 0.1 for FedAdam (chosen at 82 devices from 0.003, 0.01, 0.03, 0.1 and 0.3:
    mean of the five km JSDs 0.063, 0.058, 0.048, 0.032, 0.085), 1 for FedAvg (the plain average of the clipped
    deltas)."""
    server_beta1: float = 0.9
    """FedAdam's first-moment decay."""
    server_beta2: float = 0.99
    """FedAdam's second-moment decay."""
    server_eps: float = 1e-3
    """FedAdam's adaptivity τ (Reddi et al. 2021 use 1e-3)."""
    hybrid_rounds: int = 10
    """``TrainConfig.method`` "hybrid": the DP-FedAvg rounds a run starts with (a private warm start of the
    policy); rounds ``hybrid_rounds`` + 1 .. ``rounds`` are PateGail's. Both kinds of release share the plan's
    noise multiplier (pategail.server.fedavg.hybrid)."""

    def __post_init__(self) -> None:
        if self.local_epochs < 1 or self.batch_size < 1 or self.hybrid_rounds < 1:
            raise PategailError(f"fedavg.local_epochs, fedavg.batch_size and fedavg.hybrid_rounds must be >= 1, got "
                                f"{self.local_epochs}, {self.batch_size}, {self.hybrid_rounds}")
        for name in ("client_lr", "clip_norm", "server_lr", "server_eps"):
            value = getattr(self, name)
            if name == "server_lr" and value is None:
                continue
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise PategailError(f"fedavg.{name} must be a number > 0, got {value!r}")
        if self.server_optimizer not in SERVER_OPTIMIZERS:
            raise PategailError(f"fedavg.server_optimizer must be one of {', '.join(SERVER_OPTIMIZERS)}, got "
                                f"{self.server_optimizer!r}")
        if not (0 <= self.server_beta1 < 1 and 0 <= self.server_beta2 < 1):
            raise PategailError("fedavg.server_beta1 and fedavg.server_beta2 must be in [0, 1)")

    @property
    def resolved(self) -> bool:
        """Whether the server step size is set (``TrainConfig.for_devices`` sets it)."""
        return self.server_lr is not None

    def with_default_step(self) -> "FedAvgConfig":
        """These settings with the server optimiser's default step size where none is set."""
        lr = self.server_lr if self.server_lr is not None else SERVER_LR[self.server_optimizer]
        return dataclasses.replace(self, server_lr=lr)
