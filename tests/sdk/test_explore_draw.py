"""The explore draw from kept cumulative weights minus the visited ones: the same index as the masked
cumulative sum (np.cumsum of the weights with the skipped ones zeroed), and the same days for a seed."""
import copy

import numpy as np
import pytest

from pategail.sdk import epr, explore_draw
from pategail.sdk.epr import CellGeometry, EPREnvironment, explore_rank_weights
from pategail.sdk.explore_draw import masked_inverse_cdf
from pategail.sdk.features import EXPLORE, RETURN, STAY
from pategail.sdk.places import PlaceLaw


def _reference_index(weights, skip, r):
    """What the environment did before: zero the skipped weights, cumulative sum, first entry above r × total."""
    w = weights.copy()
    k = w.shape[1]
    for i, row in enumerate(skip):
        w[i, row[row < k]] = 0.0
    cdf = np.cumsum(w, axis=1)
    return np.minimum((cdf <= (r * cdf[:, -1])[:, None]).sum(1), k - 1)


def test_the_index_equals_the_masked_cumulative_sum_on_random_laws():
    rng = np.random.default_rng(3)
    k, m = 200, 3000
    weights = rng.pareto(1.0, size=(50, k)) + 1e-6            # heavy-tailed, as relevance × rank law
    cum = np.cumsum(weights, axis=1)
    rows = rng.integers(0, 50, m)
    # up to 40 skipped entries a draw, some draws with most of the weight skipped (the first columns)
    skip = np.full((m, 40), k)
    for i in range(m):
        n = rng.integers(0, 41)
        pool = np.arange(min(k, 60)) if i % 3 == 0 else np.arange(k)
        skip[i, :n] = np.sort(rng.choice(pool, size=min(n, len(pool)), replace=False))
    r = rng.random(m)
    index, sure = masked_inverse_cdf(cum, rows, skip, r)
    expect = _reference_index(weights[rows], skip, r)
    assert sure.mean() > 0.999
    np.testing.assert_array_equal(index[sure], expect[sure])
    assert not (skip[sure] == index[sure][:, None]).any()                  # never a skipped entry


def test_a_draw_on_a_boundary_is_not_trusted():
    """u exactly at a CDF step: float sums of another order may fall either side, so the caller must redo it."""
    weights = np.array([[1.0, 2.0, 3.0, 4.0]])
    cum = np.cumsum(weights, axis=1)
    skip = np.array([[1, 4]])                                   # masked weights 1, 0, 3, 4: total 8
    index, sure = masked_inverse_cdf(cum, np.array([0]), skip, np.array([4.0 / 8]))   # u = 4 = cdf[2]
    assert not sure[0]
    index, sure = masked_inverse_cdf(cum, np.array([0]), skip, np.array([0.3]))       # u = 2.4: entry 2
    assert sure[0] and index[0] == 2
    index, sure = masked_inverse_cdf(cum, np.array([0]), skip, np.array([0.1]))       # u = 0.8: entry 0
    assert sure[0] and index[0] == 0
    index, sure = masked_inverse_cdf(cum, np.array([0]), np.array([[0, 1]]), np.array([0.01]))  # 0, 0, 3, 4
    assert sure[0] and index[0] == 2


def _explore_days(geo, places, alpha=0.9, slots=20, n=400, seed=5):
    rng = np.random.default_rng(11)
    env = EPREnvironment(geo, alpha=alpha, slots=slots, rng=np.random.default_rng(seed), places=places)
    env.reset(rng.integers(0, len(geo.cells), n), rng.integers(0, len(geo.cells), n))
    actions = rng.choice([STAY, EXPLORE, RETURN], size=(n, slots - 1), p=[0.2, 0.7, 0.1])
    draws = []
    for t in range(slots - 1):
        state = copy.deepcopy(env.rng.bit_generator.state)
        hist = env.history().copy()
        a = np.where(env.mask()[np.arange(n), actions[:, t]], actions[:, t], STAY)
        got = env.step(a)
        draws.append((state, hist, a, got))
    return env.days.copy(), draws


