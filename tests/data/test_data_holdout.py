"""--holdout-users: whole users kept out of training and recorded, so attacks know members from non-members."""
import json
from pathlib import Path

import numpy as np
import pytest

from pategail.cli import main
from pategail.data.dataset import load_dataset
from pategail.data.holdout import choose_holdout_users
from pategail.server.errors import DataError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("fraction, n_users, expected", [(0.0, 10, 0), (0.3, 10, 3), (0.25, 10, 3), (0.01, 10, 1),
                                                          (0.99, 10, 9), (0.5, 2, 1)])
def test_number_of_held_out_users(fraction, n_users, expected):
    held = choose_holdout_users(np.arange(n_users), fraction, np.random.default_rng(0))
    assert len(held) == expected and len(np.unique(held)) == expected


def test_bad_fraction_and_single_user_are_refused():
    with pytest.raises(DataError, match="--holdout-users"):
        choose_holdout_users(np.arange(5), 1.0, np.random.default_rng(0))
    with pytest.raises(DataError, match="at least 2"):
        choose_holdout_users(np.arange(1), 0.5, np.random.default_rng(0))


def test_prepare_moves_whole_users_out_and_records_them(tmp_path, capsys):
    plain, held = tmp_path / "plain", tmp_path / "held"
    args = ["-q", "data", "prepare", "--format", "pategail", "--allow-pickle", "--input", str(ROOT / "data" / "default")]
    assert main(args + ["--out", str(plain)]) == 0
    assert main(args + ["--out", str(held), "--holdout-users", "0.3", "--holdout-seed", "4"]) == 0
    assert "Held out 3 users" in capsys.readouterr().out
    a, b = load_dataset(plain), load_dataset(held)
    assert a.holdout_days is None and len(a.heldout_users) == 0
    meta = json.loads((held / "dataset.json").read_text())
    assert meta["holdout"]["users"] == b.heldout_users.tolist() and len(b.heldout_users) == 3
    assert not np.isin(b.heldout_users, b.train_users).any()          # no held-out user trains
    for user in b.heldout_users:                                      # every day of a held-out user moved
        assert np.array_equal(b.holdout_days[b.holdout_users == user], a.user_days(user))
    assert len(b.train_days) + len(b.holdout_days) == len(a.train_days)
    assert np.array_equal(b.test_days, a.test_days)
    # the draw is seeded
    assert main(args + ["--out", str(tmp_path / "again"), "--holdout-users", "0.3", "--holdout-seed", "4"]) == 0
    assert np.array_equal(load_dataset(tmp_path / "again").heldout_users, b.heldout_users)


def test_a_held_out_user_with_training_days_is_rejected_on_load(tmp_path):
    out = tmp_path / "d"
    assert main(["-q", "data", "prepare", "--format", "pategail", "--allow-pickle", "--input",
                 str(ROOT / "data" / "default"), "--out", str(out), "--holdout-users", "0.2"]) == 0
    users = np.load(out / "holdout_users.npy")
    users[0] = np.load(out / "train_users.npy")[0]
    np.save(out / "holdout_users.npy", users)
    with pytest.raises(DataError, match="held out and also holds training days"):
        load_dataset(out)
