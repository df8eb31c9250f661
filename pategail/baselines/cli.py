"""`pategail baseline` and `pategail compare`."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from pategail.baselines import BASELINES, generate_baseline
from pategail.errors import PategailError

log = logging.getLogger(__name__)


def register(sub) -> None:
    p = sub.add_parser("baseline", help="fit a baseline generator on the training days and write synthetic days")
    p.add_argument("--model", required=True, choices=BASELINES, help="markov: time-of-day Markov chain over "
                   "cells; epr: the EPR model with fitted parameters")
    p.add_argument("--data", required=True, type=Path, help="prepared data set directory")
    p.add_argument("--out", required=True, type=Path, help="synthetic data file to write (CSV)")
    p.add_argument("--days", type=int, default=None, help="days to generate (default: as many as the test split)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling random stream")
    p.set_defaults(func=run_baseline)

    p = sub.add_parser("compare", help="print the table floor / markov / epr in both metric modes and the spatial metrics")
    p.add_argument("--data", required=True, type=Path, help="prepared data set directory")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling random streams")
    p.add_argument("--json", type=Path, default=None, help="also write the numbers as JSON here")
    p.set_defaults(func=run_compare)


def _days(args, dataset) -> int:
    n = len(dataset.test_days) if args.days is None else args.days
    if n < 1:
        raise PategailError(f"--days must be at least 1 (got {n})")
    return n


def run_baseline(args) -> int:
    from pategail.data.dataset import load_dataset
    from pategail.sdk.synthetic import write_synthetic_csv

    dataset = load_dataset(args.data)
    n = _days(args, dataset)
    t0 = time.perf_counter()
    days = generate_baseline(args.model, dataset, n, np.random.default_rng(args.seed))
    write_synthetic_csv(args.out, days, dataset.cells)
    print(f"{args.model}: {n} days written to {args.out} in {time.perf_counter() - t0:.1f} s")
    return 0


def compare(dataset, seed: int = 0) -> dict:
    """Floor and both baselines in both modes and the spatial metrics: {"floor": {...}, "markov": {...},
    "epr": {...}} under each of "km", "paper" and "spatial"."""
    from pategail.metrics.evaluate import evaluate
    n = len(dataset.test_days)
    table: dict[str, dict[str, Any]] = {"km": {}, "paper": {}, "spatial": {}}
    for i, model in enumerate(BASELINES):
        t0 = time.perf_counter()
        # one independent stream per baseline, derived from the seed
        days = generate_baseline(model, dataset, n, np.random.default_rng([seed, i]))
        log.info("%s: %d days generated in %.1f s", model, n, time.perf_counter() - t0)
        res = evaluate(days, dataset, seed=seed)
        table["km"][model], table["paper"][model] = res["metrics"], res["metrics_paper"]
        table["spatial"][model] = res["spatial"]
    table["km"] = {"floor": res["floor"], **table["km"]}
    table["paper"] = {"floor": res["floor_paper"], **table["paper"]}
    table["spatial"] = {"floor": res["floor_spatial"], **table["spatial"]}
    return table


def run_compare(args) -> int:
    from pategail.data.dataset import load_dataset
    from pategail.metrics.evaluate import format_table
    from pategail.metrics.spatial import format_spatial_table

    dataset = load_dataset(args.data)
    table = compare(dataset, args.seed)
    print(f"\nJSD against {len(dataset.test_days)} test days of {args.data} (lower is better)\n")
    print("km mode (the project's metrics):")
    print(format_table(table["km"], mode="km"))
    print("\npaper mode (the PateGail paper's evaluation code, quirks included):")
    print(format_table(table["paper"], mode="paper"))
    print("\nspatial (Density, Trips: JSD, lower is better; Hot-k: overlap of the top-k cells, higher is better):")
    print(format_spatial_table(table["spatial"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(table, indent=2) + "\n")
    return 0
