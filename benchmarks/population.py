"""Benchmark of the population fleet: set-up time, seconds per round and peak RSS of a resampled population
of N devices under the default configuration (pategail.population; BENCHMARKS.md "The population fleet").

    .venv/bin/python benchmarks/population.py --data runs/pategail-geolife --devices 1000 --rounds 3

Prints one JSON line. ``--ray-workers W`` runs the shards on a local Ray cluster of W workers, ``--processes P``
in P processes of this machine (one thread each).
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

import torch

from pategail.data.dataset import load_dataset
from pategail.population.fleet import PopulationFleet
from pategail.population.resample import resample_population
from pategail.server.config import secagg_degree_for
from pategail.server.coordinator import Coordinator

from common import initial_bundle, peak_rss_gb, train_config


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ray-workers", type=int, default=None)
    ap.add_argument("--processes", type=int, default=None, help="shard processes (default: shards in this process)")
    ap.add_argument("--keep", type=Path, default=None, help="run directory to keep (default: a temporary one)")
    ap.add_argument("--config", type=Path, default=None, help="JSON of TrainConfig settings (default: the defaults)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(1)
    ds = load_dataset(args.data)
    config = train_config(args.config, rounds=args.rounds).for_devices(args.devices)
    root = args.keep or Path(tempfile.mkdtemp(prefix="pategail-population-"))
    try:
        t0 = time.perf_counter()
        bundle = initial_bundle(config, ds, 0, root / "bundle-initial", root / "checkpoint")
        population = resample_population(ds.users, args.devices, seed=0)
        fleet = PopulationFleet(ds, population, bundle, seed=0, state_dir=root / "population",
                                ray_workers=args.ray_workers, processes=args.processes)
        coordinator = Coordinator(config, fleet, ds.cells, root, seed=0)
        setup = time.perf_counter() - t0
        t = time.perf_counter()
        coordinator.learn_initial_states()
        environment = time.perf_counter() - t
        times = []
        coordinator.train(on_round=lambda s: times.append(s.seconds))
        print(json.dumps({"devices": args.devices, "source_users": len(ds.users), "rounds": args.rounds,
                          "ray_workers": args.ray_workers, "processes": args.processes,
                          "shards": len(fleet.shards),
                          "secagg_degree_sdk_default": secagg_degree_for(args.devices),
                          "setup_seconds": round(setup, 1), "environment_release_seconds": round(environment, 1),
                          "seconds_per_round": [round(x, 1) for x in times],
                          "peak_rss_gb_driver": round(peak_rss_gb(), 2),
                          "days_per_round": config.days_per_round, "disc_steps": config.discriminator.steps}))
    finally:
        if "fleet" in locals():
            fleet.close()
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
