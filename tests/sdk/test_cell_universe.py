"""The device's part of a released cell table: a visited vector bounded to m squares, and its days moved onto
the released table by nearest released square."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.cell_universe import release_mapping, remap_days, visited_vector
from pategail.sdk.geo import haversine_km

# five squares on one parallel, 0.01° apart, and one far to the north
CELLS = np.array([[40.0, 116.00], [40.0, 116.01], [40.0, 116.02], [40.0, 116.03], [40.0, 116.04], [40.5, 116.0]])


def test_the_vector_marks_the_most_visited_squares_up_to_m():
    days = np.array([[3] * 30 + [1] * 10 + [4] * 8, [3] * 20 + [0] * 8 + [1] * 20])
    # slots: 3 → 50, 1 → 30, 4 → 8, 0 → 8 (a tie: the lower id wins)
    np.testing.assert_array_equal(visited_vector(days, 6, 2), [0, 1, 0, 1, 0, 0])
    np.testing.assert_array_equal(visited_vector(days, 6, 3), [1, 1, 0, 1, 0, 0])
    np.testing.assert_array_equal(visited_vector(days, 6, 10), [1, 1, 0, 1, 1, 0])   # never an unvisited square
    assert not visited_vector(np.zeros((0, 48), dtype=np.int32), 6, 3).any()


@pytest.mark.parametrize("m", [1, 4, 32])
def test_a_device_moves_the_sum_by_at_most_root_m(m):
    rng = np.random.default_rng(m)
    for _ in range(50):
        days = rng.integers(0, 500, size=(rng.integers(1, 30), 48))
        v = visited_vector(days, 500, m)
        assert set(np.unique(v)) <= {0.0, 1.0} and v.sum() == min(m, len(np.unique(days)))
        assert np.linalg.norm(v) <= np.sqrt(m) + 1e-12


def test_cell_ids_outside_the_universe_are_refused():
    with pytest.raises(ValueError, match=r"\[0, 6\)"):
        visited_vector(np.array([[6] * 48]), 6, 3)
    with pytest.raises(ValueError, match="at least 1"):
        visited_vector(np.array([[1] * 48]), 6, 0)


def test_unreleased_squares_go_to_the_nearest_released_one():
    released = np.array([1, 4])
    mapping = release_mapping(CELLS, released)
    np.testing.assert_array_equal(mapping, [0, 0, 0, 1, 1, 0])      # 2 is nearer 1 (1.1 km) than 4 (2.3 km)
    # every square goes to a released one no farther than any other released one
    km = haversine_km(CELLS[:, :1], CELLS[:, 1:], CELLS[released, 0][None], CELLS[released, 1][None])
    np.testing.assert_allclose(km[np.arange(6), mapping], km.min(axis=1))
    days = np.array([[2] * 24 + [3] * 24, [4] * 48])
    np.testing.assert_array_equal(remap_days(days, mapping), [[0] * 24 + [1] * 24, [1] * 48])


def test_a_mapping_needs_a_released_table():
    with pytest.raises(ValueError, match="no square"):
        release_mapping(CELLS, np.array([], dtype=np.int64))
    with pytest.raises(ValueError, match="sorted"):
        release_mapping(CELLS, np.array([4, 1]))
