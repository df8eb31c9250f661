"""Bad input gives one DataError naming the file and the row or field, and leaves no output directory."""
import gzip

import numpy as np
import pytest

from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset
from pategail.server.errors import DataError

GOOD = ["user_id,timestamp,lat,lon",
        "1,1224730384,39.98,116.31", "1,1224734384,39.98,116.32", "1,1224820000,39.99,116.31",
        "1,1224830000,39.99,116.31", "1,1224900000,39.99,116.33"]


def fails(tmp_path, text, match, *, name="bad.csv", fmt="gps-csv", raw=None, **kw):
    src = tmp_path / name
    if raw is not None:
        src.write_bytes(raw)
    elif text is not None:
        src.write_text(text)
    out = tmp_path / "out"
    kw.setdefault("min_observed_slots", 1)
    with pytest.raises(DataError, match=match) as e:
        prepare_dataset(fmt, src, out, **kw)
    message = str(e.value)
    assert "\n" not in message
    assert not out.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left
    return message


def csv(*rows, header=GOOD[0]):
    return "\n".join([header, *rows]) + "\n"


def test_the_good_file_is_good(tmp_path):
    (tmp_path / "good.csv").write_text(csv(*GOOD[1:]))
    summary = prepare_dataset("gps-csv", tmp_path / "good.csv", tmp_path / "out", min_observed_slots=1)
    # one user, fixes on 2008-10-23 (02:53 and 03:59 UTC), 10-24 (03:46, 06:33) and 10-25 (01:00); the last
    # day is held out; 0.01-degree squares give four cells, stored by their centres
    assert (summary.users, summary.train_days, summary.test_days, summary.cells) == (1, 2, 1, 4)
    ds = load_dataset(tmp_path / "out")
    np.testing.assert_allclose(ds.cells, [[39.985, 116.315], [39.985, 116.325], [39.995, 116.315],
                                          [39.995, 116.335]])
    # day 1: cell 0 from slot 5 (02:30-03:00), cell 1 from slot 7 (03:30-04:00); slots before the first fix
    # take the first cell, later ones keep the last
    assert ds.train_days.tolist() == [[0] * 7 + [1] * 41, [2] * 48]
    assert ds.test_days.tolist() == [[3] * 48]


def test_missing_column(tmp_path):
    m = fails(tmp_path, csv("1,1224730384,39.98", header="user_id,timestamp,lat"),
              r"bad\.csv: row 1: missing column 'lon'")
    assert "user_id, timestamp, lat" in m
    fails(tmp_path, csv(*GOOD[1:], header="user,ts,lat,lon"), r"row 1: missing column 'user_id' \(accepted names: "
                                                                 r"user_id or uid")


def test_duplicate_column(tmp_path):
    fails(tmp_path, csv(header="uid,user_id,ts,lat,lon"), r"bad\.csv: row 1: column 'user_id' appears 2 times")


def test_unparsable_timestamps(tmp_path):
    rows = GOOD[1:3] + ["1,yesterday,39.98,116.31"] + GOOD[3:]
    m = fails(tmp_path, csv(*rows), r"bad\.csv: row 4: field 'timestamp': not a number: 'yesterday'")
    assert "unix seconds, like row 2" in m
    fails(tmp_path, csv("1,2008-10-23T02:53:04Z,39.98,116.31", "1,2008-10-23 25:00,39.98,116.31"),
          r"row 3: field 'timestamp': unparsable timestamp '2008-10-23 25:00' \(the column holds ISO 8601")
    fails(tmp_path, csv("1,2008-10-23T02:53:04Z,39.98,116.31", "1,1224730384,39.98,116.31"),
          r"row 3: field 'timestamp': unparsable timestamp '1224730384'")
    fails(tmp_path, csv("1,inf,39.98,116.31"), r"row 2: field 'timestamp': 'inf' is not a finite number")
    fails(tmp_path, csv("1,,39.98,116.31"), r"row 2: field 'timestamp': unparsable timestamp '' \(expected unix")
    fails(tmp_path, csv("a,1224730384,39.98,116.31", ",1224730384,39.98,116.31"),
          r"row 3: field 'user_id': empty user id")


def test_nan_and_out_of_range_coordinates(tmp_path):
    fails(tmp_path, csv(*GOOD[1:3], "1,1224740384,nan,116.31"), r"bad\.csv: row 4: field 'lat': 'nan' is not a finite")
    fails(tmp_path, csv(*GOOD[1:], "1,1224740384,39.9,200.5"), r"bad\.csv: row 7: field 'lon': 200\.5 is outside "
                                                                 r"-180\.\.180")
    fails(tmp_path, csv("1,1224740384,-91,116"), r"row 2: field 'lat': -91\.0 is outside -90\.\.90")
    fails(tmp_path, csv("1,1224740384,,116"), r"row 2: field 'lat': not a number: ''")


