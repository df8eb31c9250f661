"""The privacy plan's calibration: noise scale, planned and reported ε, and time, for a few run sizes.

    .venv/bin/python benchmarks/privacy_plan.py [--case EPSILON:QUERIES ...]

Each line: plan_privacy(target ε, δ = 1e-5, κ = 2, Q queries), and the ε the run's accountant (PLD grid
1e-4) reports for the planned releases.
"""
from __future__ import annotations

import argparse
import time

from pategail.server.privacy.accountant import PrivacyAccountant
from pategail.server.privacy.plan import plan_privacy

CASES = [(50.0, 9_008), (8.0, 279_164), (1.0, 279_164)]
"""(target ε, Q): the private train tests' size, and the default configuration on the default data."""

def _case(spec: str) -> tuple[float, int]:
    epsilon, _, queries = spec.partition(":")
    try:
        return float(epsilon), int(queries)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected EPSILON:QUERIES, got {spec!r}") from None


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", type=_case, action="append", help="target ε and planned queries (default: CASES)")
    for target, q in ap.parse_args().case or CASES:
        t0 = time.perf_counter()
        plan = plan_privacy(target, 1e-5, 2.0, q)
        seconds = time.perf_counter() - t0
        acc = PrivacyAccountant(1e-5)
        acc.record(plan.sum_noise_scale, plan.sq_sum_noise_scale, q)
        print(f"target ε {target:g}, Q {q}: b {plan.sum_noise_scale:.4f}, per-query ε {plan.per_query_epsilon:.5g}, "
              f"expected ε {plan.expected_epsilon:.4f}, reported ε {acc.epsilon():.4f}, {seconds:.1f} s", flush=True)
