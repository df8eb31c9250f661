"""The place law (d-EPR): the device contribution by hand, the environment's explore and return laws, the
coordinator's estimate from the sums, and the classic model untouched without a place law."""
import numpy as np
import pytest

from pategail.sdk.epr import CellGeometry, EPREnvironment
from pategail.sdk.features import EXPLORE, RETURN, STAY
from pategail.sdk.places import PlaceLaw, place_contribution, place_just_left, return_statistics
from pategail.server.places import place_law_from_noisy_sums, tempered

LINE = np.array([[40.00, 116.30], [40.01, 116.30], [40.02, 116.30], [40.03, 116.30], [40.04, 116.30]])


def test_place_just_left_by_hand():
    day = np.array([[0, 0, 1, 1, 2, 1, 1, 0]])
    assert place_just_left(day).tolist() == [[-1, -1, 0, 0, 1, 2, 2, 1]]


def test_return_statistics_by_hand():
    # home 0. moves: 0→1 explore, 1→2 explore, 2→1 return (left 1? no: left of slot 2 is 1 → went back: yes),
    # 1→3 explore, 3→2 return (left = 1; went to 2: no)
    day = np.array([[0, 1, 2, 1, 3, 2]])
    n, went, expected = return_statistics(day, np.array([0]))
    assert n == 2 and went == 0.5
    # visits-proportional chance of the place just left: slot 2 → {1} only: 1; slot 4 → {1, 1, 2}: 2/3
    assert expected == pytest.approx((1 + 2 / 3) / 2)
    # a place just left that is home is not a return destination: no eligible move
    assert return_statistics(np.array([[1, 0, 2, 1]]), np.array([0]))[0] == 0      # 2→1 with home just left


def test_place_contribution_layout():
    days = np.array([[0, 1, 2, 1, 3, 2], [0, 0, 0, 0, 0, 0]])
    out = place_contribution(days, 0, 5, days_cap=4)                        # w = 2 / 4
    np.testing.assert_allclose(out[:5], 0.5 * np.array([7, 2, 2, 1, 0]) / 12)
    np.testing.assert_allclose(out[5:], 0.5 * np.array([0.5, (1 + 2 / 3) / 2, 1.0]))
    assert (out >= 0).all() and (out <= 1).all()
    assert out[:5].sum() == pytest.approx(0.5)
    assert not place_contribution(days[1:], 0, 5, days_cap=4)[5:].any()     # no return move: 0, 0, 0
    with pytest.raises(ValueError):
        place_contribution(days, 5, 5, days_cap=4)


def test_place_law_from_the_sums_by_hand():
    sums = np.array([3.0, -1.0, 0.0, 1.0, 0.5, 0.25, 1.0])                 # 4 cells, then F, V, W
    law = place_law_from_noisy_sums(sums, 4)
    np.testing.assert_allclose(law.relevance, np.array([3.0, 0.0, 0.0, 1.0]) + 1.0)   # prior 1 × mean 1
    assert law.return_last == pytest.approx((0.5 - 0.25) / (1.0 - 0.25))
    # under noise: the prior scales with the noise, and a total weight W below 10 noise std gives q = 0
    noisy = place_law_from_noisy_sums(sums, 4, noise_std=2.0)
    np.testing.assert_allclose(noisy.relevance, np.array([3.0, 0.0, 0.0, 1.0]) + 2.0)
    assert noisy.return_last == 0.0
    with pytest.raises(ValueError):
        place_law_from_noisy_sums(sums[:-1], 4)
    with pytest.raises(ValueError):
        PlaceLaw(np.array([1.0, 0.0]))                                      # every cell must stay reachable


def test_a_tempered_place_law_flattens_the_attraction_and_keeps_the_return_law():
    law = PlaceLaw(np.array([16.0, 4.0, 1.0]), return_last=0.3)
    assert tempered(law, 1.0) is law
    half = tempered(law, 0.5)
    np.testing.assert_allclose(half.relevance, [4.0, 2.0, 1.0])
    assert half.return_last == 0.3
    np.testing.assert_array_equal(tempered(law, 0.0).relevance, np.ones(3))     # every cell equally relevant
    with pytest.raises(ValueError):
        tempered(law, 1.5)


def test_explore_is_proportional_to_relevance_times_the_rank_law():
    geo = CellGeometry.build(LINE, candidates=4)
    relevance = np.array([1.0, 1.0, 6.0, 1.0, 3.0])
    env = EPREnvironment(geo, alpha=1.0, slots=2, rng=np.random.default_rng(2), places=PlaceLaw(relevance))
    n = 40000
    env.reset(np.zeros(n, dtype=int), np.zeros(n, dtype=int))
    env.step(np.full(n, EXPLORE))
    freq = np.bincount(env.days[:, 1], minlength=5)[1:] / n
    expect = relevance[1:] / np.arange(1, 5)                                # cells 1..4 are ranks 1..4 from 0
    np.testing.assert_allclose(freq, expect / expect.sum(), atol=0.01)


