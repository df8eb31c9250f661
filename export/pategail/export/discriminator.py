"""The personal discriminator D(s, a): a small MLP over one (state, action) pair, trained on the device.

Sign convention (as in ``imitation``): the network returns ``logits_expert_is_high``; expert = the owner's
real days = label :data:`LABEL_EXPERT` (1), generated pairs = :data:`LABEL_GENERATED` (0). The loss is the
paper's −E_real[log D] − E_generated[log(1 − D)] with D = sigmoid(logit), written in the numerically
stable form of :func:`stable_bce_with_logits` (the built-in ONNX Runtime BCE goes NaN once the data
separate). What a device reports for a queried pair is D(s, a) = sigmoid(logit) ∈ (0, 1).

The input is :func:`pategail.sdk.features.pair_features` — the same function for real and generated pairs.
The graph uses only ops with gradient builders in ONNX Runtime 1.19 (Gemm/MatMul, Add, Tanh, Squeeze):
no Softplus, CastLike, Atan or ReduceMin.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from pategail.sdk.features import N_PAIR_FEATURES

LABEL_EXPERT = 1.0
"""Label of real (expert) pairs: the owner's own days, labelled by ``label_actions``."""
LABEL_GENERATED = 0.0
"""Label of generated pairs: days sampled from the policy."""


@dataclass(frozen=True)
class DiscriminatorConfig:
    """Shape of the discriminator MLP. Defaults: 15 → 64 → 64 → 1, about 5 k parameters (≈ 20 KB), which
    trains in well under a millisecond a step on one phone core (BENCHMARKS.md)."""

    n_inputs: int = N_PAIR_FEATURES
    """Width of a (state, action) pair: state features + one-hot action."""
    hidden: int = 64
    """Width of both hidden layers."""

    def __post_init__(self):
        if self.n_inputs < 1 or self.hidden < 1:
            raise ValueError("n_inputs and hidden must be >= 1")


class Discriminator(nn.Module):
    """D(s, a) → logit, ``logits_expert_is_high``. forward: pairs float32 (B, n_inputs) → logits (B,).

    Tanh hidden units: smooth and bounded, so the logit grows only through the last layer's weights, which
    AdamW's weight decay keeps in check on perfectly separable data.
    """

    def __init__(self, config: DiscriminatorConfig = DiscriminatorConfig()):
        super().__init__()
        self.config = config
        self.fc1 = nn.Linear(config.n_inputs, config.hidden)
        self.fc2 = nn.Linear(config.hidden, config.hidden)
        self.out = nn.Linear(config.hidden, 1)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.fc1(pairs))
        h = torch.tanh(self.fc2(h))
        return self.out(h).squeeze(-1)


class DiscriminatorWithProb(nn.Module):
    """The exported graph: pairs (B, n) → (logit (B,), prob (B,)), prob = D(s, a) = sigmoid(logit), the
    reward input a device reports. Training uses only ``logit``; ``prob`` comes along so the eval model and
    ``Module.export_model_for_inferencing`` can produce the reward inputs from the trained parameters."""

    def __init__(self, discriminator: Discriminator):
        super().__init__()
        self.discriminator = discriminator

    def forward(self, pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logit = self.discriminator(pairs)
        return logit, torch.sigmoid(logit)


def stable_bce_with_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of ``labels`` (1 = expert) under sigmoid(``logits``), in the form
    relu(x) − x·t + log(1 + exp(−|x|)) — finite for every finite x. It is the torch twin of the ONNX loss
    block in :mod:`pategail.export.artifacts` (same ops, same order) and equals
    ``F.binary_cross_entropy_with_logits``."""
    return (torch.relu(logits) - logits * labels + torch.log(1 + torch.exp(-torch.abs(logits)))).mean()
