"""Throughput of day generation on one core: days/s and peak memory, old path against incremental decoding.

Usage: .venv/bin/python benchmarks/generate_throughput.py --bundle RUN/bundle [--old-days 1000]
       (or --data DIR to export an untrained policy with the training days' initial states and place law)

Measured, each on one core (ONNX Runtime with one intra-op thread; the CLI runs under ``taskset -c 0``):

1. the old path — at every slot the full-prefix model re-reads l_0..l_t, with ``state_features`` and
   ``action_mask`` of the whole prefix recomputed (the loop before issue 17);
2. ``generate_days`` with the bundle's incremental model (key/value cache) and the running day state, one
   batch of 1,000 days;
3. ``pategail generate`` end to end for 1,000 and 100,000 days (bundle loading, geometry, generation in
   batches of 1,000, streaming the CSV to disk): wall time, CPU time (user + system) and peak RSS (VmHWM of
   the process, read from /proc at exit), with torch made unimportable as on a phone (the
   onnxruntime-training wheel imports torch at ``import onnxruntime`` when it is installed: +300 MB).

Wall time on a loaded machine overstates the cost; CPU time is what the process itself used, so both are
printed. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

_CHILD = textwrap.dedent("""
    import sys, json
    sys.modules["torch"] = None    # as on a phone: the onnxruntime-training wheel imports torch when it can
    from pategail.cli import main
    rc = main(sys.argv[1:])
    hwm = int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])
    print(json.dumps({"rc": rc, "maxrss_kb": hwm}), file=sys.stderr)
""")


def old_path(session, geometry, homes, first, rng, alpha, explore_factors):
    from pategail.sdk.epr import EPREnvironment
    from pategail.sdk.generate import policy_step, sample_actions

    env = EPREnvironment(geometry, alpha=alpha, explore_factors=explore_factors, rng=rng)
    env.reset(homes, first)
    while not env.done:
        env.step(sample_actions(policy_step(session, env.history(), env.homes, geometry.cells), rng))
    return env.days.copy()


def timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def cli(bundle: Path, days: int, out: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = ["taskset", "-c", "0", sys.executable, "-c", _CHILD, "-q", "generate", "--bundle", str(bundle),
           "--days", str(days), "--out", str(out), "--seed", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(proc.stderr)
    info = json.loads(proc.stderr.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "maxrss_mb": info["maxrss_kb"] / 1024, "bytes": out.stat().st_size}


def untrained_bundle(data: Path, out: Path) -> Path:
    from pategail.baselines.epr import user_homes
    from pategail.data.dataset import load_dataset
    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import Environment
    from pategail.sdk.epr import DEFAULT_ALPHA, DEFAULT_CANDIDATES
    from pategail.server.policy import Policy, PolicyConfig

    from pategail.sdk.features import infer_home
    from pategail.sdk.places import place_contribution
    from pategail.sdk.store import DAYS_CAP
    from pategail.server.places import place_law_from_noisy_sums

    ds = load_dataset(data)
    homes = user_homes(ds.train_days, ds.train_users)
    states = np.column_stack([homes, ds.train_days[:, 0]])
    # the place law as a --no-privacy run releases it, so the explore law costs what a trained bundle's does
    sums = sum(place_contribution(ds.user_days(u), infer_home(ds.user_days(u)), ds.n_cells, DAYS_CAP)
               for u in ds.users)
    env = Environment(ds.cells, DEFAULT_ALPHA, DEFAULT_CANDIDATES, states, np.full(len(states), 1 / len(states)),
                      places=place_law_from_noisy_sums(sums, ds.n_cells))
    return export_bundle(Policy(PolicyConfig(n_cells=ds.n_cells)), Discriminator(), out, environment=env)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", type=Path, help="a run's bundle (with released initial states)")
    p.add_argument("--data", type=Path, help="without --bundle: export an untrained policy on this data set")
    p.add_argument("--old-days", type=int, default=1000, help="days for the old path (it is slow)")
    p.add_argument("--big", type=int, default=100_000, help="days of the large CLI run")
    args = p.parse_args()

    from pategail.sdk.bundle import load_bundle, open_generation_session, open_policy_session
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.generate import generate_days

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bundle_dir = args.bundle or untrained_bundle(args.data, tmp / "bundle")
        bundle = load_bundle(bundle_dir)
        env = bundle.environment
        geometry = CellGeometry.build(env.cells, env.candidates)
        rng = np.random.default_rng(0)
        w = env.initial_weights / env.initial_weights.sum()
        rows = env.initial_states[rng.choice(len(w), size=1000, p=w)]
        law = dict(alpha=env.alpha, explore_factors=env.explore_factors)
        old_rows = rows[:args.old_days]
        old, ow, oc = timed(lambda: old_path(open_policy_session(bundle), geometry, old_rows[:, 0], old_rows[:, 1],
                                             np.random.default_rng(1), **law))
        new, nw, nc = timed(lambda: generate_days(open_generation_session(bundle), geometry, rows[:, 0], rows[:, 1],
                                                  np.random.default_rng(1), **law))
        same = np.array_equal(old, generate_days(open_generation_session(bundle), geometry, old_rows[:, 0],
                                                 old_rows[:, 1], np.random.default_rng(1), **law).days)
        small = cli(bundle_dir, 1000, tmp / "small.csv")
        big = cli(bundle_dir, args.big, tmp / "big.csv")

    print(f"bundle: {bundle_dir}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    print("| what | days | wall s | CPU s | days/s (wall) | days/s (CPU) | peak RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(f"| old path (full prefix, re-featurised), in process | {len(old_rows):,} | {ow:.2f} | {oc:.2f} | "
          f"{len(old_rows) / ow:,.0f} | {len(old_rows) / oc:,.0f} | |")
    print(f"| generate_days, incremental, in process | 1,000 | {nw:.2f} | {nc:.2f} | {1000 / nw:,.0f} | "
          f"{1000 / nc:,.0f} | |")
    for n, r in ((1000, small), (args.big, big)):
        print(f"| `pategail generate` (CLI, CSV streamed) | {n:,} | {r['wall']:.1f} | {r['cpu']:.1f} | "
              f"{n / r['wall']:,.0f} | {n / r['cpu']:,.0f} | {r['maxrss_mb']:.0f} |")
    print(f"\nold and new path gave the same {len(old_rows):,} days for the same seed: {same}; "
          f"{args.big:,}-day file: {big['bytes'] / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
