"""Where generated days go, against the real test days and the training days: the G-rank curve (visit share of
the r-th most visited cell over all days), how much of it the top cells take, and how many cells are used.

For each run (a ``pategail train`` output folder: its ``synthetic.csv``) and for references that need no run —
a sample of the training days as many as the test days (the floor's sample) and the epr baseline's days — it
prints the G-rank JSD to the test days, the visit share of rank 1, ranks 2–10, 11–50 and 51–100, the number of
distinct cells, and of distinct cells outside each day's home (the night cell); ``--plot`` draws the curves.

A generator that reproduced the training days exactly would score the floor's G-rank: where the epr baseline
scores below the floor, the test days' curve differs from the training days' in the direction epr errs, and
beating epr there says nothing about learning the training days.

Run: .venv/bin/python benchmarks/place_ranks.py --data runs/city --run runs/city-run [--run ...] [--plot out.png]
"""
import argparse
from pathlib import Path

import numpy as np

from pategail.baselines.epr import fit_epr_baseline, sample_epr
from pategail.data.dataset import load_dataset
from pategail.metrics.evaluate import floor_days
from pategail.metrics.km import global_rank_shares, grank
from pategail.sdk.epr import DEFAULT_CANDIDATES, CellGeometry
from pategail.sdk.features import infer_home
from pategail.sdk.synthetic import read_synthetic_csv

TIERS = ((0, 1), (1, 10), (10, 50), (50, 100))
"""Rank ranges (0-based, end exclusive) whose visit shares are printed: rank 1, 2–10, 11–50, 51–100."""


def away_cells(days: np.ndarray) -> int:
    """Distinct cells visited outside each day's own night cell (the day's home by TimeGeo's rule)."""
    homes = np.array([infer_home(day[None]) for day in days])
    return len(np.unique(days[days != homes[:, None]]))


def row(name: str, days: np.ndarray, test: np.ndarray) -> dict:
    shares = global_rank_shares(days)
    return {"name": name, "grank": grank(days, test), "tiers": [float(shares[a:b].sum()) for a, b in TIERS],
            "cells": len(np.unique(days)), "away": away_cells(days), "curve": shares}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--run", action="append", default=[], type=Path, help="a train output folder (repeatable)")
    parser.add_argument("--seed", type=int, default=0, help="the floor's sample and the epr baseline's days")
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args()

    ds = load_dataset(args.data)
    test = ds.test_days
    geometry = CellGeometry.build(ds.cells, candidates=DEFAULT_CANDIDATES)
    epr = sample_epr(fit_epr_baseline(geometry, ds.train_days, ds.train_users), geometry, len(test),
                     np.random.default_rng(args.seed))
    rows = [row("test days", test, test), row("training days (floor)", floor_days(ds, args.seed), test),
            row("epr", epr, test)]
    rows += [row(str(run), read_synthetic_csv(run / "synthetic.csv", ds.n_cells), test) for run in args.run]

    print(f"{args.data}: {len(test)} test days; G-rank JSD to the test days and visit shares by rank")
    print("| days | G-rank | rank 1 | 2–10 | 11–50 | 51–100 | cells | cells away from home |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        t = " | ".join(f"{x:.3f}" for x in r["tiers"])
        print(f"| {r['name']} | {r['grank']:.4f} | {t} | {r['cells']:,} | {r['away']:,} |")
    if args.plot is not None:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for r in rows:
            ax.plot(np.arange(1, len(r["curve"]) + 1), r["curve"], label=r["name"],
                    color="black" if r["name"] == "test days" else None)
        ax.set(yscale="log", xlabel="rank of the cell", ylabel="share of all visits", title=f"G-rank: {args.data.name}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
