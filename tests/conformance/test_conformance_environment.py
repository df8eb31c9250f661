"""The bundle's environment section: the cell table, EPR parameters and initial states devices need."""
import json
from pathlib import Path

import numpy as np
import pytest

from pategail.export.bundle import export_bundle
from pategail.export.discriminator import Discriminator
from pategail.sdk.bundle import BundleError, Environment, load_bundle
from pategail.server.policy import Policy, PolicyConfig

CELLS = np.array([[39.9042, 116.4074], [40.0, 116.3], [39.95, 116.35], [-33.86, 151.21]])


def test_environment_round_trips_exactly(tmp_path):
    env = Environment(cells=CELLS, alpha=0.96, candidates=3, initial_states=np.array([[0, 0], [1, 2]]),
                      initial_weights=np.array([0.25, 0.75]), explore_factors=np.array([2.5, 1.0, 0.125]))
    bundle = load_bundle(export_bundle(Policy(PolicyConfig(n_cells=4)), Discriminator(), tmp_path / "b",
                                       environment=env))
    got = bundle.environment
    np.testing.assert_array_equal(got.cells, CELLS)
    np.testing.assert_array_equal(got.initial_states, [[0, 0], [1, 2]])
    np.testing.assert_array_equal(got.initial_weights, [0.25, 0.75])
    assert (got.alpha, got.candidates) == (0.96, 3)
    np.testing.assert_array_equal(got.explore_factors, [2.5, 1.0, 0.125])
    assert len(bundle.sha256) == 64


def test_explore_factors_must_fit_the_candidates(tmp_path):
    for bad in (np.array([1.0, 1.0]), np.array([1.0, -1.0, 1.0]), np.array([1.0, np.nan, 1.0])):
        with pytest.raises(BundleError, match="explore_factors"):
            export_bundle(Policy(PolicyConfig(n_cells=4)), Discriminator(), tmp_path / "b",
                          environment=Environment(cells=CELLS, alpha=1.0, candidates=3, explore_factors=bad))


def test_models_only_bundle_has_no_environment(tmp_path):
    bundle = load_bundle(export_bundle(Policy(PolicyConfig(n_cells=4)), Discriminator(), tmp_path / "b"))
    assert bundle.environment is None and "environment" not in bundle.manifest


def test_cell_table_must_match_the_policy(tmp_path):
    with pytest.raises(BundleError, match="cell table has 4 cells"):
        export_bundle(Policy(PolicyConfig(n_cells=5)), Discriminator(), tmp_path / "b",
                      environment=Environment(cells=CELLS, alpha=1.0, candidates=3))


def test_altered_cell_table_is_refused(tmp_path):
    out = export_bundle(Policy(PolicyConfig(n_cells=4)), Discriminator(), tmp_path / "b",
                        environment=Environment(cells=CELLS, alpha=1.0, candidates=3))
    path = out / json.loads((out / "manifest.json").read_text())["environment"]["cells"]
    path.write_text(path.read_text().replace("39.9042", "39.9043"))
    with pytest.raises(BundleError, match="SHA-256"):
        load_bundle(out)


def test_a_relative_output_path_means_the_callers_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = export_bundle(Policy(PolicyConfig(n_cells=4)), Discriminator(), "runs/b")
    assert load_bundle(tmp_path / "runs" / "b").manifest["policy"]["config"]["n_cells"] == 4
    assert Path(out) == Path("runs/b")


def test_the_day_cells_limit_is_written_only_when_there_is_one(tmp_path):
    plain = Environment(cells=CELLS, alpha=1.0, candidates=3).write(tmp_path)
    assert "max_day_cells" not in plain and Environment.read(tmp_path, plain).max_day_cells is None
    limited = Environment(cells=CELLS, alpha=1.0, candidates=3, max_day_cells=4).write(tmp_path)
    assert limited["max_day_cells"] == 4 and Environment.read(tmp_path, limited).max_day_cells == 4
    for bad in (0, True, 4.0):
        with pytest.raises(BundleError, match="max_day_cells must be a whole number of cells >= 1"):
            Environment(cells=CELLS, alpha=1.0, candidates=3, max_day_cells=bad).write(tmp_path)
