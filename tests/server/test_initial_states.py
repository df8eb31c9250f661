import numpy as np

from pategail.sdk.store import initial_state_contribution
from pategail.server.initial_states import InitialStates, contribution_length


def test_noise_free_sums_give_the_day_weighted_distribution():
    # device A: 100 days at home 0, half starting at home, half at cell 2; device B: 50 days, home 1, all home
    a = np.zeros((100, 48), dtype=int)
    a[50:, 0] = 2
    b = np.ones((50, 48), dtype=int)
    sums = initial_state_contribution(a, 0, 3) + initial_state_contribution(b, 1, 3)
    assert len(sums) == contribution_length(3)
    states = InitialStates.from_noisy_sums(sums)
    np.testing.assert_allclose(states.home_weights, [1 / 1.5, 0.5 / 1.5, 0])      # weights 1 and 0.5
    np.testing.assert_allclose(states.first_weights, [0, 0, 1])
    assert abs(states.p_same - (0.5 + 0.5) / 1.5) < 1e-12
    homes, firsts = states.sample(30000, np.random.default_rng(0))
    assert abs((homes == 0).mean() - 2 / 3) < 0.01
    assert abs((firsts == homes).mean() - 2 / 3) < 0.01
    assert set(firsts[firsts != homes]) == {2}


def test_negative_noisy_counts_are_clipped():
    sums = np.array([-3.0, 2.0, 1.0, 4.0, -1.0, 0.0, 2.0, 3.0])     # 3 cells
    states = InitialStates.from_noisy_sums(sums)
    np.testing.assert_allclose(states.home_weights, [0, 2 / 3, 1 / 3])
    np.testing.assert_allclose(states.first_weights, [1, 0, 0])
    assert abs(states.p_same - 2 / 3) < 1e-12
