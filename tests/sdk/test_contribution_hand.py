"""The contribution layouts by hand: the weight, the reward vector and matrix, the granularities' blocks and
the environment vector with its place part — each entry where the module docstring says it is."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.contribution import (DAYS_CAP, EnvironmentLayout, Granularity, contribution_length,
                                       contribution_weight, initial_state_contribution, reward_count,
                                       reward_matrix, reward_vector)


def test_contribution_weight_is_days_over_the_cap_capped_at_one():
    assert DAYS_CAP == 100
    assert contribution_weight(37) == pytest.approx(0.37)
    assert contribution_weight(100) == 1.0 and contribution_weight(731) == 1.0
    assert contribution_weight(0) == 0.0
    assert contribution_weight(15, days_cap=60) == pytest.approx(0.25)


def test_reward_vector_and_matrix():
    assert reward_count(1) == 47 and reward_count(3) == 141
    scores = np.array([[-0.25, 0.5], [1.0, 1.75]], dtype=np.float32)
    vector = reward_vector(scores)
    assert vector.dtype == np.float64 and vector.shape == (4,)
    np.testing.assert_array_equal(vector, [0.0, 0.5, 1.0, 1.0])
    matrix = reward_matrix(np.arange(141), 3)
    assert matrix.shape == (3, 47)
    assert matrix[0, 46] == 46 and matrix[1, 0] == 47 and matrix[2, 46] == 140


@pytest.mark.parametrize("text, block, per_day, name", [
    ("pair", 1, 47, "pair"), ("day", 47, 1, "day"), ("block:8", 8, 6, "block:8"), ("block:47", 47, 1, "day"),
    ("block:46", 46, 2, "block:46"), ("block:1", 1, 47, "pair"), ("block:12", 12, 4, "block:12")])
def test_granularity_parse_blocks_and_name(text, block, per_day, name):
    g = Granularity.parse(text)
    assert g.block == block and g.blocks_per_day == per_day and g.name == name
    assert g.count(3) == 3 * per_day
    assert Granularity.parse(g.name) == g


@pytest.mark.parametrize("text", ["block:0", "block:48", "blocks:8", "block:x", "block:", "block:-2", "days",
                                  "", "Pair"])
def test_granularity_refuses_other_texts(text):
    with pytest.raises(ValueError, match="block|granularity"):
        Granularity.parse(text)


def test_granularity_block_bounds():
    Granularity(1), Granularity(47)
    for bad in (0, 48, -1):
        with pytest.raises(ValueError, match="1..47"):
            Granularity(bad)


def test_block_means_and_expand_by_hand():
    g = Granularity(10)                      # blocks 0-9, 10-19, 20-29, 30-39, 40-46 (7 decisions)
    values = np.arange(94, dtype=np.float64)  # day 0: 0..46, day 1: 47..93
    means = g.block_means(values, 2)
    np.testing.assert_allclose(means, [4.5, 14.5, 24.5, 34.5, 43.0, 51.5, 61.5, 71.5, 81.5, 90.0])
    expanded = g.expand(means, 2)
    assert expanded.shape == (94,)
    assert expanded[0] == expanded[9] == 4.5 and expanded[10] == 14.5 and expanded[46] == 43.0
    assert expanded[47] == 51.5 and expanded[93] == 90.0
    # pair: both are the identity; day: the day's mean for every decision
    np.testing.assert_array_equal(Granularity(1).block_means(values, 2), values)
    np.testing.assert_allclose(Granularity(47).block_means(values, 2), [23.0, 70.0])
    np.testing.assert_array_equal(Granularity(47).expand([1.0, 2.0], 2), np.repeat([1.0, 2.0], 47))


def test_initial_state_contribution_by_hand():
    # 4 days over 5 cells, home 2: first cells 2, 1, 2, 4 -> away firsts 1 and 4, half of the days start at home
    days = np.array([[2] * 48, [1] * 48, [2] * 48, [4] * 48])
    out = initial_state_contribution(days, home=2, n_cells=5)
    w = 0.04
    expected = np.zeros(12)
    expected[2] = w                          # home one-hot
    expected[5 + 1] = expected[5 + 4] = w / 4  # firsts away from home
    expected[10] = w * 2 / 4                 # share of days starting at home
    expected[11] = w                         # the weight
    np.testing.assert_allclose(out, expected)
    no_days = initial_state_contribution(np.zeros((0, 48), dtype=int), home=0, n_cells=3)
    np.testing.assert_array_equal(no_days, np.zeros(8))
    for home in (-1, 5):
        with pytest.raises(ValueError, match="cell id"):
            initial_state_contribution(days, home=home, n_cells=5)


def test_environment_layout_with_the_place_part():
    n, b = 3, 2
    layout = EnvironmentLayout(n, b, place_law=True)
    assert layout.length == 2 * n + 2 + 2 * b + n + 3 == contribution_length(n, b) == 18
    assert EnvironmentLayout(n, b).length == 12
    initial = np.arange(8, dtype=np.float64) / 10
    explore = np.array([0.11, 0.12, 0.13, 0.14])
    places = np.linspace(0.2, 0.7, 6)
    vector = layout.pack(initial, explore, places)
    np.testing.assert_array_equal(vector, np.concatenate([initial, explore, places]))
    parts = layout.unpack(vector)
    np.testing.assert_array_equal(parts.homes, initial[:3])
    np.testing.assert_array_equal(parts.firsts, initial[3:6])
    assert parts.first_at_home == pytest.approx(0.6) and parts.weight == pytest.approx(0.7)
    np.testing.assert_array_equal(parts.explore_observed, [0.11, 0.12])
    np.testing.assert_array_equal(parts.explore_expected, [0.13, 0.14])
    np.testing.assert_array_equal(parts.places, places)
    assert EnvironmentLayout(n, b).unpack(vector[:12]).places is None
    wrong = "^contributions do not have the environment layout$"
    with pytest.raises(ValueError, match=wrong):
        layout.pack(initial, explore)                       # the place part is missing
    with pytest.raises(ValueError, match=wrong):
        EnvironmentLayout(n, b).pack(initial, explore, places)  # a place part the layout has no room for
    with pytest.raises(ValueError, match=wrong):
        layout.pack(initial, explore, places[:-1])
    with pytest.raises(ValueError, match=wrong):
        layout.pack(initial[:-1], explore, places)
    with pytest.raises(ValueError, match=wrong):
        layout.pack(initial, explore[:-1], places)
    with pytest.raises(ValueError, match="layout"):
        layout.unpack(vector[:-1])
    with pytest.raises(ValueError, match="layout"):
        EnvironmentLayout(0, 0).unpack(np.zeros(2))
    # the smallest layout: one cell, one rank bin
    tiny = EnvironmentLayout(1, 1).unpack(np.arange(6.0))
    assert (tiny.homes.tolist(), tiny.firsts.tolist(), tiny.first_at_home, tiny.weight) == ([0.0], [1.0], 2.0, 3.0)
    assert (tiny.explore_observed.tolist(), tiny.explore_expected.tolist()) == ([4.0], [5.0])
