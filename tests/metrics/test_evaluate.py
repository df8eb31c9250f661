"""evaluate(): input checks, the result's shape, the floor's sampling, the table, and the floor on real data."""
from pathlib import Path

import numpy as np
import pytest

from pategail.data.dataset import Dataset
from pategail.server.errors import DataError
from pategail.metrics import km, paper
from pategail.metrics import (METRIC_NAMES, evaluate, evaluate_days, evaluate_days_paper, floor, format_table)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "pategail-geolife"


def make_dataset(train_days, test_days, cells):
    train_days, test_days = np.asarray(train_days, np.int32), np.asarray(test_days, np.int32)
    return Dataset(cells=np.asarray(cells, float), train_days=train_days,
                   train_users=np.zeros(len(train_days), np.int32), test_days=test_days,
                   test_users=np.full(len(test_days), -1, np.int32))


@pytest.fixture()
def toy():
    rng = np.random.default_rng(1)
    cells = np.column_stack([39.9 + 0.01 * np.arange(6), 116.3 + 0.02 * np.arange(6)])
    return make_dataset(rng.integers(0, 6, (5, 48)), rng.integers(0, 6, (3, 48)), cells)


@pytest.mark.parametrize("bad, why", [
    (np.zeros(48, int), "2-D"),
    (np.zeros((2, 47), int), "47 slots"),
    (np.zeros((2, 48)), "integers"),
    (np.full((2, 48), 6), "cell id 6 outside 0..5"),
    (np.full((2, 48), -1), "outside"),
    (np.zeros((0, 48), int), "non-empty"),
    ([[0] * 48, [0] * 47], "2-D"),
])
def test_bad_generated_days_raise_data_error(toy, bad, why):
    with pytest.raises(DataError, match=why) as e:
        evaluate(bad, toy)
    assert "\n" not in str(e.value)


def test_result_has_exactly_the_documented_keys(toy):
    result = evaluate(toy.test_days[:2], toy)
    assert set(result) == {"metrics", "metrics_paper", "floor", "floor_paper", "spatial", "floor_spatial", "guard"}
    for key in ("spatial", "floor_spatial"):
        assert tuple(result.pop(key)) == ("density", "trips", "hotspots")
    assert set(result.pop("guard")) == {"threshold", "share", "limit", "quantile", "flagged"}
    for part in result.values():
        assert tuple(part) == METRIC_NAMES
        assert all(isinstance(v, float) and 0 <= v <= np.log(2) + 1e-9 for v in part.values())
    gen, test, cells = toy.test_days[:2], toy.test_days, toy.cells
    # each part is the mode's metric of the right pair of day sets (the modes are checked by hand elsewhere)
    assert result["metrics"] == {m: pytest.approx(km.METRICS[m](gen, test, cells), abs=1e-15) for m in METRIC_NAMES}
    assert result["metrics_paper"] == {m: pytest.approx(paper.METRICS[m](gen, test, cells), abs=1e-15)
                                       for m in METRIC_NAMES}
    train = toy.train_days[np.random.default_rng(0).choice(5, size=3, replace=False)]
    assert result["floor"] == {m: pytest.approx(km.METRICS[m](train, test, cells), abs=1e-15) for m in METRIC_NAMES}
    assert result["floor_paper"] == {m: pytest.approx(paper.METRICS[m](train, test, cells), abs=1e-15)
                                     for m in METRIC_NAMES}
    # two of the five test days' DailyLoc against all of them, by hand: one bin per distinct-cell count
    counts = [len(set(d)) for d in test]
    p = np.bincount([counts[0], counts[1]], minlength=49)[1:49].astype(float)
    q = np.bincount(counts, minlength=49)[1:49].astype(float)
    p, q = (p + 1e-12) / (p + 1e-12).sum(), (q + 1e-12) / (q + 1e-12).sum()
    m = (p + q) / 2
    assert result["metrics"]["dailyloc"] == pytest.approx(
        0.5 * np.sum(p * np.log(p / m)) + 0.5 * np.sum(q * np.log(q / m)), abs=1e-12)
    # the paper mode's histogram bound is passed through to Distance and Radius
    tight = evaluate(gen, toy, upper=0.001)
    assert tight["metrics_paper"]["distance"] == pytest.approx(paper.distance(gen, test, cells, upper=0.001))
    assert tight["metrics_paper"]["distance"] != pytest.approx(result["metrics_paper"]["distance"])
    assert tight["floor_paper"]["distance"] == pytest.approx(paper.distance(train, test, cells, upper=0.001))
    assert tight["floor_paper"]["distance"] != pytest.approx(result["floor_paper"]["distance"])


