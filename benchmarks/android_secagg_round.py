"""Benchmark the Java core's device CPU in one secure round next to the Python SDK's.

Usage: .venv/bin/python benchmarks/android_secagg_round.py [--rounds R] [--out FILE]

The setting of benchmarks/secagg_round.py's first row: n = 100 devices, all pairs, no dropouts, M = 4,096
queries (an upload of 2M + 1 = 8,193 words), noise at per-query ε = 1e-3 with κ = 2, n_min = 70. Device 1
is the Java core in its own JVM (``pategail.jvm_device``), the other 99 are the Python SDK's SecAggClient;
coordinator and aggregator are the Python ones, every message goes through bytes. Java CPU is the serving
thread's CPU time inside the JVM (ThreadMXBean) over its five steps, frame decoding and encoding included;
Python CPU is ``time.thread_time`` around each client's calls (run_secure_round's own figure). The same JVM
runs ``--rounds`` rounds: the first is cold (interpreted, then JIT-compiled as it goes), the later ones warm.
Then AndroidPrimitiveCosts.java (next to this script) times each primitive as often as one round runs it
(best of 10 after warm-up), to show where the Java device's time goes.
"""
from __future__ import annotations

import argparse
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pategail.jvm_device import JavaDevice, compile_core, java_missing
from pategail.sdk.net.frames import directory_to_bytes
from pategail.server.privacy.calibration import sum_noise_scales
from pategail.server.secagg.coordinator import SecAggCoordinator
from pategail.server.secagg.round import SecureRoundConfig, enroll_clients, run_secure_round

N, M = 100, 4096


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--out", default="runs/android-secagg-benchmark.md")
    args = ap.parse_args()
    reason = java_missing()
    if reason:
        print(f"error: {reason}")
        return 2
    rng = np.random.default_rng(0)
    scales = sum_noise_scales(epsilon=1e-3, kappa=2.0)
    with tempfile.TemporaryDirectory() as tmp:
        classpath = compile_core(Path(tmp) / "classes")
        replay = Path(tmp) / "replay.json"
        replay.write_text('{"runtime": "1.19.2", "rounds": []}')
        signing = Ed25519PrivateKey.generate()
        coordinator = SecAggCoordinator(signing)
        with JavaDevice(classpath, Path(tmp) / "java", 1, replay) as java:
            coordinator.enroll(1, java.public_keys)      # first: each client keeps the directory it was given
            python_clients = enroll_clients(coordinator, list(range(2, N + 1)))
            java.set_directory(directory_to_bytes(coordinator.directory, signing.sign))
            clients = [java, *python_clients]
            rows = []
            for r in range(1, args.rounds + 1):
                config = SecureRoundConfig(round_id=r, n_min=int(0.7 * N), sum_noise_scale=scales.sum_scale,
                                           sq_sum_noise_scale=scales.sq_sum_scale)
                before = java.cpu_seconds()
                t = time.perf_counter()
                res = run_secure_round(clients, rng.random((N, M)), config, rng, coordinator=coordinator)
                wall = time.perf_counter() - t
                java_ms = (java.cpu_seconds() - before) * 1e3
                py = np.array([res.stats.device_cpu_s[d] for d in range(2, N + 1)]) * 1e3
                assert res.n_survivors == N and 1 in res.survivors
                rows.append((r, java_ms, float(np.median(py)), float(np.percentile(py, 90)), wall))
                print(f"round {r}: Java {java_ms:.1f} ms, Python median {rows[-1][2]:.1f} ms, wall {wall:.1f} s",
                      flush=True)
        bench_dir = Path(__file__).resolve().parent
        subprocess.run(["javac", "-nowarn", "-cp", classpath, "-d", str(Path(tmp) / "classes"),
                        str(bench_dir / "AndroidPrimitiveCosts.java")], check=True)
        costs = subprocess.run(["java", "-cp", classpath, "AndroidPrimitiveCosts", "10"], check=True,
                               capture_output=True, text=True).stdout.strip().splitlines()
    date = subprocess.run(["date"], capture_output=True, text=True).stdout.strip()
    java_version = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    lines = [f"Command: `.venv/bin/python benchmarks/android_secagg_round.py --rounds {args.rounds}` · machine: "
             f"{platform.machine()}, {java_version}, Python {platform.python_version()} · date: {date}", "",
             "| round | Java core device CPU (ms) | Python SDK device CPU median (ms) | Python p90 (ms) | round wall (s) |",
             "|---|---|---|---|---|"]
    lines += [f"| {r} | {j:.1f} | {p:.1f} | {p90:.1f} | {w:.1f} |" for r, j, p, p90, w in rows]
    lines += ["", "| Java primitive, as often as one round runs it (best of 10) | CPU (ms) |", "|---|---|", *costs]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
