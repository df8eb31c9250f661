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
SDK_FLEET_MAX = 200
"""--fleet auto: the SDK fleet (real devices, real cryptography) up to this many devices, the population
simulation beyond (the SDK fleet's round costs seconds per device on one core)."""


def register(sub) -> None:
    p = sub.add_parser("train", help="train a generator with federated PateGail over emulated devices",
                       description=__doc__.splitlines()[0])
    add_run_arguments(p)
    p.add_argument("--devices", type=int, default=None, help="devices (one user each; default: every user)")
    scale = p.add_argument_group("populations for scale studies (pategail.population)")
    scale.add_argument("--population", type=int, default=None, metavar="N",
                       help="N devices resampled from the data set's users (whole users drawn with replacement); "
                            "every table then says 'resampled population'")
    scale.add_argument("--population-days", type=float, default=None, metavar="SHARE",
                       help="with --population: each device holds a random SHARE of its user's days")
    scale.add_argument("--fleet", choices=("auto", "sdk", "population"), default="auto",
                       help="sdk: one SDK device per device with the real secure aggregation (the reference); "
                            "population: the batched simulation with the ideal secure aggregation; auto "
                            f"(default): sdk up to {SDK_FLEET_MAX} devices, population beyond")
    scale.add_argument("--ray-address", default=None, metavar="ADDRESS",
                       help="run the population fleet's shards as actors on this Ray cluster (pip install "
                            "'pategail[ray]')")
    scale.add_argument("--ray-workers", type=int, default=None, metavar="N",
                       help="run the population fleet's shards on a local Ray cluster of N workers")
    scale.add_argument("--population-threads", type=int, default=None, metavar="N",
                       help="threads of the population fleet in this process (default: one a core); its devices "
                            "compute the same numbers with any number (unlike --threads, which is the "
                            "coordinator's)")
    scale.add_argument("--population-processes", type=int, default=None, metavar="N",
                       help="run the population fleet's devices in N processes of this machine, one thread each "
                            "(threads in one process stop scaling near 2 cores); the same numbers as in one "
                            "process")
    p.set_defaults(func=run_train)


