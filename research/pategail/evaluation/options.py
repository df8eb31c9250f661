"""Command-line options of the downstream evaluation, shared by `pategail evaluate` and `pategail train`,
and the step that adds the downstream sections to a training run's report."""
from __future__ import annotations

import json
import logging
from pathlib import Path

from pategail.server.errors import PategailError

log = logging.getLogger(__name__)


def add_arguments(p) -> None:
    """--no-downstream, --prediction-steps, --attack-days-per-user."""
    from pategail.attacks.membership import AttackConfig
    from pategail.utility.config import PredictionConfig

    p.add_argument("--no-downstream", action="store_true",
                   help="skip the applications (next-location prediction, location recommendation) and the "
                        "privacy attacks (membership inference, uniqueness)")
    p.add_argument("--prediction-steps", type=int, default=PredictionConfig.steps, metavar="N",
                   help=f"most minibatches of the next-location GRU per arm; early stopping on a validation share "
                        f"of the arm's days usually ends training before (default {PredictionConfig.steps})")
    p.add_argument("--prediction-device", default=PredictionConfig.device, metavar="DEVICE",
                   help=f"torch device of the next-location GRU, e.g. cuda (default {PredictionConfig.device})")
    p.add_argument("--attack-days-per-user", type=int, default=AttackConfig.days_per_user, metavar="N",
                   help=f"days of each attacked user in the membership attacks (default {AttackConfig.days_per_user})")


def config_from_args(args, seed: int):
    """The DownstreamConfig the options ask for; a bad value stops with one line."""
    from pategail.attacks.membership import AttackConfig
    from pategail.evaluation.downstream import DownstreamConfig
    from pategail.utility.config import PredictionConfig
    from pategail.utility.config import RecommendationConfig

    if args.prediction_steps < 1:
        raise PategailError(f"--prediction-steps must be at least 1, got {args.prediction_steps}")
    if args.attack_days_per_user < 1:
        raise PategailError(f"--attack-days-per-user must be at least 1, got {args.attack_days_per_user}")
    return DownstreamConfig(prediction=PredictionConfig(steps=args.prediction_steps, seed=seed,
                                                                device=args.prediction_device),
                            recommendation=RecommendationConfig(seed=seed),
                            attack=AttackConfig(days_per_user=args.attack_days_per_user), seed=seed)


def policy_session_from_bundle(bundle_dir: Path):
    """An ONNX Runtime session on a verified bundle's policy model."""
    from pategail.sdk.bundle import load_bundle, open_policy_session

    return open_policy_session(load_bundle(bundle_dir))


def extend_run_report(run: Path, dataset, config) -> dict:
    """Add ``utility`` and ``attacks`` to RUN/report.json (the run's synthetic.csv; white-box on
    RUN/bundle's policy, its reference on RUN/bundle-initial's), their tables to RUN/report.md and the four figures to RUN/."""

    from pategail.evaluation.downstream import downstream
    from pategail.evaluation.render import markdown, write_figures
    from pategail.sdk.synthetic import read_synthetic_csv

    days = read_synthetic_csv(run / "synthetic.csv", n_cells=dataset.n_cells, slots=dataset.train_days.shape[1])
    reference = run / "bundle-initial"
    result = downstream(dataset, days, policy_session=policy_session_from_bundle(run / "bundle"),
                        reference_session=policy_session_from_bundle(reference) if reference.is_dir() else None,
                        config=config)
    report = json.loads((run / "report.json").read_text())
    report.update(result)
    (run / "report.json").write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
    figures = write_figures(result, run)
    with open(run / "report.md", "a") as f:
        f.write("\n" + markdown(result) + "\nPlots: " + ", ".join(p.name for p in figures) + ".\n")
    return result


def _json_default(o):
    import numpy as np

    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
