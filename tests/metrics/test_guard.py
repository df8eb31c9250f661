"""The invented-mode guard: distinct cells a day, the real threshold, the share above it."""
import numpy as np
import pytest

from pategail.metrics.guard import (GUARD_LIMIT, distinct_cells, distinct_cells_threshold, guard_line,
                                    invented_mode)


def test_distinct_cells_hand_worked():
    days = np.array([[5, 5, 5, 5], [1, 2, 1, 3], [9, 8, 7, 6]])
    np.testing.assert_array_equal(distinct_cells(days), [1, 3, 4])


def test_threshold_is_the_real_percentile():
    real = np.array([[c] * 3 + [0] for c in range(1, 4)] * 10)          # 2 distinct cells each (c and 0)
    real[0] = [1, 2, 3, 4]                                               # one day with 4
    assert distinct_cells_threshold(real, 50) == 2
    assert distinct_cells_threshold(real, 100) == 4


def test_a_mode_real_days_lack_is_flagged_and_real_like_days_are_not():
    rng = np.random.default_rng(0)
    real = rng.integers(0, 3, size=(2000, 48))                          # at most 3 distinct cells
    like_real = rng.integers(0, 3, size=(500, 48))
    explorer = np.tile(np.arange(48), (500, 1))                         # a new cell every slot
    ok = invented_mode(like_real, real)
    assert ok.threshold == 3 and ok.share == 0 and not ok.flagged
    mixed = np.concatenate([like_real, explorer[:20]])                  # 20 of 520 = 3.8%
    bad = invented_mode(mixed, real)
    assert bad.share == pytest.approx(20 / 520) and bad.flagged and bad.share > GUARD_LIMIT
    assert "INVENTED MODE" in bad.message() and "3.8%" in bad.message()
    assert "ok" in guard_line(ok.to_dict())
