"""The EPR state of a batch of growing days, kept up to date one slot at a time.

:func:`pategail.sdk.features.state_features` and :func:`~pategail.sdk.features.action_mask` featurise a whole
prefix at once (an (n, T, T) comparison); called at every slot of generation that is O(T³) work a day.
:class:`DayState` carries the running quantities instead (dwell, distinct cells, moments of the positions, …)
and gives the newest slot's features and action mask in O(n · T) a slot — the same float64 arithmetic in
the same order, so its rows are bit-for-bit the rows of ``state_features`` (tested on real days).
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.features import HOME, N_ACTIONS, N_STATE_FEATURES, RETURN, limit_new_cells
from pategail.sdk.geo import EARTH_RADIUS_KM, haversine_km

_SCALE = 48.0
_KM_PER_RAD = np.pi / 180 * EARTH_RADIUS_KM
VISITED_TABLE_MAX = 1 << 26
"""Largest days × cells table of visited flags kept (64 MB); larger batches search the history instead."""


class DayState:
    """Running state of n days: ``days`` (n, slots) int32 with slots > t still -1, and what the features of
    slot t need. ``reset`` starts at slot 0; ``push`` appends slot t + 1."""

    def __init__(self, cells: np.ndarray, slots: int = 48):
        self.cells = np.asarray(cells, dtype=np.float64)
        self.slots = int(slots)
        t = np.arange(self.slots, dtype=np.float64)
        # the day's length, not the prefix's (as state_features): the same expression, so the same bits
        self._sin = np.sin(2 * np.pi * t / self.slots)
        self._cos = np.cos(2 * np.pi * t / self.slots)

    def reset(self, homes: np.ndarray, first_cells: np.ndarray) -> None:
        homes = np.asarray(homes, dtype=np.int32)
        first = np.asarray(first_cells, dtype=np.int32)
        n = len(homes)
        self.homes = homes
        self.days = np.full((n, self.slots), -1, dtype=np.int32)
        self.days[:, 0] = first
        self.t = 0
        lat, lon = self.cells[first, 0], self.cells[first, 1]
        self._lat0, self._lon0 = lat, lon
        self._cos0 = np.cos(np.radians(lat))
        self._home_lat, self._home_lon = self.cells[homes, 0], self.cells[homes, 1]
        self._lat, self._lon = lat, lon
        self._dwell = np.ones(n, dtype=np.int64)
        self.left = np.full(n, -1, dtype=np.int32)
        """The place just left: the cell of the run before the current one (-1 before the first move)."""
        self._distinct = np.ones(n, dtype=np.int64)
        at_home = first == homes
        self._home_seen = at_home.copy()
        self._home_slots = at_home.astype(np.int64)
        self._sx, self._sy, self._s2 = np.zeros(n), np.zeros(n), np.zeros(n)
        self._jump = np.zeros(n)
        self._moments(lat, lon)
        # visited flags per day and cell: "seen today?" in O(1) for explore's candidates and for distinct
        small = n * len(self.cells) <= VISITED_TABLE_MAX
        self._visited = np.zeros((n, len(self.cells)), dtype=bool) if small else None
        if self._visited is not None:          # small
            self._visited[np.arange(n), first] = True

    def _moments(self, lat: np.ndarray, lon: np.ndarray) -> None:
        # the running sums of state_features' cumsum, added in the same order
        y = (lat - self._lat0) * _KM_PER_RAD
        x = (lon - self._lon0) * _KM_PER_RAD * self._cos0
        self._sx = self._sx + x
        self._sy = self._sy + y
        self._s2 = self._s2 + (x * x + y * y)

    def push(self, cells: np.ndarray) -> None:
        """Append slot t + 1 (int (n,) cell ids)."""
        cur = np.asarray(cells, dtype=np.int32)
        prev = self.days[:, self.t]
        self.t += 1
        self.days[:, self.t] = cur
        lat, lon = self.cells[cur, 0], self.cells[cur, 1]
        self._jump = haversine_km(self._lat, self._lon, lat, lon)
        self._lat, self._lon = lat, lon
        self._dwell = np.where(cur == prev, self._dwell + 1, 1)
        self.left = np.where(cur == prev, self.left, prev)
        if self._visited is None:
            new = (self.days[:, :self.t] != cur[:, None]).all(axis=1)
        else:
            rows = np.arange(len(cur))
            new = ~self._visited[rows, cur]
            self._visited[rows, cur] = True
        self._distinct += new
        at_home = cur == self.homes
        self._home_seen |= at_home
        self._home_slots += at_home
        self._moments(lat, lon)

    def visited(self, rows: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        """bool (m, K): whether day rows[i] has visited cell candidates[i, j] in slots 0..t."""
        if self._visited is None:
            return isin_rows(candidates, self.history()[rows])
        # one flat gather: faster than indexing the table with a pair of (m, 1) and (m, K) arrays
        flat = np.asarray(rows, dtype=np.int64)[:, None] * self._visited.shape[1] + candidates
        seen: np.ndarray = self._visited.reshape(-1).take(flat)
        return seen

    @property
    def current(self) -> np.ndarray:
        """int32 (n,): the cell of slot t."""
        return self.days[:, self.t]

    @property
    def distinct(self) -> np.ndarray:
        """int64 (n,): distinct cells among slots 0..t."""
        return self._distinct

    def history(self) -> np.ndarray:
        """int32 (n, t + 1): the cells of slots 0..t."""
        return self.days[:, : self.t + 1]

    def _returnable(self, at_home: np.ndarray) -> np.ndarray:
        returnable: np.ndarray = self._distinct - self._home_seen - (~at_home)
        return returnable

    def mask(self, max_cells: int | None = None) -> np.ndarray:
        """bool (n, 4): the actions possible at slot t (row t of ``action_mask`` with the same ``max_cells``)."""
        at_home = self.current == self.homes
        mask = np.ones((len(at_home), N_ACTIONS), dtype=bool)
        mask[:, HOME] = ~at_home
        mask[:, RETURN] = self._returnable(at_home) > 0
        limit_new_cells(mask, self._distinct, self._home_seen, max_cells)
        return mask

    def features(self) -> np.ndarray:
        """float32 (n, 11): the state features of slot t (row t of ``state_features``)."""
        cur, t = self.current, self.t
        at_home = cur == self.homes
        lat, lon = self._lat, self._lon
        cnt = t + 1.0
        mx, my, m2 = self._sx / cnt, self._sy / cnt, self._s2 / cnt
        visits_here = (self.history() == cur[:, None]).sum(axis=1)
        out = np.empty((len(cur), N_STATE_FEATURES), dtype=np.float32)
        out[:, 0] = self._sin[t]
        out[:, 1] = self._cos[t]
        out[:, 2] = at_home
        out[:, 3] = np.log1p(haversine_km(lat, lon, self._home_lat, self._home_lon))
        out[:, 4] = self._dwell / _SCALE
        out[:, 5] = self._distinct / _SCALE
        out[:, 6] = self._returnable(at_home) / _SCALE
        out[:, 7] = np.log1p(self._jump)
        out[:, 8] = np.log1p(np.sqrt(np.maximum(m2 - mx * mx - my * my, 0.0)))
        out[:, 9] = self._home_slots / cnt
        out[:, 10] = visits_here / _SCALE
        return out


def isin_rows(values: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """bool, shape of ``values`` (m, K): whether values[i, j] is among sets[i, :] (m, S); ids are >= 0 and
    negative entries of ``sets`` are padding. One sort and one binary search instead of an (m, K, S) cube."""
    if values.size == 0 or sets.size == 0:
        return np.zeros(values.shape, dtype=bool)
    base = int(max(values.max(), sets.max())) + 2
    off = np.arange(len(values), dtype=np.int64)[:, None] * base
    keys = np.sort((np.where(sets < 0, base - 1, sets) + off).ravel())
    query = (values + off).ravel()
    pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    found: np.ndarray = (keys[pos] == query).reshape(values.shape)
    return found
