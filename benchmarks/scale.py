"""SCALE TEST — not a quality benchmark: seconds per round of the coordinator with many emulated devices.

A data set has a limited number of users, so this scale test (and only this one) gives several devices
copies of one user's days: device i holds the days of user i mod n_users. Measures the wall-clock seconds of
each training round (sampling, device training and scoring, secure aggregation, PPO) after the
initial-state round.

Run: .venv/bin/python benchmarks/scale.py --data runs/pategail-geolife --devices 100 --rounds 2
"""
import argparse
import json
import logging
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from pategail.data.dataset import load_dataset
from pategail.emulator import InProcessFleet
from pategail.export.bundle import export_bundle
from pategail.export.discriminator import Discriminator
from pategail.sdk.bundle import Environment
from pategail.sdk.device import Device
from pategail.server.config import TrainConfig, secagg_degree_for
from pategail.server.coordinator import Coordinator
from pategail.server.policy import Policy, PolicyConfig


class CopiedFleet(InProcessFleet):
    """SCALE TEST ONLY: device i holds a copy of user (i mod n_users)'s days."""

    def __init__(self, dataset, n_devices, root, bundle):
        users = dataset.users
        self.devices = {}
        for i in range(n_devices):
            d = Device(root / f"device-{i:05d}", i, rng=np.random.default_rng([7, i]))
            d.add_days(dataset.user_days(int(users[i % len(users)])))
            d.install_bundle(bundle)
            self.devices[i] = d
        self.device_ids = tuple(self.devices)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--degree", type=int, default=None, help="SecAgg+ neighbours (default: chosen from the devices, "
                    "pategail.server.config.secagg_degree_for)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    ds = load_dataset(args.data)
    degree = secagg_degree_for(args.devices, args.degree)
    config = TrainConfig(rounds=args.rounds, secagg={"degree": degree})
    root = Path(tempfile.mkdtemp(prefix="pategail-scale-"))
    try:
        t0 = time.perf_counter()
        bundle = export_bundle(Policy(PolicyConfig(n_cells=ds.n_cells)), Discriminator(), root / "bundle",
                               environment=Environment(ds.cells, config.environment.alpha, config.environment.candidates))
        fleet = CopiedFleet(ds, args.devices, root / "devices", bundle)
        setup = time.perf_counter() - t0
        coordinator = Coordinator(config, fleet, ds.cells, root / "run", seed=0)
        times = []
        t = time.perf_counter()
        coordinator.train(on_round=lambda s: times.append(s.seconds))
        print(json.dumps({"devices": args.devices, "secagg": {"degree": degree}, "setup_seconds": round(setup, 1), "initial_state_round_plus_training_seconds": round(time.perf_counter() - t, 1), "seconds_per_round": [round(x, 1) for x in times], "days_per_round": config.days_per_round, "discriminator": {"steps": config.discriminator.steps}}))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    torch.set_num_threads(2)
    main()
