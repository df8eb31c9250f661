"""The trajectory store: validated, persisted atomically, home inferred; the initial-state contribution."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.server.errors import DataError
from pategail.sdk.contribution import initial_state_contribution
from pategail.sdk.store import TrajectoryStore


def _days(rng, n, n_cells=50):
    return rng.integers(0, n_cells, (n, 48)).astype(np.int32)


def test_round_trip_and_restart(tmp_path):
    rng = np.random.default_rng(0)
    a, b = _days(rng, 3), _days(rng, 2)
    store = TrajectoryStore(tmp_path / "dev", n_cells=50)
    assert len(store) == 0 and store.days().shape == (0, 48) and store.max_cell() == -1
    assert store.add_days(a) == 3
    assert store.add_days(b.astype(np.int64)) == 5
    again = TrajectoryStore(tmp_path / "dev")
    np.testing.assert_array_equal(again.days(), np.concatenate([a, b]))
    assert again.days().dtype == np.int32
    assert not list((tmp_path / "dev").glob(".*tmp"))         # no temporary file left behind


def test_days_returns_a_copy(tmp_path):
    store = TrajectoryStore(tmp_path)
    store.add_days(np.zeros((1, 48), dtype=np.int32))
    store.days()[0, 0] = 7
    assert store.days()[0, 0] == 0


@pytest.mark.parametrize("bad, match", [
    (np.zeros((2, 47), dtype=np.int32), "shape"),
    (np.zeros(48, dtype=np.int32), "shape"),
    (np.full((1, 48), -1), "out of range"),
    (np.full((1, 48), 50), "out of range"),
    (np.full((1, 48), 0.5), "integers"),
    (np.full((1, 48), np.nan), "integers"),
])
def test_invalid_days_are_refused_and_nothing_changes(tmp_path, bad, match):
    store = TrajectoryStore(tmp_path, n_cells=50)
    store.add_days(np.ones((2, 48), dtype=np.int32))
    before = (tmp_path / "days.npy").read_bytes()
    with pytest.raises(DataError, match=match):
        store.add_days(bad)
    assert len(store) == 2 and (tmp_path / "days.npy").read_bytes() == before


def test_error_names_row_and_slot_but_not_the_cell(tmp_path):
    days = np.zeros((3, 48), dtype=np.int32)
    days[2, 5] = 4321
    with pytest.raises(DataError) as err:
        TrajectoryStore(tmp_path, n_cells=100).add_days(days)
    assert "row 2, slot 5" in str(err.value) and "4321" not in str(err.value)


def test_unreadable_store_is_a_data_error(tmp_path):
    (tmp_path / "days.npy").write_bytes(b"not numpy")
    with pytest.raises(DataError, match="unreadable"):
        TrajectoryStore(tmp_path)


def test_home_is_the_most_visited_night_cell_and_follows_new_days(tmp_path):
    store = TrajectoryStore(tmp_path)
    with pytest.raises(DataError, match="no days"):
        store.home
    day = np.full((1, 48), 9, dtype=np.int32)
    day[0, :12] = 4
    store.add_days(day)
    assert store.home == 4
    night = np.full((2, 48), 9, dtype=np.int32)
    store.add_days(night)                                  # 24 night slots at 9 now beat 12 at 4
    assert store.home == 9


def test_initial_state_contribution_hand_computed():
    # 4 cells, home 2; first cells: 2 (home), 0, 0, 3
    days = np.array([[2] * 48, [0] * 48, [0] * 48, [3] * 48])
    out = initial_state_contribution(days, home=2, n_cells=4)
    w = 4 / 100                                      # 4 days of the DAYS_CAP = 100 that give full weight
    expected = w * np.array([0, 0, 1, 0,  0.5, 0, 0, 0.25,  0.25, 1])
    np.testing.assert_allclose(out, expected)
    assert out.shape == (10,) and out.min() >= 0 and out.max() <= 1
    assert out[4:8].sum() + out[8] == pytest.approx(out[9])
    full = initial_state_contribution(np.repeat(days, 50, axis=0), home=2, n_cells=4)   # 200 days: w = 1
    np.testing.assert_allclose(full, expected / w)


def test_initial_state_contribution_refuses_a_home_outside_the_table():
    with pytest.raises(ValueError):
        initial_state_contribution(np.zeros((1, 48), dtype=int), home=4, n_cells=4)
