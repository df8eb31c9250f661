"""How well the environment release's spatial histograms survive the Gaussian mechanism's noise (issue 13).

For a resampled population of N devices built from a prepared data set's TRAINING days, compute the exact
sums of the home, first-cell and visit histograms (what the secure aggregation sums before noise), add the
noise the run's privacy plan puts on each entry (seeded draws: an experiment, not a release), and compare the
distributions each post-processing makes from the noisy sums with the exact ones: total variation distance
(0 = exact, 1 = disjoint) and the share of the true top-20 cells among the estimate's top 20.

    .venv/bin/python benchmarks/env_release.py --data runs/pategail-geolife --devices 1000 --epsilon 8 \
        --fractions 0.1 0.2 0.3 0.5 --draws 5
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pategail.data.dataset import load_dataset
from pategail.population.resample import resample_population
from pategail.sdk.contribution import DAYS_CAP, initial_state_contribution
from pategail.sdk.features import infer_home
from pategail.sdk.places import place_contribution
from pategail.server.config import TrainConfig
from pategail.sdk.regions import REGION_CELLS, CellTree, regions
from pategail.server.spatial import two_level_histogram
from pategail.cli.privacy import _environment_values
from pategail.server.privacy.gaussian import plan_gaussian
from pategail.sdk.contribution import Granularity


COARSE_RATIO = float(np.sqrt(12) / 3)
"""The region sums raise the vector's L2 bound from 3 to √12: at the same ε, every entry's noise grows by this
factor. The rows "fine" and "clip" are the vector without region sums (noise σ), "two" the vector with them."""


def exact_sums(ds, n_devices: int, seed: int) -> dict:
    n = ds.n_cells
    users = ds.users
    pop = resample_population(users, n_devices, seed)
    counts = {int(u): int(c) for u, c in zip(*np.unique(pop.users, return_counts=True))}
    homes, firsts, visits = np.zeros(n), np.zeros(n), np.zeros(n)
    weight = at_home = 0.0
    for u, c in counts.items():
        days = ds.user_days(u)
        home = infer_home(days)
        init = initial_state_contribution(days, home, n)
        place = place_contribution(days, home, n, DAYS_CAP)
        homes += c * init[:n]
        firsts += c * init[n:2 * n]
        at_home += c * init[2 * n]
        weight += c * init[2 * n + 1]
        visits += c * place[:n]
    return {"homes": homes, "firsts": firsts, "visits": visits, "weight": weight, "at_home": at_home}


def clipped(noisy: np.ndarray, *_):
    """Today's post-processing: negatives to 0."""
    return np.clip(noisy, 0, None)


def tv(p: np.ndarray, q: np.ndarray) -> float:
    p = p if p.sum() > 0 else np.ones_like(p)         # all-zero: the coordinator falls back to uniform
    p, q = p / p.sum(), q / q.sum()
    return float(0.5 * np.abs(p - q).sum())


def top_overlap(est: np.ndarray, true: np.ndarray, k: int = 20) -> float:
    return len(set(np.argsort(-est)[:k]) & set(np.argsort(-true)[:k])) / k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--devices", type=int, default=1000)
    ap.add_argument("--epsilon", type=float, nargs="+", default=[8.0])
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.5])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[2.0, 3.0, 4.0])
    ap.add_argument("--granularity", default="day")
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--region-cells", type=int, nargs="+", default=[16, REGION_CELLS, 256])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ds = load_dataset(args.data)
    sums = exact_sums(ds, args.devices, args.seed)
    tree = CellTree.from_coordinates(ds.cells[:, 0], ds.cells[:, 1])
    cfg = TrainConfig().for_devices(args.devices)
    env_values = _environment_values(args.data, cfg.environment.candidates, REGION_CELLS)
    values = Granularity.parse(args.granularity).count(cfg.days_per_round)
    region_maps = {m: regions(tree, m) for m in args.region_cells}
    print(json.dumps({"regions": {m: int(r.max()) + 1 for m, r in region_maps.items()}}))
    totals = {"homes": sums["weight"], "firsts": sums["weight"] - sums["at_home"], "visits": sums["weight"]}
    one = np.zeros(ds.n_cells, dtype=np.int64)
    for eps in args.epsilon:
        for f in args.fractions:
            g = plan_gaussian(eps, cfg.privacy.delta, values, cfg.rounds + cfg.privacy.retry_rounds, env_values,
                              cfg.privacy.clip_share, f)
            with_regions = g.env_noise_std               # the plan's: the vector with region sums (L2 √12)
            plain = with_regions / COARSE_RATIO          # the same ε on the vector without them (L2 3)
            row = {"epsilon": eps, "fraction": f, "env_std_plain": round(plain, 3),
                   "env_std_regions": round(with_regions, 3),
                   "reward_std_on_mean": round(g.noise_std / args.devices, 4)}
            rng = np.random.default_rng([args.seed, 0xE4])
            for part in ("homes", "firsts", "visits"):
                true = sums[part]
                # (name, region map or None, estimate from (fine noisy, coarse noisy, std, total))
                methods = [("clip", None, lambda x, c, s, t: clipped(x))]
                for k in args.thresholds:
                    methods.append((f"fine{k:g}", None, (lambda k: lambda x, c, s, t: two_level_histogram(
                        x, np.array([t]), one, s, 0.0, t, k))(k)))
                    for m, reg in region_maps.items():
                        methods.append((f"two{m}/{k:g}", reg, (lambda k, reg: lambda x, c, s, t: two_level_histogram(
                            x, c, reg, s, s, t, k))(k, reg)))
                for name, reg, fn in methods:
                    sigma = plain if reg is None else with_regions
                    tvs, tops = [], []
                    for _ in range(args.draws):
                        noisy = true + rng.normal(0, sigma, len(true))
                        coarse = None if reg is None else np.bincount(reg, weights=true) + rng.normal(
                            0, sigma, int(reg.max()) + 1)
                        est = fn(noisy, coarse, sigma, totals[part] + rng.normal(0, sigma))
                        tvs.append(tv(est, true))
                        tops.append(top_overlap(est, true))
                    row[f"{part}.{name}.tv"] = round(float(np.mean(tvs)), 3)
                    row[f"{part}.{name}.top20"] = round(float(np.mean(tops)), 2)
            print(json.dumps(row), flush=True)
    uniform = np.ones(ds.n_cells)
    print(json.dumps({"uniform_tv": {p: round(tv(uniform, sums[p]), 3) for p in ("homes", "firsts", "visits")},
                      "weight": sums["weight"], "nonzero_cells": {p: int((sums[p] > 0).sum())
                                                                   for p in ("homes", "firsts", "visits")}}))


if __name__ == "__main__":
    main()
