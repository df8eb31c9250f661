"""Next-location prediction: ranks and metrics by hand, the Markov chain and its back-off by hand, seeded
training with early stopping, and a recurrent model that beats "stay" and Markov on real days."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from pategail.data.prepare import prepare_dataset
from pategail.data.dataset import load_dataset
from pategail.utility.config import PredictionConfig
from pategail.utility.prediction import (MarkovPredictor, _validation_nll, evaluate_predictor, persistence_metrics,
                                         prediction_experiment, ranking_metrics, split_validation, train_predictor,
                                         true_ranks)

ROOT = Path(__file__).resolve().parents[2]


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


def test_markov_and_its_back_off_by_hand():
    # transitions 0->0, 0->1, 0->1, 1->1: stay rate 1/2, arrivals per cell (1/4, 3/4, 0)
    chain = MarkovPredictor(np.array([[0, 0, 1], [0, 1, 1]]), 3, prior=1.0)
    # P0(.|0) = 1/2 [stay] + 1/2 (1/4, 3/4, 0) = (5/8, 3/8, 0); P(.|0) = ((1, 2, 0) + 1 * P0) / (3 + 1)
    assert chain.scores(0) == pytest.approx([(1 + 5 / 8) / 4, (2 + 3 / 8) / 4, 0])
    # a cell never left in training: the back-off alone, stay first, then the popular cells
    assert chain.scores(2) == pytest.approx([1 / 8, 3 / 8, 1 / 2])
    # P(.|1) = ((0, 1, 0) + (1/8, 7/8, 0)) / 2 (one transition 1->1)
    assert chain.scores(1) == pytest.approx([1 / 16, 15 / 16, 0])
    # test transitions 2->2 (rank 1), 2->0 (rank 3: 1/8 is the lowest), 1->0 (rank 2), 0->1 (rank 1)
    m = chain.evaluate(np.array([[2, 2, 0], [1, 0, 1]]))
    assert m == pytest.approx({"acc1": 2 / 4, "acc5": 1.0, "mrr": (1 + 1 / 3 + 1 / 2 + 1) / 4})


def _cycle_days(n, n_cells=6, T=12, offset=0):
    """Days that step through cells (start + t) mod n_cells: the next cell is always current + 1."""
    starts = (np.arange(n) + offset) % n_cells
    return (starts[:, None] + np.arange(T)[None, :]) % n_cells


SMALL = PredictionConfig(steps=400, batch_size=8, cell_dim=8, slot_dim=4, hidden=16, learning_rate=0.03, patience=3)


def test_same_seed_same_model_and_a_learnable_rule_is_learnt():
    a = train_predictor(_cycle_days(40), 6, SMALL)
    b = train_predictor(_cycle_days(40), 6, SMALL)
    c = train_predictor(_cycle_days(40), 6, replace(SMALL, seed=1))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))
    assert evaluate_predictor(a, _cycle_days(10, offset=3))["acc1"] > 0.9


def test_early_stopping_keeps_the_best_epoch():
    rng = np.random.default_rng(5)
    days = rng.integers(0, 8, (60, 10))            # nothing to learn beyond the cells' shares: it overfits soon
    config = replace(SMALL, steps=10_000, patience=2)
    model = train_predictor(days, 8, config)
    assert model.steps < config.steps              # stopped by the validation days, not the budget
    _, val_rows = split_validation(len(days), config.validation_share, np.random.default_rng([config.seed, 0xB7]))
    assert len(val_rows) == 6
    assert _validation_nll(model, torch.as_tensor(days[val_rows])) == pytest.approx(model.validation_nll)


def test_experiment_reports_both_predictors_ratio_and_gain():
    config = replace(SMALL, steps=3)
    rng = np.random.default_rng(0)
    real, synthetic, test = (rng.integers(0, 5, (n, 8)) for n in (6, 4, 5))
    res = prediction_experiment(real, synthetic, test, 5, config)
    assert res["training_days"] == {"real": 6, "synthetic": 4, "real+synthetic": 10}
    for scores in (res, res["markov"]):
        for m in ("acc1", "acc5", "mrr"):
            assert scores["ratio_synthetic_to_real"][m] == pytest.approx(
                scores["arms"]["synthetic"][m] / scores["arms"]["real"][m])
            assert scores["gain_real_plus_synthetic"][m] == pytest.approx(
                scores["arms"]["real+synthetic"][m] - scores["arms"]["real"][m])
    assert res["markov"]["arms"]["real"] == MarkovPredictor(real, 5, config.markov_prior).evaluate(test)
    assert res["recurrent_training"]["real"]["steps"] <= 3


@pytest.fixture(scope="module")
def real_slice(tmp_path_factory):
    """The embedded GeoLife users' days, each user's last fifth of days kept for testing (a user's later days,
    as in the paper's split)."""
    out = tmp_path_factory.mktemp("d") / "data"
    prepare_dataset("pategail", ROOT / "data" / "default", out, allow_pickle=True)
    ds = load_dataset(out)
    train, test = [], []
    for user in np.unique(ds.train_users):
        days = ds.train_days[ds.train_users == user]
        k = max(1, len(days) // 5)
        train.append(days[:-k])
        test.append(days[-k:])
    return np.concatenate(train), np.concatenate(test), ds.n_cells


def test_recurrent_model_beats_stay_and_markov_on_real_days(real_slice):
    train, test, n_cells = real_slice
    config = PredictionConfig()
    model = train_predictor(train, n_cells, config)
    gru = evaluate_predictor(model, test)
    markov = MarkovPredictor(train, n_cells, config.markov_prior).evaluate(test)
    stay = persistence_metrics(test)["acc1"]
    assert markov["acc1"] > stay + 0.03                 # the chain itself is a real baseline here
    assert gru["acc1"] > markov["acc1"] + 0.005
    assert gru["acc5"] > markov["acc5"] and gru["mrr"] > markov["mrr"]
    assert model.steps < config.steps                   # early stopping ended it
