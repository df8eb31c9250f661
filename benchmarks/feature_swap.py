"""Which state feature makes generated pairs look fake to the devices' discriminators? A swap test.

Loads a finished `benchmarks/game.py` run (its devices' discriminators and its coordinator), samples days from
the last iterate, and takes the generated "stay" pairs whose state has exactly k distinct cells so far; the
same pairs of the real TRAINING days (no test day) are the reference. It prints the ensemble's mean D of both,
then, feature by feature, D of the generated pairs with that one column replaced by values drawn from the real
pairs' column: a feature whose swap closes the gap is what the discriminators tell generated days apart by.
On the sparse city the distance from home alone closed it (BENCHMARKS.md, issue 19, session 4).

Run: .venv/bin/python benchmarks/feature_swap.py --data runs/geolife-sparse4 runs/a-default-s0 [--k 2]
"""
import argparse
from pathlib import Path

import numpy as np
import torch

from pategail.sdk.features import SLOTS, STATE_FEATURES, STAY, infer_home, label_actions, pair_features
from pategail.server.sampling import sample_rollout

from game_probe import resume_game_run

DISTINCT = STATE_FEATURES.index("distinct")


def stay_pairs_at(pairs: np.ndarray, actions: np.ndarray, k: int) -> np.ndarray:
    """The rows of pairs (n, T-1, P) whose action is stay and whose state has k distinct cells so far."""
    return pairs[(np.rint(pairs[..., DISTINCT] * SLOTS) == k) & (actions == STAY)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("run", type=Path)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--days", type=int, default=960)
    parser.add_argument("--pairs", type=int, default=600)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ds, fleet, coord = resume_game_run(args.data, args.run)
    config = coord.config
    rng = np.random.default_rng(7)
    homes, firsts = coord.sample_initial_states(args.days, rng)
    rollout, homes = sample_rollout(coord.policy, coord.geometry, homes, firsts, rng, config.environment.alpha,
                                    coord.initial_states.explore_factors, coord.place_law())
    generated = stay_pairs_at(pair_features(rollout.cells, homes, rollout.actions, ds.cells), rollout.actions, args.k)
    days = ds.train_days
    home_of = {u: infer_home(days[ds.train_users == u]) for u in np.unique(ds.train_users)}
    real_homes = np.array([home_of[u] for u in ds.train_users])
    actions = label_actions(days, real_homes)
    real = stay_pairs_at(pair_features(days, real_homes, actions, ds.cells), actions, args.k)
    generated = generated[rng.choice(len(generated), min(args.pairs, len(generated)), replace=False)]
    real = real[rng.choice(len(real), min(args.pairs, len(real)), replace=False)]
    devices = list(fleet.devices.values())

    def mean_d(rows):
        return float(np.mean([device.score(rows) for device in devices]))
    print(f"stay pairs at k = {args.k}: D generated {mean_d(generated):.3f}, D real {mean_d(real):.3f} "
          f"({len(generated)} / {len(real)} pairs, {len(devices)} devices)")
    print("| feature | D with it swapped to real values | generated mean | real mean |\n|---|---:|---:|---:|")
    for f, name in enumerate(STATE_FEATURES):
        swapped = generated.copy()
        swapped[:, f] = real[rng.integers(0, len(real), len(swapped)), f]
        print(f"| {name} | {mean_d(swapped):.3f} | {generated[:, f].mean():+.3f} | {real[:, f].mean():+.3f} |")


if __name__ == "__main__":
    main()
