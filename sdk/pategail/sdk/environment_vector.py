"""One device's environment vector (the pending vector of an ``InitialStatesRequest``), built in one place for
the SDK's device and the population fleet's simulated devices, in the layout of
:class:`pategail.sdk.contribution.EnvironmentLayout`."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from pategail.sdk.action_rates import action_rate_contribution
from pategail.sdk.contribution import DAYS_CAP, EnvironmentLayout, coarse_contribution, initial_state_contribution
from pategail.sdk.epr import candidate_count, explore_law_contribution, n_rank_bins
from pategail.sdk.places import place_contribution
from pategail.sdk.regions import region_map


def environment_layout(cells: np.ndarray, candidates: int, region_cells: int = 0,
                       action_rates: bool = False) -> EnvironmentLayout:
    """The layout of a cell table (n_cells, 2) and an EPR environment of ``candidates`` nearest cells; with
    ``region_cells`` > 0 (Gaussian runs) the coarse parts over the regions of at most that many cells; with
    ``action_rates`` (the bundle declares it) the action-rate part at the end."""
    n = len(cells)
    n_regions = int(region_map(cells, region_cells).max()) + 1 if region_cells else 0
    return EnvironmentLayout(n, n_rank_bins(candidate_count(n, candidates)), place_law=True, n_regions=n_regions,
                             action_rates=action_rates)


def environment_vector(days: np.ndarray, home: int, cells: np.ndarray, alpha: float, candidates: int,
                       region_cells: int = 0, action_rates: bool = False,
                       initial_states_days_cap: int = DAYS_CAP) -> np.ndarray:
    """float64: the environment vector of a device holding ``days`` with home cell ``home`` (with the
    action-rate part when ``action_rates``); the initial-state part weighted with ``initial_states_days_cap``,
    the rest with ``DAYS_CAP``."""
    n = len(cells)
    initial = initial_state_contribution(days, home, n, initial_states_days_cap)
    places = place_contribution(days, home, n, DAYS_CAP)
    layout = EnvironmentLayout(n, n_rank_bins(candidate_count(n, candidates)), place_law=True,
                               action_rates=action_rates)
    coarse = None
    if region_cells:
        region_of = region_map(cells, region_cells)
        layout = replace(layout, n_regions=int(region_of.max()) + 1)
        coarse = coarse_contribution(initial, places, region_of, layout.n_regions)
    return layout.pack(initial, explore_law_contribution(days, home, cells, alpha=alpha, candidates=candidates),
                       places, coarse, action_rate_contribution(days, home, DAYS_CAP) if action_rates else None)
