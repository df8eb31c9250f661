"""What ONE PPO update does to π(explore | k), from the final state of a finished `benchmarks/game.py` run.

Resumes the run's coordinator, samples a round of days from its last iterate, has every device score the
generated pairs with its own trained discriminator (no noise; R̂ = mean D − β · std D, standardised as the
coordinator does), prints the advantages PPO computes for "stay" and "explore" in the states with k = 1, 3, 4,
5 distinct cells so far, then applies one ``ppo_update`` (the run's PPO settings, fresh Adam moments) to a copy
of the policy and prints π(explore | k) before and after (600 days sampled from each). Issue 19, session 3:
shows whether the update follows the advantages of rare states or the common ones.

Run: .venv/bin/python benchmarks/ppo_update_probe.py --data runs/geolife-sparse4 runs/a-x [--trials 2]
"""
import argparse
import copy
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from pategail.sdk.features import EXPLORE, N_PAIR_FEATURES, SLOTS, STAY, pair_features
from pategail.server.policy import DISTINCT_FEATURE, masked_log_probs
from pategail.server.ppo import compute_gae, discounted_returns, ppo_update
from pategail.server.sampling import sample_rollout

from game_probe import resume_game_run

KS = (1, 2, 3, 4, 5, 6)


def rollout_of(coord, policy, n_days, rng):
    homes, firsts = coord.sample_initial_states(n_days, rng)
    return sample_rollout(policy, coord.geometry, homes, firsts, rng, coord.config.environment.alpha,
                          coord.initial_states.explore_factors, coord.place_law())


def explore_rates(coord, policy, rng, n_days=600) -> dict:
    rollout, _ = rollout_of(coord, policy, n_days, rng)
    with torch.no_grad():
        logits, _ = policy(torch.from_numpy(rollout.cells), torch.from_numpy(rollout.features))
        p = masked_log_probs(logits, torch.from_numpy(rollout.masks)).exp().numpy()[:, :-1, EXPLORE]
    k = np.rint(rollout.features[:, :-1, DISTINCT_FEATURE] * SLOTS)
    return {kk: round(float(p[k == kk].mean()), 4) for kk in KS if (k == kk).any()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("run", type=Path)
    parser.add_argument("--trials", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    ds, fleet, coord = resume_game_run(args.data, args.run)
    config = coord.config
    devices = list(fleet.devices.values())
    print("π(explore | k) before:", explore_rates(coord, coord.policy, np.random.default_rng(1)))
    for trial in range(args.trials):
        rollout, homes = rollout_of(coord, coord.policy, config.days_per_round, np.random.default_rng(100 + trial))
        pairs = pair_features(rollout.cells, homes, rollout.actions, coord.geometry.cells)
        scores = np.array([d.score(pairs.reshape(-1, N_PAIR_FEATURES)) for d in devices])
        r_hat = (scores.mean(0) - config.privacy.beta * scores.std(0)).reshape(rollout.actions.shape)
        rewards = ((r_hat - r_hat.mean()) / r_hat.std()).astype(np.float32)
        scaled = rewards / (discounted_returns(rewards, config.ppo.gamma).std() + 1e-8)
        adv, _ = compute_gae(scaled, rollout.values, config.ppo.gamma, config.ppo.gae_lambda)
        k = np.rint(rollout.features[:, :-1, DISTINCT_FEATURE] * SLOTS)
        for kk in (1, 3, 4, 5):
            stay, explore = (k == kk) & (rollout.actions == STAY), (k == kk) & (rollout.actions == EXPLORE)
            print(f"  trial {trial}, k = {kk}: {int((k == kk).sum())} decisions; advantage stay "
                  f"{adv[stay].mean():+.2f}, explore {adv[explore].mean() if explore.any() else float('nan'):+.2f} "
                  f"({int(explore.sum())} explores)")
        policy = copy.deepcopy(coord.policy)
        optimizer = torch.optim.Adam(policy.parameters(), lr=config.ppo.learning_rate)
        ppo_update(policy, optimizer, replace(rollout, rewards=rewards), config.ppo, torch.Generator().manual_seed(0))
        print(f"π(explore | k) after the update of trial {trial}:",
              explore_rates(coord, policy, np.random.default_rng(1)))


if __name__ == "__main__":
    main()
