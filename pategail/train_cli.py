"""`pategail train`: federated PateGail on the desktop emulator — the product's main job.

Builds one SDK device per user of the data set (each holding only that user's training days), runs the
coordinator's Algorithm 1 over them, and writes into RUN/: the model bundle, ``synthetic.csv``,
``report.json``, ``report.md`` and PNG plots. Every round is checkpointed; ``--resume`` continues a run.
"""
from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from pategail.errors import PategailError

log = logging.getLogger(__name__)


def register(sub) -> None:
    p = sub.add_parser("train", help="train a generator with federated PateGail over emulated devices",
                       description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, type=Path, help="prepared data set directory")
    p.add_argument("--out", required=True, type=Path, metavar="RUN", help="run directory")
    p.add_argument("--devices", type=int, default=None, help="devices (one user each; default: every user)")
    p.add_argument("--rounds", type=int, default=None, help="rounds of Algorithm 1 (default: the config's)")
    privacy = p.add_mutually_exclusive_group(required=True)
    privacy.add_argument("--epsilon", type=float, default=None,
                         help="total ε of the whole run (composed over every release); noise is calibrated to it")
    privacy.add_argument("--no-privacy", action="store_true", help="the same protocol without noise")
    p.add_argument("--delta", type=float, default=None, help="total δ (default 1e-5)")
    p.add_argument("--seed", type=int, default=0, help="seed of every random stream of the run")
    p.add_argument("--config", type=Path, default=None,
                   help="JSON file of settings (fields of pategail.server.config.TrainConfig)")
    p.add_argument("--resume", action="store_true", help="continue the run in RUN from its last checkpoint")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    from pategail.evaluation.options import add_arguments as add_downstream_arguments
    add_downstream_arguments(p)
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show every INFO line on the terminal under the progress bar (they always go to RUN/train.log)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch threads of the coordinator (default 1: a seeded run then reproduces bit for bit "
                        "in another process, and it was faster than 2 on a shared 2-core machine; BENCHMARKS.md)")
    p.set_defaults(func=run_train)


def _config(args):
    from pategail.server.config import TrainConfig
    overrides = {}
    if args.rounds is not None:
        overrides["rounds"] = args.rounds
    if args.epsilon is not None:
        overrides["target_epsilon"] = args.epsilon
    if args.delta is not None:
        if args.no_privacy:
            raise PategailError("--delta goes with --epsilon, not with --no-privacy")
        overrides["target_delta"] = args.delta
    if args.config is not None:
        return TrainConfig.from_file(args.config, **overrides)
    return TrainConfig.from_dict(overrides, where="options")


def run_train(args) -> int:
    import torch

    from pategail.data.dataset import load_dataset
    from pategail.emulator import choose_users

    config = _config(args)
    downstream_config = None
    if not args.no_downstream:
        from pategail.evaluation.options import config_from_args
        downstream_config = config_from_args(args, args.seed)      # bad budgets stop before training
    if args.threads < 1:
        raise PategailError(f"--threads {args.threads}: must be at least 1")
    # Multi-threaded CPU kernels split reductions by thread count and timing, so two processes with the same
    # seed drifted apart by a float quantum that the adversarial game amplifies; one thread is bit-exact.
    torch.set_num_threads(args.threads)
    dataset = load_dataset(args.data)
    run = args.out
    users = choose_users(dataset.users, args.devices, args.seed)
    # What the run's journal and devices belong to: a resumed run must be the same run (a release in the
    # journal is re-used, so it must come from the same configuration, seed, data and devices).
    identity = {"config": config.to_dict(), "seed": args.seed, "data": str(args.data.resolve()),
                "users": [int(u) for u in users]}
    marker = run / "run.json"
    if marker.is_file():
        if not args.resume:
            raise PategailError(f"{run} holds a run already; add --resume to continue it, or choose another --out")
        recorded = json.loads(marker.read_text())
        if set(recorded.get("config", {})) != set(identity["config"]):
            raise PategailError(f"{marker}: this run was made by another version of pategail (its settings "
                                "differ in name, not only in value) and cannot be resumed; start it again in "
                                "another --out")
        if recorded != identity:
            raise PategailError(f"{marker}: this run was started with other settings, data, seed or --devices; "
                                "resume it with the same ones, or choose another --out")
    elif args.resume:
        raise PategailError(f"{run}: no run to resume")
    run.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(identity, indent=1) + "\n")
    with _run_log(run / "train.log", quiet_terminal=not (args.verbose or args.no_progress)) as console_level:
        return _train(args, config, dataset, users, run, console_level, downstream_config)


