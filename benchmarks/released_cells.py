"""What a privately released cell table costs in quality: the table released by the ideal path of the
population fleet (the exact sum of the devices' bounded visited vectors plus the distributed discrete
Gaussian noise their shares add up to, from the CSPRNG: ``pategail.population.ideal.distributed_noise``), a
data set on it, and the run's total ε with the cell release composed in.

    # 1. release the table for the devices `pategail train --population 1000 --seed 0` builds; prints the ε
    #    left to the rest of the run
    python benchmarks/released_cells.py release --data runs/pategail-geolife-public --out runs/released-s0 \\
        --population 1000 --seed 0 --epsilon 8
    # 2. train on it with that ε (the table is not public, so --data-derived-cells; the total is step 4's)
    pategail train --data runs/released-s0 --out runs/cells/released-e8-s0 --epsilon 7.009 --data-derived-cells \\
        --population 1000 --population-processes 2 --no-downstream --no-progress --seed 0
    # 3. score its synthetic days on the public map's own test days (ids translated back to the universe)
    python benchmarks/released_cells.py evaluate --data runs/pategail-geolife-public --released runs/released-s0 \\
        --run runs/cells/released-e8-s0
    # 4. the composed ε of the cell release and the run, under both relations (and, to choose m and the share:
    #    `sweep --data ... --population 1000 --epsilon 8`)
    python benchmarks/released_cells.py compose --released runs/released-s0 --run runs/cells/released-e8-s0

`pategail train --cells released` runs steps 1, 2 and 4 inside one run (its report's ε includes the release);
`evaluate` without --released scores such a run on the public map's test days.

Each device moves its own days onto the released table (``pategail.sdk.cell_universe``: a slot in a square
that was not released goes to the nearest released square); here the same function runs once per user (every
copy of a user holds the same days).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from pategail.data.dataset import Dataset, load_dataset, save_dataset
from pategail.population.ideal import distributed_noise
from pategail.population.resample import resample_population
from pategail.sdk.accounting import QUANTA_PER_UNIT
from pategail.sdk.cell_universe import release_mapping, remap_days, visited_vector
from pategail.sdk.geo import haversine_km
from pategail.server.config import TrainConfig
from pategail.server.privacy.adjacency import ADJACENCIES
from pategail.server.privacy.cell_release import (MAX_CELLS, RHO_SHARE, CellReleasePlan, composed_epsilon_with_cells,
                                                  plan_cell_release, remaining_epsilon)
from pategail.server.privacy.defaults import default_delta


def _public(path: Path) -> Dataset:
    data = load_dataset(path)
    if not data.public_cell_table:
        sys.exit(f"{path}: the candidate universe must be a public table (data prepare --public-cells --bbox)")
    return data


def _noisy_release(data: Dataset, population, plan: CellReleasePlan) -> tuple[np.ndarray, np.ndarray, float]:
    """(exact sum of the devices' visited vectors, the released universe ids, the threshold used) — one vector
    per user, times its copies; the noise the devices' shares add up to, as the population fleet's ideal
    aggregation draws it (every device contributing; shares sized for n_min − t), and τ for that noise."""
    users, copies = np.unique(population.users, return_counts=True)
    exact = np.zeros(data.n_cells)
    for user, c in zip(users, copies):
        exact += c * visited_vector(data.user_days(int(user)), data.n_cells, plan.max_cells)
    config, n = TrainConfig(), len(population)
    n_min = max(1, math.ceil(config.secagg.min_survivors * n))
    shares = n_min - config.secagg.colluders
    noise = distributed_noise(plan.noise_std * QUANTA_PER_UNIT, shares, n, data.n_cells, "gaussian") / QUANTA_PER_UNIT
    threshold = plan.threshold_for(n, shares)
    return exact, plan.select(exact + noise, threshold), threshold


def sweep(args) -> int:
    """Released squares and the share of test slots they hold, by m and ρ share (one noise draw each)."""
    data = _public(args.data)
    population = resample_population(data.users, args.population, args.seed)
    delta = default_delta(args.population)
    print("| m | ρ share | σ | τ | released squares | test slots on them |\n|---|---|---|---|---|---|")
    for m in args.max_cells:
        for share in args.rho_share:
            plan = plan_cell_release(args.epsilon, delta, data.n_cells, m, share)
            _, released, threshold = _noisy_release(data, population, plan)
            print(f"| {m} | {share:g} | {plan.noise_std:.2f} | {threshold:.1f} | {len(released)} | "
                  f"{np.isin(data.test_days, released).mean():.1%} |")
    return 0


def release(args) -> int:
    data = _public(args.data)
    universe = data.n_cells
    population = resample_population(data.users, args.population, args.seed)
    delta = default_delta(args.population)
    plan = plan_cell_release(args.epsilon, delta, universe, args.max_cells, args.rho_share)
    exact, released, threshold = _noisy_release(data, population, plan)
    mapping = release_mapping(data.cells, released)
    moved = haversine_km(data.cells[:, 0], data.cells[:, 1], data.cells[released[mapping], 0],
                         data.cells[released[mapping], 1])
    train_km, test_km = moved[data.train_days], moved[data.test_days]
    rest = remaining_epsilon(args.epsilon, delta, plan)
    meta = {**data.meta, "cell_table": {
        "kind": "released", "universe": data.meta.get("cell_table"), "released": released.tolist(),
        "plan": vars(plan), "threshold": threshold, "target_epsilon": args.epsilon, "target_delta": delta,
        "remaining_epsilon": rest, "population": args.population, "seed": args.seed}}
    remapped = Dataset(data.cells[released], remap_days(data.train_days, mapping), data.train_users,
                       remap_days(data.test_days, mapping), data.test_users, meta, str(args.out),
                       None if data.holdout_days is None else remap_days(data.holdout_days, mapping),
                       data.holdout_users)
    save_dataset(remapped, args.out)
    summary = {"universe": universe, "released": int(len(released)), "noise_std": plan.noise_std,
               "threshold": threshold, "squares_in_some_vector": int(np.count_nonzero(exact)),
               "false_squares": int(np.count_nonzero((exact == 0)[released])),
               "test_slots_on_released": float(np.isin(data.test_days, released).mean()),
               "train_slots_on_released": float(np.isin(data.train_days, released).mean()),
               "train_km_moved_mean": float(train_km.mean()), "train_km_moved_p95": float(np.quantile(train_km, 0.95)),
               "test_km_moved_mean": float(test_km.mean()), "remaining_epsilon": rest}
    (Path(args.out) / "release.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


def _cell_plan(released: Path) -> tuple[dict, CellReleasePlan]:
    table = json.loads((released / "dataset.json").read_text())["cell_table"]
    return table, CellReleasePlan(**table["plan"])


def evaluate(args) -> int:
    from pategail.metrics.evaluate import evaluate as score
    from pategail.sdk.synthetic import read_synthetic_csv

    public = load_dataset(args.data)
    if args.released is None:        # a run of `pategail train --cells released`: its own table
        ids = np.asarray(json.loads((args.run / "cell-table.json").read_text())["released"])
    else:
        ids = np.asarray(_cell_plan(args.released)[0]["released"])
    days = read_synthetic_csv(args.run / "synthetic.csv", n_cells=len(ids), slots=public.train_days.shape[1])
    res = score(ids[days], public, seed=args.seed)
    out = {"metrics": res["metrics"], "spatial": res["spatial"], "guard": res["guard"]}
    (args.run / "public-map-scores.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


def compose(args) -> int:
    from pategail.server.privacy.plan import PLAN_FILE, PrivacyPlan

    table, cells = _cell_plan(args.released)
    plan = PrivacyPlan.from_dict(json.loads((args.run / "checkpoint" / PLAN_FILE).read_text()))
    out = {relation: {"planned": composed_epsilon_with_cells(cells, plan, relation),
                      "with_reserve": composed_epsilon_with_cells(cells, plan, relation, reserve=True)}
           for relation in ADJACENCIES}
    out["target"], out["delta"] = table["target_epsilon"], plan.target_delta
    print(json.dumps(out, indent=1))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("release")
    r.add_argument("--data", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--population", type=int, required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--epsilon", type=float, required=True, help="the whole run's target ε")
    r.add_argument("--max-cells", type=int, default=MAX_CELLS)
    r.add_argument("--rho-share", type=float, default=RHO_SHARE)
    r.set_defaults(func=release)
    w = sub.add_parser("sweep")
    w.add_argument("--data", type=Path, required=True)
    w.add_argument("--population", type=int, required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--epsilon", type=float, required=True)
    w.add_argument("--max-cells", type=int, nargs="+", default=[8, 16, 32, 64])
    w.add_argument("--rho-share", type=float, nargs="+", default=[0.1, 0.2])
    w.set_defaults(func=sweep)
    e = sub.add_parser("evaluate")
    e.add_argument("--data", type=Path, required=True, help="the public map data set (the universe)")
    e.add_argument("--released", type=Path, default=None,
                   help="the data set `release` wrote (default: the run released its own table, --cells released)")
    e.add_argument("--run", type=Path, required=True)
    e.add_argument("--seed", type=int, default=0)
    e.set_defaults(func=evaluate)
    c = sub.add_parser("compose")
    c.add_argument("--released", type=Path, required=True)
    c.add_argument("--run", type=Path, required=True)
    c.set_defaults(func=compose)
    args = p.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
