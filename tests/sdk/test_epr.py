import numpy as np
import pytest

from pategail.sdk.epr import (CellGeometry, EPREnvironment, explore_law_contribution, n_rank_bins, nearest_cells,
                              rank_bins, replay)
from pategail.sdk.features import (EXPLORE, HOME, N_STATE_FEATURES, RETURN, STAY, action_mask, infer_home,
                                   label_actions, pair_features, state_features)

# Five cells on a line of longitude, 0.01 degree apart (about 1.1 km each).
LINE = np.array([[40.00, 116.30], [40.01, 116.30], [40.02, 116.30], [40.03, 116.30], [40.04, 116.30]])


def test_labels_hand_worked():
    day = np.array([[0, 0, 1, 2, 1, 0, 3, 3]])
    # 0->0 stay, 0->1 explore, 1->2 explore, 2->1 return, 1->0 home, 0->3 explore, 3->3 stay
    assert label_actions(day, np.array([0])).tolist() == [[STAY, EXPLORE, EXPLORE, RETURN, HOME, EXPLORE, STAY]]
    # with home 1, the move 0->1 is "home" and 2->1 is "home" too; 1->0 is a return to a visited cell
    assert label_actions(day, np.array([1])).tolist() == [[STAY, HOME, EXPLORE, HOME, RETURN, EXPLORE, STAY]]


def test_mask_hand_worked():
    day = np.array([[0, 1, 2, 1]])
    m = action_mask(day, np.array([0]))[0]
    assert m[:, STAY].all() and m[:, EXPLORE].all()
    assert m[:, HOME].tolist() == [False, True, True, True]
    # returnable cells (visited, not home, not here): none, none, {1}, {2}
    assert m[:, RETURN].tolist() == [False, False, True, True]


def test_features_are_causal_and_hand_checked():
    rng = np.random.default_rng(0)
    days = rng.integers(0, 5, size=(6, 12))
    homes = days[:, 0].copy()
    f = state_features(days, homes, LINE)
    assert f.shape == (6, 12, N_STATE_FEATURES) and f.dtype == np.float32
    changed = days.copy()
    changed[:, 7:] = (changed[:, 7:] + 1) % 5
    g = state_features(changed, homes, LINE)
    np.testing.assert_array_equal(f[:, :7], g[:, :7])          # slots before 7 do not see the change
    np.testing.assert_array_equal(state_features(days[:, :7], homes, LINE), f[:, :7])   # a prefix alone too
    day = np.array([[0, 0, 1, 1, 1]])
    h = state_features(day, np.array([0]), LINE)[0]
    assert h[:, 2].tolist() == [1, 1, 0, 0, 0]                   # at home
    np.testing.assert_allclose(h[:, 4] * 48, [1, 2, 1, 2, 3])    # dwell
    np.testing.assert_allclose(h[:, 5] * 48, [1, 1, 2, 2, 2])    # distinct
    # 0.01 deg of latitude in km: 6371.0088 km (IUGG mean radius) * pi / 180 * 0.01
    np.testing.assert_allclose(np.expm1(h[2, 3]), 1.111950802, rtol=1e-6)


def test_pair_features_are_state_plus_one_hot():
    days = np.array([[0, 1, 1, 0]])
    acts = label_actions(days, np.array([0]))
    p = pair_features(days, np.array([0]), acts, LINE)
    assert p.shape == (1, 3, N_STATE_FEATURES + 4)
    np.testing.assert_array_equal(p[0, :, N_STATE_FEATURES:].argmax(1), acts[0])
    np.testing.assert_array_equal(p[0, :, :N_STATE_FEATURES], state_features(days, np.array([0]), LINE)[0, :3])


