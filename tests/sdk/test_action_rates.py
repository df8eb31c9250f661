"""The action-rate part of the environment vector (pategail.sdk.action_rates): values by hand, its place in the
layout, the L1 bound it adds, and that a layout without it is the vector as before."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.action_rates import (RATE_SHAPE, action_rate_contribution, action_rate_length, count_bucket,
                                       decision_counts, distinct_so_far)
from pategail.sdk.contribution import ENV_L1_BOUND, EnvironmentLayout, env_l1_bound
from pategail.sdk.features import EXPLORE, HOME, RETURN, STAY

from tests.sdk.test_contribution import _honest_devices


def test_the_table_shape_and_buckets():
    assert RATE_SHAPE == (8, 2, 5, 4) and action_rate_length() == 320
    assert count_bucket(np.array([1, 2, 3, 4, 5, 9, 48])).tolist() == [0, 1, 2, 3, 4, 4, 4]
    assert distinct_so_far(np.array([[5, 5, 7, 5, 8, 7]])).tolist() == [[1, 1, 2, 2, 3, 3]]


def test_one_device_by_hand():
    # home 0; day 1: home until slot 9, cell 1 (explore) from 10, back home (home) at 20, cell 2 (explore) at
    # 40, cell 1 (return) at 44; day 2: never moves. 94 decisions.
    d1 = np.zeros(48, dtype=np.int64)
    d1[10:20], d1[40:44], d1[44:] = 1, 2, 1
    days = np.stack([d1, np.zeros(48, dtype=np.int64)])
    counts = decision_counts(days, np.array([0, 0]))
    assert counts.sum() == 94
    # the moves: decision t is the move from slot t to t + 1 (slot bucket t // 6, at home at t, distinct at t)
    assert counts[1, 1, 0, EXPLORE] == 1                    # t = 9, at home, 1 cell so far
    assert counts[3, 0, 1, HOME] == 1                       # t = 19, away, 2 cells
    assert counts[6, 1, 1, EXPLORE] == 1                    # t = 39, at home, 2 cells
    assert counts[7, 0, 2, RETURN] == 1                     # t = 43, away, 3 cells
    assert counts[..., HOME].sum() == counts[..., RETURN].sum() == 1 and counts[..., EXPLORE].sum() == 2
    # stays: day 2's 47 all at home with one cell; day 1: at home 1 cell t 0..8 (9), away 2 cells t 10..18 (9),
    # at home 2 cells t 20..38 (19), away 3 cells t 40..42 (3) and t 44..46 (3)
    assert counts[..., STAY].sum() == 90
    assert counts[0, 1, 0, STAY] == 12 and counts[1, 1, 0, STAY] == 3 + 6    # slots 0-5 both days; 6-11
    assert counts[7, 0, 2, STAY] == 1 + 3 and counts[7, 1, 0, STAY] == 5    # t = 42 and 44..46; day 2's 42..46
    # the contribution: w × shares, w = 2 / 100
    v = action_rate_contribution(days, 0, 100)
    assert v.shape == (320,) and v.sum() == pytest.approx(0.02)
    assert v.reshape(RATE_SHAPE)[0, 1, 0, STAY] == pytest.approx(0.02 * 12 / 94)
    assert not action_rate_contribution(days[:0], 0, 100).any()
    assert action_rate_contribution(np.repeat(days, 100, 0), 0, 100).sum() == pytest.approx(1.0)   # w capped


def test_the_part_sits_at_the_end_and_the_layout_without_it_is_unchanged():
    from pategail.sdk.environment_vector import environment_layout, environment_vector
    cells, devices = _honest_devices(6)
    days, home = devices[1]
    before = environment_vector(days, home, cells, alpha=0.96, candidates=50)
    with_part = environment_vector(days, home, cells, alpha=0.96, candidates=50, action_rates=True)
    assert np.array_equal(with_part[:len(before)], before)
    assert np.array_equal(with_part[len(before):], action_rate_contribution(days, home, 100))
    layout = environment_layout(cells, 50, action_rates=True)
    assert layout.length == len(with_part) == environment_layout(cells, 50).length + 320
    parts = layout.unpack(with_part)
    assert np.array_equal(parts.action_rates, with_part[-320:])
    assert environment_layout(cells, 50).unpack(before).action_rates is None
    with pytest.raises(ValueError, match="action-rate"):
        EnvironmentLayout(len(cells), layout.n_bins, place_law=True).pack(
            before[:2 * len(cells) + 2], before[2 * len(cells) + 2:2 * len(cells) + 2 + 2 * layout.n_bins],
            before[2 * len(cells) + 2 + 2 * layout.n_bins:], action_rates=np.zeros(320))


def test_no_honest_vector_with_the_part_exceeds_its_l1_bound():
    """The part adds at most w ≤ 1 to the L1 norm: ENV_L1_BOUND + 1 bounds every honest vector with it, and
    the device's L1 clip at that bound leaves them unchanged (at the old bound it would not, for some)."""
    from pategail.sdk.accounting import laplace_vector_sensitivity
    from pategail.sdk.environment_vector import environment_vector
    from pategail.sdk.secagg.mechanisms import laplace_environment_input
    from pategail.sdk.secagg.fixedpoint import SCALE, encode

    assert env_l1_bound(False) == ENV_L1_BOUND == 9.0 and env_l1_bound(True) == 10.0
    cells, devices = _honest_devices()
    largest = 0.0
    for days, home in devices:
        v = environment_vector(days, home, cells, alpha=0.96, candidates=50, action_rates=True)
        part = v[-action_rate_length():]
        assert (part >= 0).all() and part.sum() <= 1 + 1e-12
        largest = max(largest, float(v.sum()))
        assert np.array_equal(laplace_environment_input(v, env_l1_bound(True)), v)
        up = np.concatenate([encode(v), encode(v * v)])
        assert np.abs(up).sum() / SCALE <= laplace_vector_sensitivity(env_l1_bound(True), len(v))
    assert ENV_L1_BOUND < largest <= env_l1_bound(True)     # the old bound would have clipped an honest one
    forged = laplace_environment_input(np.full(2000, 0.9), env_l1_bound(True))
    assert forged.sum() == pytest.approx(10.0, rel=1e-12)