def add_run_arguments(p) -> None:
    """The options of a training run, shared by ``train`` (emulated devices) and ``serve`` (devices over the
    network)."""
    p.add_argument("--data", required=True, type=Path, help="prepared data set directory")
    p.add_argument("--out", required=True, type=Path, metavar="RUN", help="run directory")
    p.add_argument("--rounds", type=int, default=None, help="rounds of Algorithm 1 (default: the config's)")
    privacy = p.add_mutually_exclusive_group(required=True)
    privacy.add_argument("--epsilon", type=float, default=None,
                         help="total ε of the whole run (composed over every release); noise is calibrated to it")
    privacy.add_argument("--no-privacy", action="store_true", help="the same protocol without noise")
    p.add_argument("--delta", type=float, default=None,
                   help="total δ (default: min(1e-5, N^-1.1) for N devices, well below 1/N)")
    p.add_argument("--mechanism", choices=("gaussian", "laplace"), default=None,
                   help="how rewards are released under --epsilon: gaussian (default: one centred reward per "
                        "generated day, distributed discrete Gaussian noise, region sums for the environment) or "
                        "laplace (the PateGail paper's mechanism: Σ D and Σ D² of every pair)")
    p.add_argument("--method", choices=("pategail", "dp-fedavg", "hybrid"), default=None,
                   help="pategail (default): noisy rewards of on-device discriminators, PPO on the coordinator; "
                        "dp-fedavg: on-device maximum likelihood, clipped model deltas with Gaussian noise "
                        "(docs/dp-fedavg.md); hybrid: DP-FedAvg rounds first, then PateGail's")
    p.add_argument("--adjacency", choices=("zero-out", "replace-one"), default=None,
                   help="the neighbouring relation the target ε applies to (default zero-out: one user's data "
                        "replaced by nothing, the device still taking part); both relations' ε are reported")
    p.add_argument("--data-derived-cells", action="store_true",
                   help="with --epsilon: accept a cell table built from the users' own fixes (it is released "
                        "without noise and reveals which squares someone visited; every report says the guarantee "
                        "excludes it) instead of refusing it; for research on data sets whose map is public anyway")
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
                   help="torch threads of the coordinator (default 1: the coordinator's numbers then do not depend "
                        "on the process, and it was faster than 2 on a shared 2-core machine; BENCHMARKS.md)")


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
    if getattr(args, "method", None) is not None:
        overrides["method"] = args.method
    for name in ("mechanism", "adjacency"):
        value = getattr(args, name, None)
        if value is not None:
            if args.no_privacy:
                raise PategailError(f"--{name} goes with --epsilon, not with --no-privacy")
            overrides[name] = value
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
    if args.population_threads is not None and args.population_threads < 1:
        raise PategailError(f"--population-threads {args.population_threads}: must be at least 1")
    if args.population_processes is not None:
        if args.population_processes < 1:
            raise PategailError(f"--population-processes {args.population_processes}: must be at least 1")
        if args.population_threads is not None or args.ray_address is not None or args.ray_workers is not None:
            raise PategailError("--population-processes runs the devices in processes of one thread each; leave "
                                "out --population-threads and --ray-address/--ray-workers")
    # Multi-threaded CPU kernels split reductions by thread count and timing, so two processes with the same
    # seed drifted apart by a float quantum that the adversarial game amplifies; one thread is bit-exact.
    torch.set_num_threads(args.threads)
    dataset = load_dataset(args.data)
    check_cell_table(config, dataset, args)
    run = args.out
    population = None
    if args.population is not None:
        if args.devices is not None:
            raise PategailError("--population N builds N devices by resampling users; leave out --devices")
        from pategail.population.resample import resample_population
        population = resample_population(dataset.users, args.population, args.seed, args.population_days)
        users = population.users
    elif args.population_days is not None:
        raise PategailError("--population-days goes with --population N")
    else:
        users = choose_users(dataset.users, args.devices, args.seed)
    config = config.for_devices(len(users))      # δ and the environment's share from the device count
    fleet_kind = args.fleet if args.fleet != "auto" else ("sdk" if len(users) <= SDK_FLEET_MAX else "population")
    if fleet_kind == "sdk" and (args.ray_address is not None or args.ray_workers is not None
                                or args.population_threads is not None or args.population_processes is not None):
        raise PategailError("--ray-address/--ray-workers/--population-threads/--population-processes run the "
                            "population fleet; add --fleet population")
    # What the run's journal and devices belong to: a resumed run must be the same run (a release in the
    # journal is re-used, so it must come from the same configuration, seed, data and devices).
    identity = {"config": config.to_dict(), "seed": args.seed, "data": str(args.data.resolve()),
                "users": [int(u) for u in users]}
    if population is not None or fleet_kind != "sdk":
        identity["fleet"] = fleet_kind
        identity["population"] = None if population is None else population.describe()
    check_run_marker(run, identity, args.resume)
    with _run_log(run / "train.log", quiet_terminal=not (args.verbose or args.no_progress)) as console_level:
        fleet = _fleet(args, fleet_kind, dataset, users, population, run, config)
        try:
            return run_coordinator(args, config, dataset, run, fleet, downstream_config, console_level,
                                   population=population)
        finally:
            if hasattr(fleet, "close"):
                fleet.close()


