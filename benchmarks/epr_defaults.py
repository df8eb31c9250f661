"""How the EPR environment's defaults were chosen: for each candidate-set size K, the share of real explore
moves whose destination is among the K nearest cells, and the maximum-likelihood rank exponent alpha.

Run: .venv/bin/python benchmarks/epr_defaults.py --data runs/pategail-geolife
(on a data set prepared from the paper's GeoLife folder; training days only).
"""
import argparse
import time

import numpy as np

from pategail.baselines.epr import explore_ranks, fit_alpha, user_homes
from pategail.data.dataset import load_dataset
from pategail.sdk.epr import CellGeometry

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", required=True)
parser.add_argument("--sizes", default="50,100,200,500,1000,2000")
args = parser.parse_args()

ds = load_dataset(args.data)
sizes = [int(s) for s in args.sizes.split(",")]
t0 = time.perf_counter()
geometry = CellGeometry.build(ds.cells, candidates=max(sizes))
homes = user_homes(ds.train_days, ds.train_users)
ranks, unvisited = explore_ranks(geometry, ds.train_days, homes)
print(f"{len(ranks)} explore moves in {len(ds.train_days)} training days of {len(ds.users)} users")
print("| candidates K | explore moves within K | fitted alpha |")
print("|---:|---:|---:|")
for k in sizes:
    within = np.where(ranks > k, 0, ranks)
    print(f"| {k} | {(within > 0).mean():.1%} | {fit_alpha(within, unvisited[:, :k]):.2f} |")
print(f"({time.perf_counter() - t0:.1f} s)")