def test_truncated_files(tmp_path):
    text = csv(*GOOD[1:])
    fails(tmp_path, text[:-12], r"bad\.csv: row 6: expected 4 comma-separated fields", name="bad.csv")
    raw = gzip.compress(text.encode())
    m = fails(tmp_path, None, r"bad\.csv\.gz: truncated or corrupt gzip file", name="bad.csv.gz",
              raw=raw[: len(raw) // 2])
    assert str(tmp_path / "bad.csv.gz") in m
    fails(tmp_path, None, r"bad\.csv: row 3: not UTF-8 text", raw=text.encode()[:60] + b"\xff\xfe" + b"\n")


def test_empty_inputs(tmp_path):
    fails(tmp_path, "", r"bad\.csv: row 1: empty file")
    fails(tmp_path, csv(), r"bad\.csv: no fixes")


def test_empty_result_after_filtering(tmp_path):
    m = fails(tmp_path, csv(*GOOD[1:]), r"bad\.csv: no days left after filtering", bbox=(0, 0, 1, 1))
    assert "5 outside --bbox" in m
    fails(tmp_path, csv(*GOOD[1:]), r"with fewer than 40 observed slots", min_observed_slots=40)
    fails(tmp_path, csv(*GOOD[1:2]), r"bad\.csv: no test days")


def test_bad_options_and_formats(tmp_path):
    fails(tmp_path, csv(*GOOD[1:]), r"--format 'shapefile': unknown format", fmt="shapefile")
    fails(tmp_path, csv(*GOOD[1:]), r"--slot-minutes 60: gives 24 slots a day.*48", slot_minutes=60)
    fails(tmp_path, csv(*GOOD[1:]), r"--slot-minutes 7: must be a whole number", slot_minutes=7)
    fails(tmp_path, csv(*GOOD[1:]), r"--bbox 1,0,0,1", bbox=(1, 0, 0, 1))
    fails(tmp_path, csv(*GOOD[1:]), r"--test-fraction 1", test_fraction=1)
    fails(tmp_path, csv(*GOOD[1:]), r"--utc-offset 30", utc_offset=30)
    fails(tmp_path, csv(*GOOD[1:]), r"--cell-deg 0", cell_deg=0)
    fails(tmp_path, csv(*GOOD[1:]), r"--min-observed-slots 0", min_observed_slots=0)


def test_missing_input(tmp_path):
    with pytest.raises(DataError, match=r"nope\.csv: no such file"):
        prepare_dataset("gps-csv", tmp_path / "nope.csv", tmp_path / "out")
    with pytest.raises(DataError, match=r"nope: no such directory"):
        prepare_dataset("geolife-plt", tmp_path / "nope", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_refuses_to_overwrite_other_directories(tmp_path):
    (tmp_path / "good.csv").write_text(csv(*GOOD[1:]))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match="is not a data set directory; refusing to overwrite"):
        prepare_dataset("gps-csv", tmp_path / "good.csv", tmp_path / "out", min_observed_slots=1)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"]


def test_bad_plt_file(tmp_path):
    traj = tmp_path / "geo" / "Data" / "004" / "Trajectory"
    traj.mkdir(parents=True)
    header = "Geolife trajectory\nWGS 84\nAltitude is in Feet\nReserved 3\n0,2,255,My Track,0,0,2,8421376\n0\n"
    (traj / "a.plt").write_text(header + "39.98,116.31,0,492,39744.12,2008-10-23,02:53:04\n"
                                         "39.98,116.31,0,492,39744.12,2008-10-32,02:53:10\n")
    out = tmp_path / "out"
    with pytest.raises(DataError, match=r"a\.plt: row 8: fields 'date','time': unparsable date and time "
                                        r"'2008-10-32' '02:53:10'"):
        prepare_dataset("geolife-plt", tmp_path / "geo", out)
    (traj / "a.plt").write_text(header + "39.98,116.31,0,492\n")
    with pytest.raises(DataError, match=r"a\.plt: row 7: expected 7 comma-separated fields"):
        prepare_dataset("geolife-plt", tmp_path / "geo", out)
    (traj / "a.plt").write_text(header[:30])
    with pytest.raises(DataError, match=r"a\.plt: row 4: truncated header"):
        prepare_dataset("geolife-plt", tmp_path / "geo", out)
    assert not out.exists()


def test_command_line_prints_one_line_and_exits_2(tmp_path, capsys):
    from pategail.cli import main

    (tmp_path / "bad.csv").write_text(csv("1,1224740384,nan,116.31"))
    rc = main(["-q", "data", "prepare", "--format", "gps-csv", "--input", str(tmp_path / "bad.csv"),
               "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and not (tmp_path / "out").exists()
    assert err == f"pategail: error: {tmp_path / 'bad.csv'}: row 2: field 'lat': 'nan' is not a finite number\n"
