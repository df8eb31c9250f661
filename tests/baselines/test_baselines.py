import numpy as np

from pategail.baselines.epr import explore_ranks, fit_alpha, fit_epr_baseline, sample_epr, user_homes
from pategail.baselines.markov import fit_markov, sample_markov
from pategail.sdk.epr import CellGeometry, EPREnvironment
from pategail.sdk.features import EXPLORE


def test_markov_reproduces_a_deterministic_chain():
    days = np.array([[0, 1, 2, 0], [0, 1, 2, 0]])
    out = sample_markov(fit_markov(days, 3), 50, np.random.default_rng(0))
    assert (out == days[0]).all()


def test_markov_depends_on_time_of_day_and_falls_back():
    # from cell 0: at slot 0 always to 1, at slot 1 always to 2
    days = np.array([[0, 1, 0, 2], [0, 0, 2, 2]])
    chain = fit_markov(days, 3)
    out = sample_markov(chain, 2000, np.random.default_rng(1))
    assert set(out[:, 1]) == {0, 1}
    assert set(out[out[:, 1] == 0][:, 2]) == {2}                 # (slot 1, cell 0) -> 2 only
    assert set(out[:, 3]) == {2}                                 # (slot 2, 0) -> 2 and (slot 2, 2) -> 2
    # (slot 2, cell 1) never occurs in training: fall back to cell 1's moves at any slot (1 -> 0 only)
    chain = fit_markov(np.array([[1, 1, 0], [0, 1, 1]]), 3)
    # slot 0: 1 -> 1 and 0 -> 1; (slot 1, cell 1) -> 0 and 1, each seen once: drawn half the time each
    out = sample_markov(chain, 4000, np.random.default_rng(4))
    assert set(out[:, 0]) == {0, 1} and (out[:, 1] == 1).all()
    assert set(out[:, 2]) == {0, 1} and abs(np.mean(out[:, 2] == 0) - 0.5) < 0.04
    # a cell without any moves (2) stays put
    rng = np.random.default_rng(5)
    chain = fit_markov(np.array([[1, 0, 0], [2, 2, 2]]), 3)
    object.__setattr__(chain, "first_cells", np.array([1]))
    out = sample_markov(chain, 10, rng)
    assert (out == [1, 0, 0]).all()


def test_markov_frequencies_match_training():
    rng = np.random.default_rng(2)
    days = np.zeros((1000, 2), dtype=int)
    days[:, 1] = rng.random(1000) < 0.3                           # 30% move 0 -> 1 at slot 0
    out = sample_markov(fit_markov(days, 2), 20000, np.random.default_rng(3))
    assert abs(out[:, 1].mean() - days[:, 1].mean()) < 0.015


def test_alpha_is_recovered_from_simulated_explore_moves():
    rng = np.random.default_rng(4)
    cells = np.column_stack([40 + rng.random(400) * 0.5, 116 + rng.random(400) * 0.5])
    geo = CellGeometry.build(cells, candidates=100)
    env = EPREnvironment(geo, alpha=1.3, slots=8, rng=rng)
    n = 3000
    env.reset(np.zeros(n, dtype=int), rng.integers(1, 400, n))
    while not env.done:
        env.step(np.full(n, EXPLORE))
    homes = np.zeros(n, dtype=int)
    ranks, unvisited = explore_ranks(geo, env.days, homes)
    assert len(ranks) == n * 7 - (env.days[:, 1:] == 0).sum()       # every move explores (except into home)
    assert abs(fit_alpha(ranks, unvisited) - 1.3) < 0.05


def test_epr_baseline_fits_and_samples(geolife):
    cells, days = geolife
    days, users = days[:400], np.repeat(np.arange(8), 50)
    geo = CellGeometry.build(cells, candidates=200)
    model = fit_epr_baseline(geo, days, users)
    np.testing.assert_allclose(model.action_probs.sum(-1), 1.0)
    homes = user_homes(days, users)
    assert set(zip(model.init_homes, model.init_first)) == set(zip(homes, days[:, 0]))
    out = sample_epr(model, geo, 300, np.random.default_rng(5))
    assert out.shape == (300, 48) and out.min() >= 0 and out.max() < len(cells)
    # the fitted model moves about as often as the real days do
    real_moves = (days[:, 1:] != days[:, :-1]).mean()
    assert abs((out[:, 1:] != out[:, :-1]).mean() - real_moves) < 0.05
