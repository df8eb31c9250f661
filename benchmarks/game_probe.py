"""What the devices' discriminators say about each action, by how many distinct cells the day has visited.

``probe(coordinator, devices, n_days, rng)`` samples days from the coordinator's current policy, has every
device score every generated pair (``Device.score``, the device's own discriminator, no noise), and returns
for each bin of "distinct cells so far" and each action: how often the policy takes it there, and the
ensemble's mean D. Used by benchmarks/game.py at the end of a run, and on its own on a finished game run:

    .venv/bin/python benchmarks/game_probe.py --data runs/geolife-sparse4 RUN
"""
import numpy as np

from pategail.sdk.features import ACTIONS, N_PAIR_FEATURES, pair_features, state_features
from pategail.server.ppo import compute_gae
from pategail.server.sampling import sample_rollout

STATE_BINS = (1, 2, 3, 4, 5, 6, 8, 16, 49)
"""Bins of the number of distinct cells visited so far: 1, 2, 3, 4, 5, 6–7, 8–15, 16+."""


def probe(coordinator, devices, n_days: int, rng: np.random.Generator) -> dict:
    homes, firsts = coordinator.sample_initial_states(n_days, rng)
    rollout, homes = sample_rollout(coordinator.policy, coordinator.geometry, homes, firsts, rng,
                                    coordinator.config.environment.alpha, coordinator.initial_states.explore_factors,
                                    coordinator.place_law())
    pairs = pair_features(rollout.cells, homes, rollout.actions, coordinator.geometry.cells)
    flat = pairs.reshape(-1, N_PAIR_FEATURES)
    scores = np.array([dev.score(flat) for dev in devices])
    d = scores.mean(axis=0).reshape(rollout.actions.shape)
    # R̂ = R − βξ as the coordinator computes it (ξ: the devices' standard deviation), without noise
    r_hat = d - coordinator.config.privacy.beta * scores.std(axis=0).reshape(rollout.actions.shape)
    # the advantages PPO would compute from these rewards (standardised per round, GAE with the value head)
    std_r = (r_hat - r_hat.mean()) / (r_hat.std() + 1e-8)
    adv, _ = compute_gae(std_r, rollout.values, coordinator.config.ppo.gamma, coordinator.config.ppo.gae_lambda)
    distinct = np.rint(state_features(rollout.cells, homes, coordinator.geometry.cells)[:, :-1, 5] * 48)
    out = {}
    for lo, hi in zip(STATE_BINS[:-1], STATE_BINS[1:]):
        in_bin = (distinct >= lo) & (distinct < hi)
        if not in_bin.any():
            continue
        row = {"pairs": int(in_bin.sum())}
        for a, name in enumerate(ACTIONS):
            sel = in_bin & (rollout.actions == a)
            row[name] = {"share": float(sel.sum() / in_bin.sum()),
                         "D": float(d[sel].mean()) if sel.any() else None,
                         "R_hat": float(r_hat[sel].mean()) if sel.any() else None,
                         "advantage": float(adv[sel].mean()) if sel.any() else None}
        out[f"{lo}-{hi - 1}"] = row
    return out


def gradient_norms(coordinator, devices, n_days: int, rng: np.random.Generator) -> dict:
    """The norms of the gradients of PPO's three loss terms on one round's days, rewards as the coordinator
    shapes them (R̂ standardised per round, without PPOConfig.scale_rewards): which term sets the clipped norm."""
    import torch

    from pategail.server.policy import masked_log_probs

    cfg = coordinator.config
    homes, firsts = coordinator.sample_initial_states(n_days, rng)
    rollout, homes = sample_rollout(coordinator.policy, coordinator.geometry, homes, firsts, rng, cfg.environment.alpha,
                                    coordinator.initial_states.explore_factors, coordinator.place_law())
    flat = pair_features(rollout.cells, homes, rollout.actions, coordinator.geometry.cells).reshape(-1, N_PAIR_FEATURES)
    scores = np.array([dev.score(flat) for dev in devices])
    r = (scores.mean(0) - cfg.privacy.beta * scores.std(0)).reshape(rollout.actions.shape)
    r = (r - r.mean()) / r.std()
    adv, ret = compute_gae(r, rollout.values, cfg.ppo.gamma, cfg.ppo.gae_lambda)
    policy = coordinator.policy
    policy.train()
    logits, values = policy(torch.as_tensor(rollout.cells), torch.as_tensor(rollout.features))
    log_probs = masked_log_probs(logits[:, :-1], torch.as_tensor(rollout.masks[:, :-1]))
    logp = log_probs.gather(-1, torch.as_tensor(rollout.actions)[..., None]).squeeze(-1)
    a = torch.as_tensor(adv, dtype=torch.float32)
    a = (a - a.mean()) / (a.std() + 1e-8)
    terms = {"policy": -(torch.exp(logp - logp.detach()) * a).mean(),
             "value": cfg.ppo.vf_coef * ((values[:, :-1] - torch.as_tensor(ret, dtype=torch.float32)) ** 2).mean(),
             "entropy": -cfg.ppo.ent_coef * -(log_probs.exp() * log_probs).sum(-1).mean()}
    out = {"returns_std": float(ret.std())}
    for name, loss in {**terms, "total": sum(terms.values())}.items():
        policy.zero_grad()
        loss.backward(retain_graph=True)
        out[name] = float(torch.sqrt(sum((q.grad ** 2).sum() for q in policy.parameters() if q.grad is not None)))
    return out


def resume_game_run(data, run):
    """(data set, fleet, coordinator) of a finished benchmarks/game.py run ``run``, its coordinator resumed
    from the last checkpoint and its devices from their stores (the data set read from ``data``)."""
    import json

    from pategail.data.dataset import load_dataset
    from pategail.emulator import EmulatedFleet, choose_users
    from pategail.server.config import TrainConfig
    from pategail.server.coordinator import Coordinator

    summary = json.loads((run / "game.json").read_text())
    config = TrainConfig.from_dict(summary["config"])
    ds = load_dataset(data)
    fleet = EmulatedFleet(ds, choose_users(ds.users, None, summary["seed"]), run / "devices", run / "bundle-initial",
                          seed=summary["seed"])
    coord = Coordinator(config, fleet, ds.cells, run, seed=summary["seed"])
    coord.resume()
    return ds, fleet, coord


def show(table: dict) -> None:
    print("| distinct so far | pairs | " + " | ".join(f"{a}: share, D, R̂, A" for a in ACTIONS) + " |")
    print("|---|---:|" + "---:|" * len(ACTIONS))
    for b, row in table.items():
        cells = [f"{row[a]['share']:.2f}, " + ("-" if row[a]["D"] is None else f"{row[a]['D']:.3f}, {row[a]['R_hat']:+.3f}, {row[a]['advantage']:+.2f}")
                 for a in ACTIONS]
        print(f"| {b} | {row['pairs']} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    import argparse
    from pathlib import Path

    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--days", type=int, default=480)
    parser.add_argument("run", type=Path, help="a benchmarks/game.py run directory")
    args = parser.parse_args()
    torch.set_num_threads(1)
    _, fleet, coord = resume_game_run(args.data, args.run)
    show(probe(coord, list(fleet.devices.values()), args.days, np.random.default_rng(7)))
    print("gradient norms of PPO's loss terms:", gradient_norms(coord, list(fleet.devices.values()), 64,
                                                                np.random.default_rng(3)))
