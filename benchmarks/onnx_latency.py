"""Single-thread ONNX Runtime costs of a model bundle, as a device pays them: artifact sizes, one discriminator
training step (batch 64), scoring 4,096 pairs, generating 1,000 days with the policy (ONNX model +
EPR environment + features per step: pategail.sdk.generate.generate_days).

    .venv/bin/python benchmarks/onnx_latency.py [--data PATEGAIL_FOLDER] [--out FILE] [--days N]

Writes a markdown section (the numbers, the command, the machine, the date) to --out and prints it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "pategail-geolife"


def _timeit(fn, repeat: int, warmup: int = 3) -> np.ndarray:
    for _ in range(warmup):
        fn()
    out = np.empty(repeat)
    for i in range(repeat):
        t = time.perf_counter()
        fn()
        out[i] = time.perf_counter() - t
    return out


class _TimedSession:
    """An InferenceSession that adds up the time spent in run()."""

    def __init__(self, session):
        self.session, self.seconds = session, 0.0

    def run(self, output_names, feeds):
        t = time.perf_counter()
        try:
            return self.session.run(output_names, feeds)
        finally:
            self.seconds += time.perf_counter() - t


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="pategail-geolife directory (gps, real.data)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "onnx-benchmark.md", help="markdown file to write")
    ap.add_argument("--days", type=int, default=1000, help="days to generate")
    args = ap.parse_args(argv)

    import onnxruntime as ort
    import torch

    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import load_bundle, open_policy_session, open_scoring_session, open_training_session
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.features import infer_home
    from pategail.sdk.generate import generate_days
    from pategail.server.policy import Policy, PolicyConfig

    torch.set_num_threads(1)
    cells = np.loadtxt(args.data / "gps")
    days = np.loadtxt(args.data / "real.data", dtype=np.int32)
    rng = np.random.default_rng(0)

    with tempfile.TemporaryDirectory() as tmp, torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        t = time.perf_counter()
        bundle_dir = export_bundle(Policy(PolicyConfig(n_cells=len(cells))), Discriminator(), Path(tmp) / "bundle")
        export_s = time.perf_counter() - t
        bundle = load_bundle(bundle_dir)
        sizes = {name: entry["bytes"] for name, entry in bundle.manifest["files"].items()}
        sizes["manifest.json"] = (bundle_dir / "manifest.json").stat().st_size

        # discriminator training step, batch 64
        session = open_training_session(bundle, threads=1)
        pairs = rng.normal(size=(64, 15)).astype(np.float32)
        labels = (rng.random(64) < 0.5).astype(np.float32)
        train = _timeit(lambda: session.train_step(pairs, labels), repeat=2000, warmup=20)

        # scoring 4,096 pairs with the inference model
        scoring = open_scoring_session(bundle, threads=1)
        many = rng.normal(size=(4096, 15)).astype(np.float32)
        score = _timeit(lambda: scoring.run(None, {"pairs": many}), repeat=200)
        score_eval = _timeit(lambda: session.score(many), repeat=200)

        # generating days with the policy: one full day per (home, first cell) of real days
        geometry = CellGeometry.build(cells)
        policy = open_policy_session(bundle, threads=1)
        idx = rng.choice(len(days), args.days, replace=len(days) < args.days)
        homes = np.array([infer_home(d[None]) for d in days[idx]], dtype=np.int32)
        first = days[idx, 0]
        timed = _TimedSession(policy)
        gen = _timeit(lambda: generate_days(timed, geometry, homes, first, np.random.default_rng(1)),
                      repeat=2, warmup=0)
        policy_share = timed.seconds / gen.sum()

    ms = lambda a: f"{np.median(a) * 1e3:.3f} ms (min {a.min() * 1e3:.3f})"  # noqa: E731
    lines = [
        "## ONNX Runtime on-device costs (`benchmarks/onnx_latency.py`)",
        "",
        "Command: `.venv/bin/python benchmarks/onnx_latency.py` · date: "
        f"{dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}",
        f"· machine: {_cpu()}, {os.cpu_count()} cores, one intra-op thread per session · python "
        f"{platform.python_version()}, onnxruntime-training {ort.__version__}, torch {torch.__version__}.",
        f"Bundle: pategail-geolife cell table ({len(cells):,} cells), default `PolicyConfig` "
        f"({bundle.manifest['policy']['n_parameters']:,} parameters), discriminator 15→64→64→1 "
        f"({bundle.n_parameters:,} parameters); export took {export_s:.2f} s.",
        "",
        "| file | bytes |",
        "|---|---:|",
        *(f"| `{name}` | {size:,} |" for name, size in sorted(sizes.items())),
        f"| **total** | **{sum(sizes.values()):,}** |",
        "| of which the discriminator's training artifacts + inference model | "
        f"{sum(v for k, v in sizes.items() if k.startswith('discriminator')):,} |",
        "",
        "| operation (one thread) | median latency |",
        "|---|---:|",
        f"| discriminator training step, batch 64 (forward, backward, AdamW + clipping), 2,000 steps | {ms(train)} |",
        f"| scoring 4,096 pairs, inference model (`logit`, `prob`) | {ms(score)} |",
        f"| scoring 4,096 pairs, eval model of the training session | {ms(score_eval)} |",
        f"| generating {args.days:,} days × 48 slots (policy + EPR environment + features, 47 policy calls) "
        f"| {np.median(gen):.2f} s (min {gen.min():.2f} s) |",
        "",
        f"Generation costs {np.median(gen) / args.days * 1e3:.1f} ms a day; {policy_share:.0%} of it is the policy "
        "model, which re-reads the whole prefix at every slot (47 calls on 1..47 tokens, no key/value cache); "
        "the rest is the EPR environment and the features.",
        "",
    ]
    text = "\n".join(lines)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
