"""The environment release's spatial post-processing: regions of a cell table, and the two-level estimate of
a histogram from noisy cell and region sums (hand-valued examples)."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.regions import CellTree, region_map, regions
from pategail.server.spatial import two_level_histogram


def test_a_region_that_clears_keeps_its_sum_and_the_rest_is_spread_over_the_others():
    # region 0 = cells 0, 1 (noisy sum 9 > 3σ), region 1 = cells 2, 3 (0.3: hidden by the noise)
    out = two_level_histogram(np.array([10.0, -1.0, 0.5, 0.2]), np.array([9.0, 0.3]), np.array([0, 0, 1, 1]),
                              1.0, 1.0, total=12.0)
    # region 0 gets 9; cell 0 clears 3σ with 10 > 9, so it is scaled to the region's 9 and cell 1 gets 0;
    # the 3 left of the total go evenly to region 1's two cells
    np.testing.assert_allclose(out, [9.0, 0.0, 1.5, 1.5])


def test_cleared_regions_are_scaled_down_to_the_total_and_spread_evenly_or_by_the_noisy_sums_inside():
    fine, coarse, region_of = np.array([1.0, 2.0, 0.0, 1.0]), np.array([30.0, 10.0]), np.array([0, 0, 1, 1])
    out = two_level_histogram(fine, coarse, region_of, 1.0, 1.0, total=20.0)
    np.testing.assert_allclose(out, [7.5, 7.5, 2.5, 2.5])            # no cell clears 3σ: even inside
    # soft thresholding: each region's mass follows its cells' sums less ½σ, (0.5, 1.5) and (0, 0.5)
    np.testing.assert_allclose(two_level_histogram(fine, coarse, region_of, 1.0, 1.0, total=20.0, shrink=0.5),
                               [3.75, 11.25, 0.0, 5.0])
    # with no weight left (shrink far above every sum) the spread falls back to even
    np.testing.assert_allclose(two_level_histogram(fine, coarse, region_of, 1.0, 1.0, total=20.0, shrink=1e9),
                               [7.5, 7.5, 2.5, 2.5])


def test_hidden_regions_share_the_unexplained_mass_by_their_noisy_sums():
    # region 0 clears (9); regions 1 and 2 are hidden with noisy sums 2.5 and 0.2 (σ = 1): the 6 left of the
    # total go to region 1 alone (2.5 − 0.5 against a negative 0.2 − 0.5), then evenly over its cells
    args = np.array([9.0, 0.0, 0.0, 0.0, 0.0]), np.array([9.0, 2.5, 0.2]), np.array([0, 1, 1, 2, 2]), 1.0, 1.0
    np.testing.assert_allclose(two_level_histogram(*args, total=15.0, shrink=0.5), [9.0, 3.0, 3.0, 0.0, 0.0])
    np.testing.assert_allclose(two_level_histogram(*args, total=15.0), [9.0, 1.5, 1.5, 1.5, 1.5])     # even


def test_soft_thresholding_puts_less_mass_on_empty_cells_than_the_even_spread():
    rng = np.random.default_rng(11)
    n, n_regions = 400, 40
    region_of = np.repeat(np.arange(n_regions), n // n_regions)
    true = np.zeros(n)
    true[rng.choice(n, 60, replace=False)] = rng.exponential(2.0, 60)     # sparse homes, mostly below 3σ
    on_empty = {}
    for shrink in (0.5, None):
        empty = []
        for _ in range(20):
            fine = true + rng.normal(0, 1.0, n)
            coarse = np.bincount(region_of, weights=true, minlength=n_regions) + rng.normal(0, 1.0, n_regions)
            out = two_level_histogram(fine, coarse, region_of, 1.0, 1.0, true.sum(), shrink=shrink)
            empty.append(out[true == 0].sum() / out.sum())
        on_empty[shrink] = float(np.mean(empty))
    assert on_empty[0.5] < 0.85 * on_empty[None]


def test_a_region_whose_every_cell_cleared_gets_exactly_its_mass():
    out = two_level_histogram(np.array([5.0, 5.0]), np.array([20.0]), np.array([0, 0]), 1.0, 1.0, total=20.0)
    np.testing.assert_allclose(out, [10.0, 10.0])


def test_nothing_clears_gives_the_uniform_histogram_and_a_non_positive_total_gives_zero():
    region_of = np.array([0, 0, 1])
    np.testing.assert_allclose(two_level_histogram(np.zeros(3), np.zeros(2), region_of, 1.0, 1.0, 6.0), [2, 2, 2])
    np.testing.assert_array_equal(two_level_histogram(np.ones(3), np.ones(2), region_of, 1.0, 1.0, -1.0), 0)


def test_without_noise_the_histogram_is_exact():
    true = np.array([3.0, 0.0, 1.0, 0.0, 2.0])
    region_of = np.array([0, 0, 1, 1, 2])
    out = two_level_histogram(true, np.bincount(region_of, weights=true), region_of, 0.0, 0.0, true.sum())
    np.testing.assert_allclose(out, true)


def test_the_estimate_is_a_histogram_of_the_given_total_under_any_noise():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        n_regions = int(rng.integers(1, n + 1))
        region_of = np.concatenate([np.arange(n_regions), rng.integers(0, n_regions, n - n_regions)])
        true = rng.exponential(5, n) * (rng.random(n) < 0.3)
        s = float(rng.choice([0.5, 3.0]))
        fine = true + rng.normal(0, s, n)
        coarse = np.bincount(region_of, weights=true, minlength=n_regions) + rng.normal(0, s, n_regions)
        total = true.sum() + rng.normal(0, s)
        out = two_level_histogram(fine, coarse, region_of, s, s, total)
        assert (out >= 0).all() and out.sum() == pytest.approx(max(total, 0.0))


def test_regions_partition_the_table_by_quadrants_of_at_most_max_cells():
    # a dense cluster of 4 cells in the south-west and 2 lone cells far away (km-square box)
    lat = np.array([0.0, 0.01, 0.0, 0.01, 1.0, 0.9])
    lon = np.array([0.0, 0.0, 0.01, 0.01, 1.0, 0.1])
    tree = CellTree.from_coordinates(lat, lon)
    assert sorted(np.concatenate([tree.cells[k] for k in tree.children[0]]).tolist()) == list(range(6))
    one = regions(tree, 6)
    assert (one == 0).all()
    two = regions(tree, 4)
    # the 4 clustered cells share one region; each lone cell is in its own quadrant
    assert len(set(two[:4])) == 1 and len(set(two)) == 3
    singles = regions(tree, 1)
    assert sorted(singles.tolist()) == list(range(6))
    np.testing.assert_array_equal(region_map(np.column_stack([lat, lon]), 4), two)
    with pytest.raises(ValueError):
        regions(tree, 0)


def test_cells_at_one_point_stay_one_leaf():
    tree = CellTree.from_coordinates(np.array([1.0, 1.0, 1.0]), np.array([2.0, 2.0, 2.0]))
    assert tree.children[0] == () and (regions(tree, 1) == 0).all()
