"""PateGail, DP-FedAvg and the hybrid side by side, from finished runs' report.json alone: method, devices,
ε (target; composed under zero-out and under replace-one), the five km JSDs to the test days, wins against the
run's own epr baseline, the spatial metrics, the invented-mode share and seconds a round.

    .venv/bin/python benchmarks/fedavg_table.py runs/fa/*/        # markdown on stdout
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

KM = ("radius", "dailyloc", "distance", "grank", "irank")
METHODS = {"pategail": "PateGail", "dp-fedavg": "DP-FedAvg", "hybrid": "hybrid"}

ap = argparse.ArgumentParser(description="PateGail, DP-FedAvg and the hybrid side by side, from finished runs' "
                                         "report.json: a markdown table on stdout")
ap.add_argument("runs", nargs="+", type=Path, help="finished runs' folders (each holding report.json)")
args = ap.parse_args()
print("| run | method | server step | devices | rounds | ε target | ε zero-out / replace-one | Radius | DailyLoc | Distance | "
      "G-rank | I-rank | wins vs epr | Density | Trips | Hot-20 ↑ | invented | s / round |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for run in args.runs:
    path = run / "report.json"
    if not path.is_file():
        print(f"{path}: missing (not a finished run)", file=sys.stderr)
        continue
    r = json.loads(path.read_text())
    cfg, privacy = r["training"]["config"], r["privacy"]
    guarantee = (privacy.get("guarantees") or {}).get("against_the_coordinator")
    eps = "—" if guarantee is None else (f"{guarantee['epsilon_zero_out']:.2f} / "
                                        f"{guarantee['epsilon_replace_one']:.2f}")
    km = [r["metrics"][k] for k in KM]
    epr = [r["baselines"]["epr"]["metrics"][k] for k in KM]
    wins = sum(a < b for a, b in zip(km, epr))
    devices = r["training"]["devices"]
    who = f"{devices:,}" + (" (resampled)" if r.get("population") else "")
    sp = r["spatial"]
    fa = cfg.get("fedavg") or {}
    step = "–" if cfg.get("method", "pategail") == "pategail" else f"{fa.get('server_optimizer')} {fa.get('server_lr')}"
    print(f"| {run.name} | {METHODS[cfg.get('method', 'pategail')]} | {step} | {who} | {cfg['rounds']} | "
          f"{privacy['epsilon_target'] if privacy['epsilon_target'] is not None else '∞'} | {eps} | "
          + " | ".join(f"{v:.4f}" for v in km) + f" | {wins} of 5 | {sp['density']:.3f} | {sp['trips']:.3f} | "
          f"{sp['hotspots']:.2f} | {r['guard']['share']:.1%} | {r['training']['seconds_per_round']:.1f} |")
