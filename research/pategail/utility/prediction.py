"""Mobility prediction (the paper's first application): does a next-location predictor learn as much from
synthetic days as from real ones?

Three arms differ only in their training days: (a) the real training days, (b) the synthetic days, (c) both.
Each is evaluated on the real test days: at every slot t = 0..T-2 the predictor reads l_0..l_t and ranks all
cells for l_{t+1}; Acc@1 and Acc@5 are the shares of slots whose true next cell is ranked first / in the top
five, MRR the mean of 1 / rank (ties count against the truth).

Two predictors are trained on every arm, and one reference needs no training:

- **stay**: "the next cell is the current one" (Acc@1 only: it ranks no other cell);
- **markov**: a first-order chain over cells, P(c' | c) = (N(c→c') + β·P₀(c' | c)) / (N(c) + β), which backs
  off to P₀(c' | c) = s·[c' = c] + (1 − s)·pop(c'), the arm's stay rate s and its share of arrivals per cell;
  an unseen current cell is ranked by P₀ alone (stay first, then the popular cells);
- **recurrent**: a GRU over cell and slot embeddings whose output mixes "stay" with a softmax over the cells
  the arm's days visit, P(c') = g·[c' = c_t] + (1 − g)·softmax(W h_t)(c'), g = σ(w·h_t); a cell the arm never
  visits is read as one "unfamiliar cell", which it learns from a share of input cells masked so in training
  (test days of other users, or synthetic days that miss places, meet such cells). Trained with Adam on
  minibatches of days, early-stopped on the cross-entropy of a seeded validation share of the arm's own days
  (the best epoch's weights are kept), so the real test days choose nothing.

A predictor that loses to "stay" on real days cannot tell good synthetic days from bad ones; the recurrent
model is judged against both references on every report. Reported per predictor: the three arms, the ratio
(b)/(a) and the gain (c) − (a).
"""
from __future__ import annotations

import copy
import logging
from dataclasses import asdict

import numpy as np
import torch
from torch import nn

from pategail.utility.config import PredictionConfig

log = logging.getLogger(__name__)

ARMS = ("real", "synthetic", "real+synthetic")
METRICS = ("acc1", "acc5", "mrr")
PREDICTORS = ("recurrent", "markov")


