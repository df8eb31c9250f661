"""From GPS fixes to days of cells: grid, slots, modal cell, gap filling, sparse days, the per-user split.

Pure functions over numpy arrays (no I/O). The steps, in order:

1. **Grid.** A fix at (lat, lon) falls in grid square (row, col) = (⌊lat / cell_deg⌋, ⌊lon / cell_deg⌋);
   the square's centre is the cell's coordinate. Only squares that occur in the kept days become cells,
   numbered 0..n-1 in (row, col) order, so the output does not depend on the input's row order — or, with a
   public universe (:func:`bbox_keys`), every square of a bounding box, visited or not.
2. **Slots.** Local time = UTC + ``utc_offset`` hours; a day is a local calendar day, cut into
   1440 / ``slot_minutes`` slots.
3. **Modal cell.** A slot with fixes takes the cell holding most of its fixes; ties go to the cell whose
   first fix in the slot is earliest, then to the smaller (row, col).
4. **Sparse days.** Days with fewer than ``min_observed_slots`` slots holding a fix are dropped.
5. **Gap filling**, inside a day only: an empty slot takes the cell of the last observed slot before it
   (forward fill); empty slots before the first observed one take that first cell (back fill).
6. **Split.** Each user's days in time order; the last round(test_fraction × n) are test days (halves
   round up), at most n − 1 of them, so a user with one day keeps it for training.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from pategail.server.errors import DataError

MINUTES_PER_DAY = 1440
_MIN_CELL_DEG = 1e-6  # keeps the packed (row, col) key below 2**63


@dataclass(frozen=True)
class GriddedDays:
    """Filled days, one row per (user, local day), sorted by user then day.

    user: int64 (n,) — the fixes' user index. day: int64 (n,) — local days since 1970-01-01.
    days: int64 (n, slots) — cell ids. observed: int64 (n,) — slots that held a fix (the rest were filled).
    cells: float64 (n_cells, 2) — (lat, lon) of each cell's square centre.
    days_seen: user-days with at least one fix. days_dropped_sparse: of those, dropped as too sparse.
    """

    user: np.ndarray
    day: np.ndarray
    days: np.ndarray
    observed: np.ndarray
    cells: np.ndarray
    days_seen: int
    days_dropped_sparse: int


def slots_per_day(slot_minutes: int) -> int:
    """The number of slots in a day; ``slot_minutes`` must be a whole divisor of 1440."""
    if not isinstance(slot_minutes, (int, np.integer)) or slot_minutes <= 0 or MINUTES_PER_DAY % slot_minutes:
        raise DataError(f"--slot-minutes {slot_minutes}: must be a whole number of minutes that divides 1440")
    return MINUTES_PER_DAY // int(slot_minutes)


def check_cell_deg(cell_deg: float) -> float:
    if not (np.isfinite(cell_deg) and _MIN_CELL_DEG <= cell_deg <= 90):
        raise DataError(f"--cell-deg {cell_deg}: must be between {_MIN_CELL_DEG:g} and 90 degrees")
    return float(cell_deg)


def _grid(lat: np.ndarray, lon: np.ndarray, cell_deg: float) -> tuple[np.ndarray, np.ndarray]:
    # Rounding before the floor removes float noise (39.99 / 0.01 = 3998.9999999999995 belongs to row 3999).
    row = np.floor(np.round(lat / cell_deg, 6)).astype(np.int64)
    col = np.floor(np.round(lon / cell_deg, 6)).astype(np.int64)
    return row, col


def grid_keys(lat: np.ndarray, lon: np.ndarray, cell_deg: float) -> np.ndarray:
    """One non-negative int64 per fix that sorts like its grid square's (row, col)."""
    row, col = _grid(lat, lon, cell_deg)
    n = int(np.ceil(180 / cell_deg)) + 2  # rows and columns both lie within -n..n-1
    return (row + n) * (2 * n) + (col + n)


def key_centres(keys: np.ndarray, cell_deg: float) -> np.ndarray:
    """(lat, lon) of the centres of the grid squares with these keys (see :func:`grid_keys`)."""
    n = int(np.ceil(180 / cell_deg)) + 2
    row, col = keys // (2 * n) - n, keys % (2 * n) - n
    return np.column_stack([(row + 0.5) * cell_deg, (col + 0.5) * cell_deg])


