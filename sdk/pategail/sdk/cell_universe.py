"""The device's part of a privately released cell table — pure functions, run on the device only.

A public candidate universe (every square of a public bounding box: ``data prepare --public-cells``) is known
to everyone. Each device contributes one bounded 0/1 vector over it — the squares it visits, at most ``m``
of them — to a noisy secure sum (:func:`visited_vector`); the coordinator keeps the squares whose noisy count
clears a threshold (``pategail.server.privacy.cell_release``) and publishes them. The device then moves its
own days onto the released table (:func:`release_mapping`, :func:`remap_days`): nothing about a square it
visited alone leaves it except through the noisy count.
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.geo import haversine_km


def visited_vector(days: np.ndarray, n_universe: int, max_cells: int) -> np.ndarray:
    """float64 (n_universe,): 1 on the device's ``max_cells`` most-visited squares (slots spent there over all
    its days; ties to the lower id), 0 elsewhere — at most ``max_cells`` ones, so the vector's L2 norm is at
    most √max_cells whatever the days hold (the release's sensitivity)."""
    days = np.asarray(days)
    if max_cells < 1:
        raise ValueError(f"max_cells must be at least 1, got {max_cells}")
    if days.size and (days.min() < 0 or days.max() >= n_universe):
        raise ValueError(f"cell ids must be in [0, {n_universe}), got {days.min()}..{days.max()}")
    slots = np.bincount(days.ravel(), minlength=n_universe)
    order = np.lexsort((np.arange(n_universe), -slots))[:max_cells]     # most slots first, then lower id
    out = np.zeros(n_universe)
    out[order[slots[order] > 0]] = 1.0
    return out


def release_mapping(universe_cells: np.ndarray, released: np.ndarray) -> np.ndarray:
    """int32 (n_universe,): for every square of the universe its id in the released table (``released``:
    sorted universe ids of the released squares; a released square maps to itself), an unreleased square to
    the nearest released one by great-circle distance (ties to the lower id)."""
    cells = np.asarray(universe_cells, dtype=np.float64)
    released = np.asarray(released, dtype=np.int64)
    if released.size == 0:
        raise ValueError("no square was released: there is no table to move days onto")
    if np.any(np.diff(released) <= 0) or released[0] < 0 or released[-1] >= len(cells):
        raise ValueError("released must be sorted, distinct universe ids")
    out = np.empty(len(cells), dtype=np.int32)
    for start in range(0, len(cells), 512):            # (512, released) distances at a time
        block = cells[start:start + 512]
        km = haversine_km(block[:, :1], block[:, 1:], cells[released, 0][None, :], cells[released, 1][None, :])
        out[start:start + 512] = np.argmin(km, axis=1)
    out[released] = np.arange(len(released), dtype=np.int32)
    return out


def remap_days(days: np.ndarray, mapping: np.ndarray) -> np.ndarray:
    """int32 days on the released table: every slot moved by :func:`release_mapping`'s ``mapping``."""
    moved: np.ndarray = np.asarray(mapping, dtype=np.int32)[np.asarray(days)]
    return moved
