"""Does the policy act on "distinct cells so far"? π(explore | k) of a finished `benchmarks/game.py` run, by k.

Loads the run's checkpoint (last iterate and, when the run reached its averaged rounds, the published tail
average), samples ``--days`` days from each with the released initial states, and prints for each exact
number k of distinct cells visited so far: the share of decisions taken in that state, the policy's mean
probability of "explore" there, and the same rate in the real **training** days (``label_actions``; no test
day is read). A policy that explores almost independently per slot shows a flat π(explore | k) where the
real rate falls to 0 at the city's cap.

Run: .venv/bin/python benchmarks/explore_by_distinct.py --data runs/geolife-sparse4 runs/a-off-s0 [...]
"""
import argparse
from pathlib import Path

import numpy as np
import torch

from pategail.data.dataset import load_dataset
from pategail.sdk.epr import CellGeometry
from pategail.sdk.features import EXPLORE, SLOTS, STATE_FEATURES, infer_home, label_actions, state_features
from pategail.server.checkpoint import load_checkpoint
from pategail.server.config import TrainConfig
from pategail.server.policy import Policy, PolicyConfig, masked_log_probs
from pategail.server.run_state import RunState
from pategail.server.sampling import sample_rollout

COLUMN = STATE_FEATURES.index("distinct")
KS = tuple(range(1, 9))


def explore_rate_by_k(distinct: np.ndarray, p_explore: np.ndarray) -> dict:
    """{k: (share of decisions at k, mean P(explore) there)} for the exact counts in KS."""
    return {k: (float(np.mean(distinct == k)), float(p_explore[distinct == k].mean()) if (distinct == k).any()
                else float("nan")) for k in KS}


def real_rates(ds) -> dict:
    days = ds.train_days
    home_of = {u: infer_home(days[ds.train_users == u]) for u in np.unique(ds.train_users)}
    homes = np.array([home_of[u] for u in ds.train_users])
    distinct = np.rint(state_features(days, homes, ds.cells)[:, :-1, COLUMN] * SLOTS)
    return explore_rate_by_k(distinct, (label_actions(days, homes) == EXPLORE).astype(float))


def policy_rates(policy: Policy, run_state: RunState, config: TrainConfig, geometry, n_days: int, seed: int):
    rng = np.random.default_rng(seed)
    homes, firsts = run_state.initial_states.sample(n_days, rng)
    places = run_state.initial_states.places if config.environment.place_law else None
    rollout, _ = sample_rollout(policy, geometry, homes, firsts, rng, config.environment.alpha,
                                run_state.initial_states.explore_factors, places)
    with torch.no_grad():
        logits, _ = policy(torch.from_numpy(rollout.cells), torch.from_numpy(rollout.features))
        p = masked_log_probs(logits, torch.from_numpy(rollout.masks)).exp().numpy()[:, :-1, EXPLORE]
    distinct = np.rint(rollout.features[:, :-1, COLUMN] * SLOTS)
    explores = (rollout.actions == EXPLORE).sum(axis=1)
    return explore_rate_by_k(distinct, p), explores


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--days", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ds = load_dataset(args.data)
    header = "| policy | " + " | ".join(f"k={k}: share, P(explore)" for k in KS) + " | explores/day mean, P(≥4) |"
    print(header)
    real = real_rates(ds)
    print("| real training days | " + " | ".join(f"{s:.3f}, {p:.4f}" for s, p in real.values()) + " | |")
    for run in args.runs:
        state = load_checkpoint(run / "checkpoint")
        config = TrainConfig.from_dict(state["config"])
        run_state = RunState.from_dict(state)
        geometry = CellGeometry.build(ds.cells, candidates=config.environment.candidates)
        policy = Policy(PolicyConfig(**state["policy_config"]))
        policy.load_state_dict(state["policy"])
        variants = {"last iterate": dict(state["policy"])}
        if state["policy_sum"] is not None:
            variants["published"] = {k: v / state["policy_sum_count"] for k, v in state["policy_sum"].items()}
        for name, weights in variants.items():
            policy.load_state_dict(weights)
            rates, explores = policy_rates(policy, run_state, config, geometry, args.days, 7)
            print(f"| {run.name} {name} | " + " | ".join(f"{s:.3f}, {p:.4f}" for s, p in rates.values())
                  + f" | {explores.mean():.2f}, {np.mean(explores >= 4):.3f} |")


if __name__ == "__main__":
    main()