def test_explore_never_revisits_and_return_only_revisits():
    geo = CellGeometry.build(LINE, candidates=4)
    env = EPREnvironment(geo, alpha=1.0, slots=5, rng=np.random.default_rng(1))
    env.reset(np.zeros(200, dtype=int), np.zeros(200, dtype=int))
    env.step(np.full(200, EXPLORE))
    env.step(np.full(200, EXPLORE))
    d = env.days[:, :3]
    assert (d[:, 1] != d[:, 0]).all() and (d[:, 2] != d[:, 1]).all() and (d[:, 2] != d[:, 0]).all()
    env.step(np.full(200, RETURN))                               # the only returnable cell is l_1
    np.testing.assert_array_equal(env.days[:, 3], d[:, 1])


def test_explore_follows_rank_power_law():
    geo = CellGeometry.build(LINE, candidates=4)
    assert geo.neighbours[0].tolist() == [1, 2, 3, 4]
    env = EPREnvironment(geo, alpha=1.0, slots=2, rng=np.random.default_rng(2))
    n = 40000
    env.reset(np.zeros(n, dtype=int), np.zeros(n, dtype=int))
    env.step(np.full(n, EXPLORE))
    freq = np.bincount(env.days[:, 1], minlength=5)[1:] / n
    expect = 1 / np.arange(1, 5)
    np.testing.assert_allclose(freq, expect / expect.sum(), atol=0.01)


def test_return_is_proportional_to_visits():
    geo = CellGeometry.build(LINE, candidates=4)
    env = EPREnvironment(geo, slots=6, rng=np.random.default_rng(3))
    n = 30000
    env.reset(np.zeros(n, dtype=int), np.full(n, 1))
    for a, c in [(STAY, 1), (STAY, 1), (EXPLORE, None), (EXPLORE, None)]:
        env.step(np.full(n, a), realised=None if c is None else np.full(n, c))
    env.days[:, 3], env.days[:, 4] = 2, 3                       # history 1,1,1,2,3 at slot 4 (home 0)
    env.step(np.full(n, RETURN))
    freq = np.bincount(env.days[:, 5], minlength=5) / n
    np.testing.assert_allclose(freq[[1, 2]], [0.75, 0.25], atol=0.01)   # 3 visits of cell 1, 1 of cell 2
    assert freq[[0, 3, 4]].sum() == 0


def test_impossible_action_and_inconsistent_cell_are_refused():
    geo = CellGeometry.build(LINE, candidates=4)
    env = EPREnvironment(geo, slots=4, rng=np.random.default_rng(0))
    env.reset(np.array([0]), np.array([0]))
    with pytest.raises(ValueError, match="not possible"):
        env.step(np.array([HOME]))                               # already at home
    with pytest.raises(ValueError, match="cannot follow"):
        env.step(np.array([EXPLORE]), realised=np.array([0]))    # explore back to the same cell


def test_replaying_labelled_real_days_reproduces_them(geolife):
    cells, days = geolife
    days = days[:1500]
    homes = np.array([infer_home(d[None]) for d in days])
    actions = label_actions(days, homes)
    mask = action_mask(days, homes)[:, :-1]
    assert np.take_along_axis(mask, actions[..., None].astype(int), 2).all()   # labels are always possible
    out = replay(CellGeometry.build(cells, candidates=50), days, homes, actions, np.random.default_rng(0))
    np.testing.assert_array_equal(out, days)


def test_generation_is_seeded(geolife):
    cells, days = geolife
    geo = CellGeometry.build(cells[:300], candidates=50)

    def run(seed):
        env = EPREnvironment(geo, rng=np.random.default_rng(seed))
        env.reset(np.arange(20), np.arange(20) + 5)
        pick = np.random.default_rng(seed + 100)
        while not env.done:
            m = env.mask()
            env.step(np.array([pick.choice(np.flatnonzero(r)) for r in m]))
        return env.days.copy()

    np.testing.assert_array_equal(run(1), run(1))
    assert (run(1) != run(2)).any()


