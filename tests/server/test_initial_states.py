import numpy as np
import pytest

from pategail.sdk.contribution import DAYS_CAP, contribution_length, initial_state_contribution
from pategail.sdk.places import place_contribution
from pategail.server.initial_states import FACTOR_RANGE, SIGNAL_GATE, InitialStates

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


def test_region_sums_estimate_homes_firsts_and_visits_coarse_level_first():
    """With the Gaussian release's region sums (4 cells, regions {0, 1} and {2, 3}), hand-valued: the homes
    of region 0 clear 3σ and keep their region's mass, region 1's do not and get the rest evenly."""
    region_of = np.array([0, 0, 1, 1])
    homes, firsts = np.array([10.0, -1.0, 0.5, 0.2]), np.array([0.4, 0.3, 2.0, 9.0])
    at_home, weight = 4.0, 12.0
    visits = np.array([0.1, -0.2, 8.0, 0.6])
    coarse = np.array([[9.0, 0.3], [0.5, 9.5], [0.5, 10.0]])         # homes, firsts, visits by region
    sums = np.concatenate([homes, firsts, [at_home, weight], NO_EXPLORE, visits, [0.0, 0.0, 0.0], coarse.ravel()])
    states = InitialStates.from_noisy_sums(sums, 4, 2, noise_std=1.0, region_of=region_of)
    # homes: region 0 gets 9 (cell 0 clears 3σ and is scaled to 9), the other 3 of Σw = 12 go to region 1
    np.testing.assert_allclose(states.home_weights, np.array([9.0, 0.0, 1.5, 1.5]) / 12)
    # firsts (total Σw − at home = 8): region 1 clears with 9.5 (scaled to 8); cell 3 clears 3σ (9 > 8: scaled)
    np.testing.assert_allclose(states.first_weights, [0, 0, 0, 1])
    # visits (total 12): region 1 keeps 10, region 0 the 2 left evenly; cell 2 clears with 8, cell 3 gets 2
    relevance = np.array([1.0, 1.0, 8.0, 2.0])
    np.testing.assert_allclose(states.places.relevance, relevance + relevance.mean())
    assert abs(states.p_same - at_home / weight) < 1e-12


def _line_of_cells(n):
    """n cells 1 km apart on a meridian, with their nearest-neighbour table (pategail.sdk.epr)."""
    from pategail.sdk.epr import CellGeometry
    cells = np.column_stack([39.9 + np.arange(n) * 0.009, np.full(n, 116.4)])
    return CellGeometry.build(cells, candidates=n - 1)
