"""--max-fixes-per-day: a dense GPS data set thinned into a sparse, check-in-like one."""
import numpy as np
import pytest

from pategail.data.dataset import load_dataset
from pategail.data.gridding import thin_fixes
from pategail.data.prepare import prepare_dataset
from pategail.server.errors import DataError
from pategail.metrics.guard import distinct_cells

DAY0 = 1224720000  # 2008-10-23 00:00 UTC


def test_at_most_n_fixes_per_user_and_local_day_drawn_at_random():
    rng = np.random.default_rng(0)
    user = np.repeat([0, 1], 500)
    time = DAY0 + rng.uniform(0, 3 * 86400, 1000)            # three UTC days per user
    keep = thin_fixes(user, time, 4, utc_offset=8, rng=np.random.default_rng(1))
    local_day = np.floor((time + 8 * 3600) / 86400)
    for u in (0, 1):
        for d in np.unique(local_day[user == u]):
            in_day = (user == u) & (local_day == d)
            assert keep[in_day].sum() == min(4, in_day.sum())
    again = thin_fixes(user, time, 4, utc_offset=8, rng=np.random.default_rng(1))
    other = thin_fixes(user, time, 4, utc_offset=8, rng=np.random.default_rng(2))
    np.testing.assert_array_equal(keep, again)
    assert not np.array_equal(keep, other)
    with pytest.raises(DataError, match="--max-fixes-per-day 0"):
        thin_fixes(user, time, 0, utc_offset=0, rng=np.random.default_rng(0))


def test_prepared_sparse_days_visit_at_most_n_cells(tmp_path):
    rng = np.random.default_rng(3)
    rows = ["user_id,timestamp,lat,lon"]
    for u in range(3):
        for day in range(4):
            for minute in range(0, 1440, 10):                # a fix every 10 minutes, moving around
                lat, lon = 39.9 + rng.integers(0, 20) * 0.01, 116.4 + rng.integers(0, 20) * 0.01
                rows.append(f"u{u},{DAY0 + day * 86400 + minute * 60},{lat + 0.005},{lon + 0.005}")
    src = tmp_path / "fixes.csv"
    src.write_text("\n".join(rows) + "\n")
    dense = prepare_dataset("gps-csv", src, tmp_path / "dense")
    sparse = prepare_dataset("gps-csv", src, tmp_path / "sparse", max_fixes_per_day=3, min_observed_slots=1,
                             thin_seed=5)
    assert sparse.fixes_thinned == sparse.fixes_read - 3 * 3 * 4 and "thinned away" in str(sparse)
    ds = load_dataset(tmp_path / "sparse")
    days = np.concatenate([ds.train_days, ds.test_days])
    assert len(days) == 12 and distinct_cells(days).max() <= 3
    assert distinct_cells(load_dataset(tmp_path / "dense").train_days).min() > 3
    assert ds.meta["options"]["max_fixes_per_day"] == 3 and ds.meta["options"]["thin_seed"] == 5
    assert dense.fixes_thinned == 0