def test_a_cells_limit_stops_new_cells_and_its_mask_is_the_whole_day_mask(geolife):
    """Agents that explore whenever they may: without a limit their days reach many cells; with one no day
    holds more, the environment refuses an explore (or a first move home) past it, and every slot's mask equals
    ``action_mask`` of the finished day with the same limit."""
    cells, _ = geolife
    geo = CellGeometry.build(cells[:300], candidates=50)

    def run(limit):
        env = EPREnvironment(geo, rng=np.random.default_rng(0), max_cells=limit)
        env.reset(np.arange(30), np.arange(30) + 5)
        masks = []
        while not env.done:
            m = env.mask()
            masks.append(m)
            env.step(np.where(m[:, EXPLORE], EXPLORE, STAY))
        return env, np.stack(masks, 1)

    free, _ = run(None)
    assert min(len(np.unique(d)) for d in free.days) > 10
    env, masks = run(3)
    assert max(len(np.unique(d)) for d in env.days) == 3
    np.testing.assert_array_equal(masks, action_mask(env.days, env.homes, 3)[:, :-1])
    env.reset(np.arange(2), np.array([5, 6]))
    env.step(np.array([EXPLORE, EXPLORE]))
    env.step(np.array([EXPLORE, EXPLORE]))              # 3 cells each: the first and two explored
    with pytest.raises(ValueError, match="not possible"):
        env.step(np.array([STAY, EXPLORE]))
    with pytest.raises(ValueError, match="not possible"):
        env.step(np.array([HOME, STAY]))                # home not seen yet: a fourth cell
    with pytest.raises(ValueError, match="max_cells"):
        EPREnvironment(geo, rng=np.random.default_rng(0), max_cells=0)


# -- the learned explore law --------------------------------------------------------------------------------
def test_rank_bins_double_in_width():
    assert rank_bins(9).tolist() == [0, 1, 2, 2, 3, 3, 3, 3, 4]       # ranks 1, 2, 3-4, 5-8, 9-16
    assert n_rank_bins(9) == 5 and n_rank_bins(8) == 4 and n_rank_bins(1000) == 11
    assert nearest_cells(LINE, np.array([0, 4]), 4).tolist() == [[1, 2, 3, 4], [3, 2, 1, 0]]


def test_explore_factors_reweigh_rank_bins():
    geo = CellGeometry.build(LINE, candidates=4)                       # bins: rank 1 | 2 | 3-4
    env = EPREnvironment(geo, alpha=1.0, explore_factors=np.array([1.0, 1.0, 6.0]), slots=2,
                         rng=np.random.default_rng(2))
    n = 40000
    env.reset(np.zeros(n, dtype=int), np.zeros(n, dtype=int))
    env.step(np.full(n, EXPLORE))
    freq = np.bincount(env.days[:, 1], minlength=5)[1:] / n
    expect = np.array([1, 1 / 2, 6 / 3, 6 / 4])
    np.testing.assert_allclose(freq, expect / expect.sum(), atol=0.01)
    with pytest.raises(ValueError, match="explore_factors"):
        EPREnvironment(geo, explore_factors=np.array([1.0, 0.0, 1.0]), rng=np.random.default_rng(0))


