"""km mode: per-day statistics and the five metrics against hand-computed values on a 3-day toy set.

The toy cells lie on the equator, where the haversine distance between longitudes a and b is exactly
R·|a − b| (radians), so every distance is known in km by construction.
"""
import math
import time

import numpy as np
import pytest

from pategail.metrics import km
# METRICS.md's mean Earth radius (IUGG), written out: fixtures built from the code's own constant would
# accept any radius
EARTH_RADIUS_KM = 6371.0088
KM_PER_DEG = 111.1950802335329                       # EARTH_RADIUS_KM * pi / 180
LON_KM = [0.0, 0.05, 1.0, 150.0]          # positions along the equator, km east of lon 0
CELLS = np.array([[0.0, x / KM_PER_DEG] for x in LON_KM])
GEN = np.array([[0, 0, 0, 0], [0, 1, 1, 2], [0, 3, 0, 3]])
REAL = np.array([[0, 0, 1, 1], [2, 2, 2, 1], [1, 1, 1, 1]])


def ref_jsd(p, q):
    """Independent version: add 1e-12 to every bin of both, normalise, JSD in nats."""
    p = [x + 1e-12 for x in p]
    q = [x + 1e-12 for x in q]
    p = [x / sum(p) for x in p]
    q = [x / sum(q) for x in q]
    m = [(a + b) / 2 for a, b in zip(p, q)]
    return 0.5 * sum(a * math.log(a / c) for a, c in zip(p, m)) + 0.5 * sum(b * math.log(b / c) for b, c in zip(q, m))


def vec(n, **bins):
    v = [0.0] * n
    for k, c in bins.items():
        v[int(k[1:])] = c
    return v


def log_bin(x_km):
    """Hand formula for the log bins: 1 + floor(40 (log10 x + 1) / 3)."""
    return 1 + math.floor(40 * (math.log10(x_km) + 1) / 3)


def equator_rg(xs_km):
    """Radius of gyration of points on the equator: centre of the unit vectors at angle atan2(Σ sin, Σ cos)."""
    a = np.array(xs_km) / EARTH_RADIUS_KM
    phi = math.atan2(np.sin(a).sum(), np.cos(a).sum())
    return EARTH_RADIUS_KM * math.sqrt(np.mean((a - phi) ** 2))


# --- binning and JSD ------------------------------------------------------------------------------------

def test_bin_index_zero_log_and_overflow():
    values = [0.0, 1e-9, 0.05, 0.0999, 0.1, 1.0, 10.0, 99.99, 100.0, 150.0]
    assert km.km_bin_index(values).tolist() == [0, 1, 1, 1, 1, 14, 27, 40, 41, 41]
    assert [log_bin(x) for x in (0.1, 1.0, 10.0, 99.99)] == [1, 14, 27, 40]
    assert km.km_bins(values).tolist() == vec(42, b0=1, b1=4, b14=1, b27=1, b40=1, b41=2)


def test_jsd_identical_zero_disjoint_ln2():
    assert km.jsd([3, 0, 1], [3, 0, 1]) == 0.0
    assert km.jsd([1, 0], [0, 1]) == pytest.approx(math.log(2), abs=1e-9)
    assert km.jsd([4, 2, 0, 1], [8, 1, 3, 0]) == pytest.approx(ref_jsd([4, 2, 0, 1], [8, 1, 3, 0]), abs=1e-12)


# --- per-day statistics ---------------------------------------------------------------------------------

def test_jump_lengths_km_by_hand():
    jumps = km.jump_lengths_km(GEN, CELLS)
    assert jumps.shape == (3, 3)
    np.testing.assert_allclose(jumps, [[0, 0, 0], [0.05, 0, 0.95], [150, 150, 150]], rtol=1e-9)
    assert (jumps[0] == 0).all() and jumps[1, 1] == 0          # same cell: exactly 0, the zero bin


def test_radius_of_gyration_km_by_hand():
    np.testing.assert_allclose(km.radius_of_gyration_km(GEN, CELLS),
                               [0.0, equator_rg([0, 0.05, 0.05, 1]), 75.0], rtol=1e-9)
    np.testing.assert_allclose(km.radius_of_gyration_km(REAL, CELLS),
                               [0.025, equator_rg([1, 1, 1, 0.05]), 0.0], rtol=1e-9)
    # two points symmetric about the equator: centre on it, each at R·a
    cells = np.array([[0.5, 10.0], [-0.5, 10.0]])
    assert km.radius_of_gyration_km([[0, 1, 0, 1]], cells)[0] == pytest.approx(0.5 * KM_PER_DEG, rel=1e-9)


def test_radius_of_gyration_uses_3d_centre_across_the_antimeridian():
    # lon 179.5 and -179.5 are 1° apart; a centre at the mean longitude (0) would be ~19,950 km away.
    cells = np.array([[0.0, 179.5], [0.0, -179.5]])
    assert km.radius_of_gyration_km([[0, 1, 0, 1]], cells)[0] == pytest.approx(0.5 * KM_PER_DEG, rel=1e-9)