def check_cell_table(config, dataset, args) -> None:
    """A private run's cell table must be public: every bundle, model and region tree carries it, without
    noise. One built from the users' fixes is refused unless ``--data-derived-cells`` accepts it."""
    if not config.private or dataset.public_cell_table:
        return
    if getattr(args, "data_derived_cells", False):
        log.warning("%s: the cell table was built from the users' own fixes; it is released without noise and "
                    "the privacy guarantee does not cover it (--data-derived-cells)", args.data)
        return
    raise PategailError(f"{args.data}: its cell table was built from the users' own fixes (it reveals which squares "
                        "someone visited), so a private run refuses it; make a public map with `pategail data "
                        "prepare ... --public-cells --bbox MIN_LAT,MIN_LON,MAX_LAT,MAX_LON` (or accept it with "
                        "--data-derived-cells)")


def check_run_marker(run: Path, identity: dict, resume: bool) -> None:
    """What a run's journal and devices belong to, kept in ``run/run.json``: a resumed run must be the same
    run (a release in the journal is re-used, so it must come from the same configuration, seed, data and
    devices). Writes it for a new run; PategailError for a mismatch."""
    marker = run / "run.json"
    if marker.is_file():
        if not resume:
            raise PategailError(f"{run} holds a run already; add --resume to continue it, or choose another --out")
        recorded = json.loads(marker.read_text())
        if set(recorded.get("config", {})) != set(identity["config"]):
            raise PategailError(f"{marker}: this run was made by another version of pategail (its settings "
                                "differ in name, not only in value) and cannot be resumed; start it again in "
                                "another --out")
        if recorded != identity:
            from pategail.server.config import setting_differences
            changed = "; ".join(setting_differences(recorded, identity, "the run"))
            raise PategailError(f"{marker}: this run was started with other settings, data, seed or --devices "
                                f"({changed}); resume it with the same ones, or choose another --out")
    elif resume:
        raise PategailError(f"{run}: no run to resume")
    run.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(identity, indent=1) + "\n")


def _fleet(args, kind: str, dataset, users, population, run: Path, config):
    """The devices: SDK devices (the emulator) or the population simulation, from the run's initial bundle."""
    from pategail.emulator import EmulatedFleet

    initial_bundle = ensure_initial_bundle(config, dataset, args.seed, run)
    if kind == "sdk":
        return EmulatedFleet(dataset, users, run / "devices", initial_bundle, seed=args.seed, population=population)
    from pategail.population.fleet import PopulationFleet
    from pategail.population.resample import one_device_per_user
    return PopulationFleet(dataset, population or one_device_per_user(users, args.seed, len(dataset.users)),
                           initial_bundle, seed=args.seed, state_dir=run / "population",
                           ray_address=args.ray_address, ray_workers=args.ray_workers,
                           workers=args.population_threads, processes=args.population_processes)


def ensure_initial_bundle(config, dataset, seed: int, run: Path) -> Path:
    """``run/bundle-initial``, the bundle the devices start from (written once, declaring the run's plan)."""
    from pategail.server.coordinator import run_plan

    initial_bundle = run / "bundle-initial"
    if not (initial_bundle / "manifest.json").is_file():
        write_initial_bundle(config, dataset, seed, initial_bundle,
                             privacy=run_plan(config, dataset.cells, run / "checkpoint").declare(
                                 config.min_survivors, config.secagg_colluders))
    return initial_bundle