def test_explore_law_contribution_hand_worked():
    # home 4; day 4 -> 2 (explore: rank 2 from cell 4, whose neighbours are 3, 2, 1, 0) -> 0 (explore: from
    # cell 2, ranks of 1 and 3 tie in distance, so use the table: 0 is rank 4) -> 0 ...; alpha = 1, K = 4,
    # bins rank 1 | 2 | 3-4
    ranks_from_2 = nearest_cells(LINE, np.array([2]), 4)[0].tolist()
    day = np.array([[4, 2, 0] + [0] * 45])
    out = explore_law_contribution(day, 4, LINE, alpha=1.0, candidates=4, days_cap=4)
    w = 1 / 4                                                          # one day, cap 4
    rank_of_0 = ranks_from_2.index(0) + 1                              # 3 or 4: bin 2 either way
    np.testing.assert_allclose(out[:3], w * np.array([0, 1, 1]) / 2)
    # move 1 from cell 4, only 4 visited: ranks 1..4 unvisited -> weights 1, 1/2, 1/3 + 1/4
    p1 = np.array([1, 1 / 2, 1 / 3 + 1 / 4]) / (1 + 1 / 2 + 1 / 3 + 1 / 4)
    # move 2 from cell 2, 4 visited: the unvisited ranks are all but the rank of cell 4
    rank_of_4 = ranks_from_2.index(4) + 1
    weights = np.array([1, 1 / 2, 1 / 3, 1 / 4])
    weights[rank_of_4 - 1] = 0
    p2 = np.array([weights[0], weights[1], weights[2] + weights[3]]) / weights.sum()
    assert rank_of_0 in (3, 4)
    np.testing.assert_allclose(out[3:], w * (p1 + p2) / 2)
    assert not explore_law_contribution(np.zeros((3, 48), dtype=int), 0, LINE, candidates=4).any()


def test_one_scaling_step_recovers_a_known_explore_law(geolife):
    """Days made with a known binned law: the factors the devices' summed contributions give are close to
    it (the first step of iterative scaling from the pure power law)."""
    cells, _ = geolife
    cells = cells[:600]
    geo = CellGeometry.build(cells, candidates=64)
    truth = np.array([2.0, 1.6, 1.3, 1.0, 0.8, 0.6, 0.5])              # bins of 64 candidates
    rng = np.random.default_rng(7)
    env = EPREnvironment(geo, alpha=0.96, explore_factors=truth, rng=rng)
    devices, days_each = 40, 20
    homes = np.repeat(rng.integers(0, len(cells), devices), days_each)           # one home per device
    n = devices * days_each
    env.reset(homes, homes)
    while not env.done:
        env.step(np.where(rng.random(n) < 0.3, EXPLORE, STAY))
    total = sum(explore_law_contribution(env.days[u * days_each:(u + 1) * days_each], int(homes[u * days_each]),
                                         cells, alpha=0.96, candidates=64, days_cap=days_each)
                for u in range(devices))
    b = n_rank_bins(64)
    factors = total[:b] / total[b:]
    # one step from the power law undershoots the steepest bin a little; the power law itself is off by 2x
    np.testing.assert_allclose(factors / factors[3], truth, rtol=0.15)


def test_half_angle_tables_give_haversine_bit_for_bit_and_the_same_nearest_cells():
    from pategail.sdk.geo import HalfAngleTable, haversine_km, km_of_haversine

    rng = np.random.default_rng(4)
    # a table with repeated coordinates (as real cell grids have), where the sine tables pay off
    cells = np.column_stack([39.9 + 0.01 * rng.integers(0, 12, 300), 116.3 + 0.01 * rng.integers(0, 15, 300)])
    cells = np.unique(cells, axis=0)
    lat, lon = cells[:, 0], cells[:, 1]
    rows = np.arange(0, len(cells), 3)
    assert HalfAngleTable.worth_it(lat, len(rows) * len(cells))
    cos = np.cos(np.radians(lat))
    got = km_of_haversine(HalfAngleTable(lat).block(rows) + cos[rows, None] * cos[None, :]
                          * HalfAngleTable(lon).block(rows))
    np.testing.assert_array_equal(got, haversine_km(lat[rows, None], lon[rows, None], lat[None, :], lon[None, :]))
    # nearest cells with the tables (all rows) equal those of the direct formula (a few rows: no tables)
    assert not HalfAngleTable.worth_it(lat, 2 * len(cells))
    k = len(cells) - 1                    # every other cell: the whole ranking, ties by id
    np.testing.assert_array_equal(nearest_cells(cells, np.arange(len(cells)), k)[[5, 17]],
                                  nearest_cells(cells, np.array([5, 17]), k))


