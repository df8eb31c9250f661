"""How training choices are judged without looking at the test days: the km-mode JSD of a run's
synthetic days (and of the epr baseline) to 2,350 sampled *training* days.

Run: .venv/bin/python benchmarks/training_days.py --data runs/pategail-geolife RUN [RUN ...]
"""
import argparse

import numpy as np

from pategail.baselines.epr import fit_epr_baseline, sample_epr
from pategail.data.dataset import load_dataset
from pategail.metrics.evaluate import evaluate_days
from pategail.sdk.epr import CellGeometry
from pategail.sdk.synthetic import read_synthetic_csv

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", required=True)
parser.add_argument("--days", type=int, default=2350, help="training days drawn as the reference")
parser.add_argument("runs", nargs="*", help="run directories holding synthetic.csv")
args = parser.parse_args()

ds = load_dataset(args.data)
ref = ds.train_days[np.random.default_rng(1).choice(len(ds.train_days), args.days, replace=False)]


def show(name, days):
    m = evaluate_days(days, ref, ds.cells)
    print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in m.values()) + " |", flush=True)


print("| JSD (km) vs training days | Radius | DailyLoc | Distance | G-rank | I-rank |")
print("|---|---:|---:|---:|---:|---:|")
geometry = CellGeometry.build(ds.cells)
show("epr", sample_epr(fit_epr_baseline(geometry, ds.train_days, ds.train_users), geometry, args.days,
                       np.random.default_rng(0)))
for run in args.runs:
    show(run, read_synthetic_csv(f"{run}/synthetic.csv", n_cells=ds.n_cells))
