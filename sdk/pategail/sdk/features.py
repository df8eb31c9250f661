"""The (state, action) features of the EPR decision, computed by ONE function for real and generated days.

The original code computed real and generated features differently (off by one slot), which let its
discriminator win for the wrong reason. Here every consumer — the discriminator on the device, the policy on
the coordinator, the environment's action mask — goes through :func:`state_features` /
:func:`pair_features`, which only look at a day's cells, its home cell and the cell table.

Conventions (shapes use n days, T slots, F = ``N_STATE_FEATURES``):

- the state at slot t is the history l_0..l_t plus the home cell h; row t of every output depends on
  ``days[:, :t + 1]`` only (causal), so a generated day can be featurised slot by slot as it grows;
- the action taken at slot t (t = 0..T-2) decides l_{t+1}.
"""
from __future__ import annotations

import numpy as np

from pategail.sdk.geo import EARTH_RADIUS_KM, haversine_km

SLOTS = 48
"""Half-hour slots a day: the MDP's horizon, the width of every day array (one constant for the whole
project: the SDK, the coordinator, the data sets and the device protocol)."""

STAY, HOME, RETURN, EXPLORE = 0, 1, 2, 3
ACTIONS = ("stay", "home", "return", "explore")
N_ACTIONS = 4

STATE_FEATURES = (
    "slot_sin",            # time of day on the unit circle
    "slot_cos",
    "at_home",             # 1 if l_t == h
    "log_km_from_home",    # log(1 + haversine km from l_t to h)
    "dwell",               # slots spent in l_t in the current run (incl. t), / 48
    "distinct",            # distinct cells among l_0..l_t, / 48
    "returnable",          # visited cells that `return` could pick (not home, not l_t), / 48
    "log_last_jump_km",    # log(1 + km from l_{t-1} to l_t); 0 at t = 0
    "log_gyration_km",     # log(1 + radius of gyration of l_0..l_t in km)
    "home_share",          # share of slots 0..t spent at home
    "visits_here",         # visits to l_t among slots 0..t, / 48
)
N_STATE_FEATURES = len(STATE_FEATURES)
N_PAIR_FEATURES = N_STATE_FEATURES + N_ACTIONS
_SCALE = float(SLOTS)


def _same_cell(days: np.ndarray) -> np.ndarray:
    """(n, T, T) bool: slot t and slot τ hold the same cell, kept for τ <= t only (causal)."""
    eq = days[:, :, None] == days[:, None, :]
    causal: np.ndarray = eq & np.tril(np.ones(eq.shape[1:], dtype=bool))
    return causal


def state_features(days: np.ndarray, homes: np.ndarray, cells: np.ndarray, day_slots: int = SLOTS) -> np.ndarray:
    """float32 (n, T, F): the state features of every slot of every day (see ``STATE_FEATURES``).

    days: int (n, T) cell ids, T <= day_slots (a prefix of a day gives the prefix's rows exactly);
    homes: int (n,) home cell of each day; cells: (n_cells, 2) lat, lon degrees.
    """
    days = np.asarray(days)
    homes = np.asarray(homes).reshape(-1, 1)
    n, T = days.shape
    t = np.arange(T, dtype=np.float64)
    lat, lon = cells[days, 0], cells[days, 1]
    at_home = days == homes
    same = _same_cell(days)
    visits_here = same.sum(axis=2)                                  # visits to l_t among slots <= t
    first_visit = visits_here == 1
    distinct = np.cumsum(first_visit, axis=1)
    home_seen = np.cumsum(at_home, axis=1) > 0
    returnable = distinct - home_seen - (~at_home)

    # dwell: length of the run of equal cells that ends at t
    change = np.ones_like(at_home)
    change[:, 1:] = days[:, 1:] != days[:, :-1]
    run_start = np.maximum.accumulate(np.where(change, np.arange(T)[None, :], 0), axis=1)
    dwell = np.arange(T)[None, :] - run_start + 1

    km_home = haversine_km(lat, lon, cells[homes, 0], cells[homes, 1])
    jump = np.zeros((n, T))
    jump[:, 1:] = haversine_km(lat[:, :-1], lon[:, :-1], lat[:, 1:], lon[:, 1:])

    # Radius of gyration of the prefix, in a local equirectangular projection around the day's first
    # point (accurate to well under 1% at city scale), from running moments: mean|p|^2 - |mean p|^2.
    k = np.pi / 180 * EARTH_RADIUS_KM
    y = (lat - lat[:, :1]) * k
    x = (lon - lon[:, :1]) * k * np.cos(np.radians(lat[:, :1]))
    cnt = t[None, :] + 1
    mx, my = np.cumsum(x, 1) / cnt, np.cumsum(y, 1) / cnt
    m2 = np.cumsum(x * x + y * y, 1) / cnt
    gyration = np.sqrt(np.maximum(m2 - mx * mx - my * my, 0.0))

    out = np.empty((n, T, N_STATE_FEATURES), dtype=np.float32)
    out[..., 0] = np.sin(2 * np.pi * t / day_slots)      # the day's length, not the prefix's: causal
    out[..., 1] = np.cos(2 * np.pi * t / day_slots)
    out[..., 2] = at_home
    out[..., 3] = np.log1p(km_home)
    out[..., 4] = dwell / _SCALE
    out[..., 5] = distinct / _SCALE
    out[..., 6] = returnable / _SCALE
    out[..., 7] = np.log1p(jump)
    out[..., 8] = np.log1p(gyration)
    out[..., 9] = np.cumsum(at_home, axis=1) / cnt
    out[..., 10] = visits_here / _SCALE
    return out


