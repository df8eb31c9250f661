"""Issue 13's acceptance: the privacy–utility table — km JSD to the TEST days on five metrics and wins against
epr, for each total ε and mechanism/granularity, over repeats (seeds), with every device of the data set.

Each cell is one benchmarks/game.py run (the same protocol as `pategail train`: emulated SDK devices, secure
aggregation with the devices' own noise shares, the run's privacy plan) with ``--test``; ε = inf is the same
mechanism and granularity without noise. Choices (mechanism, granularity, settings) are made on training days
(benchmarks/tolerance.py); this table only reports.

Run: .venv/bin/python benchmarks/privacy_utility.py --data runs/pategail-geolife --out runs/pu \
        --epsilon inf 8 4 1 --mechanism gaussian --granularity day --seeds 0 1 [--rounds 60] [--jobs 2]
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
parser.add_argument("--epsilon", nargs="+", default=["inf", "8", "4", "1"])
parser.add_argument("--mechanism", default="gaussian")
parser.add_argument("--granularity", default="day")
parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
parser.add_argument("--rounds", type=int, default=60)
parser.add_argument("--jobs", type=int, default=1)
parser.add_argument("--timeout", type=float, default=7200, help="seconds per run")
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)


def run(job):
    eps, seed = job
    name = f"{args.mechanism}-{args.granularity.replace(':', '')}-eps{eps}-seed{seed}"
    out = args.out / name
    if not (out / "game.json").is_file():
        settings = {"privacy": {"mechanism": args.mechanism, "granularity": args.granularity}}
        if eps != "inf":
            settings["target_epsilon"] = float(eps)
        cfg = args.out / f"{name}.json"
        cfg.write_text(json.dumps(settings))
        cmd = [sys.executable, str(HERE / "game.py"), "--data", str(args.data), "--out", str(out), "--config",
               str(cfg), "--rounds", str(args.rounds), "--seed", str(seed), "--test"]
        with open(args.out / f"{name}.log", "w") as log:
            subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout, check=True)
    g = json.loads((out / "game.json").read_text())
    ours, epr = g["test"]["ours"], g["test"]["epr"]
    return {"epsilon": eps, "seed": seed, "ours": ours, "epr": epr, "wins": sum(ours[k] < epr[k] for k in ours),
            "seconds": g["seconds"]}


rows = list(ThreadPoolExecutor(args.jobs).map(run, [(e, s) for e in args.epsilon for s in args.seeds]))
(args.out / "privacy_utility.json").write_text(json.dumps(rows, indent=1) + "\n")
print("| total ε | seed | Radius | DailyLoc | Distance | G-rank | I-rank | wins vs epr |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r['epsilon']} | {r['seed']} | " + " | ".join(f"{v:.4f}" for v in r["ours"].values())
          + f" | {r['wins']} of 5 |")
print("| epr | | " + " | ".join(f"{v:.4f}" for v in rows[0]["epr"].values()) + " | |")