MAX_PUBLIC_CELLS = 250_000
"""Largest public cell universe ``bbox_keys`` builds: every cell is a token of the policy and an entry of every
environment release, so a continent at 0.01° is refused rather than trained on."""


def bbox_keys(bbox: Sequence[float], cell_deg: float) -> np.ndarray:
    """The public cell universe of a bounding box: the sorted keys (:func:`grid_keys`) of every grid square of
    side ``cell_deg`` that holds a point of ``bbox`` — known before any data is read, so a table made of it
    says nothing about where anyone went."""
    cell_deg = check_cell_deg(cell_deg)
    min_lat, min_lon, max_lat, max_lon = bbox
    rows, cols = _grid(np.array([min_lat, max_lat]), np.array([min_lon, max_lon]), cell_deg)
    n_rows, n_cols = int(rows[1] - rows[0] + 1), int(cols[1] - cols[0] + 1)
    if n_rows * n_cols > MAX_PUBLIC_CELLS:
        raise DataError(f"--public-cells: the bounding box holds {n_rows * n_cols:,} squares of {cell_deg:g}°, more "
                        f"than {MAX_PUBLIC_CELLS:,}; use a smaller --bbox or a larger --cell-deg")
    row = np.repeat(np.arange(rows[0], rows[1] + 1), n_cols)
    col = np.tile(np.arange(cols[0], cols[1] + 1), n_rows)
    n = int(np.ceil(180 / cell_deg)) + 2
    return np.sort((row + n) * (2 * n) + (col + n))


def in_bbox(lat: np.ndarray, lon: np.ndarray, bbox: Sequence[float]) -> np.ndarray:
    """Mask of fixes inside ``bbox`` = (min_lat, min_lon, max_lat, max_lon), edges included."""
    min_lat, min_lon, max_lat, max_lon = bbox
    return (lat >= min_lat) & (lat <= max_lat) & (lon >= min_lon) & (lon <= max_lon)


