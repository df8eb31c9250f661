"""`pategail evaluate` with the downstream sections, end to end on the embedded data with held-out users:
a planted leak (a generator that copies training days) is caught by the black-box attack and by uniqueness."""
import json
from pathlib import Path

import pytest
import torch

from pategail.cli import main
from pategail.export.bundle import export_bundle
from pategail.export.discriminator import Discriminator
from pategail.sdk.bundle import Environment
from pategail.server.policy import Policy, PolicyConfig
from pategail.data.dataset import load_dataset
from pategail.sdk.synthetic import write_synthetic_csv

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--prediction-steps", "2", "--attack-days-per-user", "8"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("d") / "data"
    assert main(["-q", "data", "prepare", "--format", "pategail", "--allow-pickle", "--input",
                 str(ROOT / "data" / "default"), "--out", str(out), "--holdout-users", "0.4"]) == 0
    return out


@pytest.mark.slow
def test_planted_leak_is_caught(data, tmp_path, capsys):
    ds = load_dataset(data)
    leak = tmp_path / "leak.csv"
    write_synthetic_csv(leak, ds.train_days, ds.cells)              # copies every training day
    out = tmp_path / "eval.json"
    assert main(["-q", "evaluate", "--data", str(data), "--synthetic", str(leak), "--json", str(out),
                 "--figures", str(tmp_path / "fig")] + TINY) == 0
    res = json.loads(out.read_text())
    assert set(res) >= {"metrics", "floor", "utility", "attacks"}
    uniq = res["attacks"]["uniqueness"]
    assert uniq["members"]["share_reproduced"] == 1.0 and uniq["members"]["mean"] == 1.0
    assert uniq["nonmembers"]["share_reproduced"] < 0.1 and uniq["test"]["share_reproduced"] < 0.1
    black = res["attacks"]["membership_blackbox"]
    assert black["users"] == {"members": 4, "nonmembers": 4}
    # users are the unit; single days of a non-member who lives where members do can look copied
    assert black["auc"] >= 0.9 and black["auc_days"] >= 0.7
    assert res["attacks"]["membership_whitebox"]["available"] is False    # no --bundle
    pred = res["utility"]["prediction"]
    assert pred["training_days"]["synthetic"] == len(ds.train_days) and pred["config"]["steps"] == 2
    assert res["utility"]["recommendation"]["query_users"] >= 1
    for name in ("prediction", "recommendation", "membership", "uniqueness"):
        assert (tmp_path / "fig" / f"{name}.png").is_file()
    text = capsys.readouterr().out
    assert "## Privacy attacks" in text and "| members (training days) |" in text


def test_bad_budget_is_one_line_error(data, tmp_path, capsys):
    ds = load_dataset(data)
    syn = tmp_path / "s.csv"
    write_synthetic_csv(syn, ds.test_days[:5], ds.cells)
    assert main(["-q", "evaluate", "--data", str(data), "--synthetic", str(syn), "--prediction-steps", "0"]) == 2
    assert "--prediction-steps must be at least 1" in capsys.readouterr().err


@pytest.mark.slow
def test_white_box_and_its_reference_on_the_same_policy_agree(data, tmp_path):
    ds = load_dataset(data)
    torch.manual_seed(0)
    bundle = tmp_path / "bundle"
    export_bundle(Policy(PolicyConfig(n_cells=ds.n_cells, d_model=16, n_layers=1)), Discriminator(), bundle,
                  environment=Environment(ds.cells, 0.96, 50))
    syn = tmp_path / "s.csv"
    write_synthetic_csv(syn, ds.test_days[:50], ds.cells)
    out = tmp_path / "eval.json"
    assert main(["-q", "evaluate", "--data", str(data), "--synthetic", str(syn), "--json", str(out),
                 "--bundle", str(bundle), "--reference-bundle", str(bundle)] + TINY) == 0
    attacks = json.loads(out.read_text())["attacks"]
    white, reference = attacks["membership_whitebox"], attacks["membership_whitebox_reference"]
    assert white["available"] and white["users"] == {"members": 4, "nonmembers": 4}
    assert {k: white[k] for k in ("auc", "accuracy", "auc_days")} == \
        {k: reference[k] for k in ("auc", "accuracy", "auc_days")}