def action_mask(days: np.ndarray, homes: np.ndarray, max_cells: int | None = None) -> np.ndarray:
    """bool (n, T, 4): which actions are possible at each slot given the history up to it.

    stay always is; explore too; home only away from home (at home it would be stay); return only when some
    visited cell other than home and the current one exists. With ``max_cells`` (the environment's limit on a
    day's distinct cells; None: no limit) no action may add a cell once the day holds that many: not explore,
    and not a first move home (:func:`limit_new_cells`).
    """
    days = np.asarray(days)
    homes = np.asarray(homes).reshape(-1, 1)
    at_home = days == homes
    first_visit = _same_cell(days).sum(axis=2) == 1
    distinct = np.cumsum(first_visit, 1)
    home_seen = np.cumsum(at_home, 1) > 0
    returnable = distinct - home_seen - (~at_home)
    mask = np.ones(days.shape + (N_ACTIONS,), dtype=bool)
    mask[..., HOME] = ~at_home
    mask[..., RETURN] = returnable > 0
    limit_new_cells(mask, distinct, home_seen, max_cells)
    return mask


def limit_new_cells(mask: np.ndarray, distinct: np.ndarray, home_seen: np.ndarray, max_cells: int | None) -> None:
    """Clear, in ``mask`` (..., 4), the actions that would add a cell to a day already holding ``max_cells``
    distinct cells (``distinct``, ``home_seen``: the mask's leading shape): explore (always to a cell the day
    has not seen) and home while home was not seen. Nothing without a limit."""
    if max_cells is None:
        return
    full = np.asarray(distinct) >= max_cells
    mask[..., EXPLORE] &= ~full
    mask[..., HOME] &= ~(full & ~np.asarray(home_seen))


def label_actions(days: np.ndarray, homes: np.ndarray) -> np.ndarray:
    """int8 (n, T-1): the EPR action that explains each move l_t -> l_{t+1} of real days.

    stay if the cell is unchanged; home if the new cell is home; return if it was visited before; else explore.
    """
    days = np.asarray(days)
    homes = np.asarray(homes).reshape(-1, 1)
    nxt = days[:, 1:]
    # visited_before[:, t]: l_{t+1} appears among l_0..l_t
    same = days[:, 1:, None] == days[:, None, :-1]
    visited_before = (same & np.tril(np.ones(same.shape[1:], dtype=bool))).any(axis=2)
    labels = np.full(nxt.shape, EXPLORE, dtype=np.int8)
    labels[visited_before] = RETURN
    labels[nxt == homes] = HOME
    labels[nxt == days[:, :-1]] = STAY
    return labels


def pair_features(days: np.ndarray, homes: np.ndarray, actions: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """float32 (n, T-1, F + 4): state features of slots 0..T-2 next to the one-hot action taken there.

    This is the discriminator's input, for real pairs (actions from :func:`label_actions`) and generated
    pairs (the actions the policy took) alike.
    """
    states = state_features(days, homes, cells)[:, :-1]
    onehot = np.eye(N_ACTIONS, dtype=np.float32)[np.asarray(actions, dtype=np.int64)]
    return np.concatenate([states, onehot], axis=-1)


def distinct_cells(days: np.ndarray) -> np.ndarray:
    """int (n,): the number of distinct cells each day (int (n, T) cell ids) visits (1..T)."""
    s = np.sort(np.asarray(days), axis=1)
    counts: np.ndarray = 1 + np.count_nonzero(s[:, 1:] != s[:, :-1], axis=1)
    return counts


def infer_home(days: np.ndarray, night_slots: int = 12) -> int:
    """The home cell of one user from that user's days: the most visited cell in the first ``night_slots``
    slots (00:00–06:00 for half-hour slots), as TimeGeo does; the smallest id among ties.

    Runs on the device: homes never leave it except through the aggregated initial-state release.
    """
    night = np.asarray(days)[:, :night_slots].ravel()
    values, counts = np.unique(night, return_counts=True)
    return int(values[np.argmax(counts)])
