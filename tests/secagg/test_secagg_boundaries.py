"""Rounds exactly at their limits: n_min survivors, exactly t share holders left, the first and last
participant ids (mask signs), no noise; one below each limit aborts."""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.secagg import SecAggAbort
from pategail.sdk.secagg.fixedpoint import SCALE, encode
from pategail.server.secagg.round import Dropouts, SecureRoundConfig, run_secure_round

M = 5


def _expected(clients, values, recorder, survivors):
    total = np.zeros(2 * M, dtype=np.int64)
    for i, c in enumerate(clients):
        if c.device_id in survivors:
            ns, nq = recorder.shares[c.device_id][-2:]
            d = np.clip(values[i], 0, 1)
            total += np.concatenate([encode(d) + ns, encode(d * d) + nq])
    return total


def _run(federation, rng, n, n_min, dropouts, noise=0.02):
    coordinator, clients, recorder = federation(n)
    ids = [c.device_id for c in clients]
    values = rng.random((n, M))
    config = SecureRoundConfig(round_id=5, n_min=n_min, sum_noise_scale=noise, sq_sum_noise_scale=noise / 2)
    result = run_secure_round(clients, values, config, rng, coordinator=coordinator,
                              dropouts=dropouts(ids) if dropouts else None)
    return clients, values, recorder, result


@pytest.mark.parametrize("stage", ["after_advertise", "after_share_keys"])
def test_exactly_n_min_survivors_release_the_exact_sum(federation, rng, stage):
    # 5 devices, threshold 3 (a strict majority), n_min 3: two drop, three remain = n_min = t holders
    clients, values, recorder, result = _run(federation, rng, 5, 3,
                                             lambda ids: Dropouts(**{stage: frozenset(ids[3:])}))
    assert result.survivors == tuple(c.device_id for c in clients[:3]) and result.n_survivors == 3
    got = np.concatenate([result.sum, result.sq_sum]) * SCALE
    np.testing.assert_array_equal(got, _expected(clients, values, recorder, set(result.survivors)))


@pytest.mark.parametrize("stage", ["after_advertise", "after_share_keys", "after_masked_input"])
def test_one_below_n_min_aborts(federation, rng, stage):
    with pytest.raises(SecAggAbort):
        _run(federation, rng, 5, 3, lambda ids: Dropouts(**{stage: frozenset(ids[2:])}))


def test_inputs_of_devices_that_drop_after_sending_count(federation, rng):
    clients, values, recorder, result = _run(
        federation, rng, 6, 3, lambda ids: Dropouts(after_masked_input=frozenset(ids[:1]),
                                                    after_consistency=frozenset(ids[5:])))
    assert result.n_survivors == 6
    np.testing.assert_array_equal(np.concatenate([result.sum, result.sq_sum]) * SCALE,
                                  _expected(clients, values, recorder, set(result.survivors)))


def test_noiseless_sum_is_the_plain_sum_of_clipped_scores(federation, rng):
    coordinator, clients, recorder = federation(3)
    values = np.array([[0.5, 1.5, -1.0, 0.25, 0.0], [0.25, 0.5, 0.5, 1.0, 0.0], [0.25, 0.0, 0.75, 1.0, 1.0]])
    result = run_secure_round(clients, values, SecureRoundConfig(round_id=1, n_min=2), rng, coordinator=coordinator)
    np.testing.assert_array_equal(result.sum, [1.0, 1.5, 1.25, 2.25, 1.0])
    np.testing.assert_array_equal(result.sq_sum, [0.375, 1.25, 0.8125, 2.0625, 1.0])
    assert result.n_survivors == 3 and result.survivors == (100, 101, 102)
    assert all(not s.any() for c in clients for s in recorder.shares[c.device_id])   # scale 0: zero noise


def test_device_aggregator_drawn_with_the_rng_and_left_out(federation):
    coordinator, clients, _ = federation(4)
    values = np.full((4, M), 0.5)
    config = SecureRoundConfig(round_id=2, n_min=3, aggregator="device")
    result = run_secure_round(clients, values, config, np.random.default_rng(11), coordinator=coordinator)
    expected = int(np.random.default_rng(11).choice([100, 101, 102, 103]))
    assert result.aggregator == expected and expected not in result.survivors
    np.testing.assert_array_equal(result.sum, np.full(M, 1.5))
