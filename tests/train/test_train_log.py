"""`pategail train` on a terminal: the per-round detail goes to RUN/train.log and the bar, INFO lines reach
the terminal only with -v; and a seeded run reproduces bit for bit in another process."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pategail.data.prepare import prepare_dataset

ROOT = Path(__file__).resolve().parents[2]
TINY = {"rounds": 2, "days_per_round": 6, "discriminator": {"steps": 2, "batch_size": 16}, "environment": {"candidates": 50, "action_prior_days": 16, "action_prior_epochs": 2}, "policy": {"d_model": 16, "n_layers": 1}, "ppo": {"n_epochs": 2, "batch_size": 3}}


@pytest.mark.slow
def test_log_file_quiet_terminal_and_cross_process_reproduction(tmp_path):
    data = tmp_path / "data"
    prepare_dataset("pategail", ROOT / "data" / "default", data, allow_pickle=True)
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY))
    runs = {}
    for name, extra in (("quiet", []), ("verbose", ["-v"])):
        run = tmp_path / name
        done = subprocess.run([sys.executable, "-m", "pategail", "train", "--data", str(data), "--out", str(run),
                               "--devices", "3", "--no-privacy", "--config", str(config), "--no-downstream", *extra],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        runs[name] = (run, done.stderr)
    quiet_log = (runs["quiet"][0] / "train.log").read_text()
    for r in (1, 2):
        assert f"round {r}: mean reward" in quiet_log                   # the coordinator's line
        assert f"round {r}: " in quiet_log and "invented mode" in quiet_log
    assert "invented-mode guard" in quiet_log
    quiet_err, verbose_err = runs["quiet"][1], runs["verbose"][1]
    assert " INFO " not in quiet_err and "invented=" in quiet_err           # the bar's postfix, no INFO line
    assert "round 2: mean reward" in verbose_err
    # two processes, same seed and settings: the same synthetic days, byte for byte
    assert (runs["quiet"][0] / "synthetic.csv").read_bytes() == (runs["verbose"][0] / "synthetic.csv").read_bytes()
    report = json.loads((runs["quiet"][0] / "report.json").read_text())
    assert 0 <= report["guard"]["share"] <= 1
    assert "Invented-mode guard" in (runs["quiet"][0] / "report.md").read_text()
