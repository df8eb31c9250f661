"""Mobility prediction (the paper's first application): does an LSTM that predicts the next cell learn as
much from synthetic days as from real ones?

Three arms share one model shape, one training budget (``steps`` minibatches of ``batch_size`` days) and one
seed, and differ only in their training days: (a) the real training days, (b) the synthetic days,
(c) both. Each is evaluated on the real test days: at every slot t = 0..T-2 the model reads l_0..l_t and
ranks all cells for l_{t+1}; Acc@1 and Acc@5 are the shares of slots whose true next cell is ranked first /
in the top five, MRR the mean of 1 / rank. Reported: the three arms, the ratio (b)/(a) and the gain (c) − (a),
and for reference the persistence predictor ("the next cell is the current one").
"""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
import torch
from torch import nn

from pategail.utility.config import PredictionConfig

ARMS = ("real", "synthetic", "real+synthetic")
METRICS = ("acc1", "acc5", "mrr")


class NextLocationLSTM(nn.Module):
    """forward(days int64 (B, T)) → logits float (B, T, n_cells): row t scores the cell of slot t + 1 from
    slots 0..t (a one-layer LSTM over cell and slot embeddings)."""

    def __init__(self, n_cells: int, n_slots: int, config: PredictionConfig):
        super().__init__()
        self.cell_embedding = nn.Embedding(n_cells, config.cell_dim)
        self.slot_embedding = nn.Embedding(n_slots, config.slot_dim)
        self.lstm = nn.LSTM(config.cell_dim + config.slot_dim, config.hidden, batch_first=True)
        self.head = nn.Linear(config.hidden, n_cells)

    def forward(self, days: torch.Tensor) -> torch.Tensor:
        slots = torch.arange(days.shape[1], device=days.device).expand_as(days)
        x = torch.cat([self.cell_embedding(days), self.slot_embedding(slots)], dim=-1)
        h, _ = self.lstm(x)
        return self.head(h)


def train_predictor(days: np.ndarray | torch.Tensor, n_cells: int, config: PredictionConfig) -> NextLocationLSTM:
    """An LSTM trained for ``config.steps`` minibatches on ``days`` (int (n, T)); seeded by ``config.seed``
    (weights and minibatches), so two arms differ only by their days."""
    days = torch.as_tensor(np.asarray(days, dtype=np.int64), device=config.device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = NextLocationLSTM(n_cells, days.shape[1], config)
    model.to(config.device)
    batches = np.random.default_rng([config.seed, 0xB7])
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for _ in range(config.steps):
        batch = days[torch.as_tensor(batches.integers(0, len(days), config.batch_size), device=config.device)]
        logits = model(batch[:, :-1])
        loss = loss_fn(logits.reshape(-1, n_cells), batch[:, 1:].reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model.eval()


def true_ranks(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """int (...,): the rank of the true cell among all cells, 1 = highest logit; a tie counts against the
    truth (rank = 1 + cells scored at least as high, other than the truth)."""
    logits = np.asarray(logits)
    true = np.take_along_axis(logits, np.asarray(targets)[..., None], axis=-1)
    return (logits >= true).sum(axis=-1)


def ranking_metrics(ranks: np.ndarray) -> dict[str, float]:
    """Acc@1, Acc@5 and MRR of the true cells' ranks (1-based)."""
    ranks = np.asarray(ranks, dtype=np.float64).ravel()
    return {"acc1": float(np.mean(ranks <= 1)), "acc5": float(np.mean(ranks <= 5)), "mrr": float(np.mean(1 / ranks))}


@torch.no_grad()
def evaluate_predictor(model: NextLocationLSTM, test_days: np.ndarray, chunk: int = 64) -> dict[str, float]:
    """:func:`ranking_metrics` over every slot transition of the test days."""
    device = next(model.parameters()).device
    test = torch.as_tensor(np.asarray(test_days, dtype=np.int64), device=device)
    ranks = []
    for start in range(0, len(test), chunk):
        block = test[start:start + chunk]
        logits = model(block[:, :-1])
        true = logits.gather(-1, block[:, 1:, None])
        ranks.append((logits >= true).sum(-1).cpu().numpy())       # = true_ranks, on the model's device
    return ranking_metrics(np.concatenate([r.ravel() for r in ranks]))


def persistence_metrics(test_days: np.ndarray) -> dict[str, float]:
    """Acc@1 of the reference "the next cell is the current one" (it ranks no other cell, so it has no Acc@5
    or MRR): the share of test transitions that stay in their cell."""
    test = np.asarray(test_days)
    return {"acc1": float(np.mean(test[:, 1:] == test[:, :-1]))}


def prediction_experiment(real_days: np.ndarray, synthetic_days: np.ndarray, test_days: np.ndarray,
                          n_cells: int, config: PredictionConfig) -> dict:
    """The three arms on the test days, with ratio (b)/(a), gain (c) − (a) and the persistence reference."""
    arms = {"real": real_days, "synthetic": synthetic_days,
            "real+synthetic": np.concatenate([real_days, synthetic_days])}
    scores = {name: evaluate_predictor(train_predictor(days, n_cells, config), test_days)
              for name, days in arms.items()}
    return {"arms": scores,
            "ratio_synthetic_to_real": {m: scores["synthetic"][m] / scores["real"][m] if scores["real"][m] else None
                                        for m in METRICS},
            "gain_real_plus_synthetic": {m: scores["real+synthetic"][m] - scores["real"][m] for m in METRICS},
            "persistence": persistence_metrics(test_days),
            "training_days": {name: int(len(days)) for name, days in arms.items()},
            "test_days": int(len(test_days)), "config": asdict(config)}