def modal_slots(user, time, keys, *, utc_offset: float, slot_minutes: int):
    """The modal cell key of every observed (user, local day, slot): four int64 arrays sorted by those."""
    n_slots = slots_per_day(slot_minutes)
    local = time + utc_offset * 3600.0
    day = np.floor(local / 86400.0).astype(np.int64)
    slot = np.minimum(((local - day * 86400.0) // (slot_minutes * 60)).astype(np.int64), n_slots - 1)
    order = np.lexsort((time, keys, slot, day, user))
    u, d, s, k, t = user[order], day[order], slot[order], keys[order], time[order]
    # Groups of fixes in the same (user, day, slot, cell): their size and their first fix's time.
    new = np.ones(len(u), bool)
    new[1:] = (u[1:] != u[:-1]) | (d[1:] != d[:-1]) | (s[1:] != s[:-1]) | (k[1:] != k[:-1])
    starts = np.flatnonzero(new)
    count = np.diff(np.append(starts, len(u)))
    u, d, s, k, t = u[starts], d[starts], s[starts], k[starts], t[starts]
    # Per (user, day, slot): most fixes first, then the earliest first fix, then the smallest cell.
    order = np.lexsort((k, t, -count, s, d, u))
    u, d, s, k = u[order], d[order], s[order], k[order]
    first = np.ones(len(u), bool)
    first[1:] = (u[1:] != u[:-1]) | (d[1:] != d[:-1]) | (s[1:] != s[:-1])
    return u[first], d[first], s[first], k[first]


def fill_forward(days: np.ndarray) -> np.ndarray:
    """Fill the -1 entries of each row: forward from the last observed slot, leading ones backward from
    the first observed slot. Every row must hold at least one observed slot."""
    observed = days >= 0
    idx = np.where(observed, np.arange(days.shape[1]), -1)
    idx = np.maximum.accumulate(idx, axis=1)
    first = np.argmax(observed, axis=1)
    idx = np.where(idx < 0, first[:, None], idx)
    return np.take_along_axis(days, idx, axis=1)


def thin_fixes(user: np.ndarray, time: np.ndarray, max_per_day: int, *, utc_offset: float,
               rng: np.random.Generator) -> np.ndarray:
    """Mask keeping at most ``max_per_day`` fixes of every (user, local day), drawn uniformly without
    replacement with ``rng``: a dense GPS trace thinned to what check-in or call-record data would hold (a few
    events a day, at the times the person was active). Days then visit at most ``max_per_day`` cells."""
    if max_per_day < 1:
        raise DataError(f"--max-fixes-per-day {max_per_day}: must be at least 1")
    day = np.floor((time + utc_offset * 3600.0) / 86400.0).astype(np.int64)
    # a random priority per fix; within each (user, day) keep the max_per_day smallest
    order = np.lexsort((rng.random(len(user)), day, user))
    u, d = user[order], day[order]
    new = np.ones(len(u), bool)
    new[1:] = (u[1:] != u[:-1]) | (d[1:] != d[:-1])
    group_start = np.maximum.accumulate(np.where(new, np.arange(len(u)), 0))
    keep = np.zeros(len(u), bool)
    keep[order] = np.arange(len(u)) - group_start < max_per_day
    return keep


def fixes_to_days(user, time, lat, lon, *, cell_deg: float = 0.01, slot_minutes: int = 30,
                  utc_offset: float = 0.0, min_observed_slots: int = 1,
                  universe: np.ndarray | None = None) -> GriddedDays:
    """Steps 1–5 of the module docstring on parallel arrays of fixes (user index, unix seconds UTC, lat, lon).
    ``universe``: the sorted keys of a public cell table (:func:`bbox_keys`) holding every fix's square — the
    cells are then exactly those, visited or not, instead of the squares the kept days visit."""
    cell_deg = check_cell_deg(cell_deg)
    n_slots = slots_per_day(slot_minutes)
    if not 1 <= min_observed_slots <= n_slots:
        raise DataError(f"--min-observed-slots {min_observed_slots}: must be between 1 and {n_slots}")
    keys = grid_keys(lat, lon, cell_deg)
    u, d, s, k = modal_slots(user, time, keys, utc_offset=utc_offset, slot_minutes=slot_minutes)
    new_day = np.ones(len(u), bool)
    new_day[1:] = (u[1:] != u[:-1]) | (d[1:] != d[:-1])
    day_index = np.cumsum(new_day) - 1
    n_seen = int(new_day.sum())
    grid = np.full((n_seen, n_slots), -1, np.int64)
    grid[day_index, s] = k
    day_user, day_day = u[new_day], d[new_day]
    observed = np.bincount(day_index, minlength=n_seen)
    keep = observed >= min_observed_slots
    grid, day_user, day_day, observed = grid[keep], day_user[keep], day_day[keep], observed[keep]
    grid = fill_forward(grid) if len(grid) else grid
    if universe is None:
        cell_keys, ids = np.unique(grid.ravel(), return_inverse=True)
    else:
        cell_keys, ids = universe, np.searchsorted(universe, grid.ravel())
        if len(ids) and (ids.max() >= len(universe) or np.any(universe[ids] != grid.ravel())):
            raise ValueError("a fix lies outside the public cell universe")
    return GriddedDays(user=day_user, day=day_day, days=ids.reshape(grid.shape).astype(np.int64),
                       observed=observed, cells=key_centres(cell_keys, cell_deg), days_seen=n_seen,
                       days_dropped_sparse=int(n_seen - keep.sum()))


def split_last_days(user: np.ndarray, test_fraction: float) -> np.ndarray:
    """Test-day mask for days sorted by user then time: each user's last round(test_fraction × n) days
    (halves up), at most n − 1. With 0.2: 1–2 days → 0 test days, 3–7 → 1, 8–12 → 2, ..."""
    if not 0 <= test_fraction < 1:
        raise DataError(f"--test-fraction {test_fraction}: must be at least 0 and below 1")
    if len(user) == 0:
        return np.zeros(0, bool)
    if np.any(np.diff(user) < 0):
        raise ValueError("split_last_days: days must be sorted by user")
    _, start, n = np.unique(user, return_index=True, return_counts=True)
    n_test = np.minimum(n - 1, np.floor(test_fraction * n + 0.5).astype(np.int64))
    rank = np.arange(len(user)) - np.repeat(start, n)
    return rank >= np.repeat(n - n_test, n)