def run_coordinator(args, config, dataset, run: Path, fleet, downstream_config, console_level: int, *,
                    population=None, signing_key=None, on_progress=None) -> int:
    """Algorithm 1 over ``fleet`` (any :class:`~pategail.server.fleet.Fleet`) in ``run``, resumed with
    ``args.resume``; then the outputs, the downstream evaluation and the final policy sent to the devices.
    ``on_progress(coordinator)``: called once resumed and after every round (the service's status)."""
    from pategail.metrics.guard import GUARD_QUANTILE, distinct_cells_threshold
    from pategail.server.fedavg.coordinator import coordinator_class
    from pategail.server.privacy.summary import plan_line

    coordinator = coordinator_class(config)(config, fleet, dataset.cells, run, seed=args.seed,
                                            signing_key=signing_key)
    if args.resume and not coordinator.resume():
        log.info("%s: no round was checkpointed yet; starting again (journalled releases are re-used)", run)
    n_devices = len(fleet.device_ids)
    line = plan_line(coordinator.plan, n_devices, config.beta, config)
    log.info(line)
    if config.tolerance_experiment:        # on the terminal whatever the log level: this run is not private
        print(line, flush=True)
    elif coordinator.plan.private and config.method != "dp-fedavg":   # say whether it can learn, before training
        from pategail.server.privacy.feasibility import plan_feasibility
        feasible = plan_feasibility(coordinator.plan, n_devices)
        print(f"privacy plan: {feasible.line()}", flush=True)
        if feasible.can_learn is False:
            log.warning("this run cannot be expected to learn: the noise on each released mean reward (std %.3g) "
                        "is above the measured tolerance %g at granularity %s (pategail privacy-plan --devices %d "
                        "--epsilon %g compares mechanisms and granularities)", feasible.noise_std,
                        feasible.tolerance, feasible.granularity, n_devices, config.target_epsilon)
    if on_progress is not None:
        on_progress(coordinator)

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
        if on_progress is not None:
            on_progress(coordinator)

    from tqdm.contrib.logging import logging_redirect_tqdm

    from pategail.errors import IntegrityError
    from pategail.sdk.secagg.errors import AbortAfterUnmask, SecAggAbort, TamperDetected
    try:
        with logging_redirect_tqdm():
            _set_console_level(console_level)     # tqdm's handler replaces the console one, without its level
            coordinator.train(on_round)
    except AbortAfterUnmask as err:
        raise PategailError(f"round {coordinator.round + 1} stopped after its unmasking ({err}); its release counts "
                            "against the budget; the run is checkpointed: add --resume to retry") from None
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
    write_outputs(coordinator, dataset, run, seed=args.seed, fleet=fleet.describe(),
                  population=None if population is None else {**population.describe(),
                                                                "max_copies": population.max_copies})
    if downstream_config is not None:
        from pategail.evaluation.options import extend_run_report
        extend_run_report(run, dataset, downstream_config)
    accepted = coordinator.publish_policy((run / "bundle" / "policy.onnx").read_bytes())
    log.info("%d of %d devices accepted the final policy", accepted, n_devices)
    print((run / "report.md").read_text())
    print(f"Log of every round: {run / 'train.log'}")
    return 0


def _set_console_level(level: int) -> None:
    for handler in logging.getLogger().handlers:
        if not isinstance(handler, logging.FileHandler):
            handler.setLevel(level)


@contextlib.contextmanager
def _run_log(path: Path, quiet_terminal: bool, max_bytes: int = 0):
    """Every INFO line of the run into ``path`` (appended: a resumed run continues its log); on the terminal
    only warnings while ``quiet_terminal`` (the progress bar carries the per-round figures). Yields the
    terminal's level. ``max_bytes``: rotate the log at that size, keeping 4 older ones (0: never)."""
    from logging.handlers import RotatingFileHandler

    root = logging.getLogger()
    consoles = [h for h in root.handlers if not isinstance(h, logging.FileHandler)]
    saved = root.level, [h.level for h in consoles]
    console_level = max(logging.WARNING if quiet_terminal else logging.INFO, root.level)
    file_handler = RotatingFileHandler(path, maxBytes=max_bytes, backupCount=4 if max_bytes else 0,
                                       encoding="utf-8")
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
    from pategail.server.coordinator import policy_config
    from pategail.server.policy import Policy

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        policy0 = Policy(policy_config(config, dataset.n_cells))
        torch.manual_seed(seed + 1)
        discriminator = Discriminator()
    return export_bundle(policy0, discriminator, out, training_config=discriminator_training(config),
                         environment=Environment(dataset.cells, config.alpha, config.candidates,
                                                       action_rates=config.uses_action_prior), privacy=privacy,
                         policy_training=config.method != "pategail")

