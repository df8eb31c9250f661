"""Scoring generated days against a data set's test days in both modes, with the floor next to them.

``evaluate(generated_days, dataset)`` is what the CLI and the benchmarks call; it returns::

    {"metrics": {...}, "metrics_paper": {...}, "floor": {...}, "floor_paper": {...},
     "spatial": {...}, "floor_spatial": {...}, "guard": {...}}

the first four inner dicts holding the five JSDs keyed by :data:`METRIC_NAMES`, the next two the spatial
metrics of :mod:`.spatial` keyed by :data:`~pategail.metrics.spatial.SPATIAL_NAMES`; "guard" is the
invented-mode check of :mod:`pategail.metrics.guard` against the training days (threshold, share, flagged).
"metrics" is the corrected km mode
(the headline numbers), "metrics_paper" reproduces the paper's Table 1 code, and the floor is the same
metric between real training days and the test days (docs/metrics.md, "The floor"): a generator
cannot meaningfully be judged below it.
"""
from __future__ import annotations

import numpy as np

from pategail.data.dataset import Dataset
from pategail.server.errors import DataError
from pategail.metrics import km, paper
from pategail.metrics.guard import invented_mode
from pategail.metrics.spatial import spatial_metrics

METRIC_NAMES = ("radius", "dailyloc", "distance", "grank", "irank")
"""The five metrics, in the column order of the paper's Table 1."""

DISPLAY_NAMES = {"radius": "Radius", "dailyloc": "DailyLoc", "distance": "Distance", "grank": "G-rank",
                 "irank": "I-rank"}

MODES = ("km", "paper")


def check_days(days, n_cells: int, n_slots: int | None, what: str = "generated days") -> np.ndarray:
    """Return ``days`` as a 2-D int array after checking its shape (``n_slots`` a day unless None) and its
    cell ids (0..n_cells-1); raise DataError with a one-line message otherwise."""
    try:
        arr = np.asarray(days)
    except ValueError:          # ragged nested lists
        raise DataError(f"{what}: days of different lengths; expected a 2-D array (days, slots)") from None
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise DataError(f"{what}: expected a non-empty 2-D array (days, slots); got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"{what}: cell ids must be integers; got dtype {arr.dtype}")
    if n_slots is not None and arr.shape[1] != n_slots:
        raise DataError(f"{what}: {arr.shape[1]} slots a day; the data set has {n_slots}")
    bad = (arr < 0) | (arr >= n_cells)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise DataError(f"{what}: row {row}, slot {col}: cell id {int(arr[row, col])} outside 0..{n_cells - 1}")
    return arr


def evaluate_days(generated, real, cells) -> dict[str, float]:
    """The five km-mode JSDs between ``generated`` and ``real`` days (int (n, T) cell ids)."""
    cells = np.asarray(cells, dtype=float)
    real = check_days(real, len(cells), None, "real days")
    generated = check_days(generated, len(cells), real.shape[1])
    return {name: float(km.METRICS[name](generated, real, cells)) for name in METRIC_NAMES}


def evaluate_days_paper(generated, real, cells, *, upper: float = paper.GEOLIFE_UPPER) -> dict[str, float]:
    """The five paper-mode JSDs; ``upper`` bounds the Distance and Radius histograms (GeoLife value by default)."""
    cells = np.asarray(cells, dtype=float)
    real = check_days(real, len(cells), None, "real days")
    generated = check_days(generated, len(cells), real.shape[1])
    out = {}
    for name in METRIC_NAMES:
        kwargs = {"upper": upper} if name in ("distance", "radius") else {}
        out[name] = float(paper.METRICS[name](generated, real, cells, **kwargs))
    return out


def floor_days(dataset: Dataset, seed: int = 0) -> np.ndarray:
    """min(n_train, n_test) training days chosen without replacement by ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    n = min(len(dataset.train_days), len(dataset.test_days))
    return dataset.train_days[rng.choice(len(dataset.train_days), size=n, replace=False)]


def floor(dataset: Dataset, seed: int = 0, *, upper: float = paper.GEOLIFE_UPPER) -> dict[str, dict[str, float]]:
    """The floor in both modes: ``{"floor": km JSDs, "floor_paper": paper JSDs}`` between a seeded sample of
    training days (as many as there are test days, or all of them) and the full test set."""
    train = floor_days(dataset, seed)
    return {"floor": evaluate_days(train, dataset.test_days, dataset.cells),
            "floor_paper": evaluate_days_paper(train, dataset.test_days, dataset.cells, upper=upper)}


def evaluate(generated_days, dataset: Dataset, seed: int = 0, *,
             upper: float = paper.GEOLIFE_UPPER) -> dict[str, dict[str, float]]:
    """Score generated days against the test days in both modes, with the floor (``seed`` picks its training
    sample) and run the invented-mode guard. Raises DataError if ``generated_days`` is not a 2-D int array of valid cell ids with the data
    set's number of slots."""
    generated = check_days(generated_days, dataset.n_cells, dataset.test_days.shape[1])
    return {"metrics": evaluate_days(generated, dataset.test_days, dataset.cells),
            "metrics_paper": evaluate_days_paper(generated, dataset.test_days, dataset.cells, upper=upper),
            **floor(dataset, seed, upper=upper),
            "spatial": spatial_metrics(generated, dataset.test_days, dataset.cells),
            "floor_spatial": spatial_metrics(floor_days(dataset, seed), dataset.test_days, dataset.cells),
            # the real threshold from the training days: more days than the test split, and what was learned
            "guard": invented_mode(generated, dataset.train_days).to_dict()}


def _row_values(row: dict, mode: str) -> dict:
    """The metric dict of one table row: a flat {metric: value} dict as is, or the mode's part of an
    :func:`evaluate` / :func:`floor` result."""
    if any(name in row for name in METRIC_NAMES):
        return row
    keys = ("metrics", "floor") if mode == "km" else ("metrics_paper", "floor_paper")
    for key in keys:
        if key in row:
            return row[key]
    raise ValueError(f"format_table: row has neither metric names nor any of {keys}: {sorted(row)}")


def format_table(rows: dict[str, dict], *, mode: str = "km", markdown: bool = True, digits: int = 4,
                 name_header: str = "") -> str:
    """Render named rows (e.g. "floor", "markov", "epr", "ours") × the five metrics as text.

    Each row is a flat ``{metric: JSD}`` dict, or an :func:`evaluate` / :func:`floor` result from which the
    ``mode``'s part is taken ("km": "metrics" or "floor"; "paper": "metrics_paper" or "floor_paper").
    A missing metric shows as "-". ``markdown=True`` gives a pipe table, otherwise aligned plain text.
    """
    if mode not in MODES:
        raise ValueError(f"format_table: mode must be one of {MODES}; got {mode!r}")
    header = [name_header or ("JSD (km)" if mode == "km" else "JSD (paper)")] + [DISPLAY_NAMES[m] for m in METRIC_NAMES]
    body = []
    for name, row in rows.items():
        values = _row_values(row, mode)
        body.append([str(name)] + [f"{values[m]:.{digits}f}" if values.get(m) is not None else "-"
                                   for m in METRIC_NAMES])
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * len(METRIC_NAMES)) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]

    def fmt(r):
        return "  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])])
    return "\n".join([fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in body])
