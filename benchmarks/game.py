"""The adversarial game, observed round by round, and judged on TRAINING days only (never the test days).

Runs federated PateGail exactly as ``pategail train`` does (emulated SDK devices, the coordinator, secure
aggregation) and records per round how the game goes: the reward the devices' ensemble gives
generated days by their number of distinct cells (raw mean R, ξ, R̂ and the standardised reward PPO sees),
the discriminators' accuracy, the share of "stay" and of days above the real 99.9th percentile of distinct
cells. At the end it scores 2,350 days of the published (tail-averaged) policy and of the last iterate
against sampled training days, next to the epr and markov baselines on the same reference: the five km JSDs
(``results``) and the spatial metrics Density, Trips and Hot-20 (``spatial``).

Without noise the secure aggregation releases exactly Σ encode(D) and Σ encode(D²) (its masks cancel in
Z_2^64), so with ``--plain-sums`` (for sweeps on many cities and seeds) the released sums are computed
directly from the devices' pending vectors — bit for bit what the protocol releases, without its
key agreement and mask expansion, which dominate a round at 100+ devices. Refused with privacy.

With ``action_prior`` the behaviour-cloned policy is scored before round 1 too (row "warm start";
``--warm-start-only`` stops there, writing warm.json): its own generator, so the run is unchanged.

The test days are scored too (``--test``), for the acceptance table only: choices are made on the
training-day rows.

Run: .venv/bin/python benchmarks/game.py --data runs/geolife-sparse4 --out runs/game-x [--config C.json]
     [--rounds R] [--seed S] [--plain-sums] [--test]
"""
import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np
import torch

import pategail.server.coordinator as coordinator_module
import pategail.server.rewards as rewards_module
from pategail.baselines.epr import fit_epr_baseline, sample_epr
from pategail.baselines.markov import fit_markov, sample_markov
from pategail.data.dataset import load_dataset
from pategail.emulator import EmulatedFleet, choose_users
from pategail.metrics.evaluate import evaluate_days
from pategail.metrics.guard import distinct_cells, distinct_cells_threshold
from pategail.metrics.spatial import spatial_metrics
from pategail.sdk.epr import CellGeometry
from pategail.sdk.features import STAY
from pategail.sdk.secagg.fixedpoint import decode, encode
from pategail.server.secagg.round import AggregateResult, RoundStats as SecAggStats
from pategail.server.config import TrainConfig
from pategail.server.coordinator import Coordinator

from common import initial_bundle

BINS = (1, 4, 8, 16, 25, 49)
"""Distinct-cell bins of generated days: 1–3, 4–7, 8–15, 16–24, 25+."""

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", required=True, type=Path)
parser.add_argument("--out", required=True, type=Path)
parser.add_argument("--config", type=Path, default=None, help="JSON of TrainConfig settings")
parser.add_argument("--rounds", type=int, default=None)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--eval-days", type=int, default=2350)
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--plain-sums", action="store_true", help="exact no-noise sums without the secure protocol")
parser.add_argument("--test", action="store_true", help="also score the test days (acceptance table)")
parser.add_argument("--last-iterate", action="store_true", help="also score the last iterate on training days")
parser.add_argument("--warm-start-only", action="store_true",
                    help="with action_prior: score the behaviour-cloned policy before round 1, then stop")
args = parser.parse_args()
torch.set_num_threads(args.threads)
logging.basicConfig(level=logging.WARNING)

overrides = {} if args.rounds is None else {"rounds": args.rounds}
config = (TrainConfig.from_file(args.config, overrides) if args.config
          else TrainConfig.from_dict(overrides))
ds = load_dataset(args.data)
threshold = distinct_cells_threshold(ds.train_days)
args.out.mkdir(parents=True, exist_ok=False)
users = choose_users(ds.users, None, args.seed)
config = config.for_devices(len(users))
initial_bundle(config, ds, args.seed, args.out / "bundle-initial", args.out / "checkpoint")   # declares a private plan
fleet = EmulatedFleet(ds, users, args.out / "devices", args.out / "bundle-initial", seed=args.seed)
coord = Coordinator(config, fleet, ds.cells, args.out, seed=args.seed)

