"""The EPR environment's moves on a line of cells, worked by hand."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.day_state import isin_rows
from pategail.sdk.epr import (CellGeometry, EPREnvironment, candidate_count, explore_rank_weights,
                              nearest_cells)
from pategail.sdk.features import EXPLORE, HOME, RETURN, STAY

LINE = np.array([[40.00, 116.30], [40.01, 116.30], [40.02, 116.30], [40.03, 116.30], [40.04, 116.30]])


def test_explore_beyond_the_candidates_goes_to_the_nearest_unvisited_cell():
    geo = CellGeometry.build(LINE, candidates=2)                       # cell 2's candidates: 1 and 3
    env = EPREnvironment(geo, alpha=1.0, slots=6, rng=np.random.default_rng(0))
    env.reset(np.array([0, 0]), np.array([0, 4]))
    for a, b in ((1, 3), (3, 2), (2, 1)):                              # agent 0: 0 1 3 2, agent 1: 4 3 2 1
        env.step(np.array([EXPLORE, EXPLORE]), realised=np.array([a, b]))
    assert env.history().tolist() == [[0, 1, 3, 2], [4, 3, 2, 1]]
    assert env.days.dtype == np.int32 and env.history().dtype == np.int32
    # agent 0: both candidates (1, 3) seen, the nearest unvisited is 4; agent 1 at 1: candidates 0 and 2,
    # 2 seen, so 0 (the only unvisited candidate)
    assert env.step(np.array([EXPLORE, EXPLORE])).tolist() == [4, 0]
    # every cell seen: explore is impossible to satisfy
    with pytest.raises(RuntimeError, match="every cell"):
        env.step(np.array([EXPLORE, STAY]))


def test_home_stay_and_done():
    env = EPREnvironment(CellGeometry.build(LINE, candidates=4), slots=3, rng=np.random.default_rng(0))
    env.reset(np.array([2, 0]), np.array([4, 1]))
    assert env.t == 0 and not env.done and env.mask()[:, HOME].tolist() == [True, True]
    assert env.step(np.array([HOME, STAY])).tolist() == [2, 1]
    assert env.step(np.array([STAY, HOME])).tolist() == [2, 0]
    assert env.done and env.days.tolist() == [[4, 2, 2], [1, 1, 0]]
    with pytest.raises(RuntimeError):
        env.step(np.array([STAY, STAY]))
    with pytest.raises(ValueError):
        env.reset(np.array([1, 2]), np.array([1]))
    with pytest.raises(ValueError):
        EPREnvironment(CellGeometry.build(LINE, candidates=4), alpha=-0.1, rng=np.random.default_rng(0))


def test_return_picks_visited_cells_in_proportion_to_their_visits():
    env = EPREnvironment(CellGeometry.build(LINE, candidates=4), slots=8, rng=np.random.default_rng(3))
    n = 30000
    env.reset(np.zeros(n, dtype=int), np.full(n, 1))
    for cell in (1, 1, 3, 0, 2):                                        # 1 visited 3 times, 3 once, home 0
        env.step(np.full(n, STAY if cell == env.days[0, env.t] else (HOME if cell == 0 else EXPLORE)),
                 realised=np.full(n, cell))
    # at 2: return picks 1 (3 visits) or 3 (1 visit), never home 0 or the current 2
    out = env.step(np.full(n, RETURN))
    assert set(out.tolist()) == {1, 3}
    assert np.mean(out == 1) == pytest.approx(0.75, abs=0.015)


def test_candidate_count_and_rank_weights():
    assert candidate_count(5, 1000) == 4 and candidate_count(5, 2) == 2
    with pytest.raises(ValueError):
        candidate_count(1, 10)
    np.testing.assert_allclose(explore_rank_weights(4, 2.0), [1, 1 / 4, 1 / 9, 1 / 16])
    np.testing.assert_allclose(explore_rank_weights(3, 0.0), [1, 1, 1])
    np.testing.assert_allclose(explore_rank_weights(3, 1.0, np.array([2.0, 3.0, 5.0])), [2, 3 / 2, 5 / 3])
    for bad in ([1.0, 1.0], [1.0, np.inf, 1.0], [1.0, -1.0, 1.0]):
        with pytest.raises(ValueError):
            explore_rank_weights(3, 1.0, np.array(bad))


def test_nearest_cells_break_exact_ties_by_id_and_chunk_alike():
    # a plus sign of cells 1 degree from the centre: mirror-image cells are at exactly equal distances
    grid = np.array([[0.0, 0.0], [0.0, 1.0], [0.0, -1.0], [1.0, 0.0], [-1.0, 0.0]])
    ranks = nearest_cells(grid, np.arange(5), 4)
    assert ranks.tolist() == [[1, 2, 3, 4], [0, 3, 4, 2], [0, 3, 4, 1], [0, 1, 2, 4], [0, 1, 2, 3]]
    assert ranks.dtype == np.int32
    np.testing.assert_array_equal(nearest_cells(grid, np.arange(5), 4, chunk=2), ranks)
    assert nearest_cells(grid, np.array([4, 0]), 2).tolist() == [[0, 1], [1, 2]]


def test_isin_rows_with_padding():
    values = np.array([[0, 1, 2], [3, 4, 5]])
    sets = np.array([[2, -1, -1], [5, 3, -1]])
    assert isin_rows(values, sets).tolist() == [[False, False, True], [True, False, True]]
    assert isin_rows(values, np.empty((2, 0), dtype=int)).tolist() == [[False] * 3] * 2
    assert isin_rows(np.empty((0, 3), dtype=int), sets).shape == (0, 3)
