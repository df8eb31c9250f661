"""The shape of a finished `benchmarks/game.py` run's generated days next to the real TRAINING days (no test day).

For the published (tail-averaged) policy of each run, sampled with the run's released initial states and its
configured first-cell law, and for the real training days:
- the distinct cells a day (the histogram behind DailyLoc): share of days with 1, 2, ..., 7 and 8+ cells;
- when days explore: P(explore | one cell so far) in blocks of 6 slots, and the share of days still at one
  cell at the start of each block;
- where: km from home of the first cell of days that do not start at home, and of the cell an explore
  leaves from (quantiles 10/25/50/75/90).

Run: .venv/bin/python benchmarks/day_shape.py --data runs/geolife-sparse4 runs/a-default-s0 [...]
"""
import argparse
from pathlib import Path

import numpy as np
import torch

from pategail.data.dataset import load_dataset
from pategail.metrics.guard import distinct_cells
from pategail.sdk.epr import CellGeometry
from pategail.sdk.features import EXPLORE, SLOTS, STATE_FEATURES, infer_home, label_actions, state_features
from pategail.server.checkpoint import load_checkpoint
from pategail.server.config import TrainConfig
from pategail.server.initial_states import FirstCellLaw
from pategail.server.policy import Policy, PolicyConfig
from pategail.server.run_state import RunState
from pategail.server.sampling import sample_rollout

DISTINCT = STATE_FEATURES.index("distinct")
FROM_HOME = STATE_FEATURES.index("log_km_from_home")
BLOCK = 6
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def shape(days: np.ndarray, homes: np.ndarray, features: np.ndarray, actions: np.ndarray) -> dict:
    """The three views of one set of days (features (n, T, F) of their states, actions (n, T-1))."""
    k = distinct_cells(days)
    one = np.rint(features[:, :-1, DISTINCT] * SLOTS) == 1
    explore = actions == EXPLORE
    blocks = range(0, SLOTS - 1, BLOCK)
    km = np.expm1(features[..., FROM_HOME])
    away = days[:, 0] != homes
    return {"cells_a_day": [float(np.mean(k == i)) for i in range(1, 8)] + [float(np.mean(k >= 8))],
            "explore_at_one_cell": [float(explore[:, b:b + BLOCK][one[:, b:b + BLOCK]].mean()) for b in blocks],
            "at_one_cell": [float(one[:, b].mean()) for b in blocks],
            "first_km": np.quantile(km[away, 0], QUANTILES).tolist() if away.any() else None,
            "explore_from_km": np.quantile(km[:, :-1][explore], QUANTILES).tolist() if explore.any() else None}


def real_shape(ds) -> dict:
    days = ds.train_days
    home_of = {u: infer_home(days[ds.train_users == u]) for u in np.unique(ds.train_users)}
    homes = np.array([home_of[u] for u in ds.train_users])
    return shape(days, homes, state_features(days, homes, ds.cells), label_actions(days, homes))


def run_shape(ds, run: Path, n_days: int, seed: int) -> dict:
    state = load_checkpoint(run / "checkpoint")
    config = TrainConfig.from_dict(state["config"])
    initial = RunState.from_dict(state).initial_states
    geometry = CellGeometry.build(ds.cells, candidates=config.environment.candidates)
    policy = Policy(PolicyConfig(**state["policy_config"]))
    weights = state["policy"] if state["policy_sum"] is None else \
        {k: v / state["policy_sum_count"] for k, v in state["policy_sum"].items()}
    policy.load_state_dict(weights)
    rng = np.random.default_rng(seed)
    law = None if config.first_cell_alpha is None else FirstCellLaw(geometry.neighbours, config.first_cell_alpha)
    homes, firsts = initial.sample(n_days, rng, near_home=law)
    rollout, homes = sample_rollout(policy, geometry, homes, firsts, rng, config.environment.alpha, initial.explore_factors,
                                    initial.places if config.environment.place_law else None)
    return shape(rollout.cells, homes, rollout.features, rollout.actions)


def fmt(values, spec=".3f") -> str:
    return "–" if values is None else " ".join(format(v, spec) for v in values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--days", type=int, default=2000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ds = load_dataset(args.data)
    rows = {"real training days": real_shape(ds)}
    rows.update({run.name: run_shape(ds, run, args.days, 7) for run in args.runs})
    print("| days | cells a day: 1 2 3 4 5 6 7 8+ | P(explore | 1 cell) by 3-hour block | share at 1 cell | "
          "first cell km from home (away days), q10 q25 q50 q75 q90 | explores leave from km |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {fmt(r['cells_a_day'])} | {fmt(r['explore_at_one_cell'])} | {fmt(r['at_one_cell'], '.2f')} | "
              f"{fmt(r['first_km'], '.1f')} | {fmt(r['explore_from_km'], '.1f')} |")


if __name__ == "__main__":
    main()
