"""`pategail train`: federated PateGail on the desktop emulator — the product's main job.

Builds one SDK device per user of the data set (each holding only that user's training days), runs the
coordinator's Algorithm 1 over them, and writes into RUN/: the model bundle, ``synthetic.csv``,
``report.json``, ``report.md`` and PNG plots. Every round is checkpointed; ``--resume`` continues a run.
"""
from __future__ import annotations

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
    from pategail.emulator import EmulatedFleet, choose_users
    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import Environment
    from pategail.server.coordinator import Coordinator, run_plan
    from pategail.server.policy import Policy, PolicyConfig
    from pategail.server.privacy.summary import plan_line

    config = _config(args)
    downstream_config = None
    if not args.no_downstream:
        from pategail.evaluation.options import config_from_args
        downstream_config = config_from_args(args, args.seed)      # bad budgets stop before training
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

    # The bundle the devices start from: the run's initial policy and a fresh discriminator (seeded).
    initial_bundle = run / "bundle-initial"
    if not (initial_bundle / "manifest.json").is_file():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(args.seed)
            policy0 = Policy(PolicyConfig(n_cells=dataset.n_cells, d_model=config.d_model,
                                          n_layers=config.n_layers))
            torch.manual_seed(args.seed + 1)
            discriminator = Discriminator()
        export_bundle(policy0, discriminator, initial_bundle,
                      environment=Environment(dataset.cells, config.alpha, config.candidates),
                      privacy=run_plan(config, dataset.cells, run / "checkpoint").declare(
                          config.min_survivors, config.secagg_colluders))
    fleet = EmulatedFleet(dataset, users, run / "devices", initial_bundle, seed=args.seed)
    coordinator = Coordinator(config, fleet, dataset.cells, run, seed=args.seed)
    if args.resume and not coordinator.resume():
        log.info("%s: no round was checkpointed yet; starting again (journalled releases are re-used)", run)
    log.info(plan_line(coordinator.plan, len(users), config.beta))

    bar = None
    if not args.no_progress:
        from tqdm import tqdm
        bar = tqdm(total=config.rounds, initial=coordinator.round, desc="rounds", unit="round")

    def on_round(stats):
        if bar is not None:
            postfix = {"D acc": f"{stats.disc_accuracy:.2f}", "reward": f"{stats.mean_reward:.3f}"}
            if stats.epsilon is not None:
                postfix["ε"] = f"{stats.epsilon:.3g}"
            bar.set_postfix(postfix)
            bar.update(1)

    from pategail.errors import IntegrityError
    from pategail.sdk.secagg.errors import SecAggAbort, TamperDetected
    try:
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
    return 0