def test_return_law_favours_the_place_just_left():
    geo = CellGeometry.build(LINE, candidates=4)
    n = 30000

    def returns(return_last):
        env = EPREnvironment(geo, slots=7, rng=np.random.default_rng(3),
                             places=PlaceLaw(np.ones(5), return_last))
        env.reset(np.zeros(n, dtype=int), np.full(n, 1))
        for a, c in [(STAY, 1), (STAY, 1), (EXPLORE, 2), (EXPLORE, 3)]:     # history 1 1 1 2 3: left = 2
            env.step(np.full(n, a), realised=np.full(n, c))
        env.step(np.full(n, RETURN))
        return np.bincount(env.days[:, 5], minlength=5) / n

    np.testing.assert_allclose(returns(0.0)[[1, 2]], [0.75, 0.25], atol=0.01)          # ∝ visits: 3 vs 1
    np.testing.assert_allclose(returns(0.6)[[1, 2]], [0.4 * 0.75, 0.6 + 0.4 * 0.25], atol=0.01)
    np.testing.assert_allclose(returns(1.0)[[1, 2]], [0.0, 1.0], atol=0)


def test_without_a_place_law_the_classic_model_is_unchanged():
    """places=None and a place law with uniform relevance and return_last 0 draw the same days (the same
    random numbers, the same weights up to a constant factor)."""
    cells = np.column_stack([40 + 0.01 * np.arange(40) % 0.1, 116.3 + 0.01 * (np.arange(40) // 10)])
    geo = CellGeometry.build(cells, candidates=12)
    rng_actions = np.random.default_rng(0)
    actions = rng_actions.choice([STAY, EXPLORE, RETURN], size=(500, 9), p=[0.5, 0.3, 0.2])

    def run(places):
        env = EPREnvironment(geo, slots=10, rng=np.random.default_rng(4), places=places)
        env.reset(np.zeros(500, dtype=int), np.zeros(500, dtype=int))
        for t in range(9):
            a = np.where(env.mask()[np.arange(500), actions[:, t]], actions[:, t], STAY)
            env.step(a)
        return env.days.copy()

    np.testing.assert_array_equal(run(None), run(PlaceLaw(np.full(40, 2.0), 0.0)))
    assert not np.array_equal(run(None), run(PlaceLaw(np.linspace(1, 50, 40), 0.0)))


def test_the_bundle_environment_carries_the_place_law(tmp_path):
    from pategail.sdk.bundle import BundleError, Environment

    law = PlaceLaw(np.array([0.5, 2.0, 1.0, 1.0, 3.0]), 0.15)
    section = Environment(LINE, 0.96, 4, places=law).write(tmp_path)
    assert section["relevance"] == "relevance.csv" and section["return_last"] == 0.15
    back = Environment.read(tmp_path, section)
    np.testing.assert_array_equal(back.places.relevance, law.relevance)
    assert back.places.return_last == 0.15
    assert Environment.read(tmp_path, {k: v for k, v in section.items() if k != "relevance"}).places is None
    (tmp_path / "relevance.csv").write_text("cell,relevance\n0,1.0\n1,-2.0\n2,1\n3,1\n4,1\n")
    with pytest.raises(BundleError, match="invalid place law"):
        Environment.read(tmp_path, section)


def test_explore_draws_equal_the_reference_computation_with_the_kept_weights():
    """The explore weights a geometry keeps per cell (computed once, shared by the environments built on it)
    give the same draws, bit for bit, as forming relevance × rank law afresh for every move."""
    import copy

    from pategail.sdk.epr import explore_rank_weights

    rng = np.random.default_rng(8)
    cells = np.column_stack([40 + 0.2 * rng.random(60), 116.3 + 0.2 * rng.random(60)])
    geo = CellGeometry.build(cells, candidates=15)
    places = PlaceLaw(rng.uniform(0.5, 5.0, 60))
    rank_weight = explore_rank_weights(15, 0.9)
    law = geo.explore_law(rank_weight, places)
    assert geo.explore_law(explore_rank_weights(15, 0.9), places) is law          # kept for the next batch
    np.testing.assert_array_equal(law.rows(np.array([3, 3, 7])),
                                  rank_weight[None, :] * places.relevance[geo.neighbours[[3, 3, 7]]])

    n = 400
    env = EPREnvironment(geo, alpha=0.9, slots=12, rng=np.random.default_rng(5), places=places)
    env.reset(rng.integers(0, 60, n), rng.integers(0, 60, n))
    for _ in range(10):
        state = copy.deepcopy(env.rng.bit_generator.state)
        hist = env.history().copy()
        got = env.step(np.full(n, EXPLORE))
        # the reference: weights formed afresh, visited cells zeroed, inverse CDF on one uniform per agent
        ref_rng = np.random.default_rng()
        ref_rng.bit_generator.state = state
        cand = geo.neighbours[hist[:, -1]]
        weights = np.where((cand[:, :, None] == hist[:, None, :]).any(2), 0.0,
                           rank_weight[None, :] * places.relevance[cand])
        cdf = np.cumsum(weights, axis=1)
        u = ref_rng.random(n) * cdf[:, -1]
        expect = cand[np.arange(n), np.minimum((cdf <= u[:, None]).sum(1), 14)]
        assert (cdf[:, -1] > 0).all()                                  # 15 candidates, 11 slots: never full
        np.testing.assert_array_equal(got, expect)
