"""How steady the last iterate of a `benchmarks/game.py` run was, and how much of that is sampling noise.

For each run directory: the share of "stay" among the generated actions of each of the last ``--last`` rounds
(range, standard deviation, and the range of its 3-round moving mean), the share of days above the real p99.9 of
distinct cells under the published policy, and the JSD rows game.py wrote (training days). With ``--data`` it
also samples ``--draws`` rounds' worth of days (days_per_round each) from the run's FINAL last-iterate policy,
held fixed: the spread of their stay shares is the part of the per-round swing that is sampling noise alone.

Run: .venv/bin/python benchmarks/steadiness.py runs/c-off-s0 runs/c-r50-s0 [--data runs/pategail-geolife]
"""
import argparse
import json
from pathlib import Path

import numpy as np
import torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("runs", nargs="+", type=Path)
parser.add_argument("--last", type=int, default=20)
parser.add_argument("--data", type=Path, default=None, help="also measure the sampling noise of the final policy")
parser.add_argument("--draws", type=int, default=20)
args = parser.parse_args()
torch.set_num_threads(1)


def sampling_noise(run: Path, data: Path, draws: int) -> np.ndarray:
    from pategail.data.dataset import load_dataset
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.features import STAY
    from pategail.server.checkpoint import load_checkpoint
    from pategail.server.config import TrainConfig
    from pategail.server.initial_states import InitialStates
    from pategail.server.policy import Policy, PolicyConfig
    from pategail.server.sampling import sample_rollout

    state = load_checkpoint(run / "checkpoint")
    policy = Policy(PolicyConfig(**state["policy_config"]))
    policy.load_state_dict(state["policy"])
    config = TrainConfig.from_dict(state["config"])
    geometry = CellGeometry.build(load_dataset(data).cells, candidates=config.environment.candidates)
    initial = InitialStates.from_dict(state["initial_states"])
    rng = np.random.default_rng(0)
    shares = []
    for _ in range(draws):
        homes, firsts = initial.sample(config.days_per_round, rng)
        rollout, _ = sample_rollout(policy, geometry, homes, firsts, rng, config.environment.alpha, initial.explore_factors, None)
        shares.append(float(np.mean(rollout.actions == STAY)))
    return np.array(shares)


for run in args.runs:
    game = json.loads((run / "game.json").read_text())
    stay = np.array([r["stay_share"] for r in game["rounds"]])
    last = stay[-args.last:]
    moving = np.convolve(stay, np.ones(3) / 3, mode="valid")[-(args.last - 2):]
    print(f"{run}: {len(stay)} rounds; stay over the last {len(last)}: range {np.ptp(last):.3f}, std {last.std():.3f}, "
          f"mean {last.mean():.3f}; 3-round moving mean range {np.ptp(moving):.3f}; published policy's days above "
          f"the real p99.9: {game['above_threshold']:.2%}")
    for name, m in game["results"].items():
        print(f"  | {name} | " + " | ".join(f"{v:.4f}" for v in m.values()) + " |")
    if args.data is not None:
        s = sampling_noise(run, args.data, args.draws)
        print(f"  final policy held fixed, {len(s)} draws: stay std {s.std():.3f}, range {np.ptp(s):.3f}")
