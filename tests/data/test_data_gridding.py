"""Fixes → days: hand-computed oracles for the grid, the modal cell, gap filling, sparse days and the split."""
import numpy as np
import pytest

from pategail.data.gridding import fill_forward, fixes_to_days, grid_keys, key_centres, slots_per_day, split_last_days
from pategail.server.errors import DataError

DAY0 = 1224720000  # 2008-10-23 00:00 UTC
A, B, C = (39.905, 116.405), (39.915, 116.405), (39.905, 116.415)  # grid squares (3990,11640) (3991,11640) (3990,11641)


def at(hh, mm):
    return DAY0 + hh * 3600 + mm * 60


def run(fixes, **kw):
    user = np.array([f[0] for f in fixes], np.int64)
    time = np.array([f[1] for f in fixes], float)
    lat = np.array([f[2][0] for f in fixes])
    lon = np.array([f[2][1] for f in fixes])
    return fixes_to_days(user, time, lat, lon, **kw)


def test_modal_cell_tie_break_and_gap_fill():
    g = run([
        (0, at(1, 5), B), (0, at(1, 10), A), (0, at(1, 20), A),  # slot 2: A has 2 fixes of 3 → A
        (0, at(2, 40), B),                                       # slot 5: B
        (0, at(5, 2), A), (0, at(5, 1), C),                      # slot 10: a tie; C's fix is earlier → C
    ], min_observed_slots=1)
    # cells are numbered in (row, col) order: A=0, C=1, B=2; centres are the squares' centres
    np.testing.assert_allclose(g.cells, [A, C, B])
    expected = [0] * 5 + [2] * 5 + [1] * 38  # slots 0-1 back-filled from slot 2, then forward fill
    np.testing.assert_array_equal(g.days, [expected])
    np.testing.assert_array_equal(g.observed, [3])
    assert g.days_seen == 1 and g.days_dropped_sparse == 0


def test_exact_tie_goes_to_the_smaller_cell():
    g = run([(0, at(3, 0), B), (0, at(3, 0), A)], min_observed_slots=1)
    np.testing.assert_allclose(g.cells, [A])


def test_sparse_days_are_dropped():
    fixes = [(0, at(1, 0), A), (0, at(2, 0), A), (0, at(3, 0), B),      # day 0: 3 observed slots
             (0, at(24 + 1, 0), B), (0, at(24 + 1, 10), A)]            # day 1: 1 observed slot
    g = run(fixes, min_observed_slots=2)
    assert g.days_seen == 2 and g.days_dropped_sparse == 1
    assert len(g.days) == 1 and g.day[0] == DAY0 // 86400
    g = run(fixes, min_observed_slots=1)
    np.testing.assert_array_equal(g.day, [DAY0 // 86400, DAY0 // 86400 + 1])


def test_utc_offset_moves_a_fix_across_midnight():
    fix = [(0, at(23, 40), A)]
    g = run(fix, min_observed_slots=1)
    assert g.day[0] == DAY0 // 86400
    g = run(fix, min_observed_slots=1, utc_offset=1.0)  # 00:40 local on the next day, slot 1
    assert g.day[0] == DAY0 // 86400 + 1
    g = run(fix + [(0, at(23, 50), B)], min_observed_slots=2, utc_offset=-23.0)  # 00:40 and 00:50: slot 1
    assert g.days_dropped_sparse == 1


def test_days_are_sorted_by_user_then_day():
    g = run([(5, at(48, 0), A), (2, at(0, 0), B), (5, at(0, 0), C)], min_observed_slots=1)
    np.testing.assert_array_equal(g.user, [2, 5, 5])
    np.testing.assert_array_equal(g.day - DAY0 // 86400, [0, 0, 2])


def test_other_slot_lengths_are_gridded():
    g = run([(0, at(1, 30), A), (0, at(23, 59), B)], slot_minutes=60, min_observed_slots=1)
    assert g.days.shape == (1, 24)
    np.testing.assert_array_equal(g.days[0], [0] * 23 + [1])
    assert slots_per_day(1) == 1440
    for bad in (0, 7, -30, 1441):
        with pytest.raises(DataError, match="--slot-minutes"):
            slots_per_day(bad)


def test_grid_keys_sort_like_row_col_and_survive_float_noise():
    lat = np.array([39.99, -0.005, 0.0, 89.999])
    lon = np.array([116.31, -179.995, 0.0, 179.999])
    keys = grid_keys(lat, lon, 0.01)
    centres = key_centres(keys, 0.01)
    np.testing.assert_allclose(centres, [[39.995, 116.315], [-0.005, -179.995], [0.005, 0.005],
                                         [89.995, 179.995]], atol=1e-9)
    assert np.argsort(keys).tolist() == [1, 2, 0, 3]


def test_fill_forward():
    days = np.array([[-1, 3, -1, -1, 5, -1], [7, -1, -1, -1, -1, -1]])
    np.testing.assert_array_equal(fill_forward(days), [[3, 3, 3, 3, 5, 5], [7] * 6])


def test_split_last_days_rounding():
    sizes = {0: 1, 1: 2, 2: 3, 3: 5, 4: 8, 5: 13}
    user = np.repeat(list(sizes), list(sizes.values()))
    test = split_last_days(user, 0.2)
    n_test = [int(test[user == u].sum()) for u in sizes]
    assert n_test == [0, 0, 1, 1, 2, 3]
    for u in sizes:  # the test days are each user's last ones
        t = test[user == u]
        assert not np.any(t[:-1] & ~t[1:])
    assert split_last_days(np.array([0, 0]), 0.5).tolist() == [False, True]
    assert split_last_days(np.array([0]), 0.9).tolist() == [False]