# Observe the round without changing it: the aggregate the coordinator computes and the rollout PPO gets.
seen = {}
_aggregate, _ppo = rewards_module.aggregate_rewards, coordinator_module.ppo_update


def aggregate(*a, **k):
    seen["agg"] = _aggregate(*a, **k)
    return seen["agg"]


def ppo(policy, optimizer, rollout, cfg, gen, *anchor, **kwargs):
    seen["rollout"] = rollout
    return _ppo(policy, optimizer, rollout, cfg, gen, *anchor, **kwargs)


def plain_sums(self, participants, config, coordinator, rng, num_queries):
    """What the fleet's secure sum releases without noise: Σ encode(D) and Σ encode(D²) over the devices."""
    pending = [self.devices[i].pending for i in participants]      # copies (the SDK's public view)
    total = sum(encode(v) for v in pending)
    sq_total = sum(encode(v * v) for v in pending)
    ids = tuple(participants)
    return AggregateResult(decode(total), decode(sq_total), len(ids), ids, -1,
                           SecAggStats({i: 0 for i in ids}, {i: 0 for i in ids}, {}, 0.0, 0.0))


rewards_module.aggregate_rewards, coordinator_module.ppo_update = aggregate, ppo
if args.plain_sums:
    if config.private:
        raise SystemExit("--plain-sums: only without privacy (the noise is added by the devices' protocol)")
    EmulatedFleet.secure_sum = plain_sums
rounds = []


def on_round(stats):
    ro = seen["rollout"]
    if "agg" not in seen:                                   # block rewards: no per-pair R, ξ, R̂
        print(f"round {stats.round:3d} acc {stats.disc_accuracy:.2f} R {stats.mean_reward:.3f} stay "
              f"{np.mean(ro.actions == STAY):.2f}", flush=True)
        rounds.append({"round": stats.round, "disc_accuracy": stats.disc_accuracy, "mean_R": stats.mean_reward,
                       "stay_share": float(np.mean(ro.actions == STAY))})
        return
    agg = seen["agg"]
    n = ro.cells.shape[0]
    shape = (n, -1)
    k = distinct_cells(ro.cells)
    row = {"round": stats.round, "disc_accuracy": stats.disc_accuracy, "mean_R": float(agg.mean.mean()),
           "stay_share": float(np.mean(ro.actions == STAY)), "above_threshold": float(np.mean(k > threshold)),
           "entropy": stats.ppo["entropy"], "approx_kl": stats.ppo["approx_kl"],
           "mean_distinct": float(k.mean()), "by_distinct": {}}
    for lo, hi in zip(BINS[:-1], BINS[1:]):
        sel = (k >= lo) & (k < hi)
        if sel.any():
            row["by_distinct"][f"{lo}-{hi - 1}"] = {
                "days": int(sel.sum()), "R": float(agg.mean.reshape(shape)[sel].mean()),
                "xi": float(agg.xi.reshape(shape)[sel].mean()), "R_hat": float(agg.r_hat.reshape(shape)[sel].mean()),
                "standardised": float(ro.rewards[sel].mean())}
    rounds.append(row)
    print(f"round {stats.round:3d} acc {stats.disc_accuracy:.2f} R {row['mean_R']:.3f} stay {row['stay_share']:.2f} "
          f"distinct {row['mean_distinct']:5.1f} above {row['above_threshold']:.2f} ent {row['entropy']:.2f} | "
          + " ".join(f"{b}:{v['days']}/{v['R']:.3f}/{v['standardised']:+.2f}" for b, v in row["by_distinct"].items()),
          flush=True)


ref = ds.train_days[np.random.default_rng(1).choice(len(ds.train_days), min(args.eval_days, len(ds.train_days)),
                                                      replace=False)]
