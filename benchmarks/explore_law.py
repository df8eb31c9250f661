"""The learned explore law: the factors the devices' explore-law contributions give (no noise), next to the
maximum-likelihood binned law (iterated to convergence on the pooled moves), and what the law does to the
EPR model's km-mode JSD against the test days (an ablation: the `epr` baseline of reports keeps the pure
power law of Song et al.; `pategail train` generates with the learned factors).

Run: .venv/bin/python benchmarks/explore_law.py --data runs/pategail-geolife
"""
import argparse
import dataclasses
import time

import numpy as np

from pategail.baselines.epr import explore_ranks, fit_epr_baseline, sample_epr, user_homes
from pategail.data.dataset import load_dataset
from pategail.metrics.evaluate import evaluate_days
from pategail.sdk.epr import (DEFAULT_ALPHA, CellGeometry, explore_law_contribution, explore_rank_weights,
                              n_rank_bins, rank_bins)
from pategail.sdk.features import infer_home

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", required=True)
parser.add_argument("--seeds", type=int, default=3, help="EPR samples per law (mean reported)")
args = parser.parse_args()

ds = load_dataset(args.data)
t0 = time.perf_counter()
geometry = CellGeometry.build(ds.cells)
k = geometry.candidates
n_bins = n_rank_bins(k)
total = np.zeros(2 * n_bins)
for u in ds.users:
    days = ds.user_days(u)
    total += explore_law_contribution(days, infer_home(days), ds.cells, alpha=DEFAULT_ALPHA, candidates=k)
learned = total[:n_bins] / total[n_bins:]
t_devices = time.perf_counter() - t0

# pooled maximum likelihood of the same binned correction, by iterative scaling to convergence
homes = user_homes(ds.train_days, ds.train_users)
dest, unvisited = explore_ranks(geometry, ds.train_days, homes)
keep = dest > 0
onehot = np.eye(n_bins)[rank_bins(k)]
observed = np.bincount(rank_bins(k)[dest[keep] - 1], minlength=n_bins)
mle = np.ones(n_bins)
for _ in range(200):
    w = np.where(unvisited[keep], explore_rank_weights(k, DEFAULT_ALPHA, mle)[None, :], 0.0) @ onehot
    mle = mle * observed / (w / w.sum(1, keepdims=True)).sum(0)
print(f"{len(ds.users)} devices, {keep.sum()} explore moves within the {k} candidates; contributions "
      f"{t_devices:.1f} s")
print("| rank bin | " + " | ".join(f"{1 if b == 0 else 2 ** (b - 1) + 1}–{min(2 ** b, k)}" for b in range(n_bins))
      + " |")
print("|---|" + "---:|" * n_bins)
print("| learned (one step, device-weighted) | " + " | ".join(f"{f:.2f}" for f in learned) + " |")
print("| pooled maximum likelihood | " + " | ".join(f"{f / mle[-1] * learned[-1]:.2f}" for f in mle) + " |")

model = fit_epr_baseline(geometry, ds.train_days, ds.train_users)
# the factors correct the power law they were measured against; the epr model samples at its own fitted alpha
model = dataclasses.replace(model, alpha=DEFAULT_ALPHA) if abs(model.alpha - DEFAULT_ALPHA) > 1e-9 else model
rows = {}
for name, factors in (("epr (power law, fitted alpha)", None), ("epr + learned explore factors", learned)):
    scores = [evaluate_days(sample_epr(model, geometry, len(ds.test_days), np.random.default_rng(s), factors),
                            ds.test_days, ds.cells) for s in range(args.seeds)]
    rows[name] = {key: np.mean([s[key] for s in scores]) for key in scores[0]}
print()
print("| JSD (km) vs test days | " + " | ".join(rows[next(iter(rows))]) + " |")
print("|---|" + "---:|" * 5)
for name, r in rows.items():
    print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in r.values()) + " |")
print(f"({time.perf_counter() - t0:.1f} s; alpha of the epr rows = {model.alpha}; mean of {args.seeds} samples)")
