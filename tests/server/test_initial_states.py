import numpy as np
import pytest

from pategail.sdk.places import place_contribution
from pategail.sdk.store import DAYS_CAP, initial_state_contribution
from pategail.server.initial_states import FACTOR_RANGE, SIGNAL_GATE, InitialStates, contribution_length

NO_EXPLORE = np.zeros(4)            # two rank bins, no explore move: observed and expected shares all 0


def no_places(n_cells):
    """A place part of zeros: no visits, no return move (relevance falls back to the prior alone)."""
    return np.zeros(n_cells + 3)


def test_noise_free_sums_give_the_day_weighted_distribution():
    # device A: 100 days at home 0, half starting at home, half at cell 2; device B: 50 days, home 1, all home
    a = np.zeros((100, 48), dtype=int)
    a[50:, 0] = 2
    b = np.ones((50, 48), dtype=int)
    sums = np.concatenate([initial_state_contribution(a, 0, 3) + initial_state_contribution(b, 1, 3), NO_EXPLORE,
                           place_contribution(a, 0, 3, DAYS_CAP) + place_contribution(b, 1, 3, DAYS_CAP)])
    assert len(sums) == contribution_length(3, 2)
    states = InitialStates.from_noisy_sums(sums, 3, 2)
    np.testing.assert_allclose(states.home_weights, [1 / 1.5, 0.5 / 1.5, 0])      # weights 1 and 0.5
    np.testing.assert_allclose(states.first_weights, [0, 0, 1])
    assert abs(states.p_same - (0.5 + 0.5) / 1.5) < 1e-12
    np.testing.assert_array_equal(states.explore_factors, [1, 1])                 # nothing learned: power law
    homes, firsts = states.sample(30000, np.random.default_rng(0))
    assert abs((homes == 0).mean() - 2 / 3) < 0.01
    assert abs((firsts == homes).mean() - 2 / 3) < 0.01
    assert set(firsts[firsts != homes]) == {2}
    # visits: A (weight 1) 4,750 of 4,800 slots in cell 0, 50 in cell 2; B (weight 0.5) all in cell 1
    visits = np.array([4750 / 4800, 0.5, 50 / 4800])
    np.testing.assert_allclose(states.places.relevance, visits + visits.mean())   # prior: 1 × the mean cell
    assert states.places.return_last == 0.0                                        # no return move at all


def test_negative_noisy_counts_are_clipped():
    sums = np.array([-3.0, 2.0, 1.0, 4.0, -1.0, 0.0, 2.0, 3.0, *NO_EXPLORE, *no_places(3)])     # 3 cells
    states = InitialStates.from_noisy_sums(sums, 3, 2)
    np.testing.assert_allclose(states.home_weights, [0, 2 / 3, 1 / 3])
    np.testing.assert_allclose(states.first_weights, [1, 0, 0])
    assert abs(states.p_same - 2 / 3) < 1e-12


def test_explore_factors_are_observed_over_expected_shrunk_by_the_noise():
    head = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])                            # 2 cells
    sums = np.concatenate([head, [6.0, 2.0, -1.0], [3.0, 4.0, 2.0], no_places(2)])   # O, A over 3 bins
    exact = InitialStates.from_noisy_sums(sums, 2, 3)
    np.testing.assert_allclose(exact.explore_factors, [2.0, 0.5, FACTOR_RANGE[0]])  # O < 0 clipped to 0
    heavy = sums.copy()
    heavy[5] = SIGNAL_GATE * 2.0                        # released total weight = SIGNAL_GATE x noise std
    noisy = InitialStates.from_noisy_sums(heavy, 2, 3, noise_std=2.0)
    np.testing.assert_allclose(noisy.explore_factors, [8 / 5, 4 / 6, 2 / 4])
    # a total weight of 1 under noise std 2: the ratio would be noise, the power law is kept
    np.testing.assert_array_equal(InitialStates.from_noisy_sums(sums, 2, 3, noise_std=2.0).explore_factors, 1)
    with pytest.raises(ValueError):
        InitialStates.from_noisy_sums(sums, 2, 2)                                # wrong layout


def test_round_trip_through_the_checkpoint_dict():
    sums = np.concatenate([[1.0, 0.0, 0.0, 1.0, 0.5, 1.0], [2.0, 1.0], [1.0, 2.0], [0.7, 0.3, 0.6, 0.2, 1.0]])
    states = InitialStates.from_noisy_sums(sums, 2, 2)
    again = InitialStates.from_dict(states.to_dict())
    np.testing.assert_array_equal(again.places.relevance, states.places.relevance)
    assert again.places.return_last == states.places.return_last == pytest.approx((0.6 - 0.2) / (1.0 - 0.2))
    legacy = {k: v for k, v in states.to_dict().items() if k != "places"}     # a checkpoint from before
    assert InitialStates.from_dict(legacy).places is None
    np.testing.assert_array_equal(again.explore_factors, states.explore_factors)
    np.testing.assert_array_equal(again.home_weights, states.home_weights)
