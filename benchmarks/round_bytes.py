"""Bytes per contributor of one secure-aggregation round at population sizes, as the population fleet counts
them (:func:`pategail.server.secagg.cost.round_bytes`): the SecAgg+ degree a run picks for the cohort
(``secagg_degree_for``), n_min = n / 2, M = 64 days × 47 decisions, Laplace and Gaussian rounds, no dropouts.
Also prints what the download is made of, and how long the computation takes.

    .venv/bin/python benchmarks/round_bytes.py
"""
from __future__ import annotations

import time

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pategail.sdk.secagg.graph import certificate_size
from pategail.sdk.secagg.messages import SurvivorAck
from pategail.server.config import secagg_degree_for
from pategail.server.secagg.config import SecureRoundConfig
from pategail.server.secagg.cost import round_bytes

M = 64 * 47
# a relayed acknowledgement: its length prefix and the signed SurvivorAck frame
ACK_ENTRY = 4 + len(SurvivorAck(1, bytes(32), 0, bytes(32)).encode(Ed25519PrivateKey.generate().sign))


def main() -> None:
    print("| devices | degree | mechanism | M | up (bytes) | down (bytes) | of which acks relayed | computed in |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    for n in (1_000, 10_000, 100_000):
        degree = secagg_degree_for(n)
        for mechanism in ("laplace", "gaussian"):
            extra = (dict(sq_sum_noise_scale=0.1) if mechanism == "laplace"
                     else dict(mechanism="gaussian", clip_norm=1.0))
            config = SecureRoundConfig(1, n_min=n // 2, sum_noise_scale=0.5, degree=degree, **extra)
            t = time.perf_counter()
            cost = round_bytes(config, n, M)
            ms = (time.perf_counter() - t) * 1e3
            acks = max(degree, certificate_size(n) - 1) * ACK_ENTRY
            print(f"| {n:,} | {degree} | {mechanism} | {M:,} | {cost.up:,} | {cost.down:,} | {acks:,} | {ms:.0f} ms |")


if __name__ == "__main__":
    main()