def test_the_bundle_declares_the_part_only_when_asked(tmp_path):
    from pategail.sdk.bundle import BundleError, Environment
    cells, _ = _honest_devices(1)
    off = Environment(cells, 0.96, 50).write(tmp_path)
    assert "action_rates" not in off                                   # the manifest as before the option
    assert not Environment.read(tmp_path, off).action_rates
    on = Environment(cells, 0.96, 50, action_rates=True).write(tmp_path)
    assert on["action_rates"] is True and Environment.read(tmp_path, on).action_rates
    with pytest.raises(BundleError, match="action_rates must be true or false"):
        Environment.read(tmp_path, {**on, "action_rates": "yes"})


def test_the_part_l2_bound_by_hand_is_attained_and_no_honest_part_exceeds_it():
    """Each slot bucket holds 6 of a day's 47 decisions (the last 5), whatever the days: the part's L2 norm is at
    most w·√(7·6² + 5²)/47, reached by a device that never leaves home (each bucket's decisions in one cell)."""
    import math

    from pategail.sdk.action_rates import action_rate_l2_bound
    from pategail.sdk.environment_vector import environment_vector
    from pategail.sdk.regions import REGION_CELLS
    from pategail.server.privacy.gaussian import ENV_L2_BOUND, env_l2_bound

    bound = action_rate_l2_bound()
    assert bound == pytest.approx(math.sqrt(277) / 47, rel=1e-15) and 0.354 < bound < 0.355
    homebody = action_rate_contribution(np.zeros((150, 48), dtype=np.int64), 0, 100)
    assert np.linalg.norm(homebody) == pytest.approx(bound, rel=1e-12)           # w = 1: attained
    assert np.linalg.norm(action_rate_contribution(np.zeros((30, 48), dtype=np.int64), 0, 100)) == \
        pytest.approx(0.3 * bound, rel=1e-12)                                    # scaled by w
    cells, devices = _honest_devices()
    largest = 0.0
    for days, home in devices:
        w = min(1.0, len(days) / 100)
        assert np.linalg.norm(action_rate_contribution(days, home, 100)) <= w * bound + 1e-12
        v = environment_vector(days, home, cells, alpha=0.96, candidates=50, region_cells=REGION_CELLS,
                               action_rates=True)
        largest = max(largest, float(np.linalg.norm(v)))
    assert largest <= env_l2_bound(True)
    # the Gaussian release's bound with the part: the old parts' 12 plus the part's square, not √13
    assert env_l2_bound(False) == ENV_L2_BOUND
    assert env_l2_bound(True) == pytest.approx(math.sqrt(12 + 277 / 47 ** 2), rel=1e-15)
    assert ENV_L2_BOUND < env_l2_bound(True) < 1.006 * ENV_L2_BOUND
