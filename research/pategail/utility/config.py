"""Budgets and shapes of the two applications, kept apart from their code so that the command line can
show the defaults without importing torch."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PredictionConfig:
    """The next-location predictors and their training budget (the same for every arm). The defaults were
    chosen on the training days of the paper's folder (a validation share of them), never on test days."""

    steps: int = 3000
    """At most this many minibatches of training (Adam) in all (``--prediction-steps``); early stopping
    usually ends training well before."""
    batch_size: int = 32
    """Days per minibatch; an epoch visits every fit day once, in a seeded random order."""
    cell_dim: int = 64
    """Width of the cell embedding."""
    slot_dim: int = 16
    """Width of the slot (time of day) embedding."""
    hidden: int = 64
    """GRU hidden units."""
    learning_rate: float = 3e-3
    """Adam step size."""
    validation_share: float = 0.1
    """Share of each arm's own days held out of fitting to early-stop on (their cross-entropy)."""
    patience: int = 2
    """Epochs without a better validation cross-entropy before training stops."""
    unfamiliar_share: float = 0.1
    """Share of input cells read as "unfamiliar" in training, so that the model learns what to predict at a cell
    its days never visit."""
    markov_prior: float = 10.0
    """β of the Markov chain: the weight, in transitions, of its back-off P₀ against a cell's own counts."""
    seed: int = 0
    """Seeds the initial weights, the validation split and the minibatches; the same for every arm."""
    device: str = "cpu"
    """torch device that trains and evaluates the model ("cpu", "cuda"); results are reproducible per device."""

    def __post_init__(self):
        if min(self.steps, self.batch_size, self.cell_dim, self.slot_dim, self.hidden, self.patience) < 1:
            raise ValueError("steps, batch_size, patience and the widths must be >= 1")
        if not self.learning_rate > 0 or not self.markov_prior > 0:
            raise ValueError("learning_rate and markov_prior must be > 0")
        if not 0 <= self.validation_share < 1 or not 0 <= self.unfamiliar_share < 1:
            raise ValueError("validation_share and unfamiliar_share must be in [0, 1)")


@dataclass(frozen=True)
class RecommendationConfig:
    """The factorisation (the same for every arm)."""

    factors: int = 32
    """Latent dimensions."""
    regularization: float = 0.1
    """λ on the squared norms of both factor tables."""
    alpha: float = 5.0
    """Confidence slope: c = 1 + α·log(1 + visits)."""
    iterations: int = 10
    """ALS sweeps (rows, then columns)."""
    k: int = 10
    """Length of each recommendation list."""
    seed: int = 0
    """Seeds the initial factors."""

    def __post_init__(self):
        if self.factors < 1 or self.iterations < 1 or self.k < 1:
            raise ValueError("factors, iterations and k must be >= 1")
        if self.regularization <= 0 or self.alpha < 0:
            raise ValueError("regularization must be > 0 and alpha >= 0")
