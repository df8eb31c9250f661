"""`pategail train`: federated PateGail on the desktop emulator — the product's main job.

Builds one SDK device per user of the data set (each holding only that user's training days), runs the
coordinator's Algorithm 1 over them, and writes into RUN/: the model bundle, ``synthetic.csv``,
``report.json``, ``report.md`` and PNG plots. Every round is checkpointed; ``--resume`` continues a run.
"""
from __future__ import annotations

import logging
from pathlib import Path

from pategail.server.errors import PategailError
from pategail.training import SDK_FLEET_MAX

log = logging.getLogger(__name__)


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
    p.add_argument("--cells", choices=("dataset", "released"), default=None,
                   help="the run's cell table (config privacy.cells): dataset (default: the data folder's own, a "
                        "public map under --epsilon) or released (with --epsilon on a public map: the run's first "
                        "release chooses the squares enough devices visit, with noise and a threshold, counted in "
                        "the total ε; docs/cell-universe.md)")
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


def build_config(args):
    from pategail.server.config import TrainConfig
    overrides, privacy = {}, {}
    if args.rounds is not None:
        overrides["rounds"] = args.rounds
    if args.epsilon is not None:
        privacy["epsilon"] = args.epsilon
    if args.delta is not None:
        if args.no_privacy:
            raise PategailError("--delta goes with --epsilon, not with --no-privacy")
        privacy["delta"] = args.delta
    for name in ("mechanism", "adjacency", "cells"):
        value = getattr(args, name, None)
        if value is not None:
            if args.no_privacy:
                raise PategailError(f"--{name} goes with --epsilon, not with --no-privacy")
            privacy[name] = value
    if getattr(args, "method", None) is not None:
        overrides["method"] = args.method
    if privacy:
        overrides["privacy"] = privacy
    if args.config is not None:
        return TrainConfig.from_file(args.config, overrides)
    return TrainConfig.from_dict(overrides, where="options")


def run_train(args) -> int:
    import torch

    from pategail.data.dataset import load_dataset
    from pategail.emulator import choose_users
    from pategail.training import (check_cell_table, check_run_marker, make_fleet, release_cells, run_coordinator,
                                   run_log)

    config = build_config(args)
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
    check_cell_table(config, dataset, args.data, args.data_derived_cells)
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
    config = config.for_devices(len(users), dataset.n_cells)       # δ and the environment's share
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
    with run_log(run / "train.log", quiet_terminal=not (args.verbose or args.no_progress)) as console_level:
        fleet = make_fleet(fleet_kind, dataset, users, population, run, config, args.seed,
                           ray_address=args.ray_address, ray_workers=args.ray_workers,
                           threads=args.population_threads, processes=args.population_processes)
        try:
            if config.privacy.released_cells:       # the run's first release; then everything is on its table
                dataset = release_cells(config, dataset, run, fleet, args.seed)
            return run_coordinator(config, dataset, run, fleet, seed=args.seed, resume=args.resume,
                                   progress=not args.no_progress, downstream_config=downstream_config,
                                   console_level=console_level, population=population)
        finally:
            if hasattr(fleet, "close"):
                fleet.close()