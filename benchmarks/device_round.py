"""Benchmark one device's round: CPU time, peak memory of a process holding one device, bytes in and out.

Usage: .venv/bin/python benchmarks/device_round.py [--data DIR] [--out FILE]   (a markdown section)

Setting: a bundle exported on the data set's cell table (default policy and discriminator), one device per
user of the data set holding that user's training days, and one RoundRequest of 88 generated days
(88 × 47 = 4,136 pairs ≥ M = 4,096) with k = 20 training steps of batch 64. Each device is timed separately
(``time.thread_time`` around ``Device.handle``: decoding, featurising its own and the generated days, the k
steps, scoring every pair, saving the checkpoint) and the parts are timed once more on their own. Peak RSS
is VmHWM (/proc/self/status) of a fresh subprocess that holds one device and runs one round, with torch unimportable
(as on a phone) and, for comparison, as the venv imports it (the onnxruntime-training wheel imports torch
when it is installed). Secure-aggregation costs come from ``benchmarks/secagg_round.py`` (n = 100).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from common import machine

N_DAYS = 88          # 88 × 47 = 4,136 generated pairs: the M = 4,096 queries of a round, rounded up to days
K_STEPS = 20
BATCH = 64
M = 4096
# benchmarks/secagg_round.py, n = 100, all pairs, no dropout (BENCHMARKS.md, 2026-11-25)
SECAGG_UP_KB, SECAGG_DOWN_KB, SECAGG_CPU_MS = 81.5, 40.0, 51.3

_PEAK = ("def peak_rss_kb():\n"
         "    return int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])")
"""Peak RSS of this process image, from /proc/self/status. Not ``getrusage(RUSAGE_SELF).ru_maxrss``: on Linux
that survives fork + exec, so a child started by a 500 MB parent reports the parent's peak."""

_CHILD = textwrap.dedent("""
    import json, sys, time
    if sys.argv[2] == "no-torch":
        sys.modules["torch"] = None
    from pathlib import Path
    import numpy as np
    t0 = time.process_time()
    PEAK
    from pategail.sdk.device import Device
    work = Path(sys.argv[1])
    device = Device(work / "device", 1, rng=np.random.default_rng(0))
    device.install_bundle(work / "bundle")
    device.add_days(np.load(work / "days.npy"))
    reply = device.handle((work / "request.bin").read_bytes())
    print(json.dumps({"maxrss_kb": peak_rss_kb(),
                      "torch": sys.modules.get("torch") is not None, "cpu_s": time.process_time() - t0}))
""")


