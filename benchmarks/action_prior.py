"""The rule model of the action-rate release ALONE (no learning) against the epr baseline, on training days:
the devices' action-rate parts summed without noise (what a --no-privacy run releases) give
P(action | slot bucket, at home, distinct bucket); days are drawn from the same EPR environment as epr's
(its fitted alpha and initial states), so the rates are the only difference. Scored in km mode against
2,350 sampled *training* days (benchmarks/training_days.py's reference); also the share of days above the
real 99.9th percentile of distinct cells and the distribution of distinct cells a day.

Run: .venv/bin/python benchmarks/action_prior.py --data runs/geolife-sparse4 [--smoothing 0.02]
"""
import argparse

import numpy as np

from pategail.baselines.epr import fit_epr_baseline, sample_epr
from pategail.data.dataset import load_dataset
from pategail.metrics.evaluate import evaluate_days
from pategail.metrics.guard import invented_mode
from pategail.sdk.action_rates import action_rate_contribution, action_rate_length
from pategail.sdk.contribution import DAYS_CAP
from pategail.sdk.epr import CellGeometry, EPREnvironment
from pategail.sdk.features import infer_home
from pategail.server.action_prior import action_rates_from_noisy_sums, sample_rule_days

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", required=True)
parser.add_argument("--days", type=int, default=2350)
parser.add_argument("--smoothing", type=float, default=None)
parser.add_argument("--seeds", type=int, default=2)
args = parser.parse_args()

ds = load_dataset(args.data)
geometry = CellGeometry.build(ds.cells)
sums = np.zeros(action_rate_length())
for u in ds.users:
    days = ds.user_days(u)
    sums += action_rate_contribution(days, infer_home(days), DAYS_CAP)
rates = action_rates_from_noisy_sums(sums, **({} if args.smoothing is None else {"smoothing": args.smoothing}))
model = fit_epr_baseline(geometry, ds.train_days, ds.train_users)
ref = ds.train_days[np.random.default_rng(1).choice(len(ds.train_days), args.days, replace=False)]


def cells_a_day(days):
    k = np.array([len(np.unique(d)) for d in days])
    return " / ".join(f"{np.mean(k == i):.3f}" for i in range(1, 5)) + f" / {np.mean(k >= 5):.3f}"


print(f"{len(ds.users)} devices, Σw = {sums.sum():.1f}")
print("| model | seed | invented | Radius | DailyLoc | Distance | G-rank | I-rank | cells a day 1/2/3/4/5+ |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
print(f"| real training days | | | | | | | | {cells_a_day(ref)} |")
for seed in range(args.seeds):
    for name in ("epr", "rule model"):
        rng = np.random.default_rng(seed)
        if name == "epr":
            days = sample_epr(model, geometry, args.days, rng)
        else:
            idx = rng.integers(0, len(model.init_homes), args.days)
            env = EPREnvironment(geometry, alpha=model.alpha, rng=rng)
            days = sample_rule_days(rates, env, model.init_homes[idx], model.init_first[idx], rng).days
        km = evaluate_days(days, ref, ds.cells)
        inv = invented_mode(days, ds.train_days).share
        print(f"| {name} | {seed} | {100 * inv:.2f}% | " + " | ".join(f"{v:.4f}" for v in km.values())
              + f" | {cells_a_day(days)} |", flush=True)
