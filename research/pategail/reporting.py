"""The outputs of a training run: final bundle, synthetic days, report.json, report.md and plots."""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)
INITIAL_STATES_IN_BUNDLE = 4096
"""Initial states drawn from the released distribution and shipped in the bundle for `pategail generate`."""


def cell_table_line(privacy: dict, dataset, run: Path) -> str:
    """report.md's and report.json's words for where a private run's cell table came from."""
    release = privacy.get("cell_release")
    if release is not None:
        from pategail.server.cell_table import CELL_TABLE_FILE
        table = json.loads((run / CELL_TABLE_FILE).read_text())
        return (f"privately released ({len(table['released'])} squares of a public map of {table['universe']}, "
                f"ε part {release['epsilon_part']:.3g} alone at δ/2; noise std {release['noise_std']:.3g} on each "
                f"square's count of devices, threshold {table['threshold']:.3g}): the run's first release, "
                "included in the totals above; each device moved its days onto the released squares")
    if dataset.public_cell_table:
        return "public: every square of a bounding box, visited or not (data prepare --public-cells)"
    return ("built from the users' own fixes and released without noise: the guarantee does not cover which "
            "squares are in it (--data-derived-cells)")


def write_outputs(coordinator, dataset, run: Path, seed: int = 0, fleet: dict | None = None,
                  population: dict | None = None) -> dict:
    """Export the run's bundle, generate and evaluate synthetic days against the test days, and write the
    report; the run's numbers come from ``coordinator.summary()`` (a RunSummary). ``fleet``: the fleet's
    ``describe()`` (kind "sdk" or "population", the simulation); ``population``: a resampled population's
    {devices, source_users, method, max_copies} — every table then says "resampled population", and a private
    run's guarantees are stated per device with the per-person figure for ``max_copies``."""
    import torch

    from pategail.baselines.compare import compare
    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.metrics.evaluate import evaluate, format_table
    from pategail.metrics.guard import guard_line
    from pategail.metrics.spatial import format_spatial_table
    from pategail.plots import plot_density, plot_statistics
    from pategail.sdk.bundle import Environment, load_bundle
    from pategail.sdk.synthetic import write_synthetic_csv
    from pategail.server.privacy.summary import guarantee_lines, privacy_line

    summary = coordinator.summary()
    cfg = summary.config
    if (summary.privacy or {}).get("guarantees"):
        summary.privacy["cell_table"] = cell_table_line(summary.privacy, dataset, run)
    if population is not None and population.get("max_copies", 1) > 1 and (summary.privacy or {}).get("guarantees"):
        from pategail.server.privacy.summary import person_guarantee
        summary.privacy["per_person"] = person_guarantee(coordinator.plan, coordinator.accountant,
                                                         population["max_copies"])
    rng = np.random.default_rng([seed, 0xF1])
    homes, firsts = coordinator.sample_initial_states(INITIAL_STATES_IN_BUNDLE, rng)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        discriminator = Discriminator()
    initial = run / "bundle-initial"          # where a released table's public map is, if the run has one
    start = load_bundle(initial).environment if (initial / "manifest.json").is_file() else None
    env = Environment(dataset.cells, cfg.environment.alpha, cfg.environment.candidates, np.column_stack([homes, firsts]),
                      np.full(len(homes), 1.0 / len(homes)), summary.explore_factors, summary.places,
                      max_day_cells=coordinator.max_day_cells(), initial_states_days_cap=cfg.initial_states_days_cap,
                      universe=None if start is None else start.universe, table=None if start is None else start.table)
    export_bundle(coordinator.averaged_policy(), discriminator, run / "bundle", environment=env,
                  privacy=coordinator.declared_plan())

    n_days = len(dataset.test_days)
    days = coordinator.generate(n_days, np.random.default_rng([seed, 0x5E]))
    write_synthetic_csv(run / "synthetic.csv", days, dataset.cells)
    result = evaluate(days, dataset, seed=seed)
    baselines = compare(dataset, seed)
    rounds, wall_seconds, n_dev = summary.rounds, summary.wall_seconds, summary.devices
    report = {
        "metrics": result["metrics"], "metrics_paper": result["metrics_paper"], "guard": result["guard"],
        "floor": result["floor"], "floor_paper": result["floor_paper"],
        "spatial": result["spatial"], "floor_spatial": result["floor_spatial"],
        "baselines": {m: {"metrics": baselines["km"][m], "metrics_paper": baselines["paper"][m],
                          "spatial": baselines["spatial"][m]}
                      for m in ("markov", "epr")},
        "privacy": summary.privacy,
        "training": {"rounds": rounds, "devices": n_dev, "wall_seconds": wall_seconds,  # rounds, all sessions
                     "initial_seconds": summary.initial_seconds,
                     "seconds_per_round": summary.seconds_per_round,
                     "days_per_round": cfg.days_per_round, "config": cfg.to_dict(), "seed": summary.seed,
                     "last_round": summary.last_round},
        "communication": {"bytes_up_per_device_per_round": summary.bytes_up_per_device_per_round,
                          "bytes_down_per_device_per_round": summary.bytes_down_per_device_per_round},
        "environment": {"alpha": cfg.environment.alpha, "candidates": summary.candidates,
                        "explore_factors": summary.explore_factors.tolist(),
                        "place_law": summary.places is not None,
                        "return_last": None if summary.places is None else summary.places.return_last,
                        "max_day_cells": coordinator.max_day_cells(),
                        "notes": "explore weight of rank r = r^-alpha x explore_factors[bin(r)], bins of ranks "
                                 "1, 2, 3-4, 5-8, ...; the factors come from the initial-state release; with "
                                 "the place law (d-EPR) it is also x relevance(cell), and a return goes to the "
                                 "place just left with probability return_last (bundle/relevance.csv); "
                                 "max_day_cells: a day holding that many distinct cells adds no more, "
                                 "neither by explore nor by a first move home (null: no limit)"},
    }
    if fleet is not None:
        report["fleet"] = fleet
    if population is not None:
        report["population"] = population
    (run / "report.json").write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
    rows_km = {"ours": result["metrics"], "markov": baselines["km"]["markov"], "epr": baselines["km"]["epr"],
               "floor": result["floor"]}
    rows_paper = {"ours": result["metrics_paper"], "markov": baselines["paper"]["markov"],
                  "epr": baselines["paper"]["epr"], "floor": result["floor_paper"]}
    rows_spatial = {"ours": result["spatial"], "markov": baselines["spatial"]["markov"],
                    "epr": baselines["spatial"]["epr"], "floor": result["floor_spatial"]}
    resampled = "" if population is None else " (resampled population)"
    who = (f"{n_dev} devices" if population is None else
           f"a resampled population of {n_dev} devices from {population['source_users']} users "
           f"({population['method']})")
    if fleet is not None and fleet.get("kind") == "population":
        who += ", simulated by the population fleet (ideal secure aggregation)"
    method = {"dp-fedavg": "DP-FedAvg", "hybrid": "Hybrid (DP-FedAvg, then PateGail)"}.get(summary.config.method,
                                                                                       "PateGail")
    md = [f"# {method} run: {run}", "",
          f"{who}, {rounds} rounds in {wall_seconds:.0f} s after {summary.initial_seconds:.0f} s of initial states"
          f"{' and warm start' if summary.config.uses_action_prior else ''}; {n_days} synthetic days vs "
          f"{n_days} test days (JSD, lower is better).", "",
          f"Privacy: {privacy_line(summary.privacy)}.", "", *guarantee_lines(summary.privacy),
          *([""] if guarantee_lines(summary.privacy) else []),
          f"km mode{resampled}:", "", format_table(rows_km, mode="km"), "",
          f"paper mode{resampled}:", "", format_table(rows_paper, mode="paper"), "",
          f"spatial{resampled} (Density, Trips: JSD, lower is better; Hot-k: overlap of the top-k cells, "
          "higher is better):",
          "", format_spatial_table(rows_spatial), "",
          f"Invented-mode guard: {guard_line(result['guard'])}.", "",
          f"Communication per device and round: {report['communication']['bytes_up_per_device_per_round']:,.0f} "
          f"B up, {report['communication']['bytes_down_per_device_per_round']:,.0f} B down.", "",
          "Plots: statistics.png (the five statistics), density.png (visit density).", ""]
    (run / "report.md").write_text("\n".join(md))
    plot_statistics(dataset.test_days, days, dataset.cells, run / "statistics.png")
    plot_density(dataset.test_days, days, dataset.cells, run / "density.png")
    return report


def _json_default(o):
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
