"""A Java device next to a Python device in one served run: each device its own process on loopback —
`pategail device` (the Python SDK) and the Android core's `NetDevice` (JVM, MlpTrainer) — against
`pategail serve` (in this process, its HTTP service counting every device's bytes).

Per device kind: CPU seconds of the device process (all threads) until the environment release (start,
enrolment, bundle download, environment contribution) and from there to the end (the reward rounds, per
round), peak RSS, and HTTP bytes per release (request and status lines, headers and bodies of its signed
requests — polls, replies, the key directory — up and down).

Run: .venv/bin/python benchmarks/java_device.py --devices 4 --rounds 3 --out runs/java-device \\
     [--config C.json] [--jvm-flags "-Xmx64m -XX:+UseSerialGC"] [--epsilon 50]

Without ``--epsilon`` the run has no noise; with it, the run's default private plan (the Gaussian mechanism:
noise shares, the environment's region sums, every device's ledger and budget checks).
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from network_load import _proc_cpu_rss  # noqa: E402

TINY = {"days_per_round": 6, "discriminator": {"steps": 2, "batch_size": 16}, "environment": {"candidates": 50, "action_prior_days": 16, "action_prior_epochs": 2}, "policy": {"d_model": 16, "n_layers": 1}, "ppo": {"n_epochs": 2, "batch_size": 3}}


def _recording_service(counts: dict):
    """Service.app with a middleware adding each signed request's HTTP bytes to ``counts[device]``."""
    from aiohttp import web

    from pategail.server.net import service

    app = service.Service.app

    def recording_app(self):
        application = app(self)

        @web.middleware
        async def count(request, handler):
            body = await request.read()
            response = await handler(request)
            device = request.headers.get("X-Pategail-Device")
            if device is not None:
                up = len(request.method) + len(request.path_qs) + 11 + len(body) + sum(
                    len(k) + len(v) + 4 for k, v in request.headers.items())
                down = 17 + len(getattr(response, "body", None) or b"") + sum(
                    len(k) + len(v) + 4 for k, v in response.headers.items())
                counts[int(device)][0] += up
                counts[int(device)][1] += down
            return response
        application.middlewares.insert(0, count)
        return application
    service.Service.app = recording_app


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", type=int, default=4, help="devices of each kind (default 4)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--config", type=Path, default=None, help="training config (default: the tests' tiny one)")
    p.add_argument("--jvm-flags", default="", help="flags of the Java device processes")
    p.add_argument("--epsilon", type=float, default=None,
                   help="a private run at this target ε (the default mechanism, Gaussian; the embedded data's cell "
                        "table is built from its fixes, so --data-derived-cells is passed)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)

    from pategail.cli import main as cli
    from pategail.data.dataset import load_dataset
    from pategail.data.prepare import prepare_dataset
    from pategail.jvm_device import compile_core, java_missing
    from pategail.sdk.synthetic import write_synthetic_csv
    from pategail.server.checkpoint import read_journal

    reason = java_missing()
    if reason:
        print(f"no Java: {reason}", file=sys.stderr)
        return 2
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    classpath = compile_core(Path(tempfile.mkdtemp(prefix="java-core-")))
    data = out / "data"
    if not data.is_dir():
        prepare_dataset("pategail", ROOT / "data" / "default", data, allow_pickle=True)
    dataset = load_dataset(data)
    n = 2 * args.devices
    assert n <= len(dataset.users), f"at most {len(dataset.users)} devices (one user each)"
    config = out / "config.json"
    config.write_text(args.config.read_text() if args.config else json.dumps({**TINY, "rounds": args.rounds}))
    run = out / "run"
    counts = defaultdict(lambda: [0, 0])
    _recording_service(counts)
    codes: list[int] = []
    serve = threading.Thread(target=lambda: codes.append(cli([
        "-q", "serve", "--data", str(data), "--out", str(run), "--config", str(config), "--rounds", str(args.rounds),
        *(["--no-privacy"] if args.epsilon is None else ["--epsilon", str(args.epsilon), "--data-derived-cells"]),
        "--no-downstream", "--no-progress", "--min-devices", str(n), "--open-enrolment",
        "--port", "0"])), daemon=True)
    serve.start()
    while not (run / "service.url").is_file():
        time.sleep(0.1)
    url = (run / "service.url").read_text().strip()

    procs = {}
    for i in range(n):
        store, csv = out / f"device-{i}", out / f"days-{i}.csv"
        write_synthetic_csv(csv, dataset.user_days(int(dataset.users[i])), dataset.cells)
        common = ["--server", url, "--store", str(store), "--days", str(csv), "--device-id", str(i), "--seed", "0"]
        if i < args.devices:
            cmd = [sys.executable, "-m", "pategail", "-q", "device", *common]
        else:
            cmd = ["java", *shlex.split(args.jvm_flags), "-cp", classpath, "org.pategail.core.tools.NetDevice", *common]
        procs[i] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(out / f"device-{i}.log", "wb"))
    at_env, peak, final = {}, defaultdict(float), {}
    while any(proc.poll() is None for proc in procs.values()):
        for i, proc in procs.items():
            try:
                cpu, rss = _proc_cpu_rss(proc.pid)
            except (OSError, StopIteration):
                continue                                     # exited (or exiting)
            peak[i], final[i] = max(peak[i], rss), cpu
            if i not in at_env and 0 in read_journal(run / "checkpoint"):
                at_env[i] = cpu
        time.sleep(0.2)
    serve.join(timeout=300)
    assert codes == [0], (run / "train.log").read_text()[-2000:]
    journal = read_journal(run / "checkpoint")
    assert all(r.n_survivors == n for r in journal.values()), {r: j.n_survivors for r, j in journal.items()}

    rows = []
    for kind, ids in (("Python (pategail device)", range(args.devices)),
                      ("Java (NetDevice, MlpTrainer)", range(args.devices, n))):
        ids = list(ids)

        def mean(f, ids=ids):
            return sum(f(i) for i in ids) / len(ids)
        rows.append({
            "device": kind,
            "cpu_s_to_env_release": round(mean(lambda i: at_env[i]), 2),
            "cpu_s_per_reward_round": round(mean(lambda i: (final[i] - at_env[i]) / args.rounds), 3),
            "peak_rss_mib": round(mean(lambda i: peak[i]), 1),
            "kib_up_per_release": round(mean(lambda i: counts[i][0]) / len(journal) / 1024, 1),
            "kib_down_per_release": round(mean(lambda i: counts[i][1]) / len(journal) / 1024, 1),
        })
    result = {"devices_per_kind": args.devices, "rounds": args.rounds, "jvm_flags": args.jvm_flags,
              "epsilon": args.epsilon,
              "releases": len(journal), "rows": rows}
    (out / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
