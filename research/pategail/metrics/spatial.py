"""Spatial metrics: *where* days go, which the five statistics of :mod:`.km` do not see (G-rank compares
visit shares by rank, not by place). docs/metrics.md ("Spatial metrics") defines them; in short:

- **Density**: JSD of the visit distribution over cells — every slot of every day is one visit to its cell
  (the "density error" of the differential-privacy trajectory literature, e.g. DPT, AdaTrace).
- **Trips**: JSD of the origin–destination flows between the squares of a coarser grid
  (:data:`OD_CELL_DEG`): each pair of consecutive slots whose squares differ is one trip from the first
  square to the second (the "trip error"; the coarse grid keeps GPS jitter between neighbouring cells and
  the sparsity of 4,210² cell pairs out of it).
- **Hot spots**: the share of the real days' k most visited cells (:data:`HOTSPOT_TOP`) that are also among
  the generated days' k most visited cells — an overlap in [0, 1], **higher is better** (the other two are
  divergences, lower is better).

Days are int (n, T) cell ids; ``cells`` is float (n_cells, 2) = (lat, lon) in degrees. JSDs use
:func:`pategail.metrics.km.jsd` (natural logs, 1e-12 added to every bin of both distributions).
"""
from __future__ import annotations

import numpy as np

from pategail.metrics.km import jsd

OD_CELL_DEG = 0.05
"""Side of the trip grid's squares in degrees (about 5.6 km × 4.3 km in Beijing, 25 of the 0.01° cells).
At 0.01° consecutive slots change cell 46% of the time, mostly between neighbours (GPS jitter); at 0.05°
a trip is a real displacement, and the squares a city's days use stay few enough that test-sized sets
estimate their flows (on pategail-geolife 27% of the test days' slot pairs are trips at 0.05°, and the training-vs-test
floor is 0.148 at 0.05°, 0.229 at 0.02°, 0.101 at 0.1°)."""
HOTSPOT_TOP = 20
"""k of the hot-spot overlap: the 20 most visited cells hold 65% of the visits of pategail-geolife's
training days — the campuses and work districts a map shows."""

SPATIAL_NAMES = ("density", "trips", "hotspots")
"""The spatial metrics, in table order."""
DISPLAY_NAMES = {"density": "Density", "trips": "Trips", "hotspots": f"Hot-{HOTSPOT_TOP} ↑"}


def visit_counts(days, n_cells: int) -> np.ndarray:
    """float (n_cells,): how many slots of ``days`` fall in each cell."""
    return np.bincount(np.asarray(days).ravel(), minlength=int(n_cells)).astype(float)


def coarse_squares(cells, cell_deg: float = OD_CELL_DEG) -> np.ndarray:
    """int64 (n_cells,): the square of the coarse grid holding each cell's centre. Squares are
    (⌊lat / cell_deg⌋, ⌊lon / cell_deg⌋), numbered 0.. in (row, col) order over the squares that hold a cell,
    so the numbering depends on the cell table only."""
    cells = np.asarray(cells, dtype=float)
    # a hair of slack so a centre exactly on an edge (0.05 = 5 × 0.01 in binary) lands on the same side
    # on every platform
    rc = np.floor(cells / float(cell_deg) + 1e-9).astype(np.int64)
    _, square = np.unique(rc, axis=0, return_inverse=True)
    return square.reshape(-1)


def od_flows(days, squares: np.ndarray) -> np.ndarray:
    """int64 (m, 2): one row (origin square, destination square) per pair of consecutive slots of ``days``
    whose squares differ, day by day and slot by slot."""
    sq = np.asarray(squares)[np.asarray(days)]
    a, b = sq[:, :-1].ravel(), sq[:, 1:].ravel()
    move = a != b
    return np.column_stack([a[move], b[move]])


def top_cells(days, n_cells: int, k: int = HOTSPOT_TOP) -> np.ndarray:
    """int64 (≤ k,): the k most visited cells of ``days``, most visited first; ties go to the smaller cell
    id; cells never visited are left out (so fewer than k when fewer cells are visited)."""
    counts = visit_counts(days, n_cells)
    order = np.lexsort((np.arange(len(counts)), -counts))[:k]
    return order[counts[order] > 0]


# --- the three metrics ----------------------------------------------------------------------------------

def density(generated_days, real_days, cells) -> float:
    """Density: JSD of the two sets' visit distributions over all cells."""
    n = len(cells)
    return jsd(visit_counts(generated_days, n), visit_counts(real_days, n))


def trips(generated_days, real_days, cells, cell_deg: float = OD_CELL_DEG) -> float:
    """Trips: JSD of the two sets' origin–destination flow counts over the (origin, destination) pairs of
    squares that occur in either set. 0 when neither set has a trip; ln 2 (the maximum: nothing in common)
    when only one of them has none — smoothing alone would turn "no trips" into a uniform law that could
    score well."""
    squares = coarse_squares(cells, cell_deg)
    n_sq = int(squares.max()) + 1
    g, r = od_flows(generated_days, squares), od_flows(real_days, squares)
    g_key, r_key = g[:, 0] * n_sq + g[:, 1], r[:, 0] * n_sq + r[:, 1]
    pairs, index = np.unique(np.concatenate([g_key, r_key]), return_inverse=True)
    if not len(pairs):
        return 0.0
    if not len(g_key) or not len(r_key):
        return float(np.log(2))
    index = index.reshape(-1)
    p = np.bincount(index[:len(g_key)], minlength=len(pairs)).astype(float)
    q = np.bincount(index[len(g_key):], minlength=len(pairs)).astype(float)
    return jsd(p, q)


def hotspots(generated_days, real_days, cells, k: int = HOTSPOT_TOP) -> float:
    """Hot spots: |top-k(generated) ∩ top-k(real)| / |top-k(real)| — the share of the real hot spots that
    the generated days also make hot spots (higher is better)."""
    n = len(cells)
    real_top = top_cells(real_days, n, k)
    return float(len(np.intersect1d(top_cells(generated_days, n, k), real_top)) / len(real_top))


METRICS = {"density": density, "trips": trips, "hotspots": hotspots}
"""The spatial metrics by name, in the order of :data:`SPATIAL_NAMES`."""


def spatial_metrics(generated_days, real_days, cells) -> dict[str, float]:
    """{"density", "trips", "hotspots"} of ``generated_days`` against ``real_days`` (already checked)."""
    cells = np.asarray(cells, dtype=float)
    return {name: float(METRICS[name](generated_days, real_days, cells)) for name in SPATIAL_NAMES}


def format_spatial_table(rows: dict[str, dict], *, markdown: bool = True, digits: int = 4) -> str:
    """Named rows × the spatial metrics (flat ``{metric: value}`` dicts; a missing one shows as "-")."""
    header = ["spatial"] + [DISPLAY_NAMES[m] for m in SPATIAL_NAMES]
    body = [[str(name)] + [f"{row[m]:.{digits}f}" if row.get(m) is not None else "-" for m in SPATIAL_NAMES]
            for name, row in rows.items()]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * len(SPATIAL_NAMES)) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]

    def fmt(r):
        return "  ".join([r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])])
    return "\n".join([fmt(header), "  ".join("-" * w for w in widths)] + [fmt(r) for r in body])
