"""`gps-csv` end to end: hand-made CSVs with known days, ISO timestamps, gzip, bbox, metadata, the CLI."""
import argparse
import gzip
import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from pategail.cli.data import register
from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset

DAY0 = 1224720000  # 2008-10-23 00:00 UTC
A, B, C = (39.905, 116.405), (39.915, 116.405), (39.905, 116.415)  # cell ids 0, 2, 1 when all three occur
FAR = (31.235, 121.475)  # Shanghai


def at(day, hh, mm=0):
    return DAY0 + day * 86400 + hh * 3600 + mm * 60


# user "u7": day 0 in A then B; day 1 in C all day; day 2 in B (its last day → test with fraction 0.3)
# user "u3": day 0 in A, a single fix in FAR on day 1 (a sparse day with min 2)
FIXES = [
    ("u7", at(0, 1), A), ("u7", at(0, 2), A), ("u7", at(0, 10), B), ("u7", at(0, 10, 5), B),
    ("u7", at(1, 0), C), ("u7", at(1, 12), C),
    ("u7", at(2, 8), B), ("u7", at(2, 9), B),
    ("u3", at(0, 4), A), ("u3", at(0, 5), A), ("u3", at(0, 20), A),
    ("u3", at(1, 6), FAR),
]


def write_csv(path, fixes=FIXES, header="user_id,timestamp,lat,lon", stamp=lambda t: str(t), gz=False):
    lines = [header] + [f"{u},{stamp(t)},{lat},{lon}" for u, t, (lat, lon) in fixes]
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def arrays(ds):
    return [ds.cells, ds.train_days, ds.train_users, ds.test_days, ds.test_users]


def assert_same(a, b):
    for x, y in zip(arrays(a), arrays(b)):
        np.testing.assert_array_equal(x, y)


def test_known_days_users_split_and_metadata(tmp_path):
    src = write_csv(tmp_path / "fixes.csv")
    s = prepare_dataset("gps-csv", src, tmp_path / "ds", min_observed_slots=2, test_fraction=0.3)
    ds = load_dataset(tmp_path / "ds")
    # cells that occur, in (row, col) order: A, C, B (FAR only on a dropped day)
    np.testing.assert_allclose(ds.cells, [A, C, B])
    a, c, b = 0, 1, 2
    # users renumbered in sorted source-id order: "u3" → 0, "u7" → 1
    np.testing.assert_array_equal(ds.train_users, [0, 1, 1])
    np.testing.assert_array_equal(ds.train_days, [[a] * 48, [a] * 20 + [b] * 28, [c] * 48])
    np.testing.assert_array_equal(ds.test_users, [1])
    np.testing.assert_array_equal(ds.test_days, [[b] * 48])
    assert (s.users, s.train_days, s.test_days, s.cells) == (2, 3, 1, 3)
    assert (s.fixes_read, s.days_seen, s.days_dropped_sparse, s.users_dropped) == (12, 5, 1, 0)
    meta = json.loads((tmp_path / "ds" / "dataset.json").read_text())
    assert meta["source_user_ids"] == ["u3", "u7"]
    assert meta["source"]["format"] == "gps-csv" and meta["source"]["input"] == str(src.resolve())
    assert meta["options"]["min_observed_slots"] == 2 and meta["options"]["test_fraction"] == 0.3
    assert meta["dropped"] == {"fixes_outside_bbox": 0, "days_with_too_few_observed_slots": 1,
                               "users_without_days": 0}
    assert (meta["users"], meta["train_days"], meta["test_days"], meta["n_cells"]) == (2, 3, 1, 3)
    assert "2 users, 3 training days, 1 test days, 3 cells" in str(s)


def test_integer_user_ids_sort_numerically_and_aliases(tmp_path):
    fixes = [(10 if u == "u7" else 9, t, p) for u, t, p in FIXES]
    src = write_csv(tmp_path / "f.csv", fixes, header="UID,ts,lat,lon")
    prepare_dataset("gps-csv", src, tmp_path / "ds", min_observed_slots=2, test_fraction=0.3)
    meta = json.loads((tmp_path / "ds" / "dataset.json").read_text())
    assert meta["source_user_ids"] == [9, 10]