# -- the neighbour table computed as it is read, not built whole at start-up ---------------------------------
def test_lazy_neighbour_rows_equal_the_whole_table_in_any_order_of_reads(geolife):
    from pategail.sdk.epr import NearestCellRows

    cells = geolife[0][:900]
    whole = nearest_cells(cells, np.arange(len(cells)), 200)
    lazy = NearestCellRows(cells, 200)
    assert lazy.shape == whole.shape and lazy.filled == 0
    ids = np.array([17, 3, 17, 899, -1])                          # repeats, the last row twice (-1)
    np.testing.assert_array_equal(lazy[ids], whole[ids])
    assert lazy.filled == 3                                       # only the rows read, each computed once
    np.testing.assert_array_equal(lazy[np.int64(5), np.array([0, 199])], whole[5, [0, 199]])
    np.testing.assert_array_equal(lazy[np.array([[2, 3], [4, 5]])], whole[np.array([[2, 3], [4, 5]])])
    assert lazy.filled == 6                                       # 5, then 2 and 4 (3 and 5 kept)
    np.testing.assert_array_equal(lazy[:, 0], whole[:, 0])       # any other index: every row first
    assert lazy.filled == len(cells)
    other = NearestCellRows(cells, 200)
    np.testing.assert_array_equal(np.asarray(other), whole)      # np.asarray: the whole table
    assert CellGeometry.build(cells[:10], 50, lazy=True).candidates == 9


def test_the_whole_table_is_computed_once_per_cell_table_and_cannot_be_changed(geolife, monkeypatch):
    """A run builds its geometry several times (coordinator, privacy plan, baselines): the table of a cell table
    already built is the same read-only array; a table whose cells differ in one bit, or another ``candidates``,
    is computed afresh."""
    from pategail.sdk import epr

    calls = []
    compute = epr.nearest_cells
    monkeypatch.setattr(epr, "nearest_cells", lambda *a, **k: calls.append(1) or compute(*a, **k))
    monkeypatch.setattr(epr, "_TABLES", type(epr._TABLES)())
    cells = geolife[0][:300].copy()
    first = CellGeometry.build(cells, 100)
    assert CellGeometry.build(cells.copy(), 100).neighbours is first.neighbours and len(calls) == 1
    np.testing.assert_array_equal(first.neighbours, nearest_cells(cells, np.arange(len(cells)), 100))
    with pytest.raises(ValueError):
        first.neighbours[0, 0] = 1
    moved = cells.copy()
    moved[7, 1] = np.nextafter(moved[7, 1], 180.0)
    assert CellGeometry.build(moved, 100).neighbours is not first.neighbours
    assert CellGeometry.build(cells, 50).neighbours.shape == (len(cells), 50)
    assert len(calls) == 3
    for k in (60, 70):                                            # two more tables push the first out
        CellGeometry.build(cells, k)
    assert CellGeometry.build(cells, 100).neighbours is not first.neighbours


def test_generation_on_lazy_geometry_gives_the_same_days(geolife):
    from pategail.sdk.places import PlaceLaw

    cells, days = geolife
    cells = cells[:1200]
    eager, lazy = CellGeometry.build(cells, 300), CellGeometry.build(cells, 300, lazy=True)
    relevance = np.random.default_rng(5).gamma(0.5, size=len(cells)) + 1e-3
    for places in (None, PlaceLaw(relevance, 0.2)):
        out = []
        for geo in (eager, lazy):
            env = EPREnvironment(geo, rng=np.random.default_rng(9), places=places)
            env.reset(np.arange(60) * 7, np.arange(60) * 11)
            pick = np.random.default_rng(10)
            while not env.done:
                env.step(np.array([pick.choice(np.flatnonzero(r)) for r in env.mask()]))
            out.append(env.days.copy())
        np.testing.assert_array_equal(out[0], out[1])
    assert 0 < lazy.neighbours.filled < len(cells)               # explored from some cells only
