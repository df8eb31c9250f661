"""The exploration-and-preferential-return (EPR) environment: the MDP's transition function.

Four actions (see :mod:`pategail.sdk.features`): stay keeps the cell; home goes to the home cell; return goes
to a visited cell other than home and the current one, chosen with probability proportional to its visits
so far; explore goes to a cell never visited that day, chosen with probability proportional to rank^-alpha,
where rank orders all cells by haversine distance from the current cell (rank 1 = nearest other cell) and
only the ``candidates`` nearest cells are eligible (Song et al. 2010; Jiang et al. 2016, TimeGeo).

The explore law can be corrected per rank bin (ranks 1, 2, 3–4, 5–8, 9–16, ...; :func:`rank_bins`) by
positive ``explore_factors``: the weight of rank r becomes r^-alpha × factor[bin(r)]. The coordinator learns
the factors through the secure noisy aggregation (:func:`explore_law_contribution`): real days move to the
adjacent cells far more often than a pure power law says (GPS jitter between neighbouring cells).

A :class:`~pategail.sdk.places.PlaceLaw` (d-EPR) multiplies the explore weight of every candidate cell by its
learned relevance and lets return favour the place just left; without one the environment is the classic
model above, bit for bit.

The original code could "explore" in place or to a visited cell and distorted ranks by subtracting 90 from
latitudes; here ranks are great-circle and explore never revisits. Everything is vectorised over a batch of
agents, and all randomness comes from the ``numpy.random.Generator`` passed in.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from pategail.sdk import explore_draw
from pategail.sdk.contribution import DAYS_CAP, contribution_weight
from pategail.sdk.day_state import DayState, isin_rows
from pategail.sdk.features import EXPLORE, HOME, RETURN, SLOTS, STAY, label_actions
from pategail.sdk.geo import HalfAngleTable, haversine_km, km_of_haversine
from pategail.sdk.places import PlaceLaw

DEFAULT_CANDIDATES = 1000
"""Nearest cells eligible for explore. On pategail-geolife's training days, the destinations of real explore
moves lie within the 200 nearest cells only 70% of the time (the original code's cut-off), within 1,000 91%,
within 2,000 96% (benchmarks/epr_defaults.py; BENCHMARKS.md). 1,000 keeps the table at 4 KB a cell."""
DEFAULT_ALPHA = 0.96
"""Rank exponent: the maximum-likelihood value on the same explore moves with 1,000 candidates (0.90 with
200, 0.99 with 2,000; the original code's 0.6 is not supported by the data)."""


@dataclass(frozen=True)
class CellGeometry:
    """The cell table and, for every cell, its nearest other cells in order of great-circle distance.

    cells: float64 (n_cells, 2) lat, lon degrees. neighbours: int32 (n_cells, K), rank r+1 in column r.
    """

    cells: np.ndarray
    neighbours: np.ndarray | NearestCellRows
    _laws: dict[tuple[bytes, bytes | None], ExploreLaw] = field(default_factory=dict, init=False, repr=False,
                                                                compare=False)

    @classmethod
    def build(cls, cells: np.ndarray, candidates: int = DEFAULT_CANDIDATES, *, lazy: bool = False) -> "CellGeometry":
        """The geometry of ``cells``; with ``lazy`` the neighbour table is a :class:`NearestCellRows`, each row
        computed the first time it is read (generation, which explores from a part of the cells only)."""
        cells = np.asarray(cells, dtype=np.float64)
        if lazy:
            return cls(cells=cells, neighbours=NearestCellRows(cells, candidates))
        return cls(cells=cells, neighbours=_whole_table(cells, candidates))

    @property
    def candidates(self) -> int:
        k: int = self.neighbours.shape[1]
        return k

    def explore_law(self, rank_weight: np.ndarray, places: PlaceLaw | None) -> "ExploreLaw":
        """The :class:`ExploreLaw` of these cells under ``rank_weight`` (K,) and ``places``, shared by the
        environments built on this geometry (the batches of one ``pategail generate`` call reuse its rows)."""
        key = (rank_weight.tobytes(), None if places is None else places.relevance.tobytes())
        law = self._laws.get(key)
        if law is None:
            if len(self._laws) >= 4:                                 # a few laws at most (training keeps one)
                self._laws.pop(next(iter(self._laws)))
            law = self._laws[key] = ExploreLaw(self.neighbours, rank_weight,
                                               None if places is None else places.relevance)
        return law


class ExploreLaw:
    """The explore law of every cell: the weight of each of its K candidates, ``rank_weight[r]`` for the
    cell of rank r + 1, times its relevance under a place law.

    For the draw (:func:`pategail.sdk.explore_draw.masked_inverse_cdf`) it keeps, per cell, the cumulative
    weights of its candidates and the rank of every cell among its candidates, each computed the first time
    an agent explores from the cell (memory grows with the cells explored from, rows stored densely: at most
    n_cells × K float64 and n_cells × n_cells int16; without a place law one cumulative row serves every cell). Forming and
    summing the K weights afresh at every explore move was the largest part of the environment's cost.
    Tables of more than ``RANK_TABLE_MAX`` cells keep no ranks (:attr:`fast` False): the environment then
    zeroes the visited candidates' weights, kept per cell, and sums them at every move (the draw of before)."""

    def __init__(self, neighbours: np.ndarray | NearestCellRows, rank_weight: np.ndarray,
                 relevance: np.ndarray | None):
        self.neighbours = neighbours
        self.rank_weight = rank_weight
        self.relevance = relevance
        n, k = neighbours.shape
        self.fast = n <= RANK_TABLE_MAX
        # the cumulative weights (fast) or the weights (not) of the cells explored from; without a place law
        # one row serves every cell
        self._table = _KeptRows(n if relevance is not None else 1, k, np.float64)
        if self.fast:
            self._rank = _KeptRows(n, n, np.int16 if k < np.iinfo(np.int16).max else np.int32)

    def _weights(self, cells: np.ndarray) -> np.ndarray:
        if self.relevance is None:
            return np.repeat(self.rank_weight[None, :], len(cells), axis=0)
        weights: np.ndarray = self.rank_weight[None, :] * self.relevance[self.neighbours[cells]]
        return weights

    def _rows_of(self, cells: np.ndarray) -> np.ndarray:
        """The rows of the kept table for ``cells``, filled here the first time they are asked for."""
        keys = np.asarray(cells, dtype=np.int64) if self.relevance is not None else np.zeros(len(cells), np.int64)
        missing = self._table.missing(keys)
        if len(missing):
            w = self._weights(missing)
            self._table.add(missing, np.cumsum(w, axis=1) if self.fast else w)
        return self._table.slot[keys]

    def rows(self, cells: np.ndarray) -> np.ndarray:
        """float64 (m, K): the weights of the candidates of each of ``cells`` (m,), a fresh array."""
        if self.fast or self.relevance is None:
            return self._weights(cells)
        kept = self._rows_of(cells)                 # first: filling rows may move the table
        rows: np.ndarray = self._table.data[kept]
        return rows

    @property
    def cumulative(self) -> np.ndarray:
        """float64 (R, K): rows of the candidates' cumulative weights (:meth:`cumulative_rows` says which; ask
        for the rows first: filling new ones may move the table)."""
        if not self.fast:
            raise RuntimeError("this explore law keeps weights, not cumulative weights")
        return self._table.data

    def cumulative_rows(self, cells: np.ndarray) -> np.ndarray:
        """int64 (m,): the row of :attr:`cumulative` that holds the law of each of ``cells``."""
        return self._rows_of(cells)

    def ranks(self, origins: np.ndarray, cells: np.ndarray) -> np.ndarray:
        """int (m, S): the rank − 1 (column of ``neighbours``) of cells[i, j] among the candidates of
        origins[i] (m,), or K where it is not one of them."""
        origins = np.asarray(origins, dtype=np.int64)
        missing = self._rank.missing(origins)
        if len(missing):
            k = self.neighbours.shape[1]
            rank = np.full((len(missing), self._rank.width), k, dtype=self._rank.data.dtype)
            rank[np.arange(len(missing))[:, None], self.neighbours[missing]] = np.arange(k)
            self._rank.add(missing, rank)
        n = self._rank.width
        ranks: np.ndarray = self._rank.data.reshape(-1).take(self._rank.slot[origins][:, None] * n + cells)
        return ranks


class _KeptRows:
    """Rows of an (n, width) table, kept only for the keys asked for, stored densely in the order they were
    first added (the table grows by doubling). A whole (n, width) array filled at scattered rows would be made
    resident 2 MB at a time by the kernel's transparent huge pages: 35 MB of ranks for pategail-geolife's 4,210
    cells within a few rounds, where the rows used take a few MB."""

    def __init__(self, n: int, width: int, dtype: DTypeLike):
        self.width = width
        self.slot = np.full(n, -1, dtype=np.int64)
        """The row of ``data`` holding each key, −1 where not kept."""
        self.data = np.empty((min(n, 16), width), dtype=dtype)
        self.count = 0

    def missing(self, keys: np.ndarray) -> np.ndarray:
        """The distinct ``keys`` not kept yet, sorted."""
        return np.unique(keys[self.slot[keys] < 0])

    def add(self, keys: np.ndarray, rows: np.ndarray) -> None:
        """Keep ``rows`` (len(keys), width) for the distinct, not yet kept ``keys``."""
        end = self.count + len(keys)
        if end > len(self.data):
            grown = np.empty((min(len(self.slot), max(end, 2 * len(self.data))), self.width), dtype=self.data.dtype)
            grown[:self.count] = self.data[:self.count]
            self.data = grown
        self.data[self.count:end] = rows
        self.slot[keys] = np.arange(self.count, end)
        self.count = end


RANK_TABLE_MAX = 8192
"""Most cells for which :class:`ExploreLaw` keeps each explored-from cell's ranks of all cells (n_cells int16 a
row: 16 KB at most, 128 MB if every cell of the largest table were explored from)."""


def candidate_count(n_cells: int, candidates: int) -> int:
    """K, the explore candidates per cell: ``candidates``, or every other cell of a smaller table."""
    k = min(int(candidates), int(n_cells) - 1)
    if k < 1:
        raise ValueError("the EPR environment needs at least two cells")
    return k


SineTables = tuple[HalfAngleTable, HalfAngleTable, np.ndarray]
"""What :func:`sine_tables` returns: the latitudes' and longitudes' half-angle tables, the latitudes' cosines."""


def sine_tables(cells: np.ndarray, pairs: int) -> SineTables | None:
    """The half-angle tables of ``cells``' latitudes and longitudes and the cosines of the latitudes, for
    :func:`nearest_cells`, when they are worth it for ``pairs`` distances (else None)."""
    lat, lon = cells[:, 0], cells[:, 1]
    if HalfAngleTable.worth_it(lat, pairs) and HalfAngleTable.worth_it(lon, pairs):
        return HalfAngleTable(lat), HalfAngleTable(lon), np.cos(np.radians(lat))
    return None


def nearest_cells(cells: np.ndarray, rows: np.ndarray, candidates: int, chunk: int = 128,
                  tables: SineTables | None | Literal[False] = False) -> np.ndarray:
    """int32 (len(rows), K): for each cell id in ``rows``, its K nearest other cells by great-circle distance
    (ties by cell id, so every platform ranks alike); column r holds rank r + 1. Blocks of 128 rows stay in
    cache, and with the sine tables of :class:`~pategail.sdk.geo.HalfAngleTable` pategail-geolife's table of
    4,210 cells costs ~0.8 s of CPU instead of ~1.2 (BENCHMARKS.md). ``tables``: those of :func:`sine_tables`
    (or None: the direct formula) when the caller keeps them; by default built here when worth it. The same
    numbers either way."""
    cells = np.asarray(cells, dtype=np.float64)
    rows = np.asarray(rows, dtype=np.int64)
    k = candidate_count(len(cells), candidates)
    lat, lon = cells[:, 0], cells[:, 1]
    out = np.empty((len(rows), k), dtype=np.int32)
    if tables is False:
        tables = sine_tables(cells, len(rows) * len(cells))
    for s in range(0, len(rows), chunk):
        part_rows = rows[s:s + chunk]
        if tables is None:
            d = haversine_km(lat[part_rows, None], lon[part_rows, None], lat[None, :], lon[None, :])
        else:                     # haversine_km's arithmetic, the sine terms gathered from the tables
            phi, lmb, cos = tables
            d = km_of_haversine(phi.block(part_rows) + cos[part_rows, None] * cos[None, :] * lmb.block(part_rows))
        d[np.arange(len(part_rows)), part_rows] = np.inf              # never rank a cell as its own neighbour
        # the k nearest, put in id order, then a stable sort by distance: ties stay in id order (one sort
        # instead of lexsort's two)
        part = np.sort(np.argpartition(d, k - 1, axis=1)[:, :k], axis=1)
        order = np.argsort(np.take_along_axis(d, part, 1), axis=1, kind="stable")
        out[s:s + chunk] = np.take_along_axis(part, order, 1)
    return out


_TABLES: OrderedDict[tuple[bytes, int], np.ndarray] = OrderedDict()
_TABLES_KEPT = 2
_TABLES_LOCK = threading.Lock()


def _whole_table(cells: np.ndarray, candidates: int) -> np.ndarray:
    """:func:`nearest_cells` of every cell, read-only, remembered for the last ``_TABLES_KEPT`` cell tables of
    the process: a run builds the geometry of its cells for the coordinator, the privacy plan and each baseline,
    and a served run or an emulator builds it again for every run it starts (~0.8 s of CPU each for
    pategail-geolife's 4,210 cells). Keyed by the cells' bytes, so a different table is computed afresh."""
    key = (hashlib.sha256(np.ascontiguousarray(cells).tobytes()).digest() + bytes(str(cells.shape), "ascii"),
           candidates)
    with _TABLES_LOCK:
        table = _TABLES.get(key)
        if table is not None:
            _TABLES.move_to_end(key)
            return table
    table = nearest_cells(cells, np.arange(len(cells)), candidates)
    table.flags.writeable = False
    with _TABLES_LOCK:
        _TABLES[key] = table
        while len(_TABLES) > _TABLES_KEPT:
            _TABLES.popitem(last=False)
    return table


class NearestCellRows:
    """The (n_cells, K) table of :func:`nearest_cells`, each row computed the first time it is read: the same
    numbers (each row is computed alone), without the whole table's ~0.8 s of CPU at start-up when only the
    cells agents explore from are needed (``pategail generate``, a device's own generation).

    Reads like the array: ``table[ids]``, ``table[ids, columns]`` (``ids`` an int or an int array), ``.shape``;
    any other index, or ``np.asarray(table)``, computes every row first."""

    def __init__(self, cells: np.ndarray, candidates: int):
        self._cells = np.asarray(cells, dtype=np.float64)
        n = len(self._cells)
        self._k = candidate_count(n, candidates)
        # the whole table's memory, as before (transparent huge pages make scattered rows resident 2 MB at a
        # time, see _KeptRows); what is saved is the CPU of the rows never read
        self._rows = np.empty((n, self._k), dtype=np.int32)
        self._filled = np.zeros(n, dtype=bool)
        self._tables: SineTables | None | Literal[False] = False  # the sine tables, built at the first fill

    @property
    def shape(self) -> tuple[int, int]:
        return self._rows.shape

    @property
    def dtype(self) -> np.dtype:
        return self._rows.dtype

    @property
    def filled(self) -> int:
        """How many rows have been computed so far."""
        return int(self._filled.sum())

    def __len__(self) -> int:
        return len(self._rows)

    def _fill(self, ids: ArrayLike) -> None:
        ids = np.asarray(ids).ravel()
        if len(ids) == 0:
            return
        ids = ids % len(self._rows)                            # negative ids read as numpy reads them
        missing = np.unique(ids[~self._filled[ids]])
        if len(missing):
            if self._tables is False:                           # worth it over the whole table's rows
                self._tables = sine_tables(self._cells, len(self._cells) ** 2)
            self._rows[missing] = nearest_cells(self._cells, missing, self._k, tables=self._tables)
            self._filled[missing] = True

    def _fill_all(self) -> None:
        if not self._filled.all():
            self._fill(np.flatnonzero(~self._filled))

    def __getitem__(self, key: Any) -> np.ndarray:
        rows = key[0] if isinstance(key, tuple) else key
        if isinstance(rows, (int, np.integer)) or (isinstance(rows, np.ndarray)
                                                     and np.issubdtype(rows.dtype, np.integer)):
            self._fill(rows)
        else:
            self._fill_all()
        table_rows: np.ndarray = self._rows[key]
        return table_rows

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        self._fill_all()
        return self._rows if dtype is None else self._rows.astype(dtype)


def rank_bins(candidates: int) -> np.ndarray:
    """int64 (K,): the bin of ranks 1..K — bin 0 is rank 1, bin b >= 1 ranks 2^(b-1)+1 .. 2^b."""
    return np.array([(r - 1).bit_length() for r in range(1, int(candidates) + 1)], dtype=np.int64)


def n_rank_bins(candidates: int) -> int:
    """How many explore factors a K-candidate environment takes (11 for K = 1,000)."""
    return (int(candidates) - 1).bit_length() + 1


def explore_rank_weights(candidates: int, alpha: float, explore_factors: np.ndarray | None = None) -> np.ndarray:
    """float64 (K,): the unnormalised weight of ranks 1..K, r^-alpha × factor[bin(r)]."""
    w = np.arange(1, int(candidates) + 1, dtype=np.float64) ** -float(alpha)
    if explore_factors is None:
        return w
    f = np.asarray(explore_factors, dtype=np.float64)
    if f.shape != (n_rank_bins(candidates),) or not (np.isfinite(f) & (f > 0)).all():
        raise ValueError(f"explore_factors must be {n_rank_bins(candidates)} positive numbers "
                         f"for {candidates} candidates")
    weights: np.ndarray = w * f[rank_bins(candidates)]
    return weights


class EPREnvironment:
    """A batch of agents living one day each, one slot per :meth:`step`.

    ``reset(homes, first_cells)`` starts the day at slot 0; ``step(actions)`` moves every agent to slot t+1.
    ``days`` holds the cells so far (future slots are -1); ``mask()`` the actions possible now; ``state``
    (:class:`~pategail.sdk.day_state.DayState`) the running state features of slot t, updated in O(n·t) a
    slot so that generation does not re-featurise the prefix. With ``max_cells`` a day that holds that many
    distinct cells takes no action that adds one (the released limit of :mod:`pategail.server.action_prior`).
    """

    def __init__(self, geometry: CellGeometry, *, alpha: float = DEFAULT_ALPHA,
                 explore_factors: np.ndarray | None = None, slots: int = SLOTS, rng: np.random.Generator,
                 places: PlaceLaw | None = None, max_cells: int | None = None):
        if alpha < 0:
            raise ValueError("alpha must be >= 0")
        if max_cells is not None and max_cells < 1:
            raise ValueError(f"max_cells must be >= 1, got {max_cells}")
        if places is not None and len(places.relevance) != len(geometry.cells):
            raise ValueError(f"the place law has {len(places.relevance)} cells, the geometry {len(geometry.cells)}")
        self.places = places
        self.max_cells = max_cells
        self.geometry = geometry
        self.alpha = float(alpha)
        self.slots = slots
        self.rng = rng
        self._rank_weight = explore_rank_weights(geometry.candidates, self.alpha, explore_factors)
        self._law = geometry.explore_law(self._rank_weight, places)
        self.state = DayState(geometry.cells, slots)
        self.state.reset(np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32))

    @property
    def days(self) -> np.ndarray:
        """int32 (n, slots): the cells so far, -1 in the slots still to come."""
        return self.state.days

    @property
    def homes(self) -> np.ndarray:
        return self.state.homes

    @property
    def t(self) -> int:
        return self.state.t

    def reset(self, homes: np.ndarray, first_cells: np.ndarray) -> None:
        homes = np.asarray(homes, dtype=np.int32)
        first_cells = np.asarray(first_cells, dtype=np.int32)
        if homes.shape != first_cells.shape or homes.ndim != 1:
            raise ValueError("homes and first_cells must be 1-D of the same length")
        self.state.reset(homes, first_cells)

    @property
    def done(self) -> bool:
        return self.t >= self.slots - 1

    def history(self) -> np.ndarray:
        """int32 (n, t+1): the cells of slots 0..t."""
        return self.days[:, : self.t + 1]

    def mask(self) -> np.ndarray:
        """bool (n, 4): the actions possible at the current slot (row t of ``action_mask`` with the
        environment's ``max_cells``)."""
        return self.state.mask(self.max_cells)

    def step(self, actions: np.ndarray, realised: np.ndarray | None = None) -> np.ndarray:
        """Apply one action per agent; return the new cells (n,).

        ``realised`` (optional, int (n,)) forces the destination of return/explore moves — used to replay
        real days; it must be consistent with the action (checked), otherwise ValueError.
        """
        if self.done:
            raise RuntimeError("the day is over; call reset()")
        actions = np.asarray(actions)
        hist = self.history()
        cur = hist[:, -1]
        ok = np.take_along_axis(self.mask(), actions[:, None].astype(np.int64), 1)[:, 0]
        if not ok.all():
            i = int(np.argmin(ok))
            raise ValueError(f"agent {i}: action {int(actions[i])} is not possible at slot {self.t}")
        nxt = cur.copy()
        nxt[actions == HOME] = self.homes[actions == HOME]
        ret = np.flatnonzero(actions == RETURN)
        exp = np.flatnonzero(actions == EXPLORE)
        if realised is None:
            nxt[ret] = self._sample_return(hist[ret], self.homes[ret], self.state.left[ret])
            nxt[exp] = self._sample_explore(exp)
        else:
            realised = np.asarray(realised)
            self._check_realised(hist, actions, realised)
            nxt[ret], nxt[exp] = realised[ret], realised[exp]
        self.state.push(nxt)
        return nxt

    def _sample_return(self, hist: np.ndarray, homes: np.ndarray, left: np.ndarray) -> np.ndarray:
        # Choosing a past slot uniformly among those not at home and not here picks a cell with
        # probability proportional to its visits so far: preferential return without a per-agent loop.
        eligible = (hist != homes[:, None]) & (hist != hist[:, -1:])
        out = _pick(hist, eligible.astype(np.float64), self.rng)
        if self.places is not None and self.places.return_last > 0 and len(hist):
            # d-EPR's return: the place just left with probability return_last (when it may be returned to)
            back = (self.rng.random(len(hist)) < self.places.return_last) & (left >= 0) & (left != homes)
            out[back] = left[back]
        return out

    def _sample_explore(self, rows: np.ndarray) -> np.ndarray:
        """The explore destinations of agents ``rows``: a candidate not visited today, ∝ its weight, by inverse
        CDF on one uniform per agent whose candidates are not all visited (the nearest unvisited cell for
        the others, without a draw)."""
        if len(rows) == 0:
            return np.empty(0, dtype=np.int32)
        here = self.state.current[rows]
        law, k = self._law, self.geometry.candidates
        if not law.fast:
            return self._draw_masked(rows, here, None)
        # the visited candidates' columns, each once, in increasing order (K: not a candidate)
        skip = np.sort(law.ranks(here, self.state.history()[rows]), axis=1)
        skip[:, 1:][skip[:, 1:] == skip[:, :-1]] = k
        skip.sort(axis=1)
        full = (skip < k).sum(axis=1) == k                                     # all K nearest seen today
        open_ = np.flatnonzero(~full)
        out = np.empty(len(rows), dtype=np.int32)
        if len(open_):
            r = self.rng.random(len(open_))
            kept = law.cumulative_rows(here[open_])      # first: filling rows may move the table
            index, sure = explore_draw.masked_inverse_cdf(law.cumulative, kept, skip[open_], r, explore_draw.GUARD)
            out[open_] = self.geometry.neighbours[here[open_], np.minimum(index, k - 1)]
            if not sure.all():                 # too close to call in float sums: the masked cumulative sum
                redo = open_[~sure]
                out[redo] = self._draw_masked(rows[redo], here[redo], r[~sure])
        for i in np.flatnonzero(full):
            out[i] = self._nearest_unvisited(self.history()[rows[i]])
        return out

    def _draw_masked(self, rows: np.ndarray, here: np.ndarray, r: np.ndarray | None) -> np.ndarray:
        """The explore draw the long way: the candidates' weights with the visited ones zeroed, their cumulative
        sum, inverse CDF with the uniforms ``r`` (drawn here, one per agent not surrounded by visited cells,
        when None)."""
        cand = self.geometry.neighbours[here]                                 # (m, K) by rank
        weights = self._law.rows(here)
        np.putmask(weights, self.state.visited(rows, cand), 0.0)              # never explore a visited cell
        cdf = np.cumsum(weights, axis=1, out=weights)
        if r is not None:
            return _pick_cdf(cand, cdf, r)
        full = cdf[:, -1] == 0                                                # all K nearest seen today
        out = np.empty(len(rows), dtype=np.int32)
        if (~full).any():
            out[~full] = _pick_cdf(cand[~full], cdf[~full], self.rng.random(int((~full).sum())))
        for i in np.flatnonzero(full):
            out[i] = self._nearest_unvisited(self.history()[rows[i]])
        return out

    def _nearest_unvisited(self, hist: np.ndarray) -> int:
        cells = self.geometry.cells
        d = haversine_km(cells[hist[-1], 0], cells[hist[-1], 1], cells[:, 0], cells[:, 1])
        d[np.unique(hist)] = np.inf
        if not np.isfinite(d).any():
            raise RuntimeError("explore: every cell has been visited")
        return int(np.argmin(d))

    def _check_realised(self, hist: np.ndarray, actions: np.ndarray, realised: np.ndarray) -> None:
        cur, homes = hist[:, -1], self.homes
        seen = (realised[:, None] == hist).any(axis=1)
        bad = ((actions == STAY) & (realised != cur)) | ((actions == HOME) & (realised != homes)) \
            | ((actions == RETURN) & (~seen | (realised == homes) | (realised == cur))) \
            | ((actions == EXPLORE) & seen)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"agent {i}: cell {int(realised[i])} cannot follow action {int(actions[i])} "
                             f"at slot {self.t}")