t0 = time.perf_counter()
warm = None
if config.uses_action_prior:      # score the behaviour-cloned policy before round 1 (its own rng: the run is unchanged)
    coord.releases.rebuild_accountant()
    coord.learn_initial_states()
    warm_days = coord.generate(len(ref), np.random.default_rng([args.seed, 0x5E]))
    warm = {**evaluate_days(warm_days, ref, ds.cells), "above_threshold": float(np.mean(
        distinct_cells(warm_days) > threshold)), "seconds": time.perf_counter() - t0}
    print("warm start: " + " ".join(f"{k} {v:.4f}" for k, v in warm.items()), flush=True)
    if args.warm_start_only:
        (args.out / "warm.json").write_text(json.dumps({"config": config.to_dict(), "seed": args.seed,
                                                        "warm_start": warm}, indent=1) + "\n")
        raise SystemExit(0)
coord.train(on_round)
seconds = time.perf_counter() - t0


def above_test(days):
    return float(np.mean(distinct_cells(days) > threshold))


picked = np.random.default_rng(1).choice(len(ds.train_days), min(args.eval_days, len(ds.train_days)), replace=False)
ref = ds.train_days[picked]
rest = np.delete(ds.train_days, picked, axis=0)     # the floor: other training days against the same reference
geometry = CellGeometry.build(ds.cells, candidates=config.environment.candidates)
results, spatial = {}, {}


def score(name, days):
    """km JSDs under ``results``, the spatial metrics (Density, Trips, Hot-20) under ``spatial``."""
    results[name], spatial[name] = evaluate_days(days, ref, ds.cells), spatial_metrics(days, ref, ds.cells)


if len(rest):
    score("floor", rest[np.random.default_rng(3).choice(len(rest), min(len(ref), len(rest)), replace=False)])
score("epr", sample_epr(fit_epr_baseline(geometry, ds.train_days, ds.train_users), geometry, len(ref),
                        np.random.default_rng(0)))
# markov is fitted on all training days, so on this reference it is scored partly in sample (as epr is)
score("markov", sample_markov(fit_markov(ds.train_days, ds.n_cells), len(ref), np.random.default_rng(2)))
if warm is not None:
    score("warm start", warm_days)
averaged = coord.generate(len(ref), np.random.default_rng([args.seed, 0x5E]))
score("ours", averaged)
saved_sum = coord.average.sum
if args.last_iterate:
    coord.average.sum = None                                # generate() then uses the last iterate
    score("last iterate", coord.generate(len(ref), np.random.default_rng([args.seed, 0x5E])))
above = float(np.mean(distinct_cells(averaged) > threshold))
summary = {"data": str(args.data), "seed": args.seed, "config": config.to_dict(), "seconds": seconds,
           "plain_sums": args.plain_sums, "threshold": threshold, "above_threshold": above, "results": results,
           "spatial": spatial, "warm_start": warm, "rounds": rounds}
if args.test:
    from pategail.metrics.evaluate import evaluate
    from pategail.baselines.compare import compare
    n = len(ds.test_days)
    coord.average.sum = saved_sum
    days = coord.generate(n, np.random.default_rng([args.seed, 0x5E]))
    table = compare(ds, args.seed)
    ours = evaluate(days, ds, seed=args.seed)
    summary["test"] = {"ours": ours["metrics"], "epr": table["km"]["epr"], "markov": table["km"]["markov"],
                       "floor": table["km"]["floor"], "above_threshold": above_test(days),
                       "spatial": {"ours": ours["spatial"], **table["spatial"]}}
(args.out / "game.json").write_text(json.dumps(summary, indent=1) + "\n")
print(f"{seconds:.0f} s of rounds; threshold {threshold:g}; generated days above it: {above:.2%}")
print("| training days | " + " | ".join(next(iter(results.values()))) + " | "
      + " | ".join(next(iter(spatial.values()))) + " |")
for name, m in results.items():
    print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in (*m.values(), *spatial[name].values())) + " |")
for name, m in summary.get("test", {}).items():
    if isinstance(m, dict) and name != "spatial":
        print(f"| test: {name} | " + " | ".join(f"{v:.4f}" for v in m.values()) + " |")
for name, m in summary.get("test", {}).get("spatial", {}).items():
    print(f"| test spatial: {name} | " + " | ".join(f"{v:.4f}" for v in m.values()) + " |")
