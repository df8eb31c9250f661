"""Score finished runs against the TRAINING days of their data set (how DP-FedAvg's defaults were chosen: never
the test days): the five km JSDs of each run's synthetic.csv to the training days.

    .venv/bin/python benchmarks/fedavg_train_days.py runs/pategail-geolife-public runs/fa/tune-*
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pategail.data.dataset import load_dataset
from pategail.metrics.evaluate import METRIC_NAMES, evaluate_days
from pategail.sdk.synthetic import read_synthetic_csv

ap = argparse.ArgumentParser(description="the five km JSDs of finished runs' synthetic.csv to the TRAINING days of "
                                         "their data set: a markdown table on stdout")
ap.add_argument("data", type=Path, help="the prepared data set the runs trained on")
ap.add_argument("runs", nargs="+", type=Path, help="finished runs' folders (synthetic.csv, report.json)")
args = ap.parse_args()
data = load_dataset(args.data)
train = data.train_days
print("| run | fedavg settings | rounds | " + " | ".join(METRIC_NAMES) + " | mean |")
print("|---|---|---|" + "---|" * (len(METRIC_NAMES) + 1))
for run in args.runs:
    days = read_synthetic_csv(run / "synthetic.csv", n_cells=data.n_cells)
    row = evaluate_days(days, train, data.cells)
    cfg = json.loads((run / "report.json").read_text())["training"]["config"]
    fa = cfg["fedavg"] if cfg.get("method") == "dp-fedavg" else {}
    brief = ", ".join(f"{k}={v}" for k, v in fa.items() if k in ("local_epochs", "batch_size", "client_lr",
                                                                  "clip_norm", "server_optimizer", "server_lr"))
    print(f"| {run.name} | {brief or cfg.get('method', 'pategail')} | {cfg['rounds']} | "
          + " | ".join(f"{row[m]:.4f}" for m in METRIC_NAMES) + f" | {np.mean(list(row.values())):.4f} |")
