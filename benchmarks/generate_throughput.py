"""Throughput of day generation on one core: days per CPU second and peak memory of the bundle's incremental
policy model with its key/value cache buffers, in process and through `pategail generate`, next to earlier
designs kept for comparison.

Usage (standalone; needs the project installed, e.g. ``make setup``):

    python benchmarks/generate_throughput.py --data runs/pategail-geolife --threads 1 [--json OUT.json]
    python benchmarks/generate_throughput.py --bundle RUN/bundle --threads 1      (a trained bundle)

With ``--data`` it exports an untrained policy (default ``PolicyConfig``) with the training days' initial
states and the place law a ``--no-privacy`` run releases, twice from the same weights: today's bundle
(``policy_step.onnx`` over cache buffers written in place) and the same bundle with the first incremental
model (a cache grown by concatenation at every slot, which older bundles carry and the SDK still runs). Then:

1. in process, one batch of ``--days`` days (default 1,000) through ``generate_days`` with each bundle's
   incremental model, ``--reps`` times after a warm-up (the best and the mean are reported), and the
   full-prefix path (the model re-reads slots 0..t every slot) for ``--old-days`` days (0 skips it; it is slow);
2. ``pategail generate`` end to end in a child process for ``--days`` and ``--big`` days (default 100,000) with
   each variant: bundle loading and checks, geometry, generation in batches of 1,000, the CSV streamed to
   disk; wall time, CPU time (user + system of the child) and peak RSS (VmHWM, read from /proc at exit),
   with torch made unimportable as on a phone.

Everything runs on one core: the process and its children are pinned to ``--cpu`` (default 0; -1: no pin),
ONNX Runtime uses ``--threads`` intra-op threads in process (the CLI always uses one, as devices do), and
numpy's BLAS one thread. ``--variants`` picks what runs (default ``buffers``, today's code): "concat" and
"buffers" share the environment code, so their difference is the policy model and its cache;
"masked-explore" and "buffers" share the model, so theirs is the explore draw (every move masks and sums a
cell's 1,000 explore weights, instead of searching its kept cumulative weights); "table-at-start-up" is
"buffers" with the whole neighbour table built at start-up instead of rows computed as read (the same in
process; the CLI's start-up differs). For the last variant it also prints where the in-process time goes
(features, mask, the ONNX Runtime call, cache-row writes, sampling, environment) and the ONNX Runtime call alone
on synthetic inputs. On a shared machine wall time overstates the cost; CPU time is what the process itself was
scheduled for, so both are printed, with the load average before and after each measurement. Prints a markdown
table and, last, one line ``JSON {...}`` with every figure (also written to ``--json``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

_CHILD = textwrap.dedent("""
    import sys, json
    import os
    sys.modules["torch"] = None    # as on a phone: the onnxruntime-training wheel imports torch when it can
    if os.environ.get("PATEGAIL_BENCH_MASKED_EXPLORE"):
        import pategail.sdk.epr
        pategail.sdk.epr.RANK_TABLE_MAX = 0                      # explore weights masked and summed every move
    if os.environ.get("PATEGAIL_BENCH_EAGER_GEOMETRY"):
        import pategail.sdk.epr                                  # the whole neighbour table at start-up
        build = pategail.sdk.epr.CellGeometry.build.__func__
        pategail.sdk.epr.CellGeometry.build = classmethod(lambda cls, c, k, lazy=False: build(cls, c, k))
    if os.environ.get("PATEGAIL_BENCH_STAGE"):
        import pategail.sdk.decoding                             # the cache buffers' stage (47: one stage)
        pategail.sdk.decoding.BufferedDecoder.STAGE = int(os.environ["PATEGAIL_BENCH_STAGE"])
    from pategail.sdk.cli import main
    rc = main(sys.argv[1:])
    hwm = int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])
    print(json.dumps({"rc": rc, "maxrss_kb": hwm}), file=sys.stderr)
