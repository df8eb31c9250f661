"""Budgets and shapes of the two applications, kept apart from their code so that the command line can
show the defaults without importing torch."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PredictionConfig:
    """The LSTM and its training budget (the same for every arm)."""

    steps: int = 200
    """Minibatches of training (Adam); the experiment's budget (``--prediction-steps``)."""
    batch_size: int = 32
    """Days per minibatch, drawn with replacement from the arm's days."""
    cell_dim: int = 64
    """Width of the cell embedding."""
    slot_dim: int = 16
    """Width of the slot (time of day) embedding."""
    hidden: int = 64
    """LSTM hidden units."""
    learning_rate: float = 3e-3
    """Adam step size."""
    seed: int = 0
    """Seeds the initial weights and the minibatches; the same for every arm."""
    device: str = "cpu"
    """torch device that trains and evaluates the LSTM ("cpu", "cuda"); results are reproducible per device."""

    def __post_init__(self):
        if min(self.steps, self.batch_size, self.cell_dim, self.slot_dim, self.hidden) < 1:
            raise ValueError("steps, batch_size and the widths must be >= 1")
        if not self.learning_rate > 0:
            raise ValueError("learning_rate must be > 0")


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
