"""GeoLife: `geolife-plt` gives the same days as `gps-csv` on the same fixes; a slice of the real CSV."""
import csv
import gzip
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"
PLT = SHARED / "geolife-plt-sample"
GPS = SHARED / "geolife-gps"


def plt_fixes_as_csv(root: Path, out: Path) -> int:
    """Written independently of the reader: the csv module and datetime on every .plt line."""
    rows = []
    for plt in sorted(root.glob("Data/*/Trajectory/*.plt")):
        user = plt.parent.parent.name
        with open(plt, newline="") as f:
            for line in list(csv.reader(f))[6:]:
                t = datetime.strptime(f"{line[5]} {line[6]}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
                rows.append(f"{user},{t.isoformat()},{line[0]},{line[1]}")
    out.write_text("uid,ts,lat,lon\n" + "\n".join(rows[::-1]) + "\n")  # reversed: order must not matter
    return len(rows)


@pytest.mark.skipif(not PLT.is_dir(), reason=f"shared data not found at {PLT}")
@pytest.mark.parametrize("utc_offset", [0, 8])
def test_plt_and_csv_give_the_same_days(tmp_path, utc_offset):
    n = plt_fixes_as_csv(PLT, tmp_path / "fixes.csv")
    kw = dict(min_observed_slots=1, test_fraction=0.5, utc_offset=utc_offset)
    a = prepare_dataset("geolife-plt", PLT, tmp_path / "plt", **kw)
    b = prepare_dataset("gps-csv", tmp_path / "fixes.csv", tmp_path / "csv", **kw)
    assert a.fixes_read == b.fixes_read == n
    assert a.users == 2 and a.train_days + a.test_days >= 3
    pa, pb = load_dataset(tmp_path / "plt"), load_dataset(tmp_path / "csv")
    for name in ("cells", "train_days", "train_users", "test_days", "test_users"):
        np.testing.assert_array_equal(getattr(pa, name), getattr(pb, name), err_msg=name)
    assert pa.meta["source_user_ids"] == pb.meta["source_user_ids"] == [0, 1]


@pytest.mark.skipif(not GPS.is_dir(), reason=f"shared data not found at {GPS}")
def test_two_users_of_the_real_csv(tmp_path):
    """Users 0 and 1 of geolife_1min.csv.gz; geolife_user_stats.csv counts their local (UTC+8) days.
    Fast: the file is sorted by user, so reading stops at user 2."""
    with gzip.open(GPS / "geolife_1min.csv.gz", "rt") as f:
        lines = [next(f)]
        for line in f:
            if not line.startswith(("0,", "1,")):
                break
            lines.append(line)
    (tmp_path / "two.csv").write_text("".join(lines))
    s = prepare_dataset("gps-csv", tmp_path / "two.csv", tmp_path / "ds", utc_offset=8)
    stats = {r["uid"]: int(r["days_with_data"]) for r in csv.DictReader(open(GPS / "geolife_user_stats.csv"))}
    assert s.fixes_read == len(lines) - 1
    assert s.days_seen == stats["0"] + stats["1"]
    assert s.users == 2 and s.days_dropped_sparse > 0
    assert s.train_days + s.test_days == s.days_seen - s.days_dropped_sparse
    ds = load_dataset(tmp_path / "ds")
    assert ds.meta["source_user_ids"] == [0, 1]
    in_beijing = (np.abs(ds.cells - [39.9, 116.4]) < 1).all(axis=1)
    assert in_beijing.mean() > 0.5 and not in_beijing.all()  # both users also travelled (Shanghai)
