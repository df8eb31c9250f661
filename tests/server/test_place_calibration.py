"""The place law's rank law re-calibrated under relevance (pategail.server.places.rank_calibrated_factors):
checked against the environment's own explore weights, not against the function's formula."""
import numpy as np
import pytest

from pategail.sdk.epr import CellGeometry, explore_rank_weights, n_rank_bins, rank_bins
from pategail.sdk.places import PlaceLaw
from pategail.server.places import rank_calibrated_factors

K = 200


@pytest.fixture(scope="module")
def city(dataset):
    """The embedded data's cells, the relevance the place law would take from its days (visits plus the
    mean: busy cells, which move explore jumps between the rank bins) and origins at the days' first cells."""
    geometry = CellGeometry.build(dataset.cells, candidates=K)
    visits = np.bincount(dataset.train_days.ravel(), minlength=dataset.n_cells).astype(np.float64)
    relevance = visits + visits.mean()
    origins = np.bincount(dataset.train_days[:, 0], minlength=dataset.n_cells).astype(np.float64)
    factors = np.linspace(0.6, 1.8, n_rank_bins(K))
    return geometry, relevance, origins, factors


def bin_shares(geometry, factors, relevance, origins, alpha=0.8):
    """The explore law's share of each rank bin, averaged over the origins: from the environment's weights."""
    law = geometry.explore_law(explore_rank_weights(geometry.candidates, alpha, factors),
                               None if relevance is None else PlaceLaw(relevance))
    cells = np.flatnonzero(origins)
    rows = law.rows(cells)
    per_bin = rows @ np.eye(n_rank_bins(geometry.candidates))[rank_bins(geometry.candidates)]
    return (origins[cells] / origins[cells].sum()) @ (per_bin / per_bin.sum(1, keepdims=True))


def test_the_place_law_lands_in_the_rank_bins_of_the_classic_law(city):
    geometry, relevance, origins, factors = city
    classic = bin_shares(geometry, factors, None, origins)
    uncalibrated = bin_shares(geometry, factors, relevance, origins)
    assert np.abs(uncalibrated - classic).max() > 0.02            # relevance alone moves the jumps
    calibrated = rank_calibrated_factors(geometry.neighbours, 0.8, factors, relevance, origins)
    np.testing.assert_allclose(bin_shares(geometry, calibrated, relevance, origins), classic, atol=1e-8)
    assert (calibrated > 0).all() and np.exp(np.log(calibrated / factors).mean()) == pytest.approx(1.0)


def test_uniform_relevance_or_no_origin_leaves_the_factors(city):
    geometry, _, origins, factors = city
    same = rank_calibrated_factors(geometry.neighbours, 0.8, factors, np.full(len(origins), 3.0), origins)
    np.testing.assert_allclose(same, factors, rtol=1e-12)
    relevance = city[1]
    np.testing.assert_array_equal(rank_calibrated_factors(geometry.neighbours, 0.8, factors, relevance,
                                                          np.zeros(len(origins))), factors)


def test_a_lazy_neighbour_table_gives_the_same_factors(city, dataset):
    geometry, relevance, origins, factors = city
    lazy = CellGeometry.build(dataset.cells, candidates=K, lazy=True)
    np.testing.assert_allclose(rank_calibrated_factors(lazy.neighbours, 0.8, factors, relevance, origins),
                               rank_calibrated_factors(geometry.neighbours, 0.8, factors, relevance, origins),
                               rtol=1e-12)
