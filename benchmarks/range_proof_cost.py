"""What a per-device range proof would cost at M = 4,096 (issue 14, point 3): measured primitive x operation count.

Usage: .venv/bin/python benchmarks/range_proof_cost.py

Not an implementation: no range-proof library is a dependency of this project, so this measures the one
operation such proofs are made of — a variable-base scalar multiplication on Curve25519 (``cryptography``'s
X25519, a constant-time Montgomery ladder) — on this machine, and multiplies it by the operation counts of an
aggregated Bulletproofs range proof (Bünz et al., IEEE S&P 2018, Sections 4.2-4.3 and 6):

- a device proves each of its 2M = 8,192 encoded values (Σ D and Σ D² slots, each in [0, 2^24]) lies in
  [0, 2^n) with n = 32 (Bulletproofs needs a power of two), one aggregated proof over N = n * 2M bits;
- prover: Pedersen commitments to the 2M values (2 exponentiations each), S (2N), T1 and T2 (4), and the
  inner-product argument (lengths N, N/2, ...: L and R cost 2k, folding the bases 2k more per round: 8N);
- verifier (the coordinator, per device): one multi-exponentiation of size 2N + 2 log2 N + 2M + 5;
- bytes: the proof (2 log2 N + 4 group elements and 5 scalars) plus one commitment per value.

"naive" counts every exponentiation at the measured cost. Optimised libraries batch them (multi-
exponentiation), which is faster by a factor that grows with the size; the table gives the naive figure
and the figure at a 10x speed-up, a generous allowance, to show whether the conclusion depends on it.
"""
from __future__ import annotations

import math
import time

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

M = 4096
N_DEVICES = 100
BITS = 32
GROUP_BYTES = 32


def scalar_mult_seconds(repeats: int = 3000) -> float:
    """Median seconds of one X25519 scalar multiplication (key agreement with a fixed peer)."""
    peer = X25519PrivateKey.generate().public_key()
    keys = [X25519PrivateKey.generate() for _ in range(64)]
    times = []
    for i in range(repeats):
        k = keys[i % 64]
        t = time.perf_counter()
        k.exchange(peer)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    values = 2 * M
    n_bits = BITS * values
    log_n = int(math.log2(n_bits))
    prover_ops = 2 * values + 2 * n_bits + 4 + 8 * n_bits
    verifier_ops = 2 * n_bits + 2 * log_n + values + 5
    proof_bytes = (2 * log_n + 4) * GROUP_BYTES + 5 * 32
    commit_bytes = values * GROUP_BYTES
    c = scalar_mult_seconds()
    print(f"one scalar multiplication: {c * 1e6:.1f} µs (median of 3,000)")
    print(f"values per device: {values}, bits proven: {n_bits} (n = {BITS}), log2 N = {log_n}")
    print(f"prover: {prover_ops:,} exponentiations -> naive {prover_ops * c:.1f} s, "
          f"at 10x {prover_ops * c / 10:.1f} s per device per round")
    print(f"verifier per device: {verifier_ops:,} -> naive {verifier_ops * c:.1f} s, at 10x "
          f"{verifier_ops * c / 10:.1f} s; for n = {N_DEVICES}: naive {N_DEVICES * verifier_ops * c / 60:.1f} min, "
          f"at 10x {N_DEVICES * verifier_ops * c / 600:.1f} min per round")
    print(f"bytes up per device: proof {proof_bytes:,} B + commitments {commit_bytes:,} B")


if __name__ == "__main__":
    main()
