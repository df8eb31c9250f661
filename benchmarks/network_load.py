"""Load of a served run: N devices in P processes (`pategail emulate`) against `pategail serve` on loopback,
next to the same run in one process (the emulator's in-process fleet).

Network: seconds per round (between the service's status changes), the service process's CPU seconds and
peak RSS (coordinator and HTTP service are one process), HTTP bytes (request and status lines, headers and
bodies) per device and round, and the service's handling time per request (p50/p99 by route; a poll's wait
for work excluded), plus each order's turnaround (delivery to reply, device work included).
In-process: seconds per round, the process's CPU and peak RSS (it holds every device), protocol bytes per
device and round. With more devices than users, device i holds user i mod U's days (--share-users).

Run: .venv/bin/python benchmarks/network_load.py --data runs/pategail-geolife --devices 200 --processes 4 \\
     --rounds 3 --out runs/network-load [--config C.json] [--skip-in-process]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from common import initial_bundle


def _proc_cpu_rss(pid: int) -> tuple[float, float]:
    """(CPU seconds of the process and its reaped children, peak RSS MiB) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    cpu = sum(int(fields[i]) for i in (11, 12, 13, 14)) / tick
    hwm = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM"))
    return cpu, int(hwm.split()[1]) / 1024


def _status(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url + "/status", timeout=10) as r:
            return json.loads(r.read())
    except OSError:
        return None


def network(args, out: Path) -> dict:
    run = out / "served"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    common = ["--no-downstream", "--no-progress"] + (["--config", str(args.config)] if args.config else [])
    serve = subprocess.Popen([sys.executable, "-m", "pategail", "serve", "--data", str(args.data), "--out", str(run),
                              "--epsilon", str(args.epsilon), "--rounds", str(args.rounds), "--port", "0",
                              "--min-devices", str(args.devices), "--round-deadline", "600", *common],
                             stdout=open(out / "serve.log", "wb"), stderr=subprocess.STDOUT, start_new_session=True,
                             env=env)
    emulate = None
    try:
        while not (run / "service.url").is_file():
            if serve.poll() is not None:
                raise SystemExit(f"serve exited: {(out / 'serve.log').read_text()[-2000:]}")
            time.sleep(0.2)
        url = (run / "service.url").read_text().strip()
        emulate = subprocess.Popen([sys.executable, "-m", "pategail", "-q", "emulate", "--server", url, "--data",
                                    str(args.data), "--devices", str(args.devices), "--processes",
                                    str(args.processes), "--store", str(out / "devices"), "--share-users",
                                    "--tokens", str(run / "enrol-tokens.txt")],
                                   stdout=open(out / "emulate.log", "wb"), stderr=subprocess.STDOUT,
                                   start_new_session=True, env=env)
        marks, last, cpu_rss = [], None, (0.0, 0.0)
        while serve.poll() is None:
            s = _status(url)
            try:
                cpu_rss = _proc_cpu_rss(serve.pid)
            except (OSError, StopIteration):
                pass
            if s is not None:
                key = (s["phase"], s.get("round"), s.get("participants"))
                if key != (last and last[0]):
                    marks.append({"t": time.perf_counter(), "phase": s["phase"], "round": s.get("round"),
                                  "cpu_s": cpu_rss[0], "traffic": s.get("traffic")})
                last = (key, s)
            time.sleep(0.5)
        assert serve.returncode == 0, (out / "serve.log").read_text()[-3000:]
        emulate.wait(timeout=300)
    finally:
        for p in (serve, emulate):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return {"marks": marks, "service_cpu_s": cpu_rss[0], "service_peak_rss_mib": cpu_rss[1],
            "final_status": last[1] if last else None}


def in_process(args, out: Path) -> dict:
    import numpy as np
    import torch

    from pategail.data.dataset import load_dataset
    from pategail.emulator import EmulatedFleet, choose_users
    from pategail.server.config import TrainConfig
    from pategail.server.coordinator import Coordinator

    torch.set_num_threads(1)
    dataset = load_dataset(args.data)
    overrides = {"rounds": args.rounds, "privacy": {"epsilon": args.epsilon}}
    config = (TrainConfig.from_file(args.config, overrides) if args.config
              else TrainConfig.from_dict(overrides, where="options"))
    run = out / "in-process"
    chosen = choose_users(dataset.users, None, 0)
    users = [chosen[i % len(chosen)] for i in range(args.devices)]
    config = config.for_devices(len(users))                 # a private plan is sized for the run's devices
    t0 = time.perf_counter()
    bundle = initial_bundle(config, dataset, 0, run / "bundle-initial", run / "checkpoint")
    fleet = EmulatedFleet(dataset, users, run / "devices", bundle, seed=0)
    coordinator = Coordinator(config, fleet, dataset.cells, run, seed=0)
    setup_s = time.perf_counter() - t0
    rounds = []
    t_start = time.perf_counter()
    coordinator.train(lambda stats: rounds.append({"round": stats.round, "seconds": stats.seconds,
                                                   "bytes_up": stats.bytes_up, "bytes_down": stats.bytes_down}))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"setup_s": setup_s, "train_s": time.perf_counter() - t_start, "rounds": rounds,
            "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024,
            "devices": len(users), "distinct_users": int(len(np.unique(users)))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--devices", type=int, default=200)
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epsilon", type=float, default=10.0)
    p.add_argument("--config", type=Path, default=None)
    p.add_argument("--skip-in-process", action="store_true")
    p.add_argument("--skip-network", action="store_true")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if not args.skip_network:
        result["network"] = network(args, args.out)
        (args.out / "result.json").write_text(json.dumps(result, indent=1))
    if not args.skip_in_process:
        result["in_process"] = in_process(args, args.out)
    (args.out / "result.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1)[:4000])


if __name__ == "__main__":
    main()