def _export(data: Path, out: Path):
    import torch

    from pategail.data.dataset import load_dataset
    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.sdk.bundle import Environment
    from pategail.sdk.epr import DEFAULT_ALPHA, DEFAULT_CANDIDATES
    from pategail.server.policy import Policy, PolicyConfig

    ds = load_dataset(data)
    torch.manual_seed(0)
    env = Environment(cells=ds.cells, alpha=DEFAULT_ALPHA, candidates=DEFAULT_CANDIDATES)
    return ds, export_bundle(Policy(PolicyConfig(n_cells=ds.n_cells)), Discriminator(), out, environment=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("runs/pategail-geolife"),
                        help="prepared data set (default: runs/pategail-geolife; `pategail data prepare` makes it)")
    parser.add_argument("--out", type=Path, default=Path("runs/device-benchmark.md"), help="markdown file to write")
    args = parser.parse_args()

    from pategail.sdk.bundle import load_bundle, open_policy_session, open_training_session
    from pategail.sdk.device import Device
    from pategail.sdk.epr import CellGeometry
    from pategail.sdk.features import N_PAIR_FEATURES, label_actions, pair_features
    from pategail.sdk.generate import generate_days
    from pategail.sdk.messages import PolicyUpdate, RoundRequest, from_bytes

    tmp = Path(tempfile.mkdtemp(prefix="device-bench-"))
    ds, bundle_dir = _export(args.data, tmp / "bundle")
    bundle = load_bundle(bundle_dir)
    rng = np.random.default_rng(0)
    # the coordinator's query batch: days generated from training (home, first cell) pairs of random users
    users = ds.users
    homes = np.array([np.bincount(ds.user_days(u)[:, :12].ravel()).argmax() for u in rng.choice(users, N_DAYS)])
    firsts = ds.train_days[rng.choice(len(ds.train_days), N_DAYS), 0]
    geometry = CellGeometry.build(ds.cells, bundle.environment.candidates)
    g = generate_days(open_policy_session(bundle), geometry, homes, firsts, rng, alpha=bundle.environment.alpha,
                      max_cells=bundle.environment.max_day_cells)
    request = RoundRequest(1, K_STEPS, BATCH, g.days, homes.astype(np.int32), g.actions).to_bytes()
    policy_update = PolicyUpdate.for_model(1, bundle.policy.path.read_bytes()).to_bytes()

    per_device, sizes = [], None
    for i, u in enumerate(users):
        device = Device(tmp / f"device-{i}", i, rng=np.random.default_rng(i))
        device.install_bundle(bundle_dir)
        device.add_days(ds.user_days(u))
        t = time.thread_time()
        reply = device.handle(request)
        per_device.append((len(ds.user_days(u)), time.thread_time() - t))
        assert from_bytes(reply).kind == "round_request"
        sizes = len(request), len(reply), len(policy_update), len(device.handle(policy_update))

    # the parts, once, on the median user
    days = ds.user_days(users[len(users) // 2])
    session = open_training_session(bundle)
    cells = ds.cells
    h = np.full(len(days), np.bincount(days[:, :12].ravel()).argmax())
    t = time.thread_time()
    pos = pair_features(days, h, label_actions(days, h), cells).reshape(-1, N_PAIR_FEATURES)
    neg = pair_features(g.days, homes, g.actions, cells).reshape(-1, N_PAIR_FEATURES)
    t_feat = time.thread_time() - t
    labels = np.r_[np.ones(BATCH // 2), np.zeros(BATCH // 2)].astype(np.float32)
    t = time.thread_time()
    for _ in range(K_STEPS):
        session.train_step(np.concatenate([pos[rng.integers(0, len(pos), BATCH // 2)],
                                           neg[rng.integers(0, len(neg), BATCH // 2)]]), labels)
    t_train = time.thread_time() - t
    t = time.thread_time()
    session.score(neg[:M])
    t_score = time.thread_time() - t
    t = time.thread_time()
    session.save_checkpoint(tmp / "bench.ckpt")
    t_save = time.thread_time() - t

    rss = {}
    child = tmp / "child"
    child.mkdir()
    os.symlink(bundle_dir, child / "bundle")
    np.save(child / "days.npy", days)
    (child / "request.bin").write_bytes(request)
    for mode in ("no-torch", "as-installed"):
        proc = subprocess.run([sys.executable, "-c", _CHILD.replace("PEAK", _PEAK), str(child), mode],
                              capture_output=True, text=True, check=True)
        rss[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
        import shutil
        shutil.rmtree(child / "device")
    base = subprocess.run([sys.executable, "-c", _PEAK + "\nimport sys; sys.modules['torch'] = None\n"
                           "import numpy, onnxruntime\nprint(peak_rss_kb())"],
                          capture_output=True, text=True, check=True)
    base_kb = int(base.stdout.strip())

    cpu = np.array([c for _, c in per_device]) * 1e3
    n_days = np.array([n for n, _ in per_device])
    date = subprocess.run(["date"], capture_output=True, text=True).stdout.strip()
    req_b, ack_b, pol_b, pol_ack_b = sizes
    lines = [
        "## On-device round: CPU, memory, bytes — " + date,
        "",
        f"Command: `.venv/bin/python benchmarks/device_round.py --data {args.data}` · machine: {machine()}, "
        f"one intra-op thread per session · date: {date}",
        "",
        f"{len(users)} devices, one per user of `{args.data}` ({ds.n_cells:,} cells), each holding that user's "
        f"training days ({n_days.min()}–{n_days.max()}, median {int(np.median(n_days))}). One RoundRequest: "
        f"{N_DAYS} generated days = {N_DAYS * 47:,} pairs (≥ M = {M:,}), k = {K_STEPS} steps of batch {BATCH}. "
        "CPU = `time.thread_time` around `Device.handle` (decode, featurise own and generated days, k steps, "
        "score every pair, save the checkpoint atomically).",
        "",
        "| per device and round | value |",
        "|---|---:|",
        f"| CPU of `handle(RoundRequest)`, median over {len(users)} devices | {np.median(cpu):.1f} ms |",
        f"| CPU, p90 / max | {np.percentile(cpu, 90):.1f} / {cpu.max():.1f} ms |",
        f"| of which: featurising own + generated days (median user, {len(days)} days) | {t_feat * 1e3:.1f} ms |",
        f"| of which: {K_STEPS} training steps, batch {BATCH} | {t_train * 1e3:.1f} ms |",
        f"| of which: scoring M = {M:,} pairs | {t_score * 1e3:.1f} ms |",
        f"| of which: saving the checkpoint | {t_save * 1e3:.1f} ms |",
        f"| secure aggregation, device CPU (n = 100, M = 4,096; secagg_round.py) | {SECAGG_CPU_MS:.1f} ms |",
        f"| peak RSS, process holding one device, torch unimportable (as on a phone) | "
        f"{rss['no-torch']['maxrss_kb'] / 1024:.0f} MiB |",
        f"| peak RSS, same, as this venv imports it (onnxruntime-training pulls in torch) | "
        f"{rss['as-installed']['maxrss_kb'] / 1024:.0f} MiB |",
        f"| peak RSS of `import numpy, onnxruntime` alone (torch unimportable) | {base_kb / 1024:.0f} MiB |",
        f"| bytes in: RoundRequest ({N_DAYS} days) | {req_b:,} |",
        f"| bytes out: Ack | {ack_b:,} |",
        f"| bytes in: PolicyUpdate (when the policy changes) / its Ack | {pol_b:,} / {pol_ack_b:,} |",
        f"| bytes out / in: secure aggregation, n = 100 (secagg_round.py) | {SECAGG_UP_KB * 1000:,.0f} / "
        f"{SECAGG_DOWN_KB * 1000:,.0f} |",
        "",
        f"Per round a device receives {req_b + SECAGG_DOWN_KB * 1000:,.0f} bytes and sends "
        f"{ack_b + SECAGG_UP_KB * 1000:,.0f} (plus {pol_b:,} in when the coordinator publishes a new policy). "
        f"Whole-process CPU of the RSS child (imports, bundle install and verification, one round): "
        f"{rss['no-torch']['cpu_s']:.2f} s without torch, {rss['as-installed']['cpu_s']:.2f} s with.",
        "",
    ]
    text = "\n".join(lines)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
