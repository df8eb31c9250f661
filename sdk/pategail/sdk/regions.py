"""Regions of a cell table: a quadtree over the cells' public coordinates and the partition of the table
into its coarse regions. Both sides build them from the bundle's cell table alone, so the device
and the coordinator agree on them without any message.

The environment release of the Gaussian mechanism adds, beside the per-cell home, first-cell and visit
histograms, the same three histograms summed over regions (:mod:`pategail.sdk.contribution`): at realistic
populations most single cells hold less than the noise's standard deviation, while a populated region holds
many times it. Regions are data-independent — small where the table's cells are dense (a city centre), large
where they are sparse — so nothing is tuned to a city.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True, eq=False)
class CellTree:
    """A quadtree over the cells of a table: node 0 is the root; ``cells[k]`` (int64) are node k's cells and
    ``children[k]`` its children (empty for a leaf: one cell, or cells at one point)."""

    cells: tuple[np.ndarray, ...]
    children: tuple[tuple[int, ...], ...]

    @classmethod
    def from_coordinates(cls, lat: np.ndarray, lon: np.ndarray) -> "CellTree":
        """Split a square box around the cells into 4 quadrants, recursively, keeping non-empty quadrants;
        the box is square in kilometres (longitude scaled by cos latitude), so nodes are areas, not strips."""
        lat, lon = np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64)
        if lat.shape != lon.shape or lat.ndim != 1 or not len(lat):
            raise ValueError("need one latitude and one longitude per cell")
        y = lat
        x = lon * math.cos(math.radians(float(np.mean(lat))))
        half = max(float(np.ptp(x)), float(np.ptp(y))) / 2 or 1.0
        cells: list[np.ndarray] = []
        children: list[list[int]] = []
        stack = [(np.arange(len(lat), dtype=np.int64), float(x.min()) + half, float(y.min()) + half, half, -1)]
        while stack:
            idx, cx, cy, h, parent = stack.pop()
            node = len(cells)
            cells.append(idx)
            children.append([])
            if parent >= 0:
                children[parent].append(node)
            if len(idx) < 2 or (np.ptp(x[idx]) == 0 and np.ptp(y[idx]) == 0):
                continue
            east, north = x[idx] >= cx, y[idx] >= cy
            q = h / 2
            for e in (False, True):
                for n in (False, True):
                    sub = idx[(east == e) & (north == n)]
                    if len(sub):
                        stack.append((sub, cx + (q if e else -q), cy + (q if n else -q), q, node))
        return cls(tuple(cells), tuple(tuple(c) for c in children))

    @property
    def n_cells(self) -> int:
        return len(self.cells[0])


REGION_CELLS = 64
"""A region of the coarse level holds at most this many cells of the table (the quadtree's nodes are split
until they do). Data-independent: the cell table alone fixes the regions, which are small where cells are
dense (a city centre) and large where they are sparse."""


def regions(tree: CellTree, max_cells: int = REGION_CELLS) -> np.ndarray:
    """int64 (n_cells,): the region of every cell — the partition of the table into the highest quadtree
    nodes of at most ``max_cells`` cells (a leaf of more cells at one point is its own region)."""
    if max_cells < 1:
        raise ValueError("a region holds at least one cell")
    out = np.full(tree.n_cells, -1, dtype=np.int64)
    stack, n = [0], 0
    while stack:
        node = stack.pop()
        if len(tree.cells[node]) <= max_cells or not tree.children[node]:
            out[tree.cells[node]] = n
            n += 1
        else:
            stack.extend(reversed(tree.children[node]))
    return out


def region_map(cells: np.ndarray, max_cells: int = REGION_CELLS) -> np.ndarray:
    """int64 (n_cells,): the region of every cell of a (n_cells, 2) table of latitude, longitude (read-only:
    the map of one table is built once and shared, since a simulated fleet asks for it once per user)."""
    cells = np.ascontiguousarray(cells, dtype=np.float64)
    return _region_map(cells.tobytes(), cells.shape, int(max_cells))


@lru_cache(maxsize=8)
def _region_map(table: bytes, shape: tuple[int, ...], max_cells: int) -> np.ndarray:
    cells = np.frombuffer(table, dtype=np.float64).reshape(shape)
    out = regions(CellTree.from_coordinates(cells[:, 0], cells[:, 1]), max_cells)
    out.flags.writeable = False
    return out
