"""Share of secure-aggregation rounds that complete under dropouts, per neighbour-graph degree.

Usage: .venv/bin/python benchmarks/secagg_liveness.py [--devices 1000] [--rounds 500] [--out FILE]

Each round draws a fresh neighbour graph (a random public seed) and a dropout schedule
(``Dropouts.random``: the given share of devices, spread evenly over the four steps after which a device can
stop; or, "after each step", that share of the devices still there after every step), and applies the protocol's own rules (``pategail.server.secagg.liveness.round_completes``, which a test
checks against real rounds). Thresholds are the secure ones (``secure_threshold``: k/2 + 2 for SecAgg+),
certificates a majority of the participants. n_min is the default 0.8 n, and 0.5 n to show what the graph alone
allows. Writes a markdown table (and prints it).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from pategail.sdk.secagg.graph import NeighbourGraph, round_failure_bound, secure_threshold
from pategail.server.config import secagg_degree_for
from pategail.server.secagg.liveness import round_completes
from pategail.server.secagg.round import Dropouts


def each_step(ids, fraction: float, rng: np.random.Generator) -> Dropouts:
    """``fraction`` of the devices still there stop after each of the four steps (1 − (1 − f)^4 in all)."""
    left, stages = list(ids), []
    for _ in range(4):
        gone = frozenset(d for d in left if rng.random() < fraction)
        stages.append(gone)
        left = [d for d in left if d not in gone]
    return Dropouts(*stages)


def completion(n: int, degree: int, fraction: float, n_min: int, rounds: int, rng: np.random.Generator,
               per_step: bool = False):
    ids = tuple(range(n))
    t = secure_threshold(n, degree)
    reasons: dict[str, int] = {}
    done = 0
    for _ in range(rounds):
        dropouts = each_step(ids, fraction, rng) if per_step else Dropouts.random(ids, fraction, rng)
        outcome = round_completes(NeighbourGraph(ids, rng.bytes(32), degree), t, n_min, dropouts)
        done += outcome.complete
        if not outcome.complete:
            reasons[outcome.reason] = reasons.get(outcome.reason, 0) + 1
    return done / rounds, reasons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--out", default="runs/secagg-liveness.md")
    args = parser.parse_args()
    n, rng = args.devices, np.random.default_rng(0)
    default = secagg_degree_for(n)
    rows = ["| dropouts | n_min | degree k | threshold t | completed | failures by step | union bound |",
            "|---|---|---|---|---|---|---|"]
    cases = [(0.1, 0.8, default), (0.1, 0.5, default), (0.3, 0.8, default), (0.3, 0.5, default),
             (0.1, 0.5, 40), (0.3, 0.5, 40)]
    k30 = default
    while k30 < n - 1 and round_failure_bound(n, k30, 0.3) > 0.01:
        k30 += 2
    cases += [(0.3, 0.5, k30), (0.3, 0.5, k30 - 10)]
    cases = [(f, s, k, False) for f, s, k in cases] + [(0.1, 0.8, default, True), (0.1, 0.5, default, True)]
    for fraction, share, k, per_step in cases:
        rate, reasons = completion(n, k, fraction, int(share * n), args.rounds, rng, per_step)
        why = ", ".join(f"{r} {c}" for r, c in sorted(reasons.items())) or "—"
        total = 1 - (1 - fraction) ** 4 if per_step else fraction
        label = f"{fraction:.0%} after each step ({total:.0%})" if per_step else f"{fraction:.0%}"
        rows.append(f"| {label} | {share} n | {k}{' (default)' if k == default else ''} | "
                    f"{secure_threshold(n, k)} | {rate:.1%} of {args.rounds} | {why} | "
                    f"{round_failure_bound(n, k, total):.2g} |")
    text = (f"n = {n}; {args.rounds} rounds a row; default degree {default} (secagg_degree_for, sized for a "
            f"20% dropout rate); degree for ≥ 99% at 30% by the union bound: {k30}.\n\n" + "\n".join(rows) + "\n")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
