"""Choosing the place law (d-EPR relevance prior, return to the place just left) on training days only: the
epr rule model with each environment variant, scored in km mode and with the spatial metrics against 2,350
sampled *training* days (benchmarks/training_days.py's reference). The place law comes from the devices'
contributions summed without noise (what a --no-privacy run releases).

Run: .venv/bin/python benchmarks/place_law.py --data runs/pategail-geolife [--test]
(--test adds the final rows against the test days; never used for a choice)
"""
import argparse

import numpy as np

from pategail.baselines.epr import fit_epr_baseline, sample_epr
from pategail.data.dataset import load_dataset
from pategail.metrics.evaluate import evaluate_days
from pategail.metrics.spatial import spatial_metrics
from pategail.sdk.epr import CellGeometry, explore_law_contribution, n_rank_bins
from pategail.sdk.features import infer_home
from pategail.sdk.places import PlaceLaw, place_contribution
from pategail.sdk.contribution import DAYS_CAP, contribution_weight
from pategail.server.places import place_law_from_noisy_sums, rank_calibrated_factors

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", required=True)
parser.add_argument("--days", type=int, default=2350)
parser.add_argument("--test", action="store_true", help="also score against the test days (final table)")
args = parser.parse_args()

ds = load_dataset(args.data)
geometry = CellGeometry.build(ds.cells)
n, b = ds.n_cells, n_rank_bins(geometry.candidates)
law_sums, place_sums, home_sums = np.zeros(2 * b), np.zeros(n + 3), np.zeros(n)
for u in ds.users:
    days = ds.user_days(u)
    home = infer_home(days)
    home_sums[home] += contribution_weight(len(days), DAYS_CAP)
    law_sums += explore_law_contribution(days, home, ds.cells, candidates=geometry.candidates)
    place_sums += place_contribution(days, home, n, DAYS_CAP)
factors = law_sums[:b] / law_sums[b:]
model = fit_epr_baseline(geometry, ds.train_days, ds.train_users)
ref = ds.train_days[np.random.default_rng(1).choice(len(ds.train_days), args.days, replace=False)]
references = {"training days": ref} | ({"test days": ds.test_days} if args.test else {})

variants = {"epr (classic)": (None, None), "epr + explore factors": (factors, None)}
for prior in (1.0, 0.1, 0.01):
    law = place_law_from_noisy_sums(place_sums, n, prior=prior)
    variants[f"epr + factors + places (prior {prior:g})"] = (factors, law)
law = place_law_from_noisy_sums(place_sums, n)
variants["epr + places, no factors"] = (None, law)
variants["epr + factors + relevance only (return_last 0)"] = (factors, PlaceLaw(law.relevance, 0.0))
visits = np.clip(place_sums[:n], 0, None)
for origin, weights in (("homes", home_sums), ("visits", visits)):
    calibrated = rank_calibrated_factors(geometry.neighbours, model.alpha, factors, law.relevance, weights)
    variants[f"epr + places, rank law re-calibrated (origins: {origin})"] = (calibrated, law)
print(f"return_last learned: {law.return_last:.3f}")
for name, reference in references.items():
    print(f"\nagainst {len(reference)} {name}:\n")
    print("| variant | Radius | DailyLoc | Distance | G-rank | I-rank | Density | Trips | Hot-20 ↑ |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, (f, places) in variants.items():
        days = sample_epr(model, geometry, args.days, np.random.default_rng(0), explore_factors=f, places=places)
        km, sp = evaluate_days(days, reference, ds.cells), spatial_metrics(days, reference, ds.cells)
        print(f"| {label} | " + " | ".join(f"{v:.4f}" for v in [*km.values(), *sp.values()]) + " |", flush=True)