def test_iso_timestamps_and_gzip_and_extra_columns_give_the_same_days(tmp_path):
    kw = dict(min_observed_slots=2, test_fraction=0.3)
    prepare_dataset("gps-csv", write_csv(tmp_path / "unix.csv"), tmp_path / "unix", **kw)
    ref = load_dataset(tmp_path / "unix")

    def z(t):
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def plus8(t):
        return datetime.fromtimestamp(t, timezone(timedelta(hours=8))).isoformat()

    def naive(t):
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")

    for name, stamp in (("z", z), ("plus8", plus8), ("naive", naive)):
        prepare_dataset("gps-csv", write_csv(tmp_path / f"{name}.csv", stamp=stamp), tmp_path / name, **kw)
        assert_same(load_dataset(tmp_path / name), ref)
    src = write_csv(tmp_path / "fixes.csv.gz", gz=True)
    prepare_dataset("gps-csv", src, tmp_path / "gz", **kw)
    assert_same(load_dataset(tmp_path / "gz"), ref)
    extra = [f"alt,{u},x,{lon},{t},{lat}" for u, t, (lat, lon) in FIXES]
    (tmp_path / "extra.csv").write_text("alt_ft,user_id,note,lon,timestamp,lat\n" + "\n".join(extra) + "\n\n")
    prepare_dataset("gps-csv", tmp_path / "extra.csv", tmp_path / "extra", **kw)
    assert_same(load_dataset(tmp_path / "extra"), ref)


def test_utc_offset_and_bbox(tmp_path):
    src = write_csv(tmp_path / "fixes.csv")
    s = prepare_dataset("gps-csv", src, tmp_path / "ds", min_observed_slots=1, test_fraction=0.5,
                        bbox=(39.0, 116.0, 41.0, 117.0))
    assert s.fixes_outside_bbox == 1 and s.cells == 3
    # At UTC-10 u7's fixes fall on local days -1 (A at 15:00, 16:00), 0 (B at 00:00, 00:05; C at 14:00)
    # and 1 (C at 02:00; B at 22:00, 23:00)
    prepare_dataset("gps-csv", src, tmp_path / "ds", min_observed_slots=1, test_fraction=0.3, utc_offset=-10)
    ds = load_dataset(tmp_path / "ds")
    u7 = ds.meta["source_user_ids"].index("u7")
    days = np.concatenate([ds.train_days[ds.train_users == u7], ds.test_days[ds.test_users == u7]])
    a, b, c = (ds.cells.tolist().index(list(p)) for p in (A, B, C))  # FAR (u3) is cell 0 here
    np.testing.assert_array_equal(days, [[a] * 48, [b] * 28 + [c] * 20, [c] * 44 + [b] * 4])


def test_existing_data_set_is_replaced(tmp_path):
    src = write_csv(tmp_path / "fixes.csv")
    prepare_dataset("gps-csv", src, tmp_path / "ds", min_observed_slots=1, test_fraction=0.5)
    prepare_dataset("gps-csv", src, tmp_path / "ds", min_observed_slots=2, test_fraction=0.3)
    assert load_dataset(tmp_path / "ds").meta["options"]["min_observed_slots"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "fixes.csv"]  # no temporary left behind


def test_cli_prepare(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="pategail")
    register(parser.add_subparsers(dest="command", required=True))
    src = write_csv(tmp_path / "fixes.csv")
    args = parser.parse_args(["data", "prepare", "--format", "gps-csv", "--input", str(src), "--out",
                              str(tmp_path / "ds"), "--min-observed-slots", "2", "--test-fraction", "0.3",
                              "--bbox", "39,116,41,117", "--utc-offset", "0"])
    assert args.func(args) == 0
    assert "2 users, 3 training days, 1 test days" in capsys.readouterr().out
    assert args.bbox == (39.0, 116.0, 41.0, 117.0)
    with pytest.raises(SystemExit):
        parser.parse_args(["data", "prepare", "--format", "gps-csv", "--input", "x", "--out", "y", "--bbox", "1,2"])
    with pytest.raises(SystemExit):
        parser.parse_args(["data", "prepare", "--format", "shapefile", "--input", "x", "--out", "y"])