@pytest.mark.parametrize("with_places", [True, False])
def test_explore_moves_equal_the_reference_draw_including_surrounded_agents(with_places):
    """Mostly-explore days of 20 slots over 6 candidates: every explore destination equals the masked
    cumulative sum's draw from the same random numbers, and some agents have seen all their candidates."""
    rng = np.random.default_rng(8)
    cells = np.column_stack([40 + 0.2 * rng.random(60), 116.3 + 0.2 * rng.random(60)])
    geo = CellGeometry.build(cells, candidates=6)
    places = PlaceLaw(rng.uniform(0.5, 5.0, 60)) if with_places else None
    rank_weight = explore_rank_weights(6, 0.9)
    _, draws = _explore_days(geo, places)
    surrounded = 0
    for state, hist, a, got in draws:
        ref_rng = np.random.default_rng()
        ref_rng.bit_generator.state = state
        ret = np.flatnonzero(a == RETURN)
        if len(ret):
            ref_rng.random(len(ret))                                     # the return draw comes first
        exp = np.flatnonzero(a == EXPLORE)
        cand = geo.neighbours[hist[exp, -1]]
        base = rank_weight[None, :] * (places.relevance[cand] if with_places else 1.0)
        weights = np.where((cand[:, :, None] == hist[exp][:, None, :]).any(2), 0.0, base)
        cdf = np.cumsum(weights, axis=1)
        full = cdf[:, -1] == 0
        surrounded += int(full.sum())
        u = ref_rng.random(int((~full).sum())) * cdf[~full, -1]
        expect = cand[~full][np.arange(len(u)), np.minimum((cdf[~full] <= u[:, None]).sum(1), 5)]
        np.testing.assert_array_equal(got[exp][~full], expect)
        assert not (got[exp][full, None] == hist[exp][full]).any()      # the nearest unvisited cell
    assert surrounded > 0


def test_the_long_way_gives_the_same_days(monkeypatch):
    """Every draw redone by the masked cumulative sum (guard 1: nothing trusted), or no rank table (large
    cell tables): the same days for the same seed."""
    rng = np.random.default_rng(2)
    cells = np.column_stack([40 + 0.2 * rng.random(80), 116.3 + 0.2 * rng.random(80)])
    places = PlaceLaw(rng.uniform(0.5, 5.0, 80), 0.3)
    fast, _ = _explore_days(CellGeometry.build(cells, candidates=20), places)
    monkeypatch.setattr(explore_draw, "GUARD", 1.0)
    redone, _ = _explore_days(CellGeometry.build(cells, candidates=20), places)
    monkeypatch.undo()
    monkeypatch.setattr(epr, "RANK_TABLE_MAX", 10)
    geo = CellGeometry.build(cells, candidates=20)
    assert not geo.explore_law(explore_rank_weights(20, 0.9), places).fast
    no_ranks, _ = _explore_days(geo, places)
    np.testing.assert_array_equal(fast, redone)
    np.testing.assert_array_equal(fast, no_ranks)


def test_ranks_are_the_columns_of_the_neighbour_table():
    rng = np.random.default_rng(4)
    cells = np.column_stack([40 + 0.2 * rng.random(30), 116.3 + 0.2 * rng.random(30)])
    geo = CellGeometry.build(cells, candidates=8)
    law = geo.explore_law(explore_rank_weights(8, 0.9), None)
    origins = np.array([3, 3, 17])
    ranks = law.ranks(origins, np.arange(30)[None, :].repeat(3, 0))
    for i, o in enumerate(origins):
        expect = np.full(30, 8)
        expect[geo.neighbours[o]] = np.arange(8)
        np.testing.assert_array_equal(ranks[i], expect)
    rows = law.cumulative_rows(origins)
    np.testing.assert_array_equal(law.cumulative[rows], np.cumsum(law.rows(origins), axis=1))


def test_the_kept_rows_take_memory_for_the_cells_explored_from_only():
    """Ranks and cumulative weights are stored densely for the cells asked for (a whole n × n table filled at
    scattered rows becomes resident in huge pages); rows stay right when the store grows and moves."""
    rng = np.random.default_rng(5)
    cells = np.column_stack([40 + 0.2 * rng.random(300), 116.3 + 0.2 * rng.random(300)])
    geo = CellGeometry.build(cells, candidates=20)
    law = geo.explore_law(explore_rank_weights(20, 0.9), PlaceLaw(rng.uniform(0.5, 5.0, 300), 0.3))
    first = np.array([7, 3, 7])
    ranks = law.ranks(first, geo.neighbours[first][:, :2])
    assert law._rank.count == 2 and law._rank.data.shape[0] < 300
    np.testing.assert_array_equal(ranks, [[0, 1]] * 3)
    many = rng.permutation(300)[:100]                   # the store doubles several times
    kept = law.cumulative_rows(many)
    np.testing.assert_array_equal(law.cumulative[kept], np.cumsum(law.rows(many), axis=1))
    np.testing.assert_array_equal(law.ranks(many, geo.neighbours[many][:, 5:6]), np.full((100, 1), 5))
    assert law._rank.count == len(np.union1d(first, many))
