"""CPU time of one population shard's DP-FedAvg round (``pategail.population.fedavg.shard_fedavg``) on the
devices of a resampled population: one process, one torch thread, the default FedAvg settings, the initial
policy of a DP-FedAvg run on ``--data``. Process CPU time, so the numbers hold on a loaded machine; peak RSS of
the whole process (data set, bundle, torch) beside it.

    .venv/bin/python benchmarks/fedavg_population_shard.py --data runs/pategail-geolife-public [--devices 128]
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from pategail.data.dataset import load_dataset
from pategail.population import fedavg
from pategail.population.fleet import device_model
from pategail.sdk.bundle import load_bundle
from pategail.sdk.features import infer_home
from pategail.sdk.fedavg_round import PolicyTrainer
from pategail.sdk.messages import FedAvgRequest
from pategail.server.config import TrainConfig
from pategail.training import write_initial_bundle

parser = argparse.ArgumentParser()
parser.add_argument("--data", type=Path, required=True)
parser.add_argument("--devices", type=int, default=128)
args = parser.parse_args()
torch.set_num_threads(1)                             # as a shard process runs
data = load_dataset(args.data)
config = TrainConfig(method="dp-fedavg")
fa = config.fedavg
with tempfile.TemporaryDirectory() as tmp:
    bundle_dir = write_initial_bundle(config, data, 0, Path(tmp) / "bundle")
    model = device_model(bundle_dir, 0)
    theta = PolicyTrainer(load_bundle(bundle_dir)).get_parameters()
users = np.random.default_rng(0).choice(data.users, args.devices)
tables = sorted({int(u) for u in users})
days = [data.user_days(u) for u in tables]
table_of = np.array([tables.index(int(u)) for u in users])
request = FedAvgRequest(1, fa.local_epochs, fa.batch_size, fa.client_lr, fa.clip_norm, theta)
trainer = fedavg.LocalTrainer(model.policy)
t0 = time.process_time()
total = fedavg.shard_fedavg(trainer, np.arange(args.devices), days, [infer_home(d) for d in days], table_of,
                            model.cells, 0, request)
cpu = time.process_time() - t0
print(f"{args.devices} devices "
      f"({np.mean([len(days[t]) for t in table_of]):.0f} days each on average), {cpu:.1f} s CPU = "
      f"{1000 * cpu / args.devices:.1f} ms a device; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10} MB; "
      f"Σ|upload| {np.abs(total).sum()}")
