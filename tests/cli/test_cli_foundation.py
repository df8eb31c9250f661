"""The foundation commands end to end through `pategail.cli.main`, on the embedded default data."""
import json
from pathlib import Path

import numpy as np
import pytest

from pategail.cli import main
from pategail.data.dataset import load_dataset
from pategail.metrics import evaluate
from pategail.sdk.synthetic import HEADER, read_synthetic_csv, write_synthetic_csv

DEFAULT = Path(__file__).resolve().parents[2] / "data" / "default"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("default") / "data"
    assert main(["-q", "data", "prepare", "--format", "pategail", "--allow-pickle", "--input", str(DEFAULT),
                 "--out", str(out)]) == 0
    return out


def test_embedded_default_data_prepares(prepared):
    ds = load_dataset(prepared)
    assert (len(ds.users), len(ds.train_days), len(ds.test_days), ds.n_cells) == (10, 644, 400, 4210)


def test_baseline_then_evaluate(prepared, tmp_path, capsys):
    syn = tmp_path / "markov.csv"
    assert main(["-q", "baseline", "--model", "markov", "--data", str(prepared), "--out", str(syn),
                 "--days", "50", "--seed", "3"]) == 0
    days = read_synthetic_csv(syn, n_cells=4210)
    assert days.shape == (50, 48)
    report = tmp_path / "eval.json"
    assert main(["-q", "evaluate", "--data", str(prepared), "--synthetic", str(syn), "--json", str(report),
                 "--no-downstream"]) == 0
    res = json.loads(report.read_text())
    assert set(res) == {"metrics", "metrics_paper", "floor", "floor_paper", "spatial", "floor_spatial"}
    # the report holds exactly what evaluate() gives for those days (both modes, the floor and the spatial
    # metrics, seed 0)
    expected = evaluate(days, load_dataset(prepared))
    assert set(res) == set(expected)
    for key in ("spatial", "floor_spatial"):
        assert set(res[key]) == {"density", "trips", "hotspots"}
        assert 0 <= res[key]["hotspots"] <= 1
    for key in res:
        if key not in ("spatial", "floor_spatial"):
            assert set(res[key]) == {"radius", "dailyloc", "distance", "grank", "irank"}
        assert res[key] == {m: pytest.approx(v, rel=1e-12, abs=1e-15) for m, v in expected[key].items()}
    assert res["metrics"] != res["floor"]                  # 50 Markov days are not the training sample
    out = capsys.readouterr().out
    assert "km mode" in out and "| synthetic |" in out and "Hot-20" in out


def test_baseline_is_seeded(prepared, tmp_path):
    for name in ("a", "b"):
        assert main(["-q", "baseline", "--model", "epr", "--data", str(prepared), "--out",
                     str(tmp_path / f"{name}.csv"), "--days", "20", "--seed", "7"]) == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert main(["-q", "baseline", "--model", "epr", "--data", str(prepared), "--out",
                 str(tmp_path / "c.csv"), "--days", "20", "--seed", "8"]) == 0
    assert (tmp_path / "a.csv").read_bytes() != (tmp_path / "c.csv").read_bytes()


def test_compare_prints_both_modes(prepared, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert main(["-q", "compare", "--data", str(prepared), "--json", str(out)]) == 0
    table = json.loads(out.read_text())
    assert list(table) == ["km", "paper", "spatial"] and list(table["km"]) == ["floor", "markov", "epr"]
    assert list(table["spatial"]) == ["floor", "markov", "epr"]
    assert set(table["spatial"]["epr"]) == {"density", "trips", "hotspots"}
    text = capsys.readouterr().out
    assert "| floor |" in text and "| markov |" in text and "| epr |" in text and "Density" in text


def test_synthetic_csv_round_trip(tmp_path):
    cells = np.array([[40.0, 116.0], [40.01, 116.02], [39.9, 116.5]])
    days = np.random.default_rng(0).integers(0, 3, size=(5, 48))
    agents = np.array([1, 0, 1, 0, 2])
    write_synthetic_csv(tmp_path / "s.csv", days, cells, agents)
    lines = (tmp_path / "s.csv").read_text().splitlines()
    assert lines[0] == HEADER and len(lines) == 1 + 5 * 48
    assert lines[1].startswith("0,0,0,") and lines[48 + 1].startswith("0,1,0,")   # agent 0: days 1 and 3
    back = read_synthetic_csv(tmp_path / "s.csv", n_cells=3)
    np.testing.assert_array_equal(back, days[[1, 3, 0, 2, 4]])


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("agent,day", "agent;day", 1), "row 1: header"),
    (lambda t: "\n".join(t.splitlines()[:30]) + "\n", "not a whole number"),
    (lambda t: t.replace("\n0,0,5,", "\n0,0,x,", 1), "row 7: expected"),
    (lambda t: t.replace("\n0,0,3,1,", "\n0,0,3,5000,", 1), "cell 5000 is not a cell id"),
])
def test_bad_synthetic_file_is_one_line_error(prepared, tmp_path, capsys, edit, message):
    cells = np.array([[40.0, 116.0], [40.01, 116.02], [39.9, 116.5]])
    days = np.ones((2, 48), dtype=int)
    write_synthetic_csv(tmp_path / "s.csv", days, cells)
    bad = tmp_path / "bad.csv"
    bad.write_text(edit((tmp_path / "s.csv").read_text()))
    code = main(["-q", "evaluate", "--data", str(prepared), "--synthetic", str(bad)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and str(bad) in err and message in err


def test_missing_data_set_is_one_line_error(tmp_path, capsys):
    code = main(["-q", "baseline", "--model", "markov", "--data", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "x.csv")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "not a data set directory" in err and "\n" not in err
