"""`make run`'s data preparation keeps users out of training, so the report a first-time user reads has the
membership-inference and recommendation rows filled in, not "not available"."""
import shlex
from pathlib import Path

import numpy as np

from pategail.attacks.membership import AttackConfig
from pategail.baselines import generate_baseline
from pategail.cli import main
from pategail.data.dataset import load_dataset
from pategail.evaluation.downstream import DownstreamConfig, downstream
from pategail.evaluation.render import markdown
from pategail.utility.config import PredictionConfig

ROOT = Path(__file__).resolve().parents[2]


def _make_run_prepare_argv(out: Path) -> list[str]:
    """The arguments of the Makefile's `run` target's `data prepare` line, its output redirected to ``out``."""
    lines = (ROOT / "Makefile").read_text().replace("\\\n", " ").splitlines()
    run = lines.index("run: setup")
    prepare = next(line for line in lines[run + 1:] if "data prepare" in line)
    argv = shlex.split(prepare)
    argv = argv[argv.index("data"):]
    argv[argv.index("--out") + 1] = str(out)
    return argv


def test_make_run_report_has_membership_and_recommendation_rows(tmp_path):
    data = tmp_path / "data"
    assert main(["-q", *_make_run_prepare_argv(data)]) == 0
    ds = load_dataset(data)
    assert len(ds.heldout_users) >= 2 and len(np.unique(ds.train_users)) >= 7      # training still has most users
    synthetic = generate_baseline("markov", ds, 200, np.random.default_rng(0))
    config = DownstreamConfig(prediction=PredictionConfig(steps=2), attack=AttackConfig(days_per_user=5,
                                                                                        n_estimators=20,
                                                                                        n_bootstrap=50))
    result = downstream(ds, synthetic, config=config)
    assert result["utility"]["recommendation"]["available"]
    assert result["attacks"]["membership_blackbox"]["available"]
    text = markdown(result)
    assert "Location recommendation (implicit ALS" in text and "| (b) synthetic |" in text
    black = next(line for line in text.splitlines() if line.startswith("| black-box"))
    assert "not available" not in black
    assert "prepare it with --holdout-users" not in text
    assert "| stay (next cell = current) |" in text and text.count("| GRU |") == 3 and text.count("| Markov |") == 3
