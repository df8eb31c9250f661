"""Next-location prediction: ranks and metrics by hand, seeded training, and an LSTM that learns a rule."""
import numpy as np
import pytest
import torch

from pategail.utility.config import PredictionConfig
from pategail.utility.prediction import (evaluate_predictor, persistence_metrics, prediction_experiment,
                                         ranking_metrics, train_predictor, true_ranks)


def test_ranks_and_metrics_by_hand():
    logits = np.array([[0.1, 0.9, 0.5, 0.0],        # truth 1 -> rank 1
                       [0.1, 0.9, 0.5, 0.0],        # truth 0 -> rank 3
                       [0.5, 0.5, 0.2, 0.0]])       # truth 0, tied with cell 1 -> rank 2 (ties count against)
    ranks = true_ranks(logits, np.array([1, 0, 0]))
    assert ranks.tolist() == [1, 3, 2]
    m = ranking_metrics(np.array([1, 3, 2, 7]))
    assert m["acc1"] == 0.25 and m["acc5"] == 0.75 and m["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 2 + 1 / 7) / 4)


def test_persistence_by_hand():
    assert persistence_metrics(np.array([[1, 1, 2], [3, 3, 3]])) == {"acc1": 0.75}


def _cycle_days(n, n_cells=6, T=12, offset=0):
    """Days that step through cells (start + t) mod n_cells: the next cell is always current + 1."""
    starts = (np.arange(n) + offset) % n_cells
    return (starts[:, None] + np.arange(T)[None, :]) % n_cells


def test_same_seed_same_model_and_a_learnable_rule_is_learnt():
    config = PredictionConfig(steps=60, batch_size=16, cell_dim=8, slot_dim=4, hidden=16, learning_rate=0.03)
    a = train_predictor(_cycle_days(30), 6, config)
    b = train_predictor(_cycle_days(30), 6, config)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert evaluate_predictor(a, _cycle_days(10, offset=3))["acc1"] > 0.9


def test_experiment_reports_arms_ratio_and_gain():
    config = PredictionConfig(steps=3, batch_size=4, cell_dim=4, slot_dim=2, hidden=4)
    rng = np.random.default_rng(0)
    real, synthetic, test = (rng.integers(0, 5, (n, 8)) for n in (6, 4, 5))
    res = prediction_experiment(real, synthetic, test, 5, config)
    assert res["training_days"] == {"real": 6, "synthetic": 4, "real+synthetic": 10}
    for m in ("acc1", "acc5", "mrr"):
        assert res["ratio_synthetic_to_real"][m] == pytest.approx(res["arms"]["synthetic"][m] / res["arms"]["real"][m])
        assert res["gain_real_plus_synthetic"][m] == pytest.approx(res["arms"]["real+synthetic"][m]
                                                                  - res["arms"]["real"][m])
