"""Generators without learning — the bars the learned generator must clear."""
from __future__ import annotations

import numpy as np

BASELINES = ("markov", "epr")


def baseline_rng(model: str, seed: int) -> np.random.Generator:
    """The generator a run's report (and `pategail compare`) draws ``model``'s days from for ``seed``: one
    independent stream per baseline, derived from the seed."""
    return np.random.default_rng([seed, BASELINES.index(model)])


def generate_baseline(model: str, dataset, n_days: int, rng: np.random.Generator, geometry=None) -> np.ndarray:
    """Fit ``model`` on the data set's training days and draw ``n_days`` days (int32, (n_days, 48))."""
    if model == "markov":
        from pategail.baselines.markov import fit_markov, sample_markov
        return sample_markov(fit_markov(dataset.train_days, dataset.n_cells), n_days, rng)
    if model == "epr":
        from pategail.baselines.epr import fit_epr_baseline, sample_epr
        from pategail.sdk.epr import CellGeometry
        geometry = geometry or CellGeometry.build(dataset.cells)
        fitted = fit_epr_baseline(geometry, dataset.train_days, dataset.train_users)
        return sample_epr(fitted, geometry, n_days, rng)
    raise ValueError(f"unknown baseline {model!r}; choose from {BASELINES}")