def true_ranks(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """int (...,): the rank of the true cell among all cells, 1 = highest score; a tie counts against the
    truth (rank = 1 + cells scored at least as high, other than the truth)."""
    logits = np.asarray(logits)
    true = np.take_along_axis(logits, np.asarray(targets)[..., None], axis=-1)
    return (logits >= true).sum(axis=-1)


def ranking_metrics(ranks: np.ndarray) -> dict[str, float]:
    """Acc@1, Acc@5 and MRR of the true cells' ranks (1-based)."""
    ranks = np.asarray(ranks, dtype=np.float64).ravel()
    return {"acc1": float(np.mean(ranks <= 1)), "acc5": float(np.mean(ranks <= 5)), "mrr": float(np.mean(1 / ranks))}


def persistence_metrics(test_days: np.ndarray) -> dict[str, float]:
    """Acc@1 of the reference "the next cell is the current one" (it ranks no other cell, so it has no Acc@5
    or MRR): the share of test transitions that stay in their cell."""
    test = np.asarray(test_days)
    return {"acc1": float(np.mean(test[:, 1:] == test[:, :-1]))}


# ---------------------------------------------------------------------------------------------- Markov chain

class MarkovPredictor:
    """The first-order chain with its back-off (module docstring), fitted on ``days`` (int (n, T))."""

    def __init__(self, days: np.ndarray, n_cells: int, prior: float):
        days = np.asarray(days, dtype=np.int64)
        src, dst = days[:, :-1].ravel(), days[:, 1:].ravel()
        self.n_cells, self.prior = n_cells, float(prior)
        self.stay = float(np.mean(src == dst)) if src.size else 0.0
        self.popularity = np.bincount(dst, minlength=n_cells) / max(1, dst.size)
        keys, counts = np.unique(src * n_cells + dst, return_counts=True)       # sorted by source cell
        self._out = np.bincount(src, minlength=n_cells)
        starts = np.searchsorted(keys // n_cells, np.arange(n_cells + 1))
        self._next = {int(c): (keys[starts[c]:starts[c + 1]] % n_cells, counts[starts[c]:starts[c + 1]])
                      for c in np.flatnonzero(self._out)}

    def scores(self, current: int) -> np.ndarray:
        """float (n_cells,): P(next | current)."""
        p = (1 - self.stay) * self.popularity
        p[current] += self.stay
        n = self._out[current]
        if n == 0:
            return p
        p = self.prior * p
        cells, counts = self._next[current]
        p[cells] += counts
        return p / (n + self.prior)

    def evaluate(self, test_days: np.ndarray) -> dict[str, float]:
        """:func:`ranking_metrics` over every slot transition of the test days."""
        test = np.asarray(test_days, dtype=np.int64)
        src, dst = test[:, :-1].ravel(), test[:, 1:].ravel()
        ranks = np.empty(src.size, dtype=np.int64)
        for cell in np.unique(src):                          # one score vector per distinct current cell
            at = np.flatnonzero(src == cell)
            s = self.scores(int(cell))
            ranks[at] = (s[None, :] >= s[dst[at]][:, None]).sum(axis=1)
        return ranking_metrics(ranks)


# ---------------------------------------------------------------------------------------------- recurrent model

class NextLocationRNN(nn.Module):
    """forward(days int64 (B, T)) → (log P over the vocabulary (B, T, V), log g (B, T), log(1 − g) (B, T)):
    row t predicts the cell of slot t + 1 from slots 0..t. ``vocabulary``: the cells the arm's days visit
    (sorted), which the softmax covers; any other cell is read as one "unfamiliar cell" embedding, which training
    teaches by masking a share of the input cells (``config.unfamiliar_share``)."""

    vocabulary: torch.Tensor
    known: torch.Tensor
    epochs: int
    """Set by :func:`train_predictor`: epochs trained, minibatches in all, best validation cross-entropy."""
    steps: int
    validation_nll: float | None

    def __init__(self, n_cells: int, n_slots: int, vocabulary: np.ndarray, config: PredictionConfig):
        super().__init__()
        vocabulary = np.asarray(vocabulary, dtype=np.int64)
        known = np.zeros(n_cells, dtype=bool)
        known[vocabulary] = True
        self.register_buffer("vocabulary", torch.as_tensor(vocabulary))
        self.register_buffer("known", torch.as_tensor(known))
        self.n_cells = n_cells
        self.cell_embedding = nn.Embedding(n_cells + 1, config.cell_dim)       # row n_cells: unfamiliar
        self.slot_embedding = nn.Embedding(n_slots, config.slot_dim)
        self.rnn = nn.GRU(config.cell_dim + config.slot_dim, config.hidden, batch_first=True)
        self.head = nn.Linear(config.hidden, len(vocabulary))
        self.gate = nn.Linear(config.hidden, 1)

    def forward(self, days: torch.Tensor, mask: torch.Tensor | None = None):
        """mask: bool (B, T), True where the input cell is to be read as unfamiliar (training only)."""
        unfamiliar = ~self.known[days] if mask is None else ~self.known[days] | mask
        cells = torch.where(unfamiliar, torch.full_like(days, self.n_cells), days)
        slots = torch.arange(days.shape[1], device=days.device).expand_as(days)
        h, _ = self.rnn(torch.cat([self.cell_embedding(cells), self.slot_embedding(slots)], dim=-1))
        g = self.gate(h).squeeze(-1)
        return torch.log_softmax(self.head(h), dim=-1), nn.functional.logsigmoid(g), nn.functional.logsigmoid(-g)

    def full_scores(self, days: torch.Tensor) -> torch.Tensor:
        """float (B, T, n_cells): P(next cell) over every cell (0 outside the vocabulary, but for the stay)."""
        log_p, log_g, log_not_g = self(days)
        full = torch.zeros(*days.shape, self.n_cells, device=days.device)
        full[..., self.vocabulary] = torch.exp(log_not_g[..., None] + log_p)
        return full.scatter_add(-1, days[..., None], torch.exp(log_g)[..., None])


def _position(model: NextLocationRNN, cells: torch.Tensor) -> torch.Tensor:
    """Index of each cell in the model's vocabulary, -1 outside it."""
    pos = torch.searchsorted(model.vocabulary, cells.contiguous()).clamp(max=len(model.vocabulary) - 1)
    return torch.where(model.vocabulary[pos] == cells, pos, torch.full_like(pos, -1))


def sequence_nll(model: NextLocationRNN, days: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean −log P(l_{t+1} | l_0..l_t) over the transitions of ``days`` (a target outside the vocabulary that is
    not a stay has probability 0; it gets a floor of e^-30 so that validation stays finite). mask: bool
    (B, T − 1), input cells to read as unfamiliar."""
    log_p, log_g, log_not_g = model(days[:, :-1], mask)
    target = days[:, 1:]
    pos = _position(model, target)
    gen = log_not_g + log_p.gather(-1, pos.clamp(min=0)[..., None]).squeeze(-1)
    gen = torch.where(pos >= 0, gen, torch.full_like(gen, -30.0))
    stay = torch.where(target == days[:, :-1], log_g, torch.full_like(log_g, -30.0))
    return -torch.logaddexp(gen, stay).mean()


def split_validation(n: int, share: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, validation rows) of n days: round(share × n) drawn at random for validation, at least one
    when n >= 2 and at most n − 1."""
    n_val = min(n - 1, max(1, int(round(share * n)))) if n >= 2 else 0
    order = rng.permutation(n)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def train_predictor(days: np.ndarray | torch.Tensor, n_cells: int, config: PredictionConfig) -> NextLocationRNN:
    """The recurrent model trained on ``days`` (int (n, T)): epochs of shuffled minibatches on the fit share,
    the validation cross-entropy after each, stopped after ``config.patience`` epochs without improvement or
    ``config.steps`` minibatches in all; returns the best epoch's model. Seeded by ``config.seed`` (weights,
    split, minibatches), so two arms differ only by their days."""
    days_np = np.asarray(days, dtype=np.int64)
    rng = np.random.default_rng([config.seed, 0xB7])
    fit_rows, val_rows = split_validation(len(days_np), config.validation_share, rng)
    fit = torch.as_tensor(days_np[fit_rows], device=config.device)
    val = torch.as_tensor(days_np[val_rows], device=config.device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = NextLocationRNN(n_cells, days_np.shape[1], np.unique(days_np), config)
    model.to(config.device)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    best, best_state, waited, steps, epoch = np.inf, copy.deepcopy(model.state_dict()), 0, 0, 0
    while steps < config.steps and waited < config.patience:
        model.train()
        order = rng.permutation(len(fit))
        for start in range(0, len(order), config.batch_size):
            if steps >= config.steps:
                break
            batch = fit[torch.as_tensor(order[start:start + config.batch_size])]
            mask = torch.as_tensor(rng.random((len(batch), batch.shape[1] - 1)) < config.unfamiliar_share,
                                   device=config.device)
            loss = sequence_nll(model, batch, mask)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            steps += 1
        epoch += 1
        score = _validation_nll(model, val) if len(val) else -epoch     # no validation days: keep the last
        if score < best - 1e-4:
            best, best_state, waited = score, copy.deepcopy(model.state_dict()), 0
        else:
            waited += 1
        log.debug("prediction epoch %d: validation NLL %.4f (best %.4f)", epoch, score, best)
    model.load_state_dict(best_state)
    model.epochs, model.steps, model.validation_nll = epoch, steps, float(best) if len(val) else None
    return model.eval()


@torch.no_grad()
def _validation_nll(model: NextLocationRNN, val: torch.Tensor, chunk: int = 256) -> float:
    model.eval()
    total = sum(float(sequence_nll(model, val[s:s + chunk])) * len(val[s:s + chunk])
                for s in range(0, len(val), chunk))
    return total / len(val)


@torch.no_grad()
def evaluate_predictor(model: NextLocationRNN, test_days: np.ndarray, chunk: int = 64) -> dict[str, float]:
    """:func:`ranking_metrics` over every slot transition of the test days."""
    device = model.vocabulary.device
    test = torch.as_tensor(np.asarray(test_days, dtype=np.int64), device=device)
    ranks = []
    for start in range(0, len(test), chunk):
        block = test[start:start + chunk]
        scores = model.full_scores(block[:, :-1])
        true = scores.gather(-1, block[:, 1:, None])
        ranks.append((scores >= true).sum(-1).cpu().numpy())       # = true_ranks, on the model's device
    return ranking_metrics(np.concatenate([r.ravel() for r in ranks]))


def _summary(scores: dict) -> dict:
    """The arms with the ratio (b)/(a) and the gain (c) − (a) of each metric."""
    return {"arms": scores,
            "ratio_synthetic_to_real": {m: scores["synthetic"][m] / scores["real"][m] if scores["real"][m] else None
                                        for m in METRICS},
            "gain_real_plus_synthetic": {m: scores["real+synthetic"][m] - scores["real"][m] for m in METRICS}}


def prediction_experiment(real_days: np.ndarray, synthetic_days: np.ndarray, test_days: np.ndarray,
                          n_cells: int, config: PredictionConfig) -> dict:
    """Both predictors on the three arms, on the test days, with "stay" for reference. The recurrent model's
    arms are also the top-level ``arms`` / ``ratio_synthetic_to_real`` / ``gain_real_plus_synthetic``."""
    arms = {"real": real_days, "synthetic": synthetic_days,
            "real+synthetic": np.concatenate([real_days, synthetic_days])}
    recurrent, markov, training = {}, {}, {}
    for name, days in arms.items():
        model = train_predictor(days, n_cells, config)
        recurrent[name] = evaluate_predictor(model, test_days)
        training[name] = {"epochs": model.epochs, "steps": model.steps, "validation_nll": model.validation_nll}
        markov[name] = MarkovPredictor(days, n_cells, config.markov_prior).evaluate(test_days)
        log.info("prediction, %s days: recurrent Acc@1 %.3f after %d epochs, markov %.3f", name,
                 recurrent[name]["acc1"], model.epochs, markov[name]["acc1"])
    return {**_summary(recurrent), "markov": _summary(markov), "recurrent_training": training,
            "persistence": persistence_metrics(test_days),
            "training_days": {name: int(len(days)) for name, days in arms.items()},
            "test_days": int(len(test_days)), "config": asdict(config)}
