"""Paper mode: hand-computed oracles on a 3-day toy set, the quirks, and the numbers METRICS.md states."""
import math
from pathlib import Path

import numpy as np
import pytest

from pategail.metrics import paper

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "pategail-geolife"

# (lat, lon) = (X, Y) in degrees; squared degree distances: 0-1: 1, 1-2: 1, 0-2: 2, 0-3: 25.
CELLS = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0], [3.0, 4.0]])
GEN = np.array([[0, 0, 0, 0], [0, 1, 1, 2], [0, 3, 0, 3]])
REAL = np.array([[0, 0, 1, 1], [2, 2, 2, 1], [1, 1, 1, 1]])


def ref_jsd(p, q):
    """Independent, loop-by-loop version of the paper's JSD (renormalise, then scipy.stats.entropy-style KL)."""
    def renorm(v):
        s = sum(v)
        v = [x / (s + 1e-10) + 1e-10 for x in v]
        t = sum(v)
        return [x / t for x in v]
    p, q = renorm(list(p)), renorm(list(q))
    m = [(a + b) / 2 for a, b in zip(p, q)]
    mt = sum(m)
    m = [x / mt for x in m]
    kl = lambda a, b: sum(x * math.log(x / y) for x, y in zip(a, b))  # noqa: E731
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def vec(n, **bins):
    v = [0.0] * n
    for k, c in bins.items():
        v[int(k[1:])] = c
    return v


# --- helpers -----------------------------------------------------------------------------------------

def test_hist_edges_drop_values_beyond_the_last_edge():
    # edges arange(0, 5, 1) = 0..4: four bins, the last closed [3, 4]; 5 and -1 are dropped.
    assert paper.hist([-1, 0, 1, 2, 3, 4, 5], 0, 5, 5).tolist() == [1, 1, 1, 2]
    assert len(paper.hist([], 0, paper.GEOLIFE_UPPER, 1000)) == 999


def test_jsd_matches_reference_and_scipy():
    p, q = [4, 2, 0, 1], [8, 1, 3, 0]
    assert paper.jsd(p, q) == pytest.approx(ref_jsd(p, q), abs=1e-12)
    stats = pytest.importorskip("scipy.stats")
    p1 = np.array(p) / (sum(p) + 1e-10) + 1e-10
    q1 = np.array(q) / (sum(q) + 1e-10) + 1e-10
    m = (p1 + q1) / 2
    assert paper.jsd(p, q) == pytest.approx(0.5 * stats.entropy(p1, m) + 0.5 * stats.entropy(q1, m), abs=1e-12)


def test_jsd_identical_is_zero_and_disjoint_is_ln2():
    assert paper.jsd([3, 1, 0], [3, 1, 0]) == pytest.approx(0.0, abs=1e-15)
    assert paper.jsd([1, 0], [0, 1]) == pytest.approx(math.log(2), abs=1e-8)
    assert paper.jsd([0, 0], [0, 0]) == pytest.approx(0.0, abs=1e-15)   # empty histograms: both uniform


# --- per-day statistics ------------------------------------------------------------------------------

def test_squared_jumps_and_radii_by_hand():
    assert paper.squared_jumps(GEN, CELLS).tolist() == [[0, 0, 0], [1, 0, 1], [25, 25, 25]]
    # day 1: centre (0.25, 0.75); squared distances 0.625, 0.125, 0.125, 0.625 -> 0.375
    # day 2: centre (1.5, 2); each point 2.25 + 4 = 6.25
    np.testing.assert_allclose(paper.squared_radii(GEN, CELLS), [0.0, 0.375, 6.25])
    np.testing.assert_allclose(paper.squared_radii(REAL, CELLS), [0.25, 0.1875, 0.0])


def test_top_shares_and_day_counts_pad_with_zero():
    # GEN visits: cell 0: 7, cell 1: 2, cell 3: 2, cell 2: 1 of 12
    np.testing.assert_allclose(paper.top_shares(GEN, 6), [7 / 12, 2 / 12, 2 / 12, 1 / 12, 0, 0])
    assert paper.day_top_counts(GEN, 4).tolist() == [[4, 0, 0, 0], [2, 1, 1, 0], [2, 2, 0, 0]]


# --- the five metrics on the toy set ----------------------------------------------------------------

def test_distance_by_hand():
    # upper 1000 -> edges arange(0, 1000, 1) = 0..999: 998 bins of width 1 (plus the last, closed one).
    # GEN jumps 0,0,0 | 1,0,1 | 25,25,25 -> bin0 4, bin1 2, bin25 3.   REAL 0,1,0 | 0,0,1 | 0,0,0 -> bin0 7, bin1 2.
    expected = ref_jsd(vec(999, b0=4, b1=2, b25=3), vec(999, b0=7, b1=2))
    assert paper.distance(GEN, REAL, CELLS, upper=1000) == pytest.approx(expected, abs=1e-12)


