"""One device's DP-FedAvg round against its PateGail round, on the same users: CPU time of ``Device.handle`` for
a FedAvgRequest (local epochs of maximum likelihood over the owner's days with ONNX Runtime training, the delta,
its clipping) and for a RoundRequest (k discriminator steps, scoring the generated pairs), and the request and
pending-vector sizes. Process CPU time (every thread of the process), so the numbers hold on a loaded machine.

    .venv/bin/python benchmarks/fedavg_device_round.py --data runs/pategail-geolife-public [--users 8]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pategail.data.dataset import load_dataset
from pategail.sdk.device import Device
from pategail.sdk.fedavg_round import PolicyTrainer
from pategail.sdk.messages import FedAvgRequest, RoundRequest
from pategail.server.config import TrainConfig
from pategail.training import write_initial_bundle

parser = argparse.ArgumentParser()
parser.add_argument("--data", type=Path, required=True)
parser.add_argument("--users", type=int, default=8)
args = parser.parse_args()
data = load_dataset(args.data)
config = TrainConfig(method="dp-fedavg")
fa = config.fedavg
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    bundle = write_initial_bundle(config, data, 0, tmp / "bundle")
    theta = None
    rng = np.random.default_rng(0)
    generated = data.train_days[rng.choice(len(data.train_days), 96, replace=False)]
    homes = generated[:, 0].astype(np.int32)
    from pategail.sdk.features import label_actions
    round_request = RoundRequest(1, config.discriminator.steps, config.discriminator.batch_size, generated, homes,
                                 label_actions(generated, homes))
    users = sorted(data.users.tolist(), key=lambda u: len(data.user_days(u)))
    picks = [users[int(i)] for i in np.linspace(0, len(users) - 1, args.users)]
    rows = []
    for k, user in enumerate(picks):
        device = Device(tmp / f"d{k}", k, rng=np.random.default_rng(k))
        device.add_days(data.user_days(user))
        device.install_bundle(bundle)
        if theta is None:
            theta = PolicyTrainer(device.bundle).get_parameters()
            fed = FedAvgRequest(1, fa.local_epochs, fa.batch_size, fa.client_lr, fa.clip_norm, theta).to_bytes()
            pg = round_request.to_bytes()
        device.handle(fed)                       # warm: sessions opened, days featurised
        t0 = time.process_time()
        device.handle(fed)
        t_fed = time.process_time() - t0
        up_fed = len(device.pending)
        device.handle(pg)
        t0 = time.process_time()
        device.handle(pg)
        t_pg = time.process_time() - t0
        rows.append((len(data.user_days(user)), t_fed, t_pg, up_fed, len(device.pending)))
    print(f"P = {len(theta):,} trainable parameters; FedAvgRequest {len(fed):,} B, RoundRequest {len(pg):,} B")
    print("| device's days | DP-FedAvg round CPU s | PateGail round CPU s | pending values (DP-FedAvg / PateGail) |")
    print("|---:|---:|---:|---|")
    for n, a, b, u1, u2 in rows:
        print(f"| {n} | {a:.2f} | {b:.2f} | {u1:,} / {u2:,} |")
    print(f"| median | {np.median([r[1] for r in rows]):.2f} | {np.median([r[2] for r in rows]):.2f} | |")
