"""Spatial metrics against hand-computed values on a 2-day toy set.

Four cells in three squares of the 0.05° trip grid: cells 0 and 1 in square (0, 0), cell 3 in (0, 1),
cell 2 in (1, 0); squares are numbered in (row, col) order, so cells map to squares 0, 0, 2, 1.
"""
import math

import numpy as np
import pytest

from pategail.metrics import spatial

CELLS = np.array([[0.015, 0.015], [0.025, 0.015], [0.065, 0.015], [0.015, 0.075]])
GEN = np.array([[0, 1, 2, 2], [3, 3, 0, 1]])       # squares [0 0 2 2], [1 1 0 0]
REAL = np.array([[0, 0, 2, 0], [1, 1, 1, 1]])      # squares [0 0 2 0], [0 0 0 0]


def test_coarse_squares_and_flows_by_hand():
    assert spatial.coarse_squares(CELLS).tolist() == [0, 0, 2, 1]
    assert spatial.od_flows(GEN, spatial.coarse_squares(CELLS)).tolist() == [[0, 2], [1, 0]]
    assert spatial.od_flows(REAL, spatial.coarse_squares(CELLS)).tolist() == [[0, 2], [2, 0]]
    # a centre exactly on an edge (0.05 is not exact in binary) stays in the square it names
    assert spatial.coarse_squares(np.array([[0.05, 0.0], [0.0499, 0.0]])).tolist() == [1, 0]


def test_density_by_hand():
    # generated visits 2, 2, 2, 2 → p = 1/4 each; real 3, 4, 1, 0 → q = 3/8, 1/2, 1/8, 0; m = (p + q) / 2
    kl_p = 0.25 * (math.log(4 / 5) + math.log(4 / 6) + math.log(4 / 3) + math.log(2))
    kl_q = 3 / 8 * math.log(6 / 5) + 1 / 2 * math.log(8 / 6) + 1 / 8 * math.log(2 / 3)
    assert spatial.density(GEN, REAL, CELLS) == pytest.approx(0.5 * kl_p + 0.5 * kl_q, abs=1e-9)


def test_trips_by_hand():
    # flows over the pairs (0→2), (1→0), (2→0): generated 1, 1, 0, real 1, 0, 1 → JSD = ½ ln 2
    assert spatial.trips(GEN, REAL, CELLS) == pytest.approx(0.5 * math.log(2), abs=1e-9)
    # on a grid fine enough that every cell is its own square, each cell change is a trip
    fine = spatial.trips(GEN, REAL, CELLS, cell_deg=0.001)
    # generated 0→1, 1→2, 3→0, 0→1; real 0→2, 2→0: no pair in common → the maximum, ln 2
    assert fine == pytest.approx(math.log(2), abs=1e-9)


def test_trips_without_any_move_is_zero_and_one_sided_is_maximal():
    still = np.array([[0, 0, 1, 1]])               # squares 0, 0, 0, 0: no trip
    assert spatial.trips(still, still, CELLS) == 0.0
    assert spatial.trips(still, REAL, CELLS) == pytest.approx(math.log(2), abs=1e-9)


def test_hotspots_by_hand():
    # generated counts 2, 2, 2, 2 (ties → smaller id first): top-1 [0], top-2 [0, 1]; real top-1 [1], top-2 [1, 0]
    assert spatial.top_cells(GEN, 4, 2).tolist() == [0, 1]
    assert spatial.top_cells(REAL, 4, 2).tolist() == [1, 0]
    assert spatial.hotspots(GEN, REAL, CELLS, k=1) == 0.0
    assert spatial.hotspots(GEN, REAL, CELLS, k=2) == 1.0
    # real days visit 3 cells only: the top-4 of real is [1, 0, 2], all of them hot in the generated days
    assert spatial.top_cells(REAL, 4, 4).tolist() == [1, 0, 2]
    assert spatial.hotspots(GEN, REAL, CELLS, k=4) == 1.0
    assert spatial.hotspots(np.array([[3, 3, 3, 3]]), REAL, CELLS, k=4) == 0.0
    assert spatial.hotspots(np.array([[3, 3, 3, 2]]), REAL, CELLS, k=4) == pytest.approx(1 / 3)


def test_identical_sets_score_perfectly_and_divergences_are_symmetric():
    res = spatial.spatial_metrics(REAL, REAL, CELLS)
    assert res["density"] == pytest.approx(0, abs=1e-12) and res["trips"] == pytest.approx(0, abs=1e-12)
    assert res["hotspots"] == 1.0
    for name in ("density", "trips"):
        assert spatial.METRICS[name](GEN, REAL, CELLS) == pytest.approx(spatial.METRICS[name](REAL, GEN, CELLS))


def test_density_sees_place_where_grank_does_not():
    """The issue's point: the same visit shares on other cells score zero on G-rank but not on Density."""
    from pategail.metrics import km
    shifted = np.array([[3, 3, 3, 3], [2, 2, 2, 0]])   # REAL's visit counts 4, 3, 1 on cells 3, 2, 0
    assert km.grank(shifted, REAL) == pytest.approx(0, abs=1e-12)
    assert spatial.density(shifted, REAL, CELLS) > 0.3
    assert spatial.hotspots(shifted, REAL, CELLS, k=1) == 0.0


def test_format_spatial_table():
    rows = {"ours": {"density": 0.1, "trips": 0.25, "hotspots": 0.75}, "partial": {"density": 0.5}}
    md = spatial.format_spatial_table(rows).splitlines()
    assert md[0] == "| spatial | Density | Trips | Hot-20 ↑ |"
    assert md[2] == "| ours | 0.1000 | 0.2500 | 0.7500 |"
    assert md[3] == "| partial | 0.5000 | - | - |"
