"""A device's CPU per protocol step in one secure-aggregation round (default n = 100 all pairs, M = 4,096).

Usage: .venv/bin/python benchmarks/secagg_device_steps.py [--n N] [--degree K] [--repeat R]

Wraps each ``SecAggClient`` step with ``time.thread_time`` and prints the mean per device, keeping the least
disturbed of R rounds (smallest total): on a shared machine the whole-round table of ``secagg_round.py``
moves by several ms between runs, while a change's cost shows step by step.
"""
from __future__ import annotations

import argparse
import collections
import time

import numpy as np

from pategail.sdk.secagg.client import SecAggClient
from pategail.server.secagg.coordinator import SecAggCoordinator
from pategail.server.secagg.round import SecureRoundConfig, enroll_clients, run_secure_round

STEPS = ("start_round", "share_keys", "masked_input", "consistency_check", "unmask")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--degree", type=int, default=0, help="SecAgg+ neighbours (0 = all pairs)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spent: dict[str, float] = collections.defaultdict(float)
    for name in STEPS:
        def timed(self, *a, _step=getattr(SecAggClient, name), _name=name):
            t = time.thread_time()
            try:
                return _step(self, *a)
            finally:
                spent[_name] += time.thread_time() - t
        setattr(SecAggClient, name, timed)
    rng = np.random.default_rng(0)
    best = None
    for _ in range(args.repeat):
        spent.clear()
        coordinator = SecAggCoordinator()
        clients = enroll_clients(coordinator, list(range(1, args.n + 1)))
        config = SecureRoundConfig(round_id=1, n_min=int(0.7 * args.n), sum_noise_scale=2000.0,
                                   sq_sum_noise_scale=2000.0, degree=args.degree)
        run_secure_round(clients, rng.random((args.n, 4096)), config, rng, coordinator=coordinator)
        per_device = {k: spent[k] / args.n * 1e3 for k in STEPS}
        if best is None or sum(per_device.values()) < sum(best.values()):
            best = per_device
    print(" | ".join(f"{k} {v:.2f} ms" for k, v in best.items()), f"| total {sum(best.values()):.2f} ms")


if __name__ == "__main__":
    main()
