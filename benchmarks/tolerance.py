"""The go/no-go of issue 13: how much Gaussian noise on each released mean reward the generator tolerates.

A NON-PRIVATE experiment: ``TrainConfig.tolerance_noise_std`` = s adds N(0, s²) to every released mean
reward (per block of the granularity) in the protocol without privacy; each run is judged on TRAINING days
only (benchmarks/game.py: 2,350 sampled training days, or all of them when fewer), against the epr baseline
on the same reference. The largest s at which the generator still beats epr on >= 4 of 5 km metrics is the
tolerance of that granularity.

Run: .venv/bin/python benchmarks/tolerance.py --data runs/default/data --out runs/tol \
        --granularity pair block:8 day --noise 0 0.1 0.3 1 [--rounds 60] [--jobs 2]
Then it prints the table (and writes OUT/tolerance.json).
"""
import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).parent
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", required=True, type=Path)
parser.add_argument("--out", required=True, type=Path)
parser.add_argument("--granularity", nargs="+", default=["pair", "block:8", "day"])
parser.add_argument("--noise", nargs="+", type=float, default=[0.0, 0.1, 0.3, 1.0])
parser.add_argument("--rounds", type=int, default=60)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--jobs", type=int, default=1)
parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)
METRICS = ("Radius", "DailyLoc", "Distance", "G-rank", "I-rank")


def run(job):
    granularity, s = job
    name = f"{granularity.replace(':', '')}-s{s:g}-seed{args.seed}"
    out = args.out / name
    result = out / "game.json"
    if not result.is_file():
        cfg = args.out / f"{name}.json"
        # β = 0: every row releases means only, as the Gaussian mechanism does (s = 0 at pair included)
        cfg.write_text(json.dumps({"privacy": {"granularity": granularity, "beta": 0.0}, "tolerance_noise_std": s}))
        cmd = [sys.executable, str(HERE / "game.py"), "--data", str(args.data), "--out", str(out), "--config",
               str(cfg), "--rounds", str(args.rounds), "--seed", str(args.seed), "--plain-sums"]
        with open(args.out / f"{name}.log", "w") as log:
            subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout, check=True)
    g = json.loads(result.read_text())
    ours, epr = g["results"]["ours"], g["results"]["epr"]
    wins = sum(ours[k] < epr[k] for k in ours)
    return {"privacy": {"granularity": granularity}, "noise_std": s, "ours": ours, "epr": epr, "wins": wins, "seconds": g["seconds"]}


jobs = [(gr, s) for gr in args.granularity for s in args.noise]
with ThreadPoolExecutor(args.jobs) as pool:
    rows = list(pool.map(run, jobs))
(args.out / "tolerance.json").write_text(json.dumps(rows, indent=1) + "\n")
print("| granularity | noise std s | " + " | ".join(METRICS) + " | wins vs epr |")
print("|---|---:|" + "---:|" * len(METRICS) + "---:|")
for r in rows:
    print(f"| {r['granularity']} | {r['noise_std']:g} | " + " | ".join(f"{v:.4f}" for v in r["ours"].values())
          + f" | {r['wins']} of 5 |")
print("| epr | | " + " | ".join(f"{v:.4f}" for v in rows[0]["epr"].values()) + " | |")
for gr in args.granularity:
    ok = [r["noise_std"] for r in rows if r["granularity"] == gr and r["wins"] >= 4]
    print(f"tolerance at {gr}: largest s with >= 4 of 5 wins: {max(ok) if ok else 'none'}")
