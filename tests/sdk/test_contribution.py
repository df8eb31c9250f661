"""The contribution vectors' one layout: what the device packs is what the coordinator unpacks."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.contribution import (EnvironmentLayout, contribution_weight, initial_state_contribution,
                                       reward_count, reward_matrix, reward_vector)


def test_environment_vector_round_trip():
    days = np.array([[2] * 48, [1] + [2] * 47, [3] * 48])
    layout = EnvironmentLayout(n_cells=4, n_bins=2)
    explore = np.array([0.01, 0.02, 0.015, 0.015])
    vector = layout.pack(initial_state_contribution(days, home=2, n_cells=4), explore)
    assert len(vector) == layout.length == 2 * 4 + 2 + 2 * 2
    parts = layout.unpack(vector)
    w = contribution_weight(3)
    np.testing.assert_allclose(parts.homes, [0, 0, w, 0])
    np.testing.assert_allclose(parts.firsts, [0, w / 3, 0, w / 3])
    assert parts.first_at_home == pytest.approx(w / 3) and parts.weight == pytest.approx(w)
    np.testing.assert_array_equal(parts.explore_observed, explore[:2])
    np.testing.assert_array_equal(parts.explore_expected, explore[2:])
    with pytest.raises(ValueError):
        layout.unpack(vector[:-1])
    with pytest.raises(ValueError):
        layout.pack(vector[:10], explore[:3])


def test_reward_vector_layout():
    scores = np.linspace(-0.5, 1.5, reward_count(2))
    vector = reward_vector(scores)
    assert vector.shape == (94,) and vector.min() == 0.0 and vector.max() == 1.0
    matrix = reward_matrix(np.arange(94), 2)
    assert matrix.shape == (2, 47) and matrix[1, 0] == 47           # query j = day j // 47, slot j % 47
