"""Many benchmarks/game.py runs at once, one process and one torch thread each, with a timeout per run; the
summaries (game.json) merged into one JSON. Used for the issue-19 table (3 cities × 3 seeds) on a machine
with many cores.

Run: .venv/bin/python benchmarks/sweep.py --plan PLAN.json --out DIR [--jobs 16] [--timeout 420]
PLAN.json: [{"name": ..., "data": DATASET_DIR, "seed": S, "config": {TrainConfig settings}, "args": [...]}, ...]
"""
import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--plan", required=True, type=Path)
parser.add_argument("--out", required=True, type=Path)
parser.add_argument("--jobs", type=int, default=os.cpu_count())
parser.add_argument("--timeout", type=float, default=420)
args = parser.parse_args()
plan = json.loads(args.plan.read_text())
args.out.mkdir(parents=True, exist_ok=True)
game = Path(__file__).resolve().parent / "game.py"
env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def one(entry):
    run = args.out / entry["name"]
    config = args.out / f"{entry['name']}.config.json"
    config.write_text(json.dumps(entry.get("config", {})))
    cmd = [sys.executable, str(game), "--data", entry["data"], "--out", str(run), "--seed", str(entry["seed"]),
           "--config", str(config), "--plain-sums", "--test", *entry.get("args", [])]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
        status = done.returncode
        tail = (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as e:
        status, tail = "timeout", str(e.stdout or "")[-3000:]
    result = {"name": entry["name"], "status": status, "wall_s": time.perf_counter() - t0, "log_tail": tail}
    summary = run / "game.json"
    if summary.is_file():
        result["game"] = json.loads(summary.read_text())
    print(f"{entry['name']}: {status} in {result['wall_s']:.0f} s", flush=True)
    return result


with ThreadPoolExecutor(args.jobs) as pool:
    results = list(pool.map(one, plan))
(args.out / "sweep.json").write_text(json.dumps(results, indent=1) + "\n")