def test_distance_with_the_geolife_bound():
    # bins 2.10145 squared degrees wide: 0 and 1 share bin 0; 25 is in bin 11 (25 / 2.10145 = 11.9).
    expected = ref_jsd(vec(999, b0=6, b11=3), vec(999, b0=9))
    assert paper.distance(GEN, REAL, CELLS) == pytest.approx(expected, abs=1e-12)


def test_radius_by_hand():
    # upper 1000 (bins of width 1): GEN radii 0, 0.375, 6.25 -> bin0 2, bin6 1;  REAL 0.25, 0.1875, 0 -> bin0 3.
    expected = ref_jsd(vec(999, b0=2, b6=1), vec(999, b0=3))
    assert paper.radius(GEN, REAL, CELLS, upper=1000) == pytest.approx(expected, abs=1e-12)


def test_dailyloc_by_hand():
    # T = 4: GEN distinct 1, 3, 2 -> 12/48, 36/48, 24/48; REAL 2, 2, 1 -> 24/48 twice, 12/48. 47 bins.
    expected = ref_jsd(vec(47, b12=1, b24=1, b36=1), vec(47, b12=1, b24=2))
    assert paper.dailyloc(GEN, REAL, CELLS) == pytest.approx(expected, abs=1e-12)


def test_dailyloc_quirks_on_48_slot_days():
    # bins [k/48, (k+1)/48): 1 distinct cell -> bin 1 (bin 0 is always empty); 46 and 47 share the last,
    # closed bin [46/48, 47/48]; 48 distinct cells are beyond the last edge and dropped.
    days = np.array([[0] * 48, list(range(46)) + [0, 0], list(range(47)) + [0], list(range(48))])
    assert paper.hist(paper.distinct_share(days), 0, 1, 48)[[0, 1, 46]].tolist() == [0, 1, 2]
    assert paper.hist(paper.distinct_share(days), 0, 1, 48).sum() == 3


def test_grank_by_hand():
    # GEN top-50 shares 7/12 (bin 29: [0.58, 0.60)), 2/12 twice (bin 8), 1/12 (bin 4), 46 zeros (bin 0).
    # REAL: 7/12 (bin 29), 3/12 (bin 12), 2/12 (bin 8), 47 zeros. 49 bins.
    expected = ref_jsd(vec(49, b0=46, b4=1, b8=2, b29=1), vec(49, b0=47, b8=1, b12=1, b29=1))
    assert paper.grank(GEN, REAL, CELLS) == pytest.approx(expected, abs=1e-12)


def test_irank_by_hand():
    # per-day top counts / 4: GEN [1], [.5, .25, .25], [.5, .5] -> mean [2/3, 1/4, 1/12]
    # REAL [.5, .5], [.75, .25], [1] -> mean [3/4, 1/4]; both already sum to 1; 20-vectors, no histogram.
    expected = ref_jsd([2 / 3, 1 / 4, 1 / 12] + [0] * 17, [3 / 4, 1 / 4] + [0] * 18)
    assert paper.irank(GEN, REAL, CELLS) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("name", sorted(paper.METRICS))
def test_identical_sets_score_zero(name):
    assert paper.METRICS[name](REAL, REAL, CELLS) == pytest.approx(0.0, abs=1e-12)


# --- the numbers METRICS.md states on pategail-geolife ---------------------------------------------------

@pytest.fixture(scope="module")
def geolife():
    if not (DATA / "test.data").is_file():
        pytest.skip(f"real data not found at {DATA} (the data folder beside the checkout)")
    return (np.loadtxt(DATA / "gps"), np.loadtxt(DATA / "real.data", dtype=int),
            np.loadtxt(DATA / "test.data", dtype=int))


def test_stay_at_first_cell_scores_as_metrics_md_says(geolife):
    # "stay at the first cell all day": each test day's first cell repeated over the 48 slots.
    cells, _, test = geolife
    stay = np.repeat(test[:, :1], test.shape[1], axis=1)
    assert paper.distance(stay, test, cells) == pytest.approx(0.0059, abs=5e-4)
    assert paper.grank(stay, test, cells) == pytest.approx(0.0216, abs=5e-4)


def test_training_days_grank_as_metrics_md_says(geolife):
    cells, train, test = geolife
    assert paper.grank(train, test, cells) == pytest.approx(0.0372, abs=5e-4)
