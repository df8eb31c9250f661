"""Memory of the SDK fleet: resident set size (RSS) of one process running N emulated SDK devices, per round.

The desktop emulator (:class:`pategail.emulator.EmulatedFleet`) keeps one SDK ``Device`` per user in one
process. This benchmark measures where that process's memory goes: RSS after the imports, after the devices
are set up (stores written, bundles installed), after the environment release, after every training round,
and after the coordinator publishes a policy to every device; with the number of live ONNX Runtime objects
(inference sessions, training modules, optimizers, checkpoint states) at each point, and optionally the
Python-side allocations (tracemalloc) that grew most between the first and the last round.

A data set has a limited number of users: device i holds the days of a user drawn with replacement (seeded)
from the data set's users — a RESAMPLED population, not N distinct people.

Run: .venv/bin/python benchmarks/fleet_memory.py --data runs/pategail-geolife --devices 200 --rounds 5 --degree 40
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import shutil
import tempfile
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from pategail.data.dataset import Dataset, load_dataset
from pategail.emulator import EmulatedFleet
from pategail.server.config import TrainConfig
from pategail.server.coordinator import Coordinator

from common import initial_bundle, rss_mib

ORT_TYPES = ("InferenceSession", "Module", "Optimizer", "CheckpointState")


def live_ort_objects() -> dict[str, int]:
    """How many ONNX Runtime Python objects of each kind are alive (each holds native sessions or state)."""
    gc.collect()
    counts = Counter(type(o).__name__ for o in gc.get_objects() if type(o).__name__ in ORT_TYPES
                     and str(getattr(type(o), "__module__", "")).startswith("onnxruntime"))
    return {name: counts.get(name, 0) for name in ORT_TYPES}


def resampled_population(dataset: Dataset, n_devices: int, seed: int) -> tuple[Dataset, np.ndarray]:
    """A data set whose user i holds the training days of a user of ``dataset`` drawn with replacement."""
    rng = np.random.default_rng([seed, 0x9E])
    drawn = rng.choice(dataset.users, n_devices, replace=True)
    days, users = [], []
    for i, user in enumerate(drawn):
        own = dataset.user_days(int(user))
        days.append(own)
        users.append(np.full(len(own), i, dtype=np.int32))
    population = Dataset(cells=dataset.cells, train_days=np.concatenate(days), train_users=np.concatenate(users),
                         test_days=dataset.test_days, test_users=dataset.test_users,
                         meta={**dataset.meta, "population": "resampled"}, where="resampled population")
    return population, np.arange(n_devices)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path, help="prepared data set directory")
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--degree", type=int, default=None, help="secagg_degree (default: the configuration's)")
    ap.add_argument("--config", type=Path, default=None, help="JSON TrainConfig overrides (default: defaults)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep-sessions", action="store_true",
                    help="keep every device's ONNX Runtime sessions open between requests (the emulator releases them)")
    ap.add_argument("--tracemalloc", action="store_true", help="also report Python allocations that grew")
    ap.add_argument("--json", type=Path, default=None, help="write the measurements here too")
    ap.add_argument("--keep", type=Path, default=None, help="work in this directory and keep it")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    overrides = json.loads(args.config.read_text()) if args.config else {}
    overrides["rounds"] = args.rounds
    overrides["average_rounds"] = min(overrides.get("average_rounds", 20), args.rounds)
    if args.degree is not None:
        overrides["secagg"] = {"degree": args.degree}
    config = TrainConfig.from_dict(overrides, where="options").for_devices(args.devices)
    if args.tracemalloc:
        tracemalloc.start(8)
    points = []

    def point(label: str, **extra) -> None:
        rss, peak = rss_mib()
        row = {"at": label, "rss_mib": round(rss, 1), "peak_mib": round(peak, 1), **live_ort_objects(), **extra}
        points.append(row)
        print(json.dumps(row), flush=True)

    point("imports")
    dataset, users = resampled_population(load_dataset(args.data), args.devices, args.seed)
    root = args.keep or Path(tempfile.mkdtemp(prefix="pategail-fleet-memory-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        bundle = initial_bundle(config, dataset, args.seed, root / "bundle-initial", root / "run" / "checkpoint")
        # (keep_sessions is passed only when asked for, so the script also measures code from before it existed)
        fleet = EmulatedFleet(dataset, users, root / "devices", bundle, seed=args.seed,
                              **({"keep_sessions": True} if args.keep_sessions else {}))
        coordinator = Coordinator(config, fleet, dataset.cells, root / "run", seed=args.seed)
        point("set-up", seconds=round(time.perf_counter() - t0, 1))
        t0 = time.perf_counter()
        coordinator.releases.rebuild_accountant()
        coordinator.learn_initial_states()
        point("environment release", seconds=round(time.perf_counter() - t0, 1))
        snapshots = []

        def on_round(stats) -> None:
            point(f"round {stats.round}", seconds=round(stats.seconds, 1))
            if args.tracemalloc and stats.round in (1, config.rounds):
                snapshots.append(tracemalloc.take_snapshot())

        coordinator.train(on_round)
        t0 = time.perf_counter()
        accepted = coordinator.publish_policy((bundle / "policy.onnx").read_bytes())
        point("policy published", seconds=round(time.perf_counter() - t0, 1), accepted=accepted)
        if len(snapshots) == 2:
            for stat in snapshots[1].compare_to(snapshots[0], "filename")[:10]:
                print("tracemalloc:", stat)
        summary = {"devices": args.devices, "secagg_degree": config.secagg.degree, "rounds": config.rounds,
                   "keep_sessions": args.keep_sessions,
                   "days_per_round": config.days_per_round, "disc_steps": config.discriminator.steps,
                   "population": "resampled", "points": points}
        if args.json:
            args.json.write_text(json.dumps(summary, indent=1) + "\n")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