""")
_ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def load() -> float:
    return round(os.getloadavg()[0], 2)


def old_path(session, geometry, homes, first, rng, alpha, explore_factors, places):
    """The full-prefix path: the model re-reads slots 0..t, features recomputed each slot."""
    from pategail.sdk.epr import EPREnvironment
    from pategail.sdk.generate import policy_step, sample_actions

    env = EPREnvironment(geometry, alpha=alpha, explore_factors=explore_factors, rng=rng, places=places)
    env.reset(homes, first)
    while not env.done:
        env.step(sample_actions(policy_step(session, env.history(), env.homes, geometry.cells), rng))
    return env.days.copy()


def timed(fn):
    w, c, l0 = time.perf_counter(), time.process_time(), load()
    out = fn()
    return out, {"wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c, "load": [l0, load()]}


def cli(bundle: Path, days: int, out: Path, cpu: int, masked_explore: bool = False,
        eager_geometry: bool = False, stage: int | None = None) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    l0, t0 = load(), time.perf_counter()
    pin = ["taskset", "-c", str(cpu)] if cpu >= 0 and shutil.which("taskset") else []
    cmd = [*pin, sys.executable, "-c", _CHILD, "-q", "generate", "--bundle", str(bundle), "--days", str(days),
           "--out", str(out), "--seed", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATEGAIL_BENCH_")}
    env = {**env, **_ONE_THREAD, **({"PATEGAIL_BENCH_MASKED_EXPLORE": "1"} if masked_explore else {}),
           **({"PATEGAIL_BENCH_EAGER_GEOMETRY": "1"} if eager_geometry else {}),
           **({"PATEGAIL_BENCH_STAGE": str(stage)} if stage else {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(proc.stderr)
    info = json.loads(proc.stderr.strip().splitlines()[-1])
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size = out.stat().st_size
    out.unlink()
    return {"days": days, "wall_s": wall, "cpu_s": cpu_s, "load": [l0, load()],
            "peak_rss_mb": info["maxrss_kb"] / 1024, "csv_mb": size / 1e6}


def untrained_bundles(data: Path, out: Path, heads: int | None = None,
                      layers: int | None = None, width: int | None = None) -> tuple[Path, Path]:
    """(today's bundle, the same with the first incremental model) of one untrained policy of the shape a
    training run makes (``TrainConfig``'s defaults), with ``heads`` attention heads, ``layers`` blocks and
    token width ``width`` (d_model) when given."""
    import onnx

    import pategail.export.bundle as export
    from pategail.baselines.epr import user_homes
    from pategail.data.dataset import load_dataset
    from pategail.export.discriminator import Discriminator
    from pategail.export.onnx_policy import export_policy_concat_step_onnx
    from pategail.sdk.bundle import Environment
    from pategail.sdk.contribution import DAYS_CAP
    from pategail.sdk.epr import DEFAULT_ALPHA, DEFAULT_CANDIDATES
    from pategail.sdk.features import infer_home
    from pategail.sdk.places import place_contribution
    from pategail.server.places import place_law_from_noisy_sums
    from pategail.server.config import TrainConfig
    from pategail.server.coordinator import policy_config
    from pategail.server.policy import Policy

    ds = load_dataset(data)
    homes = user_homes(ds.train_days, ds.train_users)
    states = np.column_stack([homes, ds.train_days[:, 0]])
    # the place law as a --no-privacy run releases it, so the explore law costs what a trained bundle's does
    sums = sum(place_contribution(ds.user_days(u), infer_home(ds.user_days(u)), ds.n_cells, DAYS_CAP)
               for u in ds.users)
    env = Environment(ds.cells, DEFAULT_ALPHA, DEFAULT_CANDIDATES, states, np.full(len(states), 1 / len(states)),
                      places=place_law_from_noisy_sums(sums, ds.n_cells))
    shape = {k: v for k, v in (("n_heads", heads), ("n_layers", layers), ("d_model", width)) if v is not None}
    policy, discriminator = Policy(policy_config(TrainConfig(policy=shape), ds.n_cells)), Discriminator()
    new = export.export_bundle(policy, discriminator, out / "buffers", environment=env)
    # the same export with the step-model writer of before (manifest and hashes then describe that file)
    today = export.save_policy_step_onnx
    export.save_policy_step_onnx = lambda p, path: onnx.save(export_policy_concat_step_onnx(p), path)
    try:
        old = export.export_bundle(policy, discriminator, out / "concat", environment=env)
    finally:
        export.save_policy_step_onnx = today
    return new, old


def in_process(bundle_dir: Path, rows: np.ndarray, threads: int, reps: int,
               masked_explore: bool = False) -> tuple[dict, np.ndarray]:
    import pategail.sdk.epr as epr
    from pategail.sdk.bundle import load_bundle, open_generation_session
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.generate import generate_days

    if masked_explore:
        today, epr.RANK_TABLE_MAX = epr.RANK_TABLE_MAX, 0
        try:
            return in_process(bundle_dir, rows, threads, reps)
        finally:
            epr.RANK_TABLE_MAX = today
    bundle = load_bundle(bundle_dir)
    env = bundle.environment
    geometry = CellGeometry.build(env.cells, env.candidates)
    session = open_generation_session(bundle, threads=threads)
    law = dict(alpha=env.alpha, explore_factors=env.explore_factors, places=env.places, max_cells=env.max_day_cells)

    def run():
        return generate_days(session, geometry, rows[:, 0], rows[:, 1], np.random.default_rng(1), **law).days

    days = run()                              # warm-up: ONNX Runtime's first runs, the explore weights kept
    runs = [timed(run)[1] for _ in range(reps)]
    best = min(runs, key=lambda r: r["cpu_s"])
    return {"days": len(rows), "best_cpu_s": best["cpu_s"], "best_wall_s": best["wall_s"],
            "mean_cpu_s": float(np.mean([r["cpu_s"] for r in runs])), "runs": runs}, days


def breakdown(bundle_dir: Path, rows: np.ndarray, threads: int, reps: int) -> dict:
    """CPU ms per 1,000 days of each part of ``generate_days``' loop (the same calls, timed one by one; the
    best of ``reps`` after a warm-up), and of the ONNX Runtime call alone (what is left for everything else
    within a budget): on the loop's own inputs of its last batch, replayed, and on synthetic inputs of the same
    shapes (uniform features, random cells)."""
    from pategail.sdk.bundle import load_bundle, open_generation_session
    from pategail.sdk.decoding import POLICY_INPUT_SLOT, BufferedDecoder, decoder_for
    from pategail.sdk.epr import CellGeometry, EPREnvironment
    from pategail.sdk.generate import sample_actions

    bundle = load_bundle(bundle_dir)
    env_law = bundle.environment
    geometry = CellGeometry.build(env_law.cells, env_law.candidates)
    session = open_generation_session(bundle, threads=threads)
    decoder = decoder_for(session)
    if not isinstance(decoder, BufferedDecoder):
        return {}
    clock = time.process_time
    parts = ("features", "mask", "ORT call", "cache writes", "sampling", "environment")

    recorded = []

    def one_batch() -> dict:
        spent = dict.fromkeys(parts, 0.0)
        recorded.clear()
        rng = np.random.default_rng(1)
        env = EPREnvironment(geometry, alpha=env_law.alpha, explore_factors=env_law.explore_factors, rng=rng,
                             places=env_law.places)
        env.reset(np.asarray(rows[:, 0], dtype=np.int32), rows[:, 1])
        decoder.reset(len(rows))
        while not env.done:
            c0 = clock()
            f = env.state.features()
            c1 = clock()
            m = env.state.mask()
            c2 = clock()
            feeds = decoder.feeds(env.state.current, f, m)   # ("ORT call" includes the moves between stages)
            log_probs, *new = session.run(decoder._outputs, feeds)
            c3 = clock()
            decoder.write(new)
            c4 = clock()
            a = sample_actions(log_probs[:, -1], rng)
            c5 = clock()
            env.step(a)
            c6 = clock()
            for name, (x, y) in zip(parts, ((c0, c1), (c1, c2), (c2, c3), (c3, c4), (c4, c5), (c5, c6))):
                spent[name] += y - x
            recorded.append((decoder._i, {k: feeds[k].copy()
                                          for k in ("cells", "features", "mask", POLICY_INPUT_SLOT)}))
        return spent

    one_batch()
    runs = [one_batch() for _ in range(reps)]
    best = min(runs, key=lambda r: sum(r.values()))
    per_k = 1e6 / len(rows)
    out = {name: best[name] * per_k for name in parts}
    # the ONNX Runtime call alone, synthetic inputs of the same shapes over the cache buffers of the loop's
    # stages (the memory as the last batch left it)
    stages = {}
    for i in sorted({i for i, _ in recorded}):
        decoder._stage(i)
        stages[i] = dict(decoder._feeds)
    n, g = len(rows), np.random.default_rng(2)
    feeds = [{"cells": g.integers(0, len(env_law.cells), (n, 1)),
              "features": g.random((n, 1, 11), dtype=np.float32), "mask": np.ones((n, 1, 4), dtype=bool),
              POLICY_INPUT_SLOT: f[POLICY_INPUT_SLOT], **stages[i]} for i, f in recorded]

    def model_alone(calls: list[dict]) -> float:
        """CPU ms per 1,000 days of the step model on ``calls`` (47 feeds), best of ``reps`` after a warm-up."""
        spent = []
        for _ in range(reps + 1):
            c0 = clock()
            for f in calls:
                session.run(decoder._outputs, f)
            spent.append(clock() - c0)
        return min(spent[1:]) * per_k

    out["ORT call alone (synthetic inputs)"] = model_alone(feeds)
    # the loop's own inputs of its last batch, replayed over the stages' views of the memory as the batch left it
    # (laid out for 47 rows, so a shorter stage's rows < slot hold other slots' or days' numbers: finite, and the
    # same work for the model)
    out["ORT call alone (the loop's inputs)"] = model_alone([{**f, **stages[i]} for i, f in recorded])
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, help="a prepared data set: export an untrained policy, old and new")
    p.add_argument("--bundle", type=Path, help="instead of --data: a run's bundle (today's model only)")
    p.add_argument("--days", type=int, default=1000, help="days of the in-process and the small CLI runs")
    p.add_argument("--big", type=int, default=100_000, help="days of the large CLI run (0 skips it)")
    p.add_argument("--old-days", type=int, default=0, help="days through the old full-prefix path (slow)")
    p.add_argument("--reps", type=int, default=5, help="timed in-process repetitions after a warm-up")
    p.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads in process")
    p.add_argument("--cpu", type=int, default=0, help="pin to this CPU (-1: no pinning)")
    p.add_argument("--no-cli", action="store_true", help="skip the `pategail generate` runs")
    p.add_argument("--variants", default="buffers",
                   help="with --data, which of concat, masked-explore, table-at-start-up, buffers to run (comma-separated)")
    p.add_argument("--heads", type=int, help="with --data: attention heads of the untrained policy (a model "
                   "change, for its speed only; default TrainConfig's)")
    p.add_argument("--layers", type=int, help="with --data: transformer blocks of the untrained policy "
                   "(default TrainConfig's)")
    p.add_argument("--width", type=int, help="with --data: token width (d_model) of the untrained policy "
                   "(default TrainConfig's)")
    p.add_argument("--json", type=Path, help="also write the JSON result here")
    args = p.parse_args()
    if (args.data is None) == (args.bundle is None):
        p.error("give exactly one of --data and --bundle")
    for name, value in _ONE_THREAD.items():
        os.environ.setdefault(name, value)
    if args.cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})

    import onnxruntime

    from pategail.sdk.bundle import load_bundle

    result = {"machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
                          "onnxruntime": onnxruntime.__version__, "numpy": np.__version__,
                          "pinned_cpu": args.cpu, "threads": args.threads},
              "load_start": load(), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.bundle:
            variants = {"bundle": args.bundle}
        else:
            new, old = untrained_bundles(args.data, tmp, args.heads, args.layers, args.width)
            known = {"concat": old, "masked-explore": new, "table-at-start-up": new, "buffers": new}
            names = [v.strip() for v in args.variants.split(",") if v.strip()]
            if not names or any(v not in known for v in names):
                p.error(f"--variants: choose from {', '.join(known)}")
            variants = {v: known[v] for v in known if v in names}      # "buffers" (today's) last
        env = load_bundle(next(iter(variants.values()))).environment
        rng = np.random.default_rng(0)
        w = env.initial_weights / env.initial_weights.sum()
        rows = env.initial_states[rng.choice(len(w), size=args.days, p=w)]
        result["in_process"], days = {}, {}
        for name, path in variants.items():
            result["in_process"][name], days[name] = in_process(path, rows, args.threads, args.reps,
                                                                masked_explore=name == "masked-explore")
        today = list(variants)[-1]                        # "buffers", or "bundle" with --bundle
        result["same_days"] = all(np.array_equal(d, days[today]) for d in days.values())
        result["breakdown_ms_per_1000_days"] = breakdown(variants[today], rows, args.threads, args.reps)
        if args.old_days:
            from pategail.sdk.bundle import open_generation_session, open_policy_session
            from pategail.sdk.epr import CellGeometry
            from pategail.sdk.generate import generate_days

            bundle = load_bundle(variants[today])
            geometry = CellGeometry.build(env.cells, env.candidates)
            part = rows[:args.old_days]
            old_days, r = timed(lambda: old_path(open_policy_session(bundle, threads=args.threads), geometry,
                                                 part[:, 0], part[:, 1], np.random.default_rng(1), env.alpha,
                                                 env.explore_factors, env.places))
            new_days = generate_days(open_generation_session(bundle), geometry, part[:, 0], part[:, 1],
                                     np.random.default_rng(1), alpha=env.alpha, explore_factors=env.explore_factors,
                                     places=env.places).days
            result["full_prefix"] = {"days": len(part), **r, "same_days": bool(np.array_equal(old_days, new_days))}
        if not args.no_cli:
            result["cli"] = {name: [cli(path, n, tmp / f"{name}-{n}.csv", args.cpu, name == "masked-explore",
                                        name in ("masked-explore", "table-at-start-up", "concat"))
                                    for n in (args.days, args.big) if n]
                             for name, path in variants.items()}
    result["load_end"] = load()
    _print_table(result)
    line = json.dumps(result, separators=(",", ":"))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    print("JSON " + line)


def _cpu_model() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


_LABEL = {"concat": "first incremental model (cache concatenated every slot)",
          "masked-explore": "cache buffers, explore weights masked and summed every move",
          "table-at-start-up": "cache buffers, kept cumulative explore weights, whole neighbour table at start-up",
          "buffers": "cache buffers, kept cumulative explore weights, neighbour rows computed as read (today)",
          "bundle": "the bundle's generation model"}


def _print_table(r: dict) -> None:
    m = r["machine"]
    print(f"{m['cpu']}, {m['cores']} cores; pinned to CPU {m['pinned_cpu']}, {m['threads']} ORT thread(s); "
          f"Python {m['python']}, onnxruntime {m['onnxruntime']}; load average {r['load_start']} at the start, "
          f"{r['load_end']} at the end")
    print("\n| what | days | CPU s | days per CPU s | CPU ms per 1,000 days | wall s | peak RSS MB | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    if "full_prefix" in r:
        f = r["full_prefix"]
        print(f"| old full-prefix path, in process | {f['days']:,} | {f['cpu_s']:.2f} | {f['days'] / f['cpu_s']:,.0f} "
              f"| {1e6 * f['cpu_s'] / f['days']:,.0f} | {f['wall_s']:.2f} | | {f['load'][0]}–{f['load'][1]} |")
    for name, x in r["in_process"].items():
        loads = [load for run in x["runs"] for load in run["load"]]
        print(f"| {_LABEL[name]}, in process (best of {len(x['runs'])}; mean {x['mean_cpu_s']:.3f} s) | "
              f"{x['days']:,} | {x['best_cpu_s']:.3f} | {x['days'] / x['best_cpu_s']:,.0f} | "
              f"{1e6 * x['best_cpu_s'] / x['days']:,.0f} | {x['best_wall_s']:.3f} | | {min(loads)}–{max(loads)} |")
    for name, runs in r.get("cli", {}).items():
        for c in runs:
            print(f"| `pategail generate`, {_LABEL[name]} | {c['days']:,} | {c['cpu_s']:.2f} | "
                  f"{c['days'] / c['cpu_s']:,.0f} | {1e6 * c['cpu_s'] / c['days']:,.0f} | {c['wall_s']:.1f} | "
                  f"{c['peak_rss_mb']:.0f} | {c['load'][0]}–{c['load'][1]} |")
    b = r.get("breakdown_ms_per_1000_days")
    if b:
        print("\nwhere the in-process time goes (CPU ms per 1,000 days, best of the repetitions): "
              + ", ".join(f"{k} {v:.0f}" for k, v in b.items()))
    print(f"\nsame days for the same seed across the variants: {r['same_days']}"
          + (f"; full-prefix path: {r['full_prefix']['same_days']}" if "full_prefix" in r else ""))


if __name__ == "__main__":
    main()
