"""Next-location prediction as a test of synthetic days' utility (pategail.utility.prediction).

    # choose the predictors' settings on the training days alone (a seeded fifth of them validates)
    .venv/bin/python benchmarks/utility.py tune --data runs/pategail-geolife-public
    # (a) real, (b) synthetic, (c) both, on the real test days, per synthetic source and seed; resumable:
    # a result already in the JSON file is not recomputed
    .venv/bin/python benchmarks/utility.py measure --data runs/pategail-geolife-public --seed S \\
        --synthetic ours-plain=runs/util/syn/plain-sS.csv --synthetic epr=runs/util/syn/epr-sS.csv \\
        --json runs/util/utility.json
    # the table: mean and range over the seeds measured (several JSON files are merged)
    .venv/bin/python benchmarks/utility.py table --json runs/util/utility.json

The predictor's seed is the seed S of the synthetic days it is given, so every source and arm of one seed shares
one initialisation, one validation split and one minibatch order; the real arm varies over seeds by the
predictor's seed only.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from pategail.data.dataset import load_dataset
from pategail.sdk.synthetic import read_synthetic_csv
from pategail.utility.config import PredictionConfig
from pategail.utility.prediction import (METRICS, MarkovPredictor, evaluate_predictor, persistence_metrics,
                                         train_predictor)

TUNE_GRID = ({}, {"hidden": 128}, {"learning_rate": 1e-2}, {"batch_size": 64}, {"patience": 4},
             {"unfamiliar_share": 0.0}, {"unfamiliar_share": 0.3})
MARKOV_PRIORS = (0.1, 1.0, 10.0, 100.0)


def tune(args) -> None:
    """Stay, Markov over its priors and the recurrent model over TUNE_GRID, fitted on four fifths of the
    training days and scored on the other fifth (drawn with the seed)."""
    dataset = load_dataset(args.data)
    days = dataset.train_days
    order = np.random.default_rng([args.seed, 0x70E]).permutation(len(days))
    held, fit = days[order[:len(days) // 5]], days[order[len(days) // 5:]]
    print(f"{len(fit)} fit days, {len(held)} tuning days (training days of {args.data}); Acc@1 / Acc@5 / MRR\n")
    print("| predictor | settings | Acc@1 | Acc@5 | MRR | epochs | seconds |")
    print("|---|---|---:|---:|---:|---:|---:|")
    print(f"| stay | | {persistence_metrics(held)['acc1']:.4f} | | | | |")
    for prior in MARKOV_PRIORS:
        m = MarkovPredictor(fit, dataset.n_cells, prior).evaluate(held)
        print(f"| markov | β = {prior:g} | " + " | ".join(f"{m[k]:.4f}" for k in METRICS) + " | | |")
    for change in TUNE_GRID:
        config = replace(PredictionConfig(seed=args.seed), **change)
        start = time.perf_counter()
        model = train_predictor(fit, dataset.n_cells, config)
        seconds = time.perf_counter() - start
        m = evaluate_predictor(model, held)
        label = ", ".join(f"{k} = {v:g}" for k, v in change.items()) or "defaults"
        print(f"| recurrent | {label} | " + " | ".join(f"{m[k]:.4f}" for k in METRICS)
              + f" | {model.epochs} | {seconds:.0f} |", flush=True)


def measure(args) -> None:
    """Fill ``args.json`` with {seed: {arm key: {"recurrent": metrics, "markov": metrics, ...}}}."""
    dataset = load_dataset(args.data)
    store = json.loads(args.json.read_text()) if args.json.is_file() else {}
    store.setdefault("persistence", persistence_metrics(dataset.test_days))
    results = store.setdefault(str(args.seed), {})
    config = PredictionConfig(seed=args.seed, steps=args.steps)
    arms = {} if args.skip_real else {"real": dataset.train_days}
    for spec in args.synthetic:
        name, _, path = spec.partition("=")
        synthetic = read_synthetic_csv(Path(path), n_cells=dataset.n_cells, slots=dataset.train_days.shape[1])
        arms[f"{name}/synthetic"] = synthetic
        arms[f"{name}/real+synthetic"] = np.concatenate([dataset.train_days, synthetic])
    for key, days in arms.items():
        if key in results:
            continue
        start = time.perf_counter()
        model = train_predictor(days, dataset.n_cells, config)
        results[key] = {"recurrent": evaluate_predictor(model, dataset.test_days),
                        "markov": MarkovPredictor(days, dataset.n_cells, config.markov_prior).evaluate(
                            dataset.test_days),
                        "days": int(len(days)), "epochs": model.epochs, "seconds": time.perf_counter() - start}
        print(f"seed {args.seed} {key}: recurrent {results[key]['recurrent']['acc1']:.4f}, markov "
              f"{results[key]['markov']['acc1']:.4f} ({len(days)} days, {model.epochs} epochs, "
              f"{results[key]['seconds']:.0f} s)", flush=True)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(store, indent=1) + "\n")


def _cell(values, fmt: str = ".3f") -> str:
    values = np.asarray(values, dtype=float)
    if len(values) == 1:
        return f"{values[0]:{fmt}}"
    return f"{values.mean():{fmt}} ({values.min():{fmt}} to {values.max():{fmt}})"


def table(args) -> None:
    """Markdown: one row per (source, arm, predictor), mean and range over seeds; and the share of the real
    arm's Acc@1 above "stay" that each arm keeps."""
    store: dict = {}
    for path in args.json:                                      # several files: one store, merged by seed
        for key, value in json.loads(path.read_text()).items():
            store[key] = {**store.get(key, {}), **value} if key.isdigit() else value
    stay = store["persistence"]["acc1"]
    seeds = sorted(k for k in store if k.isdigit())
    keys = []
    for s in seeds:
        keys += [k for k in store[s] if k not in keys]
    print(f"stay: Acc@1 {stay:.4f}; seeds {', '.join(seeds)}\n")
    print("| training days | predictor | seeds | Acc@1 | Acc@5 | MRR | Acc@1 gain over stay, share of real's |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key in keys:
        for predictor in ("recurrent", "markov"):
            have = [s for s in seeds if key in store[s]]
            vals = {m: [store[s][key][predictor][m] for s in have] for m in METRICS}
            share = [(store[s][key][predictor]["acc1"] - stay) / (store[s]["real"][predictor]["acc1"] - stay)
                     for s in have if "real" in store[s]]
            print(f"| {key} | {predictor} | {len(have)} | " + " | ".join(_cell(vals[m]) for m in METRICS)
                  + f" | {_cell(share) if share else '-'} |")
    sources = [k.split("/")[0] for k in keys if k.endswith("/synthetic")]
    print("\nHeadline (Acc@1 on the real test days; gain and share paired by seed, share = (b − stay) / (a − stay)):\n")
    print("| synthetic days | seeds | GRU (b) synthetic | share of real's gain over stay | GRU (c) real + synthetic | "
          "(c) − (a) | Markov predictor (b) | (c) − (a) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for source in sources:
        have = [s for s in seeds if f"{source}/synthetic" in store[s] and f"{source}/real+synthetic" in store[s]
                and "real" in store[s]]
        if not have:
            continue

        def acc(s, arm, predictor="recurrent"):
            return store[s][arm][predictor]["acc1"]
        row = [_cell([acc(s, f"{source}/synthetic") for s in have]),
               _cell([(acc(s, f"{source}/synthetic") - stay) / (acc(s, "real") - stay) for s in have]),
               _cell([acc(s, f"{source}/real+synthetic") for s in have]),
               _cell([acc(s, f"{source}/real+synthetic") - acc(s, "real") for s in have], "+.3f"),
               _cell([acc(s, f"{source}/synthetic", "markov") for s in have]),
               _cell([acc(s, f"{source}/real+synthetic", "markov") - acc(s, "real", "markov") for s in have],
                     "+.3f")]
        print(f"| {source} | {len(have)} | " + " | ".join(row) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(required=True)
    t = sub.add_parser("tune")
    t.add_argument("--data", type=Path, required=True)
    t.add_argument("--seed", type=int, default=0)
    t.set_defaults(func=tune)
    m = sub.add_parser("measure")
    m.add_argument("--data", type=Path, required=True)
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--synthetic", action="append", default=[], metavar="NAME=CSV")
    m.add_argument("--json", type=Path, required=True)
    m.add_argument("--skip-real", action="store_true", help="only the synthetic sources' arms")
    m.add_argument("--steps", type=int, default=PredictionConfig.steps,
                   help="at most this many minibatches per arm (default: the report's)")
    m.set_defaults(func=measure)
    s = sub.add_parser("table")
    s.add_argument("--json", type=Path, required=True, nargs="+")
    s.set_defaults(func=table)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
