"""Every state feature, the action mask, the labels, the haversine distance and home inference on a tiny
day worked by hand; distances from an independent great-circle formula (the spherical law of cosines)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pategail.sdk.features import (ACTIONS, EXPLORE, HOME, N_ACTIONS, N_PAIR_FEATURES, N_STATE_FEATURES, RETURN,
                                   STATE_FEATURES, STAY, action_mask, infer_home, label_actions, pair_features,
                                   state_features)
from pategail.sdk.geo import EARTH_RADIUS_KM, haversine_km, pairwise_km

R_IUGG = 6371.0088          # mean Earth radius (km), written out: the tests must not borrow the constant
# a 0.01-degree square in Beijing: latitude and longitude both far from 0, and cos(lat) != cos(lon)
SQUARE = np.array([[40.00, 116.30], [40.00, 116.31], [40.01, 116.30], [40.01, 116.31]])
DAY = np.array([[0, 1, 1, 2, 0, 1, 3]])
HOME_CELL = np.array([0])


def great_circle_km(a, b):
    """Spherical law of cosines (independent of the haversine form used by the SDK)."""
    (la1, lo1), (la2, lo2) = np.radians(a), np.radians(b)
    c = math.sin(la1) * math.sin(la2) + math.cos(la1) * math.cos(la2) * math.cos(lo2 - lo1)
    return R_IUGG * math.acos(min(1.0, c))


def d(i, j):
    return 0.0 if i == j else great_circle_km(SQUARE[i], SQUARE[j])


def gyration(points):
    """Radius of gyration from pairwise distances: Rg² = Σ_ij d_ij² / (2 n²) (no projection involved)."""
    n = len(points)
    return math.sqrt(sum(d(i, j) ** 2 for i in points for j in points) / (2 * n * n))


def test_earth_radius_and_haversine_by_hand():
    assert EARTH_RADIUS_KM == R_IUGG
    # 0.01 degree of latitude: R * pi / 180 * 0.01
    assert haversine_km(40.0, 116.3, 40.01, 116.3) == pytest.approx(1.111950802335329, rel=1e-9)
    # along a parallel the distance shrinks with cos(latitude), not cos(longitude)
    assert haversine_km(40.0, 116.30, 40.0, 116.31) == pytest.approx(d(0, 1), rel=1e-6)
    assert haversine_km(40.0, 116.30, 40.01, 116.31) == pytest.approx(d(0, 3), rel=1e-6)
    # a quarter of a great circle and antipodes
    assert haversine_km(0.0, 0.0, 0.0, 90.0) == pytest.approx(R_IUGG * math.pi / 2, rel=1e-12)
    assert haversine_km(10.0, 20.0, -10.0, -160.0) == pytest.approx(R_IUGG * math.pi, rel=1e-7)
    assert haversine_km(-33.9, 151.2, 51.5, -0.1) == pytest.approx(great_circle_km((-33.9, 151.2), (51.5, -0.1)),
                                                                    rel=1e-9)
    m = pairwise_km(SQUARE)
    assert m.shape == (4, 4)
    np.testing.assert_allclose(m, [[d(i, j) for j in range(4)] for i in range(4)], rtol=1e-6, atol=1e-9)


def test_every_state_feature_by_hand():
    f = state_features(DAY, HOME_CELL, SQUARE)[0].astype(np.float64)
    assert f.shape == (7, N_STATE_FEATURES) == (7, len(STATE_FEATURES)) and N_STATE_FEATURES == 11
    t = np.arange(7)
    np.testing.assert_allclose(f[:, 0], np.sin(2 * np.pi * t / 48), atol=1e-7)
    np.testing.assert_allclose(f[:, 1], np.cos(2 * np.pi * t / 48), atol=1e-7)
    assert f[:, 2].tolist() == [1, 0, 0, 0, 1, 0, 0]                                   # at home
    km_home = [0, d(0, 1), d(0, 1), d(0, 2), 0, d(0, 1), d(0, 3)]
    np.testing.assert_allclose(f[:, 3], np.log1p(km_home), rtol=1e-6)
    np.testing.assert_allclose(f[:, 4] * 48, [1, 1, 2, 1, 1, 1, 1], atol=1e-5)       # dwell
    np.testing.assert_allclose(f[:, 5] * 48, [1, 2, 2, 3, 3, 3, 4], atol=1e-5)       # distinct
    np.testing.assert_allclose(f[:, 6] * 48, [0, 0, 0, 1, 2, 1, 2], atol=1e-5)       # returnable
    jumps = [0, d(0, 1), 0, d(1, 2), d(2, 0), d(0, 1), d(1, 3)]
    np.testing.assert_allclose(f[:, 7], np.log1p(jumps), rtol=1e-6)
    rg = [gyration(DAY[0, :k + 1].tolist()) for k in range(7)]
    np.testing.assert_allclose(f[:, 8], np.log1p(rg), rtol=2e-4, atol=1e-6)           # projection: < 0.1%
    np.testing.assert_allclose(f[:, 9], [1, 1 / 2, 1 / 3, 1 / 4, 2 / 5, 2 / 6, 2 / 7], rtol=1e-6)  # home share
    np.testing.assert_allclose(f[:, 10] * 48, [1, 1, 2, 1, 2, 3, 1], atol=1e-5)      # visits here


def test_slot_features_use_the_day_length():
    f = state_features(np.zeros((1, 3), dtype=int), HOME_CELL, SQUARE, day_slots=12)[0]
    np.testing.assert_allclose(f[:, 0], np.sin(2 * np.pi * np.arange(3) / 12), atol=1e-7)
    np.testing.assert_allclose(f[:, 1], np.cos(2 * np.pi * np.arange(3) / 12), atol=1e-7)


def test_gyration_of_an_east_west_pair_at_high_latitude():
    """Two cells 1 degree of longitude apart at 60 N: Rg = half their distance, which carries cos(60°) = 1/2."""
    cells = np.array([[60.0, 10.0], [60.0, 11.0], [60.0, 12.0]])
    f = state_features(np.array([[0, 1, 2]]), np.array([0]), cells)[0]
    half = great_circle_km(cells[0], cells[1]) / 2
    assert half == pytest.approx(R_IUGG * math.pi / 180 / 4, rel=1e-3)
    assert np.expm1(f[1, 8]) == pytest.approx(half, rel=1e-3)
    # three equally spaced points: Rg² = (2/3) s², s the spacing
    assert np.expm1(f[2, 8]) == pytest.approx(math.sqrt(2 / 3) * 2 * half, rel=2e-3)


def test_features_of_several_days_are_independent_rows():
    days = np.array([[0, 1, 1, 2, 0, 1, 3], [3, 3, 2, 0, 1, 1, 3]])
    homes = np.array([0, 3])
    both = state_features(days, homes, SQUARE)
    np.testing.assert_array_equal(both[0], state_features(days[:1], homes[:1], SQUARE)[0])
    np.testing.assert_array_equal(both[1], state_features(days[1:], homes[1:], SQUARE)[0])
    np.testing.assert_allclose(both[1, :, 2], [1, 1, 0, 0, 0, 0, 1])
    np.testing.assert_allclose(both[1, :, 9], np.cumsum([1, 1, 0, 0, 0, 0, 1]) / np.arange(1, 8), rtol=1e-6)


def test_mask_and_labels_by_hand():
    m = action_mask(DAY, HOME_CELL)[0]
    assert m.shape == (7, N_ACTIONS) and m.dtype == bool
    assert m[:, STAY].all() and m[:, EXPLORE].all()
    assert m[:, HOME].tolist() == [False, True, True, True, False, True, True]
    assert m[:, RETURN].tolist() == [False, False, False, True, True, True, True]
    assert label_actions(DAY, HOME_CELL).tolist() == [[EXPLORE, STAY, EXPLORE, HOME, RETURN, EXPLORE]]
    assert label_actions(DAY, HOME_CELL).dtype == np.int8
    assert ACTIONS[STAY] == "stay" and ACTIONS[HOME] == "home" and ACTIONS[RETURN] == "return"
    # staying at home is "stay", not "home"; coming back to a cell seen only at slot 0 is a return
    assert label_actions(np.array([[2, 2, 0, 2]]), np.array([2])).tolist() == [[STAY, EXPLORE, HOME]]
    assert label_actions(np.array([[1, 0, 1, 0]]), np.array([3])).tolist() == [[EXPLORE, RETURN, RETURN]]


def test_a_cells_limit_masks_the_actions_that_would_add_a_cell():
    # DAY's distinct cells so far: 1, 2, 2, 3, 3, 3, 4
    for limit, allowed in [(None, [True] * 7), (3, [True, True, True, False, False, False, False]),
                           (2, [True, False, False, False, False, False, False]), (1, [False] * 7)]:
        m = action_mask(DAY, HOME_CELL, limit)[0]
        assert m[:, EXPLORE].tolist() == allowed
        # nothing else changes
        others = [STAY, HOME, RETURN]
        assert (m[:, others] == action_mask(DAY, HOME_CELL)[0][:, others]).all()
    # a day that starts away: at the limit before it has been home, going home would add a cell too
    away = np.array([[1, 2, 2, 0, 3]])                   # distinct 1, 2, 2, 3, 4; home seen from slot 3
    m = action_mask(away, HOME_CELL, 2)[0]
    assert m[:, EXPLORE].tolist() == [True, False, False, False, False]
    assert m[:, HOME].tolist() == [True, False, False, False, True]
    assert (m[:, [STAY, RETURN]] == action_mask(away, HOME_CELL)[0][:, [STAY, RETURN]]).all()


def test_pair_features_of_the_hand_day():
    acts = label_actions(DAY, HOME_CELL)
    p = pair_features(DAY, HOME_CELL, acts, SQUARE)
    assert p.shape == (1, 6, N_PAIR_FEATURES) and N_PAIR_FEATURES == 15 and p.dtype == np.float32
    np.testing.assert_array_equal(p[0, :, :11], state_features(DAY, HOME_CELL, SQUARE)[0, :6])
    np.testing.assert_array_equal(p[0, :, 11:], np.eye(4)[[3, 0, 3, 1, 2, 3]])


def test_infer_home_is_the_most_visited_night_cell():
    days = np.array([[5] * 4 + [7] * 8 + [9] * 36,
                     [7] * 12 + [9] * 36])
    assert infer_home(days) == 7                       # 7: 20 night slots, 5: 4, 9 only by day
    assert infer_home(days, night_slots=2) == 5 and infer_home(days[1:], night_slots=2) == 7
    # ties go to the smaller id
    assert infer_home(np.array([[8] * 6 + [3] * 6 + [1] * 36])) == 3
    assert infer_home(np.array([[8] * 6 + [3] * 6 + [1] * 36]), night_slots=13) == 3


def test_returnable_when_the_day_starts_away_from_home():
    # day 1 -> 2 -> 0 (home) -> 1: returnable {} | {1} | {1, 2} | {2}; home first seen at slot 2
    f = state_features(np.array([[1, 2, 0, 1]]), HOME_CELL, SQUARE)[0]
    np.testing.assert_allclose(f[:, 6] * 48, [0, 1, 2, 1], atol=1e-5)
    assert action_mask(np.array([[1, 2, 0, 1]]), HOME_CELL)[0, :, RETURN].tolist() == [False, True, True, True]
    np.testing.assert_allclose(f[:, 9], [0, 0, 1 / 3, 1 / 4], rtol=1e-6)


def test_haversine_of_antipodes_stays_finite():
    """For this antipodal pair the haversine term rounds to 1 + 2^-52: it must be clipped, not give NaN."""
    lat, lon = 76.7210822446456, -176.9837206002859
    assert haversine_km(lat, lon, -lat, lon + 180) == pytest.approx(R_IUGG * math.pi, rel=1e-9)
