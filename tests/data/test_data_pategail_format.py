"""The paper's folder: a round trip, the real folder, pickle refusal and a malicious pickle that is blocked."""
import io
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

from pategail.data.dataset import load_dataset
from pategail.data.pategail_format import RestrictedUnpickler, load_user_days
from pategail.data.prepare import prepare_dataset
from pategail.server.errors import DataError

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PAPER = SHARED / "pategail-geolife"


def make_folder(root: Path, by_user=None, real=None):
    rng = np.random.default_rng(0)
    root.mkdir()
    (root / "gps").write_text("39.90 116.40\n39.91 116.40\n39.90 116.41\n")
    if by_user is None:
        by_user = {0: rng.integers(0, 3, (2, 48)), 1: rng.integers(0, 3, (1, 48)), 2: np.zeros((0, 48), int)}
    np.save(root / "real_data.npy", by_user, allow_pickle=True)
    if real is None:
        real = np.concatenate(list(by_user.values()))
    (root / "real.data").write_text("\n".join(" ".join(map(str, d)) for d in real) + "\n")
    (root / "test.data").write_text(" ".join(["2"] * 48) + "\n" + " ".join(["1"] * 48) + "\n")
    return by_user


def test_round_trip(tmp_path):
    by_user = make_folder(tmp_path / "paper")
    s = prepare_dataset("pategail", tmp_path / "paper", tmp_path / "ds", allow_pickle=True)
    ds = load_dataset(tmp_path / "ds")
    np.testing.assert_allclose(ds.cells, [[39.90, 116.40], [39.91, 116.40], [39.90, 116.41]])
    np.testing.assert_array_equal(ds.train_days, np.concatenate([by_user[0], by_user[1]]))
    np.testing.assert_array_equal(ds.train_users, [0, 0, 1])
    np.testing.assert_array_equal(ds.test_days, [[2] * 48, [1] * 48])
    np.testing.assert_array_equal(ds.test_users, [-1, -1])
    assert ds.meta["source_user_ids"] == [0, 1]  # user 2 has no training days: dropped
    assert ds.meta["dropped"] == {"users_without_training_days": 1}
    assert (s.users, s.train_days, s.test_days, s.cells, s.users_dropped) == (2, 3, 2, 3, 1)


def test_pickle_needs_allow_pickle(tmp_path):
    make_folder(tmp_path / "paper")
    with pytest.raises(DataError, match=r"real_data\.npy: the per-user days are a Python pickle, which can run "
                                        r"code when loaded; pass --allow-pickle"):
        prepare_dataset("pategail", tmp_path / "paper", tmp_path / "ds")
    assert not (tmp_path / "ds").exists()


def test_per_user_days_must_match_real_data(tmp_path):
    by = {0: np.zeros((2, 48), int), 1: np.ones((1, 48), int)}
    real = np.concatenate([by[1], by[0]])  # not in key order
    make_folder(tmp_path / "paper", by, real)
    with pytest.raises(DataError, match=r"real_data\.npy: the per-user days concatenated in key order differ from "
                                        r"real\.data \(first difference at real\.data row 1\)"):
        prepare_dataset("pategail", tmp_path / "paper", tmp_path / "ds", allow_pickle=True)
    assert not (tmp_path / "ds").exists()


def test_bad_cell_ids_and_rows(tmp_path):
    make_folder(tmp_path / "paper")
    (tmp_path / "paper" / "test.data").write_text(" ".join(["0"] * 47 + ["3"]) + "\n")
    with pytest.raises(DataError, match=r"test\.data: row 1: field 48: cell id 3 is not a line of gps \(0\.\.2\)"):
        prepare_dataset("pategail", tmp_path / "paper", tmp_path / "ds", allow_pickle=True)
    (tmp_path / "paper" / "test.data").write_text(" ".join(["0"] * 48) + "\n" + " ".join(["0"] * 40) + "\n")
    with pytest.raises(DataError, match=r"test\.data: row 2: expected 48 cell ids, got 40"):
        prepare_dataset("pategail", tmp_path / "paper", tmp_path / "ds", allow_pickle=True)
    (tmp_path / "paper" / "gps").write_text("39.9 116.4\n95 116.4\n")
    with pytest.raises(DataError, match=r"gps: row 2: coordinate is not a finite lat/lon in range"):
        prepare_dataset("pategail", tmp_path / "paper", tmp_path / "ds", allow_pickle=True)
    assert not (tmp_path / "ds").exists()


class _Evil:
    def __reduce__(self):
        return os.system, (f"touch {_Evil.marker}",)


def _write_object_npy(path: Path, payload: bytes):
    with open(path, "wb") as f:
        npy_format.write_array_header_1_0(f, {"descr": "|O", "fortran_order": False, "shape": ()})
        f.write(payload)


def test_malicious_pickle_cannot_run_code(tmp_path):
    _Evil.marker = tmp_path / "pwned"
    evil = tmp_path / "real_data.npy"
    _write_object_npy(evil, pickle.dumps(np.array({0: _Evil()}, dtype=object), protocol=3))
    with pytest.raises(DataError, match=r"real_data\.npy: refusing to load '(posix|nt)\.system'"):
        load_user_days(evil, allow_pickle=True)
    assert not _Evil.marker.exists()
    for name in ("builtins.eval", "subprocess.Popen", "numpy.load"):
        module, attr = name.rsplit(".", 1)
        with pytest.raises(pickle.UnpicklingError, match=f"refusing to load '{name}'"):
            RestrictedUnpickler(io.BytesIO(f"c{module}\n{attr}\n.".encode())).load()
    # the same file as a plain dict payload, and a truncated one
    _write_object_npy(evil, pickle.dumps({0: _Evil()}, protocol=3))
    with pytest.raises(DataError, match="refusing to load"):
        load_user_days(evil, allow_pickle=True)
    good = pickle.dumps(np.array({0: np.zeros((1, 48), int)}, dtype=object), protocol=3)
    _write_object_npy(evil, good[:-20])
    with pytest.raises(DataError, match=r"real_data\.npy: truncated or corrupt pickle"):
        load_user_days(evil, allow_pickle=True)
    assert not _Evil.marker.exists()


def test_numpy_integer_keys_and_non_integer_values(tmp_path):
    path = tmp_path / "real_data.npy"
    np.save(path, {np.int64(3): np.ones((1, 48), np.int16)}, allow_pickle=True)
    days = load_user_days(path, allow_pickle=True)
    assert list(days) == [3] and days[3].dtype == np.int64
    np.save(path, {0: np.ones((1, 48), float)}, allow_pickle=True)
    with pytest.raises(DataError, match=r"user 0: expected an integer array \(days × 48\), got float64"):
        load_user_days(path, allow_pickle=True)
    np.save(path, np.zeros((2, 48), int))
    with pytest.raises(DataError, match=r"expected a pickled dict"):
        load_user_days(path, allow_pickle=True)


@pytest.mark.skipif(not PAPER.is_dir(), reason=f"shared data not found at {PAPER}")
def test_real_paper_folder(tmp_path):
    s = prepare_dataset("pategail", PAPER, tmp_path / "ds", allow_pickle=True)
    assert (s.users, s.train_days, s.test_days, s.cells) == (83, 5616, 2350, 4210)
    ds = load_dataset(tmp_path / "ds")
    assert ds.meta["source_user_ids"] == list(range(83))
    assert (ds.test_users == -1).all()
    assert sorted(np.bincount(ds.train_users))[::41] == [10, 38, 762]  # min, median, max days per user
