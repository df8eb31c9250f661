"""The privacy–utility table of finished runs, read from their ``report.json`` alone: one row a
run (devices, total ε target and composed, seed, noise std on a released mean reward and on an environment entry,
the five km JSDs to the test days, wins against the run's own epr, the spatial metrics, the invented-mode share,
seconds a round), then one row per (devices, ε) cell: the mean and range over its seeds, and the wins the mean
scores against the mean of the runs' epr.

    .venv/bin/python benchmarks/report_table.py runs/acc/*        # markdown on stdout

Run directories come from `pategail train` (any fleet); nothing is recomputed.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

KM = ("radius", "dailyloc", "distance", "grank", "irank")
SPATIAL = ("density", "trips", "hotspots")


def read_run(run: Path) -> dict:
    """One run's row; ValueError naming the file when it is not a finished run."""
    report_path = run / "report.json"
    if not report_path.is_file():
        raise ValueError(f"{report_path}: missing (not a finished run)")
    report = json.loads(report_path.read_text())
    try:
        return _row(run, report)
    except KeyError as err:
        raise ValueError(f"{report_path}: no field {err}") from None


def _row(run: Path, report: dict) -> dict:
    privacy = report.get("privacy") or {}
    target = privacy.get("epsilon_target")
    gaussian = (privacy.get("plan") or {}).get("gaussian") or {}
    devices = report["training"]["devices"]
    return {
        "run": run.name,
        "devices": devices,
        "resampled": report.get("population") is not None,
        "fleet": (report.get("fleet") or {}).get("kind", "sdk"),
        "setting": _setting(privacy),
        "non_private_noise": privacy.get("non_private_experiment"),
        "epsilon": math.inf if target is None else float(target),
        "epsilon_composed": privacy.get("epsilon_total"),
        "seed": report["training"]["seed"],
        "reward_std": privacy.get("noise_std_on_mean"),
        # the Gaussian plan's environment std; a Laplace run's (one vector query) is in report.json["privacy"]
        "env_std": gaussian.get("env_noise_std", privacy.get("env_noise_std")),
        "km": [report["metrics"][k] for k in KM],
        "epr": [report["baselines"]["epr"]["metrics"][k] for k in KM],
        "spatial": [report["spatial"][k] for k in SPATIAL],
        "invented": report["guard"]["share"],
        "seconds_per_round": report["training"].get("seconds_per_round"),
    }


def _setting(privacy: dict) -> str:
    """Mechanism, granularity and the environment's budget share, e.g. ``gaussian day f0.5``."""
    plan = privacy.get("plan") or {}
    fraction = (plan.get("gaussian") or {}).get("env_fraction", plan.get("env_fraction"))
    parts = [plan.get("mechanism_name") or "", privacy.get("granularity") or "",
             "" if fraction is None else f"f{fraction:g}"]
    return " ".join(p for p in parts if p) or "no privacy"


def wins(ours: list[float], epr: list[float]) -> int:
    return sum(o < e for o, e in zip(ours, epr))


def _eps(e: float) -> str:
    return "∞" if math.isinf(e) else f"{e:g}"


def _num(x, digits: int = 4) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def table(rows: list[dict]) -> str:
    head = ("| devices | ε target (composed) | mechanism | seed | noise std on a mean reward / on an environment sum | Radius | DailyLoc | "
            "Distance | G-rank | I-rank | wins vs epr | Density | Trips | Hot-20 ↑ | invented | s a round |")
    lines = [head, "|" + "|".join(["---"] * (head.count("|") - 1)) + "|"]
    cells = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r["devices"], -r["epsilon"], r["seed"])):
        cells[(r["devices"], r["resampled"], r["epsilon"], r["fleet"], r["setting"])].append(r)
        composed = "" if r["epsilon_composed"] is None else f" ({r['epsilon_composed']:.2f})"
        noise = ("0" if not r["non_private_noise"] else "non-private noise") if math.isinf(r["epsilon"]) else \
            f"{_num(r['reward_std'])} / {_num(r['env_std'], 2)}"
        lines.append(
            f"| {r['devices']:,}{' (resampled)' if r['resampled'] else ''} | {_eps(r['epsilon'])}{composed} | "
            f"{r['setting']} | {r['seed']} | {noise} | " + " | ".join(_num(x) for x in r["km"]) +
            f" | {wins(r['km'], r['epr'])} of 5 | " + " | ".join(_num(x, 2 if i == 2 else 4)
                                                              for i, x in enumerate(r["spatial"])) +
            f" | {100 * r['invented']:.1f}% | {_num(r['seconds_per_round'], 1)} |")
    lines.append("")
    lines.append("| devices | ε | mechanism | seeds | Radius | DailyLoc | Distance | G-rank | I-rank | wins of the mean vs epr's mean "
                 "| wins per seed |")
    lines.append("|" + "|".join(["---"] * 11) + "|")
    for (devices, resampled, eps, _, setting), runs in cells.items():
        mean = [sum(r["km"][i] for r in runs) / len(runs) for i in range(5)]
        epr = [sum(r["epr"][i] for r in runs) / len(runs) for i in range(5)]
        spread = [f"{mean[i]:.4f} ({min(r['km'][i] for r in runs):.4f}–{max(r['km'][i] for r in runs):.4f})"
                  if len(runs) > 1 else f"{mean[i]:.4f}" for i in range(5)]
        lines.append(f"| {devices:,}{' (resampled)' if resampled else ''} | {_eps(eps)} | {setting} | {len(runs)} | "
                     + " | ".join(spread) + f" | {wins(mean, epr)} of 5 | "
                     + ", ".join(str(wins(r["km"], r["epr"])) for r in runs) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="run directories of `pategail train`")
    args = ap.parse_args(argv)
    rows = []
    for run in args.runs:
        try:
            rows.append(read_run(run))
        except (ValueError, json.JSONDecodeError) as err:      # an unfinished run: said, left out
            print(f"report_table: {err}; left out", file=sys.stderr)
    if not rows:
        print("report_table: no finished run", file=sys.stderr)
        return 2
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