def _pick(values: np.ndarray, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One entry of each row of ``values``, drawn with probability proportional to ``weights``."""
    if len(values) == 0:
        return np.empty(0, dtype=np.int32)
    return _pick_cdf(values, np.cumsum(weights, axis=1), rng.random(len(values)))


def _pick_cdf(values: np.ndarray, cdf: np.ndarray, r: np.ndarray) -> np.ndarray:
    """:func:`_pick` given the rows' cumulative weights ``cdf`` and one uniform ``r`` per row (inverse CDF)."""
    if len(values) == 0:
        return np.empty(0, dtype=np.int32)
    u = r * cdf[:, -1]
    idx = (cdf <= u[:, None]).sum(axis=1)
    picked: np.ndarray = values[np.arange(len(values)), np.minimum(idx, values.shape[1] - 1)].astype(np.int32)
    return picked


def explore_ranks(neighbours_of: Callable[[np.ndarray], np.ndarray], days: np.ndarray, homes: np.ndarray,
                  chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """For every explore move of labelled days: the destination's distance rank from the current cell
    (1 = nearest other cell; 0 = beyond the K candidates) and which of the K nearest cells were not yet
    visited that day (the cells explore could have chosen).

    ``neighbours_of(cell_ids)`` returns their (m, K) nearest cells by rank (``CellGeometry.neighbours``
    indexed, or :func:`nearest_cells` for a few cells). Returns (dest_rank int64 (m,), unvisited bool (m, K)).
    """
    days = np.asarray(days)
    labels = label_actions(days, homes)
    d_idx, t_idx = np.nonzero(labels == EXPLORE)
    dest = days[d_idx, t_idx + 1]
    dest_rank = np.zeros(len(d_idx), dtype=np.int64)
    unvisited = []
    future = np.arange(days.shape[1])[None, :] > t_idx[:, None]
    for s in range(0, len(d_idx), chunk):                                  # bounded memory: chunk x K
        sl = slice(s, s + chunk)
        cand = neighbours_of(days[d_idx[sl], t_idx[sl]])                           # (m, K) by rank
        hit = cand == dest[sl, None]
        dest_rank[sl] = np.where(hit.any(1), hit.argmax(1) + 1, 0)
        unvisited.append(~isin_rows(cand, np.where(future[sl], -1, days[d_idx[sl]])))
    if not unvisited:
        k = neighbours_of(np.zeros(1, dtype=np.int64)).shape[1]
        return dest_rank, np.zeros((0, k), dtype=bool)
    return dest_rank, np.concatenate(unvisited)


def explore_law_contribution(days: np.ndarray, home: int, cells: np.ndarray, *, alpha: float = DEFAULT_ALPHA,
                             candidates: int = DEFAULT_CANDIDATES, days_cap: int = DAYS_CAP) -> np.ndarray:
    """float64 (2·B,), B = ``n_rank_bins(K)``: one device's contribution to the learned explore law.

    For the device's explore moves whose destination is among the K candidates: ``[0, B)`` holds
    w × the share of them that landed in each rank bin, ``[B, 2B)`` w × the mean probability the pure power
    law (``alpha``, factors 1) gave each bin among the cells still unvisited at that move; w = min(1,
    days / ``days_cap``) as in the initial-state contribution, zero without such moves. Every entry is in
    [0, 1] and each half sums to w. Summed over devices (observed O, expected A), factor[b] = O[b] / A[b]
    is one step of iterative scaling of the power law towards the maximum-likelihood binned law.
    """
    days = np.asarray(days)
    cells = np.asarray(cells, dtype=np.float64)
    k = candidate_count(len(cells), candidates)
    bins = rank_bins(k)
    n_bins = n_rank_bins(k)
    out = np.zeros(2 * n_bins, dtype=np.float64)
    if not len(days):
        return out
    homes = np.full(len(days), home, dtype=np.int64)
    lookup: dict[int, np.ndarray] = {}

    def neighbours_of(ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        missing = np.setdiff1d(ids, np.fromiter(lookup, dtype=np.int64, count=len(lookup)))
        if len(missing):
            for c, row in zip(missing.tolist(), nearest_cells(cells, missing, k)):
                lookup[c] = row
        return np.stack([lookup[c] for c in ids.tolist()]) if len(ids) else np.empty((0, k), np.int32)

    dest_rank, unvisited = explore_ranks(neighbours_of, days, homes)
    keep = dest_rank > 0
    if not keep.any():
        return out
    w = contribution_weight(len(days), days_cap)
    observed = np.bincount(bins[dest_rank[keep] - 1], minlength=n_bins) / keep.sum()
    weights = np.where(unvisited[keep], explore_rank_weights(k, alpha)[None, :], 0.0)
    per_bin = weights @ np.eye(n_bins)[bins]                                    # (moves, B)
    expected = (per_bin / per_bin.sum(1, keepdims=True)).mean(0)
    out[:n_bins] = w * observed
    out[n_bins:] = w * expected
    return out


def replay(geometry: CellGeometry, days: np.ndarray, homes: np.ndarray, actions: np.ndarray,
           rng: np.random.Generator) -> np.ndarray:
    """Re-run labelled days through the environment with their realised cells; returns the days produced."""
    env = EPREnvironment(geometry, slots=days.shape[1], rng=rng)
    env.reset(homes, days[:, 0])
    for t in range(days.shape[1] - 1):
        env.step(actions[:, t], realised=days[:, t + 1])
    return env.days.copy()