def test_test_days_against_themselves_score_zero(toy):
    result = evaluate(toy.test_days, toy)
    assert all(v == pytest.approx(0, abs=1e-12) for v in result["metrics"].values())
    assert all(v == pytest.approx(0, abs=1e-12) for v in result["metrics_paper"].values())


def test_floor_compares_a_seeded_sample_of_training_days_with_all_test_days(toy):
    pick = np.random.default_rng(7).choice(5, size=3, replace=False)
    expected_km = evaluate_days(toy.train_days[pick], toy.test_days, toy.cells)
    expected_paper = evaluate_days_paper(toy.train_days[pick], toy.test_days, toy.cells)
    assert floor(toy, seed=7) == {"floor": expected_km, "floor_paper": expected_paper}
    assert floor(toy, seed=7) == floor(toy, seed=7)
    assert evaluate(toy.test_days, toy, seed=7)["floor"] == expected_km


def test_floor_uses_every_training_day_when_there_are_fewer_than_test_days(toy):
    small = make_dataset(toy.test_days, toy.train_days, toy.cells)     # 3 training days, 5 test days
    assert floor(small)["floor"] == pytest.approx(evaluate_days(small.train_days, small.test_days, small.cells))


def test_format_table_markdown_and_text():
    rows = {"floor": {m: 0.01 for m in METRIC_NAMES},
            "ours": {"metrics": {m: 0.25 for m in METRIC_NAMES}, "metrics_paper": {m: 0.5 for m in METRIC_NAMES}},
            "partial": {"radius": 0.123456}}
    md = format_table(rows).splitlines()
    assert md[0] == "| JSD (km) | Radius | DailyLoc | Distance | G-rank | I-rank |"
    assert md[2] == "| floor | 0.0100 | 0.0100 | 0.0100 | 0.0100 | 0.0100 |"
    assert md[3] == "| ours | 0.2500 | 0.2500 | 0.2500 | 0.2500 | 0.2500 |"
    assert md[4] == "| partial | 0.1235 | - | - | - | - |"
    text = format_table(rows, mode="paper", markdown=False, digits=2).splitlines()
    assert text[0].split() == ["JSD", "(paper)", "Radius", "DailyLoc", "Distance", "G-rank", "I-rank"]
    assert text[3].split() == ["ours"] + ["0.50"] * 5
    # exact layout: right-aligned numbers, columns as wide as their widest cell, two spaces between
    assert md[1] == "|---|---:|---:|---:|---:|---:|"
    assert text[1] == "-----------  ------  --------  --------  ------  ------"
    assert text[3] == "ours           0.50      0.50      0.50    0.50    0.50"
    assert text[4] == "partial        0.12         -         -       -       -"
    with pytest.raises(ValueError):
        format_table(rows, mode="miles")


def test_format_table_takes_the_floor_part_of_a_floor_result(toy):
    f = floor(toy)
    md = format_table({"floor": f}, mode="paper").splitlines()
    assert md[2] == "| floor | " + " | ".join(f"{f['floor_paper'][m]:.4f}" for m in METRIC_NAMES) + " |"


def test_floor_on_pategail_geolife():
    if not (DATA / "test.data").is_file():
        pytest.skip(f"real data not found at {DATA} (the data folder beside the checkout)")
    ds = make_dataset(np.loadtxt(DATA / "real.data", dtype=int), np.loadtxt(DATA / "test.data", dtype=int),
                      np.loadtxt(DATA / "gps"))
    f = floor(ds, seed=0)
    # Regression values of this implementation (2,350 of the 5,616 training days vs the 2,350 test days).
    assert f["floor"] == pytest.approx(
        {"radius": 0.0243, "dailyloc": 0.0061, "distance": 0.0037, "grank": 0.0093, "irank": 0.0002}, abs=1e-4)
    assert f["floor_paper"] == pytest.approx(
        {"radius": 0.0054, "dailyloc": 0.0061, "distance": 0.0041, "grank": 0.0372, "irank": 0.0002}, abs=1e-4)
