"""`pategail train --cells released`: the cell table is the run's first release — the devices' visited squares of
a public map through the secure aggregation with Gaussian noise, thresholded — recorded in the journal and the
accountant, composed into the report's total ε (checked against dp-accounting outside the project's code), used
by everything after it, and re-used (never released again) by a resumed run. What cannot work is refused in one
line."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from pategail.cli import main
from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset
from pategail.sdk.bundle import load_bundle
from pategail.sdk.synthetic import read_synthetic_csv
from pategail.server.cell_table import CELL_TABLE_ROUND

BBOX = (39.7, 116.1, 40.1, 116.6)
TINY = {"rounds": 2, "days_per_round": 4, "discriminator": {"steps": 2, "batch_size": 16},
        "environment": {"candidates": 50}, "policy": {"d_model": 16, "n_layers": 1}, "average_rounds": 1,
        "ppo": {"n_epochs": 1, "batch_size": 2}}
DEVICES, EPSILON = 200, 20.0


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    from tests.conftest import DEFAULT_DATA
    if not DEFAULT_DATA.is_dir():
        pytest.skip(f"embedded development data not found at {DEFAULT_DATA}")
    root = tmp_path_factory.mktemp("released-cells")
    prepare_dataset("pategail", DEFAULT_DATA, root / "public", allow_pickle=True, bbox=BBOX, cell_deg=0.02,
                    public_cells=True)
    (root / "tiny.json").write_text(json.dumps(TINY))
    return root


def _train(root, run, *extra):
    return main(["-q", "train", "--data", str(root / "public"), "--out", str(run), "--epsilon", str(EPSILON),
                 "--cells", "released", "--config", str(root / "tiny.json"), "--population", str(DEVICES),
                 "--fleet", "population", "--no-downstream", "--no-progress", *extra])


@pytest.fixture(scope="module")
def run(public):
    out = public / "run"
    assert _train(public, out) == 0
    return out


def _intents(run):
    return [json.loads(p.read_text()) for p in sorted((run / "checkpoint" / "releases").glob("intent-*.json"))]


def test_the_run_releases_its_table_first_and_uses_it_everywhere(public, run, capsys):
    universe = load_dataset(public / "public")
    table = json.loads((run / "cell-table.json").read_text())
    released = np.asarray(table["released"])
    assert table["universe"] == universe.n_cells == 21 * 26
    assert 0 < len(released) < universe.n_cells and np.all(np.diff(released) > 0)
    # the squares enough devices visit: the released ones are visited by some training day — an unvisited square
    # clears the threshold with probability 0.1 / 546, so one run in ten releases one, and three or more happen
    # in about one run in 6,000 (the noise is not seeded) — and the busiest squares are all in
    visits = np.bincount(universe.train_days.ravel(), minlength=universe.n_cells)
    assert (visits[released] == 0).sum() <= 2 < len(released) // 4
    assert set(np.argsort(-visits)[:5]) <= set(released.tolist())
    # the published bundle, the initial bundle on the table and the synthetic days are on the released table
    for bundle in ("bundle", "bundle-initial"):
        np.testing.assert_array_equal(load_bundle(run / bundle).environment.cells, universe.cells[released])
    assert len(load_bundle(run / "bundle-public-map").environment.cells) == universe.n_cells
    days = read_synthetic_csv(run / "synthetic.csv", n_cells=len(released), slots=48)
    assert days.max() < len(released)
    # the release is journalled once, under its own round, as the Gaussian release of the visited vectors
    cells = [i for i in _intents(run) if i["round"] == CELL_TABLE_ROUND]
    assert len(cells) == 1 and cells[0]["cells"] is True and cells[0]["block"] == 0
    assert cells[0]["count"] == universe.n_cells and cells[0]["clip_norm"] == pytest.approx(math.sqrt(32))
    report = json.loads((run / "report.json").read_text())
    privacy = report["privacy"]
    assert privacy["cell_release"]["counted"] == 1 and privacy["cell_release"]["universe"] == universe.n_cells
    assert privacy["cell_release"]["noise_std"] == pytest.approx(cells[0]["sum_scale"])
    md = (run / "report.md").read_text()
    assert f"- Cell table: privately released ({len(released)} squares of a public map of {universe.n_cells}, " \
           f"ε part {privacy['cell_release']['epsilon_part']:.3g}" in md
    capsys.readouterr()


def _outside_epsilon(intents, delta, cell_factor=1.0, env_factor=1.0, reward_factor=1.0):
    """The composition of the journalled releases with dp-accounting alone: each a Gaussian of noise multiplier
    σ / Δ₂, Δ₂ = clip norm + half a quantum (2^-24) per value."""
    acc = rdp_privacy_accountant.RdpAccountant()
    for i in intents:
        sensitivity = i["clip_norm"] + 0.5 * math.sqrt(i["count"]) / 2 ** 24
        factor = cell_factor if i.get("cells") else env_factor if i["block"] == 0 else reward_factor
        acc.compose(dp_event.GaussianDpEvent(i["sum_scale"] / (sensitivity * factor)))
    return acc.get_epsilon(delta)


def test_the_total_epsilon_includes_the_release_as_dp_accounting_composes_it(run):
    privacy = json.loads((run / "report.json").read_text())["privacy"]
    intents = _intents(run)
    assert len(intents) == 1 + 1 + TINY["rounds"]             # the cell table, the environment, two rounds
    outside = _outside_epsilon(intents, privacy["delta"])
    assert privacy["epsilon_total"] == pytest.approx(outside, rel=1e-3)
    without = _outside_epsilon([i for i in intents if not i.get("cells")], privacy["delta"])
    assert outside > without * 1.05                           # the release is counted, not free
    assert privacy["epsilon_total"] <= EPSILON <= privacy["epsilon_target"] + 1e-9
    # replace-one: the visited vector's m ones moved to m other squares, √(2m) against √m (plus rounding)
    m, universe = 32, privacy["cell_release"]["universe"]
    quanta = math.sqrt(universe) / 2 ** 24
    cell_factor = (math.sqrt(2 * m) + quanta) / (math.sqrt(m) + 0.5 * quanta)
    plan = privacy["plan"]
    env_values, env_clip = plan["env_values"], plan["gaussian"]["env_clip_norm"]
    q = math.sqrt(env_values) / 2 ** 24
    env_factor = (math.sqrt(2 * env_clip ** 2 - 5) + q) / (env_clip + 0.5 * q)
    replace_one = _outside_epsilon(intents, privacy["delta"], cell_factor, env_factor, 2.0)
    assert privacy["guarantees"]["against_the_coordinator"]["epsilon_replace_one"] == pytest.approx(replace_one,
                                                                                                     rel=1e-3)


def test_a_resumed_run_reuses_the_journalled_release(public, run, tmp_path, capsys):
    again = tmp_path / "again"
    shutil.copytree(run, again)
    (again / "checkpoint" / "checkpoint.pt").unlink()           # stopped before its first checkpoint
    journal = again / "checkpoint" / "releases" / f"round-{CELL_TABLE_ROUND:05d}.npz"
    before = np.load(journal)["sum"].copy()
    assert _train(public, again, "--resume") == 0
    # a second release would draw fresh noise from the CSPRNG: the same noisy counts mean the journalled one
    np.testing.assert_array_equal(np.load(journal)["sum"], before)
    assert [i["round"] for i in _intents(again)].count(CELL_TABLE_ROUND) == 1
    assert json.loads((again / "cell-table.json").read_text()) == json.loads((run / "cell-table.json").read_text())
    first = json.loads((run / "report.json").read_text())["privacy"]["epsilon_total"]
    assert json.loads((again / "report.json").read_text())["privacy"]["epsilon_total"] == pytest.approx(first)
    capsys.readouterr()


@pytest.mark.parametrize("extra, message", [
    (["--no-privacy"], "--cells goes with --epsilon"),
    (["--mechanism", "laplace"], "composes with the Gaussian mechanism"),
    (["--data-derived-cells"], "--cells released chooses the run's squares from a public map"),
])
def test_what_cannot_work_is_refused_in_one_line(public, tmp_path, capsys, extra, message):
    args = ["-q", "train", "--data", str(public / "public"), "--out", str(tmp_path / "run"), "--cells", "released",
            "--config", str(public / "tiny.json"), "--no-downstream", "--no-progress"]
    if "--no-privacy" not in extra:
        args += ["--epsilon", "8"]
    if "--devices" not in extra:
        args += ["--population", "24"]
    assert main(args + extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "run").exists()


def test_a_data_derived_table_is_refused(dataset, tmp_path, capsys):
    from pategail.data.dataset import save_dataset
    save_dataset(dataset, tmp_path / "visited")
    assert main(["-q", "train", "--data", str(tmp_path / "visited"), "--out", str(tmp_path / "run"), "--epsilon", "8",
                 "--cells", "released", "--population", "24", "--no-downstream", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--public-cells --bbox" in err[0] and "--cells released" in err[0]
    assert not (tmp_path / "run").exists()
