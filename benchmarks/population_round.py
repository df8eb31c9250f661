"""Seconds per round of the population fleet alone: N simulated devices each train their discriminator and
score one round's generated pairs (pategail.population; BENCHMARKS.md "The population fleet").

    .venv/bin/python benchmarks/population_round.py --data runs/pategail-geolife --devices 10000 --rounds 2

No coordinator, no policy, no secure aggregation: the fleet is sent ``--rounds`` RoundRequests directly, each
with ``--days`` days drawn from the data set's real days in place of generated ones (a round costs the same
for any days of that shape: every device scores all of them). Prints one JSON line: set-up seconds (bundle +
fleet), seconds of each round (wall clock, and the CPU seconds of this process's threads: on a shared machine
the steadier figure), peak RSS of this process (Ray workers are separate processes: not counted),
the torch threads and the machine's load average. On a many-core machine: ``--workers`` = its cores, e.g.
``--devices 100000 --rounds 2 --workers 16 --state``.
Dependencies: the package itself (numpy, torch, threadpoolctl); ray only with ``--ray-workers``.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from pategail.data.dataset import load_dataset
from pategail.population.fleet import PopulationFleet
from pategail.population.resample import resample_population
from pategail.sdk.features import infer_home, label_actions
from pategail.sdk.messages import RoundRequest, to_bytes
from pategail.server.config import TrainConfig

from common import initial_bundle, peak_rss_gb


def stand_in_request(dataset, round_: int, n_days: int, config: TrainConfig, rng: np.random.Generator) -> RoundRequest:
    """A RoundRequest of ``n_days`` real days of random users (homes and actions labelled as the SDK does)."""
    users = rng.choice(dataset.users, n_days)
    days, homes = [], []
    for u in users:
        own = dataset.user_days(int(u))
        days.append(own[rng.integers(len(own))])
        homes.append(infer_home(own))
    days, homes = np.asarray(days, dtype=np.int32), np.asarray(homes, dtype=np.int32)
    return RoundRequest(round_, config.discriminator.steps, config.discriminator.batch_size, days, homes,
                        label_actions(days, homes).astype(np.int8))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path, help="a prepared data set (pategail data prepare)")
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--days", type=int, default=TrainConfig().days_per_round, help="generated days a round")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch's threads (default 1, as `pategail train`: the fleet's parallelism is --workers)")
    ap.add_argument("--workers", type=int, default=None,
                    help="threads of each in-process shard (default: one a core)")
    ap.add_argument("--shards", type=int, default=1, help="in-process shards (ignored with --ray-workers)")
    ap.add_argument("--ray-workers", type=int, default=None, help="run the shards on a local Ray cluster")
    ap.add_argument("--state", action="store_true", help="write the fleet's per-round state files as a run does")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    config = TrainConfig(days_per_round=args.days)
    dataset = load_dataset(args.data)
    root = Path(tempfile.mkdtemp(prefix="pategail-population-round-"))
    try:
        t0 = time.perf_counter()
        bundle = initial_bundle(config, dataset, 0, root / "bundle")
        population = resample_population(dataset.users, args.devices, seed=0)
        fleet = PopulationFleet(dataset, population, bundle, seed=0,
                                state_dir=root / "population" if args.state else None,
                                shards=args.shards, ray_workers=args.ray_workers,
                                **({} if args.workers is None else {"workers": args.workers}))
        setup = time.perf_counter() - t0
        rng = np.random.default_rng(0)
        times, cpu = [], []
        for r in range(1, args.rounds + 1):
            message = to_bytes(stand_in_request(dataset, r, args.days, config, rng))
            t, c = time.perf_counter(), time.process_time()
            fleet.request(0, message)
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        out = {"devices": args.devices, "source_users": len(dataset.users), "days_per_round": args.days,
               "disc_steps": config.discriminator.steps, "threads": torch.get_num_threads(), "shards": len(fleet.shards),
               "workers": getattr(fleet.shards[0], "workers", None) if not args.ray_workers else 1,
               "ray_workers": args.ray_workers, "setup_seconds": round(setup, 1),
               "seconds_per_round": [round(x, 2) for x in times],
               "ms_per_device_round": round(1000 * min(times) / args.devices, 3),
               "cpu_seconds_per_round": [round(x, 2) for x in cpu],
               "peak_rss_gb": round(peak_rss_gb(), 2), "load_average": [round(x, 2) for x in os.getloadavg()]}
        print(json.dumps(out), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
