"""How far the hot-spot overlap (Hot-20) of finished runs is from the epr baseline's, against the noise of the test
split itself: a paired bootstrap over the test set.

Hot-20 counts how many of the test days' 20 busiest cells are among a generator's 20 busiest, so one cell moves
it by 0.05, and which cells make the test days' top 20 depends on which days happened to be held out. For each
bootstrap draw the test set is resampled with replacement — by user where the data set knows the test days'
users, by day otherwise (the paper's folder: days of one user are alike, so that interval is too narrow) — and
every run, its own epr days (drawn as its report drew them) and its floor sample are scored against the same
resampled test days. Printed per run and for the mean over runs: Hot-20 of ours, epr and the floor on the test
days as they are, the difference ours − epr, its 95% percentile interval over the draws, and the share of
draws in which ours is at least as good as epr; and, apart, Hot-20 of ours and epr against the training days
(what the generators were fitted on: how well each reproduces the hot spots it was shown).

    .venv/bin/python benchmarks/hotspot_interval.py --data runs/city --run RUN_S0 --run RUN_S1 --run RUN_S2

Runs are ``pategail train`` output folders on ``--data`` (their ``synthetic.csv`` and ``report.json``'s seed).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

import numpy as np

from pategail.baselines import baseline_rng, generate_baseline
from pategail.data.dataset import load_dataset
from pategail.metrics.evaluate import floor_days
from pategail.metrics.spatial import HOTSPOT_TOP, hotspots, top_cells
from pategail.sdk.epr import CellGeometry
from pategail.sdk.synthetic import read_synthetic_csv


def resampling_units(test_days: np.ndarray, test_users: np.ndarray | None) -> tuple[np.ndarray, str]:
    """int (n_test,) unit index of each test day, and the unit's name: the day's user where every test day names
    one (user -1: not known) and there is more than one, else the day itself."""
    if test_users is not None and (test_users >= 0).all() and len(np.unique(test_users)) > 1:
        _, unit = np.unique(test_users, return_inverse=True)
        return unit.reshape(-1), "user"
    return np.arange(len(test_days)), "day"


def weighted_top(days: np.ndarray, day_weights: np.ndarray, n_cells: int, k: int = HOTSPOT_TOP) -> np.ndarray:
    """The k most visited cells of ``days`` when day i counts ``day_weights[i]`` times (ties: smaller cell id,
    as :func:`pategail.metrics.spatial.top_cells`)."""
    counts = np.bincount(days.ravel(), weights=np.repeat(day_weights, days.shape[1]), minlength=n_cells)
    order = np.lexsort((np.arange(n_cells), -counts))[:k]
    return order[counts[order] > 0]


def overlap(generated_top: np.ndarray, real_top: np.ndarray) -> float:
    return len(np.intersect1d(generated_top, real_top)) / len(real_top)


def bootstrap(test_days: np.ndarray, unit: np.ndarray, tops: dict[str, np.ndarray], n_cells: int, draws: int,
              rng: np.random.Generator) -> dict[str, np.ndarray]:
    """{name: float (draws,)} Hot-20 of each generator's top cells against ``draws`` resampled test sets."""
    n_units = int(unit.max()) + 1
    out = {name: np.empty(draws) for name in tops}
    for b in range(draws):
        unit_weight = np.bincount(rng.integers(0, n_units, n_units), minlength=n_units).astype(float)
        real_top = weighted_top(test_days, unit_weight[unit], n_cells)
        for name, top in tops.items():
            out[name][b] = overlap(top, real_top)
    return out


def fail(message: str) -> NoReturn:
    """A user's mistake: one line on stderr, exit status 2 (as the command line does)."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def run_seed(run: Path) -> int:
    """The seed a finished run's report records; SystemExit naming the file when there is none."""
    path = run / "report.json"
    try:
        return int(json.loads(path.read_text())["training"]["seed"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        fail(f"{path}: not a finished run's report ({type(err).__name__}: {err})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--run", action="append", required=True, type=Path, help="a train output folder (repeatable)")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's resampling")
    args = parser.parse_args()

    ds = load_dataset(args.data)
    test, n = ds.test_days, ds.n_cells
    unit, unit_name = resampling_units(test, ds.test_users)
    geometry = CellGeometry.build(ds.cells)
    tops: dict[str, np.ndarray] = {}
    point: dict[str, float] = {}
    for run in args.run:
        seed = run_seed(run)
        generated = {"ours": read_synthetic_csv(run / "synthetic.csv", n),
                     "epr": generate_baseline("epr", ds, len(test), baseline_rng("epr", seed), geometry),
                     "floor": floor_days(ds, seed)}
        for name, days in generated.items():
            tops[f"{run}|{name}"] = top_cells(days, n)
            point[f"{run}|{name}"] = hotspots(days, test, ds.cells)
            point[f"{run}|{name}|train"] = hotspots(days, ds.train_days, ds.cells)
    boot = bootstrap(test, unit, tops, n, args.draws, np.random.default_rng(args.seed))

    print(f"{args.data}: {len(test):,} test days in {int(unit.max()) + 1:,} resampling units ({unit_name}s), "
          f"{args.draws:,} draws")
    print("| run | ours | epr | floor | ours − epr | 95% interval | draws with ours ≥ epr | training days: ours, epr |")
    print("|---|---:|---:|---:|---:|---|---:|---|")
    runs = [str(r) for r in args.run]
    groups = [(r, [r]) for r in runs] + ([(f"mean of {len(runs)}", runs)] if len(runs) > 1 else [])
    for label, members in groups:
        def mean_of(key: str, table: dict) -> np.ndarray:
            return np.mean([table[f"{r}|{key}"] for r in members], axis=0)
        o, e, f = (float(mean_of(k, point)) for k in ("ours", "epr", "floor"))
        diff = mean_of("ours", boot) - mean_of("epr", boot)
        lo, hi = np.percentile(diff, [2.5, 97.5])
        print(f"| {label} | {o:.3f} | {e:.3f} | {f:.3f} | {o - e:+.3f} | [{lo:+.3f}, {hi:+.3f}] | "
              f"{float(np.mean(diff >= 0)):.0%} | {float(mean_of('ours|train', point)):.3f}, "
              f"{float(mean_of('epr|train', point)):.3f} |")


if __name__ == "__main__":
    from pategail.sdk.errors import DataError

    try:
        main()
    except DataError as err:            # a missing or malformed synthetic.csv or data set: one line
        fail(str(err))
