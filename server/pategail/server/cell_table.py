"""A run's privately released cell table: the run's first release, before the environment's.

Every device marks its most-visited squares of the public map (``CellReleaseRequest``; the device's
:func:`pategail.sdk.cell_universe.visited_vector`, L2 ≤ √m, clipped on the device); the secure aggregation sums
the marks with distributed Gaussian noise (block 0, clip √m) — journalled, counted by the accountant as its own
kind of release, and re-used from the journal by a resumed run (never released twice); the coordinator keeps
the squares whose noisy count clears the threshold for the noise the sum carries
(:mod:`pategail.server.privacy.cell_release`). The coordinator sees the noisy counts only, never a device's
days; the devices then move their days onto the released table themselves.
"""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np

from pategail.sdk.features import SLOTS
from pategail.sdk.files import write_atomic
from pategail.sdk.messages import CellReleaseRequest, to_bytes
from pategail.sdk.secagg.policy import DeclaredPlan
from pategail.server.config import TrainConfig
from pategail.server.errors import PategailError
from pategail.server.fleet import Fleet
from pategail.server.privacy.cell_release import CellReleasePlan, plan_cell_release
from pategail.server.privacy.mechanisms import GAUSSIAN_PLAN
from pategail.server.privacy.plan import ReleaseNoise
from pategail.server.releases import CELL_TABLE_ROUND, SecureReleases

log = logging.getLogger(__name__)

CELL_PLAN_FILE = "cell-release-plan.json"
"""The cell release's plan, kept in the run's checkpoint directory (made once, before the release)."""
CELL_TABLE_FILE = "cell-table.json"
"""What the run published: the released squares (ids of the public map) and the threshold that chose them."""


def cell_release_noise(plan: CellReleasePlan) -> ReleaseNoise:
    """What the cell release's signed round configuration carries: the Gaussian mechanism on the vector as it
    is (block 0) with the device's clip √m and σ on each square's count."""
    return ReleaseNoise(GAUSSIAN_PLAN.name, plan.noise_std, 0.0, 0, math.sqrt(plan.max_cells), cells=True)


def load_or_make_cell_plan(config: TrainConfig, universe: int, ckpt_dir: Path) -> CellReleasePlan:
    """The cell release's plan kept in ``ckpt_dir``, or a new one for ``config``'s target over a public map of
    ``universe`` squares, written there first. PategailError when the kept one is of another universe."""
    privacy = config.privacy
    assert privacy.epsilon is not None and privacy.delta is not None, "a private, resolved config"
    path = Path(ckpt_dir) / CELL_PLAN_FILE
    plan = plan_cell_release(privacy.epsilon, privacy.delta, universe, adjacency=privacy.adjacency)
    if path.is_file():
        kept = CellReleasePlan(**json.loads(path.read_text()))
        if kept.universe != universe:
            raise PategailError(f"{path}: the run's cell release was planned over {kept.universe} squares, this "
                                f"public map has {universe}; resume it with the same --data, or use another --out")
        return kept
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(vars(plan), indent=1) + "\n").encode())
    return plan


def public_map_declaration(config: TrainConfig, plan: CellReleasePlan) -> DeclaredPlan:
    """What the bundle on the public map tells the devices before the release: the run's target and the cell
    release's noise multiplier, and no other release (its reward and environment multipliers 0, which a device
    holds to: under it, it answers the cell-table release only). The run's bundles on the released table
    declare the whole plan."""
    privacy = config.privacy
    assert privacy.epsilon is not None and privacy.delta is not None, "a private, resolved config"
    return DeclaredPlan(privacy.epsilon, privacy.delta, 0.0, 0.0, config.secagg.min_survivors, config.secagg.colluders,
                        GAUSSIAN_PLAN.name, 0.0, 0.0, plan.release().noise_multiplier)


def load_cell_plan(ckpt_dir: Path) -> CellReleasePlan:
    """The plan of a run's cell release (made by :func:`release_cell_table` before anything else)."""
    path = Path(ckpt_dir) / CELL_PLAN_FILE
    if not path.is_file():
        raise PategailError(f"{path}: missing — a run that releases its cell table plans that release first")
    return CellReleasePlan(**json.loads(path.read_text()))


def release_cell_table(config: TrainConfig, fleet: Fleet, universe_cells: np.ndarray, run: Path, seed: int,
                       signing_key=None) -> np.ndarray:
    """The run's released table: sorted ids of ``universe_cells`` (the public map the devices hold) — the
    journalled release when there is one, else a new secure release. Written to ``run/cell-table.json``."""
    ckpt_dir = Path(run) / "checkpoint"
    universe = len(universe_cells)
    plan = load_or_make_cell_plan(config, universe, ckpt_dir)
    releases = SecureReleases(config, fleet, ckpt_dir, seed, signing_key)
    releases.rebuild_accountant()
    noise = cell_release_noise(plan)
    participants: list[int] = []
    if CELL_TABLE_ROUND not in releases.journal():       # else the journalled release is re-used
        releases.check_budget(CELL_TABLE_ROUND, universe, noise, config.privacy.retry_rounds)
        request = CellReleaseRequest(CELL_TABLE_ROUND, plan.max_cells)
        participants, _, _ = releases.broadcast(to_bytes(request), universe)
    release, _, _ = releases.release(CELL_TABLE_ROUND, "cells", participants, universe, noise)
    threshold = plan.threshold_for(release.n_survivors, releases.honest_shares())
    released = plan.select(release.sum, threshold)
    if len(released) <= SLOTS:          # a day's explorations could then use up every square
        raise PategailError(f"{len(released)} square(s) of the public map cleared the release's threshold "
                            f"({threshold:.3g} devices for noise std {plan.noise_std:.3g}); a table needs more than "
                            f"a day's {SLOTS} slots: too few devices for a released table at this ε; use the public "
                            "map (leave out --cells released)")
    write_atomic(Path(run) / CELL_TABLE_FILE, (json.dumps({
        "universe": universe, "released": released.tolist(), "threshold": threshold,
        "contributors": release.n_survivors, "plan": vars(plan)}, indent=1) + "\n").encode())
    log.info("cell table: %d of the public map's %d squares released (noise std %.3g, threshold %.3g devices, %d "
             "devices)", len(released), universe, plan.noise_std, threshold, release.n_survivors)
    return released
