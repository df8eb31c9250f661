"""The hybrid method: ``fedavg.hybrid_rounds`` DP-FedAvg rounds first (a private warm start of the policy by
maximum likelihood on the devices' own days), then PateGail's rounds (noisy rewards, PPO) up to ``rounds`` —
the private counterpart of the non-private rule-model warm start.

Privacy: one plan for the whole run, PateGail's Gaussian plan over the environment vector and ``rounds +
retry_rounds`` releases (:func:`pategail.server.coordinator.run_plan`). A delta release is given the plan's
noise multiplier z on its own sensitivity (σ = z · Δ₂ of a P-value vector of clip norm 1), so it costs what a
reward release costs and the devices' floor (σ / Δ₂ ≥ z) and budget checks hold for both kinds: the budget is
split between the two phases by their numbers of rounds.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pategail.sdk.epr import CellGeometry
from pategail.server.config import TrainConfig
from pategail.server.coordinator import Coordinator
from pategail.server.fedavg.coordinator import FedAvgCoordinator, server_optimizer
from pategail.server.fleet import Fleet
from pategail.server.ppo import PolicyOptimizer
from pategail.server.run_state import RoundStats


class PhasedOptimizer:
    """The server optimiser of the DP-FedAvg rounds and PPO's Adam, one checkpointed object; ``phase`` says
    which one ``step`` and ``zero_grad`` drive."""

    def __init__(self, fedavg: PolicyOptimizer, ppo: PolicyOptimizer):
        self.optimizers = {"fedavg": fedavg, "ppo": ppo}
        self.phase = "fedavg"

    def step(self) -> None:
        self.optimizers[self.phase].step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizers[self.phase].zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {name: opt.state_dict() for name, opt in self.optimizers.items()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state_dict[name])


class HybridCoordinator(FedAvgCoordinator):
    """DP-FedAvg rounds 1..``fedavg.hybrid_rounds``, then PateGail rounds."""

    def __init__(self, config: TrainConfig, fleet: Fleet, cells: np.ndarray, run_dir: Path, seed: int = 0,
                 geometry: CellGeometry | None = None, signing_key: Ed25519PrivateKey | None = None):
        super().__init__(config, fleet, cells, run_dir, seed, geometry, signing_key)
        ppo = torch.optim.Adam(self.policy.parameters(), lr=self.config.ppo.learning_rate)
        fedavg = server_optimizer([self.policy.get_parameter(n) for n in self.names], self.config.fedavg)
        self.optimizer: PhasedOptimizer = PhasedOptimizer(fedavg, ppo)

    def run_round(self, round_: int) -> RoundStats:
        if round_ <= self.config.fedavg.hybrid_rounds:
            self.optimizer.phase = "fedavg"
            return super().run_round(round_)
        self.optimizer.phase = "ppo"
        return Coordinator.run_round(self, round_)

    def log_round(self, stats: RoundStats) -> None:
        phase = FedAvgCoordinator if "mean_delta_norm" in stats.ppo else Coordinator
        phase.log_round(self, stats)
