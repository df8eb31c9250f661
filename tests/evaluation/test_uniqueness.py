"""Uniqueness: the highest overlap rate of each real day with a synthetic day, by hand on tiny days."""
import numpy as np
import pytest

from pategail.attacks.uniqueness import max_equal_slots, max_overlap_rate, summarise, uniqueness


def test_overlap_by_hand():
    real = np.array([[0, 1, 2, 3], [4, 4, 4, 4], [0, 0, 0, 0]])
    synthetic = np.array([[0, 1, 9, 9],      # shares 2 slots with real day 0
                          [0, 1, 2, 9],      # shares 3 with day 0, 1 with day 2
                          [4, 4, 0, 0]])     # shares 2 with day 1, 2 with day 2
    assert max_equal_slots(real, synthetic, n_cells=10).tolist() == [3, 2, 2]
    assert max_overlap_rate(real, synthetic, 10) == pytest.approx([0.75, 0.5, 0.5])


def test_same_cell_at_another_slot_does_not_count():
    assert max_equal_slots(np.array([[1, 2, 3]]), np.array([[2, 3, 1]]), 4).tolist() == [0]


def test_chunks_give_the_same_answer():
    rng = np.random.default_rng(0)
    real, synthetic = rng.integers(0, 3, (50, 6)), rng.integers(0, 3, (20, 6))
    assert np.array_equal(max_equal_slots(real, synthetic, 3, chunk=7), max_equal_slots(real, synthetic, 3))
    brute = (real[:, None, :] == synthetic[None]).sum(-1).max(1)
    assert np.array_equal(max_equal_slots(real, synthetic, 3), brute)


def test_summary_by_hand():
    s = summarise(np.array([4, 4, 3, 0]), n_slots=4, threshold=0.9)
    assert s["days"] == 4 and s["mean"] == pytest.approx(11 / 16) and s["median"] == pytest.approx(0.875)
    assert s["share_reproduced"] == 0.5 and s["histogram"] == [1, 0, 0, 1, 2]


def test_planted_leak_reproduces_members_and_not_others():
    rng = np.random.default_rng(1)
    members, others = rng.integers(0, 500, (40, 48)), rng.integers(0, 500, (40, 48))
    res = uniqueness({"members": members, "nonmembers": others}, synthetic=members.copy(), n_cells=500)
    assert res["members"]["share_reproduced"] == 1.0 and res["members"]["mean"] == 1.0
    assert res["nonmembers"]["share_reproduced"] == 0.0 and res["nonmembers"]["mean"] < 0.2