def test_single_cell_day_has_radius_exactly_zero():
    cells = np.array([[39.9075, 116.3972], [40.0, 116.3]])
    assert km.radius_of_gyration_km([[0] * 48, [1] * 48], cells).tolist() == [0.0, 0.0]


def test_distinct_cells_and_rank_shares_pad_with_zero():
    assert km.distinct_cells(GEN).tolist() == [1, 3, 2]
    shares = km.global_rank_shares(GEN)
    assert shares.shape == (100,)
    np.testing.assert_allclose(shares[:5], [7 / 12, 2 / 12, 2 / 12, 1 / 12, 0])
    assert (shares[4:] == 0).all()
    ind = km.individual_rank_shares(GEN)
    assert ind.shape == (3, 20)
    np.testing.assert_allclose(ind[:, :4], [[1, 0, 0, 0], [0.5, 0.25, 0.25, 0], [0.5, 0.5, 0, 0]])
    assert (ind[:, 4:] == 0).all()
    assert km.individual_rank_shares(np.arange(48)[None, :], top=50)[0].tolist() == [1 / 48] * 48 + [0, 0]


# --- the five metrics on the toy set ---------------------------------------------------------------------

def test_distance_by_hand():
    # GEN: 0,0,0 | 0.05, 0, 0.95 | 150 x3 -> zero 4, bin1 1 (0.05 in (0, 0.1)), bin14 1, overflow 3
    # REAL: 0, 0.05, 0 | 0, 0, 0.95 | 0 x3 -> zero 7, bin1 1, bin14 1
    assert log_bin(0.95) == 14
    expected = ref_jsd(vec(42, b0=4, b1=1, b14=1, b41=3), vec(42, b0=7, b1=1, b14=1))
    assert km.distance(GEN, REAL, CELLS) == pytest.approx(expected, abs=1e-12)


def test_radius_by_hand():
    # GEN radii 0 | ~0.419 | 75 ; REAL 0.025 (-> first log bin) | ~0.411 | 0
    g1, r1 = equator_rg([0, 0.05, 0.05, 1]), equator_rg([1, 1, 1, 0.05])
    assert (log_bin(g1), log_bin(r1), log_bin(75.0)) == (9, 9, 39)
    expected = ref_jsd(vec(42, b0=1, b9=1, b39=1), vec(42, b0=1, b1=1, b9=1))
    assert km.radius(GEN, REAL, CELLS) == pytest.approx(expected, abs=1e-12)


def test_dailyloc_by_hand():
    # one bin per integer 1..T (T = 4): GEN 1, 3, 2; REAL 2, 2, 1
    expected = ref_jsd([1, 1, 1, 0], [1, 2, 0, 0])
    assert km.dailyloc(GEN, REAL, CELLS) == pytest.approx(expected, abs=1e-12)


def test_grank_by_hand():
    # rank-aligned top-100 shares: GEN [7, 2, 2, 1]/12, REAL [7, 3, 2]/12, padded with 0
    expected = ref_jsd([7 / 12, 2 / 12, 2 / 12, 1 / 12] + [0] * 96, [7 / 12, 3 / 12, 2 / 12] + [0] * 97)
    assert km.grank(GEN, REAL, CELLS) == pytest.approx(expected, abs=1e-12)


def test_irank_by_hand():
    # mean per-day top-20 shares: GEN [2/3, 1/4, 1/12], REAL [3/4, 1/4]
    expected = ref_jsd([2 / 3, 1 / 4, 1 / 12] + [0] * 17, [3 / 4, 1 / 4] + [0] * 18)
    assert km.irank(GEN, REAL, CELLS) == pytest.approx(expected, abs=1e-12)


def test_grank_renormalises_the_top_100():
    # 200 cells visited equally in both sets, but by different cells: rank-aligned shares are identical.
    a = np.arange(200).reshape(-1, 4)
    assert km.grank(a, a + 200, None) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("name", sorted(km.METRICS))
def test_identical_sets_score_zero(name):
    assert km.METRICS[name](REAL, REAL, CELLS) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("name", sorted(km.METRICS))
def test_fast_on_a_test_set_sized_input(name):
    rng = np.random.default_rng(0)
    cells = np.column_stack([rng.uniform(39, 41, 4210), rng.uniform(115, 117, 4210)])
    a, b = rng.integers(0, 4210, (2350, 48)), rng.integers(0, 4210, (2350, 48))
    t = time.perf_counter()
    value = km.METRICS[name](a, b, cells)
    assert time.perf_counter() - t < 1.0
    # a distance between SETS of days: symmetric, blind to the order of the days, 0 only for equal sets
    assert km.METRICS[name](b, a, cells) == pytest.approx(value, rel=1e-9, abs=1e-15)
    assert km.METRICS[name](a[::-1], b[rng.permutation(len(b))], cells) == pytest.approx(value, rel=1e-9, abs=1e-15)
    assert km.METRICS[name](a, a, cells) == pytest.approx(0.0, abs=1e-12)
