"""How training choices are judged without looking at the test days: the km-mode JSDs and the spatial metrics
(Density, Trips, Hot-20) of a run's synthetic days to 2,350 sampled *training* days — the same reference as
benchmarks/game.py (rng 1), with the floor (other training days), epr and markov on it, so a `pategail train`
run (e.g. a private one, which game.py does not run) is judged as game runs are.

Run: .venv/bin/python benchmarks/training_days.py --data runs/pategail-geolife RUN [RUN ...] [--json OUT]

A RUN is a directory holding synthetic.csv (`pategail train` writes it) or a synthetic CSV file itself.
"""
import argparse
import json
from pathlib import Path

import numpy as np

from pategail.baselines.epr import fit_epr_baseline, sample_epr
from pategail.baselines.markov import fit_markov, sample_markov
from pategail.data.dataset import load_dataset
from pategail.metrics.evaluate import evaluate_days
from pategail.metrics.spatial import spatial_metrics
from pategail.sdk.epr import CellGeometry
from pategail.sdk.synthetic import read_synthetic_csv

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", required=True)
parser.add_argument("--days", type=int, default=2350, help="training days drawn as the reference")
parser.add_argument("--json", type=Path, help="also write every row's numbers here")
parser.add_argument("runs", nargs="*", help="run directories holding synthetic.csv, or synthetic CSV files")
args = parser.parse_args()

ds = load_dataset(args.data)
picked = np.random.default_rng(1).choice(len(ds.train_days), min(args.days, len(ds.train_days)), replace=False)
ref = ds.train_days[picked]
rest = np.delete(ds.train_days, picked, axis=0)
rows = {}


def show(name, days):
    rows[name] = {**evaluate_days(days, ref, ds.cells), **spatial_metrics(days, ref, ds.cells)}
    print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in rows[name].values()) + " |", flush=True)


print("| vs training days | Radius | DailyLoc | Distance | G-rank | I-rank | Density | Trips | Hot-20 ↑ |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
if len(rest):
    show("floor", rest[np.random.default_rng(3).choice(len(rest), min(len(ref), len(rest)), replace=False)])
geometry = CellGeometry.build(ds.cells)
show("epr", sample_epr(fit_epr_baseline(geometry, ds.train_days, ds.train_users), geometry, len(ref),
                       np.random.default_rng(0)))
show("markov", sample_markov(fit_markov(ds.train_days, ds.n_cells), len(ref), np.random.default_rng(2)))
for run in args.runs:
    path = Path(run)
    show(run, read_synthetic_csv(path / "synthetic.csv" if path.is_dir() else path, n_cells=ds.n_cells))
if args.json:
    args.json.write_text(json.dumps(rows, indent=1) + "\n")
