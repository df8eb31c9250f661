"""A public cell map: `data prepare --public-cells --bbox` makes the cell table every square of a bounding box,
so nothing a run releases — the table, the environment vector's layout, the region tree — depends on which
squares the users visited; a private run over a table built from the users' fixes is refused in one line."""
from __future__ import annotations

import json

import numpy as np

from pategail.cli import main
from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset
from tests.data.test_data_prepare_csv import FIXES, at, write_csv

BBOX = (39.9, 116.4, 39.96, 116.45)                 # 7 × 6 squares of 0.01° (edges included)
REMOTE = (39.955, 116.445)                          # a square inside the box that nobody else visits


def _prepare(tmp_path, name, fixes, public=True):
    csv = write_csv(tmp_path / f"{name}.csv", fixes)
    out = tmp_path / name
    prepare_dataset("gps-csv", csv, out, bbox=BBOX, test_fraction=0.3, public_cells=public, min_observed_slots=1)
    return load_dataset(out)


def test_the_public_table_is_every_square_of_the_box_whatever_the_users_visit(tmp_path):
    from pategail.sdk.regions import REGION_CELLS, region_map
    from pategail.sdk.epr import CellGeometry
    from pategail.server.coordinator import environment_length

    base = _prepare(tmp_path, "base", FIXES)
    # one more user who alone visits a remote square of the box
    extra = FIXES + [("u9", at(0, 3), REMOTE), ("u9", at(0, 9), REMOTE), ("u9", at(1, 3), REMOTE)]
    more = _prepare(tmp_path, "more", extra)
    assert base.n_cells == 42 and base.public_cell_table and more.public_cell_table
    assert np.array_equal(base.cells, more.cells)                 # the table: not a function of the data
    geometry = CellGeometry.build(base.cells, candidates=10)
    for regions in (0, REGION_CELLS, 8):                          # every released vector's layout
        assert environment_length(base.cells, geometry, regions) == environment_length(more.cells, geometry, regions)
    assert np.array_equal(region_map(base.cells, 8), region_map(more.cells, 8))
    # the remote square is a cell of both tables, and only the second data set's days go there
    remote = int(np.argmin(np.abs(base.cells - REMOTE).sum(axis=1)))
    assert not (base.train_days == remote).any() and (more.train_days == remote).any()
    # a table from the data has only the visited squares: the remote one appears only when someone went there
    visited = _prepare(tmp_path, "visited", extra, public=False)
    assert not visited.public_cell_table and visited.n_cells < 42
    assert len(_prepare(tmp_path, "visited-base", FIXES, public=False).cells) < visited.n_cells
    meta = json.loads((tmp_path / "base" / "dataset.json").read_text())
    assert meta["cell_table"]["kind"] == "public" and meta["cell_table"]["bbox"] == list(BBOX)


def test_the_paper_format_is_re_mapped_onto_the_box(tmp_path, dataset):
    from tests.conftest import DEFAULT_DATA
    bbox = (39.7, 116.1, 40.1, 116.6)
    out = tmp_path / "public"
    prepare_dataset("pategail", DEFAULT_DATA, out, allow_pickle=True, bbox=bbox, cell_deg=0.02, public_cells=True)
    public = load_dataset(out)
    assert public.public_cell_table and public.n_cells == 21 * 26
    # every remapped day moves each slot by at most a square's half-diagonal from its original cell
    lat_ok = (dataset.cells[:, 0] >= bbox[0]) & (dataset.cells[:, 0] <= bbox[2])
    lon_ok = (dataset.cells[:, 1] >= bbox[1]) & (dataset.cells[:, 1] <= bbox[3])
    kept = (lat_ok & lon_ok)[dataset.train_days].all(axis=1)
    assert len(public.train_days) == kept.sum() > 0
    moved = np.abs(public.cells[public.train_days] - dataset.cells[dataset.train_days[kept]])
    assert moved.max() <= 0.01 + 1e-9


def test_a_private_run_refuses_a_table_made_from_the_data(tmp_path, capsys):
    data = tmp_path / "visited"
    prepare_dataset("gps-csv", write_csv(tmp_path / "f.csv"), data, test_fraction=0.3, min_observed_slots=1)
    assert main(["-q", "train", "--data", str(data), "--out", str(tmp_path / "run"), "--epsilon", "8",
                 "--no-progress", "--no-downstream"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--public-cells --bbox" in err[0] and "reveals which squares" in err[0]
    assert not (tmp_path / "run").exists()


def test_public_cells_need_a_box(tmp_path, capsys):
    assert main(["-q", "data", "prepare", "--format", "gps-csv", "--input", str(write_csv(tmp_path / "f.csv")),
                 "--out", str(tmp_path / "out"), "--public-cells"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--public-cells needs --bbox" in err[0]
    assert main(["-q", "data", "prepare", "--format", "gps-csv", "--input", str(tmp_path / "f.csv"),
                 "--out", str(tmp_path / "out"), "--public-cells", "--bbox", "0,0,60,60"]) == 2
    assert "use a smaller --bbox" in capsys.readouterr().err
