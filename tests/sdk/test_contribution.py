"""The contribution vectors' one layout: what the device packs is what the coordinator unpacks."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.contribution import (EnvironmentLayout, contribution_weight, initial_state_contribution,
                                       reward_count, reward_matrix, reward_vector)


def test_environment_vector_round_trip():
    days = np.array([[2] * 48, [1] + [2] * 47, [3] * 48])
    layout = EnvironmentLayout(n_cells=4, n_bins=2)
    explore = np.array([0.01, 0.02, 0.015, 0.015])
    vector = layout.pack(initial_state_contribution(days, home=2, n_cells=4), explore)
    assert len(vector) == layout.length == 2 * 4 + 2 + 2 * 2
    parts = layout.unpack(vector)
    w = contribution_weight(3)
    np.testing.assert_allclose(parts.homes, [0, 0, w, 0])
    np.testing.assert_allclose(parts.firsts, [0, w / 3, 0, w / 3])
    assert parts.first_at_home == pytest.approx(w / 3) and parts.weight == pytest.approx(w)
    np.testing.assert_array_equal(parts.explore_observed, explore[:2])
    np.testing.assert_array_equal(parts.explore_expected, explore[2:])
    with pytest.raises(ValueError):
        layout.unpack(vector[:-1])
    with pytest.raises(ValueError):
        layout.pack(vector[:10], explore[:3])


def test_reward_vector_layout():
    scores = np.linspace(-0.5, 1.5, reward_count(2))
    vector = reward_vector(scores)
    assert vector.shape == (94,) and vector.min() == 0.0 and vector.max() == 1.0
    matrix = reward_matrix(np.arange(94), 2)
    assert matrix.shape == (2, 47) and matrix[1, 0] == 47           # query j = day j // 47, slot j % 47


def test_coarse_parts_are_the_fine_parts_summed_by_region():
    from pategail.sdk.contribution import coarse_contribution
    days = np.array([[2] * 48, [1] + [2] * 47, [3] * 48])
    initial = initial_state_contribution(days, home=2, n_cells=4)
    places = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7])
    region_of = np.array([1, 0, 1, 0])
    coarse = coarse_contribution(initial, places, region_of, 2)
    w = contribution_weight(3)
    np.testing.assert_allclose(coarse, [[0, w], [w / 3 + w / 3, 0], [0.2 + 0.4, 0.1 + 0.3]])
    layout = EnvironmentLayout(4, 2, place_law=True, n_regions=2)
    vector = layout.pack(initial, np.zeros(4), places, coarse)
    assert len(vector) == layout.length == 2 * 4 + 2 + 4 + 7 + 6
    np.testing.assert_array_equal(layout.unpack(vector).coarse, coarse)
    with pytest.raises(ValueError):
        layout.pack(initial, np.zeros(4), places)                  # a regions layout needs the coarse parts


def _honest_devices(trials: int = 40):
    """A random cell table and ``trials`` devices (days, home) of every kind: 1 to 150 days, one to every
    cell visited, devices that never move, homes they do or do not start their days in."""
    rng = np.random.default_rng(7)
    cells = np.column_stack([39.9 + rng.random(300) * 0.5, 116.3 + rng.random(300) * 0.5])
    n = len(cells)
    devices = []
    for trial in range(trials):
        n_days = int(rng.choice([1, 5, 60, 150]))
        spread = int(rng.choice([1, 3, 30, n]))             # how many cells the device ever visits
        visited = rng.choice(n, spread, replace=False)
        days = visited[rng.integers(0, spread, (n_days, 48))]
        if trial % 3 == 0:
            days[:] = visited[0]                           # a device that never moves
        devices.append((days, int(days[0, 0]) if trial % 2 else int(visited[-1])))
    return cells, devices


def test_no_honest_environment_vector_exceeds_the_accounted_l2_bound():
    """The Gaussian environment release is accounted with L2 sensitivity ENV_L2_BOUND (√12): every part of
    an honest device's vector must keep the L2 norm the bound's derivation gives it (≤ 1 each, the return law's
    three entries ≤ 1 each), whatever its days — a new or changed part that breaks this fails here."""
    from pategail.sdk.environment_vector import environment_vector
    from pategail.sdk.places import place_contribution_length
    from pategail.sdk.regions import REGION_CELLS, region_map
    from pategail.server.privacy.gaussian import ENV_L2_BOUND

    cells, devices = _honest_devices()
    n = len(cells)
    n_regions = int(region_map(cells, REGION_CELLS).max()) + 1
    largest = 0.0
    for days, home in devices:
        v = environment_vector(days, home, cells, alpha=0.96, candidates=50, region_cells=REGION_CELLS)
        b = (len(v) - 2 * n - 2 - place_contribution_length(n) - 3 * n_regions) // 2
        parts = [v[:n], v[n:2 * n + 1], v[2 * n + 1:2 * n + 2], v[2 * n + 2:2 * n + 2 + b],
                 v[2 * n + 2 + b:2 * n + 2 + 2 * b], v[2 * n + 2 + 2 * b:3 * n + 2 + 2 * b]]
        ret = v[3 * n + 2 + 2 * b:3 * n + 5 + 2 * b]
        parts += list(v[3 * n + 5 + 2 * b:].reshape(3, n_regions))
        assert len(parts) == 9 and all(np.linalg.norm(p) <= 1 + 1e-12 for p in parts)
        assert ((ret >= 0) & (ret <= 1)).all() and (v >= 0).all()
        largest = max(largest, float(np.linalg.norm(v)))
    assert largest <= ENV_L2_BOUND
    assert largest > 2.0                                   # the bound is not vacuous for these devices


def test_no_honest_environment_vector_exceeds_the_accounted_l1_bound():
    """The Laplace environment release is accounted as one vector query of L1 sensitivity 2·ENV_L1_BOUND (the
    x and x² halves of the upload): every part of an honest device's vector (the Laplace layout: no regions)
    must keep the L1 norm the bound's derivation gives it (six parts ≤ 1, the return law's three entries ≤ 1
    each), whatever its days — a new or changed part that breaks this fails here; and the device's own L1
    clip leaves honest vectors unchanged and holds a forged one to the bound."""
    from pategail.sdk.accounting import laplace_vector_sensitivity
    from pategail.sdk.contribution import ENV_L1_BOUND
    from pategail.sdk.environment_vector import environment_vector
    from pategail.sdk.places import place_contribution_length
    from pategail.sdk.secagg.mechanisms import laplace_environment_input
    from pategail.sdk.secagg.fixedpoint import SCALE, encode

    cells, devices = _honest_devices()
    n = len(cells)
    largest = 0.0
    for days, home in devices:
        v = environment_vector(days, home, cells, alpha=0.96, candidates=50)
        b = (len(v) - 2 * n - 2 - place_contribution_length(n)) // 2
        parts = [v[:n], v[n:2 * n + 1], v[2 * n + 1:2 * n + 2], v[2 * n + 2:2 * n + 2 + b],
                 v[2 * n + 2 + b:2 * n + 2 + 2 * b], v[2 * n + 2 + 2 * b:3 * n + 2 + 2 * b]]
        ret = v[3 * n + 2 + 2 * b:]
        assert len(ret) == 3 and len(parts) == 6 and all(p.sum() <= 1 + 1e-12 for p in parts)
        assert ((ret >= 0) & (ret <= 1)).all() and (v >= 0).all()
        largest = max(largest, float(v.sum()))
        assert np.array_equal(laplace_environment_input(v), v)          # the clip never touches an honest one
        up = np.concatenate([encode(v), encode(v * v)])                 # what the upload carries, in quanta
        assert np.abs(up).sum() / SCALE <= laplace_vector_sensitivity(ENV_L1_BOUND, len(v))
    assert ENV_L1_BOUND == 9.0 and largest <= ENV_L1_BOUND
    assert largest > 6.0                                   # the bound is not vacuous for these devices
    forged = laplace_environment_input(np.full(len(v), 0.9))
    assert forged.sum() == pytest.approx(ENV_L1_BOUND, rel=1e-12) and forged.max() <= 1
