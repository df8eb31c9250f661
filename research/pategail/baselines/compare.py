"""The floor and both baselines scored on a data set's test days (`pategail compare`, and every run's report)."""
from __future__ import annotations

import logging
import time
from typing import Any

from pategail.baselines import BASELINES, baseline_rng, generate_baseline

log = logging.getLogger(__name__)


def compare(dataset, seed: int = 0) -> dict:
    """Floor and both baselines in both modes and the spatial metrics: {"floor": {...}, "markov": {...},
    "epr": {...}} under each of "km", "paper" and "spatial"."""
    from pategail.metrics.evaluate import evaluate
    n = len(dataset.test_days)
    table: dict[str, dict[str, Any]] = {"km": {}, "paper": {}, "spatial": {}}
    for model in BASELINES:
        t0 = time.perf_counter()
        days = generate_baseline(model, dataset, n, baseline_rng(model, seed))
        log.info("%s: %d days generated in %.1f s", model, n, time.perf_counter() - t0)
        res = evaluate(days, dataset, seed=seed)
        table["km"][model], table["paper"][model] = res["metrics"], res["metrics_paper"]
        table["spatial"][model] = res["spatial"]
    table["km"] = {"floor": res["floor"], **table["km"]}
    table["paper"] = {"floor": res["floor_paper"], **table["paper"]}
    table["spatial"] = {"floor": res["floor_spatial"], **table["spatial"]}
    return table
