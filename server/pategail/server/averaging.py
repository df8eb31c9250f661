"""Polyak–Ruppert tail averaging of the policy: the published policy is the mean of the weights after each
of the last ``average_rounds`` rounds (as SWA does for networks); see ``TrainConfig.average_rounds``."""
from __future__ import annotations

import copy

import torch

from pategail.server.policy import Policy


class TailAverage:
    """The running sum of the policy weights after each averaged round (rounds after ``first_round``)."""

    def __init__(self, first_round: int):
        self.first_round = first_round
        self.sum: dict[str, torch.Tensor] | None = None
        self.count = 0

    def add(self, round_: int, policy: Policy) -> None:
        """Count ``policy``'s weights after round ``round_`` if that round is averaged."""
        if round_ <= self.first_round:
            return
        weights = {k: v.detach().clone() for k, v in policy.state_dict().items()}
        if self.sum is None:
            self.sum = weights
        else:
            for k, v in weights.items():
                self.sum[k] += v
        self.count += 1

    def averaged(self, policy: Policy) -> Policy:
        """The mean of the weights counted so far in a copy of ``policy`` (``policy`` itself before the first
        averaged round)."""
        if self.sum is None:
            return policy
        out = copy.deepcopy(policy)                      # no fresh initialisation: the torch RNG is untouched
        out.load_state_dict({k: v / self.count for k, v in self.sum.items()})
        out.eval()
        return out
