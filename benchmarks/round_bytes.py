"""Bytes per contributor of one secure-aggregation round at population sizes, as the population fleet counts
them (:mod:`pategail.server.secagg.cost`): the SecAgg+ degree a run picks for the cohort
(``secagg_degree_for``), n_min = n / 2, M = 64 days × 47 decisions, Laplace and Gaussian rounds. Also prints
what the download is made of, and how long the computation takes.

With ``--dropout F`` a round(F · n) contributors drawn with a seeded generator drop out after sending their
shares (before their masked input, as in the population fleet), on the graph of a seeded round seed: the
table then gives the survivors' bytes (the range over survivors), the dropped devices' bytes, and the mean
over all contributors (what a run's communication line counts per device).

    .venv/bin/python benchmarks/round_bytes.py [--dropout 0.1] [--devices 1000 10000 100000]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pategail.sdk.secagg.graph import certificate_size
from pategail.sdk.secagg.messages import SurvivorAck
from pategail.server.config import secagg_degree_for
from pategail.server.secagg.config import SecureRoundConfig
from pategail.server.secagg.cost import dropout_round_bytes, round_bytes

M = 64 * 47
# a relayed acknowledgement: its length prefix and the signed SurvivorAck frame
ACK_ENTRY = 4 + len(SurvivorAck(1, bytes(32), 0, bytes(32)).encode(Ed25519PrivateKey.generate().sign))


def _config(n: int, mechanism: str) -> SecureRoundConfig:
    extra = dict(sq_sum_noise_scale=0.1) if mechanism == "laplace" else dict(mechanism="gaussian", clip_norm=1.0)
    return SecureRoundConfig(1, n_min=n // 2, sum_noise_scale=0.5, degree=secagg_degree_for(n), **extra)


def no_dropouts(sizes: list[int]) -> None:
    print("| devices | degree | mechanism | M | up (bytes) | down (bytes) | of which acks relayed | computed in |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    for n in sizes:
        for mechanism in ("laplace", "gaussian"):
            config = _config(n, mechanism)
            t = time.perf_counter()
            cost = round_bytes(config, n, M)
            ms = (time.perf_counter() - t) * 1e3
            acks = max(config.degree or n - 1, certificate_size(n) - 1) * ACK_ENTRY
            print(f"| {n:,} | {config.degree} | {mechanism} | {M:,} | {cost.up:,} | {cost.down:,} | {acks:,} "
                  f"| {ms:.0f} ms |")


def with_dropouts(sizes: list[int], dropout: float) -> None:
    print("| devices | dropped | degree | mechanism | survivor up | survivor down | dropped up | dropped down "
          "| mean up | mean down | computed in |")
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        rng = np.random.default_rng(n)
        gone = rng.choice(n, round(dropout * n), replace=False).tolist()
        round_seed = rng.bytes(32)
        for mechanism in ("laplace", "gaussian"):
            config = _config(n, mechanism)
            t = time.perf_counter()
            cost = dropout_round_bytes(config, range(n), M, gone, round_seed)
            ms = (time.perf_counter() - t) * 1e3
            left = [cost[d] for d in sorted(set(range(n)) - set(gone))]
            lost = {cost[d] for d in gone}
            assert len(lost) == 1                                   # every dropped device: the same frames
            (dropped,) = lost

            def span(values: list[int]) -> str:
                lo, hi = min(values), max(values)
                return f"{lo:,}" if lo == hi else f"{lo:,}–{hi:,}"
            print(f"| {n:,} | {len(gone):,} | {config.degree} | {mechanism} | {span([c.up for c in left])} "
                  f"| {span([c.down for c in left])} | {dropped.up:,} | {dropped.down:,} "
                  f"| {np.mean([c.up for c in cost.values()]):,.0f} | {np.mean([c.down for c in cost.values()]):,.0f} "
                  f"| {ms:.0f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dropout", type=float, default=0.0, help="share of contributors dropping out (0: none)")
    parser.add_argument("--devices", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    if not 0.0 <= args.dropout < 1.0:
        parser.error(f"--dropout must be in [0, 1), got {args.dropout}")
    if args.dropout:
        with_dropouts(args.devices, args.dropout)
    else:
        no_dropouts(args.devices)


if __name__ == "__main__":
    main()