def _train(args, config, dataset, users, run: Path, console_level: int, downstream_config) -> int:
    from pategail.emulator import EmulatedFleet
    from pategail.metrics.guard import GUARD_QUANTILE, distinct_cells_threshold
    from pategail.server.coordinator import Coordinator, run_plan
    from pategail.server.privacy.summary import plan_line

    initial_bundle = run / "bundle-initial"
    if not (initial_bundle / "manifest.json").is_file():
        write_initial_bundle(config, dataset, args.seed, initial_bundle,
                             privacy=run_plan(config, dataset.cells, run / "checkpoint").declare(
                                 config.min_survivors, config.secagg_colluders))
    fleet = EmulatedFleet(dataset, users, run / "devices", initial_bundle, seed=args.seed)
    coordinator = Coordinator(config, fleet, dataset.cells, run, seed=args.seed)
    if args.resume and not coordinator.resume():
        log.info("%s: no round was checkpointed yet; starting again (journalled releases are re-used)", run)
    log.info(plan_line(coordinator.plan, len(users), config.beta))

    # The invented-mode guard per round: the emulator holds the data set, so it knows the real days' 99.9th
    # percentile of distinct cells; the coordinator only reports the generated days' histogram.
    threshold = distinct_cells_threshold(dataset.train_days)
    log.info("invented-mode guard: a generated day above %g distinct cells (the real training days' %gth "
             "percentile) counts as invented", threshold, GUARD_QUANTILE)

    bar = None
    if not args.no_progress:
        from tqdm import tqdm
        bar = tqdm(total=config.rounds, initial=coordinator.round, desc="rounds", unit="round")

    def on_round(stats):
        hist = stats.distinct_histogram
        invented = sum(hist[int(threshold) + 1:]) / max(1, sum(hist))
        log.info("round %d: %.1f%% of generated days above %g distinct cells (invented mode), stay share %.2f",
                 stats.round, 100 * invented, threshold, stats.stay_share)
        if bar is not None:
            postfix = {"D acc": f"{stats.disc_accuracy:.2f}", "reward": f"{stats.mean_reward:.3f}",
                       "invented": f"{invented:.0%}", "stay": f"{stats.stay_share:.2f}"}
            if stats.epsilon is not None:
                postfix["ε"] = f"{stats.epsilon:.3g}"
            bar.set_postfix(postfix)
            bar.update(1)

    from tqdm.contrib.logging import logging_redirect_tqdm

    from pategail.errors import IntegrityError
    from pategail.sdk.secagg.errors import SecAggAbort, TamperDetected
    try:
        with logging_redirect_tqdm():
            _set_console_level(console_level)     # tqdm's handler replaces the console one, without its level
            coordinator.train(on_round)
    except SecAggAbort as err:
        raise PategailError(f"round {coordinator.round + 1} released nothing ({err}); the run is checkpointed: "
                            "bring the devices back and add --resume") from None
    except TamperDetected as err:
        # the aggregator unmasked, so the attempt stays counted (its intent is kept); nothing of it was used
        which = (f"round {coordinator.round + 1}" if coordinator.initial_states is not None
                 else "round 0 (initial states)")
        raise IntegrityError(f"{which}: the secure aggregation failed the integrity check ({err}); its release "
                             f"counts against the budget; the run is checkpointed after round {coordinator.round}: "
                             "add --resume to retry") from None
    finally:
        if bar is not None:
            bar.close()

    from pategail.reporting import write_outputs
    write_outputs(coordinator, dataset, run, seed=args.seed)
    if downstream_config is not None:
        from pategail.evaluation.options import extend_run_report
        extend_run_report(run, dataset, downstream_config)
    accepted = coordinator.publish_policy((run / "bundle" / "policy.onnx").read_bytes())
    log.info("%d of %d devices accepted the final policy", accepted, len(users))
    print((run / "report.md").read_text())
    print(f"Log of every round: {run / 'train.log'}")
    return 0


def _set_console_level(level: int) -> None:
    for handler in logging.getLogger().handlers:
        if not isinstance(handler, logging.FileHandler):
            handler.setLevel(level)


@contextlib.contextmanager
def _run_log(path: Path, quiet_terminal: bool):
    """Every INFO line of the run into ``path`` (appended: a resumed run continues its log); on the terminal
    only warnings while ``quiet_terminal`` (the progress bar carries the per-round figures). Yields the
    terminal's level."""
    root = logging.getLogger()
    consoles = [h for h in root.handlers if not isinstance(h, logging.FileHandler)]
    saved = root.level, [h.level for h in consoles]
    console_level = max(logging.WARNING if quiet_terminal else logging.INFO, root.level)
    file_handler = logging.FileHandler(path, encoding="utf-8")
    file_handler.setLevel(logging.INFO)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(file_handler)
    root.setLevel(min(root.level, logging.INFO))
    _set_console_level(console_level)
    try:
        yield console_level
    finally:
        root.removeHandler(file_handler)
        file_handler.close()
        root.setLevel(saved[0])
        for h, level in zip(consoles, saved[1]):
            h.setLevel(level)


def discriminator_training(config):
    """The devices' discriminator training settings (baked into a bundle) for a TrainConfig."""
    from pategail.export.artifacts import TrainingConfig
    from pategail.sdk.replay import ReplaySettings
    replay = None
    if config.disc_replay_share > 0:
        replay = ReplaySettings(config.disc_replay_share, config.disc_replay_rounds, config.disc_replay_pairs)
    return TrainingConfig(expert_label=1.0 - config.disc_label_smoothing, weight_decay=config.disc_weight_decay,
                          replay=replay, owner_scaling=config.disc_owner_scaling)


def write_initial_bundle(config, dataset, seed: int, out: Path, privacy=None) -> Path:
    """The bundle the devices start from: the run's initial policy and a fresh discriminator (both seeded);
    ``privacy``: the privacy plan it declares to the devices (private runs), or None."""
    import torch

    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import Environment
    from pategail.server.policy import Policy, PolicyConfig

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        policy0 = Policy(PolicyConfig(n_cells=dataset.n_cells, d_model=config.d_model, n_layers=config.n_layers))
        torch.manual_seed(seed + 1)
        discriminator = Discriminator()
    return export_bundle(policy0, discriminator, out, training_config=discriminator_training(config),
                         environment=Environment(dataset.cells, config.alpha, config.candidates), privacy=privacy)

